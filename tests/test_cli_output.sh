#!/usr/bin/env bash
# Files vt writes (issue 30, item 7): `vt quantize IN IN` and every other way of
# naming the input as the output (another path, a hard link, a symlink) is
# refused and leaves the input intact; a failed or interrupted write leaves no
# temporary file and does not touch an existing output; a good write leaves
# only the output.
set -u
. "${VT_SOURCE_DIR:-.}/tests/server/lib.sh" # models, vt; require_file
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
src=$models/stories260K.gguf
require_file "$src"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/sub"
cp "$src" "$tmp/in.gguf"
no_temps() { # name: no "*.tmp.*" left in the folders
  local left; left=$(ls "$tmp" "$tmp/sub" | grep '\.tmp' || true)
  [ -z "$left" ] && ok || bad "$1: temporary files left: $left"
}
refused() { # name, command...: non-zero (not a signal), says it is the input, input intact
  local name=$1; shift
  local out rc; out=$("$@" 2>&1 >/dev/null); rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "is the input" <<<"$out"; then ok
  else bad "$name: rc=$rc: $out"; fi
  cmp -s "$src" "$tmp/in.gguf" && ok || bad "$name: the input changed"
}
refused "same path" "$vt" quantize -q "$tmp/in.gguf" "$tmp/in.gguf" Q8_0
refused "other path" "$vt" quantize -q "$tmp/in.gguf" "$tmp/sub/../in.gguf" Q8_0
ln "$tmp/in.gguf" "$tmp/hard.gguf"
refused "hard link" "$vt" quantize -q "$tmp/in.gguf" "$tmp/hard.gguf" Q8_0
ln -s in.gguf "$tmp/sym.gguf"
refused "symlink" "$vt" quantize -q "$tmp/sym.gguf" "$tmp/in.gguf" Q8_0
refused "synth over its vocab" "$vt" synth -q --vocab-from "$tmp/in.gguf" -o "$tmp/in.gguf"
rm -f "$tmp/hard.gguf" "$tmp/sym.gguf"
no_temps "refusals"

# A write that fails (file size limit, SIGXFSZ ignored: write returns EFBIG):
# exit 1, no temporary file, the old output untouched.
echo old > "$tmp/out.gguf"
out=$( (trap '' XFSZ; ulimit -f 16; exec "$vt" quantize -q "$tmp/in.gguf" "$tmp/out.gguf" Q8_0) 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "write failed" <<<"$out" && ok || bad "failed write: rc=$rc: $out"
[ "$(cat "$tmp/out.gguf")" = old ] && ok || bad "failed write: the old output was replaced"
no_temps "failed write"
# The same write killed by a signal (SIGXFSZ, default action: the process dies
# mid-write, as with Ctrl-C): the handler removes the temporary file first.
{ ( ulimit -f 16; "$vt" synth -q --layers 1 --embd 64 --heads 2 --kv-heads 2 --ff 128 \
  -o "$tmp/sub/synth.gguf" ) >/dev/null 2>&1; } 2>/dev/null; rc=$?
[ $rc -ge 128 ] && ok || bad "killed write: rc=$rc, expected death by a signal"
[ ! -e "$tmp/sub/synth.gguf" ] && ok || bad "killed write: the output exists"
no_temps "killed write"
{ ( ulimit -f 16; "$vt" quantize -q "$tmp/in.gguf" "$tmp/out.gguf" Q8_0 ) >/dev/null 2>&1; } 2>/dev/null; rc=$?
[ $rc -ge 128 ] && ok || bad "killed quantize: rc=$rc, expected death by a signal"
[ "$(cat "$tmp/out.gguf")" = old ] && ok || bad "killed quantize: the old output was replaced"
no_temps "killed quantize"

# A good write: the output replaces the old one, nothing else is left.
"$vt" quantize -q "$tmp/in.gguf" "$tmp/out.gguf" Q8_0 && ok || bad "quantize failed"
"$vt" inspect "$tmp/out.gguf" | grep -q "q8_0" && ok || bad "the output is not a Q8_0 GGUF"
"$vt" synth -q --layers 1 --embd 64 --heads 2 --kv-heads 2 --ff 128 -o "$tmp/sub/synth.gguf" && ok || bad "synth failed"
no_temps "good writes"
cmp -s "$src" "$tmp/in.gguf" && ok || bad "the input changed"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
