"""post_norm_warmup — Post-Norm needs warmup (Xiong et al. 2020), tested where the paper's argument
lives: as the width grows, at 6 layers, with Adam beta2 0.98, learning rates around 1e-3 and the
paper's initialisation (Xavier, no 1/sqrt(2N) scaling of the residual projections)."""
import math
import os

import svgplot
from common import fmt
from exp_norm_placement import MARGIN, status, unigram_entropy

NAME = "post_norm_warmup"
TITLE = "Post-Norm and warmup as the width grows (6 layers, Adam beta2 0.98, Xavier init without 1/sqrt(2N))"
CLAIM = ("Post-Norm needs learning-rate warmup and Pre-Norm does not (Xiong et al. 2020): with the paper's "
         "initialisation, Post-Norm's parameter gradients at initialisation are large near the output, and the "
         "bound on the last layer's gradient grows with the width (O(d sqrt(ln d))), so without warmup Post-Norm "
         "fails to train at learning rates around 1e-3 where it trains with warmup, and the wider the model the "
         "more so; Pre-Norm trains there without warmup.")
TERMS = ("Post-Norm normalises after the residual sum, so every gradient passes through a norm at every block;"
         " Xiong et al.'s bound on the last layer's gradient at initialisation grows with the width d, which "
         "is why the lesson says Post-Norm needs warmup and Pre-Norm does not (tinylm lesson placement).")

LAYERS = 6
PLACEMENTS = ["post", "pre"]
# the paper's optimizer: Adam, beta2 0.98, no weight decay; no gradient clipping (nothing but warmup tames
# the first steps)
OPT = {"batch": 8, "beta2": 0.98, "weight-decay": 0, "grad-clip": 0, "eval-batches": 10}


def sets(d, placement):
    """llama-baby's block (RMSNorm, RoPE, SwiGLU, tied head) at width d, 6 layers, head_dim 32, with
    Xavier's std for a d x d matrix (sqrt(2 / (d + d)) = 1/sqrt(d)) for every matrix and the embedding,
    and no 1/sqrt(2N) scaling of o_proj and down_proj"""
    return {"hidden_size": d, "intermediate_size": d * 11 // 4, "num_hidden_layers": LAYERS,
            "num_attention_heads": max(2, d // 32), "norm_placement": placement,
            "initializer_range": round(1.0 / math.sqrt(d), 6), "scale_residual_init": False}


def plan(quick):
    if quick:
        return dict(widths=[32, 64], lrs=[1e-3], steps=40, warm=10, precision=None)
    # POST_NORM_WARMUP_WIDTHS=64,128: the full form at some of the widths (a machine without the time
    # for d 512); the verdict then speaks of the widest width run
    env = os.environ.get("POST_NORM_WARMUP_WIDTHS")
    widths = sorted(int(w) for w in env.split(",")) if env else [64, 128, 256, 512]
    return dict(widths=widths, lrs=[5e-4, 1e-3, 2e-3], steps=600, warm=150, precision="bf16")


def judge(widths, lrs, st, grad):
    """the verdict from the numbers alone. st[(d, placement, warmup>0, lr)] is a run's status
    ("trains", "partial", "stuck", "diverged"); a cell not run is absent (a grid cut short by time: its
    words are then those every outcome of the missing cells would leave standing, never a guess);
    grad[(d, placement)] = (last / first layer gradient at init). Per width: Post-Norm 'needs warmup'
    when at some lr it trains with warmup and not without; 'does not' when at every lr where it trains
    with warmup it trains without too (and there is one); 'undetermined' when it trains at no lr even
    with warmup. Pre-Norm at a width: 'yes' when it trains without warmup wherever it trains with it,
    'no' when not, 'undetermined' when it trains at no lr with warmup. A word the missing cells could
    still change is 'open'. Overall: supported when Post-Norm needs warmup and Pre-Norm says 'yes' at
    the widest width; not supported when Post-Norm needs it at no width where it was determined;
    inconclusive otherwise. Returns (supported, {d: Post-Norm's word}, {d: Pre-Norm's word}, text)."""
    def gap(d, p):
        """'gap' (at some lr trains with warmup and not without), 'no gap' (trains without warmup wherever
        it trains with it, and does somewhere), 'none' (trains at no lr with warmup), or 'open'"""
        w = [st.get((d, p, True, lr)) for lr in lrs]
        n = [st.get((d, p, False, lr)) for lr in lrs]
        if any(a == "trains" and b not in (None, "trains") for a, b in zip(w, n)):
            return "gap"
        if any(a in ("trains", None) and b != "trains" for a, b in zip(w, n)):
            return "open"  # a missing cell there could still make a gap
        if "trains" in w:
            return "no gap"
        return "open" if None in w else "none"

    post, pre = {}, {}
    for d in widths:
        post[d] = {"gap": "needs warmup", "no gap": "does not need warmup", "none": "undetermined",
                   "open": "open"}[gap(d, "post")]
        pre[d] = {"gap": "no", "no gap": "yes", "none": "undetermined", "open": "open"}[gap(d, "pre")]
    D = widths[-1]
    determined = [d for d in widths if post[d] in ("needs warmup", "does not need warmup")]
    if post[D] == "needs warmup" and pre[D] == "yes":
        supported = True
    elif determined and all(post[d] == "does not need warmup" for d in determined) and \
            not any(post[d] == "open" for d in widths):
        supported = False
    else:
        supported = None
    ratios = [grad[(d, "post")] for d in widths]
    trend = ("is measured at one width only" if len(ratios) < 2 else
             "grows with the width" if all(b > a for a, b in zip(ratios, ratios[1:])) else
             "falls with the width" if all(b < a for a, b in zip(ratios, ratios[1:])) else "has no monotone trend")
    missing = ["d %d %s %s lr %g" % (d, p, "with warmup" if wu else "without warmup", lr)
               for d in widths for p in PLACEMENTS for wu in (False, True) for lr in lrs if (d, p, wu, lr) not in st]
    text = ("Post-Norm per width: %s. Pre-Norm trains without warmup wherever it trains with it: %s. At "
            "initialisation Post-Norm's last-layer gradient over its first is %s at d %s (it %s; Pre-Norm: %s). "
            "Rule: supported when at the widest width (d %d) Post-Norm needs warmup and Pre-Norm does not; not "
            "supported when Post-Norm needs it at no width where it trained at all; otherwise inconclusive."
            % ("; ".join("d %d %s" % (d, post[d]) for d in widths),
               ", ".join("d %d %s" % (d, pre[d]) for d in widths),
               ", ".join(fmt(r) for r in ratios), ", ".join(str(d) for d in widths), trend,
               ", ".join(fmt(grad[(d, "pre")]) for d in widths), D))
    if missing:
        text += (" Not run (%d of %d cells): %s; 'open' = a word those cells could still change."
                 % (len(missing), len(widths) * len(PLACEMENTS) * 2 * len(lrs), ", ".join(missing)))
    return supported, post, pre, text


def run(ctx):
    P = plan(ctx.quick)
    widths, lrs, steps, warm = P["widths"], P["lrs"], P["steps"], P["warm"]
    H = unigram_entropy(ctx.data)
    opts = dict(OPT)
    if P["precision"]:
        opts["precision"] = P["precision"]

    # gradients at initialisation, per layer
    grad, grad_rows, per_layer = {}, [], {}
    for d in widths:
        for p in PLACEMENTS:
            m = ctx.init_model("llama-baby", sets(d, p))
            g = ctx.inspect_grad(m.model, batch=4, seq=64)
            alls = [x["all"] for x in g["grad_layers"]]
            per_layer[(d, p)] = alls
            grad[(d, p)] = alls[-1] / alls[0]
            grad_rows.append([d, p, alls[0], alls[LAYERS // 2], alls[-1], alls[-1] / alls[0], g["grad_total"]])
    ctx.table("Gradient norm of each layer's parameters at initialisation (batch 4 x 64 characters; Xavier "
              "std 1/sqrt(d), no 1/sqrt(2N)), 6 layers", ["d", "placement", "layer 0", "layer 3", "layer 5",
                                                            "last / first", "whole model"], grad_rows)

    # training: every width, placement, warmup and learning rate
    st, runs, rows = {}, {}, []
    for d in widths:
        for p in PLACEMENTS:
            for w in (0, warm):
                for lr in lrs:
                    r = ctx.train("llama-baby", sets(d, p), steps=steps,
                                  opts=dict(opts, lr=lr, warmup=w, **{"min-lr": lr / 10}))
                    s = status(r, H)
                    st[(d, p, w > 0, lr)] = s
                    runs[(d, p, w, lr)] = r
                    gmax = max((m["grad_norm"] for m in r.metrics[:20] if m.get("grad_norm") is not None),
                               default=float("nan"))
                    rows.append([d, p, w, lr, r.initial_loss, r.val_loss, s, gmax])
    ctx.table("Every run: %d steps of batch 8 x 64 characters of TinyShakespeare, Adam (beta1 0.9, beta2 0.98, no "
              "weight decay), no gradient clipping, linear warmup over 0 or %d steps then cosine to lr/10%s. "
              "Status: trains = finite throughout and final val loss < %.2f (the unigram entropy %.3f minus %g); "
              "stuck = val loss above %.2f; partial = between; diverged = a non-finite loss or gradient."
              % (steps, warm, ", bf16 mixed precision" if P["precision"] else "", H - MARGIN, H, MARGIN, H - 0.1),
              ["d", "placement", "warmup", "lr", "first loss", "val loss", "status", "max grad norm, steps 1-20"],
              rows)

    supported, post, pre, text = judge(widths, lrs, st, grad)
    vrows = [[d, post[d], pre[d], grad[(d, "post")], grad[(d, "pre")]] for d in widths]
    ctx.table("Verdict per width", ["d", "Post-Norm", "Pre-Norm trains without warmup", "Post-Norm grad last/first at "
                                    "init", "Pre-Norm grad last/first at init"], vrows)

    ctx.figure("Per-layer gradient norm at initialisation", "grad_init.svg",
               svgplot.line_plot([svgplot.Series("%s, d %d" % (p, d), list(range(LAYERS)), per_layer[(d, p)])
                                  for p in PLACEMENTS for d in widths],
                                 title="|gradient of layer l's parameters| at init, 6 layers",
                                 xlabel="layer l", ylabel="gradient L2 norm (log)", ylog=True))
    lr_c = 1e-3 if 1e-3 in lrs else lrs[0]
    ctx.figure("Validation loss by width at lr %g" % lr_c, "val_by_width.svg",
               svgplot.line_plot([svgplot.Series("%s, warmup %d" % (p, w), widths,
                                                 [runs[(d, p, w, lr_c)].val_loss for d in widths])
                                  for p in PLACEMENTS for w in (0, warm)],
                                 title="val loss after %d steps at lr %g" % (steps, lr_c), xlabel="width d",
                                 ylabel="val loss (nats)", xlog=True, xticklabels={d: str(d) for d in widths},
                                 hlines=[(H, "unigram entropy"), (H - MARGIN, "trains below this")]))
    D = widths[-1]
    ctx.figure("Training loss at d %d, lr %g" % (D, lr_c), "curves.svg",
               svgplot.line_plot([svgplot.Series("%s, warmup %d" % (p, w), [m["step"] for m in runs[(D, p, w, lr_c)].metrics],
                                                 [m["loss"] for m in runs[(D, p, w, lr_c)].metrics])
                                  for p in PLACEMENTS for w in (0, warm)],
                                 title="training loss, d %d, lr %g" % (D, lr_c), xlabel="step",
                                 ylabel="train loss (nats)", hlines=[(H, "unigram entropy")]))
    ctx.verdict(supported, text)
    ctx.note("Xavier: every matrix and the embedding drawn with std 1/sqrt(d) (initializer_range), Xavier's "
             "sqrt(2 / (fan_in + fan_out)) for the d x d projections; the SwiGLU matrices (d x 2.75d) get the same "
             "std, 1.36x Xavier's for their shape. scale_residual_init false: o_proj and down_proj are not scaled "
             "by 1/sqrt(2N) (GPT-2's init, which this engine uses by default).")
    ctx.note("Single seed (1337) per run. The full form (d 64-512, lr 5e-4, 1e-3, 2e-3, 600 steps, 48 runs) is for "
             "a quiet machine: python3 experiments/run.py post_norm_warmup (its duration: docs/experiments.md).")


def check(res):
    """the verdict follows from the tables: recomputed here by judge() from the runs' statuses and the
    gradient table, it must be the one the page states"""
    bad = []
    grads = res["tables"][0]["rows"]
    runs = res["tables"][1]["rows"]
    widths = sorted({r[0] for r in grads})
    lrs = sorted({r[3] for r in runs})
    st = {(r[0], r[1], r[2] > 0, r[3]): r[6] for r in runs}
    grad = {(r[0], r[1]): r[5] for r in grads}
    if len(st) != len(widths) * len(PLACEMENTS) * 2 * len(lrs):
        bad.append("the runs table does not cover every width, placement, warmup and lr")
        return bad
    supported, post, pre, text = judge(widths, lrs, st, grad)
    if supported != res["verdict"]["supported"] or text != res["verdict"]["text"]:
        bad.append("the verdict (%s) does not follow from the tables (%s)" % (res["verdict"]["supported"], supported))
    for r in grads:
        if not (isinstance(r[5], float) and r[5] > 0 and math.isfinite(r[5])):
            bad.append("d %s %s: gradient ratio at init %s" % (r[0], r[1], r[5]))
    return bad
