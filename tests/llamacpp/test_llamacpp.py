#!/usr/bin/env python3
"""test_llamacpp.py — llama.cpp as the oracle of tinylm's GGUF export. tinylm exports stories260K
(llama2.c checkpoint + tok512.bin) and a random 4-layer GQA llama whose attention is far from
uniform; llama.cpp (the prebuilt CPU build of node-llama-cpp 3.21.1, run by llamacpp_oracle.mjs with
flash attention off and an F32 KV cache) loads each file and must

  (a) tokenize text as `tinylm tokenize` does (BOS, the dummy-prefix space, byte fallback),
  (b) continue the prompt greedily with tinylm's text (`tinylm generate --temperature 0
      --precision fp32`),
  (c) give the log-probabilities of the whole vocabulary at the first 32 positions (prompt +
      greedy continuation) within 1e-4 of tinylm's (`tinylm logits` -> .npy) on the f32 export,
      both through its prompt path (one batch) and its one-token decoding steps,
  (d) the same on the q8_0, q4_0 and q4_k exports within a bound measured here (TOL below): llama.cpp
      rounds the activations to 8 bits per block for its integer dot products (tinylm multiplies
      the weights' exact values by f32 activations), so they differ by more than on f32 files
      (greedy texts: equal, or parting only at a near tie),
  (e) on the random model too (d 256, 8 query heads sharing 2 key/value heads, attention far from
      uniform, rows that are whole K-type blocks).

Whose numerics a difference is: both engines are compared with a float64 NumPy forward of the
file's decoded weights (test_gguf_model.py's independent reader), and llama.cpp with the same
forward rounding each product's activations as ggml's CPU kernels do (Q8_0 / Q8_K), which it
must match to 1e-5 on most of 16 short sequences: then tinylm and llama.cpp read every block
alike, and the whole quantized-file difference is llama.cpp's activation rounding.

Skips (exit 77) when Node.js is absent or older than node-llama-cpp needs (Debian 12's nodejs is
18; node-llama-cpp 3.21.1 needs >= 20), or when tests/llamacpp/node_modules is not installed
(`npm ci --prefix tests/llamacpp --omit=optional --no-audit --no-fund`, which .ci/run does).
About 20 s on 2 cores.

usage: test_llamacpp.py --tinylm PATH --work DIR"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "cli"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "model"))
from harness import STORIES, TOK512, check, main, run  # noqa: E402
from test_gguf_model import matrix, read_gguf  # noqa: E402

ORACLE = os.path.join(HERE, "llamacpp_oracle.mjs")
NLC = os.path.join(HERE, "node_modules", "node-llama-cpp")
PROMPT = "Once upon a time, there was a little girl"
N_NEW, POSITIONS = 40, 32
N_SHORT, SHORT_LEN = 16, 4  # short random sequences on which llama.cpp's rounding is emulated
# texts whose tokenization must agree: plain, the dummy prefix with leading, doubled and trailing
# spaces, byte fallback (a code point without a piece, an emoji of four <0xNN> pieces), newlines
TEXTS = [PROMPT, "  two  spaces ", "Hello wörld \U0001F600!", "Tom said: \"no.\"\nThe end.\n", "x"]

# max |log p(llama.cpp) - log p(tinylm)| over the whole vocabulary at the first 32 positions, both of
# llama.cpp's paths. f32: the 1e-4; measured 2.0e-5 (stories260K, whose logits reach 22) and
# 1.7e-5 (the random model); llama.cpp is within 9e-6, tinylm within 1.8e-5 of a float64 forward.
# Quantized files, measured (Zen 4 backend, 1 thread):
#   stories260K q8_0 0.33, q4_0 0.27;  random model q8_0 0.24, q4_0 0.26, q4_k 0.34
# (0.18 .. 0.32 on the tokens with p > e^-10). That is llama.cpp's rounding of the activations to 8
# bits per block in every product (Q8_0 / Q8_K, a step of 1/127 of the block's largest |x|), not the
# weights' rounding, which both engines share: tinylm stays within 2e-5 of the float64 forward on the
# decoded weights, and the same forward with the activations rounded as ggml rounds them is llama.cpp
# to 1e-5 (checked below). Hence one bound for the three types, about twice the largest measured:
# an error in the blocks, scales or row order moves log-probabilities by whole units.
TOL = {"f32": 1e-4, "q8_0": 0.75, "q4_0": 0.75, "q4_k": 0.75}


def skip(msg):
    print("SKIP test_llamacpp: " + msg)
    sys.exit(77)


def requirements():
    """exits 77 (with the reason) unless node and the pinned node-llama-cpp can run here"""
    node = shutil.which("node")
    if not node:
        skip("Node.js is not on PATH (apt-get install nodejs npm; node-llama-cpp 3.21.1 needs Node.js >= 20)")
    try:
        meta = json.load(open(os.path.join(NLC, "package.json")))
    except OSError:
        skip("node-llama-cpp is not installed in tests/llamacpp/node_modules "
             "(npm ci --prefix tests/llamacpp --omit=optional --no-audit --no-fund)")
    v = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    m = re.match(r"v(\d+)", v)
    need = re.match(r">=\s*(\d+)", meta.get("engines", {}).get("node", ""))
    if not m or (need and int(m.group(1)) < int(need.group(1))):
        skip("node-llama-cpp %s needs Node.js %s; this is Node.js %s (Debian 12's nodejs is 18: install "
             "Node.js 20 or later, e.g. NodeSource's package)"
             % (meta.get("version"), meta.get("engines", {}).get("node"), v or "unknown"))
    return node


NODE = None


def oracle(work, model, *args):
    """(llamacpp_oracle.mjs's JSON as a dict, "") or (None, what went wrong)"""
    out = os.path.join(work, os.path.basename(model) + ".oracle.json")
    p = subprocess.run([NODE, ORACLE, model, "--out", out, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=300)
    if p.returncode != 0:
        return None, (p.stdout + p.stderr).decode("utf-8", "replace")[-2000:]
    return json.load(open(out)), ""


def export(tinylm, model, typ, out):
    return run(tinylm, "export", "--model", model, "--tokenizer", TOK512, "--format", "gguf", "--type", typ,
               "--out", out, "--threads", "1")


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def tinylm_logprobs(tinylm, work, model, ids):
    out = os.path.join(work, "tl.npy")
    rc, _, err = run(tinylm, "logits", "--model", model, "--ids", " ".join(map(str, ids)), "--out", out,
                     "--threads", "1")
    return (log_softmax(np.load(out)) if rc == 0 else None), err


def as_array(rows):
    return np.array([[np.nan if v is None else v for v in r] for r in rows], dtype=np.float64)


def tokenize(tinylm, tok, text, bos=False):
    rc, out, _ = run(tinylm, "tokenize", "--tokenizer", tok, "--text", text, *(["--bos"] if bos else []))
    return [int(t) for t in out.split()] if rc == 0 else None


# ggml's CPU kernels multiply a quantized matrix by activations quantized too, to the block type
# the weight type pairs with (ggml's vec_dot_type): Q8_0 for Q8_0 / Q4_0 / Q5_0 weights, Q8_K for the K
# types (the format definitions: Q8_0 = blocks of 32 with d = amax / 127 stored as f16 and
# q = round(x / d); Q8_K = blocks of 256 with d = -max / 127 in f32, max the value of largest |x|,
# q = min(127, round(x / d))). tinylm multiplies the weights' exact values by f32 activations.
ACT_Q8_0 = {2, 6, 8}  # q4_0, q5_0, q8_0
ACT_Q8_K = {12, 13, 14}  # q4_k, q5_k, q6_k


def round_activations(h, wtype):
    """h [T, n] as llama.cpp's CPU backend quantizes it for a product with weights of wtype (f32
    arithmetic as there; round half to even as its AVX code does)"""
    if wtype not in ACT_Q8_0 and wtype not in ACT_Q8_K:
        return h
    x = np.asarray(h, dtype=np.float32)
    if wtype in ACT_Q8_0:
        b = x.reshape(x.shape[0], -1, 32)
        amax = np.abs(b).max(-1, keepdims=True)
        d = (amax / np.float32(127)).astype(np.float16).astype(np.float64)
        inv = np.where(amax > 0, np.float32(127) / np.where(amax > 0, amax, 1), 0).astype(np.float32)
        return (np.rint(b * inv) * d).reshape(h.shape)
    b = x.reshape(x.shape[0], -1, 256)
    mx = np.take_along_axis(b, np.abs(b).argmax(-1)[..., None], -1)
    iscale = np.where(mx != 0, np.float32(-127) / np.where(mx != 0, mx, 1), 0).astype(np.float32)
    d = np.where(iscale != 0, np.float32(1) / np.where(iscale != 0, iscale, 1), 0).astype(np.float32)
    return (np.minimum(127, np.rint(b * iscale)) * d.astype(np.float64)).reshape(h.shape)


def forward(W, kv, ids, emulate):
    """float64 logits [T, V] of llama.cpp's llama on W, the file's decoded weights ({name: (type,
    values)}, test_gguf_model's reader); emulate: with each product's activations rounded as ggml's
    CPU kernels round them"""
    d, L = kv["llama.embedding_length"], kv["llama.block_count"]
    H, KV = kv["llama.attention.head_count"], kv["llama.attention.head_count_kv"]
    hd, eps, theta = d // H, kv["llama.attention.layer_norm_rms_epsilon"], kv["llama.rope.freq_base"]
    T = len(ids)

    def mm(h, name):
        t, w = W[name]
        return (round_activations(h, t) if emulate else h) @ w.T

    def norm(x, name):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * W[name][1].reshape(-1)

    ang = np.arange(T)[:, None] * theta ** (-np.arange(0, hd, 2) / hd)[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def rope(x):  # [T, heads, hd], pairs (2i, 2i+1) (rope mode 0)
        out = np.empty_like(x)
        out[..., 0::2] = x[..., 0::2] * cos - x[..., 1::2] * sin
        out[..., 1::2] = x[..., 0::2] * sin + x[..., 1::2] * cos
        return out

    x = W["token_embd.weight"][1][ids]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for layer in range(L):
        p = "blk.%d.%%s.weight" % layer
        h = norm(x, p % "attn_norm")
        q = rope(mm(h, p % "attn_q").reshape(T, H, hd))
        k = np.repeat(rope(mm(h, p % "attn_k").reshape(T, KV, hd)), H // KV, axis=1)
        v = np.repeat(mm(h, p % "attn_v").reshape(T, KV, hd), H // KV, axis=1)
        s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(hd) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        x = x + mm(np.einsum("hqk,khd->qhd", s, v).reshape(T, d), p % "attn_output")
        h = norm(x, p % "ffn_norm")
        g, u = mm(h, p % "ffn_gate"), mm(h, p % "ffn_up")
        x = x + mm(g / (1 + np.exp(-g)) * u, p % "ffn_down")
    return mm(norm(x, "output_norm.weight"), "output.weight" if "output.weight" in W else "token_embd.weight")


def greedy_check(tinylm, path, lc, text, rc, tl, tol, exact):
    """(ok, detail). tl: tinylm's log-probabilities on llama.cpp's prompt + greedy tokens. Up to the
    first token where tinylm's argmax differs from llama.cpp's choice the two greedy runs are the
    same: tinylm's text must begin with that common part, and there tinylm's best and llama.cpp's
    token must be a near tie (within tol); exact: there is no such token and the texts are equal"""
    n0 = len(lc["prompt"]) - 1
    part = next((k for k, tok in enumerate(lc["generated"]) if int(np.argmax(tl[n0 + k])) != tok), None)
    if part is None:
        return rc == 0 and lc["text"] == text and len(lc["generated"]) == N_NEW and not lc["eog"], \
            "tinylm's argmax is llama.cpp's token everywhere, but the texts differ"
    margin = float(tl[n0 + part].max() - tl[n0 + part][lc["generated"][part]])
    common = (lc["prompt"] + lc["generated"])[1:n0 + 1 + part]
    prc, prefix, _ = run(tinylm, "tokenize", "--tokenizer", path, "--decode", " ".join(map(str, common)))
    # (a cut inside a UTF-8 sequence decodes to U+FFFD at the end of the prefix)
    prefix = (prefix[:-1] if prefix.endswith("\n") else prefix).rstrip("\ufffd")
    return (not exact and rc == 0 and prc == 0 and text.startswith(prefix) and margin < tol), \
        "they part at generated token %d, where tinylm's top log p exceeds llama.cpp's token's by %.3g; " \
        "tinylm's text begins with the common %d tokens: %s" % (part, margin, len(common), text.startswith(prefix))


def compare_file(tinylm, work, path, label, typ, measured):
    """checks (b)-(d) on one GGUF file"""
    tol = TOL[typ]
    rng = np.random.default_rng(3)
    short = [[1] + [int(t) for t in rng.integers(3, 512, SHORT_LEN - 1)] for _ in range(N_SHORT if typ != "f32" else 0)]
    lc, err = oracle(work, path, "--text", PROMPT, "-n", str(N_NEW), "--positions", str(POSITIONS),
                     *[a for ids in short for a in ("--also-ids", " ".join(map(str, ids)))])
    if not check(lc is not None, "%s: llama.cpp loads and runs tinylm's export" % label, err):
        return
    check(lc["flash_attention"] is False and lc["kv_cache"] == ["F32", "F32"],
          "  with flash attention off and an F32 KV cache (%s backend)" % lc.get("cpu_backend"), str(lc["kv_cache"]))
    check(lc["prompt"] == tokenize(tinylm, path, PROMPT, bos=True), "  its prompt is tinylm's tokens, BOS first",
          str(lc["prompt"]))
    seq = lc["prompt"] + lc["generated"]
    tl, err = tinylm_logprobs(tinylm, work, path, seq)
    if not check(tl is not None and len(seq) >= POSITIONS, "  tinylm's logits of llama.cpp's %d tokens" % len(seq),
                 err):
        return
    # (b) the greedy text, in tinylm's reference numerics (`logits` computes in them; generate's auto
    # precision would run a quantized file's prompt on bf16 products where the CPU has them)
    rc, text, err = run(tinylm, "generate", "--model", path, "--prompt", PROMPT, "-n", str(N_NEW), "--temperature", "0",
                        "--precision", "fp32", "--threads", "1")
    text = text[:-1] if text.endswith("\n") else text
    ok, why = greedy_check(tinylm, path, lc, text, rc, tl, tol, typ == "f32")
    same = lc["text"] == text
    check(ok, "  (b) llama.cpp's greedy text (%d tokens) is tinylm's%s" % (
        N_NEW, "" if same else ", up to a near tie (%s)" % why),
        "%s\n    llama.cpp: %r\n    tinylm:    %r %s" % (why, lc["text"], text, err[-300:]))
    # (c)/(d) the log-probabilities of the whole vocabulary at the first POSITIONS positions
    tl = tl[:POSITIONS]
    batch = as_array(lc["batch"]["logprobs"])
    dec_pos = [p for p in lc["decode"]["positions"] if p < POSITIONS]
    dec = as_array(lc["decode"]["logprobs"])[:len(dec_pos)]
    # llama.cpp's float32 probabilities underflow to 0 (null here) below e^-103: only where tinylm's are tiny too
    under = np.isnan(batch)
    check(batch.shape == tl.shape and lc["batch"]["ids"] == seq[:POSITIONS] and not (under & (tl > -80)).any(),
          "  llama.cpp gives all %d x %d log-probabilities (%d underflow, where tinylm's < -80)"
          % (tl.shape + (int(under.sum()),)), str(batch.shape))
    d_batch = float(np.nanmax(np.abs(batch - tl)))
    d_dec = float(np.nanmax(np.abs(dec - tl[dec_pos])))
    likely = tl > -10
    d_likely = float(np.nanmax(np.abs(batch - tl)[likely]))
    check(d_batch < tol, "  (%s) log p over the vocabulary, %d positions in one batch: max |diff| %.2g < %.2g"
          % ("c" if typ == "f32" else "d", POSITIONS, d_batch, tol))
    check(len(dec_pos) > 1 and d_dec < tol, "  and in llama.cpp's one-token decoding steps (positions %d..%d): %.2g"
          % (dec_pos[0], dec_pos[-1], d_dec))
    # whose numerics: a float64 forward of the file's decoded weights, and the same with the activations
    # rounded as ggml rounds them
    _, kv, tensors = read_gguf(path)
    W = {n: matrix(tensors, n) for n in tensors}
    ids = seq[:POSITIONS]
    ref = log_softmax(forward(W, kv, ids, False))
    e_tl, e_lc = float(np.abs(tl - ref).max()), float(np.nanmax(np.abs(batch - ref)))
    check(e_tl < 1e-4, "  tinylm is within %.2g of a float64 forward of the file's weights (llama.cpp %.2g)"
          % (e_tl, e_lc))
    e_emu = None
    if typ != "f32":
        per_pos = np.nanmax(np.abs(batch - log_softmax(forward(W, kv, ids, True))), axis=1)
        # llama.cpp computes exactly that, but for rounding decisions that sit within f32 noise of a
        # tie (an activation at n + 1/2 steps, a block scale halfway between two f16 values): one
        # that goes the other way moves its position, and through attention the later ones, by up
        # to ~0.1. So: most of the short sequences (where such a tie is less likely) agree to 1e-5
        clean = sum(float(np.nanmax(np.abs(as_array(a["logprobs"]) - log_softmax(forward(W, kv, a["ids"], True)))))
                    < 1e-5 for a in lc["also"])
        e_emu = (float(np.median(per_pos)), float(per_pos.max()), int((per_pos < 1e-5).sum()), clean)
        check(clean >= N_SHORT // 2 and len(lc["also"]) == N_SHORT,
              "  llama.cpp is a float64 forward rounding activations as ggml does: within 1e-5 on %d of %d "
              "%d-token sequences, at %d of the %d positions above (max %.2g)"
              % (clean, N_SHORT, SHORT_LEN, e_emu[2], POSITIONS, e_emu[1]))
    measured.append((label, max(d_batch, d_dec), d_likely, e_tl, e_lc, e_emu))


def make_random_llama2c(path):
    """a random llama2.c checkpoint where attention matters: d 256, 4 layers, 8 query heads of 32
    sharing 2 key/value heads (GQA 4:1), hidden 768 (rows are whole 256-blocks: K types apply),
    a separate classifier whose BOS and EOS rows are zero (greedy decoding never stops). q and k
    weights of std 0.1 on unit-RMS inputs give attention scores q.k/sqrt(32) of std 2.6 in every
    layer: a row's largest weight averages 0.5 and its entropy is half the uniform one, so attention
    (RoPE, the GQA sharing) decides the output. Logits have std ~2.4, far from float32 underflow."""
    rng = np.random.default_rng(24)
    dim, hidden, L, nh, nkv, vocab, seq = 256, 768, 4, 8, 2, 512, 128
    kvd = nkv * dim // nh
    parts = [rng.normal(0, 1.0, (vocab, dim))]
    for shape, std in (((dim,), None), ((dim, dim), 0.1), ((kvd, dim), 0.1), ((kvd, dim), 0.06),
                       ((dim, dim), 0.06), ((dim,), None), ((hidden, dim), 0.06), ((dim, hidden), 0.04),
                       ((hidden, dim), 0.06)):
        for _ in range(L):
            parts.append(1 + 0.1 * rng.normal(size=shape) if std is None else rng.normal(0, std, shape))
    head = rng.normal(0, 0.15, (vocab, dim))
    head[1] = head[2] = 0
    parts += [np.ones(dim), np.zeros(seq * dim // nh), head]
    with open(path, "wb") as f:
        f.write(struct.pack("<7i", dim, hidden, L, nh, nkv, -vocab, seq))  # vocab < 0: separate classifier
        for a in parts:
            f.write(np.asarray(a, dtype="<f4").tobytes())


def test_tokenizer(tinylm, work):
    """(a): llama.cpp's SentencePiece tokenizer on the exported vocabulary and tinylm's"""
    path = os.path.join(work, "stories_f32.gguf")
    rc, _, err = export(tinylm, STORIES, "f32", path)
    if not check(rc == 0, "export stories260K --format gguf --type f32", err):
        return
    args = [a for t in TEXTS for a in ("--tokenize", t)]
    lc, err = oracle(work, path, *args)
    if not check(lc is not None, "llama.cpp tokenizes with the exported vocabulary", err):
        return
    check(lc["add_bos"] is True and lc["bos"] == 1 and lc["eos"] == 2, "  it adds BOS (1) as tinylm does; EOS is 2",
          str((lc["add_bos"], lc["bos"], lc["eos"])))
    for item in lc["tokenizations"]:
        ours = tokenize(tinylm, path, item["text"])
        check(ours == item["tokens"], "  (a) %-40r the same %d tokens" % (item["text"], len(item["tokens"])),
              "llama.cpp %s, tinylm %s" % (item["tokens"], ours))


def test_exports(tinylm, work):
    random_bin = os.path.join(work, "random.bin")
    make_random_llama2c(random_bin)
    measured = []
    # stories260K's rows (64, 172) are not whole 256-blocks: its q4_k export would be q5_0, so the
    # K type is checked on the random model only
    for model, name, types in ((STORIES, "stories260K", ("f32", "q8_0", "q4_0")),
                               (random_bin, "random GQA llama", ("f32", "q8_0", "q4_0", "q4_k"))):
        for typ in types:
            path = os.path.join(work, "%s_%s.gguf" % (os.path.basename(model).split(".")[0], typ))
            if model == STORIES and typ == "f32" and os.path.exists(os.path.join(work, "stories_f32.gguf")):
                path = os.path.join(work, "stories_f32.gguf")
            elif not check(export(tinylm, model, typ, path)[0] == 0, "export %s --type %s" % (name, typ)):
                continue
            compare_file(tinylm, work, path, "%s %s" % (name, typ), typ, measured)
    print("max |log p| differences, the whole vocabulary at the first %d positions (both paths):" % POSITIONS)
    for label, d, d_likely, e_tl, e_lc, e_emu in measured:
        print("  %-22s llama.cpp - tinylm %.2g (%.2g where p > e^-10); vs a float64 forward: tinylm %.2g, "
              "llama.cpp %.2g%s"
              % (label, d, d_likely, e_tl, e_lc, "" if e_emu is None else
                 "; llama.cpp vs that forward with ggml's activation rounding: median %.2g, max %.2g, %d/16 short "
                 "sequences within 1e-5" % (e_emu[0], e_emu[1], e_emu[3])))


if __name__ == "__main__":
    NODE = requirements()
    sys.exit(main([test_tokenizer, test_exports]))
