"""dyt — Dynamic Tanh (Zhu et al. 2025) in place of every RMSNorm, at equal steps, with and without a
regularizer, on a small and a smaller data regime."""
import math
import os

import svgplot
from common import fmt

NAME = "dyt"
TITLE = "DyT (y = g tanh(alpha x) + b) vs RMSNorm at equal steps, two data sizes, with and without weight decay"
CLAIM = ("Transformers without normalization (Zhu et al. 2025): replacing every norm layer by DyT, an "
         "element-wise g * tanh(alpha * x) + b with one learnable scalar alpha per layer (init 0.5), trains to "
         "about the same loss as the normalized model at the same number of steps. Measured here on small models "
         "in two data regimes, without regularization (no dropout, no weight decay: the engine has no dropout) and "
         "with weight decay as the regularization control, so that a difference in overfitting is not mistaken "
         "for one in optimization.")

UNIGRAM = 3.313  # nats, TinyShakespeare's unigram entropy (docs/training.md)
NORMS = [("RMSNorm", {"norm_type": "rmsnorm"}), ("DyT", {"norm_type": "dyt"})]
REGS = [("none", 0.0), ("weight decay 0.1", 0.1)]


def run(ctx):
    steps = 60 if ctx.quick else 1000
    # the quick form: 2 layers at d 64, and the regularization control only in the smaller regime
    size = {"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2} if ctx.quick else {}
    with open(ctx.data, encoding="utf-8") as f:
        text = f.read()
    small_chars = 60000 if ctx.quick else 100000
    regimes = [("TinyShakespeare (1.1M chars)", ctx.data)]
    small = os.path.join(ctx.out, "shakespeare_small.txt")
    with open(small, "w", encoding="utf-8") as f:
        f.write(text[:small_chars])
    regimes.append(("first %dk chars" % (small_chars // 1000), small))
    rows, res = [], {}
    regs = {regimes[0][0]: REGS[:1] if ctx.quick else REGS, regimes[1][0]: REGS}
    for rname, data in regimes:
        for nname, nset in NORMS:
            for gname, wd in regs[rname]:
                r = ctx.train("llama-baby", dict(size, **nset), steps=steps, data=data,
                              opts={"weight-decay": wd, "warmup": 20 if ctx.quick else 100, "eval-batches": 10,
                                    "eval-every": max(steps // 4, 1)})
                tr = sum(m["loss"] for m in r.metrics[-10:]) / min(10, len(r.metrics)) if r.metrics else float("nan")
                res[(rname, nname, gname)] = r
                rows.append([rname, nname, gname, r.initial_loss, tr, r.val_loss, r.val_loss - tr])
    ctx.table("Loss at %d steps (llama-baby%s, batch 12 x 64, lr 1e-3 cosine to 1e-4; train loss: the mean of the "
              "last 10 steps; gap = val - train)" % (steps, " at d 64, d_ff 176, 2 layers" if ctx.quick else ""),
              ["data", "norm", "regularization", "first loss", "train loss", "val loss", "gap"], rows)

    for i, (rname, _) in enumerate(regimes):
        series = []
        for nname, _ in NORMS:
            for gname, _ in regs[rname]:
                r = res[(rname, nname, gname)]
                pts = [(m["step"], m["val_loss"]) for m in r.metrics if m.get("val_loss") is not None]
                series.append(svgplot.Series("%s, %s" % (nname, gname), [p[0] for p in pts], [p[1] for p in pts]))
        ctx.figure("Validation loss, %s" % rname, "val_%d.svg" % i,
                   svgplot.line_plot(series, title="validation loss, %s" % rname, xlabel="step", ylabel="val loss"))

    diffs = []
    for rname, _ in regimes:
        for gname, _ in regs[rname]:
            a, b = res[(rname, "RMSNorm", gname)].val_loss, res[(rname, "DyT", gname)].val_loss
            diffs.append((rname, gname, b - a, a, b))
    close = all(math.isfinite(d[2]) and abs(d[2]) < 0.05 * d[3] for d in diffs)
    worse = all(math.isfinite(d[2]) and d[2] > 0 for d in diffs)
    txt = "; ".join("%s, %s: RMSNorm %s, DyT %s (%+.3f)" % (r, g, fmt(a), fmt(b), d) for r, g, d, a, b in diffs)
    ctx.verdict(True if close else (False if worse else None),
                txt + (". DyT is within 5% of RMSNorm everywhere: supports the claim at this scale." if close else
                       (". DyT is behind RMSNorm in every setting at equal steps (here, at this scale and length)."
                        if worse else ". Mixed: DyT is ahead in some settings and behind in others.")))
    ctx.note("DyT: norm_type \"dyt\" (docs/config.md), alpha initialised to 0.5 (dyt_alpha_init, the paper's "
             "default for non-LLM models; it tunes alpha for LLMs), gamma 1, beta 0, in every norm including the "
             "final one; DyT's alpha, gamma and beta are not weight-decayed (norm parameters).")
    ctx.note("The character vocabulary is each corpus's own (the small regime's first characters may lack a few "
             "rare symbols), so losses compare within a regime, not across.")


def check(res):
    bad = []
    rows = res["tables"][0]["rows"]
    for r in rows:
        data, norm, reg, first, train, val = r[0], r[1], r[2], r[3], r[4], r[5]
        if isinstance(val, str) or isinstance(first, str) or not val < first - 0.3:
            bad.append("%s, %s, %s: val loss %s not well below the first loss %s" % (data, norm, reg, val, first))
    return bad
