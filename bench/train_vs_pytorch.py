#!/usr/bin/python3
"""train_vs_pytorch.py — ms per training step of tinylm vs PyTorch eager, same model, same
optimizer, same batch, same thread count, measured in the same run, for three models:

  nanogpt-baby  nanoGPT's CPU Shakespeare model: 4 layers, 4 heads, d 128, T 64, batch 12,
                character vocabulary, LayerNorm without bias, no linear biases
  gpt2-small    a small GPT-2: 6 layers, 6 heads, d 384, T 256, batch 8, byte vocabulary (256),
                LayerNorm and linear biases
  gpt2-124m     the GPT-2 124M shape: 12 layers, 12 heads, d 768, T 256, batch 4, vocabulary
                50304 (GPT-2's 50257 padded to a multiple of 64, as nanoGPT does), biases; on
                synthetic token ids (below)

All: Pre-Norm, tanh-GELU MLP (4d), learned positions, tied head, no dropout, AdamW (weight
decay on matrices only, as tinylm), global-norm clipping 1.0; TinyShakespeare for the first two.

    bench/train_vs_pytorch.py --tinylm build/tinylm [--model nanogpt-baby|gpt2-small|gpt2-124m|all]
                              [--precision fp32|bf16|both] [--threads 2] [--steps N] [--rounds 3]
                              [--batch B] [--seq T] [--pytorch-blas both|installed|1] [--no-profile]

--precision: fp32 (the default) times tinylm and PyTorch in fp32; bf16 times tinylm's
`train --precision bf16` (bf16 GEMMs, fp32 master weights) and PyTorch eager under
torch.autocast("cpu", torch.bfloat16) (the forward's matrix products in bf16, fp32 weights and
optimizer; the backward outside the autocast region, as PyTorch recommends); both does both in
each round. A tinylm whose `train --help` has no --precision is timed in fp32 only (said once).

The 124M shape's vocabulary: tinylm's training tokenizers are bytes (256) and chars (the sorted
distinct code points of the corpus), and a run's vocab_size is its tokenizer's. So its corpus is
a file of synthetic token ids written as characters, id i as code point U+0100 + i (U+0100 to
U+C57F: no control characters, no surrogates): first every id once in order (so the chars
vocabulary is exactly the 50304 ids, in id order), then 400,000 ids drawn uniformly with a fixed
seed (numpy default_rng(1337)). tinylm reads it with --tokenizer chars; PyTorch maps each
character to its index in the sorted set of characters (the same rule), so both train on the
same id sequence with the same 50304-row embedding and tied head. The file is written once into
$TLM_BENCH_DIR (default /tmp/tinylm-bench). The loss stays near ln 50304 = 10.8: this is a speed
benchmark.

Each side reports the median step time over steps skip..N (N: 60 for nanogpt-baby, 30 for
gpt2-small, 6 for gpt2-124m; skip 10, 10, 2). A round times tinylm (each precision), then PyTorch
as installed, then PyTorch with a single-threaded BLAS (below), each precision, one after the
other; the rounds repeat that, so that each round's ratio compares runs minutes apart at most,
and the figure is the median of the rounds' ratios (a shared VM's speed drifts by up to 2x over
minutes: docs/performance.md). Every run is its own process; its peak RSS (ru_maxrss from wait4)
is printed (PyTorch's includes the ~300 MB of the torch libraries). The timed tinylm runs have no
--profile; one more run with it (per precision; --no-profile skips it) gives the model FLOPs
utilisation (model FLOPs per step against the FMA peak measured on this machine at its end) and
the GEMMs' share.

Debian's torch calls the system OpenBLAS (pthread build), whose own threads fight torch's
OpenMP threads on a 2-core machine: torch at 2 threads is then slower than at 1. So PyTorch is
measured twice, as installed and with OPENBLAS_NUM_THREADS=1 (its BLAS single-threaded, its
own ops on N threads), and tinylm is compared with the faster of the two (--pytorch-blas picks
one of them instead, to save time on the 124M shape). Variables this workplace sets for old
OpenBLAS builds (OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE) are removed, so every program runs as a
user would run it."""
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

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "tinyshakespeare.txt")
BENCH = os.environ.get("TLM_BENCH_DIR", "/tmp/tinylm-bench")
SYNTH_VOCAB, SYNTH_BASE, SYNTH_RANDOM = 50304, 0x100, 400000

MODELS = {
    # d, layers, heads, T, batch, vocab ("chars", "bytes" or "synthetic"), biases (LayerNorm and linear), the
    # speed-up over PyTorch fp32 the project aims at (issue 8) and in bf16 over PyTorch autocast-bf16 (issue 23)
    "nanogpt-baby": dict(d=128, layers=4, heads=4, T=64, batch=12, vocab="chars", bias=False, target=3, steps=60),
    "gpt2-small": dict(d=384, layers=6, heads=6, T=256, batch=8, vocab="bytes", bias=True, target=2, target_bf16=3,
                       steps=30),
    "gpt2-124m": dict(d=768, layers=12, heads=12, T=256, batch=4, vocab="synthetic", bias=True, target_bf16=3,
                      steps=6, skip=2, eval_batches=1),
}
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}


def synthetic_corpus():
    """the 124M shape's corpus (see the docstring): written once, its path"""
    path = os.path.join(BENCH, "synthetic_ids_%d.txt" % SYNTH_VOCAB)
    if not os.path.exists(path):
        os.makedirs(BENCH, exist_ok=True)
        ids = np.concatenate([np.arange(SYNTH_VOCAB),
                              np.random.default_rng(1337).integers(0, SYNTH_VOCAB, SYNTH_RANDOM)])
        tmp = path + ".tmp%d" % os.getpid()
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("".join(chr(SYNTH_BASE + int(i)) for i in ids))
        os.replace(tmp, path)
    return path


def corpus(name):
    """(the file tinylm trains on, its --tokenizer)"""
    v = MODELS[name]["vocab"]
    return (synthetic_corpus(), "chars") if v == "synthetic" else (DATA, v)


def token_ids(name):
    """(vocab, ids) as tinylm's tokenizer of corpus(name) gives them"""
    path, kind = corpus(name)
    raw = open(path, "rb").read()
    if kind == "bytes":
        return 256, torch.tensor(list(raw[:400000]), dtype=torch.long)
    text = raw.decode()
    if MODELS[name]["vocab"] != "synthetic":
        text_all, text = text, text[:200000]
    else:
        text_all = text
    index = {c: i for i, c in enumerate(sorted(set(text_all)))}  # tinylm's chars: sorted distinct code points
    return len(index), torch.tensor([index[c] for c in text], dtype=torch.long)


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
        # tinylm's init (docs/config.md "Init", GPT-2's): matrices and embeddings N(0, 0.02), the
        # residual output projections / sqrt(2 layers), biases 0. (PyTorch's defaults, N(0, 1)
        # embeddings, give logits of std ~sqrt(d) through the tied head: most softmax
        # probabilities of a 50304-token vocabulary are then subnormal floats, and the head's
        # backward GEMMs on them ran 20x slower than the forward on this Intel Xeon.)
        for n, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * layers) if n.endswith(("o.weight", "down.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif n.endswith("bias") and ".ln" not in n and not n.startswith("ln"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def pytorch_ms_per_step(threads, steps, name, precision, batch, T):
    cfg = MODELS[name]
    torch.set_num_threads(threads)
    torch.manual_seed(1337)
    vocab, data = token_ids(name)
    model = GPT(vocab, cfg["d"], cfg["layers"], cfg["heads"], T, cfg["bias"])
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    decay = [p for n, p in params if p.dim() >= 2 and "wte" not in n and "wpe" not in n]
    no_decay = [p for n, p in params if not (p.dim() >= 2 and "wte" not in n and "wpe" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99), eps=1e-8)
    bf16 = precision == "bf16"
    times = []
    for step in range(steps):
        ix = torch.randint(len(data) - T - 1, (batch,))
        x = torch.stack([data[i:i + T] for i in ix])
        y = torch.stack([data[i + 1:i + T + 1] for i in ix])
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    n_params = sum(p.numel() for p in model.parameters())
    return 1000 * statistics.median(times[cfg.get("skip", 10):]), n_params, vocab


def run_rss(cmd, env):
    """(stdout, peak RSS MiB) of one process, which must succeed; its own ru_maxrss from wait4"""
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        p = subprocess.Popen(cmd, env=env, stdout=fo, stderr=fe)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0), fe.seek(0)
        out, err = fo.read().decode("utf-8", "replace"), fe.read().decode("utf-8", "replace")
    if p.returncode != 0:
        raise SystemExit("%s: exit %d\n%s" % (" ".join(cmd), p.returncode, err[-3000:]))
    return out, err, ru.ru_maxrss / 1024.0


def tinylm_precisions(tinylm):
    """whether `tinylm train` takes --precision (the bf16 training of issue 23)"""
    p = subprocess.run([tinylm, "train", "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=CLEAN_ENV)
    return "--precision" in p.stdout.decode("utf-8", "replace")


def tinylm_args(name, batch, T):
    cfg = MODELS[name]
    b = "true" if cfg["bias"] else "false"
    sets = {"hidden_size": cfg["d"], "num_hidden_layers": cfg["layers"], "num_attention_heads": cfg["heads"],
            "intermediate_size": 4 * cfg["d"], "max_position_embeddings": T, "norm_bias": b,
            "attention_bias": b, "attention_out_bias": b, "mlp_bias": b}
    data, tok = corpus(name)
    args = ["--data", data, "--preset", "nanogpt-baby", "--tokenizer", tok, "--batch", str(batch), "--seq", str(T)]
    if "eval_batches" in cfg:
        args += ["--eval-batches", str(cfg["eval_batches"])]
    for k, v in sets.items():
        args += ["--set", "%s=%s" % (k, v)]
    return args


def tinylm_run(tinylm, threads, steps, name, profile, precision, batch, T, with_flag):
    """(median ms/step from metrics.jsonl, the --profile report (stderr) when profiling, peak RSS MiB)"""
    cfg = MODELS[name]
    out = tempfile.mkdtemp(prefix="tlm_bench_")
    try:
        env = dict(CLEAN_ENV, OMP_NUM_THREADS=str(threads))
        _, err, rss = run_rss([tinylm, "train", "--out", os.path.join(out, "run"), "--steps", str(steps),
                               "--eval-every", str(10 * steps), "--save-every", str(10 * steps), "--sample", "0"]
                              + (["--profile"] if profile else []) + (["--precision", precision] if with_flag else [])
                              + tinylm_args(name, batch, T), env)
        rows = [json.loads(l) for l in open(os.path.join(out, "run", "metrics.jsonl"))]
        tokens = batch * T
        return 1000 * statistics.median(tokens / r["tokens_per_s"] for r in rows[cfg.get("skip", 10):]), err, rss
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


def pytorch_in_subprocess(threads, steps, name, env_extra, precision, batch, T):
    """(ms/step, peak RSS MiB) of PyTorch in its own process"""
    env = dict(CLEAN_ENV, **env_extra)
    out, _, rss = run_rss([sys.executable, __file__, "--pytorch-only", "--model", name, "--threads", str(threads),
                           "--steps", str(steps), "--precision", precision, "--batch", str(batch), "--seq", str(T)], env)
    ms, n_params, vocab = out.split()
    return float(ms), rss, int(n_params), int(vocab)


BLAS_SETTINGS = {"installed": {}, "1": {"OPENBLAS_NUM_THREADS": "1"}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tinylm")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, help="steps per run (default: 60 for nanogpt-baby, 30 for gpt2-small, "
                                               "6 for gpt2-124m)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median ratio is reported")
    ap.add_argument("--model", default="all", choices=sorted(MODELS) + ["all"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "both"])
    ap.add_argument("--batch", type=int, help="batch size instead of the model's")
    ap.add_argument("--seq", type=int, help="sequence length instead of the model's")
    ap.add_argument("--pytorch-blas", default="both", choices=["both", "installed", "1"],
                    help="PyTorch's OpenBLAS threads: as installed, 1, or both (compared with the faster)")
    ap.add_argument("--no-profile", action="store_true", help="skip the extra tinylm --profile run")
    ap.add_argument("--pytorch-only", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.pytorch_only:
        print("%r %d %d" % pytorch_ms_per_step(a.threads, a.steps, a.model, a.precision, a.batch, a.seq))
        return
    if not a.tinylm:
        ap.error("--tinylm is required")
    precisions = ["fp32", "bf16"] if a.precision == "both" else [a.precision]
    has_flag = tinylm_precisions(a.tinylm)
    tinylm_precs = [p for p in precisions if p == "fp32" or has_flag]
    if "bf16" in precisions and not has_flag:
        print("note: %s train has no --precision option (this build predates bf16 training): tinylm bf16 skipped, "
              "PyTorch autocast bf16 still timed" % a.tinylm)
    blas = ["installed", "1"] if a.pytorch_blas == "both" else [a.pytorch_blas]
    for name in sorted(MODELS) if a.model == "all" else [a.model]:
        cfg = MODELS[name]
        steps = a.steps or cfg["steps"]
        batch, T = a.batch or cfg["batch"], a.seq or cfg["T"]
        if steps <= cfg.get("skip", 10):
            ap.error("--steps must exceed the %d warm-up steps of %s" % (cfg.get("skip", 10), name))
        print("== %s: %d layers, %d heads, d %d, T %d, batch %d, %s vocabulary, biases %s; AdamW + clip, %d threads, "
              "%d steps per run (median of steps %d..%d), %d rounds, precision %s"
              % (name, cfg["layers"], cfg["heads"], cfg["d"], T, batch,
                 "synthetic 50304-id" if cfg["vocab"] == "synthetic" else cfg["vocab"],
                 "on" if cfg["bias"] else "off", a.threads, steps, cfg.get("skip", 10) + 1, steps, a.rounds,
                 "+".join(precisions)))
        sys.stdout.flush()
        # ms[(side, precision)] = per-round list; pyt[(precision, blas)] = per-round list; rss likewise
        tl = {p: [] for p in tinylm_precs}
        pt = {(p, b): [] for p in precisions for b in blas}
        rss = {}
        for r in range(a.rounds):
            parts = []
            for p in tinylm_precs:
                t, err, m = tinylm_run(a.tinylm, a.threads, steps, name, False, p, batch, T, has_flag)
                if r == 0 and p == tinylm_precs[0]:
                    print("tinylm: " + next((l.strip() for l in err.splitlines() if l.startswith("training ")), "?"))
                tl[p].append(t)
                rss["tinylm " + p] = max(rss.get("tinylm " + p, 0), m)
                parts.append("tinylm %s %.1f" % (p, t))
            for p in precisions:
                for b in blas:
                    t, m, n_params, vocab = pytorch_in_subprocess(a.threads, steps, name, BLAS_SETTINGS[b], p, batch, T)
                    if r == 0 and (p, b) == (precisions[0], blas[0]):
                        print("pytorch: %d parameters (tied head counted once), vocab %d" % (n_params, vocab))
                    pt[(p, b)].append(t)
                    key = "pytorch %s%s" % (p, "" if b == "installed" else " OPENBLAS_NUM_THREADS=1")
                    rss[key] = max(rss.get(key, 0), m)
                    parts.append("pytorch %s %s %.1f" % ("autocast-bf16" if p == "bf16" else "fp32",
                                                        "as installed" if b == "installed" else "OPENBLAS_NUM_THREADS=1", t))
            print("round %d (ms/step): %s" % (r + 1, "; ".join(parts)))
            sys.stdout.flush()
        best = {p: [min(pt[(p, b)][r] for b in blas) for r in range(a.rounds)] for p in precisions}

        def ratio(num, den, what):
            rs = [x / y for x, y in zip(num, den)]
            print("  %-58s %6.2fx (median of %d rounds: %s)" % (what, statistics.median(rs), len(rs),
                                                                 ", ".join("%.2f" % x for x in rs)))

        span = lambda v: "%.1f-%.1f" % (min(v), max(v))
        print("ms/step (min-max over the rounds): " + "; ".join(
            ["tinylm %s %s" % (p, span(v)) for p, v in tl.items()] +
            ["pytorch %s %s %s" % ("autocast-bf16" if p == "bf16" else "fp32",
                                   "as installed" if b == "installed" else "OPENBLAS_NUM_THREADS=1", span(v))
             for (p, b), v in pt.items()]))
        print("peak RSS (MiB, largest over the rounds): " + "; ".join("%s %.0f" % (k, v) for k, v in rss.items()))
        print("speed-ups (PyTorch's faster BLAS setting of each round; torch %s):" % torch.__version__)
        if "fp32" in tl:
            ratio(best["fp32"], tl["fp32"], "tinylm fp32 vs PyTorch fp32 eager")
            if "bf16" in best:
                ratio(best["bf16"], tl["fp32"], "tinylm fp32 vs PyTorch autocast-bf16")
        if "bf16" in tl:
            ratio(best["bf16"], tl["bf16"], "tinylm bf16 vs PyTorch autocast-bf16")
            if "fp32" in best:
                ratio(best["fp32"], tl["bf16"], "tinylm bf16 vs PyTorch fp32 eager")
            if "fp32" in tl:
                ratio(tl["fp32"], tl["bf16"], "tinylm bf16 vs tinylm fp32")
        if "fp32" in best and "bf16" in best:
            ratio(best["fp32"], best["bf16"], "PyTorch autocast-bf16 vs PyTorch fp32 eager")
        if "fp32" in tl and "fp32" in best:
            # the older summary line, kept for the docs' earlier figures
            print("tinylm is %.2fx faster per step than the faster PyTorch setting (median of %d rounds: %s)"
                  % (statistics.median([x / y for x, y in zip(best["fp32"], tl["fp32"])]), a.rounds,
                     ", ".join("%.2f" % (x / y) for x, y in zip(best["fp32"], tl["fp32"]))))
        for p in [] if a.no_profile else tinylm_precs:
            t, report, _ = tinylm_run(a.tinylm, a.threads, steps, name, True, p, batch, T, has_flag)
            mfu = [l for l in report.splitlines() if l.startswith("model FLOPs")]
            if mfu:
                print("tinylm %s --profile: %.1f ms/step; %s" % (p, t, mfu[0]))
            gemm_ms, prof_ms = gemm_share(report)
            if gemm_ms:
                # what the target leaves for everything else: the weight GEMMs alone are a floor no other work lowers
                x, last = cfg.get("target" if p == "fp32" else "target_bf16"), best[p][-1] if p in best else None
                if x and last is not None:
                    print("tinylm %s GEMMs (matmul forward + backward, --profile): %.2f of %.2f ms/step; at %dx PyTorch "
                          "%s (last round) the whole step takes %.2f ms, leaving %.2f ms for attention, norms, "
                          "activations and AdamW (now %.2f)" % (p, gemm_ms, prof_ms, x,
                                                                "autocast-bf16" if p == "bf16" else "fp32", last / x,
                                                                last / x - gemm_ms, prof_ms - gemm_ms))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
