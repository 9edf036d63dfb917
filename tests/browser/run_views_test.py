#!/usr/bin/python3
"""run_views_test.py — the Python package's HTML views in headless Chromium: make_views.py writes
the pages (through libtinylm.so), test_views.mjs checks them (puppeteer-core, as test_report.mjs).

    run_views_test.py --lib build/libtinylm.so --work DIR

Needs what run_browser_test.py needs (Node.js + npm, Chromium, tests/browser/node_modules: installed
with `npm ci` when absent); without them the test FAILS saying what to install."""
import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_browser_test import fail  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    node, npm = shutil.which("node"), shutil.which("npm")
    chromium = os.environ.get("TLM_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not node or not npm:
        return fail("Node.js and npm are needed for the browser tests and were not found on PATH "
                    "(apt-get install nodejs npm; .ci/run installs them)")
    if not os.access(chromium, os.X_OK):
        return fail("Chromium is needed for the browser tests and %s is not there "
                    "(apt-get install chromium, or set TLM_CHROMIUM to a Chromium/Chrome binary)" % chromium)
    if not os.path.isdir(os.path.join(HERE, "node_modules", "puppeteer-core")):
        print("test_browser_views: installing tests/browser/node_modules (npm ci)")
        p = subprocess.run([npm, "ci", "--prefix", HERE, "--no-audit", "--no-fund", "--prefer-offline"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
        if p.returncode != 0:
            print(p.stdout, file=sys.stderr)
            return fail("`npm ci --prefix tests/browser` failed (needs the npm registry or npm's cache)")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    p = subprocess.run([sys.executable, os.path.join(HERE, "make_views.py"), "--lib", a.lib, "--out", a.work], timeout=300)
    if p.returncode != 0:
        return fail("make_views.py failed (exit %d)" % p.returncode)
    p = subprocess.run([node, os.path.join(HERE, "test_views.mjs"), "--pages", os.path.abspath(a.work),
                        "--chromium", chromium], timeout=300)
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
