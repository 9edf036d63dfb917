#!/usr/bin/python3
"""test_sweep.py — `tinylm sweep`: a grid of training runs, each a normal run directory.

    test_sweep.py --tinylm PATH --data tinyshakespeare.txt --work DIR [--mpi]

- 2 x 2 axes (a config switch and a training option) make 4 runs, named by their settings;
- each run equals the same `tinylm train` command run by hand (its final validation loss);
- summary.md lists every run's final loss and summary.svg renders (rsvg-convert, when present);
- a restarted sweep skips complete runs and trains the missing one;
- with --mpi: `mpirun -np 2 tinylm sweep` deals the runs to the ranks and gives the same summary."""
import argparse
import json
import os
import shutil
import subprocess
import sys

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


def run(args, env=ENV):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600, env=env)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def summary(out):
    rows = {}
    for line in open(os.path.join(out, "summary.md")).read().splitlines()[2:]:
        name, loss = [c.strip() for c in line.strip("|").split("|")]
        rows[name] = float(loss)
    return rows


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
