#!/usr/bin/python3
"""test_cli_tokenize.py — `tinylm tokenize` end to end: for the recorded reference cases
(data/reference_ids_js.json, data/reference_ids_llama2c.json) --text must print the reference
ids and --decode must print the text back; errors must exit non-zero with a message.
--joined (the sanitizer build): per tokenizer, the texts joined by line breaks in one --text run
whose ids --decode must print back as that text, and the empty text alone against its recorded
ids: the same encoder and decoder code on the same texts in 2 processes instead of 2 per text
(each loads its tokenizer files again, instrumented).

usage: test_cli_tokenize.py PATH_TO_TINYLM [--joined]   (tokenizer files from tests/data/ and data/)
"""
import json
import os
import subprocess
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOK = os.path.join(ROOT, "tests", "data", "tokenizers")
TOK512 = os.path.join(ROOT, "data", "tok512.bin")
PATHS = {"gpt2": os.path.join(TOK, "gpt2"), "qwen3": os.path.join(TOK, "qwen3"), "mistral": os.path.join(TOK, "mistral"),
         "llama2_js": os.path.join(TOK, "llama2"), "llama2": os.path.join(TOK, "llama2", "tokenizer.bin"),
         "tok512": TOK512}

# a few of the recorded texts: ASCII, accents, CJK, emoji, whitespace runs, empty
SUBSET = {"Hello world", "café naïve résumé", "年假怎么申请？", "emoji 😀👍🏽 family 👨‍👩‍👧 flag 🇫🇷 done",
          "  multiple   spaces\tand\ttabs\n\nnew lines\r\nend", ""}


def run(exe, *args):
    return subprocess.run([exe, "tokenize", *args], capture_output=True, timeout=60)


def main():
    exe = sys.argv[1]
    joined = sys.argv[2:] == ["--joined"]
    failures = checked = 0
    cases = []
    for name in ("reference_ids_js.json", "reference_ids_llama2c.json"):
        cases += json.load(open(os.path.join(HERE, "data", name), encoding="utf-8"))["cases"]
    cases = [c for c in cases if c["text"] in SUBSET and not (c["tokenizer"] == "mistral" and c["add_bos"])]
    # (every process loads the tokenizer again: a few of the texts; mistral's are checked without BOS)
    if joined:
        for label in sorted({c["tokenizer"] for c in cases}):
            mine = [c for c in cases if c["tokenizer"] == label and c["text"]]
            bos = ["--bos"] if mine[0]["add_bos"] else []
            text = "\n".join(c["text"] for c in mine)
            r = run(exe, "--tokenizer", PATHS[label], "--text", text, *bos)
            ids = r.stdout.decode().split() if r.returncode == 0 else []
            d = run(exe, "--tokenizer", PATHS[label], "--decode", " ".join(ids))
            want = unicodedata.normalize("NFC", text) if label == "qwen3" else text
            checked += 1
            if r.returncode != 0 or len(ids) < len(mine) or d.returncode != 0 or d.stdout != want.encode() + b"\n":
                print(f"FAIL {label}: the {len(mine)} texts joined: rc {r.returncode}, {len(ids)} ids; --decode rc "
                      f"{d.returncode} out {d.stdout[:200]!r} err {r.stderr[-200:]!r} {d.stderr[-200:]!r}")
                failures += 1
        cases = [c for c in cases if not c["text"]]  # and the empty text alone, as below
    for c in cases:
        tok = PATHS[c["tokenizer"]]
        args = ["--tokenizer", tok, "--text", c["text"]] + (["--bos"] if c["add_bos"] else [])
        r = run(exe, *args)
        want = " ".join(str(i) for i in c["ids"]) + "\n"
        checked += 1
        if r.returncode != 0 or r.stdout.decode() != want:
            print(f"FAIL {c['tokenizer']} --text {c['text']!r}: rc {r.returncode} out {r.stdout!r} err {r.stderr!r}")
            failures += 1
            continue
        # decode drops BOS/EOS; qwen3 normalizes to NFC
        ids = [i for i in c["ids"]]
        r = run(exe, "--tokenizer", tok, "--decode", " ".join(map(str, ids)))
        text = unicodedata.normalize("NFC", c["text"]) if c["tokenizer"] == "qwen3" else c["text"]
        special = any(s in c["text"] for s in ("<s>", "</s>", "<|im_end|>", "<|endoftext|>"))
        if r.returncode != 0 or (not special and r.stdout != text.encode() + b"\n"):
            print(f"FAIL {c['tokenizer']} --decode of {c['text']!r}: rc {r.returncode} out {r.stdout!r}")
            failures += 1
    missing = os.path.join(ROOT, "tests", "data", "no_such_tokenizer.bin")
    for args, want in [(["--tokenizer", missing, "--text", "a"], "no_such_tokenizer.bin"),
                       (["--tokenizer", TOK512, "--decode", "1 x"], "--decode"),
                       (["--tokenizer", TOK512, "--decode", "512"], "512"),
                       (["--tokenizer", TOK512], "--text")]:
        r = run(exe, *args)
        checked += 1
        if r.returncode == 0 or want not in r.stderr.decode():
            print(f"FAIL {args}: rc {r.returncode} stderr {r.stderr!r}")
            failures += 1
    print(f"{checked - failures} passed, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
