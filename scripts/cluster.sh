#!/usr/bin/env bash
# A local three-node queen-node cluster as plain processes on loopback: an
# operator convenience for a persistent cluster. Tests and benchmarks start
# their nodes through nodeproc/ instead.
#
#   scripts/cluster.sh start     build, then start nodes 1..3 (HTTP on 6632, 6642, 6652)
#   scripts/cluster.sh status    each node's pid, role and the leader, from /health
#   scripts/cluster.sh stop      SIGTERM the nodes this script started
#   scripts/cluster.sh restart N stop node N (SIGTERM) and start it again with the same data
#   scripts/cluster.sh kill N    SIGKILL node N (kill -9)
#
# Data, logs and pid files live in ${QUEEN_CLUSTER_DIR:-./cluster-data}. The
# same command line starts a fresh cluster and restarts an existing one.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${QUEEN_CLUSTER_DIR:-./cluster-data}
bin="$dir/queen-node"
nodes=(1 2 3)

port() { echo $((6632 + ($1 - 1) * 10 + $2)); } # node, offset (0 http, 1 grpc, 2 raft, 3 gossip)
join() { local j=""; for n in "${nodes[@]}"; do j="$j${j:+,}127.0.0.1:$(port "$n" 3)"; done; echo "$j"; }

start_node() {
  local n=$1
  if [ -f "$dir/n$n.pid" ] && kill -0 "$(cat "$dir/n$n.pid")" 2>/dev/null; then
    echo "node $n already running (pid $(cat "$dir/n$n.pid"))"; return
  fi
  "$bin" --node-id "n$n" --data-dir "$dir/n$n" \
    --http-addr "127.0.0.1:$(port "$n" 0)" --grpc-addr "127.0.0.1:$(port "$n" 1)" \
    --raft-addr "127.0.0.1:$(port "$n" 2)" --gossip-addr "127.0.0.1:$(port "$n" 3)" \
    --join "$(join)" --bootstrap-expect 3 >>"$dir/n$n.log" 2>&1 &
  echo $! >"$dir/n$n.pid"
  echo "node $n started (pid $!, http 127.0.0.1:$(port "$n" 0), log $dir/n$n.log)"
}

stop_node() {
  local n=$1 sig=${2:-TERM}
  [ -f "$dir/n$n.pid" ] || return 0
  local pid; pid=$(cat "$dir/n$n.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill "-$sig" "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    echo "node $n stopped ($sig, pid $pid)"
  fi
  rm -f "$dir/n$n.pid"
}

status() {
  for n in "${nodes[@]}"; do
    local pid="-"; [ -f "$dir/n$n.pid" ] && pid=$(cat "$dir/n$n.pid")
    local h; h=$(curl -s -m 2 "http://127.0.0.1:$(port "$n" 0)/health" || true)
    if [ -z "$h" ]; then echo "node $n  pid $pid  down"; continue; fi
    echo "node $n  pid $pid  $(echo "$h" | jq -c '{status, role: .raft.role, leader: .raft.leaderId, term: .raft.term, applied: .raft.applied}')"
  done
}

case "${1:-}" in
  start)
    mkdir -p "$dir"
    go build -o "$bin" ./cmd/queen-node
    for n in "${nodes[@]}"; do start_node "$n"; done
    for _ in $(seq 1 100); do
      curl -sf -m 1 "http://127.0.0.1:$(port 1 0)/health" >/dev/null && break; sleep 0.1
    done
    status ;;
  stop) for n in "${nodes[@]}"; do stop_node "$n"; done ;;
  status) status ;;
  restart) stop_node "${2:?node number}"; start_node "$2" ;;
  kill) stop_node "${2:?node number}" KILL ;;
  *) sed -n '2,12p' "$0"; exit 2 ;;
esac
