#!/usr/bin/env bash
# The fault campaigns: runs of the Jepsen-style suite (./jepsen) over cluster
# sizes, fault classes and workloads, each with a new seed. Every run's
# verdict goes into a table, $OUT/campaign.md (run, nodes, faults, workloads,
# seed, faults injected, ops, verdict); the script stops at the first
# failure and names its report.
#
#   scripts/jepsen.sh                 # the default campaign (about 20 minutes)
#   scripts/jepsen.sh long            # every fault class on 3 and 5 nodes, every workload,
#                                     # at least 100 faults per run (about an hour)
#   RUNS=10 TIME=120s scripts/jepsen.sh
#   MIN_FAULTS=20 scripts/jepsen.sh long   # a shorter pass of the long campaign
#
# Runs as root to put nodes in network namespaces (real partitions, one-way
# links) and the data dirs on lossyfs (power loss, slow and full disks);
# otherwise those classes are skipped and each run says so.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-${CAMPAIGN:-default}}
out=${OUT:-$(mktemp -d /tmp/queen-jepsen-campaign.XXXXXX)}
mkdir -p "$out"
bin="$out/queen-node"
go build -o "$bin" ./cmd/queen-node
go build -o "$out/jepsen" ./jepsen
case "$name" in
default)
  RUNS=${RUNS:-3}
  TIME=${TIME:-90s}
  MIN_FAULTS=${MIN_FAULTS:-0}
  campaign=(
    "3 kill,pause,partition all"
    "3 partition,clock all"
    "5 kill,pause,partition,clock all"
    "3 membership,kill queue,kv"
    "3 snapshot-membership,kill queue,kv,ledger"
    "3 powerloss,powerloss-torn,kill queue,ledger,timers"
    "3 corrupt,rolling,kill all"
    "5 corrupt,rolling,one-way queue,kv,ledger"
    "3 one-way,kill all"
    "3 slow-disk,disk-full,kill queue,kv,ledger,timers"
  )
  ;;
long)
  RUNS=${RUNS:-1}
  TIME=${TIME:-120s}
  MIN_FAULTS=${MIN_FAULTS:-100}
  campaign=()
  for nodes in 3 5; do
    campaign+=(
      "$nodes kill,pause,rolling,corrupt,membership,snapshot-membership all"
      "$nodes partition,one-way,clock all"
      "$nodes powerloss,powerloss-torn,slow-disk,disk-full all"
    )
  done
  ;;
*)
  echo "unknown campaign $name (default, long)" >&2
  exit 2
  ;;
esac
table="$out/campaign.md"
{
  echo "# jepsen campaign \"$name\", $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
  echo "| run | nodes | faults | workloads | seed | faults injected | ops | verdict |"
  echo "|---|---|---|---|---|---|---|---|"
} >"$table"
fail=0
for r in $(seq 1 "$RUNS"); do
  for c in "${campaign[@]}"; do
    read -r nodes faults workload <<<"$c"
    seed=$RANDOM$RANDOM
    dir="$out/run-$r-$nodes-${faults//,/-}-$seed"
    echo "== run $r: $nodes nodes, faults $faults, workload $workload, seed $seed"
    status=0
    "$out/jepsen" -bin "$bin" -nodes "$nodes" -time "$TIME" -min-faults "$MIN_FAULTS" -faults "$faults" \
      -workload "$workload" -seed "$seed" -out "$dir" | tee "$out/last.txt" || status=$?
    line=$(grep '^jepsen: ' "$out/last.txt" | grep -v 'report in' | tail -1)
    injected=$(sed -n 's/.* faults=\([0-9]*\).*/\1/p' <<<"$line")
    ops=$(sed -n 's/.* ops=\([0-9]*\).*/\1/p' <<<"$line")
    verdict=$(awk '{print $2}' <<<"$line")
    echo "| $r | $nodes | $faults | $workload | $seed | ${injected:-?} | ${ops:-?} | ${verdict:-FAIL} |" >>"$table"
    if [ "$status" != 0 ]; then
      echo "FAILED: report in $dir/report"
      fail=1
      break 2
    fi
    rm -rf "$dir"
  done
done
rm -f "$out/last.txt" "$out/jepsen" "$bin"
cat "$table"
[ "$fail" = 0 ] && echo "campaign $name: all runs passed; the table is $table"
exit "$fail"
