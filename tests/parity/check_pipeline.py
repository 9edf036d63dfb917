#!/usr/bin/python3
"""check_pipeline.py — tests the parity test itself (no C engine needed).

    check_pipeline.py --work DIR

1. The float32 stand-in (fake_dump.py) passes test_parity.py on a few cases, and each
   deliberately wrong variant of it (TLM_FAKE_PERTURB modes) fails with a non-zero exit.
2. Mutation check of the grid: plausible engine bugs (exact gelu, wrong GQA head pairing,
   interleaved RoPE, eps outside the sqrt, ...) are written into a copy of the reference's
   source, run in float32 over the cases, and each must fail at least one case. A bug that
   passes every case would show a hole in the grid.
Exits 1 if any check does not hold.
"""
import argparse
import os
import shutil
import subprocess
import sys
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REF_DIR = os.path.join(HERE, "..", "reference")
sys.path.insert(0, REF_DIR)
sys.path.insert(0, HERE)
from compare import compare_case  # noqa: E402
from gen_cases import generate  # noqa: E402
import tinylm_ref  # noqa: E402

# (what the bug is, text in tinylm_ref.py, replacement); a tuple of texts and a tuple of
# replacements for a bug that needs several edits. Each text must occur exactly once.
MUTANTS = [
    ("gelu exact (erf) instead of tanh",
     "return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))",
     "return torch.nn.functional.gelu(x)"),
    ("GQA: query head h reads kv head h % KV",
     "k = k.repeat_interleave(H // KV, dim=1)\n        v = v.repeat_interleave(H // KV, dim=1)",
     "k = k.repeat(1, H // KV, 1, 1)\n        v = v.repeat(1, H // KV, 1, 1)"),
    ("RoPE rotates the other way",
     "return torch.cat((-x[..., half:], x[..., :half]), dim=-1)",
     "return torch.cat((x[..., half:], -x[..., :half]), dim=-1)"),
    ("RoPE frequencies theta^(-i/hd)",
     "inv_freq = theta ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)",
     "inv_freq = theta ** (-torch.arange(0, hd // 2, dtype=torch.float64) / hd)"),
    ("sliding window one too wide", "ok = ok & (i - j < window)", "ok = ok & (i - j <= window)"),
    ("attention soft-cap before the scale",
     "scores = softcap(mm(q, k.transpose(-1, -2)) * scale, c[\"attn_logit_softcapping\"])",
     "scores = softcap(mm(q, k.transpose(-1, -2)), c[\"attn_logit_softcapping\"]) * scale"),
    ("query_pre_attn_scalar ignored", "scale = (qpas if qpas is not None else hd) ** -0.5", "scale = hd ** -0.5"),
    ("final soft-cap missing", "return softcap(self.product(x, head), c[\"final_logit_softcapping\"])",
     "return self.product(x, head)"),
    ("RMSNorm eps outside the sqrt",
     "y = x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)",
     "y = x / (torch.sqrt((x * x).mean(-1, keepdim=True)) + eps)"),
    ("LayerNorm unbiased variance",
     "var = ((x - mean) ** 2).mean(-1, keepdim=True)",
     "var = ((x - mean) ** 2).sum(-1, keepdim=True) / (x.shape[-1] - 1)"),
    ("qk norm uses w, not 1 + w, with rmsnorm_1p",
     "return rms_norm(x, self.p(name), c[\"norm_eps\"], c[\"norm_type\"] == \"rmsnorm_1p\")",
     "return rms_norm(x, self.p(name), c[\"norm_eps\"], False)"),
    ("per-head qk norm after RoPE instead of before",
     ("if c[\"qk_norm\"] == \"head\":  # per head over head_dim (Qwen3)",
      "k = k * cos + rotate_half(k) * sin\n"),
     ("if False:",
      "k = k * cos + rotate_half(k) * sin\n"
      "                if c[\"qk_norm\"] == \"head\":\n"
      "                    q, k = self.qk_norm(p + \"q_norm.weight\", q), self.qk_norm(p + \"k_norm.weight\", k)\n")),
    ("layer_types ignored: every layer slides",
     "window = c[\"sliding_window\"] if c[\"layer_types\"][n] == \"sliding_attention\" else 0",
     "window = c[\"sliding_window\"]"),
    ("embedding scale also on the learned positions",
     "x = x + self.p(\"pos_embed.weight\")[:T][None, :, :]",
     "x = x + self.p(\"pos_embed.weight\")[:T][None, :, :] * "
     "(math.sqrt(c[\"hidden_size\"]) if c[\"embedding_scale\"] else 1.0)"),
    ("post placement: norm before the residual add",
     "s = x + hk(out, f(xb)) if res else hk(out, f(xb))",
     "return x + self.norm(norm_in, f(xb)) if res else self.norm(norm_in, f(xb))"),
    ("sandwich: output norm missing", "y = self.norm_hooked(norm_out, hk(out + \"_pre_norm\", f(u)), ln + \"_out\")",
     "y = f(u)"),
    ("geglu uses silu", "h = gelu_tanh(hk(\"hook_pre\", self.linear(p + \"gate_proj\", x))) * hk(\"hook_pre_linear\", up)",
     "h = torch.nn.functional.silu(hk(\"hook_pre\", self.linear(p + \"gate_proj\", x))) * hk(\"hook_pre_linear\", up)"),
    ("gate and up swapped", "up = self.linear(p + \"up_proj\", x)", "up = self.linear(p + (\"gate_proj\" if c[\"ffn_type\"] != \"gelu\" else \"up_proj\"), x)"),
    ("residual: false ignored", "return x + y if res else y", "return x + y"),
    ("loss summed, not averaged", "return -picked.mean()", "return -picked.sum()"),
    ("Gemma 4's v norm missing", "v = v / torch.sqrt((v * v).mean(-1, keepdim=True) + c[\"norm_eps\"])", "v = v"),
    ("K = V: v taken after k's norm and RoPE", "self._kv[n] = (k, v)",
     "self._kv[n] = (k, k if (c[\"attention_k_eq_v\"] and full) else v)"),
    ("shared K/V read from the first layer of the type",
     "k, v = self._kv[kv_source(c, n)]",
     "k, v = self._kv[min(j for j in self._kv if c[\"layer_types\"][j] == c[\"layer_types\"][n])]"),
    ("proportional RoPE over all frequencies", "inv_freq[turning:] = 0.0", "pass"),
    ("layer scalar missing", "x = x * self.p(\"layers.%d.layer_scalar\" % n)", "pass"),
    ("per-layer inputs without the token table", "per_layer = (made + table) * 2.0 ** -0.5",
     "per_layer = made"),
    ("MoE block: the router reads the pre-FFN norm's output, not the stream",
     "r = x / torch.sqrt((x * x).mean(-1, keepdim=True) + c[\"norm_eps\"])",
     "r = u / torch.sqrt((u * u).mean(-1, keepdim=True) + c[\"norm_eps\"])"),
    ("MoE block: per-expert scales missing", "return z, idx, w * self.p(p + \"expert_scale\")[idx]",
     "return z, idx, w"),
    ("MoE block: experts on the pre-FFN norm's output, not their own",
     "experts = self.moe(n, self.norm(p + \"moe_in_norm\", x), r)", "experts = self.moe(n, u, r)"),
    ("dx taken at the block output",
     "dx = collections.OrderedDict((\"layers.%d\" % n, x.grad.detach().numpy().copy())\n"
     "                                     for n, x in enumerate(self.block_inputs))",
     "dx = collections.OrderedDict((\"layers.%d\" % n, x.grad.detach().numpy().copy())\n"
     "                                     for n, x in enumerate(self.block_inputs[1:] + self.block_inputs[-1:]))"),
]


def mutant_module(olds, news):
    """A copy of tinylm_ref with the texts olds replaced by news."""
    with open(os.path.join(REF_DIR, "tinylm_ref.py")) as f:
        src = f.read()
    if isinstance(olds, str):
        olds, news = (olds,), (news,)
    for old, new in zip(olds, news):
        if src.count(old) != 1:
            raise AssertionError("mutant text occurs %d times in tinylm_ref.py: %r" % (src.count(old), old))
        src = src.replace(old, new)
    mod = types.ModuleType("tinylm_ref_mutant")
    mod.__file__ = os.path.join(REF_DIR, "tinylm_ref.py")
    exec(compile(src, "tinylm_ref_mutant", "exec"), mod.__dict__)
    return mod


# Where to look first for mutants whose catching case sits late in the grid: the search order
# only (each mutant must still fail a case, and a stale name just means the full search). Saves
# ~40 s a run: the search dumps every case before the first that fails.
LOOK_FIRST = {
    "GQA: query head h reads kv head h % KV": "qk_norm_full_rmsnorm_kv2",
    "sliding window one too wide": "sliding_mixed_layer_types",
    "attention soft-cap before the scale": "attn_softcap",
    "query_pre_attn_scalar ignored": "query_pre_attn_scalar",
    "final soft-cap missing": "final_softcap",
    "layer_types ignored: every layer slides": "sliding_mixed_layer_types",
    "embedding scale also on the learned positions": "embedding_scale_learned_pos",
    "geglu uses silu": "ffn_geglu",
    "Gemma 4's v norm missing": "v_norm",
    "K = V: v taken after k's norm and RoPE": "gemma4_k_eq_v_shared_kv",
    "shared K/V read from the first layer of the type": "gemma4_k_eq_v_shared_kv",
    "proportional RoPE over all frequencies": "rope_proportional_0.25",
    "layer scalar missing": "layer_scalar",
    "per-layer inputs without the token table": "per_layer_inputs_pre",
    "MoE block: the router reads the pre-FFN norm's output, not the stream": "moe_block_sandwich_aux",
    "MoE block: per-expert scales missing": "moe_block_sandwich_aux",
    "MoE block: experts on the pre-FFN norm's output, not their own": "moe_block_sandwich_aux",
}


def killing_case(mod, cases, work, first=None):
    """The first case the mutant fails (case `first` tried before the others), or None."""
    cases = sorted(cases, key=lambda d: os.path.basename(d) != first)  # (stable: the grid's order otherwise)
    for case_dir in cases:
        out = os.path.join(work, "mutant_out")
        shutil.rmtree(out, ignore_errors=True)  # stale files would count as extra tensors
        mod.dump(case_dir, out, torch.float32)
        if not all(c.ok for c in compare_case(case_dir, out)):
            return os.path.basename(case_dir)
    return None


def run_parity(work, env_extra, only):
    env = dict(os.environ, **env_extra)
    cmd = [sys.executable, os.path.join(HERE, "test_parity.py"), "--dump-bin", os.path.join(HERE, "fake_dump.py"),
           "--work", work, "--cases", os.path.join(work, "cases"), "--only"] + only
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    return p.returncode, p.stdout.decode().strip().splitlines()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    cases = generate(os.path.join(a.work, "cases"))
    problems = []

    rc, lines = run_parity(a.work, {}, ["gemma2_like", "gpt2_like", "qk_norm_full_rmsnorm_kv2"])
    print("fake_dump, correct:        exit %d, %s" % (rc, lines[-1]))
    if rc != 0 or lines[-1] != "3 passed, 0 failed":
        problems.append("the correct fake did not pass:\n" + "\n".join(lines))
    for mode in ("flip_grad", "drop_grad", "extra_grad", "logits", "nan_dx", "fail"):
        rc, lines = run_parity(a.work, {"TLM_FAKE_PERTURB": mode}, ["gemma2_like"])
        print("fake_dump, %-15s exit %d, %s" % (mode + ":", rc, lines[-1]))
        if rc == 0 or lines[-1] != "0 passed, 1 failed":
            problems.append("perturbation %s was not caught:\n%s" % (mode, "\n".join(lines)))

    unknown = set(LOOK_FIRST) - {m[0] for m in MUTANTS}
    if unknown:
        problems.append("LOOK_FIRST names no mutant: %s" % ", ".join(sorted(unknown)))
    for what, old, new in MUTANTS:
        killer = killing_case(mutant_module(old, new), cases, a.work, LOOK_FIRST.get(what))
        print("mutant %-50s %s" % (what, "caught by " + killer if killer else "NOT CAUGHT"))
        if not killer:
            problems.append("no case catches: " + what)
    for p in problems:
        print("PROBLEM: " + p)
    print("pipeline self-check: %s" % ("FAILED" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
