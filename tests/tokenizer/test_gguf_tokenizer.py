#!/usr/bin/python3
"""test_gguf_tokenizer.py — the BPE tokenizers a GGUF file carries (tokenizer.ggml.model "gpt2") as
llama.cpp's converters write them, for each pre-tokenizer name tinylm knows:
  - "gpt-2" (GPT-2's encoder.json + vocab.bpe) and "qwen2" (Qwen 3's tokenizer.json: its added
    tokens as CONTROL, the rest NORMAL): every recorded text of data/reference_ids_js.json
    (transformers.js, an independent implementation) gives the recorded ids;
  - "llama-bpe" (Llama 3's regex and ignore_merges), on Qwen 3's vocabulary: the same ids as the
    tokenizer.json tinylm reads with that pre-tokenizer (no Llama 3 tokenizer is in the repo);
  - an unknown pre-tokenizer name is refused, naming the file, the key and the names known.
The GGUF files are written here from the format (tokenizer metadata only, no tensors).
--joined (the sanitizer build): instead of one process per recorded text (each loading a vocabulary
of 50k or 150k pieces, instrumented), the texts joined by line breaks in one process per file, whose
ids must be those of the tokenizer files it was written from (encoder.json + vocab.bpe, the
tokenizer.json), and the empty text alone: the same encoder code on the same texts.

usage: test_gguf_tokenizer.py PATH_TO_TINYLM WORK_DIR [--joined]"""
import json
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOK = os.path.join(ROOT, "tests", "data", "tokenizers")

T_U32, T_I32, T_BOOL, T_STR, T_ARR = 4, 5, 7, 8, 9
NORMAL, CONTROL, USER, UNUSED = 1, 3, 4, 5
LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

failures = 0


def check(ok, what, detail=""):
    global failures
    print("%-78s %s" % (what, "ok" if ok else "FAIL  " + str(detail)[:300]))
    failures += 0 if ok else 1
    return ok


def gguf_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, kvs):
    """kvs: [(key, type, value)]; arrays as (T_ARR, (elem_type, [values]))"""
    out = [b"GGUF", struct.pack("<IQQ", 3, 0, len(kvs))]
    for key, t, v in kvs:
        out.append(gguf_str(key) + struct.pack("<I", t))
        if t == T_ARR:
            et, vals = v
            out.append(struct.pack("<IQ", et, len(vals)))
            if et == T_STR:
                out.extend(gguf_str(x) for x in vals)
            else:
                out.append(struct.pack("<%d%s" % (len(vals), "i" if et == T_I32 else "I"), *vals))
        elif t == T_STR:
            out.append(gguf_str(v))
        elif t == T_BOOL:
            out.append(struct.pack("<B", 1 if v else 0))
        else:
            out.append(struct.pack("<I" if t == T_U32 else "<i", v))
    data = b"".join(out)
    data += b"\0" * (-len(data) % 32)
    with open(path, "wb") as f:
        f.write(data)


def bpe_gguf(path, tokens, types, merges, pre, extra=()):
    write_gguf(path, [("general.architecture", T_STR, "llama"), ("tokenizer.ggml.model", T_STR, "gpt2"),
                      ("tokenizer.ggml.pre", T_STR, pre), ("tokenizer.ggml.tokens", T_ARR, (T_STR, tokens)),
                      ("tokenizer.ggml.token_type", T_ARR, (T_I32, types)),
                      ("tokenizer.ggml.merges", T_ARR, (T_STR, merges)),
                      ("tokenizer.ggml.add_bos_token", T_BOOL, False)] + list(extra))


def from_tokenizer_json(j):
    """tokens, types and merges as llama.cpp's convert_hf_to_gguf lays them out (ids without a
    token filled with [PADn], UNUSED)"""
    vocab = dict(j["model"]["vocab"])
    added = {a["id"]: a for a in j.get("added_tokens", [])}
    n = max(list(vocab.values()) + list(added)) + 1
    tokens, types = ["[PAD%d]" % i for i in range(n)], [UNUSED] * n
    for s, i in vocab.items():
        tokens[i], types[i] = s, NORMAL
    for i, a in added.items():
        tokens[i], types[i] = a["content"], CONTROL if a.get("special") else USER
    merges = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    return tokens, types, merges


def tokenize(tinylm, tok, text):
    p = subprocess.run([tinylm, "tokenize", "--tokenizer", tok, "--text", text], capture_output=True, timeout=120)
    return [int(x) for x in p.stdout.split()] if p.returncode == 0 else ("rc %d: %s" % (p.returncode, p.stderr[-300:]))


def main():
    tinylm, work = sys.argv[1], sys.argv[2]
    joined = sys.argv[3:] == ["--joined"]
    os.makedirs(work, exist_ok=True)
    cases = json.load(open(os.path.join(HERE, "data", "reference_ids_js.json"), encoding="utf-8"))["cases"]

    # GPT-2: encoder.json + vocab.bpe, pre "gpt-2"
    enc = json.load(open(os.path.join(TOK, "gpt2", "encoder.json"), encoding="utf-8"))
    tokens = [None] * (max(enc.values()) + 1)
    for s, i in enc.items():
        tokens[i] = s
    merges = [ln for ln in open(os.path.join(TOK, "gpt2", "vocab.bpe"), encoding="utf-8").read().split("\n")
              if ln and not ln.startswith("#version")]
    gpt2 = os.path.join(work, "gpt2-tokenizer.gguf")
    bpe_gguf(gpt2, tokens, [NORMAL] * len(tokens), merges, "gpt-2")

    # Qwen 3: tokenizer.json, pre "qwen2" (what llama.cpp writes for Qwen 2 and 3)
    qj = json.load(open(os.path.join(TOK, "qwen3", "tokenizer.json"), encoding="utf-8"))
    qtokens, qtypes, qmerges = from_tokenizer_json(qj)
    qwen = os.path.join(work, "qwen3-tokenizer.gguf")
    bpe_gguf(qwen, qtokens, qtypes, qmerges, "qwen2")

    for label, path in (("gpt2", gpt2), ("qwen3", qwen)):
        mine = [c for c in cases if c["tokenizer"] == label and not c["add_bos"]]
        if joined:
            text = "\n".join(c["text"] for c in mine)
            a, b = tokenize(tinylm, path, text), tokenize(tinylm, os.path.join(TOK, label), text)
            check(isinstance(a, list) and a == b and len(a) > 100, "GGUF %s tokenizer: the %d recorded texts joined "
                  "give the ids of the files it was written from (%s ids)" % (label, len(mine), len(a) if
                                                                           isinstance(a, list) else a), (a, b))
            empty = [c for c in mine if c["text"] == ""]
            check(empty and all(tokenize(tinylm, path, c["text"]) == c["ids"] for c in empty),
                  "GGUF %s tokenizer: the empty text gives the recorded ids" % label)
            continue
        bad = []
        for c in mine:
            got = tokenize(tinylm, path, c["text"])
            if got != c["ids"]:
                bad.append((c["text"][:40], got if isinstance(got, str) else got[:12], c["ids"][:12]))
        check(mine and not bad, "GGUF %s tokenizer (pre %s): the %d recorded texts give transformers.js' ids"
              % (label, "gpt-2" if label == "gpt2" else "qwen2", len(mine)), bad[:2])

    # a control token in the text is one id, as tokenizer.json's added tokens are
    im_start = qtokens.index("<|im_start|>")
    got = tokenize(tinylm, qwen, "<|im_start|>user\nhi")
    want = tokenize(tinylm, os.path.join(TOK, "qwen3"), "<|im_start|>user\nhi")
    check(isinstance(got, list) and got == want and got[0] == im_start,
          "a control token in the text is its one id (%d), as with the tokenizer.json" % im_start, (got, want))

    # Llama 3's pre-tokenizer on Qwen 3's vocabulary against the same settings in a tokenizer.json
    lj = dict(qj)
    lj["normalizer"] = None
    lj["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": LLAMA3}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    lj["model"] = dict(qj["model"], ignore_merges=True)
    ldir = os.path.join(work, "llama3-style")
    os.makedirs(ldir, exist_ok=True)
    with open(os.path.join(ldir, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(lj, ensure_ascii=False))  # (json.dump writes piece by piece: seconds slower)
    llama = os.path.join(work, "llama3-style-tokenizer.gguf")
    bpe_gguf(llama, qtokens, qtypes, qmerges, "llama-bpe")
    texts = sorted({c["text"] for c in cases if c["text"]}) + ["prices 1234567 and 12 34", "x" * 40 + " " + "ab" * 30]
    # (one text of them all, a line each: the regex splits at every line break, so each line is
    # tokenized as it would be alone; two runs instead of 52, which the sanitizer build feels)
    joined = "\n".join(texts)
    a, b = tokenize(tinylm, llama, joined), tokenize(tinylm, ldir, joined)
    bad = [] if isinstance(a, list) and a == b and len(a) > 100 else [(a if isinstance(a, str) else len(a), b)]
    # (Qwen's vocabulary has single digits only, so the threes of Llama 3's regex do not show in the ids)
    check(not bad, "GGUF pre llama-bpe = the tokenizer.json with Llama 3's pre-tokenizer on %d texts" % len(texts),
          bad[:2])

    # an unknown pre-tokenizer
    odd = os.path.join(work, "odd-pre.gguf")
    bpe_gguf(odd, tokens[:300], [NORMAL] * 300, [], "made-up")
    p = subprocess.run([tinylm, "tokenize", "--tokenizer", odd, "--text", "x"], capture_output=True, timeout=60)
    err = p.stderr.decode()
    check(p.returncode == 1 and odd in err and "tokenizer.ggml.pre" in err and "made-up" in err and "qwen2" in err,
          "an unknown tokenizer.ggml.pre is refused, naming the file, the key and the names known", err)

    print("%d failed" % failures if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
