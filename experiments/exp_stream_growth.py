"""stream_growth — in a Pre-Norm model the residual stream's norm grows layer by layer."""
import numpy as np

import svgplot
import trained
from common import fmt

NAME = "stream_growth"
TITLE = "Residual-stream norm and relative increments by layer (Pre-Norm, sandwich, stories260K)"
CLAIM = ("In a Pre-Norm transformer nothing normalizes the residual stream itself, so its norm grows with "
         "depth (Qwen2.5-0.5B: 0.47 after the embedding, 4.8, 15-20 in the middle, 76.1 before the last "
         "block, 58.1 after it) while each block's increment becomes small relative to the stream. (The "
         "sandwich placement, with a norm on each sublayer's output, is measured alongside.)")

QWEN = [0.47, 4.8, 17.5, 76.1, 58.1]


def profile(m, ids):
    """per block boundary: mean over tokens of |stream|; per block: mean of |attn_out + mlp_out| / |resid_pre|"""
    L = m.config["num_hidden_layers"]
    names = (["blocks.%d.hook_resid_pre" % l for l in range(L)] + ["blocks.%d.hook_resid_post" % (L - 1)] +
             ["blocks.%d.hook_attn_out" % l for l in range(L)] + ["blocks.%d.hook_mlp_out" % l for l in range(L)])
    _, c = m.run_with_cache(ids, names=names)
    norms = [float(np.linalg.norm(c["blocks.%d.hook_resid_pre" % l], axis=-1)[:, 1:].mean()) for l in range(L)]
    norms.append(float(np.linalg.norm(c["blocks.%d.hook_resid_post" % (L - 1)], axis=-1)[:, 1:].mean()))
    rel = []
    for l in range(L):
        inc = c["blocks.%d.hook_attn_out" % l] + c["blocks.%d.hook_mlp_out" % l]
        r = np.linalg.norm(inc, axis=-1) / np.linalg.norm(c["blocks.%d.hook_resid_pre" % l], axis=-1)
        rel.append(float(r[:, 1:].mean()))
    return norms, rel


def run(ctx):
    tl = ctx.py()
    rows, prof = [], {}
    for p in trained.PLACEMENTS:
        for L in trained.depths(ctx):
            r = trained.model(ctx, p, L)
            m = tl.load(r.model)
            norms, rel = profile(m, trained.windows(ctx, m, 8, 64))
            prof[(p, L)] = (norms, rel)
            rows.append(["%s, %d layers (val %.3f)" % (p, L, r.val_loss), norms[0], norms[len(norms) // 2],
                         max(norms[:-1]), norms[-1], norms[-1] / norms[0], rel[0], rel[-1]])
    m = tl.load(ctx.stories, tokenizer=ctx.stories_tok)
    norms, rel = profile(m, trained.stories_windows(ctx, m, 4, 48))
    prof[("stories260K", m.config["num_hidden_layers"])] = (norms, rel)
    rows.append(["stories260K (pre, %d layers)" % m.config["num_hidden_layers"], norms[0], norms[len(norms) // 2],
                 max(norms[:-1]), norms[-1], norms[-1] / norms[0], rel[0], rel[-1]])
    rows.append(["Qwen2.5-0.5B (the lesson's numbers; middle: 15-20)", QWEN[0], QWEN[2], QWEN[3], QWEN[4],
                 QWEN[4] / QWEN[0],
                 "-", "-"])
    ctx.table("Residual-stream L2 norm (mean over tokens, BOS excluded) and |block increment| / |stream|",
              ["model", "after embedding", "middle", "largest before the last block", "after the last block",
               "last / embedding", "|inc|/|stream| block 0", "|inc|/|stream| last block"], rows)

    series = []
    for k, (norms, rel) in prof.items():
        n = len(norms) - 1
        series.append(svgplot.Series("%s %d" % k, [i / n for i in range(n + 1)], norms))
    series.append(svgplot.Series("Qwen2.5-0.5B", [0, 0.1, 0.5, 23 / 24, 1.0], QWEN))
    ctx.figure("Stream norm by relative depth", "stream_norm.svg",
               svgplot.line_plot(series, title="Residual-stream norm by depth", xlabel="block boundary / layers "
                                 "(0 = embedding, 1 = after the last block)", ylabel="|stream| (log)", ylog=True))
    ctx.figure("Relative increment by layer", "increment_ratio.svg",
               svgplot.line_plot([svgplot.Series("%s %d" % k, list(range(len(v[1]))), v[1]) for k, v in prof.items()],
                                 title="|attn_out + mlp_out| / |resid_pre| per block", xlabel="block",
                                 ylabel="ratio (log)", ylog=True))
    pre = [prof[("pre", L)] for L in trained.depths(ctx)]
    sand = [prof[("sandwich", L)] for L in trained.depths(ctx)]
    grow_pre = [n[-1] / n[0] for n, _ in pre]
    grow_sand = [n[-1] / n[0] for n, _ in sand]
    grows = all(g > 2 for g in grow_pre)
    rel_falls = all(r[-1] < r[0] for _, r in pre)
    deeper_more = grow_pre == sorted(grow_pre)
    sand_less = all(s < p for s, p in zip(grow_sand, grow_pre))
    ok = grows and rel_falls
    ctx.verdict(ok if grows else False,
                "Pre-Norm stream norm last/embedding: %s for depths %s (%s with depth); the relative increment "
                "%s from block 0 to the last block. Sandwich: %s (%s than Pre-Norm; its output norms start at gain 1, so "
                "every increment enters the stream at RMS ~1). stories260K: %s. The "
                "lesson's Qwen2.5-0.5B: %s with a drop in the last block (%s here for Pre-Norm: %s). %s"
                % (", ".join(fmt(g) for g in grow_pre), trained.depths(ctx),
                   "growing" if deeper_more else "not monotone",
                   "falls" if rel_falls else "does not always fall", ", ".join(fmt(g) for g in grow_sand),
                   "less" if sand_less else ("more" if all(a > b for a, b in zip(grow_sand, grow_pre))
                                             else "not always less"),
                   fmt(prof[[k for k in prof if k[0] == "stories260K"][0]][0][-1] /
                       prof[[k for k in prof if k[0] == "stories260K"][0]][0][0]),
                   fmt(QWEN[4] / QWEN[0]), "drop" if any(n[-1] < max(n[:-1]) for n, _ in pre) else "no drop",
                   ", ".join("%s" % ("yes" if n[-1] < max(n[:-1]) else "no") for n, _ in pre),
                   "Supports the growth claim; the magnitudes are far smaller than Qwen's (tiny models, "
                   "%d training steps)." % trained.steps(ctx) if ok else "Does not support it (see the table)."))
    ctx.note("Models: llama-baby (d 128, 4 heads, RMSNorm, RoPE, SwiGLU) with the given depth and placement, "
             "trained %d steps on TinyShakespeare; 8 validation windows of 64 characters. stories260K: 4 story "
             "texts of 48 tokens. Norms from the Python API's run_with_cache (blocks.l.hook_resid_pre, "
             "hook_attn_out, hook_mlp_out)." % trained.steps(ctx))


def check(res):
    rows = res["tables"][0]["rows"]
    bad = []
    for r in rows:
        if r[0].startswith("pre,") and not r[5] > 1.5:
            bad.append("%s: the stream does not grow (last/embedding %s)" % (r[0], r[5]))
    return bad
