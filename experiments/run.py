#!/usr/bin/env python3
"""experiments/run.py — one command per experiment that measures a claim of the lessons.

    /usr/bin/python3 experiments/run.py --list
    /usr/bin/python3 experiments/run.py NAME [NAME ...|all] [--quick] [--out DIR] [--threads N]
                                        [--tinylm build/tinylm] [--cache DIR]

Each experiment writes into its output folder (default experiments/out/NAME/; with several
names, DIR/NAME): README.md (claim, command, tables, verdict), the figures (*.svg),
result.json ({"kind": "experiment", ...}, the schema `tinylm report` renders) and, when the
build has `tinylm report`, report.html. Trained models are cached in --cache (default
experiments/out/_models), keyed by their training arguments, and reused across experiments
and invocations. Runtime dependencies: Python 3 and NumPy. See experiments/README.md.
"""
import argparse
import importlib
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import common  # noqa: E402


def experiments():
    """{name: module} of every experiments/exp_*.py, in file-name order"""
    out = {}
    for f in sorted(os.listdir(HERE)):
        if f.startswith("exp_") and f.endswith(".py"):
            mod = importlib.import_module(f[:-3])
            out[getattr(mod, "NAME", f[4:-3])] = mod
    return out


def verdict_word(supported):
    return {True: "supported", False: "not supported", None: "inconclusive"}[supported]


def cell(v):
    """a value as the text of a Markdown table cell (a | in it would end the cell)"""
    return common.fmt(v).replace("|", "\\|")


def markdown(res, figure_files):
    md = ["# %s" % res["title"], "", "**Claim.** %s" % res["claim"], ""]
    if res.get("terms"):
        md += ["*In the lessons' terms.* %s" % res["terms"], ""]
    md += ["**Command.** `%s`" % res["command"], ""]
    md += ["**Verdict: %s.** %s" % (verdict_word(res["verdict"]["supported"]), res["verdict"]["text"]), ""]
    for t in res["tables"]:
        md += ["## %s" % t["title"], "", "| " + " | ".join(cell(str(c)) for c in t["columns"]) + " |",
               "| " + " | ".join("---" for _ in t["columns"]) + " |"]
        for r in t["rows"]:
            md.append("| " + " | ".join(cell(v) for v in r) + " |")
        md.append("")
    for fig, fn in zip(res["figures"], figure_files):
        md += ["## %s" % fig["title"], "", "![%s](%s)" % (fig["title"], fn), ""]
    if res["notes"]:
        md += ["## Notes", ""] + ["- " + n for n in res["notes"]] + [""]
    return "\n".join(md)


def run_one(name, mod, out, args, command):
    ctx = common.Context(name, out, quick=args.quick, threads=args.threads, tinylm=args.tinylm,
                         cache=args.cache, verbose=not args.silent)
    t = time.time()
    mod.run(ctx)
    secs = time.time() - t
    cached = [t for c, t in ctx.trainings if c]
    ctx.note("%s form, %d thread(s), %.0f s on %s%s." % (
        "quick" if args.quick else "full", args.threads, secs, machine(),
        "; %d of its %d trained models came from the cache (%.0f s of training when they were trained)"
        % (len(cached), len(ctx.trainings), sum(cached)) if cached else ""))
    res = ctx.result(mod, command)
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(res, f, indent=1, allow_nan=False)
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(markdown(res, ctx.figure_files))
    if ctx.has_subcommand("report"):
        p = ctx.tinylm("report", os.path.join(out, "result.json"), "--html", os.path.join(out, "report.html"),
                       check=False)
        if p.returncode != 0:
            raise SystemExit("tinylm report failed on %s: %s" % (os.path.join(out, "result.json"),
                                                                  p.stderr.strip()[-300:]))
    else:
        print("note: this build has no `tinylm report`; report.html skipped")
    print("== %s: %s" % (name, res["title"]))
    print("claim: %s" % res["claim"])
    for t in res["tables"][:1]:
        print("  " + " | ".join(str(c) for c in t["columns"]))
        for r in t["rows"][:12]:
            print("  " + " | ".join(common.fmt(v) for v in r))
    print("verdict: %s — %s" % (verdict_word(res["verdict"]["supported"]).upper(), res["verdict"]["text"]))
    print("output: %s (%.0f s)" % (out, secs))
    return res


def machine():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return "%s (%d cores visible)" % (model, os.cpu_count() or 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="experiment names, or all")
    ap.add_argument("--list", action="store_true", help="list the experiments")
    ap.add_argument("--quick", action="store_true", help="the small form (seconds; for tests)")
    ap.add_argument("--out", help="output folder (default experiments/out/NAME; with several names DIR/NAME)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tinylm", default=os.path.join(common.REPO, "build", "tinylm"))
    ap.add_argument("--cache", help="trained-model cache (default experiments/out/_models)")
    ap.add_argument("--silent", action="store_true", help="no progress lines on stderr")
    args = ap.parse_args()
    exps = experiments()
    if args.list or not args.names:
        for n, m in exps.items():
            print("%-22s %s" % (n, m.TITLE))
        return 0 if args.list else 2
    names = list(exps) if args.names == ["all"] else args.names
    for n in names:
        if n not in exps:
            print("unknown experiment %r; --list shows them" % n, file=sys.stderr)
            return 2
    if not os.path.isfile(args.tinylm):
        print("no tinylm program at %s (build it, or --tinylm PATH)" % args.tinylm, file=sys.stderr)
        return 2
    args.tinylm = os.path.abspath(args.tinylm)
    base = os.path.join(HERE, "out")
    if args.cache is None:
        args.cache = os.path.join(base, "_models")
    bad = 0
    for n in names:
        if args.out:
            out = args.out if len(names) == 1 else os.path.join(args.out, n)
        else:
            out = os.path.join(base, n)
        os.makedirs(out, exist_ok=True)
        command = "/usr/bin/python3 experiments/run.py %s%s" % (n, " --quick" if args.quick else "")
        try:
            run_one(n, exps[n], out, args, command)
        except Exception:  # one experiment's failure does not stop the others
            traceback.print_exc()
            print("== %s: FAILED" % n)
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
