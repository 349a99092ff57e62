#!/usr/bin/env bash
# Offline companion of fleet_affinity.sh: the `agentic` trace replayed through the real
# routing policies (crates/switchyard-router/examples/fleet_replay.rs) with 1, 3 and 5
# replicas, independent or sharing affinity events, per seed; then the moved share on a worker
# leaving, a worker joining and a replica restarting. No processes, no timing noise: it says
# where hits are lost (turns off their conversation's worker, split conversations, evictions)
# and is quick enough to try several seeds and sizes. Prints a markdown table on stdout.
#
#   cargo build -p switchyard-router --example fleet_replay -p switchyard-sim
#   benches/figures/fleet_replay.sh > benches/figures/fleet_replay.md
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
REPLAY="${REPLAY_BIN:-$ROOT/target/debug/examples/fleet_replay}"
SIM="${SIM_BIN:-$ROOT/target/debug/switchyard-sim}"
SEEDS="${SEEDS:-1 2 3}"
REQUESTS="${REQUESTS:-3600}"
KV_SHARE="${KV_SHARE:-0.75}"
LEGACY='{"cache_aware":{"anonymous_conversations":false}}'
# ROUTING: a `[routing]` section as JSON for the current-behaviour cases (e.g.
# '{"cache_aware":{"later_turn_escape_in_flight":8}}'); empty = the defaults.
ROUTING="${ROUTING:-}"
# ONLY=events: just the moved shares (worker leave / join, replica restart).
ONLY="${ONLY:-}"
CURRENT=()
[[ -n "$ROUTING" ]] && CURRENT=(--routing "$ROUTING")

row() {
    python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
oracle = float(sys.argv[1])
moved, checked, forced = d["moved_share"], d["moved_checked"], d.get("moved_forced", 0)
unforced = "-" if moved is None else f"{(round(moved * checked) - forced) / checked:.3f}"
print("| {seed} | {label} | {hit:.3f} | {share:.3f} | {cv:.3f} | {p99:.0f} | {split:.3f} | {off:.3f} | {evicted:.3f} | {moved} | {forced} | {unforced} |".format(
    seed=d["seed"], label=sys.argv[2], hit=d["hit_rate"], share=d["hit_rate"] / oracle,
    cv=d["load_cv"], p99=d["ttft_p99_ms"], split=d["split_conversations"],
    off=d["later_turns_off_previous_worker"], evicted=d["tokens_evicted_on_same_worker_share"],
    moved="-" if moved is None else f"{moved:.3f} of {checked}", forced=forced if moved is not None else "-",
    unforced=unforced))' "$@"
}

echo "| seed | case | hit rate | of oracle | load CV | TTFT p99 ms (model) | split conversations | later turns off their worker | tokens evicted on the right worker | moved share | of them on the departed worker | moved share beyond the departed worker's |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for seed in $SEEDS; do
    sizing="$("$SIM" oracle --workload agentic --seed "$seed" --requests "$REQUESTS" --workers 4 --working-set-share "$KV_SHARE")"
    kv="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["kv_blocks"])' "$sizing")"
    oracle="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["sticky_hit_rate"])' "$sizing")"
    echo "| $seed | sticky-session oracle (kv $kv blocks/worker) | $(printf '%.3f' "$oracle") | 1.000 | - | - | 0 | 0 | - | - | - | - |"
    common=(--seed "$seed" --requests "$REQUESTS" --kv-blocks "$kv")
    if [[ "$ONLY" != events ]]; then
    "$REPLAY" "${common[@]}" --policy round_robin | row "$oracle" "round_robin, 1"
    "$REPLAY" "${common[@]}" --routing "$LEGACY" | row "$oracle" "cache_aware before (prompt-prefix key), 1"
    "$REPLAY" "${common[@]}" --routing "$LEGACY" --replicas 3 | row "$oracle" "cache_aware before, 3 independent"
    "$REPLAY" "${common[@]}" --routing "$LEGACY" --replicas 3 --mode shared | row "$oracle" "cache_aware before, 3 sharing events"
    for workload in agentic agentic-keyed; do
        for replicas in 1 3 5; do
            for mode in independent shared; do
                [[ $replicas == 1 && $mode == shared ]] && continue
                "$REPLAY" "${common[@]}" "${CURRENT[@]}" --workload "$workload" --replicas "$replicas" --mode "$mode" |
                    row "$oracle" "cache_aware $workload, $replicas $mode"
            done
        done
    done
    fi
    for event in leave join restart; do
        for replicas in 3 5; do
            for mode in independent shared; do
                "$REPLAY" "${common[@]}" "${CURRENT[@]}" --replicas "$replicas" --mode "$mode" --event "$event" |
                    row "$oracle" "cache_aware agentic, $replicas $mode, $event at the midpoint"
            done
        done
    done
done
