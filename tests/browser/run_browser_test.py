#!/usr/bin/python3
"""run_browser_test.py — runs test_report.mjs (tinylm's HTML reports in headless Chromium).

    run_browser_test.py --tinylm PATH --work DIR

Needs Node.js (18 or later) with npm, and Chromium (/usr/bin/chromium, or $TLM_CHROMIUM); when one
is missing the test FAILS and says what to install (apt: chromium nodejs npm; .ci/run installs them).
tests/browser/node_modules (puppeteer-core, pinned in package-lock.json) is installed with
`npm ci` when absent (from npm's cache when offline)."""
import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(msg):
    print("test_browser: " + msg, file=sys.stderr)
    return 1


def browser_tools(test_name="test_browser"):
    """(node, chromium) once Node.js, npm, Chromium and tests/browser/node_modules are there
    (node_modules installed with `npm ci` when absent); else None, having said what is missing"""
    node, npm = shutil.which("node"), shutil.which("npm")
    chromium = os.environ.get("TLM_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not node or not npm:
        fail("Node.js and npm are needed for the browser tests and were not found on PATH "
             "(apt-get install nodejs npm; .ci/run installs them)")
        return None
    if not os.access(chromium, os.X_OK):
        fail("Chromium is needed for the browser tests and %s is not there "
             "(apt-get install chromium, or set TLM_CHROMIUM to a Chromium/Chrome binary)" % chromium)
        return None
    if not os.path.isdir(os.path.join(HERE, "node_modules", "puppeteer-core")):
        print("%s: installing tests/browser/node_modules (npm ci)" % test_name)
        p = subprocess.run([npm, "ci", "--prefix", HERE, "--no-audit", "--no-fund", "--prefer-offline"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
        if p.returncode != 0:
            print(p.stdout, file=sys.stderr)
            fail("`npm ci --prefix tests/browser` failed (needs the npm registry or npm's cache)")
            return None
    return node, chromium


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tinylm", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    tools = browser_tools()
    if not tools:
        return 1
    node, chromium = tools
    p = subprocess.run([node, os.path.join(HERE, "test_report.mjs"), "--tinylm", os.path.abspath(a.tinylm),
                        "--work", os.path.abspath(a.work), "--chromium", chromium,
                        "--python", sys.executable], timeout=300)
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
