#!/usr/bin/python3
"""test_parity.py — checks the C engine's forward and backward against the PyTorch oracle.

    test_parity.py --dump-bin PATH --work DIR [--cases DIR] [--only SUBSTRING ...]

Without --cases, writes the case grid (gen_cases.py) into DIR/cases. For each case runs
    PATH CASE_DIR OUT_DIR
which must write OUT_DIR/logits.npy (float32 [B,T,V]), loss.npy (float32 [1]),
grad/<tensor name>.npy (float32, the parameter's shape) and dx/layers.<N>.npy (float32
[B,T,d], the loss gradient w.r.t. the residual stream entering block N) — see fake_dump.py.
Then compares every tensor (compare.py states the error measure and tolerances), prints one
line per case and a final "N passed, M failed"; exits 1 on any failure.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare import (BF16_EXACT_SHARE, RULE, RULE_BF16, TOL_GRAD_BF16, TOL_OUT_BF16,  # noqa: E402
                     compare_case, summary)

CASE_TIMEOUT_S = 60


class Skip(Exception):
    """the dump program exited 77: it cannot run this precision on this machine"""


def run_dump(dump_bin, case_dir, out_dir, extra=()):
    """Runs the dump program; returns None or a one-line reason it failed. In mixed precision it
    also says whether the attention's products were bf16 (ATTENTION_BF16[out_dir])."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "2")
    try:
        p = subprocess.run([dump_bin, case_dir, out_dir] + list(extra), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=CASE_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return "dump program timed out after %d s" % CASE_TIMEOUT_S
    except OSError as e:
        return "cannot run dump program: %s" % e
    if p.returncode == 77:
        raise Skip(p.stdout.decode("utf-8", "replace").strip())
    if p.returncode != 0:
        tail = p.stdout.decode("utf-8", "replace").strip().splitlines()[-3:]
        return "dump program exited with %d: %s" % (p.returncode, " | ".join(tail))
    ATTENTION_BF16[out_dir] = b"attention products: bf16" in p.stdout
    return None


ATTENTION_BF16 = {}


def find_cases(cases_root, only):
    names = sorted(n for n in os.listdir(cases_root)
                   if os.path.isfile(os.path.join(cases_root, n, "ref", "info.json")))
    if only:
        names = [n for n in names if any(s in n for s in only)]
    return [os.path.join(cases_root, n) for n in names]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dump-bin", required=True, help="the engine's dump program (tlm_dump)")
    ap.add_argument("--work", required=True, help="scratch folder (cases and outputs go here)")
    ap.add_argument("--cases", help="use the cases in this folder instead of generating them")
    ap.add_argument("--only", nargs="*", help="only cases whose name contains one of these")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: the dump program runs in mixed precision (--precision bf16), compared "
                         "with compare.py's bf16 tolerances; the test skips (77) where it cannot run")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every failing tensor in full")
    a = ap.parse_args(argv)

    t0 = time.time()
    if a.cases:
        cases_root = a.cases
    else:
        from gen_cases import generate  # imports torch; not needed with --cases
        cases_root = os.path.join(a.work, "cases")
        shutil.rmtree(cases_root, ignore_errors=True)  # no stale case from an older grid
        generate(cases_root, a.only)
    cases = find_cases(cases_root, a.only)
    if not cases:
        print("no cases found in %s" % cases_root)
        print("0 passed, 1 failed")
        return 1
    extra, tols, rule = [], (), RULE
    if a.precision == "bf16":
        extra, tols, rule = ["--precision", "bf16"], (TOL_OUT_BF16, TOL_GRAD_BF16), RULE_BF16
        global ref, torch
        import torch  # noqa: E402 (only the bf16 run computes its oracle here)
        sys.path.insert(0, os.path.join(HERE, "..", "reference"))
        import tinylm_ref as ref  # noqa: E402
    print("parity: %d cases from %s; %s" % (len(cases), cases_root, rule))

    passed = failed = exact = 0
    for case_dir in cases:
        name = os.path.basename(case_dir)
        out_dir = os.path.join(a.work, "out", name)
        shutil.rmtree(out_dir, ignore_errors=True)
        os.makedirs(out_dir)
        try:
            why = run_dump(a.dump_bin, case_dir, out_dir, extra)
        except Skip as e:
            print("skipped: %s" % e)
            return 77
        if why:
            failed += 1
            print("FAIL %-34s %s" % (name, why))
            continue
        ref_dir = None
        if a.precision == "bf16":  # the oracle with the same roundings (tinylm_ref.Bf16Product)
            ref_dir = os.path.join(a.work, "ref_bf16", name)
            shutil.rmtree(ref_dir, ignore_errors=True)
            ref.dump(case_dir, ref_dir, torch.float64, bf16_products=True,
                     bf16_attention=ATTENTION_BF16.get(out_dir, False))
        checks = compare_case(case_dir, out_dir, *tols, ref_dir=ref_dir)
        if ref_dir and all(c.ok for c in compare_case(case_dir, out_dir, ref_dir=ref_dir)):
            exact += 1  # (within the float32 tolerances: no rounding flipped)
        bad = [c for c in checks if not c.ok]
        if bad:
            failed += 1
            shown = bad if a.verbose else bad[:4]
            more = "" if len(shown) == len(bad) else "; ... %d more (-v lists all)" % (len(bad) - len(shown))
            print("FAIL %-34s %s" % (name, summary(checks)))
            print("     %s%s" % ("; ".join(c.describe() for c in shown), more))
        else:
            passed += 1
            print("ok   %-34s %s" % (name, summary(checks)))
    if a.precision == "bf16":
        share_ok = exact >= BF16_EXACT_SHARE * len(cases)
        print("%s %d of %d cases within the float32 tolerances of the bf16 oracle (at least %d%% needed)"
              % ("ok  " if share_ok else "FAIL", exact, len(cases), 100 * BF16_EXACT_SHARE))
        failed += not share_ok
    print("(%.1f s)" % (time.time() - t0))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
