#!/usr/bin/env bash
# vt run's handling of bad input: each case exits non-zero with a message that
# says what was wrong, and never crashes (exit codes >= 128 are signals).
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
expect "corrupt gguf" "bad magic" "$vt" run -m "$src/tests/data/corrupt/bad_magic.gguf"
expect "vocab-only gguf" "the file has 0" "$vt" run -m "$models/vocab/ggml-vocab-llama-spm.gguf"
expect "unknown command" "unknown command 'frobnicate'" "$vt" frobnicate
# A good run still works after all that (and -n 0 generates nothing).
if out=$("$vt" run -m "$m" -p "Once" -n 0 --temp 0 2>/dev/null) && [ "$out" = "Once" ]; then
  pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL -n 0: got '$out'"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
