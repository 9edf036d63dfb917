#!/usr/bin/python3
"""test_python_misuse.py — the tinylm Python package used wrongly, from threads, processes and signals.

    test_python_misuse.py --lib build/libtinylm.so --tinylm build/tinylm --work DIR

Each class of misuse is a table of cases, each of which must raise the named exception with a
message naming what was wrong (lifetime and copying, token ids, sampling arguments, hook and
metric misuse, re-entrant calls, context length). Then: one model from several threads and
several models from several threads, every result equal to a serial run's (bit for bit); a
forked child after a 2-thread pass finishes (with a timeout); Ctrl-C during hooked passes
raises KeyboardInterrupt within a second and leaves the model usable; the same seed gives the
same text from `tinylm generate` and from Python (temperature, top-k, top-p); the CLI refuses
sequences past max_position_embeddings at once. Prints "N passed, N failed"; exits 1 on any failure.
(TINYLM_PY=DIR tests the package in DIR instead of python/: how each case was seen failing before its fix.)
"""
import argparse
import copy
import math
import multiprocessing
import os
import pickle
import signal
import struct
import json
import subprocess
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.environ.get("TINYLM_PY") or os.path.join(ROOT, "python"))

CKPT, TOK = os.path.join(ROOT, "data", "stories260K.bin"), os.path.join(ROOT, "data", "tok512.bin")
BIG_TOK = os.path.join(ROOT, "tests", "data", "tokenizers", "llama2", "tokenizer.bin")  # 32000 tokens
DATA = os.path.join(ROOT, "data", "tinyshakespeare.txt")
passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
    print("%-90s %s%s" % (what[:90], "ok" if ok else "FAIL", "" if ok or not detail else "  (%s)" % str(detail)[:300]))
    sys.stdout.flush()
    return ok


def raises(label, fn, exc, words=()):
    """fn() must raise exc with every word of `words` in its message"""
    try:
        fn()
    except exc as e:
        msg = str(e)
        return check(all(w in msg for w in words), label, "message %r lacks %s" % (msg, words))
    except BaseException as e:  # noqa: B902
        return check(False, label, "raised %s: %s" % (type(e).__name__, e))
    return check(False, label, "did not raise")


def poke_first_f32(st, change):
    """rewrites the first value of the first F32 tensor of a .safetensors file as change(value)"""
    with open(st, "r+b") as f:
        hlen = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(hlen))
        name = next(k for k in header if k != "__metadata__" and header[k]["dtype"] == "F32")
        f.seek(8 + hlen + header[name]["data_offsets"][0])
        v = struct.unpack("<f", f.read(4))[0]
        f.seek(8 + hlen + header[name]["data_offsets"][0])
        f.write(struct.pack("<f", change(v)))


def run_cli(*args, timeout=120):
    t0 = time.time()
    p = subprocess.run([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"), time.time() - t0


def llama2c_tensors(path):
    """wq, wk, wv [L, out, in] as a llama2.c .bin stores them (run.c's layout), and the header"""
    raw = np.fromfile(path, dtype=np.float32)
    d, hidden, L, H, KV, V, ctx = (int(x) for x in raw[:7].view(np.int32))
    hd = d // H
    off, out = 7, {}
    for name, shape in (("embed", (abs(V), d)), ("rms_att", (L, d)), ("wq", (L, H * hd, d)), ("wk", (L, KV * hd, d)),
                        ("wv", (L, KV * hd, d))):
        n = int(np.prod(shape))
        out[name] = raw[off:off + n].reshape(shape)
        off += n
    return out, dict(d=d, L=L, H=H, KV=KV, hd=hd)


def surprising_results(tinylm, m, work):
    """issue 44's "silent or surprising results" (1-6) and issue 41's Python findings, as a user calls them"""
    a, b = m.tokenize("Once upon a time"), m.tokenize("Lily went to the park")
    T = min(a.size, b.size)
    # 1. generate with a [B, T] id array: one continuation per row (each what the row alone gives)
    batch = np.stack([b[:T], a[:T]])
    got = m.generate(batch, 8, temperature=0)
    alone = [m.generate(r, 8, temperature=0) for r in batch]
    check(isinstance(got, list) and got == alone, "1. generate([B, T] ids): a list of B continuations, each the row's "
          "alone", "%r vs %r" % (got, alone))
    check(m.generate(batch, 8, temperature=0, return_ids=True)[1].tolist() == m.generate(a[:T], 8, temperature=0,
          return_ids=True).tolist(), "1. generate([B, T] ids, return_ids=True): row 1's ids = its own")
    raises("1. generate([1, 1, T] ids) is refused", lambda: m.generate(batch[None, :1], 3), ValueError, ["shape"])
    # 2. decode / to_str_tokens refuse what is not one sequence
    raises("2. decode([B, T]) is refused (not joined into one text)", lambda: m.decode(batch), ValueError,
           ["shape", "to_string"])
    raises("2. to_str_tokens([B, T]) is refused", lambda: m.to_str_tokens(batch), ValueError, ["shape"])
    raises("2. decode([1, 1, T]) is refused", lambda: m.decode(a[None, None]), ValueError, ["shape"])
    raises("2. to_str_tokens([1, 1, T]) is refused", lambda: m.to_str_tokens(a[None, None]), ValueError, ["shape"])
    check(m.decode(a[None]) == m.decode(a) and m.to_str_tokens(a[None]) == m.to_str_tokens(a),
          "2. decode / to_str_tokens of [1, T] = of its one row")
    check(m.decode(int(a[1])) == m.decode(a[1:2]) and m.decode(np.int32(a[1])) == m.decode(a[1:2]),
          "2. decode of one id (an int) = of [id]")
    # 3. hook.positions: each row's own, in a pass as in generate; the steering idiom on a left-padded batch
    texts = ["Once upon a time, there was", "Lily"]
    ids, mask = m.tokenize_batch(texts, padding_side="left")
    v = np.random.default_rng(0).standard_normal(m.config["hidden_size"]).astype(np.float32)
    seen = []

    def steer(x, hook):
        seen.append(np.array(hook.positions))
        x[..., hook.positions > 0, :] += v

    lb = m.run_with_hooks(ids, fwd_hooks=[("blocks.2.hook_resid_post", steer)], attention_mask=mask)
    worst = 0.0
    for r, t in enumerate(texts):
        one = m.run_with_hooks(m.tokenize(t), fwd_hooks=[("blocks.2.hook_resid_post", steer)])
        worst = max(worst, float(np.abs(lb[r][mask[r]] - one).max()))
    check(worst < 1e-4, "3. steering `x[..., hook.positions > 0, :] += v` on a left-padded batch: each row's logits "
          "= the prompt alone steered (max |diff| %.2e)" % worst)
    expect = np.maximum(np.arange(ids.shape[1])[None] - (~mask).sum(1)[:, None], 0)
    check(seen[0].shape == ids.shape and np.array_equal(seen[0], expect),
          "3. hook.positions in a padded pass: [B, T], each row's own (pads 0)", str(seen[0].tolist()))
    check(np.array_equal(seen[1], np.arange(m.tokenize(texts[0]).size)), "3. hook.positions for one sequence: [T]")
    # 4. a metric returning a one-element array is a scalar metric
    A, Bt = 5, 6
    _, c2 = m.run_with_cache(a[None], names=["hook_embed"], backward=True, metric=(-1, A, Bt))
    try:
        _, c1 = m.run_with_cache(a[None], names=["hook_embed"], backward=True,
                                 metric=lambda lg: lg[..., -1, A] - lg[..., -1, Bt])
        same = np.allclose(c1["hook_embed_grad"], c2["hook_embed_grad"], rtol=1e-5, atol=1e-7)
    except Exception as e:  # noqa: BLE001
        same = e
    check(same is True, "4. metric lg[..., -1, A] - lg[..., -1, B] on [1, T, V] (a one-element array): differentiated "
          "as a scalar", same)
    # 5. bos None without one; a replacement that is not numbers names its hook
    raises("5. a forward hook returning a string names the hook",
           lambda: m.run_with_hooks(a, fwd_hooks=[("blocks.1.hook_resid_post", lambda x, h: "oops")]), TypeError,
           ["blocks.1.hook_resid_post", "str"])
    raises("5. a backward hook returning a string names the hook",
           lambda: m.run_with_hooks(a, bwd_hooks=[("blocks.1.hook_resid_mid", lambda g, h: "oops")]), TypeError,
           ["backward hook blocks.1.hook_resid_mid", "str"])
    check(m.bos == 1 and m.eos == 2, "5. model.bos / eos: the tokenizer's ids")
    try:
        sys.path[:0] = [os.path.join(ROOT, "tests", "reference"), os.path.join(ROOT, "tests", "parity")]
        import tinylm_ref
        from cases import all_cases
        import shutil
        qwen = os.path.join(ROOT, "tests", "data", "tokenizers", "qwen3")
        tj = json.load(open(os.path.join(qwen, "tokenizer.json")))
        _, cfg, opts = next(iter(all_cases()))
        cfg = dict(cfg, vocab_size=len(tj["model"]["vocab"]) + len(tj.get("added_tokens", [])), hidden_size=8,
                   num_attention_heads=2, intermediate_size=8)
        d = os.path.join(work, "no_bos")
        tinylm_ref.save(d, cfg, tinylm_ref.random_params(cfg, seed=1, std=opts["std"]))
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(qwen, f), d)
        with tinylm.load(d) as q:
            check(q.bos is None and q.eos is not None, "5. model.bos is None for a tokenizer without BOS (Qwen3's)",
                  (q.bos, q.eos))
            qi = q.tokenize("Hello world")
            check(q.bos not in qi.tolist() and q.generate("Hello", 3, temperature=0) is not None,
                  "5. tokenize / generate without a BOS")
    except ImportError as e:
        check(False, "5. the reference (tests/reference) for a model without BOS", e)
    # 6. documented: a llama2.c checkpoint's W_Q / W_K in the rotate-half order, hook_normalized with the gain
    P, h = llama2c_tensors(CKPT)
    W = m.weights()
    hd = h["hd"]
    perm = np.concatenate([np.arange(0, hd, 2), np.arange(1, hd, 2)])
    wq = P["wq"].reshape(h["L"], h["H"], hd, h["d"])[:, :, perm].transpose(0, 1, 3, 2)
    wk = P["wk"].reshape(h["L"], h["KV"], hd, h["d"])[:, :, perm].transpose(0, 1, 3, 2)
    wv = P["wv"].reshape(h["L"], h["KV"], hd, h["d"]).transpose(0, 1, 3, 2)
    check(np.array_equal(W["W_Q"], wq) and np.array_equal(W["W_K"], wk) and np.array_equal(W["W_V"], wv),
          "6. llama2.c: W_Q / W_K = the file's wq / wk with each head's dims [0, 2, 4, .., 1, 3, 5, ..]; W_V as stored")
    _, cc = m.run_with_cache(a, names=["blocks.0.hook_resid_pre", "blocks.0.ln1.hook_scale",
                                       "blocks.0.ln1.hook_normalized"])
    x = cc["blocks.0.hook_resid_pre"] / cc["blocks.0.ln1.hook_scale"]
    check(np.allclose(cc["blocks.0.ln1.hook_normalized"], x * P["rms_att"][0], rtol=1e-5, atol=1e-6)
          and not np.allclose(cc["blocks.0.ln1.hook_normalized"], x, rtol=1e-3),
          "6. ln1.hook_normalized includes the gain (TransformerLens': before it)")
    # issue 41, 8: one parameter name as a str; a view kept past edit_weights() cannot change the model
    g = m.param_grads(a, names="embed.weight")
    check(list(g) == ["embed.weight"] and g["embed.weight"].shape == (m.vocab_size, h["d"]),
          "issue 41: param_grads(names='embed.weight') is one name")
    base = m(a)
    with m.edit_weights() as We:
        kept = We["W_out"][0]
        kept[:] = 0
        edited = m(a)
    kept[:] = 3.0  # (after the block)
    check(np.abs(edited - base).max() > 1e-3 and np.array_equal(m(a), base),
          "issue 41: a view taken inside edit_weights() and written after it: the model keeps its restored weights")
    with m.edit_weights():
        raises("edit_weights() inside edit_weights() is refused", lambda: m.edit_weights().__enter__(),
               tinylm.TinylmError, ["nest"])
    check(np.array_equal(m(a), base), "edit_weights: the model as before after a refused nested block")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--tinylm", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.environ["TINYLM_LIB"] = os.path.abspath(args.lib)
    os.makedirs(args.work, exist_ok=True)
    import tinylm
    tinylm.set_threads(1)
    m = tinylm.load(CKPT, tokenizer=TOK)
    ids = m.tokenize("Once upon a time, there was a little girl named Lily.")
    base = m(ids)
    V = m.vocab_size

    # ---- lifetime and copying -----------------------------------------------------------------
    lifetime = [
        ("copy.copy(model) is refused", lambda mm: copy.copy(mm), TypeError, ["cannot be copied"]),
        ("copy.deepcopy(model) is refused", lambda mm: copy.deepcopy(mm), TypeError, ["cannot be copied"]),
        ("pickle.dumps(model) is refused", lambda mm: pickle.dumps(mm), TypeError, ["cannot be copied"]),
        ("model(ids) after close()", lambda mm: (mm.close(), mm(ids)), tinylm.TinylmError, ["closed"]),
        ("run_with_cache after close()", lambda mm: (mm.close(), mm.run_with_cache(ids)), tinylm.TinylmError,
         ["closed"]),
        ("generate after close()", lambda mm: (mm.close(), mm.generate("x", 3)), tinylm.TinylmError, ["closed"]),
        ("tokenize after close()", lambda mm: (mm.close(), mm.tokenize("x")), tinylm.TinylmError, ["closed"]),
        ("model(ids) after model.__del__()", lambda mm: (mm.__del__(), mm(ids)), tinylm.TinylmError, ["closed"]),
        ("model(ids) after leaving `with`", lambda mm: [mm.__enter__(), mm.__exit__(None, None, None), mm(ids)],
         tinylm.TinylmError, ["closed"]),
    ]
    skip = set(os.environ.get("TINYLM_TEST_SKIP", "").split(","))  # (sections that crash an old package)
    for label, fn, exc, words in (lifetime if "lifetime" not in skip else []):
        mm = tinylm.load(CKPT, tokenizer=TOK)
        raises("lifetime: " + label, lambda: fn(mm), exc, words)
        mm.close()
        mm.close()  # (again: nothing)
    if "lifetime" not in skip:
        mm = tinylm.load(CKPT, tokenizer=TOK)
        try:
            del_me = copy.copy(mm)
            del del_me  # (before the fix: both freed the one handle)
        except TypeError:
            pass
        check(np.array_equal(mm(ids), base), "lifetime: the model still runs after a copy was refused")
        with tinylm.load(CKPT, tokenizer=TOK) as mw:
            check(np.array_equal(mw(ids), base), "lifetime: `with tinylm.load(...) as m` runs")
        check(mw.closed, "lifetime: the model is closed after `with`")

    # ---- token ids: refused before any cast ---------------------------------------------------
    bad_ids = [
        ("2**32 + 403", [2 ** 32 + 403], ValueError, ["4294967699", "outside the vocabulary"]),
        ("-1", [5, -1], ValueError, ["-1", "outside the vocabulary"]),
        ("vocab_size", [V], ValueError, [str(V), "outside the vocabulary"]),
        ("1.9 (float)", [1.9, 3.0], TypeError, ["integers", "float64"]),
        ("bools", [True, False], TypeError, ["integers", "bool"]),
        ("numeric strings (an array of str)", np.array(["1", "2"]), TypeError, ["integers"]),
        ("an empty list", [], ValueError, ["empty"]),
        ("a 3-d array", np.ones((1, 1, 2), np.int32), ValueError, ["shape"]),
    ]
    entries = [
        ("model(ids)", lambda x: m(x)),
        ("loss", lambda x: m.loss(x)),
        ("run_with_cache", lambda x: m.run_with_cache(x, names=["hook_embed"])),
        ("run_with_hooks", lambda x: m.run_with_hooks(x, fwd_hooks=[("hook_embed", lambda a, h: None)])),
        ("generate(ids)", lambda x: m.generate(x, 2)),
    ]
    for label, x, exc, words in bad_ids:
        for ename, fn in entries:
            raises("ids %s: %s refuses" % (label, ename), lambda: fn(x), exc, words)
    check(np.array_equal(m(["1", "2"]), m(m.tokenize_batch(["1", "2"])[0])),
          "ids: a list of str is a list of texts (TransformerLens' idiom), not ids")
    for label, x, exc, words in [("600", [600], ValueError, ["600", "outside the vocabulary"]),
                                 ("2**32 + 403", [2 ** 32 + 403], ValueError, ["outside the vocabulary"]),
                                 ("1.9", [1.9], TypeError, ["integers"])]:
        raises("decode(%s) refuses" % label, lambda: m.decode(x), exc, words)
        raises("to_str_tokens(%s) refuses" % label, lambda: m.to_str_tokens(x), exc, words)
    check(m.decode([]) == "", "decode([]) is ''")

    # ---- sampling and other arguments ----------------------------------------------------------
    bad_args = [
        ("top_k=-3", dict(top_k=-3), ["top_k"]), ("top_k=1.5", dict(top_k=1.5), ["top_k"]),
        ("top_k=True", dict(top_k=True), ["top_k"]), ("top_p=2", dict(top_p=2), ["top_p"]),
        ("top_p=NaN", dict(top_p=float("nan")), ["top_p"]), ("top_p=-0.1", dict(top_p=-0.1), ["top_p"]),
        ("temperature=-1", dict(temperature=-1), ["temperature"]),
        ("temperature=NaN", dict(temperature=float("nan")), ["temperature"]),
        ("temperature=inf", dict(temperature=float("inf")), ["temperature"]),
        ("n=0", dict(n=0), ["n = 0"]), ("n=2.5", dict(n=2.5), ["n = 2.5"]),
        ("seed=2**64", dict(seed=2 ** 64), ["seed"]), ("seed=1.5", dict(seed=1.5), ["seed"]),
    ]
    for label, kw, words in bad_args:
        kw = dict(kw)
        n = kw.pop("n", 3)
        raises("generate(%s) refuses" % label, lambda: m.generate("Once", n, **kw), ValueError, words)
    for n in (0, -1, 1025, 2 ** 31 - 1, 1.5, True):
        raises("set_threads(%r) refuses" % (n,), lambda: tinylm.set_threads(n), ValueError, ["1..1024"])
    tinylm.set_threads(1)

    # ---- hooks, metrics, loss -------------------------------------------------------------------
    def inplace(a, h):
        a *= 2

    misuse = [
        ("loss of one token", lambda: m.loss(ids[:1]), ValueError, ["at least 2 tokens"]),
        ("run_with_cache(backward=True) on one token", lambda: m.run_with_cache(ids[:1], backward=True),
         ValueError, ["at least 2 tokens"]),
        ("a metric returning None", lambda: m.run_with_cache(ids, backward=True, metric=lambda lg: None),
         TypeError, ["returned None"]),
        ("a metric returning a scalar", lambda: m.run_with_cache(
            ids, backward=True, metric=lambda lg: float(lg[-1, 3] - lg[-1, 4])), TypeError, ["scalar"]),
        ("a metric tuple outside the logits", lambda: m.run_with_cache(ids, backward=True, metric=(0, V, 1)),
         ValueError, ["outside the logits"]),
        ("metric= without backward=True", lambda: m.run_with_cache(ids, metric=(0, 1, 2)), ValueError,
         ["backward=True"]),
        ("in-place write to ln1.hook_scale (read-only)",
         lambda: m.run_with_hooks(ids, fwd_hooks=[("blocks.0.ln1.hook_scale", inplace)]), ValueError, ["read-only"]),
        ("in-place write to hook_attn_scores (read-only)",
         lambda: m.run_with_hooks(ids, fwd_hooks=[("blocks.0.attn.hook_attn_scores", inplace)]), ValueError,
         ["read-only"]),
        ("a fwd_hooks entry that is not (name, fn)", lambda: m.run_with_hooks(ids, fwd_hooks=["hook_embed"]),
         TypeError, ["fwd_hooks"]),
        ("a tokenizer with more tokens than the model (32000 > 512)", lambda: tinylm.load(CKPT, tokenizer=BIG_TOK),
         tinylm.TinylmError, ["32000", "512"]),
    ]
    for label, fn, exc, words in misuse:
        raises("misuse: " + label, fn, exc, words)
    check(np.array_equal(m(ids), base), "misuse: the model runs as before after every refused call")
    same = m.run_with_hooks(ids, fwd_hooks=[(lambda n: n.endswith("hook_pattern"), lambda a, h: a.copy())])
    check(np.array_equal(same, base), "hook_pattern rewritten with itself (every layer): bit-identical logits")
    # an error message names each prefix once
    try:
        m(np.zeros(m.max_positions + 1, np.int32))
        check(False, "context: model(ids) past max_position_embeddings raises")
    except tinylm.TinylmError as e:
        check("max_position_embeddings" in str(e) and str(e).count("forward:") == 1,
              "context: model(ids) past max_position_embeddings raises, 'forward:' once", str(e))
    raises("context: generate refuses a prompt + n past max_position_embeddings (no silent truncation)",
           lambda: m.generate(np.ones(m.max_positions - 4, np.int32), 10), ValueError, ["max_position_embeddings"])
    raises("context: run_with_cache past max_position_embeddings",
           lambda: m.run_with_cache(np.zeros(m.max_positions + 1, np.int32), names=["hook_embed"]),
           tinylm.TinylmError, ["max_position_embeddings"])
    # weights holding NaN: the message says what Python takes
    nan_dir = os.path.join(args.work, "nan_model")
    rc, out, err, _ = run_cli(args.tinylm, "export", "--model", CKPT, "--out", nan_dir, "--no-tokenizer")
    if check(rc == 0, "export a tinylm checkpoint (for a NaN weight)", err[-300:]):
        poke_first_f32(os.path.join(nan_dir, "model.safetensors"), lambda v: float("nan"))
        try:
            tinylm.load(nan_dir)
            check(False, "NaN weights: load refuses")
        except tinylm.TinylmError as e:
            check("allow_nonfinite=True" in str(e) and "--allow-nonfinite" not in str(e),
                  "NaN weights: load refuses, naming allow_nonfinite=True (not the CLI's option)", str(e))
        try:
            with tinylm.load(nan_dir, allow_nonfinite=True) as mn:
                check(mn.vocab_size == V, "NaN weights: load(..., allow_nonfinite=True) loads")
        except tinylm.TinylmError as e:
            check(False, "NaN weights: load(..., allow_nonfinite=True) loads", str(e))

    surprising_results(tinylm, m, args.work)

    # ---- re-entrant calls from a hook ---------------------------------------------------------------
    other = m.tokenize("The dog ran.")
    other_model = tinylm.load(CKPT, tokenizer=TOK)
    reentrant = [
        ("model(other)", lambda: m(other)), ("run_with_cache(other)", lambda: m.run_with_cache(other)),
        ("loss(other)", lambda: m.loss(other)), ("generate", lambda: m.generate("Once", 2)),
        ("close()", lambda: m.close()),
    ]
    for label, inner in reentrant:
        def hook(a, h):
            inner()
        raises("re-entrant %s inside a hook of the same model is refused" % label,
               lambda: m.run_with_hooks(ids, fwd_hooks=[("blocks.1.hook_resid_post", hook)]), tinylm.TinylmError,
               ["inside a hook"])
    check(np.array_equal(m(ids), base), "re-entrant: the model runs as before afterwards")
    got = {}

    def hook_other(a, h):
        got["x"] = other_model(other)
    outer = m.run_with_hooks(ids, fwd_hooks=[("blocks.1.hook_resid_post", hook_other)])
    check(np.array_equal(outer, base) and np.array_equal(got.get("x"), m(other)),
          "another model called inside a hook: both results right")
    other_model.close()

    # ---- threads ---------------------------------------------------------------------------------------
    texts = ["Once upon a time", "The little dog", "Lily wanted to play outside with her friends.", "Tom",
             "One day, a big cat sat on the mat and looked at the bird."]
    inputs = [m.tokenize(t) for t in texts] + [m.tokenize(texts[2])[:7]] * 2  # (equal lengths too)
    names = ["blocks.0.attn.hook_pattern", "blocks.3.hook_resid_post"]
    serial = [m(x) for x in inputs]
    serial_cache = [m.run_with_cache(x, names=names)[1] for x in inputs]

    def worker(model, k, out, reps):
        try:
            for r in range(reps):
                i = (k + r) % len(inputs)
                if r % 3 == 2:
                    c = model.run_with_cache(inputs[i], names=names)[1]
                    ok = all(np.array_equal(c[n], serial_cache[i][n]) for n in names)
                else:
                    ok = np.array_equal(model(inputs[i]), serial[i])
                out.append(ok)
        except BaseException as e:  # noqa: B902
            out.append(e)

    def run_threads(models, per_model, reps):
        outs, ts = [], []
        for mi, model in enumerate(models):
            for k in range(per_model):
                o = []
                outs.append(o)
                ts.append(threading.Thread(target=worker, args=(model, mi * per_model + k, o, reps)))
        for t in ts:
            t.start()
        for t in ts:
            t.join(300)
        flat = [x for o in outs for x in o]
        errs = [x for x in flat if not isinstance(x, bool)]
        return sum(1 for x in flat if x is True), len(flat), errs

    good, total, errs = run_threads([m], 4, 30) if "threads" not in skip else (0, 0, ["skipped"])
    check(total == 120 and good == total and not errs, "threads: one model from 4 threads, 120 calls = serial",
          "%d of %d; %s" % (good, total, errs[:2]))
    models = [tinylm.load(CKPT, tokenizer=TOK) for _ in range(3)]
    good, total, errs = run_threads(models, 2, 15)
    check(total == 90 and good == total and not errs, "threads: 3 models x 2 threads each, 90 calls = serial",
          "%d of %d; %s" % (good, total, errs[:2]))
    for mm in models:
        mm.close()

    # ---- fork -----------------------------------------------------------------------------------------
    tinylm.set_threads(2)
    long_ids = m.tokenize(" ".join(texts) * 3)[: m.max_positions]
    parent = m(long_ids)
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()

    def child(qq):
        qq.put(m(long_ids))
    p = ctx.Process(target=child, args=(q,))
    p.start()
    try:
        res = q.get(timeout=120)
    except Exception as e:  # noqa: BLE001
        res = e
    p.join(10)
    hung = p.is_alive()
    if hung:
        p.kill()
    check(not hung and isinstance(res, np.ndarray) and np.allclose(res, parent, rtol=1e-4, atol=1e-4),
          "fork: a child forked after a 2-thread pass runs the model (within 120 s) = the parent's logits",
          "hung" if hung else repr(res)[:200])
    tinylm.set_threads(1)

    # ---- Ctrl-C during hooked passes ----------------------------------------------------------------
    def interrupted_after(delay, names_sel):
        """runs hooked passes for up to 4 s; SIGINT after `delay`: seconds from the signal to the
        KeyboardInterrupt (None: none came), and whether every completed cache was whole"""
        sent = []

        def fire():
            sent.append(time.time())
            os.kill(os.getpid(), signal.SIGINT)
        timer = threading.Timer(delay, fire)
        whole = True
        t_end = time.time() + 4.0
        timer.start()
        try:
            while time.time() < t_end:
                _, c = m.run_with_cache(long_ids, names=names_sel)
                whole = whole and len(c) == len(m._resolve(names_sel))
        except KeyboardInterrupt:
            return time.time() - sent[0] if sent else 0.0, whole
        except Exception as e:  # noqa: BLE001 (before the fix: "hook ...: the callback failed")
            print("  interrupted pass raised %s: %s" % (type(e).__name__, e))
            return None, whole
        finally:
            timer.cancel()
        return None, whole

    lat = []
    for k in range(6):
        dt, whole = interrupted_after(0.2 + 0.05 * k, None if k % 2 else ["blocks.0.hook_resid_pre"])
        lat.append(dt)
        if not whole:
            check(False, "Ctrl-C: a cache missing a point was returned")
    check(all(d is not None and d < 1.0 for d in lat), "Ctrl-C: 6 interrupts of hooked passes each raise "
          "KeyboardInterrupt within 1 s", ["%.3f" % d if d is not None else "none" for d in lat])
    check(np.array_equal(m(ids), base) and len(m.run_with_cache(ids)[1]) == len(m._resolve(None)),
          "Ctrl-C: the model is usable afterwards (same logits, a whole cache)")

    # ---- signals while the products run ------------------------------------------------------------
    # (oneDNN 2.6's JIT sgemm points rsp at the heap: a handler run there wrote its frame over the
    # heap, and this process aborted a little later, "corrupted size vs. prev_size"; util/signals.h)
    signal.signal(signal.SIGUSR1, lambda s, f: None)
    done = threading.Event()
    sent = [0]

    def pester():
        while not done.is_set():
            os.kill(os.getpid(), signal.SIGUSR1)
            sent[0] += 1
            time.sleep(0.002)
    tinylm.set_threads(2)
    pt = threading.Thread(target=pester)
    pt.start()
    same, passes, t_end = True, 0, time.time() + 3.0
    try:
        while time.time() < t_end:
            same = same and np.allclose(m(long_ids), parent, rtol=1e-5, atol=1e-5)
            passes += 1
    finally:
        done.set()
        pt.join()
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        tinylm.set_threads(1)
    check(same and passes > 10 and sent[0] > 100, "signals: %d passes on 2 threads while %d signals arrived, "
          "each the same logits, and the process lives on" % (passes, sent[0]))

    # ---- generate: the CLI's sampler and stopping -------------------------------------------------------
    prompt = "Once upon a time"
    settings = [dict(temperature=0.0, seed=1), dict(temperature=0.8, seed=5), dict(temperature=1.0, seed=42),
                dict(temperature=0.9, top_k=20, seed=7), dict(temperature=1.0, top_p=0.9, seed=11),
                dict(temperature=0.7, top_k=40, top_p=0.8, seed=-3), dict(temperature=1.2, seed=2 ** 64 - 1)]
    for s in settings:
        cli = [args.tinylm, "generate", "--model", CKPT, "--tokenizer", TOK, "--prompt", prompt, "-n", 120,
               "--temperature", s["temperature"], "--seed", s["seed"]]
        if "top_k" in s:
            cli += ["--top-k", s["top_k"]]
        if "top_p" in s:
            cli += ["--top-p", s["top_p"]]
        rc, out, err, _ = run_cli(*cli)
        py = m.generate(prompt, 120, **s)
        gen_ids = m.generate(prompt, 120, return_ids=True, **s)
        check(rc == 0 and out == prompt + py + "\n", "generate %s: Python's text = `tinylm generate`'s" % s,
              "cli %r / py %r" % (out[-80:], py[-80:]))
        check(m.bos not in gen_ids and m.eos not in gen_ids, "generate %s: no BOS/EOS in what is returned" % s)
        streamed = list(m.generate(prompt, 120, stream=True, **s))
        check("".join(streamed) == py and len(streamed) >= len(gen_ids) - 4,
              "generate %s, stream=True: the pieces, one a token, join to `tinylm generate`'s text" % s,
              "%r vs %r" % ("".join(streamed)[-60:], py[-60:]))
        # hooks through the KV cache (the prompt's pass, then one position a step): a no-op hook at every
        # kind of point gives the CLI's tokens
        noop = [(n, lambda a, h: None) for n in ("hook_embed", "blocks.1.attn.hook_k", "blocks.3.mlp.hook_post",
                                                 "ln_final.hook_normalized")]
        hooked = m.generate(prompt, 120, fwd_hooks=noop, return_ids=True, **s)
        check(np.array_equal(hooked, gen_ids), "generate %s with no-op hooks, through the KV cache = `tinylm "
              "generate`'s tokens" % s, "%s vs %s" % (hooked[:12], gen_ids[:12]))
        if s["temperature"] == 0.0:
            hooked = m.generate(prompt, 120, fwd_hooks=[("hook_embed", lambda a, h: None)], use_kv_cache=False, **s)
            check(hooked == py, "generate greedy with a no-op hook, recomputing (use_kv_cache=False) = the CLI's text")
    # views: the page writer through tlm_report_html (also under ASan here); misuse raises
    ids = m.tokenize("Once upon a <b>time</b>")
    _, vc = m.run_with_cache(ids, names=lambda n: "pattern" in n)
    page = vc.view_attention(layers=[0, -1]).html()
    check(page.startswith("<!DOCTYPE html>") and page.count("</script>") == 2 and "<b>time" not in page,
          "views: a cache's patterns as the report page (tokens only inside the escaped data blob)")
    frame = tinylm.views.positions(np.arange(3.0), labels="x")._repr_html_()
    check(frame.startswith('<iframe class="tinylm-view" sandbox="allow-scripts"') and "<script" not in frame,
          "views: _repr_html_ is one sandboxed iframe whose page is an escaped attribute")
    bad_view = tinylm.views.View({"kind": "inspect"}, "t")
    raises("views: the library refuses a page of another kind", bad_view.html, tinylm.TinylmError, ["pattern"])
    raises("views: a NaN in the data is refused before the library sees it",
           tinylm.views.View({"kind": "pattern", "x": float("nan")}, "t").html, ValueError, [])
    for label, fn, exc in [("a 5-d pattern", lambda: tinylm.views.attention(np.zeros((1, 1, 1, 2, 2))), ValueError),
                           ("a non-square pattern", lambda: tinylm.views.attention(np.zeros((2, 3, 4))), ValueError),
                           ("tokens not strings", lambda: tinylm.views.positions(np.zeros(2), tokens=[1, 2]), TypeError),
                           ("a string as values", lambda: tinylm.views.positions("abc"), TypeError),
                           ("layer out of range", lambda: vc.view_attention(layers=[9]), KeyError)]:
        raises("views: %s raises %s" % (label, exc.__name__), fn, exc)
    # hooks at every step through the KV cache compute what recomputing the whole sequence computes
    _, c = m.run_with_cache(m.tokenize("Once upon a time, there was a little boy"), names=["blocks.3.hook_resid_post"])
    vec = 0.5 * c["blocks.3.hook_resid_post"][-1]
    seen = []

    def steer(a, h):
        seen.append((a.shape[0], int(h.positions[0]), int(h.positions[-1])))
        a[..., h.positions > 0, :] += vec

    def ablate(z, h):
        z[:, 2, :] = 0  # head 2 of layer 1, at every position
    for s in settings[:4]:
        hooks = [("blocks.3.hook_resid_post", steer), ("blocks.1.attn.hook_z", ablate)]
        seen.clear()
        kv = m.generate(prompt, 60, fwd_hooks=hooks, return_ids=True, stop_at_eos=False, **s)
        steps = list(seen)
        full = m.generate(prompt, 60, fwd_hooks=hooks, return_ids=True, stop_at_eos=False, use_kv_cache=False, **s)
        plain = m.generate(prompt, 60, return_ids=True, stop_at_eos=False, **s)
        P = len(m.tokenize(prompt))
        check(np.array_equal(kv, full) and not np.array_equal(kv, plain),
              "generate %s: steering + a head ablated through the KV cache = recomputing every step (and != plain)" % s,
              "%s / %s" % (kv[:10], full[:10]))
        check(steps[0] == (P, 0, P - 1) and steps[1:] == [(1, P + i, P + i) for i in range(len(steps) - 1)]
              and len(steps) == 60, "generate %s: the hook saw the prompt's %d positions, then one new position a step"
              % (s, P), str(steps[:3]))
    got = list(m.generate(["Once upon a time", "The little dog"], 20, temperature=0.8, seed=4, stream=True))
    each = [m.generate(p, 20, temperature=0.8, seed=4) for p in ("Once upon a time", "The little dog")]
    check(["".join(t for i, t in got if i == k) for k in (0, 1)] == each and [i for i, _ in got] == sorted(i for i, _ in got),
          "generate of 2 prompts, stream=True: (index, piece), prompt after prompt, each = its own generate")
    raises("generate with a pattern hook through the KV cache names use_kv_cache=False",
           lambda: m.generate(prompt, 5, fwd_hooks=[("blocks.0.attn.hook_pattern", lambda a, h: None)]),
           ValueError, ["use_kv_cache=False"])
    raises("generate(stream='yes') refused", lambda: m.generate(prompt, 5, stream="yes"), TypeError, ["stream"])

    def boom(a, h):
        if h.positions[0] > len(m.tokenize(prompt)) + 2:
            raise RuntimeError("boom at step")
    it = m.generate(prompt, 20, fwd_hooks=[("hook_embed", boom)], stream=True, temperature=0)
    raises("a hook raising in the 4th step of a streamed generate reaches the caller",
           lambda: list(it), RuntimeError, ["boom at step"])
    check(m.generate(prompt, 5, temperature=0) == m.generate(prompt, 5, temperature=0, stream=False),
          "the model is usable after a hook raised mid-generation")
    half = m.generate(prompt, 30, temperature=0, stream=True)
    first = [next(half) for _ in range(3)]
    mid = m(m.tokenize("The dog"))  # another call between two steps of a stream
    rest = list(half)
    check("".join(first + rest) == m.generate(prompt, 30, temperature=0) and mid.shape[0] == len(m.tokenize("The dog")),
          "a streamed generate goes on unchanged after another call on the model between its steps")
    # a long sample stops at the first BOS/EOS, as the CLI does
    long_py = m.generate(prompt, 480, temperature=1.0, seed=0, return_ids=True)
    rc, out, err, _ = run_cli(args.tinylm, "generate", "--model", CKPT, "--tokenizer", TOK, "--prompt", prompt,
                              "-n", 480, "--temperature", 1.0, "--seed", 0)
    check(len(long_py) < 480 and rc == 0 and out == prompt + m.decode(long_py) + "\n",
          "generate (seed 0) stops at the story's end (BOS/EOS) where `tinylm generate` does", len(long_py))

    # ---- the CLI: one context rule, refused before long work ---------------------------------------------
    too_long = " ".join(["1"] * (m.max_positions + 88))
    npy = os.path.join(args.work, "x.npy")
    cli_cases = [
        ("logits --ids (600 tokens)", ["logits", "--model", CKPT, "--tokenizer", TOK, "--ids", too_long, "--out", npy]),
        ("inspect --ids (600 tokens)", ["inspect", "--model", CKPT, "--tokenizer", TOK, "--ids", too_long]),
        ("inspect --grad --seq 2000", ["inspect", "--grad", "--model", CKPT, "--tokenizer", TOK, "--data", DATA,
                                       "--seq", "2000"]),
        ("lens train --seq 5000", ["lens", "train", "--model", CKPT, "--tokenizer", TOK, "--data", DATA,
                                   "--seq", "5000", "--out", os.path.join(args.work, "l.lens")]),
    ]
    for label, a in cli_cases:
        rc, out, err, dt = run_cli(args.tinylm, *a, timeout=60)
        check(rc in (1, 2) and "max_position_embeddings" in err and dt < 20,
              "CLI %s: exit 1/2 naming max_position_embeddings, in %.1f s" % (label, dt), "rc %d: %s" % (rc, err[-200:]))
    # ---- a tuned lens fits only the model it was trained on (not another of the same shape) ---------
    lens = os.path.join(args.work, "stories.lens")
    rc, out, err, _ = run_cli(args.tinylm, "lens", "train", "--model", CKPT, "--tokenizer", TOK, "--data", DATA,
                              "--steps", 3, "--batch", 2, "--seq", 16, "--eval-batches", 1, "--max-chars", 20000,
                              "--out", lens)
    if check(rc == 0, "lens train (3 steps) on stories260K", err[-300:]):
        other_dir = os.path.join(args.work, "other_model")  # the same shape, one weight changed
        rc, out, err, _ = run_cli(args.tinylm, "export", "--model", CKPT, "--out", other_dir, "--no-tokenizer")
        poke_first_f32(os.path.join(other_dir, "model.safetensors"), lambda v: v + 0.5)
        insp = ["inspect", "--tokenizer", TOK, "--prompt", "Once upon a time", "--lens", "tuned", "--lens-file", lens]
        rc, out, err, _ = run_cli(args.tinylm, *insp, "--model", CKPT)
        check(rc == 0, "inspect --lens tuned with the lens's own model runs", err[-300:])
        rc, out, err, _ = run_cli(args.tinylm, *insp, "--model", other_dir)
        check(rc == 1 and "another model" in err, "inspect --lens tuned refuses the lens of another model of the "
              "same shape (exit 1)", "rc %d: %s" % (rc, err[-300:]))
    m.close()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
