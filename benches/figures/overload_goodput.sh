#!/usr/bin/env bash
# Demand overload with healthy workers. max_concurrent = 6 over two simulated workers; three
# tenants offer 5 / 10 / 20 req/s at P0 / P1 / P2 (about 2.3x capacity), every client honours
# Retry-After (retry-after-ms first, as the OpenAI SDKs do). Per seed:
#   light   - capacity at light load: one tenant at LIGHT_RATE req/s; capacity =
#             max_concurrent / e2e p50.
#   full    - capacity at full dispatch without overload: one tenant at 40 req/s whose load
#             tool keeps at most max_concurrent requests outstanding (drops the rest), so the
#             gateway's slots are nearly always busy and nothing queues; goodput counted by
#             the sims. The sims' decode step is memory-bound (2 % dearer per extra running
#             request), so a request running next to others is a little slower than alone.
#   overload- the three tenants for DURATION s; goodput = completions counted by the sims
#             between WARM s and DURATION - 5 s; per-class success, refusals with and without
#             Retry-After; GET /admin/admission polled every 500 ms.
#   outage  - the same demand for OUTAGE_DURATION s; OUTAGE_AT s in, both workers answer 503
#             to everything (`/health` included: sim fault `unavailable`, clearing itself
#             after OUTAGE_FOR s). The ramp must still climb 30 -> 50 -> 80 -> 100 % and P0 be
#             served once the workers are back (their breakers stay open 30 s, so the ramp
#             starts about 45 s after the fault ends). recovery_storm.sh runs this case alone.
# OUTAGE_WORKERS=1 faults only the first sim (a partial outage: the other one keeps serving);
# the page then adds goodput and P0's success over the outage window.
# CASES picks the demand cases (default overload; recovery_storm.sh runs outage); FIG_VARIANT=x writes overload_goodput_x.md
# (e.g. for a baseline run of older binaries via SWITCHYARD_BIN_DIR); FIG_NAME_OVERRIDE
# names the page outright.
# Writes overload_goodput.md. Bounded: per seed about 15 + DURATION + OUTAGE_DURATION + 2 x 60 s.
source "$(dirname "$0")/lib.sh"
fig_init "${FIG_NAME_OVERRIDE:-overload_goodput${FIG_VARIANT:+_$FIG_VARIANT}}"
CASES="${CASES:-overload}"

SEEDS="${SEEDS:-1 2 3}"
DURATION="${DURATION:-60}"
WARM="${WARM:-10}"
LIGHT_RATE="${LIGHT_RATE:-3}"
OUTAGE_AT="${OUTAGE_AT:-15}"
OUTAGE_FOR="${OUTAGE_FOR:-10}"
OUTAGE_DURATION="${OUTAGE_DURATION:-100}"
OUTAGE_WORKERS="${OUTAGE_WORKERS:-2}"
MAX_CONCURRENT="${MAX_CONCURRENT:-6}"
# The shipped ramp holds each level 30 s; 5 s keeps the outage run short.
RAMP_HOLD_MS="${RAMP_HOLD_MS:-5000}"
# Each sim runs 4 at a time (knee of the pair: 8 > max_concurrent), every duration x8 and
# requests ask for 8 tokens: about 0.35 s per request in the model (few long timer sleeps, so
# a busy machine adds less on top).
SIM_FLAGS=(--max-running 4 --time-scale 8)
fleet_ports "${FIG_PORT_BASE:-23000}" 2
HELPER="python3 $FIG_DIR/overload_goodput.py"

meta_vars SEEDS DURATION OUTAGE_DURATION OUTAGE_FOR OUTAGE_WORKERS MAX_CONCURRENT
meta sim_flags "${SIM_FLAGS[*]}"
meta_vars RAMP_HOLD_MS

CONFIG="$FIG_DATA/gateway.toml"
cat >"$CONFIG" <<EOF
[routing]
policy = "least_load"

[admission]
max_concurrent = $MAX_CONCURRENT

[admission.ramp]
hold_ms = $RAMP_HOLD_MS

[[admission.tenants]]
api_key = "sk-p0"
caller = "tenant-p0"
max_priority = "P0"

[[admission.tenants]]
api_key = "sk-p1"
caller = "tenant-p1"
max_priority = "P1"

[[admission.tenants]]
api_key = "sk-p2"
caller = "tenant-p2"
max_priority = "P2"
EOF
meta config "$CONFIG"

# tenant_load NAME KEY CLASS RATE SEED DURATION: one tenant's open-loop load in the background.
tenant_load() {
    local name="$1" key="$2" class="$3" rate="$4" seed="$5" duration="$6"
    start_load "$FIG_DATA/$name.json" --target "http://127.0.0.1:$GW_PORT" --rate "$rate" \
        --duration "$duration" --workload uniform --max-tokens 8 --seed "$seed" --timeout 15 --timeline \
        --api-key "$key" --priority-mix "$class=1" --client-retry honor:1 \
        --max-client-retries 5 --quiet
    TENANT_PIDS+=("$LOAD_PID")
}

demand_case() {
    local section="$1" seed="$2"
    local tag="${section}_seed$seed"
    echo "[overload_goodput] $tag" >&2
    start_fleet "$CONFIG" "${SIM_FLAGS[@]}"
    local poll="$FIG_DATA/$tag.poll.jsonl"
    in_background $HELPER poll "$GW_PORT" "$ADMIN_KEY" "$poll"
    local poller=$BG_PID
    local duration=$DURATION
    [[ "$section" == outage ]] && duration=$OUTAGE_DURATION
    TENANT_PIDS=()
    tenant_load "${tag}_p0" sk-p0 P0 5 "$seed" "$duration"
    tenant_load "${tag}_p1" sk-p1 P1 10 "$((seed + 100))" "$duration"
    tenant_load "${tag}_p2" sk-p2 P2 20 "$((seed + 200))" "$duration"
    local started_ms
    started_ms="$(now_ms)"
    local recover_second=0
    if [[ "$section" == outage ]]; then
        sleep "$OUTAGE_AT"
        local outage="{\"mode\":\"unavailable\",\"for_ms\":$((OUTAGE_FOR * 1000))}"
        for port in "${SIM_PORTS[@]:0:$OUTAGE_WORKERS}"; do sim_fault "$port" "$outage"; done
        log_cmd curl -X POST "http://127.0.0.1:<sim port>/admin/fault" -d "$outage"
        meta outage_window "$seed	$(sims_goodput "$OUTAGE_FOR")	$OUTAGE_AT	$((OUTAGE_AT + OUTAGE_FOR))"
        recover_second=$(((OUTAGE_AT + OUTAGE_FOR)))
        sleep "$((WARM - OUTAGE_AT - OUTAGE_FOR > 0 ? WARM - OUTAGE_AT - OUTAGE_FOR : 0))"
    else
        sleep "$WARM"
    fi
    local goodput
    goodput="$(sims_goodput "$((duration - 5 - ($(now_ms) - started_ms) / 1000))")"
    local pid
    for pid in "${TENANT_PIDS[@]}"; do
        wait "$pid" || true
        stop_pid "$pid"
    done
    save_metrics "$GW_PORT" "$FIG_DATA/$tag.metrics.txt"
    stop_pid "$poller"
    meta "$section" "$seed	$goodput	$CAPACITY	$poll	$FIG_DATA/${tag}_p0.json	$FIG_DATA/${tag}_p1.json	$FIG_DATA/${tag}_p2.json	$recover_second"
    stop_fleet
}

for seed in $SEEDS; do
    echo "[overload_goodput] light load, seed $seed" >&2
    start_fleet "$CONFIG" "${SIM_FLAGS[@]}"
    run_load "$FIG_DATA/light_seed$seed.json" --target "http://127.0.0.1:$GW_PORT" \
        --rate "$LIGHT_RATE" --duration 15 --workload uniform --max-tokens 8 --seed "$seed" --timeout 15 \
        --api-key sk-p1 --quiet
    CAPACITY="$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($MAX_CONCURRENT / r['e2e']['p50'])" "$FIG_DATA/light_seed$seed.json")"
    meta light "$seed	$FIG_DATA/light_seed$seed.json	$CAPACITY"
    start_load "$FIG_DATA/full_seed$seed.json" --target "http://127.0.0.1:$GW_PORT" \
        --rate 40 --max-in-flight "$MAX_CONCURRENT" --duration 20 --workload uniform \
        --max-tokens 8 --seed "$seed" --timeout 15 --api-key sk-p1 --quiet
    sleep 5
    full="$(sims_goodput 12)"
    wait_load
    meta full "$seed	$full"
    stop_fleet
    for case in $CASES; do
        demand_case "$case" "$seed"
    done
done

fig_render $HELPER render
echo "wrote $FIG_OUT" >&2
