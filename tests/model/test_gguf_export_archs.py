#!/usr/bin/env python3
"""test_gguf_export_archs.py — `tinylm export --format gguf` writes every family whose architecture
llama.cpp defines and tinylm reads back (llama, qwen2, qwen3, qwen2moe, gemma, gemma2, gemma3, olmo2,
gpt2; Mistral as llama), and refuses the others naming the reason.

For each family a tiny random Hugging Face checkpoint (tests/hf/test_hf.py's make_weights /
write_model, the cases of test_gguf_archs.py, vocabulary 512 so that tok512.bin goes with it) is
exported, and:
  (a) f32: the file holds exactly what llama.cpp's converter writes for that checkpoint
      (test_gguf_archs.convert, written from convert_hf_to_gguf.py: its metadata keys and values,
      its tensor names, shapes and values, bit for bit; no tensor more), and tinylm's logits of the
      file equal its logits of the HF directory bit for bit;
  (b) exporting that GGUF again (the model read back: Gemma's gains hold the 1, q and k in the
      engine's halves) gives the same tensors bit for bit;
  (c) bf16, q8_0 and q4_k (whose rows of 32 fall back to q5_0, of 48 to f32): the file's decoded
      matrices, taken back to the HF layout (q/k pairs undone, GPT-2's Conv1D transposed, experts
      unstacked), give tests/hf/hf_ref.py's float64 forward that tinylm's logits of the file match
      within test_hf's 1e-4 — every block in its place — and they differ from the f32 logits (the
      type was applied);
  (d) llama.cpp (node-llama-cpp's build, tests/llamacpp/llamacpp_oracle.mjs: flash attention off,
      F32 KV cache) loads the f32 file and its log-probabilities at every position match tinylm's
      within test_llamacpp.py's 1e-4, for every family; skipped (said so) without Node.js >= 20 or
      tests/llamacpp/node_modules.
A multimodal Gemma 3 (Gemma3ForConditionalGeneration) is written as the converter's gemma3 file of its
text model. A byte-level BPE tokenizer.json (Qwen 3's, and with Llama 3's pre-tokenizer) goes into the
file as llama.cpp's "gpt2" model: the file's ids are the tokenizer.json's in tinylm and in llama.cpp. The engine's nanogpt-baby shape (no biases) is written as gpt2 with zero biases: the same logits bit
for bit, and llama.cpp's within the GELU bound. Refusals: deepseek_v3 (the family's reason), a qwen3_moe
with dense layers, a Gemma 2 with an untied head, a Gemma 2 without soft-caps, a Qwen3 with attention
biases, a 46-layer Gemma 2 scaled by head_dim (each the first feature llama.cpp's architecture lacks);
hostile metadata on the architectures the reader gained (qwen3moe, llama with experts); the export
onto its own input file.

usage: test_gguf_export_archs.py --tinylm PATH --work DIR"""
import json
import os
import shutil
import subprocess
import sys
import unicodedata

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "cli"))
sys.path.insert(0, os.path.join(ROOT, "tests", "hf"))
sys.path.insert(0, HERE)
from harness import TOK512, check, main, run  # noqa: E402
import test_hf  # noqa: E402
import test_gguf_archs as ga  # noqa: E402
from test_gguf_model import matrix, read_gguf  # noqa: E402

IDS = test_hf.IDS
REF_TOL = test_hf.TOL
LLAMACPP_TOL = 1e-4  # test_llamacpp.py's bound for f32 files
ORACLE = os.path.join(ROOT, "tests", "llamacpp", "llamacpp_oracle.mjs")
NLC = os.path.join(ROOT, "tests", "llamacpp", "node_modules", "node-llama-cpp")

CASES = [(f, dict(cfg, vocab_size=512)) for f, cfg, _ in ga.CASES]
# Mistral: llama's architecture; its window (16 > the 12 ids) written as the context length, where the two
# attentions are one; without a window, the whole context
CASES += [("mistral", dict(ga.BASE, vocab_size=512, num_key_value_heads=2, head_dim=16, sliding_window=16,
                           rope_theta=1000.0, rms_norm_eps=1e-5, tie_word_embeddings=False)),
          ("mistral", dict(ga.BASE, vocab_size=512, num_key_value_heads=1, sliding_window=None, rope_theta=1000.0,
                           rms_norm_eps=1e-6, tie_word_embeddings=True, _label="mistral (no window)"))]
# Gemma 2 at the 27B's depth (46 layers), where llama.cpp scales q by (hidden_size / heads)^-0.5 = 8^-0.5 (the
# 27B's query_pre_attn_scalar is hidden / heads), not head_dim^-0.5 = 16^-0.5
CASES += [("gemma2", dict(ga.CASES[3][1], vocab_size=512, num_hidden_layers=46, query_pre_attn_scalar=8,
                          _label="gemma2 (46 layers)"))]
# Qwen3-MoE (every layer experts, renormalised: what llama.cpp's qwen3moe computes) and Mixtral (llama.cpp's llama
# with an expert_count)
CASES += [("qwen3_moe", dict(ga.BASE, vocab_size=512, num_key_value_heads=2, head_dim=16, rope_theta=1000.0,
                             num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, norm_topk_prob=True,
                             decoder_sparse_step=1, mlp_only_layers=[], rms_norm_eps=1e-6)),
          ("mixtral", dict(ga.BASE, vocab_size=512, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                           rope_theta=1e4, sliding_window=None, router_jitter_noise=0.0, hidden_act="silu",
                           rms_norm_eps=1e-5))]
ARCH = dict(ga.ARCH, mistral="llama", qwen3_moe="qwen3moe", mixtral="llama")
# each layer's experts in HF names: (router, {gguf kind: [expert e's weight name]})
MOE_NAMES = {"qwen3_moe": ("mlp.gate", {"gate": "mlp.experts.%d.gate_proj", "up": "mlp.experts.%d.up_proj",
                                        "down": "mlp.experts.%d.down_proj"}),
             "qwen2_moe": ("mlp.gate", {"gate": "mlp.experts.%d.gate_proj", "up": "mlp.experts.%d.up_proj",
                                        "down": "mlp.experts.%d.down_proj"}),
             "mixtral": ("block_sparse_moe.gate", {"gate": "block_sparse_moe.experts.%d.w1",
                                                   "up": "block_sparse_moe.experts.%d.w3",
                                                   "down": "block_sparse_moe.experts.%d.w2"})}


def stack_experts(family, conf, T):
    """(the checkpoint without its experts and routers, the stacked / renamed GGUF tensors), as the converters'
    modify_tensors do (Qwen3MoeModel, LlamaModel for Mixtral)"""
    router, kinds = MOE_NAMES[family]
    T, out = dict(T), {}
    E = conf.get("num_experts") or conf.get("num_local_experts")
    for layer in range(conf["num_hidden_layers"]):
        p = "model.layers.%d." % layer
        out["blk.%d.ffn_gate_inp.weight" % layer] = np.asarray(T.pop(p + router + ".weight"), dtype=np.float32)
        for kind, name in kinds.items():
            out["blk.%d.ffn_%s_exps.weight" % (layer, kind)] = np.stack(
                [np.asarray(T.pop(p + (name % e) + ".weight"), dtype=np.float32) for e in range(E)])
    return T, out


def converted(family, conf, T):
    """llama.cpp's converter's file for the checkpoint (test_gguf_archs.convert; Mistral as llama with
    LlamaModel's keys, the window as the context)"""
    if family == "qwen3_moe":  # Qwen3MoeModel: Qwen3's keys and tensors, the experts' keys
        rest, experts = stack_experts(family, conf, T)
        kv, tensors = ga.convert("qwen3", conf, rest)
        kv = [(k.replace("qwen3.", "qwen3moe.", 1), t, "qwen3moe" if k == "general.architecture" else v)
              for k, t, v in kv]
        kv += [("qwen3moe.expert_count", ga.T_U32, conf["num_experts"]),
               ("qwen3moe.expert_used_count", ga.T_U32, conf["num_experts_per_tok"]),
               ("qwen3moe.expert_feed_forward_length", ga.T_U32, conf["moe_intermediate_size"])]
        return kv, dict(tensors, **experts)
    if family == "mixtral":  # LlamaModel: llama's keys (intermediate_size: the experts'), q/k permuted, experts
        rest, experts = stack_experts(family, conf, T)
        kv, tensors = ga.convert("llama", dict(conf, rms_norm_eps=conf.get("rms_norm_eps", 1e-5)), rest)
        kv += [("llama.expert_count", ga.T_U32, conf["num_local_experts"]),
               ("llama.expert_used_count", ga.T_U32, conf["num_experts_per_tok"])]
        return kv, dict(tensors, **experts)
    if family != "mistral":
        return ga.convert(family, conf, T)
    as_llama = dict(conf, model_type="llama")
    if conf.get("sliding_window"):
        as_llama["max_position_embeddings"] = min(conf["max_position_embeddings"], conf["sliding_window"])
    as_llama.setdefault("rms_norm_eps", 1e-6)
    as_llama.setdefault("rope_theta", 10000.0)
    kv, tensors = ga.convert("llama", as_llama, T)
    return kv, tensors


def logits(tinylm, model, out):
    if os.path.exists(out):
        os.remove(out)
    rc, _, err = run(tinylm, "logits", "--model", model, "--ids", " ".join(map(str, IDS)), "--out", out,
                     "--precision", "fp32")
    return (np.load(out).astype(np.float64) if rc == 0 else None), err.strip()


def export(tinylm, model, out, typ, tok=True):
    return run(tinylm, "export", "--model", model, "--format", "gguf", "--type", typ, "--out", out,
               *(["--tokenizer", TOK512] if tok else ["--no-tokenizer"]))


def rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def same_as_converter(label, path, kv_ref, t_ref):
    """(a): every key the converter writes with its value, its tensors bit for bit, no other tensor"""
    _, kv, tensors = read_gguf(path)
    bad_keys = [k for k, _, v in kv_ref if k != "general.file_type" and
                (k not in kv or (kv[k] != v if isinstance(v, (int, str)) else np.float32(kv[k]) != np.float32(v)))]
    check(not bad_keys, "%s: the converter's %d metadata keys, the same values" % (label, len(kv_ref)),
          ", ".join("%s: %r vs %r" % (k, kv.get(k), dict((a, c) for a, _, c in kv_ref)[k]) for k in bad_keys))
    names_ok = set(tensors) == set(t_ref)
    check(names_ok, "%s: the converter's %d tensor names, no other" % (label, len(t_ref)),
          "only ours: %s; only the converter's: %s" % (sorted(set(tensors) - set(t_ref)),
                                                      sorted(set(t_ref) - set(tensors))))
    diff = []
    for name, want in t_ref.items():
        if name not in tensors:
            continue
        t, ne, raw = tensors[name]
        want = np.asarray(want, dtype=np.float32)
        got = np.frombuffer(raw, dtype="<f4") if t == 0 else None
        # (ne fastest first; trailing 1s aside, as llama.cpp reads a [1, d] row as {d})
        shape_ok = [n for n in ne if n != 1] == [n for n in reversed(want.shape) if n != 1]
        if t != 0 or not shape_ok or not np.array_equal(got, want.reshape(-1)):
            diff.append("%s (type %d, ne %s vs %s)" % (name, t, ne, list(reversed(want.shape))))
    check(names_ok and not diff, "%s: every tensor F32, its shape and values bit for bit" % label, "; ".join(diff[:4]))
    return kv, tensors


def hf_weights(family, conf, T, tensors):
    """the file's decoded matrices under their HF names and layout (the converter's steps undone); the
    vectors are the HF checkpoint's own (written F32: test (a) checks them)"""
    W = {k: test_hf.stored_values(v, "F32") for k, v in T.items()}
    H, KV = conf.get("num_attention_heads"), conf.get("num_key_value_heads")
    from test_gguf_model import dequantize
    expert_of = {}
    for layer in range(conf.get("num_hidden_layers", 0)):
        for kind, pat in MOE_NAMES.get(family, (None, {}))[1].items():
            for e in range(conf.get("num_experts") or conf.get("num_local_experts") or 0):
                expert_of["model.layers.%d.%s.weight" % (layer, pat % e)] = (layer, kind, e)
    for name in T:
        if name in expert_of:
            layer, kind, e = expert_of[name]
            t, ne, raw = tensors["blk.%d.ffn_%s_exps.weight" % (layer, kind)]
            W[name] = dequantize(t, raw, int(np.prod(ne))).reshape(ne[2], ne[1], ne[0])[e]
            continue
        if np.asarray(T[name]).ndim != 2 or (family == "gpt2" and name.endswith(".attn.bias")):
            continue
        try:  # (the routers, kept F32, are the checkpoint's own values)
            g = ga.gguf_name({"mistral": "llama", "mixtral": "llama", "qwen3_moe": "qwen3"}.get(family, family), name)
        except (KeyError, AssertionError):
            continue
        if g not in tensors:
            continue
        w = matrix(tensors, g)[1]
        if family == "gpt2" and name.endswith((".c_attn.weight", ".c_proj.weight", ".c_fc.weight")):
            w = w.T
        if family in ("llama", "mistral", "mixtral") and name.endswith(("q_proj.weight", "k_proj.weight")):
            n = H if name.endswith("q_proj.weight") else (KV or H)
            hd = w.shape[0] // n  # the inverse of permute_pairs: (i, half) back to (half, i)
            w = w.reshape(n, hd // 2, 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)
        W[name] = w.reshape(np.asarray(T[name]).shape)
    return W


def llamacpp_available():
    if os.environ.get("TLM_TEST_NO_LLAMACPP"):
        return None, "not in the sanitizer build (llama.cpp's code is not what it instruments; the release run checks it)"
    node = shutil.which("node")
    if not node or not os.path.exists(os.path.join(NLC, "package.json")):
        return None, "Node.js or tests/llamacpp/node_modules is missing"
    v = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    if not v.startswith("v") or int(v[1:].split(".")[0]) < 20:
        return None, "Node.js %s is older than node-llama-cpp needs (20)" % v
    return node, ""


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


# ggml's CPU GELU (GELU and GeGLU: Gemma's, GPT-2's) reads a table of f16 values indexed by the input rounded to
# f16 (GGML_GELU_FP16: y = f16(gelu(f16(x))) for -10 < x < 10, 0 below, x above), which moves these families'
# log-probabilities by 1e-3 .. 1e-2 from any f32 forward. There llama.cpp must match a float64 forward with that
# GELU within LLAMACPP_TOL, and tinylm (whose GELU is the function's f32 value) stay within GELU_TOL of
# llama.cpp: about twice the largest difference measured (7e-3, gpt2).
GELU_FAMILIES = ("gemma", "gemma2", "gemma3_text", "gpt2")
GELU_TOL = 2e-2
# At the 27B's depth (46 layers) the f16 ties of the GELU table go either way many more times (about 2 000 GELU
# inputs a position): llama.cpp is off the emulation by 1e-3 .. 6e-3 at most positions and off tinylm by 2e-2
# (measured). There the check is that llama.cpp scales by (d / H)^-0.5: within DEEP_TOL of that forward and
# DEEP_APART from the head_dim^-0.5 one (measured 0.8 .. 5).
DEEP_TOL, DEEP_APART = 5e-2, 0.3


def gelu_f16_table(x):
    import torch
    y = ga_hf_ref().gelu_tanh_f64(x.to(torch.float16).to(torch.float64)).to(torch.float16).to(torch.float64)
    return torch.where(x <= -10, torch.zeros_like(x), torch.where(x >= 10, x, y))


def ga_hf_ref():
    import hf_ref
    if not hasattr(hf_ref, "gelu_tanh_f64"):
        hf_ref.gelu_tanh_f64 = hf_ref.gelu_tanh
    return hf_ref


def reference_ggml_gelu(family, conf, W, ids):
    """test_hf.reference with ggml's table GELU"""
    hf_ref = ga_hf_ref()
    hf_ref.gelu_tanh = gelu_f16_table
    try:
        return test_hf.reference(family, conf, W, ids)
    finally:
        hf_ref.gelu_tanh = hf_ref.gelu_tanh_f64


def llamacpp_check(node, work, label, family, conf, T, path, tl):
    out = os.path.join(work, os.path.basename(path) + ".oracle.json")
    p = subprocess.run([node, ORACLE, path, "--ids", " ".join(map(str, IDS)), "-n", "0", "--positions",
                        str(len(IDS)), "--out", out], capture_output=True, timeout=300)
    if not check(p.returncode == 0, "%s: llama.cpp loads and runs the f32 file" % label,
                 (p.stdout + p.stderr).decode("utf-8", "replace")[-1500:]):
        return None
    lc = json.load(open(out))
    batch = np.array([[np.nan if v is None else v for v in r] for r in lc["batch"]["logprobs"]], dtype=np.float64)
    ours = log_softmax(tl)
    d = float(np.nanmax(np.abs(batch - ours))) if batch.shape == ours.shape else float("inf")
    gelu = family in GELU_FAMILIES
    deep = family == "gemma2" and conf["num_hidden_layers"] == 46
    tol = DEEP_TOL if deep else GELU_TOL if gelu else LLAMACPP_TOL
    check(d < tol and not np.isnan(batch).any(),
          "%s: llama.cpp's log p at all %d positions = tinylm's: max |diff| %.2g < %g" % (label, len(IDS), d, tol),
          "shape %s vs %s" % (batch.shape, ours.shape))
    if deep:
        W = {k: test_hf.stored_values(v, "F32") for k, v in T.items()}
        wide = np.abs(batch - log_softmax(reference_ggml_gelu(family, conf, W, IDS))).max()
        narrow = np.abs(batch - log_softmax(reference_ggml_gelu(family, dict(conf, query_pre_attn_scalar=conf[
            "head_dim"]), W, IDS)))[1:].max(axis=1).min()
        check(wide < DEEP_TOL and narrow > DEEP_APART,
              "%s: llama.cpp scales by (d / H)^-0.5: within %.2g of that forward, %.2g (> %g) from head_dim^-0.5's"
              % (label, wide, narrow, DEEP_APART))
    elif gelu and T is not None:
        W = {k: test_hf.stored_values(v, "F32") for k, v in T.items()}
        emu = log_softmax(reference_ggml_gelu(family, conf, W, IDS))
        # (an input within f32 noise of a tie between two f16 values may round the other way in llama.cpp, moving
        # its position by up to ~1e-3: most positions, not all, as test_llamacpp.py's emulation)
        per_pos = np.abs(batch - emu).max(axis=1)
        close = int((per_pos < LLAMACPP_TOL).sum())
        check(close * 4 >= 3 * len(IDS),
              "%s: and a float64 forward with ggml's f16-table GELU is llama.cpp's within %g at %d of %d positions"
              % (label, LLAMACPP_TOL, close, len(IDS)), "per position: %s" % np.array2string(per_pos, precision=2))
    return d


def test_families(tinylm, work):
    node, why = llamacpp_available()
    if not node:
        print("SKIP (d) llama.cpp: %s" % why)
    measured = []
    for i, (family, cfg) in enumerate(CASES):
        cfg = dict(cfg)
        label = cfg.pop("_label", family)
        tag = label.replace(" ", "_").replace("(", "").replace(")", "")
        T = test_hf.make_weights(family, cfg, seed=700 + i)
        conf = test_hf.hf_config(family, cfg)
        hf_dir = os.path.join(work, tag + "_hf")
        test_hf.write_model(hf_dir, conf, T, "F32")
        a, ea = logits(tinylm, hf_dir, os.path.join(work, tag + "_hf.npy"))
        if not check(a is not None, "%s: tinylm runs the HF directory" % label, ea):
            continue
        path = os.path.join(work, tag + "_f32.gguf")
        rc, out, err = export(tinylm, hf_dir, path, "f32")
        if not check(rc == 0 and "as GGUF (%s, F32)" % ARCH[family] in out,
                     "%s: export --format gguf --type f32 (architecture %s)" % (label, ARCH[family]), out + err):
            continue
        if family == "mistral" and cfg.get("sliding_window"):
            check("written as context_length %d (of %d)" % (cfg["sliding_window"], cfg["max_position_embeddings"])
                  in err, "%s: the window written as the context length, said so" % label, err)
        kv_ref, t_ref = converted(family, conf, T)
        _, tensors = same_as_converter(label, path, kv_ref, t_ref)
        b, eb = logits(tinylm, path, os.path.join(work, tag + "_gguf.npy"))
        check(b is not None and np.array_equal(a, b), "%s: logits of the file = of the HF directory, bit for bit"
              % label, eb if b is None else "max diff %.2g" % np.abs(a - b).max())
        # (b) the file read back and written again
        again = os.path.join(work, tag + "_again.gguf")
        rc, out, err = export(tinylm, path, again, "f32")
        if check(rc == 0, "%s: the file exported again" % label, err):
            _, _, t2 = read_gguf(again)
            check(set(t2) == set(tensors) and all(t2[n][2] == tensors[n][2] for n in tensors),
                  "%s: the same tensors bit for bit" % label)
        # (c) the matrices' types
        ref_f32 = test_hf.reference(family, conf, {k: test_hf.stored_values(v, "F32") for k, v in T.items()}, IDS)
        for typ in ("bf16", "q8_0", "q4_k"):
            pq = os.path.join(work, "%s_%s.gguf" % (tag, typ))
            rc, out, err = export(tinylm, hf_dir, pq, typ)
            if not check(rc == 0, "%s: export --type %s" % (label, typ), out + err):
                continue
            _, kvq, tq = read_gguf(pq)
            c, ec = logits(tinylm, pq, os.path.join(work, "q.npy"))
            rq = test_hf.reference(family, conf, hf_weights(family, conf, T, tq), IDS)
            types = sorted({t for t, ne, _ in tq.values() if len(ne) >= 2})
            check(c is not None and rel(c, rq) <= REF_TOL and rel(rq, ref_f32) > 1e-7,
                  "%s %s: logits = float64 forward of the decoded matrices (types %s)" % (label, typ, types),
                  ec if c is None else "%.2e (the decoded weights move the reference by %.2e)"
                  % (rel(c, rq), rel(rq, ref_f32)))
        # (d) llama.cpp
        if node:
            d = llamacpp_check(node, work, label, family, conf, T, path, b if b is not None else a)
            if d is not None:
                measured.append((label, d))
    if measured:
        print("llama.cpp vs tinylm, max |log p| over the vocabulary at every position (f32 files): " +
              ", ".join("%s %.1e" % m for m in measured))


def test_nanogpt(tinylm, work):
    """the engine's nanogpt-baby shape (LayerNorm without bias, no linear biases, learned positions, GELU, tied) is
    GPT-2 with those biases zero: written as llama.cpp's gpt2 with zero biases, the same logits bit for bit"""
    src = os.path.join(work, "nanogpt_baby")
    d, L, V, T, ff = 32, 2, 512, 16, 128
    rng = np.random.default_rng(11)
    W = {"embed.weight": rng.normal(0, 0.5, (V, d)), "pos_embed.weight": rng.normal(0, 0.5, (T, d)),
         "final_norm.weight": 1 + rng.normal(0, 0.1, d)}
    for layer in range(L):
        p = "layers.%d." % layer
        W.update({p + "attn_norm.weight": 1 + rng.normal(0, 0.1, d), p + "ffn_norm.weight": 1 + rng.normal(0, 0.1, d)})
        for n, shape in (("attn.q_proj", (d, d)), ("attn.k_proj", (d, d)), ("attn.v_proj", (d, d)),
                         ("attn.o_proj", (d, d)), ("ffn.up_proj", (ff, d)), ("ffn.down_proj", (d, ff))):
            W[p + n + ".weight"] = rng.normal(0, 0.2, shape)
    test_hf.write_model(src, {"model_type": "tinylm", "hidden_size": d, "num_hidden_layers": L,
                              "num_attention_heads": 4, "intermediate_size": ff, "max_position_embeddings": T,
                              "norm_type": "layernorm", "norm_bias": False, "norm_placement": "pre",
                              "position_embedding": "learned", "ffn_type": "gelu", "tie_word_embeddings": True,
                              "vocab_size": V}, {k: v.astype(np.float32) for k, v in W.items()})
    a, ea = logits(tinylm, src, os.path.join(work, "nanogpt.npy"))
    path = os.path.join(work, "nanogpt_f32.gguf")
    rc, out, err = export(tinylm, src, path, "f32")
    if not check(a is not None and rc == 0 and "as GGUF (gpt2, F32)" in out,
                 "nanogpt-baby: export --format gguf (architecture gpt2)", ea + out + err):
        return
    _, kv, tensors = read_gguf(path)
    biases = [n for n in tensors if n.endswith(".bias")]
    zero = all(not np.any(np.frombuffer(tensors[n][2], dtype="<f4")) for n in biases)
    check(len(biases) == 1 + 6 * L and zero, "nanogpt-baby: its %d biases written, all zero" % len(biases))
    b, eb = logits(tinylm, path, os.path.join(work, "nanogpt_gguf.npy"))
    check(b is not None and np.array_equal(a, b), "nanogpt-baby: logits of the file = of the model, bit for bit",
          eb if b is None else "max diff %.2g" % np.abs(a - b).max())
    node, why = llamacpp_available()
    if node and b is not None:
        llamacpp_check(node, work, "nanogpt-baby", "gpt2", {"num_hidden_layers": L}, None, path, b)


def test_gemma3_multimodal(tinylm, work):
    """Gemma3ForConditionalGeneration (model_type gemma3, the 4B/12B/27B files): its text model is written as
    gemma3, the file the converter writes for the text checkpoint; the vision tower is not in it"""
    family, cfg = next((f, c) for f, c in CASES if f == "gemma3_text")
    T = test_hf.make_weights(family, cfg, seed=31)
    text = test_hf.hf_config(family, cfg)
    conf = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"], "text_config": text,
            "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 8}, "mm_tokens_per_image": 256}
    mm = {"language_model.model." + k[len("model."):]: v for k, v in T.items()}
    mm["vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.weight"] = np.ones((8, 8), np.float32)
    d = os.path.join(work, "gemma3_multimodal")
    test_hf.write_model(d, conf, mm, "F32")
    path = os.path.join(work, "gemma3_multimodal.gguf")
    rc, out, err = export(tinylm, d, path, "f32")
    if not check(rc == 0 and "as GGUF (gemma3, F32)" in out, "gemma3 multimodal: its text model exported as gemma3",
                 out + err):
        return
    kv_ref, t_ref = converted(family, text, T)
    same_as_converter("gemma3 multimodal", path, kv_ref, t_ref)
    a, ea = logits(tinylm, d, os.path.join(work, "mm.npy"))
    b, eb = logits(tinylm, path, os.path.join(work, "mm_gguf.npy"))
    check(a is not None and b is not None and np.array_equal(a, b),
          "gemma3 multimodal: logits of the file = of the checkpoint, bit for bit", ea + eb)


TOKENIZERS = os.path.join(ROOT, "tests", "data", "tokenizers")
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")


def tokenize(tinylm, tok, text):
    rc, out, err = run(tinylm, "tokenize", "--tokenizer", tok, "--text", text)
    return [int(x) for x in out.split()] if rc == 0 else err.strip()


def tokenize_each(tinylm, tok, texts, sep, sep_id):
    """each text's ids, from one process: the texts joined by the added token sep, which the tokenizer takes out
    before normalizing and pre-tokenizing, so that each text between is tokenized as it is alone (a load of a
    150k-piece vocabulary per text was most of this test's time); the error text when it fails or when the ids
    do not hold sep_id exactly between the texts"""
    assert not any(sep in t for t in texts)
    ids = tokenize(tinylm, tok, sep.join(texts))
    if not isinstance(ids, list):
        return ids
    each = [[]]
    for i in ids:
        if i == sep_id:
            each.append([])
        else:
            each[-1].append(i)
    return each if len(each) == len(texts) else "%d separators in %s for %d texts" % (len(each) - 1, ids, len(texts))


def test_bpe_tokenizers(tinylm, work):
    """a Hugging Face tokenizer.json (byte-level BPE) goes into the file as llama.cpp's "gpt2" model with the
    pre-tokenizer's name: Qwen 3's ("qwen2": NFC, single digits) and the same vocabulary with Llama 3's
    pre-tokenizer ("llama-bpe"); tinylm's ids from the file are the tokenizer.json's, and so are llama.cpp's"""
    qj = json.load(open(os.path.join(TOKENIZERS, "qwen3", "tokenizer.json"), encoding="utf-8"))
    lj = dict(qj, normalizer=None, model=dict(qj["model"], ignore_merges=True))
    lj["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": LLAMA3_REGEX}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    texts = json.load(open(os.path.join(ROOT, "tests", "tokenizer", "data", "strings.json"), encoding="utf-8"))
    texts = [t for t in texts if t and "\n" not in t][:12] + ["prices 1234567 and 12 34", "caf\u00e9 na\u0131ve",
                                                                 "<|im_start|>user hi<|im_end|>"]
    node, why = llamacpp_available()
    cfg = dict(ga.BASE, vocab_size=151936, hidden_size=16, num_attention_heads=2, num_key_value_heads=1,
               intermediate_size=32, rope_theta=1000.0, rms_norm_eps=1e-6, tie_word_embeddings=True)
    T = test_hf.make_weights("qwen2", cfg, seed=41)
    for label, tj, pre in (("Qwen 3's tokenizer.json", qj, "qwen2"), ("Llama 3's pre-tokenizer", lj, "llama-bpe")):
        d = os.path.join(work, "bpe_" + pre)
        test_hf.write_model(d, test_hf.hf_config("qwen2", cfg), T, "F32")
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            f.write(json.dumps(tj, ensure_ascii=False))
        path = os.path.join(work, "bpe_%s.gguf" % pre)
        rc, out, err = run(tinylm, "export", "--model", d, "--format", "gguf", "--type", "f32", "--out", path)
        if not check(rc == 0, "%s: exported with the model" % label, out + err):
            continue
        _, kv, _ = read_gguf(path)
        check(kv.get("tokenizer.ggml.model") == "gpt2" and kv.get("tokenizer.ggml.pre") == pre and
              len(kv.get("tokenizer.ggml.merges", [])) == len(tj["model"]["merges"]),
              "%s: model gpt2, pre %s, all %d merges" % (label, pre, len(tj["model"]["merges"])),
              "%s %s" % (kv.get("tokenizer.ggml.model"), kv.get("tokenizer.ggml.pre")))
        im = tj["model"]["vocab"].get("<|im_start|>") or next(a["id"] for a in tj["added_tokens"]
                                                            if a["content"] == "<|im_start|>")
        check(kv["tokenizer.ggml.token_type"][im] == 3 and kv["tokenizer.ggml.token_type"][0] == 1 and
              kv["tokenizer.ggml.tokens"][-1] == "[PAD%d]" % (cfg["vocab_size"] - 1) and
              kv["tokenizer.ggml.token_type"][-1] == 5 and len(kv["tokenizer.ggml.tokens"]) == cfg["vocab_size"],
              "%s: <|im_start|> CONTROL, the ids past the tokenizer's [PAD<id>] UNUSED up to the model's %d"
              % (label, cfg["vocab_size"]))
        sep = "<|endoftext|>"
        sep_id = next(a["id"] for a in tj["added_tokens"] if a["content"] == sep)
        want = tokenize_each(tinylm, d, texts, sep, sep_id)
        got = tokenize_each(tinylm, path, texts, sep, sep_id)
        if not check(isinstance(want, list) and got == want,
                     "%s: the file's ids = the tokenizer.json's on %d texts" % (label, len(texts)),
                     want if not isinstance(want, list) else got if not isinstance(got, list) else
                     [(t, w, g) for t, w, g in zip(texts, want, got) if w != g][:2]):
            continue
        if node:
            # (llama.cpp's qwen2 pre-tokenizer skips the tokenizer.json's NFC normalizer: on text that is not in
            # NFC its ids differ from transformers' and tinylm's; compared on the texts NFC leaves alone)
            # (and without the control tokens, which the oracle's tokenization reads as text; their type is checked)
            nfc = [i for i, t in enumerate(texts) if unicodedata.normalize("NFC", t) == t and "<|" not in t]
            out = os.path.join(work, "bpe_%s.json" % pre)
            p = subprocess.run([node, ORACLE, path, "--out", out, *[a for i in nfc for a in ("--tokenize", texts[i])]],
                               capture_output=True, timeout=300)
            lc = json.load(open(out)) if p.returncode == 0 else None
            want = [want[i] for i in nfc]
            check(lc is not None and [x["tokens"] for x in lc["tokenizations"]] == want,
                  "%s: llama.cpp's ids from the file = the tokenizer.json's (%d texts in NFC)" % (label, len(nfc)),
                  (p.stdout + p.stderr).decode("utf-8", "replace")[-800:] if lc is None else
                  [(x["text"], x["tokens"], w) for x, w in zip(lc["tokenizations"], want) if x["tokens"] != w][:2])


def test_gpt2_tokenizer(tinylm, work):
    """GPT-2's encoder.json + vocab.bpe with a GPT-2 model: pre "gpt-2"; tinylm's and llama.cpp's ids from the file
    are the files' own"""
    cfg = dict(vocab_size=50257, n_embd=16, n_layer=1, n_head=2, n_positions=16, n_ctx=16, n_inner=None,
               layer_norm_epsilon=1e-5, activation_function="gelu_new", _prefix="transformer.", _mask_buffers=True)
    d = os.path.join(work, "gpt2_tok")
    test_hf.write_model(d, test_hf.hf_config("gpt2", cfg), test_hf.make_weights("gpt2", cfg, seed=3), "F32")
    tok, path = os.path.join(TOKENIZERS, "gpt2"), os.path.join(work, "gpt2_tok.gguf")
    rc, out, err = run(tinylm, "export", "--model", d, "--format", "gguf", "--type", "f32", "--tokenizer", tok,
                       "--out", path)
    if not check(rc == 0 and read_gguf(path)[1].get("tokenizer.ggml.pre") == "gpt-2",
                 "GPT-2's tokenizer files: exported as pre gpt-2", out + err):
        return
    texts = ["Hello world, it's 2024!", "  spaces  and\nnewlines", "caf\u00e9 \U0001F600"]
    want = [tokenize(tinylm, tok, t) for t in texts]
    check([tokenize(tinylm, path, t) for t in texts] == want and all(isinstance(w, list) for w in want),
          "GPT-2's tokenizer files: the file's ids = theirs on %d texts" % len(texts))
    node, _ = llamacpp_available()
    if node:
        out = os.path.join(work, "gpt2_tok.json")
        p = subprocess.run([node, ORACLE, path, "--out", out, *[a for t in texts for a in ("--tokenize", t)]],
                           capture_output=True, timeout=300)
        lc = json.load(open(out)) if p.returncode == 0 else None
        check(lc is not None and [x["tokens"] for x in lc["tokenizations"]] == want,
              "GPT-2's tokenizer files: llama.cpp's ids from the file = theirs",
              (p.stdout + p.stderr).decode("utf-8", "replace")[-800:] if lc is None else lc["tokenizations"])


def test_refusals(tinylm, work):
    # a tokenizer llama.cpp's byte-level "gpt2" model does not express (Mistral's SentencePiece BPE with byte
    # fallback): refused, naming it, nothing written
    cfg = dict(ga.BASE, vocab_size=32768, hidden_size=16, num_attention_heads=2, num_key_value_heads=1,
               intermediate_size=32, sliding_window=None)
    d = os.path.join(work, "mistral_tok")
    test_hf.write_model(d, test_hf.hf_config("mistral", cfg), test_hf.make_weights("mistral", cfg, seed=9), "F32")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TOKENIZERS, "mistral", f), d)
    out = os.path.join(work, "mistral_tok.gguf")
    rc, _, err = run(tinylm, "export", "--model", d, "--format", "gguf", "--out", out)
    check(rc != 0 and "can be written into a GGUF file yet" in err and not os.path.exists(out),
          "a SentencePiece BPE tokenizer.json (Mistral's): refused, naming it", err or "exported")
    by_name = {name: (mt, cfg) for name, mt, cfg, *_ in test_hf.CASES}
    refused = [("deepseek_v3_yarn_plain_q", "llama.cpp's deepseek2 stores multi-head latent attention"),
               ("qwen3_moe_step2", "llama.cpp's qwen3moe architecture: dense layers among the experts'"),
               ("qwen3_moe_defaults_nonorm", "llama.cpp's qwen3moe architecture: dense layers")]
    for name, needle in refused:
        if name not in by_name:
            name = next(n for n in by_name if n.startswith(name))
        mt, cfg = by_name[name]
        T = test_hf.make_weights(mt, cfg, seed=5)
        d = os.path.join(work, name)
        test_hf.write_model(d, test_hf.hf_config(mt, cfg), T, "F32")
        out = os.path.join(work, name + ".gguf")
        rc, _, err = export(tinylm, d, out, "f32", tok=False)
        check(rc != 0 and needle in err and not os.path.exists(out), "%s: refused, naming why" % mt, err or "exported")
    g2 = dict(ga.CASES[3][1])
    for what, cfg, family, needle in (
            ("an untied Gemma 2", dict(g2, tie_word_embeddings=False), "gemma2", "an untied head"),
            ("a Gemma 2 without soft-caps", dict(g2, attn_logit_softcapping=None, final_logit_softcapping=None),
             "gemma2", "soft-cap off"),
            ("a Qwen3 with attention biases", dict(ga.CASES[2][1], attention_bias=True), "qwen3",
             "llama.cpp's qwen3 architecture: biases"),
            ("a 46-layer Gemma 2 scaled by head_dim", dict(g2, num_hidden_layers=46, query_pre_attn_scalar=16),
             "gemma2", "hidden_size / heads at the depth")):
        T = test_hf.make_weights(family, cfg, seed=6)
        d = os.path.join(work, what.replace(" ", "_"))
        test_hf.write_model(d, test_hf.hf_config(family, cfg), T, "F32")
        out = os.path.join(work, "refused.gguf")
        rc, _, err = export(tinylm, d, out, "f32", tok=False)
        check(rc != 0 and needle in err and not os.path.exists(out), "%s: refused, naming the feature" % what,
              err or "exported")
    # hostile metadata on the architectures the reader gained: Qwen3-MoE without its experts' width, a llama whose
    # expert_count its stacked experts do not have
    for family, drop, change, needle in (("qwen3_moe", "qwen3moe.expert_feed_forward_length", None,
                                          "qwen3moe.expert_feed_forward_length is missing"),
                                         ("mixtral", None, ("llama.expert_count", 3), "blk.0.ffn_gate_inp.weight")):
        cfg = next(c for f, c in CASES if f == family)
        T = test_hf.make_weights(family, cfg, seed=8)  # (no _label in these two)
        kv, tensors = converted(family, test_hf.hf_config(family, cfg), T)
        kv = [(k, t, change[1] if change and k == change[0] else v) for k, t, v in kv if k != drop]
        bad = os.path.join(work, "bad_%s.gguf" % family)
        ga.write_gguf(bad, kv, tensors)
        c, e = logits(tinylm, bad, os.path.join(work, "bad.npy"))
        check(c is None and needle in e, "%s: a file with %s refused, naming it" % (family, drop or "%s = %d" % change),
              e or "it ran")
    # never over its input: the f32 export of the first case onto itself
    src = os.path.join(work, "self.gguf")
    T = test_hf.make_weights("qwen2", ga.CASES[1][1], seed=7)
    d = os.path.join(work, "self_hf")
    test_hf.write_model(d, test_hf.hf_config("qwen2", ga.CASES[1][1]), T, "F32")
    if check(export(tinylm, d, src, "f32", tok=False)[0] == 0, "qwen2: exported for the overwrite check"):
        before = open(src, "rb").read()
        rc, _, err = export(tinylm, src, src, "q8_0", tok=False)
        check(rc != 0 and "input" in err and open(src, "rb").read() == before,
              "export --out its own --model file: refused, the file unchanged", err or "it ran")


if __name__ == "__main__":
    sys.exit(main([test_families, test_nanogpt, test_gemma3_multimodal, test_bpe_tokenizers, test_gpt2_tokenizer,
                  test_refusals]))
