#!/usr/bin/python3
"""quant_vs_llamacpp.py — how close tinylm's two products of quantized weights (exact: weights
widened to f32; integer: activations rounded to 8-bit blocks, docs/gguf.md) come to llama.cpp's
own log-probabilities on the same GGUF file, position by position of one-token decoding steps.

    bench/quant_vs_llamacpp.py --model MODEL [--tokenizer TOK] [--types q8_0,q4_k,q6_k]
        [--ids "1 2 3" | --text TEXT] [-n 31] [--nlc DIR] [--work /tmp/tinylm-quant-vs-llamacpp]

For each type: tinylm exports MODEL as a GGUF file of that type; llama.cpp (node-llama-cpp's CPU
build through tests/llamacpp/llamacpp_oracle.mjs: flash attention off, f32 KV cache) decodes the
prompt greedily for n tokens and gives the full distribution at each decoding step; tinylm decodes
the same ids one at a time (build/test_quant_fidelity --dump) under each product. Printed per type
and product: the largest |log p_tinylm - log p_llama.cpp| over the tokens llama.cpp gives p >
e^-10 (as tests/llamacpp does), its median over the positions, and the mean KL(p_llama.cpp ||
p_tinylm). llama.cpp rounds activations to Q8_0 / Q8_K blocks with f16 / f32 scales of its own
rules, tinylm to its blocks (f32 scales, amax / 127), so the integer path is not llama.cpp's bits
either; this says how far each is."""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokenizer")
    ap.add_argument("--types", default="q8_0,q4_k,q6_k")
    ap.add_argument("--ids")
    ap.add_argument("--text", default="Once upon a time")
    ap.add_argument("-n", type=int, default=31)
    ap.add_argument("--nlc", default=os.path.join(ROOT, "tests", "llamacpp"))
    ap.add_argument("--tinylm", default=os.path.join(ROOT, "build", "tinylm"))
    ap.add_argument("--dumper", default=os.path.join(ROOT, "build", "test_quant_fidelity"))
    ap.add_argument("--work", default="/tmp/tinylm-quant-vs-llamacpp")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    oracle = os.path.join(ROOT, "tests", "llamacpp", "llamacpp_oracle.mjs")
    print("| type | products | max abs dlogp (p > e^-10) | median over positions | mean KL(llama.cpp, tinylm) |")
    print("| --- | --- | ---: | ---: | ---: |")
    for t in [x for x in a.types.split(",") if x]:
        g = os.path.join(a.work, "model.%s.gguf" % t)
        cmd = [a.tinylm, "export", "--model", a.model, "--format", "gguf", "--type", t, "--out", g]
        cmd += ["--tokenizer", a.tokenizer] if a.tokenizer else []
        subprocess.run(cmd, check=True, capture_output=True)
        js = os.path.join(a.work, "model.%s.json" % t)
        prompt = ["--ids", a.ids] if a.ids else ["--text", a.text]
        subprocess.run(["node", oracle, g, *prompt, "-n", str(a.n), "--positions", str(a.n + 1), "--nlc", a.nlc,
                        "--out", js], check=True, capture_output=True)
        lc = json.load(open(js))
        ids = lc["prompt"] + lc["generated"]
        pos = lc["decode"]["positions"]
        ref = np.array([[-np.inf if v is None else v for v in row] for row in lc["decode"]["logprobs"]])
        out = os.path.join(a.work, "model.%s" % t)
        subprocess.run([a.dumper, "--dump", g, " ".join(map(str, ids)), out], check=True, capture_output=True)
        for mode in ("exact", "int8"):
            V = ref.shape[1]
            lt = log_softmax(np.fromfile("%s.%s.f32" % (out, mode), dtype="<f4").reshape(-1, V))[pos]
            keep = ref > -10
            d = np.where(keep, np.abs(lt - np.where(np.isfinite(ref), ref, 0)), 0).max(-1)
            pr = np.exp(np.where(np.isfinite(ref), ref, -np.inf))
            kl = (pr * (np.where(np.isfinite(ref), ref, 0) - lt)).sum(-1)
            print("| %s | %s | %.3g | %.3g | %.2e |" % (t, "integer" if mode == "int8" else "exact", d.max(),
                                                        np.median(d), kl.mean()))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
