#!/usr/bin/python3
"""test_precision.py — mixed precision (`--precision bf16`) end to end.

    test_precision.py --tinylm PATH --data tinyshakespeare.txt --work DIR

On a CPU with bf16 products (AMX or AVX512-BF16):
- `train --precision bf16` says so in its banner, trains a llama-style and a GPT-2-style model
  to a loss within 0.02 of the fp32 run's at every logged step (short runs), and differs from
  fp32 (the products really are rounded);
- its checkpoint stays f32 (the safetensors header) and trainer.json records the precision;
- --resume continues bit-identically in bf16 (every logged number of the resumed steps equals
  the uninterrupted bf16 run's), and a resume keeps the run's precision;
- a sweep grid may set "precision";
- `logits --precision bf16` differs from fp32 by less than the measured bf16 bound (2^-5 of the
  largest logit on this small model) and not at all where no path exists.
Everywhere (here forced with TLM_ISA=avx2, which leaves no bf16 path):
- `--precision bf16` trains in fp32 with one line saying why, bit for bit the fp32 run.
- `--precision int8` is a usage error (exit 2).
--quick (the sanitizer build): the same checks on runs of 12 steps instead of 40 (evaluated, saved
and resumed at half way): the same code paths, instrumented runs being slow."""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    passed += bool(ok)
    failed += not ok
    print("%-72s %s%s" % (what, "ok" if ok else "FAIL", ("  " + str(detail)[-600:]) if (detail and not ok) else ""))
    return ok


def run(args, env=None, timeout=300):
    e = dict(os.environ, OMP_NUM_THREADS="2")
    e.update(env or {})
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, env=e)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def metrics(run_dir):
    out = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            m = json.loads(line)
            out[m["step"]] = {k: v for k, v in m.items() if k not in ("tokens_per_s", "elapsed")}
    return out


def safetensors_dtypes(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return {v["dtype"] for k, v in header.items() if k != "__metadata__"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tinylm", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--quick", action="store_true", help="12-step runs (the sanitizer build)")
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    W = lambda *p: os.path.join(a.work, *p)  # noqa: E731
    steps, half, log = (12, 6, 3) if a.quick else (40, 20, 5)
    common = ["--data", a.data, "--steps", str(steps), "--eval-every", str(half), "--log-every", str(log), "--sample",
              "0", "--batch", "8", "--seq", "64", "--save-every", str(half)]

    rc, _, err = run([a.tinylm, "train", "--preset", "llama-baby", "--precision", "int8", "--out", W("bad")] + common)
    check(rc == 2 and "--precision" in err, "--precision int8 is a usage error", err)

    # does this machine have bf16 products? (the banner says)
    rc, _, err = run([a.tinylm, "train", "--preset", "llama-baby", "--precision", "bf16", "--out", W("llama-baby_bf16")]
                     + common)
    have = "mixed precision: bf16 products on" in err
    fallback = "training in fp32" in err
    check(rc == 0 and (have or fallback), "train --precision bf16 runs and its banner says what computes", err)

    # the fallback, forced: bit for bit the fp32 run, one line saying why
    env = {"TLM_ISA": "avx2"}
    rc1, _, err1 = run([a.tinylm, "train", "--preset", "llama-baby", "--precision", "bf16", "--out", W("fb_bf16")]
                       + common, env)
    rc2, _, _ = run([a.tinylm, "train", "--preset", "llama-baby", "--out", W("fb_fp32")] + common, env)
    check(rc1 == 0 and rc2 == 0 and err1.count("training in fp32") == 1 and "neither AMX-BF16 nor AVX512-BF16" in err1,
          "without a bf16 path: one line says so and it trains in fp32", err1)
    check(rc1 == 0 and rc2 == 0 and metrics(W("fb_bf16")) == metrics(W("fb_fp32")),
          "without a bf16 path: bit for bit the fp32 run")

    if not have:
        print("no bf16 products on this CPU: the mixed-precision checks are skipped")
        print("%d passed, %d failed" % (passed, failed))
        return 1 if failed else 0

    for preset, extra in (("llama-baby", []), ("gpt2", ["--preset", "nanogpt-baby", "--tokenizer", "bytes", "--set",
                                                         "norm_bias=true", "--set", "mlp_bias=true", "--set",
                                                         "attention_bias=true", "--set", "attention_out_bias=true"])):
        args = ["--preset", preset] if not extra else extra
        d32, d16 = W(preset + "_fp32"), W(preset + "_bf16")
        if preset != "llama-baby":
            run([a.tinylm, "train"] + args + ["--precision", "bf16", "--out", d16] + common)
        rc, _, err = run([a.tinylm, "train"] + args + ["--out", d32] + common)
        if not check(rc == 0, "%s: the fp32 run" % preset, err):
            continue
        m32, m16 = metrics(d32), metrics(d16)
        worst = max(abs(m32[s]["loss"] - m16[s]["loss"]) for s in m32)
        check(set(m32) == set(m16) and worst <= 0.02, "%s: bf16 loss within 0.02 of fp32 at every logged step "
              "(largest gap %.4f)" % (preset, worst))
        check(any(m32[s]["loss"] != m16[s]["loss"] for s in m32), "%s: bf16 differs from fp32 (rounded products)"
              % preset)

    d16 = W("llama-baby_bf16")
    latest = os.path.realpath(os.path.join(d16, "latest"))
    dtypes = safetensors_dtypes(os.path.join(latest, "model.safetensors"))
    check(dtypes == {"F32"}, "the bf16 run's checkpoint holds f32 weights", dtypes)
    with open(os.path.join(latest, "trainer.json")) as f:
        check(json.load(f)["options"].get("precision") == "bf16", "trainer.json records precision bf16")

    # exact resume in bf16: stop at 20, resume to 40, compare with the uninterrupted run
    dr = W("resumed_bf16")
    rc, _, err = run([a.tinylm, "train", "--preset", "llama-baby", "--precision", "bf16", "--out", dr, "--stop-at",
                      str(half)] + common)
    rc2, _, err2 = run([a.tinylm, "train", "--resume", dr, "--data", a.data])
    check(rc == 0 and rc2 == 0 and "mixed precision: bf16 products on" in err2,
          "a resume of a bf16 run computes in bf16", err + err2)
    mr, mu = metrics(dr), metrics(d16)
    check(mr == mu, "bf16 resume is bit-identical to the uninterrupted bf16 run",
          [(s, mr.get(s), mu.get(s)) for s in mu if mr.get(s) != mu.get(s)][:2])

    # a run whose trainer.json names another precision: refused, naming the file and the field
    bad = W("bad_state")
    shutil.copytree(dr, bad, symlinks=True)
    state = os.path.join(os.path.realpath(os.path.join(bad, "latest")), "trainer.json")
    with open(state) as f:
        j = json.load(f)
    j["options"]["precision"] = "fp8"
    with open(state, "w") as f:
        json.dump(j, f)
    rc, _, err = run([a.tinylm, "train", "--resume", bad, "--data", a.data, "--steps", "60"])
    check(rc == 1 and "trainer.json" in err and '"precision"' in err,
          "a trainer.json with precision \"fp8\" is refused naming the file and field", err)
    rc, _, err = run([a.tinylm, "logits", "--model", dr, "--ids", "1 2 3", "--precision", "fp16", "--out",
                      W("x.npy")])
    check(rc == 2 and "--precision" in err and not os.path.exists(W("x.npy")),
          "logits --precision fp16 is a usage error, nothing written", err)

    # a sweep grid may set the precision
    grid = W("grid.json")
    with open(grid, "w") as f:
        json.dump({"preset": "llama-baby", "train": {"steps": 4, "batch": 4, "seq": 32, "eval-every": 4,
                                                     "save-every": 4, "log-every": 2},
                   "axes": {"precision": ["fp32", "bf16"]}}, f)
    rc, out, err = run([a.tinylm, "sweep", "--grid", grid, "--data", a.data, "--out", W("sweep")])
    runs = sorted(d for d in os.listdir(W("sweep")) if "precision=" in d) if rc == 0 else []
    states = []
    for d in runs:
        with open(os.path.join(W("sweep"), d, "latest", "trainer.json")) as f:
            states.append(json.load(f)["options"].get("precision"))
    check(rc == 0 and sorted(states) == ["bf16", "fp32"], "a sweep over precision fp32, bf16 trains one run of each",
          (out + err, runs, states))

    # inference: logits in bf16 near fp32's, identical without a path
    ids = " ".join(str(i) for i in range(1, 60))
    outs = {}
    for name, prec, env in (("f32", "fp32", None), ("bf16", "bf16", None), ("none", "bf16", {"TLM_ISA": "avx2"}),
                            ("f32_capped", "fp32", {"TLM_ISA": "avx2"})):
        rc, _, err = run([a.tinylm, "logits", "--model", latest, "--ids", ids, "--precision", prec, "--out",
                          W(name + ".npy")], env)
        check(rc == 0, "logits --precision %s%s" % (prec, " (no path)" if env else ""), err)
        with open(W(name + ".npy"), "rb") as f:
            outs[name] = f.read()
    import numpy as np
    l32, l16 = np.load(W("f32.npy")), np.load(W("bf16.npy"))
    rel = float(np.abs(l32 - l16).max() / np.abs(l32).max())
    check(0 < rel <= 2 ** -5, "logits --precision bf16 within 2^-5 of fp32 (relative to the largest: %.2e)" % rel)
    check(outs["none"] == outs["f32_capped"], "logits --precision bf16 without a path = fp32 exactly")
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
