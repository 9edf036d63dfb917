#!/usr/bin/python3
"""test_python_precision.py — Model.set_precision from Python.

    test_python_precision.py --lib build/libtinylm.so --tinylm build/tinylm --work DIR

A small trained-shape model (tinylm train, llama-baby, a few steps) loaded twice:
- set_precision('bf16') on a CPU with bf16 products returns 'bf16'; the logits move from the
  fp32 ones, by less than 2^-5 of the largest; the residual-stream gradient of the loss
  (run_with_cache backward) stays within 2^-3 of the fp32 one (compare.py's bf16 bounds);
  set_precision('fp32') gives back the fp32 logits bit for bit;
- a weight edit (edit_weights) is seen by the next bf16 pass (the bf16 copy is refreshed);
- without bf16 products (TLM_ISA=avx2, in a child process): a RuntimeWarning naming why,
  'fp32' returned, the fp32 logits exactly;
- a bad value raises ValueError."""
import argparse
import os
import subprocess
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    passed += bool(ok)
    failed += not ok
    print("%-72s %s%s" % (what, "ok" if ok else "FAIL", ("  " + str(detail)[-400:]) if (detail and not ok) else ""))


CHILD = r"""
import sys, warnings, numpy as np
sys.path.insert(0, %r)
import tinylm
m = tinylm.load(%r)
ids = np.arange(1, 40) %% m.vocab_size
a = m(ids)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    got = m.set_precision("bf16")
b = m(ids)
print(got, len(w), bool(w) and "neither AMX-BF16 nor AVX512-BF16" in str(w[0].message), np.array_equal(a, b))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--tinylm", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.environ["TINYLM_LIB"] = os.path.abspath(a.lib)
    import tinylm
    os.makedirs(a.work, exist_ok=True)
    run = os.path.join(a.work, "run")
    if not os.path.isdir(run):
        subprocess.run([a.tinylm, "train", "--data", os.path.join(ROOT, "data", "tinyshakespeare.txt"), "--preset",
                        "llama-baby", "--steps", "30", "--sample", "0", "--out", run], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    m = tinylm.load(run)
    ids = np.array([(7 * i + 3) % m.vocab_size for i in range(48)])
    l32 = m(ids)
    _, c32 = m.run_with_cache(ids, names=["blocks.0.hook_resid_pre"], backward=True)
    try:
        m.set_precision("int8")
        check(False, "set_precision('int8') raises")
    except ValueError:
        check(True, "set_precision('int8') raises ValueError")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = m.set_precision("bf16")
    if got == "bf16":
        l16 = m(ids)
        rel = float(np.abs(l16 - l32).max() / np.abs(l32).max())
        check(0 < rel <= 2 ** -5, "bf16 logits within 2^-5 of fp32, and not equal (%.2e)" % rel)
        _, c16 = m.run_with_cache(ids, names=["blocks.0.hook_resid_pre"], backward=True)
        g32, g16 = np.asarray(c32["blocks.0.hook_resid_pre_grad"]), np.asarray(c16["blocks.0.hook_resid_pre_grad"])
        grel = float(np.abs(g16 - g32).max() / np.abs(g32).max())
        check(0 < grel <= 2 ** -3, "bf16 gradient at blocks.0.hook_resid_pre within 2^-3 of fp32 (%.2e)" % grel)
        with m.edit_weights() as W:
            W["W_U"][:, 5] *= 3.0  # (logit 5 triples; the others stay)
            ledit = m(ids)
        check(np.allclose(ledit[:, 5], 3 * l16[:, 5], rtol=2 ** -5, atol=2 ** -5 * np.abs(l16).max()) and
              np.array_equal(np.delete(ledit, 5, axis=1), np.delete(l16, 5, axis=1)) and
              float(np.abs(ledit[:, 5] - l16[:, 5]).max()) > 0.1, "a weight edit is seen by the next bf16 pass")
        check(m.set_precision("fp32") == "fp32" and np.array_equal(m(ids), l32),
              "set_precision('fp32'): the fp32 logits again, bit for bit")
    else:
        check(got == "fp32" and len(w) == 1, "no bf16 products here: 'fp32' and a warning", [str(x.message) for x in w])
    m.close()
    env = dict(os.environ, TLM_ISA="avx2")
    p = subprocess.run([sys.executable, "-c", CHILD % (os.path.join(ROOT, "python"), run)], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    out = p.stdout.decode().split()
    check(p.returncode == 0 and out == ["fp32", "1", "True", "True"],
          "TLM_ISA=avx2: a warning saying why, 'fp32', the fp32 logits exactly", p.stdout.decode() + p.stderr.decode())
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
