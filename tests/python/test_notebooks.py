#!/usr/bin/python3
"""test_notebooks.py — the notebooks of examples/ executed (Debian's python3-nbclient, the
python3 kernel of python3-ipykernel), their numbers checked against an independent float64
PyTorch implementation (tests/reference/tinylm_ref.py, the weights read by tests/probes/
llama2c_ref.py for stories260K, by tinylm_ref.load for the trained model).

    test_notebooks.py --lib build/libtinylm.so --tinylm build/tinylm --work DIR [--only NAME,...]

1. logit_lens_dla.ipynb: the logit lens (each layer's stream through the final norm with its own
   scale and W_U), DLA per component and per head (the stream's terms through the final norm with
   the whole stream's scale, dotted with W_U[Lily] - W_U[Tim]) = the reference's from its own
   activations; the DLA adds up to the logit difference.
2. patching.ipynb: every activation-patching cell (resid_pre by layer x position, hook_z by head) =
   the reference run with the same replacement; attribution patching = (clean - corrupted) . the
   reference's autograd gradient of the metric.
3. induction_heads.ipynb: the model `tinylm train` made has an induction head (score > 0.3) fed by
   a previous-token head in layer 0; scores, copy losses and the ablated loss = the reference on the
   trained checkpoint; ablating the best induction head raises the second copy's loss.
4. exploratory_analysis.ipynb (--only exploratory_analysis: its own ctest): TransformerLens'
   exploratory-analysis flow on stories260K (she / he after Lily / Tim, a batch of 8 prompts, each
   corrupted by its twin with the other name): the logit differences, the accumulated stream's and
   each layer's and head's direct logit attribution, the top heads' attention to the name, every
   activation-patching cell (resid_pre / attn_out / mlp_out by layer x position, each head's output
   at every position and by position, each head's query, key, value and pattern) = the reference
   patched the same way; and the picture the notebook draws from them.
Prints "N passed, N failed"; exits 1 on any failure."""
import argparse
import json
import os
import shutil
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
sys.path.insert(0, os.path.join(ROOT, "tests", "probes"))
sys.path.insert(0, os.path.join(ROOT, "tests", "cli"))
import tinylm_ref  # noqa: E402
import llama2c_ref  # noqa: E402
from harness import check, counts  # noqa: E402  (the check table the tests share)


def close(a, b, tol):
    """max |a - b| / max(1, max |b|)"""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return False, float("inf")
    e = float(np.abs(a - b).max() / max(1.0, float(np.abs(b).max())))
    return e <= tol, e


def execute(path, work):
    """runs the notebook in a python3 kernel with examples/ as its directory; returns (RESULTS, seconds, error)"""
    try:
        import nbformat
        from nbclient import NotebookClient
    except ImportError as e:
        return None, 0.0, "%s: the notebooks run with Debian's python3-nbclient and python3-ipykernel (.ci/run installs them)" % e
    nb = nbformat.read(path, as_version=4)
    t0 = time.time()
    try:
        NotebookClient(nb, timeout=240, kernel_name="python3",
                       resources={"metadata": {"path": os.path.dirname(path)}}).execute()
    except Exception as e:  # noqa: BLE001 (a cell's error: reported as the check's detail)
        return None, time.time() - t0, str(e)[-1500:]
    nbformat.write(nb, os.path.join(work, os.path.basename(path)))  # (the executed notebook, to look at)
    dt = time.time() - t0
    for c in nb.cells:
        if "results" in c.get("metadata", {}).get("tags", []):
            text = "".join(o.get("text", "") for o in c.outputs if o.get("output_type") == "stream")
            return json.loads(text.strip().splitlines()[-1]), dt, None
    return None, dt, "no cell tagged 'results'"


def html_outputs(path):
    """the executed notebook's text/html outputs (the views)"""
    import nbformat
    nb = nbformat.read(path, as_version=4)
    return [o["data"]["text/html"] for c in nb.cells if c.cell_type == "code" for o in c.outputs
            if o.get("output_type") in ("execute_result", "display_data") and "text/html" in o.get("data", {})]


def stories_ref():
    config, params = llama2c_ref.load_checkpoint(os.path.join(ROOT, "data", "stories260K.bin"))
    return tinylm_ref.Model(config, params)


def rms(x, eps):
    return np.sqrt((x ** 2).mean(-1, keepdims=True) + eps)


def check_lens_dla(R, work):
    ref = stories_ref()
    c = ref.cfg
    L, H, hd, eps = c["num_hidden_layers"], c["num_attention_heads"], c["head_dim"], c["norm_eps"]
    P = {k: v.detach().numpy() for k, v in ref.params.items()}
    WU = (P["embed.weight"] if c["tie_word_embeddings"] else P["lm_head.weight"]).T  # [d, V]
    w = P["final_norm.weight"]
    ids = np.array(R["ids"])
    logits, cache = ref.run_hooked(ids[None])
    a, b = R["answer"], R["wrong"]
    lg = logits[0]
    ok, e = close(R["logit_diff"], lg[-1, a] - lg[-1, b], 1e-4)
    check(ok, "logit lens / DLA: the logit difference = the reference's (%.4f, err %.1e)" % (R["logit_diff"], e))
    # the logit lens: each stream (entering block l, and after the last) normed with its own scale
    streams = [cache["blocks.%d.hook_resid_pre" % l][0] for l in range(L)] + [cache["blocks.%d.hook_resid_post" % (L - 1)][0]]
    lens = np.stack([(s / rms(s, eps) * w) @ WU for s in streams])  # [L+1, T, V]
    lp = lens - np.log(np.exp(lens - lens.max(-1, keepdims=True)).sum(-1, keepdims=True)) - lens.max(-1, keepdims=True)
    ok1, e1 = close(R["lens_prob_answer"], np.exp(lp[:, -1, a]), 2e-4)
    ok2 = R["lens_top1"] == lens[:, -1].argmax(-1).tolist()
    pn = np.exp(np.take_along_axis(lp[:, :-1], ids[1:][None, :, None], -1)[..., 0])
    ok3, e3 = close(R["lens_p_next"], pn, 2e-4)
    check(ok1 and ok2 and ok3, "logit lens: p(' Lily') by layer, the top-1 tokens and p(next token) at every position "
          "= the reference's (err %.1e, %.1e)" % (e1, e3), "%s vs %s" % (R["lens_top1"], lens[:, -1].argmax(-1)))
    check(R["lens_prob_answer"][0] < 1e-3 and max(R["lens_prob_answer"][3:]) > 0.1 and R["logit_diff"] > 3,
          "logit lens: ' Lily' is out of reach at the embedding (p %.1e), likely from block 3 on (p %.3f at the end)"
          % (R["lens_prob_answer"][0], R["lens_prob_answer"][-1]))
    # DLA: the final stream's terms at the last position, through the final norm with the whole stream's scale
    scale = rms(streams[-1][-1], eps)
    direction = WU[:, a] - WU[:, b]
    terms = [cache["hook_embed"][0, -1]]
    for l in range(L):
        terms += [cache["blocks.%d.hook_attn_out" % l][0, -1], cache["blocks.%d.hook_mlp_out" % l][0, -1]]
    dla = np.array([(t / scale * w) @ direction for t in terms])
    ok, e = close(R["dla_layer"], dla, 2e-4)
    check(ok and len(R["dla_labels"]) == 2 * L + 1, "DLA per component (embed, each attention and MLP output) = the "
          "reference's (err %.1e)" % e)
    check(abs(sum(R["dla_layer"]) - R["logit_diff"]) < 1e-3, "DLA: the components add up to the logit difference "
          "(%.4f vs %.4f)" % (sum(R["dla_layer"]), R["logit_diff"]))
    heads = np.zeros((L, H))
    for l in range(L):
        z = cache["blocks.%d.attn.hook_z" % l][0, -1]  # [H, hd]
        Wo = P["layers.%d.attn.o_proj.weight" % l]     # [d, H*hd]
        for h in range(H):
            heads[l, h] = ((z[h] @ Wo[:, h * hd:(h + 1) * hd].T) / scale * w) @ direction
    ok, e = close(R["dla_heads"], heads, 2e-4)
    check(ok, "DLA per head (hook_z @ W_O through the final norm) = the reference's (err %.1e)" % e)


def check_patching(R):
    ref = stories_ref()
    c = ref.cfg
    L, H = c["num_hidden_layers"], c["num_attention_heads"]
    clean, corrupt = np.array(R["clean"])[None], np.array(R["corrupt"])[None]
    a, b = R["answer"], R["wrong"]

    def metric(lg):
        return float(lg[0, -1, a] - lg[0, -1, b])
    cl, cc = ref.run_hooked(clean)
    cd, cr = metric(cl), metric(ref.run_hooked(corrupt)[0])
    ok = abs(R["clean_diff"] - cd) < 2e-4 * max(1, abs(cd)) and abs(R["corrupt_diff"] - cr) < 2e-4 * max(1, abs(cr))
    check(ok, "patching: clean and corrupted metrics = the reference's (%.3f, %.3f)" % (cd, cr))
    T = clean.shape[1]

    def patch_grid(point, width, index):
        """[L, width]: the normalised metric with the clean run's `point` of layer l patched into
        the corrupted run at one index (index(i) selects it: a position, or a head)"""
        grid = np.zeros((L, width))
        with torch.no_grad():
            for l in range(L):
                name = point % l
                src = torch.tensor(cc[name])
                for i in range(width):
                    def rep(t, sel=index(i)):
                        t = t.clone()
                        t[sel] = src[sel]
                        return t
                    grid[l, i] = (metric(ref.run_hooked(corrupt, names=(), replace={name: rep})[0]) - cr) / (cd - cr)
        return grid

    act = patch_grid("blocks.%d.hook_resid_pre", T, lambda p: (slice(None), p))
    ok, e = close(R["act_resid"], act, 2e-4)
    check(ok, "activation patching, resid_pre by layer x position (%d cells) = the reference's (err %.1e)" % (L * T, e))
    actz = patch_grid("blocks.%d.attn.hook_z", H, lambda h: (slice(None), slice(None), h))
    ok, e = close(R["act_z"], actz, 2e-4)
    check(ok, "activation patching per head (hook_z, %d heads) = the reference's (err %.1e)" % (L * H, e))
    names = ["blocks.%d.hook_resid_pre" % l for l in range(L)] + ["blocks.%d.attn.hook_z" % l for l in range(L)]
    _, g = ref.run_hooked(corrupt, names=set(names), backward=lambda lg: lg[0, -1, a] - lg[0, -1, b])
    attr = np.stack([((cc[n] - g[n]) * g[n + "_grad"]).sum(-1)[0] for n in names[:L]]) / (cd - cr)
    attrz = np.stack([((cc[n] - g[n]) * g[n + "_grad"]).sum((0, 1, 3)) for n in names[L:]]) / (cd - cr)
    ok1, e1 = close(R["attr_resid"], attr, 2e-3)
    ok2, e2 = close(R["attr_z"], attrz, 2e-3)
    check(ok1 and ok2, "attribution patching (resid_pre cells, heads) = (clean - corrupted) . the reference's autograd "
          "gradient (err %.1e, %.1e)" % (e1, e2))
    # the picture patch_name.py shows: the name sits at the name positions early, at the last position late
    act = np.array(R["act_resid"])
    check(act[0, 13] > 0.3 and act[L - 1, T - 1] > 0.3 and act[L - 1, 13] < act[0, 13],
          "patching: the name moves from its positions (L0 pos 13: %.2f) to the last one (L%d pos %d: %.2f)"
          % (act[0, 13], L - 1, T - 1, act[L - 1, T - 1]))


def check_induction(R):
    ref = tinylm_ref.load(R["run"] if os.path.isfile(os.path.join(R["run"], "config.json"))
                          else os.path.join(R["run"], "latest"))
    c = ref.cfg
    L = c["num_hidden_layers"]
    ids, N = np.array(R["ids"]), R["N"]
    _, cache = ref.run_hooked(ids)
    q = np.arange(N, 2 * N)
    ind = np.stack([cache["blocks.%d.attn.hook_pattern" % l][:, :, q, q - N + 1].mean((0, 2)) for l in range(L)])
    prev = np.stack([cache["blocks.%d.attn.hook_pattern" % l][:, :, np.arange(1, 2 * N), np.arange(2 * N - 1)].mean((0, 2))
                     for l in range(L)])
    ok1, e1 = close(R["induction"], ind, 2e-4)
    ok2, e2 = close(R["prev_token"], prev, 2e-4)
    check(ok1 and ok2, "induction: induction and previous-token scores of every head = the reference's (err %.1e, %.1e)"
          % (e1, e2))
    best = tuple(R["best"])
    check(best[0] == 1 and R["induction"][best[0]][best[1]] > 0.3 and max(R["prev_token"][0]) > 0.3,
          "induction: layer 1 has an induction head (L%dH%d, score %.3f), layer 0 a previous-token head (%.3f)"
          % (best[0], best[1], R["induction"][best[0]][best[1]], max(R["prev_token"][0])))

    def losses(replace=None):
        with torch.no_grad():
            lg = torch.tensor(ref.run_hooked(ids, names=(), replace=replace)[0])
        lp = torch.log_softmax(lg[:, :-1], -1).gather(-1, torch.tensor(ids[:, 1:])[..., None])[..., 0].numpy()
        return float(-lp[:, :N - 1].mean()), float(-lp[:, N:].mean())
    lf, ls = losses()

    def ablate(t):
        t = t.clone()
        t[:, :, best[1]] = 0
        return t
    _, la = losses({"blocks.%d.attn.hook_z" % best[0]: ablate})
    ok, e = close([R["loss_first"], R["loss_second"], R["ablated_second"]], [lf, ls, la], 2e-4)
    check(ok, "induction: the loss on each copy and with the best head ablated = the reference's (err %.1e)" % e)
    check(R["loss_second"] < 0.5 * R["loss_first"] and R["ablated_second"] > R["loss_second"] + 0.1,
          "induction: the second copy is predicted (loss %.3f vs %.3f) and ablating L%dH%d raises it to %.3f"
          % (R["loss_second"], R["loss_first"], best[0], best[1], R["ablated_second"]))


def ref_patch_grid(ref, corrupt, clean_cache, point, cells, index, metric):
    """[L, *cells]: metric of the reference's corrupted run with the clean `point` % l written in at
    index(cell) (an index into the reference's [B, ...] activation)"""
    L = ref.cfg["num_hidden_layers"]
    out = np.zeros((L,) + tuple(cells))
    with torch.no_grad():
        for l in range(L):
            name = point % l
            src = torch.tensor(clean_cache[name])
            for cell in np.ndindex(*cells):
                def rep(t, sel=index(cell)):
                    t = t.clone()
                    t[sel] = src[sel]
                    return t
                out[(l,) + cell] = metric(ref.run_hooked(corrupt, names=(), replace={name: rep})[0])
    return out


def check_exploratory(R):
    ref = stories_ref()
    c = ref.cfg
    L, H, KV, hd, eps = (c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"],
                         c["norm_eps"])
    P = {k: v.detach().numpy() for k, v in ref.params.items()}
    WU = (P["embed.weight"] if c["tie_word_embeddings"] else P["lm_head.weight"]).T  # [d, V]
    w = P["final_norm.weight"]
    tokens, corrupt = np.array(R["tokens"]), np.array(R["corrupted"])
    good, bad = np.array(R["correct"]), np.array(R["wrong"])
    B, T = tokens.shape
    rows, N = np.arange(B), R["name_pos"]
    check(B == 8 and (tokens != corrupt).sum(1).tolist() == [1] * B and (tokens != corrupt)[:, N].all()
          and np.array_equal(tokens[np.arange(B) ^ 1], corrupt), "exploratory: 8 prompts, each corrupted by its twin "
          "with the other name (one position differs)")

    def diffs(lg):
        return lg[rows, -1, good] - lg[rows, -1, bad]
    with torch.no_grad():
        logits, cache = ref.run_hooked(tokens)
        cd, cr = float(diffs(logits).mean()), float(diffs(ref.run_hooked(corrupt, names=())[0]).mean())
    ok1, e1 = close(R["per_prompt"], diffs(logits), 1e-4)
    ok2, e2 = close([R["clean_diff"], R["corrupted_diff"]], [cd, cr], 1e-4)
    check(ok1 and ok2, "exploratory: the logit difference per prompt, clean and corrupted = the reference's (err %.1e, "
          "%.1e)" % (e1, e2))
    check(min(R["per_prompt"]) > 0 and cd > 1 and cr < -1, "exploratory: every prompt prefers its pronoun (mean %.3f; "
          "corrupted %.3f)" % (cd, cr))
    # direct logit attribution: the last position's pieces through the final norm with the final stream's scale
    final = cache["blocks.%d.hook_resid_post" % (L - 1)][:, -1]                   # [B, d]
    scale = rms(final, eps)
    dirs = (WU[:, good] - WU[:, bad]).T                                           # [B, d]

    def attr(x):  # [B, d] written into the final stream -> its mean share of the logit difference
        return float(((x / scale * w) * dirs).sum(-1).mean())
    acc = []
    for l in range(L):
        acc += [attr(cache["blocks.%d.hook_resid_pre" % l][:, -1]), attr(cache["blocks.%d.hook_resid_mid" % l][:, -1])]
    acc.append(attr(final))
    ok, e = close(R["accumulated"], acc, 2e-4)
    check(ok and R["acc_labels"][-1] == "final_post" and len(acc) == 2 * L + 1, "exploratory: the accumulated stream's "
          "logit difference (resid_pre, resid_mid by layer, the final stream) = the reference's (err %.1e)" % e)
    pieces = [attr(cache["hook_embed"][:, -1])]
    for l in range(L):
        pieces += [attr(cache["blocks.%d.hook_attn_out" % l][:, -1]), attr(cache["blocks.%d.hook_mlp_out" % l][:, -1])]
    ok, e = close(R["per_layer"], pieces, 2e-4)
    check(ok and abs(sum(pieces) - cd) < 1e-6 * max(1.0, abs(cd)),
          "exploratory: DLA per layer (embed, attention, MLP) = the reference's and adds up to the logit difference "
          "(err %.1e; sum %.4f vs %.4f)" % (e, sum(pieces), cd))
    heads = np.zeros((L, H))
    for l in range(L):
        z = cache["blocks.%d.attn.hook_z" % l][:, -1]                           # [B, H, hd]
        Wo = P["layers.%d.attn.o_proj.weight" % l]                              # [d, H*hd]
        for h in range(H):
            heads[l, h] = attr(z[:, h] @ Wo[:, h * hd:(h + 1) * hd].T)
    ok, e = close(R["per_head"], heads, 2e-4)
    check(ok, "exploratory: DLA per head (hook_z @ W_O through the final norm) = the reference's (err %.1e)" % e)
    top = [tuple(t) for t in R["top_heads"]]
    want = [tuple(int(x) for x in np.unravel_index(i, heads.shape)) for i in np.argsort(-np.abs(heads).ravel())[:3]]
    att = [float(cache["blocks.%d.attn.hook_pattern" % l][:, h, -1, N].mean()) for l, h in top]
    ok, e = close(R["name_attention"], att, 2e-4)
    check(top == want and ok, "exploratory: the top heads by |DLA| %s and their attention to the name = the "
          "reference's (err %.1e)" % (top, e))
    check(max(pieces[1:], key=abs) == pieces[2 * L - 1] and top[0][0] == L - 1 and min(att[:2]) > 0.3,
          "exploratory: the last attention layer writes most of the answer (%.3f of %.3f), its top heads attend to "
          "the name (%.3f, %.3f)" % (pieces[2 * L - 1], cd, att[0], att[1]))

    # activation patching: (metric - corrupted) / (clean - corrupted), the batch patched at once
    def restored(lg):
        return (float(diffs(lg).mean()) - cr) / (cd - cr)
    grid = lambda point, cells, index: ref_patch_grid(ref, corrupt, cache, point, cells, index, restored)  # noqa: E731
    every = np.stack([grid("blocks.%%d.%s" % n, (T,), lambda c: (slice(None), c[0]))
                      for n in ("hook_resid_pre", "hook_attn_out", "hook_mlp_out")])
    ok, e = close(R["every"], every, 2e-4)
    check(ok, "exploratory: patching resid_pre / attn_out / mlp_out by layer x position (%d cells) = the "
          "reference's (err %.1e)" % (every.size, e))
    z = "blocks.%d.attn.hook_z"
    head_all = grid(z, (H,), lambda c: (slice(None), slice(None), c[0]))
    head_pos = grid(z, (T, H), lambda c: (slice(None), c[0], c[1]))
    ok1, e1 = close(R["head_all"], head_all, 2e-4)
    ok2, e2 = close(R["head_by_pos"], head_pos, 2e-4)
    check(ok1 and ok2, "exploratory: patching each head's output, every position and by position (%d cells) = the "
          "reference's (err %.1e, %.1e)" % (head_all.size + head_pos.size, e1, e2))
    q = grid("blocks.%d.attn.hook_q", (H,), lambda c: (slice(None), slice(None), c[0]))
    k = grid("blocks.%d.attn.hook_k", (KV,), lambda c: (slice(None), slice(None), c[0]))
    v = grid("blocks.%d.attn.hook_v", (KV,), lambda c: (slice(None), slice(None), c[0]))
    pat = grid("blocks.%d.attn.hook_pattern", (H,), lambda c: (slice(None), c[0]))
    errs = [close(R[n], x, 2e-4) for n, x in (("q_all", q), ("k_all", k), ("v_all", v), ("pattern_all", pat))]
    check(all(o for o, _ in errs), "exploratory: patching each head's query, key (per kv head), value (per kv head) "
          "and pattern = the reference's (err %s)" % ", ".join("%.1e" % e for _, e in errs))
    # the picture the notebook describes
    b = tuple(R["best"])
    g = b[1] // (H // KV)
    check(every[0][0, N] > 0.9 and every[0][:, -1].max() < 0.2 and every[0][L - 1, N] > 0.5,
          "exploratory: the name stays at its position up to the last layer (resid_pre L%d: %.2f) and barely at the "
          "last position (%.2f)" % (L - 1, every[0][L - 1, N], every[0][L - 1, -1]))
    check(b == tuple(int(x) for x in np.unravel_index(np.abs(head_all).argmax(), head_all.shape)) and b[0] == L - 1
          and head_all[b] > 0.3 and abs(v[b[0], g] - head_all[b]) < 0.15 and max(abs(q[b]), abs(k[b[0], g]),
                                                                                  abs(pat[b])) < 0.05,
          "exploratory: L%dH%d restores most (%.3f) through its values (%.3f), not its query, key or pattern "
          "(%.3f, %.3f, %.3f)" % (b[0], b[1], head_all[b], v[b[0], g], q[b], k[b[0], g], pat[b]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--tinylm", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", default="logit_lens_dla,patching,induction_heads",
                    help="the notebooks to run, by name (comma-separated; exploratory_analysis has a test of its own)")
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    os.environ.update(TINYLM_LIB=os.path.abspath(a.lib), TINYLM_CLI=os.path.abspath(a.tinylm), TINYLM_ROOT=ROOT,
                      TINYLM_NB_WORK=os.path.join(a.work, "induction"), PYDEVD_DISABLE_FILE_VALIDATION="1",
                      PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    torch.set_num_threads(1)
    ex = os.path.join(ROOT, "examples")
    table = {"logit_lens_dla": lambda R: check_lens_dla(R, a.work), "patching": check_patching,
             "induction_heads": check_induction, "exploratory_analysis": check_exploratory}
    only = a.only.split(",")
    unknown = [n for n in only if n not in table]
    if unknown:
        print("--only: no notebook %r (%s)" % (unknown[0], ", ".join(table)))
        return 2
    for name in only:
        fn = table[name]
        R, dt, err = execute(os.path.join(ex, name + ".ipynb"), a.work)
        if not check(R is not None, "%s.ipynb runs in a python3 kernel (%.1f s)" % (name, dt), err):
            continue
        views = html_outputs(os.path.join(a.work, name + ".ipynb"))
        check(len(views) >= 2 and all(v.startswith('<iframe class="tinylm-view" sandbox="allow-scripts"') for v in views),
              "%s.ipynb: its %d views are the report page in sandboxed frames" % (name, len(views)))
        t0 = time.time()
        fn(R)
        print("  (reference checks: %.1f s)" % (time.time() - t0))
    print("%d passed, %d failed" % (counts["passed"], counts["failed"]))
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
