#!/usr/bin/env python3
"""test_framework.py --work DIR — the experiments' shared code without training anything:
- svgplot: line plots (log axes, NaN and zero values left out of a log axis, more series than
  colours) and grouped bar plots are well-formed SVG, render with rsvg-convert to non-blank PNGs,
  and give every series a distinct (colour, marker, dash) style;
- common: geo_factor recovers the ratio of a geometric sequence (and ignores zeros), table values
  become strict JSON (NaN / inf as strings), TrainRun.divergence_step finds the first step above
  the first loss (after step 10) or the step a stopped run ended at, fmt formats cells;
- run.py: Markdown cells escape '|', and the experiment modules all have NAME, TITLE, CLAIM, run;
- exp_rmsnorm_vs_layernorm.bf16 rounds to nearest even as bfloat16 does."""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "experiments"))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import common  # noqa: E402
import run as runpy_  # noqa: E402
import svgplot  # noqa: E402
from test_experiment import png_inked_fraction  # noqa: E402

FAILS = []


def check(cond, what):
    print("%s %s" % ("ok  " if cond else "FAIL", what))
    if not cond:
        FAILS.append(what)


def render(svg, work, name):
    ET.fromstring(svg)
    path = os.path.join(work, name + ".svg")
    with open(path, "w") as f:
        f.write(svg)
    if not shutil.which("rsvg-convert"):
        return None
    png = path[:-4] + ".png"
    r = subprocess.run(["rsvg-convert", "-o", png, path], stderr=subprocess.PIPE)
    check(r.returncode == 0, name + ": rsvg-convert renders it")
    return png_inked_fraction(png)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    work = ap.parse_args().work
    os.makedirs(work, exist_ok=True)

    # --- svgplot
    xs = list(range(12))
    series = [svgplot.Series("series %d" % i, xs, [10.0 ** (-i / 3) * (1 + 0.1 * x) for x in xs]) for i in range(10)]
    series[1].ys[3] = float("nan")
    series[2].ys[4] = 0.0  # not drawable on a log axis
    svg = svgplot.line_plot(series, title="t", xlabel="x", ylabel="y", ylog=True, hlines=[(0.5, "ref")])
    got = render(svg, work, "line_log")
    if got:
        w, h, inked, colours = got
        check(w >= 600 and h >= 400 and 0.01 < inked < 0.6 and colours > 8,
              "log line plot: %dx%d, %.1f%% inked, %d colours" % (w, h, 100 * inked, colours))
    styles = set()
    for i in range(10):
        styles.add((svgplot.PALETTE[i % 8], svgplot.DASHES[(i + 3 * (i // 8)) % 8], svgplot.MARKERS[(i + i // 8) % 8]))
    check(len(styles) == 10, "10 series: 10 distinct (colour, dash, marker) styles")
    check("NaN" not in svg and "nan" not in svg.lower().replace("nan ", ""), "no NaN coordinates in the SVG")
    ticks = re.findall(r'text-anchor="end">([^<]+)</text>', svg)
    check(any(t.startswith("1e-") or t in ("0.01", "0.1", "1", "10") for t in ticks), "decade ticks on the log axis")
    svg = svgplot.line_plot([svgplot.Series("a", [1e-3, 1e-2, 1e-1], [3.0, 2.0, float("inf")])], xlog=True,
                            xticklabels={1e-3: "0.001", 1e-2: "0.01", 1e-1: "0.1"}, title="lr")
    render(svg, work, "line_xlog")
    check(">0.001<" in svg and ">0.1<" in svg, "x tick labels as given")
    svg = svgplot.bar_plot(["a long category name here", "b", "c"],
                           [svgplot.Series("one", None, [1.0, 2.0, float("nan")]),
                            svgplot.Series("two", None, [0.5, 3.0, 1.0])], title="bars", ylabel="v",
                           hlines=[(2.5, "line")])
    got = render(svg, work, "bars")
    if got:
        check(0.01 < got[2] < 0.6, "bar plot not blank (%.1f%% inked)" % (100 * got[2]))
    check(svg.count("<rect") >= 5 + 1, "one rect per finite bar (+ frame)")

    # --- common
    check(abs(common.geo_factor([1, 0.8, 0.64, 0.512]) - 0.8) < 1e-12, "geo_factor of 0.8^k is 0.8")
    check(abs(common.geo_factor([2.0, 0.0, 8.0]) - 2.0) < 1e-12, "geo_factor ignores zeros (slope over the rest)")
    check(math.isnan(common.geo_factor([0, 0, 1])), "geo_factor of one positive value is NaN")
    vals = [common._jsonable(v) for v in (float("nan"), float("inf"), np.float32(1.5), np.int64(3), True, None, "x")]
    check(vals == ["NaN", "inf", 1.5, 3, True, None, "x"], "table values as strict JSON: %s" % vals)
    json.dumps(vals, allow_nan=False)
    mk = lambda losses, rc=0: common.TrainRun("d", [{"step": i + 1, "loss": l} for i, l in enumerate(losses)], rc,
                                              "", 0)
    check(mk([4.0] + [3.0] * 20).divergence_step() is None, "no divergence")
    check(mk([4.0] + [3.0] * 11 + [4.5] + [3.0] * 5).divergence_step() == 13, "divergence at the step above the first")
    check(mk([4.0, 3.0, 2.0], rc=1).divergence_step() == 4, "a stopped run diverged at the step after its last")
    check(mk([4.0, 3.0], rc=1).val_loss != mk([4.0, 3.0], rc=1).val_loss, "a stopped run's val loss is NaN")
    check(common.fmt(1234567.0) == "1.23e+06" and common.fmt(0.5) == "0.5" and common.fmt(float("nan")) == "NaN"
          and common.fmt(True) == "yes", "fmt")

    # --- run.py
    check(runpy_.cell("|grad|") == "\\|grad\\|", "Markdown cells escape |")
    exps = runpy_.experiments()
    check(len(exps) >= 9, "%d experiments found" % len(exps))
    for n, m in exps.items():
        check(all(hasattr(m, a) for a in ("TITLE", "CLAIM", "run")) and m.__file__.endswith("exp_%s.py" % n),
              "%s: NAME = file suffix, TITLE, CLAIM, run" % n)

    # --- bf16 rounding (exp_rmsnorm_vs_layernorm)
    from exp_rmsnorm_vs_layernorm import bf16
    x = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -7, -3.0e-3, 65504.0], np.float32)
    want = np.array([1.0, 1.0, 1 + 2 ** -6, 1 + 2 ** -7, -0.0030059814453125, 65536.0], np.float32)
    check(np.array_equal(bf16(x), want), "bf16 rounds to nearest even: %s" % bf16(x))
    print("%d failure(s)" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
