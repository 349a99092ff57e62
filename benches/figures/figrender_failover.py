"""Page of the failover figure: a worker killed, then one slowed, under load."""

import json
from pathlib import Path

from figlib import (
    commands_block, goal, load_report, ms, one, pct, read_poll, secs, table, window_hit_rate,
    window_ttft_p99, event_second, series_sum,
)

from figrender_common import *  # noqa: F401,F403 (the shared page helpers)


def kill_worker(meta):
    victim = one(meta, "victim")
    rows, notes = [], []
    for value in meta.get("kill_case", []):
        mode, path, killed = value.split("\t")
        killed = int(killed)
        report = load_report(path)
        poll = json.loads(Path(path.replace(".json", ".poll.json")).read_text())
        metrics = path.replace(".json", ".metrics.txt")
        filtered = delta_s(first_transition_after(poll, killed, lambda r: r != "routable"), killed)
        last_call = delta_s(last_call_between(poll, killed), killed)
        first = metric_value(metrics, "switchyard_upstream_attempts_total", ('kind="first"',)) or 0
        retry = metric_value(metrics, "switchyard_upstream_attempts_total", ('kind="retry"',)) or 0
        amplification = (first + retry) / first if first else None
        kill_s = event_second(report, killed)
        rows.append([
            mode.replace("_", "-"), f"{report['ok']}/{report['requests_sent']}", errors_text(report),
            secs(filtered, 2), secs(last_call, 2) if last_call is not None else "none after kill",
            f"{int(first)} / {int(retry)}", f"{amplification:.3f}x" if amplification else "-",
            ms(report["ttft"]["p99"]), ms(window_ttft_p99(report, int(kill_s), int(kill_s) + 3)),
            f"[json]({relative(path)})",
        ])
        notes.append((mode, filtered, last_call, report, poll["max_gap_ms"]))
    out = [header(
        "Failover: kill -9 a worker, and the latency path",
        meta,
        f"4 simulated workers (time scale {one(meta, 'time_scale')}: twice as fast as the default "
        f"sim, so 3 survivors carry the rate at ~60 % of their capacity), one gateway (shipped "
        f"defaults: cache_aware, health "
        f"checks every 1 s, re-checked every 250 ms after a failure, out after 3 failures), "
        f"`uniform` workload at {one(meta, 'rate')} req/s for {one(meta, 'kill_duration')} s; "
        f"`kill -9` of {victim} about 10 s in. A poller reads `GET /admin/workers` and "
        "`/metrics` every 100 ms (the resolution of the times below).",
    )]
    out += ["## Commands", "", dedup_commands(meta), "", config_blocks(meta), "",
            "## kill -9", "",
            "\"filtered after\" = first poll that shows the killed worker non-routable; \"last "
            "attempt\" = last poll in which its breaker-call counter still rose (an attempt "
            "routed to it, including the failed connects that were retried elsewhere). Retry "
            "amplification = (first + retry) / first upstream attempts over the whole run "
            "(`switchyard_upstream_attempts_total`). TTFT of non-streaming requests = full "
            "latency.", "",
            table(["requests", "ok/sent", "client-visible errors", "filtered after",
                   "last attempt to it after kill", "attempts first / retry", "retry amplification",
                   "TTFT p99 (ms)", "TTFT p99 in the 3 s after the kill (ms)", "raw"], rows), ""]
    out += ["Goals: traffic fully diverted in < 2 s; zero client-visible errors for "
            "non-streaming requests; amplification ≤ 2x.", ""]
    for mode, filtered, last_call, report, gap in notes:
        diverted = last_call if last_call is not None else 0.0
        verdict = goal(filtered is not None and max(filtered, diverted) < 2.0)
        line = (f"- {mode.replace('_', '-')}: no attempt reached the dead worker after "
                f"{secs(diverted, 2)} and it was filtered after {secs(filtered, 2)} ({verdict} "
                f"< 2 s); client-visible errors: {report['error_count'] if 'error_count' in report else sum(report['errors'].values())}")
        if mode == "non_streaming":
            line += f" (goal zero: {goal(sum(report['errors'].values()) == 0)})"
        else:
            line += (" (streams already running on the killed worker cannot be retried once "
                     "bytes reached the client; the spec only promises zero for non-streaming)")
        notes_line = line + f". Largest poll gap {gap} ms."
        out.append(notes_line)
    slow = one(meta, "slow_case")
    if slow:
        path, slow_ms, ok_ms = slow.split("\t")
        slow_ms, ok_ms = int(slow_ms), int(ok_ms)
        report = load_report(path)
        poll = json.loads(Path(path.replace(".json", ".poll.json")).read_text())
        marked_at = first_transition_after(poll, slow_ms, lambda r: r != "routable")
        marked = delta_s(marked_at, slow_ms)
        marked_state = next((r for t, r in poll["transitions"] if t == marked_at), None)
        back = delta_s(first_transition_after(poll, ok_ms, lambda r: r == "routable"), ok_ms)
        marks_while_slow = sum(1 for t, r in poll["transitions"] if slow_ms <= t < ok_ms and r != "routable")
        slow_s, ok_s = event_second(report, slow_ms), event_second(report, ok_ms)
        transitions = ", ".join(
            f"{(t - slow_ms) / 1000:+.1f} s {r}" for t, r in poll["transitions"] if t >= slow_ms
        )
        out += ["## Latency path: slow x20, then ok", "",
                f"Same fleet, `uniform` at {one(meta, 'slow_rate')} req/s (streaming) for "
                f"{one(meta, 'slow_duration')} s; {victim} set to `slow` x20 about 10 s in and "
                "back to `ok` 20 s later. Marker thresholds scaled to the sims (config above).", "",
                table(["measure", "value"], [
                    ["slowed → filtered (first non-routable poll)", f"{secs(marked, 2)} ({marked_state})"],
                    ["times marked while slow", str(marks_while_slow)],
                    ["ok → routable again", secs(back, 2)],
                    [f"{victim} share of served requests before / while slow / after ok",
                     " / ".join(pct(v, 0) for v in (
                         victim_share(report, victim, 0, int(slow_s)),
                         victim_share(report, victim, int(slow_s), int(ok_s)),
                         victim_share(report, victim, int(ok_s), 10**6)))],
                    ["client errors", errors_text(report)],
                    ["TTFT p99 overall (ms)", ms(report["ttft"]["p99"])],
                    [f"{victim} transitions (relative to slow)", transitions or "none"],
                ]), ""]
    out += ["## Reading", "", kill_reading(notes, meta)]
    if slow:
        out.append(
            f"- Latency path: the collector (1 s scrapes of the sim's vLLM histograms) marked the "
            f"slowed worker after {secs(marked, 2)} and the prefilter stopped routing to it."
            + (f" It was marked {marks_while_slow} times while slow: the mark was cleared while "
               "the worker was still slow and re-set as soon as real traffic returned. Likely "
               "cause: while filtered the worker sees only the prober's 1-token completions of "
               "a 4-byte prompt, which a worker slowed x20 still answers in milliseconds "
               "(nothing to prefill, no decode), so both the probes and the scraped windows look "
               "healthy. A probe shaped like real traffic (a longer prompt, several output "
               "tokens) would avoid the flap." if marks_while_slow > 1 else "")
            + f" After `ok` it was routable again in {secs(back, 2)}."
        )
    out.append("")
    return "\n".join(out)


def kill_reading(notes, meta):
    lines = []
    for mode, filtered, last_call, report, _ in notes:
        if mode == "non_streaming":
            lines.append(
                f"- Non-streaming: the dead worker's connects fail at once (connection refused), "
                f"the gateway retries them on another worker for free (refused connects cost no "
                f"retry budget), so clients saw {sum(report['errors'].values())} errors while the "
                f"health checker took {secs(filtered, 2)} (1 s interval + 3 failures at 250 ms) to "
                "filter it."
            )
        else:
            lines.append(
                f"- Streaming: {sum(report['errors'].values())} client-visible errors, the streams "
                "that were mid-answer on the killed worker; new requests behave as above."
            )
    return "\n".join(lines)


# ---------------------------------------------------------------- slow_worker_migration
