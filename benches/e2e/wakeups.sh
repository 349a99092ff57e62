#!/usr/bin/env bash
# Scheduler cost per request of the gateway: for each binary, in front of nginx answering
# instantly (benches/e2e/nginx/upstream.conf.template), a fixed wrk run (closed loop) and, per
# gateway thread, the context switches (voluntary: the thread blocked or parked; involuntary:
# the kernel preempted it) and CPU time over the run, read from /proc/<pid>/task/*/ before and
# after, divided by the requests wrk completed. Then, unless STRACE=0, a shorter run under
# `strace -c -f` for the system calls per request. The system calls per request move little
# with what else the machine runs; the context switches do (a worker that runs dry parks, so
# the switches per request depend on how busy the process is): compare builds or settings in
# one run, and repeat it.
#
# Usage:  bash benches/e2e/wakeups.sh BINARY [BINARY...]
#   (each BINARY a `switchyard` executable, optionally prefixed with environment assignments:
#    'TOKIO_WORKER_THREADS=1 /tmp/x/switchyard'; prints a table per binary and writes them to
#    $OUT_DIR/wakeups.txt)
#
# Settings (environment):
#   DURATION     measured wrk run (seconds)                                [5]
#   CONNECTIONS  wrk -c                                                    [16]
#   WRK_THREADS  wrk -t                                                    [2]
#   STRACE       1: also count system calls per request under strace       [1]
#   STRACE_SECS  length of the strace run                                  [3]
#   PIN_SERVER   CPU list for nginx and the gateway; PIN_LOAD for wrk      [unpinned]
#   BASE_PORT    first loopback port tried                                 [21700]
#   OUT_DIR      where logs go                                             [mktemp -d]
set -euo pipefail
DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-16}
WRK_THREADS=${WRK_THREADS:-2}
STRACE=${STRACE:-1}
STRACE_SECS=${STRACE_SECS:-3}
PIN_SERVER=${PIN_SERVER:-}
PIN_LOAD=${PIN_LOAD:-}
BASE_PORT=${BASE_PORT:-21700}
OUT_DIR=${OUT_DIR:-$(mktemp -d /tmp/switchyard-wakeups.XXXXXX)}
mkdir -p "$OUT_DIR"
LOG_TAG=wakeups
# shellcheck source=benches/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $# -ge 1 ]] || die "usage: $0 BINARY [BINARY...]"
for tool in nginx wrk curl python3; do command -v "$tool" >/dev/null || die "$tool missing"; done
[[ $STRACE == 0 ]] || command -v strace >/dev/null || die "strace missing (STRACE=0 to skip)"

MODEL=bench-model
BODY="{\"model\":\"$MODEL\",\"messages\":[{\"role\":\"user\",\"content\":\"Say hello to the benchmark.\"}],\"max_tokens\":1,\"stream\":false}"

# snapshot PID: one line per thread: tid name voluntary involuntary utime+stime (ticks).
snapshot() {
    local pid=$1 task
    for task in /proc/"$pid"/task/*; do
        [[ -r $task/status ]] || continue
        awk -v tid="${task##*/}" -v name="$(tr ' ' '_' <"$task/comm")" \
            -v ticks="$(awk '{print $14 + $15}' "$task/stat" 2>/dev/null || echo 0)" '
            /^voluntary_ctxt_switches/ {v = $2}
            /^nonvoluntary_ctxt_switches/ {n = $2}
            END {print tid, name, v, n, ticks}' "$task/status" 2>/dev/null || true
    done
}

# wrk_run SECONDS URL OUT: a closed-loop wrk run; prints the requests it completed.
wrk_run() {
    MODEL=$MODEL pinned "$PIN_LOAD" timeout $(($1 + 30)) wrk -t "$WRK_THREADS" -c "$CONNECTIONS" \
        -d "${1}s" --latency -s "$E2E_DIR/chat.lua" "$2/v1/chat/completions" >"$3" 2>&1 \
        || { cat "$3" >&2; die "wrk failed"; }
    local line
    line=$(grep '^RESULT ' "$3") || die "no RESULT line in $3"
    grep -q ' non2xx=0 ' <<<"$line" && grep -q ' errors=0$' <<<"$line" || die "failures: $line"
    sed -E 's/.* requests=([0-9]+) .*/\1/' <<<"$line"
}

start_nginx "$PIN_SERVER" 1
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); load: $(cut -d' ' -f1-3 /proc/loadavg);" \
        "DURATION=${DURATION}s CONNECTIONS=$CONNECTIONS WRK_THREADS=$WRK_THREADS" \
        "PIN_SERVER='$PIN_SERVER' PIN_LOAD='$PIN_LOAD'"
} | tee "$OUT_DIR/wakeups.txt"

index=0
for spec in "$@"; do
    index=$((index + 1))
    read -r -a words <<<"$spec"
    bin=${words[-1]}
    [[ -x $bin ]] || die "$bin is not executable"
    pick_port PORT
    url="http://127.0.0.1:$PORT"
    start "gateway.$index" "$PIN_SERVER" env "${words[@]:0:${#words[@]}-1}" "$bin" serve \
        --host 127.0.0.1 --port "$PORT" --policy round_robin --worker-url "$UPSTREAM"
    wait_ready "gateway.$index" "$url"
    # `start` execs through taskset and env: the session leader is the gateway itself.
    gw=${PGID[gateway.$index]}
    [[ $(cat "/proc/$gw/comm") == switchyard* ]] || die "process $gw is not the gateway"
    wrk_run 2 "$url" "$OUT_DIR/warmup.$index.txt" >/dev/null
    snapshot "$gw" >"$OUT_DIR/before.$index"
    requests=$(wrk_run "$DURATION" "$url" "$OUT_DIR/wrk.$index.txt")
    snapshot "$gw" >"$OUT_DIR/after.$index"
    {
        echo
        echo "$spec: $requests requests in ${DURATION}s ($(grep '^RESULT' "$OUT_DIR/wrk.$index.txt" | sed -E 's/.*rps=([0-9.]+) p50_us=([0-9]+) p99_us=([0-9]+).*/rps \1, p50 \2 us, p99 \3 us/'))"
        python3 - "$OUT_DIR/before.$index" "$OUT_DIR/after.$index" "$requests" "$(getconf CLK_TCK)" <<'PY'
import sys
def load(path):
    out = {}
    for line in open(path):
        tid, name, vol, invol, ticks = line.split()
        out[tid] = (name, int(vol), int(invol), int(ticks))
    return out
before, after, requests, tck = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rows, tot = [], [0, 0, 0]
for tid, (name, vol, invol, ticks) in after.items():
    b = before.get(tid, (name, 0, 0, 0))
    d = (vol - b[1], invol - b[2], ticks - b[3])
    tot = [t + x for t, x in zip(tot, d)]
    rows.append((name, tid, *d))
print("| thread | tid | voluntary cs / 1k req | involuntary cs / 1k req | CPU us / req |")
print("|---|---|---:|---:|---:|")
for name, tid, vol, invol, ticks in sorted(rows, key=lambda r: -(r[2] + r[3])):
    if vol or invol or ticks:
        print("| %s | %s | %.1f | %.1f | %.1f |" % (name, tid, vol * 1e3 / requests, invol * 1e3 / requests, ticks * 1e6 / tck / requests))
print("| all %d threads | | %.1f | %.1f | %.1f |" % (len(after), tot[0] * 1e3 / requests, tot[1] * 1e3 / requests, tot[2] * 1e6 / tck / requests))
PY
    } | tee -a "$OUT_DIR/wakeups.txt"
    if [[ $STRACE != 0 ]]; then
        strace -c -f -q -p "$gw" -o "$OUT_DIR/strace.$index.txt" &
        spid=$!
        sleep 1
        requests=$(wrk_run "$STRACE_SECS" "$url" "$OUT_DIR/wrk-strace.$index.txt")
        kill -INT "$spid" 2>/dev/null || true
        wait "$spid" 2>/dev/null || true
        {
            echo "system calls per request under strace ($requests requests):"
            awk -v n="$requests" '$1 ~ /^[0-9.]+$/ && NF >= 5 {
                    calls = $4; name = $NF; printf "  %-16s %.2f\n", name, calls / n }
                ' "$OUT_DIR/strace.$index.txt" | sort -k2 -rn | head -n 12
        } | tee -a "$OUT_DIR/wakeups.txt"
    fi
    kill -TERM -- "-${PGID[gateway.$index]}" 2>/dev/null || true
    wait "${PGID[gateway.$index]}" 2>/dev/null || true
done
