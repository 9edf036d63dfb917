#!/usr/bin/python3
"""gen_cases.py — writes the parity test cases (cases.py) with the float64 PyTorch reference.

    gen_cases.py OUT_DIR [--only SUBSTRING ...]

One subfolder per case:
    config.json, model.safetensors (F32), tokens.npy, targets.npy (int32 [B,T])
    ref/logits.npy [B,T,V], ref/loss.npy [1], ref/grad/<tensor>.npy, ref/dx/layers.<N>.npy
        (computed in float64 from the F32 weights, stored float64)
    ref/info.json: mean entropy, and the gradients that are zero by mathematics (see below)

The generator refuses to write a case whose comparison would be weak: outputs near uniform,
or a gradient that is (nearly) zero when it should not be.
"""
import argparse
import json
import math
import os
import shutil
import sys
import zlib

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
sys.path.insert(0, HERE)
import tinylm_ref as ref  # noqa: E402
from cases import all_cases  # noqa: E402
from compare import TOL_GRAD, TOL_OUT, compare_case  # noqa: E402

MAX_ENTROPY_FRACTION = 0.8   # mean softmax entropy must stay below this * log(V)
MIN_GRAD_FRACTION = 1e-4     # every gradient's max |g| must reach this * the case's largest
FP32_HEADROOM = 0.1          # the reference run in float32 must stay within this * the tolerance


def structural_zeros(cfg):
    """Gradients that are exactly zero in exact arithmetic: {name: name of the tensor whose
    scale replaces the denominator}. The k bias adds q_i . b_k to every score of query i, a
    constant that softmax ignores — unless RoPE rotates it per position, a qk norm sits after
    it, or a soft-cap bends the scores."""
    c = ref.resolve_config(cfg)
    out = {}
    # DeepSeek-V3's e_score_correction_bias only chooses experts: no gradient reaches it
    for n in c["moe_layers"]:
        if c["scoring_func"] == "sigmoid":
            out["layers.%d.ffn.router.e_score_correction_bias" % n] = "layers.%d.ffn.router.weight" % n
    if (c["attention_bias"] and c["position_embedding"] != "rope" and c["qk_norm"] == "none"
            and not c["attn_logit_softcapping"]):
        for n in range(c["num_hidden_layers"]):
            out["layers.%d.attn.k_proj.bias" % n] = "layers.%d.attn.k_proj.weight" % n
    return out


def eps_zeros(cfg):
    """Gradients that are zero in exact arithmetic but for the norms' eps: {name: the tensor whose
    scale replaces the denominator}. The last layer's scalar (Gemma 4) multiplies the whole stream
    that the final norm then divides by its RMS (or centres and divides by its std): scale-invariant
    up to eps."""
    c = ref.resolve_config(cfg)
    L = c["num_hidden_layers"]
    if c["layer_scalar"] and c["final_norm"] and c["norm_type"] in ("rmsnorm", "rmsnorm_1p", "layernorm"):
        return {"layers.%d.layer_scalar" % (L - 1): "layers.%d.ffn.down_proj.weight" % (L - 1)}
    return {}


def mean_entropy(logits):
    lp = torch.log_softmax(torch.as_tensor(logits), dim=-1)
    return float(-(lp.exp() * lp).sum(-1).mean())


def check_case(name, cfg, result):
    """Asserts that the case makes a meaningful comparison; returns info for ref/info.json."""
    V = cfg["vocab_size"]
    ent = mean_entropy(result["logits"])
    if not ent < MAX_ENTROPY_FRACTION * math.log(V):
        raise AssertionError("%s: mean entropy %.3f is too close to uniform (log V = %.3f)"
                             % (name, ent, math.log(V)))
    zeros = structural_zeros(cfg)
    near = eps_zeros(cfg)
    tensors = dict(result["grads"])
    tensors.update({"dx/" + k: v for k, v in result["dx"].items()})
    top = max(float(np.abs(g).max()) for g in tensors.values())
    for tname, g in tensors.items():
        m = float(np.abs(g).max())
        if not np.all(np.isfinite(g)):
            raise AssertionError("%s: gradient %s is not finite" % (name, tname))
        if tname in zeros:
            scale = float(np.abs(result["grads"][zeros[tname]]).max())
            if m > 1e-10 * scale:
                raise AssertionError("%s: %s should be zero by mathematics, max |g| = %g"
                                     % (name, tname, m))
        elif tname in near:
            scale = float(np.abs(result["grads"][near[tname]]).max())
            if m > 1e-3 * scale:
                raise AssertionError("%s: %s should be zero but for eps, max |g| = %g" % (name, tname, m))
        elif not m > MIN_GRAD_FRACTION * top:
            raise AssertionError("%s: gradient %s is (nearly) zero: max |g| = %g, largest %g"
                                 % (name, tname, m, top))
    return {"mean_entropy": ent, "log_vocab": math.log(V), "structural_zero": dict(zeros, **near)}


def check_conditioning(name, case_dir):
    """Runs the reference in float32 and compares it like an engine: a case that float32
    cannot meet with 10x headroom is ill-conditioned, and would fail a correct engine."""
    tmp = os.path.join(case_dir, "fp32_check")
    ref.dump(case_dir, tmp, torch.float32)
    checks = compare_case(case_dir, tmp)
    shutil.rmtree(tmp)
    worst = 0.0
    for c in checks:
        tol = TOL_OUT if c.name in ("logits", "loss") else TOL_GRAD
        if not c.ok or c.err > FP32_HEADROOM * tol:
            raise AssertionError("%s: ill-conditioned, the float32 reference misses by %s"
                                 % (name, c.describe() if not c.ok else "%.3g on %s" % (c.err, c.name)))
        worst = max(worst, c.err / tol)
    return worst


def write_case(case_dir, name, cfg, opts):
    B, T = opts["B"], opts["T"]
    # stable per name: adding a case changes no other case ("salt": another draw for a case whose
    # first one leaves an expert without rows, and so without a gradient to compare)
    seed = zlib.crc32((name + opts.get("salt", "")).encode())
    rng = np.random.default_rng(seed)
    if os.path.isdir(case_dir):
        shutil.rmtree(case_dir)
    os.makedirs(case_dir)
    params = ref.random_params(cfg, seed, std=opts["std"], embed_std=2 * opts["std"])
    for a, b in opts.get("tie_experts", ()):  # expert b's router row (and bias) = expert a's: tied scores
        for n in ref.resolve_config(cfg)["moe_layers"]:
            for t in ("weight", "e_score_correction_bias"):
                name = "layers.%d.ffn.router.%s" % (n, t)
                if name in params:
                    params[name][b] = params[name][a]
    ref.save(case_dir, cfg, params, "F32")
    if "router_aux_loss_coef" in opts:  # a training option the engine's dump reads beside the model
        with open(os.path.join(case_dir, "train.json"), "w") as f:
            json.dump({"router_aux_loss_coef": opts["router_aux_loss_coef"]}, f)
    V = cfg["vocab_size"]
    tokens = rng.integers(0, V, size=(B, T)).astype(np.int32)
    targets = rng.integers(0, V, size=(B, T)).astype(np.int32)
    np.save(os.path.join(case_dir, "tokens.npy"), tokens)
    np.save(os.path.join(case_dir, "targets.npy"), targets)
    # Reload from disk so the reference uses exactly the F32 weights the engine will read.
    result = ref.dump(case_dir, os.path.join(case_dir, "ref"), torch.float64)
    info = check_case(name, cfg, result)
    with open(os.path.join(case_dir, "ref", "info.json"), "w") as f:
        json.dump(info, f, indent=2)  # compare_case (below) reads the structural zeros
    info["fp32_err_over_tol"] = check_conditioning(name, case_dir)
    with open(os.path.join(case_dir, "ref", "info.json"), "w") as f:
        json.dump(info, f, indent=2)
    return info


def generate(out_dir, only=None, verbose=False):
    """Writes every case (or those whose name contains one of `only`); returns their folders."""
    torch.set_num_threads(1)
    os.makedirs(out_dir, exist_ok=True)
    dirs = []
    for name, cfg, opts in all_cases():
        if only and not any(s in name for s in only):
            continue
        d = os.path.join(out_dir, name)
        info = write_case(d, name, cfg, opts)
        if verbose:
            print("%-36s entropy %.2f / %.2f  fp32 err/tol %.4f%s" % (
                  name, info["mean_entropy"], info["log_vocab"], info["fp32_err_over_tol"],
                  "  structural zero: %s" % sorted(info["structural_zero"]) if info["structural_zero"] else ""))
        dirs.append(d)
    if not dirs:
        raise ValueError("no case matches %s" % (only,))
    return dirs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--only", nargs="*", help="only cases whose name contains one of these")
    a = ap.parse_args()
    generate(a.out_dir, a.only, verbose=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
