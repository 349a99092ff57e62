# shellcheck shell=bash
# What the host did to a measurement (sourced by benches/e2e/lib.sh and benches/figures/lib.sh).
#
# On a virtual machine the hypervisor's steal (time a runnable vCPU did not get) slows every
# process alike and changes from one minute to the next; a run with much of it measured the
# host, not the target, so the scripts record it beside each run.

# cpu_ticks: "STEAL TOTAL" ticks of all CPUs so far.
cpu_ticks() { awk '/^cpu / {print $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }

# busy_ticks: "STEAL WANTED" ticks of all CPUs so far (wanted: everything but idle and iowait).
busy_ticks() { awk '/^cpu / {print $9, $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }

# stolen_share BEFORE NOW: percent of the second field's growth that the steal took, between
# two "STEAL TICKS" readings.
stolen_share() {
    awk -v b="$1" -v a="$2" 'BEGIN {
        split(b, x, " "); split(a, y, " "); t = y[2] - x[2]
        printf "%.1f", (t > 0 ? 100 * (y[1] - x[1]) / t : 0) }'
}

# steal_pct BEFORE (cpu_ticks before the run): percent of all CPU time stolen since.
steal_pct() { stolen_share "$1" "$(cpu_ticks)"; }

# steal_of_busy_pct BEFORE (busy_ticks before the run): the steal as a percent of the time the
# CPUs were wanted (busy or stolen). A lightly loaded run leaves the CPUs idle most of the
# time, so its share of all CPU time stays small even when the hypervisor took much of the
# little it needed; this is the figure to compare between such runs.
steal_of_busy_pct() { stolen_share "$1" "$(busy_ticks)"; }

# steal_probe: the steal while every CPU is kept busy for a moment, as a percent of that busy
# time. An idle machine accrues no steal whatever the hypervisor would take, so it is probed
# under load.
steal_probe() {
    local ticks pids=() i
    ticks=$(busy_ticks)
    for ((i = 0; i < $(nproc); i++)); do
        timeout 1.5 sh -c 'while :; do :; done' &
        pids+=($!)
    done
    wait "${pids[@]}" 2>/dev/null || true
    steal_of_busy_pct "$ticks"
}

# wait_no_steal: until steal_probe shows at most STEAL_WAIT_MAX percent [2], probing every
# 10 s for at most STEAL_WAIT seconds (0 or unset: do not wait). The hypervisor's steal comes
# and goes by the minute; starting each run in a quiet minute keeps runs comparable, and the
# steal during the run is still recorded beside it. Prints the last probe.
wait_no_steal() {
    local start=$SECONDS steal
    [[ ${STEAL_WAIT:-0} == 0 ]] && return 0
    while :; do
        steal=$(steal_probe)
        awk -v s="$steal" -v m="${STEAL_WAIT_MAX:-2}" 'BEGIN { exit !(s <= m) }' && break
        if ((SECONDS - start >= STEAL_WAIT)); then
            echo "host: steal still ${steal} % after ${STEAL_WAIT}s, measuring anyway" >&2
            break
        fi
        sleep 8.5
    done
    echo "host: steal probe ${steal} % after $((SECONDS - start))s" >&2
}
