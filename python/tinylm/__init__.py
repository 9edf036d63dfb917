"""tinylm — the engine from Python: run, cache, patch, steer and differentiate a model.

    import tinylm
    model = tinylm.load("data/stories260K.bin", tokenizer="data/tok512.bin")
    ids = model.tokenize("Once upon a time")
    logits, cache = model.run_with_cache(ids)          # cache["blocks.0.attn.hook_pattern"] ...
    logits = model.run_with_hooks(ids, fwd_hooks=[("blocks.2.hook_resid_post", fn)])

Hook names, shapes and what tinylm adds to TransformerLens' set: docs/python.md.
Only ctypes and NumPy: activations reach hook functions as NumPy views of the engine's own
buffers (no copy); the cache and returned logits are copies (the next pass reuses the buffers).
"""
import ctypes
import json
import math

import numpy as np

from . import _lib

__all__ = ["load", "Model", "HookPoint", "set_threads", "TinylmError"]

_L = _lib.load_library()


class TinylmError(RuntimeError):
    pass


def _err(what):
    msg = _L.tlm_error_message()
    return TinylmError("%s: %s" % (what, msg.decode("utf-8", "replace") if msg else "failed"))


def set_threads(n):
    """OpenMP threads of the engine's kernels."""
    _L.tlm_set_threads(int(n))


def load(path, tokenizer=None):
    """Any model `tinylm --model` takes: a tinylm checkpoint or training run directory, a Hugging
    Face directory, or a llama2.c .bin (with tokenizer= its tokenizer .bin). tokenizer= a path
    overrides the one stored with the model."""
    h = _L.tlm_load_any(str(path).encode())
    if not h:
        raise _err("load %s" % path)
    return Model(h, str(path), tokenizer)


class HookPoint:
    """What a hook function receives as its second argument (TransformerLens' `hook`)."""

    def __init__(self, name, hook_id, flags):
        self.name, self.id, self.flags = name, hook_id, flags

    def layer(self):
        return int(self.name.split(".")[1]) if self.name.startswith("blocks.") else None

    @property
    def writable(self):
        return not self.flags & _lib.HOOK_READONLY

    def __repr__(self):
        return "HookPoint(%r)" % self.name


def _metric_dlogits(metric, logits):
    """d metric / d logits for metric= : (pos, good, bad) = logits[pos, good] - logits[pos, bad]
    (a logit difference), or an array like logits (the gradient itself), or a callable
    logits -> such an array."""
    if callable(metric):
        g = metric(logits)
    elif isinstance(metric, tuple):
        pos, good, bad = metric
        g = np.zeros_like(logits)
        g[..., pos, good] += 1.0
        g[..., pos, bad] -= 1.0
    else:
        g = metric
    g = np.ascontiguousarray(g, dtype=np.float32)
    if g.shape != logits.shape:
        raise ValueError("metric gradient has shape %s, logits %s" % (g.shape, logits.shape))
    return g


class Model:
    def __init__(self, handle, path, tokenizer=None):
        self._h = ctypes.c_void_p(handle)
        self.path = path
        p = _L.tlm_config_json(self._h)
        self.config = json.loads(ctypes.string_at(p).decode())
        _L.tlm_free_mem(p)
        self.vocab_size = _L.tlm_vocab_size(self._h)
        self.n_layers = self.config.get("num_hidden_layers")
        # the hook table: every point this config has
        self.hook_points = {}
        self._by_id = {}
        name = ctypes.create_string_buffer(128)
        shape = (ctypes.c_int64 * 5)()
        flags = ctypes.c_int()
        self._n_hooks = _L.tlm_hook_count(self._h)
        for i in range(self._n_hooks):
            if _L.tlm_hook_info(self._h, i, name, 128, 1, 1, shape, ctypes.byref(flags)):
                hp = HookPoint(name.value.decode(), i, flags.value)
                self.hook_points[hp.name] = hp
                self._by_id[i] = hp
        self._tok = _L.tlm_tok_open(str(tokenizer).encode() if tokenizer else None, path.encode())
        self._tok_error = None if self._tok else _L.tlm_error_message().decode("utf-8", "replace")
        self._cb = _lib.HOOK_FN(self._callback)  # (kept alive as long as the model)
        self._active = None
        self._exc = None

    def __del__(self):
        h = getattr(self, "_h", None)
        if h and _L is not None:
            if getattr(self, "_tok", None):
                _L.tlm_tok_close(self._tok)
                self._tok = None
            _L.tlm_free(h)
            self._h = None

    @property
    def hook_names(self):
        return list(self.hook_points)

    # ---- tokenizer ------------------------------------------------------------------------

    def _tokenizer(self):
        if not self._tok:
            raise TinylmError("no tokenizer: %s (pass tokenizer= to tinylm.load)" % self._tok_error)
        return self._tok

    def tokenize(self, text, bos=True):
        """text -> token ids (int32 [T]); with bos, the tokenizer's BOS first when it has one."""
        b = text.encode("utf-8")
        n = ctypes.c_size_t()
        p = _L.tlm_tok_encode(self._tokenizer(), b, len(b), 1 if bos else 0, ctypes.byref(n))
        if not p:
            raise _err("tokenize")
        ids = np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(ctypes.c_int)), shape=(n.value,)).copy() \
            if n.value else np.zeros(0, np.int32)
        _L.tlm_free_mem(p)
        return ids.astype(np.int32)

    def decode(self, ids):
        ids = np.ascontiguousarray(np.asarray(ids).reshape(-1), dtype=np.int32)
        n = ctypes.c_size_t()
        p = _L.tlm_tok_decode(self._tokenizer(), ids.ctypes.data_as(ctypes.POINTER(ctypes.c_int)), ids.size,
                              ctypes.byref(n))
        if not p:
            raise _err("decode")
        s = ctypes.string_at(p, n.value).decode("utf-8", "replace")
        _L.tlm_free_mem(p)
        return s

    def to_str_tokens(self, text_or_ids, bos=True):
        """The text of each token (as the tokenizer's piece after the previous token)."""
        ids = self.tokenize(text_or_ids, bos) if isinstance(text_or_ids, str) else np.asarray(text_or_ids).reshape(-1)
        out, prev, n = [], -1, ctypes.c_size_t()
        for t in ids:
            p = _L.tlm_tok_piece(self._tokenizer(), prev, int(t), ctypes.byref(n))
            out.append(ctypes.string_at(p, n.value).decode("utf-8", "replace") if p else "")
            prev = int(t)
        return out

    @property
    def bos(self):
        return _L.tlm_tok_bos(self._tokenizer())

    @property
    def eos(self):
        return _L.tlm_tok_eos(self._tokenizer())

    # ---- hooks ------------------------------------------------------------------------------

    def _resolve(self, names):
        """names: None (all), a name, a list of names, or a callable name -> bool"""
        if names is None:
            return list(self.hook_points.values())
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
        try:
            hp = self._by_id[hook_id]
            shp = tuple(shape[i] for i in range(ndim))
            view = np.ctypeslib.as_array(data, shape=shp)  # the engine's buffer itself
            act = self._active
            if act["squeeze"]:
                view = view[0]
            if is_grad:
                for fn in act["bwd"].get(hook_id, ()):
                    fn(view, hp)
                return 0
            shown = view
            if hp.flags & _lib.HOOK_RSTD:
                shown = 1.0 / view  # the norm's scale: sqrt(mean square (+ eps)); [.., T, 1]
            elif hp.flags & _lib.HOOK_MASKED:
                shown = np.where(act["masks"][hook_id], view, -np.inf).astype(np.float32)
            for fn in act["fwd"].get(hook_id, ()):
                r = fn(shown, hp)
                if r is not None:
                    if not hp.writable:
                        raise TinylmError("hook %s is read-only: a replacement would not change the pass" % hp.name)
                    r = np.asarray(r, dtype=np.float32)
                    if r.shape != view.shape:
                        raise ValueError("hook %s: replacement has shape %s, the activation %s"
                                         % (hp.name, r.shape, view.shape))
                    if r is not view:
                        np.copyto(view, r)
            return 0
        except BaseException as e:  # noqa: B902 (reported after the pass)
            if self._exc is None:
                self._exc = e
            return 1

    def _attention_masks(self, T):
        """bool [T, T] per layer: which keys each query sees (causal, sliding windows)."""
        c = self.config
        types = c.get("layer_types") or []
        win = c.get("sliding_window") or 0
        i, j = np.arange(T)[:, None], np.arange(T)[None, :]
        out = {}
        for l in range(self.n_layers):
            ok = j <= i
            if win and l < len(types) and types[l] == "sliding_attention":
                ok = ok & (i - j < win)
            hp = self.hook_points.get("blocks.%d.attn.hook_attn_scores" % l)
            if hp:
                out[hp.id] = ok
        return out

    def _run(self, ids, targets=None, fwd=None, bwd=None, writes=(), backward=None):
        """One forward (and backward) with hook functions attached: fwd/bwd {hook id: [fn(view, hook)]}.
        backward: None, "loss", or a dlogits callable(logits) -> array. Returns (logits copy, loss)."""
        ids = np.asarray(ids)
        squeeze = ids.ndim == 1
        ids2 = np.ascontiguousarray(ids.reshape(1, -1) if squeeze else ids, dtype=np.int32)
        if ids2.ndim != 2 or ids2.size == 0:
            raise ValueError("ids must be a non-empty [T] or [B, T] array of token ids")
        B, T = ids2.shape
        IP = ctypes.POINTER(ctypes.c_int)
        tg = None
        if targets is not None:
            tg = np.ascontiguousarray(np.asarray(targets).reshape(B, T), dtype=np.int32)
        fwd, bwd = fwd or {}, bwd or {}
        hooked = bool(fwd or bwd)
        if hooked:
            fm = bytearray(self._n_hooks)
            bm = bytearray(self._n_hooks)
            for i in fwd:
                fm[i] = 2 if i in writes else 1
            for i in bwd:
                bm[i] = 1
            self._active = {"fwd": fwd, "bwd": bwd, "squeeze": squeeze,
                            "masks": self._attention_masks(T) if any(
                                self._by_id[i].flags & _lib.HOOK_MASKED for i in fwd) else {}}
            self._exc = None
            if _L.tlm_set_hooks(self._h, self._cb, None, bytes(fm), bytes(bm)):
                raise _err("set hooks")
        try:
            loss = ctypes.c_float(float("nan"))
            rc = _L.tlm_forward(self._h, ids2.ctypes.data_as(IP), tg.ctypes.data_as(IP) if tg is not None else None,
                                B, T, ctypes.byref(loss))
            if self._exc is not None:
                raise self._exc
            if rc:
                raise _err("forward")
            logits = np.ctypeslib.as_array(_L.tlm_logits(self._h), shape=(B, T, self.vocab_size)).copy()
            if backward is not None:
                _L.tlm_zero_grad(self._h)
                if backward == "loss":
                    rc = _L.tlm_backward(self._h, 1.0)
                else:
                    g = backward(logits[0] if squeeze else logits).reshape(B, T, self.vocab_size)
                    g = np.ascontiguousarray(g, dtype=np.float32)
                    rc = _L.tlm_backward_logits(self._h, g.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
                if self._exc is not None:
                    raise self._exc
                if rc:
                    raise _err("backward")
        finally:
            if hooked:
                _L.tlm_set_hooks(self._h, _lib.HOOK_FN(), None, None, None)
                self._active, self._exc = None, None
        return (logits[0] if squeeze else logits), loss.value

    def _fwd_table(self, fwd_hooks):
        table, writes = {}, set()
        for name, fn in fwd_hooks or ():
            for hp in self._resolve(name):
                table.setdefault(hp.id, []).append(fn)
                writes.add(hp.id)
        return table, writes

    @staticmethod
    def _next_targets(ids):
        ids = np.asarray(ids)
        t = np.full(ids.shape, -1, dtype=np.int32)
        t[..., :-1] = ids[..., 1:]
        return t

    # ---- running ---------------------------------------------------------------------------

    def __call__(self, ids, fwd_hooks=None):
        """Logits [T, vocab] (or [B, T, vocab] for [B, T] ids), float32."""
        fwd, writes = self._fwd_table(fwd_hooks)
        return self._run(ids, fwd=fwd, writes=writes)[0]

    forward = __call__

    def loss(self, ids, fwd_hooks=None):
        """Mean next-token cross-entropy of ids (each position predicts the next)."""
        fwd, writes = self._fwd_table(fwd_hooks)
        return self._run(ids, targets=self._next_targets(ids), fwd=fwd, writes=writes)[1]

    def run_with_hooks(self, ids, fwd_hooks=(), return_loss=False):
        """Logits with fwd_hooks = [(name or name -> bool, fn(activation, hook))] attached: fn sees
        the activation (a NumPy view of the engine's buffer) and may return a replacement of the
        same shape (or change it in place); the pass continues from it."""
        fwd, writes = self._fwd_table(fwd_hooks)
        targets = self._next_targets(ids) if return_loss else None
        logits, loss = self._run(ids, targets=targets, fwd=fwd, writes=writes)
        return (logits, loss) if return_loss else logits

    def run_with_cache(self, ids, names=None, backward=False, metric=None, fwd_hooks=()):
        """(logits, cache): cache {hook name: activation copy} for the selected names (None: all;
        a list; a callable name -> bool). backward=True also differentiates the loss (or metric=:
        (pos, good, bad) for logits[pos, good] - logits[pos, bad], an array d metric / d logits,
        or a callable logits -> that array) with tinylm's backward and stores name + "_grad"
        at every selected point that has one. fwd_hooks run first (the cache holds their result)."""
        sel = self._resolve(names)
        cache = {}
        fwd, writes = self._fwd_table(fwd_hooks)

        def keep(a, hook):
            cache[hook.name] = np.array(a, dtype=np.float32, copy=True)

        def keep_grad(a, hook):
            cache[hook.name + "_grad"] = np.array(a, dtype=np.float32, copy=True)

        for hp in sel:
            fwd.setdefault(hp.id, []).append(keep)
        bwd = {}
        how = None
        targets = None
        if backward:
            for hp in sel:
                if not hp.flags & _lib.HOOK_NO_GRAD:
                    bwd[hp.id] = [keep_grad]
            if metric is None:
                how = "loss"
                targets = self._next_targets(ids)
            else:
                how = lambda logits: _metric_dlogits(metric, logits)  # noqa: E731
        logits, loss = self._run(ids, targets=targets, fwd=fwd, bwd=bwd, writes=writes, backward=how)
        ordered = {}
        for hp in sel:  # forward order, gradients after their activation
            for k in (hp.name, hp.name + "_grad"):
                if k in cache:
                    ordered[k] = cache[k]
        return logits, ordered

    # ---- generation --------------------------------------------------------------------------

    def generate(self, prompt, n=50, temperature=1.0, top_k=None, top_p=None, seed=None, fwd_hooks=(),
                 stop_at_eos=True, return_ids=False):
        """Samples n tokens after prompt (text, or ids) with fwd_hooks attached at every step
        (each step runs the whole sequence: hooks see every position every time). temperature 0 =
        greedy. Returns the continuation's text (or ids with return_ids=True)."""
        ids = list(self.tokenize(prompt) if isinstance(prompt, str) else np.asarray(prompt).reshape(-1))
        start = len(ids)
        rng = np.random.default_rng(seed)
        fwd, writes = self._fwd_table(fwd_hooks)
        limit = self.config.get("max_position_embeddings") or 0
        eos = _L.tlm_tok_eos(self._tok) if self._tok else -1
        for _ in range(n):
            ctx = ids[-limit:] if limit else ids
            logits = self._run(np.array(ctx, np.int32), fwd=dict(fwd), writes=writes)[0][-1].astype(np.float64)
            if temperature <= 0:
                nxt = int(np.argmax(logits))
            else:
                z = logits / temperature
                if top_k:
                    kth = np.sort(z)[-min(int(top_k), z.size)]
                    z = np.where(z < kth, -np.inf, z)
                p = np.exp(z - z.max())
                p /= p.sum()
                if top_p is not None and top_p < 1.0:
                    order = np.argsort(-p)
                    cum = np.cumsum(p[order])
                    cut = order[np.searchsorted(cum, top_p) + 1:]
                    p[cut] = 0.0
                    p /= p.sum()
                nxt = int(rng.choice(p.size, p=p))
            ids.append(nxt)
            if stop_at_eos and nxt == eos:
                break
        out = np.array(ids[start:], np.int32)
        return out if return_ids else self.decode(out)
