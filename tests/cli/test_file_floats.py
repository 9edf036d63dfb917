#!/usr/bin/env python3
"""test_file_floats.py — every float a reader takes from a file is finite as a float32 and in its
key's range (util/finite.h), or the file is refused with exit 1 naming the file and the key.

A table of readers and their float keys; each key is given, in an otherwise valid file:
  - the hostile values: +Inf, -Inf, NaN and +-1e39 (beyond float32: it would become +Inf);
    in JSON +-Inf are 1e999 / -1e999 (what a parser reads as infinity), and NaN, which has no
    JSON spelling, is written as the text NaN (refused as not JSON); in binary files (GGUF,
    llama2.c tokenizers) they are the float32 / float64 bits themselves;
  - each side of the key's range: eps in (0, 1], RoPE bases and gains > 0, soft-caps >= 0 (0:
    off), RoPE scaling factors >= 1 — the value inside accepted, the one outside refused.
Readers: config.json of the tinylm format and of every Hugging Face family (info --config),
GGUF metadata of every architecture (info --model; a file of metadata alone: a value the
metadata reader accepts fails later, on the missing tensors), GGUF and llama2.c tokenizer scores
(tokenize), a training run's trainer.json (resume), and sweep grids.

Also: a soft-cap far above the logits (final_logit_softcapping 1e38, in range) leaves the logits
as they are without a cap, where 1 - 2/(e^(2x/cap) + 1) alone made them all 0.

usage: test_file_floats.py --tinylm PATH --work DIR"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import TOK512, check, main, run  # noqa: E402

import tinylm_ref  # noqa: E402  (tests/reference, put on the path by harness)

# JSON texts of the hostile values, and what the refusal must say
HOSTILE_JSON = [("+Inf", "1e999", ["+Inf"]), ("-Inf", "-1e999", ["-Inf"]), ("NaN", "NaN", ["not valid JSON"]),
                ("1e39", "1e39", ["1e+39", "float32"]), ("-1e39", "-1e39", ["-1e+39", "float32"])]

# the edges of each range: (JSON text, accepted, what a refusal says)
EDGES = {
    "eps": [("0", False, "in (0, 1]"), ("1e-50", False, "0 as a float32"), ("1e-12", True, ""), ("1", True, ""),
            ("1.5", False, "in (0, 1]")],
    "positive": [("0", False, "must be"), ("-1", False, "must be"), ("1e-30", True, "")],
    "nonneg": [("-1", False, ">= 0"), ("0", True, ""), ("3e38", True, "")],
    "factor": [("0.5", False, ">= 1"), ("1", True, ""), ("4", True, "")],
    "any": [],
}

SMALL = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=64)
TINY = dict(SMALL, model_type="tinylm")
LLAMA = dict(SMALL, model_type="llama", num_key_value_heads=2, rms_norm_eps=1e-5, rope_theta=10000.0)
GEMMA2 = dict(SMALL, model_type="gemma2", num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=16,
              sliding_window=8, attn_logit_softcapping=50.0, final_logit_softcapping=30.0, rope_theta=10000.0)
GEMMA3 = dict(SMALL, model_type="gemma3_text", num_hidden_layers=6, num_key_value_heads=2, head_dim=16,
              query_pre_attn_scalar=16, sliding_window=8, rope_theta=1e6, rope_local_base_freq=10000.0)
GEMMA4 = dict(SMALL, model_type="gemma4_text", num_hidden_layers=6, num_key_value_heads=2, head_dim=8,
              global_head_dim=16, sliding_window=8, hidden_size_per_layer_input=0, final_logit_softcapping=30.0,
              rope_parameters={"full_attention": {"rope_type": "proportional", "rope_theta": 1e6,
                                                  "partial_rotary_factor": 0.25, "factor": 1.0},
                               "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})
DEEPSEEK = dict(SMALL, model_type="deepseek_v3", num_hidden_layers=2, q_lora_rank=None, kv_lora_rank=10,
                qk_nope_head_dim=4, qk_rope_head_dim=8, v_head_dim=12, n_routed_experts=4, num_experts_per_tok=2,
                moe_intermediate_size=16, n_shared_experts=1, n_group=1, topk_group=1, routed_scaling_factor=1.5,
                first_k_dense_replace=0, norm_topk_prob=False, rope_theta=100.0, rope_interleave=False,
                rms_norm_eps=1e-6, rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16,
                                                 "beta_fast": 32, "beta_slow": 1, "mscale": 1.0,
                                                 "mscale_all_dim": 0.8})
LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 32}
FAMILIES = {  # model_type: a small valid config.json
    "llama": LLAMA,
    "qwen2": dict(SMALL, model_type="qwen2", num_key_value_heads=1, rms_norm_eps=1e-6, rope_theta=1e6),
    "qwen3": dict(SMALL, model_type="qwen3", num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, rope_theta=1e6),
    "qwen3_moe": dict(SMALL, model_type="qwen3_moe", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                      rms_norm_eps=1e-6, rope_theta=1e6),
    "mixtral": dict(SMALL, model_type="mixtral", num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                    rms_norm_eps=1e-5, rope_theta=1e4),
    "olmo2": dict(SMALL, model_type="olmo2", num_key_value_heads=2, rms_norm_eps=1e-6, rope_theta=500000.0),
    "gemma2": GEMMA2,
    "gemma3_text": GEMMA3,
    "gemma4_text": GEMMA4,
    "deepseek_v3": DEEPSEEK,
}

# (label, base config, key path, range); a path is the keys down to the value
CONFIG_KEYS = [("tinylm", TINY, ("norm_eps",), "eps"),
               ("tinylm", TINY, ("rope_theta",), "positive"),
               ("tinylm", TINY, ("initializer_range",), "positive"),
               ("tinylm", dict(TINY, norm_type="dyt"), ("dyt_alpha_init",), "positive"),
               ("tinylm", dict(TINY, norm_type="dyt"), ("dyt_alpha_init_attn",), "nonneg"),
               ("tinylm", dict(TINY, norm_type="dyt"), ("dyt_alpha_init_ffn",), "nonneg"),
               ("tinylm", dict(TINY, norm_type="dyt"), ("dyt_alpha_init_final",), "nonneg"),
               ("tinylm", dict(TINY, norm_placement="deepnorm"), ("deepnorm_alpha",), "positive"),
               ("tinylm", dict(TINY, norm_placement="deepnorm"), ("deepnorm_beta",), "positive"),
               ("tinylm", TINY, ("rope_local_base_freq",), "nonneg"),
               ("tinylm", TINY, ("query_pre_attn_scalar",), "nonneg"),
               ("tinylm", TINY, ("attn_logit_softcapping",), "nonneg"),
               ("tinylm", TINY, ("final_logit_softcapping",), "nonneg"),
               ("tinylm", TINY, ("rope_proportional_fraction",), "any"),
               ("tinylm", dict(TINY, num_experts=4, num_experts_per_tok=2), ("routed_scaling_factor",), "positive"),
               ("tinylm", dict(TINY, rope_scaling={"rope_type": "linear", "factor": 2.0}), ("rope_scaling", "factor"),
                "factor"),
               ("gpt2", dict(model_type="gpt2", vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=16,
                             layer_norm_epsilon=1e-5), ("layer_norm_epsilon",), "eps"),
               ("gpt2", dict(model_type="gpt2", vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=16),
                ("initializer_range",), "positive"),
               ("llama linear", dict(LLAMA, rope_scaling={"type": "linear", "factor": 2.0}), ("rope_scaling", "factor"),
                "factor"),
               ("llama llama3", dict(LLAMA, rope_scaling=LLAMA3_SCALING), ("rope_scaling", "factor"), "factor"),
               ("llama llama3", dict(LLAMA, rope_scaling=LLAMA3_SCALING), ("rope_scaling", "low_freq_factor"),
                "positive"),
               ("llama llama3", dict(LLAMA, rope_scaling=LLAMA3_SCALING), ("rope_scaling", "high_freq_factor"), "any"),
               ("llama rope_parameters", dict(LLAMA, rope_parameters={"rope_type": "default", "rope_theta": 1e4}),
                ("rope_parameters", "rope_theta"), "positive"),
               ("gemma2", GEMMA2, ("query_pre_attn_scalar",), "nonneg"),
               ("gemma2", GEMMA2, ("attn_logit_softcapping",), "nonneg"),
               ("gemma2", GEMMA2, ("final_logit_softcapping",), "nonneg"),
               ("gemma3_text", GEMMA3, ("rope_local_base_freq",), "any"),
               ("gemma3_text", GEMMA3, ("final_logit_softcapping",), "nonneg"),
               ("gemma4_text", GEMMA4, ("final_logit_softcapping",), "nonneg"),
               ("gemma4_text", GEMMA4, ("rope_parameters", "full_attention", "rope_theta"), "positive"),
               ("gemma4_text", GEMMA4, ("rope_parameters", "full_attention", "factor"), "factor"),
               ("gemma4_text", GEMMA4, ("rope_parameters", "full_attention", "partial_rotary_factor"), "any"),
               ("gemma4_text", GEMMA4, ("rope_parameters", "sliding_attention", "rope_theta"), "positive"),
               ("deepseek_v3", DEEPSEEK, ("routed_scaling_factor",), "positive"),
               ("deepseek_v3", DEEPSEEK, ("rope_scaling", "factor"), "factor")]
CONFIG_KEYS += [("deepseek_v3", DEEPSEEK, ("rope_scaling", k), "any")
                for k in ("beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor")]
for mt, base in FAMILIES.items():  # the keys every family's reader shares
    if mt != "gemma4_text":  # (rope_theta lives in its rope_parameters)
        CONFIG_KEYS.append((mt, base, ("rope_theta",), "positive"))
    CONFIG_KEYS += [(mt, base, ("rms_norm_eps",), "eps"), (mt, base, ("initializer_range",), "positive")]


def test_yarn_theta_1(T, work):
    """rope_theta 1 is > 0 but YaRN divides by its log: refused (else every frequency is NaN)"""
    f = os.path.join(work, "yarn_theta_1.json")
    open(f, "w").write(json.dumps(dict(DEEPSEEK, rope_theta=1.0)))
    rc, out, err = run(T, "info", "--config", f)
    check(rc == 1 and f in err and "rope_theta = 1" in err and "yarn" in err,
          "deepseek_v3 with YaRN and rope_theta 1 refused (YaRN divides by ln(rope_theta))", err.strip())
    open(f, "w").write(json.dumps(dict(DEEPSEEK, rope_theta=1.5)))
    rc, out, err = run(T, "info", "--config", f)
    check(rc == 0, "deepseek_v3 with YaRN and rope_theta 1.5 accepted", err.strip())


def config_text(base, path, text):
    """base as JSON with the value at path replaced by the raw text"""
    cfg = json.loads(json.dumps(base))
    d = cfg
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = "@VALUE@"
    return json.dumps(cfg).replace('"@VALUE@"', text)


def test_configs(T, work):
    for label, base, path, rng in CONFIG_KEYS:
        key = path[-1]
        f = os.path.join(work, "cfg_%s_%s.json" % (label.replace(" ", "_"), "_".join(path)))
        bad, wrong = [], []
        for name, text, words in HOSTILE_JSON:
            open(f, "w").write(config_text(base, path, text))
            rc, out, err = run(T, "info", "--config", f)
            need = words + ([f] if name == "NaN" else [f, key])
            if rc != 1 or not all(w in err for w in need) or len(err.strip().splitlines()) != 1:
                bad.append("%s: rc %d %s" % (name, rc, err.strip()))
        for text, accepted, words in EDGES[rng]:
            open(f, "w").write(config_text(base, path, text))
            rc, out, err = run(T, "info", "--config", f)
            if accepted and rc != 0:
                wrong.append("%s refused: %s" % (text, err.strip()))
            if not accepted and not (rc == 1 and key in err and f in err and words in err):
                wrong.append("%s not refused naming %s, %r: rc %d %s" % (text, key, words, rc, err.strip()))
        check(not bad and not wrong,
              "config %-24s %-44s +-Inf, NaN, +-1e39 refused; range %s" % (label, ".".join(path), rng),
              "; ".join(bad + wrong))


# ---------------------------------------------------------------- GGUF

GT_U32, GT_F32, GT_STR, GT_ARR, GT_F64 = 4, 6, 8, 9, 12


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_bytes(kvs):
    """a GGUF v3 of metadata alone: (key, type, value), value packed as the type says (arrays:
    (element type, [values]))"""
    out = [b"GGUF", struct.pack("<IQQ", 3, 0, len(kvs))]
    for k, t, v in kvs:
        out.append(gstr(k) + struct.pack("<I", t))
        if t == GT_ARR:
            et, vals = v
            out.append(struct.pack("<IQ", et, len(vals)))
            for x in vals:
                out.append(gstr(x) if et == GT_STR else struct.pack("<f", x) if et == GT_F32
                           else struct.pack("<d", x) if et == GT_F64 else struct.pack("<i", x))
        else:
            out.append(gstr(v) if t == GT_STR else struct.pack("<I", v) if t == GT_U32
                       else struct.pack("<f", v) if t == GT_F32 else struct.pack("<d", v))
    return b"".join(out)


def gguf_meta(arch, extra):
    base = [("general.architecture", GT_STR, arch), (arch + ".block_count", GT_U32, 2),
            (arch + ".embedding_length", GT_U32, 32), (arch + ".feed_forward_length", GT_U32, 48),
            (arch + ".attention.head_count", GT_U32, 4), (arch + ".context_length", GT_U32, 64)]
    eps = ".attention.layer_norm_epsilon" if arch == "gpt2" else ".attention.layer_norm_rms_epsilon"
    keys = dict((k, (t, v)) for k, t, v in base)
    keys[arch + eps] = (GT_F32, 1e-5)
    for k, t, v in extra:
        keys[k] = (t, v)
    return [(k, t, v) for k, (t, v) in keys.items()]


INF, NAN = float("inf"), float("nan")
HOSTILE_BITS = [("+Inf", GT_F32, INF, "+Inf"), ("-Inf", GT_F32, -INF, "-Inf"), ("NaN", GT_F32, NAN, "NaN"),
                ("float64 NaN", GT_F64, NAN, "NaN"), ("float64 1e39", GT_F64, 1e39, "1e+39")]
GGUF_EDGES = {"eps": [(0.0, False, "in (0, 1]"), (2.0, False, "in (0, 1]"), (1.0, True, "")],
              "positive": [(0.0, False, "> 0"), (-5.0, False, "> 0"), (1e-3, True, "")],
              "nonneg": [(-1.0, False, ">= 0"), (0.0, True, ""), (1e38, True, "")],
              "factor": [(0.5, False, ">= 1"), (1.0, True, ""), (8.0, True, "")]}
ARCHS = ["llama", "qwen2", "qwen3", "gemma2", "gemma3", "olmo2", "gpt2"]


def gguf_keys():
    rows = []
    for a in ARCHS:
        rows.append((a, a + (".attention.layer_norm_epsilon" if a == "gpt2" else ".attention.layer_norm_rms_epsilon"),
                     [], "eps"))
        if a != "gpt2":
            rows.append((a, a + ".rope.freq_base", [], "positive"))
            rows.append((a, a + ".rope.scaling.factor", [(a + ".rope.scaling.type", GT_STR, "linear")], "factor"))
    for a in ("qwen2moe", "qwen3moe"):  # (with the experts' keys they require)
        moe = [(a + ".expert_count", GT_U32, 4), (a + ".expert_used_count", GT_U32, 2),
               (a + ".expert_feed_forward_length", GT_U32, 8)]
        rows += [(a, a + ".attention.layer_norm_rms_epsilon", moe, "eps"), (a, a + ".rope.freq_base", moe, "positive")]
    rows += [("gemma2", "gemma2.attn_logit_softcapping", [], "nonneg"),
             ("gemma2", "gemma2.final_logit_softcapping", [], "nonneg"),
             ("gemma3", "gemma3.final_logit_softcapping", [], "nonneg")]
    return rows


def test_gguf(T, work):
    for i, (arch, key, extra, rng) in enumerate(gguf_keys()):
        f = os.path.join(work, "meta%02d.gguf" % i)
        bad, wrong = [], []
        for name, t, v, word in HOSTILE_BITS:
            open(f, "wb").write(gguf_bytes(gguf_meta(arch, extra + [(key, t, v)])))
            rc, out, err = run(T, "info", "--model", f)
            if rc != 1 or not all(w in err for w in (f, '"%s"' % key, word)):
                bad.append("%s: rc %d %s" % (name, rc, err.strip()))
        for v, accepted, words in GGUF_EDGES[rng]:
            open(f, "wb").write(gguf_bytes(gguf_meta(arch, extra + [(key, GT_F32, v)])))
            rc, out, err = run(T, "info", "--model", f)
            # (metadata alone: an accepted value fails later, on the tensors, without naming the key)
            if accepted and (rc == 0 or key in err or "tensor" not in err):
                wrong.append("%g: %s" % (v, err.strip()))
            if not accepted and not (rc == 1 and key in err and words in err):
                wrong.append("%g not refused naming %s, %r: %s" % (v, key, words, err.strip()))
        check(not bad and not wrong, "GGUF %-6s %-42s +-Inf, NaN, float64 NaN / 1e39 refused; range %s"
              % (arch, key, rng), "; ".join(bad + wrong))


# ---------------------------------------------------------------- tokenizer scores

def spm_gguf(scores_type, scores):
    pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + ["\u2581", "\u2581a", "b"]
    types = [2, 3, 3] + [6] * 256 + [1, 1, 1]
    sc = [0.0] * (len(pieces) - len(scores)) + scores
    return gguf_bytes([("general.architecture", GT_STR, "llama"), ("tokenizer.ggml.model", GT_STR, "llama"),
                       ("tokenizer.ggml.tokens", GT_ARR, (GT_STR, pieces)),
                       ("tokenizer.ggml.scores", GT_ARR, (scores_type, sc)),
                       ("tokenizer.ggml.token_type", GT_ARR, (5, types))])


def llama2c_tokenizer(score_of_300=None):
    """data/tok512.bin, token 300's score replaced"""
    raw = bytearray(open(TOK512, "rb").read())
    off = 4
    for i in range(300):
        off += 8 + struct.unpack_from("<i", raw, off + 4)[0]
    if score_of_300 is not None:
        struct.pack_into("<f", raw, off, score_of_300)
    return bytes(raw)


def test_tokenizer_scores(T, work):
    good = os.path.join(work, "tok_good.gguf")
    open(good, "wb").write(spm_gguf(GT_F32, [-1.0, -2.0]))
    rc, out, err = run(T, "tokenize", "--tokenizer", good, "--text", "ab")
    check(rc == 0, "GGUF tokenizer with finite scores loads", err.strip())
    for name, t, v, word in [("NaN", GT_F32, NAN, "NaN"), ("+Inf", GT_F32, INF, "+Inf"),
                             ("-Inf", GT_F32, -INF, "-Inf"), ("float64 1e39", GT_F64, 1e39, "float32")]:
        f = os.path.join(work, "tok_%s.gguf" % name.replace(" ", "_"))
        open(f, "wb").write(spm_gguf(t, [v, -2.0]))
        n = 260  # the index of the first of the two scored pieces
        rc, out, err = run(T, "tokenize", "--tokenizer", f, "--text", "ab")
        check(rc == 1 and f in err and "tokenizer.ggml.scores[%d]" % n in err and word in err,
              "GGUF tokenizer score %s refused naming tokenizer.ggml.scores[%d]" % (name, n), err.strip())
    good = os.path.join(work, "tok_good.bin")
    open(good, "wb").write(llama2c_tokenizer())
    rc, out, err = run(T, "tokenize", "--tokenizer", good, "--text", "Once upon a time")
    check(rc == 0, "llama2.c tokenizer with finite scores loads", err.strip())
    for name, v, word in [("NaN", NAN, "NaN"), ("+Inf", INF, "+Inf"), ("-Inf", -INF, "-Inf")]:
        f = os.path.join(work, "tok_%s.bin" % name)
        open(f, "wb").write(llama2c_tokenizer(v))
        rc, out, err = run(T, "tokenize", "--tokenizer", f, "--text", "Once upon a time")
        check(rc == 1 and f in err and "score of token 300" in err and word in err,
              "llama2.c tokenizer score %s refused naming the token" % name, err.strip())


# ---------------------------------------------------------------- a run's trainer.json, sweep grids

def test_trainer_state(T, work):
    out = os.path.join(work, "run")
    rc, so, err = run(T, "train", "--data", TINY_TEXT, "--preset", "nanogpt-baby", "--set", "hidden_size=16", "--set", "num_hidden_layers=1",
                      "--set", "num_attention_heads=2", "--set", "intermediate_size=32", "--steps", "2",
                      "--batch", "2", "--seq", "16", "--save-every", "2", "--eval-every", "100", "--sample", "0",
                      "--out", out)
    state = os.path.join(out, "latest", "trainer.json")
    if not check(rc == 0 and os.path.exists(state), "a 2-step run to resume", err.strip()[-300:]):
        return
    text = open(state).read()
    for key in ("lr", "beta2", "z_loss"):
        j = json.loads(text)
        if key not in j["options"]:
            check(False, "trainer.json holds options.%s" % key, str(j["options"]))
            continue
        for name, val, word in [("+Inf", "1e999", "+Inf"), ("1e39", "1e39", "float32")]:
            j["options"][key] = "@VALUE@"
            open(state, "w").write(json.dumps(j).replace('"@VALUE@"', val))
            rc, so, err = run(T, "train", "--resume", out, "--data", TINY_TEXT, "--steps", "3")
            check(rc == 1 and "trainer.json" in err and '"%s"' % key in err and word in err,
                  "resume: trainer.json options.%s = %s refused naming the file and the key" % (key, name),
                  err.strip()[-300:])
    open(state, "w").write(text)
    # the optimizer's moments
    opt = os.path.join(out, "latest", "optimizer.safetensors")
    raw = open(opt, "rb").read()
    n = struct.unpack_from("<Q", raw)[0]
    header = json.loads(raw[8:8 + n])
    for tensor, value, word in [("adam.m", float("nan"), "NaN"), ("adam.v", float("inf"), "+Inf"),
                                ("adam.v", -1.0, ">= 0")]:
        poked = bytearray(raw)
        struct.pack_into("<f", poked, 8 + n + header[tensor]["data_offsets"][0] + 4 * 3, value)
        open(opt, "wb").write(bytes(poked))
        rc, so, err = run(T, "train", "--resume", out, "--data", TINY_TEXT, "--steps", "3")
        check(rc == 1 and "optimizer.safetensors" in err and "'%s'" % tensor in err and "index 3" in err
              and word in err, "resume: optimizer.safetensors %s[3] = %g refused naming the tensor" % (tensor, value),
              err.strip()[-300:])
    open(opt, "wb").write(raw)
    rc, so, err = run(T, "train", "--resume", out, "--data", TINY_TEXT, "--steps", "3")
    check(rc == 0, "resume from the restored files", err.strip()[-300:])


def test_sweep_grid(T, work):
    data = os.path.join(work, "sweep.txt")
    open(data, "w").write(TINY_TEXT_BODY)
    for label, text, words in [
            ("an axis value 1e39", '{"axes": {"lr": [1e39]}}', ['"axes.lr[0]"', "float32"]),
            ("a train value +Inf", '{"train": {"warmup": 1e999}, "axes": {"lr": [0.001]}}', ['"train.warmup"', "+Inf"]),
            ("a set value -Inf", '{"set": {"rope_theta": -1e999}, "axes": {"lr": [0.001]}}',
             ['"set.rope_theta"', "-Inf"]),
            ("a repeated axis", '{"axes": {"lr": [0.001], "lr": [0.002]}}', ['"lr"', '"axes"', "twice"]),
            ("a repeated preset", '{"preset": "nanogpt-baby", "preset": "llama-baby", "axes": {"lr": [0.001]}}',
             ['"preset"', "twice"]),
            ("a repeated set key", '{"set": {"hidden_size": 32, "hidden_size": 48}, "axes": {"lr": [0.001]}}',
             ['"hidden_size"', '"set"', "twice"]),
            ("a repeated key two levels down",
             '{"set": {"rope_scaling": {"rope_type": "linear", "factor": 2, "factor": 3}}, "axes": {"lr": [0.001]}}',
             ['"factor"', '"set.rope_scaling"', "twice"])]:
        grid = os.path.join(work, "grid.json")
        open(grid, "w").write(text)
        out = os.path.join(work, "sweep_out")
        rc, so, err = run(T, "sweep", "--grid", grid, "--data", data, "--out", out)
        check(rc == 1 and grid in err and all(w in err for w in words) and not os.path.exists(out),
              "sweep: %s refused naming the grid and the key, nothing made" % label, err.strip())


TINY_TEXT_BODY = "Once upon a time there was a little dog. It liked to run in the park with its friends.\n" * 200
TINY_TEXT = None


# ---------------------------------------------------------------- a huge soft-cap

def test_huge_softcap(T, work):
    """final_logit_softcapping 1e38 (and 3e38, near float32's largest) computes the uncapped logits"""
    base = dict(TINY, vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                intermediate_size=48, max_position_embeddings=64, tie_word_embeddings=True)
    params = tinylm_ref.random_params(base, 5)
    got = {}
    for cap in (None, 1e38, 3e38):
        cfg = dict(base, final_logit_softcapping=cap, attn_logit_softcapping=cap)
        d = os.path.join(work, "cap_%s" % cap)
        tinylm_ref.save(d, cfg, params)
        out = os.path.join(work, "cap_%s.npy" % cap)
        rc, so, err = run(T, "logits", "--model", d, "--ids", "1,2,3,4,5", "--out", out)
        got[cap] = np.load(out) if rc == 0 else None
        check(rc == 0, "logits with soft-caps %s" % cap, err.strip())
    if got[None] is None:
        return
    for cap in (1e38, 3e38):
        if got[cap] is None:
            continue
        rel = float(np.abs(got[cap] - got[None]).max() / np.abs(got[None]).max())
        check(rel < 1e-6 and np.abs(got[cap]).max() > 0.1,
              "soft-caps %g: the uncapped logits (max rel diff %.1e), not zeros" % (cap, rel),
              "max |logit| %g" % np.abs(got[cap]).max())


def prepare(T, work):
    global TINY_TEXT
    TINY_TEXT = os.path.join(work, "tiny.txt")
    open(TINY_TEXT, "w").write(TINY_TEXT_BODY)


if __name__ == "__main__":
    sys.exit(main([prepare, test_configs, test_yarn_theta_1, test_gguf, test_tokenizer_scores, test_huge_softcap, test_sweep_grid,
                   test_trainer_state]))
