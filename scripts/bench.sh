#!/usr/bin/env bash
# bench.sh: build queen-node and the load generator, start a throwaway
# single node on a temp data dir and free loopback ports, run the
# scenarios of scripts/bench against it, print the results and stop the
# node (by PID, on any exit).
#
# Usage: scripts/bench.sh [bench flags...]
#   scripts/bench.sh                          # all timed scenarios, 10 s each
#   scripts/bench.sh -duration 5s
#   scripts/bench.sh -scenario rss -rss-messages 1000000
# Env: KEEP_DATA=1 keeps the temp dir (data + node.log) for inspection;
#      QN_BIN=/path/to/queen-node benchmarks that binary instead of building
#      the working tree (e.g. a build of a given commit).
# Exit status: the load generator's (1 on any failed request or item).
# Time: build + <= 30 s start-up + about 4 x -duration for the timed
# scenarios + the pop-ack prefill (<= -prefill-timeout, 60 s); rss is
# capped by -rss-timeout (10 min). Every request has a -timeout (30 s).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/qn-bench.XXXXXX")
NODE_PID=""

stop_node() {
	[[ -n "$NODE_PID" ]] || return 0
	if kill -0 "$NODE_PID" 2>/dev/null; then
		kill -TERM "$NODE_PID" 2>/dev/null || true
		for _ in $(seq 1 150); do # up to 15 s for a clean shutdown
			kill -0 "$NODE_PID" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$NODE_PID" 2>/dev/null; then
			echo "bench.sh: node $NODE_PID ignored SIGTERM; sending SIGKILL" >&2
			kill -KILL "$NODE_PID" 2>/dev/null || true
		fi
	fi
	wait "$NODE_PID" 2>/dev/null || true
	NODE_PID=""
}

cleanup() {
	stop_node
	if [[ "${KEEP_DATA:-0}" == 1 ]]; then
		echo "bench.sh: kept $WORK" >&2
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# free_port prints a loopback port nobody is listening on (checked with a
# connect; the node's own bind is the final word, see the retry below).
free_port() {
	local p
	for _ in $(seq 1 100); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	echo "bench.sh: no free port found" >&2
	return 1
}

cd "$ROOT"
echo "bench.sh: building into $WORK" >&2
if [[ -n "${QN_BIN:-}" ]]; then
	cp "$QN_BIN" "$WORK/queen-node"
else
	go build -o "$WORK/queen-node" ./cmd/queen-node
	echo "bench.sh: node built from the working tree at $(git describe --always --dirty 2>/dev/null || echo '?')" >&2
fi
go build -o "$WORK/bench" ./scripts/bench

# start_node starts a node on fresh ports and waits up to 30 s for
# /health = 200; it fails if the node exits first (e.g. a port was taken).
start_node() {
	HTTP_PORT=$(free_port)
	local raft grpc gossip
	raft=$(free_port) grpc=$(free_port) gossip=$(free_port)
	rm -rf "$WORK/data"
	mkdir -p "$WORK/data"
	"$WORK/queen-node" --data-dir "$WORK/data" --node-id bench \
		--http-addr "127.0.0.1:$HTTP_PORT" --raft-addr "127.0.0.1:$raft" \
		--grpc-addr "127.0.0.1:$grpc" --gossip-addr "127.0.0.1:$gossip" \
		>"$WORK/node.log" 2>&1 &
	NODE_PID=$!
	for _ in $(seq 1 300); do
		if ! kill -0 "$NODE_PID" 2>/dev/null; then
			wait "$NODE_PID" 2>/dev/null || true
			NODE_PID=""
			return 1
		fi
		if [[ $(curl -s -o /dev/null -m 1 -w '%{http_code}' "http://127.0.0.1:$HTTP_PORT/health") == 200 ]]; then
			return 0
		fi
		sleep 0.1
	done
	echo "bench.sh: node not healthy after 30 s" >&2
	tail -n 20 "$WORK/node.log" >&2
	stop_node
	return 1
}

started=0
for attempt in 1 2 3; do
	if start_node; then
		started=1
		break
	fi
	echo "bench.sh: node failed to start (attempt $attempt):" >&2
	tail -n 5 "$WORK/node.log" >&2
done
[[ $started == 1 ]] || exit 1
echo "bench.sh: node pid $NODE_PID on http://127.0.0.1:$HTTP_PORT, data $WORK/data" >&2

rc=0
"$WORK/bench" -url "http://127.0.0.1:$HTTP_PORT" -pid "$NODE_PID" -data-dir "$WORK/data" "$@" || rc=$?

if ! kill -0 "$NODE_PID" 2>/dev/null; then
	echo "bench.sh: the node died during the run; last log lines:" >&2
	tail -n 20 "$WORK/node.log" >&2
	rc=1
fi
warns=$(grep -cE 'level=(WARN|ERROR)' "$WORK/node.log" || true)
if [[ "$warns" != 0 ]]; then
	echo "bench.sh: node logged $warns WARN/ERROR lines; first ones:" >&2
	grep -E 'level=(WARN|ERROR)' "$WORK/node.log" | head -n 5 >&2
fi
exit "$rc"
