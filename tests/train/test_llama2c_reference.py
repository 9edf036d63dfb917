#!/usr/bin/python3
"""test_llama2c_reference.py — stories260K through `tinylm generate` gives llama2.c run.c's
text byte for byte (tests/data/reference/, produced by run.c; see tests/data/README.md).

run.c's -n counts positions (BOS and prompt included) and the last sampled token is never fed
back, so run.c -n 256 with a prompt of k tokens (BOS included) samples 256 - k + 1 tokens:
tinylm's -n (new tokens) is set to that."""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CASES = [  # reference file, prompt, run.c options
    ("stories260K_greedy_empty.txt", "", ["--temperature", "0"]),
    ("stories260K_greedy_once.txt", "Once upon a time", ["--temperature", "0"]),
    ("stories260K_greedy_littledog.txt", "The little dog", ["--temperature", "0"]),
    ("stories260K_sample_t1_p0.9_s133742.txt", "", ["--temperature", "1.0", "--top-p", "0.9", "--seed", "133742"]),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tinylm", required=True)
    a = ap.parse_args()
    model, tok = os.path.join(ROOT, "data", "stories260K.bin"), os.path.join(ROOT, "data", "tok512.bin")
    passed = failed = 0
    for ref_name, prompt, opts in CASES:
        ids = subprocess.run([a.tinylm, "tokenize", "--tokenizer", tok, "--text", prompt, "--bos"],
                             stdout=subprocess.PIPE, check=True).stdout.split()
        n_new = 256 - len(ids) + 1
        p = subprocess.run([a.tinylm, "generate", "--model", model, "--tokenizer", tok, "--prompt", prompt,
                            "-n", str(n_new)] + opts, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        want = open(os.path.join(ROOT, "tests", "data", "reference", ref_name), "rb").read()
        ok = p.returncode == 0 and p.stdout == want
        passed += ok
        failed += not ok
        print("%-44s %s" % (ref_name, "ok (%d bytes identical)" % len(want) if ok else "FAIL"))
        if not ok:
            got = p.stdout
            k = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))
            print("  first difference at byte %d: got %r, want %r; stderr: %s" %
                  (k, got[k:k + 40], want[k:k + 40], p.stderr.decode()[-200:]))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
