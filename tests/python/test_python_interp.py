#!/usr/bin/python3
"""test_python_interp.py — Model.weights() and the ActivationCache helpers against the PyTorch reference.

    test_python_interp.py --lib build/libtinylm.so --work DIR [--only variant,...]

On architecture variants (llama-like pre-RMSNorm with GQA, GPT-2-like LayerNorm with biases and
learned positions, Gemma-2-like (1 + w) sandwich with soft-caps, post-norm, OLMo-2-like output
norms, QK-norm, attention and MLP biases), against tests/reference/tinylm_ref.py (float64):
1. every TransformerLens-shaped weight (W_E, W_pos, W_U, W_Q/K/V [L, heads, d, hd], W_O, b_*, W_in,
   W_gate, W_out, norms, QK-norms) equals the reference's parameter rearranged independently;
   the views are read-only by default (writes raise, the flag cannot be turned on); W_U is W_E's
   memory when tied; repeat_kv and norm_gain;
2. W_Q/W_K/W_V/W_in/W_gate/W_out applied to the cached sublayer inputs reproduce hook_q/k/v and the
   MLP's points (engine cache: 1e-5; reference: 2e-4);
3. accumulated_resid = the reference's resid_pre/mid/post; decompose_resid sums to the stream
   (refused for post-norm); stack_head_results summed per layer + b_O = the reference's
   hook_attn_out (or _pre_norm); apply_ln_to_stack(accumulated_resid)[-1] @ W_U (+ the final norm's
   bias, soft-cap) = the reference's logits; apply_ln_to_stack at a layer = ln1's output less its
   bias; logit_attrs of the normed decomposition sum to the reference's logit difference;
4. cache indexing (cache["pattern", 0], negative layers, get_act_name as TransformerLens), repr,
   arrays owned by the cache;
5. a writable edit (one neuron's W_out row zeroed) changes the logits as the same edit does in
   the reference; edit_weights() restores bit-identical logits; views outlive close() safely.
Prints "N passed, N failed"; exits 1 on any failure.
"""
import argparse
import copy
import ctypes
import gc
import os
import pickle
import shutil
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
sys.path.insert(0, os.path.join(ROOT, "tests", "parity"))
sys.path.insert(0, os.path.join(ROOT, "python"))
import tinylm_ref  # noqa: E402
from cases import all_cases  # noqa: E402

TOL = 2e-4
VARIANTS = ["llama_like", "gpt2_like", "gemma2_like", "norm_layernorm_post", "olmo2_like", "qwen3_like",
            "attention_bias", "ffn_swiglu_mlp_bias", "deepnorm_layernorm_2"]
counts = [0, 0]


def check(ok, what, detail=""):
    counts[0 if ok else 1] += 1
    print("%s %s%s" % ("ok  " if ok else "FAIL", what, "" if ok or not detail else ": " + str(detail)))
    return ok


def rel_err(c, r):
    c, r = np.asarray(c, np.float64), np.asarray(r, np.float64)
    if c.shape != r.shape:
        return float("inf")
    scale = float(np.abs(r).max()) if r.size else 0.0
    d = float(np.abs(c - r).max()) if r.size else 0.0
    return d / scale if scale > 0 else d


def close(label, c, r, tol=TOL):
    e = rel_err(c, r)
    return check(e < tol, label, "rel err %.2e (shapes %s, %s)" % (e, np.shape(c), np.shape(r)))


def expected_weights(cfg, P):
    """the TransformerLens arrangement of the reference's parameters, computed here from the
    engine's [out, in] tensors by reshape/transpose (not by the package's strides)"""
    c = tinylm_ref.resolve_config(cfg)
    L, d, H, KV, hd = (c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"],
                       c["num_key_value_heads"], c["head_dim"])
    out = {"W_E": P["embed.weight"]}
    out["W_U"] = (P["embed.weight"] if c["tie_word_embeddings"] else P["lm_head.weight"]).T
    if "pos_embed.weight" in P:
        out["W_pos"] = P["pos_embed.weight"]
    per = {}
    for l in range(L):
        a = "layers.%d.attn." % l
        f = "layers.%d.ffn." % l
        per.setdefault("W_Q", []).append(P[a + "q_proj.weight"].reshape(H, hd, d).transpose(0, 2, 1))
        per.setdefault("W_K", []).append(P[a + "k_proj.weight"].reshape(KV, hd, d).transpose(0, 2, 1))
        per.setdefault("W_V", []).append(P[a + "v_proj.weight"].reshape(KV, hd, d).transpose(0, 2, 1))
        per.setdefault("W_O", []).append(P[a + "o_proj.weight"].T.reshape(H, hd, d))
        for k, n, name in (("b_Q", H, "q_proj"), ("b_K", KV, "k_proj"), ("b_V", KV, "v_proj")):
            if a + name + ".bias" in P:
                per.setdefault(k, []).append(P[a + name + ".bias"].reshape(n, hd))
        if a + "o_proj.bias" in P:
            per.setdefault("b_O", []).append(P[a + "o_proj.bias"])
        per.setdefault("W_in", []).append(P[f + "up_proj.weight"].T)
        per.setdefault("W_out", []).append(P[f + "down_proj.weight"].T)
        if f + "gate_proj.weight" in P:
            per.setdefault("W_gate", []).append(P[f + "gate_proj.weight"].T)
        for k, name in (("b_in", "up_proj"), ("b_gate", "gate_proj"), ("b_out", "down_proj")):
            if f + name + ".bias" in P:
                per.setdefault(k, []).append(P[f + name + ".bias"])
    for k, v in per.items():
        out[k] = np.stack(v)
        for l in range(L):
            out["blocks.%d.%s.%s" % (l, "mlp" if k in ("W_in", "W_out", "W_gate", "b_in", "b_gate", "b_out")
                                     else "attn", k)] = v[l]
    # norms: the hook names of docs/python.md
    pl = c["norm_placement"]
    for l in range(L):
        for eng, tl in (("attn", "ln1"), ("ffn", "ln2")):
            names = []
            if pl in ("pre", "sandwich"):
                names.append(("%s_norm" % eng, tl))
            if pl in ("post", "deepnorm"):
                names.append(("%s_norm" % eng, tl + "_post"))
            if pl in ("sandwich", "output"):
                names.append(("%s_out_norm" % eng, tl + "_out"))
            for e, t in names:
                out["blocks.%d.%s.w" % (l, t)] = P["layers.%d.%s.weight" % (l, e)]
                if "layers.%d.%s.bias" % (l, e) in P:
                    out["blocks.%d.%s.b" % (l, t)] = P["layers.%d.%s.bias" % (l, e)]
        for q in ("q_norm", "k_norm"):
            if "layers.%d.attn.%s.weight" % (l, q) in P:
                out["blocks.%d.attn.%s.w" % (l, q)] = P["layers.%d.attn.%s.weight" % (l, q)]
    if "final_norm.weight" in P:
        out["ln_final.w"] = P["final_norm.weight"]
        if "final_norm.bias" in P:
            out["ln_final.b"] = P["final_norm.bias"]
    return out


def softcap(x, cap):
    return cap * np.tanh(x / cap) if cap else x


def check_weights(label, model, cfg, P, c):
    W = model.weights()
    exp = expected_weights(cfg, P)
    missing = sorted(set(exp) - set(W))
    extra = sorted(set(W) - set(exp))
    check(not missing and not extra, "%s: weight names = the expected TransformerLens set" % label,
          "missing %s, unexpected %s" % (missing[:5], extra[:5]))
    bad = [k for k in exp if k in W and rel_err(W[k], np.asarray(exp[k], np.float32)) > 1e-7]
    check(not bad, "%s: %d weights = the reference's parameters rearranged" % (label, len(exp)), bad[:5])
    ro = all(not v.flags.writeable for v in W.values())
    try:
        W["W_Q"][0, 0, 0, 0] = 1.0
        raised = False
    except ValueError:
        raised = True
    try:
        W["W_E"].flags.writeable = True
        reenabled = True
    except ValueError:
        reenabled = False
    check(ro and raised and not reenabled, "%s: weights are read-only by default (write raises, flag stays off)"
          % label)
    if c["tie_word_embeddings"]:
        check(np.shares_memory(W["W_U"], W["W_E"]), "%s: tied W_U is W_E's memory (transposed)" % label)
    H, KV = c["num_attention_heads"], c["num_key_value_heads"]
    rep = W.repeat_kv("W_K")
    check(rep.shape[1] == H and all(np.array_equal(rep[:, h], W["W_K"][:, h // (H // KV)]) for h in range(H)),
          "%s: repeat_kv(W_K) gives [L, H, d, hd], query head h = kv head h // (H/KV)" % label)
    for k in W:
        if k.endswith(".w"):
            g = W.norm_gain(k)
            want = 1.0 + np.asarray(exp[k]) if c["norm_type"] == "rmsnorm_1p" else np.asarray(exp[k])
            if not check(rel_err(g, want) < 1e-7, "%s: norm_gain(%s) (1 + w for rmsnorm_1p)" % (label, k)):
                break
            break
    return W


def sub_inputs(c, cache, l):
    """the attention's and the MLP's input at layer l (what q/k/v and up/gate read)"""
    pl = c["norm_placement"]
    if pl in ("pre", "sandwich"):
        return cache["blocks.%d.ln1.hook_normalized" % l], cache["blocks.%d.ln2.hook_normalized" % l]
    return cache["blocks.%d.hook_resid_pre" % l], cache["blocks.%d.hook_resid_mid" % l]


def check_projections(label, c, W, cache, rc):
    """W_Q etc. applied to the cached inputs reproduce the projections (engine 1e-5, reference)"""
    L = c["num_hidden_layers"]
    gated = c["ffn_type"] in ("swiglu", "geglu")
    worst_e, worst_r = 0.0, 0.0
    for l in range(L):
        xa, xm = sub_inputs(c, cache, l)
        rxa, rxm = sub_inputs(c, rc, l)
        for k, hook in (("Q", "q"), ("K", "k"), ("V", "v")):
            y = np.einsum("td,hde->the", xa.astype(np.float64), W["W_" + k][l].astype(np.float64))
            if "b_" + k in W:
                y = y + W["b_" + k][l]
            worst_e = max(worst_e, rel_err(y, cache["blocks.%d.attn.hook_%s" % (l, hook)]))
            ry = np.einsum("td,hde->the", rxa, W["W_" + k][l].astype(np.float64)) + (W["b_" + k][l] if "b_" + k in W else 0)
            worst_r = max(worst_r, rel_err(ry, rc["blocks.%d.attn.hook_%s" % (l, hook)]))
        pre = xm.astype(np.float64) @ W["W_in"][l] + (W["b_in"][l] if "b_in" in W else 0)
        if gated:
            gate = xm.astype(np.float64) @ W["W_gate"][l] + (W["b_gate"][l] if "b_gate" in W else 0)
            worst_e = max(worst_e, rel_err(pre, cache["blocks.%d.mlp.hook_pre_linear" % l]),
                          rel_err(gate, cache["blocks.%d.mlp.hook_pre" % l]))
        else:
            worst_e = max(worst_e, rel_err(pre, cache["blocks.%d.mlp.hook_pre" % l]))
        out = cache["blocks.%d.mlp.hook_post" % l].astype(np.float64) @ W["W_out"][l] + \
            (W["b_out"][l] if "b_out" in W else 0)
        pl = c["norm_placement"]
        tgt = "blocks.%d.hook_mlp_out_pre_norm" % l if pl in ("sandwich", "output") else "blocks.%d.hook_mlp_out" % l
        worst_e = max(worst_e, rel_err(out, cache[tgt]))
        rout = rc["blocks.%d.mlp.hook_post" % l] @ W["W_out"][l].astype(np.float64) + \
            (W["b_out"][l] if "b_out" in W else 0)
        worst_r = max(worst_r, rel_err(rout, rc[tgt]))
    check(worst_e < 1e-5, "%s: W_Q/K/V, W_in/W_gate, W_out on the cached inputs = hook_q/k/v, mlp points (1e-5)"
          % label, "%.2e" % worst_e)
    check(worst_r < TOL, "%s: the same on the reference's activations = the reference's" % label, "%.2e" % worst_r)


def check_cache(label, model, c, W, cache, rc, rlogits, ids, rng):
    L, T, H = c["num_hidden_layers"], len(ids), c["num_attention_heads"]
    pl = c["norm_placement"]
    # indexing, repr, ownership
    check(isinstance(cache, dict) and cache["pattern", 0] is cache["blocks.0.attn.hook_pattern"]
          and cache["resid_post", -1] is cache["blocks.%d.hook_resid_post" % (L - 1)]
          and cache["q", 1, "attn"] is cache["blocks.1.attn.hook_q"] and cache["k1a",] is cache["blocks.1.attn.hook_k"]
          and ("z", 0) in cache, "%s: TransformerLens indexing of the cache" % label)
    r = repr(cache)
    check("blocks.0.attn.hook_pattern: (%d, %d, %d)" % (H, T, T) in r and "[" not in r and len(r) < 100 * len(cache),
          "%s: repr lists names and shapes, no array data" % label, r[:200])
    # (the pass wrote them into one buffer of this cache's own: none is the engine's, none overlaps another)
    bases = {id(v.base if v.base is not None and v.base.base is None else v.base.base) for v in cache.values()}
    spans = sorted((v.ctypes.data, v.ctypes.data + v.nbytes) for v in cache.values())
    check(len(bases) == 1 and all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
          and next(iter(cache.values())).base is not None,
          "%s: every cached array is the cache's own memory (views of one buffer, none overlapping)" % label)
    # accumulated_resid
    acc, labels = model_acc = cache.accumulated_resid(incl_mid=True, return_labels=True)
    want = []
    for l in range(L):
        want += [rc["blocks.%d.hook_resid_pre" % l], rc["blocks.%d.hook_resid_mid" % l]]
    want.append(rc["blocks.%d.hook_resid_post" % (L - 1)])
    del model_acc
    check(labels[-1] == "final_post" and labels[:2] == ["0_pre", "0_mid"] and len(labels) == 2 * L + 1,
          "%s: accumulated_resid labels" % label, labels)
    close("%s: accumulated_resid(incl_mid) = the reference's resid_pre/mid/post" % label, acc, np.stack(want))
    a1 = cache.accumulated_resid(layer=1, mlp_input=True, pos_slice=slice(2, 5))
    close("%s: accumulated_resid(layer=1, mlp_input, pos_slice)" % label, a1,
          np.stack([rc["blocks.0.hook_resid_pre"], rc["blocks.1.hook_resid_pre"], rc["blocks.1.hook_resid_mid"]])[:, 2:5])
    # decompose_resid
    if pl in ("post", "deepnorm") or not c["residual"]:
        try:
            cache.decompose_resid()
            check(False, "%s: decompose_resid refused for a post-norm model" % label)
        except ValueError as e:
            check("not a sum" in str(e), "%s: decompose_resid refused for a post-norm model" % label, e)
    else:
        dec, dl = cache.decompose_resid(return_labels=True)
        close("%s: sum of decompose_resid = the reference's last resid_post" % label, dec.sum(0),
              rc["blocks.%d.hook_resid_post" % (L - 1)])
        check(dl[0] == "embed" and ("pos_embed" in dl) == (c["position_embedding"] == "learned")
              and dl[-1] == "%d_mlp_out" % (L - 1), "%s: decompose_resid labels" % label, dl)
        d1 = cache.decompose_resid(layer=1, mlp_input=True)
        close("%s: decompose_resid(layer=1, mlp_input) sums to resid_mid 1" % label, d1.sum(0),
              rc["blocks.1.hook_resid_mid"])
    # stack_head_results
    heads, hl = cache.stack_head_results(return_labels=True)
    check(heads.shape == (L * H, T, c["hidden_size"]) and hl[H + 1] == "L1H1", "%s: stack_head_results shape, labels"
          % label, (heads.shape, hl[:3]))
    worst = 0.0
    for l in range(L):
        s = heads[l * H:(l + 1) * H].sum(0) + (W["b_O"][l] if "b_O" in W else 0)
        tgt = "blocks.%d.hook_attn_out_pre_norm" % l if pl in ("sandwich", "output") else "blocks.%d.hook_attn_out" % l
        worst = max(worst, rel_err(s, rc[tgt]))
    check(worst < TOL, "%s: stack_head_results summed per layer + b_O = the reference's attention output" % label,
          "%.2e" % worst)
    zl = rc["blocks.0.attn.hook_z"][:, 1] @ W["W_O"][0, 1].astype(np.float64)  # one head, independently
    close("%s: stack_head_results[L0H1] = z[:, 1] @ W_O[0, 1] (reference z)" % label, heads[1], zl)
    # stack_neuron_results, get_full_resid_decomposition
    neur, nl = cache.stack_neuron_results(return_labels=True)
    f = c["intermediate_size"]
    worst = 0.0
    for l in range(L):
        s = neur[l * f:(l + 1) * f].sum(0) + (W["b_out"][l] if "b_out" in W else 0)
        tgt = "blocks.%d.hook_mlp_out_pre_norm" % l if pl in ("sandwich", "output") else "blocks.%d.hook_mlp_out" % l
        worst = max(worst, rel_err(s, rc[tgt]))
    check(worst < TOL and nl[f + 2] == "L1N2" and neur.shape == (L * f, T, c["hidden_size"]),
          "%s: stack_neuron_results summed per layer + b_out = the reference's MLP output" % label, "%.2e" % worst)
    close("%s: stack_neuron_results(neuron_slice=[3], pos_slice=2) = post[2, 3] * W_out[0, 3]" % label,
          cache.stack_neuron_results(layer=1, neuron_slice=[3], pos_slice=2)[0],
          rc["blocks.0.mlp.hook_post"][2, 3] * W["W_out"][0, 3].astype(np.float64))
    if pl == "pre" and c["residual"]:
        full, fl = cache.get_full_resid_decomposition(return_labels=True)
        close("%s: get_full_resid_decomposition sums to the reference's last resid_post" % label, full.sum(0),
              rc["blocks.%d.hook_resid_post" % (L - 1)])
        check(fl[-1] == "bias" and len(fl) == full.shape[0], "%s: get_full_resid_decomposition labels" % label)
        part = cache.get_full_resid_decomposition(layer=1, mlp_input=True, expand_neurons=False)
        close("%s: get_full_resid_decomposition(layer=1, mlp_input, expand_neurons=False) sums to resid_mid 1"
              % label, part.sum(0), rc["blocks.1.hook_resid_mid"])
    else:
        expect(ValueError, "%s: get_full_resid_decomposition refused (%s placement)" % (label, pl),
               lambda: cache.get_full_resid_decomposition(), "")
    # apply_ln_to_stack: the last accumulated component through the final norm gives the logits
    normed = cache.apply_ln_to_stack(acc)
    lnb = W["ln_final.b"] if "ln_final.b" in W else 0
    logits = softcap((normed[-1].astype(np.float64) + lnb) @ W["W_U"], c["final_logit_softcapping"])
    close("%s: apply_ln_to_stack(accumulated_resid)[-1] @ W_U = the reference's logits" % label, logits, rlogits)
    close("%s: accumulated_resid(apply_ln=True) = apply_ln_to_stack of it" % label,
          cache.accumulated_resid(incl_mid=True, apply_ln=True), normed, 1e-6)
    if pl in ("pre", "sandwich"):
        n1 = cache.apply_ln_to_stack(cache.accumulated_resid(layer=1), layer=1)[-1]
        b1 = W["blocks.1.ln1.b"] if "blocks.1.ln1.b" in W else 0
        close("%s: apply_ln_to_stack(layer=1) of resid_pre 1 + ln1's bias = the reference's ln1 output" % label,
              n1 + b1, rc["blocks.1.ln1.hook_normalized"])
    # logit_attrs: the normed decomposition's attributions sum to the logit difference
    if pl not in ("post", "deepnorm") and c["residual"]:
        a, b = int(rng.integers(c["vocab_size"])), int(rng.integers(c["vocab_size"]))
        attrs = cache.logit_attrs(cache.decompose_resid(apply_ln=True), a, b)
        bias = (np.asarray(lnb, np.float64) @ (W["W_U"][:, a].astype(np.float64) - W["W_U"][:, b])) if "ln_final.b" in W else 0
        raw = rlogits
        cap = c["final_logit_softcapping"]
        if cap:
            raw = cap * np.arctanh(np.clip(rlogits / cap, -1 + 1e-12, 1 - 1e-12))
        close("%s: logit_attrs(decompose_resid) sums to the reference's logit difference" % label,
              attrs.sum(0) + bias, raw[:, a] - raw[:, b])
        per_pos = cache.logit_attrs(cache.decompose_resid(apply_ln=True), ids)  # a token per position
        close("%s: logit_attrs with a token per position" % label, per_pos.sum(0) + (
            (np.asarray(lnb, np.float64) @ W["W_U"][:, ids]) if "ln_final.b" in W else 0),
            raw[np.arange(T), ids])


def check_edit(label, model, cfg, P, ids, rlogits):
    base = model(ids)
    n = 5
    with model.edit_weights() as W:
        W["W_out"][0, n, :] = 0.0  # neuron n of layer 0 writes nothing
        edited = model(ids)
        check(np.all(W.engine["layers.0.ffn.down_proj.weight"][:, n] == 0),
              "%s: the edit is in the engine's down_proj column" % label)
    P2 = copy.deepcopy(P)
    P2["layers.0.ffn.down_proj.weight"][:, n] = 0.0
    r2 = tinylm_ref.Model(cfg, P2).forward(np.array([ids]))[0].detach().numpy()
    check(rel_err(edited, r2) < TOL and rel_err(edited, base) > 1e-5,
          "%s: zeroing neuron %d's W_out row = the reference with the same edit" % (label, n),
          "%.2e vs reference, %.2e vs unedited" % (rel_err(edited, r2), rel_err(edited, base)))
    check(np.array_equal(model(ids), base), "%s: edit_weights() restores the weights (bit-identical logits)" % label)
    # a persistent edit through weights(writable=True), of one head's W_Q, then undone
    W = model.weights(writable=True)
    keep = W["W_Q"][1, 0].copy()
    W["blocks.1.attn.W_Q"][0] *= 0.5
    P3 = copy.deepcopy(P)
    H, hd = cfg["num_attention_heads"], tinylm_ref.resolve_config(cfg)["head_dim"]
    P3["layers.1.attn.q_proj.weight"][:hd] *= 0.5
    r3 = tinylm_ref.Model(cfg, P3).forward(np.array([ids]))[0].detach().numpy()
    close("%s: halving head 0's W_Q in layer 1 (writable=True) = the reference" % label, model(ids), r3)
    W["W_Q"][1, 0] = keep
    check(np.array_equal(model(ids), base), "%s: writing the saved W_Q back restores the logits" % label)


def expect(exc, what, fn, needle=""):
    try:
        fn()
    except exc as e:
        return check(needle in str(e), what, e)
    return check(False, what, "no %s raised" % exc.__name__)


def check_misuse(label, tinylm, model, cache):
    """bad names and arguments: clear errors, never a crash"""
    L = tinylm._L
    shape = (ctypes.c_int64 * 2)()
    nd = ctypes.c_int()
    with model._using("test") as h:
        p = L.tlm_param(h, b"layers.0.attn.nonsense.weight", shape, ctypes.byref(nd))
        msg = tinylm._c_message()
        check(not p and "layers.0.attn.nonsense.weight" in msg, "%s: tlm_param(unknown name): NULL, names it" % label,
              msg)
        p = L.tlm_param(h, None, shape, ctypes.byref(nd))
        check(not p and "NULL" in tinylm._c_message(), "%s: tlm_param(NULL): NULL + message" % label)
        n = L.tlm_param_count(h)
        check(L.tlm_param_name(h, n) is None and L.tlm_param_name(h, -1) is None
              and "out of range" in tinylm._c_message(), "%s: tlm_param_name out of range: NULL + message" % label)
        check(L.tlm_params_writable(h) == 0, "%s: tlm_params_writable on an owned buffer: 0" % label)
    check(model.param_names[0] == "embed.weight", "%s: param_names in buffer order" % label)
    W = model.weights()
    expect(KeyError, "%s: an unknown weight name raises KeyError naming it" % label, lambda: W["W_nonsense"],
           "W_nonsense")
    expect(ValueError, "%s: repeat_kv of a non-kv weight refused" % label, lambda: W.repeat_kv("W_Q"), "W_Q")
    expect(TypeError, "%s: weights(writable='yes') refused" % label, lambda: model.weights(writable="yes"))
    expect(KeyError, "%s: cache[name, layer out of range] names the layer" % label,
           lambda: cache["pattern", model.n_layers], "outside")
    expect(ValueError, "%s: accumulated_resid(layer too large) refused" % label,
           lambda: cache.accumulated_resid(layer=model.n_layers + 1), "layer")
    expect(ValueError, "%s: decompose_resid(mode='x') refused" % label, lambda: cache.decompose_resid(mode="x"), "mode")
    expect(ValueError, "%s: logit_attrs with an id outside the vocabulary" % label,
           lambda: cache.logit_attrs(cache.accumulated_resid(), model.vocab_size), "vocabulary")
    expect(TypeError, "%s: logit_attrs with float tokens" % label,
           lambda: cache.logit_attrs(cache.accumulated_resid(), 1.5), "integers")
    _, part = model.run_with_cache(np.arange(4, dtype=np.int32), names=["blocks.0.hook_resid_pre"])
    expect(KeyError, "%s: a helper on a partial cache says which point was not cached" % label,
           lambda: part.accumulated_resid(), "not cached")


def check_dyt(tinylm, cases, work):
    cfg, opts = cases["norm_dyt_pre"]
    P = tinylm_ref.random_params(cfg, seed=3, std=opts["std"], embed_std=2 * opts["std"])
    d = os.path.join(work, "norm_dyt_pre")
    tinylm_ref.save(d, cfg, P)
    m = tinylm.load(d)
    W = m.weights()
    check("blocks.0.ln1.alpha" in W and "blocks.0.ln1.b" in W, "norm_dyt_pre: DyT's alpha and beta as ln1.alpha / .b")
    _, c = m.run_with_cache(np.arange(6, dtype=np.int32))
    expect(ValueError, "norm_dyt_pre: apply_ln_to_stack refused for DyT (no scale)",
           lambda: c.apply_ln_to_stack(c.accumulated_resid()), "DyT")
    m.close()


def check_stories(tinylm):
    """a llama2.c checkpoint: W_Q/W_K/W_V reproduce its hook_q/k/v, W_U is its (tied) embedding"""
    ckpt, tokf = os.path.join(ROOT, "data", "stories260K.bin"), os.path.join(ROOT, "data", "tok512.bin")
    if not os.path.exists(ckpt):
        return
    with tinylm.load(ckpt, tokenizer=tokf) as m:
        W = m.weights()
        ids = m.tokenize("Once upon a time")
        _, c = m.run_with_cache(ids)
        worst = 0.0
        for l in range(m.n_layers):
            x = c["normalized", l, "ln1"].astype(np.float64)
            for k in ("q", "k", "v"):
                worst = max(worst, rel_err(np.einsum("td,hde->the", x, W["W_" + k.upper()][l]), c[k, l]))
        check(worst < 1e-5, "stories260K: W_Q/W_K/W_V on ln1's output = hook_q/k/v", "%.2e" % worst)
        lg = (c.apply_ln_to_stack(c.accumulated_resid())[-1].astype(np.float64)) @ W["W_U"]
        close("stories260K: apply_ln_to_stack(accumulated_resid)[-1] @ W_U = the logits", lg, m(ids), 1e-5)
        del W
    gc.collect()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    os.environ["TINYLM_LIB"] = os.path.abspath(args.lib)
    import tinylm
    from tinylm.utils import get_act_name
    tinylm.set_threads(1)
    torch.set_num_threads(1)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    rng = np.random.default_rng(11)
    # get_act_name as TransformerLens defines it
    table = [(("pattern", 0), "blocks.0.attn.hook_pattern"), (("resid_post", 2), "blocks.2.hook_resid_post"),
             (("scale", 1, "ln1"), "blocks.1.ln1.hook_scale"), (("scale",), "ln_final.hook_scale"),
             (("k6a",), "blocks.6.attn.hook_k"), (("attn", 3), "blocks.3.attn.hook_pattern"),
             (("pre", 1), "blocks.1.mlp.hook_pre"), (("normalized", 0, "ln2"), "blocks.0.ln2.hook_normalized"),
             (("blocks.0.hook_resid_pre",), "blocks.0.hook_resid_pre"), (("embed",), "hook_embed"),
             (("attn_out", 1), "blocks.1.hook_attn_out"), (("q_normed", 0), "blocks.0.attn.hook_q_normed"),
             (("resid_mid3",), "hook_resid_mid3"), (("mlp_out", 0), "blocks.0.hook_mlp_out")]
    bad = [(a, get_act_name(*a), w) for a, w in table if get_act_name(*a) != w]
    check(not bad, "get_act_name = TransformerLens' for %d names" % len(table), bad[:3])
    cases = {n: (c, o) for n, c, o in all_cases()}
    for name in (args.only.split(",") if args.only else VARIANTS):
        cfg, opts = cases[name]
        P = tinylm_ref.random_params(cfg, seed=3, std=opts["std"], embed_std=2 * opts["std"])
        P = {k: v.astype(np.float32).astype(np.float64) for k, v in P.items()}  # (as the F32 file stores them)
        d = os.path.join(args.work, name)
        tinylm_ref.save(d, cfg, P)
        model = tinylm.load(d)
        c = tinylm_ref.resolve_config(cfg)
        ref = tinylm_ref.Model(cfg, P)
        T = min(10, c["max_position_embeddings"])
        ids = rng.integers(0, c["vocab_size"], T).astype(np.int32)
        W = check_weights(name, model, cfg, P, c)
        lg, cache = model.run_with_cache(ids)
        rlg, rc = ref.run_hooked(np.array([ids]))
        rc = {k: v[0] for k, v in rc.items()}
        rlogits = rlg[0]
        check(isinstance(cache, tinylm.ActivationCache), "%s: run_with_cache returns an ActivationCache" % name)
        check_projections(name, c, W, cache, rc)
        check_cache(name, model, c, W, cache, rc, rlogits, ids, rng)
        check_edit(name, model, cfg, P, ids, rlogits)
        if name == VARIANTS[0]:
            # a batch keeps its axis through the helpers
            _, cb = model.run_with_cache(np.stack([ids, ids[::-1]]))
            acc = cb.accumulated_resid()
            close("%s: batched accumulated_resid row 0 = the single run's" % name, acc[:, 0],
                  cache.accumulated_resid())
            hb = cb.stack_head_results()
            close("%s: batched stack_head_results row 0 = the single run's" % name, hb[:, 0],
                  cache.stack_head_results(), 1e-5)
            check_misuse(name, tinylm, model, cache)
            check(copy.deepcopy(cache)["pattern", 0] is not cache["pattern", 0]
                  and np.array_equal(copy.deepcopy(cache)["pattern", 0], cache["pattern", 0])
                  and type(pickle.loads(pickle.dumps(cache))) is dict,
                  "%s: deepcopy copies the arrays; pickling gives a plain dict" % name)
            # views outlive close(): still readable, calls refused, the engine's model freed after
            W2 = model.weights()
            before = np.array(W2["W_E"])
            model.close()
            check(np.array_equal(np.array(W2["W_E"]), before), "%s: weight views stay readable after close()" % name)
            try:
                model.weights()
                check(False, "%s: weights() after close raises TinylmError" % name)
            except tinylm.TinylmError:
                check(True, "%s: weights() after close raises TinylmError" % name)
            fin = model._deferred_free
            alive = fin is not None and fin.alive
            del W, W2, cb  # (every holder of a view: the caches keep the weights they used)
            cache._W = None
            gc.collect()
            check(alive and not fin.alive, "%s: the engine's model is freed once the last weight view goes" % name)
        try:
            cache["blocks.0.hook_nonsense"]
            check(False, "%s: an unknown cache key raises KeyError" % name)
        except KeyError:
            check(True, "%s: an unknown cache key raises KeyError" % name)
    if not args.only:
        check_dyt(tinylm, cases, args.work)
        check_stories(tinylm)
    print("%d passed, %d failed" % tuple(counts))
    return 1 if counts[1] else 0


if __name__ == "__main__":
    sys.exit(main())
