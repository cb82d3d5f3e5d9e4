#!/usr/bin/env bash
# vt bench end to end on stories260K, vt alone (speed is never asserted here):
# - a run with --interleave --bandwidth --json exits 0 and prints the table,
#   the per-pair changes (with no ratio change when llama.cpp did not run) and
#   a "% of bound" for decode rows only;
# - the JSON has one bandwidth reading per counted decode pair, none for
#   prefill, and a fraction of the bound for vt;
# - the JSON names llama.cpp's mmap setting;
# - tgN@dD's depth is prefilled once and restored (the protocol line says so)
#   from a folder in $TMPDIR that the run removes; --depth-prefill makes none;
# - bad options are refused with a message.
set -u
. "${VT_SOURCE_DIR:-.}/tests/server/lib.sh" # models, vt; require_file
m=$models/stories260K.gguf
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
require_file "$m"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir "$tmp/st"
out=$(TMPDIR=$tmp/st "$vt" bench -m "$m" --engine vt -w pp16,tg8,tg8@d16 -t 1,2 -r 2 --no-aa --interleave \
  --bandwidth --json "$tmp/b.json" 2>"$tmp/err"); rc=$?
[ $rc -eq 0 ] && ok || bad "bench exited $rc: $(tail -3 "$tmp/err")"
grep -q 'tgN@dD: the depth prefilled once per engine and thread count, then restored' <<<"$out" && ok \
  || bad "the protocol line does not say the depth is restored: $out"
[ -z "$(ls -A "$tmp/st")" ] && ok || bad "the saved depths were left behind: $(ls -A "$tmp/st")"
pre=$(TMPDIR=$tmp/st "$vt" bench -m "$m" --engine vt -w tg8@d16 -t 1 -r 1 --no-aa --depth-prefill 2>"$tmp/err"); rc=$?
[ $rc -eq 0 ] && grep -q "tgN@dD: the warm-up's prompt at most n_batch tokens" <<<"$pre" && ok \
  || bad "--depth-prefill: rc=$rc: $pre $(tail -3 "$tmp/err")"
grep -q '^| model | size | th | test | vt t/s' <<<"$out" && ok || bad "no table in: $out"
grep -q 'tg8 -> tg8@d16' <<<"$out" && ok || bad "no per-pair change tg8 -> tg8@d16"
# the change of the ratio needs both engines: "-" with vt alone
grep -qE '^\| stories260K.gguf \| 1 \| tg8 -> tg8@d16 \| [-+][0-9.]+% .* \| - \| - \| - \| - \|$' <<<"$out" \
  && ok || bad "the tg8 change row has no vt figure or claims a ratio change without llama.cpp: $out"
# "% of bound": a number for each decode row, "-" for each prefill row
n_dec=$(grep -cE '^\| stories260K.gguf .*\| tg8(@d16)? \|.*\| [0-9]+% \| - \|$' <<<"$out")
n_pre=$(grep -cE '^\| stories260K.gguf .*\| pp16 \|.*\| - \| - \|$' <<<"$out")
[ "$n_dec" -eq 4 ] && ok || bad "$n_dec decode rows with a % of bound, want 4: $out"
[ "$n_pre" -eq 2 ] && ok || bad "$n_pre prefill rows without one, want 2"
# JSON: two bandwidth readings per decode row (-r 2), none on prefill rows
n_bw=$(grep -c '"pair_bandwidth_gbs": \[[0-9.]*, [0-9.]*\], "vt_fraction_of_bound": [0-9.]*' "$tmp/b.json")
[ "$n_bw" -eq 4 ] && ok || bad "$n_bw rows with two bandwidth readings, want 4: $(cat "$tmp/b.json")"
[ "$(grep -c '"test": "pp16"' "$tmp/b.json")" -eq 2 ] && ok || bad "pp16 rows missing from the JSON"
# llama.cpp's configuration is in the JSON: its own memory for the weights by default
grep -q '"llama_mmap": false' "$tmp/b.json" && ok || bad "no \"llama_mmap\": false in the JSON"

expect() { # name, expected substring, args...
  local name=$1 want=$2; shift 2
  local msg rc
  msg=$("$vt" bench "$@" 2>&1 >/dev/null); rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -qF -- "$want" <<<"$msg"; then ok
  else bad "$name: rc=$rc, wanted '$want' in: $msg"; fi
}
expect "no model" "-m MODEL is required" -w tg8
expect "bad reps" "-r: '0' is not an integer in [1, 100]" -m "$m" -r 0
expect "bad threads" "bad thread count '5000'" -m "$m" -t 5000
expect "bad workload" "bad workload 'xx1'" -m "$m" -w xx1
expect "bad llama-mmap" "--llama-mmap takes on or off, not 'maybe'" -m "$m" --llama-mmap maybe

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
