"""tuned_lens — KL to the model's final output per layer: the logit lens vs the tuned lens
(Belrose et al. 2023), on a small model trained here and on stories260K."""
import json
import os

import svgplot
from common import fmt, table_rows

NAME = "tuned_lens"
TITLE = "Logit lens vs tuned lens: KL(final || lens) per layer"
CLAIM = ("The logit lens (each layer's residual stream read by the model's own final norm and head) is a "
         "biased, brittle view of early layers: their stream lives in another basis, so its prediction is far from "
         "the model's output. The tuned lens (Belrose et al. 2023) learns one affine translator per layer "
         "(h + A h + b, trained on KL to the final distribution with the model frozen) and brings every layer's "
         "prediction much closer to the final one, most of all in the early layers.")
TERMS = ("The logit lens reads a stage of the residual stream through the final norm and the unembedding, as "
         "if the later blocks were deleted; early stages are read badly because the stream there is not yet in"
         " the head's basis (at the embedding a tied head reads back the input token), which a per-layer "
         "translator corrects (tinylm lesson stream).")


def lens_stages(ctx, model, data, steps, batch, seq, eval_batches, tokenizer=None):
    out = os.path.join(ctx.out, "lens_%s.safetensors" % os.path.basename(model.rstrip("/")).replace(".", "_"))
    args = ["lens", "train", "--model", model, "--data", data, "--out", out, "--steps", steps, "--lr", "3e-3",
            "--batch", batch, "--seq", seq, "--eval-batches", eval_batches, "--warmup", max(steps // 10, 1), "--json",
            "--threads", ctx.threads]
    if tokenizer:
        args += ["--tokenizer", tokenizer]
    return json.loads(ctx.tinylm(*args))["stages"]


def story_corpus(ctx, n):
    """stories260K's own samples: text in its training distribution (TinyStories), which the repository does
    not ship"""
    path = os.path.join(ctx.out, "stories260K_samples.txt")
    with open(path, "w", encoding="utf-8") as f:
        for seed in range(1, n + 1):
            f.write(ctx.tinylm("generate", "--model", ctx.stories, "--tokenizer", ctx.stories_tok, "--prompt",
                               "Once upon a time", "-n", 400, "--seed", seed, "--temperature", "1.0",
                               "--threads", ctx.threads) + "\n")
    return path


def run(ctx):
    q = ctx.quick
    # model 1: llama-baby trained here on TinyShakespeare (characters)
    sets = {"hidden_size": 64, "intermediate_size": 176} if q else {}
    r = ctx.train("llama-baby", sets, steps=200 if q else 2000, opts={"eval-batches": 10})
    models = [("llama-baby%s, %d steps on TinyShakespeare" % (" (d 64)" if q else "", 200 if q else 2000),
               r.path, ctx.data, None)]
    # model 2: stories260K (llama2.c, 5 layers, d 64, vocab 512)
    models.append(("stories260K (llama2.c)", ctx.stories, story_corpus(ctx, 6 if q else 30), ctx.stories_tok))
    steps = 40 if q else 400
    batch, seq, evb = (4, 48, 3) if q else (8, 64, 8)
    rows, curves = [], []
    summary = []
    for label, model, data, tok in models:
        st = lens_stages(ctx, model, data, steps, batch, seq, evb, tok)
        for s in st:
            rows.append([label, s["stage"], s["name"], s["logit_lens_kl"], s["tuned_lens_kl"]])
        xs = [s["stage"] for s in st[:-1]]
        curves.append(svgplot.Series("logit lens, %s" % label.split(",")[0], xs, [s["logit_lens_kl"] for s in st[:-1]]))
        curves.append(svgplot.Series("tuned lens, %s" % label.split(",")[0], xs, [s["tuned_lens_kl"] for s in st[:-1]]))
        inner = st[:-1]
        ml = sum(s["logit_lens_kl"] for s in inner) / len(inner)
        mt = sum(s["tuned_lens_kl"] for s in inner) / len(inner)
        summary.append([label, ml, mt, ml / mt if mt > 0 else float("inf"), inner[0]["logit_lens_kl"],
                        inner[0]["tuned_lens_kl"], all(s["tuned_lens_kl"] < s["logit_lens_kl"] for s in inner)])
    ctx.table("KL(final || lens) in nats per stage, mean over held-out positions (stage 0 = the embedding, "
              "stage k = the output of block k-1; the last stage is the model's output). Lens: %d AdamW steps, "
              "lr 3e-3, batch %d x %d" % (steps, batch, seq),
              ["model", "stage", "name", "logit lens KL", "tuned lens KL"], rows)
    ctx.table("Summary over the stages before the output",
              ["model", "mean KL, logit lens", "mean KL, tuned lens", "ratio", "embedding: logit lens",
               "embedding: tuned lens", "tuned < logit at every stage"], summary)
    ctx.figure("KL to the final distribution per stage", "kl_by_stage.svg",
               svgplot.line_plot(curves, title="KL(final || lens) per stage", xlabel="stage (0 = embedding)",
                                 ylabel="KL, nats (log)", ylog=True))
    ctx.verdict(*judge(ctx.tables))
    ctx.note("`tinylm lens train` (docs/probes.md): translators initialised to the identity (so the untrained lens "
             "is the logit lens exactly), trained on the first 90% of the text's tokens, KL measured on fixed "
             "windows of the last 10%. The stories260K corpus is the model's own samples (temperature 1), since "
             "the repository has no TinyStories text.")


def judge(tables):
    """the verdict from the page's tables alone (run() and check() both call it): supported when, in the
    per-stage table, the tuned lens's KL is below the logit lens's at every stage before the output of
    every model; inconclusive otherwise. The means quoted are the summary table's. Returns (supported, text)."""
    stages, summary = table_rows(tables[0]), table_rows(tables[1])
    every = {}
    for label in dict.fromkeys(r[0] for r in stages):
        inner = [r for r in stages if r[0] == label][:-1]  # the last stage is the model's output
        every[label] = all(r[4] < r[3] for r in inner)
    ok = all(every.values())
    return (ok if ok else None,
            "; ".join("%s: mean KL %s (logit lens) vs %s (tuned lens), %sx lower; at the embedding %s vs %s"
                      % (s[0], fmt(s[1]), fmt(s[2]), fmt(s[3], 3), fmt(s[4]), fmt(s[5])) for s in summary) +
            (". The tuned lens is closer to the model's output at every stage of both models." if ok else
             ". The tuned lens is not closer at every stage."))


def check(res):
    bad = []
    for s in res["tables"][1]["rows"]:
        if not (isinstance(s[1], (int, float)) and isinstance(s[2], (int, float)) and s[2] < s[1]):
            bad.append("%s: the tuned lens's mean KL %s is not below the logit lens's %s" % (s[0], s[2], s[1]))
    last = {}
    for r in res["tables"][0]["rows"]:
        last[r[0]] = r
    for m, r in last.items():
        if r[3] != 0 or r[4] != 0:
            bad.append("%s: the last stage (the model's output) should have KL 0 for both lenses" % m)
    if [s[6] for s in res["tables"][1]["rows"]] != [all(r[4] < r[3] for r in res["tables"][0]["rows"] if r[0] == s[0]
                                                        and r[1] < max(q[1] for q in res["tables"][0]["rows"]
                                                                       if q[0] == s[0])) for s in res["tables"][1]["rows"]]:
        bad.append("the summary's 'tuned < logit at every stage' does not follow from the per-stage table")
    supported, text = judge(res["tables"])
    if supported != res["verdict"]["supported"] or text != res["verdict"]["text"]:
        bad.append("the verdict (%s) does not follow from the tables (%s)" % (res["verdict"]["supported"], supported))
    return bad
