#!/usr/bin/env bash
# decode_vs_llama2c.sh — tokens per second of `tinylm generate` against llama2.c's run.c on the
# same llama2.c-format checkpoints (random weights of the stories15M and stories110M shapes),
# greedy, the same prompt and the same number of tokens, measured in the same run.
#
#   bench/decode_vs_llama2c.sh [ROUNDS]          (default 3; the median of the rounds is reported)
#
# run.c is built from ../shared/peers/llama2c/run.c (MIT, karpathy/llama2.c; override with
# LLAMA2C_RUN_C) as its Makefile's `runomp` target does, OUTSIDE the repository, into
# ${TLM_BENCH_DIR:-/tmp/tinylm-bench}, with the checkpoints (bench/make_llama2c_checkpoint.py).
# Both programs run with their default thread count (OpenMP: all cores); variables this
# workplace sets for old OpenBLAS builds are removed so both run as a user would run them.
# run.c's "achieved tok/s" counts every position after the first (its prompt is fed one token
# at a time, at decode speed) and times, like tinylm's decode rate (tokens after the first),
# the whole step: sampling, printing and the forward pass.
# Also printed: whether the greedy texts are identical (f32; bf16 weights change the numbers,
# so their text is compared with tinylm's own f32 text only for the length), peak RSS, and the
# share of the measured DRAM read bandwidth (`tinylm info --system`'s probe, run before every
# round because the host's bandwidth moves from one minute to the next; their median) the
# weights stream takes (bytes of weights read
# per token, as generate reports it, x tokens/s; above 100% part of the weights stayed in
# the caches between tokens), for tinylm and for run.c (which reads the f32 weights): when
# both are near 100%, the f32 ratio is bounded by the bandwidth both share, not by either.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
dir="${TLM_BENCH_DIR:-/tmp/tinylm-bench}"
run_c="${LLAMA2C_RUN_C:-../shared/peers/llama2c/run.c}"
tok="tests/data/tokenizers/llama2/tokenizer.bin"
tinylm="${TINYLM:-build/tinylm}"
prompt="Once upon a time"
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
mkdir -p "$dir"
[ -x "$tinylm" ] || { echo "build tinylm first (cmake -S . -B build && cmake --build build)" >&2; exit 1; }
[ -f "$run_c" ] || { echo "llama2.c run.c not found at $run_c (set LLAMA2C_RUN_C)" >&2; exit 1; }
gcc -Ofast -march=native -fopenmp -o "$dir/runomp" "$run_c" -lm
for shape in stories15M stories110M; do
  [ -f "$dir/$shape.bin" ] || /usr/bin/python3 bench/make_llama2c_checkpoint.py --shape "$shape" --out "$dir/$shape.bin"
done
n_prompt=$("$tinylm" tokenize --tokenizer "$tok" --text "$prompt" --bos | wc -w)
steps=256                       # run.c -n: positions, BOS and prompt included
n_new=$((steps - n_prompt + 1)) # tinylm -n: new tokens (run.c never feeds its last token back)

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
probe_bw() { "$tinylm" info --system | sed -n 's/^measured DRAM read bandwidth: \([0-9.]*\).*/\1/p'; }
echo "machine: $("$tinylm" info --system | sed -n 's/^cpu: //p'), $(nproc) cores"
printf '%-12s %-6s %10s %10s %7s %9s %9s %11s %s\n' shape dtype "run.c" tinylm ratio "RSS MiB" "% of BW" "run.c % BW" "text"
for shape in stories15M stories110M; do
  ckpt="$dir/$shape.bin"
  declare -A rate=()
  bws=""
  for ((r = 0; r < rounds; r++)); do
    bws+="$(probe_bw) " # the host's bandwidth moves: probed every round, the median used below
    rate[runc]+="$("$dir/runomp" "$ckpt" -z "$tok" -t 0 -n $steps -i "$prompt" 2>&1 >"$dir/$shape.runc.txt" |
      sed -n 's/achieved tok\/s: //p') "
    for dt in f32 bf16; do
      /usr/bin/time -f "%M" -o "$dir/$shape.$dt.rss" "$tinylm" generate --model "$ckpt" --tokenizer "$tok" \
        --prompt "$prompt" -n $n_new --temperature 0 --dtype $dt >"$dir/$shape.$dt.txt" 2>"$dir/$shape.$dt.err"
      rate[$dt]+="$(sed -n 's/.* (\([0-9.]*\) tok\/s); [0-9]* threads.*/\1/p' "$dir/$shape.$dt.err") "
    done
  done
  runc=$(echo "${rate[runc]}" | tr ' ' '\n' | grep . | median)
  bw=$(echo "$bws" | tr ' ' '\n' | grep . | median)
  echo "  ($shape: DRAM read bandwidth probed before each round: ${bws% }GB/s; median $bw)"
  for dt in f32 bf16; do
    t=$(echo "${rate[$dt]}" | tr ' ' '\n' | grep . | median)
    mib=$(sed -n 's/.*, \([0-9.]*\) MiB read per token.*/\1/p' "$dir/$shape.$dt.err")
    rss=$(($(cat "$dir/$shape.$dt.rss") / 1024))
    if [ $dt = f32 ]; then
      if cmp -s "$dir/$shape.runc.txt" "$dir/$shape.$dt.txt"; then same="identical to run.c"; else same="DIFFERS from run.c"; fi
    else
      same="$(wc -c <"$dir/$shape.$dt.txt") bytes (f32: $(wc -c <"$dir/$shape.f32.txt"))"
    fi
    [ $dt = f32 ] && mib_f32=$mib # run.c reads the f32 weights whatever tinylm keeps
    awk -v s=$shape -v d=$dt -v a="$runc" -v b="$t" -v rss=$rss -v mib="$mib" -v mf="$mib_f32" -v bw="$bw" -v txt="$same" 'BEGIN {
      printf "%-12s %-6s %10.1f %10.1f %6.2fx %9d %8.0f%% %10.0f%% %s\n", s, d, a, b, b / a, rss, 100 * mib * 1.048576e6 * b / (bw * 1e9),
        100 * mf * 1.048576e6 * a / (bw * 1e9), txt }'
  done
  unset rate
done
# memory: a ~2048-token prompt on the 110M shape (context 4096 so that it fits), 16 new tokens
ckpt="$dir/stories110M-ctx4096.bin"
[ -f "$ckpt" ] || /usr/bin/python3 bench/make_llama2c_checkpoint.py --shape stories110M --seq 4096 --out "$ckpt"
head -c 8400 data/tinyshakespeare.txt >"$dir/prompt2048.txt"
for dt in f32 bf16; do
  /usr/bin/time -f "%M" -o "$dir/mem.$dt.rss" "$tinylm" generate --model "$ckpt" --tokenizer "$tok" \
    --prompt-file "$dir/prompt2048.txt" -n 16 --temperature 0 --dtype $dt >/dev/null 2>"$dir/mem.$dt.err"
  n=$(sed -n 's/.*prompt \([0-9]*\) tokens.*/\1/p' "$dir/mem.$dt.err")
  pf=$(sed -n 's/.*tokens in [0-9.]* ms (\([0-9.]*\) tok\/s).*/\1/p' "$dir/mem.$dt.err")
  mib=$(sed -n 's/.*(\([0-9.]*\) MiB of.*/\1/p' "$dir/mem.$dt.err")
  awk -v dt=$dt -v n="$n" -v pf="$pf" -v w="$mib" -v rss=$(($(cat "$dir/mem.$dt.rss") / 1024)) 'BEGIN {
    kv = 12 * 2 * (n + 16) * 768 * 4 / 1048576
    printf "110M shape, %s, %d-token prompt (prefill %.0f tok/s): peak RSS %d MiB = weights %.0f + KV cache %.0f + %.0f MiB\n",
      dt, n, pf, rss, w, kv, rss - w - kv }'
done
echo "(tok/s: median of $rounds rounds; run.c built with -Ofast -march=native -fopenmp; tinylm $("$tinylm" info --system | sed -n 's/^GEMM backend: //p'), $("$tinylm" info --system | sed -n 's/^kernels: \([^ ]*\).*/\1/p') kernels)"
