"""tinylm — the engine from Python: run, cache, patch, steer and differentiate a model.

    import tinylm
    with tinylm.load("data/stories260K.bin", tokenizer="data/tok512.bin") as model:
        ids = model.tokenize("Once upon a time")
        logits, cache = model.run_with_cache(ids)      # cache["blocks.0.attn.hook_pattern"] ...
        logits = model.run_with_hooks(ids, fwd_hooks=[("blocks.2.hook_resid_post", fn)])
        W = model.weights()                            # W["W_Q"]: [L, H, d_model, d_head], a view
        stack = cache.decompose_resid(apply_ln=True)   # ActivationCache helpers (TransformerLens')

Hook names, shapes and what tinylm adds to TransformerLens' set: docs/python.md.
Only ctypes and NumPy: activations reach hook functions as NumPy views of the engine's own
buffers (no copy); the cache and returned logits are copies (the next pass reuses the buffers).

Threads: one Model runs one call at a time (calls from several threads wait for each other, in
turn); several models run in parallel. A call on a model from inside one of its own hooks is
refused (TinylmError). docs/python.md ("Threads, processes, lifetime").
"""
import contextlib
import ctypes
import json
import math
import numbers
import os
import signal
import threading
import warnings
import weakref

import numpy as np

from . import _lib
from . import utils
from .cache import ActivationCache, _ArenaPool
from .compat import Config, TransformerLensMixin
from .factored import FactoredMatrix
from .weights import Weights

__all__ = ["load", "Model", "HookPoint", "set_threads", "TinylmError", "ActivationCache", "Weights", "utils",
           "views", "metrics", "patching", "Config", "FactoredMatrix"]

from ._core import _L, _FP, TinylmError, _c_message, _err, _int_array, _replacement  # noqa: F401
from .metrics import _metric_dlogits
from .tokens import TokenizerMixin
from .generate import GenerationMixin

_MAX_THREADS = 1024


# ---- threads ------------------------------------------------------------------------------------
# OpenMP keeps its thread count per calling thread: the count set here is applied on whichever
# Python thread runs a pass (Model._using).
_threads = None


def set_threads(n):
    """OpenMP threads of the engine's kernels, 1..1024, for every later call from any thread (a
    process forked from one that loaded tinylm runs on one thread)."""
    global _threads
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or not 1 <= n <= _MAX_THREADS:
        raise ValueError("set_threads: n = %r; must be an integer in 1..%d" % (n, _MAX_THREADS))
    if _L.tlm_set_threads_checked(int(n)):
        raise _err("set_threads")
    _threads = int(n)


def _apply_threads():
    if _threads is not None and _L.tlm_threads() != _threads and not _L.tlm_is_forked_child():
        _L.tlm_set_threads_checked(_threads)


# ---- processes ----------------------------------------------------------------------------------
_models = weakref.WeakSet()
_load_lock = threading.Lock()  # (allow_nonfinite is a process-wide switch of the library)


def _after_fork_in_child():
    """The child has only the forking thread: a model another thread was using is mid-pass here
    (its buffers half written), and its lock would never be released."""
    global _load_lock
    _load_lock = threading.Lock()
    for m in list(_models):
        if m._owner is not None:
            m._broken = "the process forked while another thread was running this model"
        m._lock, m._tok_lock, m._owner = threading.Lock(), threading.Lock(), None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def load(path, tokenizer=None, allow_nonfinite=False):
    """Any model `tinylm --model` takes: a tinylm checkpoint or training run directory, a Hugging
    Face directory, or a llama2.c .bin (with tokenizer= its tokenizer .bin). tokenizer= a path
    overrides the one stored with the model (it must not have more tokens than the model).
    allow_nonfinite=True loads weights holding NaN/Inf (a warning on stderr), as the CLI's
    --allow-nonfinite. Returns a Model (a context manager: `with tinylm.load(...) as m:`)."""
    with _load_lock:
        _L.tlm_allow_nonfinite(1 if allow_nonfinite else 0)
        try:
            h = _L.tlm_load(str(path).encode())
        finally:
            _L.tlm_allow_nonfinite(0)
    if not h:
        raise _err("load %s" % path)
    return Model(h, str(path), tokenizer)


class _Keep:
    """referenced by every weight view (Model.weights): while one lives, close() defers tlm_free"""


from . import weights as _weights_mod  # noqa: E402
from . import metrics  # noqa: E402,F401  (tinylm.metrics: metrics with their gradients)
from . import views  # noqa: E402,F401  (tinylm.views: HTML views drawn by the inspect page)
from . import patching  # noqa: E402,F401  (tinylm.patching: activation and attribution patching)


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


class Model(TransformerLensMixin, TokenizerMixin, GenerationMixin):
    """A loaded model. One call at a time (threads take turns); close() or `with` frees it.
    The tokenizer's calls come from tinylm.tokens, generate from tinylm.generate, TransformerLens' names
    (cfg, W_Q, to_tokens, add_hook, hooks(), ...) from tinylm.compat."""

    def __init__(self, handle, path, tokenizer=None):
        self._h = ctypes.c_void_p(handle)
        self._tok = None
        self._lock, self._tok_lock = threading.Lock(), threading.Lock()
        self._owner = None      # the thread whose call is running (re-entrancy from its hooks)
        self._broken = None
        self.path = path
        p = _L.tlm_config_json(self._h)
        self.config = json.loads(ctypes.string_at(p).decode())
        _L.tlm_free_mem(p)
        self.vocab_size = _L.tlm_vocab_size(self._h)
        self.precision = "fp32"  # set_precision
        self.max_positions = _L.tlm_max_positions(self._h)
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
        self._pattern_ids = {hp.id for n, hp in self.hook_points.items()
                             if n.endswith(("attn.hook_pattern", "attn.hook_result"))}
        self._tok = _L.tlm_tok_open(str(tokenizer).encode() if tokenizer else None, path.encode())
        self._tok_error = None if self._tok else _c_message()
        self._cb = _lib.HOOK_FN(self._callback)  # (kept alive as long as the model)
        self._active = None
        self._views = {}  # (hook id, address, pass shape) -> views of the engine's buffer (_callback)
        self._shapes = {}  # (B, T) -> {hook id: shape} (run_with_cache's arrays)
        self._pass_stats = None  # tlm_hook_stats of the last hooked pass (tests, bench)
        self._arenas = _ArenaPool()  # run_with_cache's buffers
        self._exc = None
        self._interrupted = False
        self._keep = None  # weakref to what every weight view references (close waits for them)
        self._deferred_free = None  # close() with weight views alive: frees when the last goes
        self._staged = None  # inside edit_weights(): (the engine's buffer, the block's copy, the tensor table)
        # weights the caller may have written since the last call: writable views handed out (for
        # good), or an edit_weights() block just restored (_using has bf16 products read them)
        self._writable_out = False
        self._restored = False
        _models.add(self)
        if tokenizer and not self._tok:
            self.close()
            raise _err("load %s: tokenizer %s" % (path, tokenizer), self._tok_error)
        if self._tok and _L.tlm_tok_vocab_size(self._tok) > self.vocab_size:
            n = _L.tlm_tok_vocab_size(self._tok)
            self.close()
            raise TinylmError("load %s: the tokenizer%s has %d tokens, the model only %d (not this model's tokenizer)"
                              % (path, " " + str(tokenizer) if tokenizer else "", n, self.vocab_size))

    # ---- lifetime ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _using(self, what):
        """The model for one call: waits for a call from another thread to finish; refuses a call
        from inside this model's own hooks and a closed model."""
        me = threading.get_ident()
        if self._owner == me:
            raise TinylmError("%s: called from inside a hook of a pass running on this same model (a re-entrant "
                              "call would overwrite the buffers that pass is using); use another Model "
                              "(tinylm.load again) inside a hook" % what)
        with self._lock:
            if self._broken:
                raise TinylmError("%s: this model is unusable: %s" % (what, self._broken))
            if self._h is None:
                raise TinylmError("%s: the model is closed" % what)
            self._owner = me
            try:
                _apply_threads()
                if self._staged is not None:  # (inside edit_weights(): the edits so far, into the engine)
                    np.copyto(self._staged[0], self._staged[1])
                if self.precision == "bf16" and (self._staged is not None or self._writable_out or self._restored):
                    # (bf16 products read the engine's bf16 copy of the weights: made again from the edits)
                    _L.tlm_params_writable(self._h)
                    self._restored = False
                yield self._h
            finally:
                self._owner = None

    def close(self):
        """Frees the model and its tokenizer now (waits for a call in progress); any later call
        raises TinylmError. Calling it again does nothing."""
        if threading.get_ident() == getattr(self, "_owner", None):
            raise TinylmError("close: called from inside a hook of a pass running on this model")
        lock = getattr(self, "_lock", None)
        if lock is None:
            return
        with lock, self._tok_lock:
            h, tok = self._h, self._tok
            self._h, self._tok = None, None
            self._tl_W = None  # (the attributes' views: not a reason to keep the engine's model)
            if getattr(self, "_arenas", None) is not None:
                self._arenas.clear()
            if _L is not None:
                if tok:
                    _L.tlm_tok_close(tok)
                keep = self._keep() if self._keep is not None else None
                if h and keep is not None:
                    # weight views (Model.weights) still point into the engine's parameters:
                    # the engine's model is freed when the last of them goes
                    self._deferred_free = weakref.finalize(keep, _L.tlm_free, h)
                elif h:
                    _L.tlm_free(h)

    @property
    def closed(self):
        return self._h is None

    def __repr__(self):
        c = self.config
        what = "%s, %s layers, d_model %s, %s heads, vocab %s" % (
            c.get("model_type"), c.get("num_hidden_layers"), c.get("hidden_size"), c.get("num_attention_heads"),
            self.vocab_size)
        return "<tinylm.Model %r: %s%s>" % (self.path, what, ", closed" if self.closed else "")

    def __enter__(self):
        if self._h is None:
            raise TinylmError("with: the model is closed")
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown, or deleted inside its own hook)
            pass

    def _no_copy(self, *args):
        raise TypeError("a tinylm.Model cannot be copied or pickled (it owns the engine's buffers); "
                        "load the model again: tinylm.load(%r)" % self.path)

    __copy__ = __deepcopy__ = __reduce__ = __reduce_ex__ = __getstate__ = _no_copy

    @property
    def hook_names(self):
        return list(self.hook_points)

    # ---- weights ---------------------------------------------------------------------------

    def weights(self, writable=False):
        """The parameters as NumPy views of the engine's buffer under TransformerLens' names and
        shapes (W_E, W_U, W_Q [L, H, d_model, d_head], blocks.0.ln1.w, ...: docs/python.md).
        Read-only by default; writable=True: an edit (W["W_out"][0, n] = 0) is what the next pass
        computes with (with set_precision('bf16'), each call on the model from then on makes the
        engine's bf16 copy of the weights again, a pass over them, so that its products see the
        edits). A model that keeps its matrices quantized (a GGUF file) or in bf16 gives
        read-only views of an f32 copy (each weight the value it encodes: 4 bytes per parameter);
        writable=True is refused there. The views stay valid after close() (the engine's model is freed when the
        last one goes)."""
        if not isinstance(writable, bool):
            raise TypeError("weights: writable must be True or False, got %r" % (writable,))
        with self._using("weights") as h:
            return self._weights_held(h, writable)

    def _weights_held(self, h, writable):
        """weights() for a caller that holds the model (its lock, or the pass whose hook is running)"""
        if self._staged is not None:  # (inside edit_weights(): views of the block's copy)
            flat = self._staged[1]
            if not writable:
                flat = flat.view()
                flat.flags.writeable = False
            return Weights(self, flat, self._staged[2], writable)
        if _L.tlm_params_writable(h):  # (a read-only file mapping is copied before any view exists)
            if writable:
                raise _err("weights")
            return self._widened_weights(h)
        table, base = _weights_mod.param_table(_L, h)
        if table is None:
            raise _err("weights: %s" % base)
        keep = self._keep() if self._keep is not None else None
        if keep is None:
            keep = _Keep()
            self._keep = weakref.ref(keep)
        flat = _weights_mod.flat_buffer(base, _L.tlm_num_params(h), keep, writable)
        self._writable_out |= writable
        return Weights(self, flat, table, writable)

    def _widened_weights(self, h):
        """read-only views of an f32 copy of weights the model keeps quantized (a GGUF file's blocks)
        or in bf16: each the f32 value it encodes; the copy lives as long as a view of it does"""
        copy = _L.tlm_f32_copy(h)
        if not copy:
            raise _err("weights")
        keep = _Keep()
        weakref.finalize(keep, _L.tlm_free, copy)
        table, base = _weights_mod.param_table(_L, copy)
        if table is None:
            raise _err("weights: %s" % base)
        flat = _weights_mod.flat_buffer(base, _L.tlm_num_params(copy), keep, False)
        return Weights(self, flat, table, False)

    def set_precision(self, precision):
        """'bf16': the matrix products of the following passes (forward and backward, over more
        than a few rows) on bf16 operands summed in f32, on AMX or AVX512-BF16; weights, norms,
        softmax, attention and the loss stay f32. 'fp32' (the default): the reference numerics.
        Returns the precision in effect: 'fp32' with a warning on a CPU without bf16 products."""
        if precision not in ("fp32", "bf16"):
            raise ValueError("set_precision: %r is not 'fp32' or 'bf16'" % (precision,))
        with self._using("set_precision") as h:
            rc = _L.tlm_set_precision(h, 1 if precision == "bf16" else 0)
            if rc < 0:
                raise _err("set_precision")
            if precision == "bf16" and rc == 0:
                warnings.warn(_c_message(), RuntimeWarning, stacklevel=2)
            self.precision = "bf16" if rc == 1 else "fp32"
            return self.precision

    @contextlib.contextmanager
    def edit_weights(self):
        """`with model.edit_weights() as W:` writable weights; every parameter is restored as it
        was when the block ends (an ablation that does not outlive the experiment).

        W's arrays are views of a copy of the parameters that every call on the model inside the
        block copies into the engine before it runs (one copy of the parameter buffer per call): so
        a view kept past the block (`w = W["W_out"][0]`) writes into that detached copy, never into
        the model — the restored weights stay restored. model.weights() inside the block gives views
        of the same copy."""
        if self._staged is not None:
            raise TinylmError("edit_weights: already inside an edit_weights() block of this model (they do not nest)")
        with self._using("edit_weights") as h:
            if _L.tlm_params_writable(h):
                raise _err("edit_weights")
            table, base = _weights_mod.param_table(_L, h)
            if table is None:
                raise _err("edit_weights: %s" % base)
            keep = self._keep() if self._keep is not None else None
            if keep is None:
                keep = _Keep()
                self._keep = weakref.ref(keep)
            engine = _weights_mod.flat_buffer(base, _L.tlm_num_params(h), keep, True)
            saved, staged = engine.copy(), engine.copy()
            self._staged = (engine, staged, table)
        try:
            yield Weights(self, staged, table, True)
        finally:
            inside = self._owner == threading.get_ident()  # (the block left from inside a hook of a pass)
            with contextlib.nullcontext() if inside else self._lock:
                self._staged = None
                np.copyto(engine, saved)
                self._restored = True

    @property
    def param_names(self):
        """the engine's tensor names (docs/tensors.md), in buffer order"""
        with self._using("param_names") as h:
            return [_L.tlm_param_name(h, i).decode() for i in range(_L.tlm_param_count(h))]

    # ---- hooks ------------------------------------------------------------------------------

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

    def _ids2(self, ids, what):
        ids = _int_array(ids, what, self.vocab_size)
        squeeze = ids.ndim == 1
        ids2 = ids.reshape(1, -1) if squeeze else ids
        if ids2.ndim != 2:
            raise ValueError("%s: ids must be a [T] or [B, T] array of token ids, got shape %s" % (what, ids.shape))
        return ids2, squeeze

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

    def _fwd_table(self, fwd_hooks, persistent=True):
        """{hook id: [fn]} of fwd_hooks, after the hooks add_hook / hooks() attached (persistent)"""
        table, writes = {}, set()
        items = (self._persistent_hooks("fwd") if persistent else []) + list(fwd_hooks or ())
        for item in items:
            if not isinstance(item, (tuple, list)) or len(item) != 2 or not callable(item[1]):
                raise TypeError("fwd_hooks: each entry must be (name or name -> bool, fn(activation, hook)), got %r"
                                % (item,))
            name, fn = item
            for hp in self._resolve(name):
                table.setdefault(hp.id, []).append(fn)
                writes.add(hp.id)
        return table, writes

    def _bwd_table(self, bwd_hooks, persistent=True):
        """bwd_hooks [(name or name -> bool, fn(grad, hook))] -> {hook id: [fn]} (after add_hook's backward
        hooks); a point that has no gradient (hook_scale, the attention scores and pattern, MoE's choices)
        is refused"""
        table = {}
        items = (self._persistent_hooks("bwd") if persistent else []) + list(bwd_hooks or ())
        for item in items:
            if not isinstance(item, (tuple, list)) or len(item) != 2 or not callable(item[1]):
                raise TypeError("bwd_hooks: each entry must be (name or name -> bool, fn(gradient, hook)), got %r"
                                % (item,))
            name, fn = item
            pts = self._resolve(name)
            for hp in pts:
                if hp.flags & _lib.HOOK_NO_GRAD:
                    if not callable(name):
                        raise ValueError("bwd_hooks: %s has no gradient in tinylm's backward (model.hook_points"
                                         "[name].flags & 4)" % hp.name)
                    continue
                table.setdefault(hp.id, []).append(fn)
        return table

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

    # ---- running ---------------------------------------------------------------------------

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

    def _param_shapes(self):
        shape, nd, out = (ctypes.c_int64 * 2)(), ctypes.c_int(), {}
        with self._using("param_grads") as h:
            for i in range(_L.tlm_param_count(h)):
                name = _L.tlm_param_name(h, i).decode()
                if _L.tlm_param(h, name.encode(), shape, ctypes.byref(nd)):
                    out[name] = tuple(shape[k] for k in range(nd.value))
                else:  # (weights kept quantized or in bf16: no f32 parameter; no gradient either)
                    out[name] = (-1,)
        return out

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
