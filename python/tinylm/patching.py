"""patching.py — activation patching and attribution patching, as TransformerLens' patching module
names them, over Model.run_with_hooks and run_with_cache.

    clean_logits, clean_cache = model.run_with_cache(clean_ids)
    metric = lambda logits: float(logits[-1, lily] - logits[-1, tim])
    r = tinylm.patching.get_act_patch_resid_pre(model, corrupted_ids, clean_cache, metric)   # [L, T]
    h = tinylm.patching.get_act_patch_attn_head_out_by_pos(model, corrupted_ids, clean_cache, metric)  # [L, T, H]
    q = tinylm.patching.get_act_patch_attn_head_q_all_pos(model, corrupted_ids, clean_cache, metric)   # [L, H]
    p = tinylm.patching.get_act_patch_attn_head_pattern_by_pos(model, corrupted_ids, clean_cache, metric)  # [L, H, T]
    a = tinylm.patching.get_attr_patch_resid_pre(model, clean_ids, corrupted_ids, (-1, lily, tim))     # [L, T]

Activation patching: one forward of the corrupted ids per cell, with the clean run's activation
written in at that cell (every batch row at that position); the cell's value is patching_metric
of the patched logits (a function logits -> a number; a one-element array is taken as its value).
Head-level variants patch each head's output (hook_z), its query, key or value (hook_q / hook_k /
hook_v: with grouped-query attention k and v have the kv heads) or its attention pattern
(hook_pattern: whole, one destination row, or one weight).
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
    shape = ref.shape
    if names[0].endswith("hook_pattern"):  # ([.., H, T, T]: the batch axes, then T last)
        shape = shape[:len(lead) - 1] + shape[-1:]
    if shape[:len(lead)] != lead:
        raise ValueError("%s: the corrupted ids have shape %s, the clean cache's %s is %s: clean and corrupted must "
                         "have the same shape (position by position)" % (what, lead, names[0], ref.shape))
    return ids, mask


def _cells(model, corrupted_tokens, clean_cache, patching_metric, fmt, what, axes):
    """[n_layers, *sizes]: patching_metric of the corrupted run with the clean cache's fmt % l written in
    at one cell of layer l. axes: the activation's axes a cell fixes, counted from the end, in the
    order of the result's axes (their sizes from the clean cache); the axes not named (the batch,
    and e.g. d_head) are patched whole."""
    L = model.n_layers
    names = [fmt % l for l in range(L)]
    ids, mask = _check(model, corrupted_tokens, clean_cache, names, what)
    sizes = None
    for name in names:
        shape = clean_cache[name].shape
        s = tuple(shape[a] for a in axes)
        if sizes is not None and s != sizes:
            raise ValueError("%s: the layers' %s differ in shape (%s in layer 0, %s in %s): patch layer by layer with "
                             "run_with_hooks" % (what, fmt.split(".")[-1], sizes, s, name))
        sizes = s
    depth = max(-a for a in axes)
    out = np.zeros((L,) + sizes, np.float64)
    for l, name in enumerate(names):
        clean = clean_cache[name]
        for cell in np.ndindex(*sizes):
            sel = [slice(None)] * depth
            for a, i in zip(axes, cell):
                sel[depth + a] = i
            key = (Ellipsis,) + tuple(sel)

            def patch(act, hook, key=key, clean=clean):
                act[key] = clean[key]
            logits = model.run_with_hooks(ids, fwd_hooks=[(name, patch)], attention_mask=mask)
            out[(l,) + cell] = _value(patching_metric(logits), what)
    return out


# the activations' trailing axes: [.., T, d] (the residual stream, the sublayer outputs),
# [.., T, heads, d_head] (hook_z, hook_q; hook_k and hook_v have the kv heads), [.., H, T_dest, T_src] (hook_pattern)
_STREAM_POS = (-2,)
_HEAD_POS, _HEAD_ALL = (-3, -2), (-2,)
_PATTERN_ALL, _PATTERN_DEST, _PATTERN_DEST_SRC = (-3,), (-3, -2), (-3, -2, -1)


def get_act_patch_resid_pre(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, T]: patching_metric of the corrupted run with blocks.{l}.hook_resid_pre patched from
    the clean cache at position t"""
    return _cells(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.hook_resid_pre",
                  "get_act_patch_resid_pre", _STREAM_POS)


def get_act_patch_resid_mid(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, T]: as get_act_patch_resid_pre, at blocks.{l}.hook_resid_mid"""
    return _cells(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.hook_resid_mid",
                  "get_act_patch_resid_mid", _STREAM_POS)


def get_act_patch_attn_out(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, T]: at blocks.{l}.hook_attn_out"""
    return _cells(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.hook_attn_out",
                  "get_act_patch_attn_out", _STREAM_POS)


def get_act_patch_mlp_out(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, T]: at blocks.{l}.hook_mlp_out"""
    return _cells(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.hook_mlp_out",
                  "get_act_patch_mlp_out", _STREAM_POS)


def get_act_patch_block_every(model, corrupted_tokens, clean_cache, patching_metric):
    """[3, n_layers, T]: resid_pre, attn_out, mlp_out patched by layer and position"""
    return np.stack([f(model, corrupted_tokens, clean_cache, patching_metric)
                     for f in (get_act_patch_resid_pre, get_act_patch_attn_out, get_act_patch_mlp_out)])


def get_act_patch_attn_head_out_by_pos(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, T, n_heads]: each head's output (blocks.{l}.attn.hook_z, TransformerLens' head "out")
    patched from the clean cache at one position"""
    return _cells(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.attn.hook_z",
                  "get_act_patch_attn_head_out_by_pos", _HEAD_POS)


def get_act_patch_attn_head_out_all_pos(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, n_heads]: each head's output patched at every position at once"""
    return _cells(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.attn.hook_z",
                  "get_act_patch_attn_head_out_all_pos", _HEAD_ALL)


# q / k / v / pattern: what each head reads with, and where it looks (TransformerLens' "decomposed"
# head patching). hook_q, hook_k and hook_v are the projections before QK-Norm and RoPE; with
# grouped-query attention hook_k and hook_v have num_key_value_heads heads, and so do their results.

def get_act_patch_attn_head_q_by_pos(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, T, n_heads]: each head's query (blocks.{l}.attn.hook_q) patched at one position"""
    return _cells(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.attn.hook_q",
                  "get_act_patch_attn_head_q_by_pos", _HEAD_POS)


def get_act_patch_attn_head_q_all_pos(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, n_heads]: each head's query patched at every position"""
    return _cells(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.attn.hook_q",
                  "get_act_patch_attn_head_q_all_pos", _HEAD_ALL)


def get_act_patch_attn_head_k_by_pos(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, T, n_kv_heads]: each key head (blocks.{l}.attn.hook_k) patched at one position"""
    return _cells(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.attn.hook_k",
                  "get_act_patch_attn_head_k_by_pos", _HEAD_POS)


def get_act_patch_attn_head_k_all_pos(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, n_kv_heads]: each key head patched at every position"""
    return _cells(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.attn.hook_k",
                  "get_act_patch_attn_head_k_all_pos", _HEAD_ALL)


def get_act_patch_attn_head_v_by_pos(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, T, n_kv_heads]: each value head (blocks.{l}.attn.hook_v) patched at one position"""
    return _cells(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.attn.hook_v",
                  "get_act_patch_attn_head_v_by_pos", _HEAD_POS)


def get_act_patch_attn_head_v_all_pos(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, n_kv_heads]: each value head patched at every position"""
    return _cells(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.attn.hook_v",
                  "get_act_patch_attn_head_v_all_pos", _HEAD_ALL)


def get_act_patch_attn_head_pattern_all_pos(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, n_heads]: each head's whole attention pattern (blocks.{l}.attn.hook_pattern) patched"""
    return _cells(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.attn.hook_pattern",
                  "get_act_patch_attn_head_pattern_all_pos", _PATTERN_ALL)


def get_act_patch_attn_head_pattern_by_pos(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, n_heads, T]: one destination position's row of each head's pattern patched (TransformerLens'
    axis order: head, then destination)"""
    return _cells(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.attn.hook_pattern",
                  "get_act_patch_attn_head_pattern_by_pos", _PATTERN_DEST)


def get_act_patch_attn_head_pattern_dest_src_pos(model, corrupted_tokens, clean_cache, patching_metric):
    """[n_layers, n_heads, T, T]: one (destination, source) weight of each head's pattern patched"""
    return _cells(model, corrupted_tokens, clean_cache, patching_metric, "blocks.%d.attn.hook_pattern",
                  "get_act_patch_attn_head_pattern_dest_src_pos", _PATTERN_DEST_SRC)


def _same_heads(model, what):
    c = model.config
    H, KV = c.get("num_attention_heads"), c.get("num_key_value_heads") or c.get("num_attention_heads")
    if KV != H:
        raise ValueError("%s: this model has %d query heads and %d key/value heads (grouped-query attention), so the "
                         "k and v results do not stack with the others: call the _k_ and _v_ functions on their own"
                         % (what, H, KV))


def get_act_patch_attn_head_all_pos_every(model, corrupted_tokens, clean_cache, patching_metric):
    """[5, n_layers, n_heads]: each head's output, q, k, v and pattern patched at every position
    (refused with grouped-query attention: k and v have fewer heads)"""
    _same_heads(model, "get_act_patch_attn_head_all_pos_every")
    return np.stack([f(model, corrupted_tokens, clean_cache, patching_metric) for f in (
        get_act_patch_attn_head_out_all_pos, get_act_patch_attn_head_q_all_pos, get_act_patch_attn_head_k_all_pos,
        get_act_patch_attn_head_v_all_pos, get_act_patch_attn_head_pattern_all_pos)])


def get_act_patch_attn_head_by_pos_every(model, corrupted_tokens, clean_cache, patching_metric):
    """[5, n_layers, T, n_heads]: output, q, k, v by position and the pattern by destination position
    (its [L, H, T] moved to [L, T, H]); refused with grouped-query attention"""
    _same_heads(model, "get_act_patch_attn_head_by_pos_every")
    parts = [f(model, corrupted_tokens, clean_cache, patching_metric) for f in (
        get_act_patch_attn_head_out_by_pos, get_act_patch_attn_head_q_by_pos, get_act_patch_attn_head_k_by_pos,
        get_act_patch_attn_head_v_by_pos)]
    parts.append(np.swapaxes(get_act_patch_attn_head_pattern_by_pos(model, corrupted_tokens, clean_cache,
                                                                   patching_metric), 1, 2))
    return np.stack(parts)


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
           "get_act_patch_attn_head_q_by_pos", "get_act_patch_attn_head_q_all_pos", "get_act_patch_attn_head_k_by_pos",
           "get_act_patch_attn_head_k_all_pos", "get_act_patch_attn_head_v_by_pos", "get_act_patch_attn_head_v_all_pos",
           "get_act_patch_attn_head_pattern_all_pos", "get_act_patch_attn_head_pattern_by_pos",
           "get_act_patch_attn_head_pattern_dest_src_pos", "get_act_patch_attn_head_all_pos_every",
           "get_act_patch_attn_head_by_pos_every",
           "attribution_patch", "get_attr_patch_resid_pre", "get_attr_patch_attn_head_out_by_pos"]
