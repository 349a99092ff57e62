#!/usr/bin/env bash
# Several gateway replicas in front of the same workers: 1, 2 and 3 replicas (separate
# processes, same config file, same 4 sims), the load tool spreading requests uniformly over
# them (repeated --target). Physical hit rate of cache_aware relative to one replica (goal
# >= 95 %). The replicas run twice: as independent processes (each its own single-node
# ledger) and as one Raft cluster (node 1 bootstraps, the others --join), where affinity
# events (load moves, migrations) replicate. Writes multi_replica.md.
#
# Bounded: 5 cases of DURATION s (default 30) plus start-up, about 3.5 minutes.
source "$(dirname "$0")/lib.sh"
fig_init multi_replica

RATE="${RATE:-40}"
DURATION="${DURATION:-30}"
SEED="${SEED:-7}"
BASE="${FIG_PORT_BASE:-23400}"
GW_PORTS=($BASE $((BASE + 1)) $((BASE + 2)))
RAFT_PORTS=($((BASE + 5)) $((BASE + 6)) $((BASE + 7)))
SIM_PORTS=($((BASE + 11)) $((BASE + 12)) $((BASE + 13)) $((BASE + 14)))
require_ports "${GW_PORTS[@]}" "${RAFT_PORTS[@]}" "${SIM_PORTS[@]}"

meta_vars RATE DURATION SEED

CONFIG="$FIG_DATA/cache_aware.toml"
printf '[routing]\npolicy = "cache_aware"\n' >"$CONFIG"
meta config "all replicas	$CONFIG"

# Cluster members need a shared secret; a throwaway one for this loopback-only run.
GW_ENV=(SWITCHYARD_CLUSTER_SECRET=figures-multi-replica)

# run_case MODE REPLICAS: MODE is "independent" or "cluster".
run_case() {
    local mode="$1" replicas="$2"
    local targets=() i
    start_fleet_sims
    for ((i = 0; i < replicas; i++)); do
        local node=(--node-id $((i + 1)) --raft-addr "127.0.0.1:${RAFT_PORTS[$i]}")
        if [[ "$mode" == cluster ]]; then
            # Replicas of a group must keep their Raft state: a data dir each.
            node+=(--data-dir "$FIG_WORK/$mode-$replicas-node$((i + 1))")
            if [[ $i -gt 0 ]]; then
                node+=(--join "127.0.0.1:${RAFT_PORTS[0]}")
            fi
        fi
        start_gateway "gateway-$i" "${GW_PORTS[$i]}" "$CONFIG" "${WORKER_FLAGS[@]}" "${node[@]}"
        FLEET_PIDS+=("$GW_PID")
        targets+=(--target "http://127.0.0.1:${GW_PORTS[$i]}")
    done
    for ((i = 0; i < replicas; i++)); do wait_routable "${GW_PORTS[$i]}" 4; done
    if [[ "$mode" == cluster ]]; then
        wait_members "${GW_PORTS[0]}" "$replicas"
        admin GET "${GW_PORTS[0]}" /admin/cluster >"$FIG_DATA/${mode}_$replicas.cluster.json" || true
    fi
    echo "[multi_replica] $mode, $replicas replica(s)" >&2
    local out="$FIG_DATA/${mode}_$replicas.json"
    run_load "$out" "${targets[@]}" --rate "$RATE" --duration "$DURATION" --workload multiturn \
        --seed "$SEED" --timeout 30
    for ((i = 0; i < replicas; i++)); do
        save_metrics "${GW_PORTS[$i]}" "$FIG_DATA/${mode}_$replicas.gateway-$i.metrics.txt"
    done
    meta case "$mode	$replicas	$out"
    stop_fleet
}

run_case independent 1
run_case independent 2
run_case independent 3
run_case cluster 2
run_case cluster 3
fig_render
