#!/usr/bin/python3
"""test_python_api.py — the tinylm Python package (python/tinylm) against the PyTorch reference.

    test_python_api.py --lib build/libtinylm.so --tinylm build/tinylm --work DIR

1. Architecture variants (pre/post/sandwich/output/no norm, GQA/MQA, QK-Norm per head and
   full, attention and final soft-caps, sliding windows, GELU/GeGLU, no residual): logits, every
   cached activation and every hook gradient (of the loss and of a logit-difference metric)
   equal the reference's (tests/reference/tinylm_ref.py, float64; relative error forward 2e-4,
   gradients 2e-3); the set of hook names equals the reference's points that the engine has.
2. Patching a hook with its own value leaves the logits bit-identical; zero-ablating a head
   (hook_z), replacing a pattern, and adding a steering vector to the residual stream change the
   logits as the reference does.
3. stories260K (llama2.c .bin + tok512.bin): the same checks; tokenize/decode/logits equal the
   CLI's (`tinylm tokenize`, `tinylm logits`, bit-identical); greedy generate equals the
   reference's greedy tokens; a steering hook changes what generate writes.
4. load() for a tinylm checkpoint, a training run directory and a Hugging Face export; errors
   (unknown hook, a hook that raises, read-only hooks) surface as Python exceptions.
Prints "N passed, N failed"; exits 1 on any failure.
"""
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
sys.path.insert(0, os.path.join(ROOT, "tests", "probes"))
sys.path.insert(0, os.path.join(ROOT, "python"))
import tinylm_ref  # noqa: E402
import llama2c_ref  # noqa: E402
from cases import all_cases  # noqa: E402
import test_probes  # noqa: E402

TOL_FWD, TOL_GRAD = 2e-4, 2e-3
ENV = dict(os.environ, OMP_NUM_THREADS="1")

VARIANTS = ["norm_rmsnorm_pre", "norm_layernorm_post", "norm_rmsnorm_sandwich", "norm_rmsnorm_1p_output",
            "norm_layernorm_none", "layernorm_nobias_sandwich", "gqa_kv2", "mqa_kv1", "qk_norm_head_rmsnorm",
            "qk_norm_full_rmsnorm_kv2", "qk_norm_full_learned_pos", "both_softcaps", "sliding_mixed_layer_types",
            "ffn_geglu", "ffn_gelu_mlp_bias", "residual_false_pre", "post_final_norm_true", "final_norm_false",
            "mla_yarn"]


check = test_probes.check  # (one checker with running counts, shared with the probes' test)


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


def compare_caches(label, eng, ref, grads_expected):
    """every engine entry against the reference's (batch axis dropped); names must match"""
    bad = []
    for k, v in eng.items():
        if k not in ref:
            bad.append("%s: not in the reference" % k)
            continue
        tol = TOL_GRAD if k.endswith("_grad") else TOL_FWD
        e = rel_err(v, ref[k][0])
        if e > tol:
            bad.append("%s: rel err %.2e" % (k, e))
    missing = [k for k in ref if not k.endswith("_grad") and k not in eng]
    missing += [k + "_grad" for k in grads_expected if k + "_grad" not in eng]
    check(not bad, "%s: %d cached tensors = the reference's" % (label, len(eng)), "; ".join(bad[:4]))
    check(not missing, "%s: every reference hook point is cached" % label, ", ".join(missing[:6]))


def metric_fn(pos, a, b):
    return lambda lg: lg[0, pos, a] - lg[0, pos, b]


def check_model(label, model, ref, ids, rng):
    V = model.vocab_size
    T = len(ids)
    # logits and loss
    lg = model(ids)
    rlg = ref.forward(np.array([ids]))[0].detach().numpy()
    check(rel_err(lg, rlg) < TOL_FWD, "%s: logits = reference" % label, "%.2e" % rel_err(lg, rlg))
    tg = np.full(T, -1)
    tg[:-1] = ids[1:]
    rloss = tinylm_ref.cross_entropy(torch.tensor(rlg[None]), torch.tensor(tg[None])).item()
    check(abs(model.loss(ids) - rloss) < 1e-4 * max(1, abs(rloss)), "%s: loss = reference" % label)
    # parameter gradients of the loss by name against the reference's autograd
    pg = model.param_grads(ids)
    for t in ref.params.values():
        t.grad = None
    tinylm_ref.cross_entropy(ref.forward(np.array([ids])), torch.tensor(tg[None])).backward()
    bad = [n for n in pg if ref.params[n].grad is None or rel_err(pg[n], ref.params[n].grad.numpy()) > TOL_GRAD]
    check(set(pg) == set(ref.params) and not bad, "%s: param_grads = the reference's autograd (%d tensors)"
          % (label, len(pg)), ", ".join(bad[:4]))
    # cache + gradients of the loss
    # (the points made only when asked for (flags & 16) are not in a cache of every point: test_python_hook_points)
    made = {n for n, hp in model.hook_points.items() if not hp.flags & 16}
    grads_expected = [n for n, hp in model.hook_points.items() if not hp.flags & 4 and n in made]
    lg2, cache = model.run_with_cache(ids, backward=True)
    check(np.array_equal(lg, lg2), "%s: run_with_cache logits bit-identical to model(ids)" % label)
    _, rcache = ref.run_hooked(np.array([ids]), backward="loss")
    rcache = {k: v for k, v in rcache.items() if k in model.hook_points or k[:-5] in model.hook_points}
    ref_names = set(k for k in rcache if not k.endswith("_grad"))
    check(ref_names == made, "%s: hook names = the reference's points" % label,
          "engine only %s; reference only %s" % (sorted(made - ref_names)[:4], sorted(ref_names - made)[:4]))
    compare_caches(label + " (loss grads)", cache, rcache, grads_expected)
    # gradients of a logit difference
    pos, a, b = T - 2, int(rng.integers(V)), int(rng.integers(V))
    _, mc = model.run_with_cache(ids, names=lambda n: "resid" in n or "hook_z" in n or "hook_q" in n,
                                 backward=True, metric=(pos, a, b))
    _, rmc = ref.run_hooked(np.array([ids]), names={k for k in mc if not k.endswith("_grad")},
                            backward=metric_fn(pos, a, b))
    bad = [k for k in mc if k.endswith("_grad") and rel_err(mc[k], rmc[k][0]) > TOL_GRAD]
    check(not bad and any(k.endswith("_grad") for k in mc), "%s: metric gradients = reference" % label,
          ", ".join(bad[:4]))
    # patching with its own value: bit-identical
    names = ["hook_embed", "blocks.0.hook_resid_pre", "blocks.0.attn.hook_z", "blocks.0.attn.hook_q",
             "blocks.%d.hook_resid_mid" % (model.n_layers - 1), "blocks.0.mlp.hook_post", "blocks.0.hook_attn_out",
             "blocks.0.attn.hook_pattern"]
    names = [n for n in names if n in model.hook_points]  # (an MLA layer has no hook_q)
    same = model.run_with_hooks(ids, fwd_hooks=[(n, lambda a, h: a.copy()) for n in names])
    check(np.array_equal(same, lg), "%s: patching hooks with their own values: bit-identical logits" % label)
    # zero-ablate head 1 of layer 0 via hook_z
    def zero_head(a, hook):
        a = a.copy()
        a[:, 1, :] = 0
        return a

    def zero_head_ref(t):
        t = t.clone()
        t[:, :, 1, :] = 0
        return t
    abl = model.run_with_hooks(ids, fwd_hooks=[("blocks.0.attn.hook_z", zero_head)])
    rabl, _ = ref.run_hooked(np.array([ids]), names=(), replace={"blocks.0.attn.hook_z": zero_head_ref})
    check(rel_err(abl, rabl[0]) < TOL_FWD and rel_err(abl, lg) > 1e-4,
          "%s: zero-ablating head 1 (hook_z) = reference" % label, "%.2e" % rel_err(abl, rabl[0]))
    # steering: add a vector to the residual stream after layer 0
    vec = rng.normal(0, 1.0, model.config["hidden_size"]).astype(np.float32)
    st = model.run_with_hooks(ids, fwd_hooks=[("blocks.0.hook_resid_post", lambda a, h: a + vec)])
    rst, _ = ref.run_hooked(np.array([ids]), names=(),
                            replace={"blocks.0.hook_resid_post": lambda t: t + torch.tensor(vec, dtype=t.dtype)})
    check(rel_err(st, rst[0]) < TOL_FWD and rel_err(st, lg) > 1e-4, "%s: steering vector = reference" % label,
          "%.2e" % rel_err(st, rst[0]))
    # in-place modification of the view (no return value) works the same
    def add_inplace(a, h):
        a += vec
    st2 = model.run_with_hooks(ids, fwd_hooks=[("blocks.0.hook_resid_post", add_inplace)])
    check(np.array_equal(st, st2), "%s: in-place hook = returned replacement" % label)
    # replacing the pattern of layer 0 with uniform causal attention
    def uniform(a, h):
        m = np.tril(np.ones((T, T), np.float32))
        return np.broadcast_to(m / m.sum(-1, keepdims=True), a.shape).copy()

    def uniform_ref(t):
        m = torch.tril(torch.ones(T, T, dtype=t.dtype))
        return (m / m.sum(-1, keepdim=True)).expand_as(t)
    if "sliding" not in label:
        up = model.run_with_hooks(ids, fwd_hooks=[("blocks.0.attn.hook_pattern", uniform)])
        rup, _ = ref.run_hooked(np.array([ids]), names=(), replace={"blocks.0.attn.hook_pattern": uniform_ref})
        check(rel_err(up, rup[0]) < TOL_FWD, "%s: replaced pattern = reference" % label,
              "%.2e" % rel_err(up, rup[0]))
    # a batch of two rows = each row alone
    ids2 = np.stack([ids, ids[::-1]])
    lb = model(ids2)
    check(lb.shape == (2, T, V) and rel_err(lb[1], model(ids[::-1])) < 1e-5 and rel_err(lb[0], lg) < 1e-5,
          "%s: batch [2, T] = its rows" % label)
    lbc, cb = model.run_with_cache(ids2, names=["blocks.0.attn.hook_pattern"])
    check(cb["blocks.0.attn.hook_pattern"].shape == (2, model.config["num_attention_heads"], T, T),
          "%s: batched cache shapes keep the batch axis" % label)


def run(*args):
    p = subprocess.run([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, timeout=120)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--tinylm", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", default=None, help="comma-separated variant names")
    args = ap.parse_args()
    os.environ["TINYLM_LIB"] = os.path.abspath(args.lib)
    import tinylm
    tinylm.set_threads(1)
    torch.set_num_threads(1)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    rng = np.random.default_rng(7)
    cases = {n: (c, o) for n, c, o in all_cases()}
    variants = args.only.split(",") if args.only else VARIANTS
    for name in variants:
        if name == "stories":
            continue
        cfg, opts = cases[name]
        params = tinylm_ref.random_params(cfg, seed=3, std=opts["std"], embed_std=2 * opts["std"])
        d = os.path.join(args.work, name)
        tinylm_ref.save(d, cfg, params)
        model = tinylm.load(d)
        ref = tinylm_ref.Model(cfg, params)
        T = min(10, cfg.get("max_position_embeddings", 16))
        ids = rng.integers(0, cfg["vocab_size"], T).astype(np.int32)
        check_model(name, model, ref, ids, rng)
        # generate through the KV cache with hooks (the training layout, one position a step) = the
        # whole sequence recomputed at every step, and its greedy tokens = the reference's
        n_new = min(6, cfg.get("max_position_embeddings", 16) - 4)
        hooks = [("blocks.0.hook_resid_post", lambda a, h: a * 1.5), ("hook_embed", lambda a, h: None)]
        kv = model.generate(ids[:4], n_new, temperature=0, fwd_hooks=hooks, return_ids=True)
        full = model.generate(ids[:4], n_new, temperature=0, fwd_hooks=hooks, return_ids=True, use_kv_cache=False)
        seq = list(ids[:4])
        for _ in range(n_new):
            seq.append(int(ref.run_hooked(np.array([seq]), names=(), replace={
                "blocks.0.hook_resid_post": lambda t: t * 1.5})[0][0, -1].argmax()))
        check(np.array_equal(kv, full) and list(kv) == seq[4:], "%s: generate with hooks through the KV cache = "
              "recomputing = the reference's greedy tokens with the same edit" % name, "%s / %s / %s" % (kv, full, seq[4:]))

    if args.only and "stories" not in variants:
        return finish()
    # ---- stories260K -------------------------------------------------------------------------------
    ckpt, tokf = os.path.join(ROOT, "data", "stories260K.bin"), os.path.join(ROOT, "data", "tok512.bin")
    model = tinylm.load(ckpt, tokenizer=tokf)
    config, params = llama2c_ref.load_checkpoint(ckpt)
    ref = tinylm_ref.Model(config, params)
    text = "Once upon a time, there was a little girl named Lily. She"
    ids = model.tokenize(text)
    rc, out, err = run(args.tinylm, "tokenize", "--tokenizer", tokf, "--text", text, "--bos")
    check(rc == 0 and [int(x) for x in out.split()] == list(ids), "stories: tokenize = tinylm tokenize",
          out[:80] + err[:200])
    check(model.decode(ids) == text, "stories: decode(tokenize(text)) == text", repr(model.decode(ids)))
    st = model.to_str_tokens(text)
    check(len(st) == len(ids) and "".join(st[1:]) == text, "stories: to_str_tokens joins to the text", repr(st[:6]))
    check(st[0] == "<s>", "stories: to_str_tokens shows BOS as '<s>' (its llama2.c piece is '\\n<s>\\n')", repr(st[0]))
    # a hook's array is its own: kept as store[name] = act (the TransformerLens habit), it still
    # holds this pass's values after the next pass
    store = {}

    def keep(a, hook):
        store[hook.name] = a

    ids_a = model.tokenize("Once upon a time")
    model.run_with_hooks(ids_a, fwd_hooks=[("blocks.1.hook_resid_post", keep)])
    kept = np.array(store["blocks.1.hook_resid_post"])
    _, ref_cache = model.run_with_cache(ids_a, names=["blocks.1.hook_resid_post"])
    model(model.tokenize("The dog ran after the ball"))
    check(np.array_equal(store["blocks.1.hook_resid_post"], kept) and
          np.array_equal(kept, ref_cache["blocks.1.hook_resid_post"]),
          "stories: an array a hook keeps still holds its pass's values after the next pass")
    # padded batches (tokenize_batch, right and left padding): the masked loss is the mean of the
    # unpadded sequences' per-token losses; per-token losses match PyTorch's cross-entropy of the
    # same logits; pads are NaN; a mask with a pad between real tokens is refused (the variants'
    # padded batches against the reference: test_python_batch.py)
    texts = ["Once upon a time there was a dog.", "The cat sat", "Lily liked to play in the park with her ball"]
    bids, bmask = model.tokenize_batch(texts)
    singles = [model.loss(model.tokenize(t), per_token=True) for t in texts]
    per = model.loss(bids, attention_mask=bmask, per_token=True)
    worst = max(float(np.abs(per[b, :len(q)] - q).max()) for b, q in enumerate(singles))
    pads_nan = all(np.isnan(per[b, len(q):]).all() for b, q in enumerate(singles))
    mean_ok = abs(model.loss(bids, attention_mask=bmask) - float(np.mean(np.concatenate(singles)))) < 1e-5
    check(bids.shape == (3, bmask.sum(1).max()) and worst < 1e-5 and pads_nan and mean_ok,
          "stories: a padded batch's per-token and masked loss are the unpadded sequences' (worst %.1e)" % worst)
    lg = torch.tensor(model(model.tokenize(texts[2])), dtype=torch.float64)
    tt = torch.tensor(model.tokenize(texts[2])[1:], dtype=torch.long)
    ref_ce = torch.nn.functional.cross_entropy(lg[:-1], tt, reduction="none").numpy()
    check(float(np.abs(ref_ce - singles[2]).max()) < 1e-5, "stories: per-token loss = PyTorch's cross_entropy "
          "(reduction='none') of the same logits")
    # left padding: the same per-token losses (positions count from each row's first real token)
    lids, lmask = model.tokenize_batch(texts, padding_side="left")
    lper = model.loss(lids, attention_mask=lmask, per_token=True)
    lworst = max(float(np.abs(lper[b][lmask[b, 1:] & lmask[b, :-1]] - q).max()) for b, q in enumerate(singles))
    check(np.array_equal(lids[lmask], bids[bmask]) and lmask[:, -1].all() and
          lworst < 1e-5, "stories: a left-padded batch's per-token losses are the unpadded sequences' (worst %.1e)"
          % lworst)
    try:
        model.loss(bids, attention_mask=bmask & (np.arange(bids.shape[1]) != 2))
        check(False, "stories: a mask with a pad between real tokens is refused")
    except ValueError as e:
        check("between real tokens" in str(e), "stories: a mask with a pad between real tokens is refused "
              "(ValueError)", str(e))
    gens = model.generate(texts[:2], n=8, temperature=0)
    check(gens == [model.generate(t, n=8, temperature=0) for t in texts[:2]],
          "stories: generate of a list of prompts = each prompt's generate")
    # tinylm.metrics: each metric's value and gradient against PyTorch autograd of the same formula
    rng = np.random.default_rng(3)
    z = rng.standard_normal((6, 512)).astype(np.float32) * 3
    ref_z = rng.standard_normal((6, 512)) * 3
    tg = rng.integers(0, 512, 6)
    tg[2] = -1
    F = torch.nn.functional
    forms = [
        (tinylm.metrics.logit_diff(4, 10, 20), lambda t: t[4, 10] - t[4, 20]),
        (tinylm.metrics.log_prob(-1, 7), lambda t: F.log_softmax(t[-1], -1)[7]),
        (tinylm.metrics.loss(tg), lambda t: F.cross_entropy(t, torch.tensor(tg), ignore_index=-1)),
        (tinylm.metrics.kl_to(ref_z), lambda t: (F.softmax(torch.tensor(ref_z), -1) * (
            F.log_softmax(torch.tensor(ref_z), -1) - F.log_softmax(t, -1))).sum(-1).mean()),
    ]
    for met, form in forms:
        t = torch.tensor(z.astype(np.float64), requires_grad=True)
        v = form(t)
        v.backward()
        ok = abs(met.value(z) - v.item()) < 1e-9 * max(1, abs(v.item())) and \
            float(np.abs(met(z) - t.grad.numpy()).max()) < 1e-6
        check(ok, "metrics: %r value and gradient = PyTorch autograd's" % met)
    # a scalar metric function of torch operations is differentiated by PyTorch; the same gradient
    # at a hook point as the hand-written metric's
    ids_m = model.tokenize("Once upon a time there was")
    names_m = ["blocks.2.hook_resid_post"]
    _, c1 = model.run_with_cache(ids_m, names=names_m, backward=True, metric=tinylm.metrics.log_prob(-1, 7))
    _, c2 = model.run_with_cache(ids_m, names=names_m, backward=True,
                                 metric=lambda t: torch.log_softmax(torch.as_tensor(t)[-1], -1)[7])
    g1, g2 = c1[names_m[0] + "_grad"], c2[names_m[0] + "_grad"]
    check(np.abs(g1 - g2).max() <= 1e-6 * max(1e-30, np.abs(g1).max()) + 1e-9 and np.abs(g1).max() > 0,
          "metrics: a torch scalar metric function gives log_prob's gradient at a hook point")
    try:
        # (a function whose value does not depend on torch operations; one that calls NumPy on a
        # torch tensor is refused the same way, but makes torch throw a C++ exception, which the
        # sanitizer build's preloaded runtime cannot pass through)
        model.run_with_cache(ids_m, names=names_m, backward=True, metric=lambda t: 3.0)
        check(False, "metrics: a scalar metric function torch cannot differentiate is refused")
    except TypeError as e:
        check("tinylm.metrics" in str(e), "metrics: a scalar metric function torch cannot differentiate is refused, "
              "naming tinylm.metrics", e)
    r = repr(model)
    check(r.startswith("<tinylm.Model ") and "5 layers" in r and "vocab 512" in r, "stories: repr(model) names "
          "the file and the shape", r)
    check_model("stories260K", model, ref, ids, rng)
    npy = os.path.join(args.work, "stories_logits.npy")
    rc, out, err = run(args.tinylm, "logits", "--model", ckpt, "--tokenizer", tokf, "--ids",
                       " ".join(map(str, ids)), "--out", npy)
    check(rc == 0 and np.array_equal(np.load(npy), model(ids)), "stories: logits bit-identical to `tinylm logits`",
          err[-200:])
    # greedy generation = the reference's argmax loop
    prompt = model.tokenize("Once upon a time")
    gen = model.generate(prompt, 12, temperature=0, return_ids=True)
    toks = list(prompt)
    with torch.no_grad():
        for _ in range(12):
            toks.append(int(ref.forward(np.array([toks]))[0, -1].argmax()))
    check(list(gen) == toks[len(prompt):], "stories: greedy generate = reference greedy tokens")
    same = model.generate(prompt, 12, temperature=0.8, seed=5)
    check(same == model.generate(prompt, 12, temperature=0.8, seed=5), "stories: seeded sampling is repeatable")
    noop = model.generate(prompt, 12, temperature=0, fwd_hooks=[("blocks.2.hook_resid_post", lambda a, h: a)])
    check(noop == model.decode(gen), "stories: generate with a no-op hook = without")
    _, c = model.run_with_cache(model.tokenize("The dog barked. The dog"), names=["blocks.2.hook_resid_post"])
    _, c2 = model.run_with_cache(model.tokenize("The girl smiled. The girl"), names=["blocks.2.hook_resid_post"])
    steer = 4.0 * (c["blocks.2.hook_resid_post"][-1] - c2["blocks.2.hook_resid_post"][-1])
    steered = model.generate(prompt, 24, temperature=0,
                             fwd_hooks=[("blocks.2.hook_resid_post", lambda a, h: a + steer)])
    plain = model.generate(prompt, 24, temperature=0)
    check(steered != plain, "stories: a steering vector changes what generate writes", steered)
    # ---- load(): run directory, Hugging Face export; errors --------------------------------------
    base = os.path.join(args.work, "norm_rmsnorm_pre")
    if os.path.isdir(base):
        m0 = tinylm.load(base)
        ids0 = np.arange(8, dtype=np.int32) % m0.vocab_size
        l0 = m0(ids0)
        run_dir = os.path.join(args.work, "rundir")
        os.makedirs(run_dir, exist_ok=True)
        shutil.copytree(base, os.path.join(run_dir, "step-1"), dirs_exist_ok=True)
        if not os.path.lexists(os.path.join(run_dir, "latest")):
            os.symlink("step-1", os.path.join(run_dir, "latest"))
        try:
            check(np.array_equal(tinylm.load(run_dir)(ids0), l0), "load(run directory) = load(checkpoint)")
        except tinylm.TinylmError as e:
            check(False, "load(run directory) = load(checkpoint)", str(e))
        hf = os.path.join(args.work, "hf_export")
        rc, out, err = run(args.tinylm, "export", "--model", base, "--out", hf, "--no-tokenizer")
        if check(rc == 0, "tinylm export (for the Hugging Face load)", err[-200:]):
            mh = tinylm.load(hf)
            check(rel_err(mh(ids0), l0) < 1e-5, "load(Hugging Face directory) = load(checkpoint)")
        npy0 = os.path.join(args.work, "l0.npy")
        rc, out, err = run(args.tinylm, "logits", "--model", base, "--ids", " ".join(map(str, ids0)), "--out", npy0)
        check(rc == 0 and np.array_equal(np.load(npy0), l0), "tinylm checkpoint: logits bit-identical to the CLI's")
    try:
        model.run_with_cache(ids, names=["blocks.0.hook_nonsense"])
        check(False, "an unknown hook name raises KeyError")
    except KeyError:
        check(True, "an unknown hook name raises KeyError")

    def boom(a, h):
        raise ZeroDivisionError("boom")
    try:
        model.run_with_hooks(ids, fwd_hooks=[("blocks.1.hook_resid_mid", boom)])
        check(False, "an exception in a hook reaches the caller")
    except ZeroDivisionError:
        check(True, "an exception in a hook reaches the caller")
    check(np.array_equal(model(ids), model(ids)), "the model runs normally after a failed hook")
    try:
        model.run_with_hooks(ids, fwd_hooks=[("blocks.0.ln1.hook_scale", lambda a, h: a * 2)])
        check(False, "replacing a read-only hook (hook_scale) raises")
    except tinylm.TinylmError:
        check(True, "replacing a read-only hook (hook_scale) raises")
    try:
        tinylm.load(os.path.join(args.work, "no-such-model"))
        check(False, "load of a missing path raises TinylmError")
    except tinylm.TinylmError as e:
        check("no-such-model" in str(e), "load of a missing path raises TinylmError naming it", str(e))
    return finish()


def finish():
    print("%d passed, %d failed" % (test_probes.passed, test_probes.failed))
    return 1 if test_probes.failed else 0


if __name__ == "__main__":
    sys.exit(main())
