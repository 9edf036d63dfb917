#!/usr/bin/python3
"""make_gguf_streamed.py — a random-weight llama GGUF file written tensor by tensor, a chunk of rows
at a time, so that a model far larger than memory in f32 (the Llama-3.1-8B body: 32 GB) is made
as Q4_K or Q8_0 without ever holding more than a few MB of f32 weights.

    bench/make_gguf_streamed.py --shape llama-8b --type q4_k --tokenizer-from FILE.gguf --out OUT.gguf

The weights are those of bench/make_llama2c_checkpoint.py's convention (normal, std 0.02; the
embedding and head std 1; norms 1 + N(0, 0.1)), drawn per chunk from one seeded generator (not the
same numbers as that script's). The tokenizer's metadata (every `tokenizer.*` key) is copied from
--tokenizer-from, a GGUF file tinylm exported with the 32000-token llama2 tokenizer (e.g. `tinylm
export --model stories15M.bin --tokenizer tests/data/tokenizers/llama2/tokenizer.bin --format gguf
--type f32 --out tok.gguf`). Written from the GGUF specification (v3, little-endian, 32-byte
alignment) and ggml's block layouts (docs/gguf.md); the Q4_K rounding here is plain min/max per
sub-block (valid blocks, not ggml's scale search: the weights are random). --shape: the shapes of
bench/make_llama2c_checkpoint.py, plus llama-8b and llama-tiny (d 256, 2 layers, for checking)."""
import argparse
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_llama2c_checkpoint import SHAPES  # noqa: E402

SHAPES = dict(SHAPES)
SHAPES["llama-8b"] = (4096, 14336, 32, 32, 8, 32000, 1024)  # the Llama-3.1-8B body, a 32000 vocabulary
SHAPES["llama-tiny"] = (256, 768, 2, 4, 2, 32000, 256)

GGML = {"f32": 0, "q8_0": 8, "q4_k": 12}
ALIGN = 32


def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv_u32(k, v):
    return gguf_str(k) + struct.pack("<II", 4, v)


def kv_f32(k, v):
    return gguf_str(k) + struct.pack("<If", 6, v)


def kv_str(k, v):
    return gguf_str(k) + struct.pack("<I", 8) + gguf_str(v)


SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def skip_value(buf, p, t):
    """the offset after a metadata value of type t at p"""
    if t in SIZES:
        return p + SIZES[t]
    if t == 8:
        (n,) = struct.unpack_from("<Q", buf, p)
        return p + 8 + n
    if t == 9:
        et, n = struct.unpack_from("<IQ", buf, p)
        p += 12
        if et in SIZES:
            return p + SIZES[et] * n
        for _ in range(n):
            p = skip_value(buf, p, et)
        return p
    raise ValueError("metadata value type %d" % t)


def tokenizer_kvs(path):
    """the raw bytes of every tokenizer.* key-value pair of a GGUF file, and their count"""
    with open(path, "rb") as f:
        buf = f.read(64 << 20)
    if buf[:4] != b"GGUF":
        raise ValueError("%s: not a GGUF file" % path)
    _, _, n_kv = struct.unpack_from("<IQQ", buf, 4)
    p, out, n = 24, b"", 0
    for _ in range(n_kv):
        start = p
        (klen,) = struct.unpack_from("<Q", buf, p)
        key = buf[p + 8:p + 8 + klen].decode()
        p += 8 + klen
        (t,) = struct.unpack_from("<I", buf, p)
        p = skip_value(buf, p + 4, t)
        if key.startswith("tokenizer."):
            out, n = out + buf[start:p], n + 1
    if not n:
        raise ValueError("%s: no tokenizer.* metadata" % path)
    return out, n


def q8_0(x):
    """rows [r, k] (k a multiple of 32) as Q8_0 blocks: f16 d, 32 int8"""
    b = x.reshape(-1, 32)
    d = np.abs(b).max(-1) / 127
    q = np.rint(b / np.where(d > 0, d, 1)[:, None]).clip(-127, 127).astype(np.int8)
    out = np.empty((b.shape[0], 34), np.uint8)
    out[:, :2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def q4_k(x):
    """rows [r, k] (k a multiple of 256) as Q4_K blocks: f16 d, dmin, 12 bytes of 6-bit scales and
    minimums (scale_min_k4's packing), 128 bytes of nibbles (chunk c: sub-block 2c low, 2c + 1 high)"""
    b = x.reshape(-1, 8, 32)
    lo = np.minimum(b.min(-1), 0)
    scale, mn = (b.max(-1) - lo) / 15, -lo
    d = (scale.max(-1) / 63).astype(np.float16)
    dmin = (mn.max(-1) / 63).astype(np.float16)
    df, dminf = d.astype(np.float32)[:, None], dmin.astype(np.float32)[:, None]
    sc = np.rint(scale / np.where(df > 0, df, 1)).clip(0, 63).astype(np.uint8)
    m = np.rint(mn / np.where(dminf > 0, dminf, 1)).clip(0, 63).astype(np.uint8)
    es, em = df * sc, dminf * m
    q = np.rint((b + em[..., None]) / np.where(es > 0, es, 1)[..., None]).clip(0, 15).astype(np.uint8)
    q = np.where(es[..., None] > 0, q, 0).astype(np.uint8)
    out = np.empty((b.shape[0], 144), np.uint8)
    out[:, 0:2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = dmin.astype("<f2").view(np.uint8).reshape(-1, 2)
    s = np.zeros((b.shape[0], 12), np.uint8)
    s[:, 0:4] = sc[:, 0:4] | (sc[:, 4:8] >> 4) << 6
    s[:, 4:8] = m[:, 0:4] | (m[:, 4:8] >> 4) << 6
    s[:, 8:12] = (sc[:, 4:8] & 15) | (m[:, 4:8] & 15) << 4
    out[:, 4:16] = s
    out[:, 16:] = (q[:, 0::2, :] | q[:, 1::2, :] << 4).reshape(-1, 128)
    return out.tobytes()


def row_bytes(t, k):
    return {0: 4 * k, 8: k // 32 * 34, 12: k // 256 * 144}[t]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--type", choices=("q4_k", "q8_0"), required=True)
    ap.add_argument("--tokenizer-from", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seq", type=int)
    a = ap.parse_args()
    dim, hidden, L, H, KV, V, seq = SHAPES[a.shape]
    seq = a.seq or seq
    hd = dim // H
    qt = GGML[a.type]
    rng = np.random.default_rng(a.seed)
    # (name, ne0 = columns, ne1 = rows or 0 for a vector, ggml type, std, mean)
    tensors = [("token_embd.weight", dim, V, qt, 1.0, 0.0)]
    for i in range(L):
        p = "blk.%d." % i
        tensors += [(p + "attn_norm.weight", dim, 0, 0, 0.1, 1.0), (p + "attn_q.weight", dim, H * hd, qt, 0.02, 0.0),
                    (p + "attn_k.weight", dim, KV * hd, qt, 0.02, 0.0), (p + "attn_v.weight", dim, KV * hd, qt, 0.02, 0.0),
                    (p + "attn_output.weight", H * hd, dim, qt, 0.02, 0.0), (p + "ffn_norm.weight", dim, 0, 0, 0.1, 1.0),
                    (p + "ffn_gate.weight", dim, hidden, qt, 0.02, 0.0), (p + "ffn_up.weight", dim, hidden, qt, 0.02, 0.0),
                    (p + "ffn_down.weight", hidden, dim, qt, 0.02, 0.0)]
    tensors += [("output_norm.weight", dim, 0, 0, 0.1, 1.0), ("output.weight", dim, V, qt, 1.0, 0.0)]
    tok, n_tok = tokenizer_kvs(a.tokenizer_from)
    kvs = (kv_str("general.architecture", "llama") + kv_str("general.name", "random " + a.shape) +
           kv_u32("llama.context_length", seq) + kv_u32("llama.embedding_length", dim) + kv_u32("llama.block_count", L) +
           kv_u32("llama.feed_forward_length", hidden) + kv_u32("llama.rope.dimension_count", hd) +
           kv_u32("llama.attention.head_count", H) + kv_u32("llama.attention.head_count_kv", KV) +
           kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5) + kv_f32("llama.rope.freq_base", 10000.0) + tok)
    n_kv = 11 + n_tok
    infos, offset, sizes = b"", 0, []
    for name, k, r, t, _, _ in tensors:
        nbytes = row_bytes(t, k) * max(r, 1)
        dims = struct.pack("<IQ", 1, k) if r == 0 else struct.pack("<IQQ", 2, k, r)
        infos += gguf_str(name) + dims + struct.pack("<IQ", t, offset)
        sizes.append(nbytes)
        offset += (nbytes + ALIGN - 1) // ALIGN * ALIGN
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), n_kv) + kvs + infos
    tmp = a.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(head + b"\0" * (-len(head) % ALIGN))
        for (name, k, r, t, std, mean), nbytes in zip(tensors, sizes):
            if r == 0:
                f.write((mean + std * rng.standard_normal(k, dtype=np.float32)).astype("<f4").tobytes())
            else:
                step = max(1, (4 << 20) // k)  # (about 16 MB of f32 a chunk)
                for r0 in range(0, r, step):
                    x = (rng.standard_normal((min(step, r - r0), k), dtype=np.float32) * np.float32(std))
                    f.write(q4_k(x) if t == 12 else q8_0(x))
            f.write(b"\0" * (-nbytes % ALIGN))
    os.replace(tmp, a.out)
    print("%s: %s, %s, %.2f GB" % (a.out, a.shape, a.type, os.path.getsize(a.out) / 1e9))


if __name__ == "__main__":
    main()
