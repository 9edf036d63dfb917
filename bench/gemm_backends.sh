#!/usr/bin/env bash
# gemm_backends.sh — OpenBLAS (Debian's OpenMP build, as installed) and oneDNN sgemm side by side
# on the engine's shapes (bench/gemm_backends.c), with the thread count a user gets by default
# and no OPENBLAS_* variables (this workplace sets some for old OpenBLAS builds: removed here so
# that OpenBLAS detects the CPU as it does for a user). Prints OpenBLAS's detected core too.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${TLM_BENCH_DIR:-/tmp/tinylm-bench}"
mkdir -p "$out"
arch=$(gcc -print-multiarch)
gcc -O2 -fopenmp bench/gemm_backends.c -o "$out/gemm_backends" -I"/usr/include/$arch/openblas-openmp" \
  -L"/usr/lib/$arch/openblas-openmp" -Wl,-rpath,"/usr/lib/$arch/openblas-openmp" -lopenblas -ldnnl
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
OPENBLAS_VERBOSE=2 "$out/gemm_backends" 2>"$out/openblas.err" | sed 's/^/  /'
echo "OpenBLAS's kernels for this CPU: $(grep -i -m1 'core' "$out/openblas.err" || echo 'not reported')"
echo "(GFLOP/s, best of 5 rounds; $(nproc) threads; tinylm info --system gives this machine's FMA peak)"
