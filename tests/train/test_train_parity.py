#!/usr/bin/python3
"""test_train_parity.py — a training trajectory of the engine against PyTorch.

    test_train_parity.py --dump-bin build/train_dump --work DIR [-v]

For each case: random weights (tests/reference/tinylm_ref.py random_params), random batches
[steps, accum, B, T]; the engine trains them with train_dump (the trainer's step: zero the
gradients, forward + backward scaled by 1/accum per micro-batch, global gradient norm,
clipping, AdamW with lr_at(step)); the reference trains the same weights on the same batches
with the float64 PyTorch model, torch.optim.AdamW (two parameter groups: weight decay on the
matrices only — attention/FFN projections and an untied head; not on norms, biases,
embeddings, learned positions or a tied head, as src/train/optim.c), the gradient accumulated
over the micro-batches as loss / accum, torch.nn.utils.clip_grad_norm_, and the learning rate
of docs/training.md (nanoGPT's linear warmup lr * (step+1)/(warmup+1), then cosine to min_lr
at total_steps), written here from the docs, not from lr_at.

Checked, per case (the rule is printed):
  - the learning rate of every step (float32 vs the formula): 1e-6 relative;
  - the loss of every step: 1e-4 relative (the parity test's tolerance for one forward pass;
    the trajectory stays within it because every step's update is bounded by ~lr per weight);
  - the gradient norm of every step before clipping: 1e-3 relative (the parity test's
    gradient tolerance), and clipping really clips: the norm exceeds grad_clip at some step
    and stays below it at another, so both branches run (each case's grad_clip is chosen
    inside the range of its gradient norms);
  - the final weights: per tensor max|w_c - w_r| / max|w_r - w_0| <= 1e-2, i.e. the error
    measured against how far training moved the tensor. Adam divides each gradient element
    by its running RMS, so float32 rounding of the gradient (~1e-6 relative) becomes a
    relative error of the update of the same order except where a gradient element is near
    zero, where it is much larger; the same trajectory run by PyTorch in float32 (printed as
    "f32 noise") reaches ~1e-3, 10x under the tolerance, and the engine lands at or below
    it. A wrong optimizer detail moves weights by a sizeable fraction of lr per step (weight
    decay on a norm gain: 1e-3 per step against moves of ~1e-1), far over it.
Tensors whose gradient is zero by mathematics (the k-projection bias without RoPE,
qk-norm or attention soft-cap: softmax ignores the constant it adds) are excluded from the
weight check: Adam normalises float32 rounding noise there into full-size steps.
"""
import argparse
import math
import os
import shutil
import subprocess
import sys
import zlib

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
sys.path.insert(0, os.path.join(HERE, "..", "parity"))
import tinylm_ref as ref  # noqa: E402
from gen_cases import structural_zeros  # noqa: E402

TOL_LR, TOL_LOSS, TOL_NORM, TOL_W = 1e-6, 1e-4, 1e-3, 1e-2

OPT = {"lr": 1e-2, "min_lr": 1e-3, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1,
       "warmup_steps": 3, "total_steps": 10, "decay_embeddings": 0, "z_loss": 0.0}
STEPS, ACCUM, B, T = 12, 2, 2, 8  # 12 steps: warmup 3, cosine to step 10, two steps at min_lr

SMALL = {"model_type": "tinylm", "vocab_size": 41, "hidden_size": 32, "num_hidden_layers": 2,
         "num_attention_heads": 4, "intermediate_size": 48, "max_position_embeddings": 16}
CASES = [
    # Llama: Pre-Norm RMSNorm, SwiGLU, RoPE, untied head (decayed), no biases
    ("llama_prenorm_rmsnorm_swiglu_rope",
     dict(SMALL, norm_type="rmsnorm", norm_placement="pre", ffn_type="swiglu", position_embedding="rope",
          tie_word_embeddings=False), 8.5),
    # GPT-2: LayerNorm with biases, learned positions, GELU MLP, all biases, tied head (not decayed)
    ("gpt2_layernorm_biases_learned_pos",
     dict(SMALL, norm_type="layernorm", norm_bias=True, norm_placement="pre", ffn_type="gelu",
          position_embedding="learned", attention_bias=True, attention_out_bias=True, mlp_bias=True,
          tie_word_embeddings=True), 4.0),
    # Gemma-like: (1 + w) RMSNorm, sandwich, GeGLU, both soft-caps, GQA, decay on embeddings too
    ("gemma_1p_sandwich_softcaps_gqa",
     dict(SMALL, norm_type="rmsnorm_1p", norm_placement="sandwich", ffn_type="geglu", num_key_value_heads=2,
          attn_logit_softcapping=2.0, final_logit_softcapping=4.0, embedding_scale=True,
          tie_word_embeddings=True), 2.8),
    # DyT in every norm, with the z-loss (its value and gradient against PyTorch over a trajectory)
    ("dyt_prenorm_z_loss",
     dict(SMALL, norm_type="dyt", dyt_alpha_init=0.8, norm_placement="pre", tie_word_embeddings=False), 3.5),
]
OPT_OVERRIDES = {"gemma_1p_sandwich_softcaps_gqa": {"decay_embeddings": 1}, "dyt_prenorm_z_loss": {"z_loss": 0.05}}


def lr_schedule(o, step):
    """docs/training.md: linear warmup as nanoGPT, then cosine to min_lr at total_steps, then min_lr."""
    if step < o["warmup_steps"]:
        return o["lr"] * (step + 1) / (o["warmup_steps"] + 1)
    if step >= o["total_steps"]:
        return o["min_lr"]
    ratio = (step - o["warmup_steps"]) / (o["total_steps"] - o["warmup_steps"])
    return o["min_lr"] + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (o["lr"] - o["min_lr"])


def decays(name, cfg, o):
    """Weight decay on matrices only (src/train/optim.c); embeddings and a tied head with decay_embeddings."""
    if name in ("embed.weight", "pos_embed.weight"):
        return bool(o["decay_embeddings"])
    return name.endswith("_proj.weight") or name == "lm_head.weight"


def train_reference(cfg, params, tokens, targets, o, dtype):
    m = ref.Model(cfg, params, dtype)
    names = list(m.params)
    groups = [{"params": [m.params[n] for n in names if decays(n, cfg, o)], "weight_decay": o["weight_decay"]},
              {"params": [m.params[n] for n in names if not decays(n, cfg, o)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"])
    losses, norms, lrs, lse_sqs = [], [], [], []
    steps, accum = tokens.shape[:2]
    for s in range(steps):
        opt.zero_grad(set_to_none=False)
        total = total_sq = 0.0
        for a in range(accum):
            logits = m.forward(tokens[s, a])
            tgt = torch.as_tensor(targets[s, a], dtype=torch.long)
            loss = ref.cross_entropy(logits, tgt)
            sq = ref.z_loss_term(logits, tgt)  # the objective adds z * mean(lse^2); the logged loss is CE
            ((loss + o["z_loss"] * sq) / accum).backward()
            total += loss.item()
            total_sq += sq.item()
        losses.append(total / accum)
        lse_sqs.append(total_sq / accum)
        norms.append(float(torch.nn.utils.clip_grad_norm_(list(m.params.values()), o["grad_clip"])))
        lr = lr_schedule(o, s)
        lrs.append(lr)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
    final = {n: t.detach().numpy().astype(np.float64) for n, t in m.params.items()}
    return np.array(losses), np.array(norms), np.array(lrs), final, np.array(lse_sqs)


def rel(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - b)) / max(float(np.max(np.abs(b))), 1e-30))


def weight_errors(final, ref_final, w0, skip):
    """{name: max|w - w_ref| / max|w_ref - w0|} over the tensors not in skip."""
    out = {}
    for n, r in ref_final.items():
        if n in skip:
            continue
        moved = float(np.max(np.abs(r - w0[n])))
        out[n] = float(np.max(np.abs(final[n].astype(np.float64) - r))) / max(moved, 1e-30)
    return out


def run_case(name, cfg, clip, dump_bin, work, verbose):
    o = dict(OPT, grad_clip=clip, **OPT_OVERRIDES.get(name, {}))
    case_dir = os.path.join(work, name)
    out_dir = os.path.join(case_dir, "out")
    shutil.rmtree(case_dir, ignore_errors=True)
    seed = zlib.crc32(name.encode())
    rng = np.random.default_rng(seed)
    params = ref.random_params(cfg, seed=seed, std=0.2, embed_std=0.5)
    ref.save(case_dir, cfg, params)
    w0 = ref.load(case_dir).params  # the F32-rounded weights both sides start from
    w0 = {n: t.detach().numpy().copy() for n, t in w0.items()}
    V = cfg["vocab_size"]
    seq = rng.integers(0, V, size=(STEPS, ACCUM, B, T + 1)).astype(np.int32)
    tokens, targets = np.ascontiguousarray(seq[..., :-1]), np.ascontiguousarray(seq[..., 1:])
    np.save(os.path.join(case_dir, "tokens.npy"), tokens)
    np.save(os.path.join(case_dir, "targets.npy"), targets)

    args = [dump_bin, case_dir, out_dir] + ["%s=%r" % (k, float(v)) for k, v in o.items()]
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "2")
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=120)
    if p.returncode != 0:
        print("FAIL %s: train_dump exited with %d: %s" % (name, p.returncode, p.stdout.decode(errors="replace")))
        return False
    c_loss = np.load(os.path.join(out_dir, "loss.npy"))
    c_norm = np.load(os.path.join(out_dir, "grad_norm.npy"))
    c_lr = np.load(os.path.join(out_dir, "lr.npy"))
    c_final = {n: np.load(os.path.join(out_dir, "params", n + ".npy")) for n in w0}

    r_loss, r_norm, r_lr, r_final, r_sq = train_reference(cfg, w0, tokens, targets, o, torch.float64)
    _, _, _, f32_final, _ = train_reference(cfg, w0, tokens, targets, o, torch.float32)
    c_sq = np.load(os.path.join(out_dir, "lse_sq.npy"))
    skip = set(structural_zeros(cfg))

    problems = []
    e_lr = rel(c_lr, r_lr)
    e_sq = rel(c_sq, r_sq)
    if not e_sq <= TOL_LOSS:
        problems.append("mean logsumexp^2 (the z-loss term) rel err %.3g > %g: engine %s, reference %s"
                        % (e_sq, TOL_LOSS, c_sq, r_sq))
    if not e_lr <= TOL_LR:
        problems.append("lr rel err %.3g > %g: engine %s, formula %s" % (e_lr, TOL_LR, c_lr, r_lr))
    for s in range(STEPS):
        e = abs(float(c_loss[s]) - r_loss[s]) / abs(r_loss[s])
        if not e <= TOL_LOSS:
            problems.append("step %d: loss %.7f vs %.7f (rel %.3g > %g)" % (s, c_loss[s], r_loss[s], e, TOL_LOSS))
        e = abs(float(c_norm[s]) - r_norm[s]) / r_norm[s]
        if not e <= TOL_NORM:
            problems.append("step %d: grad norm %.7g vs %.7g (rel %.3g > %g)" % (s, c_norm[s], r_norm[s], e, TOL_NORM))
    if not (r_norm > clip).any() or not (r_norm < clip).any():
        problems.append("the case does not exercise clipping both ways: grad norms %s, clip %g" % (r_norm, clip))
    errs = weight_errors(c_final, r_final, w0, skip)
    noise = weight_errors(f32_final, r_final, w0, skip)
    worst = max(errs, key=errs.get)
    for n, e in errs.items():
        if not e <= TOL_W:
            problems.append("final %s: max|w - w_ref| / max|w_ref - w0| = %.3g > %g" % (n, e, TOL_W))
    for n in skip:
        if not np.all(np.isfinite(c_final[n])):
            problems.append("final %s is not finite" % n)
    clipped = int((r_norm > clip).sum())
    print("%s %s: loss %.4f -> %.4f (worst rel %.2g), grad norm %.3g..%.3g clipped at %d/%d steps "
          "(worst rel %.2g), weights worst %.2g (%s; f32 noise %.2g)%s"
          % ("ok  " if not problems else "FAIL", name, r_loss[0], r_loss[-1],
             max(abs(c_loss - r_loss) / abs(r_loss)), r_norm.min(), r_norm.max(), clipped, STEPS,
             max(abs(c_norm - r_norm) / r_norm), errs[worst], worst, max(noise.values()),
             ", skipped %s (zero by mathematics)" % sorted(skip) if skip else ""))
    for pr in problems[: None if verbose else 5]:
        print("    " + pr)
    if verbose:
        for n in sorted(errs, key=errs.get, reverse=True)[:8]:
            print("    %-40s %.3g (f32 noise %.3g)" % (n, errs[n], noise[n]))
    return not problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dump-bin", required=True, help="the engine's train_dump program")
    ap.add_argument("--work", required=True, help="scratch folder")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    os.makedirs(a.work, exist_ok=True)
    print("train parity: %d steps x accum %d x [%d, %d]; %s; tolerances: lr %g, loss %g, grad norm %g, "
          "final weights %g of the distance moved" % (STEPS, ACCUM, B, T, OPT, TOL_LR, TOL_LOSS, TOL_NORM, TOL_W))
    ok = [run_case(n, cfg, clip, a.dump_bin, a.work, a.verbose) for n, cfg, clip in CASES]
    print("%d passed, %d failed" % (sum(ok), len(ok) - sum(ok)))
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
