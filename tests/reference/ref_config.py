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
    _resolve_mla(c, H)
    if "head_dim" not in c and d % H:
        raise _bad("hidden_size", d, "is not a multiple of num_attention_heads = %d (set head_dim)" % H)
    pos_int("head_dim", d // H)
    pos_int("intermediate_size", 4 * d)
    pos_int("max_position_embeddings", 1024)

    choice("norm_type", NORM_TYPES, "rmsnorm")
    num("norm_eps", 1e-5, allow_zero=False)
    flag("norm_bias", False)
    num("dyt_alpha_init", 0.5, allow_zero=False)
    # DyT's alpha0 by position (attention norms / FFN norms / the final norm); absent or null = dyt_alpha_init
    for key in ("dyt_alpha_init_attn", "dyt_alpha_init_ffn", "dyt_alpha_init_final"):
        num(key, None, allow_zero=True)
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
    if pos == "rope" and c["head_dim"] % 2 and not c["mla"]:
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
    num("rope_local_base_freq", None, allow_zero=False)
    # Gemma 4 (docs/config.md "Gemma 4"): layer types with their own shapes, K = V, shared K/V
    for key in ("global_head_dim", "num_global_key_value_heads"):
        v = c.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
            raise _bad(key, v, "must be an int > 0 or null")
        c[key] = v
    if c["num_global_key_value_heads"] and H % c["num_global_key_value_heads"]:
        raise _bad("num_global_key_value_heads", c["num_global_key_value_heads"], "does not divide %d" % H)
    num("rope_proportional_fraction", 1.0, allow_zero=False)
    if c["rope_proportional_fraction"] > 1:
        raise _bad("rope_proportional_fraction", c["rope_proportional_fraction"], "must be <= 1")
    flag("v_norm", False)
    flag("attention_k_eq_v", False)
    flag("layer_scalar", False)
    flag("use_double_wide_mlp", False)
    shared = c.get("num_kv_shared_layers", 0)
    if isinstance(shared, bool) or not isinstance(shared, int) or not 0 <= shared < L:
        raise _bad("num_kv_shared_layers", shared, "must be an int in [0, %d)" % L)
    c["num_kv_shared_layers"] = shared
    ple = c.get("hidden_size_per_layer_input", 0)
    if isinstance(ple, bool) or not isinstance(ple, int) or ple < 0:
        raise _bad("hidden_size_per_layer_input", ple, "must be an int >= 0")
    c["hidden_size_per_layer_input"] = ple
    for n in range(L - shared, L):
        if kv_source(c, n) is None:
            raise _bad("num_kv_shared_layers", shared, "layer %d has no earlier layer of its type" % n)
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


def _resolve_mla(c, H):
    """Multi-head latent attention (docs/config.md "Multi-head latent attention"): kv_lora_rank > 0
    turns it on; the attention heads are then max(qk_nope + qk_rope, v_head_dim) wide for the engine's
    buffers (head_dim) and every head has its own keys (num_key_value_heads = heads). c["mla"]."""
    def int_or_null(key):
        v = c.get(key)
        if v is None:
            v = 0
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise _bad(key, v, "must be an int >= 0 or null")
        c[key] = v
        return v

    rkv = int_or_null("kv_lora_rank")
    int_or_null("q_lora_rank")
    for key in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
        int_or_null(key)
    c["rope_interleave"] = bool(c.get("rope_interleave", False))
    rs = c.get("rope_scaling")
    c["mla"] = rkv > 0
    if not c["mla"]:
        if rs is not None:
            raise _bad("rope_scaling", rs, "is read here with MLA only")
        return
    if rs is not None and (rs.get("rope_type", rs.get("type")) != "yarn"):
        raise _bad("rope_scaling", rs, "with MLA: only yarn")
    if c["qk_rope_head_dim"] <= 0 or c["qk_rope_head_dim"] % 2 or c["v_head_dim"] <= 0:
        raise _bad("qk_rope_head_dim", c["qk_rope_head_dim"], "must be even and > 0 (and v_head_dim > 0)")
    c["head_dim"] = max(c["qk_nope_head_dim"] + c["qk_rope_head_dim"], c["v_head_dim"])
    c["num_key_value_heads"] = H


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
    sff = nonneg_int("shared_expert_intermediate_size", 0)
    c["shared_expert_gate"] = bool(c.get("shared_expert_gate", False))
    if (sff or c["shared_expert_gate"]) and not shared:
        raise _bad("shared_expert_intermediate_size", sff, "/ shared_expert_gate need n_shared_experts >= 1")
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
    block = c["enable_moe_block"] = bool(c.get("enable_moe_block", False))
    if E == 0:
        if k or shared or scoring != "softmax" or G > 1 or block:
            raise _bad("num_experts", 0, "with MoE keys set")
        c["moe_layers"] = []
        return
    if block and (c["norm_placement"] != "sandwich" or scoring != "softmax" or not c["norm_topk_prob"] or shared
                  or c["routed_scaling_factor"] != 1.0):
        raise _bad("enable_moe_block", True, "is Gemma 4's block: sandwich norms, softmax routing renormalised, "
                   "no shared experts or scaling factor")
    if not 1 <= k <= E:
        raise _bad("num_experts_per_tok", k, "must be between 1 and num_experts = %d" % E)
    if c["ffn_type"] == "gelu" or c["mlp_bias"]:
        raise _bad("ffn_type", c["ffn_type"], "/ mlp_bias: the experts are gated MLPs without biases")
    if G > 1 and (scoring != "sigmoid" or E % G or E // G < 2 or not 1 <= TG <= G or TG * (E // G) < k):
        raise _bad("n_group", G, "is group-limited sigmoid routing over groups of >= 2 experts")
    if step < 1:
        raise _bad("decoder_sparse_step", step, "must be >= 1")
    c["moe_layers"] = [n for n in range(L) if n >= first and (n + 1) % step == 0 and n not in only]


def layer_shape(c, n):
    """(head_dim, kv heads) of layer n: a full-attention layer's own when global_head_dim /
    num_global_key_value_heads are given"""
    full = c["layer_types"][n] == "full_attention"
    hd = c["global_head_dim"] if full and c["global_head_dim"] else c["head_dim"]
    kv = c["num_global_key_value_heads"] if full and c["num_global_key_value_heads"] else c["num_key_value_heads"]
    return hd, kv


def kv_source(c, n):
    """the layer whose keys and values layer n reads: itself, or for the last num_kv_shared_layers
    layers the last layer of the same type before them (None: there is none)"""
    first = c["num_hidden_layers"] - c.get("num_kv_shared_layers", 0)
    if n < first:
        return n
    same = [j for j in range(first) if c["layer_types"][j] == c["layer_types"][n]]
    return same[-1] if same else None


def _norm(names, prefix, c):
    names[prefix + ".weight"] = [c["hidden_size"]]
    if (c["norm_type"] == "layernorm" and c["norm_bias"]) or c["norm_type"] == "dyt":
        names[prefix + ".bias"] = [c["hidden_size"]]
    if c["norm_type"] == "dyt":  # DyT: gamma, beta, then the scalar alpha
        names[prefix + ".alpha"] = [1]


def param_shapes(c):
    """OrderedDict name -> shape, in the engine's parameter-buffer order (docs/tensors.md)."""
    d, V = c["hidden_size"], c["vocab_size"]
    H, f = c["num_attention_heads"], c["intermediate_size"]
    pl = c["norm_placement"]
    in_norm = pl in ("pre", "post", "sandwich", "deepnorm")
    out_norm = pl in ("sandwich", "output")
    s = collections.OrderedDict()
    s["embed.weight"] = [V, d]
    if c["position_embedding"] == "learned":
        s["pos_embed.weight"] = [c["max_position_embeddings"], d]
    P, L = c["hidden_size_per_layer_input"], c["num_hidden_layers"]
    if P:  # Gemma 4's per-layer inputs: token table, projection of the embedding, its norm (over P)
        s["ple_embed.weight"] = [V, L * P]
        s["ple_model_proj.weight"] = [L * P, d]
        s["ple_model_norm.weight"] = [P]
    for n in range(c["num_hidden_layers"]):
        p = "layers.%d." % n
        if in_norm:
            _norm(s, p + "attn_norm", c)
        if out_norm:
            _norm(s, p + "attn_out_norm", c)
        hd, KV = layer_shape(c, n)
        own = kv_source(c, n) == n
        if c["mla"]:  # q (through q_lora or not), kv_a, its norm, kv_b, o
            dn, dr, dv = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
            rq, rkv = c["q_lora_rank"], c["kv_lora_rank"]
            if rq:
                s[p + "attn.q_a_proj.weight"] = [rq, d]
                s[p + "attn.q_a_norm.weight"] = [rq]
                s[p + "attn.q_b_proj.weight"] = [H * (dn + dr), rq]
            else:
                s[p + "attn.q_proj.weight"] = [H * (dn + dr), d]
            s[p + "attn.kv_a_proj.weight"] = [rkv + dr, d]
            s[p + "attn.kv_a_norm.weight"] = [rkv]
            s[p + "attn.kv_b_proj.weight"] = [H * (dn + dv), rkv]
            s[p + "attn.o_proj.weight"] = [d, H * dv]
            projs = []
        else:
            projs = [("q", H * hd)]
        if own and not c["mla"]:  # (a layer sharing an earlier one's keys and values has no k, v; K = V layers no v)
            projs.append(("k", KV * hd))
            if not (c["attention_k_eq_v"] and c["layer_types"][n] == "full_attention"):
                projs.append(("v", KV * hd))
        for proj, rows in projs:
            s[p + "attn.%s_proj.weight" % proj] = [rows, d]
            if c["attention_bias"]:
                s[p + "attn.%s_proj.bias" % proj] = [rows]
        if not c["mla"]:
            s[p + "attn.o_proj.weight"] = [d, H * hd]
        if c["attention_out_bias"]:
            s[p + "attn.o_proj.bias"] = [d]
        if c["qk_norm"] == "head":
            s[p + "attn.q_norm.weight"] = [hd]
            if own:
                s[p + "attn.k_norm.weight"] = [hd]
        elif c["qk_norm"] == "full":
            s[p + "attn.q_norm.weight"] = [H * hd]
            if own:
                s[p + "attn.k_norm.weight"] = [KV * hd]
        if in_norm:
            _norm(s, p + "ffn_norm", c)
        if out_norm:
            _norm(s, p + "ffn_out_norm", c)
        moe = n in c["moe_layers"]
        if not moe or c["enable_moe_block"]:  # the dense FFN (Gemma 4's MoE block keeps it beside the experts)
            lf = 2 * f if c["use_double_wide_mlp"] and n >= L - c["num_kv_shared_layers"] else f
            projs = (("gate", [lf, d]), ("up", [lf, d]), ("down", [d, lf]))
            for proj, shape in projs:
                if proj == "gate" and c["ffn_type"] == "gelu":
                    continue
                s[p + "ffn.%s_proj.weight" % proj] = shape
                if c["mlp_bias"]:
                    s[p + "ffn.%s_proj.bias" % proj] = [shape[0]]
        if moe:  # the router, its selection bias, the experts, the shared expert
            E, fe = c["num_experts"], c["moe_intermediate_size"]
            if c["enable_moe_block"]:  # Gemma 4: the dense output's norm, the experts' input and output norms
                for nm in ("dense_out_norm", "moe_in_norm", "moe_out_norm"):
                    _norm(s, p + nm, c)
            s[p + "ffn.router.weight"] = [E, d]
            if c["scoring_func"] == "sigmoid":
                s[p + "ffn.router.e_score_correction_bias"] = [E]
            if c["enable_moe_block"]:  # the router's input scale, each expert's weight scale
                s[p + "ffn.router.scale"] = [d]
                s[p + "ffn.router.expert_scale"] = [E]
            for e in range(E):
                s[p + "ffn.experts.%d.gate_proj.weight" % e] = [fe, d]
                s[p + "ffn.experts.%d.up_proj.weight" % e] = [fe, d]
                s[p + "ffn.experts.%d.down_proj.weight" % e] = [d, fe]
            fs = c["shared_expert_intermediate_size"] or fe * c["n_shared_experts"]
            if c["n_shared_experts"]:
                s[p + "ffn.shared_experts.gate_proj.weight"] = [fs, d]
                s[p + "ffn.shared_experts.up_proj.weight"] = [fs, d]
                s[p + "ffn.shared_experts.down_proj.weight"] = [d, fs]
                if c["shared_expert_gate"]:  # Qwen2-MoE's sigmoid gate on the shared expert's output
                    s[p + "ffn.shared_expert_gate.weight"] = [1, d]
        if P:  # the layer's per-layer input: gate, projection, the projection's norm
            s[p + "ple_gate.weight"] = [P, d]
            s[p + "ple_proj.weight"] = [d, P]
            _norm(s, p + "ple_norm", c)
        if c["layer_scalar"]:
            s[p + "layer_scalar"] = [1]
    if c["final_norm"]:
        _norm(s, "final_norm", c)
    if not c["tie_word_embeddings"]:
        s["lm_head.weight"] = [V, d]
    return s
