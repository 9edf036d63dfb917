"""residual_init — GPT-2's 1/sqrt(2N) scaling of the residual output projections keeps the stream's
variance at initialization from growing with depth."""
import svgplot
from common import fmt

NAME = "residual_init"
TITLE = "Residual-stream variance at initialization, with and without GPT-2's 1/sqrt(2N) init"
CLAIM = ("Each block adds its output to the residual stream, so at initialization the stream's variance grows "
         "with depth (about linearly, one increment per sublayer); scaling the init of the projections that write "
         "into the stream (o_proj, down_proj) by 1/sqrt(2N), as GPT-2 does (`scale_residual_init`), keeps the "
         "total added variance about the same whatever the depth.")

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
    series = []
    for scaled in (False, True):
        for L in depths:
            series.append(svgplot.Series("%s, %d layers" % ("1/sqrt(2N)" if scaled else "unscaled", L),
                                         list(range(L + 1)), curves[(scaled, L)]))
    ctx.figure("Stream variance by layer at init", "variance_by_layer.svg",
               svgplot.line_plot(series, title="Residual-stream variance at init", xlabel="block boundary "
                                 "(0 = embedding)", ylabel="mean square (log)", ylog=True))
    ctx.figure("Final stream variance vs depth", "variance_vs_depth.svg",
               svgplot.line_plot([svgplot.Series("unscaled", depths, [curves[(False, L)][-1] for L in depths]),
                                  svgplot.Series("1/sqrt(2N)", depths, [curves[(True, L)][-1] for L in depths])],
                                 title="Variance after the last block", xlabel="layers", ylabel="mean square (log)",
                                 xlog=True, ylog=True, xticklabels={L: str(L) for L in depths}))
    un = [curves[(False, L)][-1] for L in depths]
    sc = [curves[(True, L)][-1] for L in depths]
    grow_un = un[-1] / un[0]
    grow_sc = sc[-1] / sc[0]
    depth_ratio = depths[-1] / depths[0]
    import math
    ok = grow_un > 0.5 * depth_ratio and grow_sc < 2.0
    expo = math.log(grow_un) / math.log(depth_ratio)
    ctx.verdict(ok, "From %d to %d layers (x%g) the final stream variance grows x%s without the scaling "
                    "(%s per block added at %d layers; growth ~ depth^%.2f, %s) and x%s with it. %s"
                % (depths[0], depths[-1], depth_ratio, fmt(grow_un), fmt(rows[len(depths) - 1][6]), depths[-1],
                   expo, "faster than the linear growth the claim says" if expo > 1.2 else "about linear",
                   fmt(grow_sc), "Supports the claim that the scaling removes the growth." if ok else
                   "Does not match the claim (see the table)."))
    ctx.note("Initialization = a checkpoint after one step at learning rate 1e-12. Variance = (L2 norm)^2 / d "
             "of `tinylm inspect --json`'s residual norms, averaged over the positions of a 64-character "
             "TinyShakespeare prompt.")


def check(res):
    rows = res["tables"][0]["rows"]
    un = [r for r in rows if r[0] is False]
    sc = [r for r in rows if r[0] is True]
    bad = []
    if not un[-1][4] > 2 * un[0][4]:
        bad.append("unscaled: the final variance does not grow with depth")
    if not sc[-1][4] < 2 * sc[0][4]:
        bad.append("scaled: the final variance grows more than 2x with depth")
    return bad
