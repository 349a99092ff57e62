#!/usr/bin/env bash
# Moved share on a worker join, a worker leave and a gateway replica restart, on live
# processes. The set-up of fleet_affinity.sh (4 sims whose KV is sized by `switchyard-sim
# oracle` so the trace's working set fills ~75 % of the fleet's KV; the `agentic` workload, no
# session header and no `user`, at RATE req/s for DURATION s, spread at random over the
# replicas; cache_aware; replicas independent or as one Raft group), with one event at the
# midpoint of the run:
#   join     a 5th sim (same KV) is started and added to every replica (POST /admin/workers);
#   leave    sim-3 is drained out of every replica (DELETE /admin/workers/sim-3);
#   restart  one replica (the last; a follower when the replicas form a Raft group) is killed
#            with SIGKILL and started again with the same flags (and the same data dir in a
#            group); the load tool keeps sending a share of the requests to it meanwhile.
# The load tool's trace (`--trace-out`) says which worker answered every turn; the event's
# times are recorded in unix ms and set against the report's `started_unix_ms`.
# fleet_events_render.py reads each trace (conversation = system prompt + first user
# message) and keeps a summary beside the report: conversations in progress at the event, the
# share whose first turn after it went to another worker than their last turn before it, how
# many of those lived on the departed worker, failed requests around the event, hit rates.
# Writes fleet_events.md (FIG_SUFFIX keeps a variant beside it).
#
#   SWITCHYARD_BIN_DIR=/path/to/release FIG_PORT_BASE=30000 benches/figures/fleet_events.sh
#
# Bounded: every case is DURATION s (default 60) plus start-up; CASES picks a subset
# (event:mode:replicas, e.g. "restart:cluster:3"), SEEDS the seeds. STEAL_WAIT=N waits up to N s
# before each load run for a quiet host (benches/host.sh); the steal during the run is recorded.
# shellcheck source=benches/figures/lib.sh
source "$(dirname "$0")/lib.sh"
fig_init "fleet_events${FIG_SUFFIX:-}"

RATE="${RATE:-60}"
DURATION="${DURATION:-60}"
SEEDS="${SEEDS:-1 2}"
KV_SHARE="${KV_SHARE:-0.75}"
BASE="${FIG_PORT_BASE:-30000}"
# Seconds after the load starts at which the event begins (default: the midpoint).
EVENT_AT="${EVENT_AT:-$((DURATION / 2))}"
CASES="${CASES:-}"
if [[ -z "$CASES" ]]; then
    for topology in independent:3 cluster:3 independent:5 cluster:5; do
        for event in join leave restart; do CASES+="$event:$topology "; done
    done
fi
GW_PORTS=("$BASE" $((BASE + 1)) $((BASE + 2)) $((BASE + 3)) $((BASE + 4)))
RAFT_PORTS=($((BASE + 10)) $((BASE + 11)) $((BASE + 12)) $((BASE + 13)) $((BASE + 14)))
# sim-0 .. sim-3 from the start; sim-4 is the one that joins.
SIM_PORTS=($((BASE + 20)) $((BASE + 21)) $((BASE + 22)) $((BASE + 23)) $((BASE + 24)))
JOINER=4
LEAVER=3
require_ports "${GW_PORTS[@]}" "${RAFT_PORTS[@]}" "${SIM_PORTS[@]}"

meta_vars RATE DURATION SEEDS KV_SHARE EVENT_AT
meta cases "$CASES"

GW_ENV=(SWITCHYARD_CLUSTER_SECRET=figures-fleet-events)

# event_log FILE WHAT VALUE: one line of the case's event file (tab-separated).
event_log() { printf '%s\t%s\n' "$2" "$3" >>"$1"; }

# admin_status METHOD PORT PATH [curl args...]: the HTTP status of an admin call (000: none).
admin_status() {
    local method="$1" port="$2" path="$3"
    shift 3
    curl -sS -o /dev/null -w '%{http_code}' --max-time 5 -X "$method" \
        -H "authorization: Bearer $ADMIN_KEY" -H 'content-type: application/json' \
        "http://127.0.0.1:$port$path" "$@" 2>/dev/null || true
}

# run_case SEED KV EVENT MODE REPLICAS
run_case() {
    local seed="$1" kv="$2" event="$3" mode="$4" replicas="$5"
    local name="s${seed}_${event}_${mode}_${replicas}"
    local config="$FIG_DATA/$name.toml" events="$FIG_DATA/$name.events.tsv"
    local pids=() urls=() targets=() node_flags=() i
    printf '[routing]\npolicy = "cache_aware"\n' >"$config"
    : >"$events"
    for i in 0 1 2 3; do
        start_sim "sim-$i" "${SIM_PORTS[$i]}" --kv-blocks "$kv"
        pids+=("$SIM_PID")
        urls+=(--worker-url "sim-$i=http://127.0.0.1:${SIM_PORTS[$i]}")
    done
    local gw_pids=()
    for ((i = 0; i < replicas; i++)); do
        local node=(--node-id $((i + 1)) --raft-addr "127.0.0.1:${RAFT_PORTS[$i]}")
        # A group's replicas keep their Raft vote and log on disk (required to join).
        if [[ "$mode" == cluster ]]; then node+=(--data-dir "$FIG_WORK/raft-$name-$i"); fi
        if [[ "$mode" == cluster && $i -gt 0 ]]; then
            node+=(--join "127.0.0.1:${RAFT_PORTS[0]}")
        fi
        node_flags[i]="${node[*]}"
        start_gateway "gateway-$i" "${GW_PORTS[$i]}" "$config" "${urls[@]}" "${node[@]}"
        gw_pids[i]="$GW_PID"
        targets+=(--target "http://127.0.0.1:${GW_PORTS[$i]}")
        # Learners may not be listed as members: a short, non-fatal wait between joins.
        if [[ "$mode" == cluster ]]; then wait_members "${GW_PORTS[0]}" $((i + 1)) || true; fi
    done
    for ((i = 0; i < replicas; i++)); do wait_routable "${GW_PORTS[$i]}" 4; done
    echo "[fleet_events] $name" >&2
    local out="$FIG_DATA/$name.json" trace="$FIG_WORK/$name.trace.jsonl" ticks steal
    wait_no_steal
    ticks=$(busy_ticks)
    start_load "$out" "${targets[@]}" --rate "$RATE" --duration "$DURATION" --workload agentic \
        --seed "$seed" --timeout 30 --trace-out "$trace"
    sleep "$EVENT_AT"
    local restarted=$((replicas - 1)) code
    case "$event" in
        join)
            event_log "$events" start_unix_ms "$(now_ms)"
            start_sim "sim-$JOINER" "${SIM_PORTS[$JOINER]}" --kv-blocks "$kv"
            pids+=("$SIM_PID")
            event_log "$events" sim_up_unix_ms "$(now_ms)"
            for ((i = 0; i < replicas; i++)); do
                code="$(admin_status POST "${GW_PORTS[$i]}" /admin/workers \
                    -d "{\"name\":\"sim-$JOINER\",\"url\":\"http://127.0.0.1:${SIM_PORTS[$JOINER]}\"}")"
                event_log "$events" "admin_status_gateway_$i" "$code"
            done
            event_log "$events" end_unix_ms "$(now_ms)"
            # When the new worker is routable everywhere (health checked), for the page.
            for ((i = 0; i < replicas; i++)); do wait_routable "${GW_PORTS[$i]}" 5 || true; done
            event_log "$events" routable_unix_ms "$(now_ms)"
            event_log "$events" worker "sim-$JOINER"
            ;;
        leave)
            event_log "$events" start_unix_ms "$(now_ms)"
            for ((i = 0; i < replicas; i++)); do
                code="$(admin_status DELETE "${GW_PORTS[$i]}" "/admin/workers/sim-$LEAVER")"
                event_log "$events" "admin_status_gateway_$i" "$code"
            done
            event_log "$events" end_unix_ms "$(now_ms)"
            event_log "$events" departed "sim-$LEAVER"
            ;;
        restart)
            event_log "$events" replica "$restarted"
            event_log "$events" start_unix_ms "$(now_ms)"
            stop_pid "${gw_pids[$restarted]}" KILL
            event_log "$events" killed_unix_ms "$(now_ms)"
            local node_again
            read -r -a node_again <<<"${node_flags[$restarted]}"
            start_gateway "gateway-$restarted-again" "${GW_PORTS[$restarted]}" "$config" \
                "${urls[@]}" "${node_again[@]}"
            gw_pids[restarted]="$GW_PID"
            event_log "$events" healthy_unix_ms "$(now_ms)"
            wait_routable "${GW_PORTS[$restarted]}" 4 || true
            event_log "$events" end_unix_ms "$(now_ms)"
            ;;
    esac
    wait_load
    steal=$(steal_of_busy_pct "$ticks")
    for ((i = 0; i < replicas; i++)); do
        save_metrics "${GW_PORTS[$i]}" "$FIG_DATA/$name.gateway-$i.metrics.txt"
    done
    python3 "$FIG_DIR/fleet_events_render.py" analyse "$trace" "$events" "$out" \
        "$FIG_DATA/$name.moves.json"
    # The trace holds every prompt in full (tens of MB): summarised above, not kept.
    rm -f "$trace"
    meta case "$seed	$event	$mode	$replicas	$out	$FIG_DATA/$name.moves.json	$(cut -d' ' -f1-3 /proc/loadavg)	$steal"
    for i in "${gw_pids[@]}" "${pids[@]}"; do stop_pid "$i"; done
}

for seed in $SEEDS; do
    # KV per sim from the working set of the trace this seed will send (as fleet_affinity.sh).
    expected=$(python3 -c "print(int($RATE * $DURATION))")
    sizing=(oracle --workload agentic --seed "$seed" --requests "$expected" --workers 4
        --working-set-share "$KV_SHARE" --json "$FIG_DATA/s${seed}_sizing.json")
    log_cmd "$SIM_BIN" "${sizing[@]}"
    "$SIM_BIN" "${sizing[@]}" >/dev/null
    kv="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["kv_blocks"])' "$FIG_DATA/s${seed}_sizing.json")"
    meta sizing "$seed	$kv	$FIG_DATA/s${seed}_sizing.json"
    for spec in $CASES; do
        IFS=: read -r event mode replicas <<<"$spec"
        run_case "$seed" "$kv" "$event" "$mode" "$replicas"
    done
done

fig_render python3 "$FIG_DIR/fleet_events_render.py" render
