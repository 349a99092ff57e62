#!/usr/bin/env python3
"""How far apart the system-prompt share estimates of replicas fed at random are, over a
fleet_affinity run, from the load tool's trace (`--trace-out`; fleet_affinity.sh keeps it with
FIG_KEEP_WORK=1). Replicas that share nothing agree on a later turn's worker only through
their prompt-group plans, which each builds from its own estimates; where the estimates
differ, a turn sent to a replica that missed the previous one moves (see
fleet_affinity_moves.py for the moves themselves).

Each replica's estimate is rebuilt as the gateway makes it: every turn a request's history
shows of each conversation the replica met, decayed with a 120-s half-life. Printed per run:
the mean total-variation distance over pairs of replicas at 10, 20, 40 and 60 s (0 with one
replica). A conversation is its system message plus its first user message, as the gateway
names an anonymous one.

Usage: fleet_affinity_estimates.py TRACE_JSONL [TRACE_JSONL ...]"""

import itertools
import json
import sys

sys.dont_write_bytecode = True
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from fleet_affinity_moves import opening  # noqa: E402

HALF_LIFE_MS = 120_000.0
ESTIMATE_AT_S = (10, 20, 40, 60)


def user_turns(messages):
    return sum(1 for m in messages if m["role"] == "user")


def estimate_spread(sent, start, at_s):
    """Mean pairwise total-variation distance between the replicas' share estimates."""
    replicas = sorted({r["target"] for r in sent})
    shares = {replica: Counter() for replica in replicas}
    counted = {replica: {} for replica in replicas}
    for request in sent:
        at = request["sent_ms"] - start
        if at > at_s * 1000:
            break
        conversation = opening(request["messages"])
        replica = request["target"]
        turns = user_turns(request["messages"])
        new_turns = turns - counted[replica].get(conversation, 0)
        if new_turns > 0:
            counted[replica][conversation] = turns
            shares[replica][conversation[0]] += new_turns * 2 ** (at / HALF_LIFE_MS)

    def distance(a, b):
        total_a, total_b = sum(a.values()) or 1.0, sum(b.values()) or 1.0
        return 0.5 * sum(abs(a[k] / total_a - b[k] / total_b) for k in set(a) | set(b))

    pairs = [distance(shares[i], shares[j]) for i, j in itertools.combinations(replicas, 2)]
    return sum(pairs) / len(pairs) if pairs else 0.0


def analyse(path):
    with open(path) as trace:
        sent = [json.loads(line) for line in trace if line.strip()]
    sent.sort(key=lambda r: r["sent_ms"])
    start = sent[0]["sent_ms"]
    spread = ", ".join(f"{s} s {estimate_spread(sent, start, s):.3f}" for s in ESTIMATE_AT_S)
    print(f"{Path(path).name}: estimates apart (mean pairwise TV): {spread}")


def main(paths):
    if not paths:
        print(__doc__)
        return 2
    for path in paths:
        analyse(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
