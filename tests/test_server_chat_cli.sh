#!/usr/bin/env bash
# vt chat, driven by piping a conversation into it: each message is answered with
# the template's rendering of the whole conversation (history kept, /clear forgets
# it), -sys reaches the template as the system message, a line ending with '\'
# continues the message, /exit quits, and vt run -cnv / -i lead to vt chat.
set -u
. "${VT_SOURCE_DIR:-.}/tests/server/lib.sh" # models, vt; missing, require_file
model="$models/stories260K.gguf"
require_file "$model"
"$vt" chat --help >/dev/null 2>&1 || missing "$vt was built without the server libraries (no vt chat)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

# the whole conversation, plainly; refuses a conversation without a system message
cat >"$tmp/t.jinja" <<'T'
{%- if messages[0].role != 'system' %}{{ raise_exception('no system message') }}{% endif -%}
{%- if messages[-1].content == 'a\nb' %}{{ raise_exception('joined: a+b') }}{% endif -%}
{%- for m in messages %}{{ m.role }}: {{ m.content }}
{% endfor %}assistant:
T
chat() { "$vt" chat -m "$model" --chat-template-file "$tmp/t.jinja" --temp 0 -n 6 "$@" 2>"$tmp/err"; }

a=$(printf 'Once upon a time\n' | chat -sys "Tell stories.")
[ -n "$a" ] && ok || bad "an answer: '$a' $(cat "$tmp/err")"
b=$(printf 'Hello\n/clear\nOnce upon a time\n' | chat -sys "Tell stories.")
[ "$(printf '%s\n' "$b" | tail -n "$(printf '%s\n' "$a" | wc -l)")" = "$a" ] && ok || bad "/clear: '$b' vs '$a'"
c=$(printf 'Hello\nOnce upon a time\n' | chat -sys "Tell stories.")
[ "$c" != "$b" ] && ok || bad "history kept: the same answers with and without /clear"
printf 'Once\n' | chat >/dev/null
grep -q "no system message" "$tmp/err" && ok || bad "-sys missing: $(cat "$tmp/err")"
printf 'a\\\nb\n' | chat -sys s >/dev/null
grep -q "joined: a+b" "$tmp/err" && ok || bad "continued line: $(cat "$tmp/err")"
d=$(printf 'Once upon a time\n/exit\nHello\n' | chat -sys "Tell stories.")
[ "$d" = "$a" ] && ok || bad "/exit: '$d'"
e=$(printf 'Once upon a time\n' | "$vt" run -m "$model" -cnv -p "Tell stories." --chat-template-file "$tmp/t.jinja" \
      --temp 0 -n 6 2>/dev/null)
[ "$e" = "$a" ] && ok || bad "vt run -cnv: '$e' vs '$a'"
f=$(printf 'Once upon a time\n' | "$vt" run -m "$model" -i -sys "Tell stories." --chat-template-file "$tmp/t.jinja" \
      --temp 0 -n 6 2>/dev/null)
[ "$f" = "$a" ] && ok || bad "vt run -i: '$f'"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
