"""make_seeds.py — writes small seed corpora for the fuzzers (stdlib only, no binaries in git).

usage: python3 fuzz/make_seeds.py OUTDIR
creates one folder per fuzz target: OUTDIR/safetensors, npy, tokenizer, config, llama2c,
llama2c_tokenizer, gguf, gguf_tokenizer, npz (OUTDIR/<name> holds the seeds of fuzz_<name>)
"""
import json
import os
import random
import struct
import sys
import io
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "tokenizer"))
import make_fuzz_seeds as tokenizer_seeds  # noqa: E402  (the fuzz_tokenizer seeds)


def safetensors(tensors, metadata=None, pad=True):
    """tensors: list of (name, dtype, shape, raw bytes)."""
    header, off, blob = {}, 0, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blob += raw
    text = json.dumps(header).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + blob


def npy(descr, shape, raw):
    shape_text = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    d = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_text)
    total = (10 + len(d) + 1 + 63) // 64 * 64
    d = d + " " * (total - 10 - len(d) - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode() + raw


def llama2c_checkpoint(dim, hidden, layers, heads, kv_heads, vocab, seq_len, shared=True, seed=0):
    """a llama2.c version-0 .bin: 7 int32 header fields, then every float32 array"""
    hs = dim // heads
    n = (vocab * dim + layers * dim + layers * dim * heads * hs + 2 * layers * dim * kv_heads * hs
         + layers * heads * hs * dim + layers * dim + 3 * layers * hidden * dim + dim + seq_len * hs
         + (0 if shared else vocab * dim))
    rnd = random.Random(seed)
    header = struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab if shared else -vocab, seq_len)
    return header + struct.pack("<%df" % n, *[rnd.uniform(-1, 1) for _ in range(n)])


def llama2c_tokenizer(pieces, max_len=None):
    """llama2.c's tokenizer.bin: int32 max_token_length, then per token float32 score, int32
    length, bytes"""
    out = struct.pack("<i", max_len if max_len is not None else max(len(p) for p, _ in pieces))
    for p, score in pieces:
        out += struct.pack("<fi", score, len(p)) + p
    return out


# ---- GGUF (ggml-org/ggml docs/gguf.md): little-endian, u64 counts and string lengths ----------
GGUF_FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q", 11: "<q", 12: "<d"}
GGUF_STRING, GGUF_ARRAY = 8, 9


def gguf_str(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gguf_value(vtype, v):
    """v of type vtype; an array is (elem_type, [values])"""
    if vtype == GGUF_STRING:
        return gguf_str(v)
    if vtype == GGUF_ARRAY:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gguf_value(et, x) for x in items)
    return struct.pack(GGUF_FMT[vtype], v)


def gguf(kvs, tensors=(), version=3, alignment=32, pad_header=True):
    """kvs: list of (key, type, value); tensors: list of (name, ggml type, ne list, raw bytes),
    placed at aligned offsets in order"""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, vtype, v in kvs:
        out += gguf_str(key) + struct.pack("<I", vtype) + gguf_value(vtype, v)
    off, blob = 0, b""
    for name, ttype, ne, raw in tensors:
        off += -off % alignment
        blob += b"\0" * (off - len(blob))
        out += gguf_str(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
        out += struct.pack("<IQ", ttype, off)
        blob += raw
        off += len(raw)
    if tensors or pad_header:
        out += b"\0" * (-len(out) % alignment)
    return out + blob


def gguf_seeds():
    f32 = struct.pack("<6f", 1.0, -2.0, 0.5, 3.0, -0.25, 8.0)
    q8_0 = struct.pack("<e", 0.5) + bytes(range(32))  # one block of 32: f16 scale + 32 int8
    q4_k = bytes(range(144))  # one block of 256
    every = [
        ("general.architecture", GGUF_STRING, "llama"),
        ("v.u8", 0, 200), ("v.i8", 1, -5), ("v.u16", 2, 65535), ("v.i16", 3, -300),
        ("v.u32", 4, 4000000000), ("v.i32", 5, -7), ("v.f32", 6, 1.5), ("v.bool", 7, 1),
        ("v.u64", 10, 2 ** 64 - 1), ("v.i64", 11, -2 ** 63), ("v.f64", 12, 1e300),
        ("v.empty", GGUF_STRING, ""),
    ]
    arrays = [("a.%d" % t, GGUF_ARRAY, (t, [1, 0, 1])) for t in (0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12)]
    arrays += [
        ("tokenizer.ggml.tokens", GGUF_ARRAY, (GGUF_STRING, ["<unk>", "", "\u2581the", "a\nb"])),
        ("a.empty", GGUF_ARRAY, (4, [])),
        ("a.nested", GGUF_ARRAY, (GGUF_ARRAY, [(4, [1, 2]), (GGUF_STRING, ["x"]), (GGUF_ARRAY, [(7, [0])])])),
    ]
    return {
        "empty": gguf([]),
        "empty_unpadded": gguf([], pad_header=False),
        "every_scalar": gguf(every),
        "every_array": gguf(arrays),
        "v2": gguf(every[:4], [("w", 0, [3, 2], f32)], version=2),
        "tensors": gguf([("general.architecture", GGUF_STRING, "llama"), ("llama.block_count", 4, 1)], [
            ("token_embd.weight", 0, [3, 2], f32),
            ("blk.0.attn_norm.weight", 1, [3], struct.pack("<3e", 1.0, -1.0, 0.5)),
            ("blk.0.attn_q.weight", 8, [32, 1], q8_0),
            ("blk.0.ffn_down.weight", 12, [256], q4_k),
            ("empty", 0, [0, 4], b""),
            ("four", 30, [1, 1, 2, 1], struct.pack("<2H", 0x3F80, 0xC000)),
        ]),
        "alignment_64": gguf([("general.alignment", 4, 64)], [("a", 0, [3], f32[:12]), ("b", 0, [1], f32[:4])],
                             alignment=64),
        "alignment_1": gguf([("general.alignment", 4, 1)], [("a", 1, [3], b"\1" * 6), ("b", 0, [1], f32[:4])],
                            alignment=1),
        "unknown_type": gguf([], [("iq", 16, [256], bytes(66)), ("f", 0, [2], f32[:8])]),
    }


def gguf_model(arch, extra=(), seed=0):
    """a whole tiny model of architecture arch that gguf_load runs (1 layer, d 8, 2 heads of 4, FFN 16,
    vocab 16, f32 weights in [-0.5, 0.5]): fuzz_gguf checks that what loads gives finite logits"""
    d, heads, hd, ff, vocab = 8, 2, 4, 16, 16
    state = [seed * 7919 + 1]

    def floats(n):
        out = []
        for _ in range(n):
            state[0] = (state[0] * 1103515245 + 12345) % (1 << 31)
            out.append(state[0] / (1 << 31) - 0.5)
        return struct.pack("<%df" % n, *out)

    def t(name, *shape):  # shape as numpy's: ne is reversed
        n = 1
        for x in shape:
            n *= x
        return (name, 0, list(reversed(shape)), floats(n))

    eps = "layer_norm_epsilon" if arch == "gpt2" else "layer_norm_rms_epsilon"
    kvs = [("general.architecture", GGUF_STRING, arch), (arch + ".block_count", 4, 1),
           (arch + ".embedding_length", 4, d), (arch + ".feed_forward_length", 4, ff),
           (arch + ".attention.head_count", 4, heads), (arch + ".context_length", 4, 8),
           (arch + ".attention." + eps, 6, 1e-5)]
    tensors = [t("token_embd.weight", vocab, d), t("output_norm.weight", d)]
    if arch == "gpt2":
        tensors += [t("position_embd.weight", 8, d), t("output_norm.bias", d)]
        layer = [t("attn_norm.weight", d), t("attn_norm.bias", d), t("attn_qkv.weight", 3 * d, d),
                 t("attn_qkv.bias", 3 * d), t("attn_output.weight", d, d), t("attn_output.bias", d),
                 t("ffn_norm.weight", d), t("ffn_norm.bias", d), t("ffn_up.weight", ff, d), t("ffn_up.bias", ff),
                 t("ffn_down.weight", d, ff), t("ffn_down.bias", d)]
    else:
        layer = [t("attn_norm.weight", d), t("attn_q.weight", heads * hd, d), t("attn_k.weight", heads * hd, d),
                 t("attn_v.weight", heads * hd, d), t("attn_output.weight", d, heads * hd), t("ffn_norm.weight", d),
                 t("ffn_gate.weight", ff, d), t("ffn_up.weight", ff, d), t("ffn_down.weight", d, ff)]
        if arch in ("gemma2", "gemma3"):
            layer += [t("post_attention_norm.weight", d), t("post_ffw_norm.weight", d)]
            kvs += [(arch + ".attention.key_length", 4, hd), (arch + ".attention.value_length", 4, hd)]
        if arch == "gemma3":
            layer += [t("attn_q_norm.weight", hd), t("attn_k_norm.weight", hd)]
        if arch == "gemma2":
            kvs += [("gemma2.attn_logit_softcapping", 6, 50.0), ("gemma2.final_logit_softcapping", 6, 30.0),
                    ("gemma2.attention.sliding_window", 4, 4)]
        if arch == "qwen2moe":  # q/k/v biases; 4 experts of 8 stacked, top 2, a shared expert of 12 and its gate
            E, fe, fs = 4, 8, 12
            layer = layer[:5] + [t("ffn_norm.weight", d), t("attn_q.bias", heads * hd), t("attn_k.bias", heads * hd),
                                 t("attn_v.bias", heads * hd), t("ffn_gate_inp.weight", E, d),
                                 t("ffn_gate_exps.weight", E, fe, d), t("ffn_up_exps.weight", E, fe, d),
                                 t("ffn_down_exps.weight", E, d, fe), t("ffn_gate_shexp.weight", fs, d),
                                 t("ffn_up_shexp.weight", fs, d), t("ffn_down_shexp.weight", d, fs),
                                 t("ffn_gate_inp_shexp.weight", d)]
            kvs += [("qwen2moe.expert_count", 4, E), ("qwen2moe.expert_used_count", 4, 2),
                    ("qwen2moe.expert_feed_forward_length", 4, fe),
                    ("qwen2moe.expert_shared_feed_forward_length", 4, fs)]
        if arch in ("qwen3moe", "llama_moe"):  # 4 experts stacked, top 2 (Qwen3-MoE: QK-norm, experts of 8;
            E, fe = 4, 8 if arch == "qwen3moe" else ff  # Mixtral as llama: experts of feed_forward_length)
            layer = layer[:6] + [t("ffn_gate_inp.weight", E, d), t("ffn_gate_exps.weight", E, fe, d),
                                 t("ffn_up_exps.weight", E, fe, d), t("ffn_down_exps.weight", E, d, fe)]
            a = "llama" if arch == "llama_moe" else arch
            if arch == "qwen3moe":
                layer += [t("attn_q_norm.weight", hd), t("attn_k_norm.weight", hd)]
                kvs += [("qwen3moe.expert_feed_forward_length", 4, fe)]
            kvs = [(k.replace(arch + ".", a + ".", 1), ty, a if k == "general.architecture" else v) for k, ty, v in kvs]
            kvs += [(a + ".expert_count", 4, E), (a + ".expert_used_count", 4, 2)]
    tensors += [(("blk.0." + name), ty, ne, raw) for name, ty, ne, raw in layer]
    keys = dict((k, (ty, v)) for k, ty, v in kvs)
    for k, ty, v in extra:
        keys[k] = (ty, v)
    return gguf([(k, ty, v) for k, (ty, v) in keys.items()], tensors)


# the float metadata keys gguf_load reads, per architecture
GGUF_FLOAT_KEYS = {
    "llama": ["attention.layer_norm_rms_epsilon", "rope.freq_base", "rope.scaling.factor"],
    "gemma2": ["attention.layer_norm_rms_epsilon", "rope.freq_base", "attn_logit_softcapping",
               "final_logit_softcapping"],
    "gemma3": ["attention.layer_norm_rms_epsilon", "rope.freq_base", "final_logit_softcapping"],
    "gpt2": ["attention.layer_norm_epsilon"],
    "qwen2moe": ["attention.layer_norm_rms_epsilon", "rope.freq_base"],
    "qwen3moe": ["attention.layer_norm_rms_epsilon", "rope.freq_base"],
}


def gguf_model_seeds():
    """a loadable model per architecture, and each of its float keys set to +Inf, -Inf (float32), a
    float64 1e39, and a huge finite soft-cap"""
    seeds = {}
    for arch, keys in GGUF_FLOAT_KEYS.items():
        seeds["model_" + arch] = gguf_model(arch)
        for k in keys:
            extra = [(arch + ".rope.scaling.type", GGUF_STRING, "linear")] if "scaling" in k else []
            for name, ty, v in (("inf", 6, float("inf")), ("minus_inf", 6, float("-inf")), ("f64_1e39", 12, 1e39)):
                seeds["model_%s_%s_%s" % (arch, k.replace(".", "_"), name)] = gguf_model(arch, extra + [(arch + "." + k, ty, v)])
    seeds["model_gemma2_caps_1e38"] = gguf_model("gemma2", [("gemma2.attn_logit_softcapping", 6, 1e38),
                                                            ("gemma2.final_logit_softcapping", 6, 1e38)])
    seeds["model_llama_moe"] = gguf_model("llama_moe")
    seeds["model_llama_linear_4"] = gguf_model("llama", [("llama.rope.scaling.type", GGUF_STRING, "linear"),
                                                         ("llama.rope.scaling.factor", 6, 4.0)])
    return seeds


def gguf_tokenizer_seeds():
    """GGUF files with tokenizer.ggml.* metadata: SentencePiece pieces (scores, every token type, byte
    pieces) and byte-level BPE (merges, each pre-tokenizer name, a control and a user token)"""
    spm_tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + \
        ["\u2581", "t", "h", "e", "th", "the", "\u2581the", "a", "\u2581a", "\u5e74", "x"]
    spm_types = [2, 3, 3] + [6] * 256 + [1] * 9 + [4, 5]
    spm = [("tokenizer.ggml.model", GGUF_STRING, "llama"),
           ("tokenizer.ggml.tokens", GGUF_ARRAY, (GGUF_STRING, spm_tokens)),
           ("tokenizer.ggml.scores", GGUF_ARRAY, (6, [float(-i) for i in range(len(spm_tokens))])),
           ("tokenizer.ggml.token_type", GGUF_ARRAY, (5, spm_types)),
           ("tokenizer.ggml.bos_token_id", 4, 1), ("tokenizer.ggml.eos_token_id", 4, 2),
           ("tokenizer.ggml.add_space_prefix", 7, 1)]
    # byte-level forms: the 94 printable ASCII bytes map to themselves, space to U+0120
    bpe_tokens = [chr(c) for c in range(33, 127)] + ["\u0120", "\u0120t", "he", "\u0120the", "12", "<|im_start|>",
                                                     "<user>"]
    bpe_types = [1] * (len(bpe_tokens) - 2) + [3, 4]
    merges = ["\u0120 t", "h e", "\u0120t he", "1 2"]
    seeds = {"spm": gguf(spm), "spm_no_prefix": gguf(spm[:-1] + [("tokenizer.ggml.add_space_prefix", 7, 0)])}
    for pre in ("gpt-2", "llama-bpe", "qwen2", "unknown-pre"):
        seeds["bpe_" + pre] = gguf([("tokenizer.ggml.model", GGUF_STRING, "gpt2"), ("tokenizer.ggml.pre", GGUF_STRING, pre),
                                    ("tokenizer.ggml.tokens", GGUF_ARRAY, (GGUF_STRING, bpe_tokens)),
                                    ("tokenizer.ggml.token_type", GGUF_ARRAY, (5, bpe_types)),
                                    ("tokenizer.ggml.merges", GGUF_ARRAY, (GGUF_STRING, merges)),
                                    ("tokenizer.ggml.add_bos_token", 7, 0)])
    return seeds


def npz_seeds():
    """.npz archives as np.savez (stored) and np.savez_compressed (deflated) write them: float32,
    float64, float16, int32, int64 members (tinylm compare's reference activations)"""
    members = {
        "tokens": npy("<i8", [4], struct.pack("<4q", 1, 5, 9, 2)),
        "hook_embed": npy("<f4", [1, 4, 2], struct.pack("<8f", *[0.5 * i for i in range(8)])),
        "blocks.0.hook_resid_post": npy("<f8", [4, 2], struct.pack("<8d", *[1.0 / (i + 1) for i in range(8)])),
        "logits": npy("<f2", [2, 3], struct.pack("<6e", 1.0, -2.0, 0.5, 3.0, -0.25, 8.0)),
        "ids32": npy("<i4", [3], struct.pack("<3i", 1, -2, 3)),
    }
    out = {}
    for label, method in (("stored", zipfile.ZIP_STORED), ("deflated", zipfile.ZIP_DEFLATED)):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", method) as z:
            for k, v in members.items():
                z.writestr(zipfile.ZipInfo(k + ".npy", date_time=(1980, 1, 1, 0, 0, 0)), v, compress_type=method)
        out[label] = buf.getvalue()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        pass
    out["empty"] = buf.getvalue()
    return out


def write_all(folder, seeds, ext):
    os.makedirs(folder, exist_ok=True)
    for name, raw in seeds.items():
        with open(os.path.join(folder, name + ext), "wb") as f:
            f.write(raw)
    return len(seeds)


# float keys of the config seeds, each given values a float32 cannot hold (1e999 is what a JSON parser
# reads as infinity; 1e39 overflows float32) and, for the soft-caps, a huge finite one
FLOAT_KEYS = {"tinylm": ["norm_eps", "rope_theta", "attn_logit_softcapping", "final_logit_softcapping",
                         "initializer_range", "query_pre_attn_scalar"],
              "llama": ["rms_norm_eps", "rope_theta"], "gpt2": ["layer_norm_epsilon"],
              "gemma2": ["attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar"]}


def float_key_configs(configs):
    out = {}
    for name, keys in FLOAT_KEYS.items():
        for k in keys:
            for tag, text in (("inf", "1e999"), ("minus_inf", "-1e999"), ("1e39", "1e39"), ("1e38", "1e38")):
                c = dict(configs[name], **{k: "@V@"})
                out["float_%s_%s_%s" % (name, k, tag)] = json.dumps(c).replace('"@V@"', text).encode()
    c = dict(configs["llama"])
    c["rope_scaling"] = dict(c["rope_scaling"], factor="@V@")
    out["float_llama_rope_scaling_factor_inf"] = json.dumps(c).replace('"@V@"', "1e999").encode()
    return out


def family_configs(tiny):
    """configs of the families and switches added since the first seeds (MLA, DeepSeek-V3's MoE, Gemma 4's
    layer types / shared K/V / MoE block, DyT's per-position alpha, Qwen3-MoE, Mixtral, OLMo 2, Gemma 3's
    layer types), shaped like the test checkpoints': a 10M-execution run of fuzz_config seeded with
    these reached about twice the edges of the seeds above alone"""
    gemma4 = {"model_type": "gemma4_text", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "max_position_embeddings": 64,
              "hidden_size_per_layer_input": 0, "rms_norm_eps": 1e-06, "hidden_activation": "gelu_pytorch_tanh",
              "enable_moe_block": False, "use_double_wide_mlp": True, "vocab_size_per_layer_input": 64,
              "num_hidden_layers": 5, "sliding_window": 4, "global_head_dim": 16, "final_logit_softcapping": 5.0,
              "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
                              "full_attention"],
              "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                                  "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.5,
                                                     "rope_theta": 10000.0}},
              "attention_k_eq_v": True, "num_global_key_value_heads": 1, "num_kv_shared_layers": 2}
    gemma4_moe = dict(gemma4, enable_moe_block=True, num_experts=6, top_k_experts=2, moe_intermediate_size=16,
                      use_double_wide_mlp=False, num_hidden_layers=3, num_kv_shared_layers=1,
                      layer_types=["sliding_attention", "full_attention", "full_attention"])
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 6, "beta_fast": 32.0,
            "beta_slow": 1.0, "mscale": 0.707, "mscale_all_dim": 1.0}
    return {
        "deepseek_v3": {"model_type": "deepseek_v3", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
                        "num_hidden_layers": 3, "num_attention_heads": 4, "max_position_embeddings": 64,
                        "q_lora_rank": 16, "kv_lora_rank": 12, "qk_nope_head_dim": 6, "qk_rope_head_dim": 4,
                        "v_head_dim": 8, "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 12,
                        "n_shared_experts": 1, "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5,
                        "first_k_dense_replace": 1, "norm_topk_prob": True, "rope_theta": 1000.0,
                        "num_nextn_predict_layers": 1, "topk_method": "noaux_tc", "scoring_func": "sigmoid",
                        "moe_layer_freq": 1, "rope_interleave": True, "hidden_act": "silu"},
        "deepseek_v3_yarn_plain_q": {"model_type": "deepseek_v3", "vocab_size": 64, "hidden_size": 32,
                                     "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4,
                                     "max_position_embeddings": 48, "q_lora_rank": None, "kv_lora_rank": 10,
                                     "qk_nope_head_dim": 4, "qk_rope_head_dim": 8, "v_head_dim": 12,
                                     "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                                     "n_shared_experts": 2, "n_group": 1, "topk_group": 1,
                                     "routed_scaling_factor": 1.5, "first_k_dense_replace": 0, "norm_topk_prob": False,
                                     "rope_theta": 100.0, "rope_interleave": False,
                                     "rope_scaling": {"type": "yarn", "factor": 4.0,
                                                      "original_max_position_embeddings": 12, "beta_fast": 32,
                                                      "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 0.8}},
        "gemma4_kv_shared": gemma4,
        "gemma4_moe": gemma4_moe,
        "gemma4_multimodal": {"model_type": "gemma4", "text_config": dict(gemma4, hidden_size_per_layer_input=4)},
        "gemma3_layer_types": {"model_type": "gemma3_text", "vocab_size": 64, "hidden_size": 32,
                               "intermediate_size": 48, "num_hidden_layers": 3, "num_attention_heads": 4,
                               "max_position_embeddings": 64, "num_key_value_heads": 1, "head_dim": 8,
                               "query_pre_attn_scalar": 8, "sliding_window": 3, "final_logit_softcapping": 4.0,
                               "layer_types": ["full_attention", "sliding_attention", "sliding_attention"],
                               "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 20000.0},
                                                   "sliding_attention": {"rope_type": "default",
                                                                         "rope_theta": 30.0}}},
        "qwen3_moe": {"model_type": "qwen3_moe", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
                      "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 64,
                      "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                      "decoder_sparse_step": 2, "mlp_only_layers": None},
        "mixtral": {"model_type": "mixtral", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 64,
                    "num_key_value_heads": 2, "num_local_experts": 4, "num_experts_per_tok": 2,
                    "rope_theta": 10000.0, "sliding_window": None, "router_jitter_noise": 0.0, "hidden_act": "silu"},
        "olmo2": {"model_type": "olmo2", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
                  "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 64,
                  "num_key_value_heads": 2, "rms_norm_eps": 1e-05, "rope_theta": 1000.0, "tie_word_embeddings": False},
        "tinylm_mla_yarn": dict(tiny, kv_lora_rank=12, q_lora_rank=16, qk_nope_head_dim=4, qk_rope_head_dim=8,
                                v_head_dim=8, rope_theta=100.0, rope_scaling=yarn),
        "tinylm_mla_moe": dict(tiny, num_hidden_layers=3, kv_lora_rank=12, q_lora_rank=16, qk_nope_head_dim=6,
                               qk_rope_head_dim=4, v_head_dim=8, rope_interleave=True, num_experts=8,
                               num_experts_per_tok=2, moe_intermediate_size=12, scoring_func="sigmoid", n_group=4,
                               topk_group=2, routed_scaling_factor=2.5, norm_topk_prob=True, n_shared_experts=1,
                               first_k_dense_replace=1, tie_word_embeddings=False),
        "qwen2_moe": {"model_type": "qwen2_moe", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
                      "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 64,
                      "num_key_value_heads": 2, "num_experts": 4, "num_experts_per_tok": 2,
                      "moe_intermediate_size": 16, "shared_expert_intermediate_size": 24, "mlp_only_layers": [0],
                      "norm_topk_prob": False, "qkv_bias": True, "use_sliding_window": False,
                      "sliding_window": 32768, "max_window_layers": 21},
        "qwen2_moe_layer_types": {"model_type": "qwen2_moe", "vocab_size": 64, "hidden_size": 32,
                                  "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4,
                                  "max_position_embeddings": 64, "num_key_value_heads": 4, "num_experts": 4,
                                  "num_experts_per_tok": 1, "moe_intermediate_size": 16,
                                  "shared_expert_intermediate_size": 16, "use_sliding_window": True,
                                  "sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"]},
        "tinylm_shared_gate": dict(tiny, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=12,
                                   n_shared_experts=1, shared_expert_intermediate_size=20, shared_expert_gate=True),
        "mistral": {"model_type": "mistral", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 64,
                    "num_key_value_heads": 2, "sliding_window": 4, "hidden_act": "silu"},
        "gemma": {"model_type": "gemma", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
                  "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 64,
                  "num_key_value_heads": 1, "head_dim": 16, "hidden_act": "gelu",
                  "hidden_activation": "gelu_pytorch_tanh"},
        "gemma3_multimodal": {"model_type": "gemma3", "mm_tokens_per_image": 256, "image_token_index": 262144,
                              "vision_config": {"model_type": "siglip_vision_model"},
                              "text_config": {"model_type": "gemma3_text", "vocab_size": 64, "hidden_size": 32,
                                              "intermediate_size": 48, "num_hidden_layers": 2,
                                              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
                                              "max_position_embeddings": 64, "sliding_window": 4}},
        "gemma4_inert_moe": dict(gemma4, enable_moe_block=False, num_experts=8, top_k_experts=2,
                                 moe_intermediate_size=16),
        "deepseek_v3_fp8": {"model_type": "deepseek_v3", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
                            "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 64,
                            "q_lora_rank": 16, "kv_lora_rank": 12, "qk_nope_head_dim": 6, "qk_rope_head_dim": 4,
                            "v_head_dim": 8, "n_routed_experts": 4, "num_experts_per_tok": 2,
                            "moe_intermediate_size": 12, "n_group": 2, "topk_group": 1, "first_k_dense_replace": 1,
                            "num_nextn_predict_layers": 1,
                            "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3",
                                                    "quant_method": "fp8", "weight_block_size": [128, 128]}},
        "llama_gptq": {"model_type": "llama", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
                       "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 64,
                       "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}},
        "tinylm_dyt_by_position": dict(tiny, norm_type="dyt", norm_placement="sandwich", dyt_alpha_init_attn=4.0,
                                       dyt_alpha_init_ffn=1.0, dyt_alpha_init_final=1.0),
        "tinylm_gemma4_moe_block": dict(tiny, num_hidden_layers=3, norm_placement="sandwich", qk_norm="head",
                                        v_norm=True, query_pre_attn_scalar=1.0, ffn_type="geglu",
                                        embedding_scale=True, final_logit_softcapping=4.0, layer_scalar=True,
                                        sliding_window=4, rope_local_base_freq=10000.0,
                                        rope_proportional_fraction=0.25,
                                        layer_types=["sliding_attention", "full_attention", "full_attention"],
                                        num_key_value_heads=2, head_dim=8, global_head_dim=16,
                                        num_global_key_value_heads=1, attention_k_eq_v=True,
                                        num_kv_shared_layers=1, hidden_size_per_layer_input=4, num_experts=6,
                                        num_experts_per_tok=2, moe_intermediate_size=8, norm_topk_prob=True,
                                        enable_moe_block=True),
    }


def more_seeds(out):
    """config, llama2c and llama2c_tokenizer seeds; the tokenizer seeds come from
    tests/tokenizer/make_fuzz_seeds.py"""
    tiny = {"model_type": "tinylm", "vocab_size": 50, "hidden_size": 32, "num_hidden_layers": 2,
            "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 16}
    configs = {
        "tinylm": tiny,
        "tinylm_switches": dict(tiny, norm_type="layernorm", norm_placement="sandwich", qk_norm="head",
                                attn_logit_softcapping=50.0, final_logit_softcapping=30.0, num_key_value_heads=2,
                                sliding_window=4, ffn_type="geglu", position_embedding="learned", residual=False),
        "llama": {"model_type": "llama", "vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 2,
                  "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 64,
                  "max_position_embeddings": 32, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
                  "tie_word_embeddings": False,
                  "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                   "high_freq_factor": 4.0, "original_max_position_embeddings": 16}},
        "gpt2": {"model_type": "gpt2", "vocab_size": 64, "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 32,
                 "layer_norm_epsilon": 1e-5},
        "gemma2": {"model_type": "gemma2", "vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 2,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 64,
                   "max_position_embeddings": 32, "sliding_window": 8, "attn_logit_softcapping": 50.0,
                   "final_logit_softcapping": 30.0, "query_pre_attn_scalar": 16},
    }
    configs.update(family_configs(tiny))
    with open(os.path.join(ROOT, "tests", "data", "llama-3.1-8b", "config.json"), "rb") as f:
        n = write_all(os.path.join(out, "config"), {"llama-3.1-8b": f.read()}, ".json")
    n += write_all(os.path.join(out, "config"), {k: json.dumps(v).encode() for k, v in configs.items()}, ".json")
    n += write_all(os.path.join(out, "config"), float_key_configs(configs), ".json")
    n += write_all(os.path.join(out, "llama2c"), {
        "tied": llama2c_checkpoint(8, 16, 1, 2, 2, 16, 4),
        "untied_gqa": llama2c_checkpoint(8, 12, 2, 2, 1, 10, 3, shared=False, seed=1),
        "one_head": llama2c_checkpoint(4, 4, 1, 1, 1, 4, 2, seed=2),
        "v1_magic": struct.pack("<I", 0x616B3432) + bytes(24),
        "truncated": llama2c_checkpoint(8, 16, 1, 2, 2, 16, 4)[:-12],
    }, ".bin")
    pieces = [(b"<unk>", 0.0), (b"\n<s>\n", 0.0), (b"\n</s>\n", 0.0)] + [(b"<0x%02X>" % b, 0.0) for b in range(4)]
    pieces += [(p, -float(i)) for i, p in enumerate([b" ", b"a", b"b", b" a", b"ab", b" ab", b"\xc3\xa9"])]
    n += write_all(os.path.join(out, "llama2c_tokenizer"), {
        "small": llama2c_tokenizer(pieces),
        "all_bytes": tokenizer_seeds.llama2c_bin(),
        "empty_piece": llama2c_tokenizer([(b"", 0.0), (b"x", 1.0)]),
        "max_len_short": llama2c_tokenizer(pieces, max_len=1),
    }, ".bin")
    tokenizer_seeds.main_to(os.path.join(out, "tokenizer"))
    return n


def main(out):
    st_dir, npy_dir = os.path.join(out, "safetensors"), os.path.join(out, "npy")
    os.makedirs(st_dir, exist_ok=True)
    os.makedirs(npy_dir, exist_ok=True)
    f32 = struct.pack("<6f", 1.0, -2.0, 0.5, 3.0, -0.25, 8.0)
    seeds = {
        "empty": safetensors([]),
        "meta_only": safetensors([], {"format": "pt"}),
        "f32": safetensors([("w", "F32", [2, 3], f32)], {"format": "pt"}),
        "mixed": safetensors([
            ("a.bf16", "BF16", [3], struct.pack("<3H", 0x3F80, 0xC000, 0x7FC0)),
            ("b.f16", "F16", [2, 2], struct.pack("<4H", 0x3C00, 0x0001, 0x7C00, 0x8400)),
            ("c.f32", "F32", [], struct.pack("<f", 7.0)),
            ("d.i64", "I64", [1], struct.pack("<q", -5)),
            ("e.u8", "U8", [0, 4], b""),
        ]),
        "unpadded": safetensors([("x", "F32", [1], struct.pack("<f", 1.0))], pad=False),
        # FP8 weights with their block scales (DeepSeek-V3's layout): E4M3 with its NaN code, E5M2 with an infinity
        "fp8": safetensors([
            ("w.weight", "F8_E4M3", [3, 4], bytes([0x00, 0x38, 0xB8, 0x7E, 0x01, 0x7F, 0x40, 0xC0, 0x08, 0x30, 0x70,
                                                   0xF0])),
            ("w.weight_scale_inv", "F32", [2, 2], struct.pack("<4f", 0.5, 2.0, 1e-3, 448.0)),
            ("v.weight", "F8_E5M2", [2, 2], bytes([0x3C, 0x7C, 0x01, 0xFE])),
            ("v.weight_scale_inv", "F32", [1, 1], struct.pack("<f", 1.0)),
        ], {"format": "pt"}),
        # stacked experts in FP8 (transformers' FP8Expert): [E, rows, cols] codes, [E, row blocks, col blocks] scales
        "fp8_stacked": safetensors([
            ("experts.gate_up_proj", "F8_E4M3", [2, 3, 2], bytes([0x38, 0xB8, 0x00, 0x7E, 0x40, 0x01, 0x30, 0x70,
                                                                   0xF0, 0x08, 0xC0, 0x7F])),
            ("experts.gate_up_proj_scale_inv", "F32", [2, 2, 1], struct.pack("<4f", 0.5, 2.0, 1e-3, 448.0)),
        ], {"format": "pt"}),
    }
    for name, raw in seeds.items():
        open(os.path.join(st_dir, name + ".safetensors"), "wb").write(raw)
    npys = {
        "f32_2x3": npy("<f4", [2, 3], f32),
        "i32_vec": npy("<i4", [3], struct.pack("<3i", 1, -2, 3)),
        "scalar": npy("<f4", [], struct.pack("<f", 2.5)),
        "empty": npy("<i4", [0, 2], b""),
    }
    for name, raw in npys.items():
        open(os.path.join(npy_dir, name + ".npy"), "wb").write(raw)
    n = more_seeds(out)
    n_gguf = write_all(os.path.join(out, "gguf"), gguf_seeds(), ".gguf")
    n_gguf += write_all(os.path.join(out, "gguf"), gguf_model_seeds(), ".gguf")
    n_gguf += write_all(os.path.join(out, "gguf_tokenizer"), gguf_tokenizer_seeds(), ".gguf")
    n += write_all(os.path.join(out, "npz"), npz_seeds(), ".npz")
    print(f"wrote {len(seeds)} safetensors, {len(npys)} npy, {n} config/llama2c and {n_gguf} gguf seeds, and the "
          f"tokenizer seeds, under {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
