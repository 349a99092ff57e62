# Shared helpers for the figure scripts in benches/figures/ (sourced, not run).
#
# Every process is started on 127.0.0.1 by these helpers, its pid remembered, and killed
# (by pid) when the script exits, whatever the reason. Binaries come from
# target/release (build them with `cargo build --release -p switchyard-gateway -p
# switchyard-sim`), or from $SWITCHYARD_BIN_DIR when set. Gateways log at warn, or at
# $FIG_GATEWAY_LOG when set (a RUST_LOG filter; e.g. switchyard_router=debug logs each
# replica's prompt group plan), into the work directory (kept with FIG_KEEP_WORK=1).

set -euo pipefail

FIG_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$FIG_DIR/../.." && pwd)"
BIN_DIR="${SWITCHYARD_BIN_DIR:-$REPO_ROOT/target/release}"
GATEWAY_BIN="$BIN_DIR/switchyard"
SIM_BIN="$BIN_DIR/switchyard-sim"
ADMIN_KEY="figures-admin-key"
FIGLIB="python3 $FIG_DIR/figlib.py"
# shellcheck source=benches/host.sh
source "$FIG_DIR/../host.sh"

FIG_PIDS=()
FIG_WORK=""
# Extra environment for gateways (e.g. SWITCHYARD_CLUSTER_SECRET=...).
GW_ENV=()

fig_init() {
    local name="$1"
    for bin in "$GATEWAY_BIN" "$SIM_BIN"; do
        if [[ ! -x "$bin" ]]; then
            echo "missing $bin: cargo build --release -p switchyard-gateway -p switchyard-sim" >&2
            exit 2
        fi
    done
    FIG_NAME="$name"
    FIG_WORK="$(mktemp -d "/tmp/switchyard-fig-$name.XXXXXX")"
    FIG_OUT="$FIG_DIR/$name.md"
    FIG_DATA="$FIG_DIR/data/$name"
    rm -rf "$FIG_DATA"
    mkdir -p "$FIG_DATA"
    FIG_META="$FIG_DATA/meta.tsv"
    : >"$FIG_META"
    meta started "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    meta host "$(nproc) cores, $(uname -sr)"
    meta loadavg_start "$(cut -d' ' -f1-3 /proc/loadavg)"
    meta git "tree at HEAD $(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown) with $(git -C "$REPO_ROOT" status --porcelain 2>/dev/null | wc -l) uncommitted paths; binaries in $BIN_DIR built $(date -u -r "$GATEWAY_BIN" +%Y-%m-%dT%H:%M:%SZ) (gateway), $(date -u -r "$SIM_BIN" +%Y-%m-%dT%H:%M:%SZ) (sim)"
    trap fig_cleanup EXIT
    trap 'exit 130' INT TERM
    echo "[$name] work dir $FIG_WORK" >&2
}

fig_cleanup() {
    local pid
    for pid in "${FIG_PIDS[@]:-}"; do
        [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
    done
    for pid in "${FIG_PIDS[@]:-}"; do
        [[ -n "$pid" ]] && wait "$pid" 2>/dev/null || true
    done
    FIG_PIDS=()
    # Process logs and raw poll samples; FIG_KEEP_WORK=1 keeps them for debugging.
    if [[ -n "$FIG_WORK" && "${FIG_KEEP_WORK:-0}" != 1 ]]; then
        rm -rf "$FIG_WORK"
    fi
}

# Stops one process started here (SIGTERM, or the signal given) and forgets it.
stop_pid() {
    local pid="$1" signal="${2:-TERM}"
    kill "-$signal" "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    local kept=() p
    for p in "${FIG_PIDS[@]:-}"; do
        [[ -n "$p" && "$p" != "$pid" ]] && kept+=("$p")
    done
    FIG_PIDS=("${kept[@]:-}")
}

now_ms() { date +%s%3N; }

# meta KEY VALUE: one fact for the markdown renderer.
meta() { printf '%s\t%s\n' "$1" "$2" >>"$FIG_META"; }

# Records an exact command line (binary paths shown relative to the repo).
log_cmd() {
    local line
    line="$(printf '%q ' "$@")"
    # Name the binaries as they were run: a debug build must not read as target/release.
    local shown_bin_dir="${BIN_DIR#"$REPO_ROOT"/}"
    line="${line//$BIN_DIR/$shown_bin_dir}"
    line="${line//$FIG_DIR/benches/figures}"
    line="${line//$FIG_WORK/\$WORK}"
    meta command "${line% }"
}

# Writes the figure's markdown page from the recorded facts: with figlib's renderer, or with
# the command given (called with the facts file and the page).
fig_render() {
    meta finished "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    meta loadavg_end "$(cut -d' ' -f1-3 /proc/loadavg)"
    if (($#)); then
        "$@" "$FIG_META" "$FIG_OUT"
    else
        python3 "$FIG_DIR/figrender.py" "$FIG_NAME" "$FIG_META" "$FIG_OUT"
    fi
}

# meta_vars NAME...: records each shell variable NAME as a fact named in lower case.
meta_vars() {
    local name
    for name in "$@"; do meta "${name,,}" "${!name}"; done
}

# Fixed ports per script (so recorded commands repeat verbatim across cases); refuses to
# start when one is taken.
port_free() {
    python3 -c 'import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1",int(sys.argv[1]))); s.close()' "$1" 2>/dev/null
}

require_ports() {
    local port
    for port in "$@"; do
        if ! port_free "$port"; then
            echo "port $port on 127.0.0.1 is taken; set FIG_PORT_BASE to another base" >&2
            exit 2
        fi
    done
}

# fleet_ports BASE SIMS: the gateway on BASE (GW_PORT) and SIMS sims on the ports after it
# (SIM_PORTS); refuses to start when one is taken.
fleet_ports() {
    local base="$1" sims="$2" i
    GW_PORT=$base
    SIM_PORTS=()
    for ((i = 1; i <= sims; i++)); do SIM_PORTS+=($((base + i))); done
    require_ports "$GW_PORT" "${SIM_PORTS[@]}"
}

wait_http() {
    local url="$1" tries=100
    until curl -fsS -o /dev/null --max-time 1 "$url" 2>/dev/null; do
        tries=$((tries - 1))
        if ((tries == 0)); then
            echo "timed out waiting for $url" >&2
            return 1
        fi
        sleep 0.1
    done
}

# start_sim NAME PORT [extra sim flags...]: sets SIM_PID.
start_sim() {
    local name="$1" port="$2"
    shift 2
    log_cmd "$SIM_BIN" worker --host 127.0.0.1 --port "$port" --name "$name" "$@"
    RUST_LOG=warn "$SIM_BIN" worker --host 127.0.0.1 --port "$port" --name "$name" "$@" \
        >"$FIG_WORK/$name.log" 2>&1 &
    SIM_PID=$!
    FIG_PIDS+=("$SIM_PID")
    wait_http "http://127.0.0.1:$port/health"
}

# start_gateway NAME PORT CONFIG [extra serve flags...]: sets GW_PID. Uses GW_ENV.
start_gateway() {
    local name="$1" port="$2" config="$3"
    shift 3
    log_cmd "$GATEWAY_BIN" serve --config "$config" --host 127.0.0.1 --port "$port" "$@"
    env "${GW_ENV[@]}" SWITCHYARD_ADMIN_API_KEY="$ADMIN_KEY" RUST_LOG="${FIG_GATEWAY_LOG:-warn}" "$GATEWAY_BIN" serve \
        --config "$config" --host 127.0.0.1 --port "$port" "$@" \
        >"$FIG_WORK/$name.log" 2>&1 &
    GW_PID=$!
    FIG_PIDS+=("$GW_PID")
    wait_http "http://127.0.0.1:$port/health"
}

# Waits until the gateway lists N routable workers.
wait_routable() {
    local port="$1" want="$2" tries=150
    while true; do
        local have
        have="$(curl -fsS --max-time 1 -H "authorization: Bearer $ADMIN_KEY" \
            "http://127.0.0.1:$port/admin/workers" 2>/dev/null |
            python3 -c 'import json,sys; print(sum(1 for w in json.load(sys.stdin)["workers"] if w.get("routability")=="routable"))' 2>/dev/null || echo 0)"
        ((have >= want)) && return 0
        tries=$((tries - 1))
        if ((tries == 0)); then
            echo "gateway on $port: only $have of $want workers routable" >&2
            return 1
        fi
        sleep 0.2
    done
}

# start_fleet_sims [sim flags...]: FLEET_SIZE sims (default: one per SIM_PORTS entry) named
# $FLEET_PREFIX-0, -1, ... (default sim); a `{i}` in a sim flag becomes the sim's index. Their
# pids, in index order, start FLEET_PIDS (for stop_fleet); WORKER_FLAGS gets a `--worker-url`
# for each.
start_fleet_sims() {
    local size="${FLEET_SIZE:-${#SIM_PORTS[@]}}" prefix="${FLEET_PREFIX:-sim}" i
    FLEET_PIDS=()
    WORKER_FLAGS=()
    for ((i = 0; i < size; i++)); do
        start_sim "$prefix-$i" "${SIM_PORTS[$i]}" "${@//\{i\}/$i}"
        FLEET_PIDS+=("$SIM_PID")
        WORKER_FLAGS+=(--worker-url "$prefix-$i=http://127.0.0.1:${SIM_PORTS[$i]}")
    done
}

# start_fleet CONFIG [sim flags...]: start_fleet_sims, then a gateway on GW_PORT with CONFIG in
# front of them (its pid last in FLEET_PIDS); waits until every sim is routable.
start_fleet() {
    local config="$1"
    shift
    start_fleet_sims "$@"
    local sims=${#FLEET_PIDS[@]}
    start_gateway gateway "$GW_PORT" "$config" "${WORKER_FLAGS[@]}"
    FLEET_PIDS+=("$GW_PID")
    wait_routable "$GW_PORT" "$sims"
}

# stop_fleet: stops every process in FLEET_PIDS.
stop_fleet() {
    local pid
    for pid in "${FLEET_PIDS[@]}"; do stop_pid "$pid"; done
    FLEET_PIDS=()
}

# sims_goodput SECONDS: completions per second the sims on SIM_PORTS count over the next
# SECONDS (from their own counters, so nothing of the gateway's view is in it).
sims_goodput() {
    local c0 c1 t0 t1
    c0="$(python3 "$FIG_DIR/overload_goodput.py" completed "${SIM_PORTS[@]}")"
    t0="$(now_ms)"
    sleep "$1"
    c1="$(python3 "$FIG_DIR/overload_goodput.py" completed "${SIM_PORTS[@]}")"
    t1="$(now_ms)"
    python3 -c "print(($c1 - $c0) / (($t1 - $t0) / 1000))"
}

# in_background CMD...: runs CMD in the background, stopped when the script exits; sets BG_PID.
in_background() {
    "$@" &
    BG_PID=$!
    FIG_PIDS+=("$BG_PID")
}

# Waits until the Raft group on PORT lists N members.
wait_members() {
    local port="$1" want="$2" tries=100 have
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

# save_metrics PORT FILE: the gateway's /metrics, switchyard_* series only.
save_metrics() {
    curl -fsS --max-time 5 "http://127.0.0.1:$1/metrics" | grep '^switchyard_' | grep -v -e '_bucket{' -e ' 0$' >"$2" || true
}

admin() {
    local method="$1" port="$2" path="$3"
    shift 3
    curl -fsS --max-time 5 -X "$method" -H "authorization: Bearer $ADMIN_KEY" \
        -H 'content-type: application/json' "http://127.0.0.1:$port$path" "$@"
}

sim_fault() {
    local port="$1" body="$2"
    curl -fsS --max-time 5 -X POST -H 'content-type: application/json' \
        "http://127.0.0.1:$port/admin/fault" -d "$body" >/dev/null
}

# run_load JSON_OUT [load flags...]: the load tool, progress lines kept in the work dir.
run_load() {
    local out="$1"
    shift
    log_cmd "$SIM_BIN" load --json "$out" "$@"
    RUST_LOG=warn "$SIM_BIN" load --json "$out" "$@" >"$FIG_WORK/$(basename "$out").table.txt" \
        2>"$FIG_WORK/$(basename "$out").progress.txt"
}

# start_load JSON_OUT [load flags...]: like run_load, in the background; sets LOAD_PID.
start_load() {
    local out="$1"
    shift
    log_cmd "$SIM_BIN" load --json "$out" "$@"
    RUST_LOG=warn "$SIM_BIN" load --json "$out" "$@" >"$FIG_WORK/$(basename "$out").table.txt" \
        2>"$FIG_WORK/$(basename "$out").progress.txt" &
    LOAD_PID=$!
    FIG_PIDS+=("$LOAD_PID")
}

# wait_load: waits for the background load run, then forgets its pid.
wait_load() {
    wait "$LOAD_PID" || true
    stop_pid "$LOAD_PID"
}

# start_poller OUT GATEWAY_PORT...: samples /admin/workers and /metrics every 100 ms.
start_poller() {
    local out="$1"
    shift
    in_background $FIGLIB poll --key "$ADMIN_KEY" --out "$out" --ports "$@"
    POLL_PID=$BG_PID
}
