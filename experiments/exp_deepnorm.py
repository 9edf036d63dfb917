"""deepnorm — DeepNet's DeepNorm (Wang et al. 2022) lets Post-Norm train where plain Post-Norm
fails: Post-Norm vs DeepNorm vs Pre-Norm at increasing depth, at one learning rate without warmup."""
import math
import re

import numpy as np
import svgplot
from common import fmt, table_rows

NAME = "deepnorm"
TITLE = "DeepNorm vs Post-Norm vs Pre-Norm by depth, at a learning rate where Post-Norm fails"
CLAIM = ("DeepNorm (Wang et al. 2022, DeepNet): Post-Norm with the residual up-weighted, x <- LN(alpha x + F(x)), "
         "and the v, o and FFN matrices initialised smaller by beta (decoder-only: alpha = (2N)^(1/4), "
         "beta = (8N)^(-1/4)) bounds the model update, so Post-Norm trains at depths and learning rates where "
         "plain Post-Norm fails, keeping Post-Norm's quality.")
TERMS = ("DeepNorm keeps Post-Norm's normalised sum but scales the identity path (x * alpha + F(x)) and the "
         "init of the increments (beta), so that each block's update stays small against the stream at any "
         "depth (tinylm lesson placement, init-depth).")

PLACEMENTS = ["post", "deepnorm", "pre"]
SMALL = {"hidden_size": 64, "intermediate_size": 176}
UNIGRAM = 3.313  # nats, the unigram entropy of TinyShakespeare (docs/training.md)
UPDATE_STEPS = [1, 2, 4, 8]  # the steps at which the model update is measured (the quick form: 1 and 4)
UPDATE_TOKENS = 64           # the fixed batch: this many validation tokens


def outcome(r):
    """from the validation loss at the end: 'diverged' (not finite: the trainer stopped on a NaN or
    infinite loss), 'nothing learned' (within 0.05 nats of the unigram entropy or above), 'trained'
    (at least 0.3 below it) or 'partly' (in between)"""
    if not math.isfinite(r.val_loss):
        return "diverged"
    if r.val_loss >= UNIGRAM - 0.05:
        return "nothing learned"
    return "trained" if r.val_loss < UNIGRAM - 0.3 else "partly"


def run(ctx):
    if ctx.quick:
        depths, steps, lrs = [6], 100, [1e-2]
    else:
        depths, steps, lrs = [6, 24, 96], 200, [3e-3, 1e-2]
    runs, rows = {}, []
    for lr in lrs:
        opts = {"batch": 8, "grad-clip": 0, "eval-batches": 10, "min-lr": 1e-4, "lr": lr, "warmup": 0}
        for L in depths:
            for p in PLACEMENTS:
                r = ctx.train("llama-baby", dict(SMALL, num_hidden_layers=L, norm_placement=p), steps=steps, opts=opts)
                runs[(lr, L, p)] = r
                dv = r.divergence_step()
                rows.append([lr, L, p, r.initial_loss, r.final_loss, r.val_loss, dv if dv is not None else "-",
                             max((m["grad_norm"] for m in r.metrics[:20]), default=float("nan")), outcome(r),
                             r.seconds])
    ctx.table("Training without warmup, %d steps (llama-baby at d 64, d_ff 176, batch 8 x 64, AdamW, no gradient "
              "clipping, cosine to 1e-4; unigram entropy %.3f). Outcome from the val loss: nothing learned >= %.2f, "
              "trained < %.2f, partly between, diverged = not finite. Loss spike = first step with a non-finite "
              "loss or (after step 10) a loss above the first"
              % (steps, UNIGRAM, UNIGRAM - 0.05, UNIGRAM - 0.3),
              ["lr", "layers", "placement", "first loss", "last train loss", "val loss", "loss spike at step",
               "max grad norm, steps 1-20", "outcome", "training seconds"], rows)

    # per-layer parameter-gradient norms at initialization
    gl, grows = {}, []
    for L in depths:
        for p in PLACEMENTS:
            m = ctx.init_model("llama-baby", dict(SMALL, num_hidden_layers=L, norm_placement=p))
            g = ctx.inspect_grad(m.model, batch=4, seq=64)
            per = [x["all"] for x in g["grad_layers"]]
            gl[(L, p)] = per
            grows.append([L, p, per[0], per[L // 2], per[-1], per[-1] / per[0], max(per) / min(per)])
    ctx.table("Parameter-gradient norm per layer at initialization (d 64, batch 4 x 64; `inspect --grad`, "
              "grad_layers.all)", ["layers", "placement", "layer 0", "middle layer", "last layer", "last / first",
                                   "max / min over layers"], grows)

    # the model update (the paper's section 3): how far the output on a fixed batch x moves in the
    # first steps, |F(x, theta_k) - F(x, theta_0)|, F = the logits; a run of k steps for each k at the
    # constant learning rate (no warmup, no decay: its first k steps are those of any longer run; the
    # trainer keeps only its latest checkpoint), against the init checkpoint above (the same seed: the
    # same theta_0, moved by ~1e-12)
    tl = ctx.py()
    steps_at = [1, 4] if ctx.quick else UPDATE_STEPS  # (a run each: the quick form keeps to two)
    K = max(steps_at)
    upd, urows = {}, []
    for lr in lrs:
        for L in depths:
            for p in PLACEMENTS:
                sets = dict(SMALL, num_hidden_layers=L, norm_placement=p)
                init = ctx.init_model("llama-baby", sets)
                m0 = tl.load(init.model)
                ids = np.asarray(ctx.text_ids(m0, UPDATE_TOKENS), np.int32)
                f0 = np.asarray(m0(ids), np.float64)
                m0.close()
                per = []
                for k in steps_at:
                    r = ctx.train("llama-baby", sets, steps=k, tag="update",
                                  opts={"batch": 8, "grad-clip": 0, "eval-batches": 1, "lr": lr, "min-lr": lr,
                                        "warmup": 0})
                    if not r.ok:  # (the trainer stopped on a non-finite loss before step k)
                        per.append(float("nan"))
                        continue
                    mk = tl.load(r.model)
                    fk = np.asarray(mk(ids), np.float64)
                    mk.close()
                    per.append(float(np.sqrt(np.mean((fk - f0) ** 2))))
                upd[(lr, L, p)] = per
                urows.append([lr, L, p] + per + [per[-1] / per[0] if per[0] > 0 else float("nan")])
    ctx.table("Model update |F(x, theta_k) - F(x, theta_0)| in the first steps (Wang et al. 2022, section 3): the "
              "RMS change of the logits on a fixed batch of %d validation tokens after k AdamW steps at the constant "
              "learning rate (no warmup, batch 8 x 64, no clipping; NaN: the run had stopped on a non-finite loss)"
              % UPDATE_TOKENS, ["lr", "layers", "placement"] + ["step %d" % k for k in steps_at] +
              ["step %d / step 1" % K], urows)

    D = max(depths)
    for lr in lrs:
        ctx.figure("Model update in the first %d steps, lr %g, %d layers" % (K, lr, D), "update_lr%g.svg" % lr,
                   svgplot.line_plot([svgplot.Series(p, steps_at, upd[(lr, D, p)]) for p in PLACEMENTS],
                                     title="|F(x, theta_k) - F(x, theta_0)|, RMS over the logits, lr %g, %d layers"
                                     % (lr, D), xlabel="step k", ylabel="RMS logit change (log)", ylog=True))
    ctx.figure("Per-layer parameter-gradient norm at initialization, %d layers" % D, "grad_init.svg",
               svgplot.line_plot([svgplot.Series(p, list(range(D)), gl[(D, p)]) for p in PLACEMENTS],
                                 title="|grad of layer l's parameters| at init, %d layers" % D, xlabel="layer l",
                                 ylabel="gradient L2 norm (log)", ylog=True))
    for lr in lrs:
        ctx.figure("Training loss, lr %g without warmup, %d layers" % (lr, D), "curves_lr%g.svg" % lr,
                   svgplot.line_plot([svgplot.Series(p, [m["step"] for m in runs[(lr, D, p)].metrics],
                                                     [m["loss"] for m in runs[(lr, D, p)].metrics])
                                      for p in PLACEMENTS],
                                     title="Training loss, lr %g, no warmup, %d layers" % (lr, D), xlabel="step",
                                     ylabel="train loss (nats)", hlines=[(UNIGRAM, "unigram entropy")]))
        if len(depths) > 1:
            ctx.figure("Validation loss by depth, lr %g" % lr, "loss_by_depth_lr%g.svg" % lr,
                       svgplot.bar_plot(["%d layers" % L for L in depths],
                                        [svgplot.Series(p, None, [runs[(lr, L, p)].val_loss for L in depths])
                                         for p in PLACEMENTS],
                                        title="Val loss after %d steps at lr %g (missing = diverged)" % (steps, lr),
                                        ylabel="val loss (nats)", hlines=[(UNIGRAM, "unigram entropy")]))

    ctx.verdict(*judge(ctx.tables))
    ctx.note("alpha = (2N)^(1/4) and beta = (8N)^(-1/4) are derived by the engine from num_hidden_layers "
             "(docs/config.md; at %s layers alpha = %s, beta = %s); DeepNorm and Post-Norm have no final "
             "norm (the stream is normed after every block); Post-Norm and Pre-Norm keep GPT-2's 1/sqrt(2N) init "
             "of o_proj and down_proj, DeepNorm replaces it by beta on v, o and the FFN."
             % (" / ".join(map(str, depths)), " / ".join(fmt((2.0 * L) ** 0.25) for L in depths),
                " / ".join(fmt((8.0 * L) ** -0.25) for L in depths)))
    ctx.note("Gradients at init are from `tinylm inspect --grad --json` on a checkpoint after one step at learning "
             "rate 1e-12. The model update (the paper's |F(x, theta_t) - F(x, theta_0)|) is measured on the logits "
             "through the Python API (tinylm.load of a run of k steps for each k, the learning rate constant so "
             "that its steps are the first k of any run), against that init checkpoint; it is reported, not part "
             "of the verdict's rule.")


def outcome_of(val):
    """outcome() of a run from its val loss as the table holds it"""
    if not math.isfinite(val):
        return "diverged"
    if val >= UNIGRAM - 0.05:
        return "nothing learned"
    return "trained" if val < UNIGRAM - 0.3 else "partly"


def judge(tables):
    """the verdict from the page's tables alone (run() and check() both call it). Rule: the claim is
    tested in the (lr, depth) cells where plain Post-Norm failed (diverged or learned nothing) while
    Pre-Norm learned something (trained or partly: the cell is learnable at all). Supported if DeepNorm
    trained in every such cell; not supported if it failed (diverged or learned nothing) in any;
    otherwise, or with no such cell, inconclusive. Outcomes are recomputed from the val losses.
    Returns (supported, text)."""
    rows, grows = table_rows(tables[0]), table_rows(tables[1])
    steps = int(re.match(r"Training without warmup, (\d+) steps", tables[0]["title"]).group(1))
    lrs = sorted({r[0] for r in rows})
    depths = sorted({r[1] for r in rows})
    val = {(r[0], r[1], r[2]): r[5] for r in rows}
    out = {k: outcome_of(v) for k, v in val.items()}
    failed = ("diverged", "nothing learned")
    cells = [(lr, L) for lr in lrs for L in depths
             if out[(lr, L, "post")] in failed and out[(lr, L, "pre")] not in failed]
    dn_ok = [c for c in cells if out[c + ("deepnorm",)] == "trained"]
    dn_bad = [c for c in cells if out[c + ("deepnorm",)] in failed]
    if cells and len(dn_ok) == len(cells):
        supported = True
    elif dn_bad:
        supported = False
    else:
        supported = None
    name = {"post": "Post-Norm", "deepnorm": "DeepNorm", "pre": "Pre-Norm"}
    per_cell = "; ".join("lr %g, %d layers: %s" % (lr, L, ", ".join("%s %s (%s)" % (name[p], out[(lr, L, p)],
                                                                                  fmt(val[(lr, L, p)]))
                                                                    for p in PLACEMENTS))
                         for lr in lrs for L in depths)
    D = max(depths)
    gi = {r[1]: r for r in grows if r[0] == D}
    cell = lambda c: "lr %g / %d layers" % c  # noqa: E731
    return (supported,
            "Val loss after %d steps without warmup: %s. Rule: the claim is tested in the cells where plain "
            "Post-Norm diverged or learned nothing (val loss >= %.2f) while Pre-Norm learned something: %s; "
            "supported if DeepNorm trained (val loss < %.2f) in every such cell, not supported if it failed in "
            "any. At init, %d layers, the layer-0 parameter gradient is %s (Post-Norm), %s (DeepNorm), %s "
            "(Pre-Norm); max/min over layers %s, %s, %s. %s"
            % (steps, per_cell, UNIGRAM - 0.05, ", ".join(map(cell, cells)) or "none", UNIGRAM - 0.3, D,
               fmt(gi["post"][2]), fmt(gi["deepnorm"][2]), fmt(gi["pre"][2]), fmt(gi["post"][6]),
               fmt(gi["deepnorm"][6]), fmt(gi["pre"][6]),
               {True: "DeepNorm trained wherever plain Post-Norm failed: supports the claim.",
                False: "DeepNorm also failed where plain Post-Norm failed (%s): does not support the claim in "
                "this regime." % ", ".join(map(cell, dn_bad)),
                None: "No cell separates the placements as the rule needs, or DeepNorm only partly trained "
                "there: inconclusive."}[supported]))


def check(res):
    """robust outcomes of the quick form (6 layers, lr 1e-2): every placement is in the table,
    Pre-Norm and DeepNorm learn something, plain Post-Norm ends far above DeepNorm, and
    Post-Norm's init gradients are far below Pre-Norm's (30x in norm_placement)"""
    bad = []
    t = {r[2]: r for r in res["tables"][0]["rows"]}
    if sorted(t) != sorted(PLACEMENTS):
        return ["the training table does not hold exactly %s" % PLACEMENTS]
    for p in ("pre", "deepnorm"):
        if t[p][8] not in ("trained", "partly"):
            bad.append("%s learned nothing at the quick form's lr (%s)" % (p, t[p][8]))
    if isinstance(t["deepnorm"][5], str) or not (isinstance(t["post"][5], str) or t["post"][5] > t["deepnorm"][5] + 0.3):
        bad.append("plain Post-Norm's val loss is not well above DeepNorm's")
    g = {r[1]: r for r in res["tables"][1]["rows"]}
    if not g["pre"][2] > 3 * g["post"][2]:
        bad.append("Post-Norm's layer-0 gradient at init is not well below Pre-Norm's")
    u = {r[2]: r[3:-1] for r in res["tables"][2]["rows"]}
    if sorted(u) != sorted(PLACEMENTS):
        bad.append("the model-update table does not hold exactly %s" % PLACEMENTS)
    for p in ("pre", "deepnorm"):  # (they train: their first steps move the output, by a finite amount)
        if p in u and not all(isinstance(v, float) and math.isfinite(v) and v > 0 for v in u[p]):
            bad.append("%s's model update is not finite and positive at every measured step: %s" % (p, u[p]))
    for r in table_rows(res["tables"][0]):
        if r[8] != outcome_of(r[5]):
            bad.append("lr %g, %d layers, %s: outcome %s does not follow from val loss %s" % (r[0], r[1], r[2], r[8], r[5]))
    supported, text = judge(res["tables"])
    if supported != res["verdict"]["supported"] or text != res["verdict"]["text"]:
        bad.append("the verdict (%s) does not follow from the tables (%s)" % (res["verdict"]["supported"], supported))
    return bad
