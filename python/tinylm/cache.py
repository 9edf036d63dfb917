"""cache.py — ActivationCache: what run_with_cache returns, with TransformerLens' helpers.

A dict {hook name: NumPy array} (so cache["blocks.0.attn.hook_pattern"] works as before), every
array the cache's own memory, which the pass wrote itself (the engine's buffers are reused by the
next pass; the cache's are not): views of one buffer per cache (_ArenaPool). Also indexed as
TransformerLens does: cache["pattern", 0], cache["resid_post", -1], cache["q", 2, "attn"]; and
the residual-stream helpers accumulated_resid, decompose_resid, stack_head_results,
apply_ln_to_stack, logit_attrs. docs/python.md ("ActivationCache").
"""
import ctypes
import mmap
import numbers
import os
import threading
import weakref

import numpy as np

from ._core import _L, _err
from .utils import get_act_name


class _ArenaPool:
    """The memory of run_with_cache's arrays: one buffer per cache, reused once the last of that
    cache's arrays is gone, so that a loop of caches does not have the kernel clear fresh pages for
    each (which costs about as much as the pass: docs/python.md, "What a cache costs"). Keeps at
    most `keep` free buffers."""

    def __init__(self, keep=2):
        self._free = []
        self._lock = threading.Lock()
        self._keep = keep

    def take(self, n):
        """a float32 array of n floats, page-aligned, uninitialised"""
        nbytes = 4 * max(int(n), 16)
        with self._lock:
            fit = [i for i, mm in enumerate(self._free) if len(mm) >= nbytes]
            mm = self._free.pop(min(fit, key=lambda i: len(self._free[i]))) if fit else None
        if mm is None:
            mm = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # (private: a forked
            # process gets its own copy on write, as with NumPy's own memory)
            try:  # (2 MiB pages where the kernel gives them: fewer faults on first use)
                mm.madvise(mmap.MADV_HUGEPAGE)
            except (AttributeError, OSError, ValueError):
                pass
        arena = np.frombuffer(mm, dtype=np.float32, count=nbytes // 4)
        weakref.finalize(arena, self._give, mm)  # (the arrays are views of arena: it dies with the last)
        return arena

    def _give(self, mm):
        with self._lock:
            self._free.append(mm)
            del self._free[:-self._keep]

    def clear(self):
        with self._lock:
            self._free = []


def _pos(a, pos_slice, axis):
    """a with pos_slice applied on its position axis (None: all; an int drops the axis, as NumPy
    indexing; a slice or a list/array of positions keeps it)"""
    if pos_slice is None:
        return a
    idx = [slice(None)] * a.ndim
    idx[axis] = pos_slice
    return a[tuple(idx)]


class ActivationCache(dict):
    """{hook name: array} of one run_with_cache, plus TransformerLens' indexing and helpers.
    Arrays keep the batch axis when the ids had one ([B, T, ...]), else start at T."""

    def __init__(self, data, model):
        super().__init__(data)
        self.model = model
        self._cfg = model.config
        self.n_layers = model.n_layers
        self._W = None
        self.ids = None  # the token ids of the run (run_with_cache sets them): the views' tokens
        # the run's attention mask (bool like ids, True at real tokens) or None: the arrays hold 0 at
        # pads (hook_scale 1) and the helpers give 0 there
        self.attention_mask = None

    # ---- indexing ------------------------------------------------------------------------------

    def _key(self, key):
        if isinstance(key, tuple):
            if not key or not isinstance(key[0], str):
                raise KeyError("cache[%r]: a tuple key is (name, layer[, layer_type]), e.g. cache['pattern', 0]"
                               % (key,))
            key = list(key)
            if len(key) > 1 and isinstance(key[1], numbers.Integral) and not isinstance(key[1], bool):
                if not -self.n_layers <= key[1] < self.n_layers:
                    raise KeyError("cache[%r]: layer %d is outside the model's %d layers" % (tuple(key), key[1],
                                                                                           self.n_layers))
                key[1] = key[1] % self.n_layers
            return get_act_name(*key)
        return key

    def __getitem__(self, key):
        k = self._key(key)
        try:
            return dict.__getitem__(self, k)
        except KeyError:
            hint = "not cached (run_with_cache(names=...) left it out)" if k in self.model.hook_points \
                else "no such hook point in this model (model.hook_names lists them)"
            raise KeyError("cache[%r] = %r: %s" % (key, k, hint)) from None

    def __contains__(self, key):
        return dict.__contains__(self, self._key(key))

    def get(self, key, default=None):
        return dict.get(self, self._key(key), default)

    def __repr__(self):
        lines = ["ActivationCache(%d activations)" % len(self)]
        lines += ["  %s: %s %s" % (k, tuple(v.shape), v.dtype) for k, v in self.items()]
        return "\n".join(lines)

    __str__ = __repr__

    def __copy__(self):
        c = ActivationCache(self, self.model)
        c.ids, c.attention_mask = self.ids, self.attention_mask
        return c

    def __deepcopy__(self, memo):  # (the arrays copied; the model, which cannot be copied, shared)
        c = ActivationCache({k: v.copy() for k, v in self.items()}, self.model)
        c.ids = None if self.ids is None else self.ids.copy()
        c.attention_mask = None if self.attention_mask is None else self.attention_mask.copy()
        return c

    def __reduce__(self):  # pickling keeps the arrays, as a plain dict (a Model does not pickle)
        return (dict, (dict(self),))

    # ---- views (tinylm.views: the page of `tinylm inspect --html`) ---------------------------

    def _real_positions(self, batch):
        """the real positions (bool [T]) of row `batch` when the run had an attention mask, else None"""
        if self.attention_mask is None:
            return None
        m = np.asarray(self.attention_mask)
        return m[batch] if m.ndim == 2 else m

    def _view_tokens(self, batch, T):
        if self.ids is None:
            return None
        ids = np.asarray(self.ids)
        ids = ids[batch] if ids.ndim == 2 else ids
        real = self._real_positions(batch)
        if real is not None:
            ids = ids[real]
        try:
            return self.model.to_str_tokens(ids)
        except Exception:  # noqa: BLE001 (no tokenizer: the ids themselves)
            return ["#%d" % int(i) for i in ids]

    def view_attention(self, layers=None, batch=0, title=None):
        """The cached hook_pattern of `layers` (None: every cached layer; an int or a list) as an
        HTML view (tinylm.views.attention: the inspect page's heatmaps; Jupyter shows it, .save(path)
        writes it), with each head's largest score where hook_attn_scores is cached too. batch: the
        row of a [B, T] run; a padded run's view shows the row's real positions only. A patched run's
        cache (run_with_cache(..., fwd_hooks=...)) shows the patched patterns."""
        from . import views
        if layers is None:
            layers = [l for l in range(self.n_layers) if dict.__contains__(self, get_act_name("pattern", l))]
            if not layers:
                raise KeyError("view_attention: no hook_pattern in this cache (run_with_cache(names=...) left them out)")
        elif isinstance(layers, numbers.Integral):
            layers = [int(layers)]
        layers = [int(l) % self.n_layers if -self.n_layers <= int(l) < self.n_layers else self._bad_layer(l)
                  for l in layers]

        real = self._real_positions(batch)

        def pick(a):
            a = a[batch] if a.ndim == 4 else a
            return a if real is None else a[:, real][:, :, real]  # (a padded run: its real queries and keys)
        pats = np.stack([pick(self["pattern", l]) for l in layers])
        scores = None
        if all(dict.__contains__(self, get_act_name("attn_scores", l)) for l in layers):
            scores = np.stack([pick(self["attn_scores", l]) for l in layers])
        return views.attention(pats, tokens=self._view_tokens(batch, pats.shape[-1]), layers=layers, scores=scores,
                               title=title or "attention: %s" % os.path.basename(str(self.model.path)),
                               source=str(self.model.path))

    def _bad_layer(self, l):
        raise KeyError("view_attention: layer %r is outside the model's %d layers" % (l, self.n_layers))

    def view_positions(self, values, labels=None, batch=0, title=None, diverging=None):
        """values [T] or [rows, T] over this run's positions (e.g. a decompose_resid's logit_attrs)
        as an HTML view with the run's tokens (tinylm.views.positions); a padded run's values over all
        T positions are shown at row `batch`'s real positions only."""
        from . import views
        v = np.asarray(values)
        real = self._real_positions(batch)
        if real is not None and v.shape[-1] == real.size:
            v = v[..., real]
        T = v.shape[-1]
        toks = self._view_tokens(batch, T)
        if toks is not None and len(toks) != T:
            toks = None
        return views.positions(v, tokens=toks, labels=labels, title=title, diverging=diverging,
                               source=str(self.model.path))

    # ---- the residual stream ------------------------------------------------------------------

    def _real(self, stack, pos_slice):
        """stack [components, (B,) T, d] (pos_slice applied) with 0 at pad positions (attention_mask)"""
        if self.attention_mask is None:
            return stack
        m = _pos(np.asarray(self.attention_mask), pos_slice, -1)
        return stack * np.asarray(m, stack.dtype)[..., None]

    def _positions(self, T):
        """each position's index in the model's positions, [(B,) T]: arange(T), or with left padding
        counted from each row's first real token (pads 0), as the engine does"""
        if self.attention_mask is None:
            return np.arange(T)
        m = np.asarray(self.attention_mask)
        first = m.argmax(-1)
        return np.maximum(np.arange(T) - np.asarray(first)[..., None], 0)

    def _weights(self):
        if self._W is None:
            self._W = self.model.weights()
        return self._W

    def _layer_arg(self, layer, what):
        """layer None -> n_layers (everything); negative counts from the end, as TransformerLens"""
        L = self.n_layers
        if layer is None:
            return L
        if isinstance(layer, bool) or not isinstance(layer, numbers.Integral) or not -L <= layer <= L:
            raise ValueError("%s: layer = %r; must be an integer in [-%d, %d] or None" % (what, layer, L, L))
        return layer % (L + 1) if layer < 0 else layer

    def accumulated_resid(self, layer=None, incl_mid=False, apply_ln=False, pos_slice=None, mlp_input=False,
                          return_labels=False):
        """The residual stream entering each layer up to `layer` (None: all, then the stream
        after the last layer too), stacked [components, ..., T, d]: blocks.l.hook_resid_pre
        ("l_pre"), with incl_mid also hook_resid_mid ("l_mid"); mlp_input adds layer's resid_mid
        (the MLP's input); layer = n_layers ends with the last hook_resid_post ("final_post").
        apply_ln: through apply_ln_to_stack with the norm that reads the last component."""
        L = self.n_layers
        layer = self._layer_arg(layer, "accumulated_resid")
        comps, labels = [], []
        for l in range(layer + 1):
            if l == L:
                comps.append(self["blocks.%d.hook_resid_post" % (L - 1)])
                labels.append("final_post")
                continue
            comps.append(self["blocks.%d.hook_resid_pre" % l])
            labels.append("%d_pre" % l)
            if (incl_mid and l < layer) or (mlp_input and l == layer):
                comps.append(self["blocks.%d.hook_resid_mid" % l])
                labels.append("%d_mid" % l)
        stack = _pos(np.stack(comps), pos_slice, -2)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input=mlp_input, pos_slice=pos_slice)
        return (stack, labels) if return_labels else stack

    def _additive(self, what):
        c = self._cfg
        if c.get("layer_scalar"):  # Gemma 4: every layer scales the whole stream
            raise ValueError("%s: the layer scalar multiplies the residual stream after every layer: it is not a "
                             "sum of what each sublayer writes, there is no decomposition" % what)
        if c.get("norm_placement") in ("post", "deepnorm") or not c.get("residual", True):
            raise ValueError("%s: the residual stream of this model is not a sum of what each sublayer writes "
                             "(norm_placement %r, residual %r): there is no decomposition"
                             % (what, c.get("norm_placement"), c.get("residual", True)))

    def decompose_resid(self, layer=None, mlp_input=False, mode="all", apply_ln=False, pos_slice=None,
                        incl_embeds=True, return_labels=False):
        """The residual stream entering `layer` (None: after the last layer) as the sum of what
        each piece wrote, stacked [components, ..., T, d]: "embed" (the token embedding; with
        learned positions "embed" + "pos_embed" = W_pos[:T]), then per layer "l_attn_out" and
        "l_mlp_out" (mode "attn" / "mlp": only those); mlp_input adds layer's attention output.
        Sums to blocks.{layer}.hook_resid_pre (pre-norm, sandwich and output placements; a
        post-norm model has no such decomposition: ValueError)."""
        self._additive("decompose_resid")
        if mode not in ("all", "attn", "mlp"):
            raise ValueError("decompose_resid: mode = %r; one of 'all', 'attn', 'mlp'" % (mode,))
        layer = self._layer_arg(layer, "decompose_resid")
        comps, labels = [], []
        if incl_embeds:
            emb = self["hook_embed"]
            W = self._weights()
            if "W_pos" in W:
                T = emb.shape[-2]
                pos = np.asarray(W["W_pos"], np.float32)[self._positions(T)]  # [(B,) T, d]
                pos = self._real(np.broadcast_to(pos, emb.shape)[None], None)[0]
                comps += [emb - pos, pos]
                labels += ["embed", "pos_embed"]
            else:
                comps.append(emb)
                labels.append("embed")
        for l in range(layer + (1 if mlp_input else 0)):
            if mode in ("all", "attn"):
                comps.append(self["blocks.%d.hook_attn_out" % l])
                labels.append("%d_attn_out" % l)
            if mode in ("all", "mlp") and l < layer:
                comps.append(self["blocks.%d.hook_mlp_out" % l])
                labels.append("%d_mlp_out" % l)
        stack = _pos(np.stack(comps), pos_slice, -2)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input=mlp_input, pos_slice=pos_slice)
        return (stack, labels) if return_labels else stack

    def stack_head_results(self, layer=None, return_labels=False, incl_remainder=False, pos_slice=None,
                           apply_ln=False):
        """What each attention head of the layers before `layer` (None or -1: every layer)
        writes, [L*H, ..., T, d] labelled "L{l}H{h}": hook_z[..., h, :] @ W_O[l, h] (TransformerLens'
        hook_result, computed here; b_O belongs to no head and is left out). Summed over a
        layer's heads + b_O it is hook_attn_out (pre, post placements) or hook_attn_out_pre_norm
        (sandwich, output: the output norm comes after). incl_remainder adds blocks.{layer}
        .hook_resid_pre minus their sum ("remainder")."""
        if layer is None or layer == -1:
            layer = self.n_layers
        layer = self._layer_arg(layer, "stack_head_results")
        W_O = self._weights()["W_O"]
        comps, labels = [], []
        for l in range(layer):
            z = self["blocks.%d.attn.hook_z" % l].astype(np.float64)          # [..., T, H, hd]
            r = np.einsum("...hk,hkd->h...d", z, W_O[l].astype(np.float64))  # [H, ..., T, d]
            comps.extend(r.astype(np.float32))
            labels += ["L%dH%d" % (l, h) for h in range(r.shape[0])]
        if not comps:
            raise ValueError("stack_head_results: layer = 0 leaves no heads")
        stack = np.stack(comps)
        if incl_remainder:
            self._additive("stack_head_results(incl_remainder=True)")
            resid = self["blocks.%d.hook_resid_post" % (self.n_layers - 1)] if layer == self.n_layers \
                else self["blocks.%d.hook_resid_pre" % layer]
            stack = np.concatenate([stack, (resid - stack.sum(0))[None]])
            labels.append("remainder")
        stack = _pos(stack, pos_slice, -2)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, pos_slice=pos_slice)
        return (stack, labels) if return_labels else stack

    def stack_neuron_results(self, layer=None, pos_slice=None, neuron_slice=None, return_labels=False,
                             incl_remainder=False, apply_ln=False):
        """What each MLP neuron of the layers before `layer` (None or -1: every layer) writes,
        [L*f', ..., T, d] labelled "L{l}N{n}": hook_post[..., n] * W_out[l, n] (b_out belongs to
        no neuron). neuron_slice picks neurons (a slice or a list). Summed over a layer's neurons
        + b_out it is hook_mlp_out (pre, post placements) or hook_mlp_out_pre_norm (sandwich,
        output). incl_remainder adds the stream at `layer` minus their sum ("remainder")."""
        if layer is None or layer == -1:
            layer = self.n_layers
        layer = self._layer_arg(layer, "stack_neuron_results")
        self._neurons_decompose("stack_neuron_results", layer)
        W_out = self._weights()["W_out"]
        comps, labels = [], []
        for l in range(layer):
            f = W_out[l].shape[0]
            keep = np.arange(f)[neuron_slice] if neuron_slice is not None else np.arange(f)
            post = self["blocks.%d.mlp.hook_post" % l]  # [..., T, f]
            r = np.einsum("...n,nd->n...d", post[..., keep].astype(np.float64), W_out[l][keep].astype(np.float64))
            comps.append(_pos(r, pos_slice, -2).astype(np.float32))
            labels += ["L%dN%d" % (l, n) for n in keep]
        if not comps:
            raise ValueError("stack_neuron_results: layer = 0 leaves no neurons")
        stack = np.concatenate(comps)
        if incl_remainder:
            self._additive("stack_neuron_results(incl_remainder=True)")
            resid = self["blocks.%d.hook_resid_post" % (self.n_layers - 1)] if layer == self.n_layers \
                else self["blocks.%d.hook_resid_pre" % layer]
            stack = np.concatenate([stack, (_pos(resid, pos_slice, -2) - stack.sum(0))[None]])
            labels.append("remainder")
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, pos_slice=pos_slice)
        return (stack, labels) if return_labels else stack

    def compute_head_results(self):
        """TransformerLens' compute_head_results: adds blocks.{l}.attn.hook_result [..., T, H, d] to the
        cache for every layer with a cached hook_z — each head's write, hook_z[..., h, :] @ W_O[l, h],
        computed from the cached hook_z and W_O (tinylm has no hook_result point; b_O is in no head)"""
        W_O = self._weights()["W_O"]
        done = 0
        for l in range(self.n_layers):
            z = self.get("blocks.%d.attn.hook_z" % l)
            if z is None or W_O[l] is None:
                continue
            r = np.einsum("...hk,hkd->...hd", z.astype(np.float64), W_O[l].astype(np.float64))
            dict.__setitem__(self, "blocks.%d.attn.hook_result" % l, r.astype(np.float32))
            done += 1
        if not done:
            raise KeyError("compute_head_results: no blocks.{l}.attn.hook_z in this cache (run_with_cache(names=...) "
                           "left them out)")

    def stack_activation(self, activation_name, layer=-1, sublayer_type=None):
        """TransformerLens' stack_activation: cache[activation_name, l, sublayer_type] for l in
        range(layer) (-1 or None: every layer), stacked [l, ...]"""
        n = self.n_layers if layer is None or layer == -1 else self._layer_arg(layer, "stack_activation")
        if n == 0:
            raise ValueError("stack_activation: layer = 0 leaves nothing to stack")
        key = (activation_name,) + ((sublayer_type,) if sublayer_type is not None else ())
        return np.stack([self[(key[0], l) + key[1:]] for l in range(n)])

    def get_neuron_results(self, layer, neuron_slice=None, pos_slice=None):
        """TransformerLens' get_neuron_results: what each neuron of layer's MLP writes, [..., T, f', d]
        = hook_post[..., n] * W_out[layer, n] (refused where the layer has no dense neurons)"""
        layer = self._layer_arg(layer, "get_neuron_results")
        if layer >= self.n_layers:
            raise ValueError("get_neuron_results: layer = %d; the model has %d layers" % (layer, self.n_layers))
        self._neurons_decompose("get_neuron_results", layer + 1)
        W_out = self._weights()["W_out"][layer]
        post = _pos(self["blocks.%d.mlp.hook_post" % layer], pos_slice, -2)
        keep = np.arange(W_out.shape[0])[neuron_slice] if neuron_slice is not None else np.arange(W_out.shape[0])
        r = post[..., keep, None].astype(np.float64) * W_out[keep].astype(np.float64)
        return r.astype(np.float32)

    def _neurons_decompose(self, what, layer):
        """refuses (ValueError naming the model kind and why) when the FFN output of a layer before
        `layer` is not the sum of its dense neurons' writes (+ b_out)"""
        c = self._cfg
        if c.get("enable_moe_block"):
            raise ValueError("%s: this model has Gemma 4's MoE block (enable_moe_block): each layer's dense MLP output "
                             "goes through its own RMSNorm (ln2_dense_out) and is added to the experts' normed output, "
                             "so its neurons do not sum to what the FFN writes (a norm is not linear) and the experts "
                             "are no neurons: there is no neuron decomposition of this model" % what)
        moe = self._weights().moe_layers
        hit = [l for l in moe if l < layer]
        if hit:
            raise ValueError("%s: layer %d is a mixture of experts (num_experts %s): its FFN output is the router-weighted "
                             "sum of the chosen experts' outputs (mlp.hook_expert_out x mlp.hook_expert_weights), with "
                             "no dense neurons; stop before it (layer=%d)%s" % (
                                 what, hit[0], c.get("num_experts"), hit[0],
                                 ", or expand_neurons=False (each layer's hook_mlp_out as one component)"
                                 if what == "get_full_resid_decomposition" else ""))

    def get_full_resid_decomposition(self, layer=None, mlp_input=False, expand_neurons=True, apply_ln=False,
                                     pos_slice=None, return_labels=False):
        """The stream at `layer` as every head's result (stack_head_results), every neuron's
        (stack_neuron_results; expand_neurons=False: each layer's hook_mlp_out minus b_out), the
        embeddings (as decompose_resid) and one "bias" component (the b_O and b_out of those
        layers); it sums to the stream. Only where both sublayers add their linear output to the
        stream (pre-norm, no output norms): sandwich, output and post placements: ValueError."""
        self._additive("get_full_resid_decomposition")
        if self._cfg.get("norm_placement") not in ("pre", "none"):
            raise ValueError("get_full_resid_decomposition: with norm_placement %r a sublayer's output norm comes "
                             "after its heads / neurons: they do not sum to what it writes"
                             % self._cfg.get("norm_placement"))
        layer = self._layer_arg(layer, "get_full_resid_decomposition")
        if expand_neurons:
            self._neurons_decompose("get_full_resid_decomposition", layer)
        W = self._weights()
        comps, labels = [], []
        n_attn = layer + (1 if mlp_input else 0)
        if n_attn:
            h, hl = self.stack_head_results(layer=n_attn, return_labels=True, pos_slice=pos_slice)
            comps.append(h)
            labels += hl
        if layer:
            if expand_neurons:
                nr, nl = self.stack_neuron_results(layer=layer, return_labels=True, pos_slice=pos_slice)
                comps.append(nr)
                labels += nl
            else:
                for l in range(layer):
                    out = self["blocks.%d.hook_mlp_out" % l] - (W["b_out"][l] if "b_out" in W else 0)
                    comps.append(_pos(out, pos_slice, -2)[None].astype(np.float32))
                    labels.append("%d_mlp_out" % l)
        e, el = self.decompose_resid(layer=0, pos_slice=pos_slice, return_labels=True)
        comps.append(e)
        labels += el
        ref = comps[0][0]
        bias = np.zeros(ref.shape, np.float64)
        for l in range(n_attn):
            bias = bias + (W["b_O"][l] if "b_O" in W else 0)
        for l in range(layer):
            bias = bias + (W["b_out"][l] if "b_out" in W else 0)
        comps.append(self._real(bias[None].astype(np.float32), pos_slice))
        labels.append("bias")
        stack = self._real(np.concatenate(comps), pos_slice)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input=mlp_input, pos_slice=pos_slice)
        return (stack, labels) if return_labels else stack

    def _norm_for(self, layer, mlp_input):
        """(hook prefix, norm weight name) of the norm that reads the stream at `layer`, (None, None)
        where none does: the engine's rule for the model's norm placement (tlm_input_norm)"""
        h = self.model.__dict__.get("_h")
        if h is None:
            raise ValueError("apply_ln_to_stack: the model of this cache is closed")
        name = ctypes.create_string_buffer(64)
        rc = _L.tlm_input_norm(h, layer, 1 if mlp_input else 0, name, len(name))
        if rc < 0:
            raise _err("apply_ln_to_stack")
        ln = name.value.decode() if rc else None
        return (ln, ln + ".w") if ln else (None, None)

    def apply_ln_to_stack(self, residual_stack, layer=None, mlp_input=False, pos_slice=None):
        """Each component of a stack [..., T, d] (summing to the stream at `layer`) through the
        norm that reads that stream — the final norm for layer None / n_layers, else layer's ln1
        (ln2 with mlp_input) — linearised as TransformerLens does with the cached hook_scale of
        the whole stream: LayerNorm centres each component, then / scale; then the gain (w, or
        1 + w for rmsnorm_1p) is applied too (TransformerLens folds it into the next matrix;
        tinylm does not fold). The norm's bias is not added (it belongs to no component). Where
        no norm reads the stream the stack comes back unchanged. pos_slice: as the stack's, when
        it was sliced. DyT has no scale: ValueError."""
        layer = self._layer_arg(layer, "apply_ln_to_stack")
        prefix, wname = self._norm_for(layer, mlp_input)
        x = np.asarray(residual_stack, np.float32)
        if prefix is None:
            return x.copy()
        c = self._cfg
        if c.get("norm_type") == "dyt":
            raise ValueError("apply_ln_to_stack: a DyT norm (tanh) has no scale to linearise with")
        scale = _pos(self[prefix + ".hook_scale"], pos_slice, -2)  # [..., T, 1]
        x = x.astype(np.float64)
        if c.get("norm_type") == "layernorm":
            x = x - x.mean(-1, keepdims=True)
        x = x / scale
        gain = self._weights().norm_gain(wname)
        return (x * gain).astype(np.float32)

    def logit_attrs(self, residual_stack, tokens, incorrect_tokens=None, pos_slice=None):
        """Each component's direct contribution to the logit of `tokens` (minus that of
        incorrect_tokens when given): (stack * (W_U[:, tokens] - W_U[:, incorrect])).sum(-1).
        tokens: an id, or ids broadcasting against the stack's positions ([T], or [B, T]); a string
        (or a list of strings) that is one token each, as TransformerLens takes.
        The stack should be normed first (apply_ln_to_stack) for logits; the final soft-cap
        (Gemma 2) is not linear and not applied."""
        W_U = self._weights()["W_U"]
        V = W_U.shape[1]

        def ids(t, what):
            if isinstance(t, str):  # (TransformerLens: a string that is one token)
                t = self.model.to_single_token(t)
            elif isinstance(t, (list, tuple)) and t and all(isinstance(x, str) for x in t):
                t = [self.model.to_single_token(x) for x in t]
            a = np.asarray(t)
            if a.dtype.kind not in "iu":
                raise TypeError("logit_attrs: %s must be token ids (integers), got %s" % (what, a.dtype))
            if a.size and (a.min() < 0 or a.max() >= V):
                raise ValueError("logit_attrs: %s holds an id outside the vocabulary [0, %d)" % (what, V))
            return _pos(a, pos_slice, -1) if a.ndim else a

        direction = np.asarray(W_U, np.float64).T[ids(tokens, "tokens")]  # [..., d]
        if incorrect_tokens is not None:
            direction = direction - np.asarray(W_U, np.float64).T[ids(incorrect_tokens, "incorrect_tokens")]
        return (np.asarray(residual_stack, np.float64) * direction).sum(-1).astype(np.float32)
