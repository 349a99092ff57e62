#!/usr/bin/env python3
"""What a fleet_affinity run's TTFT tail is made of, from the load tool's trace (`--trace-out`;
fleet_affinity.sh keeps it with FIG_KEEP_WORK=1).

The tail is the slowest 1 % of the answered requests (those at or above the run's p99). Each
is a first turn, a later turn that found at least half its prompt cached (`hit`) or one that
did not (`miss`); a later turn `moved` when its worker differs from its conversation's
previous answered turn's (a conversation is its system message plus its first user message,
as the gateway names an anonymous one). Printed per run: the p99, that split, the tail's
requests per 10 s of the run and per worker (a burst on one worker shows as a cluster), and
`hot windows`: half-seconds in which one worker was sent at least HOT requests (default 14,
about twice its even share at the figures' 60 req/s over 4 workers) or at least 3 misses.
Slow hits in a cluster point at a queue on a worker; misses spread over the run at
placement. With --windows, per 10 s of the run and per worker: the requests sent, the
prompt tokens the worker had not cached (thousands), and the tail's requests, which tells a
worker that was sent more than its share (a queue) from one that missed more (placement).
`first 10 s` gives the requests each worker was sent in the run's first 10 s, before the
replicas plan their prompts' groups, and the busiest's over the mean (a warm-up pile shows as
well over 1 whatever the host's steal), then the p99 of the requests sent in that first 10 s
and of those sent after it (a run whose tail is its warm-up has a p99 from 10 s on near one
replica's). `full batch` counts the requests sent while their
worker already had at least BATCH (default 8, the sims' batch size) of the run's requests in
flight, so the request waited for a slot: all of them, by kind, and those in the tail.

With --pooled, one line over all the traces given (a case's runs over several seeds): the p99
of all their answered requests, of those sent in each run's first 10 s and of those sent
after, the same figures the per-run lines give, so an arm's pooled tail can be split into
its warm-up and the rest.

Usage: fleet_affinity_tail.py [--hot N] [--batch N] [--windows | --pooled] TRACE_JSONL [...]"""

import bisect
import json
import sys

sys.dont_write_bytecode = True
from collections import Counter, defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from fleet_affinity_moves import opening  # noqa: E402


def classify(sent):
    """Each answered request with its kind (first / hit / miss) and whether it moved."""
    conversations = defaultdict(list)
    for request in sent:
        conversations[opening(request["messages"])].append(request)
    answered = []
    for turns in conversations.values():
        turns.sort(key=lambda r: r["sent_ms"])
        previous = None
        for request in turns:
            if request.get("worker") is None or request.get("ttft_ms") is None:
                continue
            if previous is None:
                kind, moved = "first", False
            else:
                cached = request.get("cached_tokens") or 0
                kind = "hit" if cached >= 0.5 * max(request.get("prompt_tokens") or 0, 1) else "miss"
                moved = request["worker"] != previous["worker"]
            answered.append((request, kind, moved))
            previous = request
    return answered


def onto_full_batch(answered, batch):
    """The ids of the answered requests sent while their worker had >= batch in flight."""
    spans = {}
    for request, _, _ in answered:
        starts, ends = spans.setdefault(request["worker"], ([], []))
        starts.append(request["sent_ms"])
        ends.append(request["sent_ms"] + (request.get("e2e_ms") or request["ttft_ms"]))
    for starts, ends in spans.values():
        starts.sort()
        ends.sort()
    full = set()
    for request, _, _ in answered:
        starts, ends = spans[request["worker"]]
        at = request["sent_ms"]
        # Started before this one and not yet finished: in flight when it was sent.
        in_flight = bisect.bisect_left(starts, at) - bisect.bisect_right(ends, at)
        if in_flight >= batch:
            full.add(id(request))
    return full


def analyse(path, hot, per_window=False, batch=8):
    with open(path) as trace:
        sent = [json.loads(line) for line in trace if line.strip()]
    if not sent:
        return f"{path}: empty trace"
    start = min(r["sent_ms"] for r in sent)
    answered = classify(sent)
    if not answered:
        return f"{path}: no answered request"
    answered.sort(key=lambda item: -item[0]["ttft_ms"])
    tail = answered[: max(1, len(answered) // 100)]
    kinds = Counter(kind for _, kind, _ in tail)
    moved = sum(1 for _, _, m in tail if m)
    by_window = Counter(int((r["sent_ms"] - start) / 10_000) * 10 for r, _, _ in tail)
    by_worker = Counter(r["worker"] for r, _, _ in tail)
    sends, misses = Counter(), Counter()
    for request, kind, _ in answered:
        window = (int((request["sent_ms"] - start) / 500), request["worker"])
        sends[window] += 1
        misses[window] += kind == "miss"
    full = onto_full_batch(answered, batch)
    full_kinds = Counter(kind for r, kind, _ in answered if id(r) in full)
    full_tail = sum(1 for r, _, _ in tail if id(r) in full)
    crowded = sum(1 for count in sends.values() if count >= hot)
    workers = sorted({r["worker"] for r, _, _ in answered})
    opening_sends = Counter(r["worker"] for r, _, _ in answered if r["sent_ms"] - start < 10_000)
    opening_row = [opening_sends[w] for w in workers]
    opening_mean = sum(opening_row) / max(len(opening_row), 1)
    missing = sum(1 for count in misses.values() if count >= 3)
    early, later = split_at_10s(answered, start)
    return "\n".join(
        [
            f"{path.split('/')[-1]}: p99 {tail[-1][0]['ttft_ms']:.1f} ms over {len(answered)} answered",
            f"  slowest {len(tail)}: first {kinds['first']}, later hit {kinds['hit']}, "
            f"later miss {kinds['miss']} ({moved} moved)",
            "  per 10 s: " + " ".join(f"{w}s:{n}" for w, n in sorted(by_window.items())),
            "  per worker: " + " ".join(f"{w}:{n}" for w, n in sorted(by_worker.items())),
            f"  hot windows: {crowded} with >= {hot} sends to one worker, {missing} with >= 3 misses",
            "  first 10 s: sent " + " ".join(f"{w}:{n}" for w, n in zip(workers, opening_row))
            + f", busiest / mean {max(opening_row, default=0) / max(opening_mean, 1e-9):.2f}",
            f"  p99 of the requests sent in the first 10 s {p99(early)}, from 10 s on {p99(later)}",
            f"  full batch (>= {batch} in flight at send): {len(full)} sent, first {full_kinds['first']}, "
            f"later {full_kinds['hit'] + full_kinds['miss']}; {full_tail} of the slowest {len(tail)}",
        ]
        + (windows_by_worker(answered, tail, start) if per_window else [])
    )


def split_at_10s(answered, start):
    """TTFTs of the answered requests sent in the run's first 10 s, and of those sent after."""
    early = [r["ttft_ms"] for r, _, _ in answered if r["sent_ms"] - start < 10_000]
    later = [r["ttft_ms"] for r, _, _ in answered if r["sent_ms"] - start >= 10_000]
    return early, later


def p99(values):
    """The p99 of `values` (ms) as text, the same rank rule as the run's: the slowest 1 %."""
    if not values:
        return "-"
    ordered = sorted(values, reverse=True)
    return f"{ordered[max(1, len(ordered) // 100) - 1]:.1f} ms"


def windows_by_worker(answered, tail, start):
    """Per 10 s and worker: requests sent, uncached prompt ktokens, requests in the tail."""
    workers = sorted({r["worker"] for r, _, _ in answered})
    slowest = {id(r) for r, _, _ in tail}
    sends, uncached, slow = Counter(), Counter(), Counter()
    for request, _, _ in answered:
        key = (int((request["sent_ms"] - start) / 10_000) * 10, request["worker"])
        sends[key] += 1
        prompt = request.get("prompt_tokens") or 0
        uncached[key] += max(prompt - (request.get("cached_tokens") or 0), 0)
        slow[key] += id(request) in slowest
    lines = ["  per 10 s, " + " / ".join(workers) + ": sends | uncached ktok | in the tail"]
    for window in sorted({w for w, _ in sends}):
        row = [sends[(window, w)] for w in workers]
        thousands = [uncached[(window, w)] / 1000 for w in workers]
        tail_row = [slow[(window, w)] for w in workers]
        lines.append(
            f"  {window:3d}s  " + " ".join(f"{n:4d}" for n in row)
            + " | " + " ".join(f"{k:4.0f}" for k in thousands)
            + " | " + " ".join(f"{n:2d}" for n in tail_row)
        )
    return lines


def pooled(paths):
    """The p99 over every answered request of `paths`, all, first 10 s and after."""
    early, later = [], []
    for path in paths:
        with open(path) as trace:
            sent = [json.loads(line) for line in trace if line.strip()]
        if not sent:
            continue
        run_early, run_later = split_at_10s(classify(sent), min(r["sent_ms"] for r in sent))
        early += run_early
        later += run_later
    every = early + later
    return (
        f"pooled over {len(paths)} runs, {len(every)} answered: p99 {p99(every)}; "
        f"sent in the first 10 s {p99(early)}, from 10 s on {p99(later)}"
    )


def main(argv):
    hot, batch, per_window, pool = 14, 8, False, False
    while argv and argv[0] in ("--hot", "--batch", "--windows", "--pooled"):
        if argv[0] == "--windows":
            per_window, argv = True, argv[1:]
        elif argv[0] == "--pooled":
            pool, argv = True, argv[1:]
        elif len(argv) >= 2 and argv[0] == "--hot":
            hot, argv = int(argv[1]), argv[2:]
        elif len(argv) >= 2:
            batch, argv = int(argv[1]), argv[2:]
        else:
            argv = []
    if not argv:
        print(__doc__)
        return 2
    if pool:
        print(pooled(argv))
        return 0
    for path in argv:
        print(analyse(path, hot, per_window, batch))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
