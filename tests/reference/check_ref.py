#!/usr/bin/python3
"""check_ref.py — self-tests of the PyTorch oracle (tinylm_ref.py) and its safetensors code.

The oracle is only useful if it is right, so it is checked against things written another
way: torch's own LayerNorm / MultiheadAttention / gelu / cross_entropy (a full GPT-2-style
model built from torch.nn), RoPE as complex multiplication, attention as a plain loop over
heads and positions, finite differences for dx, and bit patterns worked out by hand for BF16.
Run: /usr/bin/python3 tests/reference/check_ref.py
"""
import math
import os
import struct
import sys
import tempfile
import unittest

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tinylm_ref as R  # noqa: E402
from safetensors_np import bf16_bits_to_float32, float32_to_bf16_bits  # noqa: E402

D64 = torch.float64
SMALL = {"vocab_size": 23, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 24, "max_position_embeddings": 10}


def small(**over):
    c = dict(SMALL)
    c.update(over)
    return c


def tokens(cfg, B=2, T=7, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, cfg["vocab_size"], (B, T)), rng.integers(0, cfg["vocab_size"], (B, T))


class SafetensorsTest(unittest.TestCase):
    def test_roundtrip_and_metadata(self):
        rng = np.random.default_rng(1)
        t = {"a.weight": rng.normal(size=(3, 5)).astype(np.float32), "b": np.arange(4, dtype=np.float32)}
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "m.safetensors")
            R.save_safetensors(p, t, "F32", metadata={"format": "pt"})
            back, meta = R.load_safetensors(p, with_metadata=True)
            self.assertEqual(meta, {"format": "pt"})
            for k in t:
                np.testing.assert_array_equal(back[k], t[k])
            with open(p, "rb") as f:
                n = struct.unpack("<Q", f.read(8))[0]
            self.assertEqual((8 + n) % 8, 0)  # data starts aligned
            R.save_safetensors(p, t, "F16")
            back = R.load_safetensors(p)
            self.assertEqual(back["a.weight"].dtype, np.float16)
            np.testing.assert_array_equal(back["a.weight"], t["a.weight"].astype(np.float16))

    def test_bf16_round_to_nearest_even(self):
        # bfloat16 keeps 7 mantissa bits: the step just above 1.0 is 2^-7.
        x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, -2.5, 0.0, -0.0,
                      np.inf, -np.inf, 3.4e38], dtype=np.float32)
        want = np.array([1.0, 1.0, 1 + 2**-6, 1 + 2**-7, -2.5, 0.0, -0.0,
                         np.inf, -np.inf, np.inf], dtype=np.float32)  # 3.4e38 rounds past the max
        got = bf16_bits_to_float32(float32_to_bf16_bits(x))
        np.testing.assert_array_equal(got, want)
        self.assertTrue(np.signbit(got[6]))
        nan = float32_to_bf16_bits(np.array([np.nan, -np.nan], dtype=np.float32))
        self.assertTrue(np.all(np.isnan(bf16_bits_to_float32(nan))))
        self.assertEqual(int(float32_to_bf16_bits(np.array([1.0], np.float32))[0]), 0x3F80)
        # float64 just above / below a tie: float32 rounding would land on the tie itself.
        x64 = np.array([1 + 2**-8 + 2**-40, 1 + 3 * 2**-8 - 2**-40, 1 + 2**-8], dtype=np.float64)
        np.testing.assert_array_equal(bf16_bits_to_float32(float32_to_bf16_bits(x64)),
                                      np.array([1 + 2**-7, 1 + 2**-7, 1.0], dtype=np.float32))
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "m.safetensors")
            R.save_safetensors(p, {"x": x}, "BF16")
            np.testing.assert_array_equal(R.load_safetensors(p)["x"], want)

    def test_bf16_matches_torch_on_random_bit_patterns(self):
        bits = np.random.default_rng(4).integers(0, 2**32, size=200000, dtype=np.uint64).astype(np.uint32)
        x = bits.view(np.float32)
        x = x[~np.isnan(x)]  # torch picks its own NaN payload
        want = torch.from_numpy(x.copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        np.testing.assert_array_equal(float32_to_bf16_bits(x), want)

    def test_malformed_files_raise(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "bad.safetensors")
            for raw in (b"\x01\x00", struct.pack("<Q", 100) + b"{}",
                        struct.pack("<Q", 2) + b"[]",
                        struct.pack("<Q", 56) + b'{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}'):
                with open(p, "wb") as f:
                    f.write(raw)
                with self.assertRaises(ValueError):
                    R.load_safetensors(p)


class PiecesTest(unittest.TestCase):
    def test_norms_gelu_loss_against_torch(self):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(3, 5, 8, generator=g, dtype=D64)
        w, b = torch.randn(8, generator=g, dtype=D64), torch.randn(8, generator=g, dtype=D64)
        torch.testing.assert_close(R.layer_norm(x, w, b, 1e-5), F.layer_norm(x, (8,), w, b, 1e-5))
        rms = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 0.1)
        torch.testing.assert_close(R.rms_norm(x, w, 0.1, False), rms * w)
        torch.testing.assert_close(R.rms_norm(x, w, 0.1, True), rms * (1 + w))
        torch.testing.assert_close(R.gelu_tanh(x), F.gelu(x, approximate="tanh"))
        logits = torch.randn(2, 4, 9, generator=g, dtype=D64)
        t = torch.randint(0, 9, (2, 4), generator=g)
        torch.testing.assert_close(R.cross_entropy(logits, t), F.cross_entropy(logits.reshape(-1, 9), t.reshape(-1)))

    def test_rope_is_complex_rotation_of_pairs_i_and_i_plus_half(self):
        T, hd, theta = 6, 8, 10000.0
        x = torch.randn(1, 1, T, hd, dtype=D64)
        cos, sin = R.rope_tables(T, hd, theta, D64)
        got = x * cos + R.rotate_half(x) * sin
        z = torch.complex(x[..., :hd // 2], x[..., hd // 2:])
        ang = torch.arange(T, dtype=D64)[:, None] * theta ** (-2.0 * torch.arange(hd // 2, dtype=D64) / hd)
        z = z * torch.polar(torch.ones_like(ang), ang)
        torch.testing.assert_close(got, torch.cat((z.real, z.imag), -1))

    def test_attention_matches_a_plain_loop(self):
        for over in ({"num_key_value_heads": 2, "head_dim": 6},
                     {"num_key_value_heads": 1, "sliding_window": 3, "attn_logit_softcapping": 1.5,
                      "query_pre_attn_scalar": 10.0, "attention_bias": True},
                     {"qk_norm": "head", "norm_type": "rmsnorm_1p", "position_embedding": "none"},
                     {"qk_norm": "full", "num_key_value_heads": 2}):
            cfg = small(**over)
            m = R.Model(cfg, R.random_params(cfg, 3))
            c = m.cfg
            x = torch.randn(2, 7, 16, dtype=D64)
            got = m.attention(0, x)
            self.assertLess(float((got - self.loop_attention(m, x)).abs().max()), 1e-12, over)

    @staticmethod
    def loop_attention(m, x):
        c = m.cfg
        P = {k[len("layers.0.attn."):]: v.detach() for k, v in m.params.items() if k.startswith("layers.0.attn.")}
        H, KV, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        B, T, _ = x.shape

        def lin(name, v):
            y = v @ P[name + ".weight"].T
            return y + P[name + ".bias"] if name + ".bias" in P else y

        def rms(v, w):
            w = 1 + w if c["norm_type"] == "rmsnorm_1p" else w
            return v / torch.sqrt((v * v).mean() + c["norm_eps"]) * w

        out = torch.zeros(B, T, H * hd, dtype=D64)
        for b in range(B):
            for i in range(T):
                qi = lin("q_proj", x[b, i])
                if c["qk_norm"] == "full":
                    qi = rms(qi, P["q_norm.weight"])
                for h in range(H):
                    g = h // (H // KV)  # kv head shared by H/KV consecutive query heads
                    q = qi[h * hd:(h + 1) * hd]
                    if c["qk_norm"] == "head":
                        q = rms(q, P["q_norm.weight"])
                    scores, vals = [], []
                    for j in range(T):
                        win = c["sliding_window"]
                        if j > i or (win and i - j >= win):
                            continue
                        kj = lin("k_proj", x[b, j])
                        if c["qk_norm"] == "full":
                            kj = rms(kj, P["k_norm.weight"])
                        k = kj[g * hd:(g + 1) * hd]
                        if c["qk_norm"] == "head":
                            k = rms(k, P["k_norm.weight"])
                        qq = q
                        if c["position_embedding"] == "rope":
                            qq, k = rot(q, i, c["rope_theta"]), rot(k, j, c["rope_theta"])
                        s = float(qq @ k) / math.sqrt(c["query_pre_attn_scalar"] or hd)
                        cap = c["attn_logit_softcapping"]
                        scores.append(cap * math.tanh(s / cap) if cap else s)
                        vals.append(lin("v_proj", x[b, j])[g * hd:(g + 1) * hd])
                    p = torch.softmax(torch.tensor(scores, dtype=D64), 0)
                    out[b, i, h * hd:(h + 1) * hd] = sum(pj * vj for pj, vj in zip(p, vals))
        return lin("o_proj", out)


def rot(v, pos, theta):
    """RoPE on one head vector: pair (i, i + hd/2) rotated by pos * theta^(-2i/hd)."""
    hd = v.shape[0]
    out = v.clone()
    for i in range(hd // 2):
        a = pos * theta ** (-2.0 * i / hd)
        x0, x1 = v[i], v[i + hd // 2]
        out[i], out[i + hd // 2] = x0 * math.cos(a) - x1 * math.sin(a), x0 * math.sin(a) + x1 * math.cos(a)
    return out


class ModelTest(unittest.TestCase):
    def test_gpt2_like_matches_torch_nn(self):
        """A pre-LN GPT-2 block stack built from torch.nn.MultiheadAttention and F.layer_norm."""
        cfg = small(norm_type="layernorm", norm_bias=True, position_embedding="learned",
                    ffn_type="gelu", mlp_bias=True, attention_bias=True)
        params = R.random_params(cfg, 5)
        tok, tgt = tokens(cfg)
        out = R.Model(cfg, params).loss_and_grads(tok, tgt)

        P = {k: torch.tensor(v, dtype=D64, requires_grad=True) for k, v in params.items()}
        d, H, T = 16, 4, tok.shape[1]
        x = P["embed.weight"][torch.tensor(tok)] + P["pos_embed.weight"][:T]
        ln = lambda v, n: F.layer_norm(v, (d,), P[n + ".weight"], P[n + ".bias"], 1e-5)  # noqa: E731
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)  # True = may not attend
        for n in range(2):
            p = "layers.%d." % n
            mha = torch.nn.MultiheadAttention(d, H, batch_first=True, dtype=D64)
            qkv = [p + "attn.%s_proj" % s for s in "qkv"]
            del mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias
            mha.in_proj_weight = torch.cat([P[q + ".weight"] for q in qkv])
            mha.in_proj_bias = torch.cat([P[q + ".bias"] for q in qkv])
            mha.out_proj.weight, mha.out_proj.bias = P[p + "attn.o_proj.weight"], P[p + "attn.o_proj.bias"]
            h = ln(x, p + "attn_norm")
            x = x + mha(h, h, h, attn_mask=mask, need_weights=False)[0]
            h = ln(x, p + "ffn_norm")
            up = F.linear(h, P[p + "ffn.up_proj.weight"], P[p + "ffn.up_proj.bias"])
            x = x + F.linear(F.gelu(up, approximate="tanh"), P[p + "ffn.down_proj.weight"], P[p + "ffn.down_proj.bias"])
        logits = ln(x, "final_norm") @ P["embed.weight"].T
        loss = F.cross_entropy(logits.reshape(-1, 23), torch.tensor(tgt).reshape(-1))
        loss.backward()
        np.testing.assert_allclose(out["logits"], logits.detach().numpy(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(out["loss"][0], loss.item(), rtol=1e-13)
        for k, t in P.items():
            np.testing.assert_allclose(out["grads"][k], t.grad.numpy(), rtol=0, atol=1e-12, err_msg=k)

    def test_dx_matches_finite_differences(self):
        for cfg in (small(norm_placement="sandwich", qk_norm="head", ffn_type="geglu", num_key_value_heads=2),
                    small(norm_placement="deepnorm", norm_type="layernorm", norm_bias=True),
                    small(norm_placement="deepnorm", deepnorm_alpha=2.5, deepnorm_beta=0.3)):
            with self.subTest(cfg["norm_placement"]):
                self._dx_fd(cfg)

    def test_deepnorm_config(self):
        # the paper's decoder-only alpha and beta from the depth; the keys refused elsewhere
        cfg = small(norm_placement="deepnorm", num_hidden_layers=2)
        c = R.resolve_config(cfg)
        self.assertAlmostEqual(c["deepnorm_alpha"], 4.0 ** 0.25, places=12)
        self.assertAlmostEqual(c["deepnorm_beta"], 16.0 ** -0.25, places=12)
        self.assertFalse(c["final_norm"])
        for bad in (dict(norm_placement="post", deepnorm_alpha=2.0), dict(norm_placement="pre", deepnorm_beta=0.5),
                    dict(norm_placement="deepnorm", residual=False),
                    dict(norm_placement="deepnorm", scale_residual_init=True)):
            with self.assertRaises(ValueError):
                R.resolve_config(small(**bad))

    def _dx_fd(self, cfg):
        m = R.Model(cfg, R.random_params(cfg, 6))
        tok, tgt = tokens(cfg)
        out = m.loss_and_grads(tok, tgt)
        rng = np.random.default_rng(2)
        for n in range(2):
            u = torch.tensor(rng.normal(size=(2, 7, 16)))
            eps = 1e-6
            with torch.no_grad():
                lp = R.cross_entropy(m.forward(tok, {n: eps * u}), torch.tensor(tgt)).item()
                lm = R.cross_entropy(m.forward(tok, {n: -eps * u}), torch.tensor(tgt)).item()
            fd = (lp - lm) / (2 * eps)
            self.assertAlmostEqual(fd, float((out["dx"]["layers.%d" % n] * u.numpy()).sum()), delta=1e-6 * abs(fd) + 1e-9)

    def test_dx0_is_the_embedding_gradient(self):
        cfg = small(tie_word_embeddings=False, embedding_scale=True)
        out = R.Model(cfg, R.random_params(cfg, 7)).loss_and_grads(*tokens(cfg))
        tok = tokens(cfg)[0]
        want = np.zeros((23, 16))
        np.add.at(want, tok.reshape(-1), out["dx"]["layers.0"].reshape(-1, 16) * math.sqrt(16))
        np.testing.assert_allclose(out["grads"]["embed.weight"], want, atol=1e-12)

    def test_causal_and_window_semantics(self):
        cfg = small(sliding_window=3)
        params = R.random_params(cfg, 8)
        m = R.Model(cfg, params)
        tok = tokens(cfg)[0]
        later = tok.copy()
        later[:, 4:] = (later[:, 4:] + 1) % 23
        with torch.no_grad():
            a, b = m.forward(tok), m.forward(later)
        torch.testing.assert_close(a[:, :4], b[:, :4])  # nothing sees the future
        self.assertGreater(float((a[:, 4:] - b[:, 4:]).abs().max()), 1e-3)
        full = dict(cfg, sliding_window=7, layer_types=["full_attention"] * 2)
        with torch.no_grad():
            wide = R.Model(dict(cfg, sliding_window=7), params).forward(tok)
            ref = R.Model(full, params).forward(tok)
            narrow = R.Model(dict(cfg, layer_types=["sliding_attention", "full_attention"]), params).forward(tok)
        torch.testing.assert_close(wide, ref)  # a window >= T is full attention
        torch.testing.assert_close(narrow[:, :3], ref[:, :3])  # first 3 queries see < 3 keys either way
        self.assertGreater(float((narrow - ref).abs().max()), 1e-3)

    def test_tied_head_equals_untied_copy(self):
        cfg = small()
        params = R.random_params(cfg, 9)
        tok, tgt = tokens(cfg)
        tied = R.Model(cfg, params).loss_and_grads(tok, tgt)
        up = dict(params, **{"lm_head.weight": params["embed.weight"].copy()})
        untied = R.Model(dict(cfg, tie_word_embeddings=False), up).loss_and_grads(tok, tgt)
        np.testing.assert_allclose(tied["logits"], untied["logits"], atol=1e-12)
        np.testing.assert_allclose(tied["grads"]["embed.weight"],
                                   untied["grads"]["embed.weight"] + untied["grads"]["lm_head.weight"], atol=1e-12)

    def test_config_defaults_and_tensor_list(self):
        c = R.resolve_config(small(norm_placement="post", attention_bias=True))
        self.assertEqual(c["head_dim"], 4)
        self.assertFalse(c["final_norm"])
        self.assertTrue(c["attention_out_bias"])
        self.assertEqual(c["layer_types"], ["full_attention"] * 2)
        self.assertEqual(R.resolve_config(small(sliding_window=2))["layer_types"], ["sliding_attention"] * 2)
        self.assertEqual(R.resolve_config({"vocab_size": 5, "hidden_size": 8, "num_hidden_layers": 1,
                                           "num_attention_heads": 2})["intermediate_size"], 32)
        for bad in ({"num_key_value_heads": 3}, {"norm_type": "batchnorm"}, {"residual": 1},
                    {"layer_types": ["full_attention"]}, {"hidden_size": 18}):
            with self.assertRaises(ValueError):
                R.resolve_config(small(**bad))
        # GPT-2 small's well-known 124,439,808 parameters (tied head, learned positions).
        gpt2 = {"vocab_size": 50257, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                "max_position_embeddings": 1024, "norm_type": "layernorm", "norm_bias": True,
                "position_embedding": "learned", "ffn_type": "gelu", "mlp_bias": True, "attention_bias": True}
        shapes = R.param_shapes(R.resolve_config(gpt2))
        self.assertEqual(sum(int(np.prod(s)) for s in shapes.values()), 124439808)
        names = list(R.param_shapes(R.resolve_config(small(norm_placement="sandwich", qk_norm="full",
                                                           attention_bias=True, tie_word_embeddings=False))))
        self.assertEqual(names[:12], ["embed.weight", "layers.0.attn_norm.weight", "layers.0.attn_out_norm.weight",
                                      "layers.0.attn.q_proj.weight", "layers.0.attn.q_proj.bias",
                                      "layers.0.attn.k_proj.weight", "layers.0.attn.k_proj.bias",
                                      "layers.0.attn.v_proj.weight", "layers.0.attn.v_proj.bias",
                                      "layers.0.attn.o_proj.weight", "layers.0.attn.o_proj.bias",
                                      "layers.0.attn.q_norm.weight"])
        self.assertEqual(names[-3:], ["layers.1.ffn.down_proj.weight", "final_norm.weight", "lm_head.weight"])

    def test_init_statistics(self):
        cfg = {"vocab_size": 300, "hidden_size": 64, "num_hidden_layers": 8, "num_attention_heads": 4,
               "norm_type": "rmsnorm_1p", "attention_bias": True, "initializer_range": 0.05}
        p = R.init_params(cfg, 0)
        self.assertAlmostEqual(float(p["embed.weight"].std()), 0.05, delta=0.002)
        self.assertAlmostEqual(float(p["layers.0.ffn.down_proj.weight"].std()), 0.05 / 4, delta=0.0006)
        self.assertAlmostEqual(float(p["layers.0.attn.o_proj.weight"].std()), 0.05 / 4, delta=0.001)
        self.assertEqual(float(np.abs(p["layers.0.attn.q_proj.bias"]).max()), 0.0)
        self.assertEqual(float(np.abs(p["layers.3.attn_norm.weight"]).max()), 0.0)  # (1 + w) form
        self.assertEqual(float(R.init_params(small(), 0)["final_norm.weight"].min()), 1.0)
        # DyT's alpha0 by position (Zhu et al. 2025's LLaMA rule), the rest at dyt_alpha_init
        dy = R.init_params(dict(cfg, norm_type="dyt", norm_placement="sandwich", dyt_alpha_init=0.5,
                                dyt_alpha_init_attn=0.8, dyt_alpha_init_ffn=0.2), 0)
        self.assertEqual([float(dy["layers.2.%s.alpha" % n][0]) for n in
                          ("attn_norm", "attn_out_norm", "ffn_norm", "ffn_out_norm")], [0.8, 0.8, 0.2, 0.2])
        self.assertEqual(float(dy["final_norm.alpha"][0]), 0.5)
        # DeepNorm: beta = (8 * 8)^(-1/4) on v, o and the FFN; q and k at the plain std
        dn = dict(cfg, norm_type="rmsnorm", norm_placement="deepnorm")
        p = R.init_params(dn, 0)
        beta = 64.0 ** -0.25
        for name, want in (("attn.q_proj", 0.05), ("attn.k_proj", 0.05), ("attn.v_proj", 0.05 * beta),
                           ("attn.o_proj", 0.05 * beta), ("ffn.gate_proj", 0.05 * beta),
                           ("ffn.up_proj", 0.05 * beta), ("ffn.down_proj", 0.05 * beta)):
            self.assertAlmostEqual(float(p["layers.1.%s.weight" % name].std()), want, delta=want * 0.06, msg=name)


class MoETest(unittest.TestCase):
    """The mixture of experts against a plain per-row loop that computes every expert and picks by
    hand, the tie rule, and the load-balancing loss written out from Switch's formula."""

    def naive_row(self, m, c, n, u):
        """one row u [d]: scores, the choice by hand (a Python sort: ties to the lower index), the sum"""
        E, k = c["num_experts"], c["num_experts_per_tok"]
        z = m.p("layers.%d.ffn.router.weight" % n) @ u
        if c["scoring_func"] == "softmax":
            s = torch.exp(z - z.max())
            s = s / s.sum()
            choice = [float(v) for v in s]
        else:
            s = 1.0 / (1.0 + torch.exp(-z))
            b = m.p("layers.%d.ffn.router.e_score_correction_bias" % n)
            choice = [float(s[e] + b[e]) for e in range(E)]
        allowed = set(range(E))
        G = c["n_group"]
        if G > 1:
            per = E // G
            gs = [sum(sorted(choice[g * per:(g + 1) * per], reverse=True)[:2]) for g in range(G)]
            groups = sorted(range(G), key=lambda g: (-gs[g], g))[:c["topk_group"]]
            allowed = {g * per + i for g in groups for i in range(per)}
        chosen = sorted(allowed, key=lambda e: (-choice[e], e))[:k]
        w = torch.stack([s[e] for e in chosen])
        if c["norm_topk_prob"]:
            w = w / w.sum()
        w = w * c["routed_scaling_factor"]
        out = torch.zeros_like(u)
        for j, e in enumerate(chosen):
            out = out + w[j] * m.glu("layers.%d.ffn.experts.%d." % (n, e), u[None])[0]
        if c["n_shared_experts"]:
            out = out + m.glu("layers.%d.ffn.shared_experts." % n, u[None])[0]
        return out

    def check_against_loop(self, **over):
        c = small(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=6, **over)
        m = R.Model(c, R.random_params(c, 3))
        rc = m.cfg
        x = torch.as_tensor(np.random.default_rng(1).normal(size=(2, 5, 16)), dtype=D64)
        for n in rc["moe_layers"]:
            got = m.moe(n, x).reshape(-1, 16)
            want = torch.stack([self.naive_row(m, rc, n, u) for u in x.reshape(-1, 16)])
            self.assertLess(float((got - want).abs().max()), 1e-12, msg=str(over))

    def test_softmax_routing_matches_a_plain_loop(self):
        self.check_against_loop(norm_topk_prob=True, n_shared_experts=1)
        self.check_against_loop(norm_topk_prob=False)

    def test_sigmoid_group_limited_routing_matches_a_plain_loop(self):
        self.check_against_loop(scoring_func="sigmoid", n_group=4, topk_group=2, routed_scaling_factor=2.5,
                                norm_topk_prob=True, first_k_dense_replace=1)
        self.check_against_loop(scoring_func="sigmoid", ffn_type="geglu")

    def test_ties_go_to_the_lower_index(self):
        x = torch.tensor([[1.0, 3.0, 3.0, 0.0, 3.0], [2.0, 2.0, 2.0, 2.0, 2.0]], dtype=D64)
        self.assertEqual(R.topk_lower_index(x, 2).tolist(), [[1, 2], [0, 1]])
        self.assertEqual(R.topk_lower_index(x, 4).tolist(), [[1, 2, 4, 0], [0, 1, 2, 3]])
        # (torch.topk promises no order among equal values: on this CPU build it need not agree)
        rng = np.random.default_rng(0)
        ties = torch.as_tensor(rng.integers(0, 3, (200, 8)), dtype=D64)
        idx = R.topk_lower_index(ties, 3)
        for row, chosen in zip(ties.tolist(), idx.tolist()):
            self.assertEqual(chosen, sorted(range(8), key=lambda e: (-row[e], e))[:3])

    def test_dense_layers_and_tensor_list(self):
        c = R.resolve_config(small(num_hidden_layers=6, num_experts=4, num_experts_per_tok=1,
                                   first_k_dense_replace=1, decoder_sparse_step=2, mlp_only_layers=[3]))
        self.assertEqual(c["moe_layers"], [1, 5])  # (l >= 1, (l + 1) % 2 == 0, not 3)
        shapes = R.param_shapes(c)
        self.assertIn("layers.0.ffn.gate_proj.weight", shapes)
        self.assertEqual(shapes["layers.1.ffn.router.weight"], [4, 16])
        self.assertEqual(shapes["layers.5.ffn.experts.3.down_proj.weight"], [16, 24])
        self.assertNotIn("layers.1.ffn.router.e_score_correction_bias", shapes)
        for bad in (dict(num_experts_per_tok=3), dict(num_experts=4, num_experts_per_tok=1, ffn_type="gelu"),
                    dict(num_experts=4, num_experts_per_tok=1, n_group=2)):
            with self.assertRaises(ValueError, msg=str(bad)):
                R.resolve_config(small(**bad))

    def test_load_balancing_loss_is_switch_formula_and_its_gradient(self):
        c = small(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=6, norm_topk_prob=True)
        m = R.Model(c, R.random_params(c, 5))
        tok, tgt = tokens(c)
        m.forward(tok)
        aux = m.load_balancing_loss()
        z = torch.cat(m.router_logits).detach()
        p = torch.softmax(z, -1)
        counts = torch.zeros(4, dtype=D64)
        for row in torch.cat(m.router_choice).tolist():
            for e in row:
                counts[e] += 1
        want = 4 * float((counts / z.shape[0] * p.mean(0)).sum())
        self.assertAlmostEqual(float(aux), want, places=12)
        # its gradient reaches the router only, through P (the counts are constants)
        out = m.loss_and_grads(tok, tgt, router_aux_loss_coef=0.0)
        out2 = m.loss_and_grads(tok, tgt, router_aux_loss_coef=1.0)
        for name in out["grads"]:  # (the last layer's experts, after its choice, and the head see none of it)
            same = np.allclose(out["grads"][name], out2["grads"][name], rtol=0, atol=1e-14)
            if name.startswith("layers.1.ffn.experts.") or name.startswith("final_norm"):
                self.assertTrue(same, msg=name)
            if ".router." in name:
                self.assertFalse(same, msg=name)


if __name__ == "__main__":
    torch.set_num_threads(1)
    unittest.main(verbosity=1)
