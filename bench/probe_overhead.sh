#!/usr/bin/env bash
# probe_overhead.sh — what the probe hooks cost when nothing is recorded.
#
#   bench/probe_overhead.sh [BUILD_ROOT] [ROUNDS] [ITERS]     (default build-bench 7 40)
#
# Builds bench/probe_bench.c twice: with the hooks (the normal build) and with
# -DTLM_NO_PROBE_HOOKS (model.c without them). Then, in alternating rounds so that machine
# noise hits both alike, times model_forward (d 256, 6 layers, 128 tokens) in four setups:
#   nohooks   the hooks compiled out
#   off       hooks compiled in, no probe attached (m->probe == NULL): the normal case
#   empty     a probe attached that selects nothing
#   all       a probe recording every forward tensor ("*")
# and reports the median over rounds of each round's median ms per forward, and off/nohooks.
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
build "$root/nohooks" "-DTLM_NO_PROBE_HOOKS"

export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
declare -A all
for ((r = 0; r < rounds; r++)); do
  for setup in nohooks off empty all; do
    bin="$root/hooks/probe_bench"; mode="$setup"
    if [[ $setup == nohooks ]]; then bin="$root/nohooks/probe_bench"; mode=off; fi
    ms=$("$bin" "$mode" "$iters" | sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p')
    all[$setup]+="$ms "
  done
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
echo "forward of d=256, 6 layers, 128 tokens; OMP_NUM_THREADS=$OMP_NUM_THREADS; median of $rounds rounds x $iters passes"
for setup in nohooks off empty all; do
  m=$(echo "${all[$setup]}" | median)
  printf "  %-8s %9.4f ms   (rounds: %s)\n" "$setup" "$m" "${all[$setup]}"
  declare "med_$setup=$m"
done
awk -v a="$med_off" -v b="$med_nohooks" -v c="$med_empty" -v d="$med_all" 'BEGIN {
  printf "  off / nohooks   = %.4f\n  empty / nohooks = %.4f\n  all / nohooks   = %.4f\n", a / b, c / b, d / b }'
