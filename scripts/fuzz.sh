#!/usr/bin/env bash
# Fuzzes every Fuzz* target of the module, each in its own package, for
# FUZZTIME (default 20s). Targets are found with `go test -list`, so a new
# one is never forgotten; a target that does not fuzz ("no fuzz tests to
# fuzz") or fails makes the command fail. Each target's corpus lives in its
# package's testdata/fuzz/<Target>/ and is replayed by `go test` too.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-20s}"
GO="${GO:-go}"
status=0
ran=0
for pkg in $($GO list ./...); do
	targets=$($GO test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
	for target in $targets; do
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
done
if [ "$ran" -eq 0 ]; then
	echo "FAIL: no fuzz targets found"; exit 1
fi
echo "fuzzed $ran targets for $FUZZTIME each"
exit $status
