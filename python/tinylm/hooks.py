"""hooks.py — the hook machinery (HookPoint, HooksMixin): hook names to points, the hook
functions' tables, the ctypes callback the engine calls at each point of a pass, Ctrl-C during one."""
import contextlib
import ctypes
import signal
import threading

import numpy as np

from . import _lib
from ._core import _L, _FP, TinylmError, _err, _replacement


class HookPoint:
    """What a hook function receives as its second argument (TransformerLens' `hook`)."""

    def __init__(self, name, hook_id, flags):
        self.name, self.id, self.flags = name, hook_id, flags
        # the model's positions of the activation's rows, shaped as its leading axes: [T] for one
        # sequence, [B, T] for a batch (each row its own: a left-padded row counts from its first real
        # token, its pads 0); in generate's KV-cache steps the prompt's, then the new one per step. A
        # hook that must skip BOS writes `a[hook.positions > 0] += v`, not `a[1:] += v`
        self.positions = None
        # the pass's attention mask (bool [B, T], True at real tokens) when one was given, else None
        self.attention_mask = None
        # TransformerLens' hook context: a dict the hook functions of this point share, across the
        # forward and backward of a call and across calls, until clear_context() / model.clear_contexts()
        # (or reset_hooks(), run_with_hooks(clear_contexts=True), hooks(clear_contexts=True)) empties it
        self.ctx = {}

    def clear_context(self):
        self.ctx = {}

    def layer(self):
        return int(self.name.split(".")[1]) if self.name.startswith("blocks.") else None

    @property
    def writable(self):
        return not self.flags & _lib.HOOK_READONLY

    def __repr__(self):
        return "HookPoint(%r)" % self.name


class HooksMixin:
    # ---- hooks ------------------------------------------------------------------------------

    @property
    def hook_names(self):
        return list(self.hook_points)

    def _resolve(self, names):
        """names: None (all but the points made only when asked for: hook_attn_in, the split q/k/v
        inputs, hook_result, hook_mlp_in, which TransformerLens too has only when asked for), a name,
        a list of names, or a callable name -> bool"""
        if names is None:
            return [hp for hp in self.hook_points.values() if not hp.flags & _lib.HOOK_ON_DEMAND]
        if callable(names):
            return [hp for n, hp in self.hook_points.items() if names(n)]
        if isinstance(names, str):
            names = [names]
        out = []
        for n in names:
            if n not in self.hook_points:
                raise KeyError("no hook point %r in this model (model.hook_names lists them)" % n)
            out.append(self.hook_points[n])
        return out

    def _callback(self, user, hook_id, data, ndim, shape, is_grad):
        # (a pending Ctrl-C cannot raise here: _run's SIGINT handler only sets _interrupted; and a
        # callback that never got into this try is caught by the counts _run compares)
        try:
            act = self._active
            act["calls"][1 if is_grad else 0] += 1
            if self._interrupted:
                return 1  # (ends the pass; _run raises KeyboardInterrupt)
            hp = self._by_id[hook_id]
            hp.positions = act["positions"]
            # the engine's buffer itself, as a view: made once per point, address and pass shape (a
            # point's shape follows from [B, T]; the view is used only when the engine hands this
            # address for this point again, so it always wraps the memory the pass is using)
            key = (hook_id, data, act["BT"])
            vv = self._views.get(key)
            if vv is None:
                shp = tuple(shape[i] for i in range(ndim))
                full = np.ctypeslib.as_array(ctypes.cast(data, _FP), shape=shp)
                vv = (full, full[0] if act["squeeze"] else full)
                if len(self._views) > 4096:
                    self._views.clear()
                self._views[key] = vv
            full, view = vv
            # every hook gets an array of its own (the engine reuses its buffers for the next pass,
            # so a view kept as `store[name] = act` would change under the caller); in-place edits
            # and replacements are copied back into the pass
            hp.attention_mask = act["mask"]
            if is_grad:
                g = view.copy()
                fns = act["bwd"].get(hook_id, ())
                if hook_id not in act["bwd_writes"]:  # (run_with_cache's own: they only keep it)
                    g.flags.writeable = False
                    for fn in fns:
                        fn(g, hp)
                    return 0
                # a backward hook (bwd_hooks): it may edit the gradient in place or return a
                # replacement; the backward goes on upstream from what it leaves
                for fn in fns:
                    r = fn(g, hp)
                    if r is not None:
                        r = _replacement(r, "backward hook %s" % hp.name, "gradient")
                        if r.shape != view.shape:
                            raise ValueError("backward hook %s: replacement has shape %s, the gradient %s"
                                             % (hp.name, r.shape, view.shape))
                        g = r.copy()
                np.copyto(view, g)
                return 0
            if hp.flags & _lib.HOOK_RSTD:
                shown = 1.0 / view  # the norm's scale: sqrt(mean square (+ eps)); [.., T, 1]
            elif hp.flags & _lib.HOOK_MASKED:
                shown = np.where(act["masks"][hook_id], view, np.float32(-np.inf))  # (float32: one pass)
            else:
                shown = view.copy()
            fns = act["fwd"].get(hook_id, ())
            if hook_id not in act["writes"]:  # (run_with_cache's own functions alone: they only keep it)
                for fn in fns:
                    fn(shown, hp)
                return 0
            if not hp.writable:
                shown.flags.writeable = False  # (an in-place edit raises instead of being ignored)
            before = full.copy() if hook_id in act["pattern_writes"] else None
            for fn in fns:
                r = fn(shown, hp)
                if r is not None:
                    if not hp.writable:
                        raise TinylmError("hook %s is read-only: a replacement would not change the pass" % hp.name)
                    r = _replacement(r, "hook %s" % hp.name, "activation")
                    if r.shape != view.shape:
                        raise ValueError("hook %s: replacement has shape %s, the activation %s"
                                         % (hp.name, r.shape, view.shape))
                    shown = r.copy()  # (the next hook at this point sees the replacement)
            if hp.writable:
                np.copyto(view, shown)
            if before is not None and np.array_equal(before, full):
                _L.tlm_hook_unchanged(self._h)  # (z stays the kernel's: bit-identical logits)
            return 0
        except BaseException as e:  # noqa: B902 (reported after the pass)
            if self._exc is None:
                self._exc = e
            return 1

    def _attention_masks(self, T, start=None, squeeze=True):
        """bool [T, T] per layer: which keys each query sees, by the engine's own rule (tlm_attention_mask);
        with left padding (start [B]) [B, 1, T, T] ([1, T, T] for one sequence): each row's mask for
        its start (no key before the row's first real token, a pad query only itself)."""
        starts = [0] if start is None else [int(s) for s in start]
        out = {}
        for l in range(self.n_layers):
            hp = self.hook_points.get("blocks.%d.attn.hook_attn_scores" % l)
            if hp:
                by_start = {}
                for s in starts:
                    if s not in by_start:
                        ok = np.zeros((T, T), dtype=np.uint8)
                        if _L.tlm_attention_mask(self._h, l, T, s, ok.ctypes.data):
                            raise _err("attention mask")
                        by_start[s] = ok.astype(bool)
                if start is None:
                    out[hp.id] = by_start[0]
                else:
                    ok = np.stack([by_start[s] for s in starts])  # [B, T, T]
                    out[hp.id] = ok if squeeze else ok[:, None]
        return out

    @contextlib.contextmanager
    def _sigint_flag(self, on):
        """During a hooked pass on the main thread: Ctrl-C sets a flag (the next callback ends the
        pass) instead of raising wherever Python code runs next — which can be inside ctypes'
        callback machinery, where the exception is printed and dropped and the pass goes on.
        The flag is turned into KeyboardInterrupt here, after the old handler is back (so one
        that comes at any moment of the scope is never lost)."""
        prev = None
        self._interrupted = False
        if on and threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            def flag(signum, frame):
                self._interrupted = True
            prev = signal.signal(signal.SIGINT, flag)
        try:
            yield
        except BaseException as e:  # noqa: B902
            if prev is not None:
                signal.signal(signal.SIGINT, prev)
            if self._interrupted:
                self._interrupted = False
                if not isinstance(e, KeyboardInterrupt):
                    raise KeyboardInterrupt from None
            raise
        else:
            if prev is not None:
                signal.signal(signal.SIGINT, prev)
            if self._interrupted:
                self._interrupted = False
                raise KeyboardInterrupt

    def _attach(self, h, fwd, bwd, writes, squeeze, B, T, positions, mask=None, start=None, bwd_writes=()):
        """attaches the callback for one pass: fwd/bwd {hook id: [fn]}; positions: the absolute
        positions of the pass's T rows (hook.positions); mask/start: the pass's padding (_mask)"""
        fm = bytearray(self._n_hooks)
        bm = bytearray(self._n_hooks)
        for i in fwd:
            fm[i] = 2 if i in writes else 1
        for i in bwd:
            bm[i] = 1
        self._active = {"fwd": fwd, "bwd": bwd, "squeeze": squeeze, "calls": [0, 0], "positions": positions,
                        "writes": set(writes), "BT": (squeeze, B, T), "bwd_writes": set(bwd_writes),
                        "mask": None if mask is None else (mask[0] if squeeze else mask),
                        "pattern_writes": self._pattern_ids & set(writes),
                        "masks": self._attention_masks(T, start, squeeze) if any(
                            self._by_id[i].flags & _lib.HOOK_MASKED for i in fwd) else {}}
        self._exc = None
        if _L.tlm_set_hooks(h, self._cb, None, bytes(fm), bytes(bm)):
            raise _err("set hooks")

    def _raise_after(self, rc, what, stage, n_fwd, n_bwd):
        """After a pass: a Ctrl-C, a hook's exception, the library's error, or callbacks missing."""
        if self._interrupted:
            raise KeyboardInterrupt
        if self._exc is not None:
            raise self._exc
        if rc:
            raise _err(what if what == stage else "%s: %s" % (what, stage))
        if self._active is not None and self._active["calls"] != [n_fwd, n_bwd]:
            raise TinylmError("%s: %d of %d forward and %d of %d backward hook callbacks ran (an exception "
                              "was raised outside a hook function, e.g. by a signal handler): the result would "
                              "be incomplete" % (what, self._active["calls"][0], n_fwd, self._active["calls"][1],
                                                 n_bwd))

    def _hook_entries(self, kind, hooks, persistent, value):
        """the (name, fn) pairs of the hooks add_hook / hooks() attached (persistent) and then of `hooks`,
        each entry checked"""
        items = (self._persistent_hooks(kind) if persistent else []) + list(hooks or ())
        for item in items:
            if not isinstance(item, (tuple, list)) or len(item) != 2 or not callable(item[1]):
                raise TypeError("%s_hooks: each entry must be (name or name -> bool, fn(%s, hook)), got %r"
                                % (kind, value, item))
            yield item[0], item[1]

    def _fwd_table(self, fwd_hooks, persistent=True):
        """{hook id: [fn]} of fwd_hooks, after the hooks add_hook / hooks() attached (persistent)"""
        table, writes = {}, set()
        for name, fn in self._hook_entries("fwd", fwd_hooks, persistent, "activation"):
            for hp in self._resolve(name):
                table.setdefault(hp.id, []).append(fn)
                writes.add(hp.id)
        return table, writes

    def _bwd_table(self, bwd_hooks, persistent=True):
        """bwd_hooks [(name or name -> bool, fn(grad, hook))] -> {hook id: [fn]} (after add_hook's backward
        hooks); a point that has no gradient (hook_scale, the attention scores and pattern, MoE's choices)
        is refused"""
        table = {}
        for name, fn in self._hook_entries("bwd", bwd_hooks, persistent, "gradient"):
            pts = self._resolve(name)
            for hp in pts:
                if hp.flags & _lib.HOOK_NO_GRAD:
                    if not callable(name):
                        raise ValueError("bwd_hooks: %s has no gradient in tinylm's backward (model.hook_points"
                                         "[name].flags & 4)" % hp.name)
                    continue
                table.setdefault(hp.id, []).append(fn)
        return table
