#!/usr/bin/env python3
"""Open-loop client for budget_utilisation.sh: Poisson arrivals at RATE req/s, each request
sent to one replica drawn uniformly at random (seeded), non-streaming, counting the tokens
the clients actually received (`usage.total_tokens` of every 200 answer) and every status and
error code. A connection refused (a killed replica) is retried once on another replica, as a
load balancer would. Writes one JSON summary.

    budget_client.py run --targets URL,URL,URL --key KEY --rate 80 --duration 50 --out F
    budget_client.py render DATA_DIR OUT_MD
"""

import argparse
import collections
import concurrent.futures
import json
import random
import sys
import threading
import time
import urllib.error
import urllib.request


def one_request(targets, rng_pick, key, body, timeout):
    """Answers (status, code, tokens, target_index, refused_connections)."""
    tried = []
    order = rng_pick
    for attempt in range(2):
        index = order[attempt % len(order)]
        tried.append(index)
        request = urllib.request.Request(
            targets[index] + "/v1/chat/completions",
            data=body,
            headers={"authorization": f"Bearer {key}", "content-type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                answer = json.loads(response.read())
                tokens = int(answer.get("usage", {}).get("total_tokens", 0))
                return response.status, "ok", tokens, index, attempt
        except urllib.error.HTTPError as error:
            try:
                code = json.loads(error.read()).get("error", {}).get("code", "?")
            except Exception:  # noqa: BLE001 - any unreadable body is just "?"
                code = "?"
            return error.code, code, 0, index, attempt
        except (ConnectionRefusedError, ConnectionResetError, urllib.error.URLError) as error:
            reason = getattr(error, "reason", error)
            if isinstance(reason, (ConnectionRefusedError, ConnectionResetError)) and attempt == 0:
                continue
            return 0, f"connection: {type(reason).__name__}", 0, index, attempt
        except Exception as error:  # noqa: BLE001 - timeouts and the like: outcome unknown
            return 0, f"client: {type(error).__name__}", 0, index, attempt
    return 0, "connection: refused twice", 0, tried[-1], 1


def percentiles(values):
    if not values:
        return {}
    ordered = sorted(values)
    pick = lambda q: round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)  # noqa: E731
    return {"p50": pick(0.5), "p99": pick(0.99), "max": round(ordered[-1], 1)}


def reserve_p99_ms(data_dir, case_name):
    """p99 of switchyard_ledger_reserve_seconds over the three replicas' metrics, as the
    upper bound of the histogram bucket it falls in (ms); None without observations."""
    buckets = collections.Counter()
    for i in range(3):
        try:
            text = open(f"{data_dir}/{case_name}.gateway-{i}.metrics.txt").read()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("switchyard_ledger_reserve_seconds_bucket{"):
                le = line.split('le="', 1)[1].split('"', 1)[0]
                buckets[float("inf") if le == "+Inf" else float(le)] += float(line.split()[-1])
    if not buckets:
        return None
    total = buckets[float("inf")]
    if total == 0:
        return None
    for le in sorted(buckets):
        if buckets[le] >= 0.99 * total:
            return le * 1000
    return None


def run(args):
    targets = args.targets.split(",")
    rng = random.Random(args.seed)
    lock = threading.Lock()
    counts = collections.Counter()
    tokens_by_second = collections.Counter()
    per_target = collections.Counter()
    served = [0]
    latencies_ms = []
    started = time.monotonic()

    def task(i, pick):
        body = json.dumps(
            {
                "model": args.model,
                # Unique per request, so nothing is answered from a cache for free.
                "messages": [{"role": "user", "content": f"budget figure request {i} " + "word " * args.prompt_words}],
                "max_tokens": args.max_tokens,
                "stream": False,
            }
        ).encode()
        sent_at = time.monotonic()
        status, code, tokens, index, _ = one_request(targets, pick, args.key, body, args.timeout)
        took_ms = (time.monotonic() - sent_at) * 1000
        second = int(time.monotonic() - started)
        with lock:
            if status == 200:
                latencies_ms.append(took_ms)
            counts[f"{status} {code}"] += 1
            per_target[f"{index} {status}"] += 1
            served[0] += tokens
            tokens_by_second[second] += tokens

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        next_at = started
        i = 0
        while True:
            next_at += rng.expovariate(args.rate)
            if next_at - started >= args.duration:
                break
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            first = rng.randrange(len(targets))
            other = (first + 1 + rng.randrange(len(targets) - 1)) % len(targets) if len(targets) > 1 else first
            pool.submit(task, i, [first, other])
            i += 1
    summary = {
        "sent": i,
        "served_tokens": served[0],
        "outcomes": dict(sorted(counts.items())),
        "per_target": dict(sorted(per_target.items())),
        "tokens_by_second": {str(k): v for k, v in sorted(tokens_by_second.items())},
        "elapsed_s": round(time.monotonic() - started, 2),
        "latency_ms_200": percentiles(latencies_ms),
    }
    with open(args.out, "w") as out:
        json.dump(summary, out, indent=1)
    print(json.dumps({k: summary[k] for k in ("sent", "served_tokens", "outcomes")}), file=sys.stderr)


def render(data_dir, out_md):
    with open(f"{data_dir}/cases.json") as f:
        cases = json.load(f)
    with open(f"{data_dir}/meta.json") as f:
        meta = json.load(f)
    lines = [
        "# Budget utilisation across three replicas",
        "",
        "Written by `benches/figures/budget_utilisation.sh`. " + meta["setup"],
        "",
        f"Started {meta['started']}, finished {meta['finished']}; load average "
        f"{meta['loadavg_start']} at the start, {meta['loadavg_end']} at the end "
        f"({meta['host']}); {meta['git']}.",
        "",
        "| case | budget | served to clients | share | over budget | 200 | 429 | 503 | other | spend per replica (ledger, applied) | latency of 200s p50 / p99 (ms) | ledger reservation p99 (ms, bucket bound) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
    ]
    for case in cases:
        s = case["client"]
        by_status = collections.Counter()
        for outcome, n in s["outcomes"].items():
            by_status[outcome.split(" ")[0]] += n
        other = sum(n for status, n in by_status.items() if status not in ("200", "429", "503"))
        spend = ", ".join(str(v) for v in case["spent_per_replica"])
        lat = s.get("latency_ms_200", {})
        reserve = reserve_p99_ms(data_dir, case.get("metrics", case["name"]))
        reserve = "–" if reserve is None else f"≤ {reserve:g}"
        lines.append(
            f"| {case['name']} | {case['budget']} | {s['served_tokens']} | "
            f"{s['served_tokens'] / case['budget']:.3f} | "
            f"{max(0, s['served_tokens'] - case['budget'], max(case['spent_per_replica']) - case['budget'])} | "
            f"{by_status['200']} | {by_status['429']} | "
            f"{by_status['503']} | {other} | {spend} | {lat.get('p50', '–')} / {lat.get('p99', '–')} | {reserve} |"
        )
    lines += ["", "Outcomes (status and error code) per case:", ""]
    for case in cases:
        lines.append(f"- {case['name']}: `{json.dumps(case['client']['outcomes'])}`")
    lines += ["", "Commands:", "", "```sh"] + meta["commands"] + ["```", ""]
    with open(out_md, "w") as f:
        f.write("\n".join(lines))


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--targets", required=True)
    r.add_argument("--key", required=True)
    r.add_argument("--rate", type=float, default=80)
    r.add_argument("--duration", type=float, default=50)
    r.add_argument("--seed", type=int, default=7)
    r.add_argument("--model", default="sim-llama")
    r.add_argument("--max-tokens", type=int, default=32)
    r.add_argument("--prompt-words", type=int, default=12)
    r.add_argument("--timeout", type=float, default=10)
    r.add_argument("--concurrency", type=int, default=64)
    r.add_argument("--out", required=True)
    d = sub.add_parser("render")
    d.add_argument("data_dir")
    d.add_argument("out_md")
    args = parser.parse_args()
    if args.cmd == "run":
        run(args)
    else:
        render(args.data_dir, args.out_md)


if __name__ == "__main__":
    main()
