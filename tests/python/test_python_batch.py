#!/usr/bin/python3
"""test_python_batch.py — padded batches and backward hooks of the Python package, against the
float64 PyTorch reference (tests/reference/tinylm_ref.py) run on each prompt alone.

    test_python_batch.py --lib build/libtinylm.so --work DIR [--only v1,v2]

1. Padding (attention_mask): on architecture variants of the API test (RoPE with pre / post /
   sandwich norms, GQA, soft-caps, sliding windows, learned positions), three prompts of
   different lengths as a left-padded and as a right-padded batch: at each row's real positions
   the logits, every cached activation (the attention pattern and scores over the real keys), and
   the gradients at every hook point of a metric (the log-probability of a token at each row's
   last real position, summed over the rows) equal the reference's for the prompt alone; the pads
   are zero in the cache; the masked loss is the mean of the prompts' token losses, and its
   parameter gradients equal the reference's autograd of that mean (positions, RoPE and learned,
   counted from each row's first real token).
2. Backward hooks (bwd_hooks): a hook that edits the gradient at a point (zeroing resid_mid of
   layer 1, halving attn_out of layer 0, zeroing one head of hook_z, doubling resid_pre of layer 1)
   changes every gradient upstream and the parameters' as the reference does with
   tensor.register_hook at the same point; run_with_hooks(bwd_hooks=) and param_grads(bwd_hooks=)
   agree with run_with_cache's; misuse raises.
Prints "N passed, N failed"; exits 1 on any failure.
"""
import argparse
import base64
import os
import shutil
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
sys.path.insert(0, os.path.join(ROOT, "tests", "parity"))
sys.path.insert(0, os.path.join(ROOT, "tests", "probes"))
sys.path.insert(0, os.path.join(ROOT, "python"))
import tinylm_ref  # noqa: E402
from cases import all_cases  # noqa: E402
import test_probes  # noqa: E402

check = test_probes.check
TOL_FWD, TOL_GRAD = 2e-4, 2e-3

# every variant the API tests use (test_python_api.VARIANTS: the norms and placements, GQA / MQA,
# QK-Norm, soft-caps, sliding windows, learned positions, FFN types, no residual, latent attention)
API_VARIANTS = ["norm_rmsnorm_pre", "norm_layernorm_post", "norm_rmsnorm_sandwich", "norm_rmsnorm_1p_output",
                "norm_layernorm_none", "layernorm_nobias_sandwich", "gqa_kv2", "mqa_kv1", "qk_norm_head_rmsnorm",
                "qk_norm_full_rmsnorm_kv2", "qk_norm_full_learned_pos", "both_softcaps", "sliding_mixed_layer_types",
                "ffn_geglu", "ffn_gelu_mlp_bias", "residual_false_pre", "post_final_norm_true", "final_norm_false",
                "mla_yarn"]
PAD_VARIANTS = API_VARIANTS
# batched generation: RoPE, GQA, sliding windows, soft-caps, learned positions
GEN_VARIANTS = ["norm_rmsnorm_pre", "gqa_kv2", "sliding_mixed_layer_types", "both_softcaps", "qk_norm_full_learned_pos"]
# (not residual_false_pre: without the residual add, resid_mid and attn_out are one buffer in the engine,
# so an edit of attn_out's gradient also shows in the gradient reported at resid_mid, which PyTorch's
# register_hook reports before the edit; docs/python.md, "Backward hooks")
BWD_VARIANTS = [v for v in API_VARIANTS if v != "residual_false_pre"]


def rel_err(c, r):
    c, r = np.asarray(c, np.float64), np.asarray(r, np.float64)
    if c.shape != r.shape:
        return float("inf")
    fin = np.isfinite(r)
    if not np.array_equal(fin, np.isfinite(c)):
        return float("inf")
    c, r = c[fin], r[fin]
    scale = float(np.abs(r).max()) if r.size else 0.0
    d = float(np.abs(c - r).max()) if r.size else 0.0
    return d / scale if scale > 0 else d


def real_part(name, arr, b, real):
    """row b of a batched cache entry at its real positions (the pattern / scores: real queries x keys)"""
    a = arr[b]
    if name.endswith(("hook_pattern", "hook_attn_scores")) or name[:-5].endswith(("hook_pattern",
                                                                                    "hook_attn_scores")):
        return a[:, real][:, :, real]
    return a[real]


def pad_checks(name, model, ref, rng, V):
    lens = [7, 4, 10]
    prompts = [rng.integers(1, V, n).astype(np.int32) for n in lens]
    toks = [int(rng.integers(V)) for _ in lens]
    T = max(lens)
    # the reference on each prompt alone (float64): cache and metric gradients, logits
    ref_runs = []
    for p, tok in zip(prompts, toks):
        lg, rc = ref.run_hooked(np.array([p]), backward=lambda l, tok=tok: torch.log_softmax(l[0, -1], -1)[tok])
        ref_runs.append((lg[0], rc))
    for side in ("left", "right"):
        ids = np.zeros((3, T), np.int32)
        mask = np.zeros((3, T), bool)
        for b, p in enumerate(prompts):
            sl = slice(T - len(p), T) if side == "left" else slice(0, len(p))
            ids[b, sl], mask[b, sl] = p, True
        last = [int(np.flatnonzero(mask[b])[-1]) for b in range(3)]

        def metric(t):  # (called on NumPy logits first, then on a torch tensor to differentiate it)
            t = torch.as_tensor(t)
            return sum(torch.log_softmax(t[b, last[b]], -1)[toks[b]] for b in range(3))
        lg = model(ids, attention_mask=mask)
        worst = max(rel_err(lg[b][mask[b]], ref_runs[b][0]) for b in range(3))
        check(worst < TOL_FWD, "%s %s-padded: logits at real positions = each prompt alone (reference)" % (name, side),
              "%.2e" % worst)
        _, cache = model.run_with_cache(ids, attention_mask=mask, backward=True, metric=metric)
        bad, n = [], 0
        for k, v in cache.items():
            for b in range(3):
                rc = ref_runs[b][1]
                if k not in rc:
                    continue
                n += 1
                e = rel_err(real_part(k, v, b, mask[b]), rc[k][0])
                if e > (TOL_GRAD if k.endswith("_grad") else TOL_FWD):
                    bad.append("%s row %d: %.2e" % (k, b, e))
        grads = sum(1 for k in cache if k.endswith("_grad"))
        check(not bad and n > 30 and grads > 10, "%s %s-padded: %d cached activations and metric gradients at "
              "real positions = each prompt alone (reference)" % (name, side, n), "; ".join(bad[:4]))
        # the cache's views of a padded row show its real positions only: the prompt alone's view
        _, alone = model.run_with_cache(prompts[0], names=lambda n: "pattern" in n)
        va, vb = alone.view_attention().data, cache.view_attention(batch=0).data

        def weights(v):
            return np.concatenate([np.frombuffer(base64.b64decode(h), "<u2").astype(int)
                                   for h in v["attention"]["heads"]])
        check(va["tokens"] == vb["tokens"] and np.abs(weights(va) - weights(vb)).max() <= 2,
              "%s %s-padded: view_attention of row 0 = the prompt alone's view (its tokens, weights to 16 bits)"
              % (name, side))
        pads = [float(np.abs(v[b][~mask[b]]).max()) for k, v in cache.items() if "pattern" not in k and
                "scores" not in k and "hook_scale" not in k for b in range(3) if (~mask[b]).any()]
        check(max(pads) == 0.0, "%s %s-padded: the cache holds zeros at pads" % (name, side))
        # the masked loss = the mean of the prompts' token losses; its parameter gradients = the
        # reference's autograd of that mean
        n_tok = sum(len(p) - 1 for p in prompts)
        ref_sum = 0.0
        for t in ref.params.values():
            t.grad = None
        for p in prompts:
            tg = np.full(len(p), -1)
            tg[:-1] = p[1:]
            l_p = tinylm_ref.cross_entropy(ref.forward(np.array([p])), torch.tensor(tg[None])) * (len(p) - 1) / n_tok
            l_p.backward()
            ref_sum += l_p.item()
        loss = model.loss(ids, attention_mask=mask)
        check(abs(loss - ref_sum) < 1e-4 * max(1.0, abs(ref_sum)), "%s %s-padded: masked loss = the prompts' mean "
              "token loss (reference)" % (name, side), "%.6f vs %.6f" % (loss, ref_sum))
        pg = model.param_grads(ids, attention_mask=mask)
        badp = [k for k in pg if ref.params[k].grad is None or rel_err(pg[k], ref.params[k].grad.numpy()) > TOL_GRAD]
        check(not badp, "%s %s-padded: parameter gradients of the masked loss = reference (%d tensors)"
              % (name, side, len(pg)), ", ".join(badp[:4]))


def grad_edit(kind):
    """(tinylm backward hook, the reference's replacement registering the same gradient edit)"""
    def edit(g):
        if kind == "zero":
            return g * 0.0
        if kind == "half":
            return g * 0.5
        if kind == "double":
            return g * 2.0
        g = g.copy() if isinstance(g, np.ndarray) else g.clone()
        g[..., 1, :] = 0.0  # (hook_z: head 1)
        return g

    def ref_fn(t):
        t = t * 1.0
        t.register_hook(edit)
        return t

    def inplace(g, hook):
        g[...] = edit(g)
    return (lambda g, hook: edit(g)), inplace, ref_fn


def bwd_checks(name, model, ref, rng, V):
    T = 9
    ids = rng.integers(0, V, T).astype(np.int32)
    tg = np.full(T, -1)
    tg[:-1] = ids[1:]
    _, plain = model.run_with_cache(ids, backward=True)
    for point, kind in (("blocks.1.hook_resid_mid", "zero"), ("blocks.0.hook_attn_out", "half"),
                        ("blocks.0.attn.hook_z", "head"), ("blocks.1.hook_resid_pre", "double")):
        ret, inplace, ref_fn = grad_edit(kind)
        _, cache = model.run_with_cache(ids, backward=True, bwd_hooks=[(point, ret)])
        _, rc = ref.run_hooked(np.array([ids]), replace={point: ref_fn}, backward="loss")
        bad = [k for k in cache if k.endswith("_grad") and k in rc and rel_err(cache[k], rc[k][0]) > TOL_GRAD]
        changed = [k for k in cache if k.endswith("_grad") and not np.array_equal(cache[k], plain[k])]
        check(not bad and len(changed) > 3, "%s: bwd hook on %s (%s): %d gradients upstream change, all = "
              "reference's register_hook" % (name, point, kind, len(changed)), ", ".join(bad[:4]))
        pg = model.param_grads(ids, bwd_hooks=[(point, inplace)])
        for t in ref.params.values():
            t.grad = None
        ref.run_hooked(np.array([ids]), names=(), replace={point: ref_fn}, backward="loss")
        badp = [k for k in pg if ref.params[k].grad is None or rel_err(pg[k], ref.params[k].grad.numpy()) > TOL_GRAD]
        check(not badp, "%s: param_grads with an in-place bwd hook on %s = reference" % (name, point),
              ", ".join(badp[:4]))
    # run_with_hooks(bwd_hooks=) runs the backward and calls the hook with the gradient there
    seen = {}
    model.run_with_hooks(ids, bwd_hooks=[("blocks.0.hook_resid_post", lambda g, h: seen.setdefault(h.name, g.copy()))])
    check(np.array_equal(seen.get("blocks.0.hook_resid_post"), plain["blocks.0.hook_resid_post_grad"]),
          "%s: run_with_hooks(bwd_hooks=) sees the loss's gradient (= run_with_cache's)" % name)
    for label, call, exc in (
            ("a point without a gradient", lambda: model.run_with_hooks(
                ids, bwd_hooks=[("blocks.0.attn.hook_pattern", lambda g, h: g)]), ValueError),
            ("a replacement of the wrong shape", lambda: model.run_with_hooks(
                ids, bwd_hooks=[("blocks.0.hook_resid_mid", lambda g, h: g[:2])]), ValueError),
            ("bwd_hooks without backward=True", lambda: model.run_with_cache(
                ids, bwd_hooks=[("blocks.0.hook_resid_mid", lambda g, h: g)]), ValueError),
            ("a bad entry", lambda: model.run_with_hooks(ids, bwd_hooks=["blocks.0.hook_resid_mid"]), TypeError)):
        try:
            call()
            check(False, "%s: %s is refused" % (name, label))
        except exc as e:
            check(True, "%s: %s is refused (%s)" % (name, label, type(e).__name__), str(e))
    check(np.array_equal(model.run_with_cache(ids, backward=True)[1]["hook_embed_grad"], plain["hook_embed_grad"]),
          "%s: the model is usable after refused calls (same gradients)" % name)


def gen_checks(name, model, ref, rng, V):
    """a list of prompts through the batched KV cache (left-padded): greedy = the reference's greedy
    tokens for each prompt alone = generate of each prompt alone"""
    prompts = [rng.integers(1, V, n).astype(np.int32) for n in (3, 9, 6)]
    n_new = 5
    kv = model.generate(prompts, n_new, temperature=0, return_ids=True)  # (a list of id arrays: one batch)
    refs = []
    for p in prompts:
        seq = list(map(int, p))
        with torch.no_grad():
            for _ in range(n_new):
                seq.append(int(ref.forward(np.array([seq]))[0, -1].argmax()))
        refs.append(seq[len(p):])
    alone = [list(model.generate(p, n_new, temperature=0, return_ids=True, stop_at_eos=False)) for p in prompts]
    kv = [list(map(int, k)) for k in kv]
    check(kv == refs and alone == refs, "%s: batched KV-cache generation (left-padded prompts 3, 9, 6) = each "
          "prompt alone = the reference's greedy tokens" % name, "%s / %s / %s" % (kv, alone, refs))


def gen_hook_checks(name, model, ref, rng, V):
    """hooks through the batched cache ([B, T, ...] steps): a hook acting position by position gives each
    prompt the tokens of generating it alone with the hook = the reference's with the same edit"""
    prompts = [rng.integers(1, V, n).astype(np.int32) for n in (5, 2, 7)]
    n_new = 5
    seen = []

    def scale(a, h):
        seen.append((a.shape, h.positions.shape))
        return a * 1.5
    hooks = [("blocks.0.hook_resid_post", scale), ("hook_embed", lambda a, h: None)]
    kv = [list(map(int, k)) for k in model.generate(prompts, n_new, temperature=0, fwd_hooks=hooks, return_ids=True)]
    shapes_ok = seen[0][0][:2] == (3, 7) and seen[0][1] == (3, 7) and all(s[0][:2] == (3, 1) for s in seen[1:])
    alone = [list(model.generate(p, n_new, temperature=0, fwd_hooks=hooks, return_ids=True, stop_at_eos=False))
             for p in prompts]
    refs = []
    for p in prompts:
        seq = list(map(int, p))
        for _ in range(n_new):
            seq.append(int(ref.run_hooked(np.array([seq]), names=(), replace={
                "blocks.0.hook_resid_post": lambda t: t * 1.5})[0][0, -1].argmax()))
        refs.append(seq[len(p):])
    check(kv == alone == refs and shapes_ok, "%s: hooks through the batched KV cache ([3, 7, ...] prompts, then "
          "[3, 1, ...]) = each prompt alone with the hook = the reference's greedy tokens with the same edit" % name,
          "%s / %s / %s" % (kv, alone, refs))


def stories_gen_checks(tinylm):
    """stories260K: a list of prompts generated as one batch gives, for each, the text of generating it
    alone with the same seed (greedy, temperature, top-k, top-p), and stops each at EOS"""
    m = tinylm.load(os.path.join(ROOT, "data", "stories260K.bin"), tokenizer=os.path.join(ROOT, "data", "tok512.bin"))
    prompts = ["Once upon a time", "The cat sat on the mat and", "Lily",
               "One day, a little boy named Tim went to the park with his mom. He"]
    for kw in (dict(temperature=0), dict(temperature=0.8, seed=5), dict(temperature=1.0, top_k=20, seed=11),
               dict(temperature=0.9, top_p=0.9, seed=3)):
        batched = m.generate(prompts, 120, **kw)
        alone = [m.generate(p, 120, **kw) for p in prompts]
        check(batched == alone, "stories: generate(list of 4, %s) as one batch = each prompt alone" % kw,
              "%r vs %r" % ([b[:40] for b in batched], [a[:40] for a in alone]))
    ids_b = m.generate(prompts, 300, temperature=1.0, seed=4, return_ids=True)
    ids_a = [m.generate(p, 300, temperature=1.0, seed=4, return_ids=True) for p in prompts]
    check(all(np.array_equal(x, y) for x, y in zip(ids_b, ids_a)) and len(set(len(x) for x in ids_b)) > 1,
          "stories: return_ids, 300 tokens: each row stops at EOS where its prompt alone does (lengths %s)"
          % [len(x) for x in ids_b])
    # a left-padded batch of 8 split across 2 threads (each part its rows' padding), after a pass on one
    # thread (the attention's per-thread scratch grows: it was written past before)
    texts = prompts * 2
    ids, mask = m.tokenize_batch(texts, padding_side="left")
    tinylm.set_threads(1)
    l1, g1 = m(ids, attention_mask=mask), m.param_grads(ids, attention_mask=mask)
    tinylm.set_threads(2)
    try:
        l2, g2 = m(ids, attention_mask=mask), m.param_grads(ids, attention_mask=mask)
    finally:
        tinylm.set_threads(1)
    worst = max(float(np.abs(g1[k] - g2[k]).max() / (np.abs(g1[k]).max() + 1e-30)) for k in g1)
    alone = max(float(np.abs(l2[b][mask[b]] - m(m.tokenize(t))).max()) for b, t in enumerate(texts))
    check(float(np.abs(l1 - l2)[mask].max()) < 1e-5 and worst < 1e-5 and alone < 1e-4,
          "stories: a left-padded batch of 8 on 2 threads (split in parts) = on 1 thread (logits, parameter "
          "gradients %.1e) = each text alone (%.1e)" % (worst, alone))
    # a steering hook that skips BOS by hook.positions (each row's own: [B, T] in a batch) gives each
    # prompt what it gives alone, greedy and sampled
    _, c = m.run_with_cache(m.tokenize("The dog barked. The dog"), names=["blocks.2.hook_resid_post"])
    _, c2 = m.run_with_cache(m.tokenize("The girl smiled. The girl"), names=["blocks.2.hook_resid_post"])
    vec = 4.0 * (c["blocks.2.hook_resid_post"][-1] - c2["blocks.2.hook_resid_post"][-1])

    def steer(a, hook):
        a[..., hook.positions > 0, :] += vec
    for kw in (dict(temperature=0), dict(temperature=0.8, seed=2)):
        st = [("blocks.2.hook_resid_post", steer)]
        batched = m.generate(prompts, 60, fwd_hooks=st, **kw)
        alone = [m.generate(p, 60, fwd_hooks=st, **kw) for p in prompts]
        check(batched == alone and batched != m.generate(prompts, 60, **kw), "stories: a steering hook through "
              "the batched KV cache (%s) = each prompt alone with it, and changes the text" % kw,
              "%r vs %r" % ([b[:40] for b in batched], [a[:40] for a in alone]))
    try:
        m.generate(prompts, 10, fwd_hooks=[("blocks.0.attn.hook_pattern", lambda a, h: a)])
        check(False, "stories: a pattern hook through the batched KV cache is refused")
    except ValueError as e:
        check("use_kv_cache=False" in str(e), "stories: a pattern hook through the batched KV cache is refused "
              "(ValueError naming use_kv_cache=False)", str(e))
    try:
        m.generate(prompts, m.max_positions, temperature=0)
        check(False, "stories: a batch whose longest prompt + n is too long is refused")
    except ValueError as e:
        check("max_position_embeddings" in str(e), "stories: a batch whose longest prompt + n is too long is "
              "refused (ValueError)", str(e))
    m.close()


def misuse_checks(model, V):
    ids = np.arange(8, dtype=np.int32) % V
    cases = [
        ("a pad between real tokens", np.array([1, 1, 0, 1, 1, 1, 1, 1], bool), ValueError),
        ("a row without a real token", np.zeros(8, bool), ValueError),
        ("a mask of the wrong size", np.ones(7, bool), ValueError),
        ("a float mask", np.ones(8, np.float32), TypeError),
        ("integers other than 0/1", np.full(8, 2), TypeError),
    ]
    for label, m, exc in cases:
        try:
            model(ids, attention_mask=m)
            check(False, "mask misuse: %s is refused" % label)
        except exc as e:
            check(True, "mask misuse: %s is refused (%s)" % (label, type(e).__name__), str(e))
    lg = model(ids, attention_mask=np.array([0, 0, 1, 1, 1, 1, 1, 1]))
    check(rel_err(lg[2:], model(ids[2:])) < 1e-5, "a 0/1 integer mask works as a bool one (left padding)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    os.environ["TINYLM_LIB"] = os.path.abspath(args.lib)
    import tinylm
    tinylm.set_threads(1)
    torch.set_num_threads(1)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    rng = np.random.default_rng(11)
    cases = {n: (c, o) for n, c, o in all_cases()}
    only = set(args.only.split(",")) if args.only else None
    for name in dict.fromkeys(PAD_VARIANTS + BWD_VARIANTS):
        if only and name not in only:
            continue
        cfg, opts = cases[name]
        params = tinylm_ref.random_params(cfg, seed=5, std=opts["std"], embed_std=2 * opts["std"])
        d = os.path.join(args.work, name)
        tinylm_ref.save(d, cfg, params)
        model = tinylm.load(d)
        ref = tinylm_ref.Model(cfg, params)
        if name in PAD_VARIANTS:
            pad_checks(name, model, ref, rng, cfg["vocab_size"])
        if name in BWD_VARIANTS:
            bwd_checks(name, model, ref, rng, cfg["vocab_size"])
        if name in GEN_VARIANTS:
            gen_checks(name, model, ref, rng, cfg["vocab_size"])
            gen_hook_checks(name, model, ref, rng, cfg["vocab_size"])
        if name == "norm_rmsnorm_pre":
            misuse_checks(model, cfg["vocab_size"])
        model.close()
    if not only or "stories" in only:
        stories_gen_checks(tinylm)
    print("%d passed, %d failed" % (test_probes.passed, test_probes.failed))
    return 1 if test_probes.failed else 0


if __name__ == "__main__":
    sys.exit(main())
