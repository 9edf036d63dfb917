#!/usr/bin/python3
"""llama2c_ref.py — reads a llama2.c checkpoint (legacy "version 0" .bin, as run.c does) and
its tokenizer.bin into the PyTorch reference's terms, written from llama2.c's run.c layout
(see data/README.md), so tests can check `tinylm inspect` on a real trained model.

    config, params = load_checkpoint(path)      # tinylm config dict + {engine tensor name: array}
    pieces = load_tokenizer(path)               # [bytes of each token]

run.c rotates interleaved pairs (2i, 2i+1) of each head; the engine (and the reference) use
the Hugging Face rotate-half layout (i, i + hd/2). Permuting the rows of wq and wk within each
head — new row i = old row 2i, new row i + hd/2 = old row 2i + 1 — gives the same attention.

    llama2c_ref.py greedy CKPT TOKENIZER N     prints N greedily generated tokens from BOS
"""
import struct
import sys

import numpy as np


def load_checkpoint(path):
    with open(path, "rb") as f:
        data = f.read()
    dim, hidden, L, H, KV, vocab, seq_len = struct.unpack("<7i", data[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    hd = dim // H
    w = np.frombuffer(data, dtype="<f4", offset=28)
    pos = 0

    def take(*shape):
        nonlocal pos
        n = int(np.prod(shape))
        a = w[pos:pos + n].reshape(shape).astype(np.float64)
        pos += n
        return a

    emb = take(vocab, dim)
    rms_att = take(L, dim)
    wq = take(L, H * hd, dim)
    wk = take(L, KV * hd, dim)
    wv = take(L, KV * hd, dim)
    wo = take(L, dim, H * hd)
    rms_ffn = take(L, dim)
    w1 = take(L, hidden, dim)
    w2 = take(L, dim, hidden)
    w3 = take(L, hidden, dim)
    rms_final = take(dim)
    take(seq_len, hd // 2)  # freq_cis_real (unused)
    take(seq_len, hd // 2)  # freq_cis_imag
    wcls = emb if shared else take(vocab, dim)

    perm = np.concatenate([np.arange(0, hd, 2), np.arange(1, hd, 2)])

    def rotate_half_rows(m, heads):
        return np.concatenate([m[h * hd:(h + 1) * hd][perm] for h in range(heads)])

    config = {"model_type": "tinylm", "vocab_size": vocab, "hidden_size": dim, "num_hidden_layers": L,
              "num_attention_heads": H, "num_key_value_heads": KV, "intermediate_size": hidden,
              "max_position_embeddings": seq_len, "norm_type": "rmsnorm", "norm_eps": 1e-5,
              "rope_theta": 10000.0, "ffn_type": "swiglu", "tie_word_embeddings": shared}
    params = {"embed.weight": emb, "final_norm.weight": rms_final}
    if not shared:
        params["lm_head.weight"] = wcls
    for n in range(L):
        p = "layers.%d." % n
        params[p + "attn_norm.weight"] = rms_att[n]
        params[p + "attn.q_proj.weight"] = rotate_half_rows(wq[n], H)
        params[p + "attn.k_proj.weight"] = rotate_half_rows(wk[n], KV)
        params[p + "attn.v_proj.weight"] = wv[n]
        params[p + "attn.o_proj.weight"] = wo[n]
        params[p + "ffn_norm.weight"] = rms_ffn[n]
        params[p + "ffn.gate_proj.weight"] = w1[n]
        params[p + "ffn.up_proj.weight"] = w3[n]
        params[p + "ffn.down_proj.weight"] = w2[n]
    return config, params


def load_tokenizer(path):
    with open(path, "rb") as f:
        data = f.read()
    pos, pieces = 4, []  # int32 max_token_length, then (float32 score, int32 len, bytes) per token
    while pos < len(data):
        _score, n = struct.unpack("<fi", data[pos:pos + 8])
        pieces.append(data[pos + 8:pos + 8 + n])
        pos += 8 + n
    return pieces


def main(argv):
    import torch
    sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/reference")
    import tinylm_ref
    if len(argv) != 5 or argv[1] != "greedy":
        print(__doc__)
        return 2
    config, params = load_checkpoint(argv[2])
    pieces = load_tokenizer(argv[3])
    m = tinylm_ref.Model(config, params)
    toks = [1]
    with torch.no_grad():
        for _ in range(int(argv[4])):
            toks.append(int(m.forward(np.array([toks]))[0, -1].argmax()))
    print(b"".join(pieces[t] for t in toks[1:]).decode("utf-8", "replace"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
