#!/usr/bin/env python3
"""How unevenly a fleet_affinity run loaded its workers, window by window, from the load
tool's traces (`--trace-out`; fleet_affinity.sh keeps them with FIG_KEEP_WORK=1).

A placement that is even over the whole run can still pile up for seconds at a time, and
that is what queues. Per WINDOW seconds (by send time) this takes the requests each worker
was sent and reports the busiest worker's count over the mean of the workers, and the share
of the window's requests that the busiest system prompt (the first message) had. Printed
per trace: the range of both over the windows from SKIP seconds on, and their mean.

Usage: fleet_affinity_windows.py [--window SECONDS] [--skip SECONDS] TRACE [TRACE ...]"""

import json
import sys
from collections import Counter, defaultdict


def windows(path, window_ms, skip_ms):
    """Per window: (worker -> requests, system prompt -> requests)."""
    with open(path) as trace:
        sent = [json.loads(line) for line in trace if line.strip()]
    if not sent:
        return []
    start = min(r["sent_ms"] for r in sent)
    workers = defaultdict(Counter)
    prompts = defaultdict(Counter)
    for request in sent:
        offset = request["sent_ms"] - start
        if offset < skip_ms or request.get("worker") is None:
            continue
        index = int(offset // window_ms)
        workers[index][request["worker"]] += 1
        messages = request.get("messages") or [{}]
        prompts[index][json.dumps(messages[0], sort_keys=True)] += 1
    return [(workers[i], prompts[i]) for i in sorted(workers)]


def describe(path, window_ms, skip_ms, fleet_workers):
    peaks, busiest_shares = [], []
    for by_worker, by_prompt in windows(path, window_ms, skip_ms):
        total = sum(by_worker.values())
        if total == 0:
            continue
        # Workers sent nothing in a window still count in its mean.
        count = max(fleet_workers, len(by_worker))
        peaks.append(max(by_worker.values()) / (total / count))
        busiest_shares.append(max(by_prompt.values()) / total)
    if not peaks:
        return f"{path}: no answered requests after {skip_ms / 1000:.0f} s"

    def spread(values):
        return f"{min(values):.2f}–{max(values):.2f} (mean {sum(values) / len(values):.2f})"

    return (f"{path}\n  windows {len(peaks)}; busiest worker / mean {spread(peaks)}; "
            f"busiest system prompt's share {spread(busiest_shares)}")


def main(argv):
    window_s, skip_s, workers, paths = 10.0, 10.0, 4, []
    args = iter(argv)
    for arg in args:
        if arg == "--window":
            window_s = float(next(args))
        elif arg == "--skip":
            skip_s = float(next(args))
        elif arg == "--workers":
            workers = int(next(args))
        else:
            paths.append(arg)
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    for path in paths:
        print(describe(path, window_s * 1000, skip_s * 1000, workers))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
