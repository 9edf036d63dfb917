#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: install the build dependencies (apt), build,
# and run the main job: train llama-baby (RMSNorm, RoPE, SwiGLU, Pre-Norm) on TinyShakespeare
# (data/tinyshakespeare.txt, character level, 2000 steps, about half a minute of training on 2 cores after the build) and print
# a sample.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
packages=(build-essential cmake pkg-config libdnnl-dev libopenblas-dev libopenblas-openmp-dev libcjson-dev libpcre2-dev zlib1g-dev)
missing=()
for p in "${packages[@]}"; do  # (only what is missing: a second run installs nothing)
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
out="runs/shakespeare-$(date +%Y%m%d-%H%M%S)"
./build/tinylm train --data data/tinyshakespeare.txt --preset llama-baby --out "$out" --sample 0
echo
echo "== a sample from $out (prompt \"ROMEO:\")"
./build/tinylm generate --model "$out" --prompt "ROMEO:" -n 300 --temperature 0.8
echo
echo "model in $out — try: build/tinylm generate --model $out --prompt 'JULIET:' -n 300 --temperature 0.8"
