#!/usr/bin/env bash
# Adaptive concurrency limit against hand-tuned max_concurrent, on the same two simulated
# workers (4 running at a time each: a throughput knee at 8 concurrent requests, about 0.35 s
# a request below it, 8 output tokens). One tenant offers RATE req/s (above what the workers can do) without
# client retries; goodput = completions counted by the sims between WARM s and DURATION - 3 s.
# Hand-tuned: max_concurrent in LIMITS; adaptive: [admission.adaptive] enabled = true with
# max_concurrent = 64 as its ceiling. The adaptive limit is polled from GET /admin/admission.
# MAX_RUNNING sets each sim's batch cap (knee 2 x MAX_RUNNING). BEFORE_BIN_DIR=dir adds, per
# seed, the adaptive case run with that directory's gateway (an older build), side by side.
# SPIKES=1 makes the workers' latency noisy the same way in every case of a seed: every 2-6 s
# one sim (or both) runs 2-3x slower for 0.5-1.5 s (the sim's slow fault). Writes adaptive_limit.md, or
# adaptive_limit_$FIG_VARIANT.md. Bounded: per seed (|LIMITS| + 1) x (DURATION + ~5) s.
source "$(dirname "$0")/lib.sh"
fig_init "adaptive_limit${FIG_VARIANT:+_$FIG_VARIANT}"

SEEDS="${SEEDS:-1 2 3}"
LIMITS="${LIMITS:-4 8 12 24}"
RATE="${RATE:-40}"
DURATION="${DURATION:-30}"
WARM="${WARM:-12}"
MAX_RUNNING="${MAX_RUNNING:-4}"
SIM_FLAGS=(--max-running "$MAX_RUNNING" --time-scale 8)
fleet_ports "${FIG_PORT_BASE:-23200}" 2
HELPER="python3 $FIG_DIR/overload_goodput.py"

meta knee "$((2 * MAX_RUNNING))"
[[ "${SPIKES:-0}" == 1 ]] && meta spikes "every 2-6 s one or both sims 2-3x slower for 0.5-1.5 s (slow fault), schedule drawn from the seed"
meta workers "2 sims: ${SIM_FLAGS[*]} (knee $((2 * MAX_RUNNING)) concurrent); offered $RATE req/s for $DURATION s"

write_config() {
    local config="$1" max="$2" adaptive="$3"
    cat >"$config" <<EOF
[routing]
policy = "least_load"

[admission]
max_concurrent = $max

[admission.adaptive]
enabled = $adaptive
EOF
}

# Latency spikes on a schedule drawn from the seed, for DURATION s.
spikes() {
    local seed="$1" end=$((SECONDS + DURATION)) port factor hold
    RANDOM=$seed
    while ((SECONDS < end)); do
        sleep "$((2 + RANDOM % 5))"
        factor="$((2 + RANDOM % 2))"
        hold="0.$((5 + RANDOM % 5))"
        case $((RANDOM % 3)) in
            0) port=("${SIM_PORTS[0]}") ;;
            1) port=("${SIM_PORTS[1]}") ;;
            *) port=("${SIM_PORTS[@]}") ;;
        esac
        for p in "${port[@]}"; do sim_fault "$p" "{\"mode\":\"slow\",\"factor\":$factor}" || true; done
        sleep "$hold"
        for p in "${port[@]}"; do sim_fault "$p" '{"mode":"ok"}' || true; done
    done
}

run_case() {
    local seed="$1" label="$2" max="$3" adaptive="$4"
    local tag="seed${seed}_$label"
    local config="$FIG_DATA/$tag.toml"
    write_config "$config" "$max" "$adaptive"
    echo "[adaptive_limit] $tag" >&2
    start_fleet "$config" "${SIM_FLAGS[@]}"
    local poll="$FIG_DATA/$tag.poll.jsonl"
    in_background $HELPER poll "$GW_PORT" "$ADMIN_KEY" "$poll"
    local poller=$BG_PID
    start_load "$FIG_DATA/$tag.json" --target "http://127.0.0.1:$GW_PORT" --rate "$RATE" \
        --duration "$DURATION" --workload uniform --max-tokens 8 --seed "$seed" --timeout 15 --quiet
    local spiker=""
    if [[ "${SPIKES:-0}" == 1 ]]; then
        in_background spikes "$seed"
        spiker=$BG_PID
    fi
    sleep "$WARM"
    local goodput
    goodput="$(sims_goodput "$((DURATION - WARM - 3))")"
    wait_load
    stop_pid "$poller"
    [[ -n "$spiker" ]] && stop_pid "$spiker"
    [[ "$adaptive" == true ]] && save_metrics "$GW_PORT" "$FIG_DATA/$tag.metrics.txt"
    meta case "$seed	$label	$goodput	$poll	$FIG_DATA/$tag.json"
    stop_fleet
}

for seed in $SEEDS; do
    for limit in $LIMITS; do
        run_case "$seed" "$limit" "$limit" false
    done
    run_case "$seed" adaptive 64 true
    if [[ -n "${BEFORE_BIN_DIR:-}" ]]; then
        current_gateway="$GATEWAY_BIN"
        GATEWAY_BIN="$BEFORE_BIN_DIR/switchyard"
        run_case "$seed" adaptive_before 64 true
        GATEWAY_BIN="$current_gateway"
    fi
done

fig_render $HELPER render-adaptive
echo "wrote $FIG_OUT" >&2
