#!/usr/bin/env bash
# bench.sh: build queen-node and the load generator, start a throwaway
# single node (or, with -cluster, a three-node cluster) on a temp data dir
# and free loopback ports, run the scenarios of scripts/bench against it,
# print the results and stop the node(s) (by PID, on any exit).
#
# Usage: scripts/bench.sh [-cluster] [bench flags...]
#   scripts/bench.sh                          # all timed scenarios, 10 s each
#   scripts/bench.sh -duration 5s
#   scripts/bench.sh -scenario exactly-once,timers
#   scripts/bench.sh -scenario rss -rss-messages 1000000
#   scripts/bench.sh -cluster -scenario push-batch,push-single,pop-ack,latency,failover
# -cluster (or env CLUSTER=1): three nodes n1..n3 joined over gossip
#      (--join all three, --bootstrap-expect 3, one data dir each); the load
#      generator gets -urls of all three (worker w uses node w mod 3),
#      -node-pids and -restart-cmd, which the failover scenario needs (it
#      kill -9s the leader and restarts it through $WORK/restart-node).
#      rss reads one node's memory and data dir, so it wants single mode.
# When the scenarios include exactly-once (also "all", the default), the
# node(s) start with --kv-read-rate 0: its marker get is a KV read outside
# a transaction, which the node otherwise limits to 200/s.
# Env: KEEP_DATA=1 keeps the temp dir (data + node logs) for inspection;
#      QN_BIN=/path/to/queen-node benchmarks that binary instead of building
#      the working tree (e.g. a build of a given commit);
#      QN_NODE_ARGS="--flag v ..." extra flags for every node.
# Exit status: the load generator's (1 on any failed request or item).
# Time: build + <= 60 s start-up + about 6 x -duration for the timed
# scenarios + the prefills (<= -prefill-timeout, 60 s, each) + the timers
# drain (<= 17 s); failover about 3 x (5 s + recovery + restart); rss is
# capped by -rss-timeout (10 min). Every request has a -timeout (30 s).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/qn-bench.XXXXXX")
NODES=()

CLUSTER=${CLUSTER:-0}
ARGS=()
for a in "$@"; do
	case "$a" in
	-cluster | --cluster) CLUSTER=1 ;;
	*) ARGS+=("$a") ;;
	esac
done

# The scenarios asked for (bench's -scenario, default all).
SCENARIOS=all
for ((i = 0; i < ${#ARGS[@]}; i++)); do
	case "${ARGS[$i]}" in
	-scenario | --scenario) SCENARIOS=${ARGS[$((i + 1))]:-} ;;
	-scenario=* | --scenario=*) SCENARIOS=${ARGS[$i]#*=} ;;
	esac
done
NODE_EXTRA=()
if [[ ",$SCENARIOS," == *",all,"* || ",$SCENARIOS," == *",exactly-once,"* ]]; then
	NODE_EXTRA+=(--kv-read-rate 0)
	echo "bench.sh: exactly-once selected: starting the node(s) with --kv-read-rate 0 (unlimited KV reads outside transactions; the default is 200/s)" >&2
fi
if [[ -n "${QN_NODE_ARGS:-}" ]]; then
	read -r -a extra <<<"$QN_NODE_ARGS"
	NODE_EXTRA+=("${extra[@]}")
fi

# node_pid prints node $1's current PID (failover restarts update the file).
node_pid() { cat "$WORK/$1/pid" 2>/dev/null || true; }

# stop_node stops node $1 by its PID: SIGTERM, up to 15 s, then SIGKILL.
stop_node() {
	local id=$1 pid
	pid=$(node_pid "$id")
	[[ -n "$pid" ]] || return 0
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 1 150); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "bench.sh: node $id ($pid) ignored SIGTERM; sending SIGKILL" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	rm -f "$WORK/$id/pid"
}

stop_all() {
	local id
	for id in "${NODES[@]}"; do stop_node "$id"; done
}

cleanup() {
	stop_all
	if [[ "${KEEP_DATA:-0}" == 1 ]]; then
		echo "bench.sh: kept $WORK" >&2
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# free_port prints a loopback port nobody is listening on (checked with a
# connect; the node's own bind is the final word, see the retry below) and
# that this run has not handed out before ($WORK/ports).
free_port() {
	local p
	for _ in $(seq 1 100); do
		p=$((20000 + RANDOM % 40000))
		grep -qx "$p" "$WORK/ports" 2>/dev/null && continue
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p" >>"$WORK/ports"
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
go build -o "$WORK/loadgen" ./scripts/bench

# The restart command failover runs: "restart-node ID" starts node ID again
# in the background on its data dir and ports and prints its PID.
cat >"$WORK/restart-node" <<EOF
#!/usr/bin/env bash
set -eu
d="$WORK/\$1"
"\$d/run" >>"\$d/node.log" 2>&1 </dev/null &
echo \$! >"\$d/pid"
echo \$!
EOF
chmod +x "$WORK/restart-node"

# write_node ID JOIN: fresh ports, an empty data dir, and $WORK/ID/run,
# which execs the node with them (so its PID is the node's).
declare -A HTTP_PORT
write_node() {
	local id=$1 join=$2 raft grpc gossip
	HTTP_PORT[$id]=$(free_port)
	raft=$(free_port) grpc=$(free_port) gossip=$(cat "$WORK/$id.gossip")
	rm -rf "$WORK/$id"
	mkdir -p "$WORK/$id/data"
	{
		echo '#!/usr/bin/env bash'
		printf 'exec %q' "$WORK/queen-node"
		printf ' %q' --data-dir "$WORK/$id/data" --node-id "$id" \
			--http-addr "127.0.0.1:${HTTP_PORT[$id]}" --raft-addr "127.0.0.1:$raft" \
			--grpc-addr "127.0.0.1:$grpc" --gossip-addr "127.0.0.1:$gossip"
		if [[ -n "$join" ]]; then
			printf ' %q' --join "$join" --bootstrap-expect "${#NODES[@]}"
		fi
		if ((${#NODE_EXTRA[@]})); then
			printf ' %q' "${NODE_EXTRA[@]}"
		fi
		echo
	} >"$WORK/$id/run"
	chmod +x "$WORK/$id/run"
}

# up ID: is node ID running and answering /health 200?
up() {
	local pid
	pid=$(node_pid "$1")
	[[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null &&
		[[ $(curl -s -o /dev/null -m 1 -w '%{http_code}' "http://127.0.0.1:${HTTP_PORT[$1]}/health") == 200 ]]
}

# has_leader ID: does node ID's /api/v1/system/cluster name a leader?
has_leader() {
	curl -s -m 1 "http://127.0.0.1:${HTTP_PORT[$1]}/api/v1/system/cluster" | grep -q '"leader":{"id":"[^"]'
}

# start_nodes starts every node on fresh ports and waits up to 60 s until
# each answers /health 200 and (in a cluster) its cluster view names a
# leader; it fails if a node exits first (e.g. a port was taken).
start_nodes() {
	local id join="" ok
	for id in "${NODES[@]}"; do
		free_port >"$WORK/$id.gossip"
		join+="${join:+,}127.0.0.1:$(cat "$WORK/$id.gossip")"
	done
	[[ ${#NODES[@]} -gt 1 ]] || join=""
	for id in "${NODES[@]}"; do
		write_node "$id" "$join"
		"$WORK/$id/run" >"$WORK/$id/node.log" 2>&1 </dev/null &
		echo $! >"$WORK/$id/pid"
		disown $! # no job notice when failover kills it; bash still reaps it
	done
	for _ in $(seq 1 600); do
		ok=1
		for id in "${NODES[@]}"; do
			if ! kill -0 "$(node_pid "$id")" 2>/dev/null; then
				echo "bench.sh: node $id exited during start-up:" >&2
				tail -n 5 "$WORK/$id/node.log" >&2
				stop_all
				return 1
			fi
			if ! up "$id" || { [[ ${#NODES[@]} -gt 1 ]] && ! has_leader "$id"; }; then
				ok=0
			fi
		done
		[[ $ok == 1 ]] && return 0
		sleep 0.1
	done
	echo "bench.sh: nodes not ready after 60 s" >&2
	for id in "${NODES[@]}"; do tail -n 10 "$WORK/$id/node.log" >&2; done
	stop_all
	return 1
}

if [[ "$CLUSTER" == 1 ]]; then
	NODES=(n1 n2 n3)
else
	NODES=(bench)
fi
started=0
for attempt in 1 2 3; do
	if start_nodes; then
		started=1
		break
	fi
	echo "bench.sh: start-up failed (attempt $attempt)" >&2
done
[[ $started == 1 ]] || exit 1

URLS="" PIDS=""
for id in "${NODES[@]}"; do
	URLS+="${URLS:+,}http://127.0.0.1:${HTTP_PORT[$id]}"
	PIDS+="${PIDS:+,}$id=$(node_pid "$id")"
	echo "bench.sh: node $id pid $(node_pid "$id") on http://127.0.0.1:${HTTP_PORT[$id]}, data $WORK/$id/data" >&2
done
if [[ "$CLUSTER" == 1 ]]; then
	echo "bench.sh: cluster leader: $(curl -s -m 2 "${URLS%%,*}/api/v1/system/cluster" | grep -o '"leader":{"id":"[^"]*"' || echo '?')" >&2
fi

rc=0
if [[ "$CLUSTER" == 1 ]]; then
	"$WORK/loadgen" -urls "$URLS" -node-pids "$PIDS" -restart-cmd "$WORK/restart-node" "${ARGS[@]}" || rc=$?
else
	id=${NODES[0]}
	"$WORK/loadgen" -url "$URLS" -pid "$(node_pid "$id")" -data-dir "$WORK/$id/data" "${ARGS[@]}" || rc=$?
fi

for id in "${NODES[@]}"; do
	if ! kill -0 "$(node_pid "$id")" 2>/dev/null; then
		echo "bench.sh: node $id is not running after the run; last log lines:" >&2
		tail -n 20 "$WORK/$id/node.log" >&2
		rc=1
	fi
	warns=$(grep -cE 'level=(WARN|ERROR)' "$WORK/$id/node.log" || true)
	if [[ "$warns" != 0 ]]; then
		echo "bench.sh: node $id logged $warns WARN/ERROR lines; first ones:" >&2
		grep -E 'level=(WARN|ERROR)' "$WORK/$id/node.log" | head -n 5 >&2
	fi
done
exit "$rc"
