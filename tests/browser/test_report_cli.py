#!/usr/bin/python3
"""test_report_cli.py — the HTML pages' content without a browser (runs in every build, the
sanitizer build included): `inspect --html` on stories260K carries the --json report, every
position's top tokens (= inspect --json --position i) and attention patterns that decode to the
engine's probabilities (--probe ... --dump) with rows summing to 1 exactly; `--grad --html`;
`tinylm report` round-trips an experiment description, escapes what could end the script
element, and refuses malformed input naming the file and field; unwritable paths fail naming the
file and leave nothing behind; `--plot` on a long prompt shows a window around --position.

    test_report_cli.py --tinylm PATH --work DIR"""
import base64
import hashlib
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cli"))
from harness import ROOT, STORIES, TOK512, check, main, run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = ["--model", STORIES, "--tokenizer", TOK512]


def blob(path):
    """the page's JSON data blob, and the page's text"""
    with open(path, encoding="utf-8") as f:
        page = f.read()
    m = re.search(r'<script type="application/json" id="tlm-data">(.*?)</script>', page, re.S)
    return (json.loads(m.group(1)) if m else None), page


def test_inspect(T, work):
    prompt = "Once upon a time, there was a little girl named Lily. She loved to play"
    html, dump = os.path.join(work, "s.html"), os.path.join(work, "dump")
    rc, out, err = run(T, "inspect", *MODEL, "--prompt", prompt, "--json", "--html", html,
                       "--probe", "layers.*.attn.probs", "--dump", dump)
    if not check(rc == 0 and os.path.isfile(html), "inspect --html writes the page", err):
        return
    j = json.loads(out)
    d, page = blob(html)
    check(d is not None and d["kind"] == "inspect", "the page holds one JSON data blob of kind inspect")
    check(d["report"] == j, "its report = inspect --json, exactly")
    check(page.count("</script>") == 2 and "Content-Security-Policy" in page and "<style>" in page,
          "self-contained: inline style and script, a CSP that forbids fetching")
    n = len(j["tokens"])
    L, H = d["model"]["n_layers"], d["model"]["n_heads"]
    check((L, H) == (5, 8) and all(len(d["per_position"][k]) == rows for k, rows in
                                   (("top", n), ("residual", 11), ("increments", 10), ("head_entropy", 40))),
          "per-position arrays for all %d positions" % n)
    bad = []
    for P in (0, 5, n - 1):
        rc, out, err = run(T, "inspect", *MODEL, "--prompt", prompt, "--json", "--position", str(P))
        want = json.loads(out)["logit_lens"][-1]["top"]
        got = d["per_position"]["top"][P]
        if [(g["id"], g["text"], g["prob"]) for g in got] != [(w["id"], w["text"], w["prob"]) for w in want]:
            bad.append("position %d: %s vs %s" % (P, got[:2], want[:2]))
    check(not bad, "per-position top-k = inspect --json --position P (P = 0, 5, last)", "; ".join(bad))
    att = d["attention"]
    worst_sum, worst = 0, 0.0
    for layer in range(L):
        probs = np.load(os.path.join(dump, "layers.%d.attn.probs.npy" % layer))[0]
        for h in range(H):
            q = np.frombuffer(base64.b64decode(att["heads"][layer * H + h]), "<u2")
            if q.size != n * (n + 1) // 2:
                worst_sum = 1 << 30
                continue
            for i in range(n):
                row = q[i * (i + 1) // 2:(i + 1) * (i + 2) // 2].astype(np.int64)
                worst_sum = max(worst_sum, abs(int(row.sum()) - 65535))
                worst = max(worst, float(np.abs(row / 65535.0 - probs[h, i, :i + 1]).max()))
    check(att["encoding"] == "uint16le-lower-triangle-base64" and worst_sum == 0,
          "attention: every row of every head sums to 65535 (= 1) exactly")
    check(worst < 2e-5, "attention: the page's weights = the engine's probabilities (worst %.2g)" % worst)
    leftovers = [f for f in os.listdir(work) if ".tmp." in f]
    check(not leftovers, "no temporary file left behind", str(leftovers))
    # grad
    g = os.path.join(work, "g.html")
    rc, out, err = run(T, "inspect", "--grad", *MODEL, "--data", os.path.join(ROOT, "data", "tinyshakespeare.txt"),
                       "--seq", "16", "--json", "--html", g)
    d, _ = blob(g) if rc == 0 else (None, "")
    check(rc == 0 and d["kind"] == "grad" and d["report"] == json.loads(out) and len(d["report"]["grad_layers"]) == 5,
          "inspect --grad --html: the --json report in a page of kind grad", err)
    # unwritable
    rc, _, err = run(T, "inspect", *MODEL, "--prompt", "a", "--html", "/nonexistent-dir/r.html")
    check(rc == 1 and "/nonexistent-dir/r.html" in err and "HTML report" in err,
          "inspect --html to an unwritable path: exit 1, names the file", err)


def test_variants(T, work):
    """random models of other shapes: the page's data is complete and its attention rows sum to 1 (with
    sliding windows: zero outside the window), its report = --json (DLA refused without a residual)"""
    import zlib
    import tinylm_ref  # (harness puts tests/reference on the path)
    base = {"model_type": "tinylm", "vocab_size": 260, "hidden_size": 32, "num_hidden_layers": 3,
            "num_attention_heads": 4, "intermediate_size": 48, "max_position_embeddings": 64}
    cases = [
        ("gemma_like", {"norm_type": "rmsnorm_1p", "norm_placement": "sandwich", "attn_logit_softcapping": 3.0,
                        "final_logit_softcapping": 5.0, "ffn_type": "geglu", "sliding_window": 3,
                        "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
                        "num_key_value_heads": 2}, [3, 0, 3]),
        ("no_residual", {"residual": False}, [0, 0, 0]),
        ("layernorm_learned_gelu", {"norm_type": "layernorm", "norm_bias": True, "position_embedding": "learned",
                                    "ffn_type": "gelu"}, [0, 0, 0]),
        ("moe_sigmoid_groups", {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                                "scoring_func": "sigmoid", "n_group": 4, "topk_group": 2, "first_k_dense_replace": 1,
                                "n_shared_experts": 1}, [0, 0, 0]),
    ]
    for name, over, windows in cases:
        cfg = dict(base)
        cfg.update(over)
        d = os.path.join(work, name)
        tinylm_ref.save(d, cfg, tinylm_ref.random_params(cfg, zlib.crc32(name.encode()), std=0.3, embed_std=0.6))
        html = os.path.join(work, name + ".html")
        ids = "5 66 77 88 99 3 17 42 250 7 9 1"
        rc, out, err = run(T, "inspect", "--model", d, "--ids", ids, "--json", "--html", html)
        if not check(rc == 0, "%s: inspect --html runs" % name, err):
            continue
        j = json.loads(out)
        dd, _ = blob(html)
        n, H = 12, 4
        bad = []
        for idx, b64 in enumerate(dd["attention"]["heads"]):
            q = np.frombuffer(base64.b64decode(b64), "<u2")
            w = windows[idx // H]
            for i in range(n):
                row = q[i * (i + 1) // 2:(i + 1) * (i + 2) // 2]
                if int(row.sum()) != 65535:
                    bad.append("head %d row %d sums to %d" % (idx, i, int(row.sum())))
                if w and row[:max(0, i - w + 1)].any():
                    bad.append("head %d row %d: weight outside the window" % (idx, i))
        ok = dd["report"] == j and len(dd["attention"]["heads"]) == 3 * H and not bad
        ok = ok and dd["report"]["decomposition"]["applies"] == (name != "no_residual")
        check(ok, "%s: report = --json, %d heads, rows sum to 1%s" % (name, 3 * H, ", window respected" if any(windows) else ""),
              "; ".join(bad[:4]))
        if "num_experts" in over:  # the router section: layers 1, 2; loads sum to 1; 2 distinct experts a token,
            ex = dd["report"].get("experts", [])  # within the 2 chosen groups of 2
            ok = [x["layer"] for x in ex] == [1, 2] and all(abs(sum(x["load"]) - 1) < 1e-5 for x in ex)
            ok = ok and all(len(t) == 2 and len({e // 2 for e in t}) <= 2 and len(set(t)) == 2 for x in ex for t in x["token_experts"])
            check(ok, "%s: the page's router section: layers 1 and 2, loads summing to 1, each token's 2 experts" % name,
                  json.dumps(ex)[:300])


def test_plot_window(T, work):
    """--plot on a long prompt: the logit-lens grid is a window around --position and says which"""
    text = open(os.path.join(ROOT, "data", "tinyshakespeare.txt"), encoding="utf-8").read()[:600]
    svg = os.path.join(work, "long.svg")
    rc, out, err = run(T, "inspect", *MODEL, "--prompt", text, "--position", "100", "--plot", svg, "--json")
    if not check(rc == 0 and os.path.isfile(svg), "inspect --plot on a long prompt writes an SVG", err):
        return
    n = len(json.loads(out)["tokens"])
    root = ET.parse(svg).getroot()
    texts = ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]
    shown = [t for t in texts if re.search(r"positions \d+.\d+ of %d" % n, t)]
    m = re.search(r"positions (\d+).(\d+) of", shown[0]) if shown else None
    check(m is not None and int(m.group(1)) <= 100 <= int(m.group(2)),
          "--plot: the lens grid shows a window around position 100 and says which (%s)" % (shown[:1],), str(texts[:8]))
    rot = [t for t in root.iter("{http://www.w3.org/2000/svg}text") if "rotate" in (t.get("transform") or "")]
    small = [t for t in root.iter("{http://www.w3.org/2000/svg}text") if float(t.get("font-size") or 12) < 11]
    check(not rot and not small, "--plot: no rotated labels, none below 11px", "%d rotated, %d small" % (len(rot), len(small)))


def test_experiment(T, work):
    sample = os.path.join(HERE, "sample_experiment.json")
    html = os.path.join(work, "e.html")
    rc, _, err = run(T, "report", sample, "--html", html)
    if check(rc == 0, "report: writes the experiment page", err):
        d, page = blob(html)
        check(d == json.load(open(sample)), "the page's data = the description (unknown fields kept)")
        check("<title>Does the residual stream grow with depth?</title>" in page, "the page's title")
    # a description whose strings try to end the script element
    evil = {"kind": "experiment", "title": "a </script><script>alert(1)</script> & <b>", "notes": ["</script>", "<!--"],
            "figures": [{"title": "f", "svg": "<svg xmlns='http://www.w3.org/2000/svg'><text>&lt;/script&gt;</text></svg>"}]}
    ev = os.path.join(work, "evil.json")
    json.dump(evil, open(ev, "w"))
    rc, _, err = run(T, "report", ev, "--html", html)
    d, page = blob(html) if rc == 0 else (None, "")
    check(rc == 0 and d == evil and page.count("</script>") == 2 and "<title>a &lt;/script&gt;" in page,
          "strings holding </script> stay inside the data (escaped as \\u003c)", err)
    # the CSP runs the page's own script only, by its hash: no 'unsafe-inline' script, no fetch
    m = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', page)
    csp = dict((p.strip().split(" ", 1) + [""])[:2] for p in m.group(1).split(";")) if m else {}
    code = re.search(r"<script>(.*?)</script>", page, re.S)
    want = "'sha256-%s'" % base64.b64encode(hashlib.sha256(code.group(1).encode()).digest()).decode() if code else None
    check(csp.get("script-src") == want and csp.get("default-src") == "'none'" and csp.get("img-src") == "data:"
          and "unsafe" not in csp.get("script-src", "unsafe") and csp.get("base-uri") == "'none'",
          "the CSP allows one script, the page's own, by its SHA-256 (no 'unsafe-inline'); nothing is fetched", str(csp))
    ok = {"kind": "experiment", "title": "x", "figures": [
        {"svg": "<?xml version='1.0'?>\n<!-- by hand -->\n<svg xmlns='http://www.w3.org/2000/svg'/>"}, {"svg": " <svg>\n</svg>"}]}
    f = os.path.join(work, "prolog.json")
    json.dump(ok, open(f, "w"))
    rc, _, err = run(T, "report", f, "--html", html)
    check(rc == 0, "report: a figure may start with whitespace, an XML declaration and comments", err)
    cases = [
        ("malformed", '{"kind": "experiment",\n "title": }', "not valid JSON (near line 2"),
        ("empty", "", "not valid JSON"),
        ("wrong kind", '{"kind": "inspect", "title": "x"}', 'field "kind"'),
        ("no kind", '{"title": "x"}', 'field "kind"'),
        ("no title", '{"kind": "experiment"}', 'field "title"'),
        ("array", "[1, 2]", "top level"),
        ("verdict", '{"kind": "experiment", "title": "x", "verdict": {"supported": 1}}', 'field "verdict.supported"'),
        ("columns", '{"kind": "experiment", "title": "x", "tables": [{"columns": "a", "rows": []}]}', 'field "tables[0].columns"'),
        ("row length", '{"kind": "experiment", "title": "x", "tables": [{"columns": ["a"], "rows": [[1], [1, 2]]}]}',
         'field "tables[0].rows[1]"'),
        ("cell", '{"kind": "experiment", "title": "x", "tables": [{"columns": ["a"], "rows": [[{}]]}]}', 'field "tables[0].rows[0]"'),
        ("figure", '{"kind": "experiment", "title": "x", "figures": [{"title": "t", "svg": "<div>"}]}', 'field "figures[0].svg"'),
        ("markup before the svg", '{"kind": "experiment", "title": "x", "figures": [{"svg": "<img src=x onerror=alert(1)><svg></svg>"}]}',
         'field "figures[0].svg"'),
        ("svg not the root", '{"kind": "experiment", "title": "x", "figures": [{"svg": "<!-- c --> <svgx/>"}]}', 'field "figures[0].svg"'),
        ("notes", '{"kind": "experiment", "title": "x", "notes": [1]}', 'field "notes[0]"'),
    ]
    out = os.path.join(work, "never.html")
    for label, text, words in cases:
        f = os.path.join(work, "bad-%s.json" % label.replace(" ", "_"))
        open(f, "w").write(text)
        rc, _, err = run(T, "report", f, "--html", out)
        check(rc == 1 and f in err and words in err and len(err.strip().splitlines()) == 1 and not os.path.exists(out),
              "report, %s: exit 1, one line naming the file and field" % label, err.strip())
    rc, _, err = run(T, "report", sample)
    check(rc == 2 and "--html" in err, "report without --html: usage error", err)
    rc, _, err = run(T, "report", sample, "--html", "/nonexistent-dir/e.html")
    check(rc == 1 and "/nonexistent-dir/e.html" in err, "report to an unwritable path: exit 1, names the file", err)


if __name__ == "__main__":
    sys.exit(main([test_inspect, test_variants, test_plot_window, test_experiment]))
