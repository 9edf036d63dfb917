"""libtinylm.so exports exactly the public API: every function include/tinylm.h declares with
TLM_API, and no other symbol (data or function) of its own.

    test_exports.py --lib build/libtinylm.so --header include/tinylm.h
"""
import argparse
import re
import subprocess
import sys


def declared(header):
    text = open(header, encoding="utf-8").read()
    names = set(re.findall(r"^TLM_API\b[^;(]*?\b(tlm_\w+)\s*\(", text, re.M))
    undecorated = [m for m in re.findall(r"^(?!TLM_API|typedef|#|\s|/|\*)[^;(]*?\b(tlm_\w+)\s*\(", text, re.M)]
    return names, undecorated


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    syms = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            syms.add(parts[2].split("@")[0])
    return syms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--header", required=True)
    a = ap.parse_args()
    want, undecorated = declared(a.header)
    have = exported(a.lib)
    # (symbols the toolchain itself adds to every shared object)
    have -= {"_init", "_fini", "_edata", "_end", "__bss_start"}
    failures = []
    if len(want) < 20:
        failures.append("only %d TLM_API declarations found in %s: the pattern no longer matches" % (len(want), a.header))
    if undecorated:
        failures.append("declared in %s without TLM_API (so not exported): %s" % (a.header, ", ".join(undecorated)))
    missing = sorted(want - have)
    extra = sorted(have - want)
    if missing:
        failures.append("declared but not exported: " + ", ".join(missing))
    if extra:
        failures.append("%d symbols exported beyond the public API, e.g. %s" % (len(extra), ", ".join(extra[:20])))
    print("libtinylm.so exports %d symbols; tinylm.h declares %d" % (len(have), len(want)))
    for f in failures:
        print("FAIL:", f)
    print("%d passed, %d failed" % (1 if not failures else 0, 1 if failures else 0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
