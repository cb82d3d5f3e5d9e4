#!/usr/bin/env bash
# `vt serve` on a hybrid model (a small synthetic qwen35 from `vt synth`: Gated
# DeltaNet layers with recurrent state, one layer in four attending fully):
# /v1/completions whole and streamed give the same text, four concurrent requests
# give what each gives alone, a repeated prompt is served from the prefix cache
# (a state snapshot restored: usage's cached_tokens and vt_state_restores_total),
# and afterwards every KV block and state slot is free (/metrics). VT_HYBRID_ARCH
# picks another hybrid architecture `vt synth` writes.
set -u
. "${VT_SOURCE_DIR:-.}/tests/server/lib.sh"
"$vt" serve --help >/dev/null 2>&1 || missing "$vt was built without the server (no serve command)"
arch=${VT_HYBRID_ARCH:-qwen35}
tmp=$(mktemp -d)
trap 'stop_server >/dev/null 2>&1; rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
metric() { curl -s "$BASE/metrics" | sed -n "s/^$1 \(.*\)/\1/p"; }

"$vt" synth --arch "$arch" --layers 4 --embd 64 --heads 4 --kv-heads 2 --head-dim 16 --ff 96 --ctx 512 \
  -t 1 -q -o "$tmp/hybrid.gguf" || { echo "FAIL: vt synth --arch $arch"; echo "0 passed, 1 failed"; exit 1; }
start_server "$tmp/server.log" -m "$tmp/hybrid.gguf" -np 4 -c 256 -t 1 --state-snapshot-interval 16 || exit 1
wait_ready || exit 1
grep -q "recurrent state: " "$tmp/server.log" && ok || bad "no recurrent state line in the log"

prompt="Once upon a time there was a little robot who lived in a big house with a garden full of flowers and trees"
body() { # prompt, stream
  printf '{"prompt": "%s", "max_tokens": 12, "temperature": 0, "stream": %s}' "$1" "$2"
}
complete() { # out, prompt
  curl -s -o "$1" -w '%{http_code}' "$BASE/v1/completions" -H "Content-Type: application/json" -d "$(body "$2" false)"
}

code=$(complete "$tmp/a.json" "$prompt")
[ "$code" = 200 ] && ok || bad "completion: status $code: $(head -c 300 "$tmp/a.json")"
curl -s -N "$BASE/v1/completions" -H "Content-Type: application/json" -d "$(body "$prompt" true)" >"$tmp/stream.txt"
# the prompt again: a prefix-cache hit restores a state snapshot
restores0=$(metric vt_state_restores_total)
complete "$tmp/b.json" "$prompt" >/dev/null
restores1=$(metric vt_state_restores_total)
[ "${restores1:-0}" -gt "${restores0:-0}" ] 2>/dev/null && ok || bad "vt_state_restores_total $restores0 -> $restores1"
# four at once (sharing the prompt above: prefix hits among them), each as alone
for k in 1 2 3 4; do complete "$tmp/alone$k.json" "$prompt and $k friends" >/dev/null; done
pids=""
for k in 1 2 3 4; do complete "$tmp/together$k.json" "$prompt and $k friends" >/dev/null & pids="$pids $!"; done
wait $pids # not the server's

# the bodies, in one node run: "ok" or "FAIL ..." per check
node -e '
  const fs = require("fs"), dir = process.argv[1];
  const J = (f) => JSON.parse(fs.readFileSync(dir + "/" + f, "utf8"));
  const check = (c, msg) => console.log(c ? "ok" : "FAIL " + msg);
  const a = J("a.json"), text = a.choices[0].text;
  check(a.usage.completion_tokens === 12, "completion_tokens " + a.usage.completion_tokens + ", want 12");
  const lines = fs.readFileSync(dir + "/stream.txt", "utf8").split("\n");
  check(lines.some((l) => l.startsWith("data: [DONE]")), "stream without [DONE]");
  let st = "";
  for (const l of lines) if (l.startsWith("data: {")) st += JSON.parse(l.slice(6)).choices[0].text;
  check(st === text, "streamed text " + JSON.stringify(st) + " differs from " + JSON.stringify(text));
  const b = J("b.json");
  check(b.choices[0].text === text, "text after a prefix hit differs");
  const cached = b.usage.prompt_tokens_details && b.usage.prompt_tokens_details.cached_tokens;
  check(cached > 0, "cached_tokens " + cached + " after the same prompt");
  for (let k = 1; k <= 4; k++) {
    const x = J("alone" + k + ".json").choices[0].text, y = J("together" + k + ".json").choices[0].text;
    check(x.length > 0 && x === y, "request " + k + ": together " + JSON.stringify(y) + ", alone " + JSON.stringify(x));
  }' "$tmp" >"$tmp/checks.txt" 2>&1
while read -r line; do if [ "$line" = ok ]; then ok; else bad "${line#FAIL }"; fi; done <"$tmp/checks.txt"

# everything free again
for _ in $(seq 1 50); do [ "$(metric vt_requests_running)" = 0 ] && break; sleep 0.1; done
[ "$(metric vt_kv_blocks_used)" = 0 ] && ok || bad "KV blocks used: $(metric vt_kv_blocks_used)"
total=$(metric vt_state_slots_total) free=$(metric vt_state_slots_free)
[ -n "$total" ] && [ "$total" = "$free" ] && ok || bad "state slots: $free of $total free"
stop_server
[ "$SERVER_RC" = 0 ] && ok || bad "server exit $SERVER_RC"
if [ $fail != 0 ]; then echo "-- server log (tail)"; tail -20 "$tmp/server.log"; fi
echo "$pass passed, $fail failed"
[ $fail = 0 ]
