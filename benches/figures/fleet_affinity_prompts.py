#!/usr/bin/env python3
"""Where each system prompt's traffic went in a fleet_affinity run, from the load tool's trace.

The group plan gives every system prompt a few workers and the part of its traffic each
takes, so that the workers' loads come out even. Independent replicas each build that plan
from their own share estimates; where the fleet's union of plans sends one prompt's
conversations elsewhere than one replica would, a worker carries more than its even share
for as long as that lasts. From the load tool's trace (`--trace-out`; fleet_affinity.sh keeps
it with FIG_KEEP_WORK=1) this prints, per trace: each system prompt's share of the answered
requests and the part of them each worker was sent, in quarter-worker units of traffic (the
plan's unit: 16 units on 4 workers), and the workers' totals; with --windows, per WINDOW
seconds (by send time), the requests each worker was sent in all and of the PROMPT'th busiest
prompt (default 2: the second busiest, which is planned before the busiest and so takes
the room the others leave); with --peaks, only how uneven the windows were: over the windows
from the second on, the range and mean of the busiest worker's requests over the workers'
mean and of the busiest prompt's share of the window (a placement even over the whole run
can still pile up for seconds at a time, and that is what queues).

Usage: fleet_affinity_prompts.py [--windows | --peaks] [--window SECONDS] [--prompt N] TRACE [TRACE ...]"""

import json
import sys

sys.dont_write_bytecode = True
from collections import Counter, defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from fleet_affinity_moves import opening  # noqa: E402

UNITS_PER_WORKER = 4


def answered(path):
    with open(path) as trace:
        sent = [json.loads(line) for line in trace if line.strip()]
    return [r for r in sent if r.get("worker") and r.get("ttft_ms") is not None]


def label(system):
    """A short name for a system prompt: its first words."""
    return " ".join(system.split()[:5])


def by_prompt(requests):
    per = defaultdict(Counter)
    for request in requests:
        system, _ = opening(request["messages"])
        per[system][request["worker"]] += 1
    return per


def peaks(path, window_ms):
    """The busiest worker over the mean, and the busiest prompt's share, per window."""
    requests = answered(path)
    if not requests:
        print(f"{Path(path).name}: 0 answered")
        return
    workers = len({r["worker"] for r in requests})
    start = min(r["sent_ms"] for r in requests)
    windows = defaultdict(lambda: (Counter(), Counter()))
    for request in requests:
        every, prompts = windows[int((request["sent_ms"] - start) // window_ms)]
        every[request["worker"]] += 1
        prompts[opening(request["messages"])[0]] += 1
    # The first window is the warm-up, which the minute tables already show.
    kept = [windows[i] for i in sorted(windows)[1:]]
    worker_peaks = [max(e.values()) / (sum(e.values()) / workers) for e, _ in kept]
    prompt_peaks = [max(p.values()) / sum(p.values()) for _, p in kept]

    def spread(values):
        return f"{min(values):.2f}–{max(values):.2f} (mean {sum(values) / len(values):.2f})"

    print(f"{Path(path).name}: {len(kept)} windows; busiest worker / mean {spread(worker_peaks)}; "
          f"busiest system prompt's share {spread(prompt_peaks)}")


def report(path, per_window, window_ms, rank):
    requests = answered(path)
    print(f"{Path(path).name}: {len(requests)} answered")
    if not requests:
        return
    per = by_prompt(requests)
    workers = sorted({r["worker"] for r in requests})
    units = UNITS_PER_WORKER * len(workers) / len(requests)
    ranked = sorted(per, key=lambda system: -sum(per[system].values()))
    for system in ranked:
        sent = per[system]
        parts = "  ".join(f"{w} {sent[w] * units:.2f}" for w in workers if sent[w])
        print(f"  {sum(sent.values()) / len(requests):.3f}  {parts}  ({label(system)})")
    totals = Counter(r["worker"] for r in requests)
    print("  workers: " + "  ".join(f"{w} {totals[w] * units:.2f}" for w in workers))
    if not per_window or rank > len(ranked):
        return
    chosen = ranked[rank - 1]
    start = min(r["sent_ms"] for r in requests)
    windows = defaultdict(lambda: (Counter(), Counter()))
    for request in requests:
        index = int((request["sent_ms"] - start) // window_ms)
        every, prompt = windows[index]
        every[request["worker"]] += 1
        if opening(request["messages"])[0] == chosen:
            prompt[request["worker"]] += 1
    print(f"  per {window_ms / 1000:g} s, {' / '.join(workers)}: sent | of prompt {rank} ({label(chosen)})")
    for index in sorted(windows):
        every, prompt = windows[index]
        print(f"  {index * window_ms / 1000:>5g}s  " + " ".join(f"{every[w]:>4}" for w in workers)
              + "  | " + " ".join(f"{prompt[w]:>4}" for w in workers))


def main(argv):
    per_window, only_peaks, window_s, rank, paths = False, False, 10.0, 2, []
    args = iter(argv)
    for arg in args:
        if arg == "--windows":
            per_window = True
        elif arg == "--peaks":
            only_peaks = True
        elif arg == "--window":
            window_s = float(next(args, "10"))
        elif arg == "--prompt":
            rank = int(next(args, "2"))
        else:
            paths.append(arg)
    if not paths or window_s <= 0 or rank < 1:
        print(__doc__, file=sys.stderr)
        return 2
    for path in paths:
        if only_peaks:
            peaks(path, window_s * 1000)
        else:
            report(path, per_window, window_s * 1000, rank)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
