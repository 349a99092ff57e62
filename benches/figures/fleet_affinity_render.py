#!/usr/bin/env python3
"""Markdown page of fleet_affinity.sh: physical hit rate, its share of the sticky-session
oracle and of one replica's, load CV and TTFT p99 per case and seed, then the mean and spread
over seeds. Usage: fleet_affinity_render.py META_TSV OUT_MD."""

import glob
import json
import re
import statistics
import sys

sys.dont_write_bytecode = True
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from figlib import load_report, one, read_meta, table  # noqa: E402
from figrender_common import dedup_commands, header, relative  # noqa: E402


def cases(meta):
    for value in meta.get("case", []):
        fields = value.split("\t")
        seed, mode, replicas, policy, workload, flag, path, oracle, load = fields[:9]
        # Runs recorded before the steal was measured have no tenth field.
        steal = fields[9] if len(fields) > 9 else "-"
        yield {
            "seed": int(seed), "mode": mode, "replicas": int(replicas), "policy": policy,
            "workload": workload, "flag": flag, "report": load_report(path),
            "oracle": load_report(oracle), "path": path, "load": load,
            "steal": steal,
        }


def steal_line(all_cases, noisy=10.0):
    """The hypervisor's steal over the runs, so a reader knows which TTFT ratios compare."""
    values = []
    for case in all_cases:
        try:
            values.append(float(case["steal"]))
        except ValueError:
            pass
    if not values:
        return "Hypervisor steal was not measured in these runs."
    over = sum(1 for v in values if v > noisy)
    line = (f"Hypervisor steal over the load runs: {min(values):.1f}–{max(values):.1f} % "
            f"(column `steal %`); {over} of {len(values)} runs above {noisy:.0f} %")
    if over:
        line += ", whose TTFT figures are not clean comparisons; hit rates are robust to it"
    return line + "."


def label(case):
    flag = "" if case["flag"] == "default" else f" ({case['flag']})"
    return f"{case['policy']} {case['workload']}{flag}, {case['replicas']} {case['mode']}"


def trace_summary(path):
    """The run's latency summary (fleet_affinity_trace.py) beside its report, if written."""
    latency = Path(path).with_suffix(".latency.json")
    return json.loads(latency.read_text()) if latency.exists() else {}


def escapes(path, branch):
    """Decisions on `branch` summed over the run's replicas (saved gateway metrics)."""
    stem = str(Path(path).with_suffix(""))
    pattern = re.compile(r'switchyard_routing_decisions_total\{[^}]*branch="' + branch + r'"[^}]*\} (\d+)')
    total = 0
    for metrics in glob.glob(glob.escape(stem) + ".gateway-*.metrics.txt"):
        total += sum(int(m.group(1)) for m in pattern.finditer(Path(metrics).read_text()))
    return total


def p50_ms(report):
    value = (report.get("ttft") or {}).get("p50")
    return None if value is None else value * 1000


def p99_ms(report):
    value = (report.get("ttft") or {}).get("p99")
    return None if value is None else value * 1000


def pooled_p99(runs):
    """TTFT p99 over every request of the runs (the quantile fleet_affinity_trace.py takes),
    from each run's slowest tenth; None unless every run kept one and the kept tails reach
    below the pooled p99."""
    if not runs or any("ttft_top_decile_ms" not in run for run in runs):
        return None
    total = sum(run["ttft_ms"]["n"] for run in runs)
    # Ascending index int(0.99 * total) is this many places from the slowest.
    from_top = total - 1 - int(0.99 * total)
    slowest = sorted((t for run in runs for t in run["ttft_top_decile_ms"]), reverse=True)
    if from_top >= len(slowest):
        return None
    value = slowest[from_top]
    for run in runs:
        kept = run["ttft_top_decile_ms"]
        # Every kept value at or above it while the run had more: its unkept ones may be too.
        if len(kept) < run["ttft_ms"]["n"] and kept and kept[-1] >= value:
            return None
    return value


def dash_if_none(value):
    return "-" if value is None else value


def fmt(value, digits=3):
    return "-" if value is None else f"{value:.{digits}f}"


def render(meta):
    all_cases = list(cases(meta))
    single = {}
    for case in all_cases:
        if case["replicas"] == 1:
            single[(case["seed"], case["policy"], case["workload"], case["flag"])] = case
    rows, by_label = [], {}
    for case in all_cases:
        report, oracle = case["report"], case["oracle"]
        hit = report["physical_hit_rate"]
        base = single.get((case["seed"], case["policy"], case["workload"], case["flag"]))
        ratio = hit / base["report"]["physical_hit_rate"] if base and base["report"]["physical_hit_rate"] else None
        ttft_ratio = None
        if base and p99_ms(base["report"]) and p99_ms(report) is not None:
            ttft_ratio = p99_ms(report) / p99_ms(base["report"])
        of_oracle = hit / oracle["sticky_hit_rate"] if oracle["sticky_hit_rate"] else None
        trace = trace_summary(case["path"])
        rows.append([
            case["seed"], label(case), fmt(hit), fmt(oracle["sticky_hit_rate"]), fmt(of_oracle),
            fmt(ratio), fmt(report["worker_load_cv"]), fmt(p50_ms(report), 1),
            fmt(p99_ms(report), 0), fmt(ttft_ratio, 2),
            dash_if_none(trace.get("all_sends_at_or_above_max_running")),
            dash_if_none(trace.get("later_turns_on_another_worker")),
            f"{escapes(case['path'], 'busy_escape')}/{escapes(case['path'], 'load_escape')}",
            f"{report['ok']}/{report['requests_sent']}", case["load"], case["steal"],
            relative(case["path"]),
        ])
        entry = by_label.setdefault(label(case), {"hit": [], "of_oracle": [], "ratio": [], "cv": [], "p50": [], "p99": [], "ttft_ratio": [], "traces": [], "base": None})
        entry["hit"].append(hit)
        entry["of_oracle"].append(of_oracle)
        entry["ratio"].append(ratio)
        entry["cv"].append(report["worker_load_cv"])
        entry["p50"].append(p50_ms(report))
        entry["p99"].append(p99_ms(report))
        entry["ttft_ratio"].append(ttft_ratio)
        entry["traces"].append(trace)
        entry["base"] = label(base) if base else None

    def spread(values, digits=3):
        values = [v for v in values if v is not None]
        if not values:
            return "-"
        mean = statistics.mean(values)
        return f"{mean:.{digits}f} [{min(values):.{digits}f}–{max(values):.{digits}f}]"

    pooled = {name: pooled_p99(e["traces"]) for name, e in by_label.items()}

    def pooled_ratio(entry, name):
        base = pooled.get(entry["base"]) if entry["base"] else None
        return fmt(pooled[name] / base, 2) if pooled[name] is not None and base else "-"

    summary = [
        [name, len(e["hit"]), spread(e["hit"]), spread(e["of_oracle"]), spread(e["ratio"]),
         spread(e["cv"]), spread(e["p50"], 1), spread(e["p99"], 0), spread(e["ttft_ratio"], 2),
         fmt(pooled[name], 0), pooled_ratio(e, name)]
        for name, e in by_label.items()
    ]
    sizing = []
    for value in meta.get("sizing", []):
        seed, kv, path = value.split("\t")
        report = load_report(path)
        sizing.append([seed, kv, report["working_set_blocks"], fmt(report["working_set_blocks"] / (4 * int(kv)), 2),
                       report["conversations"], fmt(report["sticky_hit_rate"]), fmt(report["pooled_hit_rate"])])
    parts = [
        header(
            "Fleet cache affinity without session keys",
            meta,
            f"4 simulated workers, `agentic` workload at {one(meta, 'rate')} req/s for "
            f"{one(meta, 'duration')} s per case, requests spread uniformly at random over the "
            "replicas; seeds " + one(meta, "seeds", "?") + ". `of oracle` = physical hit rate / "
            "the sticky-session oracle's on the exact requests the run sent; `× one` = hit rate / "
            "the one-replica run of the same policy, workload and seed; `TTFT × one` likewise for "
            "TTFT p99; `pooled` = one TTFT p99 over every seed's requests of the case (from the "
            "traces), and its ratio to the one-replica case's. `legacy` = `anonymous_conversations = false` (the behaviour before); `busy` = "
            "`later_turn_escape_in_flight` at the sims' batch size; `gauges` = engine gauges "
            "scraped; `sends onto a full batch` = requests sent while their worker already had "
            "8 in flight (from the trace); `escapes` from the replicas' decision counters; "
            "`steal %` = the hypervisor's steal over the load run as a share of the time the "
            "CPUs were wanted (`/proc/stat`).",
        ),
        steal_line(all_cases),
        "",
        "## KV sizing (per seed)",
        "",
        table(["seed", "kv blocks / sim", "working set (blocks)", "working set / fleet KV",
               "conversations", "oracle hit", "one pooled cache"], sizing),
        "",
        "## Mean [min–max] over seeds",
        "",
        table(["case", "runs", "hit rate", "of oracle", "× one", "load CV", "TTFT p50 ms",
               "TTFT p99 ms", "TTFT × one", "TTFT p99 pooled ms", "pooled × one"], summary),
        "",
        "## Every run",
        "",
        table(["seed", "case", "hit rate", "oracle", "of oracle", "× one", "load CV",
               "TTFT p50 ms", "TTFT p99 ms", "TTFT × one", "sends onto a full batch",
               "later turns moved", "escapes busy/queued", "ok/sent", "load avg", "steal %",
               "report"], rows),
        "",
        "## Commands",
        "",
        dedup_commands(meta),
        "",
    ]
    return "\n".join(parts)


def main():
    meta = read_meta(sys.argv[1])
    Path(sys.argv[2]).write_text(render(meta))


if __name__ == "__main__":
    main()
