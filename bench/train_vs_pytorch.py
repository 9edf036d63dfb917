#!/usr/bin/python3
"""train_vs_pytorch.py — ms per training step of tinylm vs PyTorch eager, same model, same
optimizer, same batch, same thread count, measured in the same run, for two models:

  nanogpt-baby  nanoGPT's CPU Shakespeare model: 4 layers, 4 heads, d 128, T 64, batch 12,
                character vocabulary, LayerNorm without bias, no linear biases
  gpt2-small    a small GPT-2: 6 layers, 6 heads, d 384, T 256, batch 8, byte vocabulary (256),
                LayerNorm and linear biases

Both: Pre-Norm, tanh-GELU MLP (4d), learned positions, tied head, no dropout, AdamW (weight
decay on matrices only, as tinylm), global-norm clipping 1.0, TinyShakespeare.

    bench/train_vs_pytorch.py --tinylm build/tinylm [--model nanogpt-baby|gpt2-small|all]
                              [--threads 2] [--steps N] [--rounds 3]

Each side reports the median step time over steps 10..N (N: 60 for nanogpt-baby, 30 for
gpt2-small). A round times tinylm, then PyTorch as installed, then PyTorch with a
single-threaded BLAS (below), one after the other; the rounds repeat that, so that each
round's ratio compares runs minutes apart at most, and the figure is the median of the rounds'
ratios (a shared VM's speed drifts by up to 2x over minutes: docs/performance.md). The timed
tinylm runs have no --profile; one more run with it gives the model FLOPs utilisation (model
FLOPs per step against the FMA peak measured on this machine at its end) and the GEMMs'
share.

Debian's torch calls the system OpenBLAS (pthread build), whose own threads fight torch's
OpenMP threads on a 2-core machine: torch at 2 threads is then slower than at 1. So PyTorch is
measured twice, as installed and with OPENBLAS_NUM_THREADS=1 (its BLAS single-threaded, its
own ops on N threads), and tinylm is compared with the faster of the two. Variables this
workplace sets for old OpenBLAS builds (OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE) are removed, so
every program runs as a user would run it."""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "tinyshakespeare.txt")

MODELS = {
    # d, layers, heads, T, batch, vocab ("chars" or "bytes"), biases (LayerNorm and linear), and the
    # speed-up over PyTorch the project aims at (issue 8)
    "nanogpt-baby": dict(d=128, layers=4, heads=4, T=64, batch=12, vocab="chars", bias=False, target=3, steps=60),
    "gpt2-small": dict(d=384, layers=6, heads=6, T=256, batch=8, vocab="bytes", bias=True, target=2, steps=30),
}
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}


def layernorm(d, bias):
    # torch 1.13's LayerNorm has no bias switch: without one, a bias frozen at zero
    ln = nn.LayerNorm(d)
    if not bias:
        ln.bias.requires_grad_(False)
    return ln


class Block(nn.Module):
    def __init__(self, d, h, bias):
        super().__init__()
        self.h = h
        self.ln1 = layernorm(d, bias)
        self.ln2 = layernorm(d, bias)
        self.qkv = nn.Linear(d, 3 * d, bias=bias)
        self.o = nn.Linear(d, d, bias=bias)
        self.up = nn.Linear(d, 4 * d, bias=bias)
        self.down = nn.Linear(4 * d, d, bias=bias)

    def attn(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.h, C // self.h).transpose(1, 2)
        k = k.view(B, T, self.h, C // self.h).transpose(1, 2)
        v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        return self.o((att @ v).transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, d, layers, heads, T, bias):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(T, d)
        self.blocks = nn.ModuleList(Block(d, heads, bias) for _ in range(layers))
        self.lnf = layernorm(d, bias)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def pytorch_ms_per_step(threads, steps, name):
    cfg = MODELS[name]
    T, batch = cfg["T"], cfg["batch"]
    torch.set_num_threads(threads)
    torch.manual_seed(1337)
    raw = open(DATA, "rb").read()
    if cfg["vocab"] == "bytes":
        vocab, data = 256, torch.tensor(list(raw[:400000]), dtype=torch.long)
    else:
        text = raw.decode()
        chars = sorted(set(text))
        vocab, data = len(chars), torch.tensor([chars.index(c) for c in text[:200000]], dtype=torch.long)
    model = GPT(vocab, cfg["d"], cfg["layers"], cfg["heads"], T, cfg["bias"])
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    decay = [p for n, p in params if p.dim() >= 2 and "wte" not in n and "wpe" not in n]
    no_decay = [p for n, p in params if not (p.dim() >= 2 and "wte" not in n and "wpe" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99), eps=1e-8)
    times = []
    for step in range(steps):
        ix = torch.randint(len(data) - T - 1, (batch,))
        x = torch.stack([data[i:i + T] for i in ix])
        y = torch.stack([data[i + 1:i + T + 1] for i in ix])
        t0 = time.perf_counter()
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times[10:])


def tinylm_args(name):
    cfg = MODELS[name]
    b = "true" if cfg["bias"] else "false"
    sets = {"hidden_size": cfg["d"], "num_hidden_layers": cfg["layers"], "num_attention_heads": cfg["heads"],
            "intermediate_size": 4 * cfg["d"], "max_position_embeddings": cfg["T"], "norm_bias": b,
            "attention_bias": b, "attention_out_bias": b, "mlp_bias": b}
    args = ["--preset", "nanogpt-baby", "--tokenizer", cfg["vocab"], "--batch", str(cfg["batch"]), "--seq", str(cfg["T"])]
    for k, v in sets.items():
        args += ["--set", "%s=%s" % (k, v)]
    return args


def tinylm_run(tinylm, threads, steps, name, profile):
    """median ms/step from metrics.jsonl, and the --profile report (stderr) when profiling"""
    cfg = MODELS[name]
    out = tempfile.mkdtemp(prefix="tlm_bench_")
    try:
        env = dict(CLEAN_ENV, OMP_NUM_THREADS=str(threads))
        p = subprocess.run([tinylm, "train", "--data", DATA, "--out", os.path.join(out, "run"), "--steps", str(steps),
                            "--eval-every", str(10 * steps), "--save-every", str(10 * steps), "--sample", "0"]
                           + (["--profile"] if profile else []) + tinylm_args(name),
                           check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        rows = [json.loads(l) for l in open(os.path.join(out, "run", "metrics.jsonl"))]
        tokens = cfg["batch"] * cfg["T"]
        return 1000 * statistics.median(tokens / r["tokens_per_s"] for r in rows[10:]), p.stderr.decode()
    finally:
        shutil.rmtree(out, ignore_errors=True)


def gemm_share(report):
    """(ms/step in the weight GEMMs, ms/step profiled) from tinylm's --profile report"""
    gemm = step = 0.0
    for line in report.splitlines():
        f = line.split()
        if len(f) >= 2 and f[0] in ("matmul_forward", "matmul_backward"):
            gemm += float(f[1])
        if line.startswith("profile over"):
            step = float(line.split(":")[1].split()[0])
    return gemm, step


def pytorch_in_subprocess(threads, steps, name, env_extra):
    env = dict(CLEAN_ENV, **env_extra)
    out = subprocess.run([sys.executable, __file__, "--pytorch-only", "--model", name, "--threads", str(threads),
                          "--steps", str(steps)], env=env, check=True, stdout=subprocess.PIPE).stdout
    return float(out.decode().strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tinylm")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, help="steps per run (default: 60 for nanogpt-baby, 30 for gpt2-small)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median ratio is reported")
    ap.add_argument("--model", default="all", choices=sorted(MODELS) + ["all"])
    ap.add_argument("--pytorch-only", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.pytorch_only:
        print(pytorch_ms_per_step(a.threads, a.steps, a.model))
        return
    if not a.tinylm:
        ap.error("--tinylm is required")
    for name in sorted(MODELS) if a.model == "all" else [a.model]:
        cfg = MODELS[name]
        steps = a.steps or cfg["steps"]
        print("== %s: %d layers, %d heads, d %d, T %d, batch %d, %s vocabulary, biases %s; AdamW + clip, %d threads, "
              "%d steps per run, %d rounds"
              % (name, cfg["layers"], cfg["heads"], cfg["d"], cfg["T"], cfg["batch"], cfg["vocab"],
                 "on" if cfg["bias"] else "off", a.threads, steps, a.rounds))
        ratios = []
        for r in range(a.rounds):
            t, _ = tinylm_run(a.tinylm, a.threads, steps, name, False)
            p_default = pytorch_in_subprocess(a.threads, steps, name, {})
            p_blas1 = pytorch_in_subprocess(a.threads, steps, name, {"OPENBLAS_NUM_THREADS": "1"})
            best = min(p_default, p_blas1)
            ratios.append(best / t)
            print("round %d: tinylm %7.1f ms/step; pytorch %s eager as installed %7.1f, OPENBLAS_NUM_THREADS=1 %7.1f; "
                  "%.2fx" % (r + 1, t, torch.__version__, p_default, p_blas1, best / t))
            sys.stdout.flush()
        print("tinylm is %.2fx faster per step than the faster PyTorch setting (median of %d rounds: %s)"
              % (statistics.median(ratios), len(ratios), ", ".join("%.2f" % x for x in ratios)))
        t, report = tinylm_run(a.tinylm, a.threads, steps, name, True)
        mfu = [l for l in report.splitlines() if l.startswith("model FLOPs")]
        if mfu:
            print("tinylm --profile: %.1f ms/step; %s" % (t, mfu[0]))
        gemm_ms, prof_ms = gemm_share(report)
        if gemm_ms:
            # what the target leaves for everything else: the weight GEMMs alone are a floor no other work lowers
            x, best = cfg["target"], min(p_default, p_blas1)
            print("tinylm GEMMs (matmul forward + backward, --profile): %.2f of %.2f ms/step; at %dx PyTorch (last "
                  "round) the whole step takes %.2f ms, leaving %.2f ms for attention, norms, activations and AdamW "
                  "(now %.2f)" % (gemm_ms, prof_ms, x, best / x, best / x - gemm_ms, prof_ms - gemm_ms))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
