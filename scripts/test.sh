#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this):
#   1. set-up (apt packages, the reference llama.cpp from npm, npm test clients)
#   2. release build + every test (ctest)
#   3. the same suite under ASan + UBSan (clang; the same build holds the fuzz targets)
#   4. threadpool, engine and server tests under TSan
#   5. each libFuzzer target for a bounded time over its corpus
#   6. the aarch64 cross build, tested under qemu (plain NEON, dotprod, i8mm, cortex-a53)
# Set VT_TEST_JOBS="release asan" (a subset) to run fewer jobs locally.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=$(nproc)
fuzz_seconds=${VT_FUZZ_SECONDS:-12}
selected=${VT_TEST_JOBS:-"release asan tsan fuzz arm"}
export CI=${CI:-false}

scripts/setup.sh || { echo "setup failed"; exit 1; }

passed=0 failed=0 failed_jobs=""
run_job() { # name, function
  local name=$1 t0=$SECONDS
  case " $selected " in *" $name "*) ;; *) return 0 ;; esac
  echo "== $name"
  if "$2"; then
    passed=$((passed + 1)); echo "== $name: ok ($((SECONDS - t0)) s)"
  else
    failed=$((failed + 1)); failed_jobs="$failed_jobs $name"; echo "== $name: FAILED ($((SECONDS - t0)) s)"
  fi
}

job_release() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build build -j"$jobs" &&
    ctest --test-dir build --output-on-failure -j"$jobs"
}

# The ASan+UBSan build is also the fuzz build: clang, libvt instrumented for
# libFuzzer as well (coverage counters, which the tests' sanitizer runtime
# accepts), -O1 with line tables (what a sanitizer report needs, and half the
# compile time of -O2 -g). One sanitized build of the library instead of two.
asan_configure() {
  cmake -S . -B build-asan -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DVT_SANITIZE=address,undefined -DVT_FUZZ=ON -DVT_BENCH=OFF >/dev/null
}

job_asan() {
  asan_configure && cmake --build build-asan -j"$jobs" &&
    # test_parity's and test_qwen35_llama's F16 rows only: each family's forward
    # pass under the sanitizers; the quantized rows add kernels that test_kernels
    # and test_matmul already run here, and would take most of the job. Left to
    # the release job: the comparisons whose vt side other tests run here
    # (tokenizer: test_tokenizer and the fuzz job; quantize: test_quant and
    # test_cli_output; synth: every test that writes a model) and the --help
    # consistency check (vt's option tables, parsed by every CLI test here).
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      VT_PARITY_ONLY="${VT_PARITY_ONLY:--f16}" ctest --test-dir build-asan --output-on-failure -j"$jobs" \
      -E "${VT_ASAN_EXCLUDE:-^(test_tokenizer_llama|test_quantize_llama|test_synth_llama|test_cli_help)$}"
}

job_tsan() {
  local tests="threadpool|engine|server|matmul|model"
  # build only what those tests run: their executables (VT_TEST_FILTER) and the vt binary
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVT_SANITIZE=thread -DVT_BENCH=OFF \
    -DVT_TEST_FILTER="$tests" >/dev/null &&
    cmake --build build-tsan -j"$jobs" &&
    # the soaks' and the load test's request counts are for ASan's accounting
    # and RSS checks; here a few dozen requests show the threads' interplay
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 VT_SOAK_REQUESTS=${VT_SOAK_REQUESTS:-60} VT_LOAD_REQUESTS=${VT_LOAD_REQUESTS:-96} \
      ctest --test-dir build-tsan --output-on-failure -j"$jobs" -R "$tests"
}

# One fuzz target for fuzz_seconds over a copy of its corpus; its kept crashes
# first. Prints its report (to a log the caller shows) and fails with the target.
fuzz_one() { # binary
  local f=$1 name work ok=0
  name=$(basename "$f"); name=${name#fuzz_}
  work=$(mktemp -d)
  [ -d "fuzz/corpus/$name" ] && cp -r "fuzz/corpus/$name"/. "$work"/
  echo "-- fuzz_$name for ${fuzz_seconds} s"
  # Past crashes are kept in fuzz/crashes/<name>/ and must stay fixed.
  if [ -d "fuzz/crashes/$name" ] && ls "fuzz/crashes/$name"/* >/dev/null 2>&1; then
    "$f" "fuzz/crashes/$name"/* >/dev/null 2>&1 || { echo "fuzz_$name: a kept crash input fails again"; ok=1; }
  fi
  if ! "$f" -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=0 \
       "$work" >"$work.log" 2>&1; then
    echo "fuzz_$name FAILED"; tail -40 "$work.log"; ok=1
  else
    grep -E "^#[0-9]+ *DONE" "$work.log" | tail -1
  fi
  rm -rf "$work" "$work.log"
  return $ok
}

job_fuzz() {
  # The fuzz targets of the ASan build (built there by job_asan; built here
  # alone when this job runs without it).
  local targets=() src
  for src in fuzz/fuzz_*.c; do targets+=("$(basename "$src" .c)"); done
  asan_configure && cmake --build build-asan -j"$jobs" --target "${targets[@]}" || return 1
  # one target per core at a time; each report printed whole when it ends
  local ok=0 f logs pids=() i
  logs=$(mktemp -d)
  for f in build-asan/fuzz_*; do
    [ -x "$f" ] || continue
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    fuzz_one "$f" >"$logs/$(basename "$f")" 2>&1 &
    pids+=("$!:$(basename "$f")")
  done
  for i in "${pids[@]}"; do
    wait "${i%%:*}" || ok=1
    cat "$logs/${i#*:}"
  done
  rm -rf "$logs"
  return $ok
}

job_arm() {
  if [ ! -x scripts/test-arm.sh ]; then echo "no aarch64 job"; return 1; fi
  scripts/test-arm.sh
}

run_job release job_release
run_job asan job_asan
run_job tsan job_tsan
run_job fuzz job_fuzz
run_job arm job_arm

echo
[ -n "$failed_jobs" ] && echo "failed jobs:$failed_jobs"
echo "jobs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
