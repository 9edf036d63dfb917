#!/usr/bin/env python3
"""test_compare.py — `tinylm compare A B` (docs/compare.md).

- one model in several formats (llama2.c .bin, its Hugging Face export, its f32 GGUF export):
  no divergence, KL 0, every top-1 the same; against its q8_0 GGUF export: small differences
  from the embedding on, a small KL, and no convention named as the cause (the search finds none)
- errors: different architectures, missing tokens, one argument only
- .npz references dumped by the float64 PyTorch reference (tests/reference/tinylm_ref.py, hooks under
  TransformerLens names): a llama-like and a Gemma-2-like model match them within 1e-4 at every point,
  every point of the model found in the file (no name missing), from np.savez (float64) and
  np.savez_compressed (float32, no batch dimension); missing and unknown keys are listed; the file's
  "tokens" are used; malformed archives (cut, not a zip, a damaged CRC, a member that is no .npy, a
  wrong shape, integer activations, tokens that disagree) are refused naming the file and the key
- members checked by their header before they are inflated: a 512 MiB deflated member (a file of
  0.5 MiB) whose shape is not the point's, one under a key that is no point, and one whose header
  promises less than its stated size are refused or skipped at a peak memory under 64 MiB; an
  all-NaN reference point's summary line says NaN (not "max rel Δ 0 ... cosine 1")
- the convention search: for each convention of the list a broken conversion is planted — Gemma 2
  weights read as plain w, q/k rows left in interleaved pairs, Post-Norm for Pre-Norm (and the
  reverse), the attention or the final soft-cap dropped, an untied head for a tied one (and the
  reverse), QK-norm over all heads for per head; against a reference .npz whose norms put eps
  outside the square root or round their statistics to bf16, and Gemma weights / pair-ordered rows
  on the model's side — and the first diverging point and the one cause named (no other change
  matches) are checked
- docs/compare.md's snippet that dumps a Hugging Face LlamaForCausalLM with forward hooks, run as
  written on a stand-in for transformers' Llama (the same module names and call conventions)
  loaded from tinylm's HF export: its .npz matches the export within 1e-4 at every point it dumps

usage: test_compare.py --tinylm PATH --work DIR"""
import json
import os
import sys
import zipfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import STORIES, TOK512, check, main, run  # noqa: E402

import tinylm_ref  # noqa: E402  (tests/reference, put on the path by harness)

PROMPT = "Once upon a time, there was a little dog"


def compare(T, a, b, *more, json_out="c.json"):
    """(exit code, report dict or None, stdout, stderr)"""
    if os.path.exists(json_out):
        os.remove(json_out)
    rc, out, err = run(T, "compare", a, b, "--json", json_out, *more)
    rep = None
    if rc == 0 and os.path.exists(json_out):
        with open(json_out) as f:
            rep = json.load(f)
    return rc, rep, out, err


def first(rep):
    return rep["first_divergence"]["name"] if rep and rep["first_divergence"] else None


def cause(rep):
    s = rep and rep["search"]
    return s["cause"]["id"] if s and s["cause"] else None


# ---------------------------------------------------------------- one model, several formats

def test_formats(T, work):
    hf = os.path.join(work, "stories_hf")
    rc, _, err = run(T, "export", "--model", STORIES, "--tokenizer", TOK512, "--out", hf)
    check(rc == 0, "export stories260K as a Hugging Face directory", err)
    g32, g8 = os.path.join(work, "s32.gguf"), os.path.join(work, "s8.gguf")
    for path, typ in ((g32, "f32"), (g8, "q8_0")):
        rc, _, err = run(T, "export", "--model", STORIES, "--tokenizer", TOK512, "--format", "gguf", "--type", typ,
                         "--out", path)
        check(rc == 0, "export stories260K as GGUF %s" % typ, err)
    tok = ["--tokenizer", TOK512, "--prompt", PROMPT]
    for what, b in (("itself", STORIES), ("its HF export", hf), ("its f32 GGUF export", g32)):
        rc, rep, out, err = compare(T, STORIES, b, *tok)
        ok = rc == 0 and rep is not None
        check(ok and rep["first_divergence"] is None and rep["search"] is None,
              "stories260K.bin vs %s: no divergence, no search" % what, err or out[-400:])
        if not ok:
            continue
        pts = rep["points"]
        check(len(pts) > 100 and pts[0]["name"] == "hook_embed" and pts[-1]["name"] == "logits"
              and all(p["max_rel"] <= 1e-6 and p["cosine"] > 0.999999 for p in pts),
              "  %d points from hook_embed to logits, each within 1e-6" % len(pts))
        o = rep["output"]
        check(o["kl_max"] <= 1e-9 and o["top1_agree"] == o["positions"] == len(rep["tokens"]),
              "  KL 0 and every top-1 the same", str(o))
        check("no divergence" in out, "  the text says: no divergence", out[-300:])
    # quantized: differences from the embedding on, a small KL, no false cause
    rc, rep, out, err = compare(T, STORIES, g8, *tok, "--html", "q8.html")
    ok = rc == 0 and rep is not None
    check(ok and first(rep) == "hook_embed", "stories260K vs its q8_0 export: diverges (beyond 1e-3) at hook_embed",
          err or str(first(rep)))
    if ok:
        o = rep["output"]
        check(0 < o["kl_mean"] < 1e-3 and o["top1_agree"] >= o["positions"] - 1,
              "  KL(A||B) small but not 0 (%.2e), top-1 agreement %d/%d" % (o["kl_mean"], o["top1_agree"],
                                                                           o["positions"]), str(o))
        check(all(p["cosine"] > 0.999 and p["max_rel"] < 0.1 for p in rep["points"]),
              "  every point within 10% (relative) and cosine > 0.999")
        s = rep["search"]
        check(s is not None and s["cause"] is None and s["n_matched"] == 0 and "no single change" in out,
              "  the convention search names no cause", out[-600:])
        check("Q8_0" in rep["note"], "  the note names the quantized matrices", rep.get("note", ""))
        html = open("q8.html", encoding="utf-8").read()
        check("<script" not in html and "First divergence" in html and "hook_embed" in html and "Per layer" in html,
              "  --html: a page without script, the first divergence, the per-layer table")
    rc, rep, out, err = compare(T, STORIES, g8, *tok, "--tol", "0.1")
    check(rc == 0 and rep and rep["first_divergence"] is None and rep["search"] is None,
          "  with --tol 0.1: no divergence", err)


# ---------------------------------------------------------------- small random models

BASE = {"model_type": "tinylm", "vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 48,
        "max_position_embeddings": 64, "tie_word_embeddings": False}
TOKENS = [3, 17, 5, 60, 22, 9, 41, 0, 33]


def make_model(work, name, cfg, params=None, seed=0):
    """a tinylm model directory; params None: tinylm_ref.random_params(cfg, seed)"""
    d = os.path.join(work, name)
    if params is None:
        params = tinylm_ref.random_params(cfg, seed)
    tinylm_ref.save(d, cfg, params)
    return d, params


def test_errors(T, work):
    a, _ = make_model(work, "err_a", BASE)
    b, _ = make_model(work, "err_b", dict(BASE, hidden_size=48))
    ids = ",".join(map(str, TOKENS))
    rc, _, out, err = compare(T, a, b, "--tokens", ids)
    check(rc == 1 and "different architectures" in err and "hidden_size 32 vs 48" in err,
          "different architectures are refused, naming the size", err.strip())
    rc, _, out, err = compare(T, a, a)
    check(rc == 2 and "--tokens" in err, "no tokens: a usage error", err.strip())
    rc, out, err = run(T, "compare", a)
    check(rc == 2 and "two models" in err, "one argument: a usage error", err.strip())
    rc, _, out, err = compare(T, a, os.path.join(work, "nothing_here"), "--tokens", ids)
    check(rc == 1 and "nothing_here" in err, "a missing B is named", err.strip())
    rc, _, out, err = compare(T, a, a, "--tokens", "1,2,999")
    check(rc == 1 and "999" in err, "a token outside the vocabulary is named", err.strip())


# ---------------------------------------------------------------- .npz references

GEMMA = dict(BASE, norm_type="rmsnorm_1p", norm_placement="sandwich", embedding_scale=True, ffn_type="geglu",
             attn_logit_softcapping=5.0, final_logit_softcapping=3.0, tie_word_embeddings=True, norm_eps=1e-6)


def ref_cache(model_dir, tokens, model_class=None):
    """logits, {TransformerLens name: float64 array [1, T, ...]} of the PyTorch reference"""
    m = tinylm_ref.load(model_dir)
    if model_class is not None:
        m.__class__ = model_class
    logits, cache = m.run_hooked(np.array([tokens]))
    return logits, cache


def write_npz(path, tokens, logits, cache, compressed=False, dtype=np.float64, squeeze=False, drop=(), extra=None,
              with_tokens=True):
    arrays = {k: (v[0] if squeeze else v).astype(dtype) for k, v in cache.items() if k not in drop}
    arrays["logits"] = (logits[0] if squeeze else logits).astype(dtype)
    if with_tokens:
        arrays["tokens"] = np.array(tokens, dtype=np.int64)
    arrays.update(extra or {})
    (np.savez_compressed if compressed else np.savez)(path, **arrays)
    return path


def test_npz(T, work):
    a, _ = make_model(work, "npz_llama", BASE, seed=1)
    logits, cache = ref_cache(a, TOKENS)
    embed_bytes = cache["hook_embed"].astype(np.float64).tobytes()
    z = write_npz(os.path.join(work, "ref.npz"), TOKENS, logits, cache)
    rc, rep, out, err = compare(T, a, z, "--tol", "1e-4")
    ok = rc == 0 and rep is not None
    check(ok and rep["first_divergence"] is None, "llama-like model vs the float64 reference's .npz: within 1e-4",
          err or str(rep and rep["first_divergence"]))
    if ok:
        check(rep["missing_in_file"] == [] and rep["unknown_keys"] == [] and rep["reference"] == "B"
              and rep["b"]["kind"] == "npz",
              "  every point of the model is in the file under its TransformerLens name",
              str(rep["missing_in_file"]) + str(rep["unknown_keys"]))
        check(rep["tokens"] == TOKENS and rep["output"]["kl_max"] < 1e-9 and rep["worst_rel"] < 1e-5,
              "  the file's tokens; KL < 1e-9, worst relative Δ %.1e" % rep["worst_rel"], str(rep["output"]))
        check("blocks.1.ln1.hook_scale" in [p["name"] for p in rep["points"]],
              "  hook_scale compared as TransformerLens' scale, sqrt(mean(x^2) + eps)")
    g, _ = make_model(work, "npz_gemma", GEMMA, seed=2)
    logits, cache = ref_cache(g, TOKENS)
    z = write_npz(os.path.join(work, "gemma.npz"), TOKENS, logits, cache, compressed=True, dtype=np.float32,
                  squeeze=True)
    rc, rep, out, err = compare(T, g, z, "--tol", "1e-4")
    check(rc == 0 and rep and rep["first_divergence"] is None and rep["missing_in_file"] == [],
          "Gemma-2-like model (1 + w, sandwich, soft-caps) vs np.savez_compressed float32 [T, ...]: within 1e-4",
          err or (rep and str(rep["first_divergence"])))
    # missing and unknown keys, tokens given on the command line
    z = write_npz(os.path.join(work, "partial.npz"), TOKENS, logits, cache, drop=("blocks.0.attn.hook_q",),
                  extra={"blocks.0.hook_typo": np.zeros((1, 9, 32))}, with_tokens=False)
    rc, rep, out, err = compare(T, g, z, "--tokens", ",".join(map(str, TOKENS)), "--tol", "1e-4")
    check(rc == 0 and rep and rep["missing_in_file"] == ["blocks.0.attn.hook_q"]
          and rep["unknown_keys"] == ["blocks.0.hook_typo"] and rep["first_divergence"] is None
          and "blocks.0.hook_typo" in out,
          "a key missing from the file and a key that is no point are listed", err or (rep and str(rep["unknown_keys"])))
    rc, rep, out, err = compare(T, g, z)
    check(rc == 2 and "no \"tokens\"" in err, "no tokens in the file nor given: a usage error", err.strip())
    good = os.path.join(work, "gemma.npz")
    rc, rep, out, err = compare(T, g, good, "--tokens", "1,2,3")
    check(rc == 1 and "'tokens' differ" in err, "tokens that disagree with the file's are refused", err.strip())
    # malformed archives
    raw = open(good, "rb").read()
    bad = {}
    bad["cut.npz"] = raw[:len(raw) // 2]
    bad["garbage.npz"] = b"not a zip at all" * 10
    bad["empty.npz"] = b""
    stored = open(os.path.join(work, "ref.npz"), "rb").read()
    at = stored.find(embed_bytes[:64])
    check(at > 0, "(the stored bytes of hook_embed found in ref.npz)")
    damaged = bytearray(stored)
    damaged[at + 8] ^= 0x55
    bad["crc.npz"] = bytes(damaged)
    for name, data in bad.items():
        open(os.path.join(work, name), "wb").write(data)
    with zipfile.ZipFile(os.path.join(work, "txt.npz"), "w") as zf:
        zf.writestr("notes.txt", "hello")
    np.savez(os.path.join(work, "shape.npz"), tokens=np.array(TOKENS), hook_embed=np.zeros((1, 9, 31)))
    np.savez(os.path.join(work, "ints.npz"), tokens=np.array(TOKENS), hook_embed=np.zeros((1, 9, 32), np.int32))
    np.savez(os.path.join(work, "ftok.npz"), tokens=np.array(TOKENS, np.float32), hook_embed=np.zeros((1, 9, 32)))
    np.savez(os.path.join(work, "none.npz"), tokens=np.array(TOKENS), something=np.zeros(3))
    cases = [("cut.npz", ["cut.npz"]), ("garbage.npz", ["garbage.npz", "not an .npz"]),
             ("empty.npz", ["empty.npz", "empty"]), ("crc.npz", ["crc.npz", "CRC", "hook_embed.npy"]),
             ("txt.npz", ["txt.npz", "notes.txt", "not an .npy"]),
             ("shape.npz", ["shape.npz", "hook_embed", "[1, 9, 31]", "[1, 9, 32]"]),
             ("ints.npz", ["ints.npz", "hook_embed", "integers"]), ("ftok.npz", ["ftok.npz", "tokens", "integer"]),
             ("none.npz", ["none.npz", "no key names a point"])]
    for name, words in cases:
        rc, _, out, err = compare(T, a, os.path.join(work, name))
        check(rc == 1 and all(w in err for w in words) and len(err.strip().splitlines()) == 1,
              "malformed %s refused, naming %s" % (name, ", ".join(words[1:]) or "the file"), err.strip())


def bomb_npz(path, members):
    """an .npz of deflated members written as a stream: (key, npy header dict, bytes of data, zero
    bytes after them), so that a member's data can be far larger than its few compressed bytes"""
    import io
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for key, header, data, zeros in members:
            head = io.BytesIO()
            np.lib.format.write_array_header_1_0(head, header)
            with zf.open(key + ".npy", "w", force_zip64=True) as f:
                f.write(head.getvalue() + data)
                chunk = bytes(1 << 24)
                for _ in range(zeros >> 24):
                    f.write(chunk)
                f.write(bytes(zeros & ((1 << 24) - 1)))
    return path


# (a small launcher measures the command: a child forked from this process would count this
# process's own memory, torch's included, in its peak before it execs)
RSS_LAUNCHER = """import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
sys.stderr.write("\\npeak-rss-kib %d\\n" % usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status) & 255)
"""


def run_rss(T, *args):
    """(exit code, stdout, stderr, peak resident memory in MiB) of one tinylm command"""
    rc, out, err = run(sys.executable, "-c", RSS_LAUNCHER, T, *args)
    err, _, peak = err.rpartition("\npeak-rss-kib ")
    return rc, out, err, int(peak) / 1024.0


def test_npz_bounded(T, work):
    """A deflated member is checked by its header before it is inflated: a 512 MiB member whose shape is
    not the point's, one under a key that is no point, and one whose header promises less than its
    stated size are refused or skipped with the process's peak memory far below the member's size.
    An all-NaN reference point's summary line says so (not "max rel Δ 0 ... cosine 1")."""
    a, _ = make_model(work, "bomb_model", BASE, seed=3)
    big = 512 << 20
    f4 = lambda shape: {"descr": "<f4", "fortran_order": False, "shape": shape}  # noqa: E731
    tokens = np.array(TOKENS, np.int32)
    tok = ("tokens", {"descr": "<i4", "fortran_order": False, "shape": (len(TOKENS),)}, tokens.tobytes(), 0)
    embed = ("hook_embed", f4((1, 9, 32)), np.ones((1, 9, 32), np.float32).tobytes(), 0)
    cases = [("bomb_shape.npz", [tok, ("hook_embed", f4((1, big // 4)), b"", big)], 1,
              ["bomb_shape.npz", "hook_embed", "[1, %d]" % (big // 4), "[1, 9, 32]"]),
             ("bomb_unknown.npz", [tok, embed, ("junk", f4((big // 4,)), b"", big)], 0, ["junk"]),
             ("bomb_liar.npz", [tok, ("hook_embed", f4((1, 9, 32)), b"", big)], 1,
              ["bomb_liar.npz", "hook_embed.npy", "needs 1280 bytes", str(big + 128)])]
    for name, members, want_rc, words in cases:
        z = bomb_npz(os.path.join(work, name), members)
        rc, out, err, peak = run_rss(T, "compare", a, z)
        text = out + err
        check(rc == want_rc and all(w in text for w in words) and peak < 64,
              "%s (%.1f KiB on disk, a %d MiB member): exit %d naming %s, peak memory %.0f MiB < 64"
              % (name, os.path.getsize(z) / 1024, big >> 20, want_rc, ", ".join(words), peak), err.strip()[-300:])
    # an all-NaN reference point
    nan = ("hook_embed", f4((1, 9, 32)), np.full((1, 9, 32), np.nan, np.float32).tobytes(), 0)
    z = bomb_npz(os.path.join(work, "nan.npz"), [tok, nan])
    rc, rep, out, err = compare(T, a, z)
    line = [x for x in out.splitlines() if x.startswith("first divergence")]
    check(rc == 0 and line == ["first divergence: hook_embed: 288 entries NaN or infinite (in A or B)"]
          and rep and rep["first_divergence"]["name"] == "hook_embed",
          "an all-NaN reference point: the summary line says NaN, not max rel Δ 0 and cosine 1", str(line) + err)


# ---------------------------------------------------------------- planted convention bugs

def pairs_from_halves(w, hd):
    """q/k rows [heads * hd, ...] of each head from halves (b, b + hd/2) to interleaved pairs (2b, 2b+1):
    what a conversion that leaves Meta's layout in place gives an engine that rotates halves"""
    out = np.empty_like(w)
    for h in range(w.shape[0] // hd):
        for a in range(2):
            for b in range(hd // 2):
                out[h * hd + 2 * b + a] = w[h * hd + a * (hd // 2) + b]
    return out


def bf16(t):
    return t.to(torch.bfloat16).to(t.dtype)


def variant_denominator(kind, ms, eps):
    """the norm's denominator (TransformerLens' scale) under a convention the engine does not have"""
    if kind == "eps_outside":
        return torch.sqrt(ms) + eps
    r = bf16(1.0 / torch.sqrt(bf16(bf16(ms) + eps)))  # statistics in bf16: mean of squares, + eps, rsqrt
    return 1.0 / r


def variant_model(kind):
    """tinylm_ref.Model whose RMSNorms (block, final and QK) compute with `kind`"""
    class Variant(tinylm_ref.Model):
        def _rms(self, x, w):
            c = self.cfg
            y = x / variant_denominator(kind, (x * x).mean(-1, keepdim=True), c["norm_eps"])
            return y * (1.0 + w) if c["norm_type"] == "rmsnorm_1p" else y * w

        def norm_hooked(self, prefix, x, hook_prefix):
            if self.hook_fn is not None:
                den = variant_denominator(kind, (x * x).mean(-1, keepdim=True), self.cfg["norm_eps"])
                self._hook(hook_prefix + ".hook_scale", den.detach())
            return self.norm(prefix, x)

        def norm(self, prefix, x):
            return self._rms(x, self.p(prefix + ".weight"))

        def qk_norm(self, name, x):
            return self._rms(x, self.p(name))
    return Variant


def expect(T, what, a, b, want_first, want_cause, *more):
    rc, rep, out, err = compare(T, a, b, *more)
    if not check(rc == 0 and rep is not None, what + ": runs", err):
        return
    got_first, got_cause = first(rep), cause(rep)
    s = rep["search"] or {}
    check(got_first == want_first, "  first divergence at %s" % want_first, "got %s" % got_first)
    matched = [t["id"] for t in s.get("tried", []) if t.get("matched")]
    check(got_cause == want_cause and matched == [want_cause],
          "  cause %s, and no other change matches" % want_cause, "got %s, matched %s" % (got_cause, matched))
    text = s.get("cause") and s["cause"]["text"]
    check(bool(text) and ("cause: " + text) in out, "  the text names it: %s" % (text or "")[:60] + "...",
          out[-500:])


def test_conventions(T, work):
    ids = ["--tokens", ",".join(map(str, TOKENS))]
    # RMSNorm w vs 1 + w: Gemma 2 weights read as a plain RMSNorm
    g, gp = make_model(work, "cv_gemma", GEMMA, seed=3)
    b, _ = make_model(work, "cv_gemma_as_w", dict(GEMMA, norm_type="rmsnorm"), gp)
    expect(T, "Gemma 2 weights read with w (B) vs 1 + w (A)", g, b, "blocks.0.ln1.hook_normalized", "norm_offset",
           *ids)
    # a Gemma checkpoint that stores the gains 1 + w (a double offset): both sides apply 1 + w, the cause says
    # that B's weights already hold the 1, not that B applies 1 + w where A reads w
    dp = {k: (v + 1.0 if "norm" in k else v) for k, v in gp.items()}
    b, _ = make_model(work, "cv_gemma_double", GEMMA, dp)
    expect(T, "Gemma weights stored as 1 + w (B) vs w (A), both 1 + w models", g, b, "blocks.0.ln1.hook_normalized",
           "norm_offset", *ids)
    rc, rep, out, err = compare(T, g, b, *ids)
    text = rep and rep["search"] and rep["search"]["cause"] and rep["search"]["cause"]["text"] or ""
    check("both apply the RMSNorm weights as 1 + w" in text and "already hold the 1" in text and
          "where A reads" not in text, "  worded from A's and B's conventions (B adds the 1 twice)", text)
    # RoPE interleaved pairs vs halves: q/k rows left in Meta's pair order
    hd, H, KV = BASE["head_dim"], BASE["num_attention_heads"], BASE["num_key_value_heads"]
    a, ap = make_model(work, "cv_llama", BASE, seed=4)
    pp = dict(ap)
    for n in range(BASE["num_hidden_layers"]):
        for k in ("q_proj", "k_proj"):
            key = "layers.%d.attn.%s.weight" % (n, k)
            pp[key] = pairs_from_halves(ap[key], hd)
    b, _ = make_model(work, "cv_llama_pairs", BASE, pp)
    expect(T, "q/k rows in interleaved pairs (B) vs halves (A)", a, b, "blocks.0.attn.hook_q", "rope_pairs_to_halves",
           *ids)
    # norm before vs after the sublayer (same weights), both ways
    b, _ = make_model(work, "cv_llama_post", dict(BASE, norm_placement="post", final_norm=True), ap)
    expect(T, "Post-Norm (B) vs Pre-Norm (A), same weights", a, b, "blocks.0.attn.hook_q", "norm_placement", *ids)
    expect(T, "Pre-Norm (B) vs Post-Norm (A), same weights", b, a, "blocks.0.attn.hook_q", "norm_placement", *ids)
    # soft-caps present vs absent
    b, _ = make_model(work, "cv_gemma_nocap", dict(GEMMA, attn_logit_softcapping=0.0), gp)
    expect(T, "attention soft-cap dropped (B) vs kept (A)", g, b, "blocks.0.attn.hook_attn_scores", "attn_softcap",
           *ids)
    b, _ = make_model(work, "cv_gemma_nofinal", dict(GEMMA, final_logit_softcapping=0.0), gp)
    expect(T, "final soft-cap dropped (B) vs kept (A)", g, b, "logits", "final_softcap", *ids)
    # tied vs untied head: a tied model converted with a head of its own (a fresh matrix)
    tied = dict(BASE, tie_word_embeddings=True)
    t, tp = make_model(work, "cv_tied", tied, seed=5)
    up = dict(tp)
    up["lm_head.weight"] = np.random.default_rng(9).normal(0.0, 0.6, tp["embed.weight"].shape)
    b, _ = make_model(work, "cv_untied", BASE, up)
    expect(T, "an untied head (B) vs a tied one (A)", t, b, "logits", "tied_head", *ids)
    expect(T, "a tied head (B) vs an untied one (A): B untied with A's head", b, t, "logits", "tied_head", *ids)
    # QK-norm per head vs over all heads (the per-head gains repeated for every head)
    qh = dict(BASE, qk_norm="head")
    q, qp = make_model(work, "cv_qk_head", qh, seed=6)
    fp = dict(qp)
    for n in range(BASE["num_hidden_layers"]):
        fp["layers.%d.attn.q_norm.weight" % n] = np.tile(qp["layers.%d.attn.q_norm.weight" % n], H)
        fp["layers.%d.attn.k_norm.weight" % n] = np.tile(qp["layers.%d.attn.k_norm.weight" % n], KV)
    b, _ = make_model(work, "cv_qk_full", dict(BASE, qk_norm="full"), fp)
    expect(T, "QK-norm over all heads (B) vs per head (A)", q, b, "blocks.0.attn.hook_q_normed", "qk_norm_scope",
           *ids)
    # against a reference .npz: conventions the engine has no switch for (the search changes A)
    e, _ = make_model(work, "cv_eps", dict(BASE, norm_eps=0.05), seed=7)
    logits, cache = ref_cache(e, TOKENS, variant_model("eps_outside"))
    z = write_npz(os.path.join(work, "eps_outside.npz"), TOKENS, logits, cache)
    expect(T, "a reference with eps outside the sqrt (B) vs inside (A)", e, z, "blocks.0.ln1.hook_scale",
           "norm_eps_outside", "--tol", "1e-4")
    logits, cache = ref_cache(a, TOKENS, variant_model("bf16"))
    z = write_npz(os.path.join(work, "bf16_stats.npz"), TOKENS, logits, cache)
    expect(T, "a reference with bf16 norm statistics (B) vs f32 (A)", a, z, "blocks.0.ln1.hook_scale",
           "norm_stats_bf16", "--tol", "1e-4")
    # the model side broken, the reference right (Gemma's 1 + w; pair-ordered rows)
    logits, cache = ref_cache(g, TOKENS)
    z = write_npz(os.path.join(work, "gemma_ref.npz"), TOKENS, logits, cache)
    expect(T, "Gemma weights read with w (A) vs the reference's .npz (B)", os.path.join(work, "cv_gemma_as_w"), z,
           "blocks.0.ln1.hook_normalized", "norm_offset", "--tol", "1e-4")
    logits, cache = ref_cache(a, TOKENS)
    z = write_npz(os.path.join(work, "llama_ref.npz"), TOKENS, logits, cache)
    expect(T, "q/k rows in pairs (A) vs the reference's .npz (B)", os.path.join(work, "cv_llama_pairs"), z,
           "blocks.0.attn.hook_q", "rope_pairs_to_halves", "--tol", "1e-4")


# ---------------------------------------------------------------- the docs' Hugging Face snippet

FAKE_TRANSFORMERS = r'''
"""a stand-in for transformers' LlamaForCausalLM (module names and call conventions of
modeling_llama.py), for test_compare.py only"""
import json, os, sys, types
import torch
from torch import nn
sys.path.insert(0, os.environ["TLM_REFERENCE"])
from safetensors_np import load_safetensors


class LlamaRMSNorm(nn.Module):
    def __init__(self, w, eps):
        super().__init__()
        self.weight, self.eps = nn.Parameter(w), eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.H, self.KV, self.hd = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        d = c.hidden_size
        self.q_proj = nn.Linear(d, self.H * self.hd, bias=False)
        self.k_proj = nn.Linear(d, self.KV * self.hd, bias=False)
        self.v_proj = nn.Linear(d, self.KV * self.hd, bias=False)
        self.o_proj = nn.Linear(self.H * self.hd, d, bias=False)

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None):
        B, T, _ = hidden_states.shape
        q = self.q_proj(hidden_states).view(B, T, -1, self.hd).transpose(1, 2)
        k = self.k_proj(hidden_states).view(B, T, -1, self.hd).transpose(1, 2)
        v = self.v_proj(hidden_states).view(B, T, -1, self.hd).transpose(1, 2)
        cos, sin = position_embeddings
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(self.H // self.KV, 1), v.repeat_interleave(self.H // self.KV, 1)
        s = (q @ k.transpose(-1, -2)) * self.hd ** -0.5
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, -1)
        return self.o_proj(o), None


class LlamaMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, f = c.hidden_size, c.intermediate_size
        self.gate_proj, self.up_proj = nn.Linear(d, f, bias=False), nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, c, w, i):
        super().__init__()
        p = "model.layers.%d." % i
        self.self_attn, self.mlp = LlamaAttention(c), LlamaMLP(c)
        self.input_layernorm = LlamaRMSNorm(w[p + "input_layernorm.weight"], c.rms_norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(w[p + "post_attention_layernorm.weight"], c.rms_norm_eps)

    def forward(self, hidden_states, attention_mask=None, position_embeddings=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, _ = self.self_attn(hidden_states=hidden_states, position_embeddings=position_embeddings)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return (residual + hidden_states,)


class LlamaModel(nn.Module):
    def __init__(self, c, w):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([LlamaDecoderLayer(c, w, i) for i in range(c.num_hidden_layers)])
        self.norm = LlamaRMSNorm(w["model.norm.weight"], c.rms_norm_eps)

    def forward(self, input_ids):
        h = self.embed_tokens(input_ids)
        T, hd = input_ids.shape[1], self.c.head_dim
        inv = self.c.rope_theta ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
        ang = torch.cat((ang, ang), -1)
        pe = (ang.cos().float(), ang.sin().float())
        for layer in self.layers:
            h = layer(h, attention_mask=None, position_embeddings=pe)[0]
        return self.norm(h)


class LlamaForCausalLM(nn.Module):
    def __init__(self, c, w):
        super().__init__()
        self.config, self.model = c, LlamaModel(c, w)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)

    def forward(self, input_ids):
        return types.SimpleNamespace(logits=self.lm_head(self.model(input_ids)))


class AutoModelForCausalLM:
    @staticmethod
    def from_pretrained(path, torch_dtype=torch.float32):
        c = types.SimpleNamespace(**json.load(open(os.path.join(path, "config.json"))))
        w = {k: torch.tensor(v, dtype=torch_dtype) for k, v in load_safetensors(os.path.join(path, "model.safetensors")).items()}
        m = LlamaForCausalLM(c, w)
        own = dict(m.named_parameters())
        with torch.no_grad():
            for k, v in w.items():
                own[k].copy_(v)
        return m


class AutoTokenizer:
    @staticmethod
    def from_pretrained(path):
        ids = json.loads(os.environ["TLM_FAKE_IDS"])
        return lambda text, return_tensors=None: types.SimpleNamespace(input_ids=torch.tensor([ids]))
'''


def test_hf_snippet(T, work):
    from harness import ROOT
    doc = open(os.path.join(ROOT, "docs", "compare.md"), encoding="utf-8").read()
    at = doc.find("<!-- snippet: hf-llama-dump")
    start = doc.find("```python\n", at) + len("```python\n")
    code = doc[start:doc.find("```", start)]
    if not check(at >= 0 and "register_forward_hook" in code, "docs/compare.md holds the Hugging Face snippet"):
        return
    a, _ = make_model(work, "snip_llama", BASE, seed=8)
    hf = os.path.join(work, "snip_hf")
    rc, _, err = run(T, "export", "--model", a, "--out", hf, "--no-tokenizer")
    check(rc == 0, "export the model as a Hugging Face llama directory", err)
    fake = os.path.join(work, "fake_transformers")
    os.makedirs(fake, exist_ok=True)
    open(os.path.join(fake, "transformers.py"), "w").write(FAKE_TRANSFORMERS)
    os.environ["TLM_REFERENCE"] = os.path.join(ROOT, "tests", "reference")
    os.environ["TLM_FAKE_IDS"] = json.dumps(TOKENS)
    sys.path.insert(0, fake)
    try:
        exec(compile(code.replace('"path/to/llama"', repr(hf)), "docs/compare.md", "exec"), {})
    finally:
        sys.path.remove(fake)
    rc, rep, out, err = compare(T, hf, "ref.npz", "--tol", "1e-4")
    ok = rc == 0 and rep is not None
    check(ok and rep["first_divergence"] is None, "the snippet's .npz matches the HF directory within 1e-4",
          err or str(rep and rep["first_divergence"]))
    if ok:
        L = BASE["num_hidden_layers"]
        check(len(rep["points"]) == 2 + 14 * L + 1 and rep["unknown_keys"] == [],
              "  %d points compared (14 per layer, embedding, final norm, logits), no unknown key" % len(rep["points"]),
              str(len(rep["points"])) + str(rep["unknown_keys"]))
        check(all(n.endswith(("hook_scale", "hook_rot_q", "hook_rot_k", "hook_attn_scores", "hook_pattern"))
                  for n in rep["missing_in_file"]),
              "  only the scales, RoPE outputs, scores and pattern are missing", str(rep["missing_in_file"]))


def test_config_diff(T, work):
    """the config diff comes first: each key whose value differs between A and B (as the engine reads them) with
    both values, and whether it changes the numerics; none for the same config"""
    ids = ["--tokens", ",".join(map(str, TOKENS))]
    a, ap = make_model(work, "cd_a", BASE, seed=8)
    b, _ = make_model(work, "cd_b", dict(BASE, norm_eps=1e-2, rope_theta=500.0, initializer_range=0.05), ap)
    rc, rep, out, err = compare(T, a, b, *ids)
    diff = {d["key"]: d for d in (rep or {}).get("config_diff") or []}
    ok = (rc == 0 and set(diff) == {"norm_eps", "rope_theta", "initializer_range"} and
          diff["norm_eps"]["b"] == 0.01 and diff["rope_theta"]["changes_numerics"] and
          not diff["initializer_range"]["changes_numerics"])
    check(ok, "config diff: the keys that differ, both values, which change the numerics", json.dumps(diff))
    text = out.split("tolerance")[0]
    check("config: 3 keys differ" in text and "rope_theta" in text and "A 10000" in text and "B 500" in text and
          "does not change the logits" in text, "  printed before the points", text)
    rc, rep, out, err = compare(T, a, a, *ids)
    check(rc == 0 and rep["config_diff"] == [] and "config: the same on both sides" in out,
          "config diff: none for the same config", out[:300])


def test_factor_and_one_side(T, work):
    """an exact constant factor at the first divergence is reported as such with the convention that gives it
    (a dropped embedding scale: 1/sqrt(32); an attention scale of 1/sqrt(2) against 1/sqrt(head_dim 8): x2), and
    a point present on one side only is turned into a cause (a dropped QK-norm)"""
    ids = ["--tokens", ",".join(map(str, TOKENS))]
    g, gp = make_model(work, "cf_gemma", GEMMA, seed=11)
    b, _ = make_model(work, "cf_gemma_noscale", dict(GEMMA, embedding_scale=False), gp)
    rc, rep, out, err = compare(T, g, b, *ids)
    fac = (rep or {}).get("constant_factor") or ""
    check(rc == 0 and first(rep) == "hook_embed" and "B = %.6g x A exactly" % (32 ** -0.5) in fac and
          "the embedding scale: A multiplies the token embedding by sqrt(hidden_size) = 5.65685" in fac and
          "constant factor: " in out, "a dropped embedding scale: the factor 1/sqrt(d) and its convention", fac)
    a, ap = make_model(work, "cf_llama", BASE, seed=12)
    b, _ = make_model(work, "cf_llama_scale", dict(BASE, query_pre_attn_scalar=2.0), ap)
    rc, rep, out, err = compare(T, a, b, *ids)
    fac = (rep or {}).get("constant_factor") or ""
    check(rc == 0 and first(rep) == "blocks.0.attn.hook_attn_scores" and "B = 2 x A exactly" in fac and
          "the attention scale" in fac, "a different attention scale: the factor 2 and its convention", fac)
    q, qp = make_model(work, "cf_qk", dict(BASE, qk_norm="head"), seed=13)
    b, _ = make_model(work, "cf_noqk", BASE, {k: v for k, v in qp.items() if "_norm.weight" not in k or "attn." not in k})
    rc, rep, out, err = compare(T, q, b, *ids, "--no-diagnose")
    side = (rep or {}).get("one_side") or ""
    check(rc == 0 and "A computes a QK-norm (q and k normed before RoPE) (blocks.0.attn.hook_q_normed) that B has not"
          in side and "one side only: " in out, "a point on one side only: a dropped QK-norm named as the cause", side)
    rc, rep, out, err = compare(T, a, a, *ids)
    check(rc == 0 and rep.get("constant_factor") is None and rep.get("one_side") is None,
          "no factor and no one-sided cause when they agree", out[-300:])


if __name__ == "__main__":
    sys.exit(main([test_npz_bounded, test_formats, test_errors, test_npz, test_conventions, test_hf_snippet,
                   test_config_diff, test_factor_and_one_side]))
