#!/usr/bin/python3
"""test_python_tl.py — TransformerLens' idioms on a tinylm Model, as a TransformerLens user writes them,
against the float64 PyTorch reference (tests/reference/tinylm_ref.py) and the package's own API:

1. model.cfg: TransformerLens' names for the config (n_layers ... positional_embedding_type);
2. weight attributes: W_E, W_U, W_Q, W_K / W_V repeated per query head and _W_K / _W_V per kv head,
   W_O, W_in, W_out, b_* (zeros where the model has none), each against the checkpoint's tensors
   rearranged here; W_K on the cached ln1 output reproduces hook_k per query head;
3. text or a list of texts wherever ids are taken (model(), return_type="loss" / "both",
   loss_per_token, run_with_cache, run_with_hooks, param_grads), names_filter, remove_batch_dim,
   generate(max_new_tokens=, do_sample=False), to_tokens / to_string / to_single_token,
   logit_attrs with string tokens;
4. persistent hooks: add_hook / reset_hooks (is_permanent), the hooks() context, backward add_hook;
   hook.ctx from a forward hook to the backward hook (against the reference's activation . gradient),
   clear_contexts; per-call prepend_bos= / padding_side= against tokenizing that way first;
5. cache.compute_head_results / stack_activation / get_neuron_results against the sublayer outputs;
6. FactoredMatrix against dense NumPy (product, transpose, SVD, eigenvalues, norm, products,
   indexing, collapse_l / collapse_r, make_even, unsqueeze) and model.OV / model.QK against the reference's tensors;
7. tinylm.patching: activation patching of resid_pre and of each head's output, query, key, value
   (by position and all positions) and attention pattern (whole, by destination, by weight) against
   the reference patched the same way; attribution patching against the reference's gradients;
8. misuse: each refused with a message naming what was wrong.

usage: test_python_tl.py --lib build/libtinylm.so --work DIR"""
import argparse
import os
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

CKPT, TOK = os.path.join(ROOT, "data", "stories260K.bin"), os.path.join(ROOT, "data", "tok512.bin")
VARIANTS = ["llama_like", "gpt2_like", "attention_bias"]
counts = [0, 0]


def check(ok, what, detail=""):
    counts[0 if ok else 1] += 1
    print("%s %s%s" % ("ok  " if ok else "FAIL", what, "" if ok or not detail else ": " + str(detail)[:400]))
    return ok


def rel_err(c, r):
    c, r = np.asarray(c, np.float64), np.asarray(r, np.float64)
    if c.shape != r.shape:
        return float("inf")
    scale = float(np.abs(r).max()) if r.size else 0.0
    d = float(np.abs(c - r).max()) if r.size else 0.0
    return d / scale if scale > 0 else d


def close(label, c, r, tol=2e-4):
    e = rel_err(c, r)
    return check(e < tol, label, "rel err %.2e (shapes %s, %s)" % (e, np.shape(c), np.shape(r)))


def raises(label, fn, exc, words=()):
    try:
        fn()
    except exc as e:
        return check(all(w in str(e) for w in words), label, "message %r lacks %s" % (str(e), words))
    except BaseException as e:  # noqa: B902
        return check(False, label, "raised %s: %s" % (type(e).__name__, e))
    return check(False, label, "did not raise")


def check_variant(tinylm, name, cfg, opts, work, rng):
    c = tinylm_ref.resolve_config(cfg)
    P = tinylm_ref.random_params(cfg, seed=3, std=opts["std"], embed_std=2 * opts["std"])
    P = {k: v.astype(np.float32).astype(np.float64) for k, v in P.items()}  # (as the F32 file stores them)
    d = os.path.join(work, name)
    tinylm_ref.save(d, cfg, P)
    ref = tinylm_ref.Model(cfg, P)
    model = tinylm.load(d)
    L, H, dm = c["num_hidden_layers"], c["num_attention_heads"], c["hidden_size"]
    KV = c["num_key_value_heads"]
    hd = c["head_dim"] or dm // H

    # 1. cfg
    cf = model.cfg
    want = dict(n_layers=L, d_model=dm, n_heads=H, d_head=hd, d_mlp=c["intermediate_size"], d_vocab=c["vocab_size"],
                n_ctx=c["max_position_embeddings"], n_key_value_heads=KV,
                act_fn={"swiglu": "silu", "gelu": "gelu_new", "geglu": "gelu_pytorch_tanh"}[c["ffn_type"]],
                normalization_type={"layernorm": "LN", "rmsnorm": "RMS"}[c["norm_type"]],
                positional_embedding_type={"rope": "rotary", "learned": "standard"}[c["position_embedding"]])
    bad = {k: (getattr(cf, k), v) for k, v in want.items() if getattr(cf, k) != v or cf[k] != v}
    check(not bad, "%s: cfg has TransformerLens' names and values" % name, bad)

    # 2. weight attributes against the checkpoint's tensors, rearranged here
    def proj(l, e, heads):
        return P["layers.%d.attn.%s.weight" % (l, e)].reshape(heads, hd, dm).transpose(0, 2, 1)
    WQ = np.stack([proj(l, "q_proj", H) for l in range(L)])
    WK = np.stack([proj(l, "k_proj", KV) for l in range(L)])
    WV = np.stack([proj(l, "v_proj", KV) for l in range(L)])
    WO = np.stack([P["layers.%d.attn.o_proj.weight" % l].T.reshape(H, hd, dm) for l in range(L)])
    rep = [h * KV // H for h in range(H)]
    check(np.array_equal(model.W_Q, WQ) and np.array_equal(model._W_K, WK) and np.array_equal(model._W_V, WV)
          and np.array_equal(model.W_K, WK[:, rep]) and np.array_equal(model.W_V, WV[:, rep])
          and np.array_equal(model.W_O, WO),
          "%s: W_Q, _W_K / _W_V (per kv head), W_K / W_V (per query head), W_O = the checkpoint's" % name)
    check(np.array_equal(model.W_E, P["embed.weight"]) and np.array_equal(
        model.W_U, P.get("lm_head.weight", P["embed.weight"]).T), "%s: W_E, W_U" % name)
    up = np.stack([P["layers.%d.ffn.up_proj.weight" % l].T for l in range(L)])
    down = np.stack([P["layers.%d.ffn.down_proj.weight" % l].T for l in range(L)])
    check(np.array_equal(model.W_in, up) and np.array_equal(model.W_out, down), "%s: W_in, W_out" % name)
    if c["attention_bias"]:
        bK = np.stack([P["layers.%d.attn.k_proj.bias" % l].reshape(KV, hd) for l in range(L)])
        check(np.array_equal(model._b_K, bK) and np.array_equal(model.b_K, bK[:, rep])
              and np.array_equal(model.b_Q, np.stack([P["layers.%d.attn.q_proj.bias" % l].reshape(H, hd)
                                                      for l in range(L)])), "%s: b_Q, b_K (repeated), _b_K" % name)
    else:
        check(model.b_Q.shape == (L, H, hd) and not model.b_Q.any() and model.b_K.shape == (L, H, hd)
              and not model.b_K.any(), "%s: b_Q, b_K zeros without attention_bias" % name)
    check(model.b_U.shape == (c["vocab_size"],) and not model.b_U.any(), "%s: b_U zeros (no head bias)" % name)
    ids = rng.integers(0, c["vocab_size"], 8).astype(np.int32)
    _, cache = model.run_with_cache(ids)
    k = np.einsum("td,hdk->thk", cache["normalized", 1, "ln1"], model.W_K[1]) + model.b_K[1]
    close("%s: ln1 output @ W_K (+ b_K) = hook_k repeated per query head" % name, k,
          np.repeat(cache["k", 1], H // KV, axis=-2), 1e-5)

    # 5. cache helpers
    cache.compute_head_results()
    res = cache["blocks.1.attn.hook_result"]
    check(res.shape == (8, H, dm), "%s: compute_head_results: blocks.1.attn.hook_result [T, H, d]" % name, res.shape)
    close("%s: hook_result summed over heads + b_O = hook_attn_out" % name, res.sum(-2) + model.b_O[1],
          cache["attn_out", 1], 1e-5)
    close("%s: stack_activation('resid_pre') = the layers stacked" % name, cache.stack_activation("resid_pre"),
          np.stack([cache["resid_pre", l] for l in range(L)]), 1e-7)
    close("%s: get_neuron_results summed + b_out = hook_mlp_out" % name,
          cache.get_neuron_results(0).sum(-2) + model.b_out[0], cache["mlp_out", 0], 1e-5)

    # 6. OV / QK circuits against the reference's tensors
    OV, QK = model.OV, model.QK
    check(OV.shape == (L, H, dm, dm) and QK.shape == (L, H, dm, dm), "%s: OV, QK are [L, H, d, d]" % name)
    close("%s: OV[l, h].AB = W_V[l, kv(h)] @ W_O[l, h]" % name, OV[L - 1, H - 1].AB, WV[L - 1, rep[H - 1]] @ WO[L - 1, H - 1],
          1e-5)
    close("%s: QK[l, h].AB = W_Q[l, h] @ W_K[l, kv(h)]^T" % name, QK[0, 1].AB, WQ[0, 1] @ WK[0, rep[1]].T, 1e-5)
    ov = WV[L - 1, rep[H - 1]] @ WO[L - 1, H - 1]
    cl = OV[L - 1, H - 1].collapse_l()
    close("%s: OV[l, h].collapse_l() [d_head, d]: its Gram = (W_V W_O)^T (W_V W_O)" % name, cl.T @ cl, ov.T @ ov, 1e-5)

    # 7. patching against the reference patched the same way
    clean = rng.integers(0, c["vocab_size"], 6).astype(np.int32)
    bad_ids = clean.copy()
    bad_ids[1] = (clean[1] + 7) % c["vocab_size"]
    # (the metric: the clean token at the changed position against the corrupted one; position 2 holds the
    # same token in both, which would make every metric 0)
    good_tok, bad_tok = int(clean[1]), int(bad_ids[1])

    def metric(lg):
        return lg[..., -1, good_tok] - lg[..., -1, bad_tok]
    _, clean_cache = model.run_with_cache(clean)
    with torch.no_grad():
        _, rclean = ref.run_hooked(np.array([clean]))

    def ref_patched(name_, fn):
        with torch.no_grad():
            lg, _ = ref.run_hooked(np.array([bad_ids]), names=(), replace={name_: fn})
        return float(metric(lg[0]))
    got = tinylm.patching.get_act_patch_resid_pre(model, bad_ids, clean_cache, metric)
    exp = np.zeros((L, 6))
    for l in range(L):
        for t in range(6):
            def patch(x, l=l, t=t):
                x = x.clone()
                x[:, t] = torch.as_tensor(rclean["blocks.%d.hook_resid_pre" % l][0, t])
                return x
            exp[l, t] = ref_patched("blocks.%d.hook_resid_pre" % l, patch)
    close("%s: patching.get_act_patch_resid_pre [L, T] = the reference patched" % name, got, exp, 1e-4)
    got = tinylm.patching.get_act_patch_attn_head_out_by_pos(model, bad_ids, clean_cache, metric)
    exp = np.zeros((L, 6, H))
    for l in range(L):
        for t in range(6):
            for h in range(H):
                def patch(x, l=l, t=t, h=h):
                    x = x.clone()
                    x[:, t, h] = torch.as_tensor(rclean["blocks.%d.attn.hook_z" % l][0, t, h])
                    return x
                exp[l, t, h] = ref_patched("blocks.%d.attn.hook_z" % l, patch)
    close("%s: patching.get_act_patch_attn_head_out_by_pos [L, T, H] = the reference patched" % name, got, exp, 1e-4)
    got = tinylm.patching.get_act_patch_attn_head_out_all_pos(model, bad_ids, clean_cache, metric)
    exp = np.zeros((L, H))
    for l in range(L):
        for h in range(H):
            def patch(x, l=l, h=h):
                x = x.clone()
                x[:, :, h] = torch.as_tensor(rclean["blocks.%d.attn.hook_z" % l][0, :, h])
                return x
            exp[l, h] = ref_patched("blocks.%d.attn.hook_z" % l, patch)
    close("%s: patching.get_act_patch_attn_head_out_all_pos [L, H] = the reference patched" % name, got, exp, 1e-4)
    # q / k / v / pattern: each cell written from the reference's clean run, indexed explicitly here;
    # compared as effects (the patched metric minus the corrupted run's), which are small beside the
    # metric itself in these random models
    T6 = 6
    with torch.no_grad():
        rbase = float(metric(ref.run_hooked(np.array([bad_ids]), names=())[0][0]))
    base = float(metric(model(bad_ids)))

    def close_effect(label, got, exp):
        e = rel_err(np.asarray(got) - base, np.asarray(exp) - rbase)
        scale = float(np.abs(np.asarray(exp) - rbase).max())
        return check(e < 2e-3 and scale > 1e-3, label, "effects: rel err %.2e, largest %.2e" % (e, scale))

    def ref_grid(point, cells, index):
        """[L, *cells]: the reference's metric with the clean `point` of layer l patched at index(cell)"""
        out = np.zeros((L,) + cells)
        for l in range(L):
            src = torch.as_tensor(rclean[point % l])
            for cell in np.ndindex(*cells):
                def patch(x, sel=index(cell), src=src):
                    x = x.clone()
                    x[sel] = src[sel]
                    return x
                out[(l,) + cell] = ref_patched(point % l, patch)
        return out
    P_ = tinylm.patching
    by_pos = lambda c: (slice(None), c[0], c[1])          # noqa: E731  ([B, T, heads, hd]: position, head)
    all_pos = lambda c: (slice(None), slice(None), c[0])  # noqa: E731  (every position of one head)
    for kind, heads in (("q", H), ("k", KV), ("v", KV)):
        pt = "blocks.%d.attn.hook_" + kind
        close_effect("%s: patching.get_act_patch_attn_head_%s_by_pos [L, T, %d] = the reference patched" % (name, kind, heads),
              getattr(P_, "get_act_patch_attn_head_%s_by_pos" % kind)(model, bad_ids, clean_cache, metric),
              ref_grid(pt, (T6, heads), by_pos))
        close_effect("%s: patching.get_act_patch_attn_head_%s_all_pos [L, %d] = the reference patched" % (name, kind, heads),
              getattr(P_, "get_act_patch_attn_head_%s_all_pos" % kind)(model, bad_ids, clean_cache, metric),
              ref_grid(pt, (heads,), all_pos))
    pt = "blocks.%d.attn.hook_pattern"  # [B, H, T_dest, T_src]
    pat_all = P_.get_act_patch_attn_head_pattern_all_pos(model, bad_ids, clean_cache, metric)
    close_effect("%s: patching.get_act_patch_attn_head_pattern_all_pos [L, H] = the reference patched" % name, pat_all,
          ref_grid(pt, (H,), lambda c: (slice(None), c[0])))
    pat_pos = P_.get_act_patch_attn_head_pattern_by_pos(model, bad_ids, clean_cache, metric)
    close_effect("%s: patching.get_act_patch_attn_head_pattern_by_pos [L, H, T] = the reference patched" % name, pat_pos,
          ref_grid(pt, (H, T6), lambda c: (slice(None), c[0], c[1])))
    close_effect("%s: patching.get_act_patch_attn_head_pattern_dest_src_pos [L, H, T, T] = the reference patched" % name,
          P_.get_act_patch_attn_head_pattern_dest_src_pos(model, bad_ids, clean_cache, metric),
          ref_grid(pt, (H, T6, T6), lambda c: (slice(None), c[0], c[1], c[2])))
    if KV == H:
        every = P_.get_act_patch_attn_head_all_pos_every(model, bad_ids, clean_cache, metric)
        parts = [P_.get_act_patch_attn_head_out_all_pos, P_.get_act_patch_attn_head_q_all_pos,
                 P_.get_act_patch_attn_head_k_all_pos, P_.get_act_patch_attn_head_v_all_pos]
        check(every.shape == (5, L, H) and all(np.array_equal(every[i], f(model, bad_ids, clean_cache, metric))
                                               for i, f in enumerate(parts)) and np.array_equal(every[4], pat_all),
              "%s: get_act_patch_attn_head_all_pos_every = out, q, k, v, pattern stacked" % name)
        every = P_.get_act_patch_attn_head_by_pos_every(model, bad_ids, clean_cache, metric)
        check(every.shape == (5, L, T6, H) and np.array_equal(every[4], np.swapaxes(pat_pos, 1, 2)) and np.array_equal(
            every[1], P_.get_act_patch_attn_head_q_by_pos(model, bad_ids, clean_cache, metric)),
            "%s: get_act_patch_attn_head_by_pos_every [5, L, T, H] (the pattern's [L, H, T] moved to [L, T, H])" % name)
    else:
        raises("%s: get_act_patch_attn_head_all_pos_every with grouped-query attention" % name,
               lambda: P_.get_act_patch_attn_head_all_pos_every(model, bad_ids, clean_cache, metric), ValueError,
               ["%d key/value heads" % KV])
    names = ["blocks.%d.hook_resid_pre" % l for l in range(L)] + ["blocks.%d.attn.hook_z" % l for l in range(L)]
    _, rbad = ref.run_hooked(np.array([bad_ids]), names=set(names),
                             backward=lambda lg: lg[0, -1, good_tok] - lg[0, -1, bad_tok])
    # hook.ctx: a forward hook keeps the activation, the backward hook of the same point multiplies it
    # by its gradient (TransformerLens' idiom); = the reference's activation . its autograd gradient
    seen = {}

    def keep(a, hook):
        hook.ctx["act"] = np.array(a, np.float64)

    def use(g, hook):
        seen[hook.name] = (hook.ctx["act"] * g).sum(-1)
    model.run_with_hooks(bad_ids, fwd_hooks=[(n, keep) for n in names], bwd_hooks=[(n, use) for n in names],
                         metric=(-1, good_tok, bad_tok))
    close("%s: hook.ctx from the forward hook to the backward hook: activation . gradient = the reference's" % name,
          np.stack([seen[n] for n in names[:L]]), np.stack([(rbad[n][0] * rbad[n + "_grad"][0]).sum(-1)
                                                           for n in names[:L]]), 2e-4)
    close("%s: hook.ctx per head (hook_z) = the reference's" % name, np.stack([seen[n] for n in names[L:]]),
          np.stack([(rbad[n][0] * rbad[n + "_grad"][0]).sum(-1) for n in names[L:]]), 2e-4)
    hp = model.hook_points[names[0]]
    kept = "act" in hp.ctx and np.array_equal(hp.ctx["act"], np.array(rbad[names[0]][0], np.float32))
    model.clear_contexts()
    check(kept and hp.ctx == {}, "%s: hook.ctx outlives the call (the last activation) until clear_contexts()" % name)
    model.run_with_hooks(bad_ids, fwd_hooks=[(names[0], keep)])
    kept = "act" in hp.ctx
    model.reset_hooks()
    cleared_reset = hp.ctx == {}
    model.run_with_hooks(bad_ids, fwd_hooks=[(names[0], keep)])
    model.reset_hooks(clear_contexts=False)
    kept2 = "act" in hp.ctx
    model.run_with_hooks(bad_ids, fwd_hooks=[(names[0], keep)], clear_contexts=True)
    cleared_run = hp.ctx == {}
    with model.hooks(fwd_hooks=[(names[0], keep)], clear_contexts=True):
        model(bad_ids)
        inside = "act" in hp.ctx
    check(kept and cleared_reset and kept2 and cleared_run and inside and hp.ctx == {},
          "%s: reset_hooks() clears hook.ctx (clear_contexts=False keeps it); run_with_hooks(clear_contexts=True) "
          "and hooks(clear_contexts=True) clear it after" % name)
    a_res = tinylm.patching.get_attr_patch_resid_pre(model, clean, bad_ids, (-1, good_tok, bad_tok))
    e_res = np.stack([((rclean[n][0] - rbad[n][0]) * rbad[n + "_grad"][0]).sum(-1) for n in names[:L]])
    close("%s: patching.get_attr_patch_resid_pre = (clean - corrupted) . the reference's gradient" % name, a_res,
          e_res, 2e-3)
    a_head = tinylm.patching.get_attr_patch_attn_head_out_by_pos(model, clean, bad_ids, tinylm.metrics.logit_diff(
        -1, good_tok, bad_tok))
    e_head = np.stack([((rclean[n][0] - rbad[n][0]) * rbad[n + "_grad"][0]).sum(-1) for n in names[L:]])
    close("%s: patching.get_attr_patch_attn_head_out_by_pos [L, T, H] = the reference's" % name, a_head, e_head, 2e-3)
    model.close()


def factored_matrix(tinylm):
    rng = np.random.default_rng(4)
    FM = tinylm.FactoredMatrix
    A, B = rng.standard_normal((3, 7, 4)), rng.standard_normal((3, 4, 6))
    f = FM(A, B)
    check(f.shape == (3, 7, 6) and f.mdim == 4 and np.allclose(f.AB, A @ B), "FactoredMatrix: shape, AB")
    check(np.allclose(f.T.AB, np.swapaxes(A @ B, -1, -2)), "FactoredMatrix: T")
    U, S, Vh = f.svd()
    check(U.shape == (3, 7, 4) and S.shape == (3, 4) and Vh.shape == (3, 6, 4)
          and np.allclose(U @ (S[..., None] * np.swapaxes(Vh, -1, -2)), A @ B)
          and np.allclose(S, np.linalg.svd(A @ B, compute_uv=False)[..., :4]),
          "FactoredMatrix: svd() (U diag(S) Vh^T = AB; S = AB's singular values)")
    check(np.allclose(f.norm(), np.linalg.norm(A @ B, axis=(-2, -1))), "FactoredMatrix: norm() = Frobenius")
    sq = FM(rng.standard_normal((5, 3)), rng.standard_normal((3, 5)))
    ev = np.sort_complex(sq.eigenvalues)
    full = np.linalg.eigvals(sq.AB)
    full = np.sort_complex(full[np.argsort(-np.abs(full))][:3])
    check(np.allclose(ev, full, atol=1e-8), "FactoredMatrix: eigenvalues = AB's non-zero ones", (ev, full))
    v, M = rng.standard_normal(6), rng.standard_normal((6, 2))
    g = FM(rng.standard_normal((6, 2)), rng.standard_normal((2, 6)))
    check(np.allclose(f @ v, (A @ B) @ v) and np.allclose((f @ M).AB, A @ B @ M)
          and (rng.standard_normal((2, 7)) @ f).shape == (3, 2, 6) and np.allclose(v[:6].copy() @ f.T, (A @ B) @ v)
          and np.allclose((f @ g).AB, A @ B @ g.AB) and np.allclose((2.0 * f).AB, 2 * A @ B),
          "FactoredMatrix: @ a vector, a matrix, another FactoredMatrix; scalar *")
    check(np.allclose(f[1].AB, (A @ B)[1]) and np.allclose(f[1:, 2:5].AB, (A @ B)[1:, 2:5])
          and np.allclose(f[0, 3], (A @ B)[0, 3]) and np.allclose(f.get_corner(2), (A @ B)[:, :2, :2]),
          "FactoredMatrix: indexing, get_corner")
    # collapse_l / collapse_r: AB without one orthogonal factor, so their Gram matrices are AB's (sign-free)
    AB, tr = A @ B, lambda x: np.swapaxes(x, -1, -2)
    cl, cr = f.collapse_l(), f.collapse_r()
    check(cl.shape == (3, 4, 6) and cr.shape == (3, 7, 4) and np.allclose(tr(cl) @ cl, tr(AB) @ AB)
          and np.allclose(cr @ tr(cr), AB @ tr(AB)) and np.allclose(cl @ tr(cl), np.apply_along_axis(
              np.diag, -1, np.linalg.svd(AB, compute_uv=False)[..., :4] ** 2)),
          "FactoredMatrix: collapse_l() [.., k, rdim] (Gram = AB^T AB, rows orthogonal with norms S), "
          "collapse_r() [.., ldim, k] (Gram = AB AB^T)")
    check(np.allclose(f.U @ cl, AB) and np.allclose(cr @ tr(f.Vh), AB), "FactoredMatrix: U @ collapse_l() = AB = "
          "collapse_r() @ Vh^T")
    e = f.make_even()
    check(np.allclose(e.AB, AB) and np.allclose(tr(e.A) @ e.A, e.B @ tr(e.B)), "FactoredMatrix: make_even() keeps AB, "
          "A^T A = B B^T")
    u0, u1, um = f.unsqueeze(0), f.unsqueeze(1), f.unsqueeze(-3)
    check(u0.shape == (1, 3, 7, 6) and np.allclose(u0.AB, AB[None]) and u1.shape == (3, 1, 7, 6)
          and np.allclose(u1.AB, AB[:, None]) and um.shape == (3, 1, 7, 6) and np.allclose((u1 @ M).AB, (AB @ M)[:, None]),
          "FactoredMatrix: unsqueeze(0), unsqueeze(1), unsqueeze(-3) = np.expand_dims of AB")
    raises("FactoredMatrix: unsqueeze on a matrix axis is refused", lambda: f.unsqueeze(-1), ValueError,
           ["leading axis"])
    raises("FactoredMatrix: factors that do not chain are refused", lambda: FM(A, A), ValueError, ["chain"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.environ["TINYLM_LIB"] = os.path.abspath(args.lib)
    import tinylm
    tinylm.set_threads(1)
    torch.set_num_threads(1)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    rng = np.random.default_rng(9)
    cases = {n: (c, o) for n, c, o in all_cases()}
    for name in VARIANTS:
        check_variant(tinylm, name, cases[name][0], cases[name][1], args.work, rng)
    factored_matrix(tinylm)

    # 3. text wherever ids are taken, and TransformerLens' keywords (stories260K)
    m = tinylm.load(CKPT, tokenizer=TOK)
    text, texts = "Once upon a time, there was a little girl named Lily.", ["Lily went to", "Once upon a time"]
    ids = m.tokenize(text)
    bids, bmask = m.tokenize_batch(texts)
    check(np.array_equal(m(text), m(ids)), "model(text) = model(tokenize(text))")
    check(np.array_equal(m(texts), m(bids, attention_mask=bmask)), "model([texts]) = model(ids, attention_mask) of "
          "tokenize_batch")
    check(np.array_equal(m(texts, return_type="loss", loss_per_token=True),
                         m.loss(bids, attention_mask=bmask, per_token=True), equal_nan=True),
          "model([texts], return_type='loss', loss_per_token=True) = loss(..., per_token=True)")
    lg, ls = m(text, return_type="both")
    check(np.array_equal(lg, m(ids)) and ls == m.loss(ids) and m(text, return_type="loss") == m.loss(ids)
          and m(text, return_type=None) is None, "return_type 'both' / 'loss' / None")
    _, c1 = m.run_with_cache(texts, names_filter=lambda n: n.endswith("hook_z"))
    _, c2 = m.run_with_cache(bids, names=lambda n: n.endswith("hook_z"), attention_mask=bmask)
    check(list(c1) == list(c2) and all(np.array_equal(c1[k], c2[k]) for k in c1),
          "run_with_cache([texts], names_filter=) = run_with_cache(ids, names=, attention_mask=)")
    l1, c1 = m.run_with_cache(m.to_tokens(text), names_filter=["blocks.1.hook_resid_post"], remove_batch_dim=True)
    l2, c2 = m.run_with_cache(ids, names=["blocks.1.hook_resid_post"])
    check(l1.shape == (1,) + l2.shape and np.array_equal(l1[0], l2)
          and np.array_equal(c1["resid_post", 1], c2["resid_post", 1]) and c1["resid_post", 1].ndim == 2,
          "run_with_cache(remove_batch_dim=True): the cache without the batch axis, logits with it")
    check(type(m.run_with_cache(ids, names=["hook_embed"], return_cache_object=False)[1]) is dict,
          "run_with_cache(return_cache_object=False): a dict")
    steer_v = np.ones(64, np.float32)

    def steer(a, hook):
        a[hook.positions > 0] += steer_v
    check(np.array_equal(m.run_with_hooks(texts, fwd_hooks=[("blocks.2.hook_resid_post", steer)]),
                         m.run_with_hooks(bids, fwd_hooks=[("blocks.2.hook_resid_post", steer)], attention_mask=bmask)),
          "run_with_hooks([texts]) = with the ids and mask")
    g1, g2 = m.param_grads(text, names="embed.weight"), m.param_grads(ids, names=["embed.weight"])
    check(np.array_equal(g1["embed.weight"], g2["embed.weight"]), "param_grads(text) = param_grads(ids)")
    check(m.generate("Once upon", max_new_tokens=12, temperature=0) == m.generate("Once upon", 12, temperature=0)
          and m.generate("Once upon", max_new_tokens=12, do_sample=False) == m.generate("Once upon", 12, temperature=0),
          "generate(max_new_tokens=12) = generate(n=12); do_sample=False is greedy")
    check(np.array_equal(m.to_tokens(text), ids[None]) and np.array_equal(m.to_tokens(texts), bids)
          and np.array_equal(m.to_tokens(text, prepend_bos=False), m.tokenize(text, bos=False)[None])
          and np.array_equal(m.to_tokens(texts, padding_side="left"), m.tokenize_batch(texts, padding_side="left")[0]),
          "to_tokens(text) [1, T], to_tokens([texts]) = tokenize_batch's ids")
    check(m.to_str_tokens(texts) == [m.to_str_tokens(t) for t in texts], "to_str_tokens([texts]): a list per text")
    # per-call prepend_bos= / padding_side= (TransformerLens' forward keywords): as tokenizing that way first
    nob = m.tokenize(text, bos=False)
    texts2 = ["Lily went to", "Once upon a time, there was"]  # (two lengths: the padding side matters)
    lids, lmask = m.tokenize_batch(texts2, padding_side="left")
    nids, nmask = m.tokenize_batch(texts2, bos=False)
    check(nob.size == ids.size - 1 and np.array_equal(m(text, prepend_bos=False), m(nob))
          and np.array_equal(m(text, prepend_bos=True), m(ids)) and np.array_equal(
              m(texts2, padding_side="left"), m(lids, attention_mask=lmask)) and not np.array_equal(
              m(texts2, padding_side="left"), m(texts2)) and nob[0] != m.bos
          and np.array_equal(m(texts2, prepend_bos=False), m(nids, attention_mask=nmask)),
          "model(text, prepend_bos=False) = model(tokenize(bos=False)); model([texts], padding_side='left') = left-padded "
          "ids with their mask")
    check(m(text, return_type="loss", prepend_bos=False) == m.loss(nob)
          and np.array_equal(m.loss(texts2, per_token=True, padding_side="left"),
                             m.loss(lids, attention_mask=lmask, per_token=True), equal_nan=True)
          and np.array_equal(m.run_with_hooks(text, prepend_bos=False), m(nob))
          and np.array_equal(m.run_with_cache(texts2, names=["blocks.1.hook_resid_post"], padding_side="left")[1][
              "resid_post", 1], m.run_with_cache(lids, names=["blocks.1.hook_resid_post"], attention_mask=lmask)[1][
              "resid_post", 1])
          and np.array_equal(m.param_grads(text, names="embed.weight", prepend_bos=False)["embed.weight"],
                             m.param_grads(nob, names="embed.weight")["embed.weight"])
          and m.to_str_tokens(text, prepend_bos=False) == m.to_str_tokens(nob),
          "prepend_bos= / padding_side= in loss, run_with_hooks, run_with_cache, param_grads, to_str_tokens")
    # (the left-padded shorter text's real positions = that text alone)
    row = m(texts2, padding_side="left")[0]
    alone = m(texts2[0])
    check(rel_err(row[-alone.shape[0]:], alone) < 1e-5, "model([texts], padding_side='left'): the shorter text's real "
          "positions = the text alone (err %.1e)" % rel_err(row[-alone.shape[0]:], alone))
    check(m.to_string(ids) == m.decode(ids) and m.to_string(bids) == [m.decode(r) for r in bids],
          "to_string([T]) a text, to_string([B, T]) a list")
    lily = m.tokenize("Lily", bos=False)
    check(lily.size == 1 and m.to_single_token("Lily") == int(lily[0]), "to_single_token('Lily')")
    _, cache = m.run_with_cache(ids)
    st = cache.decompose_resid(apply_ln=True)
    tim = m.to_single_token("Tim")
    check(np.array_equal(cache.logit_attrs(st, "Lily", "Tim"), cache.logit_attrs(st, int(lily[0]), tim))
          and np.array_equal(cache.logit_attrs(st, ["Lily"] * ids.size), cache.logit_attrs(st, np.full(ids.size,
                                                                                                        lily[0]))),
          "logit_attrs with string tokens = with their ids")

    # a weight attribute inside a hook (where a call on the model is refused): the final norm's output @ W_U
    seen = []
    lg = m.run_with_hooks(ids, fwd_hooks=[("ln_final.hook_normalized", lambda a, h: seen.append(a @ m.W_U))])
    check(len(seen) == 1 and rel_err(seen[0], lg) < 1e-5, "model.W_U inside a hook: ln_final output @ W_U = the logits")

    # 4. persistent hooks
    base = m(ids)
    plain_gen = m.generate("Once upon", 10, temperature=0)
    hooked = m.run_with_hooks(ids, fwd_hooks=[("blocks.2.hook_resid_post", steer)])
    with m.hooks(fwd_hooks=[("blocks.2.hook_resid_post", steer)]):
        inside = m(ids)
        inside_gen = m.generate("Once upon", 10, temperature=0)
        _, ic = m.run_with_cache(ids, names=["blocks.3.hook_resid_pre"])
    check(np.array_equal(inside, hooked) and np.array_equal(m(ids), base),
          "hooks(fwd_hooks=) context: every call inside is hooked, none after")
    check(inside_gen == m.generate("Once upon", 10, temperature=0, fwd_hooks=[("blocks.2.hook_resid_post", steer)])
          and inside_gen != plain_gen, "hooks() context: generate inside = generate(fwd_hooks=)")
    check(np.array_equal(ic["resid_pre", 3], m.run_with_cache(ids, names=["blocks.3.hook_resid_pre"], fwd_hooks=[
        ("blocks.2.hook_resid_post", steer)])[1]["resid_pre", 3]), "hooks() context: run_with_cache inside")
    m.add_hook("blocks.2.hook_resid_post", steer)
    m.add_hook("blocks.0.attn.hook_z", lambda z, h: None, is_permanent=True)
    check(np.array_equal(m(ids), hooked), "add_hook: the next calls are hooked")
    m.reset_hooks()
    check(np.array_equal(m(ids), base) and len(m._persistent["fwd"]) == 1, "reset_hooks(): removed (the permanent kept)")
    m.reset_hooks(including_permanent=True)
    check(not m._persistent["fwd"], "reset_hooks(including_permanent=True): none left")

    def half(g, hook):
        return g * 0.5
    _, want = m.run_with_cache(ids, names=["hook_embed"], backward=True, bwd_hooks=[("blocks.1.hook_resid_mid", half)])
    m.add_hook("blocks.1.hook_resid_mid", half, dir="bwd")
    _, got = m.run_with_cache(ids, names=["hook_embed"], backward=True)
    check(np.array_equal(got["hook_embed_grad"], want["hook_embed_grad"]) and np.array_equal(m(ids), base),
          "add_hook(dir='bwd'): the backward of run_with_cache edited; a forward alone runs no backward")
    m.reset_hooks()

    # 8. misuse
    raises("run_with_cache(names=, names_filter=) is refused", lambda: m.run_with_cache(ids, names=["hook_embed"],
           names_filter=["hook_embed"]), TypeError, ["names_filter"])
    raises("remove_batch_dim=True on a batch of 2 is refused", lambda: m.run_with_cache(bids, remove_batch_dim=True),
           ValueError, ["remove_batch_dim", "(2,"])
    raises("generate(n, max_new_tokens=) is refused", lambda: m.generate("Once", 3, max_new_tokens=3), TypeError,
           ["max_new_tokens"])
    raises("to_single_token of two tokens is refused", lambda: m.to_single_token("Once upon"), ValueError,
           ["2 tokens"])
    raises("a text with attention_mask= is refused", lambda: m(text, attention_mask=np.ones(3, bool)), ValueError,
           ["attention_mask"])
    raises("return_type='tokens' is refused", lambda: m(ids, return_type="tokens"), ValueError, ["return_type"])
    raises("prepend_bos= with ids is refused", lambda: m(ids, prepend_bos=False), ValueError, ["prepend_bos", "ids"])
    raises("padding_side= with ids is refused", lambda: m.run_with_cache(bids, padding_side="left"), ValueError,
           ["padding_side"])
    raises("padding_side='middle' is refused", lambda: m(texts, padding_side="middle"), ValueError, ["padding_side"])
    raises("prepend_bos='no' is refused", lambda: m.loss(text, prepend_bos="no"), TypeError, ["prepend_bos"])
    raises("add_hook on an unknown point", lambda: m.add_hook("blocks.0.hook_nothing", steer), KeyError,
           ["hook_nothing"])
    raises("add_hook(dir='up')", lambda: m.add_hook("hook_embed", steer, dir="up"), ValueError, ["dir"])
    raises("add_hook(dir='bwd') on a point without a gradient", lambda: m.add_hook("blocks.0.ln1.hook_scale", half,
           dir="bwd"), ValueError, ["no gradient"])
    raises("hooks() with an entry that is not (name, fn)", lambda: m.hooks(fwd_hooks=["hook_embed"]).__enter__(),
           TypeError, ["(name, fn)"])
    check(not m._persistent["fwd"] and not m._persistent["bwd"] and np.array_equal(m(ids), base),
          "after the refused calls no hook is left attached")
    raises("cfg is read-only", lambda: setattr(m.cfg, "n_layers", 3), AttributeError, ["read-only"])
    raises("patching with a cache that lacks the points", lambda: tinylm.patching.get_act_patch_resid_pre(
        m, ids, m.run_with_cache(ids, names=["hook_embed"])[1], lambda lg: lg[-1, 0]), KeyError, ["resid_pre"])
    raises("patching ids of another length than the clean cache's", lambda: tinylm.patching.get_act_patch_resid_pre(
        m, ids[:-1], cache, lambda lg: lg[-1, 0]), ValueError, ["same shape"])
    raises("a patching metric returning an array", lambda: tinylm.patching.get_act_patch_resid_pre(
        m, ids, cache, lambda lg: lg[-1]), ValueError, ["one number"])
    raises("attribution patching of ids of two lengths", lambda: tinylm.patching.get_attr_patch_resid_pre(
        m, ids, ids[:-1], (-1, 1, 2)), ValueError, ["shape"])
    m.close()
    raises("model.W_E after close()", lambda: m.W_E, tinylm.TinylmError, ["closed"])
    print("%d passed, %d failed" % tuple(counts))
    return 1 if counts[1] else 0


if __name__ == "__main__":
    sys.exit(main())
