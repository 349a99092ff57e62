#!/usr/bin/env bash
# SMG's cache_aware on the trace of fleet_affinity.sh: the same 4 sims and KV sizing, the
# `agentic` workload, one SMG router (`smg launch --policy cache_aware`), then three with
# SMG's mesh (`--enable-mesh`, each given the others as peers), the load spread at random.
# Writes fleet_affinity_smg.md.
source "$(dirname "$0")/lib.sh"
# FIG_SUFFIX keeps a rerun beside the default page; SMG_REPLICAS picks the router counts;
# STEAL_WAIT=N waits up to N s before each load run for a quiet host (benches/host.sh).
fig_init "fleet_affinity_smg${FIG_SUFFIX:-}"

RATE="${RATE:-60}"
DURATION="${DURATION:-60}"
SEEDS="${SEEDS:-1}"
KV_SHARE="${KV_SHARE:-0.75}"
SMG="${SMG:-smg}"
BASE="${FIG_PORT_BASE:-20000}"
SMG_PORTS=($((BASE + 30)) $((BASE + 31)) $((BASE + 32)))
MESH_PORTS=($((BASE + 35)) $((BASE + 36)) $((BASE + 37)))
METRIC_PORTS=($((BASE + 40)) $((BASE + 41)) $((BASE + 42)))
SIM_PORTS=($((BASE + 20)) $((BASE + 21)) $((BASE + 22)) $((BASE + 23)))
require_ports "${SMG_PORTS[@]}" "${MESH_PORTS[@]}" "${METRIC_PORTS[@]}" "${SIM_PORTS[@]}"
meta rate "$RATE"
meta duration "$DURATION"
meta seeds "$SEEDS"
meta kv_share "$KV_SHARE"
meta smg "$($SMG --version 2>/dev/null || pip show smg 2>/dev/null | grep -i '^version')"

start_smg() {
    local i="$1" replicas="$2"
    shift 2
    local mesh=()
    if ((replicas > 1)); then
        local peers=() j
        for ((j = 0; j < replicas; j++)); do
            ((j != i)) && peers+=("127.0.0.1:${MESH_PORTS[$j]}")
        done
        mesh=(--enable-mesh --mesh-server-name "smg-$i" --mesh-host 127.0.0.1
            --mesh-port "${MESH_PORTS[$i]}" --mesh-peer-urls "${peers[@]}")
    fi
    log_cmd "$SMG" launch --host 127.0.0.1 --port "${SMG_PORTS[$i]}" --worker-urls "$@" \
        --policy cache_aware --disable-tokenizer-autoload --prometheus-host 127.0.0.1 \
        --prometheus-port "${METRIC_PORTS[$i]}" --log-level warn "${mesh[@]}"
    "$SMG" launch --host 127.0.0.1 --port "${SMG_PORTS[$i]}" --worker-urls "$@" \
        --policy cache_aware --disable-tokenizer-autoload --prometheus-host 127.0.0.1 \
        --prometheus-port "${METRIC_PORTS[$i]}" --log-level warn "${mesh[@]}" \
        >"$FIG_WORK/smg-$i.log" 2>&1 &
    SMG_PID=$!
    FIG_PIDS+=("$SMG_PID")
    wait_http "http://127.0.0.1:${SMG_PORTS[$i]}/v1/models"
}

run_case() {
    local seed="$1" kv="$2" replicas="$3"
    local name="s${seed}_smg_${replicas}" pids=() urls=() targets=() i
    for i in 0 1 2 3; do
        start_sim "sim-$i" "${SIM_PORTS[$i]}" --kv-blocks "$kv"
        pids+=("$SIM_PID")
        urls+=("http://127.0.0.1:${SIM_PORTS[$i]}")
    done
    for ((i = 0; i < replicas; i++)); do
        start_smg "$i" "$replicas" "${urls[@]}"
        pids+=("$SMG_PID")
        targets+=(--target "http://127.0.0.1:${SMG_PORTS[$i]}")
    done
    sleep 3
    echo "[fleet_affinity_smg] $name" >&2
    local out="$FIG_DATA/$name.json" trace="$FIG_WORK/$name.trace.jsonl" ticks steal
    wait_no_steal
    ticks=$(busy_ticks)
    run_load "$out" "${targets[@]}" --rate "$RATE" --duration "$DURATION" --workload agentic \
        --seed "$seed" --timeout 30 --model sim-llama --trace-out "$trace"
    steal=$(steal_of_busy_pct "$ticks")
    log_cmd "$SIM_BIN" oracle --trace "$trace" --workers 4 --kv-blocks "$kv" \
        --json "$FIG_DATA/$name.oracle.json"
    "$SIM_BIN" oracle --trace "$trace" --workers 4 --kv-blocks "$kv" \
        --json "$FIG_DATA/$name.oracle.json" >/dev/null
    # TTFT quantiles and the slowest tenth for the pooled p99 (SMG names no worker per answer).
    python3 "$FIG_DIR/fleet_affinity_trace.py" "$trace" "$FIG_DATA/$name.latency.json"
    [[ "${FIG_KEEP_WORK:-0}" == 1 ]] || rm -f "$trace"
    meta case "$seed	smg-mesh	$replicas	smg_cache_aware	agentic	default	$out	$FIG_DATA/$name.oracle.json	$(cut -d' ' -f1 /proc/loadavg)	$steal"
    for i in "${pids[@]}"; do stop_pid "$i"; done
}

for seed in $SEEDS; do
    expected=$(python3 -c "print(int($RATE * $DURATION))")
    "$SIM_BIN" oracle --workload agentic --seed "$seed" --requests "$expected" --workers 4 \
        --working-set-share "$KV_SHARE" --json "$FIG_DATA/s${seed}_sizing.json" >/dev/null
    kv="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["kv_blocks"])' "$FIG_DATA/s${seed}_sizing.json")"
    meta sizing "$seed	$kv	$FIG_DATA/s${seed}_sizing.json"
    for replicas in ${SMG_REPLICAS:-1 3}; do
        run_case "$seed" "$kv" "$replicas" ||
            echo "[fleet_affinity_smg] $replicas with the mesh failed" >&2
    done
done

meta finished "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
meta loadavg_end "$(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$FIG_DIR/fleet_affinity_render.py" "$FIG_META" "$FIG_OUT"
