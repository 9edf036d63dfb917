"""weights.py — the engine's parameters as NumPy views, under TransformerLens' names and shapes
(Weights), and a Model's calls that give and change them (WeightsMixin: weights, edit_weights,
set_precision, param_names).

The engine keeps every parameter in one f32 buffer laid out as docs/tensors.md says (a linear
layer's weight is [out, in]; q|k|v and gate|up back to back). TransformerLens multiplies from
the left (x @ W), per head; so W_Q [L, H, d_model, d_head] here is q_proj.weight [H*hd, d]
seen through strides, not a copy: the arrays are views of the engine's memory, and with
writable=True an edit is what the next pass computes with. docs/python.md ("Weights").
"""
import contextlib
import ctypes
import threading
import warnings
import weakref

import numpy as np

from . import _lib
from ._core import _L, TinylmError, _c_message, _err

_F = 4  # bytes of a float


def _norm_names(cfg):
    """engine norm prefix (per layer) -> TransformerLens-style name, by the norm placement (the
    hook names of docs/python.md: ln1 the attention's input norm, ln1_out its output norm,
    ln1_post the post-norm after the residual add; ln2* the MLP's)"""
    pl = cfg.get("norm_placement", "pre")
    out = {}
    for eng, tl in (("attn", "ln1"), ("ffn", "ln2")):
        if pl in ("pre", "sandwich"):
            out[eng + "_norm"] = tl
        elif pl in ("post", "deepnorm"):  # (DeepNorm: Post-Norm with the residual scaled)
            out[eng + "_norm"] = tl + "_post"
        if pl in ("sandwich", "output"):
            out[eng + "_out_norm"] = tl + "_out"
    # Gemma 4's MoE block: the dense MLP's output norm, the experts' input and output norms
    out.update({"dense_out_norm": "ln2_dense_out", "moe_in_norm": "ln2_moe", "moe_out_norm": "ln2_moe_out"})
    return out


class Weights(dict):
    """{TransformerLens name: NumPy view of the engine's parameter buffer}. Built by
    Model.weights(); read-only unless writable=True. Keys: the stacked arrays (W_E, W_pos, W_U,
    W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O, W_in, W_gate, W_out, b_in, b_gate, b_out; with experts
    W_router, W_in_experts, W_gate_experts, W_out_experts, ...) and the per-layer state-dict names
    (blocks.N.attn.W_Q, blocks.N.ln1.w, ln_final.w, ...). A stacked key is one [L, ...] view when
    every layer has that tensor in one shape; in a model whose layers differ (MoE and dense layers
    mixed, Gemma 4's layer types) it is a list of L per-layer views, None where a layer has none.
    moe_layers / dense_layers: the layers with a router / with a dense FFN."""

    def __init__(self, model, flat, offsets, writable):
        super().__init__()
        self._cfg = model.config
        self._model = weakref.ref(model)  # (norm_gain asks the engine; the model owns these views)
        self.writable = writable
        self.engine = {}  # engine tensor name -> its view in the engine's own shape
        for name, (off, shape) in offsets.items():
            self.engine[name] = self._view(flat, off, shape, None)
        self._build(flat, offsets)

    def _view(self, flat, off, shape, strides):
        """a view of flat (the whole buffer, 1-D float32) at element offset off"""
        if strides is None:  # C order
            strides, acc = [], 1
            for s in reversed(shape):
                strides.insert(0, acc)
                acc *= s
        a = np.lib.stride_tricks.as_strided(flat[off:], shape=tuple(shape),
                                            strides=tuple(s * _F for s in strides), writeable=self.writable)
        return a

    def _layers(self, flat, offsets, fmt, geom):
        """key over every layer from engine tensor `fmt % l`, geom(l, engine shape) -> (shape,
        strides) of layer l's view: one strided view [L, ...] when every layer has the tensor, of
        one shape, at equal distances in the buffer; otherwise (mixtures of experts with dense
        layers, Gemma 4's layer types of their own shapes) a list of L per-layer views, None where
        a layer has no such tensor. None when no layer has it."""
        L = self._cfg["num_hidden_layers"]
        per = []
        for l in range(L):
            t = offsets.get(fmt % l)
            per.append(None if t is None else (t[0],) + tuple(geom(l, t[1])))
        if all(v is None for v in per):
            return None
        if all(v is not None for v in per) and all(v[1:] == per[0][1:] for v in per):
            step = per[1][0] - per[0][0] if L > 1 else 0
            if all(per[i][0] - per[0][0] == i * step for i in range(L)):
                return self._view(flat, per[0][0], (L,) + tuple(per[0][1]), (step,) + tuple(per[0][2]))
        return [None if v is None else self._view(flat, v[0], v[1], v[2]) for v in per]

    def _build(self, flat, offsets):
        c = self._cfg
        L, d = c["num_hidden_layers"], c["hidden_size"]
        H = c["num_attention_heads"]
        V = c["vocab_size"]
        E = offsets["embed.weight"][0]
        self["W_E"] = self._view(flat, E, (V, d), None)
        if "pos_embed.weight" in offsets:
            off, shape = offsets["pos_embed.weight"]
            self["W_pos"] = self._view(flat, off, shape, None)
        head = offsets.get("lm_head.weight", (E, None))[0]  # tied: the embedding itself
        self["W_U"] = self._view(flat, head, (d, V), (1, d))
        p = "layers.%d."
        # which layers are mixtures of experts (a router) and which have a dense FFN (up_proj; Gemma 4's
        # MoE block: both)
        self.moe_layers = [l for l in range(L) if (p % l) + "ffn.router.weight" in offsets]
        self.dense_layers = [l for l in range(L) if (p % l) + "ffn.up_proj.weight" in offsets]

        def hd(l):  # layer l's head_dim (Gemma 4's full layers have their own), from its q_proj
            return offsets[(p % l) + "attn.q_proj.weight"][1][0] // H

        heads = {"W_Q": lambda l, s: ((H, d, hd(l)), (hd(l) * d, 1, d)),
                 "W_K": lambda l, s: ((s[0] // hd(l), d, hd(l)), (hd(l) * d, 1, d)),
                 "b_Q": lambda l, s: ((H, hd(l)), (hd(l), 1)),
                 "b_K": lambda l, s: ((s[0] // hd(l), hd(l)), (hd(l), 1))}
        # [out, in] weights seen per head as TransformerLens' [heads, d_model, d_head]
        for key, eng, g in (("W_Q", "q_proj", "W_Q"), ("W_K", "k_proj", "W_K"), ("W_V", "v_proj", "W_K")):
            w = self._layers(flat, offsets, p + "attn." + eng + ".weight", heads[g])
            if w is not None:  # (no layer has v_proj when all are K = V, ...)
                self[key] = w
            b = self._layers(flat, offsets, p + "attn." + eng + ".bias", heads["b" + g[1:]])
            if b is not None:
                self["b_" + key[2]] = b
        w = self._layers(flat, offsets, p + "attn.o_proj.weight",
                         lambda l, s: ((H, hd(l), d), (hd(l), 1, H * hd(l))))
        if w is not None:
            self["W_O"] = w
        vec = lambda l, s: ((s[0],), (1,))  # noqa: E731
        b = self._layers(flat, offsets, p + "attn.o_proj.bias", vec)
        if b is not None:
            self["b_O"] = b
        # the dense FFN: [out, in] seen as x @ W
        for key, eng in (("W_in", "up_proj"), ("W_gate", "gate_proj"), ("W_out", "down_proj")):
            w = self._layers(flat, offsets, p + "ffn." + eng + ".weight", lambda l, s: ((s[1], s[0]), (1, s[1])))
            if w is not None:
                self[key] = w
            b = self._layers(flat, offsets, p + "ffn." + eng + ".bias", vec)
            if b is not None:
                self["b" + key[1:]] = b
        # mixtures of experts: the router as x @ W_router [d, E]; every expert of a layer in one
        # view [E, ...] (they lie at a fixed stride); the shared expert; DeepSeek-V3's selection bias,
        # Gemma 4's router input scale and per-expert scales
        if self.moe_layers:
            l0 = "layers.%d.ffn.experts." % self.moe_layers[0]
            n_e = c.get("num_experts") or 0
            stride = (offsets[l0 + "1.up_proj.weight"][0] - offsets[l0 + "0.up_proj.weight"][0]) if n_e > 1 else 0
            moe = (("W_router", "router.weight", lambda l, s: ((s[1], s[0]), (1, s[1]))),
                   ("b_router_select", "router.e_score_correction_bias", vec),
                   ("router_scale", "router.scale", vec), ("expert_scale", "router.expert_scale", vec),
                   ("W_in_experts", "experts.0.up_proj.weight", lambda l, s: ((n_e, s[1], s[0]), (stride, 1, s[1]))),
                   ("W_gate_experts", "experts.0.gate_proj.weight",
                    lambda l, s: ((n_e, s[1], s[0]), (stride, 1, s[1]))),
                   ("W_out_experts", "experts.0.down_proj.weight",
                    lambda l, s: ((n_e, s[1], s[0]), (stride, 1, s[1]))),
                   ("W_in_shared", "shared_experts.up_proj.weight", lambda l, s: ((s[1], s[0]), (1, s[1]))),
                   ("W_gate_shared", "shared_experts.gate_proj.weight", lambda l, s: ((s[1], s[0]), (1, s[1]))),
                   ("W_out_shared", "shared_experts.down_proj.weight", lambda l, s: ((s[1], s[0]), (1, s[1]))))
            for key, eng, g in moe:
                w = self._layers(flat, offsets, p + "ffn." + eng, g)
                if w is not None:
                    self[key] = w
        # per-layer state-dict names: blocks.N.attn.W_Q [H, d, hd], blocks.N.mlp.W_in_experts [E, d, fe] ...
        attn = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")
        for key in list(self):
            if key in ("W_E", "W_pos", "W_U"):
                continue
            for l in range(L):
                if self[key][l] is not None:
                    self["blocks.%d.%s.%s" % (l, "attn" if key in attn else "mlp", key)] = self[key][l]
        # norms: blocks.N.ln1.w / .b, ln_final.w; QK-norm blocks.N.attn.q_norm.w; DyT's .alpha
        suffix = {"weight": "w", "bias": "b", "alpha": "alpha"}
        tl = _norm_names(c)
        for name, (off, shape) in offsets.items():
            parts = name.split(".")
            if parts[0] == "layers" and parts[2] in tl:
                self["blocks.%s.%s.%s" % (parts[1], tl[parts[2]], suffix[parts[3]])] = self.engine[name]
            elif parts[0] == "layers" and parts[2] == "attn" and parts[3] in ("q_norm", "k_norm"):
                self["blocks.%s.attn.%s.w" % (parts[1], parts[3])] = self.engine[name]
            elif parts[0] == "final_norm":
                self["ln_final." + suffix[parts[1]]] = self.engine[name]

    def __getitem__(self, key):
        try:
            return dict.__getitem__(self, key)
        except KeyError:
            raise KeyError("no weight %r in this model (Weights.keys() lists them; docs/python.md)" % (key,)) from None

    def repeat_kv(self, key):
        """W_K, W_V, b_K or b_V repeated per query head, [L, H, ...] as TransformerLens' W_K (query
        head h reads kv head h // (H / KV)); a copy (edit the per-kv-head view instead)."""
        if key not in ("W_K", "W_V", "b_K", "b_V"):
            raise ValueError("repeat_kv: %r; one of W_K, W_V, b_K, b_V" % (key,))
        H = self._cfg["num_attention_heads"]
        w = self[key]
        if isinstance(w, list):  # (per-layer views: each layer's own kv heads)
            return [None if v is None else np.repeat(v, H // v.shape[0], axis=0) for v in w]
        return np.repeat(w, H // w.shape[1], axis=1)

    def norm_gain(self, key):
        """The gain a norm weight applies (a copy): w, or 1 + w for Gemma's (1 + w) RMSNorm
        (norm_type rmsnorm_1p, its QK-norm too), which stores w itself (what self[key] is); the
        engine's rule (tlm_norm_gain)."""
        from ._core import _FP, _L, _err
        w = np.asarray(self[key], dtype=np.float32)
        if key.endswith(".b") or key.endswith(".alpha"):
            raise ValueError("norm_gain: %r is not a norm's weight (a .w key)" % (key,))
        model = self._model()
        h = model.__dict__.get("_h") if model is not None else None
        if h is None:
            raise ValueError("norm_gain: the model these weights belong to is closed")
        gain = np.array(w, dtype=np.float32, order="C")  # (a copy, computed in place)
        if _L.tlm_norm_gain(h, gain.ctypes.data_as(_FP), gain.ctypes.data_as(_FP), gain.size):
            raise _err("norm_gain")
        return gain

    def __repr__(self):
        return "Weights(%d arrays%s: %s)" % (len(self), ", writable" if self.writable else ", read-only",
                                              ", ".join("%s %s" % (k, tuple(v.shape)) for k, v in self.items()
                                                        if not k.startswith("blocks.")))


def param_table(L, h):
    """{engine tensor name: (element offset into the buffer, shape)}, the base address, the
    buffer's length in floats (the library's tensor table)"""
    shape = (ctypes.c_int64 * 2)()
    nd = ctypes.c_int()
    out = {}
    base = None
    addrs = {}
    for i in range(L.tlm_param_count(h)):
        name = L.tlm_param_name(h, i)
        p = L.tlm_param(h, name, shape, ctypes.byref(nd))
        if not p:
            return None, name.decode()
        addrs[name.decode()] = (ctypes.cast(p, ctypes.c_void_p).value, tuple(shape[k] for k in range(nd.value)))
    base = min(a for a, _ in addrs.values())
    for name, (a, shp) in addrs.items():
        out[name] = ((a - base) // _F, shp)
    return out, base


def flat_buffer(base, n, keep, writable):
    """the whole parameter buffer as one float32 array; every view of it references `keep`
    (through the ctypes array it is made from), so the Model sees whether a view is alive and
    frees the engine's model only once none is (Model.close). Read-only: the flat array itself is
    not writeable, so no view of it can be made writeable again."""
    holder = (ctypes.c_float * n).from_address(base)
    holder._keep = keep
    flat = np.frombuffer(holder, dtype=np.float32)
    if not writable:
        flat.flags.writeable = False
    return flat



class _Keep:
    """referenced by every weight view (Model.weights): while one lives, close() defers tlm_free"""


class WeightsMixin:
    # ---- weights ----------------------------------------------------------------------------

    def _kept(self):
        """the object every view of the parameters holds: alive while any view is (one per model)"""
        keep = self._keep() if self._keep is not None else None
        if keep is None:
            keep = _Keep()
            self._keep = weakref.ref(keep)
        return keep

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
        table, base = param_table(_L, h)
        if table is None:
            raise _err("weights: %s" % base)
        keep = self._kept()
        flat = flat_buffer(base, _L.tlm_num_params(h), keep, writable)
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
        table, base = param_table(_L, copy)
        if table is None:
            raise _err("weights: %s" % base)
        flat = flat_buffer(base, _L.tlm_num_params(copy), keep, False)
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
            table, base = param_table(_L, h)
            if table is None:
                raise _err("edit_weights: %s" % base)
            keep = self._kept()
            engine = flat_buffer(base, _L.tlm_num_params(h), keep, True)
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


__all__ = ["Weights", "_lib"]
