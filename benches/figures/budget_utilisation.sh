#!/usr/bin/env bash
# How much of one tenant's budget three replicas serve. Three gateway processes form one Raft
# group (node 1 bootstraps, the others --join; each its own data dir), in front of 4
# simulated workers; one tenant with a 150,000-token daily budget; a client
# (budget_client.py) sends RATE req/s (Poisson), each to one replica drawn at random, until
# well after the budget is spent, and counts the tokens the clients received.
#   no_faults:  nothing else happens.
#   leader_kill: the Raft leader is SIGKILLed at KILL_AT s and restarted on its data dir at
#                RESTART_AT s (a refused connection is retried once on another replica).
#   multi_region: every ledger call between replicas is delayed DELAY_MS (50) each way
#                 (replicas in three regions; SWITCHYARD_RAFT_DELAY_MS, a chaos-only knob),
#                 with [cluster.raft] timings for that round trip: heartbeat 3 x RTT,
#                 elections 12-24 x RTT (RAFT_TIMINGS=default keeps the defaults, which
#                 time every heartbeat out at this delay).
#   multi_region_slow_disk: multi_region, and from the start of the load until its end every
#                 replica's Raft log flushes sleep STALL_MS (150) before their fsync
#                 (PUT /admin/chaos/flush-stall), and with STALL_JOURNAL=1 (default) its spend
#                 journal's syncs too: a shared disk slowed by other processes' writeback. A
#                 build whose endpoint has no journal stall refuses that body; the log-only
#                 stall is applied then and the run says so on stderr and in data/.../stall.txt.
#                 STALL_NODES=leader stalls only the replica leading when the load starts.
#   multi_region_leader_kill: multi_region, and the leader SIGKILLed at KILL_AT s and restarted
#                 at RESTART_AT s.
#   period_limits: two more tenants, one with a month limit of PERIOD_LIMIT tokens next to a
#                  far larger day limit, one with a purpose-scoped (business) day limit of
#                  PERIOD_LIMIT; a client per tenant at RATE/2 req/s.
# Per case: tokens served / budget, answers by status, and each replica's view of the spend
# (limit - switchyard_ledger_budget_remaining_tokens from its own applied state) once the
# leases have been reported or expired. Writes budget_utilisation.md.
#
# Per case also: latency of the 200 answers at the client, and the p99 of the ledger
# reservation on the request path (switchyard_ledger_reserve_seconds, summed over replicas).
# Bounded: up to 4 cases of DURATION s (default 50) plus start-up and settling, ~6 minutes.
source "$(dirname "$0")/lib.sh"
fig_init budget_utilisation

RATE="${RATE:-80}"
DURATION="${DURATION:-50}"
SEED="${SEED:-7}"
BUDGET="${BUDGET:-150000}"
KILL_AT="${KILL_AT:-10}"
RESTART_AT="${RESTART_AT:-16}"
CASES="${CASES:-no_faults leader_kill multi_region period_limits}"
DELAY_MS="${DELAY_MS:-50}"
PERIOD_LIMIT="${PERIOD_LIMIT:-60000}"
STALL_MS="${STALL_MS:-150}"
STALL_JOURNAL="${STALL_JOURNAL:-1}"
STALL_NODES="${STALL_NODES:-all}"
RAFT_TIMINGS="${RAFT_TIMINGS:-rtt}"
BASE="${FIG_PORT_BASE:-24000}"
GW_PORTS=($BASE $((BASE + 1)) $((BASE + 2)))
RAFT_PORTS=($((BASE + 5)) $((BASE + 6)) $((BASE + 7)))
SIM_PORTS=($((BASE + 11)) $((BASE + 12)) $((BASE + 13)) $((BASE + 14)))
require_ports "${GW_PORTS[@]}" "${RAFT_PORTS[@]}" "${SIM_PORTS[@]}"
CLIENT="python3 $FIG_DIR/budget_client.py"
TENANT_KEY="sk-budget-figure"
COMMANDS=()

CONFIG="$FIG_DATA/budget.toml"
cat >"$CONFIG" <<TOML
# The figure measures the ledger, not graded shedding: spend up to 100 % of the budget.
[admission.gates]
soft_limit = 1.0
hard_limit = 1.0

[[admission.tenants]]
api_key = "$TENANT_KEY"
caller = "acme"
max_priority = "P1"
tokens_per_day = $BUDGET

[[admission.tenants]]
api_key = "sk-month-figure"
caller = "monthly"
max_priority = "P1"
tokens_per_day = $((PERIOD_LIMIT * 100))
tokens_per_month = $PERIOD_LIMIT

[[admission.tenants]]
api_key = "sk-purpose-figure"
caller = "purposeful"
max_priority = "P1"

[[admission.tenants.purposes]]
purpose = "business"
tokens_per_day = $PERIOD_LIMIT
TOML
# The same config with Raft timings for replicas DELAY_MS apart each way.
RTT_MS=$((2 * DELAY_MS))
REGION_CONFIG="$FIG_DATA/budget_multi_region.toml"
cp "$CONFIG" "$REGION_CONFIG"
if [[ "$RAFT_TIMINGS" == rtt ]]; then
    cat >>"$REGION_CONFIG" <<TOML

[cluster.raft]
heartbeat_interval_ms = $((3 * RTT_MS))
election_timeout_min_ms = $((12 * RTT_MS))
election_timeout_max_ms = $((24 * RTT_MS))
install_snapshot_timeout_ms = $((30 * RTT_MS))
TOML
fi
BASE_ENV=(SWITCHYARD_CLUSTER_SECRET=figures-budget-utilisation)
GW_ENV=("${BASE_ENV[@]}")
RECORD_ENV=(SWITCHYARD_CLUSTER_SECRET=...)

record() {
    local line
    line="$(printf '%q ' "$@")"
    line="${line//$BIN_DIR/${BIN_DIR#"$REPO_ROOT"/}}"
    line="${line//$FIG_DIR/benches/figures}"
    line="${line//$FIG_WORK/\$WORK}"
    COMMANDS+=("${line% }")
}

# start_node I CASE: gateway I (0-based) with its own data dir; sets GW_PID.
start_node() {
    local i="$1" case_name="$2"
    local node=(--node-id $((i + 1)) --raft-addr "127.0.0.1:${RAFT_PORTS[$i]}"
        --data-dir "$FIG_WORK/$case_name-node$((i + 1))")
    if ((i > 0)); then node+=(--join "127.0.0.1:${RAFT_PORTS[0]}"); fi
    local config="$CONFIG"
    [[ "$case_name" == multi_region* ]] && config="$REGION_CONFIG"
    record env "${RECORD_ENV[@]}" "$GATEWAY_BIN" serve --config "$config" \
        --host 127.0.0.1 --port "${GW_PORTS[$i]}" "${URLS[@]}" "${node[@]}"
    start_gateway "$case_name-gateway-$i" "${GW_PORTS[$i]}" "$config" "${URLS[@]}" "${node[@]}"
}

leader_index() {
    admin GET "${GW_PORTS[0]}" /admin/cluster | python3 -c '
import json, sys
print(int(json.load(sys.stdin)["leader"]) - 1)'
}

# spent_on PORT [POOL LIMIT]: this replica's applied view of a pool's spend (default: acme).
spent_on() {
    local remaining pool="${2:-acme}" limit="${3:-$BUDGET}"
    remaining="$(curl -fsS --max-time 5 "http://127.0.0.1:$1/metrics" |
        awk -v want="switchyard_ledger_budget_remaining_tokens{pool=\"$pool\"}" '$1 == want {print $2}')"
    echo $((limit - ${remaining:-$limit}))
}

# client CASE KEY RATE: starts budget_client.py in the background; sets CLIENT_PID, CLIENT_OUT.
client() {
    local case_name="$1" key="$2" rate="$3"
    local targets="http://127.0.0.1:${GW_PORTS[0]},http://127.0.0.1:${GW_PORTS[1]},http://127.0.0.1:${GW_PORTS[2]}"
    CLIENT_OUT="$FIG_DATA/$case_name.$key.client.json"
    record $CLIENT run --targets "$targets" --key "$key" --rate "$rate" \
        --duration "$DURATION" --seed "$SEED" --out "$CLIENT_OUT"
    $CLIENT run --targets "$targets" --key "$key" --rate "$rate" \
        --duration "$DURATION" --seed "$SEED" --out "$CLIENT_OUT" &
    CLIENT_PID=$!
    FIG_PIDS+=("$CLIENT_PID")
}

# stall_disks CASE: every replica's flushes (and journal syncs) stall STALL_MS for DURATION s.
stall_disks() {
    local case_name="$1" i body log_only applied=() nodes=(0 1 2)
    [[ "$STALL_NODES" == leader ]] && nodes=("$(leader_index)")
    local window=$((DURATION * 1000))
    body="{\"stall_ms\": $STALL_MS, \"for_ms\": $window}"
    log_only="$body"
    ((STALL_JOURNAL)) && body="{\"stall_ms\": $STALL_MS, \"for_ms\": $window, \"journal\": true}"
    for i in "${nodes[@]}"; do
        if admin PUT "${GW_PORTS[$i]}" /admin/chaos/flush-stall -d "$body" >/dev/null 2>&1; then
            applied+=("node $((i + 1)): $body")
        else
            admin PUT "${GW_PORTS[$i]}" /admin/chaos/flush-stall -d "$log_only" >/dev/null
            applied+=("node $((i + 1)): $log_only (journal stall refused by this build)")
            echo "[budget_utilisation] node $((i + 1)): journal stall refused, log flushes only" >&2
        fi
    done
    printf '%s\n' "${applied[@]}" >"$FIG_DATA/$case_name.stall.txt"
    COMMANDS+=("PUT /admin/chaos/flush-stall on each replica when the load starts: ${applied[*]}")
}

CASE_JSON=()
run_case() {
    local case_name="$1" pids=() i
    GW_ENV=("${BASE_ENV[@]}")
    RECORD_ENV=(SWITCHYARD_CLUSTER_SECRET=...)
    if [[ "$case_name" == multi_region* ]]; then
        GW_ENV+=(SWITCHYARD_CHAOS_ENDPOINTS=1 "SWITCHYARD_RAFT_DELAY_MS=$DELAY_MS")
        RECORD_ENV+=(SWITCHYARD_CHAOS_ENDPOINTS=1 "SWITCHYARD_RAFT_DELAY_MS=$DELAY_MS")
    fi
    URLS=()
    for i in 0 1 2 3; do
        start_sim "$case_name-sim-$i" "${SIM_PORTS[$i]}" --time-scale 0.05
        pids+=("$SIM_PID")
        URLS+=(--worker-url "sim-$i=http://127.0.0.1:${SIM_PORTS[$i]}")
    done
    local gw=()
    for i in 0 1 2; do
        start_node "$i" "$case_name"
        gw+=("$GW_PID")
    done
    for i in 0 1 2; do wait_routable "${GW_PORTS[$i]}" 4; done
    # Three voters and every replica holding a lease on the budget.
    local tries=150
    until [[ "$(admin GET "${GW_PORTS[0]}" /admin/cluster | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["voters"]))')" == 3 ]]; do
        tries=$((tries - 1)); ((tries > 0)) || { echo "no 3 voters" >&2; exit 1; }
        sleep 0.2
    done
    sleep 3
    echo "[budget_utilisation] $case_name" >&2
    local clients=() outs=()
    if [[ "$case_name" == period_limits ]]; then
        client "$case_name" sk-month-figure "$(python3 -c "print($RATE / 2)")"
        clients+=("$CLIENT_PID"); outs+=("$CLIENT_OUT")
        client "$case_name" sk-purpose-figure "$(python3 -c "print($RATE / 2)")"
        clients+=("$CLIENT_PID"); outs+=("$CLIENT_OUT")
    else
        client "$case_name" "$TENANT_KEY" "$RATE"
        clients+=("$CLIENT_PID"); outs+=("$CLIENT_OUT")
    fi
    if [[ "$case_name" == *slow_disk ]]; then
        stall_disks "$case_name"
    fi
    if [[ "$case_name" == *leader_kill ]]; then
        sleep "$KILL_AT"
        local leader
        leader="$(leader_index)"
        echo "[budget_utilisation] SIGKILL node $((leader + 1)) at ${KILL_AT}s" >&2
        stop_pid "${gw[$leader]}" KILL
        sleep $((RESTART_AT - KILL_AT))
        echo "[budget_utilisation] restart node $((leader + 1)) at ${RESTART_AT}s" >&2
        start_node "$leader" "$case_name"
        gw[$leader]="$GW_PID"
    fi
    for i in "${clients[@]}"; do
        wait "$i" || true
        stop_pid "$i"
    done
    # Leases are reported at their next renewal or charged when they expire (10 s TTL).
    sleep 12
    for i in 0 1 2; do
        save_metrics "${GW_PORTS[$i]}" "$FIG_DATA/$case_name.gateway-$i.metrics.txt"
        # save_metrics drops histogram buckets; the reservation's are the request-path figure,
        # the commit's, log flush's and spend journal sync's show where a slow one waited.
        curl -fsS --max-time 5 "http://127.0.0.1:${GW_PORTS[$i]}/metrics" |
            grep -E '^switchyard_ledger_(reserve|commit|log_flush|journal_sync)_seconds_bucket' \
                >>"$FIG_DATA/$case_name.gateway-$i.metrics.txt" || true
    done
    admin GET "${GW_PORTS[0]}" /admin/quota >"$FIG_DATA/$case_name.quota.json" || true
    # One row per tenant: label, pool label, limit, client summary.
    local rows=()
    if [[ "$case_name" == period_limits ]]; then
        rows=("month monthly@2592000000ms $PERIOD_LIMIT ${outs[0]}"
            "purpose purposeful/business $PERIOD_LIMIT ${outs[1]}")
    else
        rows=("- acme $BUDGET ${outs[0]}")
    fi
    local row label pool limit out spent name
    for row in "${rows[@]}"; do
        read -r label pool limit out <<<"$row"
        spent=()
        for i in 0 1 2; do spent+=("$(spent_on "${GW_PORTS[$i]}" "$pool" "$limit")"); done
        name="$case_name"
        [[ "$label" == - ]] || name="$case_name ($label limit)"
        CASE_JSON+=("{\"name\": \"$name\", \"metrics\": \"$case_name\", \"budget\": $limit, \"client\": $(cat "$out"), \"spent_per_replica\": [${spent[0]}, ${spent[1]}, ${spent[2]}]}")
    done
    for i in "${gw[@]}" "${pids[@]}"; do stop_pid "$i"; done
}

for case_name in $CASES; do run_case "$case_name"; done

(IFS=,; echo "[${CASE_JSON[*]}]") >"$FIG_DATA/cases.json"
python3 - "$FIG_DATA/meta.json" "$FIG_META" "$RATE" "$DURATION" "$BUDGET" "$KILL_AT" "$RESTART_AT" "$DELAY_MS" "$PERIOD_LIMIT" "$RAFT_TIMINGS" "$SEED" "$STALL_MS" "${COMMANDS[@]}" <<'PY'
import json, sys, time
out, meta_tsv, rate, duration, budget, kill_at, restart_at, delay_ms, period_limit, raft_timings, seed, stall_ms, *commands = sys.argv[1:]
raft_timings = (
    f"for the round trip (heartbeat {6 * int(delay_ms)} ms, elections {24 * int(delay_ms)}-{48 * int(delay_ms)} ms)"
    if raft_timings == "rtt" else "at their defaults (heartbeat 100 ms, elections 400-800 ms)"
)
meta = dict(line.rstrip("\n").split("\t", 1) for line in open(meta_tsv) if "\t" in line)
meta["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
meta["loadavg_end"] = " ".join(open("/proc/loadavg").read().split()[:3])
meta["setup"] = (
    f"3 replicas (one Raft group), 4 simulated workers (--time-scale 0.05), one tenant with a "
    f"{budget}-token daily budget (soft/hard shedding thresholds at 100 %), {rate} req/s "
    f"Poisson (seed {seed}) for {duration} s, each request to a random replica, ~12-word unique prompt, "
    f"max_tokens 32, non-streaming. leader_kill: the leader is SIGKILLed at {kill_at} s and "
    f"restarted on its data dir at {restart_at} s. multi_region: every ledger call between "
    f"replicas delayed {delay_ms} ms each way, Raft timings {raft_timings}. multi_region_slow_disk: "
    f"multi_region with every replica's Raft log flushes (and spend-journal syncs where the build "
    f"supports it) stalled {stall_ms} ms for the load's duration. multi_region_leader_kill: "
    f"multi_region with the leader killed and restarted as in leader_kill. period_limits: a month limit of {period_limit} "
    f"tokens (day limit 100x) and a business-purpose day limit of {period_limit}, a client each "
    f"at {rate}/2 req/s. Spend per replica is read 12 s after the "
    f"load from each replica's own applied state."
)
meta["commands"] = commands
json.dump(meta, open(out, "w"), indent=1)
PY
$CLIENT render "$FIG_DATA" "$FIG_OUT"
cat "$FIG_OUT"
