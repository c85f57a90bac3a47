#!/usr/bin/env bash
# Runs every Go fuzz target in the module, one after another, for a given
# -fuzztime each (go test accepts one -fuzz target per run). Stops at the
# first failure; go test leaves the failing input under
# <pkg>/testdata/fuzz/<target>/ and prints how to replay it.
#
#   scripts/fuzz.sh            # 10s per target
#   scripts/fuzz.sh 1m         # any -fuzztime value: 30s, 2m, 5000x
#   FUZZTIME=30s scripts/fuzz.sh
#   scripts/fuzz.sh 10s -fuzzminimizetime=5s   # further args go to go test
set -euo pipefail

fuzztime="${1:-${FUZZTIME:-10s}}"
shift || true
cd "$(dirname "$0")/.."

# Only packages whose tests declare a fuzz target are built; go test -list
# then names the targets exactly as go test sees them.
mapfile -t dirs < <(grep -rlE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(' . \
	| grep -vE '/(testdata|vendor)/' | xargs -r -n1 dirname | sort -u)

total=0
for dir in "${dirs[@]}"; do
	[[ -n "$dir" ]] || continue
	mapfile -t targets < <(go test -list '^Fuzz' "$dir" | grep -E '^Fuzz[A-Za-z0-9_]*$' || true)
	for target in "${targets[@]}"; do
		[[ -n "$target" ]] || continue
		total=$((total + 1))
		echo "==> $dir $target (-fuzztime=$fuzztime)"
		if ! go test "$dir" -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$@"; then
			echo "FAIL: $dir $target" >&2
			exit 1
		fi
	done
done

if [[ $total -eq 0 ]]; then
	echo "no fuzz targets found" >&2
	exit 1
fi
echo "all $total fuzz target(s) passed (-fuzztime=$fuzztime each)"
