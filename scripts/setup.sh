#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: install the build dependencies, build, and
# run the main job (`tinylm lesson 15` until training lands).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  build-essential cmake pkg-config libopenblas-dev libopenblas-openmp-dev libcjson-dev libpcre2-dev >/dev/null
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
./build/tinylm lesson 15
