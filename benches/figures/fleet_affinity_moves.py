#!/usr/bin/env python3
"""When and why a fleet_affinity run's later turns left their conversation's worker, from the
load tool's trace (`--trace-out`; fleet_affinity.sh keeps it with FIG_KEEP_WORK=1).

A conversation is its system message plus its first user message (as the gateway names an
anonymous one). A later turn *moved* when its worker differs from the previous answered
turn's. Printed: moves per 10 s of the run against the later turns sent in that window (a
cold start shows as a falling share), moves split by whether the replica that took the turn
had carried an earlier turn of the conversation (`seen`: its own prefix tree held the
conversation) or not (`unseen`: it placed the turn from its prompt-group plan alone), moves
back (`seen_to_own_last_worker`: to where the replica itself had sent its last turn of the
conversation, which another replica had since sent elsewhere; `to_a_worker_that_served_it`:
to any worker that served an earlier turn: a conversation going back and forth between
replicas whose plans disagree), and TTFT p50/p99 of moved and staying turns, with the run's
p99 with and without the moved turns.

Usage: fleet_affinity_moves.py TRACE_JSONL [TRACE_JSONL ...]"""

import json
import sys
from collections import Counter, defaultdict


def quantile(values, q):
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def opening(messages):
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    first = next((m["content"] for m in messages if m["role"] == "user"), "")
    return system, first


def analyse(path):
    with open(path) as trace:
        sent = [json.loads(line) for line in trace if line.strip()]
    start = min(r["sent_ms"] for r in sent)
    conversations = defaultdict(list)
    for request in sent:
        conversations[opening(request["messages"])].append(request)
    later, moved = Counter(), Counter()
    by_knowledge, returns = Counter(), Counter()
    ttft_moved, ttft_stayed, ttft_all, ttft_unmoved = [], [], [], []
    for turns in conversations.values():
        turns.sort(key=lambda r: r["sent_ms"])
        own_last, served, previous = {}, set(), None
        for request in turns:
            ttft = request.get("ttft_ms")
            moved_turn = False
            if request.get("worker") is not None and previous is not None:
                moved_turn = request["worker"] != previous["worker"]
            if ttft is not None:
                ttft_all.append(ttft)
                if not moved_turn:
                    ttft_unmoved.append(ttft)
            if request.get("worker") is None:
                continue
            if previous is not None:
                window = int((request["sent_ms"] - start) / 10_000) * 10
                later[window] += 1
                if moved_turn:
                    moved[window] += 1
                    seen = request["target"] in own_last
                    by_knowledge["seen" if seen else "unseen"] += 1
                    if seen and own_last[request["target"]] == request["worker"]:
                        returns["seen_to_own_last_worker"] += 1
                    if request["worker"] in served:
                        returns["to_a_worker_that_served_it"] += 1
                    if ttft is not None:
                        ttft_moved.append(ttft)
                elif ttft is not None:
                    ttft_stayed.append(ttft)
            own_last[request["target"]] = request["worker"]
            served.add(request["worker"])
            previous = request
    return {
        "trace": path,
        "conversations": len(conversations),
        "later_turns": sum(later.values()),
        "moved": sum(moved.values()),
        "moved_per_10s": [
            f"{window}s: {moved[window]}/{later[window]} = {moved[window] / later[window]:.3f}"
            for window in sorted(later)
        ],
        "moved_by_replica_knowledge": dict(by_knowledge),
        "moved_back": dict(returns),
        "ttft_ms_moved_p50_p99": [quantile(ttft_moved, 0.5), quantile(ttft_moved, 0.99)],
        "ttft_ms_stayed_p50_p99": [quantile(ttft_stayed, 0.5), quantile(ttft_stayed, 0.99)],
        "ttft_ms_p99_all_vs_without_moved": [
            quantile(ttft_all, 0.99),
            quantile(ttft_unmoved, 0.99),
        ],
    }


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for trace_path in sys.argv[1:]:
        print(json.dumps(analyse(trace_path), indent=1))
