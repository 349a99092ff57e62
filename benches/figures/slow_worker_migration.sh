#!/usr/bin/env bash
# Slow worker under cache_aware (seed 000's cache cost): multiturn on 4 sims, one sim
# (VICTIM, the same in both runs) slowed x20 mid-run. Hit rate and TTFT p99 with the latency marker on (filtering plus
# affinity migration, the default) vs off (`health.latency_aware.active = false`: no marks,
# no filtering, so no migration either; the gateway has no switch for migration alone).
# Writes slow_worker_migration.md.
#
# Bounded: 2 runs of DURATION s (default 60) plus drain, about 2.5 minutes.
source "$(dirname "$0")/lib.sh"
fig_init slow_worker_migration

RATE="${RATE:-40}"
DURATION="${DURATION:-60}"
SLOW_AT="${SLOW_AT:-15}"
SEED="${SEED:-7}"
TIME_SCALE="${TIME_SCALE:-0.5}"
VICTIM="${VICTIM:-1}"
fleet_ports "${FIG_PORT_BASE:-23300}" 4

meta_vars RATE DURATION SLOW_AT SEED TIME_SCALE

write_config() {
    local config="$1" active="$2"
    cat >"$config" <<EOF
[routing]
policy = "cache_aware"

# Marker thresholds scaled to the sims (x20 slow: TPOT a few ms -> tens of ms); the shipped
# 30 s / 0.3 s are sized for real GPUs.
[health.latency_aware]
active = $active
scrape_interval_ms = 1000
overload_ttft_p90_ms = 2000
overload_tpot_p90_ms = 40
recover_ttft_p90_ms = 1000
recover_tpot_p90_ms = 15

[health.prober]
interval_ms = 1000
EOF
}

run_case() {
    local label="$1" active="$2"
    local config="$FIG_DATA/marker_$active.toml"
    write_config "$config" "$active"
    meta config "$label	$config"
    start_fleet "$config" --time-scale "$TIME_SCALE"
    echo "[slow_worker_migration] $label" >&2
    local out="$FIG_DATA/multiturn_marker_$active.json"
    start_load "$out" --target "http://127.0.0.1:$GW_PORT" --rate "$RATE" --duration "$DURATION" \
        --workload multiturn --seed "$SEED" --timeout 20 --timeline
    sleep "$SLOW_AT"
    local slow_ms
    slow_ms="$(now_ms)"
    sim_fault "${SIM_PORTS[$VICTIM]}" '{"mode":"slow","factor":20}'
    log_cmd curl -X POST "http://127.0.0.1:${SIM_PORTS[$VICTIM]}/admin/fault" -d '{"mode":"slow","factor":20}'
    wait_load
    save_metrics "$GW_PORT" "$FIG_DATA/multiturn_marker_$active.metrics.txt"
    meta case "$label	$out	sim-$VICTIM	$slow_ms"
    stop_fleet
}

run_case "marker on (filter + migrate)" true
run_case "marker off (no latency filtering)" false
fig_render
