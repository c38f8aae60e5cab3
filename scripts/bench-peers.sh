#!/usr/bin/env bash
# bench-peers.sh — clientagent against the peer frameworks on the reference turn
# ("Create a PNG image with the word Popelnase"), all against the peer kit's scripted
# OpenAI-compatible model (shared/bench, read-only: built, and the peers copied to a work
# folder). In one window, RUNS times each, in turn, at c=1 and c=20: our local stack with
# the fast specialists (`clientagent dev --fast-agents`, a new stack per run, timed through
# its HTTP API by `clientagent bench`), with the embedded Valkey and, when one is
# installed, with a Valkey server of its own; OpenAI Agents JS; LangGraph.js; and (c=1)
# the bare round trips. Prints one table: min/median/max of each figure, and ours ÷ peer
# on the medians. Our data folder (artifact files, audit log) is on tmpfs (/dev/shm) when
# there is one, as the peers keep everything in memory.
#
#   make bench-peers            or   scripts/bench-peers.sh
#   RUNS=3 TURNS1=2000 TURNS20=1000 WATCH=1 AFTER=1000   (the defaults)
#   TURNS1       node compiles a peer's hot code over its first thousand or so turns, so its
#                p50 at c=1 falls with the turns it runs: OpenAI Agents JS's was 7.9 ms over
#                200 turns, 5.9 ms over 1,000 and 3.4–4.1 ms over 3,000 (ours 7.0–7.2 ms over
#                each); a server runs warm, so the default times 2,000
#   WATCH=1 times each of our turns as the page sees it too (its event stream opened before the
#                POST, closed at turn.ended); WATCH=0 polls the turn every POLL (5ms) instead
#   AFTER=N      after each c=20 run, N turns at c=1 on the same stack (c=1 after a burst;
#                enough that the first turns after it, while the store may still be
#                rewriting its append-only file, do not decide the median)
#   OURS="embedded server default"  which Valkey our stack uses (embedded: in memory;
#                                server: valkey-server or redis-server on TCP, started here;
#                                default: what `make run` uses, its own server child with AOF
#                                on a unix socket); default all three when a server is installed
#   CPUPROFILE=/tmp/stack.pprof  a CPU profile of our stack (first variant, first c=20 run)
#   CLIENTAGENT_BIN=path         use this clientagent binary instead of building one
#   RESULTS="a.jsonl b.jsonl"    run nothing: print the table of earlier runs' results files (each
#                                run's results.jsonl), their runs numbered on in order
#   BENCH_KIT=dir (required) the peers' benchmark kit: OpenAI Agents JS, LangGraph.js and the
#                scripted model (fakellm), a checkout outside this repository
#   BENCH_DIR=/tmp/clientagent-bench-peers  BENCH_DATA=/dev/shm
#   LLM_PORT=18700  STACK_PORT=18080  VALKEY_PORT=18379
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
kit=${BENCH_KIT:-}
work=${BENCH_DIR:-${TMPDIR:-/tmp}/clientagent-bench-peers}
runs=${RUNS:-3}
turns1=${TURNS1:-2000}
turns20=${TURNS20:-1000}
poll=${POLL:-5ms}
watch=${WATCH:-1}
after=${AFTER:-1000}
llm_addr=127.0.0.1:${LLM_PORT:-18700}
stack_addr=127.0.0.1:${STACK_PORT:-18080}
valkey_port=${VALKEY_PORT:-18379}
valkey_bin=$(command -v valkey-server || command -v redis-server || true)
variants=${OURS:-embedded${valkey_bin:+ server default}}
data_root=${BENCH_DATA:-/dev/shm}
base=http://$llm_addr/v1

# table STATS RESULTS…: the table of one or more result files (STATS: fakellm's counts).
table() {
	local stats=$1 seen="a ${poll} poll"
	shift
	if [ "$watch" != 0 ]; then seen="the page saw it (POST → turn.ended event)"; fi
node - "$stats" "$seen" "$data_root" "$@" <<'TABLE'
const fs = require("fs");
const [stats, seen, dataRoot, ...files] = process.argv.slice(2);
// Several result files are one table, their runs numbered on in file order.
const rows = [];
for (const file of files) {
  const offset = rows.length ? Math.max(...rows.map((r) => r.run)) : 0;
  for (const l of fs.readFileSync(file, "utf8").trim().split("\n")) {
    const r = JSON.parse(l);
    rows.push({ ...r, run: r.run + offset });
  }
}
const names = { "clientagent-embedded": "clientagent, embedded Valkey", "clientagent-server": "clientagent, Valkey server",
  "clientagent-default": "clientagent, make run default (Valkey child, AOF)",
  "openai-agents": "OpenAI Agents JS 0.20", langgraph: "LangGraph.js 1.7.3", raw: "bare round trips (no framework)" };
const ours = ["clientagent-embedded", "clientagent-server", "clientagent-default"], peers = ["openai-agents", "langgraph"];
const med = (xs) => { if (!xs.length) return NaN; const s = [...xs].sort((a, b) => a - b), m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const fmt = (x) => (Number.isNaN(x) ? "–" : x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const mmm = (xs) => (!xs.length || xs.some(Number.isNaN) ? "–" : `${fmt(Math.min(...xs))} / **${fmt(med(xs))}** / ${fmt(Math.max(...xs))}`);
const get = (impl, c, k) => rows.filter((r) => r.impl === impl && r.c === c).map((r) => (r.r[k] === undefined ? NaN : Number(r.r[k])));
const ratio = (a, b) => (Number.isNaN(a) || Number.isNaN(b) ? "–" : fmt(a / b) + "×");
console.log("| c | implementation | p50 ms | p99 ms | turns/s | RSS MB | p50 ÷ OpenAI Agents | p50 ÷ LangGraph | turns/s ÷ OpenAI Agents | turns/s ÷ LangGraph |");
console.log("|---|---|---|---|---|---|---|---|---|---|");
for (const c of [1, 20]) {
  for (const impl of [...ours, ...peers, "raw"]) {
    const p50 = get(impl, c, "p50_ms");
    if (!p50.length) continue;
    const tps = get(impl, c, "turns_per_s");
    const r = ours.includes(impl)
      ? [...peers.map((p) => ratio(med(p50), med(get(p, c, "p50_ms")))), ...peers.map((p) => ratio(med(tps), med(get(p, c, "turns_per_s"))))]
      : ["", "", "", ""];
    console.log(`| ${c} | ${names[impl]} | ${mmm(p50)} | ${mmm(get(impl, c, "p99_ms"))} | ${mmm(tps)} | ${mmm(get(impl, c, "rss_mb"))} | ${r.join(" | ")} |`);
    if (ours.includes(impl)) {
      const cp50 = get(impl, c, "client_p50_ms");
      console.log(`| ${c} | ↳ the same, as ${seen} | ${mmm(cp50)} | ${mmm(get(impl, c, "client_p99_ms"))} | | | ${peers.map((p) => ratio(med(cp50), med(get(p, c, "p50_ms")))).join(" | ")} | | |`);
      const ap50 = get(impl, c, "after_p50_ms").filter((x) => !Number.isNaN(x));
      if (c !== 1 && ap50.length) {
        console.log(`| 1 | ↳ c=1 right after this c=${c} burst, same stack | ${mmm(ap50)} | | | | ${peers.map((p) => ratio(med(ap50), med(get(p, 1, "p50_ms")))).join(" | ")} | | |`);
      }
    }
  }
}
// Each run's peers ran right after ours, so a ratio taken within a run sees one state of a
// shared host; the medians above may come from different runs.
console.log("\n| c | implementation | p50 ÷ OpenAI Agents, per run | as the page saw it ÷ OpenAI Agents, per run | turns/s ÷ OpenAI Agents, per run |");
console.log("|---|---|---|---|---|");
const paired = (impl, c, k, pk) => {
  const xs = [];
  for (const r of rows.filter((r) => r.impl === impl && r.c === c)) {
    const p = rows.find((q) => q.impl === "openai-agents" && q.c === c && q.run === r.run);
    const a = Number(r.r[k]), b = p ? Number(p.r[pk]) : NaN;
    if (!Number.isNaN(a) && !Number.isNaN(b) && b > 0) xs.push(a / b);
  }
  return xs.length ? `${fmt(Math.min(...xs))}× / **${fmt(med(xs))}×** / ${fmt(Math.max(...xs))}×` : "–";
};
for (const c of [1, 20]) {
  for (const impl of ours) {
    if (!get(impl, c, "p50_ms").length) continue;
    console.log(`| ${c} | ${names[impl]} | ${paired(impl, c, "p50_ms", "p50_ms")} | ${paired(impl, c, "client_p50_ms", "p50_ms")} | ${paired(impl, c, "turns_per_s", "turns_per_s")} |`);
  }
}
// The CPU time a turn costs, by process (the scripted model's and our driver's included): on a
// host whose cores the load fills, throughput follows the total.
const cpu = (impl, c, f) => rows.filter((r) => r.impl === impl && r.c === c).map(f).filter((x) => x !== undefined && !Number.isNaN(x));
const cpuRows = [];
for (const c of [1, 20]) {
  for (const impl of [...ours, ...peers]) {
    const own = cpu(impl, c, (r) => (ours.includes(impl) ? r.r.cpu_ms_per_turn : r.cpu?.process));
    if (!own.length) continue;
    const drv = ours.includes(impl) ? cpu(impl, c, (r) => r.r.driver_cpu_ms_per_turn) : [];
    const model = cpu(impl, c, (r) => r.cpu?.model);
    const total = cpu(impl, c, (r) => (ours.includes(impl) ? r.r.cpu_ms_per_turn + (r.r.driver_cpu_ms_per_turn ?? 0) : r.cpu?.process) + (r.cpu?.model ?? 0));
    cpuRows.push({ c, impl, own, drv, model, total });
  }
}
if (cpuRows.length) {
  console.log("\n| c | implementation | CPU ms per turn: the implementation | its driver | the scripted model | total | total ÷ OpenAI Agents |");
  console.log("|---|---|---|---|---|---|---|");
  for (const { c, impl, own, drv, model, total } of cpuRows) {
    const oa = cpuRows.find((r) => r.c === c && r.impl === "openai-agents");
    console.log(`| ${c} | ${names[impl]} | ${mmm(own)} | ${drv.length ? mmm(drv) : "in process"} | ${mmm(model)} | ${mmm(total)} | ${oa && impl !== "openai-agents" ? ratio(med(total), med(oa.total)) : ""} |`);
  }
  console.log("\nOurs: the stack's process and its Valkey's during the timed turns, and the driver's (clientagent bench). A peer: its one node process, " +
    "what a run of TURNS turns spent beyond a run of one (its start, its compiling and its warm-up turns), over TURNS - 1. The model's: over each whole run.");
}
// What our store did per turn, from the server's own counts (clientagent bench -valkey).
const storeRows = [];
for (const c of [1, 20]) {
  for (const impl of ours) {
    const cmds = get(impl, c, "store_commands_per_turn").filter((x) => !Number.isNaN(x));
    if (cmds.length) storeRows.push(`| ${c} | ${names[impl]} | ${mmm(cmds)} | ${mmm(get(impl, c, "store_scripts_per_turn"))} | ${mmm(get(impl, c, "store_script_us_per_turn"))} |`);
  }
}
if (storeRows.length) {
  console.log("\n| c | implementation | Valkey commands per turn (a script's own included) | scripts per turn | µs of the server running them, per turn |");
  console.log("|---|---|---|---|---|");
  for (const row of storeRows) console.log(row);
}
const runs = Math.max(...rows.map((r) => r.run));
console.log(`\nmin / **median** / max of ${runs} run${runs > 1 ? "s" : ""}; turns per run: ${[1, 20].map((c) => `c=${c}: ${rows.find((r) => r.c === c)?.r.turns}`).join(", ")}; ` +
  `our stack's data folder on ${dataRoot}; our RSS is the stack's (plus the Valkey server's); fakellm: ${stats}`);
TABLE
}

if [ -n "${RESULTS:-}" ]; then
	# shellcheck disable=SC2086 # a list of files
	table "${STATS:-–}" $RESULTS
	exit 0
fi

[ -n "$kit" ] || { echo "bench-peers: set BENCH_KIT to the peer benchmark kit (OpenAI Agents JS, LangGraph.js, fakellm): see docs/benchmarks.md" >&2; exit 1; }
[ -d "$kit/fakellm" ] && [ -d "$kit/peers" ] || { echo "bench-peers: no peer kit at $kit (set BENCH_KIT)" >&2; exit 1; }
command -v node >/dev/null && command -v npm >/dev/null || { echo "bench-peers: node and npm are needed for the peers" >&2; exit 1; }
mkdir -p "$work/peers"
if [ ! -d "$data_root" ] || [ ! -w "$data_root" ]; then data_root=$work; fi
results=$work/results.jsonl
: >"$results"

echo "building fakellm and clientagent…" >&2
(cd "$kit/fakellm" && go build -o "$work/fakellm" .)
if [ -n "${CLIENTAGENT_BIN:-}" ]; then
	cp "$CLIENTAGENT_BIN" "$work/clientagent"
else
	(cd "$repo" && go build -o "$work/clientagent" ./cmd/clientagent)
fi
# The kit is read-only: the peers run from a copy, installed once per lock file.
cp "$kit"/peers/*.mjs "$kit"/peers/package.json "$kit"/peers/package-lock.json "$work/peers/"
if ! cmp -s "$work/peers/package-lock.json" "$work/peers/node_modules/.bench-peers-lock" 2>/dev/null; then
	echo "npm ci for the peers in $work/peers…" >&2
	(cd "$work/peers" && npm ci --no-audit --no-fund --loglevel=error >&2)
	cp "$work/peers/package-lock.json" "$work/peers/node_modules/.bench-peers-lock"
fi

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

"$work/fakellm" -addr "$llm_addr" >"$work/fakellm.log" 2>&1 &
llm_pid=$!
pids+=("$llm_pid")
for _ in $(seq 50); do curl -sf "http://$llm_addr/stats" >/dev/null && break; sleep 0.1; done

# record IMPL C RUN JSON [CPU]: one result line, tagged; CPU is the run's "cpu" object.
record() { echo "{\"impl\":\"$1\",\"c\":$2,\"run\":$3,\"r\":$4${5:+,\"cpu\":$5}}" >>"$results"; }

# ticks PID: the CPU time (user + system) process PID has spent, in clock ticks (1/100 s).
ticks() {
	local s
	s=$(cat "/proc/$1/stat") || return 1
	s=${s##*) } # the fields after the command: state is the first, utime the 12th
	# shellcheck disable=SC2086 # split into fields
	set -- $s
	echo $((${12} + ${13}))
}

# per_turn TICKS TURNS: milliseconds per turn.
per_turn() { awk -v t="$1" -v n="$2" 'BEGIN { printf "%.2f", t * 10 / n }'; }

# ours VARIANT C TURNS RUN [PROFILE]: a new stack with the fast specialists (and, for the
# variant "server", a new Valkey server), timed by clientagent bench, then stopped.
ours() {
	local variant=$1 c=$2 turns=$3 run=$4 prof=${5:-} data valkey_url="" vpid="" pid out store=memory
	data=$(mktemp -d "$data_root/clientagent-bench.XXXX")
	if [ "$variant" = default ]; then store=auto; fi
	if [ "$variant" = server ]; then
		[ -n "$valkey_bin" ] || { echo "bench-peers: OURS=server needs valkey-server or redis-server" >&2; exit 1; }
		"$valkey_bin" --bind 127.0.0.1 --port "$valkey_port" --save '' --appendonly no >"$data/valkey.log" 2>&1 &
		vpid=$!
		pids+=("$vpid")
		valkey_url=redis://127.0.0.1:$valkey_port/0
		for _ in $(seq 50); do grep -q "Ready to accept connections" "$data/valkey.log" && break; sleep 0.1; done
	fi
	VALKEY_URL=$valkey_url CLIENTAGENT_STORE=$store CLIENTAGENT_DATA=$data CLIENTAGENT_ADDR=$stack_addr \
		CLIENTAGENT_LLM=openai OPENAI_BASE_URL=$base OPENAI_API_KEY=x CLIENTAGENT_LOG_LEVEL=warn CLIENTAGENT_MAX_STREAMS=1000 \
		"$work/clientagent" dev --fast-agents ${prof:+--cpuprofile "$prof"} >"$data/stdout" 2>"$data/stderr" &
	pid=$!
	pids+=("$pid")
	for _ in $(seq 100); do grep -q "^token for the user dev" "$data/stdout" 2>/dev/null && break; sleep 0.1; done
	grep -q "^token for the user dev" "$data/stdout" || { echo "bench-peers: the stack did not start:" >&2; cat "$data/stderr" >&2; exit 1; }
	local storeflag=()
	if [ "$variant" = default ]; then
		vpid=$(cat "$data"/valkey*/valkey.pid)
		valkey_url=unix://$(echo "$data"/valkey*/valkey.sock)
	fi
	# The store's commands and script time per turn, from a binary that reports them.
	if [ -n "$valkey_url" ] && "$work/clientagent" bench -h 2>&1 | grep -q -- -valkey; then storeflag=(-valkey "$valkey_url"); fi
	local watchflag=-watch=true aft=0
	if [ "$watch" = 0 ]; then watchflag=-watch=false; fi
	if [ "$c" != 1 ]; then aft=$after; fi
	local m0 m1
	m0=$(ticks "$llm_pid")
	out=$(CLIENTAGENT_DATA=$data "$work/clientagent" bench -url "http://$stack_addr" -turns "$turns" -c "$c" "$watchflag" -poll "$poll" -after "$aft" -pid "$pid${vpid:+,$vpid}" "${storeflag[@]}") ||
		echo "bench-peers: some turns of ours failed ($variant, c=$c, run $run): see failed and first_error in the results" >&2
	m1=$(ticks "$llm_pid")
	kill -INT "$pid"
	wait "$pid" || true
	if [ -n "$vpid" ] && [ "$variant" = server ]; then
		kill "$vpid"
		wait "$vpid" || true
	fi
	if [ -s "$data/stderr" ]; then
		echo "bench-peers: the stack logged ($variant, c=$c, run $run):" >&2
		tail -5 "$data/stderr" >&2
	fi
	rm -rf "$data"
	# The model's CPU over the whole command: its 5 warm-up turns and the c=1 turns after included.
	record "clientagent-$variant" "$c" "$run" "$out" "{\"model\":$(per_turn $((m1 - m0)) $((turns + 5 + aft)))}"
}

# node_cpu SCRIPT C TURNS: run a peer; prints its JSON line, then the CPU time of its node
# process in ms (bash's times: the subshell's children, as 1m2.345s).
node_cpu() {
	local out
	out=$(cd "$work/peers" && node "$1" "$base" "$3" "$2" && times) || return 1
	echo "$out" | head -1
	echo "$out" | tail -1 | awk '$1 !~ /^[0-9]+m[0-9.]+s$/ { print "NaN"; exit } { s = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); s += p[1] * 60 + p[2] } printf "%.1f", s * 1000 }'
}

# peer IMPL SCRIPT C TURNS RUN: the peer's JSON line, and the CPU per turn of its process and of
# the model. A node process spends seconds of CPU starting and compiling before its turns reach
# their pace, so each run first times one turn (and the 5 warm-up turns every run makes) and the
# per-turn figure is what the TURNS-turn run spent beyond that, over TURNS - 1.
declare -A start_ms
peer() {
	local out m0 m1 ms
	if [ -z "${start_ms[$1/$5]:-}" ]; then
		start_ms[$1/$5]=$(node_cpu "$2" 1 1 | tail -1)
	fi
	m0=$(ticks "$llm_pid")
	out=$(node_cpu "$2" "$3" "$4")
	m1=$(ticks "$llm_pid")
	ms=$(awk -v a="$(echo "$out" | tail -1)" -v b="${start_ms[$1/$5]}" -v n="$4" 'BEGIN { x = (a - b) / (n - 1); if (x != x || n < 2) print "null"; else printf "%.2f", x }')
	record "$1" "$3" "$5" "$(echo "$out" | head -1)" "{\"process\":$ms,\"model\":$(per_turn $((m1 - m0)) $(($4 + 5)))}"
}

start=$(date +%s)
for run in $(seq "$runs"); do
	for c in 1 20; do
		turns=$turns1
		if [ "$c" = 20 ]; then turns=$turns20; fi
		prof=""
		if [ "$run" = 1 ] && [ "$c" = 20 ]; then prof=${CPUPROFILE:-}; fi
		echo "run $run/$runs, c=$c, $turns turns: clientagent ($variants), openai-agents, langgraph$(if [ "$c" = 1 ]; then echo ", raw"; fi)…" >&2
		for v in $variants; do
			ours "$v" "$c" "$turns" "$run" "$prof"
			prof=""
		done
		peer openai-agents openai-agents.mjs "$c" "$turns" "$run"
		peer langgraph langgraph.mjs "$c" "$turns" "$run"
		if [ "$c" = 1 ]; then peer raw rawbaseline.mjs 1 "$turns" "$run"; fi
	done
done
stats=$(curl -sf "http://$llm_addr/stats")
echo "done in $(($(date +%s) - start)) s; results: $results" >&2
table "$stats" "$results"
