#!/usr/bin/env bash
# Backend outage storm under demand overload: the overload_goodput.sh fleet (two sims, the
# gateway's max_concurrent = 6, tenants offering 5 / 10 / 20 req/s at P0 / P1 / P2, clients
# retrying as Retry-After says, up to 5 times). OUTAGE_AT s in, every worker answers 503 to
# everything for OUTAGE_FOR s (sim fault `unavailable` with `for_ms`, which clears itself),
# then recovers. Shows the recovery ramp's path (30 -> 50 -> 80 -> 100 % -> normal) and
# P0's success once the workers are routable again, per seed.
# Knobs as in overload_goodput.sh (SEEDS, OUTAGE_AT, OUTAGE_FOR, OUTAGE_DURATION,
# RAMP_HOLD_MS, FIG_PORT_BASE). Writes recovery_storm.md.
# Bounded: per seed about 35 s (light-load and full-dispatch capacity) + OUTAGE_DURATION s.
export CASES=outage FIG_NAME_OVERRIDE=recovery_storm
export FIG_PORT_BASE="${FIG_PORT_BASE:-23100}"
exec "$(dirname "$0")/overload_goodput.sh"
