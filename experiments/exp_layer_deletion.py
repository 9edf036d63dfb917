"""layer_deletion — with a residual stream, deleting one block costs little (except the first)."""
import numpy as np

import svgplot
import trained
from common import fmt

NAME = "layer_deletion"
TITLE = "Deleting one block at a time: validation-loss increase per layer (Pre-Norm vs sandwich)"
CLAIM = ("Because each block only adds a (relatively small) increment to the residual stream, a trained "
         "Pre-Norm model survives the deletion of any single block with a modest loss increase, except the "
         "first block(s), which the later ones depend on; the middle blocks are the most redundant.")


def deletion_losses(m, ids):
    """[L] loss with block l skipped (its output replaced by its input), and the intact loss"""
    L = m.config["num_hidden_layers"]
    base = float(m.loss(ids))
    out = []
    for l in range(L):
        saved = {}

        def keep(x, hook):
            saved["x"] = x.copy()

        def skip(x, hook):
            return saved["x"]

        out.append(float(m.loss(ids, fwd_hooks=[("blocks.%d.hook_resid_pre" % l, keep),
                                                 ("blocks.%d.hook_resid_post" % l, skip)])))
    return base, out


def run(ctx):
    tl = ctx.py()
    rows, curves = [], {}
    for p in trained.PLACEMENTS:
        for L in trained.depths(ctx):
            r = trained.model(ctx, p, L)
            m = tl.load(r.model)
            ids = trained.windows(ctx, m, 16, 64)
            base, losses = deletion_losses(m, ids)
            inc = [x - base for x in losses]
            curves[(p, L)] = inc
            mid = inc[1:-1] if L > 2 else inc
            rows.append(["%s, %d layers" % (p, L), base, inc[0], float(np.median(mid)), max(mid), inc[-1],
                         int(np.argmax(inc)), int(np.argmin(inc))])
    m = tl.load(ctx.stories, tokenizer=ctx.stories_tok)
    base, losses = deletion_losses(m, trained.stories_windows(ctx, m, 4, 48))
    inc = [x - base for x in losses]
    Ls = m.config["num_hidden_layers"]
    curves[("stories260K", Ls)] = inc
    rows.append(["stories260K (pre, %d layers)" % Ls, base, inc[0], float(np.median(inc[1:-1])), max(inc[1:-1]),
                 inc[-1], int(np.argmax(inc)), int(np.argmin(inc))])
    ctx.table("Loss increase when block l is deleted (its output replaced by its input): validation windows",
              ["model", "intact loss", "delete block 0", "median, middle blocks", "max, middle blocks",
               "delete last block", "worst block", "least harmful block"], rows)
    full = []
    for k, inc in curves.items():
        full.append(["%s %d" % k] + [inc[i] if i < len(inc) else "" for i in range(max(len(v) for v in curves.values()))])
    ctx.table("Loss increase per deleted block", ["model"] + ["block %d" % i for i in range(len(full[0]) - 1)], full)
    ctx.figure("Loss increase per deleted block", "deletion.svg",
               svgplot.line_plot([svgplot.Series("%s %d" % k, list(range(len(v))), [max(x, 1e-4) for x in v])
                                  for k, v in curves.items()],
                                 title="Loss increase when one block is deleted", xlabel="deleted block",
                                 ylabel="loss increase (nats, log)", ylog=True))
    pre = [curves[("pre", L)] for L in trained.depths(ctx)]
    first_worst = all(int(np.argmax(c)) == 0 for c in pre)
    mid_small = all(np.median(c[1:-1] if len(c) > 2 else c) < 0.5 * c[0] for c in pre)
    ok = first_worst and mid_small
    ctx.verdict(ok, "Pre-Norm: deleting block 0 costs %s nats; the median middle block %s; the last block %s "
                    "(depths %s). Sandwich: block 0 %s, median middle %s. stories260K: block 0 %s, median middle "
                    "%s. %s"
                % (", ".join(fmt(c[0]) for c in pre), ", ".join(fmt(float(np.median(c[1:-1] if len(c) > 2 else c)))
                                                                for c in pre),
                   ", ".join(fmt(c[-1]) for c in pre), trained.depths(ctx),
                   ", ".join(fmt(curves[("sandwich", L)][0]) for L in trained.depths(ctx)),
                   ", ".join(fmt(float(np.median(curves[("sandwich", L)][1:-1] if L > 2 else curves[("sandwich", L)])))
                             for L in trained.depths(ctx)),
                   fmt(inc[0]), fmt(float(np.median(inc[1:-1]))),
                   "Supports the claim." if ok else "Only partly supports the claim (see the table)."))
    ctx.note("Deletion: a hook on blocks.l.hook_resid_pre keeps a copy of the block's input and a hook on "
             "blocks.l.hook_resid_post returns it (Python API run_with_hooks). TinyShakespeare models: 16 "
             "validation windows of 64 characters; stories260K: 4 story texts of 48 tokens.")


def check(res):
    bad = []
    for r in res["tables"][0]["rows"]:
        if not r[2] > 0:
            bad.append("%s: deleting block 0 does not raise the loss" % r[0])
    return bad
