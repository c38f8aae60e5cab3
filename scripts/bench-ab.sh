#!/usr/bin/env bash
# bench-ab.sh — two builds of clientagent side by side on the reference turn: both stacks run at
# once (each `clientagent dev --fast-agents` with the make run default store, its own Valkey
# child), both driven at once by `clientagent bench`, against the peer kit's scripted model. Runs
# one after the other on a shared host drift by more than the few percent a change moves; two
# stacks at once share one state of the host.
#
# Each side (its stack, its Valkey child, its driver and a scripted model of its own) runs on
# half of the processors (taskset), and the halves swap every pair: unpinned, two stacks started together were placed
# unalike and one ran up to 20% faster than the other, whichever build it was; pinned, one half of
# this VM ran 5–12% faster than the other. So B ÷ A is given per pair and per two pairs (the
# geometric mean of a pair and the next, which had the halves swapped): the latter cancels the
# halves' difference. An A/A run (the same binary twice) puts the noise of one two-pair figure at
# about ±2% here (docs/benchmarks.md). PIN=0 runs unpinned.
#
#   BENCH_KIT=dir scripts/bench-ab.sh A B     A and B: clientagent binaries (go build ./cmd/clientagent)
#   PAIRS=6 TURNS=600 C=10                     (the defaults: each stack C concurrent turns; PAIRS even)
#   BENCH_DIR=/tmp/clientagent-bench-ab  BENCH_DATA=/dev/shm  LLM_PORT=18700 (and the next)  PORT_A=18081 PORT_B=18082
set -euo pipefail

[ $# -eq 2 ] && [ -x "$1" ] && [ -x "$2" ] || { echo "usage: BENCH_KIT=dir $0 binary-A binary-B" >&2; exit 2; }
kit=${BENCH_KIT:-}
[ -n "$kit" ] && [ -d "$kit/fakellm" ] || { echo "bench-ab: set BENCH_KIT to the peer benchmark kit (its fakellm): see docs/benchmarks.md" >&2; exit 1; }
bins=("$(cd "$(dirname "$1")" && pwd)/$(basename "$1")" "$(cd "$(dirname "$2")" && pwd)/$(basename "$2")")
pairs=${PAIRS:-6}
turns=${TURNS:-600}
c=${C:-10}
work=${BENCH_DIR:-${TMPDIR:-/tmp}/clientagent-bench-ab}
data_root=${BENCH_DATA:-/dev/shm}
if [ ! -d "$data_root" ] || [ ! -w "$data_root" ]; then data_root=$work; fi
llm_port=${LLM_PORT:-18700}
ports=("${PORT_A:-18081}" "${PORT_B:-18082}")
# halves: the two processor sets the sides run on ("" each: unpinned).
halves=("" "")
ncpu=$(nproc 2>/dev/null || echo 1)
if [ "${PIN:-1}" != 0 ] && [ "$ncpu" -ge 2 ] && command -v taskset >/dev/null; then
	halves=("0-$((ncpu / 2 - 1))" "$((ncpu / 2))-$((ncpu - 1))")
fi
pin() { if [ -n "$1" ]; then echo taskset -c "$1"; fi; }
mkdir -p "$work"
results=$work/results.tsv
: >"$results"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# A scripted model per half (on LLM_PORT and the next), so each half holds all a side runs.
echo "building fakellm…" >&2
(cd "$kit/fakellm" && go build -o "$work/fakellm" .)
llm=()
for h in 0 1; do
	llm[h]=127.0.0.1:$((llm_port + h))
	$(pin "${halves[h]}") "$work/fakellm" -addr "${llm[h]}" >"$work/fakellm-$h.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 50); do curl -sf "http://${llm[h]}/stats" >/dev/null && break; sleep 0.1; done
done

# start I BIN PORT: stack I in a new data folder (pid[I], data[I]).
pid=() data=()
start() {
	data[$1]=$(mktemp -d "$data_root/clientagent-ab.XXXX")
	CLIENTAGENT_STORE=auto CLIENTAGENT_DATA=${data[$1]} CLIENTAGENT_ADDR=127.0.0.1:$3 CLIENTAGENT_LLM=openai \
		OPENAI_BASE_URL=http://${llm[half[$1]]}/v1 OPENAI_API_KEY=x CLIENTAGENT_LOG_LEVEL=warn CLIENTAGENT_MAX_STREAMS=1000 \
		$(pin "${cpus[$1]}") "$2" dev --fast-agents >"${data[$1]}/stdout" 2>"${data[$1]}/stderr" &
	pid[$1]=$!
	pids+=("${pid[$1]}")
	for _ in $(seq 100); do grep -q "^token for the user dev" "${data[$1]}/stdout" 2>/dev/null && break; sleep 0.1; done
	grep -q "^token for the user dev" "${data[$1]}/stdout" || { echo "bench-ab: $2 did not start:" >&2; cat "${data[$1]}/stderr" >&2; exit 1; }
}

# both TURNS: both stacks driven at once, TURNS turns each at C; stack I's JSON line in its data folder.
both() {
	local waits=() store
	for i in 0 1; do
		# The store's commands and script time per turn, from a binary that reports them.
		store=()
		if "${bins[i]}" bench -h 2>&1 | grep -q -- -valkey; then store=(-valkey "unix://$(echo "${data[i]}"/valkey*/valkey.sock)"); fi
		CLIENTAGENT_DATA=${data[i]} $(pin "${cpus[i]}") "${bins[i]}" bench -url "http://127.0.0.1:${port[i]}" -turns "$1" -c "$c" -pid "${pid[i]},$(cat "${data[i]}"/valkey*/valkey.pid)" "${store[@]}" | tail -1 >"${data[i]}/result" &
		waits+=($!)
	done
	wait "${waits[@]}"
}

port=() cpus=() half=()
# Pair 0 warms the host (its page cache, the models' connections) and is not counted: a run's
# first pair was often far from the rest.
for pair in $(seq 0 "$pairs"); do
	swap=$(((pair + 1) % 2)) # A on the first port and half in odd pairs, on the second in even ones
	for i in 0 1; do
		port[i]=${ports[(i + swap) % 2]}
		half[i]=$(((i + swap) % 2))
		cpus[i]=${halves[half[i]]}
		start "$i" "${bins[i]}" "${port[i]}"
	done
	both 50 # warm-up
	both "$turns"
	line=$pair
	for i in 0 1; do
		line+=$'\t'$(cat "${data[i]}/result")
		kill -INT "${pid[i]}"
		wait "${pid[i]}" 2>/dev/null || true
		rm -rf "${data[i]}"
	done
	if [ "$pair" -gt 0 ]; then echo "$line" >>"$results"; fi
	echo "pair $pair/$pairs done" >&2
done

node - "$results" "${bins[0]}" "${bins[1]}" "${halves[0]:+${halves[0]} and ${halves[1]}}" <<'TABLE'
const fs = require("fs");
const [file, a, b, pinned] = process.argv.slice(2);
const rows = fs.readFileSync(file, "utf8").trim().split("\n").map((l) => l.split("\t")).map(([p, x, y]) => [Number(p), JSON.parse(x), JSON.parse(y)]);
const figures = [["turns_per_s", "turns/s"], ["p50_ms", "p50 ms"], ["client_p50_ms", "p50 ms as the page saw it"], ["p99_ms", "p99 ms"],
  ["cpu_ms_per_turn", "CPU ms per turn, stack + Valkey"], ["pid_cpu_ms_per_turn.0", "CPU ms per turn, stack"], ["pid_cpu_ms_per_turn.1", "CPU ms per turn, Valkey"],
  ["driver_cpu_ms_per_turn", "CPU ms per turn, driver"],
  ["store_commands_per_turn", "Valkey commands per turn"], ["store_script_us_per_turn", "Valkey's µs in scripts per turn"]];
const get = (r, k) => k.split(".").reduce((v, p) => (v == null ? v : v[p]), r);
const med = (xs) => { const s = [...xs].sort((p, q) => p - q), m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const pct = (x) => `${x >= 1 ? "+" : ""}${((x - 1) * 100).toFixed(1)}%`;
console.log(`A: ${a}\nB: ${b}\n${pinned ? `each side on half of the processors (${pinned}), the halves swapped every pair` : "unpinned"}\n`);
console.log("| figure | A, per pair | B, per pair | B ÷ A, per pair | per two pairs | median of two-pair figures | mean |");
console.log("|---|---|---|---|---|---|---|");
for (const [k, name] of figures) {
  const ra = rows.map((r) => Number(get(r[1], k))), rb = rows.map((r) => Number(get(r[2], k)));
  if ([...ra, ...rb].some(Number.isNaN)) continue; // a figure one of the builds does not report
  const q = rb.map((x, i) => x / ra[i]);
  // A pair and the next ran with the halves swapped: their geometric mean cancels the halves.
  const two = [];
  for (let i = 0; i + 1 < q.length; i += 2) two.push(Math.sqrt(q[i] * q[i + 1]));
  const geo = Math.exp(q.reduce((s, x) => s + Math.log(x), 0) / q.length);
  console.log(`| ${name} | ${ra.join(", ")} | ${rb.join(", ")} | ${q.map(pct).join(", ")} | ${two.map(pct).join(", ")} | ${two.length ? pct(med(two)) : "–"} | ${pct(geo)} |`);
}
TABLE
