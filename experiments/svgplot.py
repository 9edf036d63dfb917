"""svgplot — small dependency-free SVG line and bar charts for the experiments.

    svg = line_plot([Series("pre", xs, ys), Series("post", xs, ys2)],
                    title="...", xlabel="layer", ylabel="|grad|", ylog=True)
    svg = bar_plot(["a", "b"], [Series("loss", None, [1.2, 3.4])], title=..., ylabel=...)

Colours are the Okabe-Ito palette (colour-blind safe); every series also gets its own marker
and dash pattern, so a figure still reads in greyscale. Labels are horizontal; log axes use
decade ticks. Non-finite values (NaN, inf) are left out of a line (it is broken there).
The output is a complete <svg> element (no XML prolog), 760 x 460 by default.
"""
import math
from xml.sax.saxutils import escape

# Okabe & Ito (2008): black, orange, sky blue, bluish green, yellow, blue, vermillion, reddish purple
PALETTE = ["#000000", "#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7", "#F0E442"]
DASHES = ["", "6,3", "2,2", "8,3,2,3", "4,4", "10,4", "1,3", "12,3,3,3"]
MARKERS = ["circle", "square", "triangle", "diamond", "cross", "tri_down", "plus", "star"]


class Series:
    def __init__(self, label, xs, ys, style=None):
        self.label, self.xs, self.ys, self.style = label, xs, list(ys), style



def _hlines(out, Y, hlines, left, right):
    """labelled dotted reference lines at the given y values (those on the axis)"""
    for yv, lab in hlines:
        if Y.ok(yv):
            py = Y(yv)
            out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#555555" stroke-dasharray="1,4" '
                       'stroke-width="1.5"/>' % (left, py, right, py))
            out.append('<text x="%d" y="%.1f" text-anchor="end" fill="#333333" font-size="11">%s</text>'
                       % (right - 4, py - 4, escape(lab)))

def _finite(v):
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def _fmt(v):
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        e = int(math.floor(math.log10(a) + 1e-9))
        m = v / 10 ** e
        return "1e%d" % e if abs(m - 1) < 1e-6 else "%.2ge%d" % (m, e)
    return "%g" % float("%.4g" % v)


def _nice_ticks(lo, hi, n=6):
    if hi <= lo:
        hi = lo + 1
    span = hi - lo
    step = 10 ** math.floor(math.log10(span / n))
    for m in (1, 2, 2.5, 5, 10):
        if span / (step * m) <= n:
            step *= m
            break
    start = math.floor(lo / step) * step
    ticks, t = [], start
    while t <= hi + 1e-9 * step:
        ticks.append(round(t, 12))
        t += step
    return ticks


def _log_ticks(lo, hi):
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if b == a:
        b = a + 1
    stride = max(1, int(math.ceil((b - a) / 8)))
    b = a + stride * int(math.ceil((b - a) / stride))
    return [10.0 ** e for e in range(a, b + 1, stride)]


class _Axis:
    def __init__(self, vals, log, p0, p1, lo=None, hi=None):
        vals = [v for v in vals if _finite(v) and (v > 0 or not log)]
        if not vals:
            vals = [1.0, 10.0] if log else [0.0, 1.0]
        vlo, vhi = min(vals), max(vals)
        if lo is not None:
            vlo = lo
        if hi is not None:
            vhi = hi
        self.log = log
        if log:
            ticks = _log_ticks(vlo, vhi)
            self.lo, self.hi = ticks[0], ticks[-1]
        else:
            if vlo == vhi:
                vlo, vhi = vlo - 1, vhi + 1
            ticks = _nice_ticks(vlo, vhi)
            self.lo, self.hi = min(ticks[0], vlo), max(ticks[-1], vhi)
        self.ticks, self.p0, self.p1 = ticks, p0, p1

    def __call__(self, v):
        if self.log:
            f = (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            f = (v - self.lo) / (self.hi - self.lo)
        return self.p0 + f * (self.p1 - self.p0)

    def ok(self, v):
        return _finite(v) and (v > 0 or not self.log)


def _marker(kind, x, y, colour, r=4.5):
    if kind == "circle":
        return '<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s"/>' % (x, y, r, colour)
    if kind == "square":
        return '<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>' % (x - r, y - r, 2 * r, 2 * r, colour)
    if kind == "triangle":
        return '<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s"/>' % (
            x, y - r * 1.2, x - r * 1.1, y + r * 0.8, x + r * 1.1, y + r * 0.8, colour)
    if kind == "tri_down":
        return '<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="none" stroke="%s" stroke-width="1.8"/>' % (
            x, y + r * 1.2, x - r * 1.1, y - r * 0.8, x + r * 1.1, y - r * 0.8, colour)
    if kind == "diamond":
        return '<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s"/>' % (
            x, y - r * 1.3, x + r, y, x, y + r * 1.3, x - r, y, colour)
    if kind == "cross":
        return ('<path d="M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f" stroke="%s" stroke-width="2.2"/>'
                % (x - r, y - r, x + r, y + r, x - r, y + r, x + r, y - r, colour))
    if kind == "plus":
        return ('<path d="M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f" stroke="%s" stroke-width="2.2"/>'
                % (x - r, y, x + r, y, x, y - r, x, y + r, colour))
    return '<circle cx="%.1f" cy="%.1f" r="%.1f" fill="none" stroke="%s" stroke-width="1.8"/>' % (x, y, r, colour)


def _frame(width, height, title, xlabel, ylabel, left, top, right, bottom):
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
           'font-family="DejaVu Sans, Arial, sans-serif" font-size="13">' % (width, height, width, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="22" text-anchor="middle" font-size="15" font-weight="bold">%s</text>'
           % (width // 2, escape(title))]
    if xlabel:
        out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % ((left + right) // 2, height - 10,
                                                                           escape(xlabel)))
    if ylabel:  # horizontal, above the y axis
        out.append('<text x="%d" y="%d" text-anchor="start">%s</text>' % (8, top - 12, escape(ylabel)))
    return out


def _wrap(label, width=27, max_lines=3):
    """a legend label as lines of at most `width` characters, cut at spaces (a label is never cut short
    of its end unless it needs more than max_lines lines)"""
    words, lines, cur = str(label).split(" "), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = (cur + " " + w) if cur else w
    lines.append(cur)
    lines = [ln if len(ln) <= width + 6 else ln[:width + 5] + "…" for ln in lines]
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][:width - 1] + "…"
    return lines


def _legend(out, series_styles, x, y):
    x = x - 4
    yy = y
    for i, (label, colour, dash, marker) in enumerate(series_styles):
        if marker is None:  # a bar: a filled swatch with the bar's outline
            out.append('<rect x="%d" y="%d" width="26" height="11" fill="%s" stroke="#000000"%s/>'
                       % (x + 2, yy - 6, colour, ' stroke-dasharray="%s"' % dash if dash else ""))
        else:
            out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2.2"%s/>'
                       % (x, yy, x + 30, yy, colour, ' stroke-dasharray="%s"' % dash if dash else ""))
        if marker:
            out.append(_marker(marker, x + 15, yy, colour))
        lines = _wrap(label)
        for k, ln in enumerate(lines):
            out.append('<text x="%d" y="%d" font-size="12">%s</text>' % (x + 36, yy + 4 + 14 * k, escape(ln)))
        yy += 18 + 14 * (len(lines) - 1)


def _style(s, i):
    """(colour, dash, marker) of series i; Series.style {"colour": k, "dash": k, "marker": k} picks the
    slots itself (so that one quantity keeps its colour across figures)"""
    st = s.style if isinstance(s.style, dict) else {}
    c = st.get("colour", i)
    colour = PALETTE[c % len(PALETTE)]
    dash = DASHES[st.get("dash", (i + 3 * (i // len(PALETTE)))) % len(DASHES)]
    marker = MARKERS[st.get("marker", (i + i // len(PALETTE))) % len(MARKERS)]
    return colour, dash, marker


def line_plot(series, title="", xlabel="", ylabel="", xlog=False, ylog=False, width=760, height=460,
              hlines=(), ylim=(None, None), xticklabels=None):
    """series: list of Series (xs, ys numbers). hlines: [(y, label)] dotted reference lines.
    xticklabels: optional {x: text} to label the x ticks at exactly these xs."""
    legend_w = 215
    left, top, right, bottom = 78, 62, width - legend_w, height - 50
    xs_all = [x for s in series for x in s.xs]
    ys_all = [y for s in series for y in s.ys] + [h[0] for h in hlines]
    X = _Axis(xs_all, xlog, left, right)
    Y = _Axis(ys_all, ylog, bottom, top, *ylim)
    out = _frame(width, height, title, xlabel, ylabel, left, top, right, bottom)
    # grid + ticks
    if xticklabels:
        xt = [(x, xticklabels[x]) for x in sorted(xticklabels)]
    else:
        xt = [(t, _fmt(t)) for t in X.ticks if X.lo - 1e-12 <= t <= X.hi + 1e-12]
        if all(isinstance(x, int) for x in xs_all):  # integer data (layers, steps): integer ticks
            xt = [(t, lab) for t, lab in xt if abs(t - round(t)) < 1e-9]
    # every tick keeps its grid line; a label that would overlap the last one drawn (about 7 px a
    # character at 12 px) is left out, the last tick's label always kept
    shown, last_px, last_len = set(), None, 0
    for k, (t, lab) in enumerate(xt):
        px, n = X(t), len(str(lab))
        if last_px is None or abs(px - last_px) >= 3.6 * (n + last_len) + 6:
            shown.add(k)
            last_px, last_len = px, n
    if xt and len(xt) - 1 not in shown:
        k = max(shown)
        if len(shown) > 1 and abs(X(xt[-1][0]) - X(xt[k][0])) < 3.6 * (len(str(xt[-1][1])) + len(str(xt[k][1]))) + 6:
            shown.discard(k)
        shown.add(len(xt) - 1)
    for k, (t, lab) in enumerate(xt):
        px = X(t)
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#dddddd"/>' % (px, top, px, bottom))
        if k in shown:
            out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (px, bottom + 18, escape(lab)))
    for t in Y.ticks:
        if not (Y.lo - 1e-12 * abs(Y.lo) <= t <= Y.hi * (1 + 1e-12) + 1e-12):
            continue
        py = Y(t)
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#dddddd"/>' % (left, py, right, py))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (left - 6, py + 4, _fmt(t)))
    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333333"/>'
               % (left, top, right - left, bottom - top))
    _hlines(out, Y, hlines, left, right)
    styles = []
    for i, s in enumerate(series):
        # past 8 series the colours repeat: the marker and dash shift, so no two series look alike
        colour, dash, marker = _style(s, i)
        styles.append((s.label, colour, dash, marker))
        pts, segs = [], []
        for x, y in zip(s.xs, s.ys):
            if X.ok(x) and Y.ok(y):
                pts.append((X(x), Y(y)))
            elif pts:
                segs.append(pts)
                pts = []
        if pts:
            segs.append(pts)
        for seg in segs:
            if len(seg) > 1:
                out.append('<polyline fill="none" stroke="%s" stroke-width="2.2"%s points="%s"/>'
                           % (colour, ' stroke-dasharray="%s"' % dash if dash else "",
                              " ".join("%.1f,%.1f" % p for p in seg)))
            npts = sum(len(sg) for sg in segs)
            every = max(1, npts // 24)
            for j, (px, py) in enumerate(seg):
                if j % every == 0 or j == len(seg) - 1:
                    out.append(_marker(marker, px, py, colour))
    _legend(out, styles, right + 14, top + 8)
    out.append("</svg>")
    return "\n".join(out)


def bar_plot(categories, series, title="", xlabel="", ylabel="", ylog=False, width=760, height=460,
             hlines=()):
    """grouped bars: categories along x, one bar per Series in each group (Series.ys[i] = value of
    category i). Bars get a colour and a hatch-free outline pattern (dashed outline per series)."""
    legend_w = 215
    left, top, right, bottom = 78, 62, width - legend_w, height - 72
    vals = [v for s in series for v in s.ys] + [h[0] for h in hlines]
    if not ylog:
        vals = vals + [0.0]
    Y = _Axis(vals, ylog, bottom, top)
    out = _frame(width, height, title, xlabel, ylabel, left, top, right, bottom)
    for t in Y.ticks:
        py = Y(t)
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#dddddd"/>' % (left, py, right, py))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (left - 6, py + 4, _fmt(t)))
    n, k = max(1, len(categories)), max(1, len(series))
    gw = (right - left) / n
    bw = gw * 0.8 / k
    base = Y(Y.lo) if ylog else Y(max(0.0, Y.lo))
    styles = []
    for j, s in enumerate(series):
        colour, dash = PALETTE[(j + 1) % len(PALETTE)] if k > 1 else PALETTE[4], DASHES[j % len(DASHES)]
        styles.append((s.label, colour, dash, None))
        for i, v in enumerate(s.ys[:n]):
            if not Y.ok(v):
                continue
            x0 = left + gw * i + gw * 0.1 + bw * j
            py = Y(v)
            y0, h = min(py, base), abs(base - py)
            out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" stroke="#000000" '
                       'stroke-width="1"%s/>' % (x0, y0, bw - 2, max(h, 0.5), colour,
                                                 ' stroke-dasharray="%s"' % dash if dash else ""))
    # horizontal labels, wrapped at spaces to the group's width (about 7 px per character at 11 px)
    per_line = max(3, int(gw / 7.0))
    for i, c in enumerate(categories):
        words, lines = str(c).split(), [""]
        for w in words:
            if lines[-1] and len(lines[-1]) + 1 + len(w) > per_line:
                lines.append(w)
            else:
                lines[-1] = (lines[-1] + " " + w).strip()
        for k, line in enumerate(lines[:3]):
            out.append('<text x="%.1f" y="%d" text-anchor="middle" font-size="11">%s</text>'
                       % (left + gw * (i + 0.5), bottom + 15 + 12 * k, escape(line)))
    _hlines(out, Y, hlines, left, right)
    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333333"/>'
               % (left, top, right - left, bottom - top))
    if k > 1 or series[0].label:
        _legend(out, styles, right + 14, top + 8)
    out.append("</svg>")
    return "\n".join(out)
