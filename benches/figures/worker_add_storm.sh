#!/usr/bin/env bash
# Retry storm while workers are added (the older recovery figure). A fleet of 2 slow sims (small --max-running) behind a gateway with
# a small admission limit gets RATE req/s, about 3x what it serves; clients retry 429/503
# (half honour Retry-After, half retry every 1 s). ADD_AT s in, 4 normal sims are added with
# POST /admin/workers. Time until the success rate is back above 99 %, and the peak admitted
# rate during recovery: with the shipped defaults; then, with the degradation controller off
# to isolate them, the recovery ramp and Retry-After jitter on vs off. Then P0's success rate
# during a 3x overload with mixed P0/P1/P2, for a non-core and a core caller.
# Writes recovery_storm.md.
#
# Bounded: 3 x (DURATION + drain <= 15 s) + 2 x P0_DURATION + start-ups, about 5 minutes.
source "$(dirname "$0")/lib.sh"
fig_init worker_add_storm

RATE="${RATE:-30}"
DURATION="${DURATION:-60}"
ADD_AT="${ADD_AT:-15}"
P0_RATE="${P0_RATE:-30}"
P0_DURATION="${P0_DURATION:-30}"
SEED="${SEED:-5}"
# Slow sims: 2 running at a time, every duration x2 (about 10 req/s for the pair).
SLOW_SIM_FLAGS=(--max-running 2 --time-scale 2)
MAX_CONCURRENT="${MAX_CONCURRENT:-24}"
# The shipped ramp holds each level 30 s; 10 s keeps a run under 2 minutes (both runs alike).
RAMP_HOLD_MS="${RAMP_HOLD_MS:-10000}"
TENANT_KEY="sk-figures"
fleet_ports "${FIG_PORT_BASE:-23500}" 6

meta_vars RATE DURATION ADD_AT P0_RATE P0_DURATION SEED
meta slow_sims "${SLOW_SIM_FLAGS[*]}"
meta_vars MAX_CONCURRENT RAMP_HOLD_MS

write_config() {
    local config="$1" levels="$2" jitter="$3" degradation="$4"
    cat >"$config" <<EOF
[routing]
# Least in-flight: the figure is about admission, so routing should not pile work on the
# slow sims (cache_aware would keep hashing a third of the prompts onto them).
policy = "least_load"

[admission]
max_concurrent = $MAX_CONCURRENT

[admission.ramp]
levels = $levels
hold_ms = $RAMP_HOLD_MS

[admission.retry_after]
jitter_ratio = $jitter

[degradation]
enabled = $degradation
EOF
}

# The two slow sims behind the gateway; the fast ones are added later.
start_slow_fleet() {
    FLEET_SIZE=2 FLEET_PREFIX=slow start_fleet "$1" "${SLOW_SIM_FLAGS[@]}"
}

storm_case() {
    local label="$1" levels="$2" jitter="$3" degradation="$4" name="$5"
    local config="$FIG_DATA/$name.toml"
    write_config "$config" "$levels" "$jitter" "$degradation"
    meta config "$label	$config"
    echo "[worker_add_storm] $label" >&2
    start_slow_fleet "$config"
    local i
    for i in 2 3 4 5; do
        start_sim "fast-$i" "${SIM_PORTS[$i]}"
        FLEET_PIDS+=("$SIM_PID")
    done
    local poll="$FIG_WORK/poll_$name.jsonl" out="$FIG_DATA/$name.json"
    start_poller "$poll" "$GW_PORT"
    local poller=$POLL_PID
    start_load "$out" --target "http://127.0.0.1:$GW_PORT" --rate "$RATE" --duration "$DURATION" \
        --workload uniform --seed "$SEED" --timeout 15 --timeline \
        --client-retry honor:0.5,fixed1s:0.5 --max-client-retries 5
    sleep "$ADD_AT"
    local added_ms
    added_ms="$(now_ms)"
    for i in 2 3 4 5; do
        admin POST "$GW_PORT" /admin/workers \
            -d "{\"name\":\"fast-$i\",\"url\":\"http://127.0.0.1:${SIM_PORTS[$i]}\"}" >/dev/null
    done
    log_cmd curl -X POST "http://127.0.0.1:$GW_PORT/admin/workers" \
        -d '{"name":"fast-N","url":"http://127.0.0.1:<port>"}'
    wait_load
    save_metrics "$GW_PORT" "$FIG_DATA/$name.metrics.txt"
    stop_pid "$poller"
    $FIGLIB summarize-poll "$poll" fast-2 >"$FIG_DATA/$name.poll.json"
    meta storm "$label	$out	$added_ms	$name"
    stop_fleet
}

p0_case() {
    local core="$1" name="priorities_core_$1"
    local config="$FIG_DATA/$name.toml"
    write_config "$config" "[0.3, 0.5, 0.8, 1.0]" 0.5 true
    cat >>"$config" <<EOF

# A tenant allowed to ask for P0 (anonymous callers are clamped to P1).
[[admission.tenants]]
api_key = "$TENANT_KEY"
caller = "figures"
max_priority = "P0"
default_priority = "P1"
core = $core
EOF
    meta config "priorities, core = $core	$config"
    echo "[worker_add_storm] P0 under 3x overload, core = $core" >&2
    start_slow_fleet "$config"
    local out="$FIG_DATA/$name.json"
    run_load "$out" --target "http://127.0.0.1:$GW_PORT" --rate "$P0_RATE" \
        --duration "$P0_DURATION" --workload uniform --seed "$SEED" --timeout 15 --timeline \
        --api-key "$TENANT_KEY" --priority-mix P0=0.2,P1=0.5,P2=0.3
    save_metrics "$GW_PORT" "$FIG_DATA/$name.metrics.txt"
    meta priorities "core = $core	$out"
    stop_fleet
}

storm_case "defaults (ramp, jitter, degradation on)" "[0.3, 0.5, 0.8, 1.0]" 0.5 true defaults
storm_case "ramp + jitter on, degradation off" "[0.3, 0.5, 0.8, 1.0]" 0.5 false ramp_on
storm_case "ramp + jitter off, degradation off" "[1.0]" 0.0 false ramp_off
p0_case false
p0_case true
fig_render
