#!/usr/bin/env bash
# Tool calls and reasoning end to end: for each format, vt serve with that
# format's template (--chat-template-file from ../shared/chat-templates) and a
# canned answer in that format (VT_TEST_CANNED_OUTPUT: stories260K could never
# write one) gives tool_calls / reasoning_content through the official openai
# client, whole and streamed (tests/server/tools_client.mjs). Then, with the
# real model: a named tool_choice forces the call (its name is certain), and
# fields vt does not implement are refused with a 400 that names them.
set -u
. "${VT_SOURCE_DIR:-.}/tests/server/lib.sh"
require_model stories260K.gguf
model="$models/stories260K.gguf"
tmpl="$models/../chat-templates"
if [ ! -d "$tmpl" ]; then
  if [ "${CI:-}" = true ]; then echo "FAIL: $tmpl missing"; echo "0 passed, 1 failed"; exit 1; fi
  echo "skip: $tmpl missing"; echo "0 passed, 0 failed"; exit 0
fi
if ! node -e 'import("openai")' 2>/dev/null && ! (cd "$src" && node -e 'import("openai")' 2>/dev/null); then
  if [ "${CI:-}" = true ]; then echo "FAIL: the openai npm package is missing"; echo "0 passed, 1 failed"; exit 1; fi
  echo "skip: no openai npm package"; echo "0 passed, 0 failed"; exit 0
fi
tmp=$(mktemp -d)
trap 'stop_server >/dev/null 2>&1; rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

DS() { printf '<\xef\xbd\x9c%s\xef\xbd\x9c>' "$1"; }
S=$'\xe2\x96\x81'

run_case() { # name template canned want
  local name=$1 t=$2 canned=$3 want=$4
  VT_TEST_CANNED_OUTPUT=$canned start_server "$tmp/$name.log" -m "$model" -c 2048 --chat-template-file "$tmpl/$t" ||
    { bad "$name: start"; return; }
  wait_ready || { bad "$name: ready"; stop_server; return; }
  if out=$(cd "$src" && node tests/server/tools_client.mjs "$BASE/v1" "$want" 2>&1); then ok; else bad "$name: $out"; fi
  stop_server
}

run_case hermes Qwen-Qwen2.5-7B-Instruct.jinja \
  $'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>' \
  '{"content": "Checking.\n", "calls": [["get_weather", {"city": "Paris"}], ["get_time", {}]]}'
run_case qwen3_thinking Qwen-Qwen3-0.6B.jinja \
  $'<think>\nThe user asks for the weather.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' \
  '{"content": null, "reasoning": "\nThe user asks for the weather.\n", "calls": [["get_weather", {"city": "Paris"}]]}'
run_case qwen3_coder Qwen3-Coder.jinja \
  $'<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>' \
  '{"content": null, "calls": [["get_weather", {"city": "Paris"}]]}'
run_case glm GLM-4.6.jinja \
  $'<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>' \
  '{"content": null, "calls": [["get_weather", {"city": "Paris"}]]}'
run_case llama3 meta-llama-Llama-3.1-8B-Instruct.jinja \
  '{"name": "get_weather", "parameters": {"city": "Paris"}}' \
  '{"content": null, "calls": [["get_weather", {"city": "Paris"}]]}'
run_case mistral Mistral-Small-3.2-24B-Instruct-2506.jinja \
  '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}' \
  '{"content": null, "calls": [["get_weather", {"city": "Paris"}]]}'
run_case deepseek deepseek-ai-DeepSeek-V3.1.jinja \
  "$(DS "tool${S}calls${S}begin")$(DS "tool${S}call${S}begin")get_weather$(DS "tool${S}sep"){\"city\": \"Paris\"}$(DS "tool${S}call${S}end")$(DS "tool${S}calls${S}end")" \
  '{"content": null, "calls": [["get_weather", {"city": "Paris"}]]}'
# gpt-oss: harmony channels (the call's <|call|> ends the generation, so it is not in the text)
run_case harmony openai-gpt-oss-120b.jinja \
  '<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}' \
  '{"content": null, "reasoning": "Need the weather.", "calls": [["get_weather", {"city": "Paris"}]]}'
run_case plain Qwen-Qwen2.5-7B-Instruct.jinja 'The weather is fine.' '{"content": "The weather is fine.", "calls": []}'

# reasoning without tools: split by default, kept in the content with
# reasoning_format "none" (the request's) or --reasoning-format none (the server's)
msg() { # body -> "reasoning|content"
  curl -s "$BASE/v1/chat/completions" -d "$1" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{
    const m=JSON.parse(s).choices[0].message; console.log((m.reasoning_content||"")+"|"+m.content)})'
}
think=$'<think>\nShort.\n</think>\n\nHello.'
req='{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 32, "ignore_eos": true'
VT_TEST_CANNED_OUTPUT=$think start_server "$tmp/think.log" -m "$model" -c 2048 --chat-template-file "$tmpl/Qwen-Qwen3-0.6B.jinja" || exit 1
wait_ready || exit 1
got=$(msg "$req}")
[ "$got" = $'\nShort.\n|Hello.' ] && ok || bad "reasoning split: $got"
got=$(msg "$req, \"reasoning_format\": \"none\"}")
[ "$got" = "|$think" ] && ok || bad "reasoning_format none: $got"
code=$(curl -s -o "$tmp/body" -w '%{http_code}' "$BASE/v1/chat/completions" -d "$req, \"reasoning_format\": \"x\"}")
[ "$code" = 400 ] && grep -q reasoning_format "$tmp/body" && ok || bad "reasoning_format x: $code"
stop_server
VT_TEST_CANNED_OUTPUT=$think start_server "$tmp/think2.log" -m "$model" -c 2048 --reasoning-format none \
  --chat-template-file "$tmpl/Qwen-Qwen3-0.6B.jinja" || exit 1
wait_ready || exit 1
got=$(msg "$req}")
[ "$got" = "|$think" ] && ok || bad "--reasoning-format none: $got"
stop_server
# gpt-oss without tools: the analysis channel is reasoning_content, the final one the content
oss=$'<|channel|>analysis<|message|>Short.<|end|><|start|>assistant<|channel|>final<|message|>Hello.'
VT_TEST_CANNED_OUTPUT=$oss start_server "$tmp/oss.log" -m "$model" -c 2048 --chat-template-file "$tmpl/openai-gpt-oss-120b.jinja" || exit 1
wait_ready || exit 1
got=$(msg "$req}")
[ "$got" = 'Short.|Hello.' ] && ok || bad "harmony reasoning split: $got"
got=$(msg "$req, \"reasoning_format\": \"none\"}")
[ "$got" = "|$oss" ] && ok || bad "harmony, reasoning_format none: $got"
stop_server
if "$vt" serve -m "$model" --port 0 --reasoning-format bogus >/dev/null 2>"$tmp/bogus.log"; then bad "--reasoning-format bogus starts"
else grep -q "reasoning-format" "$tmp/bogus.log" && ok || bad "--reasoning-format bogus: $(cat "$tmp/bogus.log")"; fi

# the real model: a named tool_choice starts the call (the prompt ends with the
# format's opener and the name) and a grammar of the tool's parameters writes the
# rest, so the answer is always that call with arguments that parse
start_server "$tmp/real.log" -m "$model" -c 2048 --chat-template-file "$tmpl/Qwen-Qwen2.5-7B-Instruct.jinja" || exit 1
wait_ready || exit 1
tools='[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
  "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"]}}}]'
body=$(curl -s "$BASE/v1/chat/completions" -d "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 400,
  \"temperature\": 1, \"tools\": $tools, \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}}")
echo "$body" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const c=JSON.parse(s).choices[0],m=c.message;
  process.exit(c.finish_reason==="tool_calls" && m.tool_calls && m.tool_calls[0].function.name==="get_weather" &&
  typeof JSON.parse(m.tool_calls[0].function.arguments).city==="string"?0:1)})' && ok || bad "named tool_choice: $body"
for f in '"logit_bias": {"x": 5}' '"logit_bias": {"1": 500}' '"echo": true' '"suffix": "x"' '"best_of": 2' '"grammar": "root ::= foo"' \
         '"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "string", "pattern": "a"}}}' \
         '"tool_choice": {"type": "function", "function": {"name": "nope"}}' \
         '"tool_choice": "required"'; do
  name=$(echo "$f" | sed 's/^"\([a-z_]*\)".*/\1/')
  code=$(curl -s -o "$tmp/body" -w '%{http_code}' "$BASE/v1/chat/completions" \
    -d "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 1, $f}")
  [ "$code" = 400 ] && grep -q "$name" "$tmp/body" && ok || bad "$f: $code $(cat "$tmp/body")"
done
# logit_bias: +100 on " the" (id 265 in stories260K) makes every token " the", even at temperature 1
body=$(curl -s "$BASE/v1/completions" -d '{"prompt": "Once upon a time", "max_tokens": 4, "temperature": 1, "ignore_eos": true, "logit_bias": {"265": 100}}')
text=$(echo "$body" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.stringify(JSON.parse(s).choices[0].text)))')
[ "$text" = '"the the the the"' ] || [ "$text" = '" the the the the"' ] && ok || bad "logit_bias +100: $body"
# neutral values pass
code=$(curl -s -o "$tmp/body" -w '%{http_code}' "$BASE/v1/chat/completions" \
  -d '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "echo": false, "best_of": 1, "logit_bias": {}, "response_format": {"type": "text"}}')
[ "$code" = 200 ] && ok || bad "neutral values: $code $(cat "$tmp/body")"
stop_server

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
