"""attention_sinks — heads park attention on the first token; the largest activations sit there."""
import numpy as np

import svgplot
import trained
from common import fmt

NAME = "attention_sinks"
TITLE = "Attention sinks: attention mass on position 0 per head, and where the largest activations are"
CLAIM = ("Trained transformers park much of their attention on the first token (an 'attention sink', Xiao et "
         "al. 2023): many heads give position 0 far more than the uniform share, and the residual stream's "
         "largest activations ('massive activations', Sun et al. 2024) occur at that position.")


def analyse(m, ids, q0=4):
    """per layer and head: mean attention on key 0 over queries >= q0, and the uniform baseline;
    per layer: largest |resid_post| entry, its position and channel, and its ratio to the median |x|"""
    L, H = m.config["num_hidden_layers"], m.config["num_attention_heads"]
    names = ["blocks.%d.attn.hook_pattern" % l for l in range(L)] + ["blocks.%d.hook_resid_post" % l for l in range(L)]
    _, c = m.run_with_cache(ids, names=names)
    T = ids.shape[-1]
    uniform = float(np.mean([1.0 / (i + 1) for i in range(q0, T)]))
    mass = np.zeros((L, H))
    acts = []
    for l in range(L):
        p = c["blocks.%d.attn.hook_pattern" % l]  # [B, H, T, T]
        mass[l] = p[:, :, q0:, 0].mean(axis=(0, 2))
        x = np.abs(c["blocks.%d.hook_resid_post" % l])  # [B, T, d]
        b, t, ch = np.unravel_index(np.argmax(x), x.shape)
        acts.append((float(x[b, t, ch]), int(t), int(ch), float(x[b, t, ch] / np.median(x)),
                     float(x[:, 0].max() / max(x[:, 1:].max(), 1e-30))))
    return mass, uniform, acts


def run(ctx):
    tl = ctx.py()
    models = []
    for p in trained.PLACEMENTS:
        for L in trained.depths(ctx):
            r = trained.model(ctx, p, L)
            m = tl.load(r.model)
            models.append(("%s, %d layers" % (p, L), m, trained.windows(ctx, m, 8, 64)))
    m = tl.load(ctx.stories, tokenizer=ctx.stories_tok)
    models.append(("stories260K (BOS first)", m, trained.stories_windows(ctx, m, 4, 48)))
    hrows, arows, res = [], [], {}
    for name, m, ids in models:
        mass, uni, acts = analyse(m, ids)
        res[name] = (mass, uni, acts)
        sink = mass > 0.3
        hrows.append([name, mass.size, uni, float(mass.mean()), float(mass.max()), int(sink.sum()),
                      float((mass > 5 * uni).mean())])
        for l, (v, t, ch, rel, r0) in enumerate(acts):
            arows.append([name, l, v, t, ch, rel, r0])
    ctx.table("Attention on position 0 (mean over queries 4..T-1 and windows), per head",
              ["model", "heads", "uniform share", "mean over heads", "largest head", "heads with > 0.3",
               "fraction of heads > 5x uniform"], hrows)
    ctx.table("Largest |activation| of the residual stream after each block",
              ["model", "block", "max |x|", "at position", "channel", "/ median |x|", "max at pos 0 / max elsewhere"],
              arows)
    names = list(res)
    ctx.figure("Attention mass on position 0 per head", "sink_mass.svg",
               svgplot.line_plot([svgplot.Series(n, list(range(res[n][0].size)), list(res[n][0].ravel()))
                                  for n in names],
                                 title="Attention on position 0, heads in layer-major order", xlabel="head index "
                                 "(layer x heads + head)", ylabel="mean attention on key 0", ylim=(0, 1)))
    ctx.figure("Largest activation per block", "massive_acts.svg",
               svgplot.line_plot([svgplot.Series(n, list(range(len(res[n][2]))), [a[3] for a in res[n][2]])
                                  for n in names],
                                 title="max |x| / median |x| of the residual stream", xlabel="block",
                                 ylabel="ratio (log)", ylog=True))
    st = res["stories260K (BOS first)"]
    st_frac = float((st[0] > 5 * st[1]).mean())
    st_pos0 = sum(1 for a in st[2] if a[1] == 0)
    sh = [res[n] for n in names if not n.startswith("stories")]
    sh_frac = float(np.mean([float((r[0] > 5 * r[1]).mean()) for r in sh]))
    sh_pos0 = sum(1 for r in sh for a in r[2] if a[1] == 0)
    sh_blocks = sum(len(r[2]) for r in sh)
    ok = st_frac >= 0.25 and st_pos0 >= 1
    ctx.verdict(ok if (st_frac >= 0.25 or st_frac < 0.05) else None,
                "stories260K: %s of its heads give position 0 more than 5x the uniform share (largest head %s); "
                "its largest stream activation is at position 0 in %d of %d blocks (max / median %s). "
                "TinyShakespeare models (character level, no BOS, %d steps): %s of heads above 5x uniform, "
                "largest activation at position 0 in %d of %d blocks. %s"
                % (fmt(st_frac), fmt(float(st[0].max())), st_pos0, len(st[2]), fmt(max(a[3] for a in st[2])),
                   trained.steps(ctx), fmt(sh_frac), sh_pos0, sh_blocks,
                   "Supports the claim on the real model." if ok else
                   "The attention-sink part is not seen in these models%s." %
                   (" (the largest activations do sit at position 0 in stories260K)" if st_pos0 else "")))
    ctx.note("Queries 0-3 are left out of the attention means (they see few keys, so position 0 gets a large "
             "share by construction); the uniform share is the mean of 1/(i+1) over the queries used.")


def check(res):
    bad = []
    rows = res["tables"][0]["rows"]
    for r in rows:
        if not (0 <= r[3] <= 1 and 0 <= r[4] <= 1):
            bad.append("%s: attention mass outside [0, 1]" % r[0])
    for r in res["tables"][1]["rows"]:
        if not r[5] > 1:
            bad.append("%s block %d: the largest activation is not above the median" % (r[0], r[1]))
    return bad
