#!/usr/bin/env bash
# Runs every Go fuzz target in the module, one after another, for a given
# -fuzztime each (go test accepts one -fuzz target per run).
#
#   scripts/fuzz.sh            # 10s per target
#   scripts/fuzz.sh 1m         # any -fuzztime value: 30s, 2m, 5000x
#   FUZZTIME=30s scripts/fuzz.sh
#   scripts/fuzz.sh 10s -fuzzminimizetime=5s   # further args go to go test
#
# It fails on a real finding and on nothing else:
#   - a failing input: the fuzzer writes it under <pkg>/testdata/fuzz/<target>/
#     and it still fails when replayed on its own as a plain test (go test
#     -run=<target>/<file>), or a committed seed fails; the input and the
#     replay command are printed;
#   - a target that does not build or run at all.
# A run that ends without a reproducible input (the fuzzing engine's own
# failures under CPU starvation: "context deadline exceeded" at the
# -fuzztime boundary, "fuzzing process hung or terminated unexpectedly"
# with an input that passes when replayed; golang/go#56238, #51484) is run
# once more, and reported as an engine flake if it happens again.
set -euo pipefail

fuzztime="${1:-${FUZZTIME:-10s}}"
shift || true
cd "$(dirname "$0")/.."

# Only packages whose tests declare a fuzz target are built; go test -list
# then names the targets exactly as go test sees them.
mapfile -t dirs < <(grep -rlE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(' . \
	| grep -vE '/(testdata|vendor)/' | xargs -r -n1 dirname | sort -u)

total=0 flakes=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# fuzz_once DIR TARGET: 0 passed, 1 real failure, 2 engine flake.
fuzz_once() {
	local dir=$1 target=$2 corpus="$1/testdata/fuzz/$2" before after f new=()
	before=$(ls "$corpus" 2>/dev/null | sort || true)
	if go test "$dir" -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "${extra[@]}" >"$out" 2>&1; then
		return 0
	fi
	cat "$out"
	after=$(ls "$corpus" 2>/dev/null | sort || true)
	while read -r f; do
		[[ -n "$f" ]] && new+=("$f")
	done < <(comm -13 <(echo "$before") <(echo "$after"))
	for f in "${new[@]}"; do
		# A written input is a finding only if it fails on its own.
		if ! go test "$dir" -run="^${target}\$/^${f}\$" -count=1 >/dev/null 2>&1; then
			echo "FINDING: $dir $target: $corpus/$f (replay: go test $dir -run=$target/$f)" >&2
			return 1
		fi
		echo "fuzz.sh: $corpus/$f passes when replayed: not a finding; removing it" >&2
		rm -f "$corpus/$f"
	done
	if grep -qE -- "--- FAIL: ${target}/" "$out"; then
		echo "FINDING: $dir $target: a seed of the corpus fails" >&2
		return 1
	fi
	if grep -qE 'context deadline exceeded|fuzzing process hung or terminated unexpectedly|fuzz: elapsed' "$out"; then
		return 2
	fi
	echo "FAIL: $dir $target did not run (see above)" >&2
	return 1
}

extra=("$@")
for dir in "${dirs[@]}"; do
	[[ -n "$dir" ]] || continue
	mapfile -t targets < <(go test -list '^Fuzz' "$dir" | grep -E '^Fuzz[A-Za-z0-9_]*$' || true)
	for target in "${targets[@]}"; do
		[[ -n "$target" ]] || continue
		total=$((total + 1))
		echo "==> $dir $target (-fuzztime=$fuzztime)"
		rc=0
		fuzz_once "$dir" "$target" || rc=$?
		if [[ $rc -eq 2 ]]; then
			echo "fuzz.sh: $target ended without a reproducible input (an engine flake); running it once more" >&2
			rc=0
			fuzz_once "$dir" "$target" || rc=$?
			if [[ $rc -eq 2 ]]; then
				echo "fuzz.sh: WARNING: $target flaked twice without a reproducible input; not a finding" >&2
				flakes=$((flakes + 1))
				rc=0
			fi
		fi
		if [[ $rc -ne 0 ]]; then
			exit 1
		fi
	done
done

if [[ $total -eq 0 ]]; then
	echo "no fuzz targets found" >&2
	exit 1
fi
echo "all $total fuzz target(s) passed (-fuzztime=$fuzztime each; engine flakes: $flakes)"
