"""softcap — Gemma 2's tanh soft-caps bound the attention and final logits."""
import numpy as np

import svgplot
import trained
from common import fmt, table_rows

NAME = "softcap"
TITLE = "Attention and final-logit soft-capping (Gemma 2: 50 / 30) vs none"
CLAIM = ("Soft-capping, cap * tanh(x / cap), bounds the attention logits (Gemma 2: 50) and the final logits "
         "(30) smoothly: the largest logits stay below the caps whatever the learning rate, and at caps that "
         "ordinary training never reaches the loss is unchanged.")
TERMS = ("cap * tanh(x / cap) leaves small logits almost unchanged (10 -> 9.6 at cap 30), bends those near the"
         " cap (30 -> 22.8) and never exceeds it, with a gradient 1 - tanh^2 that shrinks but never reaches 0,"
         " unlike hard clipping (tinylm lesson softcap).")

SMALL = {"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 4}
CAPS = [("none", 0, 0), ("Gemma 2: 50 / 30", 50, 30), ("tight: 5 / 5", 5, 5)]


def run(ctx):
    lrs = [3e-3, 3e-2] if ctx.quick else [3e-3, 3e-2, 1e-1]
    steps = 40 if ctx.quick else 300
    tl = ctx.py()
    rows, curves = [], {}
    for label, ac, fc in CAPS:
        for lr in lrs:
            r = ctx.train("llama-baby", dict(SMALL, attn_logit_softcapping=ac, final_logit_softcapping=fc),
                          steps=steps, opts={"lr": lr, "min-lr": lr / 10, "warmup": 20, "batch": 8,
                                             "eval-batches": 10}, flags=["--log-attn"])
            amax = [float(np.max(m["attn_max"])) for m in r.metrics]
            curves[(label, lr)] = ([m["step"] for m in r.metrics], amax)
            fmax = float("nan")
            if r.ok:
                m = tl.load(r.model)
                logits = m(trained.windows(ctx, m, 8, 64))
                fmax = float(np.abs(logits).max())
            dv = r.divergence_step()
            rows.append([label, lr, max(amax), fmax, r.val_loss, dv if dv is not None else "-"])
    ctx.table("Largest |attention logit| during training (`--log-attn`, after the cap) and largest |final logit| "
              "of the trained model on 8 validation windows (llama-baby at d 64, 4 layers, %d steps)" % steps,
              ["caps (attention / final)", "lr", "max |attention logit|", "max |final logit|", "val loss",
               "loss above the first at step (a spike or a divergence)"], rows)
    ctx.figure("Largest attention logit per step", "attn_max.svg",
               svgplot.line_plot([svgplot.Series("%s, lr %g" % k, *v) for k, v in curves.items()],
                                 title="max |attention logit| per step (after the cap)", xlabel="step",
                                 ylabel="max |logit| (log)", ylog=True, hlines=[(50, "cap 50"), (5, "cap 5")]))
    cats = ["%s lr %g" % (r[0].split(":")[0].replace("Gemma 2", "Gemma2"), r[1]) for r in rows]
    # logits and losses are different quantities: one figure each, each with its own axis
    ctx.figure("Largest final logit by cap", "final_logit.svg",
               svgplot.bar_plot(cats, [svgplot.Series("max |final logit|", None, [r[3] for r in rows])],
                                title="Largest |final logit| on 8 validation windows", ylabel="|logit|",
                                hlines=[(30, "cap 30")]))
    ctx.figure("Validation loss by cap", "val_loss.svg",
               svgplot.bar_plot(cats, [svgplot.Series("val loss", None, [r[4] for r in rows])],
                                title="Validation loss by cap", ylabel="val loss (nats)"))
    ctx.verdict(*judge(ctx.tables))
    ctx.note("A cap of 0 is off (docs/config.md). With caps this small model's logits rarely approach 50 / 30, "
             "so the Gemma 2 caps mostly act as the identity here; the tight caps show the bound at work.")


def judge(tables):
    """the verdict from the page's table alone (run() and check() both call it): supported when every
    capped run stayed within its caps and, at the learning rates where the uncapped run stays below
    Gemma 2's caps (50 / 30), Gemma 2's caps change the val loss by less than 0.05; inconclusive when no
    learning rate stays below them. Returns (supported, text)."""
    rows = table_rows(tables[0])
    caps = {label: (ac, fc) for label, ac, fc in CAPS}
    lrs = sorted({r[1] for r in rows})
    by = {(r[0], r[1]): r for r in rows}
    within = all((r[2] <= caps[r[0]][0] * (1 + 1e-6) or not caps[r[0]][0]) and
                 (not isinstance(r[3], float) or not caps[r[0]][1] or r[3] <= caps[r[0]][1] + 1e-4) for r in rows)
    g = [by[("Gemma 2: 50 / 30", lr)] for lr in lrs]
    n = [by[("none", lr)] for lr in lrs]
    reached = max(r[2] for r in n)
    # where training without caps never reaches them, the capped run must match it; where it does, report
    unreached = [i for i, r in enumerate(n) if r[2] < 50 and (not isinstance(r[3], float) or r[3] < 30)]
    diffs = [g[i][4] - n[i][4] for i in range(len(lrs))]
    same_loss = all(abs(diffs[i]) < 0.05 for i in unreached)
    ok = within and same_loss and bool(unreached)
    return (ok if unreached else None,
            "Every capped run stayed within its caps (%s). Without caps the largest attention logit reached %s "
            "and the largest final logit %s (the final cap 30 is never reached here). Val loss with Gemma 2's "
            "caps minus without: %s at lr %s; at the learning rates where uncapped training stays below the "
            "caps (%s) the difference is %s; where the attention logits exceed 50 without the cap (%s) the cap "
            "changes the loss by %s. The tight 5 / 5 caps: val loss %s vs %s uncapped. %s"
            % ("yes" if within else "NO", fmt(reached), fmt(max(r[3] for r in n)),
               ", ".join(fmt(d) for d in diffs), ", ".join("%g" % lr for lr in lrs),
               ", ".join("%g" % lrs[i] for i in unreached) or "none",
               ", ".join(fmt(diffs[i]) for i in unreached) or "-",
               ", ".join("%g" % lrs[i] for i in range(len(lrs)) if i not in unreached) or "none",
               ", ".join(fmt(diffs[i]) for i in range(len(lrs)) if i not in unreached) or "-",
               ", ".join(fmt(by[("tight: 5 / 5", lr)][4]) for lr in lrs), ", ".join(fmt(r[4]) for r in n),
               "Supports the claim." if ok else
               ("No learning rate here stays below the caps without them, so the 'unchanged loss' half is "
                "not tested." if not unreached else "Does not support the claim (see the table).")))


def check(res):
    bad = []
    for r in res["tables"][0]["rows"]:
        if r[0].startswith("tight") and not (isinstance(r[2], str) or r[2] <= 5 + 1e-4):
            bad.append("attention logit above the cap 5: %s" % r[2])
        if r[0].startswith("tight") and not (isinstance(r[3], str) or r[3] <= 5 + 1e-4):
            bad.append("final logit above the cap 5: %s" % r[3])
    supported, text = judge(res["tables"])
    if supported != res["verdict"]["supported"] or text != res["verdict"]["text"]:
        bad.append("the verdict (%s) does not follow from the table (%s)" % (res["verdict"]["supported"], supported))
    return bad
