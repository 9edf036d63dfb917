#!/usr/bin/python3
"""make_views.py — writes the Python package's HTML views (python/tinylm/views.py) for
test_views.mjs, with manifest.json saying what each page must show.

    make_views.py --lib build/libtinylm.so --out DIR

Pages: stories260K's cached patterns (every layer; rows of one head to check), a patched run's
(layer 1 head 0 replaced by uniform attention through a pattern hook), a pattern with weights above
1 (the page says so), a per-token loss and a 2-row array over the positions, tokens and a title that
try to run script, and a host page holding _repr_html_'s iframe (as Jupyter shows it)."""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.environ["TINYLM_LIB"] = os.path.abspath(a.lib)
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import tinylm
    os.makedirs(a.out, exist_ok=True)
    man = {}
    model = tinylm.load(os.path.join(ROOT, "data", "stories260K.bin"), tokenizer=os.path.join(ROOT, "data", "tok512.bin"))
    ids = model.tokenize("Once upon a time, there was a little girl named Lily. She loved to play outside.")
    toks = model.to_str_tokens(ids)
    _, cache = model.run_with_cache(ids)
    v = cache.view_attention()
    f = v.save(os.path.join(a.out, "cache.html"))
    man["cache"] = {"file": f, "tokens": toks, "layers": 5, "heads": 8, "open": [2, 3],
                    "rows": cache["pattern", 2][3].tolist()}

    # a patched run: layer 1 head 0 attends uniformly over the keys it sees
    def uniform(p, hook):
        T = p.shape[-1]
        p[0] = np.tril(np.ones((T, T), np.float32)) / np.arange(1, T + 1, dtype=np.float32)[:, None]
        return p
    _, patched = model.run_with_cache(ids, fwd_hooks=[("blocks.1.attn.hook_pattern", uniform)])
    f = patched.view_attention(layers=[1], title="patched: layer 1 head 0 uniform").save(os.path.join(a.out, "patched.html"))
    man["patched"] = {"file": f, "tokens": toks, "layers": 1, "heads": 8, "open": [0, 0], "label": "1",
                      "rows": patched["pattern", 1][0].tolist(), "clean_rows": cache["pattern", 1][0].tolist()}

    # weights outside [0, 1]: drawn clipped, the numbers the array's, and a notice
    big = 2.5 * cache["pattern", 0][:2]
    f = tinylm.views.attention(big, tokens=toks, layers=[0], title="scaled").save(os.path.join(a.out, "scaled.html"))
    man["scaled"] = {"file": f, "tokens": toks, "layers": 1, "heads": 2, "open": [0, 1], "rows": big[1].tolist()}

    # arrays over the positions
    loss = model.loss(ids, per_token=True)
    f = tinylm.views.positions(loss, tokens=toks[:-1], labels="loss", title="per-token loss").save(
        os.path.join(a.out, "loss.html"))
    man["loss"] = {"file": f, "tokens": toks[:-1], "rows": [loss.tolist()], "labels": ["loss"]}
    two = np.stack([np.sin(np.arange(len(ids))), -np.cos(np.arange(len(ids)))])
    two[1, 3] = np.nan
    f = cache.view_positions(two, labels=["sin", "-cos"], title="two rows").save(os.path.join(a.out, "two.html"))
    man["two"] = {"file": f, "tokens": toks, "rows": [[None if not np.isfinite(x) else float(x) for x in r] for r in two],
                  "labels": ["sin", "-cos"]}

    # hostile strings: tokens and title that try to end elements, run handlers or navigate
    run = lambda tag: "(top.__pwned=top.__pwned||[]).push('%s')" % tag  # noqa: E731
    evil = ["<img src=x onerror=\"%s\">" % run("tok-img"), "</script><script>%s</script>" % run("tok-script"),
            "\"><svg onload=\"%s\">" % run("tok-svg"), "javascript:%s" % run("tok-js"), "<!--", "]]>&amp;&lt;",
            "<iframe srcdoc=\"<script>%s</script>\">" % run("tok-iframe"), "\u2028\u2029\n\t"]
    T = len(evil)
    pat = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    title = "</title><script>%s</script><b>t</b>" % run("title")
    f = tinylm.views.attention(pat[None], tokens=evil, title=title, source=evil[0]).save(os.path.join(a.out, "hostile.html"))
    man["hostile"] = {"file": f, "tokens": evil, "title": title, "layers": 1, "heads": 1, "open": [0, 0], "rows": pat.tolist()}
    vp = tinylm.views.positions(np.arange(T, dtype=float), tokens=evil, labels=[evil[1]], title=title)
    f = vp.save(os.path.join(a.out, "hostile_positions.html"))
    man["hostile_positions"] = {"file": f, "tokens": evil, "title": title, "rows": [list(range(T))], "labels": [evil[1]]}

    # Jupyter: _repr_html_'s iframe in a host page (the notebook's), beside a marker of the host
    host = ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>host</title></head><body>"
            "<p id=\"host\">notebook</p>%s%s</body></html>" % (v._repr_html_(), vp._repr_html_()))
    f = os.path.join(a.out, "notebook.html")
    with open(f, "w", encoding="utf-8") as fh:
        fh.write(host)
    man["notebook"] = {"file": f, "frames": 2, "tokens": toks, "hostile_tokens": evil}
    # misuse raises, never crashes
    errors = []
    for label, fn in [("pattern 2-d", lambda: tinylm.views.attention(np.zeros((3, 3)))),
                      ("strings", lambda: tinylm.views.attention(np.array([["a"]]))),
                      ("token count", lambda: tinylm.views.attention(pat, tokens=["a"])),
                      ("scores shape", lambda: tinylm.views.attention(pat[None], scores=np.zeros((2, 2)))),
                      ("positions 3-d", lambda: tinylm.views.positions(np.zeros((1, 2, 3)))),
                      ("labels", lambda: tinylm.views.positions(np.zeros((2, 3)), labels=["a"])),
                      ("too big", lambda: tinylm.views.attention(np.zeros((1, 64, 512, 512), np.float32))),
                      ("no pattern cached", lambda: model.run_with_cache(ids, names=["hook_embed"])[1].view_attention()),
                      ("layer", lambda: cache.view_attention(layers=[7]))]:
        try:
            fn()
            errors.append("%s: no exception" % label)
        except (TypeError, ValueError, KeyError):
            pass
    man["misuse"] = errors
    model.close()
    with open(os.path.join(a.out, "manifest.json"), "w") as fh:
        json.dump(man, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
