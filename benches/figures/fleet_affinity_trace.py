#!/usr/bin/env python3
"""Where a fleet_affinity run's TTFT went, from the load tool's trace (`--trace-out`): TTFT
quantiles of first and later turns, per worker, and of the slowest 1 % with what the worker
was doing when they were sent (requests in flight on it, counted from every request's send
time and end-to-end time), plus how often a conversation's turn left the worker of its
previous turn. Usage: fleet_affinity_trace.py TRACE_JSONL OUT_JSON [MAX_RUNNING]."""

import bisect
import json
import sys
from collections import defaultdict


def quantile(values, q):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def top_decile(n):
    """How many of n values the slowest tenth holds (rounded up)."""
    return -(-n // 10)


def summary(values):
    return {"n": len(values), "p50": quantile(values, 0.5), "p90": quantile(values, 0.9),
            "p99": quantile(values, 0.99), "max": max(values) if values else None}


def main(trace_path, out_path, max_running=8):
    done, ttfts = [], []
    with open(trace_path) as trace:
        for line in trace:
            if not line.strip():
                continue
            sent = json.loads(line)
            if sent.get("ttft_ms") is None:
                continue
            # A router that names no worker (SMG) still has its latency measured.
            ttfts.append(sent["ttft_ms"])
            if sent.get("worker") is None:
                continue
            messages = sent["messages"]
            users = sum(1 for m in messages if m["role"] == "user")
            opening = json.dumps(messages[:2])
            done.append({
                "sent": sent["sent_ms"], "end": sent["sent_ms"] + sent.get("e2e_ms", 0.0),
                "ttft": sent["ttft_ms"], "worker": sent["worker"], "turn": users,
                "target": sent["target"], "conversation": opening,
                "uncached": (sent.get("prompt_tokens") or 0) - (sent.get("cached_tokens") or 0),
            })
    # In flight on each worker at each send: sends before minus ends before.
    by_worker = defaultdict(list)
    for request in done:
        by_worker[request["worker"]].append(request)
    starts = {w: sorted(r["sent"] for r in rs) for w, rs in by_worker.items()}
    ends = {w: sorted(r["end"] for r in rs) for w, rs in by_worker.items()}
    for request in done:
        w = request["worker"]
        request["in_flight"] = (bisect.bisect_left(starts[w], request["sent"])
                                - bisect.bisect_right(ends[w], request["sent"]))
    p99 = quantile(ttfts, 0.99)
    slow = [r for r in done if p99 is not None and r["ttft"] >= p99]
    moves, later = 0, 0
    last_worker = {}
    for request in sorted(done, key=lambda r: r["sent"]):
        previous = last_worker.get(request["conversation"])
        if request["turn"] > 1 and previous is not None:
            later += 1
            moves += previous != request["worker"]
        last_worker[request["conversation"]] = request["worker"]
    result = {
        "requests": len(done),
        "ttft_ms": summary(ttfts),
        "first_turn_ttft_ms": summary([r["ttft"] for r in done if r["turn"] == 1]),
        "later_turn_ttft_ms": summary([r["ttft"] for r in done if r["turn"] > 1]),
        "per_worker": {
            w: {"requests": len(rs), "ttft_ms": summary([r["ttft"] for r in rs]),
                "mean_in_flight_at_send": sum(r["in_flight"] for r in rs) / len(rs),
                "sends_at_or_above_max_running": sum(r["in_flight"] >= max_running for r in rs)}
            for w, rs in sorted(by_worker.items())
        },
        "slowest_1pct": {
            "n": len(slow),
            "later_turns": sum(r["turn"] > 1 for r in slow),
            "mean_in_flight_at_send": sum(r["in_flight"] for r in slow) / max(1, len(slow)),
            "at_or_above_max_running": sum(r["in_flight"] >= max_running for r in slow),
            "mean_uncached_tokens": sum(r["uncached"] for r in slow) / max(1, len(slow)),
            # Seconds into the run at which they were sent: a burst in one or two seconds
            # on every worker is the machine stalling, not placement.
            "sent_s": sorted(round((r["sent"] - min(d["sent"] for d in done)) / 1000.0, 1) for r in slow),
            "by_worker": dict(sorted(
                ((w, sum(r["worker"] == w for r in slow)) for w in by_worker), key=lambda x: x[0])),
        },
        "all_mean_in_flight_at_send": sum(r["in_flight"] for r in done) / max(1, len(done)),
        "all_sends_at_or_above_max_running": (
            sum(r["in_flight"] >= max_running for r in done) if done else None),
        "later_turns_seen_after_a_previous": later,
        "later_turns_on_another_worker": moves if done else None,
        # The slowest tenth, so the renderer can take one p99 over every seed's requests of a
        # case: a 60-s run's p99 rests on ~36 requests and swings by ±10 % between runs.
        "ttft_top_decile_ms": [round(t, 2) for t in sorted(ttfts, reverse=True)[:top_decile(len(ttfts))]],
    }
    with open(out_path, "w") as out:
        json.dump(result, out, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 8)
