#!/usr/bin/env bash
# vt template: renders real chat templates byte for byte (the reference text in
# tests/data/jinja comes from ../shared/chat-templates/expected.json, i.e. Python's
# jinja2 as transformers runs it), honours --date for strftime_now, and exits 1
# with the template's own message when it raises.
set -u
vt=${VT_BIN:-./build/vt}
src=${VT_SOURCE_DIR:-.}
models=${VT_TEST_MODELS:-../shared/models}
tdir=${VT_TEST_TEMPLATES:-$models/../chat-templates}
data=$src/tests/data/jinja
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# inline templates: no shared data needed
printf '%s' "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content | trim }}{% endfor %}" >"$tmp/t.jinja"
printf '%s' '{"bos_token": "<s>", "messages": [{"role": "user", "content": " hi "}]}' >"$tmp/v.json"
out=$("$vt" template --jinja "$tmp/t.jinja" --vars "$tmp/v.json") && [ "$out" = "<s>[user] hi" ] && ok ||
  bad "inline render: '$out'"
printf '%s' "{{ strftime_now('%Y-%m-%d %A') }}" >"$tmp/d.jinja"
out=$("$vt" template --jinja "$tmp/d.jinja" --date 2024-02-29) && [ "$out" = "2024-02-29 Thursday" ] && ok ||
  bad "--date: '$out'"
printf '%s' "{{ raise_exception('Conversation roles must alternate') }}" >"$tmp/r.jinja"
err=$("$vt" template --jinja "$tmp/r.jinja" 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] && grep -qF "Conversation roles must alternate" <<<"$err" && ok || bad "raise: rc=$rc '$err'"
printf '%s' "{% if %}" >"$tmp/s.jinja"
err=$("$vt" template --jinja "$tmp/s.jinja" 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] && grep -qF "line 1" <<<"$err" && ok || bad "syntax error: rc=$rc '$err'"
printf '%s' '[1, 2]' >"$tmp/a.json"
err=$("$vt" template --jinja "$tmp/t.jinja" --vars "$tmp/a.json" 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] && grep -qF "must be a JSON object" <<<"$err" && ok || bad "vars not an object: rc=$rc '$err'"
err=$("$vt" template --jinja "$tmp/t.jinja" --date 2024-13-01 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && grep -qF "is not YYYY-MM-DD" <<<"$err" && ok || bad "bad date: rc=$rc '$err'"
out=$("$vt" template --jinja - --vars "$tmp/v.json" <"$tmp/t.jinja") && [ "$out" = "<s>[user] hi" ] && ok ||
  bad "template from stdin: '$out'"
err=$("$vt" template --jinja "$tmp/missing.jinja" 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] && grep -qF "missing.jinja: No such file" <<<"$err" && ok || bad "missing template: rc=$rc '$err'"
err=$("$vt" template --jinja "$tmp/t.jinja" --vars "$tmp/v.json" --vars "$tmp/v.json" 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && grep -qF -- "--vars given twice" <<<"$err" && ok || bad "--vars twice: rc=$rc '$err'"

# real templates
if [ -f "$tdir/meta-llama-Llama-3.2-3B-Instruct.jinja" ]; then
  "$vt" template --jinja "$tdir/meta-llama-Llama-3.2-3B-Instruct.jinja" --vars "$data/tools_offered.json" \
    --date 2026-12-05 >"$tmp/out.txt" && cmp -s "$tmp/out.txt" "$data/llama-3.2_tools_offered.txt" && ok ||
    bad "Llama 3.2 tools_offered differs"
  "$vt" template --jinja "$tdir/Qwen-Qwen2.5-7B-Instruct.jinja" --vars "$data/system_multi_turn.json" \
    >"$tmp/out.txt" && cmp -s "$tmp/out.txt" "$data/qwen2.5_system_multi_turn.txt" && ok ||
    bad "Qwen2.5 system_multi_turn differs"
  err=$("$vt" template --jinja "$tdir/google-gemma-2-2b-it.jinja" --vars "$data/system_multi_turn.json" 2>&1 >/dev/null)
  rc=$?
  [ $rc -eq 1 ] && grep -qF "System role not supported" <<<"$err" && ok || bad "gemma-2 raise: rc=$rc '$err'"
elif [ "${CI:-}" = "true" ]; then
  bad "chat templates missing under CI=true ($tdir)"
else
  echo "skip: chat templates missing ($tdir)"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
