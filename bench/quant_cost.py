#!/usr/bin/python3
"""quant_cost.py — what quantizing a model's matrices costs: for each GGUF type, the KL divergence
of the quantized model's next-token distribution from the f32 model's, the top-1 agreement, the
perplexity on held-out text, and per layer where in the residual stream the error enters.

    bench/quant_cost.py [--tinylm build/tinylm] [--work /tmp/tinylm-quant-cost]
        [--types q8_0,q6_k,q4_k,q4_0] [--model LABEL=PATH[:TOKENIZER][@TEXT] ...] [--tokens 4096]

Each model is exported by tinylm itself (`export --format gguf --type T`; f32 as the reference)
and every export is run by tinylm through the Python API on the same token windows (the model's
context length each, the last window dropped if short). Metrics, over every predicted position:
  KL        mean over positions of KL(p_f32 || p_q) in nats, and its 99th percentile
  top-1     share of positions where both models' most likely token is the same
  ppl       exp(mean cross-entropy of the held-out next tokens), f32 first
  per layer ||resid_post(q) - resid_post(f32)|| / ||resid_post(f32)|| (mean over positions) of each
            block, and the same at the final norm's output: where the error enters and grows.
Types the export cannot give a matrix (rows that are not whole blocks: a K type needs rows that
are multiples of 256) fall back as docs/gguf.md says; the table names what the file really holds.

Default models: stories260K (llama2.c, d 64: no K-type block fits its rows, so q4_k/q6_k fall back)
on text it did not train on, and, when given with --model, runs tinylm trains on TinyShakespeare,
scored on the last 10% of the text (the validation split train holds out)."""
import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[-600:]))
    return p.stdout, p.stderr


def stored_types(tinylm, path):
    out, _ = run([tinylm, "info", "--model", path])
    m = re.search(r"weights as the file stores\s+(\d+) bytes.*\(matrices ([^,]+), ([\d.]+) bits per weight", out)
    return (m.group(2), float(m.group(3)), int(m.group(1))) if m else ("?", 0.0, 0)


def log_softmax(z):
    z = z.astype(np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def measure(model, windows, names):
    """(log-probabilities [W, T, V], {name: [W, T, d]}) over the windows"""
    lps, acts = [], {n: [] for n in names}
    for ids in windows:
        logits, cache = model.run_with_cache(ids, names=names)
        lps.append(log_softmax(logits))
        for n in names:
            acts[n].append(cache[n].astype(np.float64))
    return np.stack(lps), {n: np.stack(v) for n, v in acts.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tinylm", default=os.path.join(ROOT, "build", "tinylm"))
    ap.add_argument("--work", default="/tmp/tinylm-quant-cost")
    ap.add_argument("--types", default="q8_0,q6_k,q4_k,q4_0")
    ap.add_argument("--model", action="append", default=[],
                    help="LABEL=PATH[:TOKENIZER][@TEXT]: a model tinylm loads, the text to score (default: "
                         "the last 10%% of data/tinyshakespeare.txt)")
    ap.add_argument("--tokens", type=int, default=4096, help="held-out tokens scored per model (at most)")
    ap.add_argument("--json", help="write the measurements here too")
    a = ap.parse_args()
    import tinylm

    tinylm_bin = os.path.abspath(a.tinylm)
    os.makedirs(a.work, exist_ok=True)
    shakespeare = os.path.join(ROOT, "data", "tinyshakespeare.txt")
    # stories260K's held-out text: TinyStories-like sentences it was not trained on (written for
    # this measurement: the repository holds no TinyStories text)
    stories_text = os.path.join(a.work, "stories_heldout.txt")
    with open(stories_text, "w") as f:
        f.write(STORIES_TEXT)
    models = [("stories260K", os.path.join(ROOT, "data", "stories260K.bin"), os.path.join(ROOT, "data", "tok512.bin"),
               stories_text)]
    for spec in a.model:
        label, rest = spec.split("=", 1)
        text = None
        if "@" in rest:
            rest, text = rest.rsplit("@", 1)
        path, tok = (rest.split(":", 1) + [None])[:2]
        models.append((label, path, tok, text))

    types = [t for t in a.types.split(",") if t]
    results = []
    for label, path, tok, text in models:
        base = [tinylm_bin, "export", "--model", path, "--format", "gguf"] + (["--tokenizer", tok] if tok else [])
        files = {}
        for t in ["f32"] + types:
            out = os.path.join(a.work, "%s.%s.gguf" % (label, t))
            run(base + ["--type", t, "--out", out + ".tmp"])
            os.replace(out + ".tmp", out)
            files[t] = out
        ref = tinylm.load(files["f32"])
        text_path = text or shakespeare
        raw = open(text_path, encoding="utf-8").read()
        if text is None:  # (the split `tinylm train` holds out: the last 10%)
            raw = raw[int(len(raw) * 0.9):]
        src = tinylm.load(path, tokenizer=tok) if tok else tinylm.load(path)
        ids = src.tokenize(raw, bos=False)
        bos = [src.bos] if src.bos is not None and src.bos >= 0 else []
        src.close()
        ctx = min(int(ref.config["max_position_embeddings"]), 256)
        span = ctx - len(bos)
        ids = ids[:a.tokens]
        windows = [bos + list(ids[i:i + span]) for i in range(0, len(ids) - span + 1, span)]
        if not windows:
            sys.exit("%s: %s holds fewer than %d tokens" % (label, text_path, span))
        n_layers = int(ref.config["num_hidden_layers"])
        names = ["hook_embed"] + ["blocks.%d.hook_resid_post" % l for l in range(n_layers)] + ["ln_final.hook_normalized"]
        lp_ref, act_ref = measure(ref, windows, names)
        targets = np.array([w[1:] for w in windows])
        n_pred = targets.size

        def ppl(lp):
            picked = np.take_along_axis(lp[:, :-1, :], targets[..., None], axis=-1)[..., 0]
            return float(np.exp(-picked.mean()))

        row_ref = {"model": label, "type": "f32", "stored": stored_types(tinylm_bin, files["f32"]), "ppl": ppl(lp_ref),
                   "positions": n_pred}
        results.append(row_ref)
        for t in types:
            q = tinylm.load(files[t])
            lp, act = measure(q, windows, names)
            q.close()
            kl = (np.exp(lp_ref) * (lp_ref - lp)).sum(axis=-1)  # [W, T]
            top1 = float((lp_ref.argmax(-1) == lp.argmax(-1)).mean())
            layers = []
            for n in names:
                d = np.linalg.norm(act[n] - act_ref[n], axis=-1) / np.maximum(np.linalg.norm(act_ref[n], axis=-1), 1e-30)
                layers.append(float(d.mean()))
            results.append({"model": label, "type": t, "stored": stored_types(tinylm_bin, files[t]), "ppl": ppl(lp),
                            "kl_mean": float(kl.mean()), "kl_p99": float(np.percentile(kl, 99)), "top1": top1,
                            "layers": layers, "positions": n_pred})
        ref.close()

    print("| model | type asked | file holds (bits/weight) | KL mean (nats) | KL p99 | top-1 agree | perplexity | positions |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        st = "%s (%.2f)" % (r["stored"][0], r["stored"][1])
        if r["type"] == "f32":
            print("| %s | f32 | %s | – | – | – | %.4f | %d |" % (r["model"], st, r["ppl"], r["positions"]))
        else:
            print("| %s | %s | %s | %.2e | %.2e | %.2f%% | %.4f | %d |" % (
                r["model"], r["type"], st, r["kl_mean"], r["kl_p99"], 100 * r["top1"], r["ppl"], r["positions"]))
    print()
    print("relative error of the residual stream (mean over positions): the embedding, after each block, at ln_final:")
    for r in results:
        if r["type"] != "f32":
            print("  %-12s %-5s %s" % (r["model"], r["type"], " ".join("%.1e" % v for v in r["layers"])))
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump(results, f, indent=1)
        os.replace(a.json + ".tmp", a.json)


STORIES_TEXT = """Once upon a time, there was a little boy named Tom. Tom liked to play with his red ball in the \
park. One day, the ball rolled under a big tree. Tom looked and looked, but he could not find it. He felt sad. \
Then a kind dog came to him. The dog had the red ball in its mouth! Tom was very happy. He said, "Thank you, \
dog!" The dog wagged its tail. From that day on, Tom and the dog played together every day.
Lily had a new doll. The doll had a pink dress and long hair. Lily took the doll everywhere. One morning, her \
mom said, "Lily, it is time to go to school." Lily wanted to take the doll, but her mom said no. Lily was a \
little sad, but she put the doll on her bed. At school, she made a picture of the doll for her mom. When she \
came home, she gave the picture to her mom. Her mom smiled and gave her a big hug.
There was a small bird who lived in a tall tree. The bird liked to sing in the sun. One day, it started to \
rain. The bird was cold and wet. A friendly squirrel saw the bird and said, "Come into my home, it is warm \
here." The bird went inside and was happy. When the rain stopped, the bird sang a song for the squirrel. They \
became best friends.
Ben and Mia went to the beach with their dad. They built a big sand castle with a tall tower. A wave came and \
made the castle fall. Mia started to cry. Ben said, "Don't cry, Mia. We can build a new one!" They worked \
together and made an even bigger castle. Dad took a picture of them. They were proud of their castle.
Once there was a cat named Max. Max was very lazy. He liked to sleep all day in the warm sun. One day, a \
little mouse ran past him. Max opened one eye, but he was too sleepy to run. The mouse laughed and said, "You \
are a funny cat!" Max yawned and went back to sleep. The mouse ate some cheese and ran away.
"""

if __name__ == "__main__":
    main()
