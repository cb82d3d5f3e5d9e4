#!/usr/bin/env bash
# End-to-end goldens through the real vt binary:
# stories260K greedy from BOS, 200 tokens, must print exactly llama2.c's output,
# for 1, 2 and 3 threads, and with the scalar kernels (VT_ISA=ref).
set -u
. "${VT_SOURCE_DIR:-.}/tests/server/lib.sh" # models, vt; require_file
pass=0 fail=0
model="$models/stories260K.gguf"
golden="$models/stories260K.llama2c-expected-greedy.txt"
require_file "$model"
require_file "$golden"
check() { # name, command...
  local name=$1; shift
  local out; out=$(mktemp)
  if "$@" >"$out" 2>"$out.err" && cmp -s "$out" "$golden"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL $name: output differs from $golden"
    cmp "$out" "$golden" | head -3; tail -5 "$out.err"
  fi
  rm -f "$out" "$out.err"
}
for t in 1 2 3; do
  check "stories260K t=$t" "$vt" run -m "$model" -n 200 --temp 0 -t "$t"
done
check "stories260K ref kernels" env VT_ISA=ref "$vt" run -m "$model" -n 200 --temp 0 -t 2
check "stories260K kv f32" "$vt" run -m "$model" -n 200 --temp 0 -t 2 -ctk f32 -ctv f32
check "stories260K batch 7" "$vt" run -m "$model" -n 200 --temp 0 -t 2 -b 7
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
