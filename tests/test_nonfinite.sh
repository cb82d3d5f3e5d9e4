#!/usr/bin/env bash
# Non-finite weights (issue 30, item 9): a synthetic model with one NaN in
# blk.0.attn_q.weight. `vt inspect --check` names the tensor (and an infinity in
# another copy); `vt run` exits 1 with VT_E_NUMERIC's message naming the step and
# the tensor instead of printing garbage; the server answers that request 500
# (whole and streamed) and keeps serving.
set -u
vt=${VT_BIN:-./build/vt}
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
tmp=$(mktemp -d)
SERVER_PID=
trap '[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; rm -rf "$tmp"' EXIT

"$vt" synth -q --layers 1 --embd 64 --heads 2 --kv-heads 2 --ff 128 --vocab 300 -o "$tmp/clean.gguf" ||
  { echo "FAIL: synth"; exit 1; }
# patch(file, tensor, element, 4 little-endian bytes as printf escapes)
patch() {
  local data t_off
  data=$("$vt" inspect --no-tensors "$1" | sed -n 's/^data offset: *//p')
  t_off=$("$vt" inspect "$1" | awk -v n="$2" '$2 == n { print $(NF - 1) }')
  [ -n "$data" ] && [ -n "$t_off" ] || { echo "FAIL: no offset for $2 in $1"; exit 1; }
  printf "$4" | dd of="$1" bs=1 seek=$((data + t_off + 4 * $3)) conv=notrunc status=none
}
cp "$tmp/clean.gguf" "$tmp/nan.gguf"; patch "$tmp/nan.gguf" blk.0.attn_q.weight 17 '\x00\x00\xc0\x7f'
cp "$tmp/clean.gguf" "$tmp/inf.gguf"; patch "$tmp/inf.gguf" blk.0.ffn_down.weight 5 '\x00\x00\x80\x7f'
patch "$tmp/inf.gguf" blk.0.ffn_down.weight 9 '\x00\x00\x80\xff'

# vt inspect --check
out=$("$vt" inspect --check "$tmp/clean.gguf" 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "tensors finite" <<<"$out" && ok || bad "check clean: rc=$rc: $(tail -3 <<<"$out")"
out=$("$vt" inspect --check "$tmp/nan.gguf" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "blk.0.attn_q.weight .* 1 non-finite values, the first at element 17 (nan)" <<<"$out" &&
  grep -q "1 of .* tensors hold NaN or infinity" <<<"$out" && ok || bad "check nan: rc=$rc: $(tail -4 <<<"$out")"
out=$("$vt" inspect --check "$tmp/inf.gguf" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "blk.0.ffn_down.weight .* 2 non-finite values, the first at element 5 (inf)" <<<"$out" &&
  ok || bad "check inf: rc=$rc: $(tail -4 <<<"$out")"

# vt run: an error exit naming the step and the tensor, no text
"$vt" run -m "$tmp/clean.gguf" -p "a" -n 4 --temp 0 >/dev/null 2>&1 && ok || bad "run clean failed"
out=$("$vt" run -m "$tmp/nan.gguf" -p "a" -n 4 --temp 0 --no-display-prompt 2>"$tmp/err"); rc=$?
err=$(cat "$tmp/err")
[ $rc -eq 1 ] && ok || bad "run nan: rc=$rc"
grep -q "decode of batch token .*the logits are not finite; tensor 'blk.0.attn_q.weight': element 17 is nan" \
  <<<"$err" && ok || bad "run nan: message: $err"
[ -z "$out" ] && ok || bad "run nan printed text: '$out'"

# the server: 500 for the request, whole or streamed; it keeps serving
if "$vt" serve --help >/dev/null 2>&1 && command -v curl >/dev/null; then
  "$vt" serve --host 127.0.0.1 --port 0 -m "$tmp/nan.gguf" -t 1 2>"$tmp/serve.log" &
  SERVER_PID=$!
  port=
  for _ in $(seq 1 200); do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/serve.log" | head -1)
    [ -n "$port" ] && break; sleep 0.05
  done
  B=http://127.0.0.1:$port
  for _ in $(seq 1 200); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$B/health")" = 200 ] && break; sleep 0.05
  done
  for i in 1 2; do
    code=$(curl -s -o "$tmp/r$i" -w '%{http_code}' "$B/v1/completions" -d '{"prompt": "a", "max_tokens": 4}')
    [ "$code" = 500 ] && grep -q "not finite.*blk.0.attn_q.weight" "$tmp/r$i" && ok ||
      bad "server request $i: $code $(cat "$tmp/r$i")"
  done
  curl -sN -o "$tmp/s" "$B/v1/chat/completions" \
    -d '{"messages": [{"role": "user", "content": "a"}], "max_tokens": 4, "stream": true}'
  grep -q '"error".*not finite' "$tmp/s" && grep -q 'data: \[DONE\]' "$tmp/s" && ok || bad "stream: $(cat "$tmp/s")"
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$B/health")" = 200 ] && ok || bad "/health after the errors"
  kill -TERM "$SERVER_PID"; wait "$SERVER_PID"; rc=$?; SERVER_PID=
  [ $rc -eq 0 ] && ok || bad "server exit $rc: $(tail -5 "$tmp/serve.log")"
else
  echo "skip: no server in this build (or no curl)"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
