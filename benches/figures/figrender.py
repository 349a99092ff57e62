"""Markdown pages for the figures: one renderer per script, fed the facts it recorded."""

import json
from pathlib import Path

from figlib import (
    commands_block, goal, load_report, ms, one, pct, read_poll, secs, table, window_hit_rate,
    window_ttft_p99, event_second, series_sum,
)

FIG_DIR = Path(__file__).parent


def header(title, meta, intro):
    return "\n".join([
        f"# {title}",
        "",
        intro,
        "",
        f"Measured {one(meta, 'started')} to {one(meta, 'finished')} on {one(meta, 'host')}; "
        f"{one(meta, 'git')}. Simulated workers, gateway and load tool share the "
        "machine (and with other jobs: load average "
        f"{one(meta, 'loadavg_start', '?')} at the start, {one(meta, 'loadavg_end', '?')} at the "
        "end), so absolute latencies include CPU contention; compare rows, not machines.",
        "",
    ])


def readable(line):
    """A recorded command (bash %q quoting) re-quoted the way a person would type it."""
    import shlex

    try:
        return " ".join(shlex.quote(arg) for arg in shlex.split(line))
    except ValueError:
        return line


def dedup_commands(meta):
    seen, lines = set(), []
    for line in map(readable, meta.get("command", [])):
        if line not in seen:
            seen.add(line)
            lines.append(line)
    return commands_block({"command": lines})


def relative(path):
    try:
        return str(Path(path).resolve().relative_to(FIG_DIR))
    except ValueError:
        return path


def cases(meta):
    for value in meta.get("case", []):
        label, _, path = value.partition("\t")
        yield label, load_report(path), path


def config_blocks(meta):
    blocks = []
    for value in meta.get("config", []):
        label, _, path = value.partition("\t")
        blocks.append(f"`{label}` ({relative(path)}):\n\n```toml\n{Path(path).read_text().strip()}\n```")
    return "\n\n".join(blocks)


# ---------------------------------------------------------------- routing_quality

def routing_branches(metrics_path):
    """{branch: count} of switchyard_routing_decisions_total from a saved /metrics."""
    import re

    branches = {}
    path = Path(metrics_path)
    if not path.exists():
        return branches
    for line in path.read_text().splitlines():
        if line.startswith("switchyard_routing_decisions_total{"):
            match = re.search(r'branch="([^"]+)"', line)
            count = float(line.rpartition(" ")[2])
            if match and count > 0:
                branches[match.group(1)] = branches.get(match.group(1), 0) + int(count)
    return branches


def busiest_share(report):
    counts = [w["requests"] for w in report["workers"].values()]
    return max(counts) / sum(counts) if counts and sum(counts) else 0.0


def routing_quality(meta):
    rows, by_label, branch_rows = [], {}, []
    for label, report, path in cases(meta):
        by_label[label] = report
        branches = routing_branches(path.replace(".json", ".metrics.txt"))
        by_label[label + "#branches"] = branches
        branch_rows.append([label, ", ".join(f"{b} {n}" for b, n in sorted(branches.items())) or "-"])
        cv = report["worker_load_cv"]
        workers = ", ".join(f"{name} {load['requests']}" for name, load in sorted(report["workers"].items()))
        rows.append([
            label, f"{report['ok']}/{report['requests_sent']}", pct(report["physical_hit_rate"]),
            f"{cv:.3f}", f"{cv * cv:.4f}", ms(report["ttft"]["p50"]), ms(report["ttft"]["p99"]),
            workers, f"[json]({relative(path)})",
        ])
    out = [header(
        "Routing quality: hit rate, load spread, TTFT per policy",
        meta,
        f"4 simulated workers (default sim: 8 running, 4096 KV blocks, 40 ms prefill per 1k "
        f"uncached tokens, 5 ms per output token, time scale 1), one gateway, open-loop load at "
        f"{one(meta, 'rate')} req/s for {one(meta, 'duration')} s per case, seed "
        f"{one(meta, 'seed')}, streaming, 32 output tokens. Each case starts cold (fresh sims, "
        f"fresh gateway). Gateway config = shipped defaults except the policy, "
        f"`routing.hotspot.enabled` and `routing.hotspot.slice_ms = {one(meta, 'slice_ms')}` "
        "(spreading evens load out over many time slices; the 30 s default would rotate a hot "
        "key at most once in a 30 s run).",
    )]
    out += ["## Commands", "", dedup_commands(meta), "",
            "## Results", "",
            "Hit rate = Σ cached_tokens / Σ prompt_tokens over successful requests (the sims' "
            "own usage: physical hits). CV = population stddev / mean of per-worker request "
            "counts; variance is reported as CV².", "",
            table(["case", "ok/sent", "hit rate", "load CV", "CV²", "TTFT p50 (ms)", "TTFT p99 (ms)",
                   "requests per worker", "raw"], rows), ""]
    out += ["Routing decisions by branch (`switchyard_routing_decisions_total` at the end of "
            "each case):", "", table(["case", "branches"], branch_rows), ""]
    out += ["Gateway configs (everything else is the shipped default):", "", config_blocks(meta), ""]
    out += ["## Goals (issue 4)", "",
            "The hit-rate goal is judged on `multiturn`, the workload built for it; `hotkey` "
            "is shown for completeness (see the reading).", ""]
    for workload, variant in (("multiturn", ""), ("hotkey", "")):
        rr = by_label.get(f"{workload}/round_robin")
        ca = by_label.get(f"{workload}/cache_aware{variant}")
        if rr and ca:
            gain = (ca["physical_hit_rate"] - rr["physical_hit_rate"]) * 100
            ca_cv = ca["worker_load_cv"]
            out.append(
                f"- {workload}: cache_aware{variant} hit rate {pct(ca['physical_hit_rate'])} vs round_robin "
                f"{pct(rr['physical_hit_rate'])} = {gain:+.1f} points (goal ≥ +15: {goal(gain >= 15)}); "
                f"load CV {ca_cv:.3f} (goal ≤ 0.15: {goal(ca_cv <= 0.15)}); both at once: "
                f"{goal(gain >= 15 and ca_cv <= 0.15)}."
            )
    for suffix, what in (("", "shipped bounded load (load_factor 1.25)"),
                         ("/load_factor=100.0", "bounded load off (load_factor 100)")):
        on = by_label.get(f"hotkey/consistent_hash/hotspot=true{suffix}")
        off = by_label.get(f"hotkey/consistent_hash/hotspot=false{suffix}")
        if on and off:
            v_on, v_off = on["worker_load_cv"] ** 2, off["worker_load_cv"] ** 2
            cut = 1 - v_on / v_off if v_off > 0 else 0.0
            out.append(
                f"- hotkey, consistent_hash, {what}: variance (CV²) {v_off:.4f} with spreading "
                f"off → {v_on:.4f} with it on = {cut * 100:.0f} % less (goal ≥ 60 %: "
                f"{goal(cut >= 0.6)}); hit rate {pct(off['physical_hit_rate'])} → "
                f"{pct(on['physical_hit_rate'])}."
            )
    out += ["", "## Reading", "", routing_reading(by_label), ""]
    return "\n".join(out)


def routing_reading(by_label):
    notes = []
    ca = by_label.get("multiturn/cache_aware")
    rr = by_label.get("multiturn/round_robin")
    if ca and rr:
        branches = by_label.get("multiturn/cache_aware#branches", {})
        total = sum(branches.values()) or 1
        shares = ", ".join(f"{b} {n * 100 / total:.0f} %" for b, n in sorted(branches.items()))
        text = (
            f"- **multiturn, cache_aware**: hit rate {pct(ca['physical_hit_rate'])} vs "
            f"{pct(rr['physical_hit_rate'])} for round_robin, load CV {ca['worker_load_cv']:.3f} "
            f"(busiest worker {pct(busiest_share(ca), 0)} of the requests), TTFT p99 "
            f"{ms(ca['ttft']['p99'])} ms vs {ms(rr['ttft']['p99'])} ms. Decisions: {shares}."
        )
        if ca["worker_load_cv"] > 0.15:
            text += (
                " The load is concentrated: nearly every decision was a prefix hit, so new "
                "sessions followed the worker already holding their shared system prompt (the "
                "workload has only 4), and the load guard (in-flight spread above "
                "`balance_abs_threshold` = 32) never fires at this rate."
            )
        else:
            text += (
                " New conversations are spread by placement (`hash_placement`, and `load_move` "
                "when the ring owner is above its load bound) and later turns stay with the "
                "worker holding them (`prefix_hit`), which buys both the hit rate and the spread. "
                "Round robin still hits the shared system prompts on every worker, which is how "
                "it reaches the hit rate it has."
            )
        notes.append(text)
    hot_rr = by_label.get("hotkey/round_robin")
    if hot_rr:
        notes.append(
            f"- **hotkey**: every policy lands near {pct(hot_rr['physical_hit_rate'], 0)}. The 3 hot "
            "prefixes fit in every worker's KV cache, so round_robin already hits them "
            "everywhere; the other ~20 % of requests are unique prompts nobody can hit. The "
            "workload separates policies by load spread, not by hit rate."
        )
    on = by_label.get("hotkey/consistent_hash/hotspot=true")
    off = by_label.get("hotkey/consistent_hash/hotspot=false")
    off_plain = by_label.get("hotkey/consistent_hash/hotspot=false/load_factor=100.0")
    if on and off:
        b_on = by_label.get("hotkey/consistent_hash/hotspot=true#branches", {})
        b_off = by_label.get("hotkey/consistent_hash/hotspot=false#branches", {})
        notes.append(
            f"- **hotspot spreading**: with it off, consistent_hash's bounded load (1.25 x mean "
            f"in flight) already moves hot-key traffic off the owner ({b_off.get('load_skip', 0)} "
            f"`load_skip` decisions); with it on, {b_on.get('hot_spread', 0)} decisions rotated a "
            "hot key over 3 workers per time slice. Plain consistent hashing (bounded load off, as "
            "in seed 001's setup, which reported -63 %) has far more variance to remove "
            f"(CV² {(off_plain or {}).get('worker_load_cv', 0) ** 2:.4f} vs "
            f"{off['worker_load_cv'] ** 2:.4f}). Which workers the 3 hot keys land on in each "
            "slice is a draw, so one 30 s run (15 slices) over 4 workers gives a noisy variance "
            "estimate; read the percentages as indicative."
        )
    return "\n".join(notes)


# ---------------------------------------------------------------- kill_worker

def metric_value(metrics_path, name, must_contain=()):
    path = Path(metrics_path)
    if not path.exists():
        return None
    total = None
    for line in path.read_text().splitlines():
        key, _, value = line.rpartition(" ")
        if key.split("{")[0] == name and all(s in key for s in must_contain):
            total = (total or 0.0) + float(value)
    return total


def first_transition_after(poll, since_ms, predicate):
    for t, routability in poll["transitions"]:
        if t >= since_ms and predicate(routability):
            return t
    return None


def last_call_between(poll, start_ms, end_ms=None):
    times = [t for t in poll["calls_increased_ms"] if t >= start_ms and (end_ms is None or t < end_ms)]
    return max(times) if times else None


def delta_s(t, since):
    return None if t is None else (t - since) / 1000.0


def victim_share(report, worker, start, end):
    served = victim = 0
    for second in report.get("timeline") or []:
        if start <= second["second"] < end:
            served += sum(second["workers"].values())
            victim += second["workers"].get(worker, 0)
    return victim / served if served else None


def errors_text(report):
    return ", ".join(f"{k}: {v}" for k, v in sorted(report["errors"].items())) or "none"


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

def labelled_counts(metrics_path, name, label):
    """{label value: count} of one counter family, zero series left out."""
    import re

    counts = {}
    path = Path(metrics_path)
    if not path.exists():
        return counts
    for line in path.read_text().splitlines():
        if line.startswith(name + "{"):
            match = re.search(label + r'="([^"]+)"', line)
            value = float(line.rpartition(" ")[2])
            if match and value > 0:
                counts[match.group(1)] = counts.get(match.group(1), 0) + int(value)
    return counts


def slow_worker_migration(meta):
    rows, facts = [], []
    for value in meta.get("case", []):
        label, path, victim, slow_ms = value.split("\t")
        report = load_report(path)
        metrics = path.replace(".json", ".metrics.txt")
        slow_s = int(event_second(report, int(slow_ms)))
        hits = labelled_counts(metrics, "switchyard_prefix_cache_hits_total", "kind")
        branches = labelled_counts(metrics, "switchyard_routing_decisions_total", "branch")
        filtered = labelled_counts(metrics, "switchyard_prefilter_workers_filtered_total", "reason")
        transitions = labelled_counts(metrics, "switchyard_worker_transitions_total", "reason")
        burst = window_ttft_p99(report, slow_s, slow_s + 5)
        settled = window_ttft_p99(report, slow_s + 5)
        rows.append([
            label, victim, f"{report['ok']}/{report['requests_sent']}", errors_text(report),
            pct(window_hit_rate(report, 0, slow_s)), pct(window_hit_rate(report, slow_s)),
            ms(report["ttft"]["p99"]), ms(window_ttft_p99(report, 0, slow_s)), ms(burst), ms(settled),
            pct(victim_share(report, victim, slow_s + 5, 10**6), 0),
            " / ".join(str(hits.get(k, 0)) for k in ("logical", "physical", "virtual")),
            ", ".join(f"{k} {v}" for k, v in sorted(branches.items()) if k != "prefix_hit"),
            ", ".join(f"{k} {v}" for k, v in sorted(filtered.items())) or "none",
            ", ".join(f"{k} {v}" for k, v in sorted(transitions.items())) or "none",
            f"[json]({relative(path)})",
        ])
        facts.append(dict(label=label, report=report, victim=victim, burst=burst, settled=settled,
                          share_settled=victim_share(report, victim, slow_s + 5, 10**6),
                          hit_after=window_hit_rate(report, slow_s), branches=branches,
                          filtered=filtered, transitions=transitions))
    out = [header(
        "Slow worker under cache_aware: migration vs no latency filtering",
        meta,
        f"4 simulated workers (time scale {one(meta, 'time_scale')}), one gateway on cache_aware, "
        f"`multiturn` at {one(meta, 'rate')} req/s for {one(meta, 'duration')} s (streaming); "
        f"about {one(meta, 'slow_at')} s in, one sim (the same in both runs, holding its share of "
        "the sessions) is set to `slow` x20 until the end. The gateway has no "
        "switch for affinity migration alone, so the comparison is the latency marker on "
        "(filter the slow worker, migrate its affinities: the default) against "
        "`health.latency_aware.active = false` (no latency marks). Marker thresholds are scaled "
        "to the sims in both configs; everything else (load guard, circuit breaker) is default "
        "and stays active in both runs.",
    )]
    out += ["## Commands", "", dedup_commands(meta), "", config_blocks(meta), "", "## Results", "",
            "Windows are by send second; \"after\" = from the slowdown to the end. A window's "
            "TTFT p99 is its largest per-second p99 (an upper bound of the window's p99): "
            "\"burst\" = the first 5 s after the slowdown, \"settled\" = the rest. Cache "
            "counters (`switchyard_prefix_cache_hits_total`): logical = prefix known on some "
            "worker, physical = landed on the holder, virtual = known but the holder was "
            "filtered.", "",
            table(["case", "slowed", "ok/sent", "errors", "hit rate before", "hit rate after",
                   "TTFT p99 all (ms)", "p99 before (ms)", "p99 burst (ms)", "p99 settled (ms)",
                   "slowed sim's share, settled", "logical / physical / virtual",
                   "non-hit routing branches", "prefilter removals", "worker transitions",
                   "raw"], rows), ""]
    if len(facts) == 2:
        on, off = facts
        unmarks = on["transitions"].get("recovered", 0)
        flap = (f" It was un-marked {unmarks} time(s) while still slow and re-marked when real "
                "traffic returned (the prober's 1-token probes look healthy on a slowed worker; "
                "see kill_worker.md)." if unmarks else "")
        movers = []
        if off["branches"].get("imbalanced", 0):
            movers.append(f"cache_aware's load guard ({off['branches']['imbalanced']} `imbalanced` "
                          "decisions, which ignore the cache)")
        if off["transitions"].get("circuit_open", 0):
            movers.append("the circuit breaker's slow-call rule (slow = first byte after 3 s)")
        moved = ("What moved traffic off it instead: " + "; ".join(movers) + "."
                 if movers else
                 "Nothing filtered it (no mark, no breaker transition, no `imbalanced` decision); "
                 "its share fell only through the policy's load-aware placement of new "
                 f"conversations (`load_move` {off['branches'].get('load_move', 0)}), and the "
                 "requests it still got waited.")
        out += ["## Reading", "",
                f"- Marker on: {on['victim']} was marked "
                f"({', '.join(f'{k} {v}' for k, v in sorted(on['transitions'].items()))}) and "
                f"filtered; {on['branches'].get('migrated', 0)} affinities migrated. Requests "
                f"already queued on it when it slowed make the burst p99 ({ms(on['burst'])} ms); "
                f"afterwards TTFT p99 is {ms(on['settled'])} ms and the hit rate after the "
                f"slowdown {pct(on['hit_after'])}: migrated sessions re-prefill once on their "
                "new worker, then hit again (seed 000's cache cost, paid once)." + flap,
                f"- Marker off: the slow worker stays a candidate. {moved} Settled TTFT p99 "
                f"{ms(off['settled'])} ms, its share of served requests {pct(off['share_settled'], 0)}, "
                f"hit rate after the slowdown {pct(off['hit_after'])}"
                + (": staying put keeps the cache hits and pays in latency."
                   if (off["hit_after"] or 0) > (on["hit_after"] or 0) else
                   f", no better than with migration ({pct(on['hit_after'])}): here filtering "
                   "cost no hit rate and saved the latency."),
                ""]
    return "\n".join(out)


# ---------------------------------------------------------------- multi_replica

def multi_replica(meta):
    rows, single, verdicts, branch_trend = [], {}, [], []
    for value in meta.get("case", []):
        variant, replicas, path = value.split("\t")
        replicas = int(replicas)
        report = load_report(path)
        hit = report["physical_hit_rate"]
        if replicas == 1:
            single["base"] = hit
        base = single.get("base")
        relative_hit = hit / base if base else None
        per_target = ", ".join(str(t["attempts"]) for t in report["targets"].values())
        branches, applied = {}, 0
        for replica in range(replicas):
            metrics = path.replace(".json", f".gateway-{replica}.metrics.txt")
            applied += int(metric_value(metrics, "switchyard_routing_affinity_events_applied_total") or 0)
            for branch, count in labelled_counts(metrics, "switchyard_routing_decisions_total", "branch").items():
                branches[branch] = branches.get(branch, 0) + count
        branch_trend.append((variant, replicas, branches, relative_hit, applied))
        rows.append([
            variant, replicas, f"{report['ok']}/{report['requests_sent']}", per_target, pct(hit),
            pct(relative_hit), f"{report['worker_load_cv']:.3f}", ms(report["ttft"]["p50"]),
            ms(report["ttft"]["p99"]),
            ", ".join(f"{b} {n}" for b, n in sorted(branches.items())) or "-", applied,
            f"[json]({relative(path)})",
        ])
        if replicas > 1 and relative_hit is not None:
            verdicts.append(
                f"- {variant} replicas, {replicas} of them: {pct(relative_hit)} of the single-replica "
                f"hit rate (goal ≥ 95 %: {goal(relative_hit >= 0.95)})."
            )
    out = [header(
        "Several gateway replicas: cache_aware hit rate",
        meta,
        f"4 simulated workers (defaults), 1, 2 or 3 gateway replicas (separate processes, same "
        f"config file, same workers), `multiturn` at "
        f"{one(meta, 'rate')} req/s for {one(meta, 'duration')} s, each request sent to a "
        f"replica drawn uniformly at random (seeded: repeated `--target`). `independent`: each "
        "replica is its own single-node ledger, nothing shared. `cluster`: the replicas form "
        "one Raft group (node 1 bootstraps, the others `--join` it), so affinity events "
        "(load moves, migrations) replicate between them. Every case starts cold (fresh sims "
        "and gateways).",
    )]
    out += ["## Commands", "", dedup_commands(meta), "", config_blocks(meta), "", "## Results", "",
            table(["replicas run as", "replicas", "ok/sent", "requests per replica", "hit rate",
                   "vs 1 replica", "load CV", "TTFT p50 (ms)", "TTFT p99 (ms)",
                   "routing branches (all replicas)", "affinity events applied (all replicas)",
                   "raw"], rows), "",
            "## Goal", ""] + verdicts
    out += ["", "## Reading", ""]
    by_case = {(mode, n): (branches, rel, ev) for mode, n, branches, rel, ev in branch_trend}
    one_replica = by_case.get(("independent", 1))
    most = max((n for mode, n in by_case if mode == "independent"), default=None)
    if one_replica and most and most > 1:
        b1 = one_replica[0]
        bn = by_case[("independent", most)][0]
        out.append(
            f"- Independent replicas: from 1 to {most}, prefix hits fell from "
            f"{b1.get('prefix_hit', 0)} to {bn.get('prefix_hit', 0)} decisions and placements "
            f"rose (`hash_placement` {b1.get('hash_placement', 0)} → "
            f"{bn.get('hash_placement', 0)}, `load_move` {b1.get('load_move', 0)} → "
            f"{bn.get('load_move', 0)}): each replica sees only its share of a session's turns. "
            "A turn a replica has not seen goes to its conversation's ring owner (named by "
            "session + opening, the same on every replica); what independent replicas cannot "
            "share is a first turn's load move, which only the replica that made it follows."
        )
    for (mode, n), (branches, rel, events) in sorted(by_case.items()):
        if mode != "cluster":
            continue
        ind = by_case.get(("independent", n))
        out.append(
            f"- One Raft cluster of {n}: affinity events replicate ({events} applied across the "
            f"replicas; `placement_override` decisions, i.e. following a recorded move, "
            f"{branches.get('placement_override', 0)} vs "
            f"{ind[0].get('placement_override', 0) if ind else '-'} independent); the hit "
            f"rate is {pct(rel)} of one replica's (independent: {pct(ind[1]) if ind else '-'}): "
            "the replicated first-turn load moves are what independent replicas lack."
        )
    out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------- recovery_storm

def settled_above(report, rate, start, end):
    """First second in [start, end) from which every second with attempts succeeded at >= rate."""
    settled = None
    for second in report.get("timeline") or []:
        if not start <= second["second"] < end or second["success_rate"] is None:
            continue
        if second["success_rate"] < rate:
            settled = None
        elif settled is None:
            settled = second["second"]
    return settled


def gateway_rate_peak(poll, since_ms, until_ms):
    """Largest admitted/s over 1 s spans of the gateway's admitted counter in [since, until)."""
    samples = [(t, total) for t, total, _ in poll["admitted"] if since_ms <= t < until_ms]
    best, j = None, 0
    for i, (t, total) in enumerate(samples):
        j = max(j, i)
        while j < len(samples) and samples[j][0] - t < 1000:
            j += 1
        if j < len(samples):
            rate = (samples[j][1] - total) * 1000.0 / (samples[j][0] - t)
            best = rate if best is None else max(best, rate)
    return best


def state_name(key):
    import re

    match = re.search(r'state="([^"]+)"', key or "")
    return match.group(1) if match else "?"


def binned(report, width, end):
    bins = {}
    for second in report.get("timeline") or []:
        b = second["second"] // width
        if second["second"] >= end:
            continue
        agg = bins.setdefault(b, {"sent": 0, "ok": 0, "admitted": 0, "retries": 0})
        for key in agg:
            agg[key] += second[key]
    return bins


def recovery_storm(meta):
    storms, rows = [], []
    duration = int(one(meta, "duration"))
    for value in meta.get("storm", []):
        label, path, added_ms, name = value.split("\t")
        added_ms = int(added_ms)
        report = load_report(path)
        metrics = path.replace(".json", ".metrics.txt")
        poll = json.loads(Path(path.replace(".json", ".poll.json")).read_text())
        add_s = event_second(report, added_ms)
        start = int(add_s)
        settled = settled_above(report, 0.99, start, duration)
        timeline = report["timeline"]
        client_peak = max((s["admitted"] for s in timeline if start <= s["second"] < duration), default=None)
        before = [s["admitted"] for s in timeline if 5 <= s["second"] < start]
        blackout = sum(1 for s in timeline if 3 <= s["second"] < duration and s["sent"] and not s["admitted"])
        end_ms = report["started_unix_ms"] + duration * 1000
        gateway_peak = gateway_rate_peak(poll, added_ms, end_ms)
        states = ", ".join(f"{(t - added_ms) / 1000:+.0f} s {state_name(k)}" for t, k in poll["gateway_states"])
        admitted_by_class = labelled_counts(metrics, "switchyard_admission_admitted_total", "class")
        levels = labelled_counts(metrics, "switchyard_degradation_transitions_total", "to")
        groups = "; ".join(
            f"{g}: {b['ok']}/{b['requests']} ok, {b['attempts']} attempts"
            for g, b in sorted(report["client_groups"].items()))
        ra = report.get("retry_after") or {}
        rows.append([
            label, f"{report['requests_sent']} / {report['total_attempts']}",
            f"{report['client_retry_amplification']:.2f}x", pct(report["eventual_success_rate"]),
            f"{settled - add_s:.0f} s" if settled is not None else "not within the run",
            f"{client_peak}/s" if client_peak is not None else "-",
            f"{gateway_peak:.0f}/s" if gateway_peak is not None else "-",
            f"{sum(before) / len(before):.1f}/s" if before else "-", str(blackout),
            ", ".join(f"{c} {n}" for c, n in sorted(admitted_by_class.items())) or "-",
            ", ".join(f"→{lvl} x{n}" for lvl, n in sorted(levels.items())) or "none",
            f"{ra.get('p50')} / {ra.get('p99')}", groups, f"[json]({relative(path)})",
        ])
        storms.append(dict(name=name, label=label, report=report, add_s=add_s, settled=settled,
                           states=states, client_peak=client_peak, gateway_peak=gateway_peak,
                           blackout=blackout, admitted_by_class=admitted_by_class, levels=levels,
                           final_level=metric_value(metrics, "switchyard_degradation_level"),
                           slots=metric_value(metrics, "switchyard_admission_dispatch_slots_capacity")))
    out = [header(
        "Recovery storm: ramp and jitter on vs off; P0 under overload",
        meta,
        f"Fleet: 2 slow sims (`{one(meta, 'slow_sims')}`: ~10 req/s together) behind one gateway "
        f"with `admission.max_concurrent = {one(meta, 'max_concurrent')}` and least_load routing. "
        f"Load: `uniform` at {one(meta, 'rate')} req/s (about 3x what the fleet serves) for "
        f"{one(meta, 'duration')} s, no tenant (every request is the caller `anonymous`, P1); "
        "each request belongs to a client group drawn 50/50: `honor` waits `Retry-After` and "
        "sends `x-switchyard-retry-count`, `fixed1s` retries every second ignoring it; at most "
        "5 retries; every attempt carries the request's `x-request-id`; honouring clients wait "
        f"at most 60 s whatever they are told. About {one(meta, 'add_at')} s in, 4 normal sims "
        "are added with `POST /admin/workers`. All runs hold each ramp level "
        f"{int(one(meta, 'ramp_hold_ms')) // 1000} s (shipped: 30 s) to fit the time budget. "
        "The first run is the shipped behaviour; the next two switch the degradation "
        "controller off so that only the ramp and the jitter differ between them.",
    )]
    out += ["## Commands", "", dedup_commands(meta), "", config_blocks(meta), "",
            "## Storm and recovery", "",
            "Success rate is per second of sending (attempts sent in that second that "
            "succeeded); \"back above 99 %\" = from capacity added to the first second after "
            "which every second stays ≥ 99 % until arrivals stop (1 s resolution; the drain "
            "after it holds only late retries, and those still open at its deadline are "
            "aborted). Admitted = attempts not answered "
            "429/503 (client side), or the rise of `switchyard_admission_admitted_total` over 1 s "
            "(gateway side, polled every 100 ms). \"Seconds with nothing admitted\" counts "
            "seconds from 3 s on in which attempts were sent and none was admitted.", "",
            table(["run", "requests / attempts", "client retry amplification", "eventual success",
                   "added → success > 99 %", "peak admitted after add (client)",
                   "peak admitted after add (gateway)", "admitted before add (mean)",
                   "seconds with nothing admitted", "admitted by class (gateway)",
                   "degradation level changes", "Retry-After p50 / p99 (s)", "by client group",
                   "raw"], rows), ""]
    if storms:
        width = 5
        bins = [binned(st["report"], width, duration + 15) for st in storms]
        keys = sorted(set().union(*[b.keys() for b in bins]))
        head = ["seconds"] + [f"{st['label']}: sent / admitted / ok" for st in storms]
        trows = []
        for k in keys:
            row = [f"{k * width}-{k * width + width - 1}"]
            for b in bins:
                agg = b.get(k)
                row.append("-" if not agg else f"{agg['sent']} / {agg['admitted']} / {agg['ok']}")
            trows.append(row)
        out += ["Timeline in 5 s bins (attempts by send time; capacity added at "
                + ", ".join(f"{st['add_s']:.1f} s" for st in storms) + "):", "",
                table(head, trows), "",
                "Gateway admission state (from `switchyard_admission_gateway_state`, relative to "
                "the moment capacity was added):", ""]
        out += [f"- {st['label']}: {st['states']}" for st in storms]
        out.append("")
    prio_rows, prio = [], {}
    for value in meta.get("priorities", []):
        label, path = value.split("\t")
        report = load_report(path)
        metrics = path.replace(".json", ".metrics.txt")
        prio[label] = (report, labelled_counts(metrics, "switchyard_admission_refusals_total", "code"),
                       labelled_counts(metrics, "switchyard_admission_admitted_total", "class"))
        for cls, b in sorted(report["priority_classes"].items()):
            prio_rows.append([label, cls, b["requests"], b["ok"], pct(b["success_rate"]),
                              ", ".join(f"{k}: {v}" for k, v in sorted(b["errors"].items())) or "none",
                              ms(b["ttft"]["p50"]), ms(b["ttft"]["p99"])])
    if prio:
        out += ["## P0 under a 3x overload", "",
                f"Same slow fleet (no capacity added), shipped defaults otherwise, one tenant "
                f"allowed P0 (`core = false`, then `core = true`), `uniform` at "
                f"{one(meta, 'p0_rate')} req/s for {one(meta, 'p0_duration')} s with "
                "`--priority-mix P0=0.2,P1=0.5,P2=0.3`, no client retries.", "",
                table(["tenant", "class asked", "requests", "ok", "success", "errors",
                       "TTFT p50 (ms)", "TTFT p99 (ms)"], prio_rows), ""]
        for label, (report, refusals, admitted) in prio.items():
            p0 = report["priority_classes"].get("P0", {})
            out.append(
                f"- {label}: P0 success {pct(p0.get('success_rate'))} (goal ≥ 99 %: "
                f"{goal((p0.get('success_rate') or 0) >= 0.99)}); admitted by class at the "
                f"gateway: {', '.join(f'{c} {n}' for c, n in sorted(admitted.items())) or 'none'}; "
                f"refusals: {', '.join(f'{k} {v}' for k, v in sorted(refusals.items())) or 'none'}."
            )
        out.append("")
    out += ["## Reading", "", storm_reading(storms, prio), ""]
    return "\n".join(out)


def storm_reading(storms, prio):
    by = {st["name"]: st for st in storms}
    lines = []

    def settled(st):
        return f"{st['settled'] - st['add_s']:.0f} s" if st["settled"] is not None else "not within the run"

    def group_fail(st, name):
        g = st["report"]["client_groups"].get(name, {})
        return g.get("requests", 0) - g.get("ok", 0)

    on, off, dflt = by.get("ramp_on"), by.get("ramp_off"), by.get("defaults")
    if on and off:
        lines.append(
            f"- Ramp + jitter (degradation off): success back above 99 % {settled(on)} after "
            f"capacity was added, peak admitted {on['client_peak']}/s (client) / "
            f"{on['gateway_peak']:.0f}/s (gateway); without them {settled(off)}, peak "
            f"{off['client_peak']}/s / {off['gateway_peak']:.0f}/s. The ramp bounds how fast the "
            "retry wave reaches the recovered fleet, as seed 004 asks, and here pays for it in "
            "recovery time: the new fleet could have taken everything at once. Eventual success "
            f"{pct(on['report']['eventual_success_rate'])} vs {pct(off['report']['eventual_success_rate'])}: "
            f"{group_fail(on, 'fixed1s')} vs {group_fail(off, 'fixed1s')} `fixed1s` requests ran "
            "out of their 5 retries (ignoring Retry-After, they spend them within 5 s)."
        )
    if dflt:
        demoted = dflt["admitted_by_class"]
        lines.append(
            "- Shipped defaults (degradation on): level changes "
            + (", ".join(f"→{lvl} x{n}" for lvl, n in sorted(dflt["levels"].items())) or "none")
            + " (overload alone calls for `overload_level`, 1 by default: level 2 would demote "
            "non-core callers into P2, which is paused while overloaded); admitted by class: "
            f"{', '.join(f'{c} {n}' for c, n in sorted(demoted.items()))}; seconds with nothing "
            f"admitted: {dflt['blackout']} (the two runs without degradation: "
            f"{', '.join(str(st['blackout']) for st in storms if st['name'] != 'defaults')}). Success "
            f"back above 99 % {settled(dflt)} after capacity was added."
            + (f" The run ended at degradation level {dflt['final_level']:.0f}: it steps down "
               "only every `recovery_step_secs` = 300 s, so the level outlives the overload"
               + (", and with it the level's cut of admission to `concurrency_ratio` (0.8) of "
                  "`max_concurrent` on top of the recovery ramp"
                  if (dflt.get("slots") or 0) < max((st["slots"] or 0) for st in storms) else
                  "; called for by the overload detector alone, it keeps its warmup effects but "
                  "leaves admission's concurrency to the recovery ramp")
               + (f" (dispatch slots at the end: {dflt['slots']:.0f})" if dflt.get("slots") else "")
               + "."
               if dflt["final_level"] else "")
        )
    ras = [(st["label"], st["report"].get("retry_after") or {}) for st in storms]
    lines.append(
        "- Retry-After received: "
        + "; ".join(f"{label}: p50 {ra.get('p50')} s, p99 {ra.get('p99')} s" for label, ra in ras)
        + ". The backoff exponent is the client's own retry count (`x-switchyard-retry-count`, "
        "or how often its `x-request-id` was seen); the caller's refusals in a row add at most "
        "+2, and only for a configured tenant, so the `anonymous` clients here are no longer "
        "told to wait for each other's refusals. `fixed1s` clients resend the same request id "
        "every second, so their advice still climbs with their own attempts. The "
        "header is whole seconds, rounded up, so jitter on a small backoff is mostly rounded "
        "away (1-1.5 s is always sent as `2`)."
    )
    for label, (report, refusals, admitted) in prio.items():
        p0 = report["priority_classes"].get("P0", {})
        lines.append(
            f"- P0, tenant {label}: {pct(p0.get('success_rate'))}. Admitted by class "
            f"{', '.join(f'{c} {n}' for c, n in sorted(admitted.items())) or 'none'}"
            + (f"; {refusals.get('p2_paused', 0)} refusals were `p2_paused`. Once degradation "
               "reaches level 2, a non-core caller's requests of every class are queued as P2, "
               "which is paused while overloaded, so asking for P0 stops protecting anything; "
               "only a `core = true` tenant keeps its P0."
               if "false" in label and (p0.get("success_rate") or 0) < 0.99 and refusals.get("p2_paused")
               else ".")
        )
    return "\n".join(lines)


RENDERERS = {
    "worker_add_storm": recovery_storm,
    "multi_replica": multi_replica,
    "routing_quality": routing_quality,
    "kill_worker": kill_worker,
    "slow_worker_migration": slow_worker_migration,
}
