#!/usr/bin/env python3
"""fp8_load_memory.py — the peak resident memory of `tinylm logits` on an FP8 checkpoint (docs/hf-families.md,
"FP8 kept compact"): a random Llama of the given shape written as DeepSeek-V3's FP8 release is stored (every
*_proj matrix F8_E4M3 with a weight_scale_inv per 128 x 128 block, the embedding, head and norms BF16), then
`tinylm logits` run with --dtype f32 and with --dtype auto (bf16 at load), each under /usr/bin/time -v.

usage: fp8_load_memory.py --tinylm build/tinylm --work DIR [--hidden 768 --layers 6 --ff 2048 --vocab 4096]"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys

import numpy as np


def f8_e4m3_table():
    """the value of each E4M3FN code (OCP: bias 7, 3 mantissa bits, S.1111.111 NaN)"""
    c = np.arange(256)
    e, m = (c & 0x7F) >> 3, c & 7
    v = np.where(e == 0, m * 2.0 ** -9, (8 + m) * 2.0 ** (e - 10))
    v = np.where((e == 15) & (m == 7), np.nan, v)
    return np.where(c & 0x80, -v, v)


def write_safetensors(path, tensors):
    """tensors: {name: (dtype string, shape, bytes)}"""
    header, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def bf16_bytes(a):
    u = np.asarray(a, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tinylm", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--ff", type=int, default=2048)
    ap.add_argument("--vocab", type=int, default=4096)
    a = ap.parse_args()
    d, L, f, V, H = a.hidden, a.layers, a.ff, a.vocab, a.hidden // 64
    os.makedirs(a.work, exist_ok=True)
    rng = np.random.default_rng(0)
    codes = np.arange(256)[np.isfinite(f8_e4m3_table())].astype(np.uint8)
    T = {"model.embed_tokens.weight": ("BF16", (V, d), bf16_bytes(rng.normal(0, 1, (V, d)))),
         "model.norm.weight": ("BF16", (d,), bf16_bytes(np.ones(d))),
         "lm_head.weight": ("BF16", (V, d), bf16_bytes(rng.normal(0, d ** -0.5, (V, d))))}
    for l in range(L):
        p = "model.layers.%d." % l
        T[p + "input_layernorm.weight"] = ("BF16", (d,), bf16_bytes(np.ones(d)))
        T[p + "post_attention_layernorm.weight"] = ("BF16", (d,), bf16_bytes(np.ones(d)))
        for name, (r, c) in (("self_attn.q_proj", (d, d)), ("self_attn.k_proj", (d, d)), ("self_attn.v_proj", (d, d)),
                             ("self_attn.o_proj", (d, d)), ("mlp.gate_proj", (f, d)), ("mlp.up_proj", (f, d)),
                             ("mlp.down_proj", (d, f))):
            T[p + name + ".weight"] = ("F8_E4M3", (r, c), rng.choice(codes, size=(r, c)).tobytes())
            s = (-(-r // 128), -(-c // 128))
            scale = rng.uniform(0.5, 2.0, s).astype(np.float32) * (c ** -0.5) / 100
            T[p + name + ".weight_scale_inv"] = ("F32", s, scale.astype("<f4").tobytes())
    model = os.path.join(a.work, "fp8_llama")
    os.makedirs(model, exist_ok=True)
    write_safetensors(os.path.join(model, "model.safetensors"), T)
    json.dump({"model_type": "llama", "vocab_size": V, "hidden_size": d, "intermediate_size": f,
               "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": H,
               "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
               "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                       "weight_block_size": [128, 128]}},
              open(os.path.join(model, "config.json"), "w"))
    size = os.path.getsize(os.path.join(model, "model.safetensors"))
    print("checkpoint: %s, %.1f MB (d %d, %d layers, ff %d, vocab %d)" % (model, size / 1e6, d, L, f, V))
    for dtype in ("f32", "auto"):
        out = os.path.join(a.work, "logits_%s.npy" % dtype)
        r = subprocess.run(["/usr/bin/time", "-v", a.tinylm, "logits", "--model", model, "--ids", "1 2 3 4",
                            "--out", out, "--dtype", dtype], capture_output=True, text=True)
        rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
        if r.returncode or not rss:
            sys.exit("tinylm logits --dtype %s failed: %s" % (dtype, r.stderr[-2000:]))
        print("--dtype %-4s peak RSS %7.1f MB" % (dtype, int(rss.group(1)) / 1e3))


if __name__ == "__main__":
    main()
