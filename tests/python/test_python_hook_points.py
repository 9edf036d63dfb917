#!/usr/bin/python3
"""test_python_hook_points.py — the hook points a pass makes only when watched (src/model/hook_points.c):
hook_attn_in, hook_q_input / hook_k_input / hook_v_input, attn.hook_result, hook_mlp_in, against the
float64 PyTorch reference (tests/reference/tinylm_ref.py run_hooked, which has them as TransformerLens'
use_attn_in / use_split_qkv_input / use_attn_result / use_hook_mlp_in, one copy of the stream each):

1. values and gradients (run_with_cache(backward=True)) at every such point of every layer;
2. a replacement at each changes the logits as the same replacement in the reference (and an
   in-place no-op leaves them bit-identical);
3. a backward hook that changes the gradient at hook_result (one head's) or hook_attn_in /
   hook_mlp_in changes the parameters' gradients as a tensor hook does in the reference;

on several norm placements and attention layouts (GQA, biases, Post-Norm, sandwich, DeepNorm, K = V,
shared keys and values), and the names TransformerLens gives them;

4. the cache the pass writes itself (tlm_set_capture): run_with_cache's arrays are views of one buffer
   the cache allocated, written by the engine (no Python callback ran, each array written once; the
   attention maps by the attention kernel itself, the backward reading them there) and
   equal bit for bit to what a hook function sees at the point (hook_scale as the scale, the masked
   scores -inf, a padded batch's pads); a filtered cache pays only for what it keeps: no attention maps
   without a scores or pattern point, no on-demand point (nor its memory) unless named, and a cache of
   every point leaves the on-demand ones out; on 2 threads a batch that splits across them (each
   thread the whole pass over its sequences, src/model/split.c) is split for a cache too, each thread
   writing its sequences' rows, and the arrays are still bit for bit what hook functions see (which
   keep the pass whole) — also on Gemma 2's soft-cap and window, MLA and Gemma 4's layouts; a cache
   with a hook function, gradients or an on-demand point keeps it whole, and so does a mixture of
   experts (its experts' products batch the rows of every sequence: split, they would round
   otherwise than the whole pass);
5. hook_result on Q8_0 weights (a GGUF file: no float32 W_O, each head through the quantized product):
   the heads' sum + b_O = hook_attn_out within Q8_0's rounding, and a replacement changes the logits;
6. the split inputs per head (set_use_split_qkv_input(True), TransformerLens' use_split_qkv_input):
   hook_q_input [B, T, H, d], hook_k_input / hook_v_input [B, T, KV, d], against the reference with
   the same switch (a copy per head, ln1 on each): values and gradients (their sum over heads = the
   single copy's gradient), an edit of one head's copy changes that head's q / k / v alone (the
   others bit for bit) and the logits as in the reference, a backward hook on one head's gradient
   changes the parameters' gradients as a tensor hook does; pre-norm, post-norm, sandwich, DeepNorm,
   GQA, QK-norm, biases, K = V, shared keys and values; and with the switch on, a pass that does not
   ask for them makes nothing (and on Q8_0 weights an edited head goes through the quantized product).

usage: test_python_hook_points.py --lib build/libtinylm.so --tinylm build/tinylm --work DIR"""
import argparse
import os
import shutil
import subprocess
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

VARIANTS = ["llama_like", "gpt2_like", "norm_layernorm_post", "gemma2_like", "deepnorm_layernorm_2",
            "k_eq_v_no_qk_norm_bias", "shared_kv_pre", "norm_dyt_none"]
NEW = ("hook_attn_in", "hook_q_input", "hook_k_input", "hook_v_input", "attn.hook_result", "hook_mlp_in")
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


def close(label, c, r, tol=1e-4):
    e = rel_err(c, r)
    return check(e < tol, label, "rel err %.2e (shapes %s, %s)" % (e, np.shape(c), np.shape(r)))


def check_variant(tinylm, name, cfg, opts, work):
    c = tinylm_ref.resolve_config(cfg)
    P = tinylm_ref.random_params(cfg, seed=3, std=opts["std"], embed_std=2 * opts["std"])
    P = {k: v.astype(np.float32).astype(np.float64) for k, v in P.items()}  # (as the F32 file stores them)
    d = os.path.join(work, name)
    tinylm_ref.save(d, cfg, P)
    ref = tinylm_ref.Model(cfg, P)
    model = tinylm.load(d)
    L, H, dm = c["num_hidden_layers"], c["num_attention_heads"], c["hidden_size"]
    rng = np.random.default_rng(5)
    ids = rng.integers(0, c["vocab_size"], (2, 9)).astype(np.int32)
    names = [n for n in model.hook_names if n.endswith(NEW)]
    kinds = {n.split(".", 2)[2] for n in names}
    # 1. values and gradients
    lg, cache = model.run_with_cache(ids, names=names, backward=True)
    check(kinds >= {"hook_attn_in", "hook_q_input", "hook_k_input", "attn.hook_result", "hook_mlp_in"}
          and cache["blocks.0.attn.hook_result"].shape == ids.shape + (H, dm)
          and cache["blocks.0.hook_attn_in"].shape == ids.shape + (dm,),
          "%s: the points exist with TransformerLens' names, hook_result [B, T, H, d]" % name, sorted(kinds))
    rl, rc = ref.run_hooked(ids, names=set(names), backward="loss")
    close("%s: logits with them cached" % name, lg, rl, 1e-5)
    bad = [(k, "%.1e" % rel_err(cache[k], rc[k])) for k in names if rel_err(cache[k], rc[k]) >= 2e-5]
    check(not bad, "%s: %d values = the reference's" % (name, len(names)), bad)
    grads = [k + "_grad" for k in names if k + "_grad" in rc]
    bad = [(k, "%.1e" % rel_err(cache.get(k), rc[k])) for k in grads if k not in cache or rel_err(cache[k], rc[k]) >= 1e-4]
    check(not bad and len(grads) == len(names), "%s: %d gradients = the reference's" % (name, len(grads)), bad)

    # 2. a replacement at each kind, in layer L - 1 (and the attention input of layer 0)
    for n in [k for k in names if k.startswith("blocks.%d." % (L - 1))] + ["blocks.0.hook_attn_in"]:
        shape = cache[n].shape[2:]
        v = rng.standard_normal(shape).astype(np.float32) * 0.5
        if n.endswith("hook_result"):
            v[1:] = 0.0  # (head 0 alone)
        got = model.run_with_hooks(ids, fwd_hooks=[(n, lambda a, hook, v=v: a + v)])
        want = ref.run_hooked(ids, replace={n: lambda t, v=v: t + torch.as_tensor(v, dtype=t.dtype)})[0]
        changed = rel_err(got, lg) > 1e-3
        close("%s: replacing %s changes the logits as in the reference%s" % (name, n, "" if changed else
              " (NOT changed)"), got, want, 1e-5)
        check(changed, "%s: the replacement at %s changed the logits" % (name, n))

        def noop(a, hook):
            a *= 1.0
        check(np.array_equal(model.run_with_hooks(ids, fwd_hooks=[(n, noop)]), model(ids)),
              "%s: an in-place no-op at %s leaves the logits bit-identical" % (name, n))

    # 3. backward hooks that change the gradient
    pn = ["layers.0.attn.o_proj.weight", "layers.0.attn.q_proj.weight", "embed.weight"]
    tg = np.full(ids.shape, -1, np.int64)
    tg[:, :-1] = ids[:, 1:]
    for n, edit in (("blocks.0.attn.hook_result", "head0"), ("blocks.0.hook_attn_in", "half"),
                    ("blocks.0.hook_mlp_in", "half"), ("blocks.0.hook_k_input", "half")):
        if n not in model.hook_points:
            continue
        mask = np.ones(cache[n].shape[2:], np.float32)
        if edit == "head0":
            mask[0] = 0.0
        else:
            mask *= 0.5

        def bwd(g, hook, mask=mask):
            return g * mask
        got = model.param_grads(ids, names=pn, bwd_hooks=[(n, bwd)])

        def rep(t, mask=mask):
            t.register_hook(lambda g: g * torch.as_tensor(mask, dtype=g.dtype))
            return t
        ref.run_hooked(ids, replace={n: rep}, backward="loss")
        bad = [(p, "%.1e" % rel_err(got[p], ref.params[p].grad.numpy())) for p in pn
               if rel_err(got[p], ref.params[p].grad.numpy()) >= 1e-4]
        check(not bad, "%s: a backward hook scaling the gradient at %s (%s) = the reference's tensor hook"
              % (name, n, edit), bad)
    model.close()


SPLIT_VARIANTS = ["llama_like", "gpt2_like", "norm_layernorm_post", "gemma2_like", "qwen3_like",
                  "deepnorm_layernorm_2", "k_eq_v_no_qk_norm_bias", "shared_kv_pre"]
SPLIT = ("hook_q_input", "hook_k_input", "hook_v_input")


def check_split_heads(tinylm, name, cfg, opts, work):
    c = tinylm_ref.resolve_config(cfg)
    P = tinylm_ref.random_params(cfg, seed=3, std=opts["std"], embed_std=2 * opts["std"])
    P = {k: v.astype(np.float32).astype(np.float64) for k, v in P.items()}
    d = os.path.join(work, "split_" + name)
    tinylm_ref.save(d, cfg, P)
    ref = tinylm_ref.Model(cfg, P)
    ref.split_qkv_heads = True
    model = tinylm.load(d)
    L, H, dm = c["num_hidden_layers"], c["num_attention_heads"], c["hidden_size"]
    rng = np.random.default_rng(7)
    ids = rng.integers(0, c["vocab_size"], (2, 9)).astype(np.int32)
    names = [n for n in model.hook_names if n.endswith(SPLIT)]
    _, single = model.run_with_cache(ids, names=names, backward=True)
    plain = model(ids)
    model.cfg.use_split_qkv_input = True  # (TransformerLens' spelling; set_use_split_qkv_input(True) the same)
    lg, cache = model.run_with_cache(ids, names=names, backward=True)
    KV = {n: cache[n].shape[2] for n in names}
    want_kv = {n: (H if n.endswith("q_input") else tinylm_ref.layer_shape(c, int(n.split(".")[1]))[1]) for n in names}
    check(model.cfg.use_split_qkv_input and KV == want_kv and all(cache[n].shape == ids.shape + (KV[n], dm) for n in names),
          "%s split per head: hook_q_input [B, T, H, d], k / v [B, T, KV, d] (KV %s)" % (name, sorted(set(KV.values()))))
    check(np.array_equal(lg, plain), "%s split per head: the logits with every head's copy cached = a plain pass's, "
          "bit for bit" % name)
    rl, rc = ref.run_hooked(ids, names=set(names), backward="loss")
    close("%s split per head: logits = the reference's" % name, lg, rl, 1e-5)
    bad = [(k, "%.1e" % rel_err(cache[k], rc[k])) for k in names if rel_err(cache[k], rc[k]) >= 2e-5]
    check(not bad, "%s split per head: %d values = the reference's" % (name, len(names)), bad)
    bad = [(k, "%.1e" % rel_err(cache[k + "_grad"], rc[k + "_grad"])) for k in names
           if rel_err(cache[k + "_grad"], rc[k + "_grad"]) >= 1e-4]
    check(not bad, "%s split per head: %d gradients (one per head) = the reference's" % (name, len(names)), bad)
    bad = [k for k in names if rel_err(cache[k + "_grad"].sum(2), single[k + "_grad"]) >= 1e-5]
    check(not bad, "%s split per head: each gradient summed over heads = the single copy's" % name, bad)

    # one head's copy edited: that head's q / k / v alone changes, the logits as in the reference
    qkv = {"hook_q_input": "attn.hook_q", "hook_k_input": "attn.hook_k", "hook_v_input": "attn.hook_v"}
    for n in ["blocks.%d.%s" % (L - 1, k) for k in SPLIT] + ["blocks.0.hook_k_input"]:
        if n not in model.hook_points:
            continue
        layer, kind = n.split(".")[1], n.split(".")[2]
        h = KV[n] - 1
        v = rng.standard_normal(dm).astype(np.float32) * 0.5

        def edit(a, hook, v=v, h=h):
            a[..., h, :] += v
        outs = ["blocks.%s.%s" % (layer, qkv[kind])]
        if kind == "hook_k_input" and "blocks.%s.attn.hook_v" % layer in model.hook_points and \
                "blocks.%s.hook_v_input" % layer not in model.hook_points:
            outs.append("blocks.%s.attn.hook_v" % layer)  # (K = V: v is the k projection)
        _, before = model.run_with_cache(ids, names=outs)
        got, after = model.run_with_cache(ids, names=outs, fwd_hooks=[(n, edit)])
        others = all(np.array_equal(np.delete(after[o], h, axis=2), np.delete(before[o], h, axis=2)) for o in outs)
        moved = all(rel_err(after[o][..., h, :], before[o][..., h, :]) > 1e-3 for o in outs)
        check(others and moved, "%s split per head: editing head %d of %s changes that head of %s alone"
              % (name, h, n, "/".join(o.split(".")[-1] for o in outs)))

        def rep(t, v=v, h=h):
            t = t.clone()
            t[..., h, :] += torch.as_tensor(v, dtype=t.dtype)
            return t
        want = ref.run_hooked(ids, replace={n: rep})[0]
        close("%s split per head: that edit changes the logits as in the reference" % name, got, want, 1e-5)

        def noop(a, hook):
            a *= 1.0
        check(np.array_equal(model.run_with_hooks(ids, fwd_hooks=[(n, noop)]), plain),
              "%s split per head: an in-place no-op at %s leaves the logits bit-identical" % (name, n))

    # a backward hook on one head's gradient
    pn = ["layers.0.attn.q_proj.weight", "layers.0.attn.k_proj.weight", "embed.weight"]
    pn = [p for p in pn if p in ref.params]
    if c["norm_placement"] in ("pre", "sandwich"):
        pn.append("layers.0.attn_norm.weight")
    for n in ("blocks.0.hook_q_input", "blocks.0.hook_k_input"):
        if n not in model.hook_points:
            continue
        mask = np.ones((KV[n], dm), np.float32)
        mask[0] = 0.0
        mask[-1] = 3.0
        got = model.param_grads(ids, names=pn, bwd_hooks=[(n, lambda g, hook, mask=mask: g * mask)])

        def rep(t, mask=mask):
            t.register_hook(lambda g: g * torch.as_tensor(mask, dtype=g.dtype))
            return t
        ref.run_hooked(ids, replace={n: rep}, backward="loss")
        bad = [(p, "%.1e" % rel_err(got[p], ref.params[p].grad.numpy())) for p in pn
               if rel_err(got[p], ref.params[p].grad.numpy()) >= 1e-4]
        check(not bad, "%s split per head: a backward hook zeroing head 0's / tripling the last head's gradient at "
              "%s = the reference's tensor hook" % (name, n), bad)
    model.set_use_split_qkv_input(False)
    _, back = model.run_with_cache(ids, names=names[:1])
    check(back[names[0]].shape == ids.shape + (dm,), "%s: set_use_split_qkv_input(False): one copy again" % name)
    model.close()


def split_heads_misc(tinylm, cli, work):
    ckpt, tok = os.path.join(ROOT, "data", "stories260K.bin"), os.path.join(ROOT, "data", "tok512.bin")
    m = tinylm.load(ckpt, tokenizer=tok)
    ids = np.random.default_rng(8).integers(0, m.vocab_size, (3, 12)).astype(np.int32)
    plain = m(ids)
    m.set_use_split_qkv_input(True)
    resid = [n for n in m.hook_names if ".hook_resid_" in n]
    lg, _ = m.run_with_cache(ids, names=resid + ["blocks.1.attn.hook_pattern"])
    check(np.array_equal(lg, plain) and m._pass_stats["side_floats"] == 0,
          "split per head: a cache without the split inputs makes no copy (on-demand memory 0)", m._pass_stats)
    # the on-demand points' memory stays with the model from one call to the next: a loop of per-head
    # caches does not have the kernel clear fresh pages for it each call (the cache's own buffer is pooled)
    import resource
    qin = [n for n in m.hook_names if n.endswith("hook_q_input")]
    big = np.random.default_rng(10).integers(0, m.vocab_size, (8, 128)).astype(np.int32)
    for _ in range(2):
        m.run_with_cache(big, names=qin)
    pages = m._pass_stats["side_floats"] * 4 // 4096
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(3):
        m.run_with_cache(big, names=qin)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
    check(pages > 1000 and faults < pages // 2, "split per head: three more caches fault %d pages in, their on-demand "
          "memory is %d pages (kept, not allocated again)" % (faults, pages))
    for bad, err in (("yes", TypeError), (1, TypeError)):
        try:
            m.set_use_split_qkv_input(bad)
            check(False, "set_use_split_qkv_input(%r) refused" % (bad,))
        except err:
            check(True, "set_use_split_qkv_input(%r) refused" % (bad,))
    caught = []

    def inside(a, hook):
        try:
            m.set_use_split_qkv_input(False)
        except tinylm.TinylmError as e:
            caught.append(str(e))
    m.run_with_hooks(ids, fwd_hooks=[("blocks.0.hook_resid_pre", inside)])
    check(len(caught) == 1 and m.cfg.use_split_qkv_input, "split per head: switching inside a hook is refused", caught)
    try:
        m.cfg.n_heads = 3
        check(False, "cfg: other fields stay read-only")
    except AttributeError:
        check(True, "cfg: other fields stay read-only")
    m.close()
    if not cli:
        return
    q8 = os.path.join(work, "s.q8_0.gguf")
    if not os.path.exists(q8):
        return
    m = tinylm.load(q8)
    m.set_use_split_qkv_input(True)
    lg0 = m(ids)
    n = "blocks.2.hook_q_input"
    _, c0 = m.run_with_cache(ids, names=["blocks.2.attn.hook_q"])

    shift = np.random.default_rng(9).standard_normal(m.cfg.d_model).astype(np.float32)

    def edit(a, hook):
        a[..., 3, :] += shift  # (not a scale: the RMSNorm would undo it)
    lg, c1 = m.run_with_cache(ids, names=["blocks.2.attn.hook_q"], fwd_hooks=[(n, edit)])
    q0, q1 = c0["blocks.2.attn.hook_q"], c1["blocks.2.attn.hook_q"]
    check(np.array_equal(np.delete(q0, 3, axis=2), np.delete(q1, 3, axis=2)) and rel_err(q1[..., 3, :], q0[..., 3, :]) > 1e-3
          and rel_err(lg, lg0) > 1e-4, "Q8_0 split per head: editing head 3's copy changes its q alone (the quantized "
          "product) and the logits")
    m.close()


def cache_writes(tinylm):
    ckpt, tok = os.path.join(ROOT, "data", "stories260K.bin"), os.path.join(ROOT, "data", "tok512.bin")
    m = tinylm.load(ckpt, tokenizer=tok)
    ids = np.random.default_rng(2).integers(0, m.vocab_size, (3, 12)).astype(np.int32)
    resid = [n for n in m.hook_names if n == "hook_embed" or ".hook_resid_" in n]
    _, c = m.run_with_cache(ids, names=resid)
    st = m._pass_stats
    owner = {id(v.base) for v in c.values()}
    spans = sorted((v.ctypes.data, v.ctypes.data + v.nbytes) for v in c.values())
    base = next(iter(c.values())).base
    check(len(owner) == 1 and isinstance(base, np.ndarray) and not any(v.flags.owndata for v in c.values())
          and all(a[1] <= b[0] for a, b in zip(spans, spans[1:])),
          "cache: the arrays are views of one buffer the cache owns, none overlapping (no copy per array)")
    check(st["written"] == len(resid) and st["callbacks"] == 0,
          "cache: the pass wrote each of the %d arrays itself, no Python callback ran" % len(resid), st)
    check(st["maps"] == 0 and st["side_floats"] == 0,
          "cache: the residual-only cache kept no attention maps and made no on-demand point", st)
    # a kept cache is never written by the next; a dropped one's buffer serves the next cache
    snap = {k: v.copy() for k, v in c.items()}
    _, k2 = m.run_with_cache(ids[::-1].copy(), names=resid)
    check(all(np.array_equal(c[k], snap[k]) for k in c) and not np.shares_memory(base, next(iter(k2.values())).base)
          and not all(np.array_equal(c[k], k2[k]) for k in c),
          "cache: a second cache leaves a kept one as it was (its own buffer)")
    # (the buffer is private memory: a forked child writing a cache array leaves the parent's as it was)
    before = k2["hook_embed"].copy()
    pid = os.fork()
    if pid == 0:
        k2["hook_embed"][...] = 123.0
        os._exit(0)
    os.waitpid(pid, 0)
    check(np.array_equal(k2["hook_embed"], before), "cache: a forked child's write to a cache array stays its own")
    addr = next(iter(k2.values())).base.ctypes.data
    del k2
    _, k3 = m.run_with_cache(ids, names=resid)
    check(next(iter(k3.values())).base.ctypes.data == addr and all(np.array_equal(k3[k], snap[k]) for k in c),
          "cache: the buffer of a dropped cache is reused by the next (same values)")
    del k3
    _, c2 = m.run_with_cache(ids, names=["blocks.1.attn.hook_pattern"])
    check(m._pass_stats["maps"] == 1, "cache: asking for a pattern keeps the maps", m._pass_stats)
    # the attention kernel writes a captured map straight into the cache's array: the capture copies none
    maps = ["blocks.1.attn.hook_pattern", "blocks.1.attn.hook_attn_scores"]
    m.run_with_cache(ids, names=maps + resid)
    check(m._pass_stats["written"] == len(resid) and m._pass_stats["maps"] == 1,
          "cache: the kernel writes the captured scores and pattern into the cache's arrays themselves (no copy)",
          m._pass_stats)

    # ... and a hook rewriting a captured pattern rewrites it there: z follows it, the backward reads it
    def blank(a, hook):
        a[:, 2] = 0.0
        a[:, 2, :, 0] = 1.0  # (head 2 attends to the first token alone)
    pn = "blocks.1.attn.hook_pattern"
    gn = ["blocks.0.hook_resid_post", "blocks.1.attn.hook_z"]
    lg_c, cc = m.run_with_cache(ids, names=[pn] + gn, fwd_hooks=[(pn, blank)], backward=True)
    seen_g = {}

    def keep_grad(g, hook):
        seen_g[hook.name] = g.copy()
    lg_h, _ = m.run_with_cache(ids, names=[], fwd_hooks=[(pn, blank)], bwd_hooks=[(n, keep_grad) for n in gn],
                               backward=True)
    want = np.zeros_like(cc[pn][:, 2])
    want[..., 0] = 1.0
    check(np.array_equal(lg_c, lg_h) and np.array_equal(cc[pn][:, 2], want)
          and all(np.array_equal(cc[n + "_grad"], seen_g[n]) for n in gn),
          "cache: a hook rewriting a captured pattern: the cache holds the rewrite, logits and gradients as "
          "without the capture, bit for bit")
    _, c3 = m.run_with_cache(ids)
    check(not any(n.endswith(NEW) for n in c3) and m._pass_stats["side_floats"] == 0,
          "cache: a cache of every point leaves the on-demand points out (nothing made)", m._pass_stats)
    m.run_with_cache(ids, names=["blocks.2.attn.hook_result"])
    check(m._pass_stats["side_floats"] > 0, "cache: naming hook_result makes it", m._pass_stats)
    # the arrays = what a hook function sees there (every point, gradients too; a padded batch)
    bids, bmask = m.tokenize_batch(["Lily went to the park", "Once upon a time"], padding_side="left")
    names = list(m.hook_names)
    for label, x, mask in (("one sequence", ids[0], None), ("a batch", ids, None), ("a left-padded batch", bids, bmask)):
        _, cache = m.run_with_cache(x, names=names, backward=True, attention_mask=mask)
        seen = {}

        def keep(a, hook):
            seen[hook.name] = a.copy()

        def keep_g(g, hook):
            seen[hook.name + "_grad"] = g.copy()
        nograd = [n for n in names if not m.hook_points[n].flags & 4]
        lg, _ = m.run_with_cache(x, names=[], backward=True, attention_mask=mask, fwd_hooks=[(n, keep) for n in names],
                                 bwd_hooks=[(n, keep_g) for n in nograd])
        if mask is not None:
            for k, v in seen.items():
                m._zero_pads(k, v, np.asarray(mask), False)
        bad = [k for k in seen if not np.array_equal(cache[k], seen[k])]
        check(not bad and len(seen) == len(cache),
              "cache (%s): %d arrays = what hook functions see, bit for bit" % (label, len(cache)), bad[:5])
    m.close()


def cache_split(tinylm, work):
    """a cache on 2 threads of a batch that splits: each part writes its rows (the capture's count of
    copies doubles), the arrays = what hook functions see, bit for bit"""
    ckpt = os.path.join(ROOT, "data", "stories260K.bin")
    m = tinylm.load(ckpt)
    ids = np.random.default_rng(5).integers(0, m.vocab_size, (8, 24)).astype(np.int32)
    tinylm.set_threads(2)
    try:
        lg_whole, c_whole = m.run_with_cache(ids, fwd_hooks=[("hook_embed", lambda a, h: None)])
        whole = m._pass_stats["written"]
        lg, cache = m.run_with_cache(ids)
        split = m._pass_stats["written"]
        seen = {}

        def keep(a, hook):
            seen[hook.name] = a.copy()
        lg_h = m.run_with_hooks(ids, fwd_hooks=[(n, keep) for n in cache])
        _, c_grad = m.run_with_cache(ids, names=["blocks.1.hook_resid_mid"], backward=True)
        grad_copies = m._pass_stats["written"]
        _, c_demand = m.run_with_cache(ids, names=["hook_embed", "blocks.1.hook_mlp_in"])
        demand_copies = m._pass_stats["written"]
    finally:
        tinylm.set_threads(1)
    check(whole > 0 and split == 2 * whole,
          "cache split (2 threads, [8, 24]): each of the 2 parts copied its rows (%d copies; %d with a hook function, "
          "the pass whole)" % (split, whole))
    bad = [k for k in cache if not np.array_equal(cache[k], seen[k]) or not np.array_equal(cache[k], c_whole[k])]
    check(not bad and len(seen) == len(cache) and np.array_equal(lg, lg_h) and np.array_equal(lg, lg_whole),
          "cache split: %d arrays and the logits = what hook functions see and the whole pass's cache, bit for bit"
          % len(cache), bad[:5])
    check(grad_copies == 2 and demand_copies == 2,
          "cache split: a cache with gradients or an on-demand point keeps the pass whole (one copy each)",
          (grad_copies, demand_copies))
    m.close()
    cases = {n: (c, o) for n, c, o in all_cases()}
    for name, splits in (("gemma2_like", True), ("mla_q_lora", True), ("gemma4_like", True),
                         ("moe_mixtral_like_aux", False)):
        cfg, opts = cases[name]
        d = os.path.join(work, "split_" + name)
        tinylm_ref.save(d, cfg, tinylm_ref.random_params(cfg, seed=3, std=opts["std"], embed_std=2 * opts["std"]))
        m = tinylm.load(d)
        ids = np.random.default_rng(6).integers(0, tinylm_ref.resolve_config(cfg)["vocab_size"], (4, 9)).astype(np.int32)
        tinylm.set_threads(2)
        try:
            m.run_with_cache(ids, fwd_hooks=[("hook_embed", lambda a, h: None)])
            whole = m._pass_stats["written"]
            lg, cache = m.run_with_cache(ids)
            copies = m._pass_stats["written"]
            seen.clear()
            lg_h = m.run_with_hooks(ids, fwd_hooks=[(n, keep) for n in cache])
        finally:
            tinylm.set_threads(1)
        bad = [k for k in cache if not np.array_equal(cache[k], seen[k])]
        check(copies == (2 if splits else 1) * whole and not bad and np.array_equal(lg, lg_h),
              "cache split, %s [4, 9]: %s, %d arrays and the logits bit for bit what hook functions see"
              % (name, "split" if splits else "kept whole (a mixture of experts)", len(cache)), (copies, whole, bad[:3]))
        m.close()


def quantized_result(tinylm, cli, work):
    ckpt, tok = os.path.join(ROOT, "data", "stories260K.bin"), os.path.join(ROOT, "data", "tok512.bin")
    q8 = os.path.join(work, "s.q8_0.gguf")
    p = subprocess.run([cli, "export", "--model", ckpt, "--tokenizer", tok, "--format", "gguf", "--type", "q8_0",
                        "--out", q8], capture_output=True, timeout=300)
    if not check(p.returncode == 0, "export stories260K as Q8_0", p.stderr[-300:]):
        return
    m = tinylm.load(q8)
    ids = np.random.default_rng(4).integers(0, m.vocab_size, (2, 10)).astype(np.int32)
    lg, c = m.run_with_cache(ids, names=["blocks.1.attn.hook_result", "blocks.1.hook_attn_out"])
    close("Q8_0: hook_result summed over heads = hook_attn_out (no bias), within Q8_0's rounding",
          c["blocks.1.attn.hook_result"].sum(-2), c["blocks.1.hook_attn_out"], 2e-2)

    def cut(a, hook):
        a[..., 0, :] = 0.0
    cut_lg = m.run_with_hooks(ids, fwd_hooks=[("blocks.1.attn.hook_result", cut)])
    check(rel_err(cut_lg, lg) > 1e-3, "Q8_0: zeroing head 0's result changes the logits")
    m.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--tinylm", help="the CLI (exports the Q8_0 file); without it that part is skipped")
    args = ap.parse_args()
    os.environ["TINYLM_LIB"] = os.path.abspath(args.lib)
    import tinylm
    tinylm.set_threads(1)
    torch.set_num_threads(1)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    cases = {n: (c, o) for n, c, o in all_cases()}
    for name in VARIANTS:
        check_variant(tinylm, name, cases[name][0], cases[name][1], args.work)
    for name in SPLIT_VARIANTS:
        check_split_heads(tinylm, name, cases[name][0], cases[name][1], args.work)
    cache_writes(tinylm)
    cache_split(tinylm, args.work)
    if args.tinylm:
        quantized_result(tinylm, args.tinylm, args.work)
    split_heads_misc(tinylm, args.tinylm, args.work)
    print("%d passed, %d failed" % tuple(counts))
    return 1 if counts[1] else 0


if __name__ == "__main__":
    sys.exit(main())
