"""residual_depth — without the residual path the gradient shrinks (or grows) geometrically with
depth, so a deep stack stops learning; with it the gradient reaches every layer at about the
same size."""
import math

import svgplot
from common import fmt, geo_factor, table_rows

NAME = "residual_depth"
TITLE = "Gradient flow with and without the residual connection, by depth"
CLAIM = ("Without the residual connection the gradient reaching a layer's input is multiplied by a "
         "per-layer factor at every layer, so it vanishes or explodes geometrically with depth "
         "(0.8^32 = 0.0008, 1.2^32 = 342) and a deep stack learns nothing; with the residual the "
         "gradient reaches every layer at about the same size and depth trains.")
TERMS = ("A block computes y = x + F(x): the 1 in dy/dx = 1 + F'(x) is the identity path, so the gradient "
         "reaching a layer is the gradient above it plus what F adds. Without that path it is the product of "
         "every layer's factor: 0.8 per layer leaves 0.0008 after 32 layers (tinylm lesson residual).")

UNIGRAM = 3.313  # nats, the unigram entropy of TinyShakespeare (docs/training.md)


def layer_input_grads(g, L):
    """gradient norm at the input of layers 0..L-1 (`embed`, then layers.l-1.resid_post)"""
    byname = {r["name"]: r["norm"] for r in g["grad_residual"]}
    return [byname["embed"]] + [byname["layers.%d.resid_post" % (l - 1)] for l in range(1, L)]


def run(ctx):
    depths = [4, 8, 16] if ctx.quick else [4, 8, 16, 32]
    train_depths = [6] if ctx.quick else [4, 8, 16]
    steps = 40 if ctx.quick else 200
    # the quick form at half width (d 64) so that it runs in seconds; training always at d 64
    small = {"hidden_size": 64, "intermediate_size": 176}
    gsize = small if ctx.quick else {}
    grads = {}
    rows = []
    for res in (True, False):
        for L in depths:
            m = ctx.init_model("llama-baby", dict(gsize, num_hidden_layers=L, residual=res))
            g = ctx.inspect_grad(m.model, batch=4, seq=64)
            gi = layer_input_grads(g, L)
            grads[(res, L)] = gi
            # the factor per layer going down the stack (output -> input): fit over layers L-1 .. 0
            f = geo_factor(list(reversed(gi)))
            ratio = gi[0] / gi[-1] if gi[-1] > 0 else (0.0 if gi[0] == 0 else float("inf"))
            zeros = sum(1 for v in gi if v == 0)
            rows.append([res, L, gi[-1], gi[0], ratio, f, f ** 32 if math.isfinite(f) else float("nan"), zeros])
    ctx.table("Gradient norm at each layer's input at initialization (llama-baby, d %d, batch 4 x 64)"
              % (64 if ctx.quick else 128),
              ["residual", "layers", "|grad| at last layer's input", "|grad| at layer 0's input",
               "ratio first/last", "fitted factor per layer", "factor^32", "layers with gradient exactly 0"], rows)

    # the forward signal at init (why the deep no-residual gradients are exactly 0)
    with open(ctx.data, encoding="utf-8") as f:
        prompt = f.read()[5000:5064]
    frows = []
    for res in (True, False):
        for L in depths:
            m = ctx.init_model("llama-baby", dict(gsize, num_hidden_layers=L, residual=res))
            j = ctx.inspect(m.model, "--prompt", prompt)
            by = {r["name"]: r["norm"]["mean"] for r in j["residual"]}
            post = [by["layers.%d.resid_post" % l] for l in range(L)]
            frows.append([res, L, by["embed"], post[0], post[L // 2], post[-1]])
    ctx.table("Forward: mean L2 norm of the stream at initialization (a 64-character prompt)",
              ["residual", "layers", "after embedding", "after block 0", "after the middle block",
               "after the last block"], frows)

    losses = {}
    trows = []
    for res in (True, False):
        for L in train_depths:
            r = ctx.train("llama-baby", dict(small, num_hidden_layers=L, residual=res), steps=steps,
                          opts={"eval-batches": 10, "batch": 4 if ctx.quick else 8})
            losses[(res, L)] = r
            trows.append([res, L, steps, r.initial_loss, r.final_loss, r.val_loss])
    ctx.table("Loss after %d training steps (llama-baby at d 64, d_ff 176, batch 8 x 64, lr 1e-3, warmup 100; "
              "unigram entropy %.3f)"
              % (steps, UNIGRAM), ["residual", "layers", "steps", "first loss", "last train loss", "val loss"], trows)

    # a gradient of exactly 0 has no place on a log axis: it is drawn on a floor line a decade below the
    # smallest non-zero gradient, labelled as such, so that the strongest result stays visible
    positive = [v for g in grads.values() for v in g if v > 0]
    floor = 10 ** (math.floor(math.log10(min(positive))) - 1) if positive else 1e-30
    series = []
    for res in (True, False):
        for L in depths:
            gi = grads[(res, L)]
            zeros = sum(1 for v in gi if v == 0)
            label = "%s, %d layers" % ("residual" if res else "no residual", L)
            if zeros:
                label += " (%d of %d exactly 0: on the floor)" % (zeros, L)
            series.append(svgplot.Series(label, list(range(L)), [v if v > 0 else floor for v in gi]))
    ctx.note("A gradient of exactly 0 cannot sit on the log axis: it is drawn on the dotted floor line (%g, a "
             "decade below the smallest non-zero gradient), and its series says how many layers are exactly 0. "
             "Without the residual the forward signal itself collapses: each block's output is much "
             "smaller than its input, and once the stream is far below sqrt(norm_eps) the input RMSNorm no "
             "longer rescales it and the SwiGLU of a tiny input is quadratic in it, so activations and then "
             "gradients underflow to 0 in float32." % floor)
    ctx.figure("Gradient norm at each layer's input, at initialization", "grad_by_layer.svg",
               svgplot.line_plot(series, title="|dLoss/d input of layer l| at init", xlabel="layer l",
                                 ylabel="gradient L2 norm (log)", ylog=True,
                                 hlines=[(floor, "exactly 0 (underflow)")] if any(v == 0 for g in grads.values()
                                                                                  for v in g) else ()))
    cats = ["%d layers" % L for L in train_depths]
    ctx.figure("Validation loss after training", "loss_by_depth.svg",
               svgplot.bar_plot(cats, [svgplot.Series("residual", None, [losses[(True, L)].val_loss for L in train_depths]),
                                       svgplot.Series("no residual", None,
                                                      [losses[(False, L)].val_loss for L in train_depths])],
                                title="Validation loss after %d steps" % steps, ylabel="val loss (nats)",
                                hlines=[(UNIGRAM, "unigram entropy")]))

    ctx.verdict(*judge(ctx.tables))
    ctx.note("Gradients are from `tinylm inspect --grad --json` on a checkpoint taken after one step at learning "
             "rate 1e-12 (the initialization); the factor is exp of the least-squares slope of log|grad| "
             "against the layer index, from the last layer down to layer 0.")


def judge(tables):
    """the verdict from the page's tables alone (run() and check() both call it): the gradient table
    (ratio first/last, the fitted factor per layer, the layers exactly 0) and the training table.
    Returns (supported, text)."""
    rows, trows = table_rows(tables[0]), table_rows(tables[2])
    g = {(r[0], r[1]): r for r in rows}
    depths = sorted({r[1] for r in rows})
    deep = max(depths)
    ratio_res, ratio_nores = g[(True, deep)][4], g[(False, deep)][4]
    f_res = g[(True, deep)][5]
    finite = [(L, g[(False, L)][5]) for L in depths if g[(False, L)][7] == 0]
    collapsed = [L for L in depths if g[(False, L)][7] > 0]
    t = {(r[0], r[1]): r for r in trows}
    Ld = max(r[1] for r in trows)
    steps = t[(True, Ld)][2]
    v_res, v_nores = t[(True, Ld)][5], t[(False, Ld)][5]
    vanishes = ratio_nores < 1e-2 or ratio_nores > 1e2
    flat = 0.1 < ratio_res < 10
    learns = v_res < t[(True, Ld)][3] - 0.5
    stuck = not (v_nores < UNIGRAM - 0.3)  # NaN (diverged) counts as not learning
    ok = vanishes and flat and learns and stuck
    return (ok if (vanishes or flat) else None,
            "At depth %d the gradient at layer 0's input is %s of the last layer's with the residual and "
            "%s without it. With the residual the fitted factor per layer is %s at depth %d (^32 = %s). Without "
            "it the gradient changes toward the input by a factor per layer of %s (0.8^32 = 8e-4, 1.2^32 = 342), "
            "and at depths %s the forward signal itself underflows, so the gradient is exactly 0. After %d "
            "steps at depth %d: val loss %s with the residual, %s without (unigram entropy %.2f). %s"
            % (deep, fmt(ratio_res) + "x", fmt(ratio_nores) + "x", fmt(f_res), deep, fmt(g[(True, deep)][6]),
               ", ".join("%s at %d layers: it %s toward the input" % (fmt(f), L, "grows" if f > 1 else "shrinks")
                         for L, f in finite) or "-",
               ", ".join(str(L) for L in collapsed) or "none", steps, Ld, fmt(v_res),
               fmt(v_nores), UNIGRAM,
               "The measurements support the claim." if ok else
               "Not every part of the claim holds here (see the tables)."))


def check(res):
    """robust qualitative outcome of the quick form"""
    bad = []
    g = res["tables"][0]["rows"]
    by = {(r[0], r[1]): r for r in g}
    D = max(k[1] for k in by)
    if not (0.1 < by[(True, D)][4] < 10):
        bad.append("with the residual, depth %d: first/last gradient ratio %s not within 10x" % (D, by[(True, D)][4]))
    rn = by[(False, D)][4]
    if isinstance(rn, str) or not (rn < 1e-2 or rn > 1e2):
        bad.append("without the residual, depth %d: ratio %s is not two orders of magnitude from 1" % (D, rn))
    t = {(r[0], r[1]): r for r in res["tables"][2]["rows"]}
    L = max(k[1] for k in t)
    if not (isinstance(t[(False, L)][5], str) or t[(True, L)][5] < t[(False, L)][5]):
        bad.append("depth %d: the residual model's val loss is not below the no-residual one" % L)
    supported, text = judge(res["tables"])
    if supported != res["verdict"]["supported"] or text != res["verdict"]["text"]:
        bad.append("the verdict (%s) does not follow from the tables (%s)" % (res["verdict"]["supported"], supported))
    return bad
