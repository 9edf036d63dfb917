#!/usr/bin/python3
"""run_course_pages.py — runs test_course_pages.mjs (`tinylm lesson TOPIC --html` in headless Chromium).

    run_course_pages.py --tinylm PATH --work DIR

The same tools as run_browser_test.py (Node.js, npm, Chromium, tests/browser/node_modules); when one
is missing the test FAILS and says what to install."""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_browser_test import browser_tools  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tinylm", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    tools = browser_tools("test_course_pages")
    if not tools:
        return 1
    node, chromium = tools
    p = subprocess.run([node, os.path.join(HERE, "test_course_pages.mjs"), "--tinylm", os.path.abspath(a.tinylm),
                        "--work", os.path.abspath(a.work), "--chromium", chromium], timeout=400)
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
