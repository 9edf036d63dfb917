#!/usr/bin/python3
"""run_experiment_pages.py --build DIR — opens every experiment's quick report.html (DIR/experiment_*/out/
report.html, written by the experiment_NAME tests) in headless Chromium (test_experiment_pages.mjs).
Fails, naming it, when an experiment of experiments/ has no page."""
import argparse
import glob
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_browser_test import browser_tools, fail  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    names = sorted(f[4:-3] for f in os.listdir(os.path.join(HERE, "..", "..", "experiments"))
                   if f.startswith("exp_") and f.endswith(".py"))
    pages = [os.path.join(a.build, "experiment_" + n, "out", "report.html") for n in names]
    missing = [p for p in pages if not os.path.exists(p)]
    if missing:
        return fail("no report.html from %s (run the experiment_NAME tests first)" % ", ".join(missing))
    tools = browser_tools("test_experiment_pages")
    if not tools:
        return 1
    node, chromium = tools
    return subprocess.run([node, os.path.join(HERE, "test_experiment_pages.mjs"), "--chromium", chromium] + pages,
                          timeout=300).returncode


if __name__ == "__main__":
    sys.exit(main())
