#!/usr/bin/env bash
# Brings up a local 3-replica Switchyard cluster with 4 simulated workers on loopback.
#   cluster/up.sh            # build (release) and start everything, print the URLs
#   cluster/down.sh          # stop everything
# State (pids, logs, ledger data) lives in cluster/.run/. Ports: gateways 8081-8083,
# Raft 7071-7073, sims 9001-9004. Admin keys: alice / bob (see cluster/switchyard.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=cluster/.run
mkdir -p "$RUN"
cargo build --release -q -p switchyard-gateway -p switchyard-sim
BIN=target/release

for i in 1 2 3 4; do
  "$BIN/switchyard-sim" worker --port "900$i" --name "sim-$i" --time-scale 0.2 \
    >"$RUN/sim-$i.log" 2>&1 &
  echo $! >>"$RUN/pids"
done

for id in 1 2 3; do
  args=(serve --config cluster/switchyard.toml --port "808$id" --node-id "$id"
        --raft-addr "127.0.0.1:707$id" --data-dir "$RUN/node$id")
  if [[ $id != 1 ]]; then args+=(--join 127.0.0.1:7071); fi
  SWITCHYARD_CLUSTER_SECRET=local-cluster-secret "$BIN/switchyard" "${args[@]}" \
    >"$RUN/node$id.log" 2>&1 &
  echo $! >>"$RUN/pids"
  sleep 1
done

for id in 1 2 3; do
  for _ in $(seq 1 50); do
    curl -sf "http://127.0.0.1:808$id/health" >/dev/null && break
    sleep 0.2
  done
done

cat <<INFO
Switchyard local cluster is up.
  gateways:  http://127.0.0.1:8081  http://127.0.0.1:8082  http://127.0.0.1:8083
  raft:      127.0.0.1:7071 127.0.0.1:7072 127.0.0.1:7073
  workers:   http://127.0.0.1:9001 .. 9004
  status:    SWITCHYARD_ADMIN_API_KEY=alice-local-admin-key target/release/switchyard ctl --url http://127.0.0.1:8082 cluster status
  request:   curl -s http://127.0.0.1:8081/v1/chat/completions -H 'authorization: Bearer sk-team-a' \\
               -H 'content-type: application/json' -d '{"model":"sim-llama","messages":[{"role":"user","content":"hi"}]}'
  logs:      $RUN/*.log      stop: cluster/down.sh
INFO
