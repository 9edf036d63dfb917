#!/usr/bin/python3
"""mpi_scaling.py — data-parallel training on this machine: step time and tokens/s for N = 1, 2
and 4 ranks (4 oversubscribed on 2 cores), the share of the step spent in the gradient
all-reduce (from `train --profile`), and a projection of the all-reduce time for N machines on
10 / 25 / 100 Gb/s networks against the compute time of a step.

    bench/mpi_scaling.py --tinylm build/tinylm [--steps 30]

The model is the small GPT-2 of bench/train_vs_pytorch.py (6 layers, d 384, 6 heads, T 256,
global batch 8, byte vocabulary, biases). The projection: a ring all-reduce sends and receives
2 (N-1)/N of the gradient bytes per rank per step; GPT-2 124M's compute time per step is its
model FLOPs (same formula as --profile) at the model FLOPs rate measured here for the small
model, per machine of this kind. Variables this workplace sets for old OpenBLAS builds are
removed (tinylm does not use OpenBLAS by default; nothing else is set)."""
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
ENV = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS")}
ENV.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
SMALL = ["--preset", "nanogpt-baby", "--tokenizer", "bytes", "--batch", "8", "--seq", "256",
         "--set", "hidden_size=384", "--set", "num_hidden_layers=6", "--set", "num_attention_heads=6",
         "--set", "intermediate_size=1536", "--set", "max_position_embeddings=256", "--set", "norm_bias=true",
         "--set", "attention_bias=true", "--set", "mlp_bias=true"]


def flops_per_token(L, d, ff, V, T, tied=True):
    per_layer = 4 * d * d + 2 * d * ff  # q, k, v, o and the two MLP matrices
    return 6 * (L * per_layer + V * d) + 12 * L * T * d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tinylm", required=True)
    ap.add_argument("--steps", type=int, default=30)
    a = ap.parse_args()
    tl = os.path.abspath(a.tinylm)
    rows = []
    for n in (1, 2, 4):
        out = tempfile.mkdtemp(prefix="tlm_mpi_")
        try:
            p = subprocess.run(["mpirun", "-np", str(n), "--bind-to", "none", tl, "train", "--data", DATA, "--out",
                                os.path.join(out, "run"), "--steps", str(a.steps), "--eval-every", str(10 * a.steps),
                                "--save-every", str(10 * a.steps), "--sample", "0", "--profile"] + SMALL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, check=True)
            err = p.stderr.decode()
            ms = 1000 * statistics.median(8 * 256 / json.loads(l)["tokens_per_s"]
                                          for l in open(os.path.join(out, "run", "metrics.jsonl")).readlines()[5:])
            share = re.search(r"allreduce_gradients\s+[\d.]+\s+([\d.]+)%", err)
            threads = re.search(r"(\d+) ranks x (\d+) threads", err)
            rows.append((n, ms, 8 * 256 / ms * 1000, float(share.group(1)) if share else 0.0,
                         int(threads.group(2)) if threads else None))
        finally:
            shutil.rmtree(out, ignore_errors=True)
    print("small GPT-2 (10.8M parameters), global batch 8 x 256, on this 2-core machine:")
    print("%5s %8s %12s %10s %16s" % ("ranks", "threads", "ms/step", "tok/s", "all-reduce share"))
    for n, ms, tok, share, thr in rows:
        print("%5d %8s %12.1f %10.0f %15.1f%%" % (n, thr or "all", ms, tok, share))
    # projection: N machines, each like this one, the gradient all-reduce over the network
    small_params, big_params = 10_844_160, 124_439_808
    t1 = rows[0][1] / 1000
    rate = flops_per_token(6, 384, 1536, 256, 256) * 8 * 256 / t1  # model FLOP/s measured here
    print("\nprojection, per step: ring all-reduce of the fp32 gradients (2 (N-1)/N x bytes per rank) vs compute")
    print("(compute: the model FLOPs of one step at %.0f GFLOP/s, the rate measured above with 1 rank)" % (rate / 1e9))
    for name, params, tokens, fpt in (("small GPT-2, batch 8 x 256 per machine", small_params, 8 * 256,
                                       flops_per_token(6, 384, 1536, 256, 256)),
                                      ("GPT-2 124M, batch 8 x 1024 per machine", big_params, 8 * 1024,
                                       flops_per_token(12, 768, 3072, 50257, 1024))):
        compute = fpt * tokens / rate
        print("  %s: %.1f MB of gradients, compute %.2f s per step" % (name, params * 4 / 1e6, compute))
        for n in (2, 8, 32):
            b = 2 * (n - 1) / n * params * 4
            cells = ["%d Gb/s: %.3f s (%.0f%% of compute)" % (g, b * 8 / (g * 1e9), 100 * b * 8 / (g * 1e9) / compute)
                     for g in (10, 25, 100)]
            print("    N = %2d: %.0f MB per rank; " % (n, b / 1e6) + "; ".join(cells))


if __name__ == "__main__":
    main()
