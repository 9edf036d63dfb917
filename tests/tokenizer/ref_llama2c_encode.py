#!/usr/bin/python3
"""ref_llama2c_encode.py — an independent Python model of llama2.c's run.c `encode()`, used to
produce the reference ids in data/reference_ids_llama2c.json for the C tokenizer's tests.

Written from a description of the algorithm (not from run.c's code):
  1. optional BOS (id 1);
  2. if the text is not empty, the "dummy prefix": the id of the vocabulary entry " ";
  3. the UTF-8 bytes are grouped into code points (a leading byte plus at most 3 continuation
     bytes); a group that is a vocabulary entry becomes that id, otherwise every byte b of the
     group becomes id b + 3 (byte fallback, <0xNN>);
  4. repeatedly: among all adjacent pairs whose concatenated strings are a vocabulary entry
     with score > -1e10, take the one with the highest score (the leftmost on ties) and
     replace the pair by that entry; stop when no pair qualifies.
  5. no EOS (run.c's generate passes eos=0).
It also models run.c's `decode()` (strip the leading space of a piece that follows BOS, and
<0xNN> -> that raw byte) for the stories260K cross-check.

Usage:
  /usr/bin/python3 tests/tokenizer/ref_llama2c_encode.py [--check]   (reads data/tok512.bin and tests/data/)
writes tests/tokenizer/data/reference_ids_llama2c.json and prints the cross-checks; with
--check it writes nothing and fails (exit 1) unless the recorded file holds exactly the ids
this script computes (a ctest runs it that way).
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def read_tokenizer_bin(path):
    """Returns (pieces as bytes, scores as float32 values widened to Python floats)."""
    data = open(path, "rb").read()
    (max_len,) = struct.unpack_from("<i", data, 0)
    off = 4
    pieces, scores = [], []
    while off < len(data):
        score, n = struct.unpack_from("<fi", data, off)
        off += 8
        pieces.append(data[off:off + n])
        scores.append(score)
        off += n
    assert off == len(data), "truncated tokenizer file"
    assert max(len(p) for p in pieces) <= max_len
    return pieces, scores


def utf8_groups(raw):
    """Splits bytes the way run.c walks them: a group starts at any non-continuation byte
    and takes following continuation bytes while the group is shorter than 4 bytes."""
    groups = []
    cur = b""
    for i, b in enumerate(raw):
        if b & 0xC0 != 0x80:
            cur = b""
        cur += bytes([b])
        nxt = raw[i + 1] if i + 1 < len(raw) else 0
        if nxt & 0xC0 == 0x80 and len(cur) < 4:
            continue
        groups.append(cur)
        cur = b""
    return groups


def encode(pieces, scores, text, bos=True):
    index = {p: i for i, p in enumerate(pieces)}
    raw = text.encode("utf-8")
    ids = [1] if bos else []
    if raw:
        ids.append(index[b" "])
    for g in utf8_groups(raw):
        if g in index:
            ids.append(index[g])
        else:
            ids.extend(b + 3 for b in g)
    while True:
        best = None  # (score, position, id)
        for i in range(len(ids) - 1):
            j = index.get(pieces[ids[i]] + pieces[ids[i + 1]])
            if j is None or not scores[j] > -1e10:
                continue
            if best is None or scores[j] > best[0]:
                best = (scores[j], i, j)
        if best is None:
            break
        _, i, j = best
        ids[i:i + 2] = [j]
    return ids


def decode_piece(pieces, prev, tok):
    p = pieces[tok]
    if prev == 1 and p.startswith(b" "):
        p = p[1:]
    if len(p) == 6 and p.startswith(b"<0x") and p.endswith(b">"):
        try:
            return bytes([int(p[3:5], 16)])
        except ValueError:
            pass
    return p


def decode(pieces, ids):
    out, prev = b"", 1
    for t in ids:
        if t != 1:
            out += decode_piece(pieces, prev, t)
        prev = t
    return out


def main():
    check = "--check" in sys.argv[1:]
    root = os.path.dirname(os.path.dirname(HERE))
    strings = json.load(open(os.path.join(HERE, "data", "strings.json"), encoding="utf-8"))
    files = {"tok512": "data/tok512.bin", "llama2": "tests/data/tokenizers/llama2/tokenizer.bin"}
    cases = []
    loaded = {}
    for name, rel in files.items():
        pieces, scores = read_tokenizer_bin(os.path.join(root, rel))
        loaded[name] = (pieces, scores)
        for s in strings:
            ids = encode(pieces, scores, s, bos=True)
            assert decode(pieces, ids) == s.encode("utf-8"), (name, s)
            cases.append({"tokenizer": name, "text": s, "add_bos": True, "ids": ids})

    # Cross-check 1: run.c prints the prompt tokens with decode(); the stories260K outputs
    # must start with the prompt decoded from our ids.
    pieces, scores = loaded["tok512"]
    for prompt, ref in [("The little dog", "stories260K_greedy_littledog.txt"),
                        ("Once upon a time", "stories260K_greedy_once.txt")]:
        ids = encode(pieces, scores, prompt)
        text = decode(pieces, ids)
        head = open(os.path.join(root, "tests", "data", "reference", ref), "rb").read()[:len(text)]
        print(f"stories260K {ref}: prompt ids {ids} decode {text!r} matches output start: {head == text}")
        assert head == text

    # Cross-check 2: against llama-tokenizer-js (Llama 1/2 vocabulary) if its ids were generated.
    js_path = os.path.join(HERE, "data", "reference_ids_js.json")
    if os.path.exists(js_path):
        js = json.load(open(js_path, encoding="utf-8"))
        ours = {c["text"]: c["ids"] for c in cases if c["tokenizer"] == "llama2"}
        same = diff = 0
        for c in js["cases"]:
            if c["tokenizer"] != "llama2_js":
                continue
            if ours[c["text"]] == c["ids"]:
                same += 1
            else:
                diff += 1
                print(f"  differs from llama-tokenizer-js: {c['text']!r}\n    py {ours[c['text']]}\n    js {c['ids']}")
        print(f"llama2 tokenizer.bin vs llama-tokenizer-js: {same} equal, {diff} different")
        assert diff == 0

    path = os.path.join(HERE, "data", "reference_ids_llama2c.json")
    if check:
        recorded = json.load(open(path, encoding="utf-8"))["cases"]
        if recorded != cases:
            print(f"FAIL: {path} differs from the ids computed now")
            sys.exit(1)
        print(f"{len(cases)} recorded cases reproduced")
        return
    out = {"generator": "tests/tokenizer/ref_llama2c_encode.py", "python": sys.version.split()[0],
           "files": files, "cases": cases}
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(out, ensure_ascii=False).replace('{"tokenizer"', '\n{"tokenizer"') + "\n")
    print(f"wrote {len(cases)} cases")


if __name__ == "__main__":
    main()
