#!/usr/bin/env bash
# /v1/embeddings end to end: a generative model (stories260K declares no
# llama.pooling_type) is refused with a 400 that says it is not an embedding
# model; with --pooling mean the official openai client gets normalised vectors
# (tests/server/embeddings_client.mjs); /embedding answers llama-server's shape;
# bounds on the inputs; --pooling none gives /embedding one vector a token and
# --pooling rank is refused. (Parity of the vectors with llama.cpp:
# tests/llama/test_embed_llama.c.)
set -u
. "${VT_SOURCE_DIR:-.}/tests/server/lib.sh"
require_model stories260K.gguf
model="$models/stories260K.gguf"
node -e 'import("openai")' 2>/dev/null || (cd "$src" && node -e 'import("openai")' 2>/dev/null) ||
  missing "the openai npm package (npm ci)"
tmp=$(mktemp -d)
trap 'stop_server >/dev/null 2>&1; rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
post() { # path body -> "CODE BODY"
  curl -s -o "$tmp/out" -w '%{http_code}' -H 'Content-Type: application/json' -d "$2" "$BASE$1" >"$tmp/code"
  echo "$(cat "$tmp/code") $(cat "$tmp/out")"
}

start_server "$tmp/a.log" -m "$model" -c 256 && wait_ready || { bad "start"; echo "$pass passed, $fail failed"; exit 1; }
r=$(post /v1/embeddings '{"input": "hi"}')
case "$r" in "400 "*"not an embedding model"*"--pooling"*) ok ;; *) bad "no pooling: $r" ;; esac
stop_server

"$vt" serve -m "$model" --pooling max >/dev/null 2>"$tmp/bad.log"
grep -q -- "--pooling max: expected none, mean, cls, last or rank" "$tmp/bad.log" && ok || bad "--pooling max: $(cat "$tmp/bad.log")"

# --pooling none: /embedding gives one vector a token (not normalised, as
# llama-server's), /v1/embeddings refuses; rank pooling is refused with a 400
start_server "$tmp/none.log" -m "$model" -c 256 --pooling none && wait_ready || { bad "start none"; echo "$pass passed, $fail failed"; exit 1; }
r=$(post /embedding '{"content": [1, 400, 401, 402]}')
rows=$(echo "${r#200 }" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{try{const a=JSON.parse(s);
  const e=a[0].embedding; const n=Math.hypot(...e[1]);
  console.log(a.length+" "+e.length+" "+e[0].length+" "+(e.every(v=>v.length===e[0].length)?"same":"ragged")+" "+(Math.abs(n-1)>1e-3?"raw":"normalised"))}catch(x){console.log("bad")}})')
[ "${r%% *}" = 200 ] && [ "$rows" = "1 4 64 same raw" ] && ok || bad "--pooling none /embedding: $rows ${r:0:200}"
r=$(post /embedding '{"content": ["Once", [1, 2, 3]]}')
rows=$(echo "${r#200 }" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{try{const a=JSON.parse(s);
  console.log(a.map(x=>x.index+":"+(x.index?x.embedding.length:x.embedding.length>=2)).join(" "))}catch(x){console.log("bad")}})')
[ "$rows" = "0:true 1:3" ] && ok || bad "--pooling none, two inputs: $rows ${r:0:200}"
r=$(post /v1/embeddings '{"input": "hi"}')
case "$r" in "400 "*"--pooling none"*"not OpenAI-compatible"*) ok ;; *) bad "--pooling none /v1/embeddings: ${r:0:200}" ;; esac
stop_server
start_server "$tmp/rank.log" -m "$model" -c 256 --pooling rank && wait_ready || { bad "start rank"; echo "$pass passed, $fail failed"; exit 1; }
for p in /v1/embeddings /embedding; do
  r=$(post $p '{"input": "hi"}')
  case "$r" in "400 "*"rank pooling"*"not supported"*) ok ;; *) bad "--pooling rank $p: ${r:0:200}" ;; esac
done
stop_server

start_server "$tmp/b.log" -m "$model" -c 256 --pooling mean && wait_ready || { bad "start mean"; echo "$pass passed, $fail failed"; exit 1; }
if out=$(cd "$src" && node tests/server/embeddings_client.mjs "$BASE/v1" 2>&1); then ok; else bad "openai client: $out"; fi
r=$(post /embedding '{"content": "Once upon a time", "embd_normalize": -1}')
case "$r" in "200 [{\"index\":0,\"embedding\":[["*"]]}]") ok ;; *) bad "/embedding: ${r:0:200}" ;; esac
r=$(post /embeddings '{"input": "Once upon a time"}')
case "$r" in "200 {\"object\":\"list\""*) ok ;; *) bad "/embeddings: ${r:0:200}" ;; esac
many=$(python3 -c 'import json; print(json.dumps({"input": ["a"] * 129}))')
r=$(post /v1/embeddings "$many")
case "$r" in "400 "*"129 inputs, more than 128"*) ok ;; *) bad "129 inputs: ${r:0:200}" ;; esac
long=$(python3 -c 'import json; print(json.dumps({"input": [1] * 300}))')
r=$(post /v1/embeddings "$long")
case "$r" in "413 "*"300 tokens, more than the context of 256"*) ok ;; *) bad "300 tokens: ${r:0:200}" ;; esac
r=$(post /v1/embeddings '{"input": [[1, 2], ["a"]]}')
case "$r" in "400 "*"input[1]"*) ok ;; *) bad "mixed batch: ${r:0:200}" ;; esac
r=$(post /v1/embeddings '{"input": "hi", "encoding_format": "int8"}')
case "$r" in "400 "*"encoding_format"*) ok ;; *) bad "encoding_format: ${r:0:200}" ;; esac
# generation still works beside it
r=$(post /v1/completions '{"prompt": "Once upon a time", "max_tokens": 4}')
case "$r" in "200 "*"\"text_completion\""*) ok ;; *) bad "completion: ${r:0:200}" ;; esac
stop_server
[ "$SERVER_RC" = 0 ] && ok || bad "exit status $SERVER_RC"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
