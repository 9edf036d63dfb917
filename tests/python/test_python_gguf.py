#!/usr/bin/python3
"""test_python_gguf.py — a quantized GGUF file through everything that reads a model (issue 24, item 4).

    test_python_gguf.py --lib build/libtinylm.so --tinylm build/tinylm --work DIR

stories260K exported as f32 and as Q8_0 GGUF (tinylm export); on the Q8_0 file:
- inspect --json (logit lens, norms, attention, direct logit attribution) has the f32 file's
  sections; --html and --plot write the page and the figure;
- inspect --probe ... --dump: the probed activations are within Q8_0's rounding of the f32 file's;
- inspect --grad and training refuse, naming the quantized weights;
- lens train / eval run (the tuned lens widens the quantized head);
- the Python API: tinylm.load of the file, logits = `tinylm logits` bit for bit, run_with_cache's
  residual stream within Q8_0's rounding of the f32 file's, hooks that edit an activation change the
  logits, generate (greedy) = `tinylm generate --precision fp32` text; weights() gives read-only
  f32 views of the quantized matrices (within Q8_0's rounding of the f32 file's) and refuses
  writable=True by name."""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "cli"))
from harness import check, counts  # noqa: E402  (the check table the CLI tests share)
sys.path.insert(0, os.path.join(ROOT, "python"))
STORIES, TOK = os.path.join(ROOT, "data", "stories260K.bin"), os.path.join(ROOT, "data", "tok512.bin")
PROMPT = "Once upon a time, there was a little girl named Lily. She loved"



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--tinylm", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.environ["TINYLM_LIB"] = os.path.abspath(a.lib)
    import tinylm
    work = a.work
    os.makedirs(work, exist_ok=True)

    def cli(*args):
        p = subprocess.run([a.tinylm, *args], capture_output=True, timeout=300)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")

    f32, q8 = os.path.join(work, "s.f32.gguf"), os.path.join(work, "s.q8_0.gguf")
    for path, typ in ((f32, "f32"), (q8, "q8_0")):
        rc, _, err = cli("export", "--model", STORIES, "--tokenizer", TOK, "--format", "gguf", "--type", typ,
                         "--out", path)
        if not check(rc == 0, "export stories260K --type %s" % typ, err):
            return 1

    # ---- the CLI's probes --------------------------------------------------------------------
    rc, out, err = cli("inspect", "--model", q8, "--prompt", PROMPT, "--json")
    rep = json.loads(out) if rc == 0 else {}
    check(rc == 0 and rep, "inspect --json on the Q8_0 file", err)
    rc_l, _, err_l = cli("logits", "--model", q8, "--prompt", PROMPT, "--out", os.path.join(work, "q8.npy"))
    logits_q8 = np.load(os.path.join(work, "q8.npy")) if rc_l == 0 else None
    check(rc_l == 0, "logits on the Q8_0 file", err_l)
    rc32, out32, _ = cli("inspect", "--model", f32, "--prompt", PROMPT, "--json")
    rep32 = json.loads(out32) if rc32 == 0 else {}
    check(rep and rep32 and sorted(rep) == sorted(rep32), "its report has the f32 file's sections",
          (sorted(rep), sorted(rep32)))
    html, svg = os.path.join(work, "q8.html"), os.path.join(work, "q8.svg")
    rc, _, err = cli("inspect", "--model", q8, "--prompt", PROMPT, "--html", html, "--plot", svg)
    check(rc == 0 and os.path.getsize(html) > 10000 and os.path.getsize(svg) > 1000,
          "inspect --html / --plot write the page and the figure", err)
    # probes dumped, against the f32 file's
    dumps = {}
    for label, path in (("f32", f32), ("q8", q8)):
        d = os.path.join(work, "dump-" + label)
        rc, _, err = cli("inspect", "--model", path, "--prompt", PROMPT, "--probe", "layers.*.resid_post",
                         "--probe", "layers.*.attn.q", "--dump", d)
        check(rc == 0 and os.path.isdir(d) and os.listdir(d), "inspect --probe ... --dump on the %s file" % label, err)
        dumps[label] = d
    names = sorted(f for f in os.listdir(dumps["f32"]) if f.endswith(".npy"))
    worst = 0.0
    for f in names:
        x, y = np.load(os.path.join(dumps["f32"], f)), np.load(os.path.join(dumps["q8"], f))
        worst = max(worst, float(np.linalg.norm(x - y) / max(np.linalg.norm(x), 1e-30)))
    # Q8_0 rounds each weight by up to 1/254 of its block's largest: the stream moves by about 1%
    check(names and 1e-5 < worst < 0.05, "the %d probed tensors are within Q8_0's rounding of the f32 file's "
          "(worst relative L2 %.2g)" % (len(names), worst))
    rc, _, err = cli("inspect", "--grad", "--model", q8, "--data", os.path.join(ROOT, "data", "tinyshakespeare.txt"),
                     "--seq", "32", "--batch", "1")
    check(rc == 1 and "quantized" in err, "inspect --grad refuses, naming the quantized weights", err)
    # the tuned lens
    lens = os.path.join(work, "q8.lens")
    text = os.path.join(work, "stories.txt")
    with open(text, "w") as f:
        f.write((PROMPT + " to play with her ball in the park. ") * 40)
    rc, out, err = cli("lens", "train", "--model", q8, "--data", text, "--out", lens, "--steps", "5", "--batch", "2",
                       "--seq", "32", "--eval-batches", "1")
    check(rc == 0 and os.path.exists(lens), "lens train on the Q8_0 file", err)
    rc, out, err = cli("inspect", "--model", q8, "--prompt", PROMPT, "--lens", "tuned", "--lens-file", lens)
    check(rc == 0 and out, "inspect --lens tuned with it", err)

    # ---- the Python API ----------------------------------------------------------------------
    m, m32 = tinylm.load(q8), tinylm.load(f32)
    ids = m.tokenize(PROMPT)
    got = m(ids)
    check(logits_q8 is not None and got.shape == logits_q8.shape and np.array_equal(got, logits_q8),
          "Python logits = tinylm logits, bit for bit")
    names = ["blocks.%d.hook_resid_post" % l for l in range(5)]
    _, cache = m.run_with_cache(ids, names=names)
    _, cache32 = m32.run_with_cache(ids, names=names)
    rel = max(float(np.linalg.norm(cache[n] - cache32[n]) / np.linalg.norm(cache32[n])) for n in names)
    check(1e-5 < rel < 0.05, "run_with_cache: the residual stream within Q8_0's rounding of f32's (%.2g)" % rel)

    def zero_head(act, hook):
        act[..., 0:8] = 0.0  # (hook_z of layer 2: head 0's output)
        return act

    edited = m.run_with_hooks(ids, fwd_hooks=[("blocks.2.attn.hook_z", zero_head)])
    check(not np.array_equal(edited, got), "a hook that edits an activation changes the logits")
    text_py = m.generate(PROMPT, n=30, temperature=0)
    rc, text_cli, err = cli("generate", "--model", q8, "--prompt", PROMPT, "-n", "30", "--temperature", "0",
                            "--precision", "fp32")
    # (generate returns the continuation, its leading space kept; the CLI prints the prompt before it)
    check(rc == 0 and len(text_py) > 40 and text_cli.rstrip("\n") == PROMPT + text_py,
          "Python generate (greedy) = tinylm generate's text",
          (text_py[-80:], text_cli[-80:], err[-200:]))
    # weights(): read-only views of an f32 copy (each weight the value its block encodes);
    # writable=True refused by name (the blocks cannot take an f32 edit)
    w, w32 = m.weights(), m32.weights()
    names_w = [k for k in ("W_E", "W_Q", "W_O", "W_in", "W_out") if k in w32]
    worst_w, same = 0.0, True
    for k in names_w:
        a, b = np.asarray(w[k]), np.asarray(w32[k])
        same &= a.shape == b.shape
        worst_w = max(worst_w, float(np.abs(a - b).max() / np.abs(b).max()))
    check(names_w and same and 0 < worst_w < 1.0 / 100, "weights(): %s as f32 values within Q8_0's rounding of the "
          "f32 file's (worst %.2g of the largest)" % ("/".join(names_w), worst_w))
    ro = np.asarray(w[names_w[0]]) if names_w else None
    check(ro is not None and not ro.flags.writeable, "  read-only views")
    del w, ro
    try:
        m.weights(writable=True)
        check(False, "weights(writable=True) on quantized weights refuses")
    except tinylm.TinylmError as e:
        check("quantized" in str(e), "weights(writable=True) refuses, naming the quantized weights", e)
    try:
        m.param_grads(ids)
        check(False, "param_grads on quantized weights refuses")
    except tinylm.TinylmError as e:
        check("quantized" in str(e) and "backward: backward" not in str(e),
              "param_grads refuses, naming the quantized weights (each prefix once)", e)
    m.close(), m32.close()
    print("%d passed, %d failed" % (counts["passed"], counts["failed"]))
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
