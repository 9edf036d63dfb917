#!/usr/bin/env python3
"""test_log_attn.py — `tinylm train --log-attn` (src/train/attn_log.c):

- without the option metrics.jsonl has no attn_max / qk_gain_max keys, and the losses and gradient
  norms with it are bit-identical to those without (the option only reads);
- attn_max has one value per layer and head and equals the largest |score| over the visible keys
  of the step's batch, recomputed by `tinylm inspect --probe 'layers.*.attn.scores' --dump` on the
  same window (the corpus is one 7-character text repeated, so a batch of one window is one of 7
  known windows; learning rate 1e-30 keeps the saved weights those of the step, bit for bit);
- qk_gain_max (QK-Norm over the whole projection with GQA, so each head has its own q and k
  slices) is the largest |gain| of each head's slice of the checkpoint's q_norm / k_norm weights,
  and attention logits stay within the bound sqrt(head_dim) * g_q * g_k;
- per-head QK-Norm with the Gemma (1 + w) gain: the gains are 1 + w."""
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cli"))
from harness import check, main, run  # noqa: E402

TEXT = "abcdefg" * 3000
SEQ = 16


def metrics(d):
    with open(os.path.join(d, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        assert v["dtype"] == "F32"
        out[k] = np.frombuffer(data[a:b], np.float32).reshape(v["shape"])
    return out


def train(tinylm, work, name, sets, extra=()):
    d = os.path.join(work, name)
    args = ["train", "--data", os.path.join(work, "period7.txt"), "--preset", "lesson15", "--steps", "3",
            "--batch", "1", "--seq", str(SEQ), "--sample", "0", "--eval-every", "3", "--eval-batches", "1",
            "--out", d, "--threads", "2"] + list(extra)
    for kv in sets:
        args += ["--set", kv]
    rc, _, err = run(tinylm, *args)
    check(rc == 0, "%s: train runs" % name, err[-400:])
    return d


def test_log_attn(tinylm, work):
    with open(os.path.join(work, "period7.txt"), "w") as f:
        f.write(TEXT)
    sets = ["qk_norm=full", "num_attention_heads=4", "num_key_value_heads=2", "head_dim=16"]
    off = train(tinylm, work, "off", sets, ["--lr", "1e-30", "--min-lr", "1e-30"])
    on = train(tinylm, work, "on", sets, ["--lr", "1e-30", "--min-lr", "1e-30", "--log-attn"])
    m_off, m_on = metrics(off), metrics(on)
    check(all("attn_max" not in m and "qk_gain_max" not in m for m in m_off), "no attn keys without --log-attn")
    check([(m["loss"], m["grad_norm"]) for m in m_off] == [(m["loss"], m["grad_norm"]) for m in m_on],
          "losses and gradient norms bit-identical with and without --log-attn")
    check(all(np.array(m["attn_max"]).shape == (2, 4) and np.array(m["qk_gain_max"]).shape == (2, 4, 2)
              for m in m_on), "attn_max [layers][heads], qk_gain_max [layers][heads][q, k]")
    # the step's scores, recomputed on each of the 7 possible windows from the saved weights (lr 1e-30)
    ck = on  # its latest checkpoint: the weights every step used (lr 1e-30 moves none of them)
    per_window = []
    for i in range(7):
        dump = os.path.join(work, "dump%d" % i)
        rc, _, err = run(tinylm, "inspect", "--model", ck, "--prompt", TEXT[i:i + SEQ], "--no-bos",
                         "--probe", "layers.*.attn.scores", "--dump", dump)
        if not check(rc == 0, "inspect --dump window %d" % i, err[-300:]):
            return
        mx = []
        for l in range(2):
            s = np.load(os.path.join(dump, "layers.%d.attn.scores.npy" % l))[0]  # [H, T, T]
            s = np.where(np.isfinite(s), np.abs(s), 0)
            mx.append(s.reshape(s.shape[0], -1).max(-1))
        per_window.append(np.array(mx))
    for m in m_on:
        got = np.array(m["attn_max"])
        err = min(float(np.abs(got - w).max() / w.max()) for w in per_window)
        check(err < 1e-5, "step %d: attn_max = max |score| of the batch's window (rel. error %.2g)" % (m["step"], err))
    # now with learning: gains move; the bound holds at every step for every head
    learn = train(tinylm, work, "learn", sets, ["--lr", "0.05", "--warmup", "0", "--log-attn"])
    head = train(tinylm, work, "learn_head", ["qk_norm=head"] + sets[1:], ["--lr", "0.05", "--warmup", "0",
                                                                            "--log-attn"])
    # per head, |q_h| <= g_q sqrt(hd) after RMS-normalizing over the head's hd entries (RoPE keeps
    # the norm) and |logit| <= |q||k| / sqrt(hd) = sqrt(hd) g_q g_k. Normalized over the whole
    # projection (full), one head may hold all of it: |q_h| <= g_q sqrt(H hd), |k_h| <= g_k sqrt(KV hd).
    for d, bound_scale, what in ((head, math.sqrt(16), "head: sqrt(head_dim)"),
                                 (learn, math.sqrt(4 * 2 * 16), "full: sqrt(H KV head_dim)")):
        worst, moved = 0.0, False
        for m in metrics(d):
            a, gq = np.array(m["attn_max"]), np.array(m["qk_gain_max"])
            moved |= bool(np.abs(gq - 1).max() > 1e-3)
            worst = max(worst, float((a / (bound_scale * gq[..., 0] * gq[..., 1])).max()))
        check(moved, "qk_norm=%s: the gains move under training (lr 0.05)" % what.split(":")[0])
        check(worst <= 1 + 1e-5, "qk_norm=%s g_q g_k bounds |logit| at every step and head (worst %.3f of it)"
              % (what, worst))
    # the gains a step used are the weights saved by the step before: extend the run by one step
    w = safetensors(os.path.join(learn, "step-0000003", "model.safetensors"))
    rc, _, err = run(tinylm, "train", "--resume", learn, "--data", os.path.join(work, "period7.txt"), "--steps", "4",
                     "--log-attn", "--threads", "2")
    check(rc == 0, "--log-attn with --resume", err[-300:])
    g = np.array(metrics(learn)[-1]["qk_gain_max"])
    want = np.array([[[np.abs(w["layers.%d.attn.q_norm.weight" % l][16 * h:16 * h + 16]).max(),
                       np.abs(w["layers.%d.attn.k_norm.weight" % l][16 * (h // 2):16 * (h // 2) + 16]).max()]
                      for h in range(4)] for l in range(2)])
    check(np.abs(want - 1).max() > 1e-3 and np.abs(g - want).max() < 1e-6,
          "qk_gain_max = max |gain| of each head's q / k slice of the weights the step used")
    # per-head QK-norm with the (1 + w) gain: at init w = 0, so every gain is 1
    one_p = train(tinylm, work, "onep", ["qk_norm=head", "norm_type=rmsnorm_1p"], ["--log-attn"])
    check(np.allclose(np.array(metrics(one_p)[0]["qk_gain_max"]), 1.0), "rmsnorm_1p: gains are 1 + w (1 at init)")


if __name__ == "__main__":
    sys.exit(main([test_log_attn]))
