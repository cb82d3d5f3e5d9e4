#!/usr/bin/env bash
# Write the synthetic benchmark models of ../shared/BENCH.md into DIR (default
# /tmp/vt-bench-models): the 1B-class llama (n_embd 2048, 16 layers, 32 heads,
# 8 KV heads, n_ff 8192, vocab 32000) in Q4_0, Q8_0 and Q4_K_M, and the ~100M one
# (768, 12 layers, 12 heads, n_ff 2048) in Q8_0. Existing files are kept.
# Q4_K_M is quantized from an F16 synth by llama.cpp's own llama_model_quantize
# (build/quantize_llama, built where the reference llama.cpp is), else by vt quantize.
# Usage: bench/make-models.sh [DIR]   (VT=path/to/vt, default build/vt)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
vt=${VT:-$root/build/vt}
dir=${1:-/tmp/vt-bench-models}
vocab=${VT_TEST_MODELS:-$root/../shared/models}/vocab/ggml-vocab-llama-spm.gguf
mkdir -p "$dir"
b1=(--layers 16 --embd 2048 --heads 32 --kv-heads 8 --ff 8192 --ctx 2048 --vocab-from "$vocab")
m100=(--layers 12 --embd 768 --heads 12 --kv-heads 12 --ff 2048 --ctx 2048 --vocab-from "$vocab")
write_model() { # out, args...
  local out=$1; shift
  [ -s "$out" ] && { echo "keep $out"; return; }
  echo "write $out"; "$vt" synth "$@" -o "$out"
}
write_model "$dir/synth-1b-q4_0.gguf" "${b1[@]}" --type q4_0
write_model "$dir/synth-1b-q8_0.gguf" "${b1[@]}" --type q8_0
write_model "$dir/synth-100m-q8_0.gguf" "${m100[@]}" --type q8_0
if [ ! -s "$dir/synth-1b-q4_k_m.gguf" ]; then
  write_model "$dir/synth-1b-f16.gguf" "${b1[@]}" --type f16
  qllama=$(dirname "$vt")/quantize_llama
  if [ -x "$qllama" ]; then
    "$qllama" "$dir/synth-1b-f16.gguf" "$dir/synth-1b-q4_k_m.gguf" Q4_K_M
  else
    "$vt" quantize -q "$dir/synth-1b-f16.gguf" "$dir/synth-1b-q4_k_m.gguf" Q4_K_M
  fi
  rm -f "$dir/synth-1b-f16.gguf"
fi
ls -la "$dir"
