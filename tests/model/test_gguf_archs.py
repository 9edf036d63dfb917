#!/usr/bin/env python3
"""test_gguf_archs.py — tinylm reads GGUF files of every architecture it claims (llama, qwen2,
qwen3, gemma, gemma2, gemma3, olmo2, gpt2).

For each family a tiny random Hugging Face checkpoint is written (tests/hf/test_hf.py's
make_weights / write_model: the family's HF tensor names and config keys), then converted to
GGUF here, in Python, the way llama.cpp's convert_hf_to_gguf.py does for that architecture
(its metadata keys, its tensor names, and what it changes on the way):
  - llama: q and k rows permuted from halves to interleaved pairs (LlamaModel.permute, k with
    the KV head count); rope.dimension_count, vocab_size, linear rope scaling;
  - qwen2 / qwen3 / olmo2: the tensors as they are (rope NEOX), biases / QK-norms renamed;
  - gemma (Gemma 1): every *norm.weight stored as 1 + w, Llama's norm names, head_dim as key/value
    length, no rope.freq_base, no window or soft-caps;
  - gemma2: every *norm.weight stored as 1 + w; no rope.freq_base (the converter writes none:
    10000), head_dim as key/value length, both soft-caps, the sliding window (llama.cpp slides
    on even layers);
  - gemma3: 1 + w for every *norm.weight (q_norm / k_norm too); rope.freq_base of the global
    layers; the local layers' base and the 5-of-6 sliding pattern are not in the file (llama.cpp
    fixes them: 10000 and layer % 6 < 5), so the HF config uses those; final soft-cap when set;
  - gpt2: Conv1D weights [in, out] transposed to [out, in]; feed_forward_length = 4 * n_embd;
    context_length = n_ctx; the attn.bias mask buffers dropped; tied head (no output tensor).
The files hold no tokenizer: logits are asked for by ids.

Checks per family: tinylm's logits of the GGUF equal its logits of the HF directory (within
1e-5 of the largest logit; the measured figure is printed), and both match tests/hf/hf_ref.py's
float64 forward within test_hf's 1e-4. Each convention that matters also has a negative file
(the convention left out: llama's q/k permutation and linear rope scaling, Gemma's 1 + w, soft-caps
and sliding window, Gemma 3's rope scaling, GPT-2's transposed c_proj): its logits must differ from
the HF model's by more than 1e-3, which proves the check would catch a loader that forgot it; a file
without qwen2's biases or qwen3's / olmo2's QK-norms must be refused (tensor missing).

usage: test_gguf_archs.py --tinylm PATH --work DIR"""
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "cli"))
sys.path.insert(0, os.path.join(ROOT, "tests", "hf"))
from harness import check, main, run  # noqa: E402
import test_hf  # noqa: E402  (make_weights, write_model, hf_config, reference, stored_values, BASE)

IDS = test_hf.IDS
SAME_TOL = 1e-5   # GGUF vs HF directory, both run by tinylm
REF_TOL = test_hf.TOL  # against the float64 reference
MUTANT_MIN = test_hf.MUTANT_MIN
BASE = test_hf.BASE

# ---------------------------------------------------------------- a minimal GGUF v3 writer

T_U32, T_F32, T_STR, T_U64 = 4, 6, 8, 10
GGML_F32, GGML_Q8_0 = 0, 8
ALIGN = 32


class Q8_0:
    """a tensor to write as ggml's Q8_0 (blocks of 32 along a row: an f16 scale d = max|x| / 127, then 32 int8
    round(x / d)), from the format's definition; .decoded: the values a reader recovers (q * d)"""

    def __init__(self, a):
        a = np.asarray(a, dtype=np.float32)
        self.shape = a.shape
        blocks = a.reshape(-1, 32)
        d = (np.abs(blocks).max(axis=1) / 127.0).astype(np.float16)
        inv = np.where(d.astype(np.float32) > 0, 1.0 / np.maximum(d.astype(np.float32), 1e-30), 0.0)
        q = np.clip(np.round(blocks * inv[:, None]), -127, 127).astype(np.int8)
        self.raw = b"".join(d[i].tobytes() + q[i].tobytes() for i in range(len(d)))
        self.decoded = (q.astype(np.float32) * d.astype(np.float32)[:, None]).reshape(a.shape)


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, kvs, tensors):
    """kvs: [(key, type, value)] (u32, f32, string); tensors: {name: numpy array} written F32, the
    dims reversed (ne[0] = the last, fastest numpy axis), each aligned to 32 bytes"""
    out = [b"GGUF", struct.pack("<IQQ", 3, len(tensors), len(kvs))]
    for key, t, v in kvs:
        out.append(_str(key) + struct.pack("<I", t))
        if t == T_STR:
            out.append(_str(v))
        elif t == T_F32:
            out.append(struct.pack("<f", v))
        elif t == T_U32:
            out.append(struct.pack("<I", v))
        else:
            out.append(struct.pack("<Q", v))
    blobs, off = [], 0
    for name, a in tensors.items():
        q8 = isinstance(a, Q8_0)
        b = a.raw if q8 else np.ascontiguousarray(a, dtype="<f4").tobytes()
        ne = list(reversed(a.shape))
        out.append(_str(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
                   + struct.pack("<IQ", GGML_Q8_0 if q8 else GGML_F32, off))
        pad = -len(b) % ALIGN
        blobs.append(b + b"\0" * pad)
        off += len(b) + pad
    head = b"".join(out)
    head += b"\0" * (-len(head) % ALIGN)
    with open(path, "wb") as f:
        f.write(head + b"".join(blobs))


# ---------------------------------------------------------------- HF -> GGUF as convert_hf_to_gguf.py

def permute_pairs(w, n_head):
    """LlamaModel.permute: each head's rows from (half, i) to (i, half) = interleaved pairs"""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


# HF per-layer names -> llama.cpp's (tensor_mapping.py), per family
LAYER_NAMES = {
    "common": {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
               "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
               "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
               "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm"},
    "llama": {"post_attention_layernorm": "ffn_norm"},
    "olmo2": {"post_attention_layernorm": "post_attention_norm", "post_feedforward_layernorm": "post_ffw_norm"},
    "gemma": {"post_attention_layernorm": "post_attention_norm", "pre_feedforward_layernorm": "ffn_norm",
              "post_feedforward_layernorm": "post_ffw_norm"},
    "gpt2": {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "ln_2": "ffn_norm",
             "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"},
}
ARCH = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gemma2": "gemma2", "gemma3_text": "gemma3",
        "olmo2": "olmo2", "gpt2": "gpt2", "gemma": "gemma", "qwen2_moe": "qwen2moe"}
# Qwen2-MoE's mixture of experts (tensor_mapping.py): the router, the shared expert and its gate
LAYER_NAMES["llama"].update({"mlp.gate": "ffn_gate_inp", "mlp.shared_expert.gate_proj": "ffn_gate_shexp",
                             "mlp.shared_expert.up_proj": "ffn_up_shexp",
                             "mlp.shared_expert.down_proj": "ffn_down_shexp",
                             "mlp.shared_expert_gate": "ffn_gate_inp_shexp"})


def gguf_name(family, hf):
    top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
           "lm_head.weight": "output.weight"}
    if family == "gpt2":
        hf = hf[len("transformer."):] if hf.startswith("transformer.") else hf
        top = {"wte.weight": "token_embd.weight", "wpe.weight": "position_embd.weight",
               "ln_f.weight": "output_norm.weight", "ln_f.bias": "output_norm.bias", "lm_head.weight": "output.weight"}
        prefix, table = "h.", LAYER_NAMES["gpt2"]
    else:
        prefix = "model.layers."
        table = dict(LAYER_NAMES["common"], **LAYER_NAMES[{"gemma2": "gemma", "gemma3_text": "gemma",
                                                           "olmo2": "olmo2"}.get(family, "llama")])
    if hf in top:
        return top[hf]
    assert hf.startswith(prefix), hf
    layer, rest = hf[len(prefix):].split(".", 1)
    module, suffix = rest.rsplit(".", 1)
    return "blk.%s.%s.%s" % (layer, table[module], suffix)


def convert(family, cfg, T, omit=()):
    """(metadata, tensors) of the GGUF llama.cpp's converter writes for this HF checkpoint;
    omit: conventions deliberately left out (the negative files)"""
    a = ARCH[family]
    kv = [("general.architecture", T_STR, a), ("general.file_type", T_U32, 0)]

    def u32(k, v):
        kv.append(("%s.%s" % (a, k), T_U32, int(v)))

    def f32(k, v):
        kv.append(("%s.%s" % (a, k), T_F32, float(v)))

    if family == "gpt2":  # GPT2Model.set_gguf_parameters
        u32("block_count", cfg["n_layer"]), u32("context_length", cfg["n_ctx"])
        u32("embedding_length", cfg["n_embd"]), u32("feed_forward_length", 4 * cfg["n_embd"])
        u32("attention.head_count", cfg["n_head"]), f32("attention.layer_norm_epsilon", cfg["layer_norm_epsilon"])
    elif family == "gemma":  # GemmaModel.set_gguf_parameters (Gemma 1: no rope base, no window, no soft-caps)
        u32("context_length", cfg["max_position_embeddings"]), u32("embedding_length", cfg["hidden_size"])
        u32("block_count", cfg["num_hidden_layers"]), u32("feed_forward_length", cfg["intermediate_size"])
        u32("attention.head_count", cfg["num_attention_heads"])
        u32("attention.head_count_kv", cfg.get("num_key_value_heads", cfg["num_attention_heads"]))
        f32("attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"])
        u32("attention.key_length", cfg["head_dim"]), u32("attention.value_length", cfg["head_dim"])
    elif family == "gemma2":  # Gemma2Model.set_gguf_parameters (no rope base: llama.cpp's 10000)
        u32("context_length", cfg["max_position_embeddings"]), u32("embedding_length", cfg["hidden_size"])
        u32("block_count", cfg["num_hidden_layers"]), u32("feed_forward_length", cfg["intermediate_size"])
        u32("attention.head_count", cfg["num_attention_heads"])
        u32("attention.head_count_kv", cfg.get("num_key_value_heads", cfg["num_attention_heads"]))
        f32("attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"])
        u32("attention.key_length", cfg["head_dim"]), u32("attention.value_length", cfg["head_dim"])
        if "softcap" not in omit:
            f32("attn_logit_softcapping", cfg["attn_logit_softcapping"])
            f32("final_logit_softcapping", cfg["final_logit_softcapping"])
        if "window" not in omit:
            u32("attention.sliding_window", cfg["sliding_window"])
    else:  # TextModel.set_gguf_parameters (+ each family's additions)
        u32("block_count", cfg["num_hidden_layers"]), u32("context_length", cfg["max_position_embeddings"])
        u32("embedding_length", cfg["hidden_size"]), u32("feed_forward_length", cfg["intermediate_size"])
        u32("attention.head_count", cfg["num_attention_heads"])
        if "num_key_value_heads" in cfg:
            u32("attention.head_count_kv", cfg["num_key_value_heads"])
        if family == "gemma3_text":
            f32("rope.freq_base", cfg["rope_theta"])  # the global layers'
        elif "rope_theta" in cfg:
            f32("rope.freq_base", cfg["rope_theta"])
        f32("attention.layer_norm_rms_epsilon", cfg.get("rms_norm_eps", 1e-6))
        if "head_dim" in cfg:
            u32("attention.key_length", cfg["head_dim"]), u32("attention.value_length", cfg["head_dim"])
        rs = cfg.get("rope_scaling") or {}
        if rs.get("rope_type", rs.get("type")) == "linear" and "scaling" not in omit:
            kv.append(("%s.rope.scaling.type" % a, T_STR, "linear"))
            f32("rope.scaling.factor", rs["factor"])
        if family == "qwen2_moe":  # Qwen2MoeModel.set_gguf_parameters (+ TextModel's expert_used_count)
            u32("expert_count", cfg["num_experts"]), u32("expert_used_count", cfg["num_experts_per_tok"])
            u32("expert_feed_forward_length", cfg["moe_intermediate_size"])
            u32("expert_shared_feed_forward_length", cfg["shared_expert_intermediate_size"])
        if family == "llama":
            u32("vocab_size", cfg["vocab_size"])
            u32("rope.dimension_count", cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])
        if family == "gemma3_text":
            if cfg.get("final_logit_softcapping") and "softcap" not in omit:
                f32("final_logit_softcapping", cfg["final_logit_softcapping"])
            if cfg.get("sliding_window_pattern") != 1 and "window" not in omit:
                u32("attention.sliding_window", cfg["sliding_window"])
    out = {}
    H, KV = cfg.get("num_attention_heads"), cfg.get("num_key_value_heads")
    if family == "qwen2_moe":  # Qwen2MoeModel.modify_tensors: each layer's experts stacked into one 3-D tensor
        T = dict(T)
        for layer in range(cfg["num_hidden_layers"]):
            for w_name, short in (("down_proj", "down"), ("gate_proj", "gate"), ("up_proj", "up")):
                names = ["model.layers.%d.mlp.experts.%d.%s.weight" % (layer, e, w_name)
                         for e in range(cfg["num_experts"])]
                if "expert_order" in omit:
                    names = names[::-1]
                out["blk.%d.ffn_%s_exps.weight" % (layer, short)] = np.stack(
                    [np.asarray(T.pop(n), dtype=np.float32) for n in names])
            if "shared_gate" in omit:
                T.pop("model.layers.%d.mlp.shared_expert_gate.weight" % layer)
    for name, w in T.items():
        w = np.asarray(w, dtype=np.float32)
        if ("bias" in omit and name.endswith("_proj.bias")) or ("qk_norm" in omit and "_norm.weight" in name
                                                                  and "self_attn." in name):
            continue  # a loader that ignored these would still run: the file must be refused
        if family == "gpt2":
            if name.endswith((".attn.bias", ".attn.masked_bias")):
                continue  # the causal-mask buffers
            if name.endswith((".c_attn.weight", ".c_proj.weight", ".c_fc.weight")):
                if not ("transpose" in omit and name.endswith("attn.c_proj.weight")):
                    w = w.T
        if family == "llama" and "permute" not in omit:
            if name.endswith("q_proj.weight"):
                w = permute_pairs(w, H)
            elif name.endswith("k_proj.weight"):
                w = permute_pairs(w, KV or H)
        if family in ("gemma2", "gemma3_text", "gemma") and name.endswith("norm.weight") and "one_plus" not in omit:
            w = w + np.float32(1)  # in float32, as the converter adds to the stored tensor
        out[gguf_name(family, name)] = np.ascontiguousarray(w)
    return kv, out


# ---------------------------------------------------------------- the cases

CASES = [
    # family, HF config, negative files (conventions left out)
    ("llama", dict(BASE, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-5, rope_theta=500.0,
                   tie_word_embeddings=False, hidden_act="silu", rope_scaling={"type": "linear", "factor": 4.0}),
     ["permute", "scaling"]),
    ("qwen2", dict(BASE, num_hidden_layers=3, num_key_value_heads=2, rope_theta=1000.0, tie_word_embeddings=False,
                   rms_norm_eps=1e-6, use_sliding_window=False), ["bias"]),
    ("qwen3", dict(BASE, num_key_value_heads=2, head_dim=16, tie_word_embeddings=True, rope_theta=1000.0,
                   rms_norm_eps=1e-6, use_sliding_window=False), ["qk_norm"]),
    ("gemma2", dict(BASE, num_hidden_layers=3, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=16,
                    sliding_window=4, attn_logit_softcapping=2.0, final_logit_softcapping=3.0, rope_theta=10000.0,
                    rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh", hidden_act="gelu_pytorch_tanh"),
     ["one_plus", "softcap", "window"]),
    ("gemma3_text", dict(BASE, num_hidden_layers=6, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=16,
                         sliding_window=4, sliding_window_pattern=6, rope_theta=100.0, rope_local_base_freq=10000.0,
                         rope_scaling={"rope_type": "linear", "factor": 2.0}, final_logit_softcapping=4.0,
                         attn_logit_softcapping=None, rms_norm_eps=1e-6),
     ["one_plus", "softcap", "window", "scaling"]),
    # Gemma 1 (2B's MQA): rope base 10000 (the converter writes none), tied head
    ("gemma", dict(BASE, num_key_value_heads=1, head_dim=16, rms_norm_eps=1e-6, hidden_act="gelu",
                   hidden_activation="gelu_pytorch_tanh"), ["one_plus"]),
    ("olmo2", dict(BASE, num_key_value_heads=2, rms_norm_eps=1e-5, rope_theta=1000.0, tie_word_embeddings=False),
     ["qk_norm"]),
    # Qwen2-MoE (every layer MoE, not renormalised: what llama.cpp's qwen2moe computes), experts stacked
    # (32 wide: whole Q8_0 blocks for the quantized-experts file)
    ("qwen2_moe", dict(BASE, num_key_value_heads=2, rope_theta=1000.0, num_experts=4, num_experts_per_tok=2,
                       moe_intermediate_size=32, shared_expert_intermediate_size=20, rms_norm_eps=1e-6),
     ["shared_gate", "expert_order", "bias"]),
    ("gpt2", dict(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=16, n_ctx=16, n_inner=None,
                  layer_norm_epsilon=1e-5, activation_function="gelu_new", _prefix="transformer.",
                  _mask_buffers=True),
     ["transpose"]),
]


def rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def logits(tinylm, model, out):
    if os.path.exists(out):
        os.remove(out)
    rc, _, err = run(tinylm, "logits", "--model", model, "--ids", " ".join(map(str, IDS)), "--out", out,
                     "--precision", "fp32")
    return (np.load(out).astype(np.float64) if rc == 0 else None), err.strip()


def test_archs(tinylm, work):
    for i, (family, cfg, negatives) in enumerate(CASES):
        T = test_hf.make_weights(family, cfg, seed=300 + i)
        conf = test_hf.hf_config(family, cfg)
        hf_dir = os.path.join(work, family + "_hf")
        test_hf.write_model(hf_dir, conf, T, "F32")
        stored = {k: test_hf.stored_values(v, "F32") for k, v in T.items()}
        ref = test_hf.reference(family, conf, stored, IDS)
        kv, tensors = convert(family, conf, T)
        path = os.path.join(work, family + ".gguf")
        write_gguf(path, kv, tensors)
        a, ea = logits(tinylm, hf_dir, os.path.join(work, family + "_hf.npy"))
        b, eb = logits(tinylm, path, os.path.join(work, family + "_gguf.npy"))
        if not check(a is not None, "%s: tinylm runs the HF directory" % family, ea) or \
           not check(b is not None, "%s: tinylm runs the GGUF (%s, no tokenizer)" % (family, ARCH[family]), eb):
            continue
        same = rel(b, a)
        exact = bool(np.array_equal(a, b))
        print("  %s: GGUF vs HF dir %s (max diff / max |logit| = %.2e); HF dir vs float64 %.2e, GGUF vs float64 "
              "%.2e" % (family, "bit for bit" if exact else "differ", same, rel(a, ref), rel(b, ref)))
        check(same <= SAME_TOL, "%s: GGUF logits = HF directory logits (rel %.1e)" % (family, same))
        check(rel(a, ref) <= REF_TOL, "%s: HF directory logits = float64 reference" % family, "%.2e" % rel(a, ref))
        check(rel(b, ref) <= REF_TOL, "%s: GGUF logits = float64 reference" % family, "%.2e" % rel(b, ref))
        if family == "qwen2_moe":  # the shared expert's gate as llama.cpp declares it, a vector {n_embd}
            flat = {k: (v.reshape(-1) if k.endswith("ffn_gate_inp_shexp.weight") else v) for k, v in tensors.items()}
            p1 = os.path.join(work, family + "_gate_1d.gguf")
            write_gguf(p1, kv, flat)
            c1, e1 = logits(tinylm, p1, os.path.join(work, family + "_gate_1d.npy"))
            check(c1 is not None and np.array_equal(c1, b), "%s: the gate stored 1-D reads the same" % family, e1)
            # the experts stored Q8_0 (as a quantized release): decoded to f32 at load (the engine keeps a mixture
            # of experts in f32 or bf16), so the logits are the float64 reference's on the decoded weights
            q8 = {k: (Q8_0(v) if "_exps." in k else v) for k, v in tensors.items()}
            pq = os.path.join(work, family + "_q8_0_experts.gguf")
            write_gguf(pq, kv, q8)
            dq = dict(stored)
            for k, v in q8.items():
                if isinstance(v, Q8_0):  # back to the HF names: expert e of the stacked [E, rows, cols]
                    layer, kind = k.split(".")[1], k.split(".")[2][len("ffn_"):-len("_exps")]
                    for e in range(v.shape[0]):
                        dq["model.layers.%s.mlp.experts.%d.%s_proj.weight" % (layer, e, kind)] = \
                            v.decoded[e].astype(np.float64)
            # hostile metadata: no expert_count; an expert_count the stacked tensors do not have
            for tag, kv2, needle in (("no expert_count", [x for x in kv if x[0] != "qwen2moe.expert_count"],
                                      "qwen2moe.expert_count is missing"),
                                     ("expert_count 3", [x if x[0] != "qwen2moe.expert_count" else (x[0], x[1], 3)
                                                         for x in kv], "blk.0.ffn_gate_inp.weight")):
                ph = os.path.join(work, family + "_bad.gguf")
                write_gguf(ph, kv2, tensors)
                ch, eh = logits(tinylm, ph, os.path.join(work, "bad.npy"))
                check(ch is None and needle in eh, "%s: %s refused naming it" % (family, tag), eh or "it ran")
            c2, e2 = logits(tinylm, pq, os.path.join(work, family + "_q8_0.npy"))
            rq = test_hf.reference(family, conf, dq, IDS)
            check(c2 is not None and rel(c2, rq) <= REF_TOL and rel(rq, ref) > 1e-6,
                  "%s: Q8_0 experts decoded at load = float64 reference on the decoded weights" % family,
                  e2 if c2 is None else "%.2e (vs the f32 weights' reference %.2e)" % (rel(c2, rq), rel(rq, ref)))
        for neg in negatives:
            kv2, t2 = convert(family, conf, T, omit=(neg,))
            p2 = os.path.join(work, "%s_no_%s.gguf" % (family, neg))
            write_gguf(p2, kv2, t2)
            c, ec = logits(tinylm, p2, os.path.join(work, "neg.npy"))
            d = rel(c, a) if c is not None else None
            print("  %s without %s: %s" % (family, neg, "refused: " + ec.splitlines()[-1] if c is None
                                           else "differs by %.2e" % d))
            if neg in ("bias", "qk_norm", "shared_gate"):  # tensors the architecture needs: refused, naming one
                want = "blk.0.ffn_gate_inp_shexp" if neg == "shared_gate" else "blk.0.attn_q"
                check(c is None and "is missing" in ec and want in ec, "%s: a file without the %s tensors is refused" % (family, neg),
                      ec or "it ran")
            else:
                check(c is not None and d > MUTANT_MIN,
                      "%s: a file without the converter's %s is caught" % (family, neg),
                      ec if c is None else "differs by only %.2e" % d)


if __name__ == "__main__":
    sys.exit(main([test_archs]))
