"""test_verdicts.py — the verdict rules of post_norm_warmup, residual_init and layer_deletion on
numbers made up to reach each branch (the experiments' quick runs check that the page's verdict is
the rule applied to the page's own numbers: their check()); and every published verdict of
docs/experiments.md is its experiment's rule (judge()) applied to the tables published beside it.
Seconds, no training."""
import importlib
import math
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "experiments"))

import exp_layer_deletion  # noqa: E402
import exp_norm_placement  # noqa: E402
import exp_post_norm_warmup  # noqa: E402
import exp_residual_init  # noqa: E402

failed = 0


def check(ok, what, detail=""):
    global failed
    failed += not ok
    print("%-90s %s%s" % (what, "ok" if ok else "FAIL", ("  " + str(detail)) if not ok else ""))


def warmup_cases():
    J = exp_post_norm_warmup.judge
    widths, lrs = [64, 512], [5e-4, 1e-3]
    grad = {(d, p): r for d, p, r in [(64, "post", 0.9), (64, "pre", 0.3), (512, "post", 2.0), (512, "pre", 0.3)]}

    def st(post_nowarm_512, post_warm=("trains", "trains"), pre_nowarm="trains"):
        s = {}
        for d in widths:
            for i, lr in enumerate(lrs):
                s[(d, "post", True, lr)] = post_warm[i]
                s[(d, "post", False, lr)] = post_nowarm_512[i] if d == 512 else "trains"
                s[(d, "pre", True, lr)] = "trains"
                s[(d, "pre", False, lr)] = pre_nowarm
        return s

    sup, post, pre, text = J(widths, lrs, st(("trains", "diverged")), grad)
    check(sup is True and post[512] == "needs warmup" and post[64] == "does not need warmup" and pre[512] == "yes",
          "post_norm_warmup: warmup rescues Post-Norm at the widest width only -> supported", text)
    check("grows with the width" in text, "post_norm_warmup: the gradient ratio's trend in d is named", text)
    one = {k: v for k, v in grad.items() if k[0] == 512}
    sup1, _, _, text1 = J([512], lrs, st(("trains", "diverged")), one)
    check("one width only" in text1 and "grows" not in text1, "post_norm_warmup: one width states no trend", text1)
    sup, post, pre, text = J(widths, lrs, st(("trains", "trains")), grad)
    check(sup is False, "post_norm_warmup: Post-Norm trains without warmup wherever it does with -> not supported", text)
    sup, post, pre, text = J(widths, lrs, st(("trains", "diverged"), pre_nowarm="diverged"), grad)
    check(sup is None and pre[512] == "no", "post_norm_warmup: Pre-Norm needs warmup too -> inconclusive", text)
    sup, post, pre, text = J(widths, lrs, st(("stuck", "stuck"), post_warm=("stuck", "stuck")), grad)
    check(sup is None and post[512] == "undetermined", "post_norm_warmup: Post-Norm never trains -> inconclusive", text)
    # a grid cut short: the words the missing cells cannot change, 'open' where they could
    lrs3 = [5e-4, 1e-3, 2e-3]
    g1 = {(512, "post"): 0.35, (512, "pre"): 0.17}
    cut = {(512, "post", False, 2e-3): "stuck", (512, "post", True, 2e-3): "stuck",
           (512, "post", False, 1e-3): "stuck", (512, "post", True, 1e-3): "trains",
           (512, "pre", False, 2e-3): "trains", (512, "pre", False, 1e-3): "trains", (512, "pre", False, 5e-4): "trains",
           (512, "pre", True, 1e-3): "trains"}
    sup, post, pre, text = J([512], lrs3, cut, g1)
    check(sup is True and post[512] == "needs warmup" and pre[512] == "yes" and "Not run (4 of 12 cells)" in text
          and "d 512 post without warmup lr 0.0005" in text,
          "post_norm_warmup: 8 of 12 cells decide it (Pre-Norm trains without warmup at every lr) -> supported, "
          "the 4 not run listed", text)
    less = {k: v for k, v in cut.items() if k != (512, "pre", False, 5e-4)}
    sup, post, pre, text = J([512], lrs3, less, g1)
    check(sup is None and pre[512] == "open", "post_norm_warmup: Pre-Norm at lr 5e-4 not run -> open, inconclusive",
          text)
    only = {k: v for k, v in cut.items() if k[3] == 2e-3}
    sup, post, pre, text = J([512], lrs3, only, g1)
    check(sup is None and post[512] == "open", "post_norm_warmup: Post-Norm stuck either way at the one lr run -> open",
          text)
    full = dict(st(("trains", "trains")))
    del full[(512, "post", True, 1e-3)]  # (without warmup it trains there: the cell cannot make a gap)
    sup, post, pre, text = J(widths, lrs, full, grad)
    check(sup is False and post[512] == "does not need warmup",
          "post_norm_warmup: a missing cell that cannot change the word -> still not supported", text)
    del full[(512, "post", False, 5e-4)]  # (with warmup it trains there: without, it might not)
    sup, post, pre, text = J(widths, lrs, full, grad)
    check(sup is None and post[512] == "open" and post[64] == "does not need warmup",
          "post_norm_warmup: no gap anywhere but a cell missing that could make one -> open, not 'not supported'", text)


def residual_init_cases():
    J = exp_residual_init.judge
    depths = [6, 48]
    sup, text = J(depths, [1e-3, 1e-3], [1e-3 + 6e-3, 1e-3 + 48e-3], [1e-3, 1e-3], [2e-3, 2.5e-3])
    check(sup is True and "depth^1.00" in text, "residual_init: linear added variance, flat scaled -> supported", text)
    # the measurement: growth ~ depth^1.4
    add6 = 6e-3
    add48 = add6 * 8 ** 1.4
    sup, text = J(depths, [1e-3, 1e-3], [1e-3 + add6, 1e-3 + add48], [1e-3, 1e-3], [2e-3, 2.5e-3])
    check(sup is False and "depth^1.40" in text and "faster than linear" in text,
          "residual_init: depth^1.4 is not 'about linear' -> not supported, and says so", text)
    sup, text = J(depths, [1e-3, 1e-3], [1e-3 + 6e-3, 1e-3 + 48e-3], [1e-3, 1e-3], [2e-3, 9e-3])
    check(sup is False and "part 2 fails" in text, "residual_init: the scaled variance grows 4.5x -> not supported", text)


def layer_deletion_cases():
    J = exp_layer_deletion.judge
    # the docs' full-form numbers: stories260K's middle blocks cost 0.53-1.07 nats on a loss of 1.22
    rows = [["pre, 4 layers", 1.999, 1.854, 0.2811, 0.329, 0.09694, 0, 3],
            ["pre, 8 layers", 1.966, 0.7781, 0.06963, 0.1273, 0.1263, 0, 3],
            ["sandwich, 4 layers", 2.0, 1.0, 0.5, 0.9, 0.4, 0, 3],
            ["stories260K (pre, 5 layers)", 1.22, 2.5, 0.8, 1.07, 0.53, 0, 4]]
    sup, text = J(rows)
    check(sup is False and "stories260K" in text.split("Not modest in:")[-1],
          "layer_deletion: stories260K's 0.53-1.07 nats on 1.22 are not modest -> not supported", text)
    sup, text = J(rows[1:3])
    check(sup is True, "layer_deletion: every Pre-Norm model's later blocks <= 10% of its loss -> supported (sandwich "
          "not judged)", text)
    sup, text = J(rows[:2])
    check(sup is None, "layer_deletion: a later block at 16% of the loss -> inconclusive", text)
    sup, text = J([["pre, 4 layers", 2.0, 0.1, 0.05, 0.3, 0.05, 2, 0]])
    check(sup is False and "block 2 is the worst" in text, "layer_deletion: block 0 not the worst -> not supported", text)


def _cell(c):
    """a Markdown cell as run.py's fmt() wrote it, back to a value"""
    c = c.strip().replace("\\|", "|")
    if c in ("yes", "no"):
        return c == "yes"
    if c in ("NaN", "inf", "-inf"):
        return float(c.lower())
    if re.fullmatch(r"-?\d+", c):
        return int(c)
    try:
        return float(c)
    except ValueError:
        return c


def _tables(sec):
    """[{title, columns, rows}] of a docs section, each table's title the bold line above it"""
    out, lines = [], sec.split("\n")
    for i, ln in enumerate(lines):
        if ln.startswith("| ") and i + 1 < len(lines) and lines[i + 1].startswith("| ---"):
            j = i - 1
            while j >= 0 and not lines[j].startswith("**"):
                j -= 1
            rows, k = [], i + 2
            while k < len(lines) and lines[k].startswith("|"):
                rows.append([_cell(c) for c in re.split(r"(?<!\\)\|", lines[k].strip())[1:-1]])
                k += 1
            out.append({"title": lines[j].strip("*") if j >= 0 else "", "rows": rows,
                        "columns": [c.strip() for c in ln.strip().strip("|").split(" | ")]})
    return out


def published_cases():
    """each experiment's section of docs/experiments.md: the verdict word it states is judge() on the
    tables it shows (the numbers there are 4 significant digits, so the word is compared, not the text)"""
    md = open(os.path.join(ROOT, "docs", "experiments.md"), encoding="utf-8").read()
    word = {True: "supported", False: "not supported", None: "inconclusive"}
    names = re.findall(r'<a id="(\w+)"></a>', md)
    check(len(names) == len([f for f in os.listdir(os.path.join(ROOT, "experiments")) if f.startswith("exp_")]),
          "docs/experiments.md has a section per experiment", names)
    for n in names:
        a = md.index('<a id="%s"></a>' % n)
        b = md.find('<a id="', a + 10)
        sec = md[a:b if b > 0 else len(md)]
        mod = importlib.import_module("exp_" + n)
        tables = _tables(sec)
        if n == "post_norm_warmup":
            m = re.search(r"\*\*Verdict: ([a-z ]+)\.\*\*", sec)
            grads = [t for t in tables if t["columns"][:2] == ["d", "placement"] and "last / first" in t["columns"]
                     and t["rows"][0][0] >= 64]
            vals = [t for t in tables if t["columns"][:3] == ["d", "placement", "warmup"]][0]
            lrs = [float(c.split()[-1]) for c in vals["columns"][3:]]
            H = exp_norm_placement.unigram_entropy(os.path.join(ROOT, "data", "tinyshakespeare.txt"))
            st = {}
            for r in vals["rows"]:
                for lr, v in zip(lrs, r[3:]):
                    if v == "not run":  # (a cell the time did not allow: judge() leaves it open)
                        continue
                    v = float(str(v).strip("*").split()[0]) if isinstance(v, str) else v
                    st[(r[0], r[1], r[2] > 0, lr)] = ("diverged" if not math.isfinite(v) else "trains" if
                                                      v < H - exp_norm_placement.MARGIN else
                                                      "stuck" if v > H - 0.1 else "partial")
            grad = {(r[0], r[1]): r[5] for r in grads[0]["rows"]}
            widths = sorted({r[0] for r in vals["rows"]})
            sup, _, _, text = mod.judge(widths, lrs, st, grad)
        elif n == "layer_deletion":
            m = re.search(r"\*\*Verdict: ([a-z ]+)\.\*\*", sec)
            sup, text = mod.judge(tables[0]["rows"])
        elif n == "residual_init":
            m = re.search(r"\*\*Verdict: ([a-z ]+)\.\*\*", sec)
            un = [r for r in tables[0]["rows"] if r[0] is False]
            sc = [r for r in tables[0]["rows"] if r[0] is True]
            sup, text = mod.judge([r[1] for r in un], [r[2] for r in un], [r[4] for r in un], [r[2] for r in sc],
                                  [r[4] for r in sc])
        else:
            m = re.search(r"\*\*Verdict: ([a-z ]+)\.\*\*", sec)
            sup, text = mod.judge(tables)
        if n == "post_norm_warmup":  # (its statuses and ratios read back exactly: the whole text is compared)
            check(text in sec, "docs/experiments.md, post_norm_warmup: the published verdict text is judge()'s", text)
        check(m is not None and m.group(1) == word[sup],
              "docs/experiments.md, %s: the published verdict (%s) is the rule on its tables" % (n, m and m.group(1)),
              text[:300])


if __name__ == "__main__":
    warmup_cases()
    residual_init_cases()
    layer_deletion_cases()
    published_cases()
    print("%s" % ("all passed" if not failed else "%d failed" % failed))
    sys.exit(1 if failed else 0)
