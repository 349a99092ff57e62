#!/usr/bin/env bash
# Instructions per request of the gateway, counted by callgrind: deterministic and independent
# of what else the machine is running, so two builds can be compared on a busy machine.
#
# nginx answers every chat completion instantly (benches/e2e/nginx/upstream.conf.template);
# each binary runs `serve --policy round_robin` under `valgrind --tool=callgrind
# --instr-atstart=no`; WARMUP requests are sent uninstrumented, then instrumentation is switched
# on for REQUESTS requests over CONNECTIONS keep-alive connections, and the total instruction
# count (Ir) is divided by REQUESTS.
#
# Usage:  bash benches/e2e/callgrind.sh BINARY [BINARY...]
#   (each BINARY a `switchyard` executable; prints one line per binary, and writes them to
#    $OUT_DIR/instructions.txt)
#
# Settings (environment):
#   REQUESTS     instrumented requests per binary                        [2000]
#   WARMUP       uninstrumented requests first                           [300]
#   CONNECTIONS  keep-alive client connections                           [4]
#   BASE_PORT    first loopback port tried                               [21500]
#   OUT_DIR      where logs and callgrind files go                       [mktemp -d]
set -euo pipefail
REQUESTS=${REQUESTS:-2000}
WARMUP=${WARMUP:-300}
CONNECTIONS=${CONNECTIONS:-4}
BASE_PORT=${BASE_PORT:-21500}
OUT_DIR=${OUT_DIR:-$(mktemp -d /tmp/switchyard-callgrind.XXXXXX)}
mkdir -p "$OUT_DIR"
LOG_TAG=callgrind
# A gateway under valgrind starts and answers slowly.
READY_TRIES=1200
READY_TIMEOUT=5
# shellcheck source=benches/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $# -ge 1 ]] || die "usage: $0 BINARY [BINARY...]"
for tool in nginx valgrind callgrind_control curl python3; do
    command -v "$tool" >/dev/null || die "$tool missing"
done

BODY='{"model":"bench-model","messages":[{"role":"user","content":"Say hello to the benchmark."}],"max_tokens":1,"stream":false}'

# drive URL COUNT: COUNT chat completions over CONNECTIONS keep-alive connections; fails on
# any status other than 200.
drive() {
    python3 - "$1" "$2" "$CONNECTIONS" "$BODY" <<'PY'
import http.client, sys, threading, urllib.parse
url, count, conns, body = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
u = urllib.parse.urlparse(url)
failures = []
def run(n):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    for _ in range(n):
        c.request("POST", "/v1/chat/completions", body,
                  {"content-type": "application/json"})
        r = c.getresponse(); r.read()
        if r.status != 200:
            failures.append(r.status)
threads = [threading.Thread(target=run, args=(count // conns + (i < count % conns),))
           for i in range(conns)]
for t in threads: t.start()
for t in threads: t.join()
if failures:
    sys.exit(f"{len(failures)} requests failed, e.g. status {failures[0]}")
PY
}

start_nginx "" 1

echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); load: $(cut -d' ' -f1-3 /proc/loadavg)" \
    "REQUESTS=$REQUESTS WARMUP=$WARMUP CONNECTIONS=$CONNECTIONS" | tee "$OUT_DIR/instructions.txt"
index=0
for bin in "$@"; do
    [[ -x $bin ]] || die "$bin is not executable"
    index=$((index + 1))
    pick_port PORT
    out="$OUT_DIR/callgrind.$index.out"
    start "gateway.$index" "" valgrind --tool=callgrind --instr-atstart=no \
        --callgrind-out-file="$out" "$bin" serve --host 127.0.0.1 --port "$PORT" \
        --policy round_robin --worker-url "$UPSTREAM"
    pid=$LAST_PID
    wait_ready "gateway.$index" "http://127.0.0.1:$PORT"
    drive "http://127.0.0.1:$PORT" "$WARMUP"
    callgrind_control -i on "$pid" >/dev/null
    drive "http://127.0.0.1:$PORT" "$REQUESTS"
    callgrind_control -i off "$pid" >/dev/null
    callgrind_control -d "$pid" >/dev/null
    kill -TERM -- "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    total=0
    for f in "$out"*; do
        ir=$(awk '/^totals:/ {print $2}' "$f")
        total=$((total + ${ir:-0}))
    done
    echo "$bin: $((total / REQUESTS)) instructions per request ($total over $REQUESTS)" \
        | tee -a "$OUT_DIR/instructions.txt"
done
