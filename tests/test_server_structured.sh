#!/usr/bin/env bash
# Structured output end to end through the official openai npm client
# (tests/server/grammar_client.mjs): response_format json_schema / json_object,
# a GBNF grammar, and tool_choice "required" / named forcing a call whose
# arguments match the tool's schema, at temperature 1 on stories260K with the
# Qwen2.5 template (hermes tool calls); refusals name the keyword or the rule.
# Then the forced calls alone with the Qwen3-Coder, GLM 4.6 and gpt-oss templates.
set -u
. "${VT_SOURCE_DIR:-.}/tests/server/lib.sh"
require_model stories260K.gguf
tmpl="$models/../chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja"
require_file "$tmpl"
(cd "$src" && node -e 'import("openai")' 2>/dev/null) || missing "the openai npm package (npm ci)"
tmp=$(mktemp -d)
trap 'stop_server >/dev/null 2>&1; rm -rf "$tmp"' EXIT
start_server "$tmp/server.log" -m "$models/stories260K.gguf" -c 2048 --chat-template-file "$tmpl" || exit 1
wait_ready || exit 1
(cd "$src" && node tests/server/grammar_client.mjs "$BASE/v1")
rc=$?
[ $rc = 0 ] || tail -5 "$tmp/server.log"
stop_server
# the forced calls in the other formats whose grammars write the arguments:
# Qwen3-Coder's XML, GLM's arg_key / arg_value pairs, gpt-oss's harmony message
for t in Qwen3-Coder.jinja GLM-4.6.jinja openai-gpt-oss-120b.jinja; do
  start_server "$tmp/$t.log" -m "$models/stories260K.gguf" -c 2048 --chat-template-file "$models/../chat-templates/$t" ||
    { echo "FAIL $t: start"; rc=1; continue; }
  wait_ready || { echo "FAIL $t: ready"; rc=1; stop_server; continue; }
  echo "$t:"
  (cd "$src" && node tests/server/grammar_client.mjs "$BASE/v1" tools) || { rc=1; tail -5 "$tmp/$t.log"; }
  stop_server
done
exit $rc
