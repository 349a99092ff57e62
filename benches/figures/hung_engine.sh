#!/usr/bin/env bash
# Hung engine (issue: no request dies with a worker): 4 sims behind one gateway at RATE req/s;
# HANG_AT s in, sim-1's engine hangs while its /health keeps answering 200 (sim fault
# `engine_hang`: requests are accepted and never get a byte). Per case: requests that never got
# an answer within the client timeout, the slowest answer, and (switchyard) the time until the
# gateway filtered sim-1. Cases: non-streaming and streaming; then the same two against SMG
# (`smg launch`, cache_aware) when SMG_BIN is set or `smg` is on PATH. Writes hung_engine.md.
#
# FAULT=kill runs the same scenario with `kill -9` of sim-1 instead of the hang and writes
# kill_worker_smg.md (client errors among requests sent >= 1 s after the kill).
# FAULT=stall makes sim-1's streams stop after STALL_AFTER_CHUNKS token chunks with the
# connection left open (non-streaming answers never come) and writes stalled_stream.md.
#
# Bounded: 4 cases x (DURATION + up to TIMEOUT to drain), about 6 minutes with defaults.
source "$(dirname "$0")/lib.sh"
FAULT="${FAULT:-engine_hang}"
case "$FAULT" in
engine_hang) fig_init hung_engine ;;
kill) fig_init kill_worker_smg ;;
stall) fig_init stalled_stream ;;
*) echo "FAULT must be engine_hang, kill or stall" >&2; exit 2 ;;
esac

RATE="${RATE:-40}"
DURATION="${DURATION:-30}"
HANG_AT="${HANG_AT:-15}"
TIMEOUT="${TIMEOUT:-60}"
SEED="${SEED:-13}"
MAX_TOKENS="${MAX_TOKENS:-32}"
VICTIM=sim-1
STALL_AFTER_CHUNKS="${STALL_AFTER_CHUNKS:-4}"
BASE="${FIG_PORT_BASE:-22000}"
GW_PORT=$BASE
SMG_PORT=$((BASE + 10))
SMG_METRICS_PORT=$((BASE + 11))
SIM_PORTS=($((BASE + 1)) $((BASE + 2)) $((BASE + 3)) $((BASE + 4)))
SMG_BIN="${SMG_BIN:-$(command -v smg || true)}"
require_ports "$GW_PORT" "$SMG_PORT" "$SMG_METRICS_PORT" "${SIM_PORTS[@]}"

meta rate "$RATE"
meta duration "$DURATION"
meta hang_at "$HANG_AT"
meta fault "$FAULT"
meta timeout "$TIMEOUT"
meta seed "$SEED"
meta victim "$VICTIM"
meta stall_after_chunks "$STALL_AFTER_CHUNKS"
meta bin_dir "$BIN_DIR"

# Shipped defaults: first-byte deadline (floor 1 s, cap 30 s, 3x the worker's figures or the
# cold ones),
# hung detection after 1.5 s of silence, prober 2 s x 3 successes.
CONFIG="$FIG_DATA/gateway.toml"
cat >"$CONFIG" <<'TOML'
# Shipped defaults, spelled out.
[upstream]
stream_idle_timeout_ms = 30000

[upstream.first_byte]
floor_ms = 1000
cap_ms = 30000
factor = 3.0
cold_ttft_ms = 2000
cold_tpot_ms = 50
cold_prefill_tokens_per_second = 2000

[health.hung]
active = true
quiet_ms = 1500
check_interval_ms = 250

[retry]
max_retries = 2
TOML
meta config "switchyard	$CONFIG"

start_sims() {
    local i
    FLEET_PIDS=()
    WORKER_URLS=()
    for i in 0 1 2 3; do
        start_sim "sim-$i" "${SIM_PORTS[$i]}"
        FLEET_PIDS+=("$SIM_PID")
        WORKER_URLS+=("http://127.0.0.1:${SIM_PORTS[$i]}")
    done
}

start_switchyard() {
    local flags=() i
    for i in 0 1 2 3; do flags+=(--worker-url "sim-$i=${WORKER_URLS[$i]}"); done
    start_gateway gateway "$GW_PORT" "$CONFIG" "${flags[@]}"
    FLEET_PIDS+=("$GW_PID")
    wait_routable "$GW_PORT" 4
    TARGET_PORT=$GW_PORT
}

start_smg() {
    local flags=(launch --host 127.0.0.1 --port "$SMG_PORT" --worker-urls "${WORKER_URLS[@]}"
        --policy cache_aware --prometheus-host 127.0.0.1 --prometheus-port "$SMG_METRICS_PORT")
    log_cmd "$SMG_BIN" "${flags[@]}"
    "$SMG_BIN" "${flags[@]}" >"$FIG_WORK/smg.log" 2>&1 &
    FLEET_PIDS+=("$!")
    FIG_PIDS+=("$!")
    local tries=300
    until curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$SMG_PORT/v1/models" 2>/dev/null; do
        tries=$((tries - 1))
        ((tries == 0)) && { echo "smg did not start" >&2; return 1; }
        sleep 0.2
    done
    TARGET_PORT=$SMG_PORT
}

run_case() {
    local gateway="$1" mode="$2" flags=()
    [[ "$mode" == non_streaming ]] && flags=(--no-stream)
    echo "[hung_engine] $gateway $mode" >&2
    start_sims
    "start_$gateway"
    local poll="$FIG_WORK/poll_${gateway}_$mode.jsonl" out="$FIG_DATA/${gateway}_$mode.json"
    local poller=""
    if [[ "$gateway" == switchyard ]]; then
        start_poller "$poll" "$GW_PORT"
        poller=$POLL_PID
    fi
    start_load "$out" --target "http://127.0.0.1:$TARGET_PORT" --rate "$RATE" \
        --duration "$DURATION" --workload uniform --seed "$SEED" --timeout "$TIMEOUT" \
        --max-tokens "$MAX_TOKENS" --model sim-llama --timeline "${flags[@]}"
    sleep "$HANG_AT"
    local hang_ms
    hang_ms="$(now_ms)"
    if [[ "$FAULT" == kill ]]; then
        kill -9 "${FLEET_PIDS[1]}"
        log_cmd kill -9 "<pid of $VICTIM>"
    elif [[ "$FAULT" == stall ]]; then
        local body="{\"mode\":\"stall\",\"after_chunks\":$STALL_AFTER_CHUNKS}"
        sim_fault "${SIM_PORTS[1]}" "$body"
        log_cmd curl -X POST "http://127.0.0.1:${SIM_PORTS[1]}/admin/fault" -d "$body"
    else
        sim_fault "${SIM_PORTS[1]}" '{"mode":"engine_hang"}'
        log_cmd curl -X POST "http://127.0.0.1:${SIM_PORTS[1]}/admin/fault" -d '{"mode":"engine_hang"}'
    fi
    wait_load
    local summary="-"
    if [[ -n "$poller" ]]; then
        save_metrics "$GW_PORT" "$FIG_DATA/${gateway}_$mode.metrics.txt"
        stop_pid "$poller"
        summary="$FIG_DATA/${gateway}_$mode.poll.json"
        $FIGLIB summarize-poll "$poll" "$VICTIM" >"$summary"
    fi
    meta case "$gateway	$mode	$out	$hang_ms	$summary	$(cut -d' ' -f1-3 /proc/loadavg)"
    stop_fleet
}

run_case switchyard non_streaming
run_case switchyard streaming
if [[ -n "$SMG_BIN" && -x "$SMG_BIN" ]]; then
    meta smg_version "$("$SMG_BIN" --version 2>&1 | head -1 || echo unknown)"
    run_case smg non_streaming
    run_case smg streaming
fi

meta finished "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
meta loadavg_end "$(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$FIG_DIR/hung_engine_render.py" "$FIG_META" "$FIG_OUT"
