#!/usr/bin/env bash
# bench.sh: build the load generator (scripts/bench) and run it with -start 1
# (or, with -cluster, -start 3): it builds queen-node, starts throwaway
# node(s) on a temp data dir and free loopback ports (nodeproc), runs the
# scenarios, prints the results and stops the node(s) it started.
#
# Usage: scripts/bench.sh [-cluster] [bench flags...]
#   scripts/bench.sh                          # all timed scenarios, 10 s each
#   scripts/bench.sh -duration 5s
#   scripts/bench.sh -scenario exactly-once,timers
#   scripts/bench.sh -scenario rss -rss-messages 1000000
#   scripts/bench.sh -cluster -scenario push-batch,push-single,pop-ack,latency,failover
#   scripts/bench.sh -vs-nats [-before /path/to/queen-node-of-the-commit-before]
#                                             # three-node queen-node beside three-node
#                                             # NATS JetStream, in one sitting, as ratios
# -cluster (or env CLUSTER=1): three nodes n1..n3 joined over gossip
#      (--join all three, --bootstrap-expect 3, one data dir each); worker w
#      uses node w mod 3, and the failover scenario kill -9s the leader and
#      restarts it. rss reads one node's memory and data dir, so it wants
#      single mode.
# When the scenarios include exactly-once or reads (also "all", the
# default), the node(s) start with --kv-read-rate 0: their gets are KV reads
# outside a transaction, which the node otherwise limits to 200/s.
# Env: KEEP_DATA=1 keeps the temp dir (data + node logs) for inspection;
#      QN_BIN=/path/to/queen-node benchmarks that binary instead of building
#      the working tree (e.g. a build of a given commit);
#      QN_NODE_ARGS="--flag v ..." extra flags for every node.
# Exit status: the load generator's (1 on any failed request or item, or a
# node that died).
# Time: build + <= 90 s start-up + about 6 x -duration for the timed
# scenarios + the prefills (<= -prefill-timeout, 60 s, each) + the timers
# drain (<= 17 s); failover about 3 x (5 s + recovery + restart); rss is
# capped by -rss-timeout (10 min). Every request has a -timeout (30 s).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLUSTER=${CLUSTER:-0}
ARGS=()
for a in "$@"; do
	case "$a" in
	-cluster | --cluster) CLUSTER=1 ;;
	*) ARGS+=("$a") ;;
	esac
done
NODES=1
[[ "$CLUSTER" == 1 ]] && NODES=3

cd "$ROOT"
BIN=$(mktemp -d "${TMPDIR:-/tmp}/qn-loadgen.XXXXXX")
trap 'rm -rf "$BIN"' EXIT
go build -o "$BIN/loadgen" ./scripts/bench
# The load generator stops its nodes on SIGINT/SIGTERM; pass ours on to it
# (by its PID) and wait until it has.
"$BIN/loadgen" -start "$NODES" "${ARGS[@]}" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true' INT TERM
rc=0
while :; do
	wait "$pid" && rc=0 || rc=$?
	kill -0 "$pid" 2>/dev/null || break
done
exit "$rc"
