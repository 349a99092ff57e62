#!/usr/bin/env bash
# Gateway overhead against an upstream that costs nothing: nginx answers every chat completion
# with one fixed JSON body (benches/e2e/nginx/upstream.conf.template). Measured side by side in
# one run, interleaved round by round: nginx straight, `switchyard serve --policy round_robin`
# and SMG (`smg launch --policy round_robin`), both gateways in front of the same nginx.
#
# Two measurements per target and round:
#   saturation  wrk, closed loop, CONNECTIONS connections: req/s, p50, p99
#   open loop   a fixed offered RATE (req/s) whatever the target's speed, so latency is
#               compared at an equal load: p50, p99 (p99.9 with oha). OPEN_LOOP=oha: oha -q
#               with --latency-correction (latency counts from when a request was due);
#               OPEN_LOOP=sim: `switchyard-sim load --workload uniform --no-stream` (Poisson
#               arrivals, its own client; not a gateway, so both targets see the same tool)
#
# Usage:  bash benches/e2e/nginx_upstream.sh    (needs nginx, wrk, oha, smg; see setup.sh)
#
# Knobs (environment variables, defaults in brackets):
#   DURATION      measured saturation run (wrk -d)                      [10s]
#   WARMUP        unmeasured wrk run before each measured one          [2s]
#   CONNECTIONS   wrk -c, and oha -c                                   [16]
#   WRK_THREADS   wrk -t                                               [2]
#   RATE          open-loop offered req/s; 0 = skip the open-loop runs [6400]
#   RATE_SECONDS  open-loop run length                                 [10]
#   ROUNDS        times the whole interleaved sweep is repeated        [3]
#   STEAL_MAX     the report marks a round whose saturation runs lost more than this percent
#                 of the CPU to the hypervisor (steal, /proc/stat; recorded per run)  [5]
#   STEAL_WAIT    before each run, wait up to this many seconds for a minute in which the
#                 hypervisor steals at most STEAL_WAIT_MAX percent [2] of CPUs kept busy
#                 (benches/host.sh: steal_probe); 0 = do not wait          [0]
#   ORDER         alternate = even rounds run the targets in reverse order, so a host that
#                 speeds up or slows down during the sitting favours no target; fixed = the
#                 TARGETS order every round                            [alternate]
#   TARGETS       any of: direct switchyard switchyard_b smg           ["direct switchyard smg"]
#   BIN_B, ENV_B  switchyard_b: a second switchyard (binary BIN_B/switchyard, default BIN's,
#                 run under `env ENV_B`, e.g. ENV_B='TOKIO_WORKER_THREADS=1'), measured in the
#                 same rounds, interleaved, for an A/B comparison of two builds or settings
#   NGINX_WORKERS nginx worker_processes                               [1]
#   PIN_SERVER    CPU list (taskset -c) for nginx and the gateway under test; empty = no pinning
#   PIN_LOAD      CPU list for wrk/oha; empty = no pinning                                   []
#   BASE_PORT     first loopback port tried (speed's block)            [21000]
#   OUT_DIR       raw outputs, logs, results.tsv                       [mktemp -d]
#   BIN           directory with the switchyard binary                 [target/release]
#   OPEN_LOOP     oha or sim (see above)                               [oha if installed, else sim]
#   SMG, OHA      commands                                             [smg, oha]
#   QUIET_WAIT    wait up to this many seconds for < 0.25 busy cores before each run [60]
#
# Every process started here runs in its own process group and is killed on exit; traffic goes
# to 127.0.0.1 only; every wait and every load run has a time limit. Exit status 1 if any
# measured run saw a non-2xx response or a socket error.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE="$ROOT/benches/e2e"
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
CONNECTIONS=${CONNECTIONS:-16}
WRK_THREADS=${WRK_THREADS:-2}
RATE=${RATE:-6400}
RATE_SECONDS=${RATE_SECONDS:-10}
ROUNDS=${ROUNDS:-3}
ORDER=${ORDER:-alternate}
STEAL_MAX=${STEAL_MAX:-5}
TARGETS=${TARGETS:-"direct switchyard smg"}
NGINX_WORKERS=${NGINX_WORKERS:-1}
PIN_SERVER=${PIN_SERVER:-}
PIN_LOAD=${PIN_LOAD:-}
BASE_PORT=${BASE_PORT:-21000}
OUT_DIR=${OUT_DIR:-$(mktemp -d /tmp/switchyard-nginx.XXXXXX)}
BIN=${BIN:-"${CARGO_TARGET_DIR:-$ROOT/target}/release"}
SMG=${SMG:-smg}
OHA=${OHA:-oha}
QUIET_WAIT=${QUIET_WAIT:-60}
if command -v "$OHA" >/dev/null; then OPEN_LOOP=${OPEN_LOOP:-oha}; else OPEN_LOOP=${OPEN_LOOP:-sim}; fi
BIN_B=${BIN_B:-$BIN}
ENV_B=${ENV_B:-}
MODEL=bench-model
mkdir -p "$OUT_DIR"
LOG_TAG=nginx-upstream
# shellcheck source=benches/e2e/lib.sh
source "$HERE/lib.sh"

BODY="{\"model\":\"$MODEL\",\"messages\":[{\"role\":\"user\",\"content\":\"Say hello to the benchmark.\"}],\"max_tokens\":1,\"stream\":false}"

# ---------------------------------------------------------------- prerequisites
for tool in nginx wrk curl taskset; do command -v "$tool" >/dev/null || die "$tool missing"; done
if [[ $RATE != 0 && $OPEN_LOOP == oha ]]; then command -v "$OHA" >/dev/null || die "oha missing (cargo install oha --locked)"; fi
if [[ $RATE != 0 && $OPEN_LOOP == sim ]]; then [[ -x $BIN/switchyard-sim ]] || die "no $BIN/switchyard-sim"; fi
if [[ " $TARGETS " == *" smg "* ]]; then command -v "$SMG" >/dev/null || die "smg missing"; fi
if [[ " $TARGETS " == *" switchyard "* ]]; then [[ -x $BIN/switchyard ]] || die "no $BIN/switchyard"; fi
if [[ " $TARGETS " == *" switchyard_b "* ]]; then [[ -x $BIN_B/switchyard ]] || die "no $BIN_B/switchyard"; fi

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc: $(nproc); cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "nginx: $(nginx -v 2>&1 | cut -d/ -f2); wrk: $(wrk --version 2>&1 | head -n 1 | cut -d' ' -f2)"
    [[ $RATE != 0 ]] && echo "open loop: $OPEN_LOOP $([[ $OPEN_LOOP == oha ]] && "$OHA" --version 2>&1 | head -n 1)"
    [[ " $TARGETS " == *" smg "* ]] && echo "smg: $(python3 -c 'import importlib.metadata as m; print(m.version("smg"))' 2>/dev/null || echo '?')"
    echo "switchyard: $BIN/switchyard, commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
    [[ " $TARGETS " == *" switchyard_b "* ]] && echo "switchyard_b: $BIN_B/switchyard under env ${ENV_B:-(nothing)}"
    echo "settings: DURATION=$DURATION CONNECTIONS=$CONNECTIONS WRK_THREADS=$WRK_THREADS RATE=$RATE" \
        "RATE_SECONDS=$RATE_SECONDS ROUNDS=$ROUNDS ORDER=$ORDER NGINX_WORKERS=$NGINX_WORKERS" \
        "PIN_SERVER='$PIN_SERVER' PIN_LOAD='$PIN_LOAD'"
} | tee "$OUT_DIR/machine.txt"

# ---------------------------------------------------------------- nginx and the gateways
start_nginx "$PIN_SERVER" "$NGINX_WORKERS"
declare -A URL=([direct]=$UPSTREAM)

# start_switchyard NAME BINARY [VAR=VALUE...]: `serve --policy round_robin` in front of nginx.
start_switchyard() {
    local name=$1 binary=$2 port; shift 2
    pick_port port
    start "$name" "$PIN_SERVER" env "$@" "$binary" serve --host 127.0.0.1 --port "$port" \
        --policy round_robin --worker-url "$UPSTREAM"
    URL[$name]="http://127.0.0.1:$port"
    wait_ready "$name" "${URL[$name]}"
}
if [[ " $TARGETS " == *" switchyard "* ]]; then start_switchyard switchyard "$BIN/switchyard"; fi
if [[ " $TARGETS " == *" switchyard_b "* ]]; then
    # shellcheck disable=SC2086 # ENV_B is a list of assignments
    start_switchyard switchyard_b "$BIN_B/switchyard" $ENV_B
fi
if [[ " $TARGETS " == *" smg "* ]]; then
    pick_port SMG_PORT
    pick_port SMG_METRICS_PORT
    start smg "$PIN_SERVER" "$SMG" launch --host 127.0.0.1 --port "$SMG_PORT" --worker-urls "$UPSTREAM" \
        --policy round_robin --disable-tokenizer-autoload \
        --prometheus-host 127.0.0.1 --prometheus-port "$SMG_METRICS_PORT" \
        --log-level warn --shutdown-grace-period-secs 1
    URL[smg]="http://127.0.0.1:$SMG_PORT"
    wait_ready smg "${URL[smg]}"
fi

# ---------------------------------------------------------------- measurements
LIMIT=$(($(secs "$DURATION") + $(secs "$WARMUP") + RATE_SECONDS + 30))
FAILED=0
RESULTS="$OUT_DIR/results.tsv"
printf 'round\ttarget\tmode\trps\tp50_us\tp99_us\tp999_us\tnon2xx\terrors\tload1\tsteal_pct\n' >"$RESULTS"

# saturation ROUND TARGET: one warm-up, one measured wrk run.
saturation() {
    local round=$1 target=$2 raw="$OUT_DIR/wrk-r$1-$2.txt" line kv ticks steal
    local -A r=()
    wait_quiet
    wait_no_steal
    MODEL=$MODEL pinned "$PIN_LOAD" timeout "$LIMIT" wrk -t "$WRK_THREADS" -c "$CONNECTIONS" \
        -d "$WARMUP" -s "$HERE/chat.lua" "${URL[$target]}/v1/chat/completions" >/dev/null 2>&1 || true
    ticks=$(cpu_ticks)
    MODEL=$MODEL pinned "$PIN_LOAD" timeout "$LIMIT" wrk -t "$WRK_THREADS" -c "$CONNECTIONS" \
        -d "$DURATION" --timeout 10s --latency -s "$HERE/chat.lua" \
        "${URL[$target]}/v1/chat/completions" >"$raw" 2>&1 || { cat "$raw" >&2; die "wrk failed"; }
    steal=$(steal_pct "$ticks")
    line=$(grep '^RESULT ' "$raw") || die "no RESULT line in $raw"
    for kv in ${line#RESULT }; do r[${kv%%=*}]=${kv#*=}; done
    printf '%s\t%s\tsaturation\t%s\t%s\t%s\t-\t%s\t%s\t%s\t%s\n' "$round" "$target" "${r[rps]}" \
        "${r[p50_us]}" "${r[p99_us]}" "${r[non2xx]}" "${r[errors]}" "$(cut -d' ' -f1 /proc/loadavg)" \
        "$steal" >>"$RESULTS"
    log "round $round $target saturation: ${r[rps]} req/s, p50 ${r[p50_us]} us, p99 ${r[p99_us]} us," \
        "non-2xx ${r[non2xx]}, errors ${r[errors]}, steal ${steal} %"
    [[ ${r[non2xx]} == 0 && ${r[errors]} == 0 ]] || FAILED=1
}

# open_loop ROUND TARGET: RATE req/s for RATE_SECONDS (oha, latency-corrected; or the sim's load tool).
open_loop() {
    local round=$1 target=$2 raw="$OUT_DIR/open-r$1-$2.json" row ticks steal
    wait_quiet
    wait_no_steal
    ticks=$(cpu_ticks)
    if [[ $OPEN_LOOP == oha ]]; then
        pinned "$PIN_LOAD" timeout "$LIMIT" "$OHA" --no-tui --output-format json -q "$RATE" \
            --latency-correction -c "$CONNECTIONS" -z "${RATE_SECONDS}s" -m POST \
            -H 'content-type: application/json' -d "$BODY" \
            "${URL[$target]}/v1/chat/completions" >"$raw" 2>"$raw.err" || { cat "$raw.err" >&2; die "oha failed"; }
    else
        pinned "$PIN_LOAD" timeout "$LIMIT" "$BIN/switchyard-sim" load --target "${URL[$target]}" \
            --rate "$RATE" --duration "$RATE_SECONDS" --workload uniform --no-stream \
            --model "$MODEL" --max-tokens 1 --timeout 10 --quiet --json "$raw" \
            >"$raw.out" 2>"$raw.err" || { cat "$raw.err" >&2; die "switchyard-sim load failed"; }
    fi
    row=$(python3 - "$raw" "$OPEN_LOOP" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
us = lambda v: "%d" % round((v or 0) * 1e6)
if sys.argv[2] == "oha":
    s, p = d["summary"], d["latencyPercentiles"]
    codes = d.get("statusCodeDistribution", {})
    ok = sum(v for k, v in codes.items() if 200 <= int(k) < 300)
    bad = sum(codes.values()) - ok
    errors = sum(d.get("errorDistribution", {}).values())
    print("%.1f\t%s\t%s\t%s\t%d\t%d" % (s["requestsPerSec"], us(p["p50"]), us(p["p99"]), us(p["p99.9"]), bad, errors))
else:
    e = d["e2e"]
    bad = sum(v for k, v in d["errors"].items() if k.isdigit())
    errors = sum(v for k, v in d["errors"].items() if not k.isdigit()) + d["client_dropped"]
    print("%.1f\t%s\t%s\t-\t%d\t%d" % (d["ok"] / d["issue_secs"], us(e["p50"]), us(e["p99"]), bad, errors))
EOF
    )
    steal=$(steal_pct "$ticks")
    printf '%s\t%s\topen_loop\t%s\t%s\t%s\n' "$round" "$target" "$row" "$(cut -d' ' -f1 /proc/loadavg)" \
        "$steal" >>"$RESULTS"
    log "round $round $target open loop at $RATE/s: $(tr '\t' ' ' <<<"$row") (req/s p50 p99 p99.9 us, non-2xx, errors)"
    [[ $(cut -f5,6 <<<"$row") == $'0\t0' ]] || FAILED=1
}

REVERSED=$(tr ' ' '\n' <<<"$TARGETS" | grep -v '^$' | tac | tr '\n' ' ')
for round in $(seq "$ROUNDS"); do
    order=$TARGETS
    if [[ $ORDER == alternate ]] && ((round % 2 == 0)); then order=$REVERSED; fi
    for target in $order; do saturation "$round" "$target"; done
    if [[ $RATE != 0 ]]; then
        for target in $order; do open_loop "$round" "$target"; done
    fi
done

# ---------------------------------------------------------------- report
python3 - "$RESULTS" "$STEAL_MAX" <<'EOF' | tee "$OUT_DIR/report.md"
import csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
def pick(target, mode, key):
    return [float(r[key]) for r in rows if r["target"] == target and r["mode"] == mode]
targets = list(dict.fromkeys(r["target"] for r in rows))
print("\n| target | mode | req/s mean (min-max) | p50 ms mean | p99 ms mean (min-max) | p99/p50 | p99.9 ms |")
print("|---|---|---:|---:|---:|---:|---:|")
for mode in ("saturation", "open_loop"):
    for t in targets:
        rps = pick(t, mode, "rps")
        if not rps: continue
        p50, p99 = pick(t, mode, "p50_us"), pick(t, mode, "p99_us")
        p999 = [float(r["p999_us"]) for r in rows if r["target"] == t and r["mode"] == mode and r["p999_us"] != "-"]
        print("| %s | %s | %.0f (%.0f-%.0f) | %.3f | %.3f (%.3f-%.3f) | %.2f | %s |" % (
            t, mode, st.mean(rps), min(rps), max(rps), st.mean(p50) / 1e3, st.mean(p99) / 1e3,
            min(p99) / 1e3, max(p99) / 1e3, st.mean(p99) / st.mean(p50),
            "%.3f" % (st.mean(p999) / 1e3) if p999 else "-"))
if {"switchyard", "smg"} <= set(targets):
    rounds = sorted({r["round"] for r in rows})
    def per_round(mode, key):
        out = []
        for rd in rounds:
            v = {r["target"]: float(r[key]) for r in rows if r["round"] == rd and r["mode"] == mode}
            if "switchyard" in v and "smg" in v and v["smg"] > 0: out.append(v["switchyard"] / v["smg"])
        return out
    thr = per_round("saturation", "rps")
    print("\nswitchyard/smg throughput per round: " + ", ".join("%.2f" % x for x in thr))
    lat = per_round("open_loop", "p99_us")
    if lat: print("switchyard/smg open-loop p99 per round: " + ", ".join("%.2f" % x for x in lat))
    # The hypervisor's steal during each run: a round whose two runs lost different shares of
    # the CPU compares the host's minutes, not the gateways.
    steal_max = float(sys.argv[2])
    print("\nper round (saturation): switchyard/smg throughput, p99/p50 switchyard and smg, steal %% of the two runs (rounds with steal > %g %% in either run marked *):" % steal_max)
    for rd in rounds:
        v = {r["target"]: r for r in rows if r["round"] == rd and r["mode"] == "saturation"}
        if "switchyard" in v and "smg" in v:
            a, b = v["switchyard"], v["smg"]
            sa, sb = float(a.get("steal_pct") or 0), float(b.get("steal_pct") or 0)
            print("round %s: %.2f, %.2f / %.2f, steal %.1f / %.1f%s" % (
                rd, float(a["rps"]) / float(b["rps"]), float(a["p99_us"]) / float(a["p50_us"]),
                float(b["p99_us"]) / float(b["p50_us"]), sa, sb, " *" if max(sa, sb) > steal_max else ""))
if {"switchyard", "switchyard_b"} <= set(targets):
    rounds = sorted({r["round"] for r in rows})
    for rd in rounds:
        v = {r["target"]: r for r in rows if r["round"] == rd and r["mode"] == "saturation"}
        if "switchyard" in v and "switchyard_b" in v:
            a, b = v["switchyard"], v["switchyard_b"]
            print("round %s switchyard_b/switchyard: throughput %.2f, p99/p50 %.2f vs %.2f" % (
                rd, float(b["rps"]) / float(a["rps"]), float(b["p99_us"]) / float(b["p50_us"]),
                float(a["p99_us"]) / float(a["p50_us"])))
EOF
echo
[[ $FAILED == 0 ]] && echo "correctness: every measured run had 0 non-2xx and 0 socket errors" \
    || echo "correctness: FAILED, some runs had non-2xx responses or socket errors"
echo "raw outputs and logs: $OUT_DIR"
exit "$FAILED"
