"""Page of the recovery-storm figure: workers added under overload, and P0 under overload."""

import json
from pathlib import Path

from figlib import (
    commands_block, goal, load_report, ms, one, pct, read_poll, secs, table, window_hit_rate,
    window_ttft_p99, event_second, series_sum,
)

from figrender_common import *  # noqa: F401,F403 (the shared page helpers)


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
