"""patching.py — activation patching and attribution patching, as TransformerLens' patching module
names them, over Model.run_with_hooks and run_with_cache.

    clean_logits, clean_cache = model.run_with_cache(clean_ids)
    metric = lambda logits: float(logits[-1, lily] - logits[-1, tim])
    r = tinylm.patching.get_act_patch_resid_pre(model, corrupted_ids, clean_cache, metric)   # [L, T]
    h = tinylm.patching.get_act_patch_attn_head_out_by_pos(model, corrupted_ids, clean_cache, metric)  # [L, T, H]
    a = tinylm.patching.get_attr_patch_resid_pre(model, clean_ids, corrupted_ids, (-1, lily, tim))     # [L, T]

Activation patching: one forward of the corrupted ids per cell, with the clean run's activation
written in at that cell (every batch row at that position); the cell's value is patching_metric
of the patched logits (a function logits -> a number; a one-element array is taken as its value).
Attribution patching (Nanda's first-order estimate, from one clean and one corrupted forward and
one backward): (clean - corrupted) . d metric / d activation at the corrupted run, summed over the
activation's last axis; metric as run_with_cache(backward=True, metric=) takes it ((pos, good, bad),
a tinylm.metrics metric, a gradient array, or a function of torch operations returning a scalar).
Clean and corrupted ids must have the same shape (position by position).
"""
import numpy as np


def _value(v, what):
    a = np.asarray(v, dtype=np.float64)
    if a.size != 1:
        raise ValueError("%s: patching_metric returned %d values (shape %s); it must return one number"
                         % (what, a.size, a.shape))
    return float(a.reshape(()))


def _check(model, corrupted_tokens, clean_cache, names, what):
    ids, mask = model._text_input(corrupted_tokens, None, what)
    ids = np.asarray(ids)
    missing = [n for n in names if not dict.__contains__(clean_cache, n)]
    if missing:
        raise KeyError("%s: the clean cache has no %r (run_with_cache(names=...) left it out, or the model has no "
                       "such point)" % (what, missing[0]))
    ref = clean_cache[names[0]]
    lead = ids.shape
    if ref.shape[:len(lead)] != lead:
        raise ValueError("%s: the corrupted ids have shape %s, the clean cache's %s is %s: clean and corrupted must "
                         "have the same shape (position by position)" % (what, lead, names[0], ref.shape))
    return ids, mask


def _patch_by_pos(model, corrupted_tokens, clean_cache, patching_metric, fmt, what, per_head=False):
    """[L, T] (or [L, T, H] with per_head): the metric with clean's fmt % l patched in at (l, t[, h])"""
    L = model.n_layers
    names = [fmt % l for l in range(L)]
    ids, mask = _check(model, corrupted_tokens, clean_cache, names, what)
    T = ids.shape[-1]
    H = clean_cache[names[0]].shape[-2] if per_head else 1
    out = np.zeros((L, T, H) if per_head else (L, T), np.float64)
    for l, name in enumerate(names):
        clean = clean_cache[name]
        for t in range(T):
            for h in range(H):
                def patch(a, hook, t=t, h=h, clean=clean):
                    if per_head:
                        a[..., t, h, :] = clean[..., t, h, :]
                    else:
                        a[..., t, :] = clean[..., t, :]
                logits = model.run_with_hooks(ids, fwd_hooks=[(name, patch)], attention_mask=mask)
                v = _value(patching_metric(logits), what)
                if per_head:
                    out[l, t, h] = v
                else:
                    out[l, t] = v
    return out


def get_act_patch_resid_pre(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, T]: patching_metric of the corrupted run with blocks.{l}.hook_resid_pre patched from
    the clean cache at position t"""
    return _patch_by_pos(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.hook_resid_pre",
                         "get_act_patch_resid_pre")


def get_act_patch_resid_mid(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, T]: as get_act_patch_resid_pre, at blocks.{l}.hook_resid_mid"""
    return _patch_by_pos(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.hook_resid_mid",
                         "get_act_patch_resid_mid")


def get_act_patch_attn_out(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, T]: at blocks.{l}.hook_attn_out"""
    return _patch_by_pos(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.hook_attn_out",
                         "get_act_patch_attn_out")


def get_act_patch_mlp_out(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, T]: at blocks.{l}.hook_mlp_out"""
    return _patch_by_pos(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.hook_mlp_out",
                         "get_act_patch_mlp_out")


def get_act_patch_block_every(model, corrupted_tokens, clean_cache, patching_metric):
    """[3, n_layers, T]: resid_pre, attn_out, mlp_out patched by layer and position"""
    return np.stack([f(model, corrupted_tokens, clean_cache, patching_metric)
                     for f in (get_act_patch_resid_pre, get_act_patch_attn_out, get_act_patch_mlp_out)])


def get_act_patch_attn_head_out_by_pos(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, T, n_heads]: each head's output (blocks.{l}.attn.hook_z, TransformerLens' head "out")
    patched from the clean cache at one position"""
    return _patch_by_pos(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.attn.hook_z",
                         "get_act_patch_attn_head_out_by_pos", per_head=True)


def get_act_patch_attn_head_out_all_pos(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, n_heads]: each head's output patched at every position at once"""
    what = "get_act_patch_attn_head_out_all_pos"
    L = model.n_layers
    names = ["blocks.%d.attn.hook_z" % l for l in range(L)]
    ids, mask = _check(model, corrupted_tokens, clean_cache, names, what)
    H = clean_cache[names[0]].shape[-2]
    out = np.zeros((L, H), np.float64)
    for l, name in enumerate(names):
        clean = clean_cache[name]
        for h in range(H):
            def patch(a, hook, h=h, clean=clean):
                a[..., h, :] = clean[..., h, :]
            out[l, h] = _value(patching_metric(model.run_with_hooks(ids, fwd_hooks=[(name, patch)],
                                                                    attention_mask=mask)), what)
    return out


# ---- attribution patching -----------------------------------------------------------------------------

def attribution_patch(model, clean_tokens, corrupted_tokens, metric, names):
    """{name: (clean - corrupted) * d metric / d activation (at the corrupted run), summed over the
    activation's last axis} for each hook name in names (a list, or a function name -> bool): the
    first-order estimate of patching the clean activation in, per position (and per head for
    [.., T, H, hd] points), from one backward pass."""
    clean_ids, cmask = model._text_input(clean_tokens, None, "attribution_patch")
    bad_ids, bmask = model._text_input(corrupted_tokens, None, "attribution_patch")
    if np.shape(clean_ids) != np.shape(bad_ids):
        raise ValueError("attribution_patch: clean ids %s and corrupted ids %s differ in shape (position by "
                         "position)" % (np.shape(clean_ids), np.shape(bad_ids)))
    pts = model._resolve(names)
    sel = [hp.name for hp in pts]
    nograd = [hp.name for hp in pts if hp.flags & 4]
    if nograd:
        raise ValueError("attribution_patch: %s has no gradient in tinylm's backward" % nograd[0])
    _, clean = model.run_with_cache(clean_ids, names=sel, attention_mask=cmask)
    _, bad = model.run_with_cache(bad_ids, names=sel, backward=True, metric=metric, attention_mask=bmask)
    return {n: ((clean[n].astype(np.float64) - bad[n]) * bad[n + "_grad"]).sum(-1) for n in sel}


def get_attr_patch_resid_pre(model, clean_tokens, corrupted_tokens, metric):
    """[n_layers, (B,) T]: attribution patching of blocks.{l}.hook_resid_pre"""
    names = ["blocks.%d.hook_resid_pre" % l for l in range(model.n_layers)]
    r = attribution_patch(model, clean_tokens, corrupted_tokens, metric, names)
    return np.stack([r[n] for n in names])


def get_attr_patch_attn_head_out_by_pos(model, clean_tokens, corrupted_tokens, metric):
    """[n_layers, (B,) T, n_heads]: attribution patching of each head's output (hook_z)"""
    names = ["blocks.%d.attn.hook_z" % l for l in range(model.n_layers)]
    r = attribution_patch(model, clean_tokens, corrupted_tokens, metric, names)
    return np.stack([r[n] for n in names])


__all__ = ["get_act_patch_resid_pre", "get_act_patch_resid_mid", "get_act_patch_attn_out", "get_act_patch_mlp_out",
           "get_act_patch_block_every", "get_act_patch_attn_head_out_by_pos", "get_act_patch_attn_head_out_all_pos",
           "attribution_patch", "get_attr_patch_resid_pre", "get_attr_patch_attn_head_out_by_pos"]
