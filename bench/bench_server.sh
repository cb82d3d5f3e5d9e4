#!/usr/bin/env bash
# vt serve against llama-server on the same GGUF, context and parallel slots:
# requests/s and generated tokens/s at concurrency 1, 4, 16 (bench_server.mjs).
# llama-server is built from the reference source (.cache/llama/src, commit 80fb11ac)
# with clang: on an AMX CPU, GCC 12 drops the stores of ggml's tile configuration
# (its _tile_loadconfig does not tell the optimiser that it reads memory) and the
# GCC-built server dies with SIGILL in its first AMX matmul:
#   CC=clang CXX=clang++ cmake -S .cache/llama/src -B .cache/llama/build-clang -DCMAKE_BUILD_TYPE=Release \
#     -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF
#   cmake --build .cache/llama/build-clang --target llama-server
# The server's own folder goes first on the library path: a build's runpath names the
# tree it was built in, which may since have moved.
# Usage: bench/bench_server.sh MODEL [THREADS=2] [CTX=2048] [SLOTS=16] [MAX_TOKENS=32]
# (CTX at most the model's context_length, or its rope scaling's reach: vt serve refuses more)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=$1 threads=${2:-2} ctx=${3:-2048} slots=${4:-16} maxtok=${5:-32}
vt=${VT_BIN:-$root/build/vt}
llama=${LLAMA_SERVER:-$root/.cache/llama/build-clang/bin/llama-server}
port_vt=18181 port_ll=18182
wait_up() { for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$1/health" >/dev/null && return 0; sleep 0.2; done; return 1; }
"$vt" serve -m "$model" --port $port_vt -t "$threads" -c "$ctx" -np "$slots" 2>/dev/null & vpid=$!
# llama-server: its -c is the total over all slots, so give it ctx per slot too.
LD_LIBRARY_PATH="$(dirname "$llama")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  "$llama" -m "$model" --port $port_ll -t "$threads" -c $((ctx * slots)) -np "$slots" -b 512 \
  --log-disable >/dev/null 2>&1 & lpid=$!
trap 'kill $vpid $lpid 2>/dev/null; wait 2>/dev/null' EXIT
wait_up $port_vt || { echo "vt serve did not start (-c $ctx: see vt serve -m $model -c $ctx)" >&2; exit 1; }
wait_up $port_ll
echo "model $(basename "$model"), threads $threads, ctx $ctx per sequence, $slots slots, $maxtok tokens per request"
echo "| concurrency | engine | requests | req/s | gen tok/s | mean ms | p50 ms | p95 ms | errors |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|"
for c in 1 4 16; do
  total=$((c * 4 > 8 ? c * 4 : 8))
  for e in vt llama; do
    port=$port_vt; [ $e = llama ] && port=$port_ll
    node "$root/bench/bench_server.mjs" "http://127.0.0.1:$port" $c 2 "$maxtok" >/dev/null # warm-up
    j=$(node "$root/bench/bench_server.mjs" "http://127.0.0.1:$port" $c $total "$maxtok")
    node -e "const j=$j; console.log('| '+j.concurrency+' | $e | '+j.requests+' | '+j.req_per_s+' | '+j.gen_tok_per_s+' | '+j.lat_ms_mean+' | '+j.lat_ms_p50+' | '+j.lat_ms_p95+' | '+j.errors+' |')"
  done
done
