#!/usr/bin/env python3
"""Markdown page of hung_engine.sh: per gateway and mode, requests never answered within the
client timeout, client errors among requests sent at least 1 s after the fault, the slowest
answer, and the time until the faulty worker was filtered (engine hang or kill -9).
Usage: hung_engine_render.py META_TSV OUT_MD."""

import json
import sys

sys.dont_write_bytecode = True
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from figlib import event_second, load_report, one, read_meta, table  # noqa: E402
from figrender_common import config_blocks, dedup_commands, header  # noqa: E402


def time_to_filter(summary_path, hang_ms):
    if summary_path == "-":
        return "n/a"
    summary = json.loads(Path(summary_path).read_text())
    for t, routability in summary["transitions"]:
        if t >= hang_ms and routability not in ("routable", "absent"):
            return f"{(t - hang_ms) / 1000:.1f} s ({routability})"
    return "never"


def errors_from(report, since_s):
    """Failed requests among those sent in whole seconds starting at least `since_s` into
    the run (timeline buckets are by send time)."""
    return sum(
        sum(second["errors"].values()) + second.get("unfinished", 0)
        for second in report.get("timeline") or []
        if second["second"] >= since_s
    )


def render(meta):
    rows = []
    for value in meta.get("case", []):
        gateway, mode, path, hang_ms, summary, load = value.split("\t")
        report = load_report(path)
        errors = report["errors"]
        unanswered = errors.get("timeout", 0) + errors.get("stream_incomplete", 0)
        other = {k: v for k, v in errors.items() if k not in ("timeout", "stream_incomplete")}
        slowest = report["e2e"].get("max")
        late_errors = errors_from(report, event_second(report, hang_ms) + 1.0)
        rows.append([
            gateway,
            mode.replace("_", "-"),
            str(report["requests_sent"]),
            str(report["ok"]),
            str(unanswered),
            ", ".join(f"{k} {v}" for k, v in sorted(other.items())) or "0",
            str(late_errors),
            f"{slowest:.2f} s" if slowest is not None else "-",
            f"{report['e2e']['p99']:.2f} s" if report["e2e"].get("p99") is not None else "-",
            time_to_filter(summary, int(hang_ms)),
            load,
        ])
    kind = one(meta, "fault", "engine_hang")
    killed = kind == "kill"
    fault = (
        f"{one(meta, 'victim')} is killed with `kill -9` (no goodbye to any connection)"
        if killed else
        f"{one(meta, 'victim')}'s streams stop after {one(meta, 'stall_after_chunks', '4')} token "
        "chunks with the connection left open, and its non-streaming answers never come (sim "
        "fault `stall`)"
        if kind == "stall" else
        f"{one(meta, 'victim')}'s engine hangs while its "
        "`/health` keeps answering 200 (sim fault `engine_hang`: requests are accepted and "
        "never get a byte, requests already generating stop)"
    )
    intro = (
        f"4 simulated workers, `uniform` workload at {one(meta, 'rate')} req/s for "
        f"{one(meta, 'duration')} s, client timeout {one(meta, 'timeout')} s; "
        f"{one(meta, 'hang_at')} s in, {fault}. A poller reads "
        "`GET /admin/workers` every 100 ms (the resolution of time-to-filter). \"errors ≥ 1 s "
        "after\" counts failed or unanswered requests sent in load-tool seconds that start at "
        "least 1 s after the fault."
    )
    title = (
        "kill -9 of a worker, side by side with SMG" if killed else
        "Streams stalled mid-answer, side by side with SMG" if kind == "stall" else
        "Hung engine with /health 200"
    )
    lines = [header(title, meta, intro)]
    commands = dedup_commands(meta)
    bin_dir = one(meta, "bin_dir", "")
    if bin_dir.rstrip("/").endswith("target/debug"):
        # lib.sh writes binaries as target/release; say which build actually ran.
        commands = commands.replace("target/release/", "target/debug/")
        lines += ["Binaries: **debug build** (`target/debug`): the switchyard gateway, the sims and the load tool, in every row; SMG is "
                  "its release wheel (`pip install smg==1.13.0`). Latencies of the switchyard rows are therefore pessimistic.",
                  ""]
    lines += ["## Commands", "", commands, "", config_blocks(meta), ""]
    lines += ["## Results", ""]
    lines.append(table(
        ["gateway", "mode", "sent", "ok", "unanswered", "other errors", "errors ≥ 1 s after",
         "slowest answer",
         "e2e p99", "time to filter", "load avg at end"],
        rows,
    ))
    if one(meta, "smg_version"):
        lines += ["", f"SMG: `{one(meta, 'smg_version')}`."]
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    meta = read_meta(sys.argv[1])
    Path(sys.argv[2]).write_text(render(meta))
    print(f"wrote {sys.argv[2]}", file=sys.stderr)
