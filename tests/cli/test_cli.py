#!/usr/bin/python3
"""test_cli.py — the `tinylm` program end to end: lesson 15, info, logits, and bad input.

    test_cli.py --tinylm PATH --work DIR

`logits` is compared with the PyTorch reference (tests/reference/tinylm_ref.py) on a
random checkpoint; every bad input must exit non-zero with a message naming the key or
file, without a crash (no signal) and without touching existing files."""
import json
import os
import re
import shutil
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import tinylm_ref  # noqa: E402
from harness import check, main, run  # noqa: E402


def test_lesson(tinylm, work):
    rc, out, err = run(tinylm, "lesson", "15")
    m = re.search(r"(\d+) of (\d+) numbers agree", out)
    check(rc == 0 and m and m.group(1) == m.group(2) and int(m.group(2)) >= 20,
          "lesson 15: every number agrees with the text", err or out[-300:])
    check("[0.848528, 1.131370]" in out, "lesson 15 prints RMSNorm([3,4]) = [0.848528, 1.131370]")


def test_info(tinylm, work):
    rc, out, err = run(tinylm, "info", "--config", os.path.join(ROOT, "tests/data/llama-3.1-8b/config.json"))
    check(rc == 0, "info Llama-3.1-8B config runs", err)
    check(re.search(r"65 rmsnorms hold 266,240 parameters \(0\.003%", out) is not None,
          "info Llama-3.1-8B: 65 RMSNorms hold 266,240 parameters (0.003%)", out[-400:])
    check(re.search(r"total\s+\d+\s+8,030,261,248", out) is not None, "info Llama-3.1-8B: 8,030,261,248 in all",
          out[-400:])


def tiny_config(**kw):
    c = {"model_type": "tinylm", "vocab_size": 50, "hidden_size": 32, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 64,
         "max_position_embeddings": 32}
    c.update(kw)
    return c


def test_logits(tinylm, work):
    for label, cfg in [("llama-style", tiny_config()),
                       ("gpt2-style", tiny_config(norm_type="layernorm", norm_bias=True, position_embedding="learned",
                                                  ffn_type="gelu", mlp_bias=True, attention_bias=True)),
                       ("gemma-style", tiny_config(norm_type="rmsnorm_1p", norm_placement="sandwich",
                                                   ffn_type="geglu", embedding_scale=True, attn_logit_softcapping=50.0,
                                                   final_logit_softcapping=30.0, query_pre_attn_scalar=16,
                                                   sliding_window=4, layer_types=["sliding_attention",
                                                                                  "full_attention"])),
                       ("dyt", tiny_config(norm_type="dyt", dyt_alpha_init=0.8, norm_placement="sandwich"))]:
        d = os.path.join(work, "model-" + label)
        tinylm_ref.save(d, cfg, tinylm_ref.random_params(cfg, seed=3))
        ids = [1, 5, 9, 13, 2, 7, 7, 0]
        out = os.path.join(work, "logits-%s.npy" % label)
        rc, _, err = run(tinylm, "logits", "--model", d, "--ids", " ".join(map(str, ids)), "--out", out)
        check(rc == 0, "logits %s runs" % label, err)
        if rc:
            continue
        got = np.load(out)
        ref = tinylm_ref.load(d).forward(torch.tensor([ids])).detach().numpy()[0]
        rel = float(np.abs(got - ref).max() / np.abs(ref).max())
        check(got.shape == ref.shape and rel < 1e-4, "logits %s = PyTorch reference (rel %.1e)" % (label, rel))


BAD_CONFIGS = [
    ({"model_type": "mamba"}, "model_type \"mamba\" is not supported"),
    (tiny_config(num_key_value_heads=3), "num_key_value_heads = 3 does not divide"),
    (tiny_config(hidden_size=-8), "hidden_size = -8"),
    (tiny_config(num_hidden_layers=0), "num_hidden_layers = 0"),
    (tiny_config(norm_type="batchnorm"), "\"norm_type\" = \"batchnorm\" is not one of"),
    (tiny_config(norm_placement="middle"), "\"norm_placement\" = \"middle\""),
    (tiny_config(norm_bias=True), "norm_bias = true needs norm_type \"layernorm\""),
    (tiny_config(norm_type="dyt", qk_norm="head"), "qk_norm = \"head\" with norm_type \"dyt\""),
    (tiny_config(norm_type="dyt", dyt_alpha_init=0), "dyt_alpha_init = 0 must be positive"),
    (tiny_config(layer_types=["full_attention"]), "layer_types has 1 entries but num_hidden_layers = 2"),
    (tiny_config(layer_types=["sliding_attention", "full_attention"]), "sliding_window = 0"),
    (tiny_config(hidden_size=30, num_attention_heads=4, head_dim=7), "head_dim = 7 must be even for RoPE"),
    (tiny_config(residual="yes"), "\"residual\" must be true or false"),
    (tiny_config(vocab_size=1.5), "\"vocab_size\" must be an integer"),
    (tiny_config(nrom_type="rmsnorm"), "unknown key \"nrom_type\""),
    ({"vocab_size": 10}, "\"model_type\" is missing"),
    ({"model_type": "qwen2", "num_hidden_layers": 874}, "num_hidden_layers = 874"),  # found by fuzz_config
]


def test_bad_input(tinylm, work):
    path = os.path.join(work, "bad_config.json")
    for cfg, needle in BAD_CONFIGS:
        with open(path, "w") as f:
            json.dump(cfg, f)
        rc, out, err = run(tinylm, "info", "--config", path)
        check(rc > 0 and needle in err and "bad_config.json" in err, "bad config rejected: %s" % needle, err.strip())
    with open(path, "w") as f:
        f.write("{\"model_type\": \"tinylm\", ")
    rc, _, err = run(tinylm, "info", "--config", path)
    check(rc > 0 and "not valid JSON" in err, "truncated JSON rejected", err.strip())
    rc, _, err = run(tinylm, "info", "--config", os.path.join(work, "missing.json"))
    check(rc > 0 and "missing.json" in err, "missing config file named", err.strip())

    # checkpoints that disagree with their config
    cfg = tiny_config()
    good = os.path.join(work, "model-llama-style")
    out = os.path.join(work, "keep.npy")
    with open(out, "wb") as f:
        f.write(b"precious")
    cases = []
    d = os.path.join(work, "ckpt-wrong-shape")
    shutil.rmtree(d, ignore_errors=True)
    p = tinylm_ref.random_params(cfg, seed=1)
    p["layers.0.attn.q_proj.weight"] = p["layers.0.attn.q_proj.weight"][:, :16]
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    tinylm_ref.save_safetensors(os.path.join(d, "model.safetensors"), p)
    cases.append((d, "layers.0.attn.q_proj.weight"))
    d = os.path.join(work, "ckpt-extra-tensor")
    shutil.rmtree(d, ignore_errors=True)
    p = tinylm_ref.random_params(cfg, seed=1)
    p["layers.0.attn.q_proj.bias"] = np.zeros(32)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    tinylm_ref.save_safetensors(os.path.join(d, "model.safetensors"), p)
    cases.append((d, "layers.0.attn.q_proj.bias"))
    d = os.path.join(work, "ckpt-missing-weights")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    shutil.copy(os.path.join(good, "config.json"), d)
    cases.append((d, "model.safetensors"))
    for d, needle in cases:
        rc, _, err = run(tinylm, "logits", "--model", d, "--ids", "1 2", "--out", out)
        check(rc > 0 and needle in err, "bad checkpoint %s rejected naming %s" % (os.path.basename(d), needle),
              err.strip())
    rc, _, err = run(tinylm, "logits", "--model", good, "--ids", "1 99", "--out", out)
    check(rc > 0 and "99" in err, "token id outside the vocabulary rejected", err.strip())
    rc, _, err = run(tinylm, "logits", "--model", good, "--ids", "1 x", "--out", out)
    check(rc > 0 and "--ids" in err, "non-numeric ids rejected", err.strip())
    with open(out, "rb") as f:
        check(f.read() == b"precious", "failed runs left the existing output file untouched")
    rc, _, err = run(tinylm, "logits", "--model", good, "--ids", "1 2", "--out", "/nonexistent-dir/x.npy")
    check(rc > 0 and "/nonexistent-dir/x.npy" in err, "unwritable output path named", err.strip())
    # a DyT model: no Hugging Face family has it; export writes the tinylm format and names DyT
    dyt_out = os.path.join(work, "export-dyt")
    shutil.rmtree(dyt_out, ignore_errors=True)
    rc, sout, err = run(tinylm, "export", "--model", os.path.join(work, "model-dyt"), "--out", dyt_out, "--no-tokenizer")
    check(rc == 0 and "model_type \"tinylm\"" in sout and "norm_type \"dyt\"" in sout,
          "export of a DyT model: tinylm format, the reason names norm_type dyt", (sout + err).strip())
    rc, _, err = run(tinylm, "frobnicate")
    check(rc == 2 and "unknown command" in err, "unknown command rejected", err.strip())


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main([test_lesson, test_info, test_logits, test_bad_input]))
