"""test_lesson_cli.py — `tinylm lesson` as a learner runs it: the index (every topic in the
lessons' order, its command, what it shows, how long it takes), each topic's --json (every number
agrees with its stated value), --lang zh, usage errors, and `lesson stream --model DIR` on a
Qwen2-shaped checkpoint written here (tests/hf's writer) against the residual stream of the
independent float64 reference (tests/hf/hf_ref.py), read off the inputs of its RMSNorms."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "cli"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "hf"))
from harness import ROOT, STORIES, check, main, run  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import hf_ref  # noqa: E402
import test_hf  # noqa: E402

TOPICS = ["residual", "rms", "rmsnorm-vs-layernorm", "placement", "stream", "qk-norm", "softcap", "init-depth",
          "reading-configs", "15"]
DATA = os.path.join(ROOT, "data", "tinyshakespeare.txt")


def test_index(T, work):
    rc, out, err = run(T, "lesson")
    check(rc == 0, "lesson with no topic prints the index", err)
    pos = [out.find("tinylm lesson %s " % t) for t in TOPICS]
    check(all(p >= 0 for p in pos) and pos == sorted(pos), "the index lists every topic in the lessons' order", out)
    check(out.count(" s)") >= len(TOPICS), "each topic says how long it takes", out)
    rc, out, err = run(T, "lesson", "--json")
    idx = json.loads(out) if rc == 0 else []
    check([e["topic"] for e in idx] == TOPICS, "lesson --json: the topics in order", out[:300])
    check(all(e["command"] == "tinylm lesson " + e["topic"] and e["shows"] and e["takes"] for e in idx),
          "each entry has its command, what it shows and its time")
    rc, out, err = run(T, "lesson", "--lang", "zh")
    check(rc == 0 and "课程" in out, "lesson --lang zh: the index in Chinese", err)


def test_topics(T, work):
    for t in TOPICS:
        args = ["lesson", t, "--json", "--stories", STORIES]
        if t == "placement":
            args += ["--data", DATA, "--quick"]
        rc, out, err = run(T, *args)
        try:
            j = json.loads(out)
        except ValueError:
            j = {"numbers": []}
        nums = j["numbers"]
        check(rc == 0 and nums and all(n["ok"] for n in nums) and j["agree"] == j["total"] == len(nums),
              "lesson %s --json: %d numbers, all agree" % (t, len(nums)),
              err + str([n for n in nums if not n["ok"]]))
        check(all(n["section"].startswith(t + " §") and n["source"] in ("text", "formula") for n in nums),
              "lesson %s: each number labelled with its topic and section, and its source" % t)
    rc, out, err = run(T, "lesson", "softcap", "--lang", "zh")
    check(rc == 0 and "软上限" in out and "[9.6, 22.8, 28.9, 30.0]" in out and "22.85" not in out,
          "lesson softcap --lang zh: Chinese, the text's precision", out[-400:])
    rc, out, err = run(T, "lesson", "15")
    check(rc == 0 and out.startswith("Lesson 15 ") and "22.85" not in out and "[9.6, 22.8, 28.9, 30.0]" in out,
          "lesson 15: as before, soft-caps at the text's precision", out[-400:])


def test_errors(T, work):
    rc, out, err = run(T, "lesson", "nope")
    check(rc == 2 and "nope" in err and "rmsnorm-vs-layernorm" in err, "an unknown topic: usage error listing the topics", err)
    rc, out, err = run(T, "lesson", "rms", "--lang", "fr")
    check(rc == 2 and "--lang" in err, "--lang fr: usage error", err)
    rc, out, err = run(T, "lesson", "rms", "--model", "x")
    check(rc == 2 and "stream" in err, "--model with another topic: usage error", err)
    rc, out, err = run(T, "lesson", "stream", "--model", "x")
    check(rc == 2 and "--prompt" in err, "lesson stream --model without a prompt: usage error", err)
    rc, out, err = run(T, "lesson", "stream", "--stories", os.path.join(work, "absent.bin"))
    check(rc == 1 and "absent.bin" in err, "a missing stories260K: an error naming the file", err)


def reference_stream(cfg, stored, ids):
    """the stream before each block and before the final norm: the inputs of the reference's
    RMSNorms (input_layernorm, post_attention_layernorm of each layer, then the final norm)"""
    seen = []
    orig = hf_ref.rms_norm

    def spy(x, w, eps, one_plus=False):
        seen.append(x.detach().clone())
        return orig(x, w, eps, one_plus)

    hf_ref.rms_norm = spy
    try:
        W = {k: torch.tensor(v, dtype=torch.float64) for k, v in stored.items()}
        hf_ref.FORWARD["qwen2"](cfg, W, ids, set())
    finally:
        hf_ref.rms_norm = orig
    L = cfg["num_hidden_layers"]
    assert len(seen) == 2 * L + 1
    pre = [seen[2 * l] for l in range(L)] + [seen[2 * L]]  # the stream entering block l; the last: after block L-1
    mid = [seen[2 * l + 1] for l in range(L)]
    norm = lambda x: x.norm(dim=-1).numpy()  # noqa: E731
    return ([norm(p) for p in pre], [norm(mid[l] - pre[l]) for l in range(L)],
            [norm(pre[l + 1] - mid[l]) for l in range(L)])


def test_stream_model(T, work):
    cfg = dict(test_hf.BASE, num_hidden_layers=5, num_key_value_heads=2, rope_theta=1e6, rms_norm_eps=1e-6,
               tie_word_embeddings=True, use_sliding_window=False, max_window_layers=5)
    conf = test_hf.hf_config("qwen2", cfg)
    tensors = test_hf.make_weights("qwen2", cfg, 46)
    d = os.path.join(work, "qwen2")
    test_hf.write_model(d, conf, tensors)
    stored = {k: test_hf.stored_values(v, "F32") for k, v in tensors.items()}
    ids = [3, 17, 42, 5, 9, 63, 0, 28]
    rc, out, err = run(T, "lesson", "stream", "--model", d, "--ids", " ".join(map(str, ids)), "--json")
    try:
        s = json.loads(out)["stream"]
    except (ValueError, KeyError):
        s = None
    if not check(rc == 0 and s is not None, "lesson stream --model (a Qwen2 checkpoint) --json", err + out[-300:]):
        return
    norms, attn, ffn = reference_stream(conf, stored, ids)
    L = cfg["num_hidden_layers"]
    ref_last = np.array([n[-1] for n in norms])
    ref_mean = np.array([n.mean() for n in norms])

    def close(a, b):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        return a.shape == b.shape and np.allclose(a, b, rtol=2e-4, atol=1e-5), np.abs(a - b).max() if a.shape == b.shape else a.shape

    for name, got, want in [("stream norm at the last token", s["norm_last_token"], ref_last),
                            ("stream norm, mean over the tokens", s["norm_mean"], ref_mean),
                            ("attention increments", s["attn_increment_last_token"], [a[-1] for a in attn]),
                            ("FFN increments (the last FFN's included)", s["ffn_increment_last_token"], [f[-1] for f in ffn])]:
        ok, detail = close(got, want)
        check(ok and s["layers"] == L, "lesson stream --model: %s = the reference's" % name, detail)
    rc, out, err = run(T, "lesson", "stream", "--model", d, "--ids", " ".join(map(str, ids)))
    check(rc == 0 and "layer 4" in out and "before the last block" in out and "last FFN increment" in out,
          "lesson stream --model: the table, the middle layers, the last two and the last FFN's increment", out[-600:])
    rc, out, err = run(T, "lesson", "stream", "--model", d, "--prompt", "hello")
    check(rc == 1 and d in err and "tokenizer" in err, "--prompt with a checkpoint without a tokenizer: an error naming it", err)
    rc, out, err = run(T, "lesson", "stream", "--model", d, "--ids", "1 99")
    check(rc == 1 and "--ids" in err, "--ids outside the vocabulary: an error", err)


if __name__ == "__main__":
    sys.exit(main([test_index, test_topics, test_errors, test_stream_model]))
