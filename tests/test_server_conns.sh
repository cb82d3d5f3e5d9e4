#!/usr/bin/env bash
# vt serve's HTTP edge over raw loopback sockets (tests/server/http_edge.py):
# connection exhaustion and the reserve, read/idle timeouts, half-closed
# clients, refusal before the body, framing edge cases, abort accounting and
# log lines. Each group runs against a server started with the flags it needs.
set -u
. "${VT_SOURCE_DIR:-.}/tests/server/lib.sh"
require_model stories260K.gguf
model="$models/stories260K.gguf"
tmp=$(mktemp -d)
trap 'stop_server >/dev/null 2>&1; rm -rf "$tmp"' EXIT
pass=0 fail=0
py="$src/tests/server/http_edge.py"

run_group() { # group log server-args...
  local group=$1 log=$2; shift 2
  start_server "$log" -m "$model" -t 1 "$@" || { fail=$((fail + 1)); return; }
  if ! wait_ready; then fail=$((fail + 1)); stop_server; return; fi
  SERVER_PID=$SERVER_PID python3 "$py" "$group" "$PORT" "$log" >"$tmp/$group.out" 2>&1
  grep -v '^ok ' "$tmp/$group.out" | grep -v 'passed, .* failed' || true
  local p f
  p=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$tmp/$group.out")
  f=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$tmp/$group.out")
  if [ -z "$p" ]; then fail=$((fail + 1)); echo "FAIL $group: no summary"; cat "$tmp/$group.out"; else
    pass=$((pass + p)); fail=$((fail + f)); fi
  stop_server
  [ "$SERVER_RC" = 0 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL $group: server exit $SERVER_RC"; }
  # every line of the server's own log has its UTC timestamp, the last one included
  if grep 'vt serve:' "$log" | grep -qvE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{12}Z vt serve: ' ||
     ! tail -1 "$log" | grep -qE 'Z vt serve: stopped$'; then
    fail=$((fail + 1)); echo "FAIL $group: a log line without a timestamp:"; grep 'vt serve:' "$log" | grep -vE '^[0-9]{4}-' | head -3
  else
    pass=$((pass + 1))
  fi
}

run_group edge "$tmp/edge.log" --read-timeout 60
run_group chunk "$tmp/chunk.log" --read-timeout 2 --body-timeout 1 --cors-origins http://ok.example
run_group cap "$tmp/cap.log" --max-body 1024 --read-timeout 60
run_group early "$tmp/early.log" --api-key k --read-timeout 60
run_group halfclose "$tmp/halfclose.log"
run_group abort "$tmp/abort.log" -np 1
run_group exhaust "$tmp/exhaust.log" --read-timeout 60 --idle-timeout 60
run_group timeouts "$tmp/timeouts.log" --read-timeout 1 --idle-timeout 1
run_group memory "$tmp/memory.log" -c 512
run_group reserve "$tmp/reserve.log" --max-connections 4 --max-connections-per-peer 0 --read-timeout 60

# Under ASan/UBSan/TSan a report in any server's log is a failure, whatever its exit code.
if grep -l 'Sanitizer\|runtime error:' "$tmp"/*.log >/dev/null 2>&1; then
  fail=$((fail + 1)); echo "FAIL: sanitizer report in a server log:"; grep -h -A20 'Sanitizer\|runtime error:' "$tmp"/*.log | head -60
else
  pass=$((pass + 1))
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
