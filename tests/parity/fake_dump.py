#!/usr/bin/python3
"""fake_dump.py — a stand-in for the engine's tlm_dump, and the contract it documents.

    fake_dump.py CASE_DIR OUT_DIR

Reads CASE_DIR/config.json, model.safetensors, tokens.npy, targets.npy (int32 [B,T]) and
writes, all float32 .npy:
    OUT_DIR/logits.npy            [B,T,V]
    OUT_DIR/loss.npy              [1]     mean cross-entropy over all positions
    OUT_DIR/grad/<tensor>.npy     dL/d(parameter), one per tensor of model.safetensors
    OUT_DIR/dx/layers.<N>.npy     [B,T,d] dL/d(residual stream entering block N)
Exit status 0 on success. Computes with the PyTorch reference in float32.

TLM_FAKE_PERTURB=<mode> makes it wrong on purpose, to prove test_parity.py notices:
    flip_grad  negate the gradient of the first projection weight of layer 0
    drop_grad  leave out the last gradient file
    extra_grad write one gradient the model does not have
    logits     scale the logits by 1 + 1e-3
    nan_dx     put a NaN into dx/layers.0
    fail       exit with status 3 without writing anything
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import tinylm_ref as ref  # noqa: E402


def perturb(mode, out_dir, result):
    g = result["grads"]
    if mode == "flip_grad":
        name = "layers.0.attn.q_proj.weight"
        np.save(os.path.join(out_dir, "grad", name + ".npy"), -g[name].astype(np.float32))
    elif mode == "drop_grad":
        os.remove(os.path.join(out_dir, "grad", list(g)[-1] + ".npy"))
    elif mode == "extra_grad":
        np.save(os.path.join(out_dir, "grad", "layers.0.attn.bogus.npy"), np.zeros(3, np.float32))
    elif mode == "logits":
        np.save(os.path.join(out_dir, "logits.npy"), (result["logits"] * (1 + 1e-3)).astype(np.float32))
    elif mode == "nan_dx":
        dx = result["dx"]["layers.0"].astype(np.float32)
        dx[0, 0, 0] = np.nan
        np.save(os.path.join(out_dir, "dx", "layers.0.npy"), dx)
    else:
        raise ValueError("unknown TLM_FAKE_PERTURB %r" % mode)


def main():
    if len(sys.argv) != 3:
        print("usage: fake_dump.py CASE_DIR OUT_DIR", file=sys.stderr)
        return 2
    mode = os.environ.get("TLM_FAKE_PERTURB", "")
    if mode == "fail":
        print("fake_dump: failing on purpose", file=sys.stderr)
        return 3
    torch.set_num_threads(1)
    try:
        result = ref.dump(sys.argv[1], sys.argv[2], torch.float32)
        if mode:
            perturb(mode, sys.argv[2], result)
    except (OSError, ValueError) as e:
        print("fake_dump: error: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
