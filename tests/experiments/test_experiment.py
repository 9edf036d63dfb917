#!/usr/bin/env python3
"""test_experiment.py NAME --tinylm PROG --work DIR — runs `experiments/run.py NAME --quick` and checks:
- it exits 0 and prints a verdict line;
- result.json has exactly the experiment schema (kind, name, title, claim, command, verdict
  {supported: true|false|null, text}, tables [{title, columns, rows}] with every row as long as
  its columns, figures [{title, svg}], notes [str]) and is strict JSON (no NaN);
- README.md holds the claim, a Markdown table and the verdict;
- every figure is well-formed SVG that rsvg-convert renders to a PNG that is not blank;
- the experiment's own check(result) (robust qualitative outcomes: a sign, an order of
  magnitude, a trend; never a measured number) passes.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "experiments"))

FAILS = []


def check(cond, what):
    print("%s %s" % ("ok  " if cond else "FAIL", what))
    if not cond:
        FAILS.append(what)
    return cond


def png_inked_fraction(path):
    """fraction of non-white pixels of an 8-bit RGB/RGBA PNG (rsvg-convert's output)"""
    with open(path, "rb") as f:
        data = f.read()
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            ch = {2: 3, 6: 4}[ctype]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    import numpy as np
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, w * ch + 1)
    # undo the PNG filters row by row: None and Up at once, Sub as a running sum (mod 256) per channel,
    # Average and Paeth (each byte depends on the one just decoded) on Python ints, many times faster
    # one byte at a time than NumPy's scalars (seconds a figure)
    stride, prev, rows = w * ch, np.zeros(w * ch, np.int32), []
    for y in range(h):
        ft, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if ft == 0:
            out = line
        elif ft == 2:
            out = (line + prev) & 255
        elif ft == 1:
            out = np.cumsum(line.reshape(w, ch), axis=0).reshape(-1) & 255
        else:  # (ch zeros in front: the bytes left of the first pixel)
            out, up = [0] * ch + line.tolist(), [0] * ch + prev.tolist()
            for x in range(ch, stride + ch):
                a, b, c = out[x - ch], up[x], up[x - ch]
                if ft == 3:
                    out[x] = (out[x] + ((a + b) >> 1)) & 255
                    continue
                # Paeth: p = a + b - c, then |p - a| = |b - c|, |p - b| = |a - c|, |p - c| = |b - c + a - c|
                pa, pb = b - c, a - c
                pc = abs(pa + pb)
                pa, pb = abs(pa), abs(pb)
                out[x] = (out[x] + (a if pa <= pb and pa <= pc else (b if pb <= pc else c))) & 255
            out = np.array(out[ch:], np.int32)
        rows.append(out)
        prev = out
    img = np.array(rows).reshape(h, w, ch)
    rgb = img[..., :3]
    if ch == 4:
        a = img[..., 3:4]
        rgb = (rgb * a + 255 * (255 - a)) // 255
    return w, h, float((rgb.sum(-1) < 600).mean()), len(np.unique(rgb.reshape(-1, 3), axis=0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("--tinylm", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--cache", help="trained-model cache shared by the experiment tests (default WORK/models)")
    args = ap.parse_args()
    out = os.path.join(args.work, "out")
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(args.work, exist_ok=True)
    cmd = [sys.executable, os.path.join(REPO, "experiments", "run.py"), args.name, "--quick", "--out", out,
           "--tinylm", args.tinylm, "--cache", args.cache or os.path.join(args.work, "models"), "--threads", "2", "--silent"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    print(p.stdout)
    if not check(p.returncode == 0, "run.py %s --quick exits 0" % args.name):
        print(p.stderr[-3000:])
        return 1
    check("verdict:" in p.stdout, "a verdict is printed")
    with open(os.path.join(out, "result.json")) as f:
        text = f.read()
    res = json.loads(text, parse_constant=lambda c: FAILS.append("non-standard JSON constant " + c))
    check(sorted(set(res) - {"terms"}) == sorted(["kind", "name", "title", "claim", "command", "verdict", "tables",
                                                  "figures", "notes"]), "result.json has exactly the schema's keys")
    check("terms" not in res or (isinstance(res["terms"], str) and res["terms"] and "*In the lessons' terms.*" in
                                 open(os.path.join(out, "README.md"), encoding="utf-8").read()),
          "the lessons' terms (optional) are a string, shown in README.md")
    check(res["kind"] == "experiment" and res["name"] == args.name, "kind and name")
    check(all(isinstance(res[k], str) and res[k] for k in ("title", "claim", "command")), "title, claim, command")
    v = res["verdict"]
    check(sorted(v) == ["supported", "text"] and v["supported"] in (True, False, None) and isinstance(v["text"], str),
          "verdict {supported, text}")
    check(isinstance(res["tables"], list) and res["tables"], "at least one table")
    for t in res["tables"]:
        check(sorted(t) == ["columns", "rows", "title"] and t["rows"] and
              all(len(r) == len(t["columns"]) for r in t["rows"]) and
              all(isinstance(c, (int, float, str, bool)) or c is None for r in t["rows"] for c in r),
              "table %r well-formed (%d rows)" % (t.get("title", "")[:50], len(t.get("rows", []))))
    check(isinstance(res["notes"], list) and all(isinstance(n, str) for n in res["notes"]), "notes are strings")
    with open(os.path.join(out, "README.md")) as f:
        md = f.read()
    check(res["claim"] in md and "| --- |" in md.replace("| --- | ", "| --- |") and "Verdict" in md,
          "README.md: claim, a table, the verdict")
    check(isinstance(res["figures"], list) and res["figures"], "at least one figure")
    svgs = sorted(f for f in os.listdir(out) if f.endswith(".svg"))
    check(len(svgs) == len(res["figures"]), "one .svg file per figure")
    for i, fig in enumerate(res["figures"]):
        check(sorted(fig) == ["svg", "title"] and fig["svg"].startswith("<svg"), "figure %d: {title, svg}" % i)
        try:
            ET.fromstring(fig["svg"])
            ok = True
        except ET.ParseError as e:
            ok = False
            print("   ", e)
        check(ok, "figure %d (%s): well-formed XML" % (i, fig["title"][:40]))
    if shutil.which("rsvg-convert"):
        for s in svgs:
            png = os.path.join(args.work, s[:-4] + ".png")
            r = subprocess.run(["rsvg-convert", "-o", png, os.path.join(out, s)], stderr=subprocess.PIPE)
            if check(r.returncode == 0, "%s renders with rsvg-convert" % s):
                w, h, inked, colours = png_inked_fraction(png)
                check(w >= 600 and h >= 400 and 0.01 < inked < 0.6 and colours > 4,
                      "%s: PNG %dx%d, %.1f%% inked, %d colours (not blank)" % (s, w, h, 100 * inked, colours))
    else:
        print("note: no rsvg-convert; the figures are not rendered")
    # the page `tinylm report` makes of result.json (tests/browser opens such pages in Chromium)
    page = os.path.join(out, "report.html")
    html = open(page, encoding="utf-8").read() if os.path.exists(page) else ""
    check(bool(html), "report.html written beside the Markdown table")
    if html:
        blob = html[html.index('id="tlm-data">') + len('id="tlm-data">'):] if 'id="tlm-data">' in html else ""
        check('"kind":"experiment"' in blob.replace(" ", "") and json.dumps(res["title"], ensure_ascii=False)[1:-1][:40] in blob,
              "report.html holds the experiment's data (kind, title)")
        check("http://" not in html.split('id="tlm-data">')[0] and "https://" not in html.split('id="tlm-data">')[0]
              and "<script src" not in html, "report.html is self-contained (no external script or URL)")
    import importlib
    sys.path.insert(0, os.path.join(REPO, "experiments"))
    mods = {getattr(m, "NAME", None): m for m in
            (importlib.import_module(f[:-3]) for f in os.listdir(os.path.join(REPO, "experiments"))
             if f.startswith("exp_") and f.endswith(".py"))}
    mod = mods[args.name]
    if hasattr(mod, "check"):
        for b in mod.check(res):
            check(False, "qualitative outcome: " + b)
        check(True, "%s: qualitative checks done" % args.name)
    print("%d failure(s)" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
