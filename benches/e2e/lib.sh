# Shell helpers shared by the benches/e2e scripts (nginx_upstream.sh, overhead.sh,
# callgrind.sh); sourced, not run. The sourcing script sets LOG_TAG, OUT_DIR and BASE_PORT
# first, and BODY (the chat completion `wait_ready` sends) before it waits for anything.
#
# Every process started through `start` runs in its own session (process group) and is killed
# on exit; every wait has a time limit.

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

log() { printf '[%s] %s\n' "$LOG_TAG" "$*" >&2; }
die() { log "error: $*"; exit 2; }

# ---------------------------------------------------------------- process handling
PIDS=()
declare -A PGID=()   # name -> process group (= session) id
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
    for _ in $(seq 50); do
        local alive=0
        for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [[ $alive == 0 ]] && break
        sleep 0.1
    done
    for pid in "${PIDS[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# pinned CPUS CMD...: CMD under `taskset -c CPUS` when CPUS is set.
pinned() {
    local cpus=$1; shift
    if [[ -n $cpus ]]; then taskset -c "$cpus" "$@"; else "$@"; fi
}

# start NAME CPUS CMD...: CMD (pinned to CPUS when set) in a new session, output to
# $OUT_DIR/NAME.log; its id goes to PGID[NAME] and LAST_PID.
start() {
    local name=$1 cpus=$2; shift 2
    setsid bash -c 'cpus=$1; shift; if [[ -n $cpus ]]; then exec taskset -c "$cpus" "$@"; else exec "$@"; fi' \
        _ "$cpus" "$@" >"$OUT_DIR/$name.log" 2>&1 &
    LAST_PID=$!
    PIDS+=("$LAST_PID")
    PGID[$name]=$LAST_PID
}

# ---------------------------------------------------------------- ports
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# pick_port VAR: sets VAR to the next loopback port from BASE_PORT on that nobody listens on.
pick_port() {
    NEXT_PORT=${NEXT_PORT:-$BASE_PORT}
    while port_in_use "$NEXT_PORT"; do NEXT_PORT=$((NEXT_PORT + 1)); done
    printf -v "$1" '%d' "$NEXT_PORT"
    NEXT_PORT=$((NEXT_PORT + 1))
}

# wait_ready NAME URL: until a chat completion (BODY) to URL answers 200; dies when NAME's
# process exits or after READY_TRIES tries a tenth of a second apart (each bounded by
# READY_TIMEOUT seconds).
READY_TRIES=${READY_TRIES:-600}
READY_TIMEOUT=${READY_TIMEOUT:-2}
wait_ready() {
    local name=$1 url=$2 code=000
    for _ in $(seq "$READY_TRIES"); do
        kill -0 "${PGID[$name]}" 2>/dev/null || { tail -n 30 "$OUT_DIR/$name.log" >&2; die "$name exited"; }
        code=$(curl -s -o /dev/null -w '%{http_code}' -m "$READY_TIMEOUT" \
            -H 'content-type: application/json' -d "$BODY" "$url/v1/chat/completions" || true)
        [[ $code == 200 ]] && { log "$name ready at $url"; return 0; }
        sleep 0.1
    done
    tail -n 30 "$OUT_DIR/$name.log" >&2
    die "$name not answering 200 at $url (last status: $code)"
}

# start_nginx CPUS WORKERS: nginx answering every chat completion instantly
# (nginx/upstream.conf.template) on a free port, WORKERS worker processes; sets UPSTREAM.
start_nginx() {
    local cpus=$1 workers=$2 port
    pick_port port
    mkdir -p "$OUT_DIR/nginx"
    sed -e "s#@PORT@#$port#" -e "s#@PREFIX@#$OUT_DIR/nginx#g" -e "s#@WORKERS@#$workers#" \
        "$E2E_DIR/nginx/upstream.conf.template" >"$OUT_DIR/nginx/nginx.conf"
    start nginx "$cpus" nginx -c "$OUT_DIR/nginx/nginx.conf" -p "$OUT_DIR/nginx" \
        -e "$OUT_DIR/nginx/error.log"
    UPSTREAM="http://127.0.0.1:$port"
    wait_ready nginx "$UPSTREAM"
}

# ---------------------------------------------------------------- a quiet machine
TICK=$(getconf CLK_TCK)
# shellcheck source=benches/host.sh
source "$(dirname "${BASH_SOURCE[0]}")/../host.sh"
# machine_busy: clock ticks the machine has been busy (user, nice, system, irq, softirq, steal).
machine_busy() { busy_ticks | cut -d' ' -f2; }
# wait_quiet: until fewer than 0.25 cores are busy over one second, at most QUIET_WAIT seconds
# (0: do not wait); logs when the machine never was.
wait_quiet() {
    local start=$SECONDS b0 b1 cores
    [[ ${QUIET_WAIT:-0} == 0 ]] && return 0
    while :; do
        b0=$(machine_busy); sleep 1; b1=$(machine_busy)
        cores=$(awk -v d="$((b1 - b0))" -v t="$TICK" 'BEGIN { printf "%.2f", d / t }')
        awk -v c="$cores" 'BEGIN { exit !(c < 0.25) }' && return 0
        if ((SECONDS - start >= QUIET_WAIT)); then
            log "machine still busy ($cores cores) after ${QUIET_WAIT}s, measuring anyway"
            return 0
        fi
    done
}

# secs DURATION: whole seconds of a wrk-style duration (`10s`, `8`).
secs() { local d=$1; d=${d%s}; echo "${d%.*}"; }
