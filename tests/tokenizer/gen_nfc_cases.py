#!/usr/bin/python3
"""gen_nfc_cases.py — writes data/nfc_cases.json: inputs and their NFC from Python's
unicodedata.normalize (an independent implementation of UAX #15), for test_tokenizer_nfc.c.
Cases: every code point with a canonical decomposition, a sample of Hangul syllables and
jamo sequences, and 1500 random short sequences mixing starters, combining marks (in and
out of canonical order), composites and jamo (fixed seed, so the file is reproducible).

Run: /usr/bin/python3 tests/tokenizer/gen_nfc_cases.py
"""
import json
import os
import random
import unicodedata as ud

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    rng = random.Random(20240601)
    decomposable, marks = [], []
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        d = ud.decomposition(c)
        if d and not d.startswith("<"):
            decomposable.append(c)
        if ud.combining(c):
            marks.append(c)
    cases = [c for c in decomposable]
    cases += [chr(0xAC00 + i) for i in range(0, 11172, 97)]
    jamo = [chr(x) for x in list(range(0x1100, 0x1113)) + list(range(0x1161, 0x1176)) + list(range(0x11A8, 0x11C3))]
    starters = list("aeiouAEIOUnNcCsSzZyY") + ["\u03b1", "\u03c9", "\u0391", "\u0415", "\u0438", "\u0627", "\u0915",
                                                "\u0b47", "\u0bc6", "\u0cc6", "\u0d46", "\u0dd9", "\u1025", "\u1b05"]
    common = [chr(x) for x in range(0x300, 0x370)] + ["\u0b3e", "\u0b57", "\u0bbe", "\u0bd7", "\u0cc2", "\u0cd5",
                                                       "\u0d3e", "\u0d57", "\u0dca", "\u0dcf", "\u102e", "\u1b35"]
    pools = [starters, common, marks, decomposable, jamo, ["\uac00", "\ub098", "\ud7a3"]]
    weights = [5, 6, 2, 3, 3, 1]
    for _ in range(1500):
        n = rng.randint(1, 8)
        s = "".join(rng.choice(rng.choices(pools, weights)[0]) for _ in range(n))
        cases.append(s)
    out = {"generator": "tests/tokenizer/gen_nfc_cases.py", "unicode": ud.unidata_version,
           "cases": [[s, ud.normalize("NFC", s)] for s in cases]}
    with open(os.path.join(HERE, "data", "nfc_cases.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(cases)} cases (Unicode {ud.unidata_version})")


if __name__ == "__main__":
    main()
