#!/usr/bin/python3
"""moe_vs_dense.py — a mixture-of-experts model's training step against the dense model of the
same *active* size: tokens/s (the median of the logged steps after the first few) and the loss
reached, on TinyShakespeare (character level).

    bench/moe_vs_dense.py --tinylm build/tinylm [--steps 60] [--experts 8] [--top-k 2]

Both models are Llama-like (RMSNorm, Pre-Norm, RoPE, SwiGLU; --d, --layers, 4 heads, T --seq,
batch --batch). The dense FFN has intermediate size k * fe; the MoE layers have E experts of fe =
--expert-size each, k of them per token, so a token runs the same FFN matrices' worth of products
in both (plus the MoE's router, E x d). The MoE also pays for routing, grouping the tokens by
expert and more, smaller GEMMs; its total parameters are E / k times the dense FFN's. The numbers
are this machine's: run it where nothing else runs (it prints the thread count)."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "tinyshakespeare.txt")


def train(tinylm, out, steps, common, sets):
    args = [tinylm, "train", "--data", DATA, "--out", out, "--steps", str(steps), "--sample", "0",
            "--eval-every", str(steps), "--log-every", str(steps)] + common
    for s in sets:
        args += ["--set", s]
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit("train failed: %s" % p.stderr.strip()[-400:])
    with open(os.path.join(out, "metrics.jsonl")) as f:
        m = [json.loads(line) for line in f]
    tps = [r["tokens_per_s"] for r in m[min(5, len(m) - 1):]]
    return statistics.median(tps), m[-1]["loss"], m[-1].get("val_loss")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tinylm", required=True)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--expert-size", type=int, default=256)
    a = ap.parse_args()
    common = ["--preset", "llama-baby", "--seq", str(a.seq), "--batch", str(a.batch),
              "--set", "hidden_size=%d" % a.d, "--set", "num_hidden_layers=%d" % a.layers,
              "--set", "num_attention_heads=4", "--set", "max_position_embeddings=%d" % a.seq]
    active = a.top_k * a.expert_size
    work = tempfile.mkdtemp(prefix="moe_bench_")
    try:
        rows = []
        for name, sets in (("dense, d_ff %d" % active, ["intermediate_size=%d" % active]),
                           ("MoE, %d experts of %d, top-%d" % (a.experts, a.expert_size, a.top_k),
                            ["num_experts=%d" % a.experts, "num_experts_per_tok=%d" % a.top_k,
                             "moe_intermediate_size=%d" % a.expert_size, "norm_topk_prob=true"])):
            tps, loss, val = train(a.tinylm, os.path.join(work, str(len(rows))), a.steps, common, sets)
            rows.append((name, tps, loss, val))
        print("threads: %s; %d steps of %d x %d tokens; d %d, %d layers" %
              (os.environ.get("OMP_NUM_THREADS", "all"), a.steps, a.batch, a.seq, a.d, a.layers))
        print("%-34s %12s %10s %10s" % ("model", "tokens/s", "loss", "val_loss"))
        for name, tps, loss, val in rows:
            print("%-34s %12.0f %10.4f %10s" % (name, tps, loss, "%.4f" % val if val is not None else "-"))
        print("MoE / dense tokens/s: %.2f" % (rows[1][1] / rows[0][1]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
