#!/usr/bin/env bash
# vt serve renders chats with a Jinja template: --chat-template-file replaces the
# model's (stories260K has none, so without it the built-in chatml renders), the
# template's raise_exception becomes a 400 with its message, and a file that does
# not parse stops vt serve before it serves.
set -u
. "${VT_SOURCE_DIR:-.}/tests/server/lib.sh"
require_model stories260K.gguf
model="$models/stories260K.gguf"
tmp=$(mktemp -d)
trap 'stop_server >/dev/null 2>&1; rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

# prompt_tokens of a chat request: the template's rendering, tokenized
chat_prompt_tokens() { # body
  curl -s "$BASE/v1/chat/completions" -d "$1" |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const b=JSON.parse(s);console.log(b.usage?b.usage.prompt_tokens:"error: "+s)})'
}

# the template renders the last user message as plain text: its prompt is exactly
# what /v1/completions gets for the same text
cat >"$tmp/plain.jinja" <<'T'
{%- if messages[-1].role != 'user' %}{{ raise_exception('The last message must come from the user, not ' ~ messages[-1].role) }}{% endif -%}
{{ messages[-1].content | trim }}
T
start_server "$tmp/a.log" -m "$model" --chat-template-file "$tmp/plain.jinja" || exit 1
wait_ready || exit 1
grep -q "chat template $tmp/plain.jinja" "$tmp/a.log" && ok || bad "load line: $(cat "$tmp/a.log")"
want=$(curl -s "$BASE/v1/completions" -d '{"prompt": "Once upon a time", "max_tokens": 1}' |
  node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).usage.prompt_tokens))')
got=$(chat_prompt_tokens '{"messages": [{"role": "user", "content": "  Once upon a time  "}], "max_tokens": 1}')
[ -n "$want" ] && [ "$got" = "$want" ] && ok || bad "prompt tokens: chat $got, completion $want"
code=$(curl -s -o "$tmp/body" -w '%{http_code}' "$BASE/v1/chat/completions" \
  -d '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}], "max_tokens": 1}')
[ "$code" = 400 ] && grep -qF "The last message must come from the user, not assistant" "$tmp/body" && ok ||
  bad "raise -> 400: $code $(cat "$tmp/body")"
# still serving after the refusal
got=$(chat_prompt_tokens '{"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 1}')
[ "$got" = "$want" ] && ok || bad "after a refusal: $got"
stop_server

# without the file: the built-in chatml (more tokens than the bare text)
start_server "$tmp/b.log" -m "$model" || exit 1
wait_ready || exit 1
got=$(chat_prompt_tokens '{"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 1}')
[ -n "$got" ] && [ "$got" -gt "$want" ] && ok || bad "chatml fallback: $got tokens vs $want"
stop_server

# a file that does not parse, or does not exist: vt serve exits with a message
printf '%s' '{% if messages %}unclosed' >"$tmp/bad.jinja"
out=$("$vt" serve -m "$model" --port 0 --chat-template-file "$tmp/bad.jinja" 2>&1); rc=$?
[ $rc -ne 0 ] && grep -qF "bad.jinja: template line 1" <<<"$out" && ok || bad "bad template: rc=$rc $out"
out=$("$vt" serve -m "$model" --port 0 --chat-template-file "$tmp/none.jinja" 2>&1); rc=$?
[ $rc -ne 0 ] && grep -qF "none.jinja" <<<"$out" && ok || bad "missing template: rc=$rc $out"
out=$("$vt" serve -m "$model" --port 0 --chat-template-file "$tmp/plain.jinja" --chat-template chatml 2>&1); rc=$?
[ $rc -ne 0 ] && grep -qF "give one of them" <<<"$out" && ok || bad "both flags: rc=$rc $out"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
