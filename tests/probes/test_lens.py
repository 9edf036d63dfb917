#!/usr/bin/python3
"""test_lens.py — the tuned lens (src/probes/lens.h, `tinylm lens`, `inspect --lens tuned`).

    test_lens.py --tinylm PATH --lens-dump PATH --work DIR

- the loss KL(final || lens) per stage and the translators' gradient (lens_dump: the engine's
  backward through the final soft-cap, LM head and final norm) against PyTorch autograd on the
  float64 reference model (tests/reference), for a random lens on random models (RMSNorm,
  LayerNorm + soft-cap + untied head, DyT, no final norm);
- the identity lens (A = 0, b = 0) is the logit lens exactly: inspect --json gives identical
  top tokens, probabilities, grids and KLs for both;
- `lens train` on stories260K (on TinyShakespeare's first 20k characters) reduces the held-out KL
  of every stage below the logit lens's,
  writes a file that `lens eval` and `inspect --lens tuned` read back with the same numbers;
- a lens file of another shape, a tensor of the wrong shape, a file that is not a lens: refused,
  the message naming the file and the key or tensor."""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import tinylm_ref as ref  # noqa: E402
from safetensors_np import save_safetensors  # noqa: E402

STORIES = os.path.join(ROOT, "data", "stories260K.bin")
TOK512 = os.path.join(ROOT, "data", "tok512.bin")
SHAKESPEARE = os.path.join(ROOT, "data", "tinyshakespeare.txt")
passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    passed += bool(ok)
    failed += not ok
    print("%-78s %s%s" % (what, "ok" if ok else "FAIL", ("  " + str(detail)[-600:]) if (detail and not ok) else ""))
    return ok


def run(args, timeout=300):
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, env=env)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def write_lens(path, d, L, V, tensors, meta_over=None):
    meta = {"format": "tinylm-tuned-lens", "d_model": str(d), "num_hidden_layers": str(L), "vocab_size": str(V)}
    meta.update(meta_over or {})
    save_safetensors(path, {k: np.asarray(v, np.float32) for k, v in tensors.items()}, metadata=meta)


def random_lens(d, L, rng, scale=0.1):
    t = {}
    for k in range(L):
        t["translators.%d.weight" % k] = rng.normal(0, scale, size=(d, d))
        t["translators.%d.bias" % k] = rng.normal(0, scale, size=(d,))
    return t


def reference_kl(model, tokens, lens):
    """KL(final || lens_k) per stage (mean over positions) and d sum_k / d translators, in float64"""
    c = model.cfg
    L = c["num_hidden_layers"]
    names = ["hook_embed"] + ["blocks.%d.hook_resid_post" % n for n in range(L)]
    logits, cache = model.run_hooked(tokens, names=set(names))
    logp = torch.log_softmax(torch.as_tensor(logits, dtype=torch.float64), -1)
    head = model.p("embed.weight") if c["tie_word_embeddings"] else model.p("lm_head.weight")
    params = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in lens.items()}
    kls, total = [], 0
    for k in range(L + 1):
        h = torch.as_tensor(cache[names[k]], dtype=torch.float64)
        u = h + h @ params["translators.%d.weight" % k].t() + params["translators.%d.bias" % k] if k < L else h
        x = model.norm("final_norm", u) if c["final_norm"] else u
        z = ref.softcap(x @ head.detach().t(), c["final_logit_softcapping"])
        logq = torch.log_softmax(z, -1)
        kl = (logp.exp() * (logp - logq)).sum(-1).mean()
        kls.append(kl)
        total = total + kl
    total.backward()
    return np.array([float(k) for k in kls]), {n: p.grad.numpy() for n, p in params.items()}


def test_gradient(tinylm, lens_dump, work):
    base = {"model_type": "tinylm", "vocab_size": 53, "hidden_size": 24, "num_hidden_layers": 3,
            "num_attention_heads": 4, "intermediate_size": 40, "max_position_embeddings": 16}
    cases = [("rmsnorm", {}),
             ("layernorm_softcap_untied", {"norm_type": "layernorm", "norm_bias": True, "final_logit_softcapping": 3.0,
                                           "tie_word_embeddings": False}),
             ("dyt_sandwich", {"norm_type": "dyt", "norm_placement": "sandwich", "dyt_alpha_init": 0.9}),
             ("no_final_norm", {"final_norm": False})]
    for name, over in cases:
        cfg = dict(base, **over)
        d = os.path.join(work, "grad-" + name)
        shutil.rmtree(d, ignore_errors=True)
        rng = np.random.default_rng(len(name))
        ref.save(d, cfg, ref.random_params(cfg, seed=len(name), std=0.3, embed_std=0.6))
        tokens = rng.integers(0, cfg["vocab_size"], size=(2, 9)).astype(np.int32)
        np.save(os.path.join(d, "tokens.npy"), tokens)
        c = ref.resolve_config(cfg)
        lens = random_lens(c["hidden_size"], c["num_hidden_layers"], rng)
        lp = os.path.join(d, "lens.safetensors")
        write_lens(lp, c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], lens)
        out = os.path.join(d, "out")
        rc, _, err = run([lens_dump, d, lp, out])
        if not check(rc == 0, "lens_dump %s runs" % name, err):
            continue
        r_kl, r_grad = reference_kl(ref.load(d), torch.as_tensor(tokens, dtype=torch.long),
                                    {k: v.astype(np.float32).astype(np.float64) for k, v in lens.items()})
        c_kl = np.load(os.path.join(out, "kl.npy"))
        e_kl = float(np.max(np.abs(c_kl - r_kl)) / np.max(np.abs(r_kl)))
        worst, e_g = "", 0.0
        for n, g in r_grad.items():
            cg = np.load(os.path.join(out, "grad", n + ".npy"))
            e = float(np.max(np.abs(cg - g)) / max(float(np.max(np.abs(g))), 1e-30))
            if e > e_g:
                e_g, worst = e, n
        check(e_kl < 1e-4 and c_kl[-1] == 0.0, "%s: KL per stage = PyTorch (rel %.1e), the last stage 0" % (name, e_kl),
              "%s vs %s" % (c_kl, r_kl))
        check(e_g < 1e-3, "%s: translator gradients = PyTorch autograd (worst rel %.1e, %s)" % (name, e_g, worst))


def inspect_json(tinylm, *extra):
    rc, out, err = run([tinylm, "inspect", "--model", STORIES, "--tokenizer", TOK512, "--prompt", "The little dog ran",
                        "--json", *extra])
    return rc, (json.loads(out) if rc == 0 else None), err


def test_identity(tinylm, work):
    p = os.path.join(work, "identity.lens")
    write_lens(p, 64, 5, 512, {k: np.zeros_like(v) for k, v in random_lens(64, 5, np.random.default_rng(0)).items()})
    rc, j, err = inspect_json(tinylm, "--lens", "tuned", "--lens-file", p)
    if not check(rc == 0 and "tuned_lens" in j, "inspect --lens tuned with the identity lens runs", err):
        return
    same = all(a["top"] == b["top"] and a["top1_by_position"] == b["top1_by_position"] and a["kl_to_final"] ==
               b["kl_to_final"] for a, b in zip(j["logit_lens"], j["tuned_lens"]))
    check(same and len(j["tuned_lens"]) == 6, "identity lens (A = 0, b = 0) = logit lens exactly (tokens, probs, KL)")


def test_train(tinylm, work):
    # TinyShakespeare's first 20k characters through stories260K's tokenizer (cheap under the sanitizers;
    # the lens learns on any text)
    data, cut = SHAKESPEARE, ["--max-chars", "20000"]
    lens = os.path.join(work, "stories.lens")
    rc, out, err = run([tinylm, "lens", "train", "--model", STORIES, "--tokenizer", TOK512, "--data", data,
                        "--out", lens, "--steps", "40", "--lr", "3e-3", "--batch", "4", "--seq", "32",
                        "--eval-batches", "3", "--json"] + cut)
    if not check(rc == 0 and os.path.exists(lens), "lens train on stories260K runs and writes the lens", err):
        return
    st = json.loads(out)["stages"]
    check(len(st) == 6 and all(s["tuned_lens_kl"] < s["logit_lens_kl"] for s in st[:-1]) and
          st[-1]["tuned_lens_kl"] == 0 == st[-1]["logit_lens_kl"],
          "training lowers the held-out KL of every stage below the logit lens's",
          [(s["logit_lens_kl"], s["tuned_lens_kl"]) for s in st])
    rc, out2, err = run([tinylm, "lens", "eval", "--model", STORIES, "--tokenizer", TOK512, "--data", data,
                         "--lens-file", lens, "--batch", "4", "--seq", "32", "--eval-batches", "3", "--json"] + cut)
    st2 = json.loads(out2)["stages"] if rc == 0 else []
    check(rc == 0 and [s["tuned_lens_kl"] for s in st2] == [s["tuned_lens_kl"] for s in st],
          "lens eval reads the file back: the same held-out KL per stage", err)
    rc, j, err = inspect_json(tinylm, "--lens", "tuned", "--lens-file", lens)
    check(rc == 0 and sum(r["kl_to_final"]["mean"] for r in j["tuned_lens"]) <
          sum(r["kl_to_final"]["mean"] for r in j["logit_lens"]),
          "inspect --lens tuned: the tuned lens beside the logit lens, closer to the final distribution", err)
    rc, out, err = run([tinylm, "inspect", "--model", STORIES, "--tokenizer", TOK512, "--prompt", "The dog",
                        "--lens", "tuned", "--lens-file", lens])
    check(rc == 0 and "Tuned lens at position" in out and "KL(final || lens)" in out, "the table shows the tuned lens",
          err)


def test_refused(tinylm, work):
    rng = np.random.default_rng(1)
    cases = []
    p = os.path.join(work, "wrong-d.lens")
    write_lens(p, 32, 5, 512, random_lens(32, 5, rng))
    cases.append((p, "d_model = 32 but the model has 64"))
    p = os.path.join(work, "wrong-layers.lens")
    write_lens(p, 64, 4, 512, random_lens(64, 4, rng))
    cases.append((p, "num_hidden_layers = 4 but the model has 5"))
    p = os.path.join(work, "wrong-tensor.lens")
    t = random_lens(64, 5, rng)
    t["translators.2.weight"] = t["translators.2.weight"][:, :32]
    write_lens(p, 64, 5, 512, t)
    cases.append((p, "translators.2.weight"))
    p = os.path.join(work, "missing-tensor.lens")
    t = random_lens(64, 5, rng)
    del t["translators.4.bias"]
    write_lens(p, 64, 5, 512, t)
    cases.append((p, "translators.4.bias"))
    p = os.path.join(work, "not-a-lens.lens")
    save_safetensors(p, {"x": np.zeros(3, np.float32)})
    cases.append((p, "not a tuned-lens file"))
    for p, needle in cases:
        rc, _, err = run([tinylm, "inspect", "--model", STORIES, "--tokenizer", TOK512, "--prompt", "The dog",
                          "--lens", "tuned", "--lens-file", p])
        check(rc == 1 and needle in err and os.path.basename(p) in err,
              "refused: %s (%s)" % (os.path.basename(p), needle), err.strip())
    rc, _, err = run([tinylm, "inspect", "--model", STORIES, "--tokenizer", TOK512, "--prompt", "x", "--lens", "tuned"])
    check(rc == 2 and "--lens-file" in err, "--lens tuned without --lens-file: usage error", err.strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tinylm", required=True)
    ap.add_argument("--lens-dump", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    work = os.path.abspath(a.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    test_gradient(a.tinylm, a.lens_dump, work)
    test_identity(a.tinylm, work)
    test_refused(a.tinylm, work)
    test_train(a.tinylm, work)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
