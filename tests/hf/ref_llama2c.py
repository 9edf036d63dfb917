"""ref_llama2c.py — an independent NumPy model of llama2.c run.c's forward pass, reading a
version-0 .bin checkpoint directly (float64).

Written from run.c's description: RMSNorm with eps 1e-5 added to mean(x^2); RoPE rotates the
interleaved pairs (2i, 2i+1) of every head with frequency 10000^(-2i/head_size) (the
"rope_halves" mutant rotates (i, i + hs/2) instead — what the engine would compute if the
loader forgot to permute wq/wk); attention scores divided by sqrt(head_size), causal softmax,
grouped-query heads (query head h reads kv head h / (n_heads / n_kv_heads)); FFN
w2(silu(w1 x) * w3 x); final RMSNorm; classifier = token embedding when vocab_size > 0 in the
header, else the wcls block after freq_cis.

Usage as a script: ref_llama2c.py FILE.bin "1 2 3" OUT.npy
"""
import struct
import sys

import numpy as np


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    dim, hidden, L, H, KV, vocab, seq_len = struct.unpack("<7i", raw[:28])
    shared = vocab > 0
    V = abs(vocab)
    hs = dim // H
    w = np.frombuffer(raw, dtype="<f4", offset=28).astype(np.float64)
    pos = 0

    def take(*shape):
        nonlocal pos
        n = int(np.prod(shape))
        out = w[pos:pos + n].reshape(shape)
        pos += n
        return out

    P = dict(cfg=dict(dim=dim, hidden=hidden, L=L, H=H, KV=KV, V=V, seq_len=seq_len, hs=hs))
    P["emb"] = take(V, dim)
    P["rms_att"] = take(L, dim)
    P["wq"] = take(L, H * hs, dim)
    P["wk"] = take(L, KV * hs, dim)
    P["wv"] = take(L, KV * hs, dim)
    P["wo"] = take(L, dim, H * hs)
    P["rms_ffn"] = take(L, dim)
    P["w1"] = take(L, hidden, dim)
    P["w2"] = take(L, dim, hidden)
    P["w3"] = take(L, hidden, dim)
    P["rms_final"] = take(dim)
    take(seq_len, hs // 2)  # freq_cis_real
    take(seq_len, hs // 2)  # freq_cis_imag
    P["wcls"] = P["emb"] if shared else take(V, dim)
    assert pos == w.size, "size mismatch"
    return P


def rmsnorm(x, weight):
    return weight * (x / np.sqrt((x * x).mean() + 1e-5))


def rotate(vec, pos, hs, halves):
    out = vec.copy()
    for h0 in range(0, vec.size, hs):
        for i in range(hs // 2):
            freq = 1.0 / 10000.0 ** (2 * i / hs)
            c, s = np.cos(pos * freq), np.sin(pos * freq)
            a, b = (h0 + i, h0 + i + hs // 2) if halves else (h0 + 2 * i, h0 + 2 * i + 1)
            out[a] = vec[a] * c - vec[b] * s
            out[b] = vec[a] * s + vec[b] * c
    return out


def forward(P, ids, mut=()):
    c = P["cfg"]
    hs, H, KV = c["hs"], c["H"], c["KV"]
    halves = "rope_halves" in mut
    keys = [[] for _ in range(c["L"])]
    vals = [[] for _ in range(c["L"])]
    out = []
    for pos, tok in enumerate(ids):
        x = P["emb"][tok].copy()
        for l in range(c["L"]):
            xb = rmsnorm(x, P["rms_att"][l])
            q = rotate(P["wq"][l] @ xb, pos, hs, halves)
            k = rotate(P["wk"][l] @ xb, pos, hs, halves)
            keys[l].append(k)
            vals[l].append(P["wv"][l] @ xb)
            att = np.zeros(H * hs)
            for h in range(H):
                kv = h // (H // KV)
                qh = q[h * hs:(h + 1) * hs]
                scores = np.array([qh @ kk[kv * hs:(kv + 1) * hs] for kk in keys[l]]) / np.sqrt(hs)
                p = np.exp(scores - scores.max())
                p /= p.sum()
                att[h * hs:(h + 1) * hs] = sum(pi * vv[kv * hs:(kv + 1) * hs] for pi, vv in zip(p, vals[l]))
            x = x + P["wo"][l] @ att
            xb = rmsnorm(x, P["rms_ffn"][l])
            h1 = P["w1"][l] @ xb
            x = x + P["w2"][l] @ ((h1 / (1.0 + np.exp(-h1))) * (P["w3"][l] @ xb))
        out.append(P["wcls"] @ rmsnorm(x, P["rms_final"]))
    return np.array(out)


if __name__ == "__main__":
    ids = [int(t) for t in sys.argv[2].replace(",", " ").split()]
    np.save(sys.argv[3], forward(load(sys.argv[1]), ids).astype(np.float32))
