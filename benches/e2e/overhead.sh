#!/usr/bin/env bash
# End-to-end gateway overhead: the same simulated worker measured straight, through
# `switchyard serve --policy round_robin` and through SMG (`smg launch --policy round_robin`),
# with wrk doing non-streaming chat completions over loopback.
#
# Usage:  bash benches/e2e/overhead.sh            (after: sudo bash benches/e2e/setup.sh)
#
# Knobs (environment variables, defaults in brackets):
#   DURATION     measured wrk run per target and concurrency          [10s]
#   WARMUP       unmeasured wrk run just before each measured one      [2s]
#   CONNECTIONS  concurrency levels (wrk -c), space separated          ["16 64"]
#   ROUNDS       times the whole interleaved sweep is repeated         [2]
#   WRK_THREADS  wrk -t                                                [2]
#   TARGETS      any of: direct switchyard smg                         ["direct switchyard smg"]
#   MAX_TOKENS   max_tokens of each request (output length)            [1]
#   TIME_SCALE   sim --time-scale (simulated durations multiplied)     [0.0001]
#   MAX_RUNNING  sim --max-running (batch size, large = no queueing)   [4096]
#   BASE_PORT    first loopback port tried; free ones are picked       [18400]
#   OUT_DIR      raw wrk outputs, process logs, results.tsv            [mktemp -d]
#   SKIP_BUILD   1 = use the existing target/release binaries          [0]
#   SMG          the SMG command                                       [smg]
#   QUIET_WAIT   before each measured run, wait up to this many seconds
#                for the machine to be idle (< 0.25 busy cores over 1 s;
#                other jobs' builds skew results); 0 = do not wait     [60]
#   MAX_OTHER    a measured run during which more cores than this were
#                busy outside the benchmark counts as noisy            [0.3]
#   NOISY_RETRIES  times a noisy run is redone (last attempt is kept)  [2]
#   REPORT_ONLY  path to an earlier results.tsv: print its report, run nothing
#
# Every process started here runs in its own process group and is killed on exit; traffic goes
# to 127.0.0.1 only; every wait and every wrk run has a time limit. Exit status 1 if any
# measured run saw a non-2xx response or a socket error (the runs are printed).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE="$ROOT/benches/e2e"
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
CONNECTIONS=${CONNECTIONS:-"16 64"}
ROUNDS=${ROUNDS:-2}
WRK_THREADS=${WRK_THREADS:-2}
TARGETS=${TARGETS:-"direct switchyard smg"}
MAX_TOKENS=${MAX_TOKENS:-1}
TIME_SCALE=${TIME_SCALE:-0.0001}
MAX_RUNNING=${MAX_RUNNING:-4096}
BASE_PORT=${BASE_PORT:-18400}
OUT_DIR=${OUT_DIR:-$(mktemp -d /tmp/switchyard-e2e.XXXXXX)}
SKIP_BUILD=${SKIP_BUILD:-0}
SMG=${SMG:-smg}
QUIET_WAIT=${QUIET_WAIT:-60}
MAX_OTHER=${MAX_OTHER:-0.3}
NOISY_RETRIES=${NOISY_RETRIES:-2}
MODEL=sim-llama
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release"
mkdir -p "$OUT_DIR"

LOG_TAG=overhead
# shellcheck source=benches/e2e/lib.sh
source "$HERE/lib.sh"

BODY="{\"model\":\"$MODEL\",\"messages\":[{\"role\":\"user\",\"content\":\"ping\"}],\"max_tokens\":1}"

# report RESULTS_TSV: the markdown tables (means over rounds, ratios, CPU per request).
report() {
    awk -F'\t' '
NR == 1 { next }
{
    k = $2 SUBSEP $3
    if ($1 > maxround) maxround = $1
    n[k]++; rps[k] += $5; p50[k] += $6; p99[k] += $7; bad[k] += $8; err[k] += $10
    reqs[k] += $4; wall[k] += $11; simc[k] += $12; gwc[k] += $13; wrkc[k] += $14; oth[k] += $15
    if (!(k in lo) || $5 < lo[k]) lo[k] = $5
    if (!(k in hi) || $5 > hi[k]) hi[k] = $5
    if ($15 / $11 > maxoth) maxoth = $15 / $11
    nnoisy += $16
    if (!($2 in seen_c)) { seen_c[$2] = 1; conns[++nc] = $2 }
    if (!($3 in seen_t)) { seen_t[$3] = 1; targets[++nt] = $3 }
}
function has(c, t) { return ((c SUBSEP t) in n) }
function m(a, c, t) { return a[c SUBSEP t] / n[c SUBSEP t] }
function ratio(c, a, b) { return (has(c, a) && has(c, b)) ? sprintf("%.2f", m(rps, c, a) / m(rps, c, b)) : "n/a" }
function added(arr, c, t) { return (has(c, t) && has(c, "direct")) ? sprintf("%+.2f", (m(arr, c, t) - m(arr, c, "direct")) / 1000) : "n/a" }
function per_req(a, c, t) { return sprintf("%.0f", a[c SUBSEP t] / reqs[c SUBSEP t] * 1e6) }
END {
    printf "\nPer target (mean of %d rounds; req/s range = min-max over rounds; latency in ms;\n", maxround
    print "CPU in microseconds per request, summed over the measured runs; \"other cores\" = average"
    print "cores busy outside the benchmark processes: kernel time not charged to them, other jobs):\n"
    print "| conns | target | req/s | req/s range | p50 ms | p99 ms | non-2xx | socket errors | gateway CPU us/req | upstream CPU us/req | wrk CPU us/req | other cores |"
    print "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for (i = 1; i <= nc; i++) for (j = 1; j <= nt; j++) {
        c = conns[i]; t = targets[j]; if (!has(c, t)) continue
        k = c SUBSEP t
        printf "| %s | %s | %.0f | %.0f-%.0f | %.2f | %.2f | %d | %d | %s | %s | %s | %.2f |\n", c, t, m(rps, c, t),
            lo[k], hi[k], m(p50, c, t) / 1000, m(p99, c, t) / 1000, bad[k], err[k],
            (t == "direct" ? "-" : per_req(gwc, c, t)), per_req(simc, c, t), per_req(wrkc, c, t), oth[k] / wall[k]
    }
    print "\nRatios (throughput) and latency added over direct (ms):\n"
    print "| conns | switchyard/direct | switchyard/smg | smg/direct | switchyard +p50 | switchyard +p99 | smg +p50 | smg +p99 | gateway CPU/req switchyard/smg |"
    print "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for (i = 1; i <= nc; i++) {
        c = conns[i]
        cpu_ratio = (has(c, "switchyard") && has(c, "smg")) ? sprintf("%.2f", \
            (gwc[c SUBSEP "switchyard"] / reqs[c SUBSEP "switchyard"]) / (gwc[c SUBSEP "smg"] / reqs[c SUBSEP "smg"])) : "n/a"
        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c,
            ratio(c, "switchyard", "direct"), ratio(c, "switchyard", "smg"), ratio(c, "smg", "direct"),
            added(p50, c, "switchyard"), added(p99, c, "switchyard"), added(p50, c, "smg"), added(p99, c, "smg"), cpu_ratio
    }
    if (nnoisy > 0)
        printf "\nnoise: %d kept run(s) still noisy after retries; worst: %.2f cores busy outside the benchmark (see results.tsv)\n", nnoisy, maxoth
}' "$1"
}

# REPORT_ONLY=path/to/results.tsv: print the report of an earlier run and stop.
if [[ -n ${REPORT_ONLY:-} ]]; then
    report "$REPORT_ONLY"
    exit 0
fi

# ---------------------------------------------------------------- prerequisites
command -v wrk >/dev/null || die "wrk missing: run benches/e2e/setup.sh"
command -v curl >/dev/null || die "curl missing"
if [[ " $TARGETS " == *" smg "* ]] && ! command -v "$SMG" >/dev/null; then
    die "smg missing: run benches/e2e/setup.sh, or set TARGETS without smg"
fi
if [[ $SKIP_BUILD != 1 ]]; then
    log "building release binaries"
    (cd "$ROOT" && cargo build --release -p switchyard-gateway -p switchyard-sim)
fi
[[ -x $BIN/switchyard && -x $BIN/switchyard-sim ]] || die "no release binaries in $BIN"

# ---------------------------------------------------------------- machine facts
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc: $(nproc)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "mem: $(free -g | awk '/^Mem:/ {print $2 " GiB"}')"
    echo "wrk: $(wrk --version 2>&1 | head -n 1 | cut -d' ' -f1-2)"
    if [[ " $TARGETS " == *" smg "* ]]; then
        echo "smg: $(python3 -c 'import importlib.metadata as m; print(m.version("smg"))' 2>/dev/null || echo '?')"
    fi
    echo "switchyard commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "settings: DURATION=$DURATION WARMUP=$WARMUP CONNECTIONS=\"$CONNECTIONS\" ROUNDS=$ROUNDS" \
        "WRK_THREADS=$WRK_THREADS MAX_TOKENS=$MAX_TOKENS TIME_SCALE=$TIME_SCALE MAX_RUNNING=$MAX_RUNNING"
} | tee "$OUT_DIR/machine.txt"

# ---------------------------------------------------------------- the upstream and the gateways
pick_port SIM_PORT
start sim "" "$BIN/switchyard-sim" worker --host 127.0.0.1 --port "$SIM_PORT" --model "$MODEL" \
    --time-scale "$TIME_SCALE" --max-running "$MAX_RUNNING"
UPSTREAM="http://127.0.0.1:$SIM_PORT"
wait_ready sim "$UPSTREAM"
declare -A URL=([direct]=$UPSTREAM)

if [[ " $TARGETS " == *" switchyard "* ]]; then
    pick_port SY_PORT
    start switchyard "" "$BIN/switchyard" serve --host 127.0.0.1 --port "$SY_PORT" \
        --policy round_robin --worker-url "$UPSTREAM"
    URL[switchyard]="http://127.0.0.1:$SY_PORT"
    wait_ready switchyard "${URL[switchyard]}"
    grep -q 'switchyard gateway listening' "$OUT_DIR/switchyard.log" \
        || log "warning: no 'switchyard gateway listening' line in switchyard.log"
fi

if [[ " $TARGETS " == *" smg "* ]]; then
    pick_port SMG_PORT
    pick_port SMG_METRICS_PORT
    # --disable-tokenizer-autoload: pure load balancing, no tokenizer (and no hub download);
    # metrics bound to loopback (SMG's default is 0.0.0.0:29000); warn-level logs.
    start smg "" "$SMG" launch --host 127.0.0.1 --port "$SMG_PORT" --worker-urls "$UPSTREAM" \
        --policy round_robin --disable-tokenizer-autoload \
        --prometheus-host 127.0.0.1 --prometheus-port "$SMG_METRICS_PORT" \
        --log-level warn --shutdown-grace-period-secs 1
    URL[smg]="http://127.0.0.1:$SMG_PORT"
    wait_ready smg "${URL[smg]}"
fi

# ---------------------------------------------------------------- measurements
RESULTS="$OUT_DIR/results.tsv"
printf 'round\tconns\ttarget\trequests\trps\tp50_us\tp99_us\tnon2xx\tbad_status\terrors\twall_s\tsim_cpu_s\tgw_cpu_s\twrk_cpu_s\tother_cpu_s\tnoisy\n' \
    >"$RESULTS"
head -n 1 "$RESULTS" >"$OUT_DIR/noisy.tsv"
WRK_LIMIT=$(($(secs "$DURATION") + $(secs "$WARMUP") + 30))
FAILED=0

# wrk_run TARGET CONNS DURATION OUTFILE: wrk's own CPU seconds (user+sys) go to OUTFILE.cpu.
wrk_run() {
    local TIMEFORMAT='%U %S' rc=0
    { time MODEL=$MODEL MAX_TOKENS=$MAX_TOKENS timeout "$WRK_LIMIT" \
        wrk -t "$WRK_THREADS" -c "$2" -d "$3" --timeout 10s --latency -s "$HERE/chat.lua" \
        "${URL[$1]}/v1/chat/completions" >"$4" 2>&1 || rc=$?; } 2>"$4.cpu"
    return "$rc"
}

# CPU accounting, in clock ticks: one process group's (the machine's: `machine_busy`).
group_ticks() {
    local pid sum=0 stat
    for pid in $(ps -o pid= --sid "$1" 2>/dev/null); do
        stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
        stat=${stat##*) }   # fields after the command name; utime, stime are 12th and 13th here
        read -r -a f <<<"$stat"
        sum=$((sum + f[11] + f[12]))
    done
    echo "$sum"
}

# measure ROUND CONNS TARGET: one warm-up plus one measured wrk run; appends a results.tsv row.
# A run during which more than MAX_OTHER cores were busy outside the benchmark is logged to
# noisy.tsv and redone (at most NOISY_RETRIES times); the last attempt is kept either way.
measure() {
    local round=$1 conns=$2 target=$3 attempt=0 raw line kv cpu busy0 busy1 sim0 sim1 gw0 gw1 t0 t1
    local wrk_user wrk_sys wall sim_cpu gw_cpu wrk_cpu other_cpu noisy row
    local -A r
    while :; do
        raw="$OUT_DIR/wrk-r$round-c$conns-$target-a$attempt.txt"
        wait_quiet
        wrk_run "$target" "$conns" "$WARMUP" "$raw.warmup" || true
        busy0=$(machine_busy); sim0=$(group_ticks "${PGID[sim]}"); gw0=0
        [[ $target != direct ]] && gw0=$(group_ticks "${PGID[$target]}")
        t0=$(date +%s%N)
        wrk_run "$target" "$conns" "$DURATION" "$raw" || { cat "$raw" >&2; die "wrk failed"; }
        t1=$(date +%s%N); busy1=$(machine_busy); sim1=$(group_ticks "${PGID[sim]}"); gw1=0
        [[ $target != direct ]] && gw1=$(group_ticks "${PGID[$target]}")
        read -r wrk_user wrk_sys <"$raw.cpu"
        line=$(grep '^RESULT ' "$raw") || { cat "$raw" >&2; die "no RESULT line in $raw"; }
        r=()
        for kv in ${line#RESULT }; do r[${kv%%=*}]=${kv#*=}; done
        # CPU seconds during the measured run: upstream, gateway, wrk, everything else.
        cpu=$(awk -v t="$TICK" -v b="$((busy1 - busy0))" -v s="$((sim1 - sim0))" \
            -v g="$((gw1 - gw0))" -v wu="$wrk_user" -v ws="$wrk_sys" -v ns="$((t1 - t0))" \
            'BEGIN { other = b / t - s / t - g / t - wu - ws; if (other < 0) other = 0
                     printf "%.2f\t%.2f\t%.2f\t%.2f\t%.2f", ns / 1e9, s / t, g / t, wu + ws, other }')
        IFS=$'\t' read -r wall sim_cpu gw_cpu wrk_cpu other_cpu <<<"$cpu"
        noisy=$(awk -v o="$other_cpu" -v w="$wall" -v m="$MAX_OTHER" 'BEGIN { print (o / w > m) ? 1 : 0 }')
        row=$(printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s' "$round" "$conns" "$target" \
            "${r[requests]}" "${r[rps]}" "${r[p50_us]}" "${r[p99_us]}" "${r[non2xx]}" \
            "${r[bad_status]}" "${r[errors]}" "$cpu" "$noisy")
        log "round $round, $conns conns, $target: ${r[rps]} req/s," \
            "p50 ${r[p50_us]} us, p99 ${r[p99_us]} us, non-2xx ${r[non2xx]}, socket errors ${r[errors]};" \
            "CPU s over ${wall}s: upstream $sim_cpu, gateway $gw_cpu, wrk $wrk_cpu, other $other_cpu"
        if [[ ${r[non2xx]} != 0 || ${r[errors]} != 0 ]]; then
            FAILED=1
            log "CORRECTNESS: $target at $conns conns: ${r[non2xx]} non-2xx" \
                "(e.g. status ${r[bad_status]}), ${r[errors]} socket errors; wrk output:"
            cat "$raw" >&2
        fi
        if [[ $noisy == 1 && $attempt -lt $NOISY_RETRIES ]]; then
            log "  noisy (other jobs used $other_cpu CPU s): redoing this run"
            printf '%s\n' "$row" >>"$OUT_DIR/noisy.tsv"
            attempt=$((attempt + 1))
            continue
        fi
        printf '%s\n' "$row" >>"$RESULTS"
        return 0
    done
}

# Interleaved: every target at one concurrency, then the next concurrency, then the next round,
# so slow drifts in machine load hit all targets alike.
for round in $(seq "$ROUNDS"); do
    for conns in $CONNECTIONS; do
        for target in $TARGETS; do
            measure "$round" "$conns" "$target"
        done
    done
done

# ---------------------------------------------------------------- report
report "$RESULTS" | tee "$OUT_DIR/report.md"

echo
if [[ $FAILED == 0 ]]; then
    echo "correctness: every measured run had 0 non-2xx responses and 0 socket errors"
else
    echo "correctness: FAILED, some runs had non-2xx responses or socket errors (see above)"
fi
echo "raw outputs and logs: $OUT_DIR"
exit "$FAILED"
