"""moe — a mixture-of-experts FFN against the dense FFN of the same active size: loss, the experts'
load balance without a balancing term, with the load-balancing loss and with DeepSeek-V3's bias
update, and training speed."""
import math
import os
import re
import statistics

import svgplot
from common import fmt, table_rows

NAME = "moe"
TITLE = "Mixture of experts vs dense FFN at equal active parameters: loss, expert load balance, tokens per second"
CLAIM = ("At equal active parameters (each token runs k = 2 of E = 8 experts of width d_ff / 2, so the same FFN "
         "FLOPs as the dense d_ff) a mixture-of-experts model reaches a lower validation loss than the dense "
         "model, because it holds E / k = 4x the FFN parameters; without a balancing term the router sends most "
         "tokens to a few experts, and Switch Transformer's load-balancing loss (softmax routing) and "
         "DeepSeek-V3's auxiliary-loss-free bias update (sigmoid routing) each balance the experts. "
         "Rule for the verdict: the MoE is lower if both balanced MoE runs end below the dense model's validation "
         "loss by more than the spread between two dense seeds (softmax + aux loss, and sigmoid + the bias update at "
         "DeepSeek-V3's rate; higher by more than it: not supported; within it: inconclusive); a balancing method "
         "balances if it removes at least half of the excess load (expert_load_max - 1, averaged over the last "
         "fifth of training) of the same routing without it (the bias update at DeepSeek-V3's rate or at 10x it, "
         "since a short run moves each bias by at most the rate per step). "
         "Supported when both parts hold, not supported when either fails.")

AUX_COEF = 0.01     # Switch Transformer's alpha (Qwen3-MoE / Mixtral ship 0.001)
BIAS_RATES = (0.001, 0.01)  # DeepSeek-V3's gamma, and 10x it (a short run moves each bias by at most gamma a step)


def _moe(ctx, scoring):
    if ctx.quick:
        d = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 88}
    else:
        d = {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 176}
    return dict(d, scoring_func=scoring, norm_topk_prob=True)


def _params(ctx, model):
    """(total, active) parameters as `tinylm info` counts them from the checkpoint's shapes"""
    out = ctx.tinylm("info", "--model", model)
    total = active = None
    for line in out.splitlines():
        m = re.match(r"^(total|active)\s+(?:\d+\s+)?([\d,]+)\s", line)
        if m:
            v = int(m.group(2).replace(",", ""))
            if m.group(1) == "total":
                total = v
            else:
                active = v
    return total, (active if active is not None else total)


def _windows(ctx, n, length):
    """n windows of `length` characters from the held-out last 10% of TinyShakespeare"""
    with open(ctx.data, encoding="utf-8") as f:
        text = f.read()
    start = int(len(text) * 0.9)
    step = (len(text) - start - length) // n
    return [text[start + i * step:start + i * step + length] for i in range(n)]


def _load(ctx, model, windows):
    """each MoE layer's load per expert (share of the routed slots, sums to 1) and mean router
    entropy over the windows, from `tinylm inspect --json`"""
    loads, ents = {}, {}
    for i, w in enumerate(windows):
        p = os.path.join(ctx.out, "window.txt")
        with open(p, "w", encoding="utf-8") as f:
            f.write(w)
        j = ctx.inspect(model, "--prompt-file", p, "--no-bos")
        for e in j.get("experts", []):
            l = e["layer"]
            loads.setdefault(l, [0.0] * len(e["load"]))
            loads[l] = [a + b / len(windows) for a, b in zip(loads[l], e["load"])]
            ents[l] = ents.get(l, 0.0) + e["entropy"] / len(windows)
        os.remove(p)
    return loads, ents


# each run's label in the tables, by key
LABELS = {"dense": "dense (seed 1337)", "dense2": "dense (seed 2)", "softmax": "MoE softmax, no balancing",
          "softmax_aux": "MoE softmax + aux loss %g" % AUX_COEF, "sigmoid": "MoE sigmoid, no balancing",
          "sigmoid_bias": "MoE sigmoid + bias update %g" % BIAS_RATES[0],
          "sigmoid_bias10": "MoE sigmoid + bias update %g" % BIAS_RATES[1]}
MOE = ("softmax", "softmax_aux", "sigmoid", "sigmoid_bias", "sigmoid_bias10")


def _late(values, frac=0.2):
    vals = [v for v in values if v is not None and math.isfinite(v)]
    n = max(1, int(len(vals) * frac))
    return sum(vals[-n:]) / n if vals else float("nan")


def run(ctx):
    steps = 50 if ctx.quick else 600
    base = {"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2} if ctx.quick else {}
    opts = {"warmup": 15 if ctx.quick else 100, "eval-every": max(steps // 8, 1), "eval-batches": 10 if ctx.quick else 20}
    # (key, label in the tables, label in the figures (at most 24 characters), model keys, train options)
    runs = [("dense", LABELS["dense"], "dense", {}, {}),
            ("dense2", LABELS["dense2"], "dense, seed 2", {}, {"seed": 2}),
            ("softmax", LABELS["softmax"], "softmax", _moe(ctx, "softmax"), {}),
            ("softmax_aux", LABELS["softmax_aux"], "softmax + aux %g" % AUX_COEF, _moe(ctx, "softmax"),
             {"router-aux-loss-coef": AUX_COEF}),
            ("sigmoid", LABELS["sigmoid"], "sigmoid", _moe(ctx, "sigmoid"), {}),
            ("sigmoid_bias", LABELS["sigmoid_bias"], "sigmoid + bias %g" % BIAS_RATES[0],
             _moe(ctx, "sigmoid"), {"router-bias-update": BIAS_RATES[0]}),
            ("sigmoid_bias10", LABELS["sigmoid_bias10"], "sigmoid + bias %g" % BIAS_RATES[1],
             _moe(ctx, "sigmoid"), {"router-bias-update": BIAS_RATES[1]})]
    res, rows = {}, []
    windows = _windows(ctx, 4 if ctx.quick else 16, 64)
    for key, label, short, sets, o in runs:
        r = ctx.train("llama-baby", dict(base, **sets), steps=steps, opts=dict(opts, **o))
        total, active = _params(ctx, r.model)
        tps = [m["tokens_per_s"] for m in r.metrics if m["step"] > 10 and m.get("tokens_per_s")]
        lm = [m.get("expert_load_max") for m in r.metrics]
        loads, ents = _load(ctx, r.model, windows) if sets else ({}, {})
        res[key] = dict(run=r, label=label, short=short, total=total, active=active,
                        tps=statistics.median(tps) if tps else float("nan"),
                        tps90=sorted(tps)[int(0.9 * (len(tps) - 1))] if tps else float("nan"), load_max=lm, late=_late(lm) if sets else float("nan"), loads=loads, ents=ents)
        rows.append([label, total, active, r.initial_loss, r.val_loss, res[key]["tps"], res[key]["tps90"], r.seconds,
                     res[key]["late"] if sets else "-",
                     _late([m.get("router_aux_loss") for m in r.metrics]) if "router-aux-loss-coef" in o else "-"])
    E, k = (4, 2) if ctx.quick else (8, 2)
    shape = ("llama-baby at d 64, 2 layers, d_ff 176" if ctx.quick else "llama-baby: d 128, 4 layers, d_ff 352")
    ctx.table("Dense vs MoE (%s; MoE: E %d experts of width %d, top-%d, norm_topk_prob; %d steps, batch 12 x 64, "
              "lr 1e-3 cosine to 1e-4, warmup %d, %d thread(s)). tokens/s: median and 90th percentile over steps 11..%d "
              "(the trainer's own timing; the fast steps are the least disturbed by other jobs); load max: "
              "expert_load_max (the busiest expert of any layer over its even share) averaged over the last fifth "
              "of the steps" % (shape, E, _moe(ctx, "softmax")["moe_intermediate_size"], k, steps, opts["warmup"],
                                ctx.threads, steps),
              ["run", "parameters", "active parameters", "first loss", "val loss", "tokens/s (median)",
               "tokens/s (p90)", "train seconds",
               "load max (last fifth)", "aux term (last fifth)"], rows)

    lrows = []
    for key in MOE:
        for l in sorted(res[key]["loads"]):
            ld = res[key]["loads"][l]
            n = len(ld)
            lrows.append([res[key]["label"], l, max(ld) * n, min(ld) * n, sum(1 for v in ld if v < 1e-9),
                          res[key]["ents"][l], math.log(n), sum(ld)] + [v * n for v in ld])
    ctx.table("Final models: each MoE layer's load per expert on %d held-out windows of 64 characters "
              "(`tinylm inspect`), as a multiple of the even share 1/E; router entropy in nats (at most log E)"
              % len(windows),
              ["run", "layer", "busiest", "idlest", "idle experts", "router entropy", "log E", "sum of shares"]
              + ["expert %d" % e for e in range(E)], lrows)

    # what a load-balancing loss over all MoE layers' rows pooled (Hugging Face's load_balancing_loss_func, which
    # the engine follows) sees: each expert index's share summed over the layers, against each layer's own balance
    prows = []
    for key in MOE:
        lds = res[key]["loads"]
        if not lds:
            continue
        n = len(next(iter(lds.values())))
        pooled = [sum(lds[l][e] for l in lds) / len(lds) for e in range(n)]
        res[key]["pooled_max"] = max(pooled) * n
        res[key]["layer_max"] = sum(max(v) * n for v in lds.values()) / len(lds)
        prows.append([res[key]["label"], res[key]["layer_max"], res[key]["pooled_max"], min(pooled) * n])
    ctx.table("Balance per layer vs pooled over the layers (final models, the windows above; multiples of the even "
              "share): the load-balancing loss pools every MoE layer's rows, so it sees the pooled shares",
              ["run", "busiest expert, mean over layers", "busiest expert index, pooled over layers",
               "idlest expert index, pooled over layers"], prows)

    val = lambda key: [(m["step"], m["val_loss"]) for m in res[key]["run"].metrics if m.get("val_loss") is not None]
    ctx.figure("Validation loss vs step", "val_loss.svg",
               svgplot.line_plot([svgplot.Series(res[k_]["short"], [p[0] for p in val(k_)], [p[1] for p in val(k_)])
                                  for k_, *_ in runs], title="validation loss", xlabel="step", ylabel="val loss"))
    smooth = max(1, steps // 40)
    series = []
    for key in MOE:
        lm = res[key]["load_max"]
        xs = list(range(smooth, len(lm) + 1, smooth))
        series.append(svgplot.Series(res[key]["short"], xs, [sum(lm[x - smooth:x]) / smooth for x in xs]))
    ctx.figure("Expert load balance vs step", "load_max.svg",
               svgplot.line_plot(series, title="busiest expert / even share (mean of %d steps)" % smooth, xlabel="step",
                                 ylabel="expert_load_max", hlines=[(1.0, "even"), (float(E) / k, "one expert takes all")]))
    ctx.figure("Tokens per second (training, median step)", "tokens_per_s.svg",
               svgplot.bar_plot([res[k_]["short"] for k_, *_ in runs],
                                [svgplot.Series("median step", list(range(len(runs))), [res[k_]["tps"] for k_, *_ in runs]),
                                 svgplot.Series("90th percentile", list(range(len(runs))),
                                                [res[k_]["tps90"] for k_, *_ in runs])],
                                title="training tokens per second", ylabel="tokens/s"))

    ctx.verdict(*judge(ctx.tables))
    ctx.note("Equal active parameters: the dense FFN is a SwiGLU of width d_ff; each expert is a SwiGLU of width "
             "d_ff / 2 and a token runs k = 2 of them, so its FFN matrices and FLOPs are the dense model's; the "
             "router (E x d per layer, and sigmoid's E biases) is the difference in the active count (`tinylm info`).")
    ctx.note("expert_load_max (metrics.jsonl, docs/training.md) is each step's largest expert load over the even "
             "share, the maximum over the MoE layers, on the step's 768 training tokens: 1 is perfectly even, E / k "
             "(= %g here) is one expert chosen by every token. Sampling noise alone keeps it somewhat above 1." % (E / k))
    ctx.note("Aux loss coefficient %g is Switch Transformer's alpha (Qwen3-MoE and Mixtral ship 0.001); bias-update "
             "rates %g (DeepSeek-V3's gamma) and %g. Sigmoid routing renormalises the k weights (norm_topk_prob, as "
             "DeepSeek-V3) with routed_scaling_factor 1; no shared expert, no group-limited routing, no capacity "
             "limit (no token is dropped)." % ((AUX_COEF,) + BIAS_RATES))
    ctx.note("The load-balancing loss follows Hugging Face's load_balancing_loss_func: F_e and P_e over every MoE "
             "layer's rows pooled, so an expert index busy in one layer and idle in another counts as balanced; "
             "Switch Transformer adds the loss per layer instead. Its value at an even load is k (here %d), not 1: "
             "F_e sums to k over the experts (the aux term logged is the coefficient times it)." % k)
    ctx.note("tokens/s come from the trainer's own per-step timing on a machine that other jobs shared, so they are "
             "indicative only; the active FLOPs are equal, so a gap is the routing, the per-expert grouping and "
             "the smaller per-expert GEMMs.")


def judge(tables):
    """the verdict from the page's tables alone (run() and check() both call it), by the rule written in
    CLAIM: the val losses, tokens/s and late load maxima of the runs table, the per-layer and pooled
    balance of the pooled table. Returns (supported, text)."""
    rows = {r[0]: r for r in table_rows(tables[0])}
    pooled = {r[0]: r for r in table_rows(tables[2])}
    nan = float("nan")
    res = {}
    for key, label in LABELS.items():
        r = rows[label]
        res[key] = {"val": r[4], "tps90": r[6],
                    "late": r[8] if isinstance(r[8], float) else nan}
        if label in pooled:
            res[key].update(layer_max=pooled[label][1], pooled_max=pooled[label][2])
    dense = res["dense"]["val"]
    spread = abs(dense - res["dense2"]["val"])
    gains = {key: dense - res[key]["val"] for key in ("softmax_aux", "sigmoid_bias")}
    if all(math.isfinite(g) and g > spread for g in gains.values()):
        quality = True
    elif any(not math.isfinite(g) or g < -spread for g in gains.values()):
        quality = False
    else:
        quality = None
    excess = {key: res[key]["late"] - 1.0 for key in MOE}
    halves = lambda bal, ref: math.isfinite(excess[bal]) and math.isfinite(excess[ref]) and excess[bal] <= 0.5 * excess[ref]
    balanced = {"the aux loss": halves("softmax_aux", "softmax"),
                "the bias update": halves("sigmoid_bias", "sigmoid") or halves("sigmoid_bias10", "sigmoid")}
    balance = all(balanced.values())
    supported = False if (quality is False or not balance) else (True if quality else None)
    txt = ("Validation loss: dense %s (seed 2: %s, spread %s); MoE softmax + aux loss %s (%+.3f vs dense), MoE sigmoid "
           "+ bias update %g %s (%+.3f); unbalanced softmax %s, sigmoid %s; bias update %g %s. "
           % (fmt(dense), fmt(res["dense2"]["val"]), fmt(spread), fmt(res["softmax_aux"]["val"]),
              -gains["softmax_aux"], BIAS_RATES[0], fmt(res["sigmoid_bias"]["val"]), -gains["sigmoid_bias"],
              fmt(res["softmax"]["val"]), fmt(res["sigmoid"]["val"]), BIAS_RATES[1],
              fmt(res["sigmoid_bias10"]["val"])))
    txt += ("Excess load of the busiest expert over its even share (last fifth of the steps): softmax %s without, %s "
            "with the aux loss; sigmoid %s without, %s / %s with the bias update %g / %g. "
            % (fmt(excess["softmax"]), fmt(excess["softmax_aux"]), fmt(excess["sigmoid"]), fmt(excess["sigmoid_bias"]),
               fmt(excess["sigmoid_bias10"]), BIAS_RATES[0], BIAS_RATES[1]))
    txt += ("With the aux loss the busiest expert per layer is %sx its share (mean over layers) but pooled over the "
            "layers, which is what the loss sees, the busiest expert index gets %sx. "
            % (fmt(res["softmax_aux"].get("layer_max", float("nan"))), fmt(res["softmax_aux"].get("pooled_max", float("nan")))))
    txt += ("Tokens/s (90th percentile of the steps): dense %s / %s (two seeds), MoE %s to %s. "
            % (fmt(res["dense"]["tps90"]), fmt(res["dense2"]["tps90"]), fmt(min(res[k_]["tps90"] for k_ in MOE)),
               fmt(max(res[k_]["tps90"] for k_ in MOE))))
    txt += {True: "The MoE is lower than dense by more than the seed spread",
            False: "The MoE is not lower: higher than dense by more than the seed spread",
            None: "The loss difference is within the seed spread"}[quality]
    txt += "; " + ("both balancing methods remove at least half of the excess load." if balance else
                   "not removing half of the excess load: %s." % " and ".join(n for n, v in balanced.items() if not v))
    return supported, txt


def check(res):
    bad = []
    rows = res["tables"][0]["rows"]
    dense_active = rows[0][2]
    for r in rows:
        label, active, first, val = r[0], r[2], r[3], r[4]
        if not abs(active - dense_active) <= 0.02 * dense_active:
            bad.append("%s: %s active parameters, not within 2%% of the dense %s" % (label, active, dense_active))
        if isinstance(val, str) or isinstance(first, str) or not val < first - 0.3:
            bad.append("%s: val loss %s not well below the first loss %s" % (label, val, first))
        if label.startswith("MoE"):
            if not (isinstance(r[8], (int, float)) and r[8] >= 1.0):
                bad.append("%s: load max %s below the even share" % (label, r[8]))
            if not r[1] > r[2]:
                bad.append("%s: total parameters %s not above the active %s" % (label, r[1], r[2]))
        aux_logged = isinstance(r[9], (int, float))
        if aux_logged != ("aux loss" in label):
            bad.append("%s: the aux term is %s" % (label, "logged" if aux_logged else "missing"))
    lrows = res["tables"][1]["rows"]
    if len(lrows) != 5 * 2:
        bad.append("%d layer rows in the load table, expected 5 MoE runs x 2 MoE layers" % len(lrows))
    for r in lrows:
        if not abs(r[7] - 1.0) < 1e-3:
            bad.append("%s layer %s: the expert shares sum to %s" % (r[0], r[1], r[7]))
        if not (r[5] >= 0 and r[5] <= r[6] + 1e-6):
            bad.append("%s layer %s: router entropy %s outside [0, log E]" % (r[0], r[1], r[5]))
    supported, text = judge(res["tables"])
    if supported != res["verdict"]["supported"] or text != res["verdict"]["text"]:
        bad.append("the verdict (%s) does not follow from the tables (%s)" % (res["verdict"]["supported"], supported))
    return bad
