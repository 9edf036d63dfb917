"""hf_ref.py — an independent PyTorch reference of the Hugging Face families' forward pass.

Written from transformers' modeling_<family>.py / configuration_<family>.py semantics (read,
not copied), with no knowledge of the engine's conventions: it takes a config.json dict and
a dict of tensors under their HF names, exactly as they are stored, and computes the logits
of one sequence in float64. One function per family. Missing config keys fall back to the
defaults of the family's configuration class.

`mut` is a set of deliberate mistakes ("mutants") used by the test to prove that each
modelling decision is checked: a mutant must disagree with the engine.
"""
import math

import torch

DT = torch.float64


# ---- shared pieces ----------------------------------------------------------------------------

def rms_norm(x, w, eps, one_plus=False):
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y * ((1.0 + w) if one_plus else w)


def layer_norm(x, w, b, eps):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def silu(x):
    return x * torch.sigmoid(x)


def linear(x, W, name, bias=False):
    y = x @ W[name + ".weight"].T
    if bias:
        y = y + W[name + ".bias"]
    return y


def rope_type_of(rs):
    if not rs:
        return "default"
    return rs.get("rope_type", rs.get("type", "default"))


def inv_freq(theta, dim, rope_scaling=None, mut=()):
    """modeling_rope_utils: default / linear / llama3 inverse frequencies."""
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=DT) / dim))
    kind = rope_type_of(rope_scaling)
    if kind == "default" or "no_rope_scaling" in mut:
        return inv
    factor = rope_scaling["factor"]
    if kind == "linear":
        return inv / factor
    if kind == "llama3":
        lo, hi = rope_scaling["low_freq_factor"], rope_scaling["high_freq_factor"]
        old = rope_scaling["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / lo, old / hi
        wavelen = 2 * math.pi / inv
        out = torch.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * out / factor + smooth * out
        medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
        return torch.where(medium, smoothed, out)
    raise ValueError("rope type %s" % kind)


def rope(x, inv, mut=()):
    """x [T, n, hd]: rotate-half RoPE at positions 0..T-1 (or interleaved pairs as a mutant)."""
    T, hd = x.shape[0], x.shape[-1]
    ang = torch.arange(T, dtype=DT)[:, None] * inv[None, :]
    cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
    if "rope_interleaved" in mut:
        a, b = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
        return out
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    cos2, sin2 = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
    rot = torch.cat([-x2, x1], -1)
    return x * cos2 + rot * sin2


def attention(q, k, v, scale, window=None, softcap=None, mut=()):
    """q [T, H, hd], k/v [T, KV, hd] -> [T, H*hd]; causal, optional sliding window
    (query i sees key j iff 0 <= i - j < window, transformers' sliding_window_overlay)."""
    T, H, hd = q.shape
    rep = H // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    s = torch.einsum("thd,shd->hts", q, k) * scale
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    allowed = j <= i
    if window is not None:
        allowed = allowed & ((i - j <= window) if "window_off_by_one" in mut else (i - j < window))
    s = s.masked_fill(~allowed[None], float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.einsum("hts,shd->thd", p, v).reshape(T, H * v.shape[-1])  # (MLA: v of its own width)


def heads(x, n, hd):
    return x.reshape(x.shape[0], n, hd)


def g(cfg, key, default):
    v = cfg.get(key, default)
    return default if v is None and default is not None else v


# ---- Llama / Qwen2 / Qwen3 (pre-norm, RMSNorm, SwiGLU) -------------------------------------------

def _llama_like(cfg, W, ids, family, mut):
    defaults = {
        "llama": dict(eps=1e-6, theta=10000.0, tie=False, head_dim=None, kv=None),
        "qwen2": dict(eps=1e-6, theta=10000.0, tie=False, head_dim=None, kv=32),
        "qwen3": dict(eps=1e-6, theta=10000.0, tie=False, head_dim=128, kv=32),
        "qwen3_moe": dict(eps=1e-6, theta=10000.0, tie=False, head_dim=None, kv=4),
        "mixtral": dict(eps=1e-5, theta=1e6, tie=False, head_dim=None, kv=8),
        "mistral": dict(eps=1e-6, theta=10000.0, tie=False, head_dim=None, kv=8),
        "qwen2_moe": dict(eps=1e-6, theta=10000.0, tie=False, head_dim=None, kv=16),
    }[family]
    d, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    KV = g(cfg, "num_key_value_heads", defaults["kv"]) or H
    hd = g(cfg, "head_dim", defaults["head_dim"]) or d // H
    eps = g(cfg, "rms_norm_eps", defaults["eps"])
    if "eps_default" in mut:
        eps = 1e-6
    theta = g(cfg, "rope_theta", defaults["theta"])
    tie = g(cfg, "tie_word_embeddings", defaults["tie"])
    if family == "llama":
        qkv_bias = o_bias = g(cfg, "attention_bias", False)
        mlp_bias = g(cfg, "mlp_bias", False)
    elif family == "qwen2":
        qkv_bias, o_bias, mlp_bias = True, False, False
    elif family == "qwen2_moe":  # Qwen2MoeAttention: qkv_bias (transformers 5; True, hard-coded in 4.x), o none
        qkv_bias, o_bias, mlp_bias = g(cfg, "qkv_bias", True), False, False
    else:
        qkv_bias = o_bias = g(cfg, "attention_bias", False)
        mlp_bias = False
    if "no_o_bias" in mut:
        o_bias = False
    if "no_qkv_bias" in mut:
        qkv_bias = False
    # sliding window (Qwen2/Qwen3 only): configuration_qwen2.py
    window = None
    layer_types = ["full_attention"] * L
    if family in ("mixtral", "mistral"):  # MistralAttention: one window for every layer, when set
        window = g(cfg, "sliding_window", None) if family == "mixtral" else cfg.get("sliding_window", 4096)
        if "sliding_off" in mut:
            window = None
        layer_types = ["sliding_attention" if window else "full_attention"] * L
    elif family != "llama":
        if g(cfg, "use_sliding_window", False) and "sliding_off" not in mut:
            window = g(cfg, "sliding_window", 4096)
        layer_types = cfg.get("layer_types") or [
            "sliding_attention" if window is not None and i >= g(cfg, "max_window_layers", 28) else "full_attention"
            for i in range(L)]
    inv = inv_freq(theta, hd, cfg.get("rope_scaling"), mut)
    ids = torch.tensor(ids)
    P = "model."
    x = W[P + "embed_tokens.weight"][ids]
    for l in range(L):
        p = "%slayers.%d." % (P, l)
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        q = heads(linear(h, W, p + "self_attn.q_proj", qkv_bias), H, hd)
        k = heads(linear(h, W, p + "self_attn.k_proj", qkv_bias), KV, hd)
        v = heads(linear(h, W, p + "self_attn.v_proj", qkv_bias), KV, hd)
        if family in ("qwen3", "qwen3_moe") and "no_qk_norm" not in mut:
            q = rms_norm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, W[p + "self_attn.k_norm.weight"], eps)
        q, k = rope(q, inv, mut), rope(k, inv, mut)
        win = window if layer_types[l] == "sliding_attention" else None
        a = attention(q, k, v, hd ** -0.5, win, None, mut)
        x = x + linear(a, W, p + "self_attn.o_proj", o_bias)
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        if family == "mixtral":
            x = x + sparse_moe(cfg, W, h, p + "block_sparse_moe.", ("w1", "w3", "w2"), True, mut)
            continue
        if family in ("qwen3_moe", "qwen2_moe"):
            step = g(cfg, "decoder_sparse_step", 1)
            if (l not in (g(cfg, "mlp_only_layers", []) or []) and g(cfg, "num_experts", 128) > 0
                    and (l + 1) % step == 0):
                f = sparse_moe(cfg, W, h, p + "mlp.", ("gate_proj", "up_proj", "down_proj"),
                               g(cfg, "norm_topk_prob", False), mut)
                if family == "qwen2_moe":  # Qwen2MoeSparseMoeBlock: + sigmoid(shared_expert_gate(h)) * shared_expert(h)
                    s = p + "mlp.shared_expert."
                    y = linear(silu(linear(h, W, s + "gate_proj")) * linear(h, W, s + "up_proj"), W, s + "down_proj")
                    if "moe_no_shared_gate" not in mut:
                        y = torch.sigmoid(linear(h, W, p + "mlp.shared_expert_gate")) * y
                    if "moe_no_shared_expert" in mut:
                        y = 0 * y
                    f = f + y
                x = x + f
                continue
        f = silu(linear(h, W, p + "mlp.gate_proj", mlp_bias)) * linear(h, W, p + "mlp.up_proj", mlp_bias)
        x = x + linear(f, W, p + "mlp.down_proj", mlp_bias)
    x = rms_norm(x, W[P + "norm.weight"], eps)
    head = W[P + "embed_tokens.weight"] if tie else W["lm_head.weight"]
    return x @ head.T


def sparse_moe(cfg, W, h, p, names, renorm, mut):
    """Qwen3MoeSparseMoeBlock / MixtralSparseMoeBlock: softmax over the router's logits (p + "gate"),
    torch.topk, renormalised over the chosen (Mixtral always, Qwen3-MoE with norm_topk_prob), each
    chosen expert's SwiGLU (gate, up, down = names) weighted and summed"""
    E = cfg.get("num_local_experts") or cfg.get("num_experts")
    k = g(cfg, "num_experts_per_tok", 2)
    rows = h.reshape(-1, h.shape[-1])
    probs = torch.softmax(linear(rows, W, p + "gate"), dim=-1)
    w, idx = torch.topk(probs, k, dim=-1)
    if (renorm and "moe_no_renorm" not in mut) or "moe_renorm" in mut:
        w = w / w.sum(-1, keepdim=True)
    gate, up, down = names
    if "moe_gate_up_swapped" in mut:
        gate, up = up, gate
    out = torch.zeros_like(rows)
    for e in range(E):
        r, j = torch.where(idx == e)
        if len(r):
            q = "%sexperts.%d." % (p, e)
            y = linear(silu(linear(rows[r], W, q + gate)) * linear(rows[r], W, q + up), W, q + down)
            out = out.index_add(0, r, y * w[r, j, None])
    return out.reshape(h.shape)


def llama(cfg, W, ids, mut=()):
    return _llama_like(cfg, W, ids, "llama", mut)


def qwen2(cfg, W, ids, mut=()):
    return _llama_like(cfg, W, ids, "qwen2", mut)


def qwen3(cfg, W, ids, mut=()):
    return _llama_like(cfg, W, ids, "qwen3", mut)


def qwen3_moe(cfg, W, ids, mut=()):
    return _llama_like(cfg, W, ids, "qwen3_moe", mut)


def qwen2_moe(cfg, W, ids, mut=()):
    return _llama_like(cfg, W, ids, "qwen2_moe", mut)


def mixtral(cfg, W, ids, mut=()):
    return _llama_like(cfg, W, ids, "mixtral", mut)


def mistral(cfg, W, ids, mut=()):
    return _llama_like(cfg, W, ids, "mistral", mut)


# ---- Gemma 1 (modeling_gemma.py: Llama's pre-norm layout with GemmaRMSNorm's 1 + w, GeGLU, scaled embedding) ----

def gemma(cfg, W, ids, mut=()):
    """GemmaModel: embedding * sqrt(hidden_size); each layer input_layernorm -> attention (scale
    1/sqrt(head_dim), no soft-cap, no window) -> residual, post_attention_layernorm (the MLP's input) -> GeGLU
    (tanh GELU: hidden_activation) -> residual; final norm; head tied by default. Norms (1 + w)."""
    d, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    KV = g(cfg, "num_key_value_heads", 16)
    hd = g(cfg, "head_dim", 256)
    eps = g(cfg, "rms_norm_eps", 1e-6)
    one_plus = "w_not_1p" not in mut
    scale = (256 if "scale_256" in mut else hd) ** -0.5
    bias = g(cfg, "attention_bias", False)
    inv = inv_freq(g(cfg, "rope_theta", 10000.0), hd, cfg.get("rope_scaling"), mut)
    ids = torch.tensor(ids)
    P = "model."
    x = W[P + "embed_tokens.weight"][ids]
    if "no_embed_scale" not in mut:
        x = x * torch.tensor(d ** 0.5, dtype=DT)
    for l in range(L):
        p = "%slayers.%d." % (P, l)
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps, one_plus)
        q = heads(linear(h, W, p + "self_attn.q_proj", bias), H, hd)
        k = heads(linear(h, W, p + "self_attn.k_proj", bias), KV, hd)
        v = heads(linear(h, W, p + "self_attn.v_proj", bias), KV, hd)
        q, k = rope(q, inv, mut), rope(k, inv, mut)
        x = x + linear(attention(q, k, v, scale, None, None, mut), W, p + "self_attn.o_proj", bias)
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps, one_plus)
        act = silu if "silu_not_gelu" in mut else gelu_tanh
        x = x + linear(act(linear(h, W, p + "mlp.gate_proj")) * linear(h, W, p + "mlp.up_proj"), W, p + "mlp.down_proj")
    x = rms_norm(x, W[P + "norm.weight"], eps, one_plus)
    head = W[P + "embed_tokens.weight"] if g(cfg, "tie_word_embeddings", True) else W["lm_head.weight"]
    return x @ head.T


# ---- OLMo 2 (norms after each sublayer output, QK-Norm over the whole projection) -----------------

def olmo2(cfg, W, ids, mut=()):
    d, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    KV = g(cfg, "num_key_value_heads", None) or H
    hd = g(cfg, "head_dim", None) or d // H
    eps = g(cfg, "rms_norm_eps", 1e-5)
    bias = g(cfg, "attention_bias", False)
    inv = inv_freq(g(cfg, "rope_theta", 10000.0), hd, cfg.get("rope_scaling"), mut)
    ids = torch.tensor(ids)
    P = "model."
    x = W[P + "embed_tokens.weight"][ids]
    for l in range(L):
        p = "%slayers.%d." % (P, l)
        q = linear(x, W, p + "self_attn.q_proj", bias)
        k = linear(x, W, p + "self_attn.k_proj", bias)
        v = heads(linear(x, W, p + "self_attn.v_proj", bias), KV, hd)
        if "no_qk_norm" in mut:
            q, k = heads(q, H, hd), heads(k, KV, hd)
        elif "qk_norm_per_head" in mut:
            q = rms_norm(heads(q, H, hd), W[p + "self_attn.q_norm.weight"].reshape(H, hd), eps)
            k = rms_norm(heads(k, KV, hd), W[p + "self_attn.k_norm.weight"].reshape(KV, hd), eps)
        else:
            q = heads(rms_norm(q, W[p + "self_attn.q_norm.weight"], eps), H, hd)
            k = heads(rms_norm(k, W[p + "self_attn.k_norm.weight"], eps), KV, hd)
        q, k = rope(q, inv, mut), rope(k, inv, mut)
        a = linear(attention(q, k, v, hd ** -0.5, None, None, mut), W, p + "self_attn.o_proj", bias)
        x = x + rms_norm(a, W[p + "post_attention_layernorm.weight"], eps)
        f = silu(linear(x, W, p + "mlp.gate_proj")) * linear(x, W, p + "mlp.up_proj")
        x = x + rms_norm(linear(f, W, p + "mlp.down_proj"), W[p + "post_feedforward_layernorm.weight"], eps)
    x = rms_norm(x, W[P + "norm.weight"], eps)
    head = W[P + "embed_tokens.weight"] if g(cfg, "tie_word_embeddings", False) else W["lm_head.weight"]
    return x @ head.T


# ---- Gemma 2 / Gemma 3 text --------------------------------------------------------------------

def _gemma(cfg, W, ids, v3, mut):
    d, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    KV = g(cfg, "num_key_value_heads", 4)
    hd = g(cfg, "head_dim", 256)
    eps = g(cfg, "rms_norm_eps", 1e-6)
    one_plus = "w_not_1p" not in mut
    scale = g(cfg, "query_pre_attn_scalar", 256) ** -0.5
    if "scale_head_dim" in mut:
        scale = hd ** -0.5
    window = g(cfg, "sliding_window", 4096)
    bias = g(cfg, "attention_bias", False)
    if v3:
        attn_cap = None  # Gemma3Attention does not pass a softcap
        final_cap = cfg.get("final_logit_softcapping")
        pattern = g(cfg, "sliding_window_pattern", 6)
        layer_types = cfg.get("layer_types") or [
            "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(L)]
        theta_global = g(cfg, "rope_theta", 1e6)
        theta_local = g(cfg, "rope_local_base_freq", 10000.0)
        rs = cfg.get("rope_scaling")
        rp = cfg.get("rope_parameters")
        if rp:  # transformers 5: one dict per layer type
            theta_global = rp["full_attention"].get("rope_theta", theta_global)
            theta_local = rp["sliding_attention"].get("rope_theta", theta_local)
            rs = rp["full_attention"]
        if "local_theta_global" in mut:
            theta_local = theta_global
        inv_global = inv_freq(theta_global, hd, rs, mut)
        inv_local = inv_freq(theta_local, hd, rs if "scaling_on_local" in mut else None, mut)
    else:
        attn_cap = cfg.get("attn_logit_softcapping", 50.0)
        final_cap = cfg.get("final_logit_softcapping", 30.0)
        layer_types = cfg.get("layer_types") or [
            "sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(L)]
        inv_global = inv_local = inv_freq(g(cfg, "rope_theta", 10000.0), hd, cfg.get("rope_scaling"), mut)
    if "no_attn_softcap" in mut:
        attn_cap = None
    if "no_final_softcap" in mut:
        final_cap = None
    if "swap_sliding" in mut:
        layer_types = ["full_attention" if t == "sliding_attention" else "sliding_attention" for t in layer_types]
    act = gelu_erf if "gelu_exact" in mut else gelu_tanh
    ids = torch.tensor(ids)
    P = "model."
    x = W[P + "embed_tokens.weight"][ids]
    if "no_embed_scale" not in mut:
        x = x * torch.tensor(d ** 0.5, dtype=DT)
    for l in range(L):
        p = "%slayers.%d." % (P, l)
        sliding = layer_types[l] == "sliding_attention"
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps, one_plus)
        q = heads(linear(h, W, p + "self_attn.q_proj", bias), H, hd)
        k = heads(linear(h, W, p + "self_attn.k_proj", bias), KV, hd)
        v = heads(linear(h, W, p + "self_attn.v_proj", bias), KV, hd)
        if v3 and "no_qk_norm" not in mut:
            qk_1p = one_plus and "qk_norm_plain_w" not in mut
            q = rms_norm(q, W[p + "self_attn.q_norm.weight"], eps, qk_1p)
            k = rms_norm(k, W[p + "self_attn.k_norm.weight"], eps, qk_1p)
        inv = inv_local if sliding else inv_global
        q, k = rope(q, inv, mut), rope(k, inv, mut)
        a = attention(q, k, v, scale, window if sliding else None, attn_cap, mut)
        a = linear(a, W, p + "self_attn.o_proj", bias)
        x = x + rms_norm(a, W[p + "post_attention_layernorm.weight"], eps, one_plus)
        h = rms_norm(x, W[p + "pre_feedforward_layernorm.weight"], eps, one_plus)
        f = act(linear(h, W, p + "mlp.gate_proj")) * linear(h, W, p + "mlp.up_proj")
        f = linear(f, W, p + "mlp.down_proj")
        x = x + rms_norm(f, W[p + "post_feedforward_layernorm.weight"], eps, one_plus)
    x = rms_norm(x, W[P + "norm.weight"], eps, one_plus)
    head = W[P + "embed_tokens.weight"] if g(cfg, "tie_word_embeddings", True) else W["lm_head.weight"]
    logits = x @ head.T
    if final_cap is not None:
        logits = final_cap * torch.tanh(logits / final_cap)
    return logits


def gemma2(cfg, W, ids, mut=()):
    return _gemma(cfg, W, ids, False, mut)


def gemma3_text(cfg, W, ids, mut=()):
    return _gemma(cfg, W, ids, True, mut)


# ---- GPT-2 (modeling_gpt2.py: Conv1D weights [in, out], fused c_attn) --------------------------------

def gpt2(cfg, W, ids, mut=()):
    d, H, L = g(cfg, "n_embd", 768), g(cfg, "n_head", 12), g(cfg, "n_layer", 12)
    hd = d // H
    eps = g(cfg, "layer_norm_epsilon", 1e-5)
    scale = hd ** -0.5 if g(cfg, "scale_attn_weights", True) else 1.0
    act = gelu_erf if "gelu_exact" in mut else gelu_tanh
    pre = "transformer." if "transformer.wte.weight" in W else ""

    def conv1d(x, name):
        w = W[name + ".weight"]
        square = w.shape[0] == w.shape[1]  # only the square c_proj can be misread without a shape error
        return x @ (w.T if "no_transpose" in mut and square else w) + W[name + ".bias"]

    ids = torch.tensor(ids)
    T = len(ids)
    x = W[pre + "wte.weight"][ids] + W[pre + "wpe.weight"][torch.arange(T)]
    for l in range(L):
        p = "%sh.%d." % (pre, l)
        h = layer_norm(x, W[p + "ln_1.weight"], W[p + "ln_1.bias"], eps)
        qkv = conv1d(h, p + "attn.c_attn")
        q, k, v = qkv.split(d, dim=-1)
        if "qkv_order" in mut:
            q, k = k, q
        a = attention(heads(q, H, hd), heads(k, H, hd), heads(v, H, hd), scale, None, None, mut)
        x = x + conv1d(a, p + "attn.c_proj")
        h = layer_norm(x, W[p + "ln_2.weight"], W[p + "ln_2.bias"], eps)
        x = x + conv1d(act(conv1d(h, p + "mlp.c_fc")), p + "mlp.c_proj")
    x = layer_norm(x, W[pre + "ln_f.weight"], W[pre + "ln_f.bias"], eps)
    head = W[pre + "wte.weight"] if g(cfg, "tie_word_embeddings", True) else W["lm_head.weight"]
    return x @ head.T


# ---- Gemma 4 text (dense) ------------------------------------------------------------------------

def gemma4_inv_freq(params, dim, mut=()):
    """one rope_parameters entry over heads of `dim`: "default" (every frequency), or "proportional":
    the first floor(partial_rotary_factor * dim / 2) frequencies base^(-2i/dim), the rest 0, all
    divided by factor"""
    base = params["rope_theta"]
    kind = params.get("rope_type", "default")
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=DT) / dim))
    if kind == "default":
        return inv
    assert kind == "proportional", kind
    prf = 1.0 if "no_proportional" in mut else params.get("partial_rotary_factor", 1.0)
    turning = int(prf * dim // 2)
    if "partial_over_rotated_dim" in mut:  # the usual partial rotary: frequencies over the turning dims only
        inv = 1.0 / (base ** (torch.arange(0, 2 * turning, 2, dtype=DT) / (2 * turning)))
        inv = torch.cat([inv, torch.zeros(dim // 2 - turning, dtype=DT)])
    inv = inv.clone()
    inv[turning:] = 0.0
    return inv / params.get("factor", 1.0)


def gemma4_moe(cfg, W, p, x, h, norm, eps, mut=()):
    """Gemma4TextRouter + Gemma4TextExperts, the block beside the dense MLP: the router reads the
    stream x (not the pre-FFN norm's h) through an RMSNorm without weight, times router.scale and
    hidden_size^-0.5; softmax, torch.topk, renormalised, times router.per_expert_scale of each chosen
    expert; the experts (gate_up_proj [E, 2f, d]: gate's rows first; down_proj [E, d, f]) on
    pre_feedforward_layernorm_2(x), their weighted sum normed by post_feedforward_layernorm_2"""
    d, k = cfg["hidden_size"], cfg["top_k_experts"]
    src = h if "moe_router_on_normed" in mut else x
    r = src * torch.rsqrt(src.pow(2).mean(-1, keepdim=True) + eps) * W[p + "router.scale"]
    if "moe_no_router_root" not in mut:
        r = r * d ** -0.5
    probs = torch.softmax(r @ W[p + "router.proj.weight"].T, dim=-1)
    w, idx = torch.topk(probs, k, dim=-1)
    w = w / w.sum(-1, keepdim=True)
    if "moe_no_expert_scale" not in mut:
        w = w * W[p + "router.per_expert_scale"][idx]
    u = norm(x, W[p + "pre_feedforward_layernorm_2.weight"])
    out = torch.zeros_like(u)
    for e in range(cfg["num_experts"]):
        rows, j = torch.where(idx == e)
        if len(rows):
            gate, up = W[p + "experts.gate_up_proj"][e].chunk(2, dim=0)
            if "moe_gate_up_swapped" in mut:
                gate, up = up, gate
            y = (gelu_tanh(u[rows] @ gate.T) * (u[rows] @ up.T)) @ W[p + "experts.down_proj"][e].T
            out = out.index_add(0, rows, y * w[rows, j, None])
    return norm(out, W[p + "post_feedforward_layernorm_2.weight"])


def gemma4_text(cfg, W, ids, mut=()):
    """Gemma4TextConfig defaults; Gemma4TextDecoderLayer: four norms that multiply by w, per-head q/k
    norms and a weightless v norm, scaling 1.0, full layers of their own head_dim (and, with
    K = V, their own kv heads, v the raw k projection), the last num_kv_shared_layers layers reading
    the keys/values of the last earlier layer of their type, the layer scalar on the stream."""
    d, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    KV = g(cfg, "num_key_value_heads", 4)
    hd = g(cfg, "head_dim", 256)
    ghd = cfg.get("global_head_dim", 512) or hd
    eps = g(cfg, "rms_norm_eps", 1e-6)
    window = g(cfg, "sliding_window", 512)
    one_plus = "one_plus_w" in mut
    k_eq_v = g(cfg, "attention_k_eq_v", False)
    gkv = cfg.get("num_global_key_value_heads")
    n_shared = g(cfg, "num_kv_shared_layers", 0)
    bias = g(cfg, "attention_bias", False)
    final_cap = None if "no_final_softcap" in mut else cfg.get("final_logit_softcapping")
    types = list(cfg.get("layer_types") or ["sliding_attention" if (i + 1) % 6 else "full_attention"
                                            for i in range(L)])
    types[-1] = "full_attention"  # __post_init__ forces the last layer full
    if "swap_sliding" in mut:
        types = ["full_attention" if t == "sliding_attention" else "sliding_attention" for t in types]
    rp = cfg.get("rope_parameters") or {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6}}
    slide_params = dict(rp["sliding_attention"])
    if "local_theta_global" in mut:
        slide_params["rope_theta"] = rp["full_attention"]["rope_theta"]
    inv = {"sliding_attention": gemma4_inv_freq(slide_params, hd, mut),
           "full_attention": gemma4_inv_freq(rp["full_attention"], ghd, mut)}
    first_shared = L - n_shared
    # the layer whose keys/values are kept for the shared layers: the last of its type before them
    keeper = {t: max(i for i in range(first_shared) if types[i] == t) for t in set(types[first_shared:])}
    if "shared_from_first" in mut:
        keeper = {t: min(i for i in range(first_shared) if types[i] == t) for t in keeper}

    def norm(x, w):
        return rms_norm(x, w, eps, one_plus)

    ids = torch.tensor(ids)
    P = "model."
    x = W[P + "embed_tokens.weight"][ids]
    if "no_embed_scale" not in mut:
        x = x * torch.tensor(d ** 0.5, dtype=DT)
    kept = {}
    ple = g(cfg, "hidden_size_per_layer_input", 256)
    if ple:  # get_per_layer_inputs + project_per_layer_inputs, from the scaled embedding
        table = W[P + "embed_tokens_per_layer.weight"][ids] * ple ** 0.5
        proj = (x @ W[P + "per_layer_model_projection.weight"].T) * d ** -0.5
        proj = rms_norm(proj.reshape(len(ids), L, ple), W[P + "per_layer_projection_norm.weight"], eps, one_plus)
        table = table.reshape(len(ids), L, ple)
        per_layer = proj if "ple_context_only" in mut else (proj + table) * 2.0 ** -0.5
    for l in range(L):
        p = "%slayers.%d." % (P, l)
        full = types[l] == "full_attention"
        lhd = ghd if full else hd
        lkv = gkv if (k_eq_v and full) else KV
        h = norm(x, W[p + "input_layernorm.weight"])
        q = norm(heads(linear(h, W, p + "self_attn.q_proj", bias), H, lhd), W[p + "self_attn.q_norm.weight"])
        q = rope(q, inv[types[l]], mut)
        if l >= first_shared:
            k, v = kept[(types[l], keeper[types[l]])]
        else:
            k_raw = heads(linear(h, W, p + "self_attn.k_proj", bias), lkv, lhd)
            v = k_raw if (k_eq_v and full) else heads(linear(h, W, p + "self_attn.v_proj", bias), lkv, lhd)
            k = norm(k_raw, W[p + "self_attn.k_norm.weight"])
            if "k_eq_v_after_norm" in mut and k_eq_v and full:
                v = k
            k = rope(k, inv[types[l]], mut)
            if "no_v_norm" not in mut:
                v = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps)
            kept[(types[l], l)] = (k, v)
        scale = lhd ** -0.5 if "scale_head_dim" in mut else 1.0
        a = attention(q, k, v, scale, None if full else window, None, mut)
        a = linear(a, W, p + "self_attn.o_proj", bias)
        x = x + norm(a, W[p + "post_attention_layernorm.weight"])
        h = norm(x, W[p + "pre_feedforward_layernorm.weight"])
        f = gelu_tanh(linear(h, W, p + "mlp.gate_proj")) * linear(h, W, p + "mlp.up_proj")
        f = linear(f, W, p + "mlp.down_proj")
        if g(cfg, "enable_moe_block", False):
            f = norm(f, W[p + "post_feedforward_layernorm_1.weight"]) + gemma4_moe(cfg, W, p, x, h, norm, eps, mut)
        x = x + norm(f, W[p + "post_feedforward_layernorm.weight"])
        if ple:
            gated = gelu_tanh(linear(x, W, p + "per_layer_input_gate")) * per_layer[:, l, :]
            x = x + norm(linear(gated, W, p + "per_layer_projection"), W[p + "post_per_layer_input_norm.weight"])
        if "no_layer_scalar" not in mut:
            x = x * W[p + "layer_scalar"]
    x = norm(x, W[P + "norm.weight"])
    head = W[P + "embed_tokens.weight"] if g(cfg, "tie_word_embeddings", True) else W["lm_head.weight"]
    logits = x @ head.T
    if final_cap is not None:
        logits = final_cap * torch.tanh(logits / final_cap)
    return logits


# ---- DeepSeek-V3 (multi-head latent attention + DeepseekV3MoE) -------------------------------------

def yarn_mscale(factor, m):
    return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0


def yarn(theta, dim, rs, max_pos, mut=()):
    """modeling_rope_utils' YaRN: (inverse frequencies, attention factor). Each frequency is a blend of
    theta^(-2i/dim) / factor and theta^(-2i/dim), by a linear ramp between the dims that turn beta_fast
    and beta_slow times over the original context (floor / ceil with truncate); the cos/sin tables are
    multiplied by the attention factor."""
    factor = float(rs["factor"])
    orig = rs.get("original_max_position_embeddings") or max_pos
    fast, slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1
    base = theta ** (torch.arange(0, dim, 2, dtype=DT) / dim)

    def turns_at(n):
        return dim * math.log(orig / (n * 2 * math.pi)) / (2 * math.log(theta))
    lo, hi = turns_at(fast), turns_at(slow)
    if rs.get("truncate", True):
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, dim - 1)
    if lo == hi:
        hi += 0.001
    ramp = ((torch.arange(dim // 2, dtype=DT) - lo) / (hi - lo)).clamp(0, 1)
    extrapolate = 1 - ramp
    inv = (1.0 / (factor * base)) * (1 - extrapolate) + (1.0 / base) * extrapolate
    m, m_all = rs.get("mscale"), rs.get("mscale_all_dim")
    if rs.get("attention_factor") is not None:
        att = rs["attention_factor"]
    elif m and m_all:
        att = yarn_mscale(factor, m) / yarn_mscale(factor, m_all)
    else:
        att = yarn_mscale(factor, 1.0)
    return inv, att


def deepseek_moe(cfg, W, h, p, mut):
    """DeepseekV3MoE: the router (p + "gate") scores each expert by a sigmoid; the choice adds
    e_score_correction_bias, keeps the topk_group of n_group groups whose two best choice scores sum
    highest (the others' scores set to 0), takes the top num_experts_per_tok; the weights are the
    unbiased scores, over their sum + 1e-20 with norm_topk_prob, times routed_scaling_factor; plus the
    shared experts' MLP on every row"""
    E, k = g(cfg, "n_routed_experts", 256), g(cfg, "num_experts_per_tok", 8)
    G, TG = g(cfg, "n_group", 8), g(cfg, "topk_group", 4)
    rows = h.reshape(-1, h.shape[-1])
    scores = torch.sigmoid(rows @ W[p + "gate.weight"].T)
    choice = scores if "moe_no_bias" in mut else scores + W[p + "gate.e_score_correction_bias"]
    group = choice.view(-1, G, E // G).topk(2, dim=-1)[0].sum(-1)
    keep = torch.zeros_like(group).scatter_(1, torch.topk(group, TG, dim=-1)[1], 1.0)
    keep = keep[:, :, None].expand(-1, G, E // G).reshape(-1, E)
    idx = torch.topk(choice.masked_fill(keep == 0, 0.0), k, dim=-1)[1]
    w = scores.gather(1, idx)
    if g(cfg, "norm_topk_prob", True):
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    if "moe_no_scaling" not in mut:
        w = w * g(cfg, "routed_scaling_factor", 2.5)
    out = torch.zeros_like(rows)
    for e in range(E):
        r, j = torch.where(idx == e)
        if len(r):
            q = "%sexperts.%d." % (p, e)
            y = linear(silu(linear(rows[r], W, q + "gate_proj")) * linear(rows[r], W, q + "up_proj"), W, q + "down_proj")
            out = out.index_add(0, r, y * w[r, j, None])
    s = p + "shared_experts."
    out = out + linear(silu(linear(rows, W, s + "gate_proj")) * linear(rows, W, s + "up_proj"), W, s + "down_proj")
    return out.reshape(h.shape)


def deepseek_v3(cfg, W, ids, mut=()):
    """DeepseekV3ForCausalLM: Pre-Norm RMSNorm layers of multi-head latent attention (q through q_a_proj,
    q_a_layernorm, q_b_proj, or q_proj without q_lora_rank; [c_kv, k_pe] = kv_a_proj_with_mqa; k_nope and v
    of each head from kv_b_proj(kv_a_layernorm(c_kv)); RoPE on q_pe and the one k_pe, de-interleaved first
    with rope_interleave; scale (nope + rope)^-0.5, times yarn_mscale(factor, mscale_all_dim)^2 under
    YaRN), a dense SwiGLU MLP in the first first_k_dense_replace layers and DeepseekV3MoE after them"""
    d, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    eps = g(cfg, "rms_norm_eps", 1e-6)
    theta = g(cfg, "rope_theta", 10000.0)
    rq = cfg["q_lora_rank"] if "q_lora_rank" in cfg else 1536
    rkv = g(cfg, "kv_lora_rank", 512)
    dn, dr, dv = g(cfg, "qk_nope_head_dim", 128), g(cfg, "qk_rope_head_dim", 64), g(cfg, "v_head_dim", 128)
    interleave = g(cfg, "rope_interleave", True) != ("rope_interleave_flipped" in mut)
    rs = cfg.get("rope_scaling")
    if rs:
        inv, att = yarn(theta, dr, rs, cfg.get("max_position_embeddings", 4096), mut)
    else:
        inv, att = 1.0 / (theta ** (torch.arange(0, dr, 2, dtype=DT) / dr)), 1.0
    scale = (dn + dr) ** -0.5
    if rs and rs.get("mscale_all_dim") and "no_mscale" not in mut:
        scale = scale * yarn_mscale(float(rs["factor"]), rs["mscale_all_dim"]) ** 2
    first = g(cfg, "first_k_dense_replace", 3)
    ids = torch.tensor(ids)
    T = len(ids)
    ang = torch.arange(T, dtype=DT)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :] * att
    sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :] * att

    def rot(x):  # [T, n, dr], rotate-half after the optional de-interleaving
        if interleave:
            x = x.reshape(T, x.shape[1], dr // 2, 2).transpose(-1, -2).reshape(T, x.shape[1], dr)
        return x * cos + torch.cat([-x[..., dr // 2:], x[..., :dr // 2]], -1) * sin

    P = "model."
    x = W[P + "embed_tokens.weight"][ids]
    for l in range(L):
        p = "%slayers.%d." % (P, l)
        a = p + "self_attn."
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        if rq:
            q = linear(rms_norm(linear(h, W, a + "q_a_proj"), W[a + "q_a_layernorm.weight"], eps), W, a + "q_b_proj")
        else:
            q = linear(h, W, a + "q_proj")
        q = q.reshape(T, H, dn + dr)
        kva = linear(h, W, a + "kv_a_proj_with_mqa")
        ckv, k_pe = kva[:, :rkv], kva[:, rkv:].reshape(T, 1, dr)
        if "no_kv_a_norm" not in mut:
            ckv = rms_norm(ckv, W[a + "kv_a_layernorm.weight"], eps)
        kv = linear(ckv, W, a + "kv_b_proj").reshape(T, H, dn + dv)
        qs = torch.cat([q[..., :dn], rot(q[..., dn:])], -1)
        ks = torch.cat([kv[..., :dn], rot(k_pe).expand(T, H, dr)], -1)
        x = x + linear(attention(qs, ks, kv[..., dn:], scale, None, None, mut), W, a + "o_proj")
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        if l >= first:
            x = x + deepseek_moe(cfg, W, h, p + "mlp.", mut)
        else:
            x = x + linear(silu(linear(h, W, p + "mlp.gate_proj")) * linear(h, W, p + "mlp.up_proj"), W, p + "mlp.down_proj")
    x = rms_norm(x, W[P + "norm.weight"], eps)
    head = W[P + "embed_tokens.weight"] if g(cfg, "tie_word_embeddings", False) else W["lm_head.weight"]
    return x @ head.T


FORWARD = {"llama": llama, "qwen2": qwen2, "qwen3": qwen3, "qwen3_moe": qwen3_moe, "mixtral": mixtral, "olmo2": olmo2,
           "gemma2": gemma2, "gemma3_text": gemma3_text, "gpt2": gpt2, "gemma4_text": gemma4_text,
           "deepseek_v3": deepseek_v3, "mistral": mistral, "gemma": gemma, "qwen2_moe": qwen2_moe}
