#!/usr/bin/python3
"""test_notebooks.py — the three notebooks of examples/ executed (Debian's python3-nbclient, the
python3 kernel of python3-ipykernel), their numbers checked against an independent float64
PyTorch implementation (tests/reference/tinylm_ref.py, the weights read by tests/probes/
llama2c_ref.py for stories260K, by tinylm_ref.load for the trained model).

    test_notebooks.py --lib build/libtinylm.so --tinylm build/tinylm --work DIR

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
With --venv (test_pip_install's venv, where `pip install` put the package, its `tinylm` command and
its `python3` kernel spec) and --tree (the copy of the repository it installed from, which has no
build/), each notebook is executed by that venv's Python with no TINYLM_* path, PYTHONPATH or
kernel registered by hand, as a user who opens it from the environment would: the notebook's kernel
must be the venv's interpreter and import the venv's package. Without them (no venv module), the
notebooks run from this checkout with TINYLM_LIB and PYTHONPATH set.
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


# run by the venv's Python: executes a notebook in the `python3` kernel that environment finds, with a
# last cell that reports the kernel's interpreter and package; the executed notebook is written out
VENV_DRIVER = r"""
import os, sys
import nbformat
from nbclient import NotebookClient
src, dst = sys.argv[1], sys.argv[2]
nb = nbformat.read(src, as_version=4)
nb.cells.append(nbformat.v4.new_code_cell(
    "import json as _j, sys as _s, tinylm as _t\nprint(_j.dumps({'python': _s.executable, 'tinylm': _t.__file__}))",
    metadata={"tags": ["kernel"]}))
try:
    NotebookClient(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": os.path.dirname(src)}}).execute()
finally:
    nbformat.write(nb, dst)
"""


def tagged_json(nb, tag):
    """the last line a cell tagged TAG printed, as JSON (None when no such cell printed)"""
    for c in nb.cells:
        if tag in c.get("metadata", {}).get("tags", []):
            text = "".join(o.get("text", "") for o in c.get("outputs", []) if o.get("output_type") == "stream")
            return json.loads(text.strip().splitlines()[-1]) if text.strip() else None
    return None


def execute_in_venv(path, work, python, env):
    """runs the notebook from the venv (VENV_DRIVER); returns (RESULTS, seconds, error, KERNEL)"""
    import nbformat
    import subprocess
    out = os.path.join(work, os.path.basename(path))
    t0 = time.time()
    p = subprocess.run([python, "-c", VENV_DRIVER, path, out], env=env, capture_output=True, text=True, timeout=900)
    dt = time.time() - t0
    if p.returncode != 0 or not os.path.exists(out):
        return None, dt, (p.stdout + p.stderr)[-1500:], None
    nb = nbformat.read(out, as_version=4)
    R = tagged_json(nb, "results")
    return R, dt, None if R is not None else "no cell tagged 'results'", tagged_json(nb, "kernel")


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--tinylm", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--venv", help="a venv where `pip install` put the package (test_pip_install's)")
    ap.add_argument("--tree", help="the copy of the repository that venv was installed from")
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    venv_py = os.path.join(os.path.abspath(a.venv), "bin", "python") if a.venv else None
    if venv_py and not (os.path.exists(venv_py) and a.tree and os.path.isdir(os.path.join(a.tree, "examples"))):
        print("(no venv from test_pip_install at %s: the notebooks run from this checkout)" % a.venv)
        venv_py = None
    venv_env = {k: v for k, v in os.environ.items()
                if k not in ("TINYLM_LIB", "TINYLM_CLI", "TINYLM_ROOT", "TINYLM_BUILD_DIR", "PYTHONPATH", "LD_PRELOAD",
                             "ASAN_OPTIONS", "JUPYTER_PATH")}
    venv_env.update(TINYLM_NB_WORK=os.path.join(os.path.abspath(a.work), "induction"), PYDEVD_DISABLE_FILE_VALIDATION="1")
    os.environ.update(TINYLM_LIB=os.path.abspath(a.lib), TINYLM_CLI=os.path.abspath(a.tinylm), TINYLM_ROOT=ROOT,
                      TINYLM_NB_WORK=os.path.join(a.work, "induction"), PYDEVD_DISABLE_FILE_VALIDATION="1",
                      PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    torch.set_num_threads(1)
    ex = os.path.join(os.path.abspath(a.tree) if venv_py else ROOT, "examples")
    for name, fn in (("logit_lens_dla", lambda R: check_lens_dla(R, a.work)), ("patching", check_patching),
                     ("induction_heads", check_induction)):
        if venv_py:
            R, dt, err, K = execute_in_venv(os.path.join(ex, name + ".ipynb"), a.work, venv_py, venv_env)
            if not check(R is not None, "%s.ipynb runs from the venv, nothing registered by hand (%.1f s)" % (name, dt),
                         err):
                continue
            site = os.path.join(os.path.abspath(a.venv), "lib")
            check(K is not None and K["python"] == venv_py and K["tinylm"].startswith(site),
                  "%s.ipynb: its kernel is the venv's interpreter and imports the venv's package" % name, K)
        else:
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
