#!/usr/bin/env python3
"""Helpers of overload_goodput.sh and adaptive_limit.sh.

    overload_goodput.py poll PORT KEY OUT
        Every 500 ms: GET /admin/admission, one JSON line per sample (unix ms + the snapshot's
        state, capacity and queue fields, and each worker's routability from /admin/workers).
        Until SIGTERM; bounded to 15 minutes.
    overload_goodput.py completed PORT [PORT ...]
        Sum of vllm:request_success_total over the sims on these ports.
    overload_goodput.py render META_TSV OUT_MD
        The markdown page of overload_goodput.sh.
    overload_goodput.py render-adaptive META_TSV OUT_MD
        The markdown page of adaptive_limit.sh.
"""

import json
import signal
import statistics
import sys
import time
import urllib.request
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).parent))
from figlib import load_report, pct, read_meta, table  # noqa: E402

POLL_S = 0.5
POLL_MAX_S = 900
KEPT = (
    "state", "capacity_ratio", "dispatch_capacity", "in_flight", "in_flight_by_class",
    "queued", "p2_paused", "service_time_ms", "adaptive_limit", "adaptive_min_rtt_ms",
    "ramp_level",
)


def fetch(url, key=None, timeout=1.0):
    request = urllib.request.Request(url)
    if key:
        request.add_header("authorization", f"Bearer {key}")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read().decode()


def poll(port, key, out):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    started = time.time()
    with open(out, "a") as sink:
        while not stop and time.time() - started < POLL_MAX_S:
            try:
                snap = json.loads(fetch(f"http://127.0.0.1:{port}/admin/admission", key))
                row = {k: snap.get(k) for k in KEPT}
                row["verdict"] = snap.get("signals", {}).get("verdict")
                # Which workers the fleet filters and why: the detector's distress input.
                try:
                    workers = json.loads(fetch(f"http://127.0.0.1:{port}/admin/workers", key))
                    row["workers"] = {
                        w["name"]: [w.get("routability"), w.get("in_flight"),
                                    w.get("last_transition"), w.get("breaker")]
                        for w in workers.get("workers", [])
                    }
                except Exception:  # noqa: BLE001 - a missed sample is fine
                    pass
                row["t"] = int(time.time() * 1000)
                sink.write(json.dumps(row) + "\n")
                sink.flush()
            except Exception:  # noqa: BLE001 - a missed sample is fine
                pass
            time.sleep(POLL_S)


def completed(ports):
    total = 0.0
    for port in ports:
        for line in fetch(f"http://127.0.0.1:{port}/metrics").splitlines():
            if line.startswith("vllm:request_success_total"):
                total += float(line.rsplit(" ", 1)[1])
    return total


# ---------------------------------------------------------------- rendering

def read_poll(path):
    rows = []
    try:
        with open(path) as source:
            for line in source:
                rows.append(json.loads(line))
    except FileNotFoundError:
        pass
    return rows


def refusals(report):
    """(refused attempts, refused attempts without Retry-After)."""
    errors = report["attempt_errors"]
    refused = errors.get("429", 0) + errors.get("503", 0)
    with_header = report["retry_after"]["samples"]
    return refused, max(refused - with_header, 0)


def poll_summary(rows):
    if not rows:
        return "no samples"
    states = {}
    for row in rows:
        states[row["state"]] = states.get(row["state"], 0) + 1
    caps = [row["dispatch_capacity"] for row in rows]
    ratios = [row["capacity_ratio"] for row in rows]
    p0q = [row["queued"]["p0"] for row in rows]
    verdicts = {}
    for row in rows:
        verdicts[row.get("verdict")] = verdicts.get(row.get("verdict"), 0) + 1
    busy = [row["in_flight"] for row in rows if row.get("in_flight") is not None]
    busy_text = f"in_flight mean {statistics.mean(busy):.2f}; " if busy else ""
    # Worker samples out of routing, by routability (why the fleet filtered them).
    filtered = {}
    for row in rows:
        for routability, *_ in (row.get("workers") or {}).values():
            if routability != "routable":
                filtered[routability] = filtered.get(routability, 0) + 1
    return (
        f"{busy_text}states {states}; verdicts {verdicts}; capacity_ratio min {min(ratios)}; "
        f"dispatch_capacity min {min(caps)} median {statistics.median(caps)}; "
        f"P0 queue max {max(p0q)}; worker samples out of routing {filtered or 'none'}"
    )


def ramp_path(rows):
    """Distinct (state, capacity_ratio) steps in order, with seconds since the first sample."""
    if not rows:
        return []
    t0 = rows[0]["t"]
    path, last = [], None
    for row in rows:
        key = (row["state"], row["capacity_ratio"])
        if key != last:
            path.append(f"{(row['t'] - t0) / 1000:.1f}s {row['state']} {row['capacity_ratio']}")
            last = key
    return path


def ramp_start_second(rows, report):
    """Second of `report`'s run at which the gateway started recovering, from the poll."""
    for row in rows:
        if row["state"] == "recovering":
            return max(0, (row["t"] - report["started_unix_ms"]) // 1000)
    return None


def routable_again_second(rows, report):
    """Second of `report`'s run at which the detector stopped seeing filtered workers (the
    breakers closed again after the outage), from the poll."""
    seen = False
    for row in rows:
        if row.get("verdict") == "backend_filtered":
            seen = True
        elif seen:
            return max(0, (row["t"] - report["started_unix_ms"]) // 1000)
    return None


def p0_after(report, from_second):
    """P0 attempts' success from `from_second` of its run on (by send time)."""
    sent = ok = 0
    for second in report.get("timeline") or []:
        if second["second"] >= from_second:
            sent += second["sent"]
            ok += second["ok"]
    return ok / sent if sent else None


def p0_requests_after(report, from_second):
    """P0 requests' success from `from_second` on: successful attempts over first attempts
    sent from then (each request succeeds at most once; retries of earlier requests that
    succeed in the window count too, so this is close to, not exactly, per request)."""
    first = ok = 0
    for second in report.get("timeline") or []:
        if second["second"] >= from_second:
            first += second["first_attempts"]
            ok += second["ok"]
    return min(ok / first, 1.0) if first else None


def span(values, fmt):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return f"{fmt(min(values))} to {fmt(max(values))} (mean {fmt(statistics.mean(values))})"


def summary(spread):
    """One line over the seeds: range and mean of each figure."""
    if not spread:
        return ""
    ratio = lambda v: f"{v:.2f}"  # noqa: E731
    parts = [
        f"goodput ÷ light-load capacity {span([s['ratio'] for s in spread], ratio)}",
        f"÷ full-dispatch capacity {span([s['full'] for s in spread], ratio)}",
        f"P0 ok {span([s['P0'] for s in spread], pct)}",
        f"P1 ≥ P2 in {sum(1 for s in spread if (s['P1'] or 0) >= (s['P2'] or 0))} of {len(spread)} seeds",
        f"refusals without Retry-After {sum(s['no_header'] for s in spread)}",
    ]
    if any(s["p0_back"] is not None for s in spread):
        parts.append(f"P0 attempts ok once workers are back {span([s['p0_back'] for s in spread], pct)}")
        parts.append(f"P0 requests ok from then {span([s['p0_back_requests'] for s in spread], pct)}")
    return f"Over {len(spread)} seeds: " + "; ".join(parts) + "."


def p0_between(report, start, end):
    """P0 attempts' success for attempts sent in [start, end) s of its run."""
    sent = ok = 0
    for second in report.get("timeline") or []:
        if start <= second["second"] < end:
            sent += second["sent"]
            ok += second["ok"]
    return ok / sent if sent else None


def outage_window_lines(meta, cases, outage_workers):
    """A partial outage: goodput over the outage window against what the workers left can
    do (their batch caps over the light-load latency), and P0's success meanwhile."""
    flags = (meta.get("sim_flags") or ["--max-running 4"])[0].split()
    batch = int(flags[flags.index("--max-running") + 1]) if "--max-running" in flags else 4
    p50 = {v.split("\t")[0]: load_report(v.split("\t")[1])["e2e"]["p50"] for v in meta.get("light", [])}
    p0 = {v.split("\t")[0]: load_report(v.split("\t")[4]) for v in cases}
    rows = []
    for value in meta.get("outage_window", []):
        seed, goodput, start, end = value.split("\t")
        left = (2 - outage_workers) * batch / p50[seed] if seed in p50 else None
        share = f"{float(goodput) / left:.2f}" if left else "-"
        rows.append([seed, f"{float(goodput):.2f}", f"{left:.2f}" if left else "-", share,
                     pct(p0_between(p0[seed], int(start), int(end)))])
    return ["During the outage window (completions counted by the sims while one worker answers 503):", "",
            table(["seed", "goodput req/s", "the remaining worker's capacity (batch cap / light-load p50)",
                   "share", "P0 attempts ok (sent in the window)"], rows)]


def render(meta_path, out):
    meta = read_meta(meta_path)
    lines = ["# Demand overload: goodput, P0 protection, no self-inflicted ramp", ""]
    for key in ("started", "host", "git", "loadavg_start", "loadavg_end", "finished"):
        for value in meta.get(key, []):
            lines.append(f"- {key}: {value}")
    lines.append("")
    lines.append("## Capacity at light load")
    rows = []
    for value in meta.get("light", []):
        seed, path, capacity = value.split("\t")
        report = load_report(path)
        rows.append([seed, f"{report['achieved_rate']:.2f}", f"{report['e2e']['p50']:.3f}",
                     f"{float(capacity):.2f}"])
    lines.append(table(["seed", "offered req/s", "e2e p50 s", "capacity = max_concurrent / p50 (req/s)"], rows))
    full = {}
    for value in meta.get("full", []):
        seed, rate = value.split("\t")
        full[seed] = float(rate)
    if full:
        lines += ["", "Capacity at full dispatch (max_concurrent requests always outstanding, nothing queued), "
                  "completions per second counted by the sims: "
                  + ", ".join(f"seed {seed}: {rate:.2f} req/s" for seed, rate in full.items())]
    lines.append("")
    outage_for = (meta.get("outage_for") or ["10"])[0]
    outage_workers = int((meta.get("outage_workers") or ["2"])[0])
    who = "all workers answer" if outage_workers >= 2 else f"{outage_workers} of 2 workers answers"
    for section, label in (("overload", "Demand overload (P0 5, P1 10, P2 20 req/s; clients honour Retry-After)"),
                           ("outage", f"Outage storm during the same demand ({who} 503 for {outage_for} s, "
                                      "then recover; clients retry)")):
        cases = meta.get(section, [])
        if not cases:
            continue
        lines += ["", f"## {label}", ""]
        rows, notes, spread = [], [], []
        for value in cases:
            fields = value.split("\t")
            seed, goodput, capacity, poll_path = fields[:4]
            reports = dict(zip(("P0", "P1", "P2"), (load_report(p) for p in fields[4:7])))
            refused = [refusals(r) for r in reports.values()]
            total_ref = sum(r[0] for r in refused)
            no_header = sum(r[1] for r in refused)
            row = [seed, f"{float(goodput):.2f}", f"{float(goodput) / float(capacity):.2f}"]
            row.append(f"{float(goodput) / full[seed]:.2f}" if seed in full else "-")
            row += [pct(reports[c]["eventual_success_rate"]) for c in ("P0", "P1", "P2")]
            row += [str(total_ref), str(no_header)]
            polled = read_poll(poll_path)
            if section == "outage":
                back = routable_again_second(polled, reports["P0"])
                after = p0_after(reports["P0"], back) if back is not None else None
                row.append(f"{pct(after)} (from {back} s)" if after is not None else "-")
                requests = p0_requests_after(reports["P0"], back) if back is not None else None
                row.append(pct(requests) if requests is not None else "-")
                ramp_second = ramp_start_second(polled, reports["P0"])
                after_ramp = p0_after(reports["P0"], ramp_second) if ramp_second is not None else None
                row.append(f"{pct(after_ramp)} (from {ramp_second} s)" if after_ramp is not None else "-")
            rows.append(row)
            spread.append({
                "ratio": float(goodput) / float(capacity),
                "full": float(goodput) / full[seed] if seed in full else None,
                **{c: reports[c]["eventual_success_rate"] for c in ("P0", "P1", "P2")},
                "no_header": no_header,
                "p0_back": after if section == "outage" else None,
                "p0_back_requests": requests if section == "outage" else None,
            })
            notes.append(f"- seed {seed}: {poll_summary(polled)}")
            if section == "outage":
                notes.append(f"  - ramp path: {' → '.join(ramp_path(polled))}")
        headers = ["seed", "goodput req/s", "÷ light-load capacity", "÷ full-dispatch capacity", "P0 ok", "P1 ok", "P2 ok",
                   "refusals", "without Retry-After"]
        if section == "outage":
            headers.append("P0 attempts ok once workers are routable again")
            headers.append("P0 requests ok from then (ok ÷ first attempts)")
            headers.append("P0 attempts ok from the ramp's start")
        lines.append(table(headers, rows))
        lines += ["", summary(spread)]
        if section == "outage" and outage_workers < 2:
            lines += [""] + outage_window_lines(meta, cases, outage_workers)
        lines += ["", "`GET /admin/admission`, polled every 500 ms:", ""] + notes
    lines += ["", "## Commands", "", "```"]
    seen = set()
    for command in meta.get("command", []):
        if command not in seen:
            seen.add(command)
            lines.append(command)
    lines += ["```", ""]
    Path(out).write_text("\n".join(lines))


def adaptive_decisions(metrics_path):
    """`switchyard_admission_adaptive_decisions_total` by decision, from saved /metrics."""
    counts = []
    try:
        with open(metrics_path) as source:
            for line in source:
                if line.startswith("switchyard_admission_adaptive_decisions_total{"):
                    name = line.split('decision="', 1)[1].split('"', 1)[0]
                    counts.append(f"{name} {int(float(line.rsplit(' ', 1)[1]))}")
    except FileNotFoundError:
        return "-"
    return ", ".join(counts) or "-"


def render_adaptive(meta_path, out):
    meta = read_meta(meta_path)
    lines = ["# Adaptive concurrency limit against hand-tuned max_concurrent", ""]
    for key in ("started", "host", "git", "workers", "spikes", "loadavg_start", "loadavg_end",
                "finished"):
        for value in meta.get(key, []):
            lines.append(f"- {key}: {value}")
    lines.append("")
    knee = int(meta.get("knee", ["8"])[0])
    rows, best = [], {}
    for value in meta.get("case", []):
        seed, label, goodput, poll_path, report_path = value.split("\t")
        report = load_report(report_path)
        polled = read_poll(poll_path)
        limits = [r["adaptive_limit"] for r in polled if r.get("adaptive_limit") is not None]
        tail = limits[len(limits) // 2:]
        settled = f"{statistics.median(tail)} (range {min(tail)}-{max(tail)})" if tail else "-"
        under = f"{sum(1 for limit in tail if limit < knee)} of {len(tail)}" if tail else "-"
        decisions = adaptive_decisions(poll_path.replace(".poll.jsonl", ".metrics.txt"))
        rows.append([seed, label, f"{float(goodput):.2f}", f"{report['e2e']['p50']:.3f}",
                     f"{report['e2e']['p99']:.3f}", settled, under, decisions])
        if not label.startswith("adaptive"):
            best[seed] = max(best.get(seed, 0.0), float(goodput))
    lines.append(table(["seed", "max_concurrent", "goodput req/s", "e2e p50 s", "e2e p99 s",
                    "adaptive limit, 2nd half (median, range)",
                    f"polls under the knee ({knee}), 2nd half", "adaptive decisions"], rows))
    lines.append("")
    for value in meta.get("case", []):
        seed, label, goodput, _, _ = value.split("\t")
        if label.startswith("adaptive") and best.get(seed):
            lines.append(f"- seed {seed}: {label} reaches {float(goodput) / best[seed]:.2f} of the best hand-tuned goodput ({best[seed]:.2f} req/s)")
    lines += ["", "## Commands", "", "```"]
    seen = set()
    for command in meta.get("command", []):
        if command not in seen:
            seen.add(command)
            lines.append(command)
    lines += ["```", ""]
    Path(out).write_text("\n".join(lines))


def main(argv):
    command = argv[0]
    if command == "poll":
        poll(argv[1], argv[2], argv[3])
    elif command == "completed":
        print(f"{completed(argv[1:]):.0f}")
    elif command == "render":
        render(argv[1], argv[2])
    elif command == "render-adaptive":
        render_adaptive(argv[1], argv[2])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
