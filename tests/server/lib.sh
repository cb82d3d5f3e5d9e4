# Sourced, not run (it starts nothing itself). For every test script: the
# CI-fails-else-skips rule for what a test needs (missing, require_file). For
# tests/test_server_*.sh also: start `vt serve` on a free loopback port, wait
# until it is ready, stop it.
#   require_model FILE         $models/FILE and a vt with the serve command
#   start_server LOG ARGS...   sets SERVER_PID and PORT (from the "listening on" line)
#   wait_ready                 polls /health until 200 (bounded: 10 s)
#   stop_server                SIGTERM, wait (bounded), sets SERVER_RC
models=${VT_TEST_MODELS:-../shared/models}
vt=${VT_BIN:-./build/vt}
src=${VT_SOURCE_DIR:-.}

# missing WHAT: what a test needs is not there: a failure under CI=true, else a
# skip; ends the script with its tally (its pass and fail counts where it keeps
# them), failing if anything failed
missing() {
  local p=${pass:-0} f=${fail:-0}
  if [ "${CI:-}" = true ]; then echo "FAIL: $1 (under CI=true)"; f=$((f + 1)); else echo "skip: $1"; fi
  echo "$p passed, $f failed"
  [ "$f" -eq 0 ]
  exit
}

require_file() { # path
  [ -f "$1" ] || missing "$1 missing"
}

require_model() { # file
  require_file "$models/$1"
  "$vt" serve --help >/dev/null 2>&1 || missing "$vt was built without the server (no serve command)"
}

start_server() { # log, args...
  local log=$1; shift
  "$vt" serve --host 127.0.0.1 --port 0 "$@" 2>"$log" &
  SERVER_PID=$!
  PORT=""
  for _ in $(seq 1 200); do
    PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
    [ -n "$PORT" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.05
  done
  if [ -z "$PORT" ]; then echo "FAIL: server did not start"; cat "$log"; return 1; fi
  BASE="http://127.0.0.1:$PORT"
}

wait_ready() {
  for _ in $(seq 1 200); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/health")" = 200 ] && return 0
    sleep 0.05
  done
  echo "FAIL: server not ready after 10 s"; return 1
}

stop_server() {
  SERVER_RC=""
  [ -n "${SERVER_PID:-}" ] || return 0
  kill -TERM "$SERVER_PID" 2>/dev/null
  for _ in $(seq 1 200); do
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "FAIL: server did not exit 10 s after SIGTERM"; kill -KILL "$SERVER_PID"
  fi
  wait "$SERVER_PID"; SERVER_RC=$?
  SERVER_PID=""
}
