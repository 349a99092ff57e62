#!/usr/bin/env python3
"""A fleet_affinity run minute by minute, against one replica's run of the same seed.

A 60-s run of replicas that share nothing is mostly their first minute, in which each
replica's share estimates still differ; a five-minute run shows whether the gap closes. From
the load tool's traces (`--trace-out`; fleet_affinity.sh keeps them with FIG_KEEP_WORK=1)
this prints, per WINDOW seconds of each run (by send time): the requests answered, the hit
rate (cached / prompt tokens), the TTFT p99, and for every trace after the first their ratio
to the first trace's same window (the first is the baseline, normally one replica). A
request that got no answer counts in `unanswered`.

Usage: fleet_affinity_minutes.py [--window SECONDS] BASELINE_TRACE TRACE [TRACE ...]"""

import json
import sys

sys.dont_write_bytecode = True
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from fleet_affinity_trace import quantile  # noqa: E402


def windows(path, window_ms):
    """Per window index: (answered, unanswered, prompt tokens, cached tokens, TTFTs)."""
    with open(path) as trace:
        sent = [json.loads(line) for line in trace if line.strip()]
    if not sent:
        return {}
    start = min(r["sent_ms"] for r in sent)
    out = {}
    for request in sent:
        index = int((request["sent_ms"] - start) // window_ms)
        answered, unanswered, prompt, cached, ttfts = out.get(index, (0, 0, 0, 0, []))
        if request.get("ttft_ms") is None:
            unanswered += 1
        else:
            answered += 1
            prompt += request.get("prompt_tokens") or 0
            cached += request.get("cached_tokens") or 0
            ttfts.append(request["ttft_ms"])
        out[index] = (answered, unanswered, prompt, cached, ttfts)
    return out


def ratio(value, base):
    if value is None or not base:
        return "–"
    return f"{value / base:.3f}"


def main(argv):
    window_s = 60.0
    if argv[:1] == ["--window"]:
        window_s = float(argv[1])
        argv = argv[2:]
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    runs = [(Path(path).name, windows(path, window_s * 1000.0)) for path in argv]
    base_name, base = runs[0]
    print(f"baseline {base_name}, windows of {window_s:g} s")
    for name, run in runs:
        print(name)
        print("  from s  answered  unanswered  hit     ttft p99 ms  hit × base  p99 × base")
        for index in sorted(run):
            answered, unanswered, prompt, cached, ttfts = run[index]
            hit = cached / prompt if prompt else None
            tail = quantile(ttfts, 0.99)
            base_hit, base_tail = None, None
            if index in base:
                _, _, b_prompt, b_cached, b_ttfts = base[index]
                base_hit = b_cached / b_prompt if b_prompt else None
                base_tail = quantile(b_ttfts, 0.99)
            print(
                f"  {index * window_s:6g}  {answered:8d}  {unanswered:10d}  "
                f"{hit if hit is not None else float('nan'):.3f}  "
                f"{tail if tail is not None else float('nan'):11.1f}  "
                f"{ratio(hit, base_hit):>10}  {ratio(tail, base_tail):>10}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
