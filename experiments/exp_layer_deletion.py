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
TERMS = ("Deleting a block removes its increment from the stream: if each increment is small against the "
         "stream, the blocks after it still read almost the same stream. The first block writes onto the bare "
         "embedding, so it matters most (tinylm lesson stream).")


MODEST = 0.10  # a "modest" loss increase: at most this fraction of the intact loss
LARGE = 0.25   # clearly not modest: more than this fraction


def judge(rows):
    """the verdict from the first table alone. rows: [model, intact loss, delete block 0, median middle,
    max middle, delete last block, worst block, least harmful block]. The claim, for each Pre-Norm model
    (trained here and stories260K): block 0 is the worst to delete, and deleting any later block costs a
    modest increase. Supported when every Pre-Norm model has block 0 worst and every later block's increase
    <= MODEST x its intact loss; not supported when some Pre-Norm model has block 0 not the worst, or a later
    block whose deletion costs > LARGE x its intact loss; otherwise inconclusive. Returns (supported, text)."""
    pre = [r for r in rows if r[0].startswith("pre") or r[0].startswith("stories260K")]
    words, fails, all_ok = [], [], True
    for r in pre:
        later = max(r[4], r[5]) / r[1]
        first_worst = r[6] == 0
        words.append("%s: block 0 %s nats, the worst later block %s nats = %s of the intact loss %s%s"
                     % (r[0], fmt(r[2]), fmt(max(r[4], r[5])), "%.0f%%" % (100 * later), fmt(r[1]),
                        "" if first_worst else " (block %d is the worst, not block 0)" % r[6]))
        if not first_worst or later > LARGE:
            fails.append(r[0])
        if not (first_worst and later <= MODEST):
            all_ok = False
    supported = False if fails else (True if all_ok else None)
    text = ("%s. Rule: supported when in every Pre-Norm model block 0 is the worst to delete and every later "
            "block costs at most %d%% of the intact loss; not supported when block 0 is not the worst or a later "
            "block costs more than %d%% in some Pre-Norm model; otherwise inconclusive.%s"
            % ("; ".join(words), round(100 * MODEST), round(100 * LARGE),
               " Not modest in: %s." % ", ".join(fails) if fails else ""))
    return supported, text


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
    supported, text = judge(rows)
    ctx.verdict(supported, text)
    ctx.note("Deletion: a hook on blocks.l.hook_resid_pre keeps a copy of the block's input and a hook on "
             "blocks.l.hook_resid_post returns it (Python API run_with_hooks). TinyShakespeare models: 16 "
             "validation windows of 64 characters; stories260K: 4 story texts of 48 tokens.")


def check(res):
    bad = []
    for r in res["tables"][0]["rows"]:
        if not r[2] > 0:
            bad.append("%s: deleting block 0 does not raise the loss" % r[0])
    supported, text = judge(res["tables"][0]["rows"])
    if supported != res["verdict"]["supported"] or text != res["verdict"]["text"]:
        bad.append("the verdict (%s) does not follow from the table (%s)" % (res["verdict"]["supported"], supported))
    return bad
