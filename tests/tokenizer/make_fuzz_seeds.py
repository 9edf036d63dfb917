#!/usr/bin/python3
"""make_fuzz_seeds.py — writes a small seed corpus for fuzz/fuzz_tokenizer.c (no binaries in
git). Each seed is one format byte (0 = JSON, 1 = llama2.c .bin) followed by the file.

usage: /usr/bin/python3 tests/tokenizer/make_fuzz_seeds.py OUTDIR
"""
import json
import os
import struct
import sys

BYTELEVEL = {
    "added_tokens": [{"id": 6, "content": "<|end|>", "special": True, "lstrip": False, "rstrip": True,
                      "normalized": False, "single_word": False}],
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s+(?!\\S)|\\s+"},
         "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]},
    "post_processor": None,
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "ignore_merges": True, "vocab": None, "merges": [["H", "e"], "l l", ["Ġ", "w"]]},
}


def byte_chars():
    """GPT-2's bytes_to_unicode: printable bytes stand for themselves, the rest get 256, 257, ..."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    n, out = 0, {}
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return out


_vocab = {c: i for i, c in enumerate(byte_chars().values())}
for extra in ["He", "ll", "Ġw"]:
    _vocab[extra] = len(_vocab) + 1  # leaves one id free for the added token
BYTELEVEL["added_tokens"][0]["id"] = 256
BYTELEVEL["model"]["vocab"] = _vocab

SPM = {
    "added_tokens": [{"id": 0, "content": "<unk>", "special": True}, {"id": 1, "content": "<s>", "special": True},
                     {"id": 2, "content": "</s>", "special": True}],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                                                       {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "pre_tokenizer": None,
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                {"Sequence": {"id": "A", "type_id": 0}}],
                       "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
    "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                                                 {"type": "ByteFallback"}, {"type": "Fuse"},
                                                 {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "byte_fallback": True, "fuse_unk": True, "unk_token": "<unk>",
              "vocab": dict([("<unk>", 0), ("<s>", 1), ("</s>", 2)] + [("<0x%02X>" % b, 3 + b) for b in range(256)] +
                            [("▁", 259), ("H", 260), ("i", 261), ("▁H", 262), ("▁Hi", 263)]),
              "merges": ["▁ H", "▁H i"]},
}

METASPACE = dict(SPM, normalizer=None,
                 pre_tokenizer={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True},
                 decoder={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first"})


def llama2c_bin():
    pieces = [(b"<unk>", 0.0), (b"\n<s>\n", 0.0), (b"\n</s>\n", 0.0)]
    pieces += [(b"<0x%02X>" % b, 0.0) for b in range(256)]
    for i, p in enumerate([b" ", b"H", b"e", b"l", b"o", b" H", b"ll", b" Hell", b" Hello", b"\xc3\xa9"]):
        pieces.append((p, -float(i)))
    out = struct.pack("<i", max(len(p) for p, _ in pieces))
    for p, s in pieces:
        out += struct.pack("<fi", s, len(p)) + p
    return out


def main():
    main_to(sys.argv[1])


def main_to(outdir):
    os.makedirs(outdir, exist_ok=True)
    seeds = {
        "bytelevel.json": json.dumps(BYTELEVEL).encode(),
        "spm.json": json.dumps(SPM, ensure_ascii=False).encode(),
        "metaspace.json": json.dumps(METASPACE, ensure_ascii=False).encode(),
        "own_bytes.json": b'{"tinylm_tokenizer": 1, "type": "bytes"}',
        "own_chars.json": b'{"tinylm_tokenizer": 1, "type": "chars", "code_points": [10, 32, 72, 101, 233, 24180]}',
    }
    for name, data in seeds.items():
        open(os.path.join(outdir, name), "wb").write(b"\x00" + data)
    open(os.path.join(outdir, "llama2c.bin"), "wb").write(b"\x01" + llama2c_bin())
    print(f"wrote {len(seeds) + 1} seeds to {outdir}")


if __name__ == "__main__":
    main()
