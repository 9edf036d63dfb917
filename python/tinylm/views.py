"""views.py — HTML views of attention patterns and of arrays over the positions, drawn by the page
of `tinylm inspect --html` (src/report: report.js, its stylesheet and Content-Security-Policy,
written by the engine's own page writer through tlm_report_html).

    v = tinylm.views.attention(cache["pattern", 1], tokens=model.to_str_tokens(ids), layers=[1])
    v                      # in Jupyter: the page, in a sandboxed frame (_repr_html_)
    v.save("pattern.html") # the same page as a file
    tinylm.views.positions(model.loss(ids, per_token=True), tokens=model.to_str_tokens(ids)[:-1])

Token strings are data: the page writes them as text, never as markup (report.js), and its CSP runs
no script but report.js itself. docs/python.md ("Views").
"""
import base64
import ctypes
import html
import json
import math
import numbers
import os
import tempfile

import numpy as np

__all__ = ["View", "attention", "positions"]

# the most attention values one page holds (as `inspect --html`: INSPECT_ATTENTION_LIMIT)
ATTENTION_LIMIT = 4 << 20


def _lib():
    from . import _L
    return _L


def _num(x):
    """a finite float (6 significant digits, as the inspect page's numbers) or None"""
    x = float(x)
    return float("%.6g" % x) if math.isfinite(x) else None


def _tokens(tokens, T, what):
    if tokens is None:
        return [str(i) for i in range(T)]
    if isinstance(tokens, str) or not hasattr(tokens, "__len__"):
        raise TypeError("%s: tokens must be a list of T strings (model.to_str_tokens(ids)), got %r"
                        % (what, type(tokens).__name__))
    toks = list(tokens)
    if len(toks) != T:
        raise ValueError("%s: %d tokens for %d positions" % (what, len(toks), T))
    if not all(isinstance(t, str) for t in toks):
        raise TypeError("%s: tokens must be strings (model.to_str_tokens(ids))" % what)
    return toks


def _array(a, what):
    a = np.asarray(a)
    if a.dtype == np.bool_ or a.dtype.kind not in "fiu":
        raise TypeError("%s: numbers are needed, got an array of %s" % (what, a.dtype))
    return a.astype(np.float64)


class View:
    """An HTML page of tinylm's report (kind "pattern" or "positions"): shown by Jupyter
    (_repr_html_: the page in a sandboxed iframe), written by save(path), its text by html()."""

    def __init__(self, data, title, height=640):
        self.data, self.title, self.height = data, title, int(height)
        self._page = None

    def html(self):
        """the whole page (str): the engine's page writer around this view's data"""
        if self._page is None:
            from . import _err
            L = _lib()
            text = json.dumps(self.data, allow_nan=False, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            n = ctypes.c_size_t()
            p = L.tlm_report_html(self.title.encode("utf-8", "replace"), text, ctypes.byref(n))
            if not p:
                raise _err("view")
            try:
                self._page = ctypes.string_at(p, n.value).decode("utf-8")
            finally:
                L.tlm_free_mem(p)
        return self._page

    def save(self, path):
        """writes the page to path (atomically: a temporary file beside it, then renamed); returns path"""
        page = self.html().encode("utf-8")
        path = os.fspath(path)
        d = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp", dir=d)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(page)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return path

    def _repr_html_(self):
        # the page is a whole document with its own CSP: inside an iframe (srcdoc, every character
        # escaped as an attribute value) it keeps it, and the sandbox gives its script an origin of
        # its own (no allow-same-origin): it cannot reach the notebook
        return ('<iframe class="tinylm-view" sandbox="allow-scripts" style="width: 100%%; height: %dpx; '
                'border: 1px solid #d4d4dc;" title="%s" srcdoc="%s"></iframe>'
                % (self.height, html.escape(self.title, quote=True), html.escape(self.html(), quote=True)))

    def __repr__(self):
        return "<tinylm view %r (%s): .save(path) writes the page; Jupyter shows it>" % (self.title, self.data["kind"])


def _pattern_stats(p, scores):
    """per head and position: the entropy of the row (nats, over its visible keys) and the largest
    score (None without scores); p [N, T, T]"""
    N, T, _ = p.shape
    tri = np.tril(np.ones((T, T), bool))
    q = np.where(tri, np.clip(p, 0, None), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(q > 0, q * np.log(q), 0.0).sum(-1)  # [N, T]
    if scores is not None:
        s = np.where(tri, scores, -np.inf)
        mx = s.max(-1)
    else:
        mx = np.full((N, T), np.nan)
    return ent, mx


def attention(pattern, tokens=None, layers=None, scores=None, title=None, source=None):
    """A view of attention patterns: pattern [H, T, T] (one layer) or [L, H, T, T] (rows: queries,
    columns: keys; a cache's hook_pattern, a patched run's, or any array of weights); tokens the T
    strings (model.to_str_tokens(ids); None: the positions' numbers); layers the layers' numbers
    (labels; default 0..L-1); scores (the hook_attn_scores of the same shape, optional) gives each
    head's largest pre-softmax logit. Drawn by the inspect page's heatmaps: the causal lower
    triangle, 16-bit (a weight above 1 or below 0 is shown clipped and the page says so)."""
    p = _array(pattern, "attention")
    if p.ndim == 3:
        p = p[None]
    if p.ndim != 4 or p.shape[-1] != p.shape[-2] or p.shape[-1] < 1:
        raise ValueError("attention: pattern must be [H, T, T] or [L, H, T, T], got shape %s" % (np.shape(pattern),))
    L, H, T, _ = p.shape
    if L * H * T * (T + 1) // 2 > ATTENTION_LIMIT:
        raise ValueError("attention: %d layers x %d heads x %d positions are more than a page holds (%d weights); "
                         "view fewer layers or positions" % (L, H, T, ATTENTION_LIMIT))
    toks = _tokens(tokens, T, "attention")
    if layers is None:
        layers = list(range(L))
    elif isinstance(layers, numbers.Integral):
        layers = [int(layers)]
    layers = list(layers)
    if len(layers) != L:
        raise ValueError("attention: %d layer labels for %d layers" % (len(layers), L))
    sc = None
    if scores is not None:
        sc = _array(scores, "attention: scores")
        if sc.ndim == 3:
            sc = sc[None]
        if sc.shape != p.shape:
            raise ValueError("attention: scores has shape %s, the pattern %s" % (np.shape(scores), np.shape(pattern)))
    flat = p.reshape(L * H, T, T)
    ent, mx = _pattern_stats(flat, None if sc is None else sc.reshape(L * H, T, T))
    rows, cols = np.tril_indices(T)
    lower = np.nan_to_num(flat[:, rows, cols], nan=0.0, posinf=0.0, neginf=0.0)
    top = float(lower.max()) if lower.size else 1.0
    notes = []
    if (lower < 0).any() or top > 1.0:
        notes.append("weights outside [0, 1] are in this pattern (largest %.4g, smallest %.4g): the colours clip "
                     "them to [0, 1]; the numbers of the opened head are the array's, to 16 bits of its largest"
                     % (top, float(lower.min())))
    if not np.isfinite(flat[:, rows, cols]).all():
        notes.append("NaN or infinite weights are shown as 0")
    upper = flat[:, cols, rows][:, rows != cols] if T > 1 else np.zeros((1, 0))
    if np.abs(np.nan_to_num(upper)).max(initial=0.0) > 0:
        notes.append("the pattern has weight above the diagonal (a query on a later key): only the causal lower "
                     "triangle is drawn")
    scale_max = max(1.0, top)
    q = np.rint(np.clip(lower, 0, None) * (65535.0 / scale_max)).astype("<u2")
    heads = [base64.b64encode(q[i].tobytes()).decode("ascii") for i in range(L * H)]
    stats = [{"layer": layers[k // H], "head": k % H,
              "max_logit": {"mean": _num(np.nanmean(mx[k])) if np.isfinite(mx[k]).any() else None},
              "entropy": {"mean": _num(ent[k].mean())}} for k in range(L * H)]
    data = {
        "kind": "pattern", "title": title or "attention patterns", "source": source, "tokens": toks,
        "layer_labels": [str(x) for x in layers],
        "model": {"n_layers": L, "n_heads": H},
        "report": {"position": T - 1, "heads": stats},
        "per_position": {"head_max_logit": [[_num(v) for v in r] for r in mx],
                         "head_entropy": [[_num(v) for v in r] for r in ent]},
        "attention": {"encoding": "uint16le-lower-triangle-base64", "scale": 65535.0 / scale_max, "heads": heads},
        "note": "; ".join(notes) or None,
    }
    return View(data, data["title"], height=min(1400, 360 + 150 * L + 14 * min(T, 60)))


def positions(values, tokens=None, labels=None, title=None, diverging=None, source=None, y_label=None):
    """A view of numbers over the positions: values [T] or [rows, T] (a per-token loss, a DLA
    by position, a lens probability per layer, ...); tokens the T strings; labels one per row.
    Drawn as the inspect page's logit-lens grid (cells shaded by value; diverging colours for
    signed values: diverging=None decides by the sign of the data) and a line chart (up to 8
    rows). NaN / inf show as blank."""
    v = _array(values, "positions")
    if v.ndim == 1:
        v = v[None]
    if v.ndim != 2 or v.shape[1] < 1:
        raise ValueError("positions: values must be [T] or [rows, T], got shape %s" % (np.shape(values),))
    R, T = v.shape
    if R * T > ATTENTION_LIMIT:
        raise ValueError("positions: %d values are more than a page holds" % (R * T))
    toks = _tokens(tokens, T, "positions")
    if labels is None:
        labels = ["values"] if R == 1 else [str(i) for i in range(R)]
    elif isinstance(labels, str):
        labels = [labels]
    labels = [str(x) for x in labels]
    if len(labels) != R:
        raise ValueError("positions: %d labels for %d rows" % (len(labels), R))
    fin = v[np.isfinite(v)]
    if diverging is None:
        diverging = bool(fin.size and fin.min() < 0 < fin.max())
    data = {"kind": "positions", "title": title or "values by position", "source": source, "tokens": toks,
            "rows": [{"label": labels[k], "values": [_num(x) for x in v[k]]} for k in range(R)],
            "diverging": bool(diverging), "y_label": y_label, "numbered": tokens is None}
    return View(data, data["title"], height=min(1200, 380 + 26 * R))
