#!/usr/bin/env bash
# The test suite, with what it needs set up first on Debian 12 (apt and npm; only what is missing).
#
#   ./scripts/test.sh            the whole suite: a release build with every test (GEMM backend
#                                oneDNN), the numerics tests again with the OpenBLAS backend, the
#                                suite built with AddressSanitizer + UndefinedBehaviorSanitizer
#                                (leaks included, via LeakSanitizer), then the libFuzzer targets
#                                built with clang, each replaying its seed corpus
#   ./scripts/test.sh --quick    the release build and its tests not labelled `slow` (what to run
#                                after each change: no sanitizer build, no OpenBLAS repeat, no long
#                                end-to-end runs)
#   --no-setup                   skip the set-up (no apt, no npm)
#
# The tiers are ctest labels (tests/tests.cmake): a test is in the quick tier unless it is labelled
# `slow`.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
setup=1
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --no-setup) setup=0 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scripts/test.sh: unknown option $arg (--quick, --no-setup)" >&2; exit 2 ;;
  esac
done
jobs=$(nproc)

# ---- set-up ---------------------------------------------------------------------------------------
# The Debian packages the build and the tests use (clang for the fuzz targets, valgrind, Chromium and
# Node.js for the HTML pages, PyTorch and NumPy as the oracle, nbclient for the notebooks, ...).
apt_packages=(build-essential cmake pkg-config clang libclang-rt-14-dev
  libdnnl-dev libopenmpi-dev openmpi-bin libopenblas-dev libopenblas-openmp-dev libcjson-dev libpcre2-dev zlib1g-dev
  python3 python3-numpy python3-torch librsvg2-bin valgrind chromium
  python3-venv python3-pip python3-setuptools python3-wheel python3-build
  python3-nbclient python3-ipykernel)

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else echo "scripts/test.sh: installing packages needs root or sudo: $*" >&2; return 1
  fi
}

set_up() {
  if ! command -v dpkg-query >/dev/null; then
    echo "== set-up skipped: no dpkg/apt here (the packages are Debian 12's: ${apt_packages[*]})" >&2
    return 0
  fi
  local missing=() p
  for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # Node.js + npm for the browser tests: Debian's only where none is on PATH already
  command -v npm >/dev/null || missing+=(nodejs npm)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "== set-up: apt-get install ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  # npm packages: puppeteer-core (tests/browser); node-llama-cpp, llama.cpp as the oracle of the GGUF
  # export (tests/llamacpp: its prebuilt CPU build, the optional GPU builds left out, no install scripts
  # run, tests/llamacpp/.npmrc; it needs Node.js >= 20: with Debian 12's nodejs 18 npm only warns
  # (EBADENGINE) and test_llamacpp skips). `npm ci` again only when package-lock.json changed.
  local dir extra
  for dir in tests/browser tests/llamacpp; do
    [ -L "$dir/node_modules" ] && continue  # (a link to another checkout's packages: left as it is)
    if [ -d "$dir/node_modules" ] && cmp -s "$dir/package-lock.json" "$dir/node_modules/.tinylm-installed-lock"; then
      continue
    fi
    extra=()
    [ "$dir" = tests/llamacpp ] && extra=(--omit=optional)
    echo "== set-up: npm ci --prefix $dir"
    npm ci --prefix "$dir" "${extra[@]}" --no-audit --no-fund
    cp "$dir/package-lock.json" "$dir/node_modules/.tinylm-installed-lock"
  done
}

[ "$setup" = 1 ] && set_up

# ctest runs $jobs tests at once and many of them use 2 OpenMP threads: with libgomp's default
# spinning, waiting threads burn the cores the other test needs (the ASan tests took 423 s so, 284 s
# with passive waiting on 2 cores). Tests only; the benchmarks run with the library defaults.
export OMP_WAIT_POLICY=passive
# ccache where it is installed: a rebuild after a change compiles only what changed
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache)

echo "== release build + tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build build -j"$jobs"
if [ "$quick" = 1 ]; then
  ctest --test-dir build --output-on-failure -j"$jobs" -LE slow
  echo "== quick tier passed (the whole suite: ./scripts/test.sh)"
  exit 0
fi
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== OpenBLAS backend (-DTLM_GEMM=openblas): the numerics tests"
# the same results within the parity tolerances whichever library does the GEMMs (natively: the
# TLM_ISA=avx2/scalar repeats cap tinylm's own kernels, not the GEMM library's, and ran above)
openblas_tests=(-E "selftest|_avx2$|_scalar$"
  -R "parity|gradcheck|hf_families|kv_cache|inference|causal|batch_split|matvec|llama2c_reference|probes|lesson|python_api")
# only the programs these tests run (scripts/test_targets.py, from CMake's file API): not the other
# tests' executables and tools; everything where the listing fails
mkdir -p build-openblas/.cmake/api/v1/query && touch build-openblas/.cmake/api/v1/query/codemodel-v2
cmake -S . -B build-openblas -DCMAKE_BUILD_TYPE=Release -DTLM_GEMM=openblas "${launcher[@]}" >/dev/null
if openblas_targets=$(ctest --test-dir build-openblas --show-only=json-v1 "${openblas_tests[@]}" |
                      python3 scripts/test_targets.py build-openblas) && [ -n "$openblas_targets" ]; then
  # shellcheck disable=SC2086
  cmake --build build-openblas -j"$jobs" --target $openblas_targets
else
  cmake --build build-openblas -j"$jobs"
fi
ctest --test-dir build-openblas --output-on-failure -j"$jobs" "${openblas_tests[@]}"

echo "== ASan + UBSan build + tests"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTLM_SANITIZE=ON "${launcher[@]}" >/dev/null
cmake --build build-asan -j"$jobs"
# (leak-free: LeakSanitizer reports any block still unreachable at exit)
ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j"$jobs"

echo "== fuzz targets (clang, libFuzzer + ASan + UBSan): build, replay every seed"
# Each fuzz/fuzz_*.c is built as in fuzz/README.md and run once over its generated seed
# corpus (fuzz/make_seeds.py) and the committed reproducers of crashes it once had
# (fuzz/regressions/<name>/): a parser change that crashes on any of them fails here.
if ! command -v clang >/dev/null; then
  echo "clang is needed for the fuzz targets (apt: clang libclang-rt-14-dev; the set-up installs them)" >&2
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
