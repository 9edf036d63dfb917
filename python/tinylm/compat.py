"""compat.py — TransformerLens' names on a tinylm Model: `model.cfg`, weight attributes
(`model.W_Q`, `model.W_K` repeated per query head, `model._W_K` per kv head, `model.OV`, ...),
`to_tokens` / `to_string` / `to_single_token`, text wherever ids are taken, and persistent hooks
(`add_hook`, `reset_hooks`, the `hooks()` context). The Model class takes these from
TransformerLensMixin; docs/python.md ("TransformerLens → tinylm") says what is the same and what
differs.
"""
import contextlib
import os
import threading

import numpy as np

from ._core import _L, _err
from .factored import FactoredMatrix

# TransformerLens' act_fn names for the engine's ffn_type (docs/config.md: the GELUs are tanh's)
_ACT_FN = {"swiglu": "silu", "geglu": "gelu_pytorch_tanh", "gelu": "gelu_new"}
_NORM = {"layernorm": "LN", "rmsnorm": "RMS", "rmsnorm_1p": "RMS", "dyt": "DyT"}
_POS = {"rope": "rotary", "learned": "standard", "none": None}


class Config:
    """TransformerLens' HookedTransformerConfig names for this model's config (read-only values):
    n_layers d_model n_heads d_head d_mlp d_vocab d_vocab_out n_ctx act_fn gated_mlp
    normalization_type positional_embedding_type n_key_value_heads eps rotary_base rotary_dim
    rotary_adjacent_pairs attn_scores_soft_cap output_logits_soft_cap window_size use_attn_scale
    final_rms num_experts experts_per_token original_architecture model_name device dtype
    default_prepend_bos tokenizer_prepends_bos use_split_qkv_input, plus tinylm's norm_placement and
    the whole engine config as .config (a dict). to_dict() gives them all. use_split_qkv_input is the
    one that can be set (cfg.use_split_qkv_input = True is model.set_use_split_qkv_input(True))."""

    _FIELDS = ("n_layers", "d_model", "n_heads", "d_head", "d_mlp", "d_vocab", "d_vocab_out", "n_ctx", "act_fn",
               "gated_mlp", "normalization_type", "positional_embedding_type", "n_key_value_heads", "eps",
               "rotary_base", "rotary_dim", "rotary_adjacent_pairs", "attn_scores_soft_cap",
               "output_logits_soft_cap", "window_size", "use_attn_scale", "attn_scale", "final_rms", "num_experts",
               "experts_per_token", "original_architecture", "model_name", "device", "dtype", "default_prepend_bos",
               "tokenizer_prepends_bos", "attn_only", "parallel_attn_mlp", "norm_placement", "use_split_qkv_input")

    def __init__(self, model):
        c = model.config
        H = c["num_attention_heads"]
        d = c["hidden_size"]
        hd = c.get("head_dim") or d // H
        if c.get("qk_nope_head_dim") or c.get("qk_rope_head_dim"):  # MLA: the heads attention runs on
            hd = max((c.get("qk_nope_head_dim") or 0) + (c.get("qk_rope_head_dim") or 0), c.get("v_head_dim") or 0)
        self.config = dict(c)
        self.n_layers = c["num_hidden_layers"]
        self.d_model = d
        self.n_heads = H
        self.d_head = hd
        self.d_mlp = c.get("intermediate_size")
        self.d_vocab = self.d_vocab_out = c["vocab_size"]
        self.n_ctx = c["max_position_embeddings"]
        ffn = c.get("ffn_type", "swiglu")
        self.act_fn = _ACT_FN.get(ffn, ffn)
        self.gated_mlp = ffn in ("swiglu", "geglu")
        self.normalization_type = _NORM.get(c.get("norm_type"), c.get("norm_type"))
        self.positional_embedding_type = _POS.get(c.get("position_embedding", "rope"), c.get("position_embedding"))
        self.n_key_value_heads = c.get("num_key_value_heads") or H
        self.eps = c.get("norm_eps")
        rope = self.positional_embedding_type == "rotary"
        self.rotary_base = c.get("rope_theta") if rope else None
        self.rotary_dim = (c.get("qk_rope_head_dim") or hd) if rope else None
        self.rotary_adjacent_pairs = bool(c.get("rope_interleave")) if rope else None
        self.attn_scores_soft_cap = float(c.get("attn_logit_softcapping") or 0) or -1.0
        self.output_logits_soft_cap = float(c.get("final_logit_softcapping") or 0) or -1.0
        self.window_size = c.get("sliding_window") or None
        self.use_attn_scale = True
        q = c.get("query_pre_attn_scalar")
        self.attn_scale = float(np.sqrt(q if q else hd))
        self.final_rms = c.get("norm_type") in ("rmsnorm", "rmsnorm_1p") and bool(c.get("final_norm", True))
        self.num_experts = c.get("num_experts") or None
        self.experts_per_token = c.get("num_experts_per_tok") if self.num_experts else None
        self.original_architecture = c.get("model_type")
        self.model_name = os.path.basename(os.path.normpath(str(model.path)))
        self.device, self.dtype = "cpu", "float32"
        try:
            self.default_prepend_bos = self.tokenizer_prepends_bos = model.bos is not None
        except Exception:  # noqa: BLE001 (no tokenizer)
            self.default_prepend_bos = self.tokenizer_prepends_bos = False
        self.attn_only = False
        self.parallel_attn_mlp = False
        self.norm_placement = c.get("norm_placement", "pre")
        self.use_split_qkv_input = bool(model.__dict__.get("_split_qkv", False))
        object.__setattr__(self, "_model", model)

    def to_dict(self):
        return {k: getattr(self, k) for k in self._FIELDS}

    def __getitem__(self, key):  # (cfg["n_layers"] as well as cfg.n_layers)
        if key not in self._FIELDS:
            raise KeyError("cfg: no field %r (cfg.to_dict() lists them; cfg.config is the engine's config)" % (key,))
        return getattr(self, key)

    def __setattr__(self, key, value):
        if key == "use_split_qkv_input" and getattr(self, "_frozen", False):
            self._model.set_use_split_qkv_input(value)
            object.__setattr__(self, key, bool(value))
            return
        if getattr(self, "_frozen", False):
            raise AttributeError("cfg.%s: the config is read-only (it describes the loaded model)" % key)
        object.__setattr__(self, key, value)

    def __repr__(self):
        return "Config(%s)" % ", ".join("%s=%r" % kv for kv in self.to_dict().items())


def _zeros(shape):
    z = np.zeros(shape, np.float32)
    z.flags.writeable = False
    return z


def _weight_property(key, doc):
    def get(self):
        W = self._tl_weights()
        if key in W:
            return W[key]
        return self._absent_bias(key, W)
    return property(get, doc=doc)


class TransformerLensMixin:
    """TransformerLens' names on Model (docs/python.md, "TransformerLens → tinylm")."""

    # ---- config and weights --------------------------------------------------------------------

    def _tl_weights(self):
        """read-only Weights for the attributes: made once (so that model.W_U works inside a hook,
        where a call on the model is refused), dropped by close(); inside edit_weights() the block's copy"""
        staged = self.__dict__.get("_staged")
        if staged is not None:
            flat = staged[1].view()
            flat.flags.writeable = False
            from .weights import Weights
            return Weights(self, flat, staged[2], False)
        W = self.__dict__.get("_tl_W")
        if W is None:
            if self._owner == threading.get_ident() and self._h is not None:
                W = self._weights_held(self._h, False)  # (first use inside a hook: this pass holds the model)
            else:
                W = self.weights()
            self._tl_W = W
        return W

    @property
    def cfg(self):
        """TransformerLens' config names (Config); model.config stays the engine's dict"""
        c = Config(self)
        c._frozen = True
        return c

    def set_use_split_qkv_input(self, use_split_qkv_input):
        """TransformerLens' use_split_qkv_input: True makes blocks.{l}.hook_q_input a copy of the stream
        per head, [.., T, n_heads, d_model], and hook_k_input / hook_v_input one per kv head,
        [.., T, n_key_value_heads, d_model] (TransformerLens' grouped-query layout); each head's q, k or
        v reads its own copy through the layer's input norm, so an edit of one head's copy changes
        that head alone, and the gradient there is that head's (their sum over heads is the gradient
        of the single copy). False (the default): one [.., T, d_model] copy each. Like every such
        point, they are made only when a hook or the cache asks for them; the switch costs a pass
        that does not ask nothing."""
        if not isinstance(use_split_qkv_input, (bool, np.bool_)):
            raise TypeError("set_use_split_qkv_input: True or False, got %r" % (use_split_qkv_input,))
        with self._using("set_use_split_qkv_input") as h:
            if _L.tlm_set_split_qkv_input(h, int(bool(use_split_qkv_input))):
                raise _err("set_use_split_qkv_input")
            self._split_qkv = bool(use_split_qkv_input)
            self._shapes.clear()  # (the points' shapes per pass changed)
            self._views.clear()

    W_E = _weight_property("W_E", "[d_vocab, d_model], a read-only view of the embedding")
    W_U = _weight_property("W_U", "[d_model, d_vocab] (W_E's memory when tied)")
    W_pos = _weight_property("W_pos", "[n_ctx, d_model] (learned positions only)")
    W_Q = _weight_property("W_Q", "[L, H, d_model, d_head]")
    _W_K = _weight_property("W_K", "[L, KV, d_model, d_head]: per kv head (TransformerLens' _W_K)")
    _W_V = _weight_property("W_V", "[L, KV, d_model, d_head]: per kv head (TransformerLens' _W_V)")
    W_O = _weight_property("W_O", "[L, H, d_head, d_model]")
    W_in = _weight_property("W_in", "[L, d_model, d_mlp]")
    W_gate = _weight_property("W_gate", "[L, d_model, d_mlp] (gated MLPs)")
    W_out = _weight_property("W_out", "[L, d_mlp, d_model]")
    b_Q = _weight_property("b_Q", "[L, H, d_head] (zeros without attention_bias)")
    _b_K = _weight_property("b_K", "[L, KV, d_head] (zeros without attention_bias)")
    _b_V = _weight_property("b_V", "[L, KV, d_head] (zeros without attention_bias)")
    b_O = _weight_property("b_O", "[L, d_model] (zeros without attention_out_bias)")
    b_in = _weight_property("b_in", "[L, d_mlp] (zeros without mlp_bias)")
    b_out = _weight_property("b_out", "[L, d_model] (zeros without mlp_bias)")

    @property
    def W_K(self):
        """[L, H, d_model, d_head]: per query head (query head h reads kv head h // (H / KV)), a copy"""
        return self._tl_weights().repeat_kv("W_K")

    @property
    def W_V(self):
        """[L, H, d_model, d_head]: per query head, a copy"""
        W = self._tl_weights()
        if "W_V" not in W:
            raise KeyError("W_V: this model has no v_proj (K = V: attention_k_eq_v); W_K is its value projection")
        return W.repeat_kv("W_V")

    @property
    def b_K(self):
        W = self._tl_weights()
        return W.repeat_kv("b_K") if "b_K" in W else self._absent_bias("b_K", W)

    @property
    def b_V(self):
        W = self._tl_weights()
        return W.repeat_kv("b_V") if "b_V" in W else self._absent_bias("b_V", W)

    @property
    def b_U(self):
        """[d_vocab] zeros: the engine's head has no bias"""
        return _zeros((self.vocab_size,))

    def _absent_bias(self, key, W):
        """zeros shaped as TransformerLens' bias where the model has none (read-only); KeyError for a weight"""
        c = self.cfg
        L, H, hd, d = c.n_layers, c.n_heads, c.d_head, c.d_model
        shapes = {"b_Q": (L, H, hd), "b_K": (L, H, hd), "b_V": (L, H, hd), "b_O": (L, d), "b_out": (L, d)}
        if key == "b_in" and "W_in" in W and not isinstance(W["W_in"], list):
            shapes["b_in"] = W["W_in"].shape[:1] + W["W_in"].shape[2:]
        if key in shapes:
            return _zeros(shapes[key])
        raise AttributeError("%s: this model has no such weight (model.weights().keys() lists them)" % key)

    def _per_head(self, what):
        W = self._tl_weights()
        if any(isinstance(W[k], list) for k in ("W_Q", "W_K", "W_O") if k in W):
            raise ValueError("%s: the layers of this model differ in their attention shapes (or some read an earlier "
                             "layer's keys): take model.weights()['W_Q'][l] per layer" % what)
        return W

    @property
    def OV(self):
        """FactoredMatrix W_V @ W_O, [L, H, d_model, d_model] (W_V repeated per query head)"""
        self._per_head("OV")
        return FactoredMatrix(self.W_V, self._tl_weights()["W_O"])

    @property
    def QK(self):
        """FactoredMatrix W_Q @ W_K^T, [L, H, d_model, d_model] (W_K repeated per query head): the
        bilinear form of the attention scores before RoPE and the scale"""
        W = self._per_head("QK")
        return FactoredMatrix(W["W_Q"], np.swapaxes(self.W_K, -1, -2))

    # ---- tokens ----------------------------------------------------------------------------------

    def to_tokens(self, input, prepend_bos=True, padding_side=None):
        """TransformerLens' to_tokens: a text -> int32 [1, T]; a list of texts -> [B, T], padded as
        tokenize_batch pads (with EOS, on padding_side: None is "right"). The ids carry no pad marker: right padding
        leaves every real position's logits as the text's alone (attention is causal); with left
        padding pass the mask (model.tokenize_batch gives it), or pass the texts themselves."""
        if isinstance(input, str):
            return self.tokenize(input, bos=prepend_bos)[None]
        if isinstance(input, (list, tuple)) and input and all(isinstance(t, str) for t in input):
            return self.tokenize_batch(list(input), bos=prepend_bos, padding_side=padding_side or "right")[0]
        raise TypeError("to_tokens: input must be a str or a non-empty list of str, got %s" % type(input).__name__)

    def to_string(self, tokens):
        """TransformerLens' to_string: [T] ids -> a text, [B, T] -> a list of texts (each row's)"""
        a = np.asarray(tokens)
        if a.ndim == 2:
            return [self.decode(r) for r in a]
        if a.ndim > 2:
            raise ValueError("to_string: ids of shape %s; [T] or [B, T]" % (a.shape,))
        return self.decode(a)

    def to_single_token(self, string):
        """the id of a string that is exactly one token (without BOS), else ValueError"""
        if not isinstance(string, str):
            raise TypeError("to_single_token: a str, got %s" % type(string).__name__)
        ids = self.tokenize(string, bos=False)
        if ids.size != 1:
            pieces = self.to_str_tokens(ids) if ids.size else []
            raise ValueError("to_single_token: %r is %d tokens %r, not one" % (string, ids.size, pieces))
        return int(ids[0])

    def _text_input(self, ids, attention_mask, what, prepend_bos=None, padding_side=None):
        """(ids, attention_mask) from what a call was given: a text (tokenized with BOS) or a list of texts
        (tokenize_batch: right padding, the mask made here), else the ids and mask as given.
        TransformerLens' per-call prepend_bos= (True / False; None: BOS) and padding_side= ("right" /
        "left"; None: right) say how texts are tokenized; with ids they are refused (ids are used as given)."""
        if prepend_bos is not None and not isinstance(prepend_bos, bool):
            raise TypeError("%s: prepend_bos must be True, False or None, got %r" % (what, prepend_bos))
        if padding_side not in (None, "right", "left"):
            raise ValueError("%s: padding_side=%r; must be 'right', 'left' or None" % (what, padding_side))
        bos = True if prepend_bos is None else prepend_bos
        if isinstance(ids, str):
            if attention_mask is not None:
                raise ValueError("%s: attention_mask= with a text: the text gives its own tokens" % what)
            t = self.tokenize(ids, bos=bos)
            if t.size == 0:
                raise ValueError("%s: the text gives no tokens" % what)
            return t, None
        if isinstance(ids, (list, tuple)) and ids and all(isinstance(t, str) for t in ids):
            if attention_mask is not None:
                raise ValueError("%s: attention_mask= with a list of texts: they are padded here, with their mask" % what)
            t, m = self.tokenize_batch(list(ids), bos=bos, padding_side=padding_side or "right")
            return t, (m if not m.all() else None)
        for key, v in (("prepend_bos", prepend_bos), ("padding_side", padding_side)):
            if v is not None:
                raise ValueError("%s: %s= applies to texts; these are token ids, used as given (tokenize them with "
                                 "to_tokens(texts, %s=...))" % (what, key, key))
        return ids, attention_mask

    # ---- persistent hooks --------------------------------------------------------------------------

    def _hook_lists(self):
        if "_persistent" not in self.__dict__:
            self._persistent = {"fwd": [], "bwd": []}  # [(name, fn, is_permanent)]
        return self._persistent

    def add_hook(self, name, hook, dir="fwd", is_permanent=False):
        """TransformerLens' add_hook: hook(activation, hook_point) attached to name (a hook name, or a
        function name -> bool) for every later call on this model — model(), loss, run_with_cache,
        run_with_hooks, generate, param_grads and the tinylm.patching helpers — until reset_hooks().
        dir="bwd": a backward hook, run by the calls that run a backward (run_with_cache(backward=True),
        param_grads, run_with_hooks with bwd_hooks= or metric=). It runs before the call's own hooks at
        the same point. is_permanent=True: reset_hooks() keeps it (reset_hooks(including_permanent=True)
        does not)."""
        if dir not in ("fwd", "bwd"):
            raise ValueError("add_hook: dir = %r; 'fwd' or 'bwd'" % (dir,))
        if not callable(hook):
            raise TypeError("add_hook: hook must be a function (activation, hook) -> None or a replacement")
        if not isinstance(is_permanent, bool):
            raise TypeError("add_hook: is_permanent must be True or False")
        if dir == "fwd":
            self._fwd_table([(name, hook)], persistent=False)  # (checks the name now, not at the next call)
        else:
            self._bwd_table([(name, hook)], persistent=False)
        entry = (name, hook, is_permanent)
        self._hook_lists()[dir].append(entry)
        return entry

    def clear_contexts(self):
        """empties every hook point's hook.ctx (TransformerLens' clear_contexts)"""
        for hp in self.hook_points.values():
            hp.clear_context()

    def reset_hooks(self, including_permanent=False, clear_contexts=True):
        """removes the hooks add_hook attached (the permanent ones too with including_permanent=True);
        clear_contexts=True (TransformerLens' default) also empties every hook.ctx"""
        if clear_contexts:
            self.clear_contexts()
        lists = self._hook_lists()
        for d in ("fwd", "bwd"):
            lists[d][:] = [e for e in lists[d] if e[2] and not including_permanent]

    @contextlib.contextmanager
    def hooks(self, fwd_hooks=(), bwd_hooks=(), reset_hooks_end=True, clear_contexts=False):
        """`with model.hooks(fwd_hooks=[(name, fn)], bwd_hooks=[...]):` the hooks attached to every call
        inside the block (as add_hook), removed when it ends (reset_hooks_end=False keeps them);
        clear_contexts=True also empties every hook.ctx then (with reset_hooks_end)"""
        added = []
        try:
            for d, items in (("fwd", fwd_hooks), ("bwd", bwd_hooks)):
                for item in items or ():
                    if not isinstance(item, (tuple, list)) or len(item) != 2:
                        raise TypeError("hooks: each entry must be (name, fn), got %r" % (item,))
                    added.append((d, self.add_hook(item[0], item[1], dir=d)))
            yield self
        finally:
            if reset_hooks_end:
                lists = self._hook_lists()
                for d, e in added:
                    if e in lists[d]:
                        lists[d].remove(e)
                if clear_contexts:
                    self.clear_contexts()

    def _persistent_hooks(self, d):
        return [(n, f) for n, f, _ in self._hook_lists()[d]]


__all__ = ["Config", "TransformerLensMixin"]
