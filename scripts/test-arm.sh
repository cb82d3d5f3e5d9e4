#!/usr/bin/env bash
# The aarch64 backend, cross-built and tested under qemu-user (no ARM hardware
# needed): gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user.
#
#   1. Release cross build in build-arm (cmake/aarch64-linux-gnu.cmake)
#   2. -cpu max (dotprod + i8mm): the module tests that touch kernels, the models
#      and the end-to-end goldens, with the tier pinned to neon_i8mm
#   3. -cpu cortex-a53 (plain ASIMD, no dotprod): the kernel test must select the
#      plain NEON fallback, and the goldens/tokenizer/model tests pass on it
#   4. -cpu max with VT_ISA=neon and VT_ISA=neon_dot: the capped tiers' kernels
#      against the _ref twins, and the stories260K golden on each
# qemu is slow, so each CPU runs only the tests that exercise what differs there
# (the engine, server, soak and memory tests are architecture-independent C and
# stay on the host jobs), and the build makes only those tests and vt. VT_ARM_BUILD_DIR overrides the
# build folder, VT_TEST_JOBS_ARM the ctest parallelism.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${VT_ARM_BUILD_DIR:-build-arm}
jobs=${VT_TEST_JOBS_ARM:-$(nproc)}
sysroot=/usr/aarch64-linux-gnu

for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
  command -v "$tool" >/dev/null || { echo "test-arm: $tool not installed (scripts/setup.sh)"; exit 1; }
done

kernel_tests='^(test_kernels|test_quant|test_matmul|test_attention|test_deltanet)$'
model_tests='^(test_model|test_golden|test_tokenizer)$'
host_tests='^(test_base|test_gguf|test_sampler)$'

# build only what the steps below run: their tests (VT_TEST_FILTER) and the vt
# binary (the goldens run it), no other test and no bench/ program
mkdir -p "$build"
cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release \
  -DVT_BENCH=OFF -DVT_TEST_FILTER="$kernel_tests|$model_tests|$host_tests" \
  --no-warn-unused-cli >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j"$jobs" >/dev/null || { cmake --build "$build" -j1 2>&1 | tail -30; exit 1; }

# The steps run side by side (each is a few tests of unequal length: one after
# the other they left a core idle most of the time); each step's result is
# printed in order once all are done.
step() { # label, env assignments..., -- ctest regex
  local label=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  (
    t0=$SECONDS
    env "${envs[@]}" ctest --test-dir "$build" -j"$jobs" --output-on-failure -R "$1" >"$build/arm-$label.log" 2>&1
    echo "$? $((SECONDS - t0))" >"$build/arm-$label.rc"
  ) &
  labels+=("$label")
}

labels=()
rm -f "$build"/arm-*.rc
# 2. the best tier: i8mm (and dotprod) as detected from HWCAP
step max-kernels QEMU_CPU=max VT_EXPECT_ISA=neon_i8mm -- "$kernel_tests"
step max-models QEMU_CPU=max -- "$model_tests|$host_tests"
# 3. no dotprod: the plain NEON kernels must be chosen, and give the same goldens
step a53 QEMU_CPU=cortex-a53 VT_EXPECT_ISA=neon -- "^test_kernels$|$model_tests"
# 4. the caps force the lower tiers on a core that has everything
step cap-neon QEMU_CPU=max VT_ISA=neon VT_EXPECT_ISA=neon -- '^(test_kernels|test_golden)$'
step cap-neon_dot QEMU_CPU=max VT_ISA=neon_dot VT_EXPECT_ISA=neon_dot -- '^(test_kernels|test_golden)$'
wait

failed=0
for label in "${labels[@]}"; do
  { read -r rc secs <"$build/arm-$label.rc"; } 2>/dev/null || rc=1 secs=?
  if [ "$rc" = 0 ]; then
    echo "test-arm: $label ok ($secs s, side by side): $(grep -c ' Passed ' "$build/arm-$label.log") tests"
  else
    failed=$((failed + 1))
    echo "test-arm: $label FAILED ($secs s)"
    grep -E "FAIL|Failed|differs|\*\*\*" "$build/arm-$label.log" | head -40
  fi
done

[ "$failed" -eq 0 ] && echo "test-arm: all passed" || echo "test-arm: $failed step(s) failed"
[ "$failed" -eq 0 ]
