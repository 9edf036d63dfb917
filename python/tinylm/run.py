"""run.py — a Model's passes (RunMixin): model(ids), loss, param_grads, run_with_hooks and
run_with_cache, each one forward (and backward) of the engine with the hooks attached."""
import ctypes
import math

import numpy as np

from . import _lib
from ._core import _L, _err, _int_array
from .cache import ActivationCache
from .metrics import _metric_dlogits


class RunMixin:
    # ---- running ----------------------------------------------------------------------------

    def _ids2(self, ids, what):
        ids = _int_array(ids, what, self.vocab_size)
        squeeze = ids.ndim == 1
        ids2 = ids.reshape(1, -1) if squeeze else ids
        if ids2.ndim != 2:
            raise ValueError("%s: ids must be a [T] or [B, T] array of token ids, got shape %s" % (what, ids.shape))
        return ids2, squeeze

    def _run(self, ids, targets=None, fwd=None, bwd=None, writes=(), backward=None, what="forward", grads=None,
             attention_mask=None, bwd_writes=(), capture=None):
        """One forward (and backward) with hook functions attached: fwd/bwd {hook id: [fn(view, hook)]}.
        backward: None, "loss", or a dlogits callable(logits) -> array. attention_mask: as _mask (the
        left padding goes to the engine; a metric's gradient is zero at pads). bwd_writes: the ids
        whose backward functions may edit the gradient. capture: a function (B, T) -> the (fwd, bwd)
        address tables of tlm_set_capture (the pass writes those points into them), called with the
        model held. Returns (logits copy, loss)."""
        ids2, squeeze = self._ids2(ids, what)
        B, T = ids2.shape
        if (targets is not None or backward == "loss") and T < 2:
            raise ValueError("%s: the loss needs at least 2 tokens (a sequence of %d has nothing to predict)"
                             % (what, T))
        mask, start = self._mask(ids2, attention_mask, what)
        IP = ctypes.POINTER(ctypes.c_int)
        tg = None
        if targets is not None:
            tg = np.ascontiguousarray(np.asarray(targets).reshape(B, T), dtype=np.int32)
        fwd, bwd = fwd or {}, bwd or {}
        hooked = bool(fwd or bwd or capture)
        with self._using(what) as h, self._sigint_flag(bool(fwd or bwd)):  # (no callback: Ctrl-C after the pass)
            if hooked:
                # each row's own positions, shaped as the activations' leading axes ([T], or [B, T]): a
                # left-padded row counts from its first real token (its pads: 0), as the engine does
                pos = np.broadcast_to(np.arange(T), (B, T)) if start is None else \
                    np.maximum(np.arange(T)[None, :] - start[:, None], 0)
                self._attach(h, fwd, bwd, writes, squeeze, B, T, pos[0] if squeeze else pos, mask=mask, start=start,
                             bwd_writes=bwd_writes)
                if capture is not None:
                    cf, cb = capture(B, T)
                    if _L.tlm_set_capture(h, cf, cb):
                        raise _err(what)
            try:
                loss = ctypes.c_float(float("nan"))
                tgp = tg.ctypes.data_as(IP) if tg is not None else None
                if start is None:
                    rc = _L.tlm_forward(h, ids2.ctypes.data_as(IP), tgp, B, T, ctypes.byref(loss))
                else:
                    rc = _L.tlm_forward_padded(h, ids2.ctypes.data_as(IP), tgp, start.ctypes.data_as(IP), B, T,
                                               ctypes.byref(loss))
                self._raise_after(rc, what, "forward", len(fwd), 0)
                logits = np.ctypeslib.as_array(_L.tlm_logits(h), shape=(B, T, self.vocab_size)).copy()
                if backward is not None:
                    _L.tlm_zero_grad(h)
                    if backward == "loss":
                        rc = _L.tlm_backward(h, 1.0)
                    else:
                        g = backward(logits[0] if squeeze else logits).reshape(B, T, self.vocab_size)
                        g = np.ascontiguousarray(g, dtype=np.float32)
                        if mask is not None:
                            g[~mask] = 0.0  # (a pad's logits are nobody's: no gradient from them)
                        rc = _L.tlm_backward_logits(h, g.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
                    self._raise_after(rc, what, "backward", len(fwd), len(bwd))
                    if grads is not None:  # {name: None} -> the parameters' gradients (copies)
                        n = ctypes.c_size_t()
                        for name in grads:
                            p = _L.tlm_grad(h, name.encode(), ctypes.byref(n))
                            if not p:
                                raise _err(what)
                            grads[name] = np.ctypeslib.as_array(p, shape=(n.value,)).copy()
            finally:
                if hooked:
                    st = (ctypes.c_int64 * 4)()
                    if not _L.tlm_hook_stats(h, st):  # (what the engine did for the hooks and the cache)
                        self._pass_stats = dict(zip(("written", "callbacks", "maps", "side_floats"), st))
                    _L.tlm_set_hooks(h, _lib.HOOK_FN(), None, None, None)
                    self._active, self._exc = None, None
        return (logits[0] if squeeze else logits), loss.value

    def _backward_how(self, ids2, metric, attention_mask, what):
        """(how, targets) for _run: the loss's backward (pads left out), or a metric's"""
        if metric is None:
            return "loss", self._loss_targets(ids2, attention_mask, what)
        return (lambda logits: _metric_dlogits(metric, logits)), None

    def _next_targets(self, ids):
        ids = np.asarray(ids)
        t = np.full(ids.shape, -1, dtype=np.int32)
        t[..., :-1] = ids[..., 1:]
        return t

    def __call__(self, ids, fwd_hooks=None, attention_mask=None, return_type="logits", loss_per_token=False,
                 prepend_bos=None, padding_side=None):
        """Logits [T, vocab] (or [B, T, vocab] for [B, T] ids), float32. attention_mask (bool like
        ids, from tokenize_batch; left and/or right padding): no real token attends to a pad and
        positions count from each row's first real token, so the real positions' logits are each
        text's own (the pads' are meaningless). ids may be a text (tokenized with BOS) or a list of
        texts (tokenize_batch's right padding, with its mask), as everywhere ids are taken.
        return_type (TransformerLens'): "logits", "loss" (loss(); loss_per_token=True: per position),
        "both" ((logits, loss) of one pass) or None. prepend_bos= / padding_side=: how texts are
        tokenized (TransformerLens' per-call keywords; None: BOS, right padding)."""
        ids, attention_mask = self._text_input(ids, attention_mask, "forward", prepend_bos, padding_side)
        if return_type not in ("logits", "loss", "both", None):
            raise ValueError("forward: return_type = %r; 'logits', 'loss', 'both' or None" % (return_type,))
        if return_type in ("loss", "both"):
            logits, loss = self._logits_loss(ids, fwd_hooks, attention_mask, loss_per_token, "forward")
            return loss if return_type == "loss" else (logits, loss)
        fwd, writes = self._fwd_table(fwd_hooks)
        logits = self._run(ids, fwd=fwd, writes=writes, attention_mask=attention_mask)[0]
        return logits if return_type else None

    forward = __call__

    def param_grads(self, ids, names=None, metric=None, attention_mask=None, bwd_hooks=(), prepend_bos=None,
                    padding_side=None):
        """{parameter name (docs/tensors.md, model.param_names): gradient}, float32 copies shaped
        as the parameter, of the loss (mean next-token cross-entropy; attention_mask as loss()) or,
        with metric= (as run_with_cache's: (pos, good, bad), an array, a tinylm.metrics metric or a
        function), of that metric of the logits; names: a list or None (every parameter).
        bwd_hooks: as run_with_hooks' (edited gradients flow on to the parameters)."""
        if isinstance(names, str):
            names = [names]  # (one name, not its characters)
        table = {n: None for n in (self.param_names if names is None else names)}
        unknown = [n for n in table if n not in set(self.param_names)]
        if unknown:
            raise KeyError("param_grads: no parameter named %r (model.param_names lists them)" % unknown[0])
        ids, attention_mask = self._text_input(ids, attention_mask, "param_grads", prepend_bos, padding_side)
        ids2, _ = self._ids2(ids, "param_grads")
        how, targets = self._backward_how(ids2, metric, attention_mask, "param_grads")
        bwd = self._bwd_table(bwd_hooks)
        self._run(ids, targets=targets, bwd=bwd, bwd_writes=set(bwd), backward=how, what="param_grads", grads=table,
                  attention_mask=attention_mask)
        shapes = self._param_shapes()
        return {n: g.reshape(shapes[n]) for n, g in table.items()}
    def loss(self, ids, fwd_hooks=None, attention_mask=None, per_token=False, prepend_bos=None, padding_side=None):
        """Mean next-token cross-entropy of ids (each position predicts the next; at least 2 tokens).
        attention_mask (bool like ids, from tokenize_batch; left and/or right padding): the pass
        honours it (as model()) and positions that are pads or whose next token is a pad are left
        out of the mean. per_token=True: the loss of each position instead, float32 [.., T-1]
        (NaN where left out), from the pass's logits in float64."""
        ids, attention_mask = self._text_input(ids, attention_mask, "loss", prepend_bos, padding_side)
        return self._logits_loss(ids, fwd_hooks, attention_mask, per_token, "loss")[1]

    def _logits_loss(self, ids, fwd_hooks, attention_mask, per_token, what):
        """(logits, loss) of one pass: the mean loss, or per position (float32 [.., T-1], NaN where left out)"""
        fwd, writes = self._fwd_table(fwd_hooks)
        ids2, squeeze = self._ids2(ids, what)
        targets = self._loss_targets(ids2, attention_mask, what)
        if not per_token:
            return self._run(ids, targets=targets, fwd=fwd, writes=writes, what=what, attention_mask=attention_mask)
        if ids2.shape[1] < 2:
            raise ValueError("%s: the loss needs at least 2 tokens (a sequence of %d has nothing to predict)"
                             % (what, ids2.shape[1]))
        out_logits = self._run(ids2, fwd=fwd, writes=writes, what=what, attention_mask=attention_mask)[0]
        logits = out_logits.astype(np.float64)[:, :-1]
        z = logits - logits.max(axis=-1, keepdims=True)
        lse = np.log(np.exp(z).sum(axis=-1))
        t = targets[:, :-1]
        picked = np.take_along_axis(z, np.maximum(t, 0)[..., None], axis=-1)[..., 0]
        out = np.where(t >= 0, lse - picked, np.nan).astype(np.float32)
        return (out_logits[0], out[0]) if squeeze else (out_logits, out)

    def run_with_hooks(self, ids, fwd_hooks=(), return_loss=False, attention_mask=None, bwd_hooks=(), metric=None,
                       prepend_bos=None, padding_side=None, clear_contexts=False):
        """Logits with fwd_hooks = [(name or name -> bool, fn(activation, hook))] attached: fn sees
        the activation (its own copy of the engine's buffer) and may return a replacement of the
        same shape (or change it in place); the pass continues from it.

        bwd_hooks = [(name, fn(gradient, hook))]: the backward runs too (of the loss, or of metric=
        as run_with_cache's), and fn sees the gradient at that point as it flows back and may edit
        it in place or return a replacement: everything upstream (earlier points, the parameters'
        gradients) is computed from what it leaves — TransformerLens' backward hooks, whose
        backward is `loss.backward()`. attention_mask: as model(). hook.ctx (a dict per hook point) carries
        what a forward hook keeps to the backward hook of the same point; clear_contexts=True empties
        every point's ctx after the call."""
        if not isinstance(clear_contexts, bool):
            raise TypeError("run_with_hooks: clear_contexts must be True or False")
        try:
            return self._run_with_hooks(ids, fwd_hooks, return_loss, attention_mask, bwd_hooks, metric, prepend_bos,
                                        padding_side)
        finally:
            if clear_contexts:
                self.clear_contexts()

    def _run_with_hooks(self, ids, fwd_hooks, return_loss, attention_mask, bwd_hooks, metric, prepend_bos,
                        padding_side):
        ids, attention_mask = self._text_input(ids, attention_mask, "run_with_hooks", prepend_bos, padding_side)
        fwd, writes = self._fwd_table(fwd_hooks)
        bwd = self._bwd_table(bwd_hooks, persistent=False)
        if bwd or metric is not None:  # (add_hook's backward hooks join a backward the call runs anyway)
            bwd = self._bwd_table(bwd_hooks)
        ids2 = self._ids2(ids, "run_with_hooks")[0]
        how = targets = None
        if bwd:
            how, targets = self._backward_how(ids2, metric, attention_mask, "run_with_hooks")
        elif metric is not None:
            raise ValueError("run_with_hooks: metric= is what bwd_hooks' backward differentiates; no bwd_hooks given")
        if return_loss and targets is None:
            targets = self._loss_targets(ids2, attention_mask, "run_with_hooks")
        logits, loss = self._run(ids, targets=targets, fwd=fwd, bwd=bwd, writes=writes, backward=how,
                                 what="run_with_hooks", attention_mask=attention_mask, bwd_writes=set(bwd))
        return (logits, loss) if return_loss else logits

    def run_with_cache(self, ids, names=None, backward=False, metric=None, fwd_hooks=(), attention_mask=None,
                       bwd_hooks=(), names_filter=None, remove_batch_dim=False, return_cache_object=True,
                       prepend_bos=None, padding_side=None):
        """(logits, cache): cache {hook name: activation copy} for the selected names (None: all;
        a list; a callable name -> bool). backward=True also differentiates the loss (or metric=:
        (pos, good, bad) for logits[pos, good] - logits[pos, bad], an array d metric / d logits,
        or a callable logits -> that array) with tinylm's backward and stores name + "_grad"
        at every selected point that has one. fwd_hooks run first (the cache holds their result);
        bwd_hooks (with backward=True) edit gradients as run_with_hooks' do, and the cache holds
        the edited gradient at their point. attention_mask (bool like ids, from tokenize_batch):
        the pass honours it (as model()), the loss leaves pads out, and the cache holds zeros at
        pad positions (activations and gradients; pattern rows of pad queries 0, their scores -inf;
        hook_scale 1, so that the cache's helpers give 0 there); cache.attention_mask keeps it.
        TransformerLens' keywords: names_filter= (as names=), remove_batch_dim=True (ids [1, T] or one
        text in a list: the cache's arrays without the batch axis; the logits keep it),
        return_cache_object=False (a plain dict), prepend_bos= / padding_side= (as model())."""
        if names_filter is not None:
            if names is not None:
                raise TypeError("run_with_cache: names= and names_filter= are one argument; give one")
            names = names_filter
        ids, attention_mask = self._text_input(ids, attention_mask, "run_with_cache", prepend_bos, padding_side)
        if not isinstance(remove_batch_dim, bool):
            raise TypeError("run_with_cache: remove_batch_dim must be True or False")
        if remove_batch_dim:
            a = np.asarray(ids)
            if a.ndim != 2 or a.shape[0] != 1:
                raise ValueError("run_with_cache: remove_batch_dim=True needs a batch of one ([1, T] ids), got ids of "
                                 "shape %s" % (a.shape,))
            logits, c = self.run_with_cache(a[0], names, backward, metric, fwd_hooks,
                                            None if attention_mask is None else np.asarray(attention_mask)[0],
                                            bwd_hooks, return_cache_object=return_cache_object)
            return logits[None], c
        sel = self._resolve(names)
        fwd, writes = self._fwd_table(fwd_hooks)
        if self._bwd_table(bwd_hooks, persistent=False) and not backward:
            raise ValueError("run_with_cache: bwd_hooks need backward=True")
        ubwd = self._bwd_table(bwd_hooks) if backward else {}
        bwd = {i: list(f) for i, f in ubwd.items()}
        how = None
        targets = None
        ids2, squeeze = self._ids2(ids, "run_with_cache")
        if backward:
            how, targets = self._backward_how(ids2, metric, attention_mask, "run_with_cache")
        elif metric is not None:
            raise ValueError("run_with_cache: metric= needs backward=True")
        # The cache's arrays are views of one buffer allocated here, which the pass writes itself
        # (tlm_set_capture: after any hook function at the point, so the cache holds what the hooks
        # left; hook_scale as the scale, masked scores -inf); no copy is made afterwards.
        want = [(hp, False) for hp in sel]
        if backward:
            want += [(hp, True) for hp in sel if not hp.flags & _lib.HOOK_NO_GRAD]
        cache = {}

        def plan(B, T):  # (with the model held: the shapes come from the engine)
            shapes = self._point_shapes(B, T)
            offsets, total = [], 0
            for hp, g in want:
                offsets.append(total)
                total += (shapes[hp.id][1] + 15) // 16 * 16  # (each array on a 64-byte line)
            arena = self._arenas.take(total)
            base = arena.ctypes.data
            tables = ((ctypes.c_void_p * self._n_hooks)(), (ctypes.c_void_p * self._n_hooks)())
            for (hp, g), off in zip(want, offsets):
                shp, n = shapes[hp.id]
                a = arena[off:off + n].reshape(shp)
                tables[1 if g else 0][hp.id] = base + 4 * off
                cache[hp.name + "_grad" if g else hp.name] = a[0] if squeeze else a
            cache[None] = tables  # (alive until the pass is over)
            return (ctypes.cast(tables[0], ctypes.c_void_p),
                    ctypes.cast(tables[1], ctypes.c_void_p) if backward else None)
        logits, loss = self._run(ids, targets=targets, fwd=fwd, bwd=bwd, writes=writes, backward=how,
                                 what="run_with_cache", attention_mask=attention_mask, bwd_writes=set(ubwd),
                                 capture=plan)
        del cache[None]
        ordered = ActivationCache({}, self)
        ordered.ids = np.array(ids, dtype=np.int32, copy=True)
        mask, _ = self._mask(ids2, attention_mask, "run_with_cache")
        if mask is not None:
            squeeze = np.asarray(ids).ndim == 1
            ordered.attention_mask = mask[0].copy() if squeeze else mask.copy()
            for k, v in cache.items():
                self._zero_pads(k, v, mask, squeeze)
        for hp in sel:  # forward order, gradients after their activation
            for k in (hp.name, hp.name + "_grad"):
                if k in cache:
                    dict.__setitem__(ordered, k, cache[k])
        return logits, (ordered if return_cache_object else dict(ordered))

    def _point_shapes(self, B, T):
        """{hook id: (shape, size)} of every point for a pass [B, T] (tlm_hook_info; kept per (B, T))"""
        key = (B, T)
        got = self._shapes.get(key)
        if got is None:
            shape = (ctypes.c_int64 * 5)()
            flags = ctypes.c_int()
            got = {}
            for i in self._by_id:
                nd = _L.tlm_hook_info(self._h, i, None, 0, B, T, shape, ctypes.byref(flags))
                shp = tuple(int(shape[j]) for j in range(nd))
                got[i] = (shp, math.prod(shp))
            if len(self._shapes) > 64:
                self._shapes.clear()
            self._shapes[key] = got
        return got

    def _zero_pads(self, key, a, mask, squeeze):
        """a cached array (in place) at the pad positions of mask [B, T]: 0 (hook_scale: 1; a pad
        query's attention scores: -inf)"""
        name = key[:-5] if key.endswith("_grad") else key
        hp = self.hook_points.get(name)
        pad = ~mask  # [B, T]
        if squeeze:
            pad = pad[0]
        if hp is not None and name.endswith(("attn.hook_pattern", "attn.hook_attn_scores")):
            q = pad[..., None, :, None]  # [(B,) 1, T, 1]: the query axis
            np.copyto(a, np.float32(-np.inf) if name.endswith("scores") and key == name else np.float32(0),
                      where=np.broadcast_to(q, a.shape))
            return
        idx = pad.reshape(pad.shape + (1,) * (a.ndim - pad.ndim))
        fill = 1.0 if (hp is not None and hp.flags & _lib.HOOK_RSTD and key == name) else 0.0
        np.copyto(a, np.float32(fill), where=np.broadcast_to(idx, a.shape))
