#!/usr/bin/python3
"""make_llama2c_checkpoint.py — a llama2.c checkpoint (version 0 format) of a given shape with
random weights from a fixed seed, for decode benchmarks against llama2.c's run.c.

The head is untied (negative vocab_size in the header) and its rows for BOS (1) and EOS (2)
are zero: their logit is exactly 0 while the other 31998 random logits have a positive maximum,
so greedy decoding never stops early (run.c stops at BOS, tinylm at BOS or EOS).

  bench/make_llama2c_checkpoint.py --shape stories15M --out /tmp/s15.bin [--seed 1] [--seq N]
"""
import argparse
import struct

import numpy as np

SHAPES = {  # dim, hidden, layers, heads, kv heads, vocab, seq
    "stories15M": (288, 768, 6, 6, 6, 32000, 256),
    "stories110M": (768, 2048, 12, 12, 12, 32000, 1024),
    # a larger llama-style shape (the "d 1024, 16 layers"): 271M parameters, 1.08 GB in f32
    "llama-d1024": (1024, 2816, 16, 16, 16, 32000, 1024),
    # the Llama-3.2-1B body (d 2048, 16 layers, 32 heads / 8 KV heads, FFN 8192) with a 32000-token
    # vocabulary: 1.1B parameters, 4.4 GB in f32
    "llama-1b": (2048, 8192, 16, 32, 8, 32000, 1024),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seq", type=int, help="context length (default: the shape's)")
    a = ap.parse_args()
    dim, hidden, L, H, KV, V, seq = SHAPES[a.shape]
    seq = a.seq or seq
    hd = dim // H
    rng = np.random.default_rng(a.seed)

    def normal(*shape, std=0.02):
        return (rng.standard_normal(shape, dtype=np.float32) * std).astype(np.float32)

    with open(a.out, "wb") as f:
        f.write(struct.pack("7i", dim, hidden, L, H, KV, -V, seq))
        f.write(normal(V, dim, std=1.0).tobytes())                      # token embedding
        f.write((1.0 + normal(L, dim, std=0.1)).tobytes())              # rms_att_weight
        f.write(normal(L, dim, H * hd).tobytes())                       # wq
        f.write(normal(L, dim, KV * hd).tobytes())                      # wk
        f.write(normal(L, dim, KV * hd).tobytes())                      # wv
        f.write(normal(L, H * hd, dim).tobytes())                       # wo
        f.write((1.0 + normal(L, dim, std=0.1)).tobytes())              # rms_ffn_weight
        f.write(normal(L, hidden, dim).tobytes())                       # w1
        f.write(normal(L, dim, hidden).tobytes())                       # w2
        f.write(normal(L, hidden, dim).tobytes())                       # w3
        f.write((1.0 + normal(dim, std=0.1)).tobytes())                 # rms_final_weight
        f.write(np.zeros((seq, hd // 2), np.float32).tobytes())         # freq_cis_real (unused)
        f.write(np.zeros((seq, hd // 2), np.float32).tobytes())         # freq_cis_imag (unused)
        wcls = normal(V, dim, std=1.0)
        wcls[1] = 0.0
        wcls[2] = 0.0
        f.write(wcls.tobytes())


if __name__ == "__main__":
    main()
