#!/usr/bin/env bash
# Failover (issue 3): 4 sims behind one gateway at RATE req/s; `kill -9` one sim mid-run.
# Time until no request goes to it, client-visible errors, retry amplification; once with
# non-streaming and once with streaming requests. Then the latency path: one sim slowed x20
# mid-run and set back to ok; time until the gateway filters it and until it is back.
# Writes kill_worker.md.
#
# Bounded: 2 x (KILL_DURATION + drain) + SLOW_DURATION + drain, about 3 minutes.
source "$(dirname "$0")/lib.sh"
fig_init kill_worker

RATE="${RATE:-100}"
KILL_DURATION="${KILL_DURATION:-30}"
KILL_AT="${KILL_AT:-10}"
SLOW_RATE="${SLOW_RATE:-60}"
SLOW_DURATION="${SLOW_DURATION:-60}"
SLOW_AT="${SLOW_AT:-10}"
OK_AT="${OK_AT:-30}"
SEED="${SEED:-11}"
# Twice as fast as the default sim, so the 3 survivors carry RATE at ~60 % of their
# capacity: the figure is about failover, not about an undersized fleet.
TIME_SCALE="${TIME_SCALE:-0.5}"
VICTIM=sim-1
fleet_ports "${FIG_PORT_BASE:-23200}" 4

meta_vars RATE KILL_DURATION SLOW_RATE SLOW_DURATION SEED VICTIM TIME_SCALE

# The shipped health defaults, written out so the page shows the values in force.
DEFAULT_CONFIG="$FIG_DATA/failover.toml"
cat >"$DEFAULT_CONFIG" <<'EOF'
# Shipped defaults, spelled out.
[health.health]
interval_ms = 1000
timeout_ms = 1000
suspect_interval_ms = 250
unhealthy_threshold = 3
healthy_threshold = 5

[retry]
max_retries = 2
EOF
meta config "failover (kill -9)	$DEFAULT_CONFIG"

# The latency marker's shipped thresholds (TTFT p90 30 s / TPOT p90 0.3 s) are sized for
# real GPUs; the sims answer in milliseconds, so the thresholds are scaled down to match.
SLOW_CONFIG="$FIG_DATA/latency.toml"
cat >"$SLOW_CONFIG" <<'EOF'
# Latency marker scaled to the sims (x20 slow: TPOT ~5 ms -> ~100 ms).
[health.latency_aware]
active = true
scrape_interval_ms = 1000
min_samples = 10
max_window_ms = 60000
overload_ttft_p90_ms = 2000
overload_tpot_p90_ms = 40
recover_ttft_p90_ms = 1000
recover_tpot_p90_ms = 15

[health.prober]
interval_ms = 1000
latency_bound_ms = 3000
successes_to_confirm = 3
failures_to_rearm = 3
EOF
meta config "latency path (slow x20)	$SLOW_CONFIG"

# The victim's pid: start_fleet lists the sims first, in index order.
victim_pid() { echo "${FLEET_PIDS[${VICTIM#sim-}]}"; }

kill_case() {
    local mode="$1" flags=()
    [[ "$mode" == non_streaming ]] && flags=(--no-stream)
    echo "[kill_worker] kill -9 $VICTIM, $mode" >&2
    start_fleet "$DEFAULT_CONFIG" --time-scale "$TIME_SCALE"
    local poll="$FIG_WORK/poll_$mode.jsonl" out="$FIG_DATA/kill_$mode.json"
    start_poller "$poll" "$GW_PORT"
    local poller=$POLL_PID
    start_load "$out" --target "http://127.0.0.1:$GW_PORT" --rate "$RATE" \
        --duration "$KILL_DURATION" --workload uniform --seed "$SEED" --timeout 20 --timeline \
        "${flags[@]}"
    sleep "$KILL_AT"
    local killed_ms
    killed_ms="$(now_ms)"
    kill -9 "$(victim_pid)"
    log_cmd kill -9 "<pid of $VICTIM>"
    wait_load
    save_metrics "$GW_PORT" "$FIG_DATA/kill_$mode.metrics.txt"
    stop_pid "$poller"
    $FIGLIB summarize-poll "$poll" "$VICTIM" >"$FIG_DATA/kill_$mode.poll.json"
    meta kill_case "$mode	$out	$killed_ms"
    stop_fleet
}

slow_case() {
    echo "[kill_worker] slow x20 $VICTIM then ok" >&2
    start_fleet "$SLOW_CONFIG" --time-scale "$TIME_SCALE"
    local poll="$FIG_WORK/poll_slow.jsonl" out="$FIG_DATA/slow.json"
    start_poller "$poll" "$GW_PORT"
    local poller=$POLL_PID
    start_load "$out" --target "http://127.0.0.1:$GW_PORT" --rate "$SLOW_RATE" \
        --duration "$SLOW_DURATION" --workload uniform --seed "$SEED" --timeout 20 --timeline
    local victim_port="${SIM_PORTS[1]}"
    sleep "$SLOW_AT"
    local slow_ms ok_ms
    slow_ms="$(now_ms)"
    sim_fault "$victim_port" '{"mode":"slow","factor":20}'
    log_cmd curl -X POST "http://127.0.0.1:$victim_port/admin/fault" -d '{"mode":"slow","factor":20}'
    sleep $((OK_AT - SLOW_AT))
    ok_ms="$(now_ms)"
    sim_fault "$victim_port" '{"mode":"ok"}'
    log_cmd curl -X POST "http://127.0.0.1:$victim_port/admin/fault" -d '{"mode":"ok"}'
    wait_load
    save_metrics "$GW_PORT" "$FIG_DATA/slow.metrics.txt"
    stop_pid "$poller"
    $FIGLIB summarize-poll "$poll" "$VICTIM" >"$FIG_DATA/slow.poll.json"
    meta slow_case "$out	$slow_ms	$ok_ms"
    stop_fleet
}

kill_case non_streaming
kill_case streaming
slow_case
fig_render
