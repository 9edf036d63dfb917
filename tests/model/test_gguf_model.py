#!/usr/bin/env python3
"""test_gguf_model.py — GGUF files through the whole program: `tinylm export --format gguf` of
stories260K (llama2.c checkpoint + tok512.bin) in every type it writes, read back by an
independent GGUF reader written here from the spec (header, metadata, tensor infos, alignment,
the block layouts of Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q4_K / Q5_K / Q6_K decoded in NumPy), then
run by tinylm: the f32 export computes the checkpoint's logits bit for bit, each quantized one
within its format's rounding of the weights; GGUF -> tinylm -> GGUF keeps every tensor's bytes;
the tokenizer in the file's metadata encodes as tok512.bin does; malformed files are refused by
name.

usage: test_gguf_model.py --tinylm PATH --work DIR"""
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cli"))
from harness import STORIES, TOK512, check, main, run  # noqa: E402

PROMPT = "Once upon a time, there was a little girl"

# ---------------------------------------------------------------- an independent GGUF reader

SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
# ggml type -> (block elements, block bytes)
BLOCKS = {0: (1, 4), 1: (1, 2), 30: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
          12: (256, 144), 13: (256, 176), 14: (256, 210)}
NAMES = {"f32": 0, "f16": 1, "bf16": 30, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "q4_k": 12,
         "q5_k": 13, "q6_k": 14}


def read_gguf(path):
    data = open(path, "rb").read()
    pos = [0]

    def take(fmt):
        v = struct.unpack_from(fmt, data, pos[0])
        pos[0] += struct.calcsize(fmt)
        return v[0]

    def string():
        n = take("<Q")
        s = data[pos[0]:pos[0] + n]
        pos[0] += n
        return s.decode("utf-8", "surrogateescape")

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("<I"), take("<Q")
            return [value(et) for _ in range(n)]
        return take(SCALARS[t])

    assert data[:4] == b"GGUF", "magic"
    pos[0] = 4
    version, n_tensors, n_kv = take("<I"), take("<Q"), take("<Q")
    kv = {}
    for _ in range(n_kv):
        k = string()
        kv[k] = value(take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        nd = take("<I")
        ne = [take("<Q") for _ in range(nd)]
        infos.append((name, ne, take("<I"), take("<Q")))
    align = kv.get("general.alignment", 32)
    start = (pos[0] + align - 1) // align * align
    tensors = {}
    for name, ne, t, off in infos:
        be, bb = BLOCKS[t]
        nbytes = int(np.prod(ne)) // be * bb
        assert off % align == 0 and start + off + nbytes <= len(data), name
        tensors[name] = (t, ne, data[start + off:start + off + nbytes])
    return version, kv, tensors


def f16(b):
    return np.frombuffer(b, dtype="<f2").astype(np.float64)


def k_scales(sc):  # Q4_K / Q5_K: 8 (scale, min) pairs of 6 bits packed in 12 bytes, per block: [blocks, 12]
    sc = sc.astype(np.int64)
    s, m = np.zeros((len(sc), 8), np.int64), np.zeros((len(sc), 8), np.int64)
    for j in range(8):
        if j < 4:
            s[:, j], m[:, j] = sc[:, j] & 63, sc[:, j + 4] & 63
        else:
            s[:, j] = (sc[:, j + 4] & 0xF) | ((sc[:, j - 4] >> 6) << 4)
            m[:, j] = (sc[:, j + 4] >> 4) | ((sc[:, j] >> 6) << 4)
    return s, m


def dequantize(t, raw, n):
    """the values n elements encode, from the format definitions (float64); blocks are decoded all at
    once, one row per block, so the file's rows may be passed together"""
    if t == 0:
        return np.frombuffer(raw, dtype="<f4").astype(np.float64)
    if t == 1:
        return f16(raw)
    if t == 30:
        return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    be, bb = BLOCKS[t]
    blk = np.frombuffer(raw, dtype=np.uint8, count=n // be * bb).reshape(n // be, bb)

    def f16s(a, b):  # the f16 at bytes [a, b) of each block, as a column
        return f16(blk[:, a:b].tobytes()).reshape(-1, 1)

    if t == 8:
        out = f16s(0, 2) * blk[:, 2:].copy().view(np.int8)
    elif t in (2, 3, 6, 7):
        d = f16s(0, 2)
        m = f16s(2, 4) if t in (3, 7) else 0.0
        o = 4 if t in (3, 7) else 2
        q = np.zeros((len(blk), 32), np.int64)
        if t in (6, 7):
            qh = blk[:, o:o + 4].copy().view("<u4").astype(np.int64)  # [blocks, 1]
            q = ((qh >> np.arange(32)) & 1) << 4
            o += 4
        qs = blk[:, o:o + 16].astype(np.int64)
        q = np.concatenate([qs & 0xF, qs >> 4], axis=1) | q
        off = {2: 8, 3: 0, 6: 16, 7: 0}[t]
        out = d * (q - off) + m
    elif t in (12, 13):
        d, dmin = f16s(0, 2), f16s(2, 4)
        s, mn = k_scales(blk[:, 4:16])
        qh = blk[:, 16:48].astype(np.int64) if t == 13 else None
        qs = (blk[:, 48:] if t == 13 else blk[:, 16:]).astype(np.int64)
        out = np.zeros((len(blk), 256))
        for j in range(4):  # 64 values: the low nibbles of 32 bytes, then their high nibbles
            chunk = qs[:, 32 * j:32 * (j + 1)]
            for half in range(2):
                q = (chunk & 0xF) if half == 0 else (chunk >> 4)
                if t == 13:
                    q = q + (((qh >> (2 * j + half)) & 1) << 4)
                sub = 2 * j + half
                out[:, 64 * j + 32 * half:64 * j + 32 * half + 32] = d * s[:, sub:sub + 1] * q - dmin * mn[:, sub:sub + 1]
    elif t == 14:
        ql, qh = blk[:, :128].astype(np.int64), blk[:, 128:192].astype(np.int64)
        sc = blk[:, 192:208].copy().view(np.int8).astype(np.int64)
        d = f16s(208, 210)
        out = np.zeros((len(blk), 256))
        i = np.arange(32) // 16  # the scale of each of the 32 positions k of a quarter
        for h in range(2):  # two halves of 128
            lo, hi, hh, s = ql[:, 64 * h:64 * h + 32], ql[:, 64 * h + 32:64 * h + 64], qh[:, 32 * h:32 * h + 32], \
                sc[:, 8 * h:8 * h + 8]
            q1 = ((lo & 0xF) | (((hh >> 0) & 3) << 4)) - 32
            q2 = ((hi & 0xF) | (((hh >> 2) & 3) << 4)) - 32
            q3 = ((lo >> 4) | (((hh >> 4) & 3) << 4)) - 32
            q4 = ((hi >> 4) | (((hh >> 6) & 3) << 4)) - 32
            base = 128 * h
            out[:, base:base + 32] = d * s[:, i] * q1
            out[:, base + 32:base + 64] = d * s[:, i + 2] * q2
            out[:, base + 64:base + 96] = d * s[:, i + 4] * q3
            out[:, base + 96:base + 128] = d * s[:, i + 6] * q4
    return out.reshape(-1)


def matrix(tensors, name):
    t, ne, raw = tensors[name]
    cols, rows = ne[0], (ne[1] if len(ne) > 1 else 1)
    return t, dequantize(t, raw, cols * rows).reshape(rows, cols)


def read_llama2c(path):
    """the f32 arrays of run.c's checkpoint, in GGUF names (q, k rows as stored: interleaved pairs)"""
    raw = open(path, "rb").read()
    dim, hidden, L, nh, nkv, vocab, seq = struct.unpack_from("<7i", raw, 0)
    f = np.frombuffer(raw, dtype="<f4", offset=28)
    V, hd, kvd = abs(vocab), dim // nh, nkv * (dim // nh)
    o = [0]

    def take(*shape):
        n = int(np.prod(shape))
        a = f[o[0]:o[0] + n].reshape(shape)
        o[0] += n
        return a

    w = {"token_embd.weight": take(V, dim)}
    for name, shape in (("attn_norm", (dim,)), ("attn_q", (dim, dim)), ("attn_k", (kvd, dim)),
                        ("attn_v", (kvd, dim)), ("attn_output", (dim, dim)), ("ffn_norm", (dim,)),
                        ("ffn_gate", (hidden, dim)), ("ffn_down", (dim, hidden)), ("ffn_up", (hidden, dim))):
        for layer in range(L):
            w["blk.%d.%s.weight" % (layer, name)] = take(*shape)
    w["output_norm.weight"] = take(dim)
    take(seq * hd)  # freq_cis
    if vocab < 0:
        w["output.weight"] = take(V, dim)
    return w, {"dim": dim, "hidden": hidden, "layers": L, "heads": nh, "kv_heads": nkv, "vocab": V, "seq": seq}


def llama_forward(tensors, kv, ids):
    """float64 logits [T, V] of llama.cpp's llama architecture on the file's decoded weights: RMSNorm
    (eps inside the sqrt), RoPE on interleaved pairs (2i, 2i+1) as rope mode 0 (the file's q/k row
    order), causal GQA attention, SwiGLU, final norm, the head (token_embd when output is absent)"""
    W = {n: matrix(tensors, n)[1] for n in tensors}
    d, L = kv["llama.embedding_length"], kv["llama.block_count"]
    H, KV = kv["llama.attention.head_count"], kv["llama.attention.head_count_kv"]
    hd, eps, theta = d // H, kv["llama.attention.layer_norm_rms_epsilon"], kv["llama.rope.freq_base"]
    T = len(ids)

    def norm(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w.reshape(-1)

    inv = theta ** (-np.arange(0, hd, 2) / hd)
    ang = np.arange(T)[:, None] * inv[None, :]
    cos, sin = np.cos(ang), np.sin(ang)

    def rope(x):  # [T, heads, hd], pairs (2i, 2i+1)
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = a * cos[:, None, :] - b * sin[:, None, :]
        out[..., 1::2] = a * sin[:, None, :] + b * cos[:, None, :]
        return out

    x = W["token_embd.weight"][ids]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for layer in range(L):
        p = lambda n: W["blk.%d.%s.weight" % (layer, n)]  # noqa: E731
        h = norm(x, p("attn_norm"))
        q = rope((h @ p("attn_q").T).reshape(T, H, hd))
        k = rope((h @ p("attn_k").T).reshape(T, KV, hd))
        v = (h @ p("attn_v").T).reshape(T, KV, hd)
        k, v = np.repeat(k, H // KV, axis=1), np.repeat(v, H // KV, axis=1)
        s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(hd) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        x = x + np.einsum("hqk,khd->qhd", s, v).reshape(T, d) @ p("attn_output").T
        h = norm(x, p("ffn_norm"))
        g, u = h @ p("ffn_gate").T, h @ p("ffn_up").T
        x = x + (g / (1 + np.exp(-g)) * u) @ p("ffn_down").T
    x = norm(x, W["output_norm.weight"])
    return x @ W.get("output.weight", W["token_embd.weight"]).T


def prompt_ids(tinylm):
    rc, out, err = run(tinylm, "tokenize", "--tokenizer", TOK512, "--text", PROMPT, "--bos")
    return [int(t) for t in out.split()] if rc == 0 else None


# ---------------------------------------------------------------- the tests

def export(tinylm, out, typ, model=STORIES, extra=()):
    args = ["export", "--model", model, "--format", "gguf", "--out", out]
    if typ:
        args += ["--type", typ]
    if model == STORIES:
        args += ["--tokenizer", TOK512]
    return run(tinylm, *args, *extra)


def logits(tinylm, model, out, *extra):
    rc, _, err = run(tinylm, "logits", "--model", model, "--prompt", PROMPT, "--out", out, *extra)
    return np.load(out) if rc == 0 else None, err


def test_f32_export(tinylm, work):
    path = os.path.join(work, "s_f32.gguf")
    rc, out, err = export(tinylm, path, "f32")
    if not check(rc == 0, "export --format gguf --type f32 of stories260K", err):
        return
    version, kv, tensors = read_gguf(path)
    ref, shape = read_llama2c(STORIES)
    check(version == 3 and kv["general.architecture"] == "llama", "the file is GGUF v3, architecture llama")
    meta = {"llama.embedding_length": shape["dim"], "llama.block_count": shape["layers"],
            "llama.feed_forward_length": shape["hidden"], "llama.attention.head_count": shape["heads"],
            "llama.attention.head_count_kv": shape["kv_heads"], "llama.context_length": shape["seq"]}
    check(all(kv.get(k) == v for k, v in meta.items()), "its metadata gives the checkpoint's shape",
          str({k: kv.get(k) for k in meta}))
    check(abs(kv["llama.attention.layer_norm_rms_epsilon"] - 1e-5) < 1e-12 and kv["llama.rope.freq_base"] == 10000.0,
          "eps 1e-5 and RoPE base 10000 (run.c's)")
    same = all(name in tensors and np.array_equal(matrix(tensors, name)[1].reshape(a.shape), a.astype(np.float64))
               for name, a in ref.items())
    check(same and len(tensors) == len(ref), "every tensor is the checkpoint's, bit for bit, q/k rows in run.c's "
          "interleaved order (llama.cpp's), %d tensors" % len(tensors))
    toks = kv.get("tokenizer.ggml.tokens", [])
    check(kv.get("tokenizer.ggml.model") == "llama" and len(toks) == 512 and toks[1] == "<s>" and
          toks[3] == "<0x00>" and kv["tokenizer.ggml.token_type"][3] == 6 and kv["tokenizer.ggml.bos_token_id"] == 1,
          "the tokenizer is in the metadata: 512 SentencePiece pieces, <s> = 1, byte pieces typed 6")
    check(any(t.startswith("\u2581") for t in toks), "spaces in pieces are U+2581 again (llama2.c wrote ' ')")

    a, e1 = logits(tinylm, STORIES, os.path.join(work, "ref.npy"), "--tokenizer", TOK512)
    b, e2 = logits(tinylm, path, os.path.join(work, "f32.npy"))
    check(a is not None and b is not None and np.array_equal(a, b),
          "the GGUF's logits equal the llama2.c checkpoint's bit for bit (%s)" % str(a.shape if a is not None else "-"),
          e1 + e2)
    ids = prompt_ids(tinylm)
    if b is not None and ids:
        ref_logits = llama_forward(tensors, kv, ids)
        diff = float(np.abs(ref_logits - b).max())
        check(diff < 1e-4, "and a float64 NumPy forward of the file (llama.cpp's llama, rope on pairs): max |diff| "
              "%.2g < 1e-4" % diff)
    rc1, t1, _ = run(tinylm, "generate", "--model", STORIES, "--tokenizer", TOK512, "--prompt", PROMPT, "-n", "40",
                     "--temperature", "0")
    rc2, t2, err = run(tinylm, "generate", "--model", path, "--prompt", PROMPT, "-n", "40", "--temperature", "0")
    check(rc1 == 0 and rc2 == 0 and t1 == t2 and len(t2) > len(PROMPT), "greedy text from the GGUF (its own "
          "tokenizer) is the checkpoint's", err)
    check("f32 weights" in err, "generate's timing line names the weights' type", err[-300:])
    rc1, o1, _ = run(tinylm, "tokenize", "--tokenizer", TOK512, "--text", "Hello wörld \U0001F600!", "--bos")
    rc2, o2, e = run(tinylm, "tokenize", "--tokenizer", path, "--text", "Hello wörld \U0001F600!", "--bos")
    check(rc1 == 0 and rc2 == 0 and o1 == o2, "the GGUF's tokenizer encodes as tok512.bin (byte fallback too)", o1 + o2 + e)

    again = os.path.join(work, "again.gguf")
    rc, _, err = export(tinylm, again, None, model=path)
    if check(rc == 0, "export of the GGUF again (--type keep)", err):
        _, kv2, t2 = read_gguf(again)
        check(set(t2) == set(tensors) and all(t2[n] == tensors[n] for n in tensors),
              "GGUF -> tinylm -> GGUF keeps every tensor: type, shape and bytes")
        check(kv2["tokenizer.ggml.tokens"] == toks and kv2["tokenizer.ggml.scores"] == kv["tokenizer.ggml.scores"] and
              kv2["tokenizer.ggml.token_type"] == kv["tokenizer.ggml.token_type"],
              "and the tokenizer's pieces, scores and types")


# max |error| of a weight of each type relative to its block's largest |value| (the format's own rounding)
# (Q8_0: d = amax/127, half a step; Q4_0 / Q5_0: d = -max/8 (/16) from the signed extreme, so the other
# extreme clips to 7/8 (15/16) of amax: a step; Q4_1 / Q5_1: half a step of range/15 (/31), range <= 2 amax;
# K types: half a sub-block step plus the 6-bit (Q6_K: 8-bit) rounding of its scale and minimum; + the f16
# rounding of the scales). F16 and BF16 are checked exactly against NumPy's round-to-nearest-even.
BOUND = {"q8_0": 0.5 / 127 + 1e-3, "q4_0": 1 / 8 + 1e-2, "q4_1": 1 / 15 + 1e-2, "q5_0": 1 / 16 + 1e-2,
         "q5_1": 1 / 31 + 1e-2, "q4_k": 0.15, "q5_k": 0.075, "q6_k": 0.03}


def bf16_round(w):
    b = np.asarray(w, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16
    return b.astype(np.uint32).view(np.float32).astype(np.float64)


def make_wide_llama2c(path):
    """a random llama2.c checkpoint whose rows are whole K-type blocks (d 256, hidden 512): stories260K's
    rows (64, 172) are not, so its K-type exports fall back"""
    rng = np.random.default_rng(7)
    dim, hidden, L, nh, nkv, vocab, seq = 256, 512, 2, 4, 2, 512, 64
    kvd = nkv * dim // nh
    parts = [rng.normal(0, 0.5, (vocab, dim))]
    for shape in ((dim,), (dim, dim), (kvd, dim), (kvd, dim), (dim, dim), (dim,), (hidden, dim), (dim, hidden),
                  (hidden, dim)):
        for _ in range(L):
            parts.append(1 + 0.1 * rng.normal(size=shape) if len(shape) == 1 else rng.normal(0, 0.05, shape))
    parts += [np.ones(dim), np.zeros(seq * dim // nh)]
    with open(path, "wb") as f:
        f.write(struct.pack("<7i", dim, hidden, L, nh, nkv, vocab, seq))
        for a in parts:
            f.write(np.asarray(a, dtype="<f4").tobytes())


def test_typed_exports(tinylm, work):
    wide = os.path.join(work, "wide.bin")
    make_wide_llama2c(wide)
    for model, label in ((STORIES, "stories260K"), (wide, "a d-256 llama")):
        check_typed_exports(tinylm, work, model, label)


def check_typed_exports(tinylm, work, model, label):
    ref, shape = read_llama2c(model)
    a, _ = logits(tinylm, model, os.path.join(work, "ref_t.npy"), "--tokenizer", TOK512)
    for typ in ("f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"):
        path = os.path.join(work, "%s_%s.gguf" % (os.path.basename(model), typ))
        rc, out, err = export(tinylm, path, typ, model=model, extra=("--tokenizer", TOK512) if model != STORIES else ())
        typ_label = "%s --type %s" % (label, typ)
        if not check(rc == 0, "export %s" % typ_label, err):
            continue
        _, kv, tensors = read_gguf(path)
        want = NAMES[typ]
        fallback = NAMES.get({"q4_k": "q5_0", "q5_k": "q5_1", "q6_k": "q8_0"}.get(typ, typ))
        types = {tensors[n][0] for n in tensors if len(tensors[n][1]) == 2}
        # stories260K's rows are 64 or 172 wide: K-type blocks of 256 do not fit, 32-blocks fit 64
        ok_types = types <= {want, fallback, 0} and (model == STORIES or types == {want})
        check(ok_types and all(tensors[n][0] == 0 for n in tensors if len(tensors[n][1]) == 1),
              "  matrices are %s (or the fallback where rows are not whole blocks), vectors F32" % typ, str(types))
        worst = 0.0
        for name, w in ref.items():
            if w.ndim != 2:
                continue
            t, got = matrix(tensors, name)
            be = BLOCKS[t][0]
            if t in (0, 1, 30):  # exact: f32 as it is, f16 / bf16 rounded to nearest even
                exact = w.astype(np.float64) if t == 0 else \
                    w.astype(np.float16).astype(np.float64) if t == 1 else bf16_round(w)
                err_rel = 0.0 if np.array_equal(got, exact) else float("inf")
            else:
                blocks = w.reshape(w.shape[0], -1, be)
                scale = np.abs(blocks).max(axis=2, keepdims=True) + 1e-30
                err_rel = float((np.abs(got.reshape(blocks.shape) - blocks) / scale).max())
            inv = {v: k for k, v in NAMES.items()}
            bound = BOUND.get(inv.get(t, ""), 0.0)
            if err_rel > bound:
                worst = max(worst, err_rel)
                check(False, "  %s (%s) within its format's rounding" % (name, inv.get(t)), "%.3g > %.3g" % (err_rel, bound))
                break
        else:
            check(True, "  every weight decodes (NumPy, from the format) within its type's rounding of the f32 value")
        b, err = logits(tinylm, path, os.path.join(work, "l_%s.npy" % typ))
        if check(b is not None, "  tinylm runs it", err):
            # what the file's weights compute (NumPy decodes them from the format definitions): tinylm's
            # kernels multiply exactly those values, in f32
            ref_logits = llama_forward(tensors, kv, prompt_ids(tinylm))
            diff = float(np.abs(ref_logits - b).max()) / max(1.0, float(np.abs(ref_logits).max()))
            check(diff < 2e-5, "  its logits are a float64 forward's on the decoded weights: max |diff| / max |logit| "
                  "%.2g < 2e-5" % diff)
            check(not np.array_equal(a, b), "  (and differ from the f32 ones: the weights were rounded)")
            # three tokens go through the matrix-vector kernels (a decoding step's), not the GEMM tiles
            ids3 = prompt_ids(tinylm)[:3]
            out3 = os.path.join(work, "l3_%s.npy" % typ)
            rc3, _, err3 = run(tinylm, "logits", "--model", path, "--ids", " ".join(map(str, ids3)), "--out", out3)
            if check(rc3 == 0, "  tinylm runs 3 tokens", err3):
                ref3 = llama_forward(tensors, kv, ids3)
                diff3 = float(np.abs(ref3 - np.load(out3)).max()) / max(1.0, float(np.abs(ref3).max()))
                check(diff3 < 2e-5, "  and there too (matrix-vector kernels): max |diff| / max |logit| %.2g" % diff3)
            if typ in ("q8_0", "q4_k"):
                check_bf16_products(tinylm, work, path, typ, ref_logits, b)
        again = os.path.join(work, "again_%s.gguf" % typ)
        rc, _, err = export(tinylm, again, None, model=path)
        if rc == 0:
            _, _, t2 = read_gguf(again)
            check(all(t2[n] == tensors[n] for n in tensors), "  GGUF -> tinylm -> GGUF (--type keep) keeps every byte")
        else:
            check(False, "  export --type keep", err)


def check_bf16_products(tinylm, work, path, typ, ref_logits, fp32_logits):
    """--precision bf16 on quantized weights: the prompt's GEMM tiles dequantized and rounded to bf16, the
    rows rounded to bf16, f32 sums (matmul_forward_quant); where the CPU has no bf16 products, fp32 as it is"""
    out = os.path.join(work, "l16_%s.npy" % typ)
    got, err = logits(tinylm, path, out, "--precision", "bf16")
    if not check(got is not None, "  logits --precision bf16 runs", err):
        return
    if "computing in fp32" in err:
        check(np.array_equal(got, fp32_logits), "  (no bf16 products on this CPU: the fp32 logits, bit for bit)")
        return
    diff = float(np.abs(ref_logits - got).max()) / max(1.0, float(np.abs(ref_logits).max()))
    # operands rounded to 8 significant bits: measured 2e-3..4e-3 on these models (Zen 4); 2e-2 leaves margin
    # and still fails a wrong tile (which moves logits by their own size)
    check(diff < 2e-2 and not np.array_equal(got, fp32_logits),
          "  with bf16 products: max |diff| / max |logit| to the float64 forward %.2g < 2e-2 (not the fp32 ones)" % diff)
    rc, _, err = run(tinylm, "generate", "--model", path, "--prompt", PROMPT * 2, "-n", "4", "--temperature", "0")
    check(rc == 0 and "prompt products bf16" in err, "  generate's auto precision runs the prompt in bf16 products",
          err[-300:])


def test_training_tokenizers(tinylm, work):
    """a model tinylm trained with its chars or bytes tokenizer exports with that tokenizer as a
    SentencePiece vocabulary that encodes to the same ids (single code points; the 256 byte pieces)"""
    text = os.path.join(os.path.dirname(STORIES), "tinyshakespeare.txt")
    sample = "First Citizen:\nBefore we proceed any further, hear me speak."
    for kind in ("chars", "bytes"):
        run_dir = os.path.join(work, "trained-" + kind)
        rc, _, err = run(tinylm, "train", "--data", text, "--preset", "lesson15", "--tokenizer", kind, "--steps", "2",
                         "--sample", "0", "--eval-every", "2", "--eval-batches", "1", "--out", run_dir)
        if not check(rc == 0, "train 2 steps of lesson15 with the %s tokenizer" % kind, err):
            continue
        path = os.path.join(work, "trained-%s.gguf" % kind)
        rc, out, err = run(tinylm, "export", "--model", run_dir, "--format", "gguf", "--type", "f32", "--out", path)
        if not check(rc == 0 and ("its %s tokenizer" % kind) in out + err, "  export --format gguf with it", err):
            continue
        _, kv, _ = read_gguf(path)
        check(kv.get("tokenizer.ggml.model") == "llama" and len(kv.get("tokenizer.ggml.tokens", [])) in (65, 256),
              "  the file holds a SentencePiece vocabulary of the model's size")
        a = run(tinylm, "tokenize", "--tokenizer", os.path.join(run_dir, "latest"), "--text", sample)
        b = run(tinylm, "tokenize", "--tokenizer", path, "--text", sample)
        check(a[0] == 0 and a[1] == b[1] and len(a[1].split()) > 10, "  which encodes to the same ids", a[2] + b[2])
        g1 = run(tinylm, "generate", "--model", run_dir, "--prompt", "ROMEO:", "-n", "30", "--temperature", "0")
        g2 = run(tinylm, "generate", "--model", path, "--prompt", "ROMEO:", "-n", "30", "--temperature", "0")
        check(g1[0] == 0 and g1[1] == g2[1], "  and generates the same greedy text from the file", g1[2] + g2[2])


def test_bad_files(tinylm, work):
    path = os.path.join(work, "s_f32.gguf")
    if not os.path.exists(path):
        return
    data = open(path, "rb").read()
    cases = {
        "truncated.gguf": data[: len(data) // 2],
        "header_only.gguf": data[:24],
        "v1.gguf": data[:4] + struct.pack("<I", 1) + data[8:],
        "huge_count.gguf": data[:8] + struct.pack("<Q", 1 << 62) + data[16:],
    }
    for name, blob in cases.items():
        p = os.path.join(work, name)
        open(p, "wb").write(blob)
        rc, out, err = run(tinylm, "generate", "--model", p, "--prompt", "x", "-n", "2")
        check(rc != 0 and name in err and "Traceback" not in err and "Sanitizer" not in err,
              "a malformed GGUF (%s) is refused, naming the file" % name, err.strip()[-200:])


if __name__ == "__main__":
    sys.exit(main([test_f32_export, test_typed_exports, test_training_tokenizers, test_bad_files]))
