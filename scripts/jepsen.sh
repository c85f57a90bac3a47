#!/usr/bin/env bash
# The long fault campaign: several runs of the Jepsen-style suite with
# different cluster sizes, faults and seeds. Each run prints its one-line
# verdict; the script stops at the first failure and names its report.
#
#   scripts/jepsen.sh            # the default campaign (about 15 minutes)
#   RUNS=10 TIME=120s scripts/jepsen.sh
#
# Runs as root to put nodes in network namespaces (real partitions);
# otherwise partitions are skipped and the run says so.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
TIME=${TIME:-90s}
out=${OUT:-$(mktemp -d /tmp/queen-jepsen-campaign.XXXXXX)}
bin="$out/queen-node"
go build -o "$bin" ./cmd/queen-node
go build -o "$out/jepsen" ./jepsen
campaign=(
  "3 kill,pause,partition all"
  "3 partition,clock all"
  "5 kill,pause,partition,clock all"
  "3 membership,kill queue,kv"
  "3 powerloss,powerloss-torn,kill queue,ledger,timers"
  "3 corrupt,rolling,kill all"
  "5 corrupt,rolling,one-way queue,kv,ledger"
  "3 one-way,kill all"
  "3 slow-disk,disk-full,kill queue,kv,ledger,timers"
)
fail=0
for r in $(seq 1 "$RUNS"); do
  for c in "${campaign[@]}"; do
    read -r nodes faults workload <<<"$c"
    seed=$RANDOM$RANDOM
    dir="$out/run-$r-$nodes-${faults//,/-}-$seed"
    echo "== run $r: $nodes nodes, faults $faults, workload $workload, seed $seed"
    if ! "$out/jepsen" -bin "$bin" -nodes "$nodes" -time "$TIME" -faults "$faults" -workload "$workload" \
        -seed "$seed" -out "$dir"; then
      echo "FAILED: report in $dir/report"
      fail=1
      break 2
    fi
    rm -rf "$dir"
  done
done
[ "$fail" = 0 ] && echo "campaign: all runs passed" && rm -rf "$out"
exit "$fail"
