#!/usr/bin/env bash
# GEMM variants alternated in one process: decode from memory, or with -k a few hundred
# KiB, the L2-resident tiles of prefill (gemm_ab.c says how it measures).
#
#   bench/gemm_ab/gemm_ab.sh [-i avx512|avx2] [-n N_TOK] [-k KIB] TYPE N_IN ROUNDS NAME=SOURCE[:CFLAGS] ...
#
# Each NAME=SOURCE is a GEMM source file (src/cpu/x86/gemm_avx512.c, or an older
# one: git show REV:src/cpu/x86/gemm_avx512.c > /tmp/old.c) compiled with CFLAGS
# (-DPF_DIST=8192: the prefetch distances are #ifndef-guarded for this).
# Every source compiles against this tree's headers: an older file whose
# helpers (cpu/pack_prefetch.h, ...) changed since measures the wrong thing.
# GEMM_AB_NO_CHECK=1 skips the bit check, for a variant that reads another
# layout of the same bytes (a probe of memory order; its outputs are garbage).
# Needs build/libvt.a (the release build). Example, two prefetch distances of
# this tree's AVX-512 kernels, rows of 8192, 31 rounds:
#   bench/gemm_ab/gemm_ab.sh q8_0 8192 31 6k=src/cpu/x86/gemm_avx512.c \
#       8k=src/cpu/x86/gemm_avx512.c:-DPF_DIST=8192
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
isa=avx512
n_tok=1 kib=262144
while [ "${1:-}" = -i ] || [ "${1:-}" = -n ] || [ "${1:-}" = -k ]; do
  case $1 in -i) isa=$2 ;; -n) n_tok=$2 ;; -k) kib=$2 ;; esac
  shift 2
done
[ $# -ge 4 ] || { sed -n 5,17p "$0"; exit 2; }
type=$1 n_in=$2 rounds=$3; shift 3
case $isa in
  avx512) isa_flags="-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni" ;;
  avx2) isa_flags="-mavx2 -mfma -mf16c" ;;
  *) echo "gemm_ab: -i avx512 or avx2" >&2; exit 2 ;;
esac
cflags="-I$root/include -I$root/src -O2 -std=gnu11 -D_GNU_SOURCE -fno-math-errno -ffp-contract=off -falign-loops=64"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
objs=() decls="" fns="" names="" i=0
for spec in "$@"; do
  name=${spec%%=*} rest=${spec#*=}
  src=${rest%%:*} extra=""
  [ "$rest" != "$src" ] && extra=${rest#*:}
  # shellcheck disable=SC2086
  cc $cflags $isa_flags $extra -c "$src" -o "$tmp/v$i.o"
  objcopy --redefine-sym "gemm_${type}_${isa}=gemm_ab_v$i" --keep-global-symbol="gemm_ab_v$i" "$tmp/v$i.o"
  objs+=("$tmp/v$i.o") decls+=" DECL(gemm_ab_v$i)" fns+=" gemm_ab_v$i," names+=" \"$name\","
  i=$((i + 1))
done
# shellcheck disable=SC2086
cc $cflags $isa_flags -DGEMM_AB_DECLS="$decls" -DGEMM_AB_FNS="$fns" -DGEMM_AB_NAMES="$names" \
  "$root/bench/gemm_ab/gemm_ab.c" "${objs[@]}" "$root/build/libvt.a" -lm -lpthread -ldl -o "$tmp/gemm_ab"
"$tmp/gemm_ab" "$type" "$n_in" "$rounds" "$n_tok" "$kib"
