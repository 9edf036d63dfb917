"""lr_sensitivity — final loss vs learning rate (Wortsman et al. 2023): small models reproduce the
high-learning-rate instabilities of large ones (attention-logit growth, output-logit divergence),
and QK-Norm and the z-loss remove them, flattening loss vs learning rate."""
import json
import math
import os

import numpy as np

import svgplot
from common import fmt

NAME = "lr_sensitivity"
TITLE = "Learning-rate sensitivity: final loss vs learning rate, with and without QK-Norm and z-loss"
CLAIM = ("Small-scale proxies (Wortsman et al. 2023): at high learning rates small transformers show the "
         "instabilities of large ones — the attention logits grow (attention-logit growth) and the output "
         "logits drift (output-logit divergence, logsumexp far from 0) — and the loss gets worse; QK-Norm "
         "and the z-loss (1e-4 * logsumexp^2) remove these, so the final loss depends less on the learning rate "
         "(lower LR sensitivity).")

Z = 1e-4  # the papers' coefficient (PaLM; Wortsman et al. 2023)
VARIANTS = [("baseline", "none", 0.0), ("QK-Norm", "head", 0.0), ("z-loss", "none", Z), ("QK-Norm + z-loss", "head", Z)]


def width_sets(d):
    # llama-baby's shape at width d: 4 layers, head_dim 16, d_ff 2.75 d (SwiGLU)
    return {"hidden_size": d, "intermediate_size": int(2.75 * d) // 8 * 8, "num_hidden_layers": 4,
            "num_attention_heads": d // 16}


def logit_stats(ctx, run, text_file):
    """mean logsumexp and max |logit| of the model's output over a held-out window (NaN if no checkpoint)"""
    npy = os.path.join(ctx.out, "logits_tmp.npy")
    p = ctx.tinylm("logits", "--model", run.path, "--prompt-file", text_file, "--out", npy, "--threads", ctx.threads,
                   check=False)
    if p.returncode != 0:
        return float("nan"), float("nan")
    z = np.load(npy).astype(np.float64)
    os.remove(npy)
    m = z.max(-1, keepdims=True)
    lse = (m[:, 0] + np.log(np.exp(z - m).sum(-1)))
    return float(lse.mean()), float(np.abs(z).max())


def sensitivity(lrs, losses):
    """mean over the learning rates of (loss - best loss): 0 for a flat curve (NaN/diverged = the first loss)"""
    best = min(v for v in losses if math.isfinite(v))
    return float(np.mean([v - best for v in losses]))


def run(ctx):
    widths = [64] if ctx.quick else [64, 128]
    lrs = [3e-3, 3e-2] if ctx.quick else [1e-3, 3e-3, 1e-2, 3e-2, 1e-1]
    steps = 60 if ctx.quick else 300
    # a held-out window of TinyShakespeare (the last 10% is the validation split)
    with open(ctx.data, encoding="utf-8") as f:
        text = f.read()
    held = os.path.join(ctx.out, "heldout.txt")
    with open(held, "w", encoding="utf-8") as f:
        f.write(text[int(len(text) * 0.95):][:63])
    rows, res = [], {}
    for d in widths:
        for name, qk, z in VARIANTS:
            for lr in lrs:
                opts = {"lr": lr, "min-lr": lr / 10, "warmup": 20, "batch": 8, "eval-batches": 10}
                if z:
                    opts["z-loss"] = z
                r = ctx.train("llama-baby", dict(width_sets(d), qk_norm=qk), steps=steps, opts=opts,
                              flags=["--log-attn"])
                amax = max((float(np.max(m["attn_max"])) for m in r.metrics if "attn_max" in m), default=float("nan"))
                lse, zmax = logit_stats(ctx, r, held) if r.ok else (float("nan"), float("nan"))
                loss = r.val_loss if r.ok else float("nan")
                # a diverged run counts as its first loss (the loss of a model that learned nothing)
                eff = loss if math.isfinite(loss) else r.initial_loss
                res[(d, name, lr)] = {"loss": loss, "eff": eff, "amax": amax, "lse": lse, "zmax": zmax,
                                      "div": r.divergence_step()}
                dv = r.divergence_step()
                rows.append([d, name, lr, loss, amax, lse, zmax, dv if dv is not None else "-"])
    ctx.table("Final validation loss, largest attention logit during training, and the output logits at the end "
              "(llama-baby shape: 4 layers, head_dim 16, d_ff 2.75 d; %d steps, batch 8 x 64, warmup 20, cosine to "
              "lr/10, grad clip 1, weight decay 0.1; z-loss coefficient %g)" % (steps, Z),
              ["width", "variant", "lr", "val loss", "max |attention logit| (training)", "mean logsumexp (held-out)",
               "max |output logit|", "diverged at step"], rows)
    srows = []
    for d in widths:
        for name, _, _ in VARIANTS:
            effs = [res[(d, name, lr)]["eff"] for lr in lrs]
            srows.append([d, name, min(effs), lrs[int(np.argmin(effs))], sensitivity(lrs, effs),
                          res[(d, name, lrs[-1])]["eff"]])
    ctx.table("LR sensitivity: mean over the learning rates of (loss - best loss) (Wortsman et al.'s measure, "
              "diverged runs counted at their first loss)",
              ["width", "variant", "best val loss", "at lr", "LR sensitivity", "loss at the highest lr"], srows)

    for d in widths:
        series = [svgplot.Series(name, lrs, [res[(d, name, lr)]["eff"] for lr in lrs]) for name, _, _ in VARIANTS]
        ctx.figure("Final loss vs learning rate, width %d" % d, "loss_vs_lr_d%d.svg" % d,
                   svgplot.line_plot(series, title="validation loss after %d steps, d %d" % (steps, d),
                                     xlabel="peak learning rate", ylabel="val loss", xlog=True,
                                     xticklabels={lr: "%g" % lr for lr in lrs}))
    d0 = widths[-1]
    ctx.figure("Attention-logit growth", "attn_vs_lr.svg",
               svgplot.line_plot([svgplot.Series(name, lrs, [res[(d0, name, lr)]["amax"] for lr in lrs])
                                  for name, _, _ in VARIANTS],
                                 title="max |attention logit| during training, d %d" % d0, xlabel="peak learning rate",
                                 ylabel="max |logit| (log)", xlog=True, ylog=True,
                                 xticklabels={lr: "%g" % lr for lr in lrs}))
    ctx.figure("Output logits", "lse_vs_lr.svg",
               svgplot.line_plot([svgplot.Series(name, lrs, [abs(res[(d0, name, lr)]["lse"]) for lr in lrs])
                                  for name, _, _ in VARIANTS],
                                 title="|mean logsumexp of the output logits|, d %d" % d0,
                                 xlabel="peak learning rate", ylabel="|mean lse|", xlog=True,
                                 xticklabels={lr: "%g" % lr for lr in lrs}))

    hi, lo = lrs[-1], lrs[0]
    parts, growth, zfix, flat = [], [], [], []
    for d in widths:
        b, q = res[(d, "baseline", hi)], res[(d, "QK-Norm", hi)]
        growth.append(b["amax"] > 3 * res[(d, "baseline", lo)]["amax"] and q["amax"] < b["amax"] / 3)
        parts.append("d %d: without QK-Norm the largest attention logit went from %s at lr %g to %s at lr %g; with "
                     "QK-Norm %s" % (d, fmt(res[(d, "baseline", lo)]["amax"]), lo, fmt(b["amax"]), hi, fmt(q["amax"])))
        zb, zz = res[(d, "baseline", hi)]["lse"], res[(d, "z-loss", hi)]["lse"]
        zfix.append(abs(zz) < abs(zb))
        parts.append("mean logsumexp at lr %g: %s without the z-loss, %s with it" % (hi, fmt(zb), fmt(zz)))
        sens = {r[1]: r[4] for r in srows if r[0] == d}
        flat.append(sens["QK-Norm + z-loss"] < sens["baseline"])
        parts.append("LR sensitivity %s (baseline), %s (QK-Norm), %s (z-loss), %s (both)"
                     % (fmt(sens["baseline"]), fmt(sens["QK-Norm"]), fmt(sens["z-loss"]), fmt(sens["QK-Norm + z-loss"])))
    found = [all(growth), all(zfix), all(flat)]
    what = ["attention-logit growth at high lr, removed by QK-Norm", "a smaller |logsumexp| with the z-loss",
            "a flatter loss-vs-lr curve with both fixes"]
    seen = [w for w, f in zip(what, found) if f]
    unseen = [w for w, f in zip(what, found) if not f]
    ctx.verdict(True if all(found) else (False if not any(found) else None),
                "; ".join(parts) + ". Seen: %s. Not seen: %s." % (", ".join(seen) or "none", ", ".join(unseen) or "none"))
    ctx.note("max |attention logit| is `train --log-attn`'s attn_max, the largest over the steps, layers and heads; "
             "the output logits are `tinylm logits` on 63 characters of the held-out split. A run that diverged "
             "(NaN: the trainer stops and keeps no checkpoint) counts at its first loss in the sensitivity measure.")
    ctx.note("The z-loss coefficient is the papers' 1e-4; at %d steps its gradient (2 z lse p per position) is small, "
             "so its effect on the logsumexp is small too: PaLM and Wortsman et al. apply it over long runs."
             % steps)


def check(res):
    bad = []
    rows = res["tables"][0]["rows"]
    by = {(r[0], r[1], r[2]): r for r in rows}
    d = max(r[0] for r in rows)
    lrs = sorted({r[2] for r in rows})
    hi = lrs[-1]
    b, q = by[(d, "baseline", hi)][4], by[(d, "QK-Norm", hi)][4]
    if isinstance(b, str) or isinstance(q, str) or not q < b:
        bad.append("at lr %g QK-Norm did not lower the largest attention logit (%s vs %s)" % (hi, q, b))
    lo = lrs[0]
    for name in ("baseline", "QK-Norm", "z-loss", "QK-Norm + z-loss"):
        v = by[(d, name, lo)][3]
        if isinstance(v, str) or not v < 3.3:
            bad.append("%s at lr %g did not learn (val loss %s, unigram entropy 3.31)" % (name, lo, v))
    return bad
