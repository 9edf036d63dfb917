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
import numbers
import os
import threading
import weakref

import numpy as np

from . import _lib
from . import utils
from .cache import ActivationCache, _ArenaPool
from .compat import Config, TransformerLensMixin
from .factored import FactoredMatrix
from .hooks import HookPoint, HooksMixin
from .run import RunMixin
from .weights import Weights, WeightsMixin

__all__ = ["load", "Model", "HookPoint", "set_threads", "TinylmError", "ActivationCache", "Weights", "utils",
           "views", "metrics", "patching", "Config", "FactoredMatrix"]

from ._core import _L, _FP, TinylmError, _c_message, _err, _int_array, _replacement  # noqa: F401
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




from . import metrics  # noqa: E402,F401  (tinylm.metrics: metrics with their gradients)
from . import views  # noqa: E402,F401  (tinylm.views: HTML views drawn by the inspect page)
from . import patching  # noqa: E402,F401  (tinylm.patching: activation and attribution patching)


class Model(RunMixin, HooksMixin, WeightsMixin, TransformerLensMixin, TokenizerMixin, GenerationMixin):
    """A loaded model. One call at a time (threads take turns); close() or `with` frees it.
    Here: its construction and lifetime. The passes (model(ids), loss, param_grads, run_with_hooks,
    run_with_cache) come from tinylm.run, the hook machinery from tinylm.hooks, weights(),
    edit_weights() and set_precision() from tinylm.weights, the tokenizer's calls from tinylm.tokens,
    generate from tinylm.generate, TransformerLens' names (cfg, W_Q, to_tokens, add_hook, hooks(), ...)
    from tinylm.compat."""

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
