#!/usr/bin/env bash
# Chat-format markers that are control tokens (issue 29). A control token gives
# no text in the output, but where a format's marker is one (as <tool_call>,
# <arg_key>, [TOOL_CALLS] or <think> are in many real vocabularies) the parser
# must see it, as llama.cpp's preserved_tokens. No vocabulary in
# ../shared/models/vocab has tool-call markers, so vt synth writes a model with
# the qwen35 vocabulary whose last padding tokens are renamed to glm's markers
# and <think>, </think>, as control tokens (--control-tokens), served with GLM
# 4.6's template:
#  - vt serve finds the markers that are tokens (its log names them);
#  - a grammar of token references makes the model write a call out of the
#    marker tokens: the chat output keeps them, and the call is in tool_calls,
#    whole and streamed;
#  - <think> ... </think> by tokens stays in a grammar's content as text;
#  - tool_choice "required" through the forced call's grammar (which names the
#    markers as tokens): a call whose arguments parse.
set -u
. "${VT_SOURCE_DIR:-.}/tests/server/lib.sh"
require_model vocab/ggml-vocab-qwen35.gguf
tmpl="$models/../chat-templates/GLM-4.6.jinja"
require_file "$tmpl"
tmp=$(mktemp -d)
trap 'stop_server >/dev/null 2>&1; rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

markers='<tool_call>,</tool_call>,<arg_key>,</arg_key>,<arg_value>,</arg_value>,<think>,</think>'
"$vt" synth --vocab-from "$models/vocab/ggml-vocab-qwen35.gguf" --control-tokens "$markers" --layers 1 --embd 32 \
  --heads 2 --kv-heads 1 --ff 64 --ctx 1024 --type f16 -t 2 -q -o "$tmp/m.gguf" 2>"$tmp/synth.log" ||
  { bad "synth: $(cat "$tmp/synth.log")"; echo "$pass passed, $fail failed"; exit 1; }
start_server "$tmp/s.log" -m "$tmp/m.gguf" -c 1024 --chat-template-file "$tmpl" && wait_ready ||
  { bad "start"; echo "$pass passed, $fail failed"; exit 1; }
grep -q "glm markers that are tokens of the vocabulary: ${markers//,/ }" "$tmp/s.log" && ok ||
  bad "log: $(grep -i marker "$tmp/s.log")"

tools='[{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
  "properties": {"zone": {"type": "string", "maxLength": 6}}, "required": ["zone"]}}},
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
  "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"]}}}]'
call='root ::= <tool_call> \"get_time\\n\" <arg_key> \"zone\" </arg_key> \"\\n\" <arg_value> \"UTC\" </arg_value> \"\\n\" </tool_call>'
req="{\"messages\": [{\"role\": \"user\", \"content\": \"time?\"}], \"max_tokens\": 64, \"tools\": $tools, \"grammar\": \"$call\""

# whole: tool_calls [get_time {"zone": "UTC"}], no content
body=$(curl -s "$BASE/v1/chat/completions" -d "$req}")
echo "$body" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const c=JSON.parse(s).choices[0],m=c.message;
  const t=m.tool_calls||[];process.exit(c.finish_reason==="tool_calls" && !m.content && t.length===1 &&
  t[0].function.name==="get_time" && JSON.parse(t[0].function.arguments).zone==="UTC"?0:1)})' && ok ||
  bad "call by marker tokens: $body"
# streamed: the deltas add up to the same call
curl -s -N "$BASE/v1/chat/completions" -d "$req, \"stream\": true}" >"$tmp/sse"
node -e 'const fs=require("fs");let name="",args="",content="",fin="";
  for(const l of fs.readFileSync(process.argv[1],"utf8").split("\n")){if(!l.startsWith("data: ")||l==="data: [DONE]")continue;
    const c=JSON.parse(l.slice(6)).choices[0];if(!c)continue;const d=c.delta||{};if(d.content)content+=d.content;
    for(const t of d.tool_calls||[]){if(t.function&&t.function.name)name+=t.function.name;if(t.function&&t.function.arguments)args+=t.function.arguments;}
    if(c.finish_reason)fin=c.finish_reason;}
  process.exit(fin==="tool_calls" && !content && name==="get_time" && JSON.parse(args).zone==="UTC"?0:1)' "$tmp/sse" && ok ||
  bad "streamed call by marker tokens: $(cat "$tmp/sse")"

# <think> </think> by tokens, in a grammar's output: kept as text in the content
think='root ::= <think> \"hmm\" </think> \"Hello.\"'
body=$(curl -s "$BASE/v1/chat/completions" -d "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 16, \"grammar\": \"$think\"}")
echo "$body" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{
  process.exit(JSON.parse(s).choices[0].message.content==="<think>hmm</think>Hello."?0:1)})' && ok || bad "think tokens: $body"
# the completions endpoint's raw text has no control token texts (nothing preserved there)
body=$(curl -s "$BASE/v1/completions" -d "{\"prompt\": \"hi\", \"max_tokens\": 16, \"grammar\": \"$think\"}")
echo "$body" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{
  process.exit(JSON.parse(s).choices[0].text==="hmmHello."?0:1)})' && ok || bad "completions, think tokens: $body"

# tool_choice "required": the forced call's grammar names the markers as tokens
for i in 1 2 3; do
  body=$(curl -s "$BASE/v1/chat/completions" -d "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 400,
    \"temperature\": 1, \"seed\": $i, \"tools\": $tools, \"tool_choice\": \"required\"}")
  echo "$body" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const c=JSON.parse(s).choices[0],m=c.message;
    const t=m.tool_calls||[];if(c.finish_reason!=="tool_calls"||t.length!==1)process.exit(1);const a=JSON.parse(t[0].function.arguments);
    process.exit((t[0].function.name==="get_time"&&typeof a.zone==="string")||(t[0].function.name==="get_weather"&&typeof a.city==="string")?0:1)})' &&
    ok || bad "tool_choice required, seed $i: $body"
done
stop_server

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
