"""Helpers the figure pages share: the header, commands, configs, cases and metric files."""

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
