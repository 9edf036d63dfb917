#!/usr/bin/python3
"""test_sweep.py — `tinylm sweep`: a grid of training runs, each a normal run directory.

    test_sweep.py --tinylm PATH --data tinyshakespeare.txt --work DIR [--mpi]

- 2 x 2 axes (a config switch and a training option) make 4 runs, named by their settings;
- each run equals the same `tinylm train` command run by hand (its final validation loss);
- summary.md lists every run's final loss and summary.svg renders (rsvg-convert, when present);
- a restarted sweep skips complete runs and trains the missing one;
- with --mpi: `mpirun -np 2 tinylm sweep` deals the runs to the ranks and gives the same summary;
- restarts, table-driven (RESTARTS): a run killed mid-run or during its final save (latest at
  a lower step, a temp folder left) is resumed, not skipped, to the same result as an
  uninterrupted sweep, its completeness judged against its own steps (a per-run steps axis);
  a grid whose set / train / preset was edited, or other data, refuses the sweep naming the
  setting and trains nothing; a bad preset, unknown keys, an unwritable summary are refused
  with exit 1 and a message; hostile run names are escaped in summary.md and summary.svg."""
import argparse
import copy
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

passed = failed = 0
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
# leak checks off for the ranks only: OpenMPI's unloaded plugins leave allocations LeakSanitizer
# cannot name (tests/train/test_mpi.py says more)
MPI_ENV = dict(ENV, ASAN_OPTIONS=(os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":"))
GRID = {"preset": "nanogpt-baby",
        "set": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64},
        "train": {"steps": 30, "batch": 4, "eval-every": 15, "eval-batches": 2, "save-every": 15, "log-every": 100},
        "axes": {"norm_placement": ["pre", "post"], "lr": [0.001, 0.003]}}


def check(ok, what, detail=""):
    global passed, failed
    passed += bool(ok)
    failed += not ok
    print("%-72s %s%s" % (what, "ok" if ok else "FAIL", ("  " + str(detail)[-800:]) if (detail and not ok) else ""))
    return ok


def run(args, env=ENV, timeout=600):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, env=env)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def md_cells(line):
    """the cells of a Markdown table row, their escapes undone (a backslash escapes the next
    character, | included; &lt; &gt; &amp; are entities)"""
    cells, cur, i = [], "", 0
    line = line.strip()
    if not (line.startswith("|") and line.endswith("|")):
        return None
    line = line[1:]
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line):
            cur += line[i + 1]
            i += 2
            continue
        if ch == "|":
            cells.append(cur.strip())
            cur = ""
        else:
            cur += ch
        i += 1
    ent = lambda c: c.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return [ent(c) for c in cells] if cur.strip() == "" else None


def summary(out):
    """summary.md's rows: run name -> final loss"""
    rows = {}
    for line in open(os.path.join(out, "summary.md")).read().splitlines()[2:]:
        cells = md_cells(line)
        if not cells or len(cells) != 2:
            return {"(malformed row)": line}
        rows[cells[0]] = float(cells[1])
    return rows


# the restart cases' grid: one tiny run whose last step comes from a per-run "steps" axis (40),
# not from "train" (10): a sweep that judged completeness by train.steps skipped it unfinished
SMALL = {"preset": "nanogpt-baby",
         "set": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64},
         "train": {"steps": 10, "batch": 4, "seq": 32, "warmup": 5, "eval-every": 20, "eval-batches": 2,
                   "save-every": 10, "log-every": 100},
         "axes": {"steps": [40]}}
RUN = "000-steps=40"


def edited(**changes):
    """SMALL with changes: section=(key, value) or a top-level key=value"""
    g = copy.deepcopy(SMALL)
    for k, v in changes.items():
        if isinstance(v, tuple):
            g[k][v[0]] = v[1]
        else:
            g[k] = v
    return g


def hostile_grid():
    """two runs whose names hold | * _ ` \\ < > & ' " (rope_scaling takes a dict as text; a
    "default" one with an extra key changes nothing, so both train)"""
    g = copy.deepcopy(SMALL)
    g["train"]["steps"] = 3
    g["axes"] = {"rope_scaling": [json.dumps({"rope_type": "default", "tag": "a|b*c_d`e\\f"}),
                                  json.dumps({"rope_type": "default", "tag": "<i>&amp;</i> 'q'"})]}
    return g


def checkpoint_step(run):
    try:
        return json.load(open(os.path.join(run, "latest", "trainer.json")))["step"]
    except (OSError, ValueError, KeyError):
        return None


# (name, grid, how the out folder starts, extra env of the first sweep, the restart's expected exit code,
#  texts its stderr must hold, a check of the result: f(out, stdout, reference summary) -> (ok, detail))
# start: "fresh", "complete" (a copy of the uninterrupted sweep), or a function of the out folder
def resumed_to_the_end(out, so, ref):
    run = os.path.join(out, RUN)
    temps = glob.glob(os.path.join(run, ".step-*"))
    ok = ("resuming" in so and "complete, skipped" not in so and checkpoint_step(run) == 40 and not temps
          and summary(out) == ref)
    return ok, (so, checkpoint_step(run), temps, summary(out), ref)


def untouched(out, so, ref):
    run = os.path.join(out, RUN)
    ok = checkpoint_step(run) == 40 and summary(out) == ref and "[rank 0]" not in so
    return ok, (so, checkpoint_step(run))


def nothing_made(out, so, ref):
    return not os.path.exists(out), os.listdir(out) if os.path.exists(out) else ""


def summary_dir(out):
    os.remove(os.path.join(out, "summary.md"))
    os.makedirs(os.path.join(out, "summary.md"))


def escaped(out, so, ref):
    names = sorted(os.path.basename(d) for d in glob.glob(os.path.join(out, "0*")))
    rows = summary(out)
    try:
        svg = ET.parse(os.path.join(out, "summary.svg")).getroot()  # (well-formed XML)
    except (OSError, ET.ParseError) as e:
        return False, "summary.svg: %s" % e
    texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    ok = len(names) == 2 and sorted(rows) == names and all(n in texts for n in names) and "|" in names[0] \
        and "<" in names[1]
    return ok, (names, rows, texts)


RESTARTS = [
    ("killed mid-run (latest at 20, metrics at 30; per-run steps axis 40, train.steps 10)", SMALL, "fresh",
     {"TLM_TEST_CRASH_IN_SAVE": "30"}, 0, [], resumed_to_the_end),
    ("killed during the final save (latest at 30 of 40, a temp folder left)", SMALL, "fresh",
     {"TLM_TEST_CRASH_IN_SAVE": "40"}, 0, [], resumed_to_the_end),
    ("edited grid: set.hidden_size", edited(set=("hidden_size", 48)), "complete", None, 1,
     ["hidden_size = 32 in the run, 48 now", "Nothing was trained"], untouched),
    ("edited grid: train.warmup", edited(train=("warmup", 7)), "complete", None, 1,
     ["--warmup is 5 in the run, 7 now", "Nothing was trained"], untouched),
    ("edited grid: preset", edited(preset="llama-baby"), "complete", None, 1,
     ["the model config differs", "norm_type"], untouched),
    ("other data than the runs were trained on", SMALL, "complete", "other data", 1,
     ["trained on other data"], untouched),
    ("preset given as a list", edited(preset=["lesson15"]), "fresh", None, 1,
     ['"preset" = ["lesson15"] must be the name of one preset'], nothing_made),
    ("unknown preset", edited(preset="lesson16"), "fresh", None, 1, ['unknown preset "lesson16"'], nothing_made),
    ("unknown grid key", dict(SMALL, axis={"lr": [0.1]}), "fresh", None, 1, ['unknown key "axis"'], nothing_made),
    ("unknown training option", edited(train=("stepz", 5)), "fresh", None, 1,
     ['unknown training option "stepz"'], nothing_made),
    ("unknown config switch", edited(set=("hiden_size", 32)), "fresh", None, 1, ['unknown key "hiden_size"'],
     nothing_made),
    ("a training option under set", edited(set=("lr", 0.1)), "fresh", None, 1, ['"lr" is a training option'],
     nothing_made),
    ("unwritable summary (summary.md is a folder)", SMALL, summary_dir, None, 1,
     ["the summary cannot be written", "summary.md"], lambda out, so, ref: (os.path.isdir(os.path.join(out, "summary.md")), "")),
    ("the summary would replace the grid (--grid OUT/summary.svg)", SMALL, "grid as summary", None, 1,
     ["the summary cannot be written", "summary.svg"],
     lambda out, so, ref: (json.load(open(os.path.join(out, "summary.svg"))) == SMALL, "the grid was overwritten")),
    ("hostile run names", hostile_grid(), "fresh", None, 0, [], escaped),
]


def restarts(tl, data, work):
    base = os.path.join(work, "restarts")
    os.makedirs(base)
    # the uninterrupted sweep every case compares with (or starts from)
    grid = os.path.join(base, "grid.json")
    json.dump(SMALL, open(grid, "w"))
    ref_out = os.path.join(base, "reference")
    rc, so, se = run([tl, "sweep", "--grid", grid, "--data", data, "--out", ref_out])
    if not check(rc == 0 and checkpoint_step(os.path.join(ref_out, RUN)) == 40,
                 "restarts: the uninterrupted sweep (steps axis 40, train.steps 10)", se):
        return
    ref = summary(ref_out)
    other = os.path.join(base, "other.txt")
    with open(data, "rb") as f, open(other, "wb") as g:
        g.write(f.read()[::-1])  # the same bytes reversed: the same size and vocabulary, other data
    for i, (name, g, start, env1, want_rc, texts, ok_fn) in enumerate(RESTARTS):
        out = os.path.join(base, "case%02d" % i)
        gpath = os.path.join(base, "case%02d.json" % i)
        case_data = data
        if start == "grid as summary":  # (the grid file is where the summary would go)
            shutil.copytree(ref_out, out, symlinks=True)
            gpath = os.path.join(out, "summary.svg")
        json.dump(g, open(gpath, "w"))
        first = ""
        if start == "complete":
            shutil.copytree(ref_out, out, symlinks=True)
        elif callable(start):
            shutil.copytree(ref_out, out, symlinks=True)
            start(out)
        if env1 == "other data":
            case_data = other
        elif env1:  # a first sweep killed as the case says
            rc1, so1, se1 = run([tl, "sweep", "--grid", gpath, "--data", data, "--out", out], env=dict(ENV, **env1))
            first = "first sweep: rc %d %s" % (rc1, se1[-300:])
            if rc1 != -9:
                check(False, "restart case: %s (the first sweep was to be killed)" % name, first)
                continue
        try:
            rc, so, se = run([tl, "sweep", "--grid", gpath, "--data", case_data, "--out", out], timeout=120)
        except subprocess.TimeoutExpired:
            check(False, "restart case: %s" % name, "timed out")
            continue
        ok, detail = ok_fn(out, so, ref)
        missing = [t for t in texts if t not in se]
        check(rc == want_rc and not missing and ok, "restart case: %s -> exit %d" % (name, want_rc),
              "rc %d, missing %s; %s; %s; %s" % (rc, missing, detail, se[-600:], first))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tinylm", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--mpi", action="store_true")
    a = ap.parse_args()
    tl, work = os.path.abspath(a.tinylm), os.path.abspath(a.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    grid = os.path.join(work, "grid.json")
    json.dump(GRID, open(grid, "w"))
    out = os.path.join(work, "sweep")
    rc, so, se = run([tl, "sweep", "--grid", grid, "--data", a.data, "--out", out])
    check(rc == 0, "sweep of 2 x 2 runs", se)
    if rc:
        return 1
    rows = summary(out)
    want = ["000-norm_placement=pre,lr=0.001", "001-norm_placement=post,lr=0.001",
            "002-norm_placement=pre,lr=0.003", "003-norm_placement=post,lr=0.003"]
    check(sorted(rows) == want, "4 runs named by their settings", sorted(rows))
    # run 003 by hand: the same final validation loss
    by_hand = os.path.join(work, "by_hand")
    cmd = [tl, "train", "--data", a.data, "--preset", "nanogpt-baby", "--out", by_hand, "--sample", "0",
           "--set", "norm_placement=post", "--lr", "0.003"]
    for k, v in GRID["set"].items():
        cmd += ["--set", "%s=%s" % (k, v)]
    for k, v in GRID["train"].items():
        cmd += ["--" + k, str(v)]
    rc, _, se = run(cmd)
    last = [json.loads(l) for l in open(os.path.join(by_hand, "metrics.jsonl"))][-1] if rc == 0 else {}
    check(rc == 0 and abs(last.get("val_loss", 0) - rows[want[3]]) < 5e-5,
          "a run equals the same train command by hand (%s vs %s)" % (last.get("val_loss"), rows[want[3]]), se)
    if shutil.which("rsvg-convert"):
        png = os.path.join(work, "summary.png")
        rc, _, se = run(["rsvg-convert", "-o", png, os.path.join(out, "summary.svg")])
        check(rc == 0 and os.path.getsize(png) > 1000, "summary.svg renders", se)
    shutil.rmtree(os.path.join(out, want[1]))
    rc, so, se = run([tl, "sweep", "--grid", grid, "--data", a.data, "--out", out])
    check(rc == 0 and so.count("complete, skipped") == 3 and summary(out) == rows,
          "a restarted sweep skips the 3 complete runs and redoes the missing one", so + se)
    restarts(tl, a.data, work)
    if a.mpi:
        out2 = os.path.join(work, "sweep_mpi")
        rc, so, se = run(["mpirun", "-np", "2", "--bind-to", "none", tl, "sweep", "--grid", grid, "--data", a.data,
                          "--out", out2], env=MPI_ENV)
        check(rc == 0 and "[rank 1]" in so and summary(out2) == rows,
              "mpirun -np 2 sweep: runs dealt to both ranks, the same summary", so[-500:] + se[-500:])
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
