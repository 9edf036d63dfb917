#!/usr/bin/env python3
"""test_export.py — every export carries its tokenizer, so the exported folder runs with
`generate` as it is; `--format llama2c` writes run.c's checkpoint and reads back exactly.

For each kind of tokenizer (llama2.c .bin, the engine's chars/bytes file, a Hugging Face
tokenizer.json with its tokenizer_config.json, GPT-2's encoder.json + vocab.bpe) and each
export format (llama, gpt2, tinylm, llama2c): the export holds the tokenizer's files byte for
byte, and `generate` (greedy) on the exported folder prints the text the original prints.
Errors: a llama2.c .bin without --tokenizer, a model directory without a tokenizer, a tokenizer
larger than the model's vocabulary, a model run.c cannot compute — each refused with a message
that says so, before anything is written."""
import filecmp
import json
import os
import shutil
import struct

import numpy as np

from harness import ROOT, STORIES, TOK512, check, main, run
from safetensors_np import save_safetensors

DATA = os.path.join(ROOT, "data", "tinyshakespeare.txt")
TOKS = os.path.join(ROOT, "tests", "data", "tokenizers")


def gen(tinylm, model, *extra):
    rc, out, err = run(tinylm, "generate", "--model", model, *extra, "--prompt", "ROMEO:", "-n", "24",
                       "--temperature", "0")
    return out if rc == 0 else "ERROR " + err


def train(tinylm, work, name, preset, *sets):
    out = os.path.join(work, name)
    args = ["train", "--preset", preset, "--data", DATA, "--steps", "3", "--out", out, "--batch", "2",
            "--set", "num_hidden_layers=1"]
    for s in sets:
        args += ["--set", s]
    rc, _, err = run(tinylm, *args)
    check(rc == 0, "train %s (%s)" % (name, preset), err.strip()[-300:])
    return out


def same_files(a_dir, b_dir, names):
    return all(filecmp.cmp(os.path.join(a_dir, a), os.path.join(b_dir, b), shallow=False) for a, b in names)


def test_llama2c_stories(tinylm, work):
    ref = gen(tinylm, STORIES, "--tokenizer", TOK512)
    check(not ref.startswith("ERROR") and len(ref) > 10, "stories260K generates", ref)
    # a llama2.c checkpoint holds no tokenizer: export says so and writes nothing
    dst = os.path.join(work, "no_tok")
    rc, _, err = run(tinylm, "export", "--model", STORIES, "--out", dst)
    check(rc == 1 and "--tokenizer" in err and not os.path.exists(dst), "llama2.c .bin without --tokenizer is refused",
          err)
    # -> llama (HF) with tokenizer.bin
    hf = os.path.join(work, "stories_hf")
    rc, out, err = run(tinylm, "export", "--model", STORIES, "--tokenizer", TOK512, "--out", hf)
    check(rc == 0 and "llama2c tokenizer" in out, "export stories260K.bin --tokenizer -> llama", err)
    check(same_files(os.path.dirname(TOK512), hf, [(os.path.basename(TOK512), "tokenizer.bin")]),
          "the export holds tok512.bin byte for byte as tokenizer.bin")
    check(gen(tinylm, hf) == ref, "generate on the llama export (no --tokenizer) = generate on the .bin")
    # -> llama2.c again: the weights come back bit for bit (the RoPE tables run.c skips may
    # differ in the last bits), and the folder generates the same text
    l2c = os.path.join(work, "stories_l2c")
    rc, out, err = run(tinylm, "export", "--model", hf, "--out", l2c, "--format", "llama2c")
    check(rc == 0 and sorted(os.listdir(l2c)) == ["model.bin", "tokenizer.bin"], "export --format llama2c",
          err + str(os.listdir(l2c) if os.path.isdir(l2c) else ""))
    a = np.fromfile(STORIES, dtype=np.uint8)
    b = np.fromfile(os.path.join(l2c, "model.bin"), dtype=np.uint8)
    dim, hidden, L, H, KV, V, T = struct.unpack("<7i", a[:28].tobytes())
    hs = dim // H
    n_rope = T * hs  # freq_cis_real + freq_cis_imag
    n_before = abs(V) * dim + L * dim * 2 + L * dim * (H * hs) * 2 + L * dim * (KV * hs) * 2 + L * 3 * dim * hidden + dim
    head = 28 + 4 * n_before
    check(a.size == b.size and (a[:head] == b[:head]).all() and (a[head + 4 * n_rope:] == b[head + 4 * n_rope:]).all(),
          "model.bin = stories260K.bin: header and every weight identical", "sizes %d %d" % (a.size, b.size))
    rope_a = a[head:head + 4 * n_rope].view(np.float32)
    rope_b = b[head:head + 4 * n_rope].view(np.float32)
    check(np.abs(rope_a - rope_b).max() < 1e-5, "its RoPE tables equal llama2.c's within 1e-5",
          "max diff %.2e" % np.abs(rope_a - rope_b).max())
    check(gen(tinylm, l2c) == ref, "generate on the llama2.c export folder = generate on the .bin")
    # only an empty or absent directory takes a llama2.c export
    rc, _, err = run(tinylm, "export", "--model", hf, "--out", l2c, "--format", "llama2c")
    check(rc == 1 and "model.bin" in err, "a second llama2.c export into a full folder is refused", err)


def test_trained_runs(tinylm, work):
    # nanogpt-baby (LayerNorm, learned positions: exports as gpt2) with the chars tokenizer
    run_dir = train(tinylm, work, "run_chars", "nanogpt-baby")
    ref = gen(tinylm, run_dir)
    for fmt, args in (("gpt2", []),):
        dst = os.path.join(work, "chars_" + fmt)
        rc, out, err = run(tinylm, "export", "--model", run_dir, "--out", dst, *args)
        check(rc == 0 and '"%s"' % fmt in out and "chars tokenizer" in out, "export a chars run as " + fmt, out + err)
        check(os.path.exists(os.path.join(dst, "tinylm_tokenizer.json")), "  it holds tinylm_tokenizer.json")
        check(gen(tinylm, dst) == ref, "  generate on it = generate on the run", gen(tinylm, dst) + " vs " + ref)
    rc, _, err = run(tinylm, "export", "--model", run_dir, "--out", os.path.join(work, "chars_l2c"), "--format",
                     "llama2c")
    check(rc == 1 and "llama2.c" in err and "rmsnorm" in err and not os.path.exists(os.path.join(work, "chars_l2c")),
          "a GPT-2-shaped model is refused as llama2.c, naming why, nothing written", err)
    # llama-baby: llama, llama2c and (with QK-norm) tinylm exports
    run_dir = train(tinylm, work, "run_llama", "llama-baby")
    ref = gen(tinylm, run_dir)
    for fmt, args in (("llama", []), ("llama2c", ["--format", "llama2c"])):
        dst = os.path.join(work, "llama_" + fmt)
        rc, out, err = run(tinylm, "export", "--model", run_dir, "--out", dst, *args)
        check(rc == 0 and '"%s"' % fmt in out, "export a llama-baby run as " + fmt, out + err)
        check(gen(tinylm, dst) == ref, "  generate on it = generate on the run")
    run_dir = train(tinylm, work, "run_qk", "llama-baby", "qk_norm=head")
    ref = gen(tinylm, run_dir)
    dst = os.path.join(work, "qk_tinylm")
    rc, out, err = run(tinylm, "export", "--model", run_dir, "--out", dst)
    check(rc == 0 and '"tinylm"' in out, "export a QK-norm run (tinylm format)", out + err)
    check(gen(tinylm, dst) == ref, "  generate on it = generate on the run")
    # exporting again over the previous export (tokenizer files included) is allowed
    rc, _, err = run(tinylm, "export", "--model", run_dir, "--out", dst)
    check(rc == 0, "export again over a previous export holding its tokenizer", err)
    # rope_scaling in the tinylm format (DyT: no Hugging Face family): kept in its config.json, so the
    # logits at every position (scaled by it) are the run's own
    run_dir = train(tinylm, work, "run_dyt_scaled", "llama-baby", "norm_type=dyt",
                    'rope_scaling={"rope_type": "linear", "factor": 2.0}')
    dst = os.path.join(work, "dyt_scaled_tinylm")
    rc, out, err = run(tinylm, "export", "--model", run_dir, "--out", dst)
    check(rc == 0 and '"tinylm"' in out, "export a run with rope_scaling in the tinylm format", out + err)
    logits = []
    for d in (run_dir, dst):
        npy = d.rstrip("/") + "_logits.npy"
        rc, _, err = run(tinylm, "logits", "--model", d, "--prompt", "ROMEO: to be or not", "--out", npy)
        logits.append(open(npy, "rb").read() if rc == 0 else "ERROR " + err)
    check(logits[0] == logits[1], "  its logits at every position = the run's (rope_scaling kept)", str(logits[1])[:300])


def test_hf_tokenizers(tinylm, work):
    # a model directory whose tokenizer is tokenizer.json + tokenizer_config.json (Qwen3's) or
    # GPT-2's pair: its files go with the export unchanged. The tiny model gets a vocabulary as
    # large as the tokenizer's so they belong together.
    base = train(tinylm, work, "run_for_hf", "llama-baby")
    for name, files in (("qwen3", ["tokenizer.json", "tokenizer_config.json"]), ("gpt2", ["encoder.json", "vocab.bpe"])):
        src = os.path.join(TOKS, name)
        dst = os.path.join(work, "tok_" + name)
        # the trained model's vocabulary (65 chars) is smaller than the tokenizer's: refused
        rc, _, err = run(tinylm, "export", "--model", base, "--out", dst, "--tokenizer", src)
        check(rc == 1 and "vocab_size" in err and not os.path.exists(dst),
              "a %s tokenizer larger than the model's vocabulary is refused, nothing written" % name, err)
    # a tiny Llama directory with a vocabulary as large as the tokenizer's, holding that
    # tokenizer's files as its own: the export carries them on unchanged and generates alike
    for name, files in (("qwen3", ["tokenizer.json", "tokenizer_config.json"]), ("gpt2", ["encoder.json", "vocab.bpe"])):
        src = os.path.join(work, "llama_" + name)
        write_tiny_llama(src, 151936 if name == "qwen3" else 50257)
        for f in files:
            shutil.copy(os.path.join(TOKS, name, f), src)
        ref = gen(tinylm, src)
        dst = os.path.join(work, "tok_%s_ok" % name)
        rc, out, err = run(tinylm, "export", "--model", src, "--out", dst)
        check(rc == 0 and "tokenizer" in out, "export a model with %s's tokenizer files" % name, out + err)
        check(os.path.isdir(dst) and same_files(src, dst, [(f, f) for f in files]),
              "  %s copied byte for byte" % " + ".join(files))
        check(not ref.startswith("ERROR") and gen(tinylm, dst) == ref, "  generate on it = generate on the original",
              ref)


def write_tiny_llama(d, vocab, dim=8, ff=16):
    rng = np.random.default_rng(1)
    os.makedirs(d, exist_ok=True)
    W = {"model.embed_tokens.weight": rng.normal(0, 1, (vocab, dim)), "model.norm.weight": np.ones(dim),
         "model.layers.0.input_layernorm.weight": np.ones(dim),
         "model.layers.0.post_attention_layernorm.weight": np.ones(dim)}
    for n, shape in (("self_attn.q_proj", (dim, dim)), ("self_attn.k_proj", (dim, dim)), ("self_attn.v_proj", (dim, dim)),
                     ("self_attn.o_proj", (dim, dim)), ("mlp.gate_proj", (ff, dim)), ("mlp.up_proj", (ff, dim)),
                     ("mlp.down_proj", (dim, ff))):
        W["model.layers.0.%s.weight" % n] = rng.normal(0, 0.3, shape)
    save_safetensors(os.path.join(d, "model.safetensors"), {k: v.astype(np.float32) for k, v in W.items()})
    cfg = {"model_type": "llama", "vocab_size": vocab, "hidden_size": dim, "intermediate_size": ff,
           "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 64,
           "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": True}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)


def test_errors(tinylm, work):
    # a model directory with no tokenizer: refused unless --no-tokenizer
    base = os.path.join(work, "no_tok_model")
    rc, _, err = run(tinylm, "export", "--model", STORIES, "--tokenizer", TOK512, "--out", base)
    os.remove(os.path.join(base, "tokenizer.bin"))
    dst = os.path.join(work, "no_tok_export")
    rc, _, err = run(tinylm, "export", "--model", base, "--out", dst)
    check(rc == 1 and "no tokenizer" in err and "--no-tokenizer" in err and not os.path.exists(dst),
          "a model without a tokenizer is refused (naming --no-tokenizer), nothing written", err)
    rc, out, err = run(tinylm, "export", "--model", base, "--out", dst, "--no-tokenizer")
    check(rc == 0 and "without a tokenizer" in out and "tokenizer.bin" not in os.listdir(dst),
          "--no-tokenizer exports the weights alone", out + err)
    rc, _, err = run(tinylm, "export", "--model", base, "--out", dst + "2", "--format", "onnx")
    check(rc == 2 and "--format" in err, "an unknown --format is a usage error", err)
    rc, _, err = run(tinylm, "export", "--model", base, "--out", dst + "3", "--tokenizer", TOK512, "--no-tokenizer")
    check(rc == 2, "--tokenizer with --no-tokenizer is a usage error", err)
    rc, _, err = run(tinylm, "export", "--model", base, "--out", dst + "4", "--tokenizer", STORIES)
    check(rc == 1 and "checkpoint" in err and not os.path.exists(dst + "4"),
          "a model checkpoint given as --tokenizer is refused", err)
    # a GGUF's tokenizer lives in its metadata, which only a GGUF export can carry: refused before the
    # weights are written (it used to leave config.json + model.safetensors behind, exit 1)
    g = os.path.join(work, "with_tok.gguf")
    rc, _, err = run(tinylm, "export", "--model", STORIES, "--tokenizer", TOK512, "--format", "gguf", "--out", g)
    if check(rc == 0, "a GGUF with its tokenizer in the metadata", err):
        rc, _, err = run(tinylm, "export", "--model", g, "--out", dst + "5")
        check(rc == 1 and "GGUF file's metadata" in err and "--no-tokenizer" in err and not os.path.exists(dst + "5"),
              "a GGUF's tokenizer into a directory export is refused, nothing written", err)
        rc, out, err = run(tinylm, "export", "--model", g, "--out", dst + "6", "--no-tokenizer")
        check(rc == 0 and os.path.exists(os.path.join(dst + "6", "config.json")),
              "... and --no-tokenizer exports its weights", out + err)


def test_new_model_gguf(tinylm, work):
    """export --config: a new model streamed into a GGUF file (test_gguf_stream checks its bytes)"""
    cfg = os.path.join(work, "new_cfg.json")
    with open(cfg, "w") as f:
        json.dump({"model_type": "llama", "vocab_size": 512, "hidden_size": 256, "intermediate_size": 512,
                   "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
                   "tie_word_embeddings": False}, f)
    g = os.path.join(work, "new.gguf")
    base = ["export", "--config", cfg, "--format", "gguf", "--type", "q4_k"]
    rc, out, err = run(tinylm, *base, "--tokenizer", TOK512, "--seed", "7", "--out", g)
    check(rc == 0 and "seed 7" in out and "Q4_K" in out and "llama2c tokenizer" in out, "export --config writes",
          out + err)
    text = gen(tinylm, g)
    check(not text.startswith("ERROR"), "the new file generates with its tokenizer", text)
    with open(g, "rb") as f:
        first = f.read()
    rc, _, err = run(tinylm, *base, "--tokenizer", TOK512, "--seed", "8", "--out", g + ".8")
    with open(g + ".8", "rb") as f:
        check(rc == 0 and len(f.read()) == len(first), "another seed: a file of the same size", err)
    rc, _, err = run(tinylm, *base, "--tokenizer", TOK512, "--seed", "7", "--out", g + ".again")
    with open(g + ".again", "rb") as f:
        check(rc == 0 and f.read() == first, "the same seed: the same bytes", err)
    with open(cfg) as f:
        cfg_text = f.read()
    for args, code, what in ((["--no-tokenizer", "--out", cfg], 1, "--out onto the config: refused"),
                             (["--no-tokenizer", "--model", STORIES, "--out", g + ".x"], 2, "--config with --model"),
                             (["--out", g + ".x"], 2, "neither --tokenizer nor --no-tokenizer"),
                             (["--no-tokenizer", "--type", "keep", "--out", g + ".x"], 2, "--type keep")):
        rc, _, err = run(tinylm, *base, *args)
        check(rc == code and not os.path.exists(g + ".x"), what, err)
    with open(cfg) as f:
        check(f.read() == cfg_text, "the config is left as it was")
    rc, _, err = run(tinylm, "export", "--config", cfg, "--type", "q4_k", "--no-tokenizer", "--out", g + ".x")
    check(rc == 2 and "--format gguf" in err, "--config without --format gguf", err)
    with open(cfg, "w") as f:
        json.dump(dict(json.loads(cfg_text), attention_bias=True), f)
    rc, _, err = run(tinylm, *base, "--no-tokenizer", "--out", g + ".x")
    check(rc == 1 and "biases" in err and not os.path.exists(g + ".x"), "a config llama.cpp cannot run: refused", err)


if __name__ == "__main__":
    raise SystemExit(main([test_llama2c_stories, test_trained_runs, test_hf_tokenizers, test_errors,
                           test_new_model_gguf]))
