#!/usr/bin/python3
"""test_dtype.py — inference with bf16 weights on a real model (stories260K), through the CLI.

    test_dtype.py --tinylm PATH --work DIR

- bf16 weights are the f32 path on bf16-rounded values: `logits --dtype bf16` on the model
  equals `logits --dtype f32` on a copy of the checkpoint whose matrices numpy rounded to bf16
  (round to nearest even; norm weights stay f32 as in the engine), up to summation order (1e-5
  of the largest logit);
- what rounding the weights to bf16 does to this trained model, measured against f32: the
  logits move (the rounding happened), by less than 2% of the largest logit, the greedy
  choice agrees at >= 95% of positions and the KL divergence stays below 1e-3 nats
  (measured: 0.4%, 100%, 8e-5; docs/performance.md);
- generate --dtype bf16 keeps half the bytes and says so; a bad --dtype is a usage error."""
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "cli"))
from harness import check, main, run  # noqa: E402

MODEL = os.path.join(ROOT, "data", "stories260K.bin")
TOK = os.path.join(ROOT, "data", "tok512.bin")
TEXT = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."


def bf16_round(x):
    """float32 -> nearest bf16 (ties to even) -> float32, as numpy bit operations"""
    u = x.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def rounded_copy(path, out):
    """the llama2.c checkpoint with its matrices rounded to bf16, the way --dtype bf16 keeps
    them (the RMSNorm weights stay f32)"""
    raw = open(path, "rb").read()
    dim, hidden, L, H, KV, V, seq = np.frombuffer(raw[:28], dtype=np.int32)
    kvd, hd = dim // H * KV, dim // H
    w = np.frombuffer(raw[28:], dtype=np.float32).copy()
    # (name, floats, is a matrix) in file order; the head follows when vocab_size < 0 (untied)
    parts = [("embed", abs(V) * dim, 1), ("rms_att", L * dim, 0), ("wq", L * dim * dim, 1), ("wk", L * dim * kvd, 1),
             ("wv", L * dim * kvd, 1), ("wo", L * dim * dim, 1), ("rms_ffn", L * dim, 0), ("w1", L * hidden * dim, 1),
             ("w2", L * dim * hidden, 1), ("w3", L * hidden * dim, 1), ("rms_final", dim, 0), ("freq", seq * hd, 0)]
    if V < 0:
        parts.append(("wcls", -V * dim, 1))
    at = 0
    for _, n, matrix in parts:
        if matrix:
            w[at:at + n] = bf16_round(w[at:at + n])
        at += n
    assert at == len(w), "unexpected llama2.c layout"
    with open(out, "wb") as f:
        f.write(raw[:28])
        f.write(w.tobytes())


def logits(tinylm, model, ids, out, dtype):
    rc, _, err = run(tinylm, "logits", "--model", model, "--tokenizer", TOK, "--ids", ids, "--out", out,
                     "--dtype", dtype)
    return np.load(out) if rc == 0 else None, err


def test_bf16(tinylm, work):
    rc, ids, err = run(tinylm, "tokenize", "--tokenizer", TOK, "--text", TEXT, "--bos")
    check(rc == 0, "tokenize the prompt", err)
    ids = ids.strip()
    rounded = os.path.join(work, "rounded.bin")
    rounded_copy(MODEL, rounded)
    f32, e1 = logits(tinylm, MODEL, ids, "f32.npy", "f32")
    b16, e2 = logits(tinylm, MODEL, ids, "bf16.npy", "bf16")
    ref, e3 = logits(tinylm, rounded, ids, "rounded.npy", "f32")
    if not check(f32 is not None and b16 is not None and ref is not None, "logits f32 / bf16 / rounded run",
                 e1 + e2 + e3):
        return
    scale = np.abs(ref).max()
    err = np.abs(b16 - ref).max() / scale
    check(err <= 1e-5, "bf16 weights = f32 path on numpy-rounded weights (rel %.1e <= 1e-5)" % err)
    move = np.abs(b16 - f32).max() / np.abs(f32).max()
    pa = np.exp(f32 - f32.max(1, keepdims=True))
    pa /= pa.sum(1, keepdims=True)
    pb = np.exp(b16 - b16.max(1, keepdims=True))
    pb /= pb.sum(1, keepdims=True)
    kl = (pa * (np.log(pa) - np.log(pb))).sum(1).max()
    agree = (f32.argmax(1) == b16.argmax(1)).mean()
    print("stories260K, %d positions: bf16 vs f32 logits max diff %.2e of max |logit|, greedy agreement %.0f%%, "
          "max KL %.1e nats" % (len(f32), move, 100 * agree, kl))
    check(0 < move < 0.02, "bf16 rounding moves the logits, by < 2%% of the largest (%.2e)" % move)
    check(agree >= 0.95, "greedy choice agrees at >= 95%% of positions (%.0f%%)" % (100 * agree))
    check(kl < 1e-3, "KL(f32 || bf16) < 1e-3 nats at every position (%.1e)" % kl)


def test_generate(tinylm, work):
    args = ["generate", "--model", MODEL, "--tokenizer", TOK, "--prompt", "Once", "-n", "20", "--temperature", "0"]
    rc32, text32, err32 = run(tinylm, *args, "--dtype", "f32")
    rc16, text16, err16 = run(tinylm, *args, "--dtype", "bf16")
    check(rc32 == 0 and rc16 == 0 and text16.startswith("Once"), "generate --dtype f32 / bf16 run", err32 + err16)
    check("of f32 weights" in err32 and "of bf16 weights" in err16, "generate reports the weights' type")

    def mib(err):
        return float(err.split(" MiB of ")[0].split("(")[-1])

    if rc32 == 0 and rc16 == 0:
        ratio = mib(err16) / mib(err32)
        check(0.5 <= ratio < 0.6, "bf16 weights take about half the bytes (%.2f of f32)" % ratio)
    rc, _, err = run(tinylm, *args, "--dtype", "f16")
    check(rc == 2 and "--dtype" in err and len(err.splitlines()) == 1, "--dtype f16 is a usage error (exit 2)", err)

    # --precision auto (generate's default): the prompt's products in bf16 exactly when the weights
    # are bf16 and the CPU has bf16 products; fp32 otherwise, without a word
    long_args = ["generate", "--model", MODEL, "--tokenizer", TOK, "--prompt", "Once upon a time, " * 6, "-n", "30",
                 "--temperature", "0"]
    _, _, probe = run(tinylm, *long_args, "--dtype", "f32", "--precision", "bf16")
    has_path = "computing in fp32" not in probe
    rc_a, text_a, err_a = run(tinylm, *long_args, "--dtype", "bf16")
    rc_b, text_b, err_b = run(tinylm, *long_args, "--dtype", "bf16", "--precision", "bf16")
    rc_f, text_f, err_f = run(tinylm, *long_args, "--dtype", "bf16", "--precision", "fp32")
    rc_w, _, err_w = run(tinylm, *long_args, "--dtype", "f32")
    want = "prompt products bf16" if has_path else "prompt products fp32"
    check(rc_a == 0 and want in err_a, "generate --dtype bf16 (auto precision): %s (the CPU %s bf16 products)"
          % (want, "has" if has_path else "has no"), err_a[-300:])
    check(rc_a == 0 and rc_b == 0 and text_a == text_b, "auto precision with bf16 weights = --precision bf16 (text)")
    check(rc_f == 0 and "prompt products fp32" in err_f, "--precision fp32 keeps bf16 weights' products in fp32")
    check(rc_w == 0 and "prompt products fp32" in err_w, "auto precision with f32 weights: fp32 products")
    env = dict(os.environ, TLM_ISA="avx2")
    p = subprocess.run([tinylm, *long_args, "--dtype", "bf16"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120, env=env)
    err_n = p.stderr.decode()
    check(p.returncode == 0 and "prompt products fp32" in err_n and len(err_n.strip().splitlines()) == 1,
          "auto precision without a bf16 path (TLM_ISA=avx2): fp32, and no fallback line", err_n[-300:])
    rc, _, err = run(tinylm, *long_args, "--precision", "fp16")
    check(rc == 2 and "fp32, bf16, auto" in err, "generate --precision fp16 is a usage error naming the values", err)


if __name__ == "__main__":
    sys.exit(main([test_bf16, test_generate]))
