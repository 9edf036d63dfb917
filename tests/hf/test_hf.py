#!/usr/bin/python3
"""test_hf.py — the engine on Hugging Face checkpoints, llama2.c checkpoints and exports,
against independent references.

1. Families: for each case a tiny random checkpoint is written with the family's exact HF
   tensor names and config keys (F32, BF16, one F16, one sharded). The engine's logits
   (hf_tool logits) must match hf_ref.py (float64, from the stored — e.g. bf16-rounded —
   weights) within 1e-4 relative: max|engine - ref| / max|ref|. Every case also lists
   mutants: deliberately wrong modelling choices in the reference (w instead of 1 + w,
   swapped sliding layers, no embedding scale, ...); each must DISAGREE with the engine by
   more than 1e-3, which proves the test would catch that mistake.
2. Errors: unsupported model_type / rope type / activation, missing, unexpected, misshapen and
   I32 tensors, bad llama2.c headers -> non-zero exit and a message naming the culprit.
3. Export: llama- and gpt2-shaped models export as HF directories that hf_ref.py (reading the
   HF names) and the engine both run with the same logits; others export as "tinylm".
4. llama2.c: stories260K.bin against ref_llama2c.py (run.c's interleaved RoPE).

Prints "N passed, M failed" last; exits 1 on any failure.
usage: test_hf.py --tool build/hf_tool --work DIR [--data DIR (default: the repository's data/)]
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_ref  # noqa: E402
import ref_llama2c  # noqa: E402

TOL = 1e-4
MUTANT_MIN = 1e-3
IDS = [3, 17, 42, 5, 9, 60, 1, 33, 8, 21, 50, 2]

# ---- safetensors writing (json + numpy) -------------------------------------------------------------


def to_bf16_bits(a):
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def stored_values(a, dtype):
    """what a reader gets back from `a` stored as dtype, as float64"""
    if dtype == "F32":
        return a.astype(np.float32).astype(np.float64)
    if dtype == "F16":
        return a.astype(np.float16).astype(np.float64)
    if dtype == "BF16":
        return (to_bf16_bits(a).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    raise ValueError(dtype)


def encode(a, dtype):
    if dtype == "F32":
        return np.ascontiguousarray(a, dtype="<f4").tobytes()
    if dtype == "F16":
        return np.ascontiguousarray(a, dtype="<f2").tobytes()
    if dtype == "BF16":
        return to_bf16_bits(a).astype("<u2").tobytes()
    if dtype == "I32":
        return np.ascontiguousarray(a, dtype="<i4").tobytes()
    if dtype in ("F8_E4M3", "F8_E5M2"):  # (the codes themselves, one byte each: fp8_encode)
        return np.ascontiguousarray(a, dtype=np.uint8).tobytes()
    raise ValueError(dtype)


def write_safetensors(path, tensors, dtype="F32", dtypes=None, metadata=None):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        dt = (dtypes or {}).get(name, dtype)
        b = encode(a, dt)
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def write_model(d, cfg, tensors, dtype="F32", shards=1, dtypes=None):
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    if shards == 1:
        write_safetensors(os.path.join(d, "model.safetensors"), tensors, dtype, dtypes, {"format": "pt"})
        return
    names = list(tensors)
    weight_map = {}
    per = (len(names) + shards - 1) // shards
    for s in range(shards):
        fn = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
        part = {n: tensors[n] for n in names[s * per:(s + 1) * per]}
        write_safetensors(os.path.join(d, fn), part, dtype, dtypes, {"format": "pt"})
        weight_map.update({n: fn for n in part})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] in ("F32", "BF16"), e["dtype"]
        b, en = e["data_offsets"]
        if e["dtype"] == "BF16":  # (the upper half of a float32)
            v = np.frombuffer(raw[8 + n + b:8 + n + en], dtype="<u2").astype(np.uint32) << 16
            out[name] = v.view(np.float32).reshape(e["shape"]).astype(np.float64)
        else:
            out[name] = np.frombuffer(raw[8 + n + b:8 + n + en], dtype="<f4").reshape(e["shape"]).astype(np.float64)
    return out, header.get("__metadata__", {})


# ---- tiny checkpoints in each family's HF names (from the modeling files' module trees) -------------

def make_weights(family, cfg, seed):
    rng = np.random.default_rng(seed)
    T = {}

    def mat(name, out, inp, gain=1.0):
        T[name] = rng.normal(0.0, gain / np.sqrt(inp), (out, inp))

    def vec(name, n, center=0.0, spread=0.1):
        T[name] = center + spread * rng.normal(size=n)

    if family == "gpt2":
        d, H, L = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
        f = cfg.get("n_inner") or 4 * d
        V, npos = cfg["vocab_size"], cfg["n_positions"]
        pre = cfg.get("_prefix", "transformer.")
        T[pre + "wte.weight"] = rng.normal(0, 1.0, (V, d))
        T[pre + "wpe.weight"] = rng.normal(0, 0.5, (npos, d))
        for l in range(L):
            p = "%sh.%d." % (pre, l)
            vec(p + "ln_1.weight", d, 1.0, 0.2), vec(p + "ln_1.bias", d)
            T[p + "attn.c_attn.weight"] = rng.normal(0, 1.5 / np.sqrt(d), (d, 3 * d))  # Conv1D [in, out]
            vec(p + "attn.c_attn.bias", 3 * d)
            T[p + "attn.c_proj.weight"] = rng.normal(0, 1 / np.sqrt(d), (d, d))
            vec(p + "attn.c_proj.bias", d)
            vec(p + "ln_2.weight", d, 1.0, 0.2), vec(p + "ln_2.bias", d)
            T[p + "mlp.c_fc.weight"] = rng.normal(0, 1 / np.sqrt(d), (d, f))
            vec(p + "mlp.c_fc.bias", f)
            T[p + "mlp.c_proj.weight"] = rng.normal(0, 1 / np.sqrt(f), (f, d))
            vec(p + "mlp.c_proj.bias", d)
            if cfg.get("_mask_buffers"):  # what old GPT-2 checkpoints carry; transformers ignores them
                T[p + "attn.bias"] = np.tril(np.ones((npos, npos)))[None, None]
        vec(pre + "ln_f.weight", d, 1.0, 0.2), vec(pre + "ln_f.bias", d)
        if cfg.get("tie_word_embeddings") is False:
            T["lm_head.weight"] = rng.normal(0, 1 / np.sqrt(d), (V, d))
        return T

    if family == "gemma4_text":
        return gemma4_weights(cfg, rng, T, mat, vec)
    if family == "deepseek_v3":
        return deepseek_weights(cfg, rng, T, mat, vec)

    d, H, L, V = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"], cfg["vocab_size"]
    KV = cfg.get("num_key_value_heads") or H
    hd = cfg.get("head_dim") or d // H
    f = cfg["intermediate_size"]
    gemma = family in ("gemma2", "gemma3_text", "gemma")
    norm_center = 0.0 if gemma else 1.0  # Gemma stores w of (1 + w)
    P = "model."
    T[P + "embed_tokens.weight"] = rng.normal(0, 1.0, (V, d))
    qkv_bias = {"qwen2": True, "qwen2_moe": cfg.get("qkv_bias", True)}.get(family, cfg.get("attention_bias", False))
    o_bias = False if family in ("qwen2", "qwen2_moe") else cfg.get("attention_bias", False)
    mlp_bias = family == "llama" and cfg.get("mlp_bias", False)
    for l in range(L):
        p = "%slayers.%d." % (P, l)
        norms = {"llama": ["input_layernorm", "post_attention_layernorm"],
                 "qwen2": ["input_layernorm", "post_attention_layernorm"],
                 "qwen3": ["input_layernorm", "post_attention_layernorm"],
                 "qwen3_moe": ["input_layernorm", "post_attention_layernorm"],
                 "qwen2_moe": ["input_layernorm", "post_attention_layernorm"],
                 "mixtral": ["input_layernorm", "post_attention_layernorm"],
                 "mistral": ["input_layernorm", "post_attention_layernorm"],
                 "gemma": ["input_layernorm", "post_attention_layernorm"],
                 "olmo2": ["post_attention_layernorm", "post_feedforward_layernorm"],
                 "gemma2": ["input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                            "post_feedforward_layernorm"]}
        norms["gemma3_text"] = norms["gemma2"]
        for n in norms[family]:
            vec(p + n + ".weight", d, norm_center, 0.2)
        mat(p + "self_attn.q_proj.weight", H * hd, d, 2.0)
        mat(p + "self_attn.k_proj.weight", KV * hd, d, 2.0)
        mat(p + "self_attn.v_proj.weight", KV * hd, d)
        mat(p + "self_attn.o_proj.weight", d, H * hd)
        if qkv_bias:
            for n, size in (("q", H * hd), ("k", KV * hd), ("v", KV * hd)):
                vec(p + "self_attn.%s_proj.bias" % n, size, 0.0, 0.3)
        if o_bias:
            vec(p + "self_attn.o_proj.bias", d, 0.0, 0.3)
        if family in ("qwen3", "qwen3_moe", "gemma3_text"):
            vec(p + "self_attn.q_norm.weight", hd, norm_center, 0.3)
            vec(p + "self_attn.k_norm.weight", hd, norm_center, 0.3)
        if family == "olmo2":
            vec(p + "self_attn.q_norm.weight", H * hd, 1.0, 0.3)
            vec(p + "self_attn.k_norm.weight", KV * hd, 1.0, 0.3)
        moe = family == "mixtral" or (family in ("qwen3_moe", "qwen2_moe") and
                                      l not in (cfg.get("mlp_only_layers") or []) and
                                      (l + 1) % cfg.get("decoder_sparse_step", 1) == 0)
        if moe:  # the router (gate) and each expert, in the family's names
            E = cfg.get("num_local_experts") or cfg.get("num_experts")
            blk, names = ("block_sparse_moe.", ("w1", "w3", "w2")) if family == "mixtral" else \
                ("mlp.", ("gate_proj", "up_proj", "down_proj"))
            fe = f if family == "mixtral" else cfg["moe_intermediate_size"]
            mat(p + blk + "gate.weight", E, d, 3.0)
            for e in range(E):
                q = "%s%sexperts.%d." % (p, blk, e)
                mat(q + names[0] + ".weight", fe, d)
                mat(q + names[1] + ".weight", fe, d)
                mat(q + names[2] + ".weight", d, fe)
            if family == "qwen2_moe":  # the shared expert and its gate (a Linear d -> 1)
                fs = cfg["shared_expert_intermediate_size"]
                mat(p + "mlp.shared_expert.gate_proj.weight", fs, d)
                mat(p + "mlp.shared_expert.up_proj.weight", fs, d)
                mat(p + "mlp.shared_expert.down_proj.weight", d, fs)
                mat(p + "mlp.shared_expert_gate.weight", 1, d, 3.0)
            continue
        mat(p + "mlp.gate_proj.weight", f, d)
        mat(p + "mlp.up_proj.weight", f, d)
        mat(p + "mlp.down_proj.weight", d, f)
        if mlp_bias:
            vec(p + "mlp.gate_proj.bias", f), vec(p + "mlp.up_proj.bias", f), vec(p + "mlp.down_proj.bias", d)
    vec(P + "norm.weight", d, norm_center, 0.2)
    tie_default = gemma
    if not cfg.get("tie_word_embeddings", tie_default):
        T["lm_head.weight"] = rng.normal(0, 1.0 / np.sqrt(d), (V, d))
    return T


def deepseek_weights(cfg, rng, T, mat, vec):
    """DeepseekV3ForCausalLM's tensors: MLA (q_a_proj, q_a_layernorm, q_b_proj or q_proj; kv_a_proj_with_mqa,
    kv_a_layernorm, kv_b_proj, o_proj), dense MLPs before first_k_dense_replace, then the router (mlp.gate with
    its e_score_correction_bias), the routed experts and the shared experts; with num_nextn_predict_layers,
    that many multi-token-prediction layers after the last (transformers skips them on load)"""
    d, H, L, V = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"], cfg["vocab_size"]
    rq, rkv = cfg.get("q_lora_rank"), cfg["kv_lora_rank"]
    dn, dr, dv = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    f, fe, E = cfg["intermediate_size"], cfg["moe_intermediate_size"], cfg["n_routed_experts"]
    P = "model."
    T[P + "embed_tokens.weight"] = rng.normal(0, 1.0, (V, d))
    for l in range(L + cfg.get("num_nextn_predict_layers", 0)):
        p = "%slayers.%d." % (P, l)
        a = p + "self_attn."
        vec(p + "input_layernorm.weight", d, 1.0, 0.2)
        vec(p + "post_attention_layernorm.weight", d, 1.0, 0.2)
        if rq:
            mat(a + "q_a_proj.weight", rq, d, 2.0)
            vec(a + "q_a_layernorm.weight", rq, 1.0, 0.2)
            mat(a + "q_b_proj.weight", H * (dn + dr), rq, 2.0)
        else:
            mat(a + "q_proj.weight", H * (dn + dr), d, 2.0)
        mat(a + "kv_a_proj_with_mqa.weight", rkv + dr, d, 2.0)
        vec(a + "kv_a_layernorm.weight", rkv, 1.0, 0.2)
        mat(a + "kv_b_proj.weight", H * (dn + dv), rkv, 2.0)
        mat(a + "o_proj.weight", d, H * dv)
        if l >= L:  # a multi-token-prediction layer's own tensors (DeepSeek-V3's MTP module)
            mat(p + "eh_proj.weight", d, 2 * d)
            vec(p + "enorm.weight", d, 1.0, 0.2)
            vec(p + "hnorm.weight", d, 1.0, 0.2)
        if l < cfg["first_k_dense_replace"]:
            mat(p + "mlp.gate_proj.weight", f, d)
            mat(p + "mlp.up_proj.weight", f, d)
            mat(p + "mlp.down_proj.weight", d, f)
            continue
        mat(p + "mlp.gate.weight", E, d, 3.0)
        vec(p + "mlp.gate.e_score_correction_bias", E, 0.0, 0.05)
        for e in range(E):
            q = "%smlp.experts.%d." % (p, e)
            mat(q + "gate_proj.weight", fe, d), mat(q + "up_proj.weight", fe, d), mat(q + "down_proj.weight", d, fe)
        fs = fe * cfg["n_shared_experts"]
        q = p + "mlp.shared_experts."
        mat(q + "gate_proj.weight", fs, d), mat(q + "up_proj.weight", fs, d), mat(q + "down_proj.weight", d, fs)
    vec(P + "norm.weight", d, 1.0, 0.2)
    if not cfg.get("tie_word_embeddings", False):
        T["lm_head.weight"] = rng.normal(0, 1.0 / np.sqrt(d), (V, d))
    return T


def gemma4_weights(cfg, rng, T, mat, vec):
    """Gemma4ForCausalLM's tensors (modeling_gemma4.py's module tree): four norms of w (centred on 1),
    q/k norms of the layer's head_dim, no v norm weight, the layer_scalar buffer; full layers of
    global_head_dim (and num_global_key_value_heads, no v_proj, with K = V). The layers sharing keys
    and values carry k_proj / v_proj / k_norm anyway when cfg["_shared_kv_tensors"] (as converted
    checkpoints do; transformers drops them)."""
    d, H, L, V = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"], cfg["vocab_size"]
    KV, hd, f = cfg["num_key_value_heads"], cfg["head_dim"], cfg["intermediate_size"]
    ghd = cfg.get("global_head_dim") or hd
    types = list(cfg.get("layer_types") or ["sliding_attention" if (i + 1) % 6 else "full_attention"
                                            for i in range(L)])
    types[-1] = "full_attention"
    first_shared = L - cfg.get("num_kv_shared_layers", 0)
    P = "model."
    T[P + "embed_tokens.weight"] = rng.normal(0, 1.0, (V, d))
    ple = cfg.get("hidden_size_per_layer_input", 256)
    if ple:
        T[P + "embed_tokens_per_layer.weight"] = rng.normal(0, 1.0, (V, L * ple))
        mat(P + "per_layer_model_projection.weight", L * ple, d)
        vec(P + "per_layer_projection_norm.weight", ple, 1.0, 0.2)
    for l in range(L):
        p = "%slayers.%d." % (P, l)
        full = types[l] == "full_attention"
        lhd = ghd if full else hd
        k_eq_v = cfg.get("attention_k_eq_v") and full
        lkv = cfg["num_global_key_value_heads"] if k_eq_v else KV
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm"):
            vec(p + n + ".weight", d, 1.0, 0.2)
        mat(p + "self_attn.q_proj.weight", H * lhd, d, 2.0)
        vec(p + "self_attn.q_norm.weight", lhd, 1.0, 0.3)
        if l < first_shared or cfg.get("_shared_kv_tensors"):
            mat(p + "self_attn.k_proj.weight", lkv * lhd, d, 2.0)
            vec(p + "self_attn.k_norm.weight", lhd, 1.0, 0.3)
            if not k_eq_v:
                mat(p + "self_attn.v_proj.weight", lkv * lhd, d)
        mat(p + "self_attn.o_proj.weight", d, H * lhd)
        lf = 2 * f if cfg.get("use_double_wide_mlp") and l >= first_shared else f  # (Gemma4TextMLP)
        mat(p + "mlp.gate_proj.weight", lf, d)
        mat(p + "mlp.up_proj.weight", lf, d)
        mat(p + "mlp.down_proj.weight", d, lf)
        if cfg.get("enable_moe_block"):  # Gemma4TextRouter, Gemma4TextExperts (3-D), the block's three norms
            E, fe = cfg["num_experts"], cfg["moe_intermediate_size"]
            T[p + "router.proj.weight"] = rng.normal(0.0, 1.5, (E, d))  # (its input has RMS d^-0.5)
            vec(p + "router.scale", d, 1.0, 0.2)
            vec(p + "router.per_expert_scale", E, 1.0, 0.3)
            T[p + "experts.gate_up_proj"] = rng.normal(0.0, 1.0 / np.sqrt(d), (E, 2 * fe, d))
            T[p + "experts.down_proj"] = rng.normal(0.0, 1.0 / np.sqrt(fe), (E, d, fe))
            for n in ("post_feedforward_layernorm_1", "pre_feedforward_layernorm_2", "post_feedforward_layernorm_2"):
                vec(p + n + ".weight", d, 1.0, 0.2)
        if ple:
            mat(p + "per_layer_input_gate.weight", ple, d, 2.0)
            mat(p + "per_layer_projection.weight", d, ple)
            vec(p + "post_per_layer_input_norm.weight", d, 1.0, 0.2)
        vec(p + "layer_scalar", 1, 1.0, 0.3)
    vec(P + "norm.weight", d, 1.0, 0.2)
    if cfg.get("tie_word_embeddings") is False:
        T["lm_head.weight"] = rng.normal(0, 1.0 / np.sqrt(d), (V, d))
    return T


GEMMA4 = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2,
              head_dim=8, max_position_embeddings=64, hidden_size_per_layer_input=0, rms_norm_eps=1e-6,
              hidden_activation="gelu_pytorch_tanh", architectures=["Gemma4ForCausalLM"], pad_token_id=0,
              eos_token_id=1, bos_token_id=2, use_cache=True, attention_dropout=0.0, enable_moe_block=False,
              num_experts=None, top_k_experts=None, moe_intermediate_size=None, use_double_wide_mlp=False,
              vocab_size_per_layer_input=64, use_bidirectional_attention=None, dtype="bfloat16")

BASE = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=64)

CASES = [
    # name, model_type, config (HF keys), mutants that must fail
    ("llama_gqa_llama3", "llama",
     dict(BASE, num_key_value_heads=2, head_dim=16, rms_norm_eps=0.05, rope_theta=500.0, attention_bias=True,
          mlp_bias=True, tie_word_embeddings=False, hidden_act="silu",
          rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                            original_max_position_embeddings=64)),
     ["no_rope_scaling", "eps_default", "no_o_bias", "rope_interleaved"]),
    ("llama_tied_linear", "llama",
     dict(BASE, tie_word_embeddings=True, rope_scaling={"type": "linear", "factor": 4.0}),
     ["no_rope_scaling"]),
    ("qwen2_sliding", "qwen2",
     dict(BASE, num_hidden_layers=3, num_key_value_heads=2, use_sliding_window=True, sliding_window=4,
          max_window_layers=1, rope_theta=1000.0, tie_word_embeddings=False, rms_norm_eps=1e-6),
     ["sliding_off", "no_qkv_bias"]),
    ("qwen3_headdim", "qwen3",
     dict(BASE, num_key_value_heads=2, head_dim=16, tie_word_embeddings=True, rope_theta=1000.0,
          use_sliding_window=False, sliding_window=None, max_window_layers=2),
     ["no_qk_norm"]),
    ("gemma2_sandwich", "gemma2",
     dict(BASE, num_hidden_layers=3, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=24,
          sliding_window=4, attn_logit_softcapping=2.0, final_logit_softcapping=3.0, rope_theta=1000.0,
          hidden_activation="gelu_pytorch_tanh", hidden_act="gelu_pytorch_tanh"),
     ["w_not_1p", "swap_sliding", "no_embed_scale", "no_attn_softcap", "no_final_softcap", "scale_head_dim",
      "window_off_by_one"]),
    ("gemma3_pattern", "gemma3_text",
     dict(BASE, num_hidden_layers=4, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=16,
          sliding_window=4, sliding_window_pattern=3, rope_theta=10000.0, rope_local_base_freq=50.0,
          rope_scaling={"rope_type": "linear", "factor": 2.0}, final_logit_softcapping=None,
          attn_logit_softcapping=None),
     ["local_theta_global", "scaling_on_local", "no_qk_norm", "qk_norm_plain_w", "swap_sliding", "w_not_1p",
      "no_embed_scale"]),
    ("gemma3_v5_layer_types", "gemma3_text",
     dict(BASE, num_hidden_layers=3, num_key_value_heads=1, head_dim=8, query_pre_attn_scalar=8,
          sliding_window=3, final_logit_softcapping=4.0,
          layer_types=["full_attention", "sliding_attention", "sliding_attention"],
          rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 20000.0},
                           "sliding_attention": {"rope_type": "default", "rope_theta": 30.0}}),
     ["swap_sliding", "local_theta_global", "no_final_softcap"]),
    # Gemma 4: sliding layers (head_dim 8, 2 kv heads, base 100) and full ones (global_head_dim 16,
    # proportional RoPE: half the frequencies turn) of five layers, K = V on the full layers (1 kv
    # head), the last two sharing layer 2's (sliding) and layer 1's (full) keys and values (their own
    # k/v tensors in the file, dropped as transformers does), final soft-cap
    ("gemma4_kv_shared", "gemma4_text",
     dict(GEMMA4, num_hidden_layers=5, sliding_window=4, global_head_dim=16, final_logit_softcapping=5.0,
          layer_types=["sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
                       "full_attention"],
          rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                           "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.5,
                                              "rope_theta": 10000.0}},
          attention_k_eq_v=True, num_global_key_value_heads=1, num_kv_shared_layers=2, _shared_kv_tensors=True,
          use_double_wide_mlp=True),
     ["one_plus_w", "no_v_norm", "scale_head_dim", "no_proportional", "partial_over_rotated_dim", "no_layer_scalar", "local_theta_global", "shared_from_first", "k_eq_v_after_norm", "no_final_softcap",
      "no_embed_scale", "window_off_by_one"]),
    # the class defaults: no layer_types (5:1, the last layer made full: S S F), no rope_parameters
    # (base 1e4 sliding; 1e6 proportional, a quarter of global_head_dim's frequencies), an untied
    # head, attention biases, no soft-cap
    ("gemma4_defaults", "gemma4_text",
     dict(GEMMA4, num_hidden_layers=3, sliding_window=3, global_head_dim=16, attention_bias=False,
          tie_word_embeddings=False),
     ["no_proportional", "no_v_norm", "one_plus_w", "no_layer_scalar"]),
    # ... with per-layer inputs (E2B's hidden_size_per_layer_input, here 4) on shared keys and values
    ("gemma4_per_layer_inputs", "gemma4_text",
     dict(GEMMA4, num_hidden_layers=4, sliding_window=4, global_head_dim=16, hidden_size_per_layer_input=4,
          layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
          num_kv_shared_layers=2, final_logit_softcapping=30.0),
     ["ple_context_only", "one_plus_w", "no_layer_scalar", "no_v_norm"]),
    # ... with the MoE block (26B-A4B's enable_moe_block): 6 experts of 16, top 2, beside the dense MLP
    # of every layer, on sliding and full layers with K = V and shared keys and values
    ("gemma4_moe", "gemma4_text",
     dict(GEMMA4, num_hidden_layers=3, sliding_window=4, global_head_dim=16, final_logit_softcapping=30.0,
          layer_types=["sliding_attention", "full_attention", "full_attention"], attention_k_eq_v=True,
          num_global_key_value_heads=1, num_kv_shared_layers=1, enable_moe_block=True, num_experts=6,
          top_k_experts=2, moe_intermediate_size=16),
     ["moe_router_on_normed", "moe_no_router_root", "moe_no_expert_scale", "moe_gate_up_swapped", "one_plus_w",
      "no_layer_scalar"]),
    ("olmo2_fullqk", "olmo2",
     dict(BASE, num_key_value_heads=2, rms_norm_eps=1e-5, rope_theta=1000.0, tie_word_embeddings=False),
     ["qk_norm_per_head", "no_qk_norm"]),
    ("gpt2_plain", "gpt2",
     dict(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=16, n_inner=48, layer_norm_epsilon=1e-5,
          activation_function="gelu_new", _prefix="", _mask_buffers=True),
     ["no_transpose", "qkv_order"]),
    ("gpt2_untied_noscale", "gpt2",
     dict(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=16, n_inner=None, layer_norm_epsilon=1e-5,
          tie_word_embeddings=False, scale_attn_weights=False, _prefix="transformer."),
     ["qkv_order"]),
    # Mistral: a window of 4 in every layer (GQA, untied); then no window, MQA and head_dim != hidden/heads
    # (Mistral Nemo's shape), num_key_value_heads given (the class default 8 exceeds the heads here)
    ("mistral_window", "mistral",
     dict(BASE, num_hidden_layers=3, num_key_value_heads=2, sliding_window=4, rope_theta=1000.0, hidden_act="silu",
          tie_word_embeddings=False, rms_norm_eps=1e-5),
     ["sliding_off", "window_off_by_one", "rope_interleaved"]),
    ("mistral_nowindow_mqa", "mistral",
     dict(BASE, num_key_value_heads=1, head_dim=16, sliding_window=None, rope_theta=500.0),
     ["rope_interleaved"]),
    # Gemma 1: MQA (the 2B's shape), head_dim 16 != hidden/heads, released-style activation keys (hidden_act
    # "gelu" made inert by hidden_activation)
    ("gemma_mqa", "gemma",
     dict(BASE, num_key_value_heads=1, head_dim=16, rope_theta=1000.0, hidden_act="gelu",
          hidden_activation="gelu_pytorch_tanh", attention_bias=False),
     ["w_not_1p", "no_embed_scale", "scale_256", "silu_not_gelu"]),
    # mixtures of experts (after the others: tests below pick cases by index)
    ("qwen3_moe_step2", "qwen3_moe",
     dict(BASE, num_hidden_layers=3, num_key_value_heads=2, head_dim=16, rope_theta=1000.0, num_experts=6,
          num_experts_per_tok=2, moe_intermediate_size=20, norm_topk_prob=True, decoder_sparse_step=1,
          mlp_only_layers=[1], router_aux_loss_coef=0.001, output_router_logits=False),
     ["no_qk_norm", "moe_no_renorm", "moe_gate_up_swapped"]),
    ("qwen3_moe_defaults_nonorm", "qwen3_moe",
     dict(BASE, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, decoder_sparse_step=2,
          mlp_only_layers=None),
     ["moe_renorm", "no_qk_norm"]),
    ("mixtral_gqa", "mixtral",
     dict(BASE, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, rope_theta=1e4,
          sliding_window=None, router_jitter_noise=0.0, hidden_act="silu"),
     ["moe_no_renorm", "moe_gate_up_swapped"]),
    # DeepSeek-V3: MLA (q_lora, interleaved RoPE pairs) + DeepseekV3MoE (sigmoid routing with the selection
    # bias, 2 of 4 groups, scaled weights, a shared expert) after one dense layer, with one
    # multi-token-prediction layer in the file (skipped) and the hub config's remote-code keys
    ("deepseek_v3_mla_moe", "deepseek_v3",
     dict(BASE, num_hidden_layers=3, q_lora_rank=16, kv_lora_rank=12, qk_nope_head_dim=6, qk_rope_head_dim=4,
          v_head_dim=8, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=12, n_shared_experts=1,
          n_group=4, topk_group=2, routed_scaling_factor=2.5, first_k_dense_replace=1, norm_topk_prob=True,
          rope_theta=1000.0, num_key_value_heads=4, head_dim=4, num_nextn_predict_layers=1, topk_method="noaux_tc",
          scoring_func="sigmoid", moe_layer_freq=1, rope_interleave=True, hidden_act="silu"),
     ["rope_interleave_flipped", "no_kv_a_norm", "moe_no_bias", "moe_no_scaling"]),
    # ... without q_lora, RoPE in halves, YaRN (mscale_all_dim: the softmax scale), no groups, not renormalised
    ("deepseek_v3_yarn_plain_q", "deepseek_v3",
     dict(BASE, num_hidden_layers=2, q_lora_rank=None, kv_lora_rank=10, qk_nope_head_dim=4, qk_rope_head_dim=8,
          v_head_dim=12, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, n_shared_experts=2,
          n_group=1, topk_group=1, routed_scaling_factor=1.5, first_k_dense_replace=0, norm_topk_prob=False,
          rope_theta=100.0, rope_interleave=False, max_position_embeddings=48,
          rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 12,
                        "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 0.8}),
     ["no_mscale", "rope_interleave_flipped", "moe_no_scaling"]),
    # Qwen2-MoE (Qwen1.5-MoE): softmax top-2 of 4 not renormalised, a shared expert of its own width behind the
    # sigmoid gate, q/k/v biases, a dense layer (mlp_only_layers) of intermediate_size; then renormalised, every
    # second layer, qkv_bias false (transformers 5's key) and the released files' inert window
    ("qwen2_moe_shared_gate", "qwen2_moe",
     dict(BASE, num_hidden_layers=3, num_key_value_heads=2, rope_theta=1000.0, num_experts=4, num_experts_per_tok=2,
          moe_intermediate_size=12, shared_expert_intermediate_size=40, mlp_only_layers=[1], hidden_act="silu",
          router_aux_loss_coef=0.001, output_router_logits=False),
     ["moe_no_shared_gate", "moe_no_shared_expert", "moe_renorm", "moe_gate_up_swapped", "no_qkv_bias"]),
    ("qwen2_moe_step2_renorm", "qwen2_moe",
     dict(BASE, num_key_value_heads=4, num_experts=6, num_experts_per_tok=3, moe_intermediate_size=10,
          shared_expert_intermediate_size=24,
          norm_topk_prob=True, decoder_sparse_step=2, qkv_bias=False, use_sliding_window=False, sliding_window=4,
          max_window_layers=1),
     ["moe_no_shared_gate", "moe_no_renorm"]),
    # ... with a window of 4 on the layers layer_types names (the only form of a qwen2_moe window tinylm reads)
    ("qwen2_moe_layer_types_window", "qwen2_moe",
     dict(BASE, num_key_value_heads=2, num_experts=4, num_experts_per_tok=1, moe_intermediate_size=16,
          shared_expert_intermediate_size=16, use_sliding_window=True, sliding_window=4,
          layer_types=["sliding_attention", "full_attention"]),
     ["sliding_off", "moe_no_shared_gate"]),
]


# ---- running ---------------------------------------------------------------------------------------------

class Runner:
    def __init__(self, tool, work):
        self.tool, self.work = tool, work
        self.passed = self.failed = 0

    def check(self, name, ok, detail=""):
        print("%s %s%s" % ("PASS" if ok else "FAIL", name, (": " + detail) if detail else ""))
        if ok:
            self.passed += 1
        else:
            self.failed += 1

    def logits(self, model, ids, *dtype):
        out = os.path.join(self.work, "logits.npy")
        if os.path.exists(out):
            os.remove(out)
        r = subprocess.run([self.tool, "logits", model, " ".join(map(str, ids)), out, *dtype], capture_output=True,
                           text=True)
        if r.returncode != 0:
            return None, r.stderr.strip()
        return np.load(out).astype(np.float64), r.stderr.strip()

    def run(self, *args):
        return subprocess.run([self.tool, *args], capture_output=True, text=True)


def rel_err(c, r):
    return float(np.max(np.abs(c - r)) / np.max(np.abs(r)))


def hf_config(mt, cfg):
    return dict({k: v for k, v in cfg.items() if not k.startswith("_")}, model_type=mt)


def reference(mt, cfg, stored, ids, mut=()):
    W = {k: torch.tensor(v, dtype=torch.float64) for k, v in stored.items()}
    return hf_ref.FORWARD[mt](cfg, W, ids, set(mut)).numpy()


def tied_head_tests(R):
    """tie_word_embeddings: a stored lm_head.weight is ignored as transformers does (warning
    when it differs); a base-model checkpoint without the "model." prefix loads; saved RoPE
    inv_freq buffers are discarded."""
    name, mt, cfg, _ = next(c for c in CASES if c[0] == "llama_tied_linear")
    T = make_weights(mt, cfg, seed=11)
    conf = hf_config(mt, cfg)
    ref = reference(mt, conf, {k: stored_values(v, "F32") for k, v in T.items()}, IDS)
    bare = {k[len("model."):] if k.startswith("model.") else k: v for k, v in T.items()}
    bare["lm_head.weight"] = T["model.embed_tokens.weight"]
    bare["layers.0.self_attn.rotary_emb.inv_freq"] = np.ones(4)
    d = os.path.join(R.work, "tied_bare")
    write_model(d, conf, bare)
    got, err = R.logits(d, IDS)
    e = rel_err(got, ref) if got is not None else 1.0
    R.check("tied, no prefix, equal lm_head, inv_freq buffer", e <= TOL and "warning" not in err, "rel err %.2e %s" % (e, err))
    other = dict(T, **{"lm_head.weight": np.random.default_rng(5).normal(size=T["model.embed_tokens.weight"].shape)})
    d = os.path.join(R.work, "tied_other_head")
    write_model(d, conf, other)
    got, err = R.logits(d, IDS)
    e = rel_err(got, ref) if got is not None else 1.0
    R.check("tied with a different stored lm_head: embedding used, warning", e <= TOL and "lm_head.weight differs" in err,
            "rel err %.2e %s" % (e, err))


def family_tests(R):
    for i, (name, mt, cfg, mutants) in enumerate(CASES):
        T = make_weights(mt, cfg, seed=100 + i)
        conf = hf_config(mt, cfg)
        variants = [("f32", "F32", 1), ("bf16", "BF16", 1)]
        if name == "gemma2_sandwich":
            variants.append(("f16", "F16", 1))
        if name in ("llama_gqa_llama3", "mixtral_gqa", "gemma4_kv_shared", "gemma4_moe", "deepseek_v3_mla_moe",
                    "mistral_window", "gemma_mqa", "qwen2_moe_shared_gate"):
            variants.append(("sharded", "BF16", 2))
        for vname, dtype, shards in variants:
            d = os.path.join(R.work, "%s_%s" % (name, vname))
            write_model(d, conf, T, dtype, shards)
            stored = {k: stored_values(v, dtype) for k, v in T.items()}
            ref = reference(mt, conf, stored, IDS)
            got, err = R.logits(d, IDS)
            if got is None:
                R.check("%s/%s" % (name, vname), False, "engine failed: " + err)
                continue
            e = rel_err(got, ref)
            R.check("%s/%s logits" % (name, vname), e <= TOL, "rel err %.2e" % e)
            if vname != "f32":
                continue
            for m in mutants:
                em = rel_err(got, reference(mt, conf, stored, IDS, [m]))
                R.check("%s mutant %s is caught" % (name, m), em > MUTANT_MIN, "engine vs mutant %.2e" % em)


def deepseek_mtp_tests(R):
    """DeepSeek-V3's multi-token-prediction layers (num_nextn_predict_layers): their tensors, stored as layers
    after the last, are skipped with a note naming them (transformers ignores them on load); without the key
    the same file is refused naming the first tensor of the extra layer"""
    name, mt, cfg, _ = next(c for c in CASES if c[0] == "deepseek_v3_mla_moe")
    d = os.path.join(R.work, name + "_f32")
    got, err = R.logits(d, IDS)
    R.check("deepseek_v3: the MTP layer's tensors skipped with a note",
            got is not None and "multi-token-prediction layer" in err and "layers 3..3" in err, err)
    conf = hf_config(mt, cfg)
    del conf["num_nextn_predict_layers"]
    bad = os.path.join(R.work, "deepseek_no_nextn")
    write_model(bad, conf, make_weights(mt, cfg, seed=100 + [c[0] for c in CASES].index(name)))
    expect_error(R, "deepseek_v3 MTP tensors without num_nextn_predict_layers", bad, "model.layers.3.")
    for key, value, needle in (("scoring_func", "softmax", "scoring_func"), ("topk_method", "greedy", "topk_method"),
                               ("attention_bias", True, "attention_bias"), ("kv_lora_rank", 0, "kv_lora_rank")):
        d2 = os.path.join(R.work, "deepseek_bad_" + key)
        write_model(d2, dict(hf_config(mt, cfg), **{key: value}), make_weights(mt, cfg, seed=1))
        expect_error(R, "deepseek_v3 %s = %r refused" % (key, value), d2, needle)


def gemma4_multimodal_tests(R):
    """A Gemma4ForConditionalGeneration checkpoint (model_type gemma4): the text model under
    model.language_model. is read from text_config, the vision tower's tensors and config are skipped
    with a note; the logits are the text model's (hf_ref.gemma4_text on the same weights)"""
    name, mt, cfg, _ = next(c for c in CASES if c[0] == "gemma4_kv_shared")
    T = make_weights(mt, cfg, seed=21)
    text = hf_config(mt, cfg)
    conf = {"model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"], "text_config": text,
            "vision_config": {"model_type": "gemma4_vision", "hidden_size": 8}, "audio_config": None,
            "image_token_id": 258880, "audio_token_id": 258881, "boi_token_id": 255999, "eoi_token_id": 258882,
            "tie_word_embeddings": True, "transformers_version": "5.5.0"}
    mm = {("model.language_model." + k[len("model."):] if k.startswith("model.") else k): v for k, v in T.items()}
    rng = np.random.default_rng(3)
    mm["model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight"] = rng.normal(size=(8, 8))
    mm["model.embed_vision.embedding_projection.weight"] = rng.normal(size=(32, 8))
    d = os.path.join(R.work, "gemma4_multimodal")
    write_model(d, conf, mm)
    ref = reference(mt, text, {k: stored_values(v, "F32") for k, v in T.items()}, IDS)
    got, err = R.logits(d, IDS)
    e = rel_err(got, ref) if got is not None else 1.0
    R.check("gemma4 multimodal: the text model's logits, towers skipped with a note",
            e <= TOL and "vision_config" in err and "skipped the 2 tensors" in err, "rel err %.2e %s" % (e, err))
    expect_error(R, "gemma4 multimodal unknown key", write_and(d + "_bad", dict(conf, my_switch=1), mm), "my_switch")


def gemma3_multimodal_tests(R):
    """A Gemma3ForConditionalGeneration checkpoint (model_type gemma3, Gemma 3 4B/12B/27B): the text model of
    text_config (gemma3_text, its class defaults for the keys it leaves out) under language_model.model. (the
    released files) or model.language_model. (transformers >= 4.52), the vision tower and the projector skipped
    with a note; the logits are the text model's (hf_ref.gemma3_text on the same weights). Untied, the old
    layout's head is language_model.lm_head.weight."""
    name, mt, cfg, _ = next(c for c in CASES if c[0] == "gemma3_pattern")
    rng = np.random.default_rng(4)
    for layout, tied in (("language_model.model.", True), ("model.language_model.", True),
                         ("language_model.model.", False)):
        c2 = dict(cfg, tie_word_embeddings=tied)
        T = make_weights(mt, c2, seed=23)
        text = hf_config(mt, c2)
        conf = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"], "text_config": text,
                "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 8}, "mm_tokens_per_image": 256,
                "boi_token_index": 255999, "eoi_token_index": 256000, "image_token_index": 262144,
                "initializer_range": 0.02, "transformers_version": "4.50.0.dev0"}
        mm = {}
        for k, v in T.items():
            if k.startswith("model."):
                mm[layout + k[len("model."):]] = v
            else:  # the head
                mm["language_model.lm_head.weight" if layout.startswith("language_model") else k] = v
        vt = "vision_tower." if layout.startswith("language_model") else "model.vision_tower."
        mp = "multi_modal_projector." if layout.startswith("language_model") else "model.multi_modal_projector."
        mm[vt + "vision_model.encoder.layers.0.self_attn.q_proj.weight"] = rng.normal(size=(8, 8))
        mm[mp + "mm_input_projection_weight"] = rng.normal(size=(8, 32))
        d = os.path.join(R.work, "gemma3_mm_%s_%s" % (layout.split(".")[0], "tied" if tied else "untied"))
        write_model(d, conf, mm)
        ref = reference(mt, text, {k: stored_values(v, "F32") for k, v in T.items()}, IDS)
        got, err = R.logits(d, IDS)
        e = rel_err(got, ref) if got is not None else 1.0
        R.check("gemma3 multimodal (%s, %s): the text model's logits, vision tower skipped with a note" %
                (layout, "tied" if tied else "untied"),
                e <= TOL and "vision_config" in err and "skipped the 2 tensors" in err, "rel err %.2e %s" % (e, err))
    expect_error(R, "gemma3 multimodal text_config of another family",
                 write_and(d + "_bad", dict(conf, text_config=dict(text, model_type="llama")), mm), "text_config.model_type")
    expect_error(R, "gemma3 multimodal vision tensor outside the tower",
                 write_and(d + "_bad2", conf, dict(mm, **{"vision_tower_extra.weight": np.zeros(2)})),
                 "vision_tower_extra.weight")


def gemma1_activation_tests(R):
    """Gemma 1's activation keys: hidden_activation decides (hidden_act made inert is noted once); hidden_act
    "gelu" alone is ambiguous between transformers 4.x (tanh) and 5 (exact) and refused; an exact
    hidden_activation is refused as the engine has no exact-GELU GeGLU"""
    name, mt, cfg, _ = next(c for c in CASES if c[0] == "gemma_mqa")
    d = os.path.join(R.work, name + "_f32")
    r = R.run("load", d)
    R.check("gemma: hidden_act made inert by hidden_activation is noted once",
            r.returncode == 0 and r.stderr.count("hidden_act \"gelu\" is not used") == 1, r.stderr.strip())
    T = make_weights(mt, cfg, seed=3)
    conf = hf_config(mt, cfg)
    del conf["hidden_activation"]
    expect_error(R, "gemma hidden_act gelu without hidden_activation", write_and(d + "_amb", conf, T),
                 "hidden_act", "ambiguous")
    expect_error(R, "gemma exact hidden_activation",
                 write_and(d + "_exact", dict(conf, hidden_activation="gelu"), T), "hidden_activation", "gelu")
    conf2 = dict(conf)
    del conf2["hidden_act"]
    r = R.run("load", write_and(d + "_default", conf2, T))
    R.check("gemma without activation keys: the class default gelu_pytorch_tanh", r.returncode == 0, r.stderr.strip())


def inert_keys_tests(R):
    """Keys made inert by another key are read, noted once and ignored. Gemma 4 with enable_moe_block false that still carries num_experts / top_k_experts /
    moe_intermediate_size (transformers builds the dense model from it): read, noted once, ignored; the logits
    are the dense model's. A bad value of such a key is still an error naming it."""
    name, mt, cfg, _ = next(c for c in CASES if c[0] == "gemma4_kv_shared")
    T = make_weights(mt, cfg, seed=31)
    conf = dict(hf_config(mt, cfg), enable_moe_block=False, num_experts=8, top_k_experts=2, moe_intermediate_size=16)
    d = write_and(os.path.join(R.work, "gemma4_inert_moe"), conf, T)
    ref = reference(mt, conf, {k: stored_values(v, "F32") for k, v in T.items()}, IDS)
    got, err = R.logits(d, IDS)
    e = rel_err(got, ref) if got is not None else 1.0
    R.check("gemma4: MoE sizes with enable_moe_block false are inert: noted once, the dense model's logits",
            e <= TOL and err.count("num_experts, top_k_experts, moe_intermediate_size set while enable_moe_block") == 1,
            "rel err %.2e %s" % (e, err))
    del conf["enable_moe_block"]
    got, err = R.logits(write_and(d + "_absent", conf, T), IDS)
    e = rel_err(got, ref) if got is not None else 1.0
    R.check("gemma4: ... and with enable_moe_block absent", e <= TOL and "absent (false)" in err, "%.2e %s" % (e, err))
    expect_error(R, "gemma4 inert num_experts of a bad value", write_and(d + "_bad", dict(conf, num_experts="8"), T),
                 "num_experts")
    # Qwen2/Qwen3: the released files' sliding_window with use_sliding_window false (Qwen2.5, Qwen3)
    name, mt, cfg, _ = next(c for c in CASES if c[0] == "qwen3_headdim")
    T = make_weights(mt, cfg, seed=32)
    conf = dict(hf_config(mt, cfg), sliding_window=4, use_sliding_window=False, max_window_layers=0)
    ref = reference(mt, conf, {k: stored_values(v, "F32") for k, v in T.items()}, IDS)
    got, err = R.logits(write_and(os.path.join(R.work, "qwen3_inert_window"), conf, T), IDS)
    e = rel_err(got, ref) if got is not None else 1.0
    R.check("qwen3: sliding_window with use_sliding_window false is inert: noted once, full attention",
            e <= TOL and err.count("sliding_window = 4 is inert") == 1, "rel err %.2e %s" % (e, err))


# ---- FP8 (quantization_config fp8) -------------------------------------------------------------------

def fp8_decode(codes, fmt):
    """the OCP 8-bit float formats, from their definition: E4M3 ("fn": exponent bias 7, 3 mantissa bits, no
    infinities, S.1111.111 is NaN) and E5M2 (bias 15, 2 mantissa bits, exponent 31: infinity or NaN); float64"""
    c = np.asarray(codes, dtype=np.int64)
    mb, bias, top = (3, 7, 15) if fmt == "e4m3" else (2, 15, 31)
    sign = np.where(c & 0x80, -1.0, 1.0)
    e, m = (c & 0x7F) >> mb, c & ((1 << mb) - 1)
    v = np.where(e == 0, m * 2.0 ** (1 - bias - mb), ((1 << mb) + m) * 2.0 ** (e - bias - mb))
    if fmt == "e4m3":
        v = np.where((e == top) & (m == 7), np.nan, v)
    else:
        v = np.where(e == top, np.where(m == 0, np.inf, np.nan), v)
    return sign * v


def fp8_encode(x, fmt):
    """the nearest finite code of each value (any encoding will do: the test decodes what is stored)"""
    codes = np.arange(256)
    vals = fp8_decode(codes, fmt)
    ok = np.isfinite(vals)
    order = np.argsort(vals[ok], kind="stable")
    table, tcodes = vals[ok][order], codes[ok][order]
    i = np.clip(np.searchsorted(table, x), 1, len(table) - 1)
    pick = np.where(np.abs(table[i - 1] - x) <= np.abs(table[i] - x), i - 1, i)
    return tcodes[pick].astype(np.uint8)


def fp8_quantize(T, block, fmt, quantized):
    """(tensors, dtypes, dequantized) of a checkpoint whose `quantized` matrices are FP8 with one
    NAME_scale_inv (F32) per block [b0, b1] (partial last blocks), as DeepSeek-V3's release: scale =
    amax / the format's largest value; the reference weights are decoded value * scale rounded once to f32"""
    out, dtypes, deq = dict(T), {}, {}
    top = 448.0 if fmt == "e4m3" else 57344.0
    for name in quantized:
        w = T[name]
        R, C = w.shape
        b0, b1 = block
        sr, sc = -(-R // b0), -(-C // b1)
        scale = np.zeros((sr, sc), dtype=np.float32)
        for i in range(sr):
            for j in range(sc):
                blk = w[i * b0:(i + 1) * b0, j * b1:(j + 1) * b1]
                scale[i, j] = np.float32(max(np.abs(blk).max(), 1e-12) / top)
        full = np.repeat(np.repeat(scale.astype(np.float64), b0, 0), b1, 1)[:R, :C]
        q = fp8_encode(w / full, fmt)
        out[name], dtypes[name] = q, "F8_" + fmt.upper()
        out[name + "_scale_inv"] = scale
        deq[name] = (fp8_decode(q, fmt) * full).astype(np.float32)  # (one rounding of the exact product)
    return out, dtypes, deq


def fp8_quantize_stacked(T, block, fmt, names, restart_at=None):
    """fp8_quantize for stacked experts [E, R, C] (transformers' FP8Expert: gate_up_proj / down_proj with a
    NAME_scale_inv of [E, ceil(R / b0), ceil(C / b1)], the blocks counted within each expert's matrix); the
    dequantized weights, and (restart_at: a row) those of a decoder that restarts the block rows there (a reader
    that forgot that up's rows follow gate's within one expert's blocks)"""
    out, dtypes, deq, wrong = dict(T), {}, {}, {}
    top = 448.0 if fmt == "e4m3" else 57344.0
    b0, b1 = block
    for name in names:
        w = T[name]
        E, R, C = w.shape
        sr, sc = -(-R // b0), -(-C // b1)
        scale = np.zeros((E, sr, sc), dtype=np.float32)
        for e in range(E):
            for i in range(sr):
                for j in range(sc):
                    scale[e, i, j] = np.float32(max(np.abs(w[e, i * b0:(i + 1) * b0, j * b1:(j + 1) * b1]).max(),
                                                    1e-12) / top)
        full = np.repeat(np.repeat(scale.astype(np.float64), b0, 1), b1, 2)[:, :R, :C]
        q = fp8_encode(w / full, fmt)
        out[name], dtypes[name] = q, "F8_" + fmt.upper()
        out[name + "_scale_inv"] = scale
        deq[name] = (fp8_decode(q, fmt) * full).astype(np.float32)
        if restart_at is not None and name.endswith("gate_up_proj"):
            bad = full.copy()
            bad[:, restart_at:] = full[:, :R - restart_at]
            wrong[name] = (fp8_decode(q, fmt) * bad).astype(np.float32)
    return out, dtypes, deq, wrong


def fp8_stacked_tests(R):
    """Gemma 4's stacked experts as transformers' FP8Expert stores them (gate_up_proj [E, 2 fe, d], down_proj
    [E, d, fe], each with a per-expert block scale tensor; blocks of 6 x 10: up's rows start inside a block), the
    other projections FP8 too: the logits match the float64 reference on the dequantized weights; a decoder that
    restarts the block rows at up's first row would differ; a GPT-2 checkpoint's FP8 c_attn (fused, transposed:
    no nn.Linear, so no FP8 release has it) is refused naming the tensor"""
    name, mt, cfg, _ = next(c for c in CASES if c[0] == "gemma4_moe")
    T = make_weights(mt, cfg, seed=43)
    conf = dict(hf_config(mt, cfg), quantization_config={"quant_method": "fp8", "fmt": "e4m3",
                                                         "weight_block_size": [6, 10]})
    stacked = [k for k in T if k.endswith("experts.gate_up_proj") or k.endswith("experts.down_proj")]
    flat = [k for k in T if k.endswith("_proj.weight")]
    fe = cfg["moe_intermediate_size"]
    Q, dtypes, deq, wrong = fp8_quantize_stacked(T, (6, 10), "e4m3", stacked, restart_at=fe)
    Q, dt2, deq2 = fp8_quantize(Q, (6, 10), "e4m3", flat)
    dtypes.update(dt2), deq.update(deq2)
    base = {k: stored_values(v, "F32") for k, v in T.items()}
    ref = reference(mt, conf, dict(base, **{k: v.astype(np.float64) for k, v in deq.items()}), IDS)
    bad = reference(mt, conf, dict(base, **{k: v.astype(np.float64) for k, v in dict(deq, **wrong).items()}), IDS)
    d = os.path.join(R.work, "fp8_gemma4_moe")
    write_model(d, conf, Q, "F32", 1, dtypes)
    got, err = R.logits(d, IDS, "--dtype", "f32")
    e = rel_err(got, ref) if got is not None else 1.0
    R.check("fp8 gemma4 stacked experts (FP8Expert's per-expert block scales, up's rows inside a block): logits = "
            "float64 reference on the dequantized weights", e <= TOL, "rel err %.2e %s" % (e, err))
    R.check("fp8 stacked: a decoder that restarts the blocks at up's rows would be caught",
            got is not None and rel_err(got, bad) > MUTANT_MIN, "%.2e" % (rel_err(got, bad) if got is not None else 0))
    s0 = stacked[0] + "_scale_inv"
    expect_error(R, "fp8 stacked scale of the wrong shape",
                 write_and_dtypes(os.path.join(R.work, "fp8_gemma4_bad_scale"), conf,
                                  dict(Q, **{s0: Q[s0][:, :-1].copy()}), dtypes), s0, "stacked")
    g = next(c for c in CASES if c[0] == "gpt2_plain")
    Tg = make_weights(g[1], g[2], seed=44)
    cg = dict(hf_config(g[1], g[2]), quantization_config={"quant_method": "fp8", "fmt": "e4m3",
                                                          "weight_block_size": [8, 8]})
    w = next(k for k in Tg if k.endswith("attn.c_attn.weight"))
    Qg, dtg, _ = fp8_quantize(Tg, (8, 8), "e4m3", [w])
    expect_error(R, "fp8 GPT-2 c_attn (fused, transposed)",
                 write_and_dtypes(os.path.join(R.work, "fp8_gpt2_c_attn"), cg, Qg, dtg), w, "layout")


def fp8_export_tests(R, src, mt, quantized, deq):
    """An FP8 checkpoint exported: as a Hugging Face directory in BF16 (`export --type bf16`: every tensor BF16,
    the FP8 matrices bf16(value x scale) bit for bit, torch_dtype bfloat16, its logits the float64 reference's on
    those weights) and as GGUF in f32 and bf16 (llama.cpp's llama): each GGUF's logits equal the FP8 directory's
    with the same weights in memory (--dtype f32 / bf16), bit for bit"""
    dst = os.path.join(R.work, "fp8_llama_export_bf16")
    shutil.rmtree(dst, ignore_errors=True)
    r = R.run("export", "--model", src, "--out", dst, "--no-tokenizer", "--type", "bf16")
    R.check("fp8 export --type bf16 (HF)", r.returncode == 0, r.stderr.strip())
    if r.returncode != 0:
        return
    raw = open(os.path.join(dst, "model.safetensors"), "rb").read()
    header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
    W, _ = read_safetensors(os.path.join(dst, "model.safetensors"))
    conf = json.load(open(os.path.join(dst, "config.json")))
    diff = [k for k in quantized if not np.array_equal(W[k], stored_values(deq[k], "BF16"))]
    R.check("fp8 export bf16: every tensor BF16, the FP8 matrices bf16(value x scale) bit for bit, torch_dtype "
            "bfloat16", not diff and all(e["dtype"] == "BF16" for k, e in header.items() if k != "__metadata__")
            and conf.get("torch_dtype") == "bfloat16", "differ: %s" % diff[:3])
    got, err = R.logits(dst, IDS)
    e = rel_err(got, reference(mt, conf, W, IDS)) if got is not None else 1.0
    R.check("fp8 export bf16: its logits = float64 reference on its weights", e <= TOL, "rel err %.2e %s" % (e, err))
    # (GGUF: a llama that llama.cpp's llama computes: linear RoPE scaling, tied head; E4M3 blocks of 8 x 12)
    name, mt, cfg, _ = next(c for c in CASES if c[0] == "llama_tied_linear")
    T = make_weights(mt, cfg, seed=45)
    Q, dtypes, _ = fp8_quantize(T, (8, 12), "e4m3", [k for k in T if k.endswith("_proj.weight")])
    src = os.path.join(R.work, "fp8_llama_linear")
    write_model(src, dict(hf_config(mt, cfg), quantization_config={"quant_method": "fp8", "weight_block_size": [8, 12]}),
                Q, "F32", 1, dtypes)
    for t in ("f32", "bf16"):
        g = os.path.join(R.work, "fp8_llama_%s.gguf" % t)
        if os.path.exists(g):
            os.remove(g)
        r = R.run("export", "--model", src, "--out", g, "--format", "gguf", "--type", t, "--no-tokenizer")
        a, ea = R.logits(g, IDS, "--dtype", "auto") if r.returncode == 0 else (None, r.stderr.strip())
        b, eb = R.logits(src, IDS, "--dtype", t)
        R.check("fp8 export as GGUF %s: logits = the FP8 directory's with %s weights, bit for bit" % (t, t),
                a is not None and b is not None and np.array_equal(a, b),
                "%s %s %s" % (ea, eb, "" if a is None or b is None else "max diff %.2e" % np.max(np.abs(a - b))))
    r = R.run("export", "--model", os.path.join(R.work, "fp8_deepseek"), "--out",
              os.path.join(R.work, "fp8_deepseek.gguf"), "--format", "gguf", "--no-tokenizer")
    R.check("fp8 deepseek_v3 as GGUF: refused (llama.cpp's llama has no MLA, no experts), saying why",
            r.returncode != 0 and "cannot export as GGUF" in r.stderr, r.stderr.strip())


def write_and_dtypes(d, conf, tensors, dtypes):
    write_model(d, conf, tensors, "F32", 1, dtypes)
    return d


def fp8_tests(R):
    """FP8 checkpoints (DeepSeek-V3 / Qwen3 FP8 releases): F8_E4M3 (and F8_E5M2) weights with a weight_scale_inv
    per block, partial last blocks, the router, norms, embedding and head unquantized. The engine's weights (read
    back through an export) equal the reference decoder's dequantization bit for bit; its logits match the float64
    reference on those weights (F32 storage of the rest, and two shards that split weights from their scales);
    hostile files give errors naming the tensor."""
    name, mt, cfg, _ = next(c for c in CASES if c[0] == "deepseek_v3_mla_moe")
    T = make_weights(mt, cfg, seed=41)
    L = cfg["num_hidden_layers"]
    T = {k: v for k, v in T.items() if not k.startswith("model.layers.%d." % L)}  # (no MTP layer here)
    conf = dict(hf_config(mt, cfg), num_nextn_predict_layers=0,
                quantization_config={"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                     "weight_block_size": [6, 10]})
    quantized = [k for k in T if k.endswith("_proj.weight") or k.endswith("kv_a_proj_with_mqa.weight")]
    Q, dtypes, deq = fp8_quantize(T, (6, 10), "e4m3", quantized)
    ref_w = dict({k: stored_values(v, "F32") for k, v in T.items()}, **{k: v.astype(np.float64) for k, v in deq.items()})
    ref = reference(mt, conf, ref_w, IDS)
    for tag, shards in (("", 1), ("_sharded", 2)):
        d = os.path.join(R.work, "fp8_deepseek" + tag)
        write_model(d, conf, Q, "F32", shards, dtypes)
        got, err = R.logits(d, IDS)
        e = rel_err(got, ref) if got is not None else 1.0
        R.check("fp8 deepseek_v3%s (E4M3, blocks 6 x 10, partial): logits = float64 reference on the dequantized "
                "weights" % tag, e <= TOL, "rel err %.2e %s" % (e, err))
    d = os.path.join(R.work, "fp8_deepseek")
    dst = os.path.join(R.work, "fp8_deepseek_export")
    shutil.rmtree(dst, ignore_errors=True)
    r = R.run("export", "--model", d, "--out", dst, "--no-tokenizer")
    if r.returncode != 0:
        R.check("fp8: export of the dequantized model", False, r.stderr.strip())
    else:
        W, _ = read_safetensors(os.path.join(dst, "model.safetensors"))
        diff = [k for k in quantized if not np.array_equal(W[k].astype(np.float32), deq[k])]
        R.check("fp8: every dequantized weight equals the reference decoder's, bit for bit (%d tensors)" % len(quantized),
                not diff, "differ: %s" % diff[:3])
    # as the release is stored (every other matrix BF16): --dtype auto keeps it compact, the dequantized weights
    # rounded once more to bf16 as they are read (the float64 reference on those weights), --dtype f32 the exact
    # dequantized weights
    d = os.path.join(R.work, "fp8_deepseek_bf16_rest")
    dtypes_bf16 = dict({k: "BF16" for k in Q if k not in dtypes and not k.endswith("_scale_inv")}, **dtypes)
    write_model(d, conf, Q, "F32", 1, dtypes_bf16)
    rest = {k: stored_values(v, "BF16") for k, v in T.items() if k not in deq}
    deq16 = {k: stored_values(v, "BF16") for k, v in deq.items()}
    rel16 = max(float(np.max(np.abs(deq16[k] - deq[k]) / np.maximum(np.abs(deq[k]), 1e-30))) for k in deq)
    ref16 = reference(mt, conf, dict(rest, **deq16), IDS)
    ref32 = reference(mt, conf, dict(rest, **{k: v.astype(np.float64) for k, v in deq.items()}), IDS)
    got16, err = R.logits(d, IDS)
    e16 = rel_err(got16, ref16) if got16 is not None else 1.0
    R.check("fp8 + BF16 rest, --dtype auto: bf16 at load = float64 reference on bf16(value x scale) (weights off the "
            "exact dequantization by <= %.2e relative)" % rel16, e16 <= TOL and rel16 <= 2.0 ** -8,
            "rel err %.2e %s" % (e16, err))
    got32, err = R.logits(d, IDS, "--dtype", "f32")
    e32 = rel_err(got32, ref32) if got32 is not None else 1.0
    R.check("fp8 + BF16 rest, --dtype f32: the exact dequantized weights = float64 reference", e32 <= TOL,
            "rel err %.2e %s" % (e32, err))
    R.check("fp8: the bf16 weights are what auto ran (its logits nearer their reference than the f32 one's)",
            got16 is not None and rel_err(got16, ref16) < rel_err(got16, ref32) and rel_err(ref16, ref32) > 1e-4,
            "auto vs ref16 %.2e, vs ref32 %.2e" % (e16, rel_err(got16, ref32) if got16 is not None else 1.0))
    # E5M2 on a llama, blocks of 8 x 12 (partial columns of 32 and 48)
    name, mt, cfg, _ = CASES[0]
    T = make_weights(mt, cfg, seed=42)
    conf = dict(hf_config(mt, cfg), quantization_config={"quant_method": "fp8", "fmt": "e5m2",
                                                         "weight_block_size": [8, 12]})
    quantized = [k for k in T if k.endswith("_proj.weight")]
    Q, dtypes, deq = fp8_quantize(T, (8, 12), "e5m2", quantized)
    ref_w = dict({k: stored_values(v, "F32") for k, v in T.items()}, **{k: v.astype(np.float64) for k, v in deq.items()})
    d = os.path.join(R.work, "fp8_llama_e5m2")
    write_model(d, conf, Q, "F32", 1, dtypes)
    got, err = R.logits(d, IDS)
    e = rel_err(got, reference(mt, conf, ref_w, IDS)) if got is not None else 1.0
    R.check("fp8 llama (E5M2, blocks 8 x 12): logits = float64 reference", e <= TOL, "rel err %.2e %s" % (e, err))
    fp8_export_tests(R, d, mt, quantized, deq)
    # hostile files, each refused naming the tensor (or the key)
    w0 = "model.layers.0.self_attn.q_proj.weight"
    s0 = w0 + "_scale_inv"
    nan_scale = dict(Q, **{s0: np.where(np.arange(Q[s0].size).reshape(Q[s0].shape) == 1, np.nan, Q[s0])})
    inf_scale = dict(Q, **{s0: np.where(np.arange(Q[s0].size).reshape(Q[s0].shape) == 0, np.inf, Q[s0])})
    nan_code = dict(Q, **{w0: np.where(np.arange(Q[w0].size).reshape(Q[w0].shape) == 5, 0x7F, Q[w0]).astype(np.uint8)})
    for tag, conf2, T2, needles in (
            ("scale missing", conf, {k: v for k, v in Q.items() if k != s0}, [s0, "missing"]),
            ("scale of the wrong shape", conf, dict(Q, **{s0: Q[s0].T.copy()}), [s0, "shape"]),
            ("NaN scale", conf, nan_scale, [s0, "finite"]),
            ("Inf scale", conf, inf_scale, [s0, "finite"]),
            ("E5M2 NaN code", conf, nan_code, [w0, "NaN"]),
            ("block size 0", dict(conf, quantization_config=dict(conf["quantization_config"], weight_block_size=[0, 12])),
             Q, ["weight_block_size[0]"]),
            ("FP8 weights without quantization_config", {k: v for k, v in conf.items() if k != "quantization_config"},
             Q, [w0, "quantization_config"])):
        dd = os.path.join(R.work, "fp8_bad_" + tag.replace(" ", "_"))
        write_model(dd, conf2, T2, "F32", 1, dtypes)
        expect_error(R, "fp8 " + tag, dd, *needles)


def write_and(d, conf, tensors):
    write_model(d, conf, tensors)
    return d


# ---- error handling -------------------------------------------------------------------------------------

def expect_error(R, name, model, *needles):
    r = R.run("load", model)
    msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
    ok = r.returncode != 0 and all(n in msg for n in needles)
    R.check("error: " + name, ok, msg if ok else "rc %d, stderr %r" % (r.returncode, r.stderr.strip()))


def error_tests(R):
    name, mt, cfg, _ = CASES[0]
    T = make_weights(mt, cfg, seed=7)
    conf = hf_config(mt, cfg)
    base = os.path.join(R.work, "err")

    def variant(tag, conf2=None, tensors=None, dtypes=None):
        d = base + "_" + tag
        write_model(d, conf2 or conf, tensors if tensors is not None else T, "F32", 1, dtypes)
        return d

    expect_error(R, "unsupported model_type", variant("mt", dict(conf, model_type="phi3")),
                 'model_type "phi3"', "not supported")
    expect_error(R, "unsupported rope type", variant("yarn", dict(conf, rope_scaling={"rope_type": "yarn", "factor": 4.0})),
                 "yarn", "rope_scaling")
    expect_error(R, "unsupported activation", variant("act", dict(conf, hidden_act="gelu")), "hidden_act", "gelu")
    expect_error(R, "partial rotary", variant("prf", dict(conf, partial_rotary_factor=0.5)), "partial_rotary_factor")
    missing = dict(T)
    del missing["model.layers.1.mlp.up_proj.weight"]
    expect_error(R, "missing tensor", variant("missing", tensors=missing), "model.layers.1.mlp.up_proj.weight")
    extra = dict(T, **{"model.layers.0.self_attn.extra.weight": np.zeros((2, 2))})
    expect_error(R, "unexpected tensor", variant("extra", tensors=extra), "model.layers.0.self_attn.extra.weight")
    bad = dict(T)
    bad["model.layers.0.self_attn.o_proj.weight"] = T["model.layers.0.self_attn.o_proj.weight"].T.copy()
    expect_error(R, "wrong shape", variant("shape", tensors=bad), "model.layers.0.self_attn.o_proj.weight", "[64, 32]")
    expect_error(R, "I32 weights", variant("i32", dtypes={"model.layers.0.mlp.down_proj.weight": "I32"}),
                 "model.layers.0.mlp.down_proj.weight", "I32")
    nohead = dict(T)
    del nohead["lm_head.weight"]
    expect_error(R, "untied model without lm_head", variant("nohead", tensors=nohead), "lm_head.weight")
    # gemma-specific and qwen-specific refusals
    g3 = next(c for c in CASES if c[0] == "gemma3_pattern")
    expect_error(R, "gemma3 attn softcap", variant("g3cap", dict(hf_config("gemma3_text", g3[2]), attn_logit_softcapping=50.0),
                                                   make_weights("gemma3_text", g3[2], 1)), "attn_logit_softcapping")
    q2 = next(c for c in CASES if c[0] == "qwen2_sliding")
    expect_error(R, "qwen2 sliding layer without window",
                 variant("q2sw", dict(hf_config("qwen2", q2[2]), use_sliding_window=False,
                                      layer_types=["full_attention", "sliding_attention", "full_attention"]),
                         make_weights("qwen2", q2[2], 2)), "layer_types[1]", "sliding")
    # exact (erf) GELU differs from the tanh form by ~1e-4 of the logits here, too little for the
    # logits comparison to separate: the config check that refuses it is tested instead
    g2 = hf_config("gemma2", CASES[4][2])
    expect_error(R, "gemma2 exact gelu", variant("g2gelu", dict(g2, hidden_activation="gelu"),
                                                  make_weights("gemma2", CASES[4][2], 3)), "hidden_activation", "gelu")
    gp = next(c for c in CASES if c[0] == "gpt2_plain")
    expect_error(R, "gpt2 exact gelu", variant("gpt2gelu", dict(hf_config("gpt2", gp[2]), activation_function="gelu"),
                                                make_weights("gpt2", gp[2], 4)), "activation_function", "gelu")
    # Gemma 4: every key the reader does not implement is refused by name, never ignored
    g4 = next(c for c in CASES if c[0] == "gemma4_kv_shared")
    g4c, g4w = hf_config("gemma4_text", g4[2]), make_weights("gemma4_text", g4[2], 5)
    for tag, over, needles in [
            ("unknown key", dict(query_pre_attn_scalar=256), ["query_pre_attn_scalar", "not supported"]),
            ("attn soft-cap key", dict(attn_logit_softcapping=50.0), ["attn_logit_softcapping"]),
            ("moe block without its sizes", dict(enable_moe_block=True), ["enable_moe_block", "num_experts"]),
            ("per-layer inputs of another vocabulary", dict(hidden_size_per_layer_input=4,
                                                            vocab_size_per_layer_input=32),
             ["vocab_size_per_layer_input"]),
            ("bidirectional all", dict(use_bidirectional_attention="all"), ["use_bidirectional_attention"]),
            ("k = v without global kv heads", dict(num_global_key_value_heads=None), ["num_global_key_value_heads"]),
            ("rope type", dict(rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                                                "full_attention": {"rope_type": "yarn", "factor": 2.0,
                                                                   "rope_theta": 1e4}}), ["yarn"]),
            ("rope key", dict(rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 100.0,
                                                                     "beta_fast": 32},
                                               "full_attention": {"rope_type": "proportional", "rope_theta": 1e4}}),
             ["beta_fast"]),
            ("default rope on full layers of their own width",
             dict(rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                                   "full_attention": {"rope_type": "default", "rope_theta": 1e4}}),
             ["rope_parameters.full_attention", "global_head_dim"]),
            ("shared layer without a source", dict(num_kv_shared_layers=4), ["num_kv_shared_layers"])]:
        expect_error(R, "gemma4 " + tag, variant("g4_" + tag.split()[0] + str(len(tag)), dict(g4c, **over), g4w),
                     *needles)
    # the MoE block: its experts' tensor of the wrong shape, a router tensor missing, each named
    gm = next(c for c in CASES if c[0] == "gemma4_moe")
    gmc, gmw = hf_config("gemma4_text", gm[2]), make_weights("gemma4_text", gm[2], 7)
    expect_error(R, "gemma4 moe experts' tensor of another width",
                 variant("g4m_shape", gmc, dict(gmw, **{"model.layers.1.experts.gate_up_proj": np.zeros((6, 16, 32))})),
                 "model.layers.1.experts.gate_up_proj", "[6, 16, 32]")
    expect_error(R, "gemma4 moe per-expert scales missing",
                 variant("g4m_scale", gmc, {k: v for k, v in gmw.items() if k != "model.layers.2.router.per_expert_scale"}),
                 "model.layers.2.router.per_expert_scale")
    expect_error(R, "gemma4 moe block with top_k above the experts", variant("g4m_k", dict(gmc, top_k_experts=7), gmw),
                 "top_k_experts", "num_experts")
    bad_v = dict(g4w, **{"model.layers.1.self_attn.v_proj.weight": np.zeros((8 * 2, 32))})
    expect_error(R, "gemma4 v_proj in a K = V layer", variant("g4_vproj", g4c, bad_v),
                 "model.layers.1.self_attn.v_proj.weight")
    expect_error(R, "gemma2 bidirectional", variant("bidir", dict(hf_config("gemma2", CASES[4][2]), use_bidirectional_attention=True),
                                                    make_weights("gemma2", CASES[4][2], 3)), "use_bidirectional_attention")
    mx = next(c for c in CASES if c[0] == "mixtral_gqa")
    expect_error(R, "mixtral router jitter", variant("mxjit", dict(hf_config("mixtral", mx[2]), router_jitter_noise=0.1),
                                                     make_weights("mixtral", mx[2], 5)), "router_jitter_noise")
    qm = next(c for c in CASES if c[0] == "qwen3_moe_step2")
    expect_error(R, "qwen3_moe top-k above the experts",
                 variant("qmk", dict(hf_config("qwen3_moe", qm[2]), num_experts_per_tok=7),
                         make_weights("qwen3_moe", qm[2], 6)), "num_experts_per_tok")
    q2 = next(c for c in CASES if c[0] == "qwen2_moe_shared_gate")
    q2c, q2w = hf_config("qwen2_moe", q2[2]), make_weights("qwen2_moe", q2[2], 7)
    expect_error(R, "qwen2_moe use_sliding_window without layer_types (transformers versions differ)",
                 variant("q2msw", dict(q2c, use_sliding_window=True, sliding_window=4), q2w),
                 "use_sliding_window", "layer_types")
    expect_error(R, "qwen2_moe shared expert of width 0",
                 variant("q2s0", dict(q2c, shared_expert_intermediate_size=0), q2w), "shared_expert_intermediate_size")
    expect_error(R, "qwen2_moe shared expert gate missing",
                 variant("q2ng", q2c, {k: v for k, v in q2w.items() if "shared_expert_gate" not in k}),
                 "model.layers.0.mlp.shared_expert_gate.weight")
    expect_error(R, "qwen2_moe shared expert gate of the wrong shape",
                 variant("q2gs", q2c, dict(q2w, **{"model.layers.0.mlp.shared_expert_gate.weight": np.ones((2, 32))})),
                 "shared_expert_gate")


def llama2c_error_tests(R, data_dir):
    src = os.path.join(data_dir, "stories260K.bin")
    raw = open(src, "rb").read()

    def bad(tag, data):
        p = os.path.join(R.work, "bad_%s.bin" % tag)
        with open(p, "wb") as f:
            f.write(data)
        return p

    expect_error(R, "llama2c truncated", bad("trunc", raw[:-4]), "bad_trunc.bin", "truncated")
    expect_error(R, "llama2c extra bytes", bad("extra", raw + b"\0\0\0\0"), "bad_extra.bin", "extra data")
    expect_error(R, "llama2c short header", bad("short", raw[:20]), "bad_short.bin", "28-byte")
    hdr = list(struct.unpack("<7i", raw[:28]))
    h = list(hdr)
    h[2] = -5
    expect_error(R, "llama2c negative n_layers", bad("nl", struct.pack("<7i", *h) + raw[28:]), "n_layers = -5")
    h = list(hdr)
    h[0] = 1 << 30
    expect_error(R, "llama2c absurd dim", bad("dim", struct.pack("<7i", *h) + raw[28:]), "bad_dim.bin", "dim")
    h = list(hdr)
    h[4] = 3
    expect_error(R, "llama2c kv heads", bad("kv", struct.pack("<7i", *h) + raw[28:]), "n_kv_heads = 3")
    expect_error(R, "llama2c v1 magic", bad("magic", struct.pack("<I", 0x616B3432) + raw[4:]), "ak42")


# ---- export ---------------------------------------------------------------------------------------------

def export_tests(R, data_dir):
    def export(src, dst):
        # (the test models have no tokenizer; stories260K's is data/tok512.bin: tests/cli/test_export.py
        # checks that every export carries its tokenizer)
        tok = ["--tokenizer", os.path.join(data_dir, "tok512.bin")] if src.endswith(".bin") else ["--no-tokenizer"]
        return R.run("export", "--model", src, "--out", dst, *tok)

    # llama and gpt2 shaped models: HF export, readable by the HF reference under HF names
    for name in ("llama_gqa_llama3", "llama_tied_linear", "gpt2_plain", "gpt2_untied_noscale", "qwen3_moe_step2",
                 "qwen3_moe_defaults_nonorm", "mixtral_gqa", "deepseek_v3_yarn_plain_q", "mistral_window",
                 "qwen2_moe_shared_gate", "qwen2_moe_step2_renorm"):
        case = next(c for c in CASES if c[0] == name)
        src = os.path.join(R.work, name + "_f32")
        dst = os.path.join(R.work, "export_" + name)
        shutil.rmtree(dst, ignore_errors=True)
        r = export(src, dst)
        if r.returncode != 0:
            R.check("export " + name, False, r.stderr.strip())
            continue
        conf = json.load(open(os.path.join(dst, "config.json")))
        R.check("export %s model_type" % name, conf["model_type"] == case[1], conf["model_type"])
        orig, _ = R.logits(src, IDS)
        again, err = R.logits(dst, IDS)
        e = rel_err(again, orig) if again is not None else 1.0
        R.check("export %s reloads with the same logits" % name, e <= 1e-6, "rel err %.2e %s" % (e, err))
        W, meta = read_safetensors(os.path.join(dst, "model.safetensors"))
        ref = reference(conf["model_type"], conf, W, IDS)
        e = rel_err(orig, ref)
        R.check("export %s runs in the HF reference" % name, e <= TOL, "rel err %.2e" % e)
    # the default preset (nanogpt-baby: LayerNorm without bias, no linear biases) is GPT-2 with
    # those biases zero: it exports as gpt2, and the HF reference gives its logits
    src = os.path.join(R.work, "nanogpt_baby_shape")
    d, L, V, T, ff = 32, 2, 65, 16, 128
    rng = np.random.default_rng(7)
    W = {"embed.weight": rng.normal(0, 0.5, (V, d)), "pos_embed.weight": rng.normal(0, 0.5, (T, d)),
         "final_norm.weight": 1 + rng.normal(0, 0.1, d)}
    for l in range(L):
        p = "layers.%d." % l
        W.update({p + "attn_norm.weight": 1 + rng.normal(0, 0.1, d), p + "ffn_norm.weight": 1 + rng.normal(0, 0.1, d)})
        for n, shape in (("attn.q_proj", (d, d)), ("attn.k_proj", (d, d)), ("attn.v_proj", (d, d)),
                         ("attn.o_proj", (d, d)), ("ffn.up_proj", (ff, d)), ("ffn.down_proj", (d, ff))):
            W[p + n + ".weight"] = rng.normal(0, 0.2, shape)
    write_model(src, {"model_type": "tinylm", "hidden_size": d, "num_hidden_layers": L, "num_attention_heads": 4,
                      "intermediate_size": ff, "max_position_embeddings": T, "norm_type": "layernorm",
                      "norm_bias": False, "norm_placement": "pre", "position_embedding": "learned",
                      "ffn_type": "gelu", "tie_word_embeddings": True, "vocab_size": V},
                {k: v.astype(np.float32) for k, v in W.items()})
    dst = os.path.join(R.work, "export_nanogpt_baby")
    shutil.rmtree(dst, ignore_errors=True)
    r = export(src, dst)
    if r.returncode != 0:
        R.check("export nanogpt-baby", False, r.stderr.strip())
    else:
        conf = json.load(open(os.path.join(dst, "config.json")))
        R.check("export nanogpt-baby as gpt2", conf["model_type"] == "gpt2", conf["model_type"])
        orig, _ = R.logits(src, IDS)
        again, err = R.logits(dst, IDS)
        e = rel_err(again, orig) if again is not None else 1.0
        R.check("export nanogpt-baby reloads with the same logits", e <= 1e-6, "rel err %.2e %s" % (e, err))
        W, meta = read_safetensors(os.path.join(dst, "model.safetensors"))
        biases = [n for n in W if n.endswith(".bias") and ("ln_" in n or "attn" in n or "mlp" in n)]
        R.check("its added biases are zero", bool(biases) and all(not W[n].any() for n in biases),
                "%d biases" % len(biases))
        e = rel_err(orig, reference("gpt2", conf, W, IDS))
        R.check("export nanogpt-baby runs in the HF GPT-2 reference", e <= TOL, "rel err %.2e" % e)
    # a variant no HF family expresses keeps the engine's format
    src = os.path.join(R.work, "gemma2_sandwich_f32")
    dst = os.path.join(R.work, "export_gemma2")
    shutil.rmtree(dst, ignore_errors=True)
    r = export(src, dst)
    ok = r.returncode == 0 and json.load(open(os.path.join(dst, "config.json")))["model_type"] == "tinylm"
    R.check("export gemma2 -> tinylm", ok, (r.stdout + r.stderr).strip())
    if ok:
        a, _ = R.logits(src, IDS)
        b, err = R.logits(dst, IDS)
        e = rel_err(b, a) if b is not None else 1.0
        R.check("export gemma2 (tinylm) reloads with the same logits", e <= 1e-6, "rel err %.2e %s" % (e, err))
    # Gemma 4 (layer types of their own shapes, proportional RoPE, v norm, K = V, shared K/V, layer
    # scalars) keeps the engine's format too, every switch written out: the same logits again
    # (and its MoE block: the experts' 3-D tensors as the engine's per-expert matrices, the router's scales)
    for case, shared, moe in (("gemma4_kv_shared", 2, None), ("gemma4_moe", 1, True)):
        src = os.path.join(R.work, case + "_f32")
        dst = os.path.join(R.work, "export_" + case)
        shutil.rmtree(dst, ignore_errors=True)
        r = export(src, dst)
        conf = json.load(open(os.path.join(dst, "config.json"))) if r.returncode == 0 else {}
        ok = (conf.get("model_type") == "tinylm" and conf.get("num_kv_shared_layers") == shared and
              conf.get("v_norm") is True and conf.get("enable_moe_block") is moe)
        R.check("export %s -> tinylm" % case, ok, (r.stdout + r.stderr).strip())
        if ok:
            a, _ = R.logits(src, IDS)
            b, err = R.logits(dst, IDS)
            e = rel_err(b, a) if b is not None else 1.0
            R.check("export %s (tinylm) reloads with the same logits" % case, e <= 1e-6, "rel err %.2e %s" % (e, err))
    # a gemma3_text model with rope_scaling (on its full layers) goes to the tinylm format, whose config.json
    # keeps rope_scaling: the same logits after the reload
    dst = os.path.join(R.work, "export_gemma3")
    shutil.rmtree(dst, ignore_errors=True)
    src = os.path.join(R.work, "gemma3_pattern_f32")
    r = export(src, dst)
    conf = json.load(open(os.path.join(dst, "config.json"))) if r.returncode == 0 else {}
    want = json.load(open(os.path.join(src, "config.json"))).get("rope_scaling")
    R.check("export gemma3_text with rope_scaling -> tinylm, rope_scaling kept",
            conf.get("model_type") == "tinylm" and want and conf.get("rope_scaling", {}).get("factor") == want.get("factor"),
            (r.stdout + r.stderr).strip() + " " + json.dumps(conf.get("rope_scaling")))
    if conf:
        a, _ = R.logits(src, IDS)
        b, err = R.logits(dst, IDS)
        e = rel_err(b, a) if b is not None else 1.0
        R.check("export gemma3_text (tinylm, rope_scaling) reloads with the same logits", e <= 1e-6,
                "rel err %.2e %s" % (e, err))
    # llama2.c -> llama
    dst = os.path.join(R.work, "export_stories")
    shutil.rmtree(dst, ignore_errors=True)
    binp = os.path.join(data_dir, "stories260K.bin")
    r = export(binp, dst)
    ok = r.returncode == 0 and json.load(open(os.path.join(dst, "config.json")))["model_type"] == "llama"
    R.check("export stories260K.bin -> llama", ok, (r.stdout + r.stderr).strip())
    if ok:
        a, _ = R.logits(binp, IDS)
        b, _ = R.logits(dst, IDS)
        e = rel_err(b, a) if b is not None else 1.0
        R.check("export stories260K reloads with the same logits", e <= 1e-6, "rel err %.2e" % e)
        # exporting again into the previous export is allowed
        r = export(binp, dst)
        R.check("export over a previous export", r.returncode == 0, r.stderr.strip())
    # never write into a directory holding anything else
    dst = os.path.join(R.work, "export_userdir")
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    with open(os.path.join(dst, "notes.txt"), "w") as f:
        f.write("user data\n")
    r = export(binp, dst)
    R.check("export refuses a non-empty directory", r.returncode != 0 and "notes.txt" in r.stderr
            and os.listdir(dst) == ["notes.txt"], r.stderr.strip())
    src_dir = os.path.join(R.work, "llama_tied_linear_f32")
    r = export(binp, src_dir)
    R.check("export refuses a foreign model directory", r.returncode != 0 and "model.safetensors" in r.stderr,
            r.stderr.strip())


# ---- llama2.c ---------------------------------------------------------------------------------------------

def llama2c_tests(R, data_dir):
    path = os.path.join(data_dir, "stories260K.bin")
    ids = [1, 403, 407, 261, 378, 410, 263, 1, 77, 300, 511, 0, 259, 265, 42, 7]
    got, err = R.logits(path, ids)
    if got is None:
        R.check("stories260K logits", False, err)
        return
    P = ref_llama2c.load(path)
    ref = ref_llama2c.forward(P, ids)
    e = rel_err(got, ref)
    R.check("stories260K logits vs run.c model", e <= TOL, "rel err %.2e over %d tokens" % (e, len(ids)))
    em = rel_err(got, ref_llama2c.forward(P, ids, ["rope_halves"]))
    R.check("stories260K mutant rope_halves (no wq/wk permutation) is caught", em > MUTANT_MIN, "%.2e" % em)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--data", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), "data"))
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    torch.set_num_threads(2)
    R = Runner(os.path.abspath(a.tool), os.path.abspath(a.work))
    family_tests(R)
    deepseek_mtp_tests(R)
    gemma4_multimodal_tests(R)
    gemma3_multimodal_tests(R)
    inert_keys_tests(R)
    gemma1_activation_tests(R)
    fp8_tests(R)
    fp8_stacked_tests(R)
    tied_head_tests(R)
    error_tests(R)
    llama2c_tests(R, a.data)
    llama2c_error_tests(R, a.data)
    export_tests(R, a.data)
    print("%d passed, %d failed" % (R.passed, R.failed))
    sys.exit(1 if R.failed else 0)


if __name__ == "__main__":
    main()
