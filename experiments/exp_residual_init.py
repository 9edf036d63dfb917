"""residual_init — GPT-2's 1/sqrt(2N) scaling of the residual output projections keeps the stream's
variance at initialization from growing with depth."""
import math

import svgplot
from common import fmt

NAME = "residual_init"
TITLE = "Residual-stream variance at initialization, with and without GPT-2's 1/sqrt(2N) init"
CLAIM = ("Each block adds its output to the residual stream, so at initialization the stream's variance grows "
         "with depth (about linearly, one increment per sublayer); scaling the init of the projections that write "
         "into the stream (o_proj, down_proj) by 1/sqrt(2N), as GPT-2 does (`scale_residual_init`), keeps the "
         "total added variance about the same whatever the depth.")
TERMS = ("Every block adds two increments to the stream; independent increments add their variances, so the "
         "stream's variance at initialisation grows with the number of blocks unless the projections that "
         "write into the stream are scaled by 1/sqrt(2N), as GPT-2 does (tinylm lesson init-depth).")

SMALL = {"hidden_size": 64, "intermediate_size": 176}


def stream_var(ctx, model, prompt):
    """mean over positions of the stream's mean square (variance about 0) after the embedding and after
    each block, from `inspect --json` (its `residual` norms are L2 norms over d)"""
    j = ctx.inspect(model, "--prompt", prompt)
    d = SMALL["hidden_size"]
    by = {r["name"]: r["norm"]["mean"] for r in j["residual"]}
    L = sum(1 for n in by if n.endswith("resid_post"))
    names = ["embed"] + ["layers.%d.resid_post" % l for l in range(L)]
    return [by[n] ** 2 / d for n in names]


LINEAR = (0.75, 1.25)  # "about linearly": the added variance grows like depth^k with k in this range
FLAT = 2.0             # "about the same whatever the depth": the scaled final variance moves less than this factor


def judge(depths, un0, un, sc0, sc):
    """the verdict from the numbers alone: un0/un (sc0/sc) the variance after the embedding and after the
    last block, unscaled (scaled), at each depth. The claim's two parts: (1) unscaled, the variance the
    blocks add grows about linearly with depth: exponent k of (un - un0) between depths[0] and depths[-1]
    within LINEAR; (2) scaled, the final variance moves by less than FLAT x over the depths. Supported when
    both hold, not supported when either fails. Returns (supported, text)."""
    ratio = depths[-1] / depths[0]
    add_first, add_last = un[0] - un0[0], un[-1] - un0[-1]
    k = math.log(add_last / add_first) / math.log(ratio) if add_first > 0 and add_last > 0 else float("nan")
    linear = LINEAR[0] <= k <= LINEAR[1]
    grow_sc = sc[-1] / sc[0]
    flat = 1 / FLAT < grow_sc < FLAT
    supported = linear and flat
    shape = ("about linear" if linear else "faster than linear" if k > LINEAR[1] else
             "slower than linear" if k < LINEAR[0] else "not measurable")
    text = ("From %d to %d layers (x%g) the variance the blocks add at initialisation grows x%s without the "
            "scaling: depth^%.2f, %s (part 1 %s); the final variance with the 1/sqrt(2N) scaling moves x%s (part 2 "
            "%s). Rule: supported when the added variance grows like depth^k with %g <= k <= %g and the scaled "
            "final variance moves by less than %gx; not supported when either fails."
            % (depths[0], depths[-1], ratio, fmt(add_last / add_first) if add_first > 0 else "-", k, shape,
               "holds" if linear else "fails", fmt(grow_sc), "holds" if flat else "fails", LINEAR[0], LINEAR[1],
               FLAT))
    return supported, text


def run(ctx):
    depths = [6, 24] if ctx.quick else [6, 12, 24, 48]
    with open(ctx.data, encoding="utf-8") as f:
        prompt = f.read()[5000:5064]
    rows, curves = [], {}
    for scaled in (False, True):
        for L in depths:
            m = ctx.init_model("llama-baby", dict(SMALL, num_hidden_layers=L, scale_residual_init=scaled))
            v = stream_var(ctx, m.model, prompt)
            curves[(scaled, L)] = v
            rows.append([scaled, L, v[0], v[L // 2], v[-1], v[-1] / v[0], (v[-1] - v[0]) / L])
    ctx.table("Residual-stream variance (mean square over d, mean over 64 positions) at initialization "
              "(llama-baby at d 64, Pre-Norm, init std 0.02)",
              ["scale_residual_init", "layers", "after embedding", "after the middle block", "after the last block",
               "last / embedding", "added per block"], rows)
    # one colour per init in both figures (unscaled vermilion, 1/sqrt(2N) blue), the depth as dash and marker
    COLOUR = {False: 5, True: 4}
    series = []
    for scaled in (False, True):
        for j, L in enumerate(depths):
            series.append(svgplot.Series("%s, %d layers" % ("1/sqrt(2N)" if scaled else "unscaled", L),
                                         list(range(L + 1)), curves[(scaled, L)],
                                         style={"colour": COLOUR[scaled], "dash": j, "marker": j}))
    ctx.figure("Stream variance by layer at init", "variance_by_layer.svg",
               svgplot.line_plot(series, title="Residual-stream variance at init", xlabel="block boundary "
                                 "(0 = embedding)", ylabel="mean square (log)", ylog=True))
    ctx.figure("Final stream variance vs depth", "variance_vs_depth.svg",
               svgplot.line_plot([svgplot.Series("unscaled", depths, [curves[(False, L)][-1] for L in depths],
                                                 style={"colour": COLOUR[False], "dash": 0, "marker": 0}),
                                  svgplot.Series("1/sqrt(2N)", depths, [curves[(True, L)][-1] for L in depths],
                                                 style={"colour": COLOUR[True], "dash": 1, "marker": 1})],
                                 title="Variance after the last block", xlabel="layers", ylabel="mean square (log)",
                                 xlog=True, ylog=True, xticklabels={L: str(L) for L in depths}))
    supported, text = judge(depths, [curves[(False, L)][0] for L in depths], [curves[(False, L)][-1] for L in depths],
                            [curves[(True, L)][0] for L in depths], [curves[(True, L)][-1] for L in depths])
    ctx.verdict(supported, text)
    ctx.note("Initialization = a checkpoint after one step at learning rate 1e-12. Variance = (L2 norm)^2 / d "
             "of `tinylm inspect --json`'s residual norms, averaged over the positions of a 64-character "
             "TinyShakespeare prompt.")


def check(res):
    """the verdict follows from the table (judge() on its numbers), and the qualitative outcome holds"""
    rows = res["tables"][0]["rows"]
    un = [r for r in rows if r[0] is False]
    sc = [r for r in rows if r[0] is True]
    bad = []
    if not un[-1][4] > 2 * un[0][4]:
        bad.append("unscaled: the final variance does not grow with depth")
    if not sc[-1][4] < 2 * sc[0][4]:
        bad.append("scaled: the final variance grows more than 2x with depth")
    supported, text = judge([r[1] for r in un], [r[2] for r in un], [r[4] for r in un], [r[2] for r in sc],
                            [r[4] for r in sc])
    if supported != res["verdict"]["supported"] or text != res["verdict"]["text"]:
        bad.append("the verdict (%s) does not follow from the table (%s)" % (res["verdict"]["supported"], supported))
    return bad
