#!/usr/bin/env python3
"""How far a fleet_affinity run's replicas disagreed on their prompt-group plans, from the
gateways' logs. Run the figure with FIG_KEEP_WORK=1 and
FIG_GATEWAY_LOG=switchyard_router::cache_aware=debug, one case per invocation (each case
writes gateway-N.log afresh in the kept work directory).

Each replica logs its plan whenever it rebuilds it: per system prompt (the first 16 bits of
its hash) the replica's estimate of the prompt's traffic share and the prompt's workers with
the units of traffic each takes. Independent replicas place a later turn whose previous turn
they did not route by that plan, so where two plans give a prompt's workers different weights,
the conversations whose weighted draw differs go to different workers on the two replicas.
Printed every STEP seconds: for each pair of replicas the share of the fleet's traffic whose
prompt's weights differ between their plans (half the L1 distance of the normalised weights,
weighted by the prompt's mean estimated share), and with -v each busy prompt's plan on every
replica.

Usage: fleet_affinity_plans.py [-v] [--step S] WORK_DIR"""

import datetime
import glob
import os
import sys


def parse_plan(body):
    plan = {}
    for part in body.split(";"):
        part = part.strip()
        if not part:
            continue
        head, rest = part.split(":", 1)
        prompt, share = head.split()
        fields = rest.split()
        weights = {fields[i]: float(fields[i + 1]) for i in range(0, len(fields) - 1, 2)}
        plan[prompt] = (float(share), weights)
    return plan


def read_plans(path):
    rows = []
    with open(path) as log:
        for line in log:
            if "prompt group plan rebuilt" not in line or "plan=" not in line:
                continue
            stamp = line.split()[0].rstrip("Z")
            at = datetime.datetime.fromisoformat(stamp[:26]).timestamp()
            rows.append((at, parse_plan(line.split("plan=", 1)[1])))
    return rows


def plan_at(rows, at):
    latest = None
    for when, plan in rows:
        if when > at:
            break
        latest = plan
    return latest


def apart(a, b):
    total = 0.0
    for prompt in set(a) | set(b):
        share_a, weights_a = a.get(prompt, (0.0, {}))
        share_b, weights_b = b.get(prompt, (0.0, {}))
        sum_a = sum(weights_a.values()) or 1.0
        sum_b = sum(weights_b.values()) or 1.0
        workers = set(weights_a) | set(weights_b)
        distance = sum(abs(weights_a.get(w, 0) / sum_a - weights_b.get(w, 0) / sum_b) for w in workers)
        total += distance / 2 * (share_a + share_b) / 2
    return total


def main(argv):
    verbose = "-v" in argv
    step = 5.0
    if "--step" in argv:
        step = float(argv[argv.index("--step") + 1])
    work = argv[-1]
    logs = sorted(glob.glob(os.path.join(work, "gateway-*.log")))
    plans = {os.path.basename(path)[: -len(".log")]: read_plans(path) for path in logs}
    plans = {name: rows for name, rows in plans.items() if rows}
    if len(plans) < 2:
        print(f"fewer than two replicas logged a plan in {work} (FIG_GATEWAY_LOG set?)")
        return 1
    names = sorted(plans)
    start = min(rows[0][0] for rows in plans.values())
    end = max(rows[-1][0] for rows in plans.values())
    pairs = [(i, j) for i in range(len(names)) for j in range(i + 1, len(names))]
    print("s   " + "  ".join(f"{names[i][-1]}-{names[j][-1]}" for i, j in pairs))
    at = start + step
    while at <= end + step:
        current = [plan_at(plans[name], at) for name in names]
        if all(plan is not None for plan in current):
            cells = "  ".join(f"{apart(current[i], current[j]):.3f}" for i, j in pairs)
            print(f"{at - start:<4.0f}{cells}")
            if verbose:
                busiest = sorted(current[0], key=lambda p: -current[0][p][0])[:5]
                for prompt in busiest:
                    views = []
                    for plan in current:
                        share, weights = plan.get(prompt, (0.0, {}))
                        slots = " ".join(f"{w}={u:.2f}" for w, u in sorted(weights.items()))
                        views.append(f"{share:.3f} {slots}")
                    print(f"    {prompt}  " + " | ".join(views))
        at += step
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
