#!/usr/bin/env bash
# Grammar-constrained against free generation, vt serve and llama-server on the
# same GGUF, threads and slots, at concurrency 1 and 16 (bench_grammar_server.mjs;
# bench_grammar measures vt's engine alone, in process). For a quiet machine:
# the two servers run one after the other, never together.
# llama-server: built from the reference source as bench_server.sh says
# (.cache/llama/build-clang/bin/llama-server), or LLAMA_SERVER=/path/to/llama-server.
# llama-server runs with its own folder first on the library path (as bench_server.sh).
# ENGINES="vt llama" (the default) picks the servers measured, in that order.
# Usage: bench/bench_grammar_server.sh MODEL [THREADS=2] [TOKENS=128] [ROUNDS=5] [SLOTS=16] [FILE.gbnf]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=$1 threads=${2:-2} tokens=${3:-128} rounds=${4:-5} slots=${5:-16} gbnf=${6:-}
vt=${VT_BIN:-$root/build/vt}
llama=${LLAMA_SERVER:-$root/.cache/llama/build-clang/bin/llama-server}
port=18183
ctx=$((tokens + 64))
[ -x "$vt" ] || { echo "bench_grammar_server: no vt at $vt (build it, or set VT_BIN)" >&2; exit 1; }
[ -x "$llama" ] || { echo "bench_grammar_server: no llama-server at $llama (see bench_server.sh to build it, or set LLAMA_SERVER)" >&2; exit 1; }
wait_up() { for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && return 0; sleep 0.2; done; return 1; }
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null' EXIT
echo "model $(basename "$model"), threads $threads, $tokens tokens per request, $rounds rounds, $slots slots"
echo "| concurrency | engine | free tok/s | grammar tok/s | grammar / free | errors |"
echo "|---:|---|---:|---:|---:|---:|"
for e in ${ENGINES:-vt llama}; do
  if [ $e = vt ]; then
    "$vt" serve -m "$model" --port $port -t "$threads" -c "$ctx" -np "$slots" 2>/dev/null & pid=$!
  else
    # llama-server's -c is the total over all slots
    LD_LIBRARY_PATH="$(dirname "$llama")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      "$llama" -m "$model" --port $port -t "$threads" -c $((ctx * slots)) -np "$slots" -b 512 \
      --log-disable >/dev/null 2>&1 & pid=$!
  fi
  wait_up || { echo "bench_grammar_server: $e did not come up" >&2; exit 1; }
  for c in 1 16; do
    j=$(node "$root/bench/bench_grammar_server.mjs" "http://127.0.0.1:$port" $c "$tokens" "$rounds" $gbnf)
    node -e "const j=$j; console.log('| '+j.concurrency+' | $e | '+j.free_tok_s+' | '+j.grammar_tok_s+' | '+j.ratio+' | '+j.errors+' |')"
    echo "$j" >&2
  done
  kill $pid; wait $pid 2>/dev/null || true; pid=
done
