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
#    markers as tokens): a call whose arguments parse;
#  - a request keeps only the markers it reads: the call markers where tools are
#    offered and tool_choice is not "none" (else they are control tokens like any
#    other: no text), <think> </think> where the template thinks;
#  - logprobs: a kept marker's text is its text there too (the chosen token and
#    the alternatives, whole and streamed; the chosen tokens add up to the
#    content), one not kept is "", as in the content. The alternatives are the
#    model's 20 likeliest of a random distribution, so that they hold markers,
#    a second model has a generated vocabulary of 267 tokens (bytes and the
#    markers).
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

# logprobs of chat answers (lp FILE whole|stream EXPR: EXPR over r = {content, calls,
# fin, tokens (chosen texts), join, tops (every alternative's text), n (entries), bytes
# (each entry's bytes are its text's, unless the text is a lossy partial character)})
cat >"$tmp/lp.js" <<'JS'
const fs=require("fs");const [file,mode,expr]=process.argv.slice(2);const s=fs.readFileSync(file,"utf8");
const T=["<think>","</think>"],M=["<tool_call>","</tool_call>","<arg_key>","</arg_key>","<arg_value>","</arg_value>"];
let content="",calls=0,fin="",entries=[];
if(mode==="stream"){for(const l of s.split("\n")){if(!l.startsWith("data: ")||l==="data: [DONE]")continue;
  const c=JSON.parse(l.slice(6)).choices[0];if(!c)continue;const d=c.delta||{};if(d.content)content+=d.content;
  if(d.tool_calls)calls++;if(c.finish_reason)fin=c.finish_reason;if(c.logprobs&&c.logprobs.content)entries.push(...c.logprobs.content);}}
else{const c=JSON.parse(s).choices[0];content=c.message.content||"";calls=(c.message.tool_calls||[]).length;
  fin=c.finish_reason;entries=(c.logprobs&&c.logprobs.content)||[];}
const all=entries.flatMap(e=>[e,...(e.top_logprobs||[])]);
const r={content,calls,fin,n:entries.length,tokens:entries.map(e=>e.token),tops:entries.flatMap(e=>(e.top_logprobs||[]).map(t=>t.token)),
  bytes:all.every(e=>e.token.includes("\ufffd")||Buffer.from(e.bytes).equals(Buffer.from(e.token)))};
r.join=r.tokens.join("");
process.exit(eval(expr)?0:1);
JS
lp() { node "$tmp/lp.js" "$@"; }
chat() { # file, extra JSON fields: a chat answer of the grammar's text, with logprobs
  curl -s "$BASE/v1/chat/completions" -d "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 64,
    \"logprobs\": true, \"top_logprobs\": 3, $2}" >"$1"
}
# the chosen <think> </think>: their text, adding up to the content, whole and streamed
chat "$tmp/a" "\"grammar\": \"$think\""
lp "$tmp/a" whole 'r.content==="<think>hmm</think>Hello." && r.join===r.content && r.tokens[0]==="<think>" && r.bytes' &&
  ok || bad "logprobs of kept think markers: $(cat "$tmp/a")"
chat "$tmp/a" "\"grammar\": \"$think\", \"stream\": true"
lp "$tmp/a" stream 'r.content==="<think>hmm</think>Hello." && r.join===r.content && r.tokens[0]==="<think>" && r.bytes' &&
  ok || bad "streamed logprobs of kept think markers: $(cat "$tmp/a")"
# a call by marker tokens, tools offered: the call, and the markers in the logprobs
chat "$tmp/a" "\"tools\": $tools, \"grammar\": \"$call\""
lp "$tmp/a" whole 'r.calls===1 && r.fin==="tool_calls" && r.bytes &&
  r.join==="<tool_call>get_time\n<arg_key>zone</arg_key>\n<arg_value>UTC</arg_value>\n</tool_call>"' &&
  ok || bad "logprobs of kept call markers: $(cat "$tmp/a")"
# the same tokens under tool_choice "none", or with no tools: no call, and the call
# markers are control tokens like any other (no text in the content or the logprobs)
chat "$tmp/a" "\"tools\": $tools, \"tool_choice\": \"none\", \"grammar\": \"$call\""
lp "$tmp/a" whole 'r.content==="get_time\nzone\nUTC\n" && r.calls===0 && r.fin==="stop" && r.join===r.content' &&
  ok || bad "call markers under tool_choice none: $(cat "$tmp/a")"
chat "$tmp/a" "\"grammar\": \"$call\", \"stream\": true"
lp "$tmp/a" stream 'r.content==="get_time\nzone\nUTC\n" && r.calls===0 && r.fin==="stop" && r.join===r.content' &&
  ok || bad "call markers with no tools, streamed: $(cat "$tmp/a")"
# completions: nothing kept, in the text and its logprobs alike
body=$(curl -s "$BASE/v1/completions" -d "{\"prompt\": \"hi\", \"max_tokens\": 16, \"logprobs\": 2, \"grammar\": \"$think\"}")
echo "$body" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const c=JSON.parse(s).choices[0];
  process.exit(c.text==="hmmHello." && c.logprobs.tokens.join("")===c.text?0:1)})' && ok || bad "completions logprobs: $body"
stop_server

# the alternatives: a generated vocabulary of 267 tokens, 20 alternatives a token
"$vt" synth --vocab 267 --control-tokens "$markers" --layers 1 --embd 32 --heads 2 --kv-heads 1 --ff 64 --ctx 2048 \
  --type f16 -t 2 -q -o "$tmp/small.gguf" 2>"$tmp/synth.log" || bad "synth small: $(cat "$tmp/synth.log")"
if start_server "$tmp/s2.log" -m "$tmp/small.gguf" -c 2048 --chat-template-file "$tmpl" && wait_ready; then
  alt() { # file, extra JSON fields
    curl -s "$BASE/v1/chat/completions" -d "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 48,
      \"ignore_eos\": true, \"temperature\": 1, \"seed\": 1, \"logprobs\": true, \"top_logprobs\": 20 $2}" >"$1"
  }
  alt "$tmp/a" ""
  lp "$tmp/a" whole 'r.n===48 && r.tops.some(t=>T.includes(t)) && !r.tops.some(t=>M.includes(t)) && r.bytes' &&
    ok || bad "alternatives, no tools: $(cat "$tmp/a")"
  alt "$tmp/a" ", \"tools\": $tools"
  lp "$tmp/a" whole 'r.n===48 && r.tops.some(t=>M.includes(t)) && r.tops.some(t=>T.includes(t)) && r.bytes' &&
    ok || bad "alternatives, tools: $(cat "$tmp/a")"
  alt "$tmp/a" ", \"tools\": $tools, \"tool_choice\": \"none\", \"reasoning_format\": \"none\", \"stream\": true"
  lp "$tmp/a" stream 'r.n===48 && r.tops.some(t=>T.includes(t)) && !r.tops.some(t=>M.includes(t)) && r.bytes' &&
    ok || bad "streamed alternatives, tool_choice none: $(cat "$tmp/a")"
  stop_server
else
  bad "start small"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
