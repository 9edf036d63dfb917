#!/usr/bin/env python3
"""test_compare.py — `tinylm compare A B` (docs/compare.md).

- one model in several formats (llama2.c .bin, its Hugging Face export, its f32 GGUF export):
  no divergence, KL 0, every top-1 the same; against its q8_0 GGUF export: small differences
  from the embedding on, a small KL, and no convention named as the cause (the search finds none)
- errors: different architectures, missing tokens, one argument only

usage: test_compare.py --tinylm PATH --work DIR"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import STORIES, TOK512, check, main, run  # noqa: E402

import tinylm_ref  # noqa: E402  (tests/reference, put on the path by harness)

PROMPT = "Once upon a time, there was a little dog"


def compare(T, a, b, *more, json_out="c.json"):
    """(exit code, report dict or None, stdout, stderr)"""
    if os.path.exists(json_out):
        os.remove(json_out)
    rc, out, err = run(T, "compare", a, b, "--json", json_out, *more)
    rep = None
    if rc == 0 and os.path.exists(json_out):
        with open(json_out) as f:
            rep = json.load(f)
    return rc, rep, out, err


def first(rep):
    return rep["first_divergence"]["name"] if rep and rep["first_divergence"] else None


def cause(rep):
    s = rep and rep["search"]
    return s["cause"]["id"] if s and s["cause"] else None


# ---------------------------------------------------------------- one model, several formats

def test_formats(T, work):
    hf = os.path.join(work, "stories_hf")
    rc, _, err = run(T, "export", "--model", STORIES, "--tokenizer", TOK512, "--out", hf)
    check(rc == 0, "export stories260K as a Hugging Face directory", err)
    g32, g8 = os.path.join(work, "s32.gguf"), os.path.join(work, "s8.gguf")
    for path, typ in ((g32, "f32"), (g8, "q8_0")):
        rc, _, err = run(T, "export", "--model", STORIES, "--tokenizer", TOK512, "--format", "gguf", "--type", typ,
                         "--out", path)
        check(rc == 0, "export stories260K as GGUF %s" % typ, err)
    tok = ["--tokenizer", TOK512, "--prompt", PROMPT]
    for what, b in (("itself", STORIES), ("its HF export", hf), ("its f32 GGUF export", g32)):
        rc, rep, out, err = compare(T, STORIES, b, *tok)
        ok = rc == 0 and rep is not None
        check(ok and rep["first_divergence"] is None and rep["search"] is None,
              "stories260K.bin vs %s: no divergence, no search" % what, err or out[-400:])
        if not ok:
            continue
        pts = rep["points"]
        check(len(pts) > 100 and pts[0]["name"] == "hook_embed" and pts[-1]["name"] == "logits"
              and all(p["max_rel"] <= 1e-6 and p["cosine"] > 0.999999 for p in pts),
              "  %d points from hook_embed to logits, each within 1e-6" % len(pts))
        o = rep["output"]
        check(o["kl_max"] <= 1e-9 and o["top1_agree"] == o["positions"] == len(rep["tokens"]),
              "  KL 0 and every top-1 the same", str(o))
        check("no divergence" in out, "  the text says: no divergence", out[-300:])
    # quantized: differences from the embedding on, a small KL, no false cause
    rc, rep, out, err = compare(T, STORIES, g8, *tok, "--html", "q8.html")
    ok = rc == 0 and rep is not None
    check(ok and first(rep) == "hook_embed", "stories260K vs its q8_0 export: diverges (beyond 1e-3) at hook_embed",
          err or str(first(rep)))
    if ok:
        o = rep["output"]
        check(0 < o["kl_mean"] < 1e-3 and o["top1_agree"] >= o["positions"] - 1,
              "  KL(A||B) small but not 0 (%.2e), top-1 agreement %d/%d" % (o["kl_mean"], o["top1_agree"],
                                                                           o["positions"]), str(o))
        check(all(p["cosine"] > 0.999 and p["max_rel"] < 0.1 for p in rep["points"]),
              "  every point within 10% (relative) and cosine > 0.999")
        s = rep["search"]
        check(s is not None and s["cause"] is None and s["n_matched"] == 0 and "no single change" in out,
              "  the convention search names no cause", out[-600:])
        check("Q8_0" in rep["note"], "  the note names the quantized matrices", rep.get("note", ""))
        html = open("q8.html", encoding="utf-8").read()
        check("<script" not in html and "First divergence" in html and "hook_embed" in html and "Per layer" in html,
              "  --html: a page without script, the first divergence, the per-layer table")
    rc, rep, out, err = compare(T, STORIES, g8, *tok, "--tol", "0.1")
    check(rc == 0 and rep and rep["first_divergence"] is None and rep["search"] is None,
          "  with --tol 0.1: no divergence", err)


# ---------------------------------------------------------------- small random models

BASE = {"model_type": "tinylm", "vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 48,
        "max_position_embeddings": 64, "tie_word_embeddings": False}
TOKENS = [3, 17, 5, 60, 22, 9, 41, 0, 33]


def make_model(work, name, cfg, params=None, seed=0):
    """a tinylm model directory; params None: tinylm_ref.random_params(cfg, seed)"""
    d = os.path.join(work, name)
    if params is None:
        params = tinylm_ref.random_params(cfg, seed)
    tinylm_ref.save(d, cfg, params)
    return d, params


def test_errors(T, work):
    a, _ = make_model(work, "err_a", BASE)
    b, _ = make_model(work, "err_b", dict(BASE, hidden_size=48))
    ids = ",".join(map(str, TOKENS))
    rc, _, out, err = compare(T, a, b, "--tokens", ids)
    check(rc == 1 and "different architectures" in err and "hidden_size 32 vs 48" in err,
          "different architectures are refused, naming the size", err.strip())
    rc, _, out, err = compare(T, a, a)
    check(rc == 2 and "--tokens" in err, "no tokens: a usage error", err.strip())
    rc, out, err = run(T, "compare", a)
    check(rc == 2 and "two models" in err, "one argument: a usage error", err.strip())
    rc, _, out, err = compare(T, a, os.path.join(work, "nothing_here"), "--tokens", ids)
    check(rc == 1 and "nothing_here" in err, "a missing B is named", err.strip())
    rc, _, out, err = compare(T, a, a, "--tokens", "1,2,999")
    check(rc == 1 and "999" in err, "a token outside the vocabulary is named", err.strip())


if __name__ == "__main__":
    sys.exit(main([test_formats, test_errors]))
