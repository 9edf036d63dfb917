"""ref_config.py — the reference's reading of config.json (docs/config.md) and the tensor list
(docs/tensors.md): fills in defaults, checks values, and lists parameter names and shapes in
the engine's buffer order. Written from the docs, not from the C engine."""
import collections

NORM_TYPES = ("layernorm", "rmsnorm", "rmsnorm_1p", "dyt")
PLACEMENTS = ("pre", "post", "sandwich", "output", "none", "deepnorm")
POSITIONS = ("rope", "learned", "none")
FFN_TYPES = ("swiglu", "geglu", "gelu")
QK_NORMS = ("none", "head", "full")
LAYER_TYPES = ("full_attention", "sliding_attention")


def _bad(key, value, why):
    return ValueError("config.json: %s = %r %s" % (key, value, why))


def resolve_config(raw):
    """Returns a new dict with every key of docs/config.md set (defaults filled in)."""
    c = dict(raw)

    def pos_int(key, default=None):
        v = c.get(key, default)
        if v is None:
            raise ValueError("config.json: %s is required" % key)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise _bad(key, v, "must be an int > 0")
        c[key] = v
        return v

    def choice(key, options, default):
        v = c.get(key, default)
        if v not in options:
            raise _bad(key, v, "must be one of %s" % (", ".join(options),))
        c[key] = v
        return v

    def flag(key, default):
        v = c.get(key, default)
        if not isinstance(v, bool):
            raise _bad(key, v, "must be true or false")
        c[key] = v
        return v

    def num(key, default, allow_zero):
        v = c.get(key, default)
        if v is None:
            c[key] = None
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or (v == 0 and not allow_zero):
            raise _bad(key, v, "must be a number %s 0" % (">=" if allow_zero else ">"))
        c[key] = float(v)
        return v

    pos_int("vocab_size")
    d = pos_int("hidden_size")
    L = pos_int("num_hidden_layers")
    H = pos_int("num_attention_heads")
    kv = pos_int("num_key_value_heads", H)
    if H % kv:
        raise _bad("num_key_value_heads", kv, "does not divide num_attention_heads = %d" % H)
    if "head_dim" not in c and d % H:
        raise _bad("hidden_size", d, "is not a multiple of num_attention_heads = %d (set head_dim)" % H)
    pos_int("head_dim", d // H)
    pos_int("intermediate_size", 4 * d)
    pos_int("max_position_embeddings", 1024)

    choice("norm_type", NORM_TYPES, "rmsnorm")
    num("norm_eps", 1e-5, allow_zero=False)
    flag("norm_bias", False)
    num("dyt_alpha_init", 0.5, allow_zero=False)
    placement = choice("norm_placement", PLACEMENTS, "pre")
    res = flag("residual", True)
    flag("final_norm", placement not in ("post", "deepnorm"))
    # DeepNet (Wang et al. 2022), decoder-only: alpha = (2N)^(1/4), beta = (8N)^(-1/4)
    for key, derived in (("deepnorm_alpha", (2.0 * L) ** 0.25), ("deepnorm_beta", (8.0 * L) ** -0.25)):
        if placement != "deepnorm":
            if key in c:
                raise _bad(key, c[key], "needs norm_placement deepnorm")
            continue
        num(key, derived, allow_zero=False)
    if placement == "deepnorm" and not res:
        raise _bad("residual", False, "with norm_placement deepnorm (it scales the residual)")
    pos = choice("position_embedding", POSITIONS, "rope")
    num("rope_theta", 10000.0, allow_zero=False)
    if pos == "rope" and c["head_dim"] % 2:
        raise _bad("head_dim", c["head_dim"], "must be even with rope")
    flag("embedding_scale", False)
    ab = flag("attention_bias", False)
    flag("attention_out_bias", ab)
    qk = choice("qk_norm", QK_NORMS, "none")
    if qk != "none" and c["norm_type"] == "dyt":
        raise _bad("qk_norm", qk, "is an RMSNorm of q and k; not with norm_type dyt")
    num("query_pre_attn_scalar", None, allow_zero=False)
    num("attn_logit_softcapping", 0.0, allow_zero=True)
    sw = c.get("sliding_window", 0)
    if sw is None:
        sw = 0
    if isinstance(sw, bool) or not isinstance(sw, int) or sw < 0:
        raise _bad("sliding_window", sw, "must be an int >= 0")
    c["sliding_window"] = sw
    lt = c.get("layer_types")
    if lt is None:
        lt = ["sliding_attention" if sw > 0 else "full_attention"] * L
    if not isinstance(lt, list) or len(lt) != L or any(t not in LAYER_TYPES for t in lt):
        raise _bad("layer_types", lt, "must be a list of %d of %s" % (L, "/".join(LAYER_TYPES)))
    c["layer_types"] = list(lt)
    choice("ffn_type", FFN_TYPES, "swiglu")
    flag("mlp_bias", False)
    _resolve_moe(c, L)
    flag("tie_word_embeddings", True)
    num("final_logit_softcapping", 0.0, allow_zero=True)
    num("initializer_range", 0.02, allow_zero=False)
    flag("scale_residual_init", placement != "deepnorm")
    if placement == "deepnorm" and c["scale_residual_init"]:
        raise _bad("scale_residual_init", True, "with norm_placement deepnorm (its init is beta)")
    return c


SCORING = ("softmax", "sigmoid")


def _resolve_moe(c, L):
    """The mixture-of-experts keys (docs/config.md "Mixture of experts"): defaults, checks, and
    c["moe_layers"], the list of layers whose FFN is a mixture of experts."""
    def nonneg_int(key, default):
        v = c.get(key, default)
        if v is None:
            v = default
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise _bad(key, v, "must be an int >= 0")
        c[key] = v
        return v

    E = nonneg_int("num_experts", 0)
    k = nonneg_int("num_experts_per_tok", 0)
    c["moe_intermediate_size"] = c.get("moe_intermediate_size", c["intermediate_size"])
    shared = nonneg_int("n_shared_experts", 0)
    c["norm_topk_prob"] = bool(c.get("norm_topk_prob", False))
    scoring = c.get("scoring_func", "softmax")
    if scoring not in SCORING:
        raise _bad("scoring_func", scoring, "must be one of softmax, sigmoid")
    c["scoring_func"] = scoring
    G = nonneg_int("n_group", 1) or 1
    TG = nonneg_int("topk_group", 1) or 1
    c["n_group"], c["topk_group"] = G, TG
    c["routed_scaling_factor"] = float(c.get("routed_scaling_factor", 1.0))
    first = nonneg_int("first_k_dense_replace", 0)
    step = nonneg_int("decoder_sparse_step", 1)
    only = list(c.get("mlp_only_layers", []))
    c["mlp_only_layers"] = only
    if E == 0:
        if k or shared or scoring != "softmax" or G > 1:
            raise _bad("num_experts", 0, "with MoE keys set")
        c["moe_layers"] = []
        return
    if not 1 <= k <= E:
        raise _bad("num_experts_per_tok", k, "must be between 1 and num_experts = %d" % E)
    if c["ffn_type"] == "gelu" or c["mlp_bias"]:
        raise _bad("ffn_type", c["ffn_type"], "/ mlp_bias: the experts are gated MLPs without biases")
    if G > 1 and (scoring != "sigmoid" or E % G or E // G < 2 or not 1 <= TG <= G or TG * (E // G) < k):
        raise _bad("n_group", G, "is group-limited sigmoid routing over groups of >= 2 experts")
    if step < 1:
        raise _bad("decoder_sparse_step", step, "must be >= 1")
    c["moe_layers"] = [n for n in range(L) if n >= first and (n + 1) % step == 0 and n not in only]


def _norm(names, prefix, c):
    names[prefix + ".weight"] = [c["hidden_size"]]
    if (c["norm_type"] == "layernorm" and c["norm_bias"]) or c["norm_type"] == "dyt":
        names[prefix + ".bias"] = [c["hidden_size"]]
    if c["norm_type"] == "dyt":  # DyT: gamma, beta, then the scalar alpha
        names[prefix + ".alpha"] = [1]


def param_shapes(c):
    """OrderedDict name -> shape, in the engine's parameter-buffer order (docs/tensors.md)."""
    d, V, hd = c["hidden_size"], c["vocab_size"], c["head_dim"]
    H, KV, f = c["num_attention_heads"], c["num_key_value_heads"], c["intermediate_size"]
    pl = c["norm_placement"]
    in_norm = pl in ("pre", "post", "sandwich", "deepnorm")
    out_norm = pl in ("sandwich", "output")
    s = collections.OrderedDict()
    s["embed.weight"] = [V, d]
    if c["position_embedding"] == "learned":
        s["pos_embed.weight"] = [c["max_position_embeddings"], d]
    for n in range(c["num_hidden_layers"]):
        p = "layers.%d." % n
        if in_norm:
            _norm(s, p + "attn_norm", c)
        if out_norm:
            _norm(s, p + "attn_out_norm", c)
        for proj, rows in (("q", H * hd), ("k", KV * hd), ("v", KV * hd)):
            s[p + "attn.%s_proj.weight" % proj] = [rows, d]
            if c["attention_bias"]:
                s[p + "attn.%s_proj.bias" % proj] = [rows]
        s[p + "attn.o_proj.weight"] = [d, H * hd]
        if c["attention_out_bias"]:
            s[p + "attn.o_proj.bias"] = [d]
        if c["qk_norm"] == "head":
            s[p + "attn.q_norm.weight"] = [hd]
            s[p + "attn.k_norm.weight"] = [hd]
        elif c["qk_norm"] == "full":
            s[p + "attn.q_norm.weight"] = [H * hd]
            s[p + "attn.k_norm.weight"] = [KV * hd]
        if in_norm:
            _norm(s, p + "ffn_norm", c)
        if out_norm:
            _norm(s, p + "ffn_out_norm", c)
        if n in c["moe_layers"]:  # the router, its selection bias, the experts, the shared expert
            E, fe = c["num_experts"], c["moe_intermediate_size"]
            s[p + "ffn.router.weight"] = [E, d]
            if c["scoring_func"] == "sigmoid":
                s[p + "ffn.router.e_score_correction_bias"] = [E]
            for e in range(E):
                s[p + "ffn.experts.%d.gate_proj.weight" % e] = [fe, d]
                s[p + "ffn.experts.%d.up_proj.weight" % e] = [fe, d]
                s[p + "ffn.experts.%d.down_proj.weight" % e] = [d, fe]
            fs = fe * c["n_shared_experts"]
            if fs:
                s[p + "ffn.shared_experts.gate_proj.weight"] = [fs, d]
                s[p + "ffn.shared_experts.up_proj.weight"] = [fs, d]
                s[p + "ffn.shared_experts.down_proj.weight"] = [d, fs]
            continue
        projs = (("gate", [f, d]), ("up", [f, d]), ("down", [d, f]))
        for proj, shape in projs:
            if proj == "gate" and c["ffn_type"] == "gelu":
                continue
            s[p + "ffn.%s_proj.weight" % proj] = shape
            if c["mlp_bias"]:
                s[p + "ffn.%s_proj.bias" % proj] = [shape[0]]
    if c["final_norm"]:
        _norm(s, "final_norm", c)
    if not c["tie_word_embeddings"]:
        s["lm_head.weight"] = [V, d]
    return s
