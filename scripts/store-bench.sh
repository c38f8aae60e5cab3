#!/usr/bin/env bash
# store-bench.sh STORE [TURNS]: Popelnase turns at c=1 through `clientagent dev --fast-agents`
# (scripted model) with CLIENTAGENT_STORE=STORE (auto: the make run default, memory, embedded),
# timed by `clientagent bench`; prints the CPU ms per turn of the stack plus its Valkey child
# (from /proc, so less sensitive to a busy host than wall time) and bench's JSON line.
# CLIENTAGENT_BIN (default bin/clientagent, `make build`), BENCH_PORT (default 18955).
set -euo pipefail
store=$1 turns=${2:-200}
bin=$(realpath "${CLIENTAGENT_BIN:-bin/clientagent}")
port=${BENCH_PORT:-18955}
d=$(mktemp -d "${BENCH_DATA:-/dev/shm}/clientagent-store-bench.XXXX")
cd "$d"
CLIENTAGENT_STORE=$store CLIENTAGENT_ADDR=127.0.0.1:"$port" CLIENTAGENT_LOG_LEVEL=warn "$bin" dev --fast-agents >out 2>err &
pid=$!
for _ in $(seq 100); do grep -q "^token for the user dev" out 2>/dev/null && break; sleep 0.1; done
vpid=$(cat .data/valkey*/valkey.pid 2>/dev/null || true)
cpu() { local s=0; for p in "$@"; do [ -n "$p" ] && s=$((s + $(awk '{print $14+$15}' /proc/$p/stat))); done; echo $s; }
"$bin" bench -url http://127.0.0.1:"$port" -turns 20 -c 1 >/dev/null  # warm-up
c0=$(cpu $pid $vpid)
r=$("$bin" bench -url http://127.0.0.1:"$port" -turns "$turns" -c 1 -pid "$pid${vpid:+,$vpid}")
c1=$(cpu $pid $vpid)
tck=$(getconf CLK_TCK)
echo "$store: cpu_ms_per_turn=$(awk -v a="$c0" -v b="$c1" -v t="$tck" -v n="$turns" 'BEGIN { printf "%.2f", (b - a) * 1000 / t / n }') $r"
kill -INT $pid; wait $pid || true
cd /; rm -rf "$d"
