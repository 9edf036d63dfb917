#!/usr/bin/env bash
# The whole test suite: a release build with every test (GEMM backend oneDNN), the numerics
# tests again with the OpenBLAS backend, the same suite built with AddressSanitizer +
# UndefinedBehaviorSanitizer (leaks included, via LeakSanitizer), then the libFuzzer targets
# built with clang, each replaying its seed corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
# ctest runs $jobs tests at once and many of them use 2 OpenMP threads: with libgomp's default
# spinning, waiting threads burn the cores the other test needs (the ASan tests took 423 s so, 284 s
# with passive waiting on 2 cores). Tests only; the benchmarks run with the library defaults.
export OMP_WAIT_POLICY=passive

echo "== release build + tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== OpenBLAS backend (-DTLM_GEMM=openblas): the numerics tests"
# the same results within the parity tolerances whichever library does the GEMMs
cmake -S . -B build-openblas -DCMAKE_BUILD_TYPE=Release -DTLM_GEMM=openblas >/dev/null
cmake --build build-openblas -j"$jobs"
ctest --test-dir build-openblas --output-on-failure -j"$jobs" \
  -E "selftest" -R "parity|gradcheck|hf_families|kv_cache|inference|causal|batch_split|matvec|llama2c_reference|probes|lesson|python_api"

echo "== ASan + UBSan build + tests"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTLM_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
# (leak-free: LeakSanitizer reports any block still unreachable at exit)
ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j"$jobs"

echo "== fuzz targets (clang, libFuzzer + ASan + UBSan): build, replay every seed"
# Each fuzz/fuzz_*.c is built as in fuzz/README.md and run once over its generated seed
# corpus (fuzz/make_seeds.py) and the committed reproducers of crashes it once had
# (fuzz/regressions/<name>/): a parser change that crashes on any of them fails here.
if ! command -v clang >/dev/null; then
  echo "clang is needed for the fuzz targets (apt: clang libclang-rt-14-dev, as .ci/run installs)" >&2
  exit 1
fi
targets=$(cd fuzz && ls fuzz_*.c | sed 's/\.c$//')
CC=clang cmake -S . -B build-fuzz -DTLM_FUZZ=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
# shellcheck disable=SC2086
cmake --build build-fuzz -j"$jobs" --target $targets
rm -rf build-fuzz/seeds
python3 fuzz/make_seeds.py build-fuzz/seeds
for t in $targets; do
  name=${t#fuzz_}
  dirs=("build-fuzz/seeds/$name")
  [ -d "fuzz/regressions/$name" ] && dirs+=("fuzz/regressions/$name")
  n=$(find "${dirs[@]}" -type f | wc -l)
  if [ "$n" -eq 0 ]; then echo "$t: no seeds" >&2; exit 1; fi
  if ! "build-fuzz/$t" -runs=0 "${dirs[@]}" >"build-fuzz/$t.replay.log" 2>&1; then
    tail -40 "build-fuzz/$t.replay.log" >&2
    echo "$t: crashed replaying its seeds (log: build-fuzz/$t.replay.log)" >&2
    exit 1
  fi
  echo "$t: $n seeds replayed, no crash"
done
