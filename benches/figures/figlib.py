#!/usr/bin/env python3
"""Helpers for the figure scripts: a gateway poller and the markdown writers.

    figlib.py poll --key K --out FILE --ports P [P ...]
        Every 100 ms, for each gateway port: GET /admin/workers and GET /metrics, one JSON
        line per sample (unix ms, port, routability per worker, selected counters). Runs
        until SIGTERM; bounded to 15 minutes whatever happens.
    figlib.py summarize-poll POLL_JSONL WORKER
        The poll log boiled down (JSON on stdout): WORKER's routability transitions, when its
        breaker-call counter rose, gateway admission states and admitted totals over time.

The pages themselves are written by figrender.py.
"""

import json
import signal
import sys
import time
import urllib.request
from pathlib import Path

POLL_INTERVAL_S = 0.1
POLL_MAX_S = 900
POLLED_SERIES = (
    "switchyard_worker_breaker_calls_total",
    "switchyard_upstream_attempts_total",
    "switchyard_admission_admitted_total",
    "switchyard_admission_refusals_total",
    "switchyard_admission_gateway_state",
    "switchyard_admission_ramp_capacity_ratio",
    "switchyard_prefilter_filtered_workers",
)


# ---------------------------------------------------------------- polling

def fetch(url, key=None, timeout=1.0):
    request = urllib.request.Request(url)
    if key:
        request.add_header("authorization", f"Bearer {key}")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read().decode()


def parse_metrics(text, wanted=POLLED_SERIES):
    """Prometheus text → {"name{labels}": value} for the wanted families."""
    series = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        if not line.startswith(wanted):
            continue
        name, _, value = line.rpartition(" ")
        try:
            series[name] = float(value)
        except ValueError:
            pass
    return series


def poll(args):
    key, out, ports = args.key, args.out, args.ports
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    deadline = time.time() + POLL_MAX_S
    with open(out, "a", buffering=1) as sink:
        while not stop["now"] and time.time() < deadline:
            started = time.time()
            for port in ports:
                sample = {"t_ms": int(started * 1000), "port": port}
                try:
                    workers = json.loads(fetch(f"http://127.0.0.1:{port}/admin/workers", key))
                    sample["workers"] = {
                        w["name"]: {"routability": w.get("routability"), "in_flight": w.get("in_flight")}
                        for w in workers.get("workers", [])
                    }
                    sample["metrics"] = parse_metrics(fetch(f"http://127.0.0.1:{port}/metrics"))
                except Exception as error:  # a gateway restarting or gone: keep polling
                    sample["error"] = str(error)
                sink.write(json.dumps(sample) + "\n")
            time.sleep(max(0.0, POLL_INTERVAL_S - (time.time() - started)))


def read_poll(path):
    samples = []
    for line in Path(path).read_text().splitlines():
        try:
            samples.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return samples


def summarize_poll(path, worker):
    """What the renderers need from a poll log, small enough to keep next to the results."""
    samples = [s for s in read_poll(path) if "workers" in s]
    transitions, calls_increased, states, admitted = [], [], [], []
    last_routability, last_calls, last_state = None, None, None
    for sample in samples:
        t = sample["t_ms"]
        routability = (sample["workers"].get(worker) or {}).get("routability", "absent")
        if routability != last_routability:
            transitions.append([t, routability])
            last_routability = routability
        calls = series_sum(sample, "switchyard_worker_breaker_calls_total", (f'worker="{worker}"',))
        if last_calls is not None and calls > last_calls:
            calls_increased.append(t)
        last_calls = calls
        state = next((k for k, v in (sample.get("metrics") or {}).items()
                      if k.startswith("switchyard_admission_gateway_state") and v == 1), None)
        if state != last_state:
            states.append([t, state])
            last_state = state
        admitted.append([t, series_sum(sample, "switchyard_admission_admitted_total"),
                         series_sum(sample, "switchyard_admission_ramp_capacity_ratio")])
    intervals = [b["t_ms"] - a["t_ms"] for a, b in zip(samples, samples[1:])]
    return {
        "worker": worker,
        "samples": len(samples),
        "max_gap_ms": max(intervals) if intervals else None,
        "first_ms": samples[0]["t_ms"] if samples else None,
        "last_ms": samples[-1]["t_ms"] if samples else None,
        "transitions": transitions,
        "calls_increased_ms": calls_increased,
        "gateway_states": states,
        "admitted": admitted,
    }


def series_sum(sample, prefix, must_contain=()):
    metrics = sample.get("metrics") or {}
    return sum(v for k, v in metrics.items() if k.startswith(prefix) and all(s in k for s in must_contain))


# ---------------------------------------------------------------- facts and formatting

def read_meta(path):
    """Tab-separated facts; a key given several times keeps every value in order."""
    meta = {}
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        key, _, value = line.partition("\t")
        meta.setdefault(key, []).append(value)
    return meta


def one(meta, key, default=None):
    values = meta.get(key)
    return values[-1] if values else default


def load_report(path):
    return json.loads(Path(path).read_text())


def pct(value, digits=1):
    return "-" if value is None else f"{value * 100:.{digits}f} %"


def ms(seconds):
    return "-" if seconds is None else f"{seconds * 1000:.0f}"


def secs(value, digits=1):
    return "-" if value is None else f"{value:.{digits}f} s"


def table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def commands_block(meta):
    lines = meta.get("command", [])
    return "```sh\n" + "\n".join(lines) + "\n```" if lines else ""


def goal(ok):
    return "**met**" if ok else "**NOT met**"


def cv(report):
    counts = [w["requests"] for w in report["workers"].values()]
    return report["worker_load_cv"], counts


def window_hit_rate(report, start, end=None):
    """Physical hit rate of the attempts sent in seconds [start, end)."""
    prompt = cached = 0
    for second in report.get("timeline") or []:
        if second["second"] >= start and (end is None or second["second"] < end):
            prompt += second.get("prompt_tokens", 0)
            cached += second.get("cached_tokens", 0)
    return cached / prompt if prompt else None


def window_ttft_p99(report, start, end=None):
    """Max of per-second TTFT p99 over [start, end): an upper bound of the window's p99."""
    values = [
        s["ttft_p99"] for s in report.get("timeline") or []
        if s["second"] >= start and (end is None or s["second"] < end) and s["ttft_p99"] is not None
    ]
    return max(values) if values else None


def event_second(report, event_unix_ms):
    return (int(event_unix_ms) - report["started_unix_ms"]) / 1000.0


def main(argv):
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    poll_args = sub.add_parser("poll")
    poll_args.add_argument("--key", required=True)
    poll_args.add_argument("--out", required=True)
    poll_args.add_argument("--ports", nargs="+", required=True)
    summarize_args = sub.add_parser("summarize-poll")
    summarize_args.add_argument("poll")
    summarize_args.add_argument("worker")
    args = parser.parse_args(argv)
    if args.command == "poll":
        poll(args)
        return 0
    print(json.dumps(summarize_poll(args.poll, args.worker)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
