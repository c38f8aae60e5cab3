#!/usr/bin/env bash
# Fuzzes every Fuzz* target of the module, each in its own package, for
# FUZZTIME (default 20s). Targets are found in the sources (every
# top-level `func FuzzXxx(f *testing.F)` of a _test.go file outside
# node_modules and the infra module), so a new one is never forgotten; a
# target that does not fuzz ("no fuzz tests to fuzz") or fails makes the
# command fail. Each target's corpus lives in its package's
# testdata/fuzz/<Target>/ and is replayed by `go test` too.
# FUZZBUDGET (seconds, default none) bounds the whole run: once it is
# spent no new target starts (each one's instrumented build takes half a
# minute on a slow machine), and the targets left are named; .ci/run sets
# it so that CI ends in time on any machine.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-20s}"
FUZZBUDGET="${FUZZBUDGET:-0}"
GO="${GO:-go}"
status=0
ran=0
left=()
mapfile -t found < <(grep -rE --include='*_test.go' --exclude-dir=node_modules --exclude-dir=infra --exclude-dir=.git \
	-o '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . | sort)
if [ "${#found[@]}" -eq 0 ]; then
	echo "FAIL: no fuzz targets found"; exit 1
fi
# A budget leaves the last targets out: the list starts at another one
# each day, so each is fuzzed on some days.
day=$(date +%j)
first=$((10#$day % ${#found[@]}))
for ((k = 0; k < ${#found[@]}; k++)); do
	IFS=: read -r file decl <<<"${found[(first + k) % ${#found[@]}]}"
	target=${decl#func }
	target=${target%%(*}
	pkg=./$(dirname "${file#./}")
	if [ "$FUZZBUDGET" -gt 0 ] && [ "$SECONDS" -ge "$FUZZBUDGET" ]; then
		left+=("$pkg $target")
		continue
	fi
	ran=$((ran + 1))
	echo "== $pkg $target ($FUZZTIME)"
	if ! out=$($GO test -run='^$' -fuzz="^${target}\$" -fuzztime="$FUZZTIME" -fuzzminimizetime=5s "$pkg" 2>&1); then
		# Go's fuzzing engine reports "context deadline exceeded" when
		# FUZZTIME ends while a worker is still on a slow input: that is
		# its own shutdown, not a finding (no failing input is written).
		if grep -q "context deadline exceeded" <<<"$out" && ! grep -q "Failing input written" <<<"$out"; then
			echo "note: $pkg $target: the fuzzing engine stopped mid-input at the deadline (not a finding)"
			grep -E "^fuzz: elapsed" <<<"$out" | tail -1
			continue
		fi
		echo "$out"; echo "FAIL: $pkg $target"; status=1; continue
	fi
	if grep -q "no fuzz tests to fuzz" <<<"$out"; then
		echo "$out"; echo "FAIL: $pkg $target did not fuzz"; status=1; continue
	fi
	# The last progress line has the executions and new interesting inputs.
	grep -E "^fuzz: elapsed" <<<"$out" | tail -1
	grep -E "^ok" <<<"$out" | tail -1
done
echo "fuzzed $ran of ${#found[@]} targets for $FUZZTIME each"
if [ "${#left[@]}" -gt 0 ]; then
	echo "the budget of ${FUZZBUDGET}s was spent; not fuzzed this run (their corpora were replayed by go test): ${left[*]}"
fi
exit $status
