"""dyt — Dynamic Tanh (Zhu et al. 2025) in place of every RMSNorm, at equal steps: the paper's LLaMA
initialisation (alpha0 by position, the embedding scaled by sqrt(d)) and a small alpha0 sweep, then
the best setting in a smaller data regime."""
import json
import math
import os
import re
import struct

import numpy as np

import svgplot
from common import fmt, table_rows

NAME = "dyt"
TITLE = "DyT (y = g tanh(alpha x) + b) vs RMSNorm at equal steps: the paper's alpha0 rule and an alpha0 sweep"
CLAIM = ("Transformers without normalization (Zhu et al. 2025): replacing every norm layer by DyT, an "
         "element-wise g * tanh(alpha * x) + b with one learnable scalar alpha per layer, trains to about the same "
         "loss as the normalized model at the same number of steps. For LLaMA-style models the paper sets alpha0 "
         "per position (attention norms larger than the FFN and final norms: 0.8 / 0.2 at width 4096, smaller for "
         "wider models) and scales the embedding by a learnable scalar starting at sqrt(d); DyT is sensitive to "
         "alpha0 there.")

RULE = ("Verdict rule: the gap of a DyT setting is its validation loss minus RMSNorm's (the better of RMSNorm with "
        "and without the sqrt(d) embedding scale) at the same steps; supported if the best DyT setting of the sweep "
        "is within 5% of RMSNorm's loss (on the full corpus, and in the smaller regime when the form runs it); not "
        "supported if it is more than 5% behind everywhere; inconclusive otherwise. 'Closed' = the share of the "
        "default setting's gap (alpha0 0.5 everywhere, no embedding scale) that a setting removes.")


def settings(quick):
    """(label, config sets) of the sweep: RMSNorm baselines, then DyT settings"""
    rms = [("RMSNorm", {"norm_type": "rmsnorm"}), ("RMSNorm, emb x sqrt(d)", {"norm_type": "rmsnorm",
                                                                               "embedding_scale": True})]

    def dyt(attn, ffn, final, scale):
        s = {"norm_type": "dyt", "dyt_alpha_init": attn}
        if ffn != attn or final != attn:
            s.update(dyt_alpha_init_attn=attn, dyt_alpha_init_ffn=ffn, dyt_alpha_init_final=final)
        if scale:
            s["embedding_scale"] = True
        lab = ("DyT a0 %g" % attn) if ffn == attn == final else ("DyT a0 %g/%g/%g" % (attn, ffn, final))
        return (lab + (", emb x sqrt(d)" if scale else ""), s)
    if quick:
        return rms[:1], [dyt(0.5, 0.5, 0.5, False), dyt(4, 1, 1, True)]
    return rms, [dyt(0.5, 0.5, 0.5, False), dyt(0.8, 0.2, 0.2, False), dyt(0.8, 0.2, 0.2, True),
                 dyt(4, 1, 1, True), dyt(8, 2, 2, True), dyt(16, 4, 4, True)]


def read_alphas(run_dir):
    """{tensor name: value} of the DyT alphas in a run's latest checkpoint (safetensors, f32)"""
    path = os.path.join(run_dir, "latest", "model.safetensors")
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for k, v in head.items():
            if k.endswith(".alpha") and v.get("dtype") == "F32":
                f.seek(base + v["data_offsets"][0])
                out[k] = float(np.frombuffer(f.read(4), "<f4")[0])
    return out


def mean_last(r, k=10):
    return sum(m["loss"] for m in r.metrics[-k:]) / min(k, len(r.metrics)) if r.metrics else float("nan")


def run(ctx):
    steps = 60 if ctx.quick else 1000
    size = {"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2} if ctx.quick else {}
    opts = {"weight-decay": 0.0, "warmup": 20 if ctx.quick else 100, "eval-batches": 10,
            "eval-every": max(steps // 4, 1)}
    rms, dyts = settings(ctx.quick)
    with open(ctx.data, encoding="utf-8") as f:
        text = f.read()
    small_chars = 60000 if ctx.quick else 100000
    small = os.path.join(ctx.out, "shakespeare_small.txt")
    with open(small, "w", encoding="utf-8") as f:
        f.write(text[:small_chars])
    full_name, small_name = "TinyShakespeare (1.1M chars)", "first %dk chars" % (small_chars // 1000)

    res = {}
    for lab, s in rms + dyts:
        res[(full_name, lab)] = ctx.train("llama-baby", dict(size, **s), steps=steps, opts=opts)
    base = min(res[(full_name, lab)].val_loss for lab, _ in rms)
    default = res[(full_name, dyts[0][0])].val_loss
    gap0 = default - base
    rows, fin = [], {}
    for lab, s in rms + dyts:
        r = res[(full_name, lab)]
        gap = r.val_loss - base
        al = read_alphas(r.path) if s["norm_type"] == "dyt" else {}
        fin[lab] = al
        a_attn = [v for k, v in al.items() if ".attn_norm" in k]
        a_ffn = [v for k, v in al.items() if ".ffn_norm" in k]
        a_fin = al.get("final_norm.alpha")
        rows.append([lab, r.initial_loss, mean_last(r), r.val_loss, gap if s["norm_type"] == "dyt" else "-",
                     (gap0 - gap) / gap0 if s["norm_type"] == "dyt" and gap0 > 0 else "-",
                     "%.2f-%.2f" % (min(a_attn), max(a_attn)) if a_attn else "-",
                     "%.2f-%.2f" % (min(a_ffn), max(a_ffn)) if a_ffn else "-",
                     a_fin if a_fin is not None else "-", r.seconds])
    ctx.table("The sweep on %s: loss at %d steps (llama-baby%s, batch 12 x 64, AdamW lr 1e-3 cosine to 1e-4, no "
              "weight decay; a0 attn/ffn/final; train loss: the mean of the last 10 steps)"
              % (full_name, steps, " at d 64, d_ff 176, 2 layers" if ctx.quick else " (d 128, 4 layers)"),
              ["setting", "first loss", "train loss", "val loss", "gap to RMSNorm", "share of the default's gap "
               "closed", "learned alpha attn norms", "learned alpha ffn norms", "learned alpha final", "wall s"], rows)

    best_lab = min((lab for lab, _ in dyts), key=lambda lab: res[(full_name, lab)].val_loss
                   if math.isfinite(res[(full_name, lab)].val_loss) else float("inf"))
    best_sets = dict(dyts)[best_lab]
    # the smaller data regime: RMSNorm, the default DyT and the best setting (the quick form; the full form
    # of 2026-12-03 left it out: its time on the shared 2-core machine ran out, see docs/experiments.md)
    srows = []
    small_res = {}
    small_sets = [rms[0], dyts[0]] + ([(best_lab, best_sets)] if best_lab != dyts[0][0] else [])
    for lab, s in (small_sets if ctx.quick else []):
        r = ctx.train("llama-baby", dict(size, **s), steps=steps, data=small, opts=opts)
        small_res[lab] = r
        srows.append([lab, r.initial_loss, mean_last(r), r.val_loss, r.val_loss - mean_last(r)])
    if srows:
        ctx.table("The default and the best DyT setting on the %s (the same model and steps; gap = val - train)"
                  % small_name, ["setting", "first loss", "train loss", "val loss", "generalization gap"], srows)

    series = []
    for lab, _ in rms + dyts:
        r = res[(full_name, lab)]
        pts = [(m["step"], m["val_loss"]) for m in r.metrics if m.get("val_loss") is not None]
        series.append(svgplot.Series(lab, [p[0] for p in pts], [p[1] for p in pts]))
    ctx.figure("Validation loss during training, %s" % full_name, "val_full.svg",
               svgplot.line_plot(series, title="validation loss, %s" % full_name, xlabel="step", ylabel="val loss"))
    labs = [lab for lab, _ in dyts]
    ctx.figure("Gap to RMSNorm by DyT setting", "gap.svg",
               svgplot.bar_plot([lab.replace("DyT a0 ", "").replace(", emb x sqrt(d)", " +s") for lab in labs],
                                [svgplot.Series("val loss - RMSNorm's", None,
                                                [res[(full_name, lab)].val_loss - base for lab in labs])],
                                title="DyT gap to RMSNorm at %d steps (+s: embedding x sqrt(d))" % steps,
                                ylabel="nats"))

    ctx.verdict(*judge(ctx.tables))
    ctx.note(RULE)
    ctx.note("DyT: norm_type \"dyt\" in every norm including the final one, gamma 1, beta 0; alpha0 per position "
             "with dyt_alpha_init_attn / dyt_alpha_init_ffn / dyt_alpha_init_final (docs/config.md), the paper's "
             "LLaMA ratio attn = 4 x ffn = 4 x final. 'emb x sqrt(d)': embedding_scale true, a fixed factor sqrt(d) "
             "after the embedding (the paper's is a learnable scalar initialised to sqrt(d)); the embedding's init "
             "std is 0.02, so the stream starts at RMS 0.02 without it, 0.02 sqrt(128) = 0.23 with it (at the "
             "paper's width 4096: 1.28). DyT's alpha, gamma and beta are norm parameters (never weight-decayed).")
    ctx.note("Not an engine error as far as the tests reach: DyT's forward and backward match the float64 PyTorch "
             "reference (parity cases) and a DyT + z-loss training trajectory matches torch.optim.AdamW step for step "
             "(train_parity_pytorch); the per-position alpha0 only changes the init (test_explain checks each norm's "
             "alpha after a run at learning rate 1e-12).")
    ctx.note("An earlier form of this experiment (2026-12-01) found that weight decay 0.1 changed the gap by at "
             "most 0.033 nats (both regimes), so the sweep runs without it. The character vocabulary is each corpus's own, so "
             "losses compare within a regime, not across.")


def judge(tables):
    """the verdict from the page's tables alone (run() and check() both call it): the sweep table (RMSNorm's
    rows, then the DyT settings, the default first) and, when present, the smaller-data table. Supported when
    the best DyT setting of the sweep is within 5% of RMSNorm's val loss in every regime run, not supported
    when in none, otherwise inconclusive. Returns (supported, text)."""
    rows = table_rows(tables[0])
    m = re.match(r"The sweep on (.*): loss at (\d+) steps", tables[0]["title"])
    full_name, steps = m.group(1), int(m.group(2))
    val = {r[0]: r[3] for r in rows}
    dyt_labs = [r[0] for r in rows if r[0].startswith("DyT")]
    base = min(v for lab, v in val.items() if lab not in dyt_labs)
    default = val[dyt_labs[0]]
    gap0 = default - base
    best_lab = min(dyt_labs, key=lambda lab: val[lab] if math.isfinite(val[lab]) else float("inf"))
    best = val[best_lab]
    gap_best = best - base
    within = [math.isfinite(gap_best) and gap_best < 0.05 * base]
    small = [t for t in tables if t["title"].startswith("The default and the best DyT setting on the ")]
    if small:
        small_name = re.match(r"The default and the best DyT setting on the (.*) \(the same", small[0]["title"]).group(1)
        sval = {r[0]: r[3] for r in table_rows(small[0])}
        sbase, sbest = sval[rows[0][0]], sval[best_lab]
        within.append(math.isfinite(sbest) and sbest - sbase < 0.05 * sbase)
        small_txt = "%s: RMSNorm %s, default DyT %s, %s %s. " % (small_name, fmt(sbase), fmt(sval[dyt_labs[0]]),
                                                                  best_lab, fmt(sbest))
    else:
        small_txt = ""
    supported = True if all(within) else (False if not any(within) else None)
    return (supported,
            "%s, %d steps: RMSNorm %s; DyT default (a0 0.5, no embedding scale) %s (gap %+.3f); best DyT setting "
            "%s: %s (gap %+.3f, %s of the default's gap closed). %s%s"
            % (full_name, steps, fmt(base), fmt(default), gap0, best_lab, fmt(best), gap_best,
               "%.0f%%" % (100 * (gap0 - gap_best) / gap0) if gap0 > 0 else "-", small_txt,
               {True: "The best DyT setting is within 5% of RMSNorm in every regime run: supports the claim at "
                      "this scale once alpha0 and the embedding scale are set as the paper does.",
                False: "DyT stays more than 5% behind RMSNorm with every alpha0 tried.",
                None: "Within 5% in one regime only."}[supported]))


def check(res):
    bad = []
    rows = res["tables"][0]["rows"]
    for r in rows:
        name, first, val = r[0], r[1], r[3]
        if isinstance(val, str) or isinstance(first, str) or not math.isfinite(val) or not val < first:
            bad.append("%s: val loss %s not below the first loss %s" % (name, val, first))
    if not rows[0][3] < rows[0][1] - 0.3:
        bad.append("RMSNorm did not learn (val %s, first %s)" % (rows[0][3], rows[0][1]))
    supported, text = judge(res["tables"])
    if supported != res["verdict"]["supported"] or text != res["verdict"]["text"]:
        bad.append("the verdict (%s) does not follow from the tables (%s)" % (res["verdict"]["supported"], supported))
    return bad
