#!/usr/bin/env bash
# The official openai npm client (package.json at the repo root; scripts/setup.sh
# runs npm ci) against `vt serve` on loopback: chat and completions, whole and
# streamed, logprobs, n, stop, typed errors, an aborted stream, concurrency.
set -u
. "${VT_SOURCE_DIR:-.}/tests/server/lib.sh"
require_model stories260K.gguf
[ -d "$src/node_modules/openai" ] || missing "$src/node_modules/openai missing (npm ci)"
tmp=$(mktemp -d)
trap 'stop_server >/dev/null 2>&1; rm -rf "$tmp"' EXIT
start_server "$tmp/server.log" -m "$models/stories260K.gguf" --api-key test-key -t 1 -c 512 || exit 1
wait_ready || exit 1
node "$src/tests/server/openai_client.mjs" "$BASE/v1" test-key
rc=$?
stop_server
if [ "$SERVER_RC" != 0 ]; then echo "FAIL: server exit $SERVER_RC"; rc=1; fi
if [ "$rc" != 0 ]; then echo "-- server log (tail)"; tail -20 "$tmp/server.log"; fi
exit $rc
