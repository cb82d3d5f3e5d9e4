#!/usr/bin/env bash
# bench_engine_llama (vt's serving engine against llama.cpp's parallel sequences)
# end to end on tiny synthetic files, both engines; speed is never asserted:
# - a mixture-of-experts file (qwen3moe) and a hybrid one (qwen35moe: Gated
#   DeltaNet layers, one recurrent-state slot per sequence on both sides) run at 1
#   and 2 concurrent requests and exit 0 with both tables;
# - vt's weight reads: a decode step of one sequence reads one sequence's bytes
#   per token (vt_model_step_bytes, within a byte) and its n_used experts per MoE
#   layer; two sequences read between n_used and 2 x n_used per layer and step,
#   and fewer bytes per token than one.
# Skipped where bench_engine_llama is not built (no reference llama.cpp, or
# -DVT_BENCH=OFF as in the sanitizer builds).
set -u
build=${VT_BUILD_DIR:-./build}
vt=${VT_BIN:-$build/vt}
bench=$build/bench_engine_llama
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
if [ ! -x "$bench" ]; then
  echo "skip: $bench is not built (needs the reference llama.cpp and VT_BENCH)"; exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

small=(--layers 4 --embd 256 --heads 4 --kv-heads 2 --head-dim 64 --ff 256 --vocab 512 --ctx 256 --type q8_0 -q)
"$vt" synth --arch qwen3moe "${small[@]}" --experts 16 --experts-used 2 --expert-ff 256 -o "$tmp/moe.gguf" \
  && ok || bad "synth qwen3moe"
"$vt" synth --arch qwen35moe "${small[@]}" --experts 16 --experts-used 2 --expert-ff 256 --shared-ff 256 \
  --ssm-state 64 --ssm-k-heads 2 --ssm-v-heads 4 -o "$tmp/hybrid-moe.gguf" && ok || bad "synth qwen35moe"

# json FILE FIELD: the values of a numeric field, one a line
json() { grep -o "\"$2\": [0-9.]*" "$1" | sed 's/.*: //'; }

for name in moe hybrid-moe; do
  out=$("$bench" -m "$tmp/$name.gguf" -t 1 -c 1,2 -p 8 -n 4 -r 1 --json 2>"$tmp/err"); rc=$?
  [ $rc -eq 0 ] && ok || { bad "$name: exited $rc: $(tail -5 "$tmp/err")"; continue; }
  grep -qE '^\|    2 \| +[0-9.]+ \| +[0-9.]+ \|' <<<"$out" && ok || bad "$name: no throughput row for 2: $out"
  grep -q '^| conc | distinct experts / MoE layer / step | MiB read / token' <<<"$out" \
    && ok || bad "$name: no weight-read table: $out"
  tail -1 <<<"$out" >"$tmp/$name.json"
  step=$(json "$tmp/$name.json" vt_step_bytes)
  mapfile -t bytes < <(json "$tmp/$name.json" vt_bytes_per_token)
  mapfile -t experts < <(json "$tmp/$name.json" vt_experts_per_layer_step)
  [ "${#bytes[@]}" -eq 2 ] && [ "${#experts[@]}" -eq 2 ] && [ -n "$step" ] \
    && ok || { bad "$name: JSON lacks the weight reads: $(cat "$tmp/$name.json")"; continue; }
  awk -v a="${bytes[0]}" -v b="$step" 'BEGIN { d = a - b; exit !(b > 0 && d <= 1 && d >= -1) }' \
    && ok || bad "$name: one sequence read ${bytes[0]} bytes per decoded token, step bytes $step"
  awk -v a="${bytes[1]}" -v b="$step" 'BEGIN { exit !(a > 0 && a < b) }' \
    && ok || bad "$name: two sequences read ${bytes[1]} bytes per token, not less than one's $step"
  [ "${experts[0]}" = 2.00 ] && ok || bad "$name: one sequence read ${experts[0]} experts per layer, want 2"
  awk -v e="${experts[1]}" 'BEGIN { exit !(e >= 2 && e <= 4) }' \
    && ok || bad "$name: two sequences read ${experts[1]} experts per layer, want 2..4"
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
