#!/usr/bin/env bash
# Write the synthetic benchmark models of ../shared/BENCH.md into DIR (default
# /tmp/vt-bench-models). Existing files are kept. SETs (default: llama):
#   llama   the 1B-class llama (n_embd 2048, 16 layers, 32 heads, 8 KV heads, n_ff
#           8192, vocab 32000) in Q4_0, Q8_0 and Q4_K_M, and the ~100M one (768, 12
#           layers, 12 heads, n_ff 2048) in Q8_0
#   moe     Qwen3-30B-A3B's layer shape (n_embd 2048, 32 query / 4 KV heads of 128,
#           128 experts of 768, 8 used; qwen2's vocabulary), 4 of its 48 layers, in
#           Q4_K_M and Q4_0
#   gptoss  gpt-oss-20b's layer shape (n_embd 2880, 64 query / 8 KV heads of 64, 32
#           experts of 2880, 4 used, window 128 on alternate layers, YaRN 32;
#           llama-bpe's vocabulary standing in for o200k), 4 of its 24 layers, in
#           llama.cpp's MXFP4_MOE mix
#   qwen35moe  Qwen3.6-35B-A3B's layer shape (n_embd 2048, 16 query / 2 KV heads of
#           256 on every 4th layer, Gated DeltaNet with 16 k / 32 v heads of 128 on
#           the others, 256 experts of 512, 8 used, a shared expert of 512; the
#           qwen35 vocabulary file, 151936 tokens where the model has 248320), 8 of
#           its 40 layers (6 linear, 2 full attention), in Q4_K_M and Q4_0
#   qwen35  Qwen3.6-27B's layer shape (n_embd 5120, 24 query / 4 KV heads of 256 on
#           every 4th layer, Gated DeltaNet with 16 k / 48 v heads of 128, n_ff
#           17408; the same vocabulary), 8 of its 64 layers, in Q4_K_M and Q4_0
#   gemma3  Gemma 3 4B's layer shape (n_embd 2560, 8 query / 4 KV heads of 256,
#           n_ff 10240, window 1024 on 5 of every 6 layers; gemma-4's vocabulary),
#           12 of its 34 layers, in Q4_K_M and Q4_0
#   muse-glimmer  Muse Glimmer 30B's layer shape (n_embd 6656, 32 query / 2 KV heads
#           of 128, n_ff 19968, a window of 2048 on 3 of every 4 layers with rope
#           base 500000 there, the 4th without rope; logits soft-capped at 20;
#           llama-bpe's vocabulary, 128256 tokens, standing in for its 202048; its
#           context 131072), 4 of its 52 layers (one period: 3 sliding, 1 full;
#           about 2.3 GiB in Q4_K_M, so both engines' copies, the page cache and
#           the F16 file quantized from fit a 24 GiB machine, and pp512 on one
#           thread takes about a minute), in Q4_K_M and Q4_0. The shape: the
#           52 layers are llama.cpp's LLM_TYPE_30B for this architecture
#           (.cache/llama/src/src/models/muse-glimmer.cpp), the rest the
#           checkpoint's config.json text_config (meta-models/Muse-Glimmer-30B:
#           hidden_size, intermediate_size, num_attention_heads,
#           num_key_value_heads, head_dim, vocab_size, sliding_window,
#           layer_types, layer_rope_theta, final_logit_softcapping,
#           max_position_embeddings), as public serving code's config tests
#           reproduce it; vt's own tests know the architecture, not the size
#   dense   the other dense families, each at a real checkpoint's layer shape with a
#           few of its layers, in Q4_K_M (llama.cpp's mix): phi3 (Phi-3.5-mini: 3072,
#           32 heads of 96, n_ff 8192; phi-3's vocabulary; 8 of 32 layers), gemma2
#           (Gemma 2 2B: 2304, 8 query / 4 KV heads of 256, n_ff 9216, window 4096 on
#           alternate layers, soft-caps 50 / 30; gemma-4's vocabulary; 8 of 26), glm4
#           (GLM-4-9B: 4096, 32 query / 2 KV heads of 128, n_ff 13696; gpt-2's
#           vocabulary; 4 of 40), granite (Granite 3.3 2B: 2048, 32 query / 8 KV heads,
#           n_ff 8192; gpt-2's vocabulary; 8 of 40), smollm3 (SmolLM3-3B: 2048, 16
#           query / 4 KV heads, n_ff 11008, no rope on every 4th layer; llama-bpe's
#           vocabulary; 8 of 36), olmo2 (OLMo 2 7B: 4096, 32 heads of 128, n_ff 11008;
#           gpt-2's vocabulary; 4 of 32), mistral3 (Ministral 3 8B: 4096, 32 query / 8
#           KV heads of 128, n_ff 14336, YaRN factor 16 over 16384; llama-bpe's
#           vocabulary; 4 of 34)
# The quantized files that are compared come from llama.cpp's own quantizer
# (llama_model_quantize, through build/quantize_llama) run on an F16 synth, as
# users' files do; without the reference llama.cpp, from vt quantize.
# Usage: bench/make-models.sh [DIR] [SET...]   (VT=path/to/vt, default build/vt)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
vt=${VT:-$root/build/vt}
dir=${1:-/tmp/vt-bench-models}
[ $# -gt 0 ] && shift
sets=${*:-llama}
vocabs=${VT_TEST_MODELS:-$root/../shared/models}/vocab
mkdir -p "$dir"

write_model() { # out, args...
  local out=$1; shift
  [ -s "$out" ] && { echo "keep $out"; return; }
  echo "write $out"; "$vt" synth "$@" -o "$out"
}

# quantize_from F16 OUT MIX: llama.cpp's quantizer where it is built, else vt's
quantize_from() {
  local in=$1 out=$2 mix=$3 qllama
  [ -s "$out" ] && { echo "keep $out"; return; }
  qllama=$(dirname "$vt")/quantize_llama
  echo "quantize $out ($mix)"
  if [ -x "$qllama" ]; then "$qllama" "$in" "$out" "$mix"; else "$vt" quantize -q "$in" "$out" "$mix"; fi
}

# mixes NAME SHAPE-ARGS -- MIX...: an F16 synth quantized to each MIX, then removed
mixes() {
  local name=$1; shift
  local args=() mix need=0
  while [ "$1" != "--" ]; do args+=("$1"); shift; done
  shift
  for mix in "$@"; do [ -s "$dir/$name-${mix,,}.gguf" ] || need=1; done
  [ $need -eq 1 ] || { echo "keep $dir/$name-*.gguf"; return; }
  write_model "$dir/$name-f16.gguf" "${args[@]}" --type f16
  for mix in "$@"; do quantize_from "$dir/$name-f16.gguf" "$dir/$name-${mix,,}.gguf" "$mix"; done
  rm -f "$dir/$name-f16.gguf"
}

for set in $sets; do
  case $set in
    llama)
      b1=(--layers 16 --embd 2048 --heads 32 --kv-heads 8 --ff 8192 --ctx 2048
          --vocab-from "$vocabs/ggml-vocab-llama-spm.gguf")
      m100=(--layers 12 --embd 768 --heads 12 --kv-heads 12 --ff 2048 --ctx 2048
            --vocab-from "$vocabs/ggml-vocab-llama-spm.gguf")
      write_model "$dir/synth-1b-q4_0.gguf" "${b1[@]}" --type q4_0
      write_model "$dir/synth-1b-q8_0.gguf" "${b1[@]}" --type q8_0
      write_model "$dir/synth-100m-q8_0.gguf" "${m100[@]}" --type q8_0
      mixes synth-1b "${b1[@]}" -- Q4_K_M ;;
    moe)
      mixes synth-qwen3moe-4l --arch qwen3moe --layers 4 --embd 2048 --heads 32 --kv-heads 4 --head-dim 128 \
        --ff 6144 --experts 128 --experts-used 8 --expert-ff 768 --ctx 4096 \
        --vocab-from "$vocabs/ggml-vocab-qwen2.gguf" -- Q4_K_M Q4_0 ;;
    gptoss)
      mixes synth-gptoss-4l --arch gpt-oss --layers 4 --embd 2880 --heads 64 --kv-heads 8 --head-dim 64 \
        --ff 2880 --experts 32 --experts-used 4 --expert-ff 2880 --swa 128 --ctx 4096 \
        --yarn-factor 32 --yarn-orig-ctx 4096 --rope-base 150000 \
        --vocab-from "$vocabs/ggml-vocab-llama-bpe.gguf" -- MXFP4_MOE ;;
    qwen35moe)
      mixes synth-qwen35moe-8l --arch qwen35moe --layers 8 --embd 2048 --heads 16 --kv-heads 2 --head-dim 256 \
        --ff 512 --experts 256 --experts-used 8 --expert-ff 512 --shared-ff 512 --ssm-state 128 \
        --ssm-k-heads 16 --ssm-v-heads 32 --ssm-conv 4 --full-attn-interval 4 --rope-base 10000000 --ctx 8192 \
        --vocab-from "$vocabs/ggml-vocab-qwen35.gguf" -- Q4_K_M Q4_0 ;;
    qwen35)
      mixes synth-qwen35-8l --arch qwen35 --layers 8 --embd 5120 --heads 24 --kv-heads 4 --head-dim 256 \
        --ff 17408 --ssm-state 128 --ssm-k-heads 16 --ssm-v-heads 48 --ssm-conv 4 --full-attn-interval 4 \
        --rope-base 10000000 --ctx 8192 --vocab-from "$vocabs/ggml-vocab-qwen35.gguf" -- Q4_K_M Q4_0 ;;
    gemma3)
      mixes synth-gemma3-12l --arch gemma3 --layers 12 --embd 2560 --heads 8 --kv-heads 4 --head-dim 256 \
        --ff 10240 --swa 1024 --swa-pattern 6 --swa-rope-base 10000 --rope-base 1000000 --ctx 8192 \
        --vocab-from "$vocabs/ggml-vocab-gemma-4.gguf" -- Q4_K_M Q4_0 ;;
    muse-glimmer)
      mixes synth-muse-glimmer-4l --arch muse-glimmer --layers 4 --embd 6656 --heads 32 --kv-heads 2 --head-dim 128 \
        --ff 19968 --swa 2048 --swa-pattern 4 --rope-base 500000 --final-softcap 20 \
        --ctx 131072 --vocab-from "$vocabs/ggml-vocab-llama-bpe.gguf" -- Q4_K_M Q4_0 ;;
    dense)
      mixes synth-phi3-8l --arch phi3 --layers 8 --embd 3072 --heads 32 --kv-heads 32 --head-dim 96 \
        --ff 8192 --ctx 4096 --vocab-from "$vocabs/ggml-vocab-phi-3.gguf" -- Q4_K_M
      mixes synth-gemma2-8l --arch gemma2 --layers 8 --embd 2304 --heads 8 --kv-heads 4 --head-dim 256 \
        --ff 9216 --swa 4096 --swa-pattern 2 --attn-softcap 50 --final-softcap 30 --ctx 8192 \
        --vocab-from "$vocabs/ggml-vocab-gemma-4.gguf" -- Q4_K_M
      mixes synth-glm4-4l --arch glm4 --layers 4 --embd 4096 --heads 32 --kv-heads 2 --head-dim 128 \
        --ff 13696 --ctx 8192 --vocab-from "$vocabs/ggml-vocab-gpt-2.gguf" -- Q4_K_M
      mixes synth-granite-8l --arch granite --layers 8 --embd 2048 --heads 32 --kv-heads 8 \
        --ff 8192 --ctx 8192 --vocab-from "$vocabs/ggml-vocab-gpt-2.gguf" -- Q4_K_M
      mixes synth-smollm3-8l --arch smollm3 --layers 8 --embd 2048 --heads 16 --kv-heads 4 \
        --ff 11008 --ctx 8192 --vocab-from "$vocabs/ggml-vocab-llama-bpe.gguf" -- Q4_K_M
      mixes synth-olmo2-4l --arch olmo2 --layers 4 --embd 4096 --heads 32 --kv-heads 32 \
        --ff 11008 --ctx 4096 --vocab-from "$vocabs/ggml-vocab-gpt-2.gguf" -- Q4_K_M
      mixes synth-mistral3-4l --arch mistral3 --layers 4 --embd 4096 --heads 32 --kv-heads 8 --head-dim 128 \
        --ff 14336 --rope-base 1000000 --yarn-factor 16 --yarn-orig-ctx 16384 --ctx 262144 \
        --vocab-from "$vocabs/ggml-vocab-llama-bpe.gguf" -- Q4_K_M ;;
    *) echo "make-models: unknown set '$set' (llama, moe, gptoss, qwen35moe, qwen35, gemma3, muse-glimmer, dense)" >&2
       exit 2 ;;
  esac
done
ls -la "$dir"
