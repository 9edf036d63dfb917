#!/usr/bin/python3
"""train_vs_pytorch.py — ms per training step of tinylm vs PyTorch eager, same model, same
optimizer, same batch, same thread count, measured in the same run.

    bench/train_vs_pytorch.py --tinylm build/tinylm [--threads 2] [--steps 60] [--preset nanogpt-baby]

The PyTorch side is nanoGPT's model written out here (LayerNorm without bias, Pre-Norm,
tanh-GELU MLP, learned positions, tied head, no dropout) with torch.optim.AdamW (weight decay
on matrices only, as tinylm), global-norm clipping 1.0, batch 12 x 64 characters of
TinyShakespeare. Both sides report the median step time over steps 10..N (the first steps
warm up caches and allocators).

Debian's torch calls the system OpenBLAS (pthread build), whose own threads fight torch's
OpenMP threads on a 2-core machine: torch at 2 threads is then slower than at 1. So PyTorch is
measured twice, as installed and with OPENBLAS_NUM_THREADS=1 (its BLAS single-threaded, its
own ops on N threads), and tinylm is compared with the faster of the two."""
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


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(d, bias=False) if "bias" in nn.LayerNorm.__init__.__code__.co_varnames else nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d, bias=False) if "bias" in nn.LayerNorm.__init__.__code__.co_varnames else nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.up = nn.Linear(d, 4 * d, bias=False)
        self.down = nn.Linear(4 * d, d, bias=False)

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
    def __init__(self, vocab, d=128, layers=4, heads=4, T=64):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(T, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.lnf = nn.LayerNorm(d)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def pytorch_ms_per_step(threads, steps, batch=12, T=64):
    torch.set_num_threads(threads)
    torch.manual_seed(1337)
    text = open(DATA).read()
    chars = sorted(set(text))
    data = torch.tensor([chars.index(c) for c in text[:200000]], dtype=torch.long)
    model = GPT(len(chars), T=T)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "wte" not in n and "wpe" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "wte" not in n and "wpe" not in n)]
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


def tinylm_ms_per_step(tinylm, threads, steps, preset):
    out = tempfile.mkdtemp(prefix="tlm_bench_")
    try:
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        subprocess.run([tinylm, "train", "--data", DATA, "--preset", preset, "--out", os.path.join(out, "run"),
                        "--steps", str(steps), "--eval-every", str(10 * steps), "--save-every", str(10 * steps),
                        "--sample", "0"], check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rows = [json.loads(l) for l in open(os.path.join(out, "run", "metrics.jsonl"))]
        tokens = 12 * 64
        return 1000 * statistics.median(tokens / r["tokens_per_s"] for r in rows[10:])
    finally:
        shutil.rmtree(out, ignore_errors=True)


def pytorch_in_subprocess(threads, steps, env_extra):
    env = dict(os.environ, **env_extra)
    out = subprocess.run([sys.executable, __file__, "--pytorch-only", "--threads", str(threads), "--steps", str(steps)],
                         env=env, check=True, stdout=subprocess.PIPE).stdout
    return float(out.decode().strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tinylm")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--preset", default="nanogpt-baby")
    ap.add_argument("--pytorch-only", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.pytorch_only:
        print(pytorch_ms_per_step(a.threads, a.steps))
        return
    if not a.tinylm:
        ap.error("--tinylm is required")
    t = tinylm_ms_per_step(a.tinylm, a.threads, a.steps, a.preset)
    p_default = pytorch_in_subprocess(a.threads, a.steps, {})
    p_blas1 = pytorch_in_subprocess(a.threads, a.steps, {"OPENBLAS_NUM_THREADS": "1"})
    best = min(p_default, p_blas1)
    print("model: nanoGPT baby (4 layers, 4 heads, d 128, T 64, batch 12), AdamW + clip, %d threads" % a.threads)
    print("tinylm                              %6.1f ms/step" % t)
    print("pytorch %s eager, as installed      %6.1f ms/step" % (torch.__version__, p_default))
    print("pytorch, OPENBLAS_NUM_THREADS=1     %6.1f ms/step" % p_blas1)
    print("tinylm is %.2fx faster per step than the faster PyTorch setting" % (best / t))


if __name__ == "__main__":
    main()
