#!/usr/bin/env bash
# vt and llama.cpp under oversubscription (issue 30, item 12): decode with one
# core taken by a busy loop, at -t = the usable cores and -t = 2 x cores, and the
# same thread counts on the unloaded machine for reference. Each row is vt bench's
# A/B protocol (../shared/BENCH.md): both engines, same file, same threads, in
# alternation, so the load falls on both alike.
#
#   bench/oversub.sh [-m MODEL] [-w WORKLOADS] [-r PAIRS] [--engine E] [--no-baseline] [--aa]
#
# MODEL defaults to the 1B Q4_K_M synth of bench/make-models.sh
# (/tmp/vt-bench-models/synth-1b-q4_k_m.gguf), WORKLOADS to tg128, PAIRS to 5;
# --engine vt skips llama.cpp (whose spinning threads can take minutes per run
# on a machine that is loaded already).
# The busy loop is pinned to the first usable CPU (taskset, when present) and is
# killed on exit. Publishable figures need an otherwise quiet machine; say in
# BENCHMARKS.md what else was running (the script prints the load average).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
vt=${VT:-$root/build/vt}
model=/tmp/vt-bench-models/synth-1b-q4_k_m.gguf
work=tg128 pairs=5 baseline=1 aa=--no-aa engine=both
while [ $# -gt 0 ]; do
  case $1 in
    -m) model=$2; shift 2 ;;
    -w) work=$2; shift 2 ;;
    -r) pairs=$2; shift 2 ;;
    --no-baseline) baseline=0; shift ;;
    --aa) aa=; shift ;;
    --engine) engine=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "oversub.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ -s "$model" ] || { echo "oversub.sh: no model at $model (bench/make-models.sh writes it)" >&2; exit 2; }
cores=$(nproc)            # CPUs this process may use (its affinity mask)
t_list="$cores,$((2 * cores))"
echo "# oversub: $(uname -m), $cores usable CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# model $model, workloads $work, threads $t_list, $pairs pairs"

if [ "$baseline" = 1 ]; then
  echo "## unloaded"
  "$vt" bench -m "$model" -w "$work" -t "$t_list" -r "$pairs" --engine "$engine" $aa
fi

busy_pid=
cleanup() { [ -n "$busy_pid" ] && kill "$busy_pid" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM
first_cpu=$(taskset -pc $$ 2>/dev/null | sed -n 's/.*: *\([0-9]*\).*/\1/p')
if command -v taskset >/dev/null && [ -n "$first_cpu" ]; then
  taskset -c "$first_cpu" bash -c 'while :; do :; done' & busy_pid=$!
  where="pinned to CPU $first_cpu"
else
  bash -c 'while :; do :; done' & busy_pid=$!
  where="unpinned (no taskset)"
fi
echo "## one core taken by a busy loop ($where, pid $busy_pid)"
"$vt" bench -m "$model" -w "$work" -t "$t_list" -r "$pairs" --engine "$engine" $aa
