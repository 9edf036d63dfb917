"""norm_placement — Post-Norm needs learning-rate warmup, Pre-Norm does not (Xiong et al. 2020),
measured as the largest learning rate that trains, with and without warmup, at several depths."""
import collections
import math
import re

import svgplot
from common import fmt, table_rows

NAME = "norm_placement"
TITLE = "Norm placement: the largest learning rate that trains, Post-Norm vs Pre-Norm, with and without warmup"
CLAIM = ("Post-Norm needs learning-rate warmup and Pre-Norm does not (Xiong et al. 2020): at initialization "
         "Post-Norm's parameter gradients are largest near the output, so without warmup Post-Norm trains only "
         "at small learning rates and warmup widens its stable range, while Pre-Norm's range does not move.")
TERMS = ("Pre-Norm normalises each sublayer's input and leaves the stream free to grow; Post-Norm normalises "
         "the sum x + F(x) after every block, so the stream sits at sqrt(d) and the gradient passes through a "
         "norm at every block. The lesson (after Xiong et al.) says the latter needs warmup (tinylm lesson "
         "placement).")

PLACEMENTS = ["post", "pre"]
INIT_PLACEMENTS = ["post", "pre", "sandwich", "output"]
SMALL = {"hidden_size": 64, "intermediate_size": 176}
# Xiong et al.'s optimizer: Adam, beta2 0.98; no weight decay and no gradient clipping here, so that
# nothing but warmup tames the first steps
OPT = {"batch": 8, "beta2": 0.98, "weight-decay": 0, "grad-clip": 0, "eval-batches": 10}
MARGIN = 0.5  # "trains": final val loss at least this far below the unigram entropy, finite throughout
STOP_AFTER = 2  # the ladder stops after this many learning rates in a row that do not train (above one that did)


def unigram_entropy(path):
    """entropy (nats) of the character distribution of the training split (first 90%): the loss of a
    model that learned only the character frequencies"""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = text[:int(len(text) * 0.9)]
    c = collections.Counter(text)
    n = len(text)
    return -sum(v / n * math.log(v / n) for v in c.values())


def status(r, H):
    """diverged (a non-finite loss or gradient: the trainer stopped), trains (finite throughout and the
    final val loss below H - MARGIN), stuck (val loss within 0.1 nat of H or above: nothing beyond
    the character frequencies learned) or partial"""
    losses = [m.get("loss") for m in r.metrics]
    if not r.ok or any(v is None or not math.isfinite(v) for v in losses):
        return "diverged"
    v = r.val_loss
    if not math.isfinite(v):
        return "diverged"
    if v < H - MARGIN:
        return "trains"
    return "stuck" if v > H - 0.1 else "partial"


def ladder(ctx, L, p, w, lrs, steps, H):
    """the runs of one (depth, placement, warmup) from the smallest learning rate up, stopping after
    STOP_AFTER that do not train in a row once one has trained; {lr: (TrainRun, status)}"""
    out, trained, misses = {}, False, 0
    for lr in lrs:
        r = ctx.train("llama-baby", dict(SMALL, num_hidden_layers=L, norm_placement=p), steps=steps,
                      opts=dict(OPT, lr=lr, warmup=w, **{"min-lr": lr / 10}))
        s = status(r, H)
        out[lr] = (r, s)
        if s == "trains":
            trained, misses = True, 0
        elif trained:
            misses += 1
            if misses >= STOP_AFTER:
                break
    return out


def max_lr(runs):
    """(the largest learning rate that trains or None, censored: it is the last one run and trained)"""
    ok = [lr for lr, (_, s) in runs.items() if s == "trains"]
    if not ok:
        return None, False
    m = max(ok)
    return m, m == max(runs)


def ratio_bounds(a, b, lrs):
    """bounds [lo, hi] on a / b for two ladder maxima (value, censored): None = below the smallest
    learning rate tried, censored = at least the value"""
    def iv(x):
        v, cen = x
        if v is None:
            return (0.0, lrs[0])
        return (v, math.inf) if cen else (v, v)
    (al, ah), (bl, bh) = iv(a), iv(b)
    lo = al / bh if bh > 0 else math.inf
    hi = ah / bl if bl > 0 else math.inf
    return lo, hi


def rule(p, a, b, lrs):
    """(lo, hi, holds) for one (depth, placement): a / b = the largest lr that trains with / without
    warmup (max_lr's (value, censored)); holds True / False / None (undetermined)"""
    lo, hi = ratio_bounds(a, b, lrs)
    if p == "post":
        # holds: warmup at least doubles the largest lr that trains
        holds = True if lo >= 2 else (False if hi < 2 else None)
        if a[0] is None:
            holds = None  # Post-Norm trains at no lr even with warmup: nothing to compare
    else:
        # holds: the largest lr that trains moves by less than 2x either way
        lo2, hi2 = ratio_bounds(b, a, lrs)
        worst_lo = max(lo, lo2)  # the larger of the two ratios is at least this
        worst_hi = max(hi, hi2)
        holds = True if worst_hi < 2 else (False if worst_lo >= 2 else None)
        if a[0] is None and b[0] is None:
            holds = None
    return lo, hi, holds


def lr_text(x, lrs):
    v, cen = x
    if v is None:
        return "none (< %g)" % lrs[0]
    return ">= %g" % v if cen else "%g" % v


def run(ctx):
    if ctx.quick:
        depths, lrs, steps, warm = [4], [1e-3, 1e-2], 60, 15
    else:
        depths, steps = [6, 12], 400
        lrs = [1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 1e-1]
        warm = steps // 4
    H = unigram_entropy(ctx.data)
    runs = {}  # (L, p, w) -> {lr: (run, status)}
    for L in depths:
        for p in PLACEMENTS:
            for w in (0, warm):
                runs[(L, p, w)] = ladder(ctx, L, p, w, lrs, steps, H)

    rows = []
    for (L, p, w), lad in runs.items():
        first = min([lr for lr, (_, s) in lad.items() if s == "trains"], default=math.inf)
        for lr, (r, s) in lad.items():
            if s in ("stuck", "partial") and lr < first:
                s = "slow"  # below the smallest lr that trains: not yet trained in this many steps
            dv = r.divergence_step()
            rows.append([L, p, w, lr, r.initial_loss, r.val_loss, s, dv if dv is not None else "-",
                         max((m["grad_norm"] for m in r.metrics[:20] if m.get("grad_norm") is not None),
                             default=float("nan"))])
    ctx.table("Every run: llama-baby at d 64 (d_ff 176, 4 heads, RMSNorm, RoPE, SwiGLU, tied head), %d steps of "
              "batch 8 x 64 characters of TinyShakespeare, Adam (beta1 0.9, beta2 0.98, no weight decay), no "
              "gradient clipping, linear warmup over 0 or %d steps then cosine to lr/10. Status: trains = finite "
              "throughout and final val loss < %.2f (the unigram entropy %.3f minus %g); stuck = val loss above "
              "%.2f; slow = not trained but below the smallest lr that trains; diverged = the trainer stopped on a "
              "non-finite loss or gradient. The ladder of learning rates "
              "stops after %d in a row that do not train above one that did."
              % (steps, warm, H - MARGIN, H, MARGIN, H - 0.1, STOP_AFTER),
              ["layers", "placement", "warmup", "lr", "first loss", "val loss", "status",
               "loss above the first at step", "max grad norm, steps 1-20"], rows)

    # the largest learning rate that trains, per (depth, placement, warmup), and the rule
    M = {k: max_lr(v) for k, v in runs.items()}
    mrows = []
    for L in depths:
        for p in PLACEMENTS:
            a, b = M[(L, p, warm)], M[(L, p, 0)]
            lo, hi, holds = rule(p, a, b, lrs)
            mrows.append([L, p, lr_text(b, lrs), lr_text(a, lrs),
                          ("%s .. %s" % (fmt(lo), fmt(hi))) if lo != hi else fmt(lo),
                          {True: "holds", False: "fails", None: "undetermined"}[holds]])
    ctx.table("The largest learning rate that trains (from the ladder %s), without and with %d warmup steps; "
              "ratio = with / without; rule: Post-Norm's ratio >= 2, Pre-Norm's between 1/2 and 2 (exclusive)"
              % (", ".join("%g" % x for x in lrs), warm),
              ["layers", "placement", "max lr, no warmup", "max lr, warmup %d" % warm, "ratio", "rule"], mrows)

    # per-layer parameter gradients at initialization, every depth; FFN weights as in Xiong et al.'s Fig. 3
    grows, gl = [], {}
    for L in depths:
        for p in INIT_PLACEMENTS:
            m = ctx.init_model("llama-baby", dict(SMALL, num_hidden_layers=L, norm_placement=p))
            g = ctx.inspect_grad(m.model, batch=4, seq=64)
            ffn = [x["ffn"] for x in g["grad_layers"]]
            alls = [x["all"] for x in g["grad_layers"]]
            gl[(L, p)] = ffn
            grows.append([p, L, ffn[0], ffn[L // 2], ffn[-1], ffn[-1] / ffn[0], alls[-1] / alls[0]])
    ctx.table("Gradient norm of each layer's FFN weights at initialization (batch 4 x 64; d 64)",
              ["placement", "layers", "FFN layer 0", "FFN middle layer", "FFN last layer", "FFN last / first",
               "all of the layer's parameters, last / first"], grows)

    D = max(depths)
    ctx.figure("Per-layer FFN gradient norm at initialization, %d layers" % D, "grad_init.svg",
               svgplot.line_plot([svgplot.Series(p, list(range(D)), gl[(D, p)]) for p in INIT_PLACEMENTS],
                                 title="|grad of layer l's FFN weights| at init, %d layers, d 64" % D,
                                 xlabel="layer l", ylabel="gradient L2 norm (log)", ylog=True))
    for L in depths:
        series = []
        for p in PLACEMENTS:
            for w in (0, warm):
                lad = runs[(L, p, w)]
                xs = sorted(lad)
                series.append(svgplot.Series("%s, warmup %d" % (p, w), xs, [lad[x][0].val_loss for x in xs]))
        ctx.figure("Validation loss by learning rate, %d layers" % L, "loss_lr_L%d.svg" % L,
                   svgplot.line_plot(series, title="val loss after %d steps, %d layers (missing = diverged or not run)"
                                     % (steps, L), xlabel="peak learning rate", ylabel="val loss (nats)", xlog=True,
                                     xticklabels={lr: "%g" % lr for lr in lrs},
                                     hlines=[(H, "unigram entropy"), (H - MARGIN, "trains below this")]))
    series = []
    for p in PLACEMENTS:
        for w in (0, warm):
            series.append(svgplot.Series("%s, warmup %d" % (p, w), depths,
                                         [M[(L, p, w)][0] if M[(L, p, w)][0] else float("nan") for L in depths]))
    if any(math.isfinite(y) for se in series for y in se.ys):
        ctx.figure("Largest learning rate that trains, by depth", "max_lr.svg",
                   svgplot.line_plot(series, title="largest lr that trains (missing = none; at %g = at least that, "
                                     "the ladder's top)" % lrs[-1], xlabel="layers",
                                     ylabel="learning rate (log)", ylog=True,
                                     xticklabels={L: str(L) for L in depths}))
    else:  # (an empty plot says nothing: the quick form's runs are too short to train at any lr)
        ctx.note("No run trained (val loss below %.2f) at any learning rate, placement or warmup, so the figure of "
                 "the largest learning rate that trains is left out." % (H - MARGIN))
    # training curves at the deepest depth, at the smallest lr where Post-Norm without warmup does not train
    # but has a run (else its largest run)
    lad0 = runs[(D, "post", 0)]
    bad = [lr for lr, (_, s) in sorted(lad0.items()) if s != "trains" and M[(D, "post", 0)][0] is not None
           and lr > M[(D, "post", 0)][0]]
    lr_c = bad[0] if bad else max(lad0)
    cs = []
    for p in PLACEMENTS:
        for w in (0, warm):
            lad = runs[(D, p, w)]
            if lr_c in lad:
                mm = lad[lr_c][0].metrics
                cs.append(svgplot.Series("%s, warmup %d" % (p, w), [m["step"] for m in mm], [m["loss"] for m in mm]))
    ctx.figure("Training loss at lr %g, %d layers" % (lr_c, D), "curves.svg",
               svgplot.line_plot(cs, title="training loss at lr %g, %d layers" % (lr_c, D), xlabel="step",
                                 ylabel="train loss (nats)", hlines=[(H, "unigram entropy")]))

    ctx.verdict(*judge(ctx.tables))
    ctx.note("Unigram entropy = the entropy of the character frequencies of the training split (%.3f nats): a model "
             "that ends near it learned nothing beyond them. 'Loss above the first' is the first step (after 10) "
             "whose training loss exceeds the first step's, a spike or a divergence." % H)
    ctx.note("Single seed (1337) per run: near the edge of the stable range a second seed can move the largest lr "
             "by one step of the ladder.")


def judge(tables):
    """the verdict from the page's tables alone (run() and check() both call it): each ladder's largest
    lr that trains from the runs table's statuses, rule() on them, and the gradient table. Rule:
    supported if at every depth Post-Norm's largest lr without warmup is at most half of the one with
    warmup and Pre-Norm's moves by less than 2x; not supported if either fails at some depth; otherwise
    inconclusive. Returns (supported, text)."""
    rows, grows = table_rows(tables[0]), table_rows(tables[2])
    thr = re.search(r"final val loss < ([0-9.]+)", tables[0]["title"]).group(1)
    lrs = sorted({r[3] for r in rows})
    depths = sorted({r[0] for r in rows})
    warm = max(r[2] for r in rows)
    ladders = {}
    for r in rows:
        ladders.setdefault((r[0], r[1], r[2]), {})[r[3]] = (None, r[6])
    M = {k: max_lr(v) for k, v in ladders.items()}
    post_ok = {L: rule("post", M[(L, "post", warm)], M[(L, "post", 0)], lrs)[2] for L in depths}
    pre_ok = {L: rule("pre", M[(L, "pre", warm)], M[(L, "pre", 0)], lrs)[2] for L in depths}
    g = {(r[0], r[1]): r for r in grows}
    grad_top = all(g[("post", L)][5] > g[("pre", L)][5] for L in depths)
    grad_big = all(g[("post", L)][5] > 1.5 for L in depths)
    parts = []
    for L in depths:
        parts.append("%d layers: Post-Norm %s without warmup, %s with %d warmup steps (%s); Pre-Norm %s / %s (%s)"
                     % (L, lr_text(M[(L, "post", 0)], lrs), lr_text(M[(L, "post", warm)], lrs), warm,
                        {True: "widened >= 2x", False: "not widened 2x", None: "undetermined"}[post_ok[L]],
                        lr_text(M[(L, "pre", 0)], lrs), lr_text(M[(L, "pre", warm)], lrs),
                        {True: "moved < 2x", False: "moved >= 2x", None: "undetermined"}[pre_ok[L]]))
    oks = list(post_ok.values()) + list(pre_ok.values())
    supported = True if all(o is True for o in oks) else (False if any(o is False for o in oks) else None)
    return (supported,
            "Largest learning rate that trains (val loss < %s, finite throughout): %s. Rule: supported if at "
            "every depth Post-Norm's largest lr without warmup is at most half of the one with warmup and "
            "Pre-Norm's moves by less than 2x; not supported if either fails at some depth; otherwise "
            "inconclusive. At initialization the last layer's FFN gradient over the first's is %s for "
            "Post-Norm and %s for Pre-Norm (depths %s): %s."
            % (thr, "; ".join(parts),
               ", ".join(fmt(g[("post", L)][5]) for L in depths),
               ", ".join(fmt(g[("pre", L)][5]) for L in depths), ", ".join(map(str, depths)),
               "Post-Norm's gradients are larger near the output, as Xiong et al. describe" if grad_top and grad_big
               else ("Post-Norm's fall less toward the output than Pre-Norm's but are not larger near it "
                     "(last / first below 1.5)" if grad_top else "Post-Norm's are not larger near the output here")))


def check(res):
    bad = []
    g = {(r[0], r[1]): r for r in res["tables"][2]["rows"]}
    for (p, L), r in g.items():
        if p == "post" and not r[5] > g[("pre", L)][5]:
            bad.append("post-norm's last/first FFN gradient ratio at init (%s) is not above pre-norm's (%s) at %d "
                       "layers" % (r[5], g[("pre", L)][5], L))
    for r in res["tables"][0]["rows"]:
        if r[1] == "pre" and r[3] == 1e-3 and not (isinstance(r[5], float) and r[5] < r[4]):
            bad.append("pre-norm at lr 1e-3 did not lower the loss (%s from %s)" % (r[5], r[4]))
    supported, text = judge(res["tables"])
    if supported != res["verdict"]["supported"] or text != res["verdict"]["text"]:
        bad.append("the verdict (%s) does not follow from the tables (%s)" % (res["verdict"]["supported"], supported))
    return bad
