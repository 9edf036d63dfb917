"""weights.py — the engine's parameters as NumPy views, under TransformerLens' names and shapes.

The engine keeps every parameter in one f32 buffer laid out as docs/tensors.md says (a linear
layer's weight is [out, in]; q|k|v and gate|up back to back). TransformerLens multiplies from
the left (x @ W), per head; so W_Q [L, H, d_model, d_head] here is q_proj.weight [H*hd, d]
seen through strides, not a copy: the arrays are views of the engine's memory, and with
writable=True an edit is what the next pass computes with. docs/python.md ("Weights").
"""
import ctypes

import numpy as np

from . import _lib

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
    return out


class Weights(dict):
    """{TransformerLens name: NumPy view of the engine's parameter buffer}. Built by
    Model.weights(); read-only unless writable=True. Keys: the stacked arrays (W_E, W_pos, W_U,
    W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O, W_in, W_gate, W_out, b_in, b_gate, b_out) and the
    per-layer state-dict names (blocks.N.attn.W_Q, blocks.N.ln1.w, ln_final.w, ...)."""

    def __init__(self, model, flat, offsets, writable):
        super().__init__()
        self._cfg = model.config
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

    def _stack(self, flat, offsets, fmt, shape, strides, what):
        """one view over every layer: the layers' tensors lie at equal distances in the buffer"""
        L = self._cfg["num_hidden_layers"]
        names = [fmt % l for l in range(L)]
        if any(n not in offsets for n in names):
            return None
        offs = [offsets[n][0] for n in names]
        step = offs[1] - offs[0] if L > 1 else 0
        if any(offs[i] - offs[0] != i * step for i in range(L)):
            c = self._cfg
            if c.get("global_head_dim") or c.get("num_global_key_value_heads") or c.get("use_double_wide_mlp"):
                return None  # (Gemma 4's layers of two shapes: no stacked view; the engine names remain)
            raise RuntimeError("weights: %s of the layers are not evenly spaced in the parameter buffer" % what)
        return self._view(flat, offs[0], (L,) + tuple(shape), (step,) + tuple(strides))

    def _build(self, flat, offsets):
        c = self._cfg
        L, d = c["num_hidden_layers"], c["hidden_size"]
        H = c["num_attention_heads"]
        KV = c.get("num_key_value_heads") or H
        hd = c.get("head_dim") or d // H
        f = c["intermediate_size"]
        V = c["vocab_size"]
        E = offsets["embed.weight"][0]
        self["W_E"] = self._view(flat, E, (V, d), None)
        if "pos_embed.weight" in offsets:
            off, shape = offsets["pos_embed.weight"]
            self["W_pos"] = self._view(flat, off, shape, None)
        head = offsets.get("lm_head.weight", (E, None))[0]  # tied: the embedding itself
        self["W_U"] = self._view(flat, head, (d, V), (1, d))
        p = "layers.%d."
        # [out, in] weights seen per head as TransformerLens' [heads, d_model, d_head]
        for key, eng, n in (("W_Q", "q_proj", H), ("W_K", "k_proj", KV), ("W_V", "v_proj", KV)):
            w = self._stack(flat, offsets, p + "attn." + eng + ".weight", (n, d, hd), (hd * d, 1, d), key)
            if w is not None:  # (Gemma 4: absent when the layers differ in shape, or lack k / v)
                self[key] = w
            b = self._stack(flat, offsets, p + "attn." + eng + ".bias", (n, hd), (hd, 1), key)
            if b is not None:
                self["b_" + key[2]] = b
        w = self._stack(flat, offsets, p + "attn.o_proj.weight", (H, hd, d), (hd, 1, H * hd), "W_O")
        if w is not None:
            self["W_O"] = w
        b = self._stack(flat, offsets, p + "attn.o_proj.bias", (d,), (1,), "b_O")
        if b is not None:
            self["b_O"] = b
        for key, eng, shape, strides in (("W_in", "up_proj", (d, f), (1, d)), ("W_gate", "gate_proj", (d, f), (1, d)),
                                         ("W_out", "down_proj", (f, d), (1, f))):
            w = self._stack(flat, offsets, p + "ffn." + eng + ".weight", shape, strides, key)
            if w is not None:
                self[key] = w
            b = self._stack(flat, offsets, p + "ffn." + eng + ".bias", (shape[1],), (1,), key)
            if b is not None:
                self["b" + key[1:]] = b
        # per-layer state-dict names: blocks.N.attn.W_Q [H, d, hd] ...
        for l in range(L):
            for key in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"):
                if key in self:
                    self["blocks.%d.attn.%s" % (l, key)] = self[key][l]
            for key in ("W_in", "W_gate", "W_out", "b_in", "b_gate", "b_out"):
                if key in self:
                    self["blocks.%d.mlp.%s" % (l, key)] = self[key][l]
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
        KV = self._cfg.get("num_key_value_heads") or H
        return np.repeat(self[key], H // KV, axis=1)

    def norm_gain(self, key):
        """The gain a norm weight applies (a copy): w, or 1 + w for Gemma's (1 + w) RMSNorm
        (norm_type rmsnorm_1p, its QK-norm too), which stores w itself (what self[key] is)."""
        w = np.asarray(self[key], dtype=np.float32)
        if key.endswith(".b") or key.endswith(".alpha"):
            raise ValueError("norm_gain: %r is not a norm's weight (a .w key)" % (key,))
        return (1.0 + w) if self._cfg.get("norm_type") == "rmsnorm_1p" else w.copy()

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


__all__ = ["Weights", "_lib"]
