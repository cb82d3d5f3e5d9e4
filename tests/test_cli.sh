#!/usr/bin/env bash
# The vt command's options and bad input: each bad case exits non-zero with a
# message that says what was wrong, and never crashes (exit codes >= 128 are
# signals); then repeated options and llama.cpp's flags across the commands.
set -u
vt=${VT_BIN:-./build/vt}
models=${VT_TEST_MODELS:-../shared/models}
src=${VT_SOURCE_DIR:-.}
pass=0 fail=0
expect() { # name, expected substring, command...
  local name=$1 want=$2; shift 2
  local out rc
  out=$("$@" 2>&1 >/dev/null); rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -qF -- "$want" <<<"$out"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAIL $name: rc=$rc, wanted '$want' in: $out"
  fi
}
m=$models/stories260K.gguf
expect "no model" "-m MODEL is required" "$vt" run -p hi
expect "missing file" "/nonexistent.gguf: cannot open" "$vt" run -m /nonexistent.gguf
expect "bad number" "-n: 'abc' is not an integer" "$vt" run -m "$m" -n abc
expect "bad temp" "--temp: '-1' is not a number" "$vt" run -m "$m" --temp -1
expect "bad kv type" "unknown KV cache type 'q3'" "$vt" run -m "$m" -ctk q3
expect "unknown option" "unknown option '--bogus'" "$vt" run -m "$m" --bogus
expect "prompt too long" "the context holds 16" "$vt" run -m "$m" -c 16 \
  -p "Once upon a time there was a little girl who lived in a village near the forest and she loved"
# A context past the training context (stories260K: context_length 2048, no rope
# scaling) is refused by run, chat and serve (which exits 1 once the load fails)
past="n_ctx 4096 is past the model's training context (llama.context_length = 2048)"
expect "run -c past the training context" "$past" "$vt" run -m "$m" -c 4096 -p Once -n 1
expect "chat -c past the training context" "$past" "$vt" chat -m "$m" -c 4096 </dev/null
if "$vt" serve --help >/dev/null 2>&1; then
  out=$(timeout 60 "$vt" serve -m "$m" --host 127.0.0.1 --port 0 -t 1 -c 4096 2>&1 >/dev/null); rc=$?
  if [ $rc -eq 1 ] && grep -qF "$past" <<<"$out" && grep -qF "use a context of at most 2048 (-c 2048)" <<<"$out"; then
    pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL serve -c past the training context: rc=$rc: $out"; fi
fi
# ... and names llama.cpp's flags that would extend it; with them run and chat
# accept it (YaRN x2 from 2048 reaches 4096)
expect "run -c past: the flags named" "(--rope-scaling yarn --rope-scale 2, or linear)" \
  "$vt" run -m "$m" -c 4096 -p Once -n 1
if out=$("$vt" run -m "$m" -c 4096 --rope-scaling yarn --rope-scale 2 -p Once -n 1 --temp 0 2>&1); then
  pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL run -c 4096 --rope-scaling yarn --rope-scale 2: $out"; fi
if ! "$vt" serve --help >/dev/null 2>&1; then :
elif out=$("$vt" chat -m "$m" -c 4096 --rope-freq-scale 0.5 --yarn-orig-ctx 2048 </dev/null 2>&1); then
  pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL chat -c 4096 --rope-freq-scale 0.5: $out"; fi
expect "run -c past the override's reach" "past what the overridden rope scaling reaches" \
  "$vt" run -m "$m" -c 8193 --rope-scaling linear --rope-scale 4 -p Once -n 1
# Without -c the context grows with --rope-scale (min(2048 x 2, 4096)): a prompt
# of ~2400 tokens fits, and without the flag it does not
long=$(printf 'Once upon a time %.0s' $(seq 600))
if out=$("$vt" run -m "$m" --rope-scaling yarn --rope-scale 2 -p "$long" -n 1 --temp 0 2>&1 >/dev/null); then
  pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL run --rope-scale 2 without -c: ${out:0:300}"; fi
expect "run without -c or --rope-scale" "the context holds 2048" "$vt" run -m "$m" -p "$long" -n 1
# The rope flags' bad values (one parse for run, chat, serve, bench): name | wanted | flags
while IFS='|' read -r name want args; do
  for c in run chat bench serve; do
    case $c in chat | serve) "$vt" serve --help >/dev/null 2>&1 || continue ;; esac # the server libraries
    expect "$c $name" "$want" "$vt" $c -m "$m" $args </dev/null
  done
done <<'CASES'
unknown type|unknown rope scaling type 'bogus' (none, linear, yarn)|--rope-scaling bogus
scale 0|--rope-scale: '0' is not a positive number|--rope-scale 0
scale NaN|--rope-scale: 'nan' is not a positive number|--rope-scale nan
negative freq scale|--rope-freq-scale: '-1' is not a positive number|--rope-freq-scale -1
both scales|--rope-scale and --rope-freq-scale both set the rope scale|--rope-scale 2 --rope-freq-scale 0.5
infinite base|--rope-freq-base: 'inf' is not a positive number|--rope-freq-base inf
original context 0|--yarn-orig-ctx: '0' is not an integer in [1, 16777216]|--yarn-orig-ctx 0
negative mix|--yarn-ext-factor: '-1' is not a finite non-negative number|--yarn-ext-factor -1
magnitude 0|--yarn-attn-factor: '0' is not a positive number|--yarn-attn-factor 0
beta NaN|--yarn-beta-fast: 'nan' is not a positive number|--yarn-beta-fast nan
CASES
expect "beta_fast below beta_slow" "yarn_beta_fast 0.5 is not above yarn_beta_slow 1" \
  "$vt" run -m "$m" --rope-scaling yarn --rope-scale 2 --yarn-beta-fast 0.5 -p Once -n 1
expect "corrupt gguf" "bad magic" "$vt" run -m "$src/tests/data/corrupt/bad_magic.gguf"
expect "vocab-only gguf" "the file has 0" "$vt" run -m "$models/vocab/ggml-vocab-llama-spm.gguf"
expect "unknown command" "unknown command 'frobnicate'" "$vt" frobnicate
# vt synth --arch gpt-oss: a window is required; with one (and MXFP4 experts) it
# writes a file vt runs
expect "synth gpt-oss without a window" "gpt-oss needs a sliding window" "$vt" synth -q --arch gpt-oss \
  --experts 4 -o /nonexistent/x.gguf
expect "synth gpt-oss tied" "gpt-oss has no tied head" "$vt" synth -q --arch gpt-oss --experts 4 --swa 8 \
  --tied -o /nonexistent/x.gguf
# vt synth --control-tokens: a text that is a token already, or an empty one, is refused
expect "synth control token twice" "control token '<s>' is token 1 of the vocabulary already" "$vt" synth -q \
  --control-tokens '<x>,<s>' -o /nonexistent/x.gguf
expect "synth empty control token" "empty texts" "$vt" synth -q --control-tokens '<x>,,<y>' -o /nonexistent/x.gguf
oss=$(mktemp /tmp/vt_cli_oss_XXXXXX)
if "$vt" synth -q --arch gpt-oss --layers 2 --embd 64 --heads 4 --kv-heads 2 --ff 64 --experts 4 \
     --experts-used 2 --swa 8 --yarn-factor 4 --yarn-orig-ctx 16 --type q8_0 --expert-type mxfp4 -o "$oss" &&
   out=$("$vt" run -m "$oss" -p "t1 t2" -n 4 --temp 0 2>&1) && grep -q "gpt-oss" < <("$vt" inspect "$oss" 2>&1); then
  pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL synth gpt-oss mxfp4 + run: $out"; fi
rm -f "$oss"
# vt synth --swa-layers / --swa-pattern-array: a per-layer sliding_window_pattern
# (one 0 or 1 per layer; arches with a pattern, a window given) that vt reads
expect "synth --swa-layers of 3 for 4 layers" "swa_layers '011' is not one '0' or '1' per layer (4)" "$vt" synth -q \
  --arch muse-glimmer --layers 4 --swa 8 --swa-layers 011 -o /nonexistent/x.gguf
expect "synth --swa-pattern-array on llama" "a per-layer sliding_window_pattern needs a window (n_swa) and arch" \
  "$vt" synth -q --swa 8 --swa-pattern-array -o /nonexistent/x.gguf
swarr=$(mktemp /tmp/vt_cli_swarr_XXXXXX)
if "$vt" synth -q --arch muse-glimmer --layers 4 --embd 64 --heads 4 --kv-heads 2 --ff 64 --swa 8 \
     --swa-layers 0110 -o "$swarr" &&
   grep -q "sliding_window_pattern *arr\[bool\] *\[false, true, true, false\]" < <("$vt" inspect "$swarr" 2>&1) &&
   out=$("$vt" run -m "$swarr" -p "t1 t2" -n 2 --temp 0 2>&1); then
  pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL synth muse-glimmer --swa-layers 0110 + run: ${out:-}"; fi
rm -f "$swarr"
# vt bench's default context on a file whose context_length (64) is below its
# rounding (256): the workloads' need within what the model allows, and a
# workload past it refused before anything is measured
short=$(mktemp /tmp/vt_cli_short_XXXXXX)
if "$vt" synth -q --layers 1 --embd 64 --heads 2 --kv-heads 2 --ff 64 --ctx 64 -o "$short" &&
   out=$("$vt" bench -m "$short" --engine vt -w tg8 -t 1 -r 1 --no-aa 2>&1) && grep -q "protocol: n_ctx 64," <<<"$out"; then
  pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL bench's default n_ctx on a 64-token file: ${out:0:400}"; fi
expect "bench workloads past a short context" "the workloads need 128 tokens of context, past the 64 that" \
  "$vt" bench -m "$short" --engine vt -w pp128,tg8 -t 1 -r 1 --no-aa
# ... and a -c past it, once, before any of the four measurements would start
out=$("$vt" bench -m "$short" --engine vt -w pp8,tg8 -t 1,2 -r 1 --no-aa -c 128 2>&1 >/dev/null); rc=$?
if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -qF -- "-c 128 is past the 64 tokens of context that" <<<"$out" &&
   [ "$(grep -c past <<<"$out")" = 1 ] && ! grep -q '^\[1/' <<<"$out"; then
  pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL bench -c past a short context: rc=$rc: ${out:0:600}"; fi
rm -f "$short"
# A good run still works after all that (and -n 0 generates nothing).
if out=$("$vt" run -m "$m" -p "Once" -n 0 --temp 0 2>/dev/null) && [ "$out" = "Once" ]; then
  pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL -n 0: got '$out'"; fi

# ---- every command refuses a repeated option that takes one value (issue 30,
# item 8), under the same or another spelling; vt bench's -m is a list.
v=$models/vocab/ggml-vocab-llama-spm.gguf
expect "run -m twice" "-m given twice" "$vt" run -m "$m" -m "$m"
expect "run -m, --model" "--model given twice (first as -m)" "$vt" run -m "$m" --model "$m"
expect "run -n twice" "-n given twice" "$vt" run -m "$m" -n 1 -n 2
expect "run --temp twice" "--temperature given twice (first as --temp)" "$vt" run -m "$m" --temp 0 --temperature 1
expect "inspect -m twice" "-m given twice" "$vt" inspect -m "$m" -m "$m"
expect "inspect -m and FILE" "give the file once" "$vt" inspect -m "$m" "$m"
expect "quantize -t twice" "--threads given twice (first as -t)" "$vt" quantize -t 1 --threads 2 a b Q8_0
expect "synth -o twice" "-o given twice" "$vt" synth -o a.gguf -o b.gguf
expect "tokenize -m twice" "-m given twice" "$vt" tokenize -m "$v" -m "$v" -p hi
expect "bench -w twice" "-w given twice" "$vt" bench -m "$m" -w tg8 -w pp8
if "$vt" serve --help >/dev/null 2>&1; then
  expect "serve -m twice" "--model given twice (first as -m)" "$vt" serve -m "$m" --model "$m"
  expect "serve --port twice" "--port given twice" "$vt" serve -m "$m" --port 1 --port 2
fi
# bench -m is a list: two are fine (the run then fails on -r, after parsing both)
out=$("$vt" bench -m "$m" -m "$m" -r 0 2>&1); grep -q "given twice" <<<"$out" && {
  fail=$((fail + 1)); echo "FAIL bench -m -m refused: $out"; } || pass=$((pass + 1))

# ---- llama.cpp's flags (issue 30, item 16): accepted; a GPU-only one says once
# that vt runs on the CPU; -f - reads stdin; VT_LOG must name a level; vt inspect
# takes -m like the other commands.
ok_run() { # name, expected stdout, wanted stderr substring ('' for none), args...
  local name=$1 want_out=$2 want_err=$3; shift 3
  local out err rc
  out=$("$vt" run -m "$m" --temp 0 "$@" 2>"$tmpd/err"); rc=$?; err=$(cat "$tmpd/err")
  if [ $rc -eq 0 ] && [ "$out" = "$want_out" ] && { [ -z "$want_err" ] || grep -qF -- "$want_err" <<<"$err"; }; then
    pass=$((pass + 1))
  else fail=$((fail + 1)); echo "FAIL $name: rc=$rc out='$out' err: $(tail -3 <<<"$err")"; fi
}
tmpd=$(mktemp -d); trap 'rm -rf "$tmpd"' EXIT
ok_run "-ngl" "Once" "vt run: -ngl: vt runs on the CPU; ignored" -p Once -n 0 -ngl 99
ok_run "--n-gpu-layers all" "Once" "vt runs on the CPU" -p Once -n 0 --n-gpu-layers all
n_notes=$("$vt" run -m "$m" -p Once -n 0 -ngl 1 --gpu-layers 2 2>&1 >/dev/null | grep -c "runs on the CPU")
[ "$n_notes" = 1 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: the GPU note came $n_notes times"; }
ok_run "-fa" "Once" "" -p Once -n 0 -fa
ok_run "-fa on, --color off" "Once" "" -fa on -p Once --color off -n 0
ok_run "-co, --mlock, --no-mmap" "Once" "" -p Once -n 0 -co --mlock --no-mmap
ok_run "-ub" "Once" "" -p Once -n 0 -ub 8
ok_run "-b and -ub" "Once" "" -p Once -n 0 -b 4 -ub 8
ok_run "-e" "$(printf 'a\tb')" "" -p 'a\tb' -e -n 0
ok_run "--no-escape" 'a\tb' "" -p 'a\tb' -e --no-escape -n 0
ok_run "--verbose-prompt" "Once" "prompt: 2 tokens" -p Once -n 0 --verbose-prompt
"$vt" run -m "$m" -p Once -n 2 --log-disable >/dev/null 2>"$tmpd/err"
[ ! -s "$tmpd/err" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL --log-disable: $(cat "$tmpd/err")"; }
out=$(printf 'Once' | "$vt" run -m "$m" -f - -n 0 --temp 0 2>/dev/null)
[ "$out" = Once ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL -f -: got '$out'"; }
expect "-p and -f" "-p and -f both give the prompt" "$vt" run -m "$m" -p a -f -
expect "-fa nonsense" "unexpected argument 'nonsense'" "$vt" run -m "$m" -fa nonsense
for c in "" run inspect quantize synth tokenize bench; do
  out=$("$vt" $c --version 2>&1); rc=$?
  [ $rc -eq 0 ] && grep -q "^vt " <<<"$out" && pass=$((pass + 1)) || {
    fail=$((fail + 1)); echo "FAIL vt $c --version: rc=$rc $out"; }
done
out=$(VT_LOG=bogus "$vt" run -m "$m" -p Once -n 0 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "VT_LOG='bogus': expected debug, info, warn, error or none" <<<"$out" &&
  pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL VT_LOG=bogus: rc=$rc $out"; }
out=$(VT_LOG=none "$vt" run -m "$m" -p Once -n 0 2>/dev/null)
[ "$out" = Once ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL VT_LOG=none: '$out'"; }
a=$("$vt" inspect "$m" | tail -n +2); b=$("$vt" inspect -m "$m" | tail -n +2); c=$("$vt" inspect --model "$m" | tail -n +2)
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ] && pass=$((pass + 1)) ||
  { fail=$((fail + 1)); echo "FAIL: vt inspect -m FILE differs from vt inspect FILE"; }

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
