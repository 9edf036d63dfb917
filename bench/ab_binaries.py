#!/usr/bin/python3
"""ab_binaries.py — an interleaved A/B of tinylm builds on one machine: nanogpt-baby training
ms/step and greedy decode tok/s of the stories15M / stories110M shapes, each round running
every binary once in turn (a shared VM's speed drifts over minutes: rounds keep the
comparison within a minute), medians and per-round ratios against the first binary.

    bench/ab_binaries.py [--rounds 5] [--what train,decode] NAME=BUILD/tinylm NAME2=OTHER/tinylm ...

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


def train_ms(binary, env):
    d = tempfile.mkdtemp()
    try:
        subprocess.run([binary, "train", "--data", os.path.join(ROOT, "data", "tinyshakespeare.txt"), "--preset",
                        "nanogpt-baby", "--steps", "60", "--sample", "0", "--out", os.path.join(d, "run")],
                       env=env, check=True, capture_output=True)
        with open(os.path.join(d, "run", "metrics.jsonl")) as f:
            rows = [json.loads(line) for line in f]
    finally:
        shutil.rmtree(d)
    tokens = 12 * 64  # nanogpt-baby: batch 12 x 64
    return statistics.median(1000.0 * tokens / r["tokens_per_s"] for r in rows if r["step"] > 10 and "val_loss" not in r)


def decode_tok_s(binary, shape, env):
    p = subprocess.run([binary, "generate", "--model", os.path.join(BENCH, shape + ".bin"), "--tokenizer", TOK,
                        "--prompt", "Once upon a time", "-n", "200", "--temperature", "0"],
                       env=env, capture_output=True, text=True, check=True)
    m = re.search(r"\(([0-9.]+) tok/s\); [0-9]+ threads", p.stderr)
    if not m:
        raise SystemExit("%s generate: no tok/s in its output:\n%s" % (binary, p.stderr))
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
    keys = (["train"] if "train" in what else []) + (list(SHAPES) if "decode" in what else [])
    if "decode" in what:
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
            for shape in SHAPES if "decode" in what else ():
                res[name][shape].append(decode_tok_s(binary, shape, env))
        print("round %d: %s" % (r + 1, "; ".join("%s %s" % (n, " ".join("%s %.2f" % (k, v[-1]) for k, v in d.items()))
                                                 for n, d in res.items())), flush=True)
    first = next(iter(bins))
    print("%-14s %s" % ("binary", "  ".join("%-28s" % (k + (" ms/step" if k == "train" else " tok/s")) for k in keys)))
    for name, d in res.items():
        cells = []
        for k in keys:
            ratios = [x / y for x, y in zip(d[k], res[first][k])]
            cells.append("%-28s" % ("%.2f (x%.2f of %s)" % (statistics.median(d[k]), statistics.median(ratios), first)))
        print("%-14s %s" % (name, "  ".join(cells)))


if __name__ == "__main__":
    main()
