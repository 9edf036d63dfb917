#!/usr/bin/python3
"""tinylm_ref.py — the PyTorch oracle for tinylm's model (docs/config.md, docs/tensors.md).

Written from the docs only. Parameters live in a dict keyed by the engine's tensor names,
so gradients come back under the same names. Computes in float64 by default.

    m = load("model_dir")                       # config.json + model.safetensors
    logits = m.forward(tokens)                  # tokens int [B,T] -> [B,T,V]
    out = m.loss_and_grads(tokens, targets)     # logits, loss, grads{name}, dx{"layers.N"}

CLI:
    tinylm_ref.py dump CASE_DIR OUT_DIR [--float32] [--bf16-products]
        CASE_DIR holds config.json, model.safetensors, tokens.npy, targets.npy; writes
        OUT_DIR/logits.npy, loss.npy, grad/<name>.npy, dx/layers.<N>.npy (the tlm_dump contract)
    tinylm_ref.py init CONFIG_JSON OUT_DIR [--seed S] [--dtype F32|BF16|F16]
        writes a model initialised as docs/config.md "Init" says
"""
import argparse
import collections
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_config import resolve_config, param_shapes, layer_shape, kv_source  # noqa: E402
from safetensors_np import save_safetensors, load_safetensors  # noqa: E402

__all__ = ["resolve_config", "param_shapes", "save_safetensors", "load_safetensors",
           "init_params", "random_params", "Model", "load", "save", "cross_entropy", "z_loss_term", "dump"]


# ---- building blocks -------------------------------------------------------------------

def round_bf16(t):
    """t rounded to the nearest bfloat16 (ties to even), kept in t's dtype"""
    return t.to(torch.bfloat16).to(t.dtype)


class Bf16Product(torch.autograd.Function):
    """x @ W^T in mixed precision, as autocast's bf16 matmul: both operands rounded to bfloat16,
    the products summed exactly (here in float64). Its backward rounds the same way: the incoming
    gradient g and the saved operands are rounded before dx = g W and dW = g^T x."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return round_bf16(x) @ round_bf16(w).t()

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        g16 = round_bf16(g)
        dx = g16 @ round_bf16(w)
        dw = g16.reshape(-1, g.shape[-1]).t() @ round_bf16(x).reshape(-1, x.shape[-1])
        return dx, dw


class Bf16Matmul(torch.autograd.Function):
    """a @ b with both operands rounded to bfloat16 and exact sums: the attention's products in the
    engine's mixed precision on AMX (q k^T, P v); the backward rounds the incoming gradient and the
    saved operands the same way (dP = g v^T, dv = P^T g; dq = dS k, dk = dS^T q with dS the
    gradient of the unscaled q k^T, as the engine rounds it)"""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return round_bf16(a) @ round_bf16(b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        g16 = round_bf16(g)
        return g16 @ round_bf16(b).transpose(-1, -2), round_bf16(a).transpose(-1, -2) @ g16


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased variance, as LayerNorm uses
    y = w * (x - mean) / torch.sqrt(var + eps)
    return y + b if b is not None else y


def rms_norm(x, w, eps, one_plus):
    y = x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)
    return y * (1.0 + w) if one_plus else y * w


def dyt(x, alpha, w, b):
    """DyT (Zhu et al. 2025): w * tanh(alpha * x) + b, alpha a scalar"""
    return w * torch.tanh(alpha * x) + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def softcap(x, cap):
    return cap * torch.tanh(x / cap) if cap else x


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_tables(T, hd, theta, dtype, fraction=1.0):
    """cos, sin [T, hd] for the rotate-half layout: dim i pairs with i + hd/2. fraction < 1 is
    Gemma 4's "proportional" RoPE: only the first floor(fraction * hd / 2) pairs turn (at the
    frequencies they have in the whole head), the rest keep frequency 0 (cos 1, sin 0)."""
    inv_freq = theta ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    turning = int(math.floor(fraction * hd / 2))
    inv_freq[turning:] = 0.0
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    ang = torch.cat((ang, ang), dim=-1)
    return ang.cos().to(dtype), ang.sin().to(dtype)


def yarn_mscale(factor, m):
    return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0


def mla_rope_tables(T, dr, theta, rope_scaling, max_pos, dtype):
    """cos, sin [T, dr] of MLA's decoupled RoPE (rotate-half layout), with YaRN when rope_scaling is
    {"rope_type": "yarn", ...} (Peng et al. 2023, as Hugging Face's modeling_rope_utils computes it):
    frequency i blends theta^(-2i/dr) / factor (interpolation) and theta^(-2i/dr) (extrapolation) by a
    ramp over the dims between the correction range's ends (the dims turning beta_fast and beta_slow
    times over the original context, floored / ceiled with truncate); the tables times the attention
    factor (given, or mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are set, else
    mscale(factor, 1))."""
    i = torch.arange(0, dr, 2, dtype=torch.float64)
    pos_freqs = theta ** (i / dr)
    gain = 1.0
    if rope_scaling is None:
        inv_freq = 1.0 / pos_freqs
    else:
        rs = rope_scaling
        factor = float(rs["factor"])
        orig = rs.get("original_max_position_embeddings") or max_pos
        fast, slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

        def dim_of(turns):  # the dim whose frequency turns `turns` times over the original context
            return dr * math.log(orig / (turns * 2 * math.pi)) / (2 * math.log(theta))
        lo, hi = dim_of(fast), dim_of(slow)
        if rs.get("truncate", True):
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, dr - 1)
        if lo == hi:
            hi += 0.001
        ramp = ((torch.arange(dr // 2, dtype=torch.float64) - lo) / (hi - lo)).clamp(0, 1)
        inv_freq = ramp / (factor * pos_freqs) + (1 - ramp) / pos_freqs
        m, m_all = rs.get("mscale"), rs.get("mscale_all_dim")
        if rs.get("attention_factor"):
            gain = rs["attention_factor"]
        elif m and m_all:
            gain = yarn_mscale(factor, m) / yarn_mscale(factor, m_all)
        else:
            gain = yarn_mscale(factor, 1.0)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    ang = torch.cat((ang, ang), dim=-1)
    return (ang.cos() * gain).to(dtype), (ang.sin() * gain).to(dtype)


def topk_lower_index(x, k):
    """The indices of the k largest of x along its last dimension, best first, a tie going to
    the lower index (a stable descending sort). torch.topk promises no order among equal values
    on CPU (measured with torch 1.13: for scores with many ties it returns a higher index first
    in most cases), so the reference states the rule it shares with the engine."""
    return torch.sort(x, dim=-1, descending=True, stable=True)[1][..., :k]


def attention_mask(T, window):
    """bool [T, T]: query i sees key j iff j <= i and (no window or i - j < window)."""
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    ok = j <= i
    if window > 0:
        ok = ok & (i - j < window)
    return ok


def cross_entropy(logits, targets):
    """Mean cross-entropy over the positions whose target is >= 0 (negative = no target)."""
    V = logits.shape[-1]
    lp = torch.log_softmax(logits.reshape(-1, V), dim=-1)
    t = targets.reshape(-1).long()
    keep = t >= 0
    picked = lp[keep].gather(1, t[keep][:, None])[:, 0]
    return -picked.mean()


def z_loss_term(logits, targets):
    """mean over the positions with a target of logsumexp(logits)^2 (the z-loss is z times this:
    PaLM, Wortsman et al. 2023)"""
    V = logits.shape[-1]
    lse = torch.logsumexp(logits.reshape(-1, V), dim=-1)
    keep = targets.reshape(-1) >= 0
    return (lse[keep] ** 2).mean()


# ---- the model ---------------------------------------------------------------------------

# hook points that TransformerLens has only with use_attn_in / use_split_qkv_input / use_attn_result /
# use_hook_mlp_in, and the engine makes only when asked for (TLM_HOOK_ON_DEMAND)
ON_DEMAND = ("hook_attn_in", "hook_q_input", "hook_k_input", "hook_v_input", "attn.hook_result", "hook_mlp_in")


class Model:
    def __init__(self, config, params, dtype=torch.float64, bf16_products=False, bf16_attention=False):
        self.cfg = resolve_config(config)
        self.dtype = dtype
        self.bf16_products = bf16_products  # the linear layers and the head as Bf16Product
        self.bf16_attention = bf16_attention  # q k^T and P v as Bf16Matmul
        shapes = param_shapes(self.cfg)
        missing = [n for n in shapes if n not in params]
        extra = [n for n in params if n not in shapes]
        if missing or extra:
            raise ValueError("model tensors do not match the config: missing %s, unexpected %s"
                             % (missing, extra))
        self.params = collections.OrderedDict()
        for name, shape in shapes.items():
            a = np.asarray(params[name], dtype=np.float64)
            if list(a.shape) != list(shape):
                raise ValueError("tensor %s: shape %s, config wants %s" % (name, list(a.shape), shape))
            self.params[name] = torch.tensor(a, dtype=dtype, requires_grad=True)
        self.block_inputs = []
        self.router_logits, self.router_choice, self.router_weights = [], [], []  # each MoE layer's, last forward
        self._kv = {}  # layer -> (k, v) as attention reads them (Gemma 4's shared K/V)
        self.hook_fn = None  # fn(name, tensor) -> tensor at each named point (run_hooked)
        self._kv_inputs = {}  # layer -> the normed hook_k_input, hook_v_input (sublayer -> attention)
        self._on_demand = False  # run_hooked named a point of ON_DEMAND: they are all made
        # TransformerLens' use_split_qkv_input: hook_q_input [B, T, H, d], hook_k_input / hook_v_input
        # [B, T, KV, d], each head's q, k, v from its own copy through the input norm
        self.split_qkv_heads = False

    def _hook(self, name, x):
        return self.hook_fn(name, x) if self.hook_fn is not None else x

    def norm_hooked(self, prefix, x, hook_prefix):
        """self.norm, with its scale (sqrt(mean square or variance + eps), [..., 1]) at hook_prefix.hook_scale"""
        if self.hook_fn is not None and self.cfg["norm_type"] != "dyt":  # (DyT has no scale)
            c = self.cfg
            if c["norm_type"] == "layernorm":
                var = ((x - x.mean(-1, keepdim=True)) ** 2).mean(-1, keepdim=True)
            else:
                var = (x * x).mean(-1, keepdim=True)
            self._hook(hook_prefix + ".hook_scale", torch.sqrt(var + c["norm_eps"]).detach())
        return self.norm(prefix, x)

    def p(self, name):
        return self.params.get(name)

    def norm(self, prefix, x):
        c = self.cfg
        w, b = self.p(prefix + ".weight"), self.p(prefix + ".bias")
        if c["norm_type"] == "dyt":
            return dyt(x, self.p(prefix + ".alpha"), w, b)
        if c["norm_type"] == "layernorm":
            return layer_norm(x, w, b, c["norm_eps"])
        return rms_norm(x, w, c["norm_eps"], c["norm_type"] == "rmsnorm_1p")

    def product(self, x, w):
        """x @ w^T: a linear layer's or the head's matrix product"""
        return Bf16Product.apply(x, w) if self.bf16_products else x @ w.t()

    def linear(self, prefix, x):
        y = self.product(x, self.p(prefix + ".weight"))
        b = self.p(prefix + ".bias")
        return y + b if b is not None else y

    def qk_norm(self, name, x):
        # Always an RMSNorm (docs: "RMSNorm on q and k"), (1+w) only with rmsnorm_1p.
        c = self.cfg
        return rms_norm(x, self.p(name), c["norm_eps"], c["norm_type"] == "rmsnorm_1p")

    def mla_attention(self, n, x):
        """Multi-head latent attention (DeepSeek-V2 paper sec. 2.1; Hugging Face's DeepseekV3Attention):
        q = W_qb rmsnorm(W_qa x) (or W_q x), split per head into q_nope, q_pe; [c_kv, k_pe] = W_kva x;
        [k_nope, v] per head = W_kvb rmsnorm(c_kv); RoPE on q_pe and on k_pe (one for all heads; pairs
        de-interleaved first with rope_interleave); softmax([q_nope, q_pe] . [k_nope, k_pe] * scale) v,
        scale = (nope + rope)^-0.5, times mscale(factor, mscale_all_dim)^2 under YaRN."""
        c = self.cfg
        B, T, _ = x.shape
        H, dn, dr, dv = c["num_attention_heads"], c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        rkv = c["kv_lora_rank"]
        p = "layers.%d.attn." % n

        def hk(name, t):
            return self._hook("blocks.%d.attn.%s" % (n, name), t)

        def plain_rms(name, t):  # MLA's norms: RMSNorm with gain w, whatever norm_type
            return rms_norm(t, self.p(p + name), c["norm_eps"], False)

        if c["q_lora_rank"]:
            cq = hk("hook_q_a", self.linear(p + "q_a_proj", x))
            q = self.linear(p + "q_b_proj", hk("hook_q_a_normed", plain_rms("q_a_norm.weight", cq)))
        else:
            q = self.linear(p + "q_proj", x)
        q = q.view(B, T, H, dn + dr).transpose(1, 2)
        q_nope, q_pe = q[..., :dn], q[..., dn:]
        kv_a = self.linear(p + "kv_a_proj", x)
        ckv, k_pe = kv_a[..., :rkv], kv_a[..., rkv:]
        ckvn = hk("hook_kv_a_normed", plain_rms("kv_a_norm.weight", hk("hook_kv_a", ckv)))
        kv = self.linear(p + "kv_b_proj", ckvn).view(B, T, H, dn + dv).transpose(1, 2)
        k_nope, v = kv[..., :dn], kv[..., dn:]
        k_pe = k_pe.view(B, 1, T, dr)
        if c["rope_interleave"]:  # pairs (2i, 2i+1) -> halves (i, i + dr/2)
            q_pe = q_pe.reshape(B, H, T, dr // 2, 2).transpose(-1, -2).reshape(B, H, T, dr)
            k_pe = k_pe.reshape(B, 1, T, dr // 2, 2).transpose(-1, -2).reshape(B, 1, T, dr)
        rs = c.get("rope_scaling")
        cos, sin = mla_rope_tables(T, dr, c["rope_theta"], rs, c["max_position_embeddings"], self.dtype)
        q_pe = q_pe * cos + rotate_half(q_pe) * sin
        k_pe = k_pe * cos + rotate_half(k_pe) * sin
        qs = torch.cat((q_nope, q_pe), dim=-1)
        ks = torch.cat((k_nope, k_pe.expand(B, H, T, dr)), dim=-1)
        scale = (dn + dr) ** -0.5
        if rs is not None and rs.get("mscale_all_dim"):
            m = yarn_mscale(float(rs["factor"]), rs["mscale_all_dim"])
            scale = scale * m * m
        if self.hook_fn is not None:
            # the hook points see every head zero-padded to head_dim = max(nope + rope, v_head_dim) (the
            # engine's attention heads); attention then runs on what the hooks leave, which is the same
            # function: the zeros add nothing to q.k, and the padding of z is not read
            D = c["head_dim"]
            pad = lambda t: torch.nn.functional.pad(t, (0, D - t.shape[-1]))  # noqa: E731
            v = hk("hook_v", pad(v).transpose(1, 2)).transpose(1, 2)
            qs = hk("hook_rot_q", pad(qs).transpose(1, 2)).transpose(1, 2)
            ks = hk("hook_rot_k", pad(ks).transpose(1, 2)).transpose(1, 2)
        mm = Bf16Matmul.apply if self.bf16_attention else torch.matmul
        scores = mm(qs, ks.transpose(-1, -2)) * scale
        scores = hk("hook_attn_scores", scores.masked_fill(~attention_mask(T, 0), float("-inf")))
        o = mm(hk("hook_pattern", torch.softmax(scores, dim=-1)), v)  # [B, H, T, dv] (padded: D)
        o = hk("hook_z", o.transpose(1, 2))[..., :dv]
        return self.linear(p + "o_proj", o.reshape(B, T, H * dv))

    def attention(self, n, x):
        c = self.cfg
        if c["mla"]:
            return self.mla_attention(n, x)
        B, T, _ = x.shape
        H = c["num_attention_heads"]
        hd, KV = layer_shape(c, n)  # (Gemma 4: a full layer's own head_dim and kv heads)
        full = c["layer_types"][n] == "full_attention"
        own = kv_source(c, n) == n
        p = "layers.%d.attn." % n

        def hk(name, t):  # hooks see [B, T, heads, hd]
            return self._hook("blocks.%d.attn.%s" % (n, name), t)

        xin = self._kv_inputs.pop(n, (x, x))  # (hook_k_input / hook_v_input's own, when split)
        d = c["hidden_size"]

        def per_head(name, t, heads):  # t [B, T, heads, d] -> [B, T, heads * hd], head h by its rows of W
            y = torch.einsum("bthi,hji->bthj", t, self.p(p + name + ".weight").view(heads, hd, d))
            b = self.p(p + name + ".bias")
            return (y + b.view(heads, hd) if b is not None else y).reshape(B, T, heads * hd)

        if len(xin) == 3:  # per head: q, k, v each from its heads' own normed copies
            q = per_head("q_proj", xin[0], H)
        else:
            xk, xv = xin
            q = self.linear(p + "q_proj", x)
        q = hk("hook_q", q.view(B, T, H, hd)).reshape(B, T, H * hd)
        if own and len(xin) == 3:
            k = per_head("k_proj", xin[1], KV)
            v = k if (c["attention_k_eq_v"] and full) else per_head("v_proj", xin[2], KV)
        elif own:
            k = self.linear(p + "k_proj", xk)
            # K = V (Gemma 4's full layers): the value is the key projection, taken before k's norm
            v = k if (c["attention_k_eq_v"] and full) else self.linear(p + "v_proj", xv)
            k = hk("hook_k", k.view(B, T, KV, hd)).reshape(B, T, KV * hd)
            v = hk("hook_v", v.view(B, T, KV, hd)).reshape(B, T, KV * hd)
        if c["qk_norm"] == "full":  # over the whole projection (OLMo 2)
            q = self.qk_norm(p + "q_norm.weight", q)
            q = hk("hook_q_normed", q.view(B, T, H, hd)).reshape(B, T, H * hd)
            if own:
                k = self.qk_norm(p + "k_norm.weight", k)
                k = hk("hook_k_normed", k.view(B, T, KV, hd)).reshape(B, T, KV * hd)
        q = q.view(B, T, H, hd).transpose(1, 2)   # [B, H, T, hd]
        if own:
            k = k.view(B, T, KV, hd).transpose(1, 2)  # [B, KV, T, hd]
            v = v.view(B, T, KV, hd).transpose(1, 2)
            if c["v_norm"]:  # Gemma 4: RMSNorm of each head's v, no weight
                v = v / torch.sqrt((v * v).mean(-1, keepdim=True) + c["norm_eps"])
        if c["qk_norm"] == "head":  # per head over head_dim (Qwen3)
            q = self.qk_norm(p + "q_norm.weight", q)
            q = hk("hook_q_normed", q.transpose(1, 2)).transpose(1, 2)
            if own:
                k = self.qk_norm(p + "k_norm.weight", k)
                k = hk("hook_k_normed", k.transpose(1, 2)).transpose(1, 2)
        if c["position_embedding"] == "rope":
            local = not full and c["rope_local_base_freq"] is not None
            if local:  # sliding layers on their own base, all frequencies
                cos, sin = rope_tables(T, hd, c["rope_local_base_freq"], self.dtype)
            else:
                cos, sin = rope_tables(T, hd, c["rope_theta"], self.dtype, c["rope_proportional_fraction"])
            q = q * cos + rotate_half(q) * sin
            q = hk("hook_rot_q", q.transpose(1, 2)).transpose(1, 2)
            if own:
                k = k * cos + rotate_half(k) * sin
                k = hk("hook_rot_k", k.transpose(1, 2)).transpose(1, 2)
        if own:
            self._kv[n] = (k, v)
        else:  # Gemma 4's shared keys and values: those the source layer attended over
            k, v = self._kv[kv_source(c, n)]
        # GQA: query head h reads kv head h // (H / KV) (Hugging Face repeat_kv layout).
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        qpas = c["query_pre_attn_scalar"]
        scale = (qpas if qpas is not None else hd) ** -0.5
        mm = Bf16Matmul.apply if self.bf16_attention else torch.matmul
        scores = softcap(mm(q, k.transpose(-1, -2)) * scale, c["attn_logit_softcapping"])
        window = c["sliding_window"] if c["layer_types"][n] == "sliding_attention" else 0
        scores = scores.masked_fill(~attention_mask(T, window), float("-inf"))
        scores = hk("hook_attn_scores", scores)
        o = mm(hk("hook_pattern", torch.softmax(scores, dim=-1)), v)  # [B, H, T, hd]
        o = hk("hook_z", o.transpose(1, 2)).reshape(B, T, H * hd)
        if self.hook_fn is not None and self._on_demand and not self.bf16_products:
            # attn.hook_result: head h's z through its columns of W_O (TransformerLens' use_attn_result);
            # attn_out = the heads' sum + b_O
            d = c["hidden_size"]
            w = self.p(p + "o_proj.weight").view(d, H, hd)
            res = hk("hook_result", torch.einsum("bthj,ihj->bthi", o.view(B, T, H, hd), w))
            b = self.p(p + "o_proj.bias")
            return res.sum(2) + b if b is not None else res.sum(2)
        return self.linear(p + "o_proj", o)

    def glu(self, prefix, x):
        """down(act(gate x) * up x): a gated MLP (an expert, the shared expert)"""
        g, up = self.linear(prefix + "gate_proj", x), self.linear(prefix + "up_proj", x)
        h = g * torch.sigmoid(g) * up if self.cfg["ffn_type"] == "swiglu" else gelu_tanh(g) * up
        return self.linear(prefix + "down_proj", h)

    def route(self, n, u):
        """The router of MoE layer n on rows u [R, d]: (logits [R, E], chosen experts [R, k] best
        first, their weights [R, k]). Written from Hugging Face's Qwen3MoeSparseMoeBlock /
        MixtralSparseMoeBlock (softmax over all experts, top-k, renormalised with norm_topk_prob)
        and DeepseekV3MoE (sigmoid scores; the choice by score + e_score_correction_bias, within
        the topk_group groups whose two best choices sum highest; weights from the unbiased
        scores, over their sum + 1e-20 with norm_topk_prob; times routed_scaling_factor). Two
        differences, both documented (docs/config.md): a tie goes to the lower expert index
        (topk_lower_index; torch.topk promises no order), and experts outside the chosen groups
        are excluded (-inf, as DeepSeek's own inference code) where HF fills them with 0."""
        c = self.cfg
        p = "layers.%d.ffn.router." % n
        z = u @ self.p(p + "weight").t()  # (always full precision: a rounding would move the choice)
        k, E = c["num_experts_per_tok"], c["num_experts"]
        if c["scoring_func"] == "softmax":
            scores = torch.softmax(z, dim=-1)
            choice = scores
        else:
            scores = torch.sigmoid(z)
            choice = scores + self.p(p + "e_score_correction_bias")
        choice = choice.detach()  # the selection is not differentiated
        if c["n_group"] > 1:
            G = c["n_group"]
            grouped = choice.view(-1, G, E // G)
            best2 = topk_lower_index(grouped, 2)
            gscore = grouped.gather(-1, best2).sum(-1)  # [R, G]
            keep = torch.zeros_like(gscore, dtype=torch.bool)
            keep.scatter_(1, topk_lower_index(gscore, c["topk_group"]), True)
            keep = keep[:, :, None].expand(-1, G, E // G).reshape(-1, E)
            choice = choice.masked_fill(~keep, float("-inf"))
        idx = topk_lower_index(choice, k)
        w = scores.gather(1, idx)
        if c["norm_topk_prob"]:
            w = w / (w.sum(-1, keepdim=True) + (1e-20 if c["scoring_func"] == "sigmoid" else 0.0))
        if c["enable_moe_block"]:  # Gemma4TextRouter: after the renormalisation, each expert's own scale
            return z, idx, w * self.p(p + "expert_scale")[idx]
        return z, idx, w * c["routed_scaling_factor"]

    def moe(self, n, x, xr=None):
        """A mixture-of-experts FFN: sum over each row's chosen experts of weight * expert(row),
        plus the shared expert; the router's logits kept for the load-balancing loss. xr: the rows the
        router reads, when they are not x's (Gemma 4's MoE block)."""
        c = self.cfg
        B, T, d = x.shape
        u = x.reshape(-1, d)
        z, idx, w = self.route(n, u if xr is None else xr.reshape(-1, d))
        self.router_logits.append(z)
        self.router_choice.append(idx)
        self.router_weights.append(w)
        out = torch.zeros_like(u)
        for e in range(c["num_experts"]):
            rows, j = torch.where(idx == e)
            if len(rows):
                y = self.glu("layers.%d.ffn.experts.%d." % (n, e), u[rows])
                out = out.index_add(0, rows, y * w[rows, j, None])
        if c["n_shared_experts"]:
            y = self.glu("layers.%d.ffn.shared_experts." % n, u)
            if c["shared_expert_gate"]:  # Qwen2MoeSparseMoeBlock: sigmoid(shared_expert_gate(u)) * shared_expert(u)
                y = torch.sigmoid(u @ self.p("layers.%d.ffn.shared_expert_gate.weight" % n).t()) * y
            out = out + y
        return out.view(B, T, d)

    def load_balancing_loss(self):
        """Hugging Face's load_balancing_loss_func (Switch Transformer's eqs. 4-6) on the last
        forward: every MoE layer's rows pooled; F_e = the share of the routed slots expert e got
        (summed over the k choices), P_e = its mean softmax probability; E * sum_e F_e P_e."""
        c = self.cfg
        z = torch.cat(self.router_logits, 0)
        chosen = torch.cat(self.router_choice, 0)
        probs = torch.softmax(z, dim=-1)
        E = c["num_experts"]
        frac = torch.nn.functional.one_hot(chosen, E).to(z.dtype).mean(0).sum(0)  # [E]
        return E * (frac * probs.mean(0)).sum()

    def moe_block(self, n, u, x):
        """Gemma 4's MoE block, written from Gemma4TextDecoderLayer / Gemma4TextRouter: the dense
        MLP on u (the pre-FFN norm of the stream x) normed by post_feedforward_layernorm_1 (here
        dense_out_norm), plus the experts on pre_feedforward_layernorm_2(x) (moe_in_norm) normed by
        post_feedforward_layernorm_2 (moe_out_norm); the router reads x through an RMSNorm without
        weight, times router.scale and hidden_size^-0.5."""
        c = self.cfg
        p = "layers.%d." % n
        dense = self.norm(p + "dense_out_norm", self.ffn(n, u, dense_only=True))
        r = x / torch.sqrt((x * x).mean(-1, keepdim=True) + c["norm_eps"])
        r = r * self.p(p + "ffn.router.scale") * c["hidden_size"] ** -0.5
        experts = self.moe(n, self.norm(p + "moe_in_norm", x), r)
        return dense + self.norm(p + "moe_out_norm", experts)

    def ffn(self, n, x, stream=None, dense_only=False):
        c = self.cfg
        if n in c["moe_layers"] and not dense_only:
            if c["enable_moe_block"]:
                return self.moe_block(n, x, stream)
            return self.moe(n, x)
        p = "layers.%d.ffn." % n
        hk = lambda name, t: self._hook("blocks.%d.mlp.%s" % (n, name), t)  # noqa: E731
        up = self.linear(p + "up_proj", x)
        if c["ffn_type"] == "swiglu":
            g = hk("hook_pre", self.linear(p + "gate_proj", x))
            h = g * torch.sigmoid(g) * hk("hook_pre_linear", up)
        elif c["ffn_type"] == "geglu":
            h = gelu_tanh(hk("hook_pre", self.linear(p + "gate_proj", x))) * hk("hook_pre_linear", up)
        else:
            h = gelu_tanh(hk("hook_pre", up))
        return self.linear(p + "down_proj", hk("hook_post", h))

    def sublayer(self, x, f, norm_in, norm_out, hooks=None):
        """One sublayer under the configured norm placement (docs/config.md table). hooks: the
        names (layer, "attn" or "mlp") of its hook points (docs/python.md)."""
        c = self.cfg
        pl, res = c["norm_placement"], c["residual"]
        n, kind = hooks if hooks else (0, "attn")
        ln = "blocks.%d.%s" % (n, "ln1" if kind == "attn" else "ln2")
        out = "blocks.%d.hook_%s_out" % (n, kind)
        hk = self._hook
        xb = x  # what the branch reads; the residual path reads x
        if self.hook_fn is not None and hooks and self._on_demand:
            # TransformerLens' hook_attn_in / hook_mlp_in: a copy of the stream for the branch alone;
            # the attention's q, k, v each read a copy of it (hook_q_input, ...) through the input norm
            xb = hk("blocks.%d.hook_%s_in" % (n, kind), x + 0.0)
            if kind == "attn" and not c["mla"] and self.split_qkv_heads:
                # TransformerLens' use_split_qkv_input: a copy per head (per kv head for k and v), ln1
                # applied to each; what ln1's own points show is hook_attn_in's norm, read by no head
                _, KV = layer_shape(c, n)
                own = kv_source(c, n) == n
                k_eq_v = c["attention_k_eq_v"] and c["layer_types"][n] == "full_attention"
                rep = lambda t, h: t.unsqueeze(2).repeat(1, 1, h, 1)  # noqa: E731
                xs = [hk("blocks.%d.hook_q_input" % n, rep(xb, c["num_attention_heads"])),
                      hk("blocks.%d.hook_k_input" % n, rep(xb, KV)) if own else None,
                      hk("blocks.%d.hook_v_input" % n, rep(xb, KV)) if own and not k_eq_v else None]
                if pl in ("pre", "sandwich"):
                    xs = [self.norm(norm_in, t) if t is not None else None for t in xs]
                self._kv_inputs[n] = tuple(xs)
            elif kind == "attn" and not c["mla"]:
                xk = hk("blocks.%d.hook_k_input" % n, xb + 0.0)
                xv = hk("blocks.%d.hook_v_input" % n, xb + 0.0)
                xb = hk("blocks.%d.hook_q_input" % n, xb + 0.0)
                if pl in ("pre", "sandwich"):
                    xk, xv = self.norm(norm_in, xk), self.norm(norm_in, xv)
                self._kv_inputs[n] = (xk, xv)
        if pl == "deepnorm":
            # DeepNorm: x_{l+1} = LN(alpha x_l + G(x_l)), Post-Norm with the residual up-weighted
            s = c["deepnorm_alpha"] * x + hk(out, f(xb))
            s = hk("blocks.%d.hook_resid_%s_pre_norm" % (n, "mid" if kind == "attn" else "post"), s)
            return self.norm_hooked(norm_in, s, ln + "_post")
        if pl == "post":
            s = x + hk(out, f(xb)) if res else hk(out, f(xb))
            s = hk("blocks.%d.hook_resid_%s_pre_norm" % (n, "mid" if kind == "attn" else "post"), s)
            return self.norm_hooked(norm_in, s, ln + "_post")
        if pl in ("pre", "sandwich"):
            u = hk(ln + ".hook_normalized", self.norm_hooked(norm_in, xb, ln))
        if pl == "pre":
            y = f(u)
        elif pl == "sandwich":
            y = self.norm_hooked(norm_out, hk(out + "_pre_norm", f(u)), ln + "_out")
        elif pl == "output":
            y = self.norm_hooked(norm_out, hk(out + "_pre_norm", f(xb)), ln + "_out")
        else:
            y = f(xb)
        y = hk(out, y)
        return x + y if res else y

    def forward(self, tokens, block_input_delta=None):
        """tokens int [B,T] -> logits [B,T,V]. block_input_delta {N: tensor [B,T,d]} is added to
        the stream entering block N (lets a test check dx by finite differences)."""
        c = self.cfg
        tokens = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
        B, T = tokens.shape
        if tokens.min() < 0 or tokens.max() >= c["vocab_size"]:
            raise ValueError("token id outside [0, vocab_size)")
        x = self.p("embed.weight")[tokens]
        if c["embedding_scale"]:
            x = x * math.sqrt(c["hidden_size"])  # token embedding only, not the positions
        if c["position_embedding"] == "learned":
            if T > c["max_position_embeddings"]:
                raise ValueError("sequence longer than max_position_embeddings")
            x = x + self.p("pos_embed.weight")[:T][None, :, :]
        x = self._hook("hook_embed", x)
        self.block_inputs = []
        self.router_logits, self.router_choice, self.router_weights = [], [], []
        self._kv = {}
        P = c["hidden_size_per_layer_input"]
        if P:  # Gemma 4's per-layer inputs, every layer's made here from the stream entering block 0
            L = c["num_hidden_layers"]
            made = self.product(x, self.p("ple_model_proj.weight")) * c["hidden_size"] ** -0.5
            made = rms_norm(made.view(B, T, L, P), self.p("ple_model_norm.weight"), c["norm_eps"],
                            c["norm_type"] == "rmsnorm_1p")
            table = self.p("ple_embed.weight")[tokens].view(B, T, L, P) * math.sqrt(P)
            per_layer = (made + table) * 2.0 ** -0.5
        for n in range(c["num_hidden_layers"]):
            if block_input_delta and n in block_input_delta:
                x = x + block_input_delta[n]
            x = self._hook("blocks.%d.hook_resid_pre" % n, x)
            if x.requires_grad:
                x.retain_grad()
            self.block_inputs.append(x)
            x = self.sublayer(x, lambda h: self.attention(n, h),
                              "layers.%d.attn_norm" % n, "layers.%d.attn_out_norm" % n, (n, "attn"))
            x = self._hook("blocks.%d.hook_resid_mid" % n, x)
            x = self.sublayer(x, lambda h, s=x: self.ffn(n, h, s),
                              "layers.%d.ffn_norm" % n, "layers.%d.ffn_out_norm" % n, (n, "mlp"))
            if P:  # Gemma 4: the layer's own input, gated by the stream, projected, normed, added
                gate = self.linear("layers.%d.ple_gate" % n, x)
                act = gate * torch.sigmoid(gate) if c["ffn_type"] == "swiglu" else gelu_tanh(gate)
                out = self.linear("layers.%d.ple_proj" % n, act * per_layer[:, :, n, :])
                x = x + self.norm("layers.%d.ple_norm" % n, out)
            if c["layer_scalar"]:  # Gemma 4: the stream after the layer times a learned scalar
                x = x * self.p("layers.%d.layer_scalar" % n)
            x = self._hook("blocks.%d.hook_resid_post" % n, x)
        if c["final_norm"]:
            x = self._hook("ln_final.hook_normalized", self.norm_hooked("final_norm", x, "ln_final"))
        head = self.p("embed.weight") if c["tie_word_embeddings"] else self.p("lm_head.weight")
        return softcap(self.product(x, head), c["final_logit_softcapping"])

    def loss_and_grads(self, tokens, targets, router_aux_loss_coef=0.0):
        """Forward + backward. Returns numpy: logits [B,T,V], loss [1], grads {name: array},
        dx {"layers.N": dL/d(residual stream entering block N) [B,T,d]}. With router_aux_loss_coef
        the gradients are those of the cross-entropy + coef * the load-balancing loss (the loss
        returned stays the cross-entropy, as the engine's forward returns it; "aux" holds the
        load-balancing loss)."""
        for t in self.params.values():
            t.grad = None
        logits = self.forward(tokens)
        loss = cross_entropy(logits, torch.as_tensor(np.asarray(targets), dtype=torch.long))
        aux = self.load_balancing_loss() if self.cfg["moe_layers"] else None
        (loss + router_aux_loss_coef * aux if router_aux_loss_coef else loss).backward()
        grads = collections.OrderedDict(
            (n, t.grad.detach().numpy().copy() if t.grad is not None else np.zeros(t.shape))
            for n, t in self.params.items())
        dx = collections.OrderedDict(("layers.%d" % n, x.grad.detach().numpy().copy())
                                     for n, x in enumerate(self.block_inputs))
        return {"logits": logits.detach().numpy().copy(),
                "loss": np.array([loss.item()]), "grads": grads, "dx": dx,
                "aux": np.array([aux.item() if aux is not None else 0.0])}


    def run_hooked(self, tokens, names=None, replace=None, backward=None):
        """Forward with hook points: returns (logits, cache {name: array}); replace {name: fn(tensor)
        -> tensor} rewrites activations; backward: None, "loss" (next-token mean cross-entropy)
        or a function logits -> scalar metric; then cache also holds name + "_grad".
        names: None (all) or a collection."""
        seen = {}

        def fn(name, t):
            if replace and name in replace:
                t = replace[name](t)
            if names is None or name in names:
                if t.requires_grad:
                    t.retain_grad()
                seen[name] = t
            return t

        for t in self.params.values():
            t.grad = None
        self.hook_fn = fn
        # (the engine's points made only when asked for: here too only when named)
        self._on_demand = any(n.endswith(ON_DEMAND) for n in list(names or ()) + list(replace or ()))
        try:
            logits = self.forward(tokens)
            if backward is not None:
                if backward == "loss":
                    tok = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
                    tg = torch.full_like(tok, -1)
                    tg[..., :-1] = tok[..., 1:]
                    metric = cross_entropy(logits, tg)
                else:
                    metric = backward(logits)
                metric.backward()
        finally:
            self.hook_fn = None
        cache = {}
        for name, t in seen.items():
            cache[name] = t.detach().numpy().copy()
            if backward is not None and t.grad is not None:
                cache[name + "_grad"] = t.grad.detach().numpy().copy()
        return logits.detach().numpy().copy(), cache


# ---- init --------------------------------------------------------------------------------

def dyt_alpha0(c, name):
    """DyT's initial alpha of the norm `name` (its .alpha tensor): dyt_alpha_init_attn for
    attn_norm / attn_out_norm, dyt_alpha_init_ffn for ffn_norm / ffn_out_norm, dyt_alpha_init_final
    for final_norm, each when set (> 0), else dyt_alpha_init"""
    norm = name.split(".")[-2]
    key = {"attn_norm": "attn", "attn_out_norm": "attn", "ffn_norm": "ffn", "ffn_out_norm": "ffn",
           "final_norm": "final"}.get(norm)
    v = c.get("dyt_alpha_init_" + key) if key else None
    return v if v else c["dyt_alpha_init"]


def init_params(config, seed=0):
    """The docs' init: matrices/embeddings ~ N(0, initializer_range), o_proj/down_proj also
    / sqrt(2 L) with scale_residual_init, biases 0, norm weights identity (0 for rmsnorm_1p)."""
    c = resolve_config(config)
    rng = np.random.default_rng(seed)
    std = c["initializer_range"]
    out = collections.OrderedDict()
    for name, shape in param_shapes(c).items():
        if "norm" in name.split(".")[-2] and name.endswith(".weight"):
            mla_norm = name.endswith("_a_norm.weight")  # (MLA's: plain RMSNorms, gain 1)
            out[name] = np.full(shape, 0.0 if c["norm_type"] == "rmsnorm_1p" and not mla_norm else 1.0)
        elif name.endswith(".layer_scalar") or name.endswith(".router.scale") or name.endswith(".expert_scale"):
            out[name] = np.ones(shape)  # (Gemma 4's per-layer scalar, router scale, expert scales start at 1)
        elif name.endswith(".alpha"):  # DyT: alpha0 by position, else dyt_alpha_init
            out[name] = np.full(shape, dyt_alpha0(c, name))
        elif name.endswith(".bias") or name.endswith(".e_score_correction_bias"):
            out[name] = np.zeros(shape)
        else:
            s = std
            if c["scale_residual_init"] and (name.endswith("o_proj.weight") or name.endswith("down_proj.weight")):
                s = std / math.sqrt(2 * c["num_hidden_layers"])
            # DeepNet: the FFN, v_proj and o_proj weights are scaled by beta, q/k are not
            if c["norm_placement"] == "deepnorm" and ((".ffn." in name and ".router." not in name)
                                                      or name.endswith("v_proj.weight")
                                                      or name.endswith("o_proj.weight")):
                s = s * c["deepnorm_beta"]
            out[name] = rng.normal(0.0, s, size=shape)
    return out


def random_params(config, seed=0, std=0.3, embed_std=0.6, norm_std=0.3, bias_std=0.2):
    """Test-case weights: larger matrices than the init (so outputs are far from uniform),
    norm weights random around identity, biases random — nothing is left at a value that
    would hide a bug (a zero bias, a unit gain)."""
    c = resolve_config(config)
    rng = np.random.default_rng(seed)
    out = collections.OrderedDict()
    for name, shape in param_shapes(c).items():
        is_norm = "norm" in name.split(".")[-2]
        if is_norm and name.endswith(".weight"):
            mla_norm = name.endswith("_a_norm.weight")  # (MLA's: plain RMSNorms, around 1)
            ident = 0.0 if c["norm_type"] == "rmsnorm_1p" and not mla_norm else 1.0
            out[name] = ident + rng.normal(0.0, norm_std, size=shape)
        elif name.endswith(".alpha"):  # DyT's scalar, around its init
            out[name] = c["dyt_alpha_init"] * (1.0 + rng.normal(0.0, norm_std, size=shape))
        elif name.endswith(".layer_scalar") or name.endswith(".router.scale") or name.endswith(".expert_scale"):
            out[name] = 1.0 + rng.normal(0.0, norm_std, size=shape)  # (gains: around 1)
        elif name.endswith(".bias"):
            out[name] = rng.normal(0.0, bias_std, size=shape)
        elif name in ("embed.weight", "lm_head.weight", "pos_embed.weight", "ple_embed.weight"):
            out[name] = rng.normal(0.0, embed_std, size=shape)
        elif name.endswith(".router.weight"):  # (smaller: every expert gets rows of a test batch; Gemma 4's
            # router reads rows of RMS d^-0.5, so its logits would be flat at that size)
            out[name] = rng.normal(0.0, std * (3.0 if c["enable_moe_block"] else 1.0 / 3), size=shape)
        elif name.endswith(".e_score_correction_bias"):
            out[name] = rng.normal(0.0, 0.05, size=shape)
        else:
            out[name] = rng.normal(0.0, std, size=shape)
    return out


# ---- files ---------------------------------------------------------------------------------

def load(model_dir, dtype=torch.float64, bf16_products=False, bf16_attention=False):
    """Reads model_dir/config.json and model_dir/model.safetensors (engine tensor names)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    tensors = load_safetensors(os.path.join(model_dir, "model.safetensors"))
    return Model(config, {k: v.astype(np.float64) for k, v in tensors.items()}, dtype, bf16_products,
                 bf16_attention)


def save(model_dir, config, params, dtype="F32"):
    """Writes config.json and model.safetensors (params in the engine's order)."""
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    order = param_shapes(resolve_config(config))
    save_safetensors(os.path.join(model_dir, "model.safetensors"),
                     collections.OrderedDict((n, params[n]) for n in order), dtype)


def write_outputs(out_dir, result, np_dtype):
    """Writes a loss_and_grads() result in the tlm_dump layout."""
    os.makedirs(os.path.join(out_dir, "grad"), exist_ok=True)
    os.makedirs(os.path.join(out_dir, "dx"), exist_ok=True)
    np.save(os.path.join(out_dir, "logits.npy"), result["logits"].astype(np_dtype))
    np.save(os.path.join(out_dir, "loss.npy"), result["loss"].astype(np_dtype))
    for n, g in result["grads"].items():
        np.save(os.path.join(out_dir, "grad", n + ".npy"), g.astype(np_dtype))
    for n, g in result["dx"].items():
        np.save(os.path.join(out_dir, "dx", n + ".npy"), g.astype(np_dtype))


def case_training(case_dir):
    """A case's training options beside its model (train.json: {"router_aux_loss_coef": x}), or {}"""
    path = os.path.join(case_dir, "train.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def dump(case_dir, out_dir, dtype=torch.float64, bf16_products=False, bf16_attention=False):
    """Runs one case folder and writes its outputs (float32 files for float32 compute)."""
    m = load(case_dir, dtype, bf16_products, bf16_attention)
    tokens = np.load(os.path.join(case_dir, "tokens.npy"))
    targets = np.load(os.path.join(case_dir, "targets.npy"))
    result = m.loss_and_grads(tokens, targets, case_training(case_dir).get("router_aux_loss_coef", 0.0))
    write_outputs(out_dir, result, np.float32 if dtype == torch.float32 else np.float64)
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="run a case folder, write logits/loss/grads/dx")
    d.add_argument("case_dir")
    d.add_argument("out_dir")
    d.add_argument("--float32", action="store_true", help="compute in float32 (default float64)")
    d.add_argument("--bf16-products", action="store_true",
                   help="mixed precision: every linear layer's and the head's product on bf16-rounded operands")
    i = sub.add_parser("init", help="write a freshly initialised model")
    i.add_argument("config_json")
    i.add_argument("out_dir")
    i.add_argument("--seed", type=int, default=0)
    i.add_argument("--dtype", default="F32", choices=["F32", "BF16", "F16"])
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    try:
        if a.cmd == "dump":
            dump(a.case_dir, a.out_dir, torch.float32 if a.float32 else torch.float64, a.bf16_products)
        else:
            with open(a.config_json) as f:
                config = json.load(f)
            save(a.out_dir, config, init_params(config, a.seed), a.dtype)
    except (OSError, ValueError) as e:
        print("tinylm_ref: error: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
