#!/usr/bin/env bash
# Bounded load on loopback: 240 requests (VT_LOAD_REQUESTS) at concurrency 16 (whole and streamed,
# some clients hanging up early) must end with no 5xx, valid responses, every KV
# block free again (/metrics), RSS back within 32 MiB of the warmed-up level
# (320 MiB under sanitizers),
# and an idle server using (almost) no CPU.
set -u
. "${VT_SOURCE_DIR:-.}/tests/server/lib.sh"
require_model stories260K.gguf
tmp=$(mktemp -d)
trap 'stop_server >/dev/null 2>&1; rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
rss_kib() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$SERVER_PID/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$SERVER_PID/stat"; }
metric() { curl -s "$BASE/metrics" | sed -n "s/^$1 \(.*\)/\1/p"; }

start_server "$tmp/server.log" -m "$models/stories260K.gguf" -np 16 -c 512 -t 1 || exit 1
wait_ready || exit 1
# /health answers 503 while the model loads (wait_ready polls it): only 5xx after this count
n5xx0=$(curl -s "$BASE/metrics" | sed -n 's/^vt_http_requests_total{status="5xx"} \(.*\)/\1/p')

# warm up (allocations that persist: KV pool, per-thread buffers), then measure
node "$src/tests/server/load.mjs" "$BASE" 48 16 >"$tmp/warm.out" || { bad "warm-up"; cat "$tmp/warm.out"; }
sleep 0.3
rss0=$(rss_kib)
node "$src/tests/server/load.mjs" "$BASE" "${VT_LOAD_REQUESTS:-240}" 16 >"$tmp/load.out"
rc=$?
grep -v '^[0-9]* passed' "$tmp/load.out"
if [ $rc = 0 ]; then ok; else bad "load client"; fi

# everything finished and freed (bounded wait for aborts to be reaped)
for _ in $(seq 1 50); do
  [ "$(metric vt_requests_running)" = 0 ] && [ "$(metric vt_kv_blocks_used)" = 0 ] && break
  sleep 0.1
done
running=$(metric vt_requests_running) waiting=$(metric vt_requests_waiting) used=$(metric vt_kv_blocks_used)
[ "$running" = 0 ] && [ "$waiting" = 0 ] && ok || bad "requests left: running $running waiting $waiting"
[ "$used" = 0 ] && ok || bad "$used KV blocks still used after the load"
n5xx=$(curl -s "$BASE/metrics" | sed -n 's/^vt_http_requests_total{status="5xx"} \(.*\)/\1/p')
[ "$(( ${n5xx:-0} - ${n5xx0:-0} ))" = 0 ] && ok ||
  { bad "$(( ${n5xx:-0} - ${n5xx0:-0} )) responses were 5xx"; grep -E ' 5[0-9][0-9]( |$)' "$tmp/server.log" | head -5; }
aborted=$(metric vt_requests_aborted_by_client_total)
[ "${aborted:-0}" -gt 0 ] && ok || bad "no client disconnect was noticed (vt_requests_aborted_by_client_total=$aborted)"
ttft=$(metric vt_time_to_first_token_seconds_count)
min_ttft=$(( (48 + ${VT_LOAD_REQUESTS:-240}) * 2 / 3 )) # most requests saw a first token
[ "${ttft:-0}" -gt "$min_ttft" ] && ok || bad "TTFT histogram count $ttft (want > $min_ttft)"

rss1=$(rss_kib)
echo "RSS after warm-up ${rss0} KiB, after ${VT_LOAD_REQUESTS:-240} requests ${rss1} KiB"
# Sanitizer builds keep freed memory in quarantine (ASan: 256 MiB), so the bound
# there only catches gross leaks.
bound=32
if [ -n "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ]; then bound=320; fi
[ $((rss1 - rss0)) -le $((bound * 1024)) ] && ok || bad "RSS grew by $(((rss1 - rss0) / 1024)) MiB (bound $bound MiB)"

# idle: no CPU over one second (the engine thread sleeps on a condition variable)
c0=$(cpu_ticks); sleep 1; c1=$(cpu_ticks)
[ $((c1 - c0)) -le 2 ] && ok || bad "idle server used $((c1 - c0)) clock ticks in 1 s"

stop_server
[ "$SERVER_RC" = 0 ] && ok || bad "server exit $SERVER_RC"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
