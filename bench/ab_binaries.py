#!/usr/bin/python3
"""ab_binaries.py — an interleaved A/B of tinylm builds on one machine: nanogpt-baby training
ms/step and greedy decode tok/s of the stories15M / stories110M shapes, each round running
every binary once in turn (a shared VM's speed drifts over minutes: rounds keep the
comparison within a minute), medians and per-round ratios against the first binary.

    bench/ab_binaries.py [--rounds 5] [--what train,decode] NAME=BUILD/tinylm NAME2=OTHER/tinylm ...

--what also takes train_bf16 (the same run with --precision bf16), decode_bf16 (stories110M with
--dtype bf16) and prompt512 (stories110M, the prompt's tok/s over the first 1,700 bytes of
TinyShakespeare, 513 tokens with BOS).

Training: `train --preset nanogpt-baby --steps 60` on TinyShakespeare, the median step time of
steps 11..60 (from metrics.jsonl's tokens_per_s; evaluation steps left out). Decode: 200
tokens at temperature 0 after "Once upon a time" on random-weight llama2.c checkpoints of the
two shapes (bench/make_llama2c_checkpoint.py, made once under /tmp/tinylm-bench), generate's
own tok/s. Variables this workplace sets for old OpenBLAS builds are removed."""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.environ.get("TLM_BENCH_DIR", "/tmp/tinylm-bench")
TOK = os.path.join(ROOT, "tests", "data", "tokenizers", "llama2", "tokenizer.bin")
SHAPES = ("stories15M", "stories110M")


def train_ms(binary, env, precision="fp32"):
    d = tempfile.mkdtemp()
    try:
        subprocess.run([binary, "train", "--data", os.path.join(ROOT, "data", "tinyshakespeare.txt"), "--preset",
                        "nanogpt-baby", "--steps", "60", "--sample", "0", "--precision", precision,
                        "--out", os.path.join(d, "run")],
                       env=env, check=True, capture_output=True)
        with open(os.path.join(d, "run", "metrics.jsonl")) as f:
            rows = [json.loads(line) for line in f]
    finally:
        shutil.rmtree(d)
    tokens = 12 * 64  # nanogpt-baby: batch 12 x 64
    return statistics.median(1000.0 * tokens / r["tokens_per_s"] for r in rows if r["step"] > 10 and "val_loss" not in r)


def decode_tok_s(binary, shape, env, dtype="f32"):
    p = subprocess.run([binary, "generate", "--model", os.path.join(BENCH, shape + ".bin"), "--tokenizer", TOK,
                        "--prompt", "Once upon a time", "-n", "200", "--temperature", "0", "--dtype", dtype],
                       env=env, capture_output=True, text=True, check=True)
    m = re.search(r"\(([0-9.]+) tok/s\); [0-9]+ threads", p.stderr)
    if not m:
        raise SystemExit("%s generate: no tok/s in its output:\n%s" % (binary, p.stderr))
    return float(m.group(1))


def prompt_tok_s(binary, env):
    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        with open(os.path.join(ROOT, "data", "tinyshakespeare.txt"), "rb") as src:
            f.write(src.read(1700))
    try:
        p = subprocess.run([binary, "generate", "--model", os.path.join(BENCH, "stories110M.bin"), "--tokenizer", TOK,
                            "--prompt-file", f.name, "-n", "2", "--temperature", "0"],
                           env=env, capture_output=True, text=True, check=True)
    finally:
        os.unlink(f.name)
    m = re.search(r"prompt [0-9]+ tokens in [0-9.]+ ms \(([0-9.]+) tok/s\)", p.stderr)
    if not m:
        raise SystemExit("%s generate: no prompt tok/s in its output:\n%s" % (binary, p.stderr))
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--what", default="train,decode")
    ap.add_argument("binaries", nargs="+", help="NAME=PATH")
    a = ap.parse_args()
    bins = dict(b.split("=", 1) for b in a.binaries)
    what = a.what.split(",")
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    keys = ([k for k in ("train", "train_bf16") if k in what] + (list(SHAPES) if "decode" in what else []) +
            [k for k in ("decode_bf16", "prompt512") if k in what])
    if {"decode", "decode_bf16", "prompt512"} & set(what):
        os.makedirs(BENCH, exist_ok=True)
        for shape in SHAPES:
            path = os.path.join(BENCH, shape + ".bin")
            if not os.path.exists(path):
                subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench", "make_llama2c_checkpoint.py"),
                                "--shape", shape, "--out", path], check=True)
    res = {n: {k: [] for k in keys} for n in bins}
    for r in range(a.rounds):
        for name, binary in bins.items():
            if "train" in keys:
                res[name]["train"].append(train_ms(binary, env))
            if "train_bf16" in keys:
                res[name]["train_bf16"].append(train_ms(binary, env, "bf16"))
            for shape in SHAPES if "decode" in what else ():
                res[name][shape].append(decode_tok_s(binary, shape, env))
            if "decode_bf16" in keys:
                res[name]["decode_bf16"].append(decode_tok_s(binary, "stories110M", env, "bf16"))
            if "prompt512" in keys:
                res[name]["prompt512"].append(prompt_tok_s(binary, env))
        print("round %d: %s" % (r + 1, "; ".join("%s %s" % (n, " ".join("%s %.2f" % (k, v[-1]) for k, v in d.items()))
                                                 for n, d in res.items())), flush=True)
    first = next(iter(bins))
    print("%-14s %s" % ("binary", "  ".join("%-28s" % (k + (" ms/step" if k.startswith("train") else " tok/s")) for k in keys)))
    for name, d in res.items():
        cells = []
        for k in keys:
            ratios = [x / y for x, y in zip(d[k], res[first][k])]
            cells.append("%-28s" % ("%.2f (x%.2f of %s)" % (statistics.median(d[k]), statistics.median(ratios), first)))
        print("%-14s %s" % (name, "  ".join(cells)))


if __name__ == "__main__":
    main()
