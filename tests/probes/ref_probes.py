#!/usr/bin/python3
"""ref_probes.py — the PyTorch reference (tests/reference/tinylm_ref.py) extended to capture
every probe of docs/probes.md, for checking the engine's probes and `tinylm inspect`.

    m = ProbeModel.load(model_dir)             # float64 by default
    rec = m.capture(tokens, targets)          # {probe name: numpy array}, forward and backward

The subclass recomputes attention and the FFN with the reference's own building blocks so it
can keep the intermediate values; the names and meanings come from docs/probes.md, not from
the C code. Backward names are the gradients PyTorch's autograd gives for the same tensors.
"""
import json
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "reference"))
import tinylm_ref  # noqa: E402
from tinylm_ref import attention_mask, gelu_tanh, rms_norm, rope_tables, rotate_half, softcap  # noqa: E402


def row_rms(x):
    """sqrt(mean(x^2)) over the last axis (no eps: the value the norm receives/produces)."""
    return torch.sqrt((x * x).mean(-1))


class ProbeModel(tinylm_ref.Model):
    def __init__(self, config, params, dtype=torch.float64):
        super().__init__(config, params, dtype)
        self.rec = {}

    @classmethod
    def load(cls, model_dir, dtype=torch.float64):
        with open(os.path.join(model_dir, "config.json")) as f:
            config = json.load(f)
        tensors = tinylm_ref.load_safetensors(os.path.join(model_dir, "model.safetensors"))
        return cls(config, {k: v.astype(np.float64) for k, v in tensors.items()}, dtype)

    def put(self, name, t):
        self.rec[name] = t

    # every block norm and the final norm go through here (QK-norm does not: it is not a probe)
    def norm(self, prefix, x):
        y = super().norm(prefix, x)
        self.put(prefix + ".in_rms", row_rms(x))
        self.put(prefix + ".out", y)
        self.put(prefix + ".out_rms", row_rms(y))
        return y

    # multi-head latent attention's hook points (tinylm_ref.mla_attention) -> the probe names of the same
    # tensors (docs/probes.md): c_q / c_kv before and after their norms (with the norms' RMS), the heads
    MLA_PROBES = {"hook_q_a": ("q_a", "q_a_norm.in_rms"), "hook_q_a_normed": ("q_a_normed", "q_a_norm.out_rms"),
                  "hook_kv_a": ("kv_a", "kv_a_norm.in_rms"), "hook_kv_a_normed": ("kv_a_normed", "kv_a_norm.out_rms"),
                  "hook_v": ("v", None), "hook_rot_q": ("rot_q", None), "hook_rot_k": ("rot_k", None),
                  "hook_attn_scores": ("scores", None), "hook_pattern": ("probs", None), "hook_z": ("heads", None)}

    def mla_probes(self, n, x):
        p = "layers.%d.attn." % n

        def record(name, t):
            point = name.rsplit(".", 1)[-1]
            if point in self.MLA_PROBES:
                probe, rms = self.MLA_PROBES[point]
                self.put(p + probe, t)
                if rms:
                    self.put(p + rms, row_rms(t))
            return t
        self.hook_fn = record
        try:
            out = super().mla_attention(n, x)
        finally:
            self.hook_fn = None
        self.put(p + "o_proj", out)
        return out

    def attention(self, n, x):
        c = self.cfg
        if c["mla"]:
            return self.mla_probes(n, x)
        B, T, _ = x.shape
        H, KV, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        p = "layers.%d.attn." % n
        q, k, v = self.linear(p + "q_proj", x), self.linear(p + "k_proj", x), self.linear(p + "v_proj", x)
        self.put(p + "q", q.view(B, T, H, hd))  # the projections, before QK-norm and RoPE
        self.put(p + "k", k.view(B, T, KV, hd))
        self.put(p + "v", v.view(B, T, KV, hd))
        if c["qk_norm"] == "full":
            q, k = self.qk_norm(p + "q_norm.weight", q), self.qk_norm(p + "k_norm.weight", k)
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, KV, hd).transpose(1, 2)
        v = v.view(B, T, KV, hd).transpose(1, 2)
        if c["qk_norm"] == "head":
            q, k = self.qk_norm(p + "q_norm.weight", q), self.qk_norm(p + "k_norm.weight", k)
        if c["qk_norm"] in ("full", "head"):
            self.put(p + "q_normed", q.transpose(1, 2))  # [B, T, H, hd]
            self.put(p + "k_normed", k.transpose(1, 2))
        if c["position_embedding"] == "rope":
            cos, sin = rope_tables(T, hd, c["rope_theta"], self.dtype)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            self.put(p + "rot_q", q.transpose(1, 2))  # [B, T, H, hd]: as it enters the dot product
            self.put(p + "rot_k", k.transpose(1, 2))  # [B, T, KV, hd]
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        qpas = c["query_pre_attn_scalar"]
        scale = (qpas if qpas is not None else hd) ** -0.5
        scores = softcap((q @ k.transpose(-1, -2)) * scale, c["attn_logit_softcapping"])
        window = c["sliding_window"] if c["layer_types"][n] == "sliding_attention" else 0
        scores = scores.masked_fill(~attention_mask(T, window), float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        self.put(p + "scores", scores)
        self.put(p + "probs", probs)
        o = (probs @ v).transpose(1, 2)  # [B, T, H, hd]
        self.put(p + "heads", o)
        out = self.linear(p + "o_proj", o.reshape(B, T, H * hd))
        self.put(p + "o_proj", out)
        return out

    def ffn(self, n, x):
        c = self.cfg
        p = "layers.%d.ffn." % n
        if n in c["moe_layers"]:  # a mixture of experts: the router's logits, the choice, the weights
            B, T = x.shape[:2]
            out = self.moe(n, x)
            self.put(p + "router_logits", self.router_logits[-1].view(B, T, -1))
            self.put(p + "expert_ids", self.router_choice[-1].to(x.dtype).view(B, T, -1))
            self.put(p + "expert_weights", self.router_weights[-1].view(B, T, -1))
            self.put(p + "down_proj", out)
            return out
        up = self.linear(p + "up_proj", x)
        self.put(p + "up", up)
        if c["ffn_type"] in ("swiglu", "geglu"):
            g = self.linear(p + "gate_proj", x)
            self.put(p + "gate", g)
            h = (g * torch.sigmoid(g) if c["ffn_type"] == "swiglu" else gelu_tanh(g)) * up
        else:
            h = gelu_tanh(up)
        self.put(p + "hidden", h)
        out = self.linear(p + "down_proj", h)
        self.put(p + "down_proj", out)
        return out

    def sublayer(self, x, f, norm_in, norm_out):
        """docs/config.md's placements; records `<layer>.<attn|ffn>.out`, the value added to the
        stream (for Post-Norm: added before the norm; with residual false: what replaces it)."""
        c = self.cfg
        pl, res = c["norm_placement"], c["residual"]
        out_name = norm_in[: -len("_norm")] + ".out"  # layers.N.attn_norm -> layers.N.attn.out
        if pl in ("post", "deepnorm"):  # DeepNorm: N(alpha x + F(x))
            y = f(x)
            self.put(out_name, y)
            a = c["deepnorm_alpha"] if pl == "deepnorm" else 1.0
            return self.norm(norm_in, a * x + y if res else y)
        if pl == "pre":
            y = f(self.norm(norm_in, x))
        elif pl == "sandwich":
            y = self.norm(norm_out, f(self.norm(norm_in, x)))
        elif pl == "output":
            y = self.norm(norm_out, f(x))
        else:
            y = f(x)
        self.put(out_name, y)
        return x + y if res else y

    def forward(self, tokens, block_input_delta=None):
        c = self.cfg
        tokens = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
        B, T = tokens.shape
        x = self.p("embed.weight")[tokens]
        if c["embedding_scale"]:
            x = x * math.sqrt(c["hidden_size"])
        if c["position_embedding"] == "learned":
            x = x + self.p("pos_embed.weight")[:T][None, :, :]
        self.put("embed", x)
        self.stream = {}
        for n in range(c["num_hidden_layers"]):
            self.stream["layers.%d.resid_pre" % n] = x
            x = self.sublayer(x, lambda h: self.attention(n, h), "layers.%d.attn_norm" % n,
                              "layers.%d.attn_out_norm" % n)
            self.stream["layers.%d.resid_mid" % n] = x
            x = self.sublayer(x, lambda h: self.ffn(n, h), "layers.%d.ffn_norm" % n, "layers.%d.ffn_out_norm" % n)
            self.stream["layers.%d.resid_post" % n] = x
        for name, t in self.stream.items():
            if t.requires_grad:
                t.retain_grad()
            self.put(name, t)
        if c["final_norm"]:
            x = self.norm("final_norm", x)
        head = self.p("embed.weight") if c["tie_word_embeddings"] else self.p("lm_head.weight")
        logits = softcap(x @ head.t(), c["final_logit_softcapping"])
        if logits.requires_grad:
            logits.retain_grad()
        self.put("logits", logits)
        return logits

    def capture(self, tokens, targets=None):
        """Every forward probe; with targets also the backward ones (grad.*)."""
        self.rec = {}
        for t in self.params.values():
            t.grad = None
        logits = self.forward(tokens)
        out = {}
        if targets is not None:
            loss = tinylm_ref.cross_entropy(logits, torch.as_tensor(np.asarray(targets), dtype=torch.long))
            loss.backward()
            out["grad.logits"] = logits.grad
            for name, t in self.stream.items():
                out["grad." + name] = t.grad
            for name, t in self.params.items():
                out["grad." + name] = t.grad if t.grad is not None else torch.zeros_like(t)
        for name, t in self.rec.items():
            out[name] = t
        return {k: v.detach().numpy().copy() for k, v in out.items()}
