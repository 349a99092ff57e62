#!/usr/bin/env python3
"""Figures on real llama.cpp engines: gateway overhead versus direct, TTFT with cache_aware
versus round_robin on repeated prefixes, and failover time when an engine is SIGKILLed.

Usage: python3 benches/e2e/llama/figures.py [--gateway target/debug/switchyard] [--rounds N]
       [--prefixes N] [--repeats N] [--prefix-notes N] [--failover-requests N]
Needs `benches/e2e/llama/build.sh` to have run (SWITCHYARD_LLAMA_DIR like there). Uses only
loopback ports FIG_PORT_BASE..FIG_PORT_BASE+9 (default 26000). Prints a markdown section.
Every loop is bounded; every process it starts is stopped on exit.
"""
import argparse
import http.client
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time

DIR = os.environ.get("SWITCHYARD_LLAMA_DIR", os.path.expanduser("~/.cache/switchyard-llama"))
SERVER = os.environ.get("SWITCHYARD_LLAMA_SERVER", os.path.join(DIR, "bin/llama-server"))
MODEL_FILE = os.environ.get(
    "SWITCHYARD_LLAMA_MODEL", os.path.join(DIR, "models/smollm2-135m-instruct.gguf")
)
BASE = int(os.environ.get("FIG_PORT_BASE", "26000"))
MODEL = "smollm2"
ADMIN_KEY = "figures-admin-key"
PROCS = []


def request(port, method, path, body=None, headers=None, timeout=120):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = json.dumps(body).encode() if body is not None else None
    hdrs = {"content-type": "application/json"}
    hdrs.update(headers or {})
    conn.request(method, path, body=data, headers=hdrs)
    response = conn.getresponse()
    payload = response.read()
    conn.close()
    return response.status, payload


def ttft_stream(port, body):
    """Seconds to the first content delta of a streamed chat, and the final usage."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    started = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(),
                 headers={"content-type": "application/json"})
    response = conn.getresponse()
    first, usage, worker = None, None, response.getheader("x-switchyard-worker")
    while True:
        line = response.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        event = json.loads(line[6:])
        if first is None and event.get("choices") and event["choices"][0]["delta"].get("content"):
            first = time.perf_counter() - started
        if event.get("usage"):
            usage = event["usage"]
    conn.close()
    return first, usage, worker


def start_llama(port):
    proc = subprocess.Popen(
        [SERVER, "-m", MODEL_FILE, "--host", "127.0.0.1", "--port", str(port), "--alias", MODEL,
         "-c", "4096", "-np", "2", "-t", "1", "--metrics"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    PROCS.append(proc)
    wait_ready(port, "/health")
    return proc


def start_gateway(binary, policy, workers):
    # A CPU engine prefills a few tens of tokens a second, far below the first-byte
    # deadline's default (GPU) pace: say so, or long prompts miss their deadline and retry.
    lines = [f"[server]\nhost = \"127.0.0.1\"\nport = {BASE}\n",
             f"[routing]\npolicy = \"{policy}\"\n",
             "[upstream.first_byte]\ncold_prefill_tokens_per_second = 10\n"]
    for name, port in workers:
        lines.append(f"[[workers]]\nname = \"{name}\"\nurl = \"http://127.0.0.1:{port}\"\n"
                     "engine = \"llamacpp\"\n")
    config = os.path.join(tempfile.mkdtemp(prefix="switchyard-llama-fig-"), "gateway.toml")
    with open(config, "w") as f:
        f.write("\n".join(lines))
    args = [binary, "serve", "--config", config]
    env = dict(os.environ, SWITCHYARD_ADMIN_API_KEY=ADMIN_KEY, RUST_LOG="warn")
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    PROCS.append(proc)
    wait_ready(BASE, "/health")
    # Until discovery, a worker may serve anything; wait for the models to be known.
    deadline = time.time() + 30
    while time.time() < deadline:
        workers_now = admin_workers()
        if workers_now and all(w.get("models") == [MODEL] and w.get("healthy") for w in workers_now):
            return proc
        time.sleep(0.1)
    raise SystemExit("gateway workers never became ready")


def admin_workers():
    try:
        status, body = request(BASE, "GET", "/admin/workers",
                               headers={"authorization": f"Bearer {ADMIN_KEY}"}, timeout=5)
    except OSError:
        return None
    return json.loads(body)["workers"] if status == 200 else None


def wait_ready(port, path, limit=120):
    deadline = time.time() + limit
    while time.time() < deadline:
        try:
            status, _ = request(port, "GET", path, timeout=2)
            if status == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"port {port} never answered {path}")


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def pct(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def overhead(binary, rounds):
    """Same request, alternately direct to the engine and through the gateway."""
    a = start_llama(BASE + 1)
    gw = start_gateway(binary, "round_robin", [("a", BASE + 1)])
    body = {"model": MODEL, "max_tokens": 1, "temperature": 0,
            "messages": [{"role": "user", "content": "Say yes."}]}
    for _ in range(3):  # warm the prompt cache and the connection pools
        request(BASE + 1, "POST", "/v1/chat/completions", body)
        request(BASE, "POST", "/v1/chat/completions", body)
    direct, gateway = [], []
    for _ in range(rounds):
        for port, sink in ((BASE + 1, direct), (BASE, gateway)):
            started = time.perf_counter()
            status, _ = request(port, "POST", "/v1/chat/completions", body)
            assert status == 200, status
            sink.append((time.perf_counter() - started) * 1000)
    stop(gw)
    stop(a)
    return direct, gateway


def prefix_ttft(binary, policy, prefixes, repeats, notes, seed, conversation=False):
    """Streams questions over shared long prefixes; TTFT per request and cached-token share.
    `conversation`: each prefix opens a chat whose later questions are its next turns (the
    history resent), rather than a new chat that shares only the system prompt."""
    a, b = start_llama(BASE + 1), start_llama(BASE + 2)
    gw = start_gateway(binary, policy, [("a", BASE + 1), ("b", BASE + 2)])
    rng = random.Random(seed)
    topics = ["rivers", "volcanoes", "compilers", "bridges", "orchards", "glaciers", "trains",
              "lighthouses", "deserts", "violins", "tides", "beehives"][:prefixes]
    docs = {t: " ".join(f"Note {i} about {t}: the {t} we studied were measured and described "
                        f"in detail by the survey team on day {i}." for i in range(notes))
            for t in topics}
    order = [t for t in topics for _ in range(repeats)]
    rng.shuffle(order)
    ttfts, cached, prompt, workers = [], 0, 0, {}
    history = {t: [{"role": "system", "content": docs[t]}] for t in topics}
    for n, topic in enumerate(order):
        messages = history[topic] + [
            {"role": "user", "content": f"Question {n}: summarise in one word."}]
        if conversation:
            history[topic] = messages + [{"role": "assistant", "content": "Noted."}]
        body = {"model": MODEL, "max_tokens": 2, "temperature": 0, "stream": True,
                "stream_options": {"include_usage": True}, "messages": messages}
        first, usage, worker = ttft_stream(BASE, body)
        ttfts.append(first * 1000)
        workers.setdefault(topic, set()).add(worker)
        if usage:
            prompt += usage.get("prompt_tokens", 0)
            cached += (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    for proc in (gw, a, b):
        stop(proc)
    spread = statistics.mean(len(w) for w in workers.values())
    return ttfts, (cached / prompt if prompt else 0.0), spread


def failover(binary, requests_total):
    """Sequential requests through the gateway; engine b is SIGKILLed a second in."""
    a, b = start_llama(BASE + 1), start_llama(BASE + 2)
    gw = start_gateway(binary, "round_robin", [("a", BASE + 1), ("b", BASE + 2)])
    body = {"model": MODEL, "max_tokens": 4, "temperature": 0,
            "messages": [{"role": "user", "content": "Count to three."}]}
    results, killed_at, out_after = [], None, None
    started = time.perf_counter()
    for n in range(requests_total):
        if killed_at is None and time.perf_counter() - started > 1.0:
            b.kill()
            killed_at = time.perf_counter()
        t0 = time.perf_counter()
        status, _ = request(BASE, "POST", "/v1/chat/completions", body)
        results.append((t0, status, (time.perf_counter() - t0) * 1000))
        if killed_at is not None and out_after is None:
            workers_now = admin_workers() or []
            if any(w["name"] == "b" and not w["healthy"] for w in workers_now):
                out_after = time.perf_counter() - killed_at
    while killed_at is not None and out_after is None and time.perf_counter() - killed_at < 15:
        workers_now = admin_workers() or []
        if any(w["name"] == "b" and not w["healthy"] for w in workers_now):
            out_after = time.perf_counter() - killed_at
        time.sleep(0.01)
    for proc in (gw, a):
        stop(proc)
    failed = sum(1 for _, s, _ in results if s != 200)
    around = [ms for t0, _, ms in results if killed_at and killed_at - 0.5 <= t0 <= killed_at + 3]
    return out_after, failed, len(results), max(around) if around else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gateway", default="target/debug/switchyard")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--prefixes", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    # Sentences per shared prefix (about 21 tokens each): fewer keep a slow machine bounded.
    parser.add_argument("--prefix-notes", type=int, default=24)
    parser.add_argument("--failover-requests", type=int, default=40)
    args = parser.parse_args()
    for path in (SERVER, MODEL_FILE, args.gateway):
        if not os.path.exists(path):
            print(f"SKIPPED: {path} is missing (benches/e2e/llama/build.sh; cargo build)")
            return 0
    print(f"load before: {os.getloadavg()}")
    direct, gateway = overhead(args.gateway, args.rounds)
    print("\n#### Gateway overhead vs direct (sequential, max_tokens=1, cached prompt)")
    print(f"direct  p50 {pct(direct, .5):.1f} ms  p90 {pct(direct, .9):.1f} ms  (n={len(direct)})")
    print(f"gateway p50 {pct(gateway, .5):.1f} ms  p90 {pct(gateway, .9):.1f} ms")
    print(f"overhead p50 {pct(gateway, .5) - pct(direct, .5):+.1f} ms")
    print(f"load: {os.getloadavg()}")
    print(f"\n#### TTFT on repeated prefixes ({args.prefixes} prefixes x {args.repeats},"
          f" {args.prefix_notes} notes each, 2 engines)")
    for conversation, policy in ((False, "cache_aware"), (False, "round_robin"),
                                 (True, "cache_aware"), (True, "round_robin")):
        ttfts, share, spread = prefix_ttft(args.gateway, policy, args.prefixes, args.repeats,
                                           args.prefix_notes, 7, conversation)
        workload = "conversation turns" if conversation else "new chats, shared system"
        print(f"{workload:24} {policy:12} TTFT mean {statistics.mean(ttfts):.0f} ms  p50 {pct(ttfts, .5):.0f} ms"
              f"  p90 {pct(ttfts, .9):.0f} ms  cached prompt share {share:.0%}"
              f"  engines per prefix {spread:.2f}")
        print(f"load: {os.getloadavg()}")
    out_after, failed, total, worst = failover(args.gateway, args.failover_requests)
    print("\n#### Failover on a SIGKILLed engine (sequential requests, round_robin)")
    print(f"taken out after {out_after * 1000:.0f} ms; {failed} of {total} requests failed;"
          f" slowest request around the kill {worst:.0f} ms" if out_after else
          f"not taken out; {failed} of {total} failed")
    print(f"load: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
