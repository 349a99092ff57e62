#!/usr/bin/env bash
# Fleet cache affinity without session keys. 4 sims whose KV is sized so the trace's working
# set fills ~75 % of the fleet's KV (`switchyard-sim oracle` measures it), the `agentic`
# workload (multi-turn chats in groups sharing an ~800-word system prompt, whole history per
# turn, no x-session-id, no user) at RATE req/s for DURATION s, spread at random over 1, 3 or 5
# gateway replicas, independent or as one Raft group; round_robin vs cache_aware; the same
# with session keys (`agentic-keyed`). The load tool's client sends a conversation's next turn
# only once the previous answer is back, with that answer in the history, and the simulated
# workers cache the blocks of the answers they generate, so the trace depends on the run: the
# load tool writes what it sent (`--trace-out`) and the sticky-session oracle replays exactly
# that trace (`oracle --trace`). The KV is sized beforehand from the workload planned offline
# with the simulator's answers. Writes fleet_affinity.md.
#
# Bounded: every case is DURATION s (default 60) plus start-up; CASES picks a subset.
# STEAL_WAIT=N: before each load run, wait up to N s for a minute in which the hypervisor
# steals at most STEAL_WAIT_MAX [2] percent of busy CPUs (benches/host.sh); the steal during
# the run is recorded either way.
source "$(dirname "$0")/lib.sh"
# FIG_SUFFIX keeps a variant run (e.g. _escape) beside the default page and data.
fig_init "fleet_affinity${FIG_SUFFIX:-}"

RATE="${RATE:-60}"
DURATION="${DURATION:-60}"
SEEDS="${SEEDS:-1 2}"
KV_SHARE="${KV_SHARE:-0.75}"
SCRAPE_MS="${SCRAPE_MS:-250}"
BASE="${FIG_PORT_BASE:-20000}"
# mode:replicas:policy:workload[:flags], flags joined by "+": "legacy" turns anonymous
# conversations off; "gauges" lists the sims as vLLM-shaped engines whose load gauges every
# replica scrapes every SCRAPE_MS (the later-turn escape on a reported queue reads them),
# "noescape" turns that escape off ("gauges-noescape" = "gauges+noescape"); "busy" sets
# `later_turn_escape_in_flight` to BUSY_DEPTH (default 8, the sims' batch size): a later turn
# leaves a worker carrying a full batch; "nogroups" turns `prompt_groups` off (conversations
# spread over the whole ring by their opening, the placement before system-prompt groups);
# "nolearn" turns off the busy escape at the batch size the engines' gauges showed;
# "nobalance" turns off `prompt_group_balance` (first turns keep to the shared draw);
# "openfloor" sets `opening_min_in_flight` to BUSY_DEPTH (a first turn never leaves a group
# worker carrying fewer requests than a batch); "loosespill" sets `opening_load_factor` to
# LOOSE_SPILL_FACTOR (default 4: on 4 workers a first turn never leaves its group worker for
# load).
LOOSE_SPILL_FACTOR="${LOOSE_SPILL_FACTOR:-4.0}"
BUSY_DEPTH="${BUSY_DEPTH:-8}"
CASES="${CASES:-independent:1:round_robin:agentic independent:1:cache_aware:agentic independent:3:cache_aware:agentic cluster:3:cache_aware:agentic independent:5:cache_aware:agentic cluster:5:cache_aware:agentic independent:1:cache_aware:agentic-keyed independent:3:cache_aware:agentic-keyed independent:5:cache_aware:agentic-keyed}"
GW_PORTS=($BASE $((BASE + 1)) $((BASE + 2)) $((BASE + 3)) $((BASE + 4)))
RAFT_PORTS=($((BASE + 10)) $((BASE + 11)) $((BASE + 12)) $((BASE + 13)) $((BASE + 14)))
SIM_PORTS=($((BASE + 20)) $((BASE + 21)) $((BASE + 22)) $((BASE + 23)))
require_ports "${GW_PORTS[@]}" "${RAFT_PORTS[@]}" "${SIM_PORTS[@]}"

meta rate "$RATE"
meta duration "$DURATION"
meta seeds "$SEEDS"
meta kv_share "$KV_SHARE"
meta scrape_ms "$SCRAPE_MS"
meta busy_depth "$BUSY_DEPTH"
meta loose_spill_factor "$LOOSE_SPILL_FACTOR"

GW_ENV=(SWITCHYARD_CLUSTER_SECRET=figures-fleet-affinity)


has_flag() {
    [[ "+${1//-/+}+" == *"+$2+"* ]]
}

write_config() {
    local policy="$1" flag="$2" path="$3" i
    printf '[routing]\npolicy = "%s"\n' "$policy" >"$path"
    local tunables=()
    has_flag "$flag" legacy && tunables+=("anonymous_conversations = false")
    has_flag "$flag" noescape && tunables+=("later_turn_escape_queued = 0")
    has_flag "$flag" busy && tunables+=("later_turn_escape_in_flight = $BUSY_DEPTH")
    has_flag "$flag" nogroups && tunables+=("prompt_groups = false")
    has_flag "$flag" nolearn && tunables+=("later_turn_escape_learned = false")
    has_flag "$flag" nobalance && tunables+=("prompt_group_balance = false")
    has_flag "$flag" openfloor && tunables+=("opening_min_in_flight = $BUSY_DEPTH")
    has_flag "$flag" loosespill && tunables+=("opening_load_factor = $LOOSE_SPILL_FACTOR")
    if ((${#tunables[@]})); then
        printf '\n[routing.cache_aware]\n' >>"$path"
        printf '%s\n' "${tunables[@]}" >>"$path"
    fi
    if has_flag "$flag" gauges; then
        printf '\n[health.latency_aware]\nscrape_interval_ms = %s\n' "$SCRAPE_MS" >>"$path"
        for i in 0 1 2 3; do
            printf '\n[[workers]]\nname = "sim-%s"\nurl = "http://127.0.0.1:%s"\nengine = "vllm"\n' \
                "$i" "${SIM_PORTS[$i]}" >>"$path"
        done
    fi
}

wait_members() {
    local port="$1" want="$2" tries=50 have
    while true; do
        have="$(admin GET "$port" /admin/cluster 2>/dev/null | python3 -c '
import json, sys
status = json.load(sys.stdin)
members = status.get("members") or status.get("membership") or []
print(len(members) if isinstance(members, (list, dict)) else 0)' 2>/dev/null || echo 0)"
        ((have >= want)) && return 0
        tries=$((tries - 1))
        if ((tries == 0)); then
            echo "cluster on $port: $have of $want members" >&2
            return 1
        fi
        sleep 0.2
    done
}

# run_case SEED KV_BLOCKS MODE REPLICAS POLICY WORKLOAD FLAG
run_case() {
    local seed="$1" kv="$2" mode="$3" replicas="$4" policy="$5" workload="$6" flag="$7"
    local name="s${seed}_${mode}_${replicas}_${policy}_${workload}${flag:+_$flag}"
    local config="$FIG_DATA/$name.toml" pids=() urls=() targets=() i
    write_config "$policy" "$flag" "$config"
    for i in 0 1 2 3; do
        start_sim "sim-$i" "${SIM_PORTS[$i]}" --kv-blocks "$kv"
        pids+=("$SIM_PID")
        # With gauges the workers are listed in the config, with their engine.
        has_flag "$flag" gauges || urls+=(--worker-url "sim-$i=http://127.0.0.1:${SIM_PORTS[$i]}")
    done
    for ((i = 0; i < replicas; i++)); do
        local node=(--node-id $((i + 1)) --raft-addr "127.0.0.1:${RAFT_PORTS[$i]}")
        # A group's replicas keep their Raft vote and log on disk (required to join).
        if [[ "$mode" == cluster ]]; then node+=(--data-dir "$FIG_WORK/raft-$name-$i"); fi
        if [[ "$mode" == cluster && $i -gt 0 ]]; then
            node+=(--join "127.0.0.1:${RAFT_PORTS[0]}")
        fi
        start_gateway "gateway-$i" "${GW_PORTS[$i]}" "$config" "${urls[@]}" "${node[@]}"
        pids+=("$GW_PID")
        targets+=(--target "http://127.0.0.1:${GW_PORTS[$i]}")
        # Learners may not be listed as members: a short, non-fatal wait between joins.
        if [[ "$mode" == cluster ]]; then wait_members "${GW_PORTS[0]}" $((i + 1)) || true; fi
    done
    for ((i = 0; i < replicas; i++)); do wait_routable "${GW_PORTS[$i]}" 4; done
    echo "[fleet_affinity] $name" >&2
    local out="$FIG_DATA/$name.json" trace="$FIG_WORK/$name.trace.jsonl"
    local ticks
    wait_no_steal
    ticks=$(busy_ticks)
    run_load "$out" "${targets[@]}" --rate "$RATE" --duration "$DURATION" --workload "$workload" \
        --seed "$seed" --timeout 30 --trace-out "$trace"
    local steal
    steal=$(steal_of_busy_pct "$ticks")
    for ((i = 0; i < replicas; i++)); do
        save_metrics "${GW_PORTS[$i]}" "$FIG_DATA/$name.gateway-$i.metrics.txt"
    done
    log_cmd "$SIM_BIN" oracle --trace "$trace" --workers 4 --kv-blocks "$kv" \
        --json "$FIG_DATA/$name.oracle.json"
    "$SIM_BIN" oracle --trace "$trace" --workers 4 --kv-blocks "$kv" \
        --json "$FIG_DATA/$name.oracle.json" >/dev/null
    # Where the latency went (per turn, per worker, the slowest 1 %), from the same trace.
    python3 "$FIG_DIR/fleet_affinity_trace.py" "$trace" "$FIG_DATA/$name.latency.json"
    # The trace holds every prompt in full (tens of MB): summarised above, not kept unless
    # FIG_KEEP_WORK=1 keeps the work dir for a closer look.
    [[ "${FIG_KEEP_WORK:-0}" == 1 ]] || rm -f "$trace"
    meta case "$seed	$mode	$replicas	$policy	$workload	${flag:-default}	$out	$FIG_DATA/$name.oracle.json	$(cut -d' ' -f1 /proc/loadavg)	$steal"
    for i in "${pids[@]}"; do stop_pid "$i"; done
}

for seed in $SEEDS; do
    # KV per sim from the working set of the trace this seed will send.
    expected=$(python3 -c "print(int($RATE * $DURATION))")
    log_cmd "$SIM_BIN" oracle --workload agentic --seed "$seed" --requests "$expected" \
        --workers 4 --working-set-share "$KV_SHARE" --json "$FIG_DATA/s${seed}_sizing.json"
    "$SIM_BIN" oracle --workload agentic --seed "$seed" --requests "$expected" --workers 4 \
        --working-set-share "$KV_SHARE" --json "$FIG_DATA/s${seed}_sizing.json" >/dev/null
    kv="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["kv_blocks"])' "$FIG_DATA/s${seed}_sizing.json")"
    meta sizing "$seed	$kv	$FIG_DATA/s${seed}_sizing.json"
    for spec in $CASES; do
        IFS=: read -r mode replicas policy workload flag <<<"$spec"
        run_case "$seed" "$kv" "$mode" "$replicas" "$policy" "$workload" "${flag:-}"
    done
done

meta finished "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
meta loadavg_end "$(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$FIG_DIR/fleet_affinity_render.py" "$FIG_META" "$FIG_OUT"
