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
from run_browser_test import browser_tools, fail  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    tools = browser_tools("test_browser_views")
    if not tools:
        return 1
    node, chromium = tools
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
