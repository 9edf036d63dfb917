#!/usr/bin/env bash
# The whole test suite: a release build with every test, then the same suite built with
# AddressSanitizer + UndefinedBehaviorSanitizer (leaks included, via LeakSanitizer).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

echo "== release build + tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== ASan + UBSan build + tests"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTLM_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
# OpenBLAS keeps thread buffers for the life of the process; everything else must be leak-free
ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j"$jobs"
