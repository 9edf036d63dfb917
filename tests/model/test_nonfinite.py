#!/usr/bin/python3
"""test_nonfinite.py — a model with NaN or Inf weights is refused, naming the file, the
tensor and the flat index; --allow-nonfinite loads it with one warning per tensor.

    test_nonfinite.py --tinylm PATH --work DIR

Covers every loader (a tinylm checkpoint, a Hugging Face directory written by export, a
llama2.c .bin) through generate, logits and export: one checkpoint with a NaN in a norm
weight, one with +Inf in a matrix. Nothing is written by a refused export."""
import argparse
import json
import os
import random
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "train"))
import test_train  # noqa: E402  (its check() and run(), and the pass/fail counts they keep)

check = test_train.check


def run(*args):
    return test_train.run(list(args))


def st_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), 8 + n


def st_poke(path, name, index, value):
    """sets element `index` (flat) of F32 tensor `name` of a .safetensors file"""
    header, start = st_header(path)
    t = header[name]
    assert t["dtype"] == "F32"
    with open(path, "r+b") as f:
        f.seek(start + t["data_offsets"][0] + 4 * index)
        f.write(struct.pack("<f", value))


def poisoned_copy(src, dst, name, index, value):
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    st_poke(os.path.join(dst, "model.safetensors"), name, index, value)
    return dst


def expect_refused(T, model, file, tensor, index, value, what):
    """generate, logits and export each exit 1 naming file, tensor, index and value"""
    needles = ["'%s'" % tensor, "flat index %d" % index, value, file]
    for cmd in (["generate", "--model", model, "-n", "3", "--temperature", "0"],
                ["logits", "--model", model, "--ids", "1 2", "--out", os.path.join(os.path.dirname(model), "l.npy")],
                ["export", "--model", model, "--out", os.path.join(os.path.dirname(model), "never")]):
        if cmd[0] == "generate" and model.endswith(".bin"):
            continue  # a llama2.c .bin has no tokenizer of its own
        rc, _, err = run(T, *cmd)
        check(rc == 1 and all(n in err for n in needles), "%s: %s refused, naming %s" % (what, cmd[0], " ".join(needles)),
              "rc %d: %s" % (rc, err))
    check(not os.path.exists(os.path.join(os.path.dirname(model), "never")), "%s: the refused export wrote nothing" % what)
    rc, out, err = run(T, "--allow-nonfinite", "logits", "--model", model, "--ids", "1 2", "--out",
                       os.path.join(os.path.dirname(model), "l.npy"))
    warnings = [l for l in err.splitlines() if "warning" in l and tensor in l]
    check(rc == 0 and len(warnings) == 1 and "flat index %d" % index in warnings[0],
          "%s: --allow-nonfinite loads it with one warning for the tensor" % what, "rc %d: %s" % (rc, err))


def llama2c_bin(path, poison=None):
    """a tiny llama2.c v0 checkpoint (dim 8, hidden 16, 2 layers, 2 heads, vocab 32, seq 8);
    poison = (array name, flat index, value)"""
    dim, hidden, L, H, V, S = 8, 16, 2, 2, 32, 8
    hs = dim // H
    arrays = [("token_embedding_table", V * dim), ("rms_att_weight", L * dim), ("wq", L * dim * dim),
              ("wk", L * dim * dim), ("wv", L * dim * dim), ("wo", L * dim * dim), ("rms_ffn_weight", L * dim),
              ("w1", L * hidden * dim), ("w2", L * dim * hidden), ("w3", L * hidden * dim), ("rms_final_weight", dim),
              ("freq_cis", S * hs)]
    rnd = random.Random(5)
    out = struct.pack("<7i", dim, hidden, L, H, H, V, S)
    for name, n in arrays:
        vals = [rnd.uniform(-0.5, 0.5) for _ in range(n)]
        if poison and poison[0] == name:
            vals[poison[1]] = poison[2]
        out += struct.pack("<%df" % n, *vals)
    with open(path, "wb") as f:
        f.write(out)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tinylm", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    T, W = a.tinylm, a.work
    shutil.rmtree(W, ignore_errors=True)
    os.makedirs(W)

    # a small trained checkpoint (bytes tokenizer, synthetic text)
    data = os.path.join(W, "text.txt")
    rnd = random.Random(1)
    with open(data, "w") as f:
        f.write(" ".join(rnd.choice(["to", "be", "or", "not", "that", "is", "the", "question"]) for _ in range(3000)))
    rc, _, err = run(T, "train", "--data", data, "--preset", "lesson15", "--tokenizer", "bytes", "--steps", "2",
                     "--out", os.path.join(W, "run"), "--sample", "0", "--seq", "16")
    check(rc == 0, "a 2-step training run makes a checkpoint", err)
    if rc != 0:
        return 1
    good = os.path.realpath(os.path.join(W, "run", "latest"))
    rc, out, err = run(T, "logits", "--model", good, "--ids", "1 2", "--out", os.path.join(W, "good.npy"))
    check(rc == 0 and "warning" not in err, "the finite checkpoint loads without a warning", err)

    # tinylm checkpoints: NaN in a norm weight, +Inf in a matrix
    nan_dir = poisoned_copy(good, os.path.join(W, "nan_norm"), "layers.1.ffn_norm.weight", 5, float("nan"))
    expect_refused(T, nan_dir, os.path.join(nan_dir, "model.safetensors"), "layers.1.ffn_norm.weight", 5, "NaN",
                   "tinylm checkpoint, NaN norm weight")
    inf_dir = poisoned_copy(good, os.path.join(W, "inf_matrix"), "layers.0.attn.v_proj.weight", 70, float("inf"))
    expect_refused(T, inf_dir, os.path.join(inf_dir, "model.safetensors"), "layers.0.attn.v_proj.weight", 70, "+Inf",
                   "tinylm checkpoint, +Inf in a matrix")
    # --allow-nonfinite also lets export write it (with a warning)
    rc, _, err = run(T, "export", "--allow-nonfinite", "--model", inf_dir, "--out", os.path.join(W, "inf_export"))
    check(rc == 0 and "warning" in err, "export --allow-nonfinite writes the model, warning", err)

    # Hugging Face directory (the export of the finite model), poisoned
    hf = os.path.join(W, "hf_good")
    rc, out, err = run(T, "export", "--model", good, "--out", hf)
    check(rc == 0, "export of the finite checkpoint", err)
    if rc == 0:
        header, _ = st_header(os.path.join(hf, "model.safetensors"))
        norm = sorted(k for k in header if k.endswith("norm.weight"))[0]
        matrix = sorted(k for k in header if k.endswith("proj.weight"))[0]
        d = poisoned_copy(hf, os.path.join(W, "hf_nan"), norm, 3, float("nan"))
        expect_refused(T, d, os.path.join(d, "model.safetensors"), norm, 3, "NaN", "HF directory, NaN norm weight")
        d = poisoned_copy(hf, os.path.join(W, "hf_inf"), matrix, 100, float("inf"))
        expect_refused(T, d, os.path.join(d, "model.safetensors"), matrix, 100, "+Inf", "HF directory, +Inf in a matrix")

    # llama2.c .bin: the index is the flat index in the file's array (all layers)
    ok_bin = llama2c_bin(os.path.join(W, "ok.bin"))
    rc, _, err = run(T, "logits", "--model", ok_bin, "--ids", "1 2", "--out", os.path.join(W, "ok.npy"))
    check(rc == 0 and "warning" not in err, "a finite llama2.c .bin loads", err)
    os.makedirs(os.path.join(W, "l2c_nan"), exist_ok=True)
    os.makedirs(os.path.join(W, "l2c_inf"), exist_ok=True)
    b = llama2c_bin(os.path.join(W, "l2c_nan", "m.bin"), ("rms_ffn_weight", 11, float("nan")))
    expect_refused(T, b, b, "rms_ffn_weight", 11, "NaN", "llama2.c .bin, NaN norm weight (layer 1)")
    b = llama2c_bin(os.path.join(W, "l2c_inf", "m.bin"), ("wq", 64 + 9, float("inf")))
    expect_refused(T, b, b, "wq", 73, "+Inf", "llama2.c .bin, +Inf in wq of layer 1")

    print("%d passed, %d failed" % (test_train.passed, test_train.failed))
    return 1 if test_train.failed else 0


if __name__ == "__main__":
    sys.exit(main())
