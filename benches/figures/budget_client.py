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


def run(args):
    targets = args.targets.split(",")
    rng = random.Random(args.seed)
    lock = threading.Lock()
    counts = collections.Counter()
    tokens_by_second = collections.Counter()
    per_target = collections.Counter()
    served = [0]
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
        status, code, tokens, index, _ = one_request(targets, pick, args.key, body, args.timeout)
        second = int(time.monotonic() - started)
        with lock:
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
        "| case | budget | served to clients | share | 200 | 429 | 503 | other | spend per replica (ledger, applied) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for case in cases:
        s = case["client"]
        by_status = collections.Counter()
        for outcome, n in s["outcomes"].items():
            by_status[outcome.split(" ")[0]] += n
        other = sum(n for status, n in by_status.items() if status not in ("200", "429", "503"))
        spend = ", ".join(str(v) for v in case["spent_per_replica"])
        lines.append(
            f"| {case['name']} | {case['budget']} | {s['served_tokens']} | "
            f"{s['served_tokens'] / case['budget']:.3f} | {by_status['200']} | {by_status['429']} | "
            f"{by_status['503']} | {other} | {spend} |"
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
