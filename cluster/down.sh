#!/usr/bin/env bash
# Stops the local cluster started by cluster/up.sh and removes its state.
set -uo pipefail
cd "$(dirname "$0")/.."
RUN=cluster/.run
if [[ -f $RUN/pids ]]; then
  while read -r pid; do kill "$pid" 2>/dev/null; done <"$RUN/pids"
  sleep 1
  while read -r pid; do kill -9 "$pid" 2>/dev/null; done <"$RUN/pids"
fi
rm -rf "$RUN"
echo "local cluster stopped"
