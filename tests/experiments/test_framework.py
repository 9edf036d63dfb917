#!/usr/bin/env python3
"""test_framework.py --work DIR [--tinylm PATH] — the experiments' shared code without training anything:
- svgplot: line plots (log axes, NaN and zero values left out of a log axis, more series than
  colours) and grouped bar plots are well-formed SVG, render with rsvg-convert to non-blank PNGs,
  and give every series a distinct (colour, marker, dash) style;
- common: geo_factor recovers the ratio of a geometric sequence (and ignores zeros), table values
  become strict JSON (NaN / inf as strings), TrainRun.divergence_step finds the first step above
  the first loss (after step 10) or the step a stopped run ended at, fmt formats cells;
- common.Context.train's cache, with a fake tinylm (and the real one with --tinylm): a run that
  finished or that the engine stopped on a non-finite loss is cached, its record saying which; a
  run that failed otherwise (exit 1 without that report, no output, killed) raises and is not
  cached; records from before the status field and runs whose files are gone are re-checked;
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


FAKE_TINYLM = r"""#!%s
# a stand-in for `tinylm train`: TLM_FAKE_MODE says how the run ends; every call is logged
import json, os, sys
a = sys.argv[1:]
out, steps, mode = a[a.index("--out") + 1], int(a[a.index("--steps") + 1]), os.environ["TLM_FAKE_MODE"]
with open(os.environ["TLM_FAKE_LOG"], "a") as f:
    f.write(mode + "\n")
def metrics(n):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "metrics.jsonl"), "w") as f:
        for i in range(n):
            f.write(json.dumps({"step": i + 1, "loss": 4.0 - 0.1 * i}) + "\n")
if mode == "finished":
    metrics(steps)
    os.makedirs(os.path.join(out, "step-%%07d" %% steps))
    with open(os.path.join(out, "latest"), "w") as f:
        f.write("step-%%07d\n" %% steps)
    sys.exit(0)
if mode == "diverged":
    metrics(3)
    sys.exit("tinylm train: step 4: the loss is NaN; stopping without saving (no checkpoint of this run has been "
             "saved yet, so %%s holds none to resume from)" %% out)
if mode == "disk-full":  # exit 1, as every failed command does
    metrics(2)
    sys.exit("tinylm train: writing %%s/metrics.jsonl: No space left on device" %% out)
if mode == "no-output":
    sys.exit(0)
if mode == "killed":
    metrics(2)
    os.kill(os.getpid(), 9)
"""


def test_train_cache(work, tinylm):
    """Context.train caches runs that finished or that the engine stopped on a non-finite loss
    (saying which), and raises on any other failure without caching it"""
    root = os.path.join(work, "cache_test")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    fake, log = os.path.join(root, "fake_tinylm"), os.path.join(root, "calls.log")
    with open(fake, "w") as f:
        f.write(FAKE_TINYLM % sys.executable)
    os.chmod(fake, 0o755)
    os.environ["TLM_FAKE_LOG"] = log
    cache = os.path.join(root, "models")
    ctx = common.Context("cache", os.path.join(root, "out"), tinylm=fake, cache=cache, verbose=False)

    def calls():
        return len(open(log).read().split()) if os.path.exists(log) else 0

    def train(mode, steps):
        os.environ["TLM_FAKE_MODE"] = mode
        before = calls()
        try:
            r, err = ctx.train(preset="lesson15", steps=steps), None
        except RuntimeError as e:
            r, err = None, str(e)
        return r, err, calls() - before

    def records():
        out = {}
        for d in os.listdir(cache):
            p = os.path.join(cache, d, "experiment_done.json")
            if os.path.isfile(p):
                out[d] = json.load(open(p))
        return out

    for mode, steps, words in (("disk-full", 11, "No space left on device"), ("no-output", 12, "metrics.jsonl"),
                               ("killed", 13, "killed by signal 9")):
        r, err, n = train(mode, steps)
        check(r is None and err and words in err and "not cached" in err and n == 1,
              "cache: a run that fails (%s) raises, naming the failure: %s" % (mode, err))
        r, err, n = train(mode, steps)
        check(r is None and n == 1, "cache: ... and is not cached (the next call runs it again)")
    check(not records(), "cache: no record of the failed runs")
    r, err, n = train("diverged", 21)
    check(r is not None and not r.ok and r.status == "diverged" and r.divergence_step() == 4 and n == 1,
          "cache: a run the engine stopped on a NaN loss is returned as diverged at step 4 (%s)" % err)
    r, err, n = train("diverged", 21)
    check(r is not None and r.status == "diverged" and r.divergence_step() == 4 and n == 0, "cache: ... and cached")
    r, err, n = train("finished", 22)
    check(r is not None and r.ok and r.status == "finished" and len(r.metrics) == 22 and n == 1, "cache: a finished run (%s)" % err)
    r, err, n = train("finished", 22)
    check(r is not None and r.status == "finished" and n == 0, "cache: ... is cached")
    recs = records()
    check(sorted(v.get("status") for v in recs.values()) == ["diverged", "finished"] and
          all("No space" not in v.get("stderr_tail", "") for v in recs.values()),
          "cache: the records say finished / diverged: %s" % sorted(v.get("status") for v in recs.values()))
    # records written before the status field: a failed run is dropped and run again, a stopped one kept
    for d, v in recs.items():
        v.pop("status")
        if v["rc"] == 0:
            v["rc"], v["stderr_tail"] = 1, "tinylm train: writing metrics.jsonl: No space left on device\n"
        json.dump(v, open(os.path.join(cache, d, "experiment_done.json"), "w"))
    r, err, n = train("finished", 22)
    check(r is not None and r.status == "finished" and n == 1, "cache: an old record of a failed run is run again (%s)" % err)
    r, err, n = train("diverged", 21)
    check(r is not None and r.status == "diverged" and n == 0, "cache: an old record of a run stopped on NaN is kept")
    # a cached run whose files went missing is run again
    for d in os.listdir(cache):
        if os.path.isfile(os.path.join(cache, d, "latest")):
            os.remove(os.path.join(cache, d, "latest"))
    r, err, n = train("finished", 22)
    check(r is not None and r.status == "finished" and n == 1, "cache: a finished run whose checkpoint is gone is run again")

    if not tinylm:
        print("note: no --tinylm; the cache's real runs are skipped")
        return
    small = os.path.join(root, "small.txt")
    with open(os.path.join(REPO, "data", "tinyshakespeare.txt"), encoding="utf-8") as f:
        open(small, "w").write(f.read(20000))
    real = common.Context("cache", os.path.join(root, "out"), tinylm=tinylm, cache=cache, verbose=False)
    opts = {"tokenizer": "chars", "seq": 16, "batch": 2}
    sets = {"num_hidden_layers": 1, "num_attention_heads": 2}
    r = real.train(preset="lesson15", sets=sets, steps=30, data=small, opts=dict(opts, lr=1e6))
    check(r.status == "diverged" and not r.ok and r.divergence_step() == len(r.metrics) + 1,
          "cache, the engine: lr 1e6 stops on a non-finite loss, recorded as diverged at step %s" % r.divergence_step())
    r = real.train(preset="lesson15", sets=sets, steps=3, data=small, opts=opts)
    check(r.status == "finished" and r.ok and len(r.metrics) == 3, "cache, the engine: a 3-step run finished")
    # a real failure that is not a divergence: the engine exits 1 naming the missing file
    try:
        real.train(preset="lesson15", sets=sets, steps=2, data=os.path.join(root, "no-such-data.txt"), opts=opts)
        err = None
    except RuntimeError as e:
        err = str(e)
    check(err is not None and "no-such-data.txt" in err and "not cached" in err and not any(
          "no-such-data" in json.dumps(v) for v in records().values()),
          "cache, the engine: a run that cannot start (missing data) raises and is not cached: %s" % err)

    # train_checkpoints: one run that stops at each kept step and resumes; the same losses as the
    # plain run of the same arguments, a checkpoint at each step; an interrupted one continues
    plain = real.train(preset="lesson15", sets=sets, steps=6, data=small, opts=dict(opts, **{"eval-every": 2}))
    sr, kept = real.train_checkpoints(preset="lesson15", sets=sets, steps=6, data=small,
                                      opts=dict(opts, **{"eval-every": 2}), at=[2, 4])
    check([s for s, _ in kept] == [2, 4, 6] and all(os.path.isfile(os.path.join(p, "model.safetensors")) or
                                                    os.path.isfile(os.path.join(p, "latest", "model.safetensors"))
                                                    for _, p in kept)
          and [m["loss"] for m in sr.metrics] == [m["loss"] for m in plain.metrics],
          "train_checkpoints: checkpoints at 2, 4, 6 and the plain run's losses step for step")
    d = os.path.dirname(kept[0][1])
    os.remove(os.path.join(d, "experiment_done.json"))  # as if interrupted after the last stop: resumes to 6
    shutil.rmtree(kept[1][1])
    sr2, kept2 = real.train_checkpoints(preset="lesson15", sets=sets, steps=6, data=small,
                                        opts=dict(opts, **{"eval-every": 2}), at=[2, 4])
    check(os.path.isdir(kept2[1][1]) and [m["loss"] for m in sr2.metrics] == [m["loss"] for m in plain.metrics],
          "train_checkpoints: a run without its record is trained again to the same losses")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--tinylm", help="the engine, for the training cache's real runs (skipped without it)")
    a = ap.parse_args()
    work, tinylm = a.work, a.tinylm
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
    # a ladder of learning rates: labels that would print over each other are left out (the last kept);
    # legends wrap long labels instead of cutting them
    lrs = [1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 1e-1]
    long_label = "Gemma 2: 50 / 30, lr 0.003 and a long tail of words"
    svg = svgplot.line_plot([svgplot.Series(long_label, lrs, [1.0 + i for i in range(10)])], xlog=True,
                            xticklabels={lr: "%g" % lr for lr in lrs})
    xs = [float(x) for x in re.findall(r'<text x="([0-9.]+)" y="[0-9]+" text-anchor="middle">[0-9.e-]+</text>', svg)]
    labs = re.findall(r'text-anchor="middle">([0-9.e-]+)</text>', svg)
    check(labs and labs[-1] == "0.1" and "0.0001" in labs and "0.0002" not in labs and
          all(b - a >= 3.6 * 12 for a, b in zip(xs, xs[1:])), "x tick labels that would overlap are left out")
    words = " ".join(re.findall(r'<text x="[0-9]+" y="[0-9]+" font-size="12">([^<]*)</text>', svg))
    check(words == long_label, "a long legend label is wrapped, not cut")
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

    # --- the training cache (Context.train): a fake tinylm, then the real one
    test_train_cache(work, tinylm)

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
