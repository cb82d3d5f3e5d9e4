#!/usr/bin/env bash
# The AMX prefill GEMMs (src/cpu/x86/gemm_amx.c) on a CPU without AMX: the file is
# compiled with its tile instructions replaced by a software model (emu_amx.h:
# ldtilecfg, tile loads and stores, tdpb[su][su]d as their definitions state them)
# and every kernel is run against its _ref twin on 480 cases (1..32 tokens, rows of
# 1..16 blocks, partial row groups); any byte of difference fails. Needs AVX-512
# (BW, VL, VNNI) for the kernels' non-tile parts, and build/libvt.a. On 2026-12-05
# (Zen 5 VM, no AMX) all five kernels, Q6_K after the 9dabfb4 layout change
# included, were bit-identical with their twins; a one-index change of the Q6_K
# widen made all 480 Q6_K cases differ. MXFP4's (added 2026-12-05): 480 of 480
# bit-identical; its scales read one byte off made all 480 differ. Not part of CI: it proves the kernels'
# arithmetic and layout reading, not AMX timing or the real tile unit.
#
#   bench/amx_emu/run.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
[ -f "$root/build/libvt.a" ] || { echo "amx_emu: build/libvt.a missing (cmake --build build)"; exit 1; }
# ldtilecfg / sttilecfg are inline asm in gemm_amx.c: route them to the model
sed -e 's/__asm__ __volatile__("ldtilecfg %0" : : "m"(\([a-z*]*\)));/emu_ldtilecfg(\&(\1));/' \
    -e 's/__asm__ __volatile__("sttilecfg %0" : "=m"(\*saved));/emu_sttilecfg(saved);/' \
    "$root/src/cpu/x86/gemm_amx.c" >"$out/gemm_amx_emu.c"
if grep -q '__asm__' "$out/gemm_amx_emu.c"; then echo "amx_emu: gemm_amx.c has asm the model does not replace"; exit 1; fi
flags="-O2 -std=c11 -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mamx-tile -mamx-int8"
flags="$flags -I$root/src -I$root/include"
rename=""
for t in q4_0 q8_0 q4_K q5_K q6_K mxfp4; do rename="$rename -Dgemm_${t}_amx=emu_gemm_${t}_amx"; done
gcc $flags $rename -include "$root/bench/amx_emu/emu_amx.h" -c "$out/gemm_amx_emu.c" -o "$out/k.o"
gcc $flags -c "$root/bench/amx_emu/main.c" -o "$out/main.o"
gcc "$out/main.o" "$out/k.o" "$root/build/libvt.a" -lm -lpthread -o "$out/amx_emu"
"$out/amx_emu"
