#!/usr/bin/env bash
# probe_overhead.sh — what the model's after-pass hook and the probes attached to it cost.
#
#   bench/probe_overhead.sh [BUILD_ROOT] [ROUNDS] [ITERS]     (default build-bench 7 40)
#
# Builds bench/probe_bench.c. Then, in alternating rounds so that machine noise hits all
# alike, times model_forward (d 256, 6 layers, 128 tokens) in four setups:
#   off       no hook attached (m->after_pass == NULL): the normal case
#   noop      a hook attached that does nothing (the cost of the call itself)
#   empty     a probe attached that selects nothing
#   all       a probe recording every forward tensor ("*")
# and reports the median over rounds of each round's median ms per forward, each over off.
set -euo pipefail
cd "$(dirname "$0")/.."
root="${1:-build-bench}"
rounds="${2:-7}"
iters="${3:-40}"
jobs=2

build() { # dir extra-cflags
  cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="$2" >/dev/null
  cmake --build "$1" --target probe_bench -j"$jobs" >/dev/null
}
build "$root/hooks" ""

export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
declare -A all
for ((r = 0; r < rounds; r++)); do
  for setup in off noop empty all; do
    ms=$("$root/hooks/probe_bench" "$setup" "$iters" | sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p')
    all[$setup]+="$ms "
  done
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
echo "forward of d=256, 6 layers, 128 tokens; OMP_NUM_THREADS=$OMP_NUM_THREADS; median of $rounds rounds x $iters passes"
for setup in off noop empty all; do
  m=$(echo "${all[$setup]}" | median)
  printf "  %-8s %9.4f ms   (rounds: %s)\n" "$setup" "$m" "${all[$setup]}"
  declare "med_$setup=$m"
done
awk -v a="$med_off" -v b="$med_noop" -v c="$med_empty" -v d="$med_all" 'BEGIN {
  printf "  noop / off  = %.4f\n  empty / off = %.4f\n  all / off   = %.4f\n", b / a, c / a, d / a }'
