#!/usr/bin/python3
"""mla_decode.py — decoding speed of multi-head latent attention (MLA) in its absorbed form, in its
expanded form, and of a GQA model whose KV cache takes the same bytes per token, in one run.

    bench/mla_decode.py --tinylm build/tinylm [--tokens 1000] [--rounds 3] [--threads 1]

Three character-level models on TinyShakespeare (trained one step each: the weights do not change
the time of a step), d_model 512, 8 heads, 4 layers, SwiGLU 1408:
  - MLA: q_lora_rank 192, kv_lora_rank 128, q.k over 64 nope + 32 rope dims, v 64: each layer caches
    c_kv + k_pe = 160 floats a token;
  - GQA: 1 kv head of head_dim 80 (multi-query): K + V = 160 floats a token and layer, the same bytes;
  - the MLA model decoded in the absorbed form (W_UK folded into the query, W_UV after the weighted sum
    of c_kv: the heads' keys and values are never formed) and in the expanded form (every cached
    position's k_nope and v made again from c_kv at each step).
Each round generates --tokens tokens from a short prompt with each, in turn; the figure is the median
of the rounds' ms per token after the first (tinylm generate's timing). The numbers are this
machine's: the script prints the thread count and the load average before and after."""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "tinyshakespeare.txt")

COMMON = {"model_type": "tinylm", "vocab_size": 65, "hidden_size": 512, "num_hidden_layers": 4,
          "num_attention_heads": 8, "intermediate_size": 1408, "max_position_embeddings": 2048}
MODELS = {
    "mla": dict(COMMON, q_lora_rank=192, kv_lora_rank=128, qk_nope_head_dim=64, qk_rope_head_dim=32,
                v_head_dim=64),
    "gqa": dict(COMMON, num_key_value_heads=1, head_dim=80),
}


def run(args, env):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=3600)
    if p.returncode:
        raise SystemExit("failed: %s\n%s" % (" ".join(args), p.stderr.decode()[-2000:]))
    return p.stdout.decode(), p.stderr.decode()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tinylm", required=True)
    ap.add_argument("--tokens", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    work = tempfile.mkdtemp(prefix="mla_decode_")
    try:
        dirs, per_token = {}, {}
        for name, cfg in MODELS.items():
            path = os.path.join(work, name + ".json")
            with open(path, "w") as f:
                json.dump(cfg, f)
            out = os.path.join(work, name)
            run([a.tinylm, "train", "--data", DATA, "--config", path, "--out", out, "--steps", "1", "--sample", "0",
                 "--batch", "1", "--seq", "64"], env)
            dirs[name] = out
            info, _ = run([a.tinylm, "info", "--config", path, "--context", "1"], env)
            m = re.search(r"KV cache, 1 positions\s+(\d+) bytes", info)
            per_token[name] = int(m.group(1)) if m else None
        runs = [("mla absorbed", "mla", ["--mla-decode", "absorbed"]),
                ("mla expanded", "mla", ["--mla-decode", "expanded"]),
                ("gqa (same cache bytes)", "gqa", [])]
        times = {label: [] for label, _, _ in runs}
        print("threads %d, %d tokens a generation, %d rounds; load average before: %s" %
              (a.threads, a.tokens, a.rounds, open("/proc/loadavg").read().split()[:3]))
        for r in range(a.rounds):
            for label, name, extra in runs:
                _, err = run([a.tinylm, "generate", "--model", dirs[name], "--prompt", "ROMEO:", "-n", str(a.tokens),
                              "--temperature", "0"] + extra, env)
                m = re.search(r"generated (\d+) tokens, ([0-9.]+) ms per token", err)
                if not m or int(m.group(1)) != a.tokens:
                    raise SystemExit("%s: no timing (or stopped early) in:\n%s" % (label, err))
                times[label].append(float(m.group(2)))
        print("load average after: %s" % open("/proc/loadavg").read().split()[:3])
        print("%-24s %14s %12s %10s   rounds (ms/token)" % ("model", "cache B/token", "ms/token", "tok/s"))
        base = statistics.median(times["mla absorbed"])
        for label, name, _ in runs:
            med = statistics.median(times[label])
            print("%-24s %14s %12.3f %10.1f   %s  (%.2fx absorbed's time)" %
                  (label, per_token[name], med, 1000.0 / med, " ".join("%.3f" % t for t in times[label]), med / base))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
