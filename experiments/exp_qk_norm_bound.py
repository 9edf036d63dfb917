"""qk_norm_bound — QK-Norm bounds every attention logit by sqrt(head_dim) * g_q * g_k."""
import math

import numpy as np

import svgplot
from common import fmt, table_rows

NAME = "qk_norm_bound"
TITLE = "Largest attention logit during training, with and without QK-Norm, across learning rates"
CLAIM = ("Without QK-Norm the attention logits q.k/sqrt(d_head) can grow without limit as training pushes the "
         "query and key weights (more at larger learning rates: attention-logit growth, Dehghani et al. 2023); "
         "with per-head QK-Norm each normalized q and k has norm at most g*sqrt(d_head), so every logit is "
         "bounded by sqrt(d_head) * g_q * g_k at every step.")
TERMS = ("After RMSNorm with unit gains a query and a key each have length sqrt(head_dim), so q.k / "
         "sqrt(head_dim) is at most sqrt(head_dim): 11.3 for head_dim 128. The gains are learned, so the bound"
         " is sqrt(head_dim) g_q g_k (tinylm lesson qk-norm).")

SMALL = {"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 4, "num_attention_heads": 4}


def run(ctx):
    lrs = [3e-3, 3e-2] if ctx.quick else [1e-3, 3e-3, 1e-2, 3e-2, 1e-1]
    steps = 60 if ctx.quick else 300
    hd = SMALL["hidden_size"] // SMALL["num_attention_heads"]
    rows, curves, worst_ratio, violations, checked, bounds = [], {}, 0.0, 0, 0, {}
    for qk in ("none", "head"):
        for lr in lrs:
            r = ctx.train("llama-baby", dict(SMALL, qk_norm=qk), steps=steps,
                          opts={"lr": lr, "min-lr": lr / 10, "warmup": 20, "batch": 8, "eval-batches": 10},
                          flags=["--log-attn"])
            amax = [float(np.max(m["attn_max"])) for m in r.metrics]
            curves[(qk, lr)] = ([m["step"] for m in r.metrics], amax)
            bound_max = float("nan")
            if qk == "head":
                bs = []
                for m in r.metrics:
                    a, g = np.array(m["attn_max"]), np.array(m["qk_gain_max"])
                    b = math.sqrt(hd) * g[..., 0] * g[..., 1]
                    ratio = a / b
                    worst_ratio = max(worst_ratio, float(ratio.max()))
                    violations += int((ratio > 1 + 1e-5).sum())
                    checked += ratio.size
                    bs.append(float(b.max()))
                bound_max = max(bs)
                bounds[lr] = ([m["step"] for m in r.metrics], bs)
            dv = r.divergence_step()
            rows.append([qk, lr, amax[0], max(amax), amax[-1], bound_max, r.val_loss,
                         dv if dv is not None else "-"])
    ctx.table("Largest |attention logit| over all layers and heads (llama-baby at d 64, 4 layers, 4 heads, head_dim "
              "%d; %d steps, batch 8 x 64, warmup 20, `train --log-attn`)" % (hd, steps),
              ["qk_norm", "lr", "step 1", "max over training", "last step", "largest bound sqrt(hd) g_q g_k",
               "val loss", "diverged at step"], rows)
    ctx.table("The bound, checked per step, layer and head (QK-Norm runs)",
              ["(layer, head, step) values checked", "violations", "largest logit / bound"],
              [[checked, violations, worst_ratio]])
    series = [svgplot.Series("%s, lr %g" % ("QK-Norm" if qk == "head" else "no QK-Norm", lr), *curves[(qk, lr)])
              for qk in ("none", "head") for lr in lrs]
    # the bound itself: per step (the gains are learned), and its unit-gain value sqrt(d_head)
    series += [svgplot.Series("bound sqrt(hd) g_q g_k, QK-Norm lr %g" % lr, *bounds[lr]) for lr in lrs]
    ctx.figure("Largest attention logit per step, with the QK-Norm bound", "attn_max.svg",
               svgplot.line_plot(series, title="max |attention logit| per step, and the bound", xlabel="step",
                                 ylabel="max |logit| (log)", ylog=True,
                                 hlines=[(math.sqrt(hd), "sqrt(d_head) = %g (unit gains)" % math.sqrt(hd))]))
    mx = {(r[0], r[1]): r[3] for r in rows}
    ctx.figure("Largest logit over training vs learning rate", "attn_max_lr.svg",
               svgplot.line_plot([svgplot.Series("no QK-Norm", lrs, [mx[("none", lr)] for lr in lrs]),
                                  svgplot.Series("QK-Norm (per head)", lrs, [mx[("head", lr)] for lr in lrs])],
                                 title="Largest |attention logit| during training", xlabel="peak learning rate",
                                 ylabel="max |logit| (log)", xlog=True, ylog=True,
                                 xticklabels={lr: "%g" % lr for lr in lrs}))
    ctx.verdict(*judge(ctx.tables))
    ctx.note("attn_max and qk_gain_max come from `tinylm train --log-attn` (docs/training.md): each step's "
             "largest |score| over the batch (after the 1/sqrt(d_head) scale) and the largest |gain| of each "
             "head's QK-norm weights that the step's forward used. The bound needs the gains to be read per "
             "step: they are learned and grow, so the logit is bounded but not by a constant.")


def judge(tables):
    """the verdict from the page's tables alone (run() and check() both call it): supported when the
    bound held at every checked (layer, head, step), the largest logit without QK-Norm grew from the
    smallest lr to the largest and QK-Norm's was below it at the largest; not supported when the bound
    was violated; inconclusive otherwise. Returns (supported, text)."""
    rows = table_rows(tables[0])
    checked, violations, worst_ratio = table_rows(tables[1])[0][:3]
    mx = {(r[0], r[1]): r[3] for r in rows}
    lrs = sorted({r[1] for r in rows})
    none_grows = mx[("none", lrs[-1])] > mx[("none", lrs[0])]
    hi = lrs[-1]
    smaller = mx[("head", hi)] < mx[("none", hi)]
    ok = violations == 0 and none_grows and smaller
    return (ok if violations == 0 else False,
            "The bound sqrt(d_head) g_q g_k held for all %d (layer, head, step) values (%d violations; the "
            "largest logit reached %s of its bound). Without QK-Norm the largest logit went from %s at lr %g "
            "to %s at lr %g (%s); with QK-Norm %s and %s. %s"
            % (checked, violations, fmt(worst_ratio), fmt(mx[("none", lrs[0])]), lrs[0], fmt(mx[("none", hi)]), hi,
               "growing with the learning rate" if none_grows else "not growing with it",
               fmt(mx[("head", lrs[0])]), fmt(mx[("head", hi)]),
               "Supports the claim." if ok else
               ("The bound holds, but the growth without QK-Norm is not seen at these scales."
                if violations == 0 else "The bound was violated.")))


def check(res):
    bad = []
    if res["tables"][1]["rows"][0][1] != 0:
        bad.append("the QK-norm bound was violated")
    supported, text = judge(res["tables"])
    if supported != res["verdict"]["supported"] or text != res["verdict"]["text"]:
        bad.append("the verdict (%s) does not follow from the tables (%s)" % (res["verdict"]["supported"], supported))
    return bad
