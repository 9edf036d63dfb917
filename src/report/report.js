/* report.js — draws tinylm's HTML reports (src/report/report.h) from the page's JSON blob
 * (<script type="application/json" id="tlm-data">): kind "inspect" (tinylm inspect --html),
 * "grad" (inspect --grad --html) and "experiment" (tinylm report). Embedded into the program at
 * build time; no network, no libraries. Also the Python package's views: kind "pattern" and
 * "positions" (python/tinylm/views.py). Colour: a viridis-like sequential ramp (monotone in
 * lightness, so it reads in greyscale and for colour-blind readers) and a blue-orange diverging
 * ramp for signed values. */
"use strict";
(function () {
  // ---- small helpers ----------------------------------------------------------------------------
  var SVGNS = "http://www.w3.org/2000/svg";

  function h(tag, attrs) {
    var e = document.createElement(tag);
    setAttrs(e, attrs);
    for (var i = 2; i < arguments.length; i++) add(e, arguments[i]);
    return e;
  }
  function s(tag, attrs) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    for (var i = 2; i < arguments.length; i++) add(e, arguments[i]);
    return e;
  }
  function setAttrs(e, attrs) {
    for (var k in attrs || {}) {
      var v = attrs[k];
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.slice(0, 2) === "on") e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : v);
    }
  }
  function add(e, c) {
    if (c === undefined || c === null || c === false) return;
    if (Array.isArray(c)) { c.forEach(function (x) { add(e, x); }); return; }
    e.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
  function fmt(x, d) {
    if (x === null || x === undefined || !isFinite(x)) return "—";
    var a = Math.abs(x);
    if (a !== 0 && (a >= 1e5 || a < 1e-3)) return x.toExponential(2);
    return x.toFixed(d === undefined ? 4 : d);
  }
  function fmtG(x) {
    if (x === null || x === undefined || !isFinite(x)) return "—";
    var a = Math.abs(x);
    if (a !== 0 && (a >= 1e4 || a < 1e-2)) return x.toExponential(2);
    return x.toPrecision(4);
  }

  // a token as shown in a chip or a cell: its spaces as "·" (a space-only token would be a blank cell),
  // as the SVG figures draw them; the exact text stays in the title
  function shown(t) { return String(t).replace(/ /g, "\u00b7"); }

  function tickText(t) {
    var a = Math.abs(t);
    if (a !== 0 && (a >= 1e5 || a < 1e-3)) return t.toExponential(0);
    return String(+t.toPrecision(3));
  }

  // ---- colour ramps -----------------------------------------------------------------------------
  var VIRIDIS = [[68, 1, 84], [72, 36, 117], [65, 68, 135], [53, 95, 141], [42, 120, 142], [33, 145, 140],
                 [34, 168, 132], [68, 191, 112], [122, 209, 81], [189, 223, 38], [253, 231, 37]];
  function ramp(stops, t) {
    if (!(t >= 0)) t = 0;
    if (t > 1) t = 1;
    var x = t * (stops.length - 1), i = Math.min(Math.floor(x), stops.length - 2), f = x - i;
    var a = stops[i], b = stops[i + 1];
    return [a[0] + (b[0] - a[0]) * f, a[1] + (b[1] - a[1]) * f, a[2] + (b[2] - a[2]) * f];
  }
  function viridis(t) { return ramp(VIRIDIS, t); }
  // diverging: blue (negative) - near white - orange (positive)
  var DIVERGING = [[33, 102, 172], [103, 169, 207], [209, 229, 240], [247, 247, 247], [253, 219, 199], [239, 138, 98], [179, 88, 6]];
  function diverging(t) { return ramp(DIVERGING, (t + 1) / 2); } // t in [-1, 1]
  function rgb(c) { return "rgb(" + Math.round(c[0]) + "," + Math.round(c[1]) + "," + Math.round(c[2]) + ")"; }
  function textOn(c) { return 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2] > 140 ? "#111" : "#fff"; }

  function legend(label0, label1, fn) {
    var c = h("canvas", { width: 160, height: 1 });
    var ctx = c.getContext("2d"), img = ctx.createImageData(160, 1);
    for (var i = 0; i < 160; i++) {
      var col = fn(i / 159);
      img.data[4 * i] = col[0]; img.data[4 * i + 1] = col[1]; img.data[4 * i + 2] = col[2]; img.data[4 * i + 3] = 255;
    }
    ctx.putImageData(img, 0, 0);
    return h("div", { class: "legend" }, label0, c, label1);
  }

  // ---- tooltip ------------------------------------------------------------------------------------
  var tip;
  function showTip(ev, text) {
    if (!tip) { tip = h("div", { id: "tip" }); document.body.appendChild(tip); }
    tip.textContent = text;
    tip.style.display = "block";
    var x = ev.clientX + 14, y = ev.clientY + 14;
    if (x + 320 > window.innerWidth) x = Math.max(0, ev.clientX - 330);
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }
  function hideTip() { if (tip) tip.style.display = "none"; }

  // ---- a line chart (SVG), optional log axis ---------------------------------------------------------
  // opt: {title, xLabels[], series: [{name, values[], color, dash, marker}], log, width, height, yLabel}
  function lineChart(opt) {
    var W = opt.width || 560, H = opt.height || 260, ml = 62, mr = 14, mt = 26, mb = 44 + (opt.legendRows || 0) * 0;
    var n = opt.xLabels.length, all = [];
    opt.series.forEach(function (se) { se.values.forEach(function (v) { if (v !== null && isFinite(v) && (!opt.log || v > 0)) all.push(v); }); });
    var lo = Math.min.apply(null, all.length ? all : [1]), hi = Math.max.apply(null, all.length ? all : [1]);
    if (opt.log) { lo = Math.pow(10, Math.floor(Math.log10(lo))); hi = Math.pow(10, Math.ceil(Math.log10(hi))); if (lo === hi) hi = lo * 10; }
    else { if (lo > 0) lo = 0; if (hi === lo) hi = lo + 1; var pad = (hi - lo) * 0.05; hi += pad; if (lo < 0) lo -= pad; }
    var legendH = 18 * Math.ceil(opt.series.length / 3);
    var ph = H - mt - mb - legendH, pw = W - ml - mr;
    function X(i) { return ml + (n === 1 ? pw / 2 : (i * pw) / (n - 1)); }
    function Y(v) {
      var t = opt.log ? (Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo)) : (v - lo) / (hi - lo);
      return mt + ph * (1 - t);
    }
    var svg = s("svg", { class: "chart", width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img" });
    if (opt.title) svg.appendChild(s("text", { x: ml, y: 16, "font-weight": "600", "font-size": 13 }, opt.title));
    // y grid + ticks
    var ticks = [];
    if (opt.log) { for (var e = Math.log10(lo); e <= Math.log10(hi) + 1e-9; e++) ticks.push(Math.pow(10, e)); }
    else { for (var k = 0; k <= 4; k++) ticks.push(lo + ((hi - lo) * k) / 4); }
    ticks.forEach(function (t) {
      var y = Y(t);
      svg.appendChild(s("line", { class: "grid", x1: ml, x2: W - mr, y1: y, y2: y }));
      svg.appendChild(s("text", { x: ml - 6, y: y + 4, "text-anchor": "end" }, tickText(t)));
    });
    svg.appendChild(s("line", { class: "axis", x1: ml, x2: ml, y1: mt, y2: mt + ph }));
    svg.appendChild(s("line", { class: "axis", x1: ml, x2: W - mr, y1: mt + ph, y2: mt + ph }));
    if (opt.yLabel) svg.appendChild(s("text", { x: 12, y: mt + ph / 2, transform: "rotate(-90 12 " + (mt + ph / 2) + ")", "text-anchor": "middle" }, opt.yLabel));
    // x labels: thin out so that they do not overlap (about 7px a character at 12px)
    var maxChars = Math.max.apply(null, opt.xLabels.map(function (l) { return String(l).length; }).concat([1]));
    var step = Math.max(1, Math.ceil((maxChars * 7 + 8) / (n > 1 ? pw / (n - 1) : pw)));
    opt.xLabels.forEach(function (l, i) {
      if (i % step !== 0 && i !== n - 1) return;
      svg.appendChild(s("text", { x: X(i), y: mt + ph + 16, "text-anchor": "middle" }, l));
    });
    if (opt.xTitle) svg.appendChild(s("text", { x: ml + pw / 2, y: mt + ph + 32, "text-anchor": "middle", fill: "#5a5a66" }, opt.xTitle));
    opt.series.forEach(function (se, si) {
      var d = "", started = false;
      se.values.forEach(function (v, i) {
        if (v === null || !isFinite(v) || (opt.log && v <= 0)) { started = false; return; }
        var xi = se.x ? se.x[i] : i;
        d += (started ? "L" : "M") + X(xi).toFixed(1) + " " + Y(v).toFixed(1);
        started = true;
      });
      if (!se.noLine) svg.appendChild(s("path", { d: d, fill: "none", stroke: se.color, "stroke-width": se.width || 2, "stroke-dasharray": se.dash || null }));
      se.values.forEach(function (v, i) {
        if (v === null || !isFinite(v) || (opt.log && v <= 0)) return;
        var xi = se.x ? se.x[i] : i, cx = X(xi), cy = Y(v), m;
        if (se.marker === "square") m = s("rect", { x: cx - 4, y: cy - 4, width: 8, height: 8, fill: se.color });
        else if (se.marker === "diamond") m = s("path", { d: "M" + cx + " " + (cy - 5) + "l5 5l-5 5l-5 -5z", fill: se.color });
        else m = s("circle", { cx: cx, cy: cy, r: se.marker === "none" ? 0 : 3.5, fill: se.color });
        m.appendChild(s("title", {}, se.name + " — " + opt.xLabels[xi] + ": " + fmtG(v)));
        svg.appendChild(m);
      });
      // legend below the plot
      var lx = ml + (si % 3) * Math.floor(pw / 3), ly = H - legendH + 4 + 18 * Math.floor(si / 3);
      svg.appendChild(s("line", { x1: lx, x2: lx + 22, y1: ly, y2: ly, stroke: se.color, "stroke-width": se.width || 2.5, "stroke-dasharray": se.dash || null }));
      svg.appendChild(s("text", { x: lx + 28, y: ly + 4 }, se.name));
    });
    return svg;
  }

  // a horizontal signed bar chart: items [{label, value}]
  function barChart(items, opt) {
    var W = opt.width || 560, rowH = 20, ml = 150, mr = 70, mt = 8;
    var H = mt + rowH * items.length + 24;
    var mx = Math.max.apply(null, items.map(function (it) { return Math.abs(it.value); }).concat([1e-12]));
    var pw = W - ml - mr, zero = ml + pw / 2;
    var svg = s("svg", { class: "chart", width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img" });
    items.forEach(function (it, i) {
      var y = mt + i * rowH, w = (Math.abs(it.value) / mx) * (pw / 2), t = it.value / mx;
      var c = diverging(t > 0 ? Math.max(t, 0.35) : Math.min(t, -0.35));
      svg.appendChild(s("text", { x: ml - 8, y: y + 14, "text-anchor": "end" }, it.label));
      var r = s("rect", { x: it.value >= 0 ? zero : zero - w, y: y + 3, width: Math.max(w, 0.5), height: rowH - 6, fill: rgb(c), stroke: "#555", "stroke-width": 0.5 });
      r.appendChild(s("title", {}, it.label + ": " + fmt(it.value)));
      svg.appendChild(r);
      svg.appendChild(s("text", { x: W - mr + 6, y: y + 14 }, fmt(it.value, 3)));
    });
    svg.appendChild(s("line", { class: "axis", x1: zero, x2: zero, y1: mt, y2: mt + rowH * items.length }));
    svg.appendChild(s("text", { x: zero, y: H - 6, "text-anchor": "middle", fill: "#5a5a66" }, "0  (left: against, right: for the token)"));
    return svg;
  }

  function pager(total, size, onPage, label) {
    var box = h("div", { class: "pager" }), page = 0, pages = Math.ceil(total / size);
    var info = h("span");
    var prev = h("button", { type: "button", text: "◀ previous" }), next = h("button", { type: "button", text: "next ▶" });
    function go(p) {
      page = Math.max(0, Math.min(pages - 1, p));
      info.textContent = label + " " + page * size + "–" + (Math.min(total, (page + 1) * size) - 1) + " of " + total;
      prev.disabled = page === 0;
      next.disabled = page === pages - 1;
      onPage(page * size, Math.min(total, (page + 1) * size));
    }
    prev.addEventListener("click", function () { go(page - 1); });
    next.addEventListener("click", function () { go(page + 1); });
    add(box, [prev, info, next]);
    box.go = go;
    box.pageOf = function (i) { return Math.floor(i / size); };
    box.current = function () { return page; };
    return box;
  }

  // ---- inspect ----------------------------------------------------------------------------------------
  function renderInspect(app, D) {
    var R = D.report, P = D.per_position, M = D.model, T = R.tokens.length;
    var L = M.n_layers, NH = M.n_heads;
    var toks = R.tokens.map(function (t) { return t.text; });
    var state = { sel: R.position, hov: null };
    function cur() { return state.hov !== null ? state.hov : state.sel; }
    var listeners = [];
    function changed() { listeners.forEach(function (f) { f(cur()); }); }

    add(app, h("h1", { text: "tinylm inspect" }));
    add(app, h("div", { class: "meta" },
      h("span", {}, "model ", h("b", { text: M.path })),
      h("span", {}, h("b", { text: String(L) }), " layers × ", h("b", { text: String(NH) }), " heads, d = ", h("b", { text: String(M.d_model) }),
        ", vocabulary ", h("b", { text: String(M.vocab_size) })),
      h("span", {}, "norm ", h("b", { text: M.norm }), ", placement ", h("b", { text: M.placement }), M.residual ? "" : ", no residual"),
      h("span", {}, h("b", { text: String(T) }), " tokens; report position ", h("b", { text: String(R.position) }))));

    // tokens
    add(app, h("h2", { text: "Tokens" }));
    add(app, h("p", { class: "hint", text: "Hover a token to see its prediction, logit-lens column and norm profile; click to keep it selected (← → move the selection). " +
      "The underlined token is the report's position (--position)." }));
    var PAGE = 400, tokBox = h("div", { class: "tokens", id: "tokens" }), chips = {};
    var tokPager = null;
    function drawTokens(a, b) {
      tokBox.textContent = "";
      chips = {};
      for (var i = a; i < b; i++) {
        var c = h("span", { class: "tok" + (i === state.sel ? " sel" : "") + (i === R.position ? " report-pos" : ""), "data-pos": i, "data-text": toks[i], title: JSON.stringify(toks[i]), text: shown(toks[i]) });
        chips[i] = c;
        tokBox.appendChild(c);
      }
    }
    tokBox.addEventListener("mouseover", function (ev) {
      var t = ev.target.closest ? ev.target.closest(".tok") : null;
      if (!t) return;
      state.hov = +t.getAttribute("data-pos");
      changed();
    });
    tokBox.addEventListener("mouseleave", function () { state.hov = null; changed(); });
    tokBox.addEventListener("click", function (ev) {
      var t = ev.target.closest ? ev.target.closest(".tok") : null;
      if (!t) return;
      select(+t.getAttribute("data-pos"));
    });
    function select(i) {
      if (chips[state.sel]) chips[state.sel].classList.remove("sel");
      state.sel = i;
      if (tokPager && tokPager.pageOf(i) !== tokPager.current()) tokPager.go(tokPager.pageOf(i));
      if (chips[i]) chips[i].classList.add("sel");
      changed();
    }
    if (T > PAGE) {
      tokPager = pager(T, PAGE, drawTokens, "tokens");
      add(app, tokPager);
    }
    add(app, tokBox);
    if (tokPager) tokPager.go(tokPager.pageOf(state.sel)); else drawTokens(0, T);
    listeners.push(function (i) {
      Object.keys(chips).forEach(function (k) { chips[k].classList.toggle("hov", +k === state.hov); });
    });
    // the arrow keys move the selection by one token (Home / End: the first / last)
    document.addEventListener("keydown", function (ev) {
      if (ev.target && /^(INPUT|TEXTAREA|SELECT|BUTTON)$/.test(ev.target.tagName)) return;
      var to = ev.key === "ArrowLeft" ? state.sel - 1 : ev.key === "ArrowRight" ? state.sel + 1 : ev.key === "Home" ? 0 : ev.key === "End" ? T - 1 : null;
      if (to === null || to < 0 || to >= T) return;
      ev.preventDefault();
      state.hov = null;
      select(to);
    });

    // the position's panel
    var panel = h("div", { class: "panel", id: "token-panel" });
    var predCard = h("div", { class: "card", id: "pred" }), lensCard = h("div", { class: "card", id: "lens-col" }), profCard = h("div", { class: "card", id: "profile" });
    add(panel, [predCard, lensCard, profCard]);
    add(app, panel);
    var lensNames = R.logit_lens.map(function (l, k) { return k === 0 ? "embed" : "layer " + (k - 1); });
    var pointLabels = R.residual.map(function (p) { return shortPoint(p.name); });
    function drawPanel(i) {
      predCard.setAttribute("data-pos", i);
      predCard.textContent = "";
      add(predCard, h("h3", {}, "Prediction after position " + i + " ", h("span", { class: "mono", text: "“" + toks[i] + "”" })));
      var tb = h("table", { class: "data", id: "pred-table" }, h("tr", {}, h("th", { text: "#" }), h("th", { class: "l", text: "token" }), h("th", { class: "l", text: "probability" }), h("th", { text: "logit" })));
      P.top[i].forEach(function (t, r) {
        tb.appendChild(h("tr", { "data-rank": r, "data-id": t.id, "data-text": t.text, "data-prob": t.prob },
          h("td", { text: String(r + 1) }), h("td", { class: "tokcell ptext", text: t.text }),
          h("td", { class: "l pprob" }, h("span", { class: "bar", style: "width:" + Math.round(t.prob * 120) + "px" }), fmt(t.prob)),
          h("td", { text: fmt(t.logit, 3) })));
      });
      add(predCard, tb);
      lensCard.textContent = "";
      add(lensCard, h("h3", { text: "Logit lens at position " + i + " (top-1 per layer)" }));
      var lt = h("table", { class: "data", id: "lens-table" }, h("tr", {}, h("th", { class: "l", text: "stream after" }), h("th", { class: "l", text: "top-1" }), h("th", { class: "l", text: "probability" })));
      R.logit_lens.forEach(function (row, k) {
        var t = row.top1_by_position[i], c = viridis(t.prob);
        lt.appendChild(h("tr", {}, h("td", { class: "l", text: lensNames[k] }),
          h("td", { class: "tokcell", style: "background:" + rgb(c) + ";color:" + textOn(c), text: t.text }),
          h("td", { class: "l" }, h("span", { class: "bar", style: "width:" + Math.round(t.prob * 100) + "px" }), fmt(t.prob))));
      });
      add(lensCard, lt);
      profCard.textContent = "";
      add(profCard, h("h3", { text: "Residual-stream norm at position " + i }));
      add(profCard, lineChart({
        width: 370, height: 240, log: true, xLabels: pointLabels, yLabel: "L2 norm",
        series: [{ name: "position " + i, values: P.residual.map(function (r) { return r[i]; }), color: "#1f5fa8" },
                 { name: "mean over positions", values: R.residual.map(function (p) { return p.norm.mean; }), color: "#8a8a94", dash: "5 4", marker: "none" }]
      }));
    }
    listeners.push(drawPanel);

    // residual stream by layer
    add(app, h("h2", { text: "Residual stream by layer" }));
    add(app, h("p", { class: "hint", text: "L2 norm of the stream after the embedding and after every sublayer (a = attention, f = FFN), and of what each sublayer adds (its increment), on a log axis." }));
    // in the lessons' terms (tinylm lesson stream): what an increment is, and what the placement does to the stream
    var pl = M.placement;
    add(app, h("p", { class: "caption lesson-terms", text: "An increment is what one sublayer writes onto the stream: x after = x before + increment; the stream at any point is the embedding plus every increment so far. " +
      (pl === "post" || pl === "deepnorm" ? "This model is Post-Norm: each block normalises the sum x + F(x) itself, so the stream leaves every block at RMS 1 times the gains, a norm near sqrt(d) = " + fmt(Math.sqrt(M.d_model), 1) + ", and cannot grow with depth."
        : pl === "pre" || pl === "sandwich" ? "This model is " + (pl === "pre" ? "Pre-Norm" : "sandwich-normed") + ": nothing normalises the stream itself, so the increments pile up and its norm grows with depth (tinylm lesson stream)."
          : "This model's placement is " + pl + ".") }));
    var growth = h("div", { class: "charts", id: "growth" });
    add(app, growth);
    function incrAt(kind, i) { // increments placed at the stream point they produce
      var v = [], x = [];
      for (var l = 0; l < L; l++) {
        var k = 2 * l + (kind === "attn" ? 0 : 1);
        v.push(i === "mean" ? R.increments[k].norm.mean : P.increments[k][i]);
        x.push(k + 1);
      }
      return { values: v, x: x };
    }
    function drawGrowth(i) {
      growth.textContent = "";
      var series = function (which) {
        var stream = which === "mean" ? R.residual.map(function (p) { return p.norm.mean; }) : P.residual.map(function (r) { return r[which]; });
        var a = incrAt("attn", which), f = incrAt("ffn", which);
        return [{ name: "stream", values: stream, color: "#1f5fa8" },
                { name: "attention increment", values: a.values, x: a.x, color: "#e08a1e", dash: "4 3", marker: "diamond" },
                { name: "FFN increment", values: f.values, x: f.x, color: "#4a9a8a", dash: "2 3", marker: "square" }];
      };
      add(growth, lineChart({ title: "Mean over positions", xLabels: pointLabels, log: true, series: series("mean"), yLabel: "L2 norm" }));
      add(growth, lineChart({ title: "Position " + i + " “" + toks[i] + "”", xLabels: pointLabels, log: true, series: series(i), yLabel: "L2 norm" }));
    }
    listeners.push(drawGrowth);

    // logit lens grid (a window of positions)
    add(app, h("h2", { text: "Logit lens" }));
    add(app, h("p", { class: "hint", text: "Each block boundary of the stream through the model's own final norm and LM head: the top-1 token at every position, shaded by its probability. Click a cell to select its position." }));
    add(app, h("p", { class: "caption lesson-terms", text: "Why the first rows often read the input token itself: at the embedding the stream is (about) the token's own embedding row, and with an LM head tied to the embedding its logit for token j is e_j · e_t, largest as a rule for j = t. The blocks then move the stream toward the next token." }));
    add(app, legend("p = 0", "1", viridis));
    var lensWin = Math.min(T, 40), lensBox = h("div", { class: "scroll", id: "lens-grid" }), lensStart = 0;
    function drawLens(a, b) {
      lensStart = a;
      lensBox.textContent = "";
      var tb = h("table", { class: "lens" });
      var hr = h("tr", {}, h("th", { text: "position" }));
      for (var i = a; i < b; i++) hr.appendChild(h("th", { class: i === cur() ? "sel" : "", title: "position " + i, text: shown(toks[i]) }));
      var head = h("thead", {}, hr, (function () {
        var r = h("tr", {}, h("th", {}));
        for (var i = a; i < b; i++) r.appendChild(h("th", { class: "muted small", text: String(i) }));
        return r;
      })());
      tb.appendChild(head);
      var body = h("tbody");
      for (var k = R.logit_lens.length - 1; k >= 0; k--) {
        var tr = h("tr", {}, h("th", { text: lensNames[k] }));
        for (var j = a; j < b; j++) {
          var t = R.logit_lens[k].top1_by_position[j], c = viridis(t.prob);
          tr.appendChild(h("td", { class: j === cur() ? "sel" : "", "data-pos": j, "data-layer": k, style: "background:" + rgb(c) + ";color:" + textOn(c), text: shown(t.text) }));
        }
        body.appendChild(tr);
      }
      tb.appendChild(body);
      lensBox.appendChild(tb);
    }
    lensBox.addEventListener("mousemove", function (ev) {
      var td = ev.target.closest ? ev.target.closest("td[data-pos]") : null;
      if (!td) { hideTip(); return; }
      var j = +td.getAttribute("data-pos"), k = +td.getAttribute("data-layer"), t = R.logit_lens[k].top1_by_position[j];
      showTip(ev, lensNames[k] + ", position " + j + " “" + toks[j] + "”\ntop-1 “" + t.text + "”  p = " + fmt(t.prob));
    });
    lensBox.addEventListener("mouseleave", hideTip);
    lensBox.addEventListener("click", function (ev) {
      var td = ev.target.closest ? ev.target.closest("td[data-pos]") : null;
      if (td) select(+td.getAttribute("data-pos"));
    });
    // a window of lensWin positions, centred on the selected one; the buttons move it by half a window
    function centred(i) { return Math.max(0, Math.min(T - lensWin, i - Math.floor(lensWin / 2))); }
    var lensInfo = h("span");
    function moveLens(a) {
      a = Math.max(0, Math.min(T - lensWin, a));
      lensInfo.textContent = "positions " + a + "–" + (a + lensWin - 1) + " of " + T + " (0–" + (T - 1) + ")";
      drawLens(a, a + lensWin);
    }
    if (T > lensWin) {
      var half = Math.max(1, Math.floor(lensWin / 2));
      add(app, h("div", { class: "pager", id: "lens-pager" },
        h("button", { type: "button", text: "◀ earlier", onclick: function () { moveLens(lensStart - half); } }), lensInfo,
        h("button", { type: "button", text: "later ▶", onclick: function () { moveLens(lensStart + half); } })));
    }
    moveLens(centred(state.sel));
    add(app, lensBox);
    listeners.push(function (i) {
      if (state.hov === null && (i < lensStart || i >= lensStart + lensWin)) moveLens(centred(i));
      else moveLens(lensStart);
    });

    renderAttention(app, D, toks, function () { return cur(); }, listeners);
    renderNorms(app, D, toks, listeners, function () { return cur(); });
    renderExperts(app, D, toks, listeners, function () { return cur(); });
    var dlaFollow = renderDla(app, D, toks);
    if (dlaFollow) listeners.push(dlaFollow);
    changed();
  }

  function shortPoint(name) {
    if (name === "embed") return "emb";
    var m = /^layers\.(\d+)\.resid_(mid|post)$/.exec(name);
    return m ? m[1] + (m[2] === "mid" ? "a" : "f") : name;
  }

  // attention: a heatmap per layer x head, one opened in full
  function renderAttention(app, D, toks, cur, listeners) {
    var R = D.report, P = D.per_position, A = D.attention, M = D.model, T = toks.length, L = M.n_layers, NH = M.n_heads;
    // (a Python view may show some layers only: their own numbers)
    function lname(l) { return D.layer_labels ? String(D.layer_labels[l]) : String(l); }
    add(app, h("h2", { text: "Attention" }));
    var have = A && A.heads;
    if (!have) add(app, h("p", { class: "notice", id: "attn-omitted", text: "Attention patterns are not in this page: " + (A && A.omitted ? A.omitted : "not recorded") + "." }));
    else add(app, h("p", { class: "hint", text: "Every layer × head: row = query (destination) position, column = key (source) position, causal lower triangle. Under each: the largest pre-softmax logit and the entropy (nats) at the selected position. Click a head to open its pattern." }));
    add(app, legend("weight 0", "1", viridis));
    var cache = {};
    function pattern(idx) { // Float32Array of the lower triangle
      if (cache[idx]) return cache[idx];
      var bin = atob(A.heads[idx]), n = bin.length >> 1, out = new Float32Array(n), sc = A.scale || 65535;
      for (var i = 0; i < n; i++) out[i] = (bin.charCodeAt(2 * i) | (bin.charCodeAt(2 * i + 1) << 8)) / sc;
      cache[idx] = out;
      return out;
    }
    function at(p, i, j) { return p[(i * (i + 1)) / 2 + j]; }
    var grid = h("div", { class: "heads", id: "heads" }), caps = [];
    for (var l = 0; l < L; l++) {
      var row = h("div", { class: "head-row" }, h("div", { class: "rowlabel", text: "layer " + lname(l) }));
      for (var hh = 0; hh < NH; hh++) {
        var idx = l * NH + hh;
        var cap = h("div", { class: "head-cap" });
        caps.push(cap);
        var cell = h("div", { class: "head-cell", "data-layer": l, "data-head": hh, title: "layer " + lname(l) + " head " + hh + ": click to open" });
        if (have) {
          var nb = Math.min(T, 128), cv = h("canvas", { class: "head-thumb", width: nb, height: nb, "data-layer": l, "data-head": hh });
          drawThumb(cv, pattern(idx), nb);
          cell.appendChild(cv);
        } else {
          cell.appendChild(h("canvas", { class: "head-thumb", width: 1, height: 1, "data-layer": l, "data-head": hh }));
        }
        add(cell, [h("div", { class: "head-cap", style: "font-weight:600;color:#1b1b1f", text: "L" + lname(l) + " H" + hh }), cap]);
        cell.addEventListener("click", (function (l, hh, cell) { return function () { openHead(l, hh, cell); }; })(l, hh, cell));
        row.appendChild(cell);
      }
      grid.appendChild(row);
    }
    add(app, grid);
    function drawThumb(cv, p, nb) { // bins of the T x T pattern: the largest weight in each
      var ctx = cv.getContext("2d"), img = ctx.createImageData(nb, nb), f = T / nb;
      for (var bi = 0; bi < nb; bi++)
        for (var bj = 0; bj < nb; bj++) {
          var o = 4 * (bi * nb + bj), i0 = Math.floor(bi * f), i1 = Math.max(i0 + 1, Math.floor((bi + 1) * f)), j0 = Math.floor(bj * f), j1 = Math.max(j0 + 1, Math.floor((bj + 1) * f));
          if (j0 > i1 - 1) { img.data[o] = 240; img.data[o + 1] = 240; img.data[o + 2] = 240; img.data[o + 3] = 255; continue; }
          var mx = 0;
          for (var i = i0; i < i1; i++) for (var j = j0; j < j1 && j <= i; j++) { var v = at(p, i, j); if (v > mx) mx = v; }
          var c = viridis(mx);
          img.data[o] = c[0]; img.data[o + 1] = c[1]; img.data[o + 2] = c[2]; img.data[o + 3] = 255;
        }
      ctx.putImageData(img, 0, 0);
    }
    function drawCaps(i) {
      for (var k = 0; k < L * NH; k++) caps[k].textContent = "max " + fmt(P.head_max_logit[k][i], 2) + " · H " + fmt(P.head_entropy[k][i], 2);
    }
    listeners.push(drawCaps);

    // every head's sharpness at the selected position as two layer x head tables, shaded
    var statsBox = h("div", { class: "charts", id: "head-tables" });
    add(app, h("h3", { text: "Per head, at the selected position: largest pre-softmax logit and entropy" }));
    add(app, statsBox);
    function headTable(title, rows, lo, hi, digits) {
      var tb = h("table", { class: "lens head-table" });
      var hr = h("tr", {}, h("th", { text: title }));
      for (var hh = 0; hh < NH; hh++) hr.appendChild(h("th", { text: "H" + hh }));
      tb.appendChild(hr);
      for (var l = 0; l < L; l++) {
        var tr = h("tr", {}, h("th", { text: "layer " + lname(l) }));
        for (var hh2 = 0; hh2 < NH; hh2++) {
          var v = rows[l * NH + hh2], c = viridis(hi > lo ? (v - lo) / (hi - lo) : 0.5);
          tr.appendChild(h("td", { "data-layer": l, "data-head": hh2, style: "background:" + rgb(c) + ";color:" + textOn(c), text: fmt(v, digits) }));
        }
        tb.appendChild(tr);
      }
      tb.addEventListener("click", function (ev) {
        var td = ev.target.closest ? ev.target.closest("td[data-layer]") : null;
        if (!td) return;
        var cell = grid.querySelector('.head-cell[data-layer="' + td.getAttribute("data-layer") + '"][data-head="' + td.getAttribute("data-head") + '"]');
        if (cell) cell.click();
      });
      return tb;
    }
    function drawHeadTables(i) {
      var mx = [], en = [];
      for (var k = 0; k < L * NH; k++) { mx.push(P.head_max_logit[k][i]); en.push(P.head_entropy[k][i]); }
      var fin = function (a) { return a.filter(function (x) { return x !== null && isFinite(x); }); };
      var m1 = fin(mx), e1 = fin(en);
      statsBox.textContent = "";
      add(statsBox, [headTable("max logit", mx, Math.min.apply(null, m1.concat([0])), Math.max.apply(null, m1.concat([0])), 2),
                     headTable("entropy", en, 0, Math.max(Math.log(i + 1), 1e-9), 2)]);
    }
    listeners.push(drawHeadTables);
    add(app, h("p", { class: "hint", text: "Entropy is shaded from 0 (all weight on one key) to log(i + 1), the entropy of uniform attention over the i + 1 visible keys. Click a cell to open the head." }));

    var drawHeadStats = null;
    listeners.push(function (i) { if (drawHeadStats) drawHeadStats(i); });
    var detail = h("div", { id: "head-detail" });
    add(app, detail);
    function openHead(l, hh, cell) {
      Array.prototype.forEach.call(grid.querySelectorAll(".head-cell.open"), function (c) { c.classList.remove("open"); });
      cell.classList.add("open");
      detail.textContent = "";
      detail.setAttribute("data-layer", l);
      detail.setAttribute("data-head", hh);
      var idx = l * NH + hh, hs = R.heads[idx];
      add(detail, h("h3", { text: "Layer " + lname(l) + ", head " + hh }));
      var statBox = h("div", { id: "head-stats" });
      add(detail, statBox);
      drawHeadStats = function (i) {
        statBox.textContent = "";
        add(statBox, h("table", { class: "data" },
          h("tr", {}, h("th", { class: "l", text: "" }), h("th", { text: "at position " + i }), h("th", { text: "mean over positions" })),
          h("tr", {}, h("td", { class: "l", text: "max pre-softmax logit" }), h("td", { text: fmt(P.head_max_logit[idx][i], 3) }), h("td", { text: fmt(hs.max_logit.mean, 3) })),
          h("tr", {}, h("td", { class: "l", text: "entropy (nats)" }), h("td", { text: fmt(P.head_entropy[idx][i], 3) }), h("td", { text: fmt(hs.entropy.mean, 3) }))));
      };
      drawHeadStats(cur());
      if (!have) return;
      var p = pattern(idx), cellPx = Math.max(1, Math.min(14, Math.floor(720 / T))), lab = T <= 96 ? 110 : 0;
      var size = T * cellPx;
      var cv = h("canvas", { class: "pattern", id: "pattern-canvas", width: size + lab, height: size + lab, "data-layer": l, "data-head": hh });
      var ctx = cv.getContext("2d");
      ctx.fillStyle = "#ffffff";
      ctx.fillRect(0, 0, size + lab, size + lab);
      for (var i = 0; i < T; i++) {
        for (var j = 0; j <= i; j++) { ctx.fillStyle = rgb(viridis(at(p, i, j))); ctx.fillRect(lab + j * cellPx, i * cellPx, cellPx, cellPx); }
        if (i + 1 < T) { ctx.fillStyle = "#f0f0f0"; ctx.fillRect(lab + (i + 1) * cellPx, i * cellPx, (T - i - 1) * cellPx, cellPx); }
      }
      if (lab) { // token labels: queries on the left, keys below
        ctx.fillStyle = "#1b1b1f";
        ctx.font = Math.min(12, Math.max(11, cellPx)) + "px DejaVu Sans Mono, monospace";
        ctx.textAlign = "right";
        ctx.textBaseline = "middle";
        var every = Math.max(1, Math.ceil(12 / cellPx));
        for (var q = 0; q < T; q += every) ctx.fillText(clip(toks[q]) + " " + q, lab - 4, q * cellPx + cellPx / 2);
        for (var k2 = 0; k2 < T; k2 += every) {
          ctx.save();
          ctx.translate(lab + k2 * cellPx + cellPx / 2, size + 4);
          ctx.rotate(-Math.PI / 2);
          ctx.fillText(clip(toks[k2]) + " " + k2, 0, 0);
          ctx.restore();
        }
      }
      cv.addEventListener("mousemove", function (ev) {
        var rc = cv.getBoundingClientRect(), x = ev.clientX - rc.left - lab, y = ev.clientY - rc.top;
        var i = Math.floor(y / cellPx), j = Math.floor(x / cellPx);
        if (i < 0 || i >= T || j < 0 || j >= T) { hideTip(); return; }
        if (j > i) { showTip(ev, "query " + i + " cannot see key " + j + " (causal mask)"); return; }
        showTip(ev, "destination (query) " + i + " “" + toks[i] + "”\nsource (key) " + j + " “" + toks[j] + "”\nweight " + fmt(at(p, i, j)));
      });
      cv.addEventListener("mouseleave", hideTip);
      var box = h("div", { class: "pattern-box" }, cv);
      // the opened head's rows as text (read by tests and by anyone copying numbers): row i = keys 0..i
      var rows = [];
      if (T <= 256) for (var r = 0; r < T; r++) { var a = []; for (var c2 = 0; c2 <= r; c2++) a.push(+at(p, r, c2).toFixed(6)); rows.push(a); }
      var sums = [];
      for (var r2 = 0; r2 < T; r2++) { var sm = 0; for (var c3 = 0; c3 <= r2; c3++) sm += at(p, r2, c3); sums.push(+sm.toFixed(6)); }
      var values = h("pre", { id: "attn-rows", hidden: true, "data-row-sums": JSON.stringify(sums), text: T <= 256 ? JSON.stringify(rows) : "" });
      add(detail, h("div", { class: "detail-wrap" }, box, values));
      if (detail.getBoundingClientRect().top > window.innerHeight) detail.scrollIntoView({ block: "start" });
      add(detail, h("p", { class: "hint", text: "Rows: destination (query) tokens; columns: source (key) tokens. Each row sums to 1 (stored as 16-bit fractions). Hover for the weight." }));
    }
    function clip(t) { return t.length > 10 ? t.slice(0, 9) + "…" : t; }
  }

  // a mixture of experts: each MoE layer's load per expert over the tokens, the entropy of its
  // router, and the experts the selected (or hovered) token went to
  function renderExperts(app, D, toks, listeners, cur) {
    var X = D.report.experts;
    if (!X || !X.length) return;
    add(app, h("h2", { text: "Mixture of experts" }));
    add(app, h("p", { class: "hint", text: "Each MoE layer: the share (%) of the routed slots each expert got over these tokens, shaded against twice the uniform share; the entropy (nats) of the router's distribution; the experts the selected token went to (outlined), best first, with their weights. No capacity limit: no token is dropped." }));
    var box = h("div", { class: "scroll", id: "experts" });
    add(app, box);
    function draw(i) {
      box.textContent = "";
      var E = X[0].load.length, tb = h("table", { class: "lens" });
      var hr = h("tr", {}, h("th", { text: "layer" }), h("th", { text: "entropy" }));
      for (var e = 0; e < E; e++) hr.appendChild(h("th", { class: "small", text: "e" + e }));
      hr.appendChild(h("th", { class: "wide", text: "position " + i + " “" + toks[i] + "”: experts (weight)" }));
      tb.appendChild(h("thead", {}, hr));
      var body = h("tbody");
      X.forEach(function (x) {
        var chosen = x.token_experts[i] || [];
        var tr = h("tr", {}, h("th", { text: String(x.layer) }), h("td", { text: fmt(x.entropy, 3) }));
        x.load.forEach(function (v, e) {
          var c = viridis(Math.min(1, v * E / 2));
          tr.appendChild(h("td", { class: chosen.indexOf(e) >= 0 ? "sel" : "", title: "layer " + x.layer + ", expert " + e + ": " + fmt(100 * v, 1) + "% of the routed slots",
                                   style: "background:" + rgb(c) + ";color:" + textOn(c), text: fmt(100 * v, 0) }));
        });
        tr.appendChild(h("td", { class: "wide", text: chosen.map(function (e, j) { return e + " (" + fmt(x.token_weights[i][j], 3) + ")"; }).join(", ") }));
        body.appendChild(tr);
      });
      tb.appendChild(body);
      box.appendChild(tb);
    }
    listeners.push(draw);
    draw(cur());
  }

  function renderNorms(app, D, toks, listeners, cur) {
    var R = D.report, P = D.per_position;
    add(app, h("h2", { text: "Norms" }));
    add(app, h("p", { class: "hint", text: "RMS of each norm's input and output: what the norm does to the scale." }));
    var box = h("div", { class: "scroll", id: "norms" });
    add(app, box);
    if (!R.norms.length) { add(box, h("p", { text: "This model has no norms." })); return; }
    function draw(i) {
      box.textContent = "";
      var mx = 0;
      R.norms.forEach(function (n, k) { mx = Math.max(mx, P.norm_in_rms[k][i], P.norm_out_rms[k][i], n.in_rms.mean, n.out_rms.mean); });
      var tb = h("table", { class: "data" }, h("tr", {}, h("th", { class: "l", text: "norm" }), h("th", { class: "l", text: "RMS in → out at position " + i }),
        h("th", { text: "in" }), h("th", { text: "out" }), h("th", { text: "out / in" }), h("th", { text: "mean in" }), h("th", { text: "mean out" })));
      R.norms.forEach(function (n, k) {
        var a = P.norm_in_rms[k][i], b = P.norm_out_rms[k][i];
        tb.appendChild(h("tr", {}, h("td", { class: "l mono", text: n.name }),
          h("td", { class: "l" }, h("span", { class: "bar", style: "background:#8a8a94;width:" + Math.round((a / mx) * 140) + "px" }), h("br"),
            h("span", { class: "bar", style: "width:" + Math.round((b / mx) * 140) + "px" })),
          h("td", { text: fmt(a, 4) }), h("td", { text: fmt(b, 4) }), h("td", { text: fmt(b / a, 3) }),
          h("td", { text: fmt(n.in_rms.mean, 4) }), h("td", { text: fmt(n.out_rms.mean, 4) })));
      });
      add(box, tb);
      add(box, h("p", { class: "hint", text: "Bars: grey = input RMS, blue = output RMS (same scale)." }));
    }
    listeners.push(draw);
  }

  function renderDla(app, D, toks) {
    var R = D.report, dec = R.decomposition, pos = R.position;
    add(app, h("h2", { text: "Direct logit attribution" }));
    var box = h("div", { id: "dla" });
    add(app, box);
    if (!dec.applies) {
      add(box, h("p", { class: "notice dla-unsupported", text: "Direct logit attribution is not available for this model: " + dec.reason + "." }));
      return;
    }
    add(box, h("p", {}, "How much each term of the residual stream (the embedding and every sublayer's increment) adds directly to the logit of the predicted token ",
      h("span", { class: "mono", text: "“" + R.prediction.text + "”" }), " at position " + pos + " (p = " + fmt(R.prediction.prob) + "), through the final norm with the full residual's scale."));
    var items = dec.terms.map(function (t) { return { label: t.name.replace(/^layers\./, "L").replace(/\.out$/, ""), value: t.dla }; });
    if (dec.dla_final_norm_bias !== undefined) items.push({ label: "final norm bias", value: dec.dla_final_norm_bias });
    add(box, barChart(items, { width: 620 }));
    var capped = D.model && D.model.final_softcap > 0;
    add(box, h("p", { class: "hint", text: "Sum " + fmt(dec.dla_sum, 4) + " = the predicted token's logit " + (capped ? "before the final soft-cap (" + fmtG(D.model.final_softcap) + ") " : "") +
      fmt(dec.logit_before_softcap, 4) + "; the terms add up to the final residual within " + fmtG(dec.sum_rel_error) + " (relative)." }));
    // the attribution is computed at the report's position only: say so when another token is selected
    var away = h("p", { class: "notice dla-position", id: "dla-position", style: "display:none" });
    box.insertBefore(away, box.firstChild);
    return function (i) {
      if (i === pos) { away.style.display = "none"; return; }
      away.style.display = "";
      away.textContent = "Position " + i + " is selected: this attribution is position " + pos + "'s, the position the page was made for (tinylm inspect --position " + i + " --html computes it there).";
    };
  }

  // ---- --grad ---------------------------------------------------------------------------------------------
  function renderGrad(app, D) {
    var R = D.report, M = D.model, L = M.n_layers;
    add(app, h("h1", { text: "tinylm inspect --grad" }));
    add(app, h("div", { class: "meta" }, h("span", {}, "model ", h("b", { text: M.path })),
      h("span", {}, h("b", { text: String(L) }), " layers, norm ", h("b", { text: M.norm }), ", placement ", h("b", { text: M.placement }), M.residual ? "" : ", no residual"),
      h("span", {}, "one batch of ", h("b", { text: R.batch + " × " + R.seq }), " tokens, loss ", h("b", { text: fmt(R.loss, 4) }))));
    if (D.token_text && D.token_text.length) add(app, h("p", { class: "small muted" }, "Text: ", h("span", { class: "mono", text: D.token_text.join("") })));
    var box = h("div", { id: "grad" });
    add(app, box);
    add(box, h("h2", { text: "Gradient reaching the residual stream" }));
    add(box, h("p", { class: "hint", text: "L2 norm of dLoss/dx over the batch at every point of the stream (log axis): shrinking towards layer 0 = vanishing, growing = exploding." }));
    add(box, lineChart({ width: 640, log: true, xLabels: R.grad_residual.map(function (g) { return shortPoint(g.name); }), yLabel: "|dL/dx|",
      series: [{ name: "|dL/dx|", values: R.grad_residual.map(function (g) { return g.norm; }), color: "#1f5fa8" }] }));
    add(box, h("h2", { text: "Parameter gradients by layer" }));
    var layers = R.grad_layers.map(function (g) { return String(g.layer); });
    add(box, lineChart({ width: 640, log: true, xLabels: layers, xTitle: "layer", yLabel: "L2 norm",
      series: [{ name: "all", values: R.grad_layers.map(function (g) { return g.all; }), color: "#9dbbe0", width: 6 },
               { name: "attention", values: R.grad_layers.map(function (g) { return g.attention; }), color: "#e08a1e", marker: "diamond" },
               { name: "FFN", values: R.grad_layers.map(function (g) { return g.ffn; }), color: "#4a9a8a", marker: "square" },
               { name: "norms", values: R.grad_layers.map(function (g) { return g.norms; }), color: "#5a5a66", dash: "4 3" }] }));
    var tb = h("table", { class: "data", id: "grad-table" }, h("tr", {}, h("th", { class: "l", text: "layer" }), h("th", { text: "attention" }), h("th", { text: "FFN" }), h("th", { text: "norms" }), h("th", { text: "all" })));
    R.grad_layers.forEach(function (g) {
      tb.appendChild(h("tr", { "data-layer": g.layer }, h("td", { class: "l", text: String(g.layer) }), h("td", { text: fmtG(g.attention) }), h("td", { text: fmtG(g.ffn) }), h("td", { text: fmtG(g.norms) }), h("td", { text: fmtG(g.all) })));
    });
    add(box, tb);
    var pt = h("table", { class: "data" }, h("tr", {}, h("th", { class: "l", text: "parameter" }), h("th", { text: "gradient L2 norm" })));
    Object.keys(R.grad_params).forEach(function (k) { pt.appendChild(h("tr", {}, h("td", { class: "l mono", text: k }), h("td", { text: fmtG(R.grad_params[k]) }))); });
    add(box, [h("h3", { text: "Every parameter (all: " + fmtG(R.grad_total) + ")" }), h("div", { class: "scroll", style: "max-height:420px" }, pt)]);
  }

  // ---- the Python package's views (python/tinylm/views.py) -------------------------------------------------
  // A strip of token chips: hover or click selects a position (← → move it); calls changed(i).
  function tokenStrip(app, toks, state, changed) {
    var box = h("div", { class: "tokens", id: "tokens" }), chips = [];
    toks.forEach(function (t, i) {
      var c = h("span", { class: "tok" + (i === state.sel ? " sel" : ""), "data-pos": i, text: t });
      chips.push(c);
      box.appendChild(c);
    });
    function set(i, keep) {
      if (keep) { chips[state.sel].classList.remove("sel"); state.sel = i; chips[i].classList.add("sel"); }
      changed(i);
    }
    box.addEventListener("mouseover", function (ev) {
      var t = ev.target.closest ? ev.target.closest(".tok") : null;
      if (t) set(+t.getAttribute("data-pos"), false);
    });
    box.addEventListener("mouseleave", function () { changed(state.sel); });
    box.addEventListener("click", function (ev) {
      var t = ev.target.closest ? ev.target.closest(".tok") : null;
      if (t) set(+t.getAttribute("data-pos"), true);
    });
    document.addEventListener("keydown", function (ev) {
      var to = ev.key === "ArrowLeft" ? state.sel - 1 : ev.key === "ArrowRight" ? state.sel + 1 : null;
      if (to === null || to < 0 || to >= toks.length) return;
      ev.preventDefault();
      set(to, true);
    });
    add(app, box);
  }

  // kind "pattern": attention patterns of some layers (a cache's, a patched run's, any array), drawn by
  // renderAttention, the inspect page's own heatmaps
  function renderPattern(app, D) {
    var toks = D.tokens, T = toks.length, state = { sel: T - 1 }, listeners = [];
    add(app, h("h1", { text: D.title || "attention patterns" }));
    add(app, h("div", { class: "meta" },
      h("span", {}, h("b", { text: String(D.model.n_layers) }), " layer" + (D.model.n_layers === 1 ? "" : "s") + " × ",
        h("b", { text: String(D.model.n_heads) }), " heads"),
      h("span", {}, h("b", { text: String(T) }), " tokens"),
      D.source ? h("span", {}, "from ", h("b", { class: "mono", text: D.source })) : null));
    if (D.note) add(app, h("p", { class: "notice", id: "view-note", text: D.note }));
    add(app, h("p", { class: "hint", text: "Hover a token to see every head's numbers at that position; click to keep it." }));
    tokenStrip(app, toks, state, function (i) { listeners.forEach(function (f) { f(i); }); });
    renderAttention(app, D, toks, function () { return state.sel; }, listeners);
    listeners.forEach(function (f) { f(state.sel); });
  }

  // kind "positions": rows of numbers over the positions (a per-token loss, a logit-lens probability by
  // layer, a DLA by position, ...): the lens grid's shaded table and a line chart of each row
  function renderPositions(app, D) {
    var toks = D.tokens, T = toks.length, rows = D.rows, signed = !!D.diverging;
    add(app, h("h1", { text: D.title || "values by position" }));
    add(app, h("div", { class: "meta" }, h("span", {}, h("b", { text: String(rows.length) }), " row" + (rows.length === 1 ? "" : "s") + " × ",
      h("b", { text: String(T) }), " positions"), D.source ? h("span", {}, "from ", h("b", { class: "mono", text: D.source })) : null));
    if (D.note) add(app, h("p", { class: "notice", id: "view-note", text: D.note }));
    var all = [];
    rows.forEach(function (r) { r.values.forEach(function (v) { if (v !== null && isFinite(v)) all.push(v); }); });
    var lo = Math.min.apply(null, all.concat([0])), hi = Math.max.apply(null, all.concat([0]));
    var mx = Math.max(Math.abs(lo), Math.abs(hi), 1e-30);
    if (D.range) { lo = D.range[0]; hi = D.range[1]; mx = Math.max(Math.abs(lo), Math.abs(hi), 1e-30); }
    function colour(v) {
      if (v === null || !isFinite(v)) return [240, 240, 240];
      return signed ? diverging(v / mx) : viridis(hi > lo ? (v - lo) / (hi - lo) : 0.5);
    }
    add(app, signed ? legend(fmtG(-mx), fmtG(mx), function (t) { return diverging(2 * t - 1); }) : legend(fmtG(lo), fmtG(hi), viridis));
    var tb = h("table", { class: "lens", id: "values-table" });
    var hr = h("tr", {}, h("th", { text: "position" }));
    var nr = h("tr", {}, h("th", {}));
    for (var i = 0; i < T; i++) { hr.appendChild(h("th", { title: "position " + i, text: toks[i] })); nr.appendChild(h("th", { class: "muted small", text: String(i) })); }
    tb.appendChild(h("thead", {}, hr, nr));
    var body = h("tbody");
    rows.forEach(function (r, k) {
      var tr = h("tr", {}, h("th", { text: r.label }));
      r.values.forEach(function (v, j) {
        var c = colour(v);
        tr.appendChild(h("td", { "data-row": k, "data-pos": j, "data-value": v === null ? "" : String(v),
          style: "background:" + rgb(c) + ";color:" + textOn(c), text: fmt(v, 3) }));
      });
      body.appendChild(tr);
    });
    tb.appendChild(body);
    var box = h("div", { class: "scroll", id: "values" }, tb);
    box.addEventListener("mousemove", function (ev) {
      var td = ev.target.closest ? ev.target.closest("td[data-pos]") : null;
      if (!td) { hideTip(); return; }
      var j = +td.getAttribute("data-pos"), k = +td.getAttribute("data-row");
      showTip(ev, rows[k].label + ", position " + j + " “" + toks[j] + "”\n" + fmtG(rows[k].values[j]));
    });
    box.addEventListener("mouseleave", hideTip);
    add(app, box);
    if (rows.length <= 8) {
      var colours = ["#1f5fa8", "#e08a1e", "#4a9a8a", "#5a5a66", "#b35900", "#7b4fa8", "#2f8f3a", "#a83232"];
      var labels = toks.map(function (t, i) { return D.numbered || T > 48 ? String(i) : i + " " + t.trim().slice(0, 6); });
      add(app, h("div", { class: "charts", id: "values-chart" }, lineChart({ width: Math.min(1200, Math.max(560, 14 * T)), xLabels: labels,
        yLabel: D.y_label || "", series: rows.map(function (r, k) { return { name: r.label, values: r.values, color: colours[k] }; }) })));
    }
  }

  // ---- experiment pages ------------------------------------------------------------------------------------
  // An experiment's SVG figure as an <img> of a data: URL, never as markup in the page: a report is
  // a file people share, and an SVG image runs no script, loads nothing external and takes no
  // events, whatever the string holds (handlers, <script>, javascript: links, <foreignObject>,
  // external href / url()). The string is not parsed here (a parse in the page would meet its
  // handler attributes under the page's CSP); only its root tag gets the SVG namespace when it has
  // none (SVG written for inline HTML) and the page's font when it names none (an image does not
  // inherit it). A string that is not a well-formed SVG image shows a notice instead.
  function figureImage(text, title) {
    var t = String(text), i = t.search(/<svg[\s>\/]/);
    if (i < 0) return null;
    var tag = t.slice(i, t.indexOf(">", i) + 1 || t.length), extra = "";
    if (!/\sxmlns\s*=\s*["']http:\/\/www\.w3\.org\/2000\/svg["']/.test(tag)) extra += ' xmlns="http://www.w3.org/2000/svg"';
    if (!/\sfont-family\s*=/.test(tag)) extra += " font-family=\"system-ui, -apple-system, 'Segoe UI', sans-serif\"";
    t = t.slice(0, i + 4) + extra + t.slice(i + 4);
    var img = h("img", { class: "figure-img", alt: title || "figure" });
    img.addEventListener("error", function () {
      if (img.parentNode) img.parentNode.replaceChild(h("p", { class: "notice figure-error", text: "This figure is not a well-formed SVG image and is not shown." }), img);
    });
    // an SVG of no size of its own is as wide as the page (as inline SVG was)
    if (!/\swidth\s*=/.test(tag)) img.classList.add("fill");
    img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(t);
    return img;
  }

  function renderExperiment(app, D) {
    add(app, h("h1", { text: D.title }));
    if (D.name) add(app, h("div", { class: "meta" }, h("span", {}, "experiment ", h("b", { class: "mono", text: D.name }))));
    if (D.claim) add(app, h("p", { class: "claim" }, h("b", { text: "Claim: " }), D.claim));
    if (D.terms) add(app, h("p", { class: "caption lesson-terms", id: "terms" }, h("b", { text: "In the lessons' terms: " }), String(D.terms)));
    if (D.verdict) {
      var sup = D.verdict.supported;
      var cls = sup === true ? "yes" : sup === false ? "no" : "unknown";
      var word = sup === true ? "✓ Supported" : sup === false ? "✗ Not supported" : "? Inconclusive";
      add(app, h("div", { class: "verdict " + cls, id: "verdict", "data-supported": String(sup) }, h("span", { class: "badge", text: word }), h("span", { text: D.verdict.text || "" })));
    }
    (D.tables || []).forEach(function (t) {
      if (t.title) add(app, h("h2", { text: t.title }));
      var tb = h("table", { class: "data experiment-table" });
      // a column is numeric (right-aligned) when every cell that is not null is a number
      var numeric = t.columns.map(function (c, i) {
        return t.rows.every(function (r) { return r[i] === null || typeof r[i] === "number"; });
      });
      tb.appendChild(h("tr", {}, t.columns.map(function (c, i) { return h("th", { class: numeric[i] ? "" : "l", text: c }); })));
      t.rows.forEach(function (r) {
        tb.appendChild(h("tr", {}, r.map(function (c, i) {
          var txt = c === null ? "—" : String(c);
          if (typeof c === "number" && txt.length > 9) txt = String(+c.toPrecision(6));
          return h("td", { class: numeric[i] ? "" : "l", title: typeof c === "number" ? String(c) : null, text: txt });
        })));
      });
      add(app, h("div", { class: "scroll" }, tb));
    });
    (D.figures || []).forEach(function (f) {
      var img = figureImage(f.svg, f.title);
      var box = h("div", { class: "svg-box" }, img || h("p", { class: "notice", text: "(this figure holds no <svg> element)" }));
      add(app, h("figure", { class: "experiment-figure" }, f.title ? h("figcaption", { text: f.title }) : null, box));
    });
    if (D.notes && D.notes.length) {
      add(app, h("h2", { text: "Notes" }));
      add(app, h("ul", { class: "notes" }, D.notes.map(function (n) { return h("li", { text: n }); })));
    }
    if (D.command) {
      add(app, h("h2", { text: "Command" }));
      add(app, h("pre", { class: "command", text: D.command }));
    }
  }

  // ---- kind "lesson": tinylm lesson TOPIC --html (src/lessons/course.c) --------------------------------------
  // The topic's text in order; consecutive numbers form one table (section, what, computed, stated, source, ok).
  // "stream": the stream's norm by block and the increments. "figures.variants" (placement): a switch between
  // the variants, each drawn with its stream norms and its gradient norms side by side, computed ahead.
  var OKABE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#000000"];
  function renderLesson(app, D) {
    var zh = D.lang === "zh";
    add(app, h("h1", { text: D.title }));
    add(app, h("div", { class: "meta" }, h("span", {}, "tinylm lesson ", h("b", { class: "mono", text: D.topic })),
      h("span", { id: "agree", "data-agree": String(D.agree), "data-total": String(D.total),
        text: (zh ? "与给定值一致：" : "agree with the stated values: ") + D.agree + " / " + D.total })));
    if (D.note) add(app, h("p", { class: "hint", text: D.note }));
    var table = null, pre = null;
    (D.items || []).forEach(function (it) {
      if (it.kind !== "number") table = null;
      if (it.kind !== "pre") pre = null;
      if (it.kind === "heading") add(app, h("h2", { text: it.text }));
      else if (it.kind === "text") add(app, h("p", { text: it.text }));
      else if (it.kind === "pre") {
        if (!pre) { pre = h("pre", { class: "command lesson-pre" }); add(app, pre); }
        pre.textContent += (pre.textContent ? "\n" : "") + it.text;
      } else if (it.kind === "number") {
        if (!table) {
          table = h("table", { class: "data lesson-numbers" });
          table.appendChild(h("tr", {}, [zh ? "小节" : "section", zh ? "计算什么" : "what", zh ? "tinylm 算出" : "tinylm computes",
            zh ? "给定值" : "stated", zh ? "来源" : "source", ""].map(function (c) { return h("th", { class: "l", text: c }); })));
          add(app, h("div", { class: "scroll" }, table));
        }
        table.appendChild(h("tr", { class: "num-row " + (it.ok ? "ok" : "bad"), "data-ok": String(it.ok) },
          h("td", { class: "l mono", text: it.section }), h("td", { class: "l wrap", text: it.what }),
          h("td", { class: "l mono", text: it.computed }), h("td", { class: "l mono", text: it.stated }),
          h("td", { class: "l", text: it.source === "text" ? (zh ? "课文" : "a lesson text") : (zh ? "公式" : "the formula") }),
          h("td", { class: "l", text: it.ok ? "ok" : "MISMATCH" })));
      }
    });
    if (D.stream) {
      var S = D.stream, L = S.layers;
      var names = ["emb"].concat(Array.from({ length: L }, function (_, l) { return "L" + l; }));
      add(app, h("h2", { text: zh ? "残差流范数（按块）" : "The residual stream's norm by block" }));
      var box = h("div", { class: "lesson-charts", id: "stream-charts" });
      add(box, lineChart({ title: zh ? "残差流 L2 范数" : "stream L2 norm", xLabels: names, xTitle: zh ? "嵌入之后 / 第 l 块之后" : "after the embedding / after block l",
        series: [{ name: zh ? "最后 token" : "last token", values: S.norm_last_token, color: OKABE[0] },
                 { name: zh ? "各位置平均" : "mean over tokens", values: S.norm_mean, color: OKABE[1], dash: "6 3", marker: "square" }] }));
      add(box, lineChart({ title: zh ? "每块的增量（最后 token）" : "each block's increments (last token)", xLabels: names.slice(1), xTitle: zh ? "块" : "block",
        series: [{ name: zh ? "注意力" : "attention", values: S.attn_increment_last_token, color: OKABE[2] },
                 { name: "FFN", values: S.ffn_increment_last_token, color: OKABE[3], dash: "6 3", marker: "square" }] }));
      add(app, box);
    }
    var V = D.figures && D.figures.variants;
    if (V && V.length) renderVariants(app, D.figures, zh);
  }

  function renderVariants(app, F, zh) {
    var V = F.variants, L = F.layers;
    add(app, h("h2", { text: zh ? "切换放置方式：同一段文本上的残差流与梯度" : "Switch the placement: stream and gradients on the same window" }));
    if (F.window) add(app, h("p", { class: "hint" }, (zh ? "窗口（验证集开头）：" : "window (the start of the validation text): "), h("span", { class: "mono", text: JSON.stringify(F.window) })));
    var bar = h("div", { class: "variant-switch", role: "tablist" });
    var view = h("div", { class: "lesson-charts", id: "variant-charts" });
    var lossBox = h("div", { id: "variant-loss" });
    var buttons = V.map(function (v, i) {
      var b = h("button", { type: "button", class: "variant-btn", "data-variant": v.name, role: "tab", text: v.name });
      b.addEventListener("click", function () { show(i); });
      bar.appendChild(b);
      return b;
    });
    var names = ["emb"].concat(Array.from({ length: L }, function (_, l) { return "L" + l; }));
    var blocks = Array.from({ length: L }, function (_, l) { return "L" + l; });
    function show(i) {
      var v = V[i];
      buttons.forEach(function (b, j) { b.classList.toggle("active", j === i); b.setAttribute("aria-selected", String(j === i)); });
      view.setAttribute("data-variant", v.name);
      view.textContent = "";
      var a = lineChart({ title: v.name + (zh ? "：残差流范数" : ": stream norm"), xLabels: names, xTitle: zh ? "嵌入之后 / 第 l 块之后" : "after the embedding / after block l", log: true,
        series: [{ name: zh ? "初始化" : "at init", values: v.stream_init, color: OKABE[5], dash: "6 3", marker: "square" },
                 { name: zh ? "训练后" : "trained", values: v.stream_trained, color: OKABE[0] }] });
      a.setAttribute("id", "chart-stream");
      var g = lineChart({ title: v.name + (zh ? "：各块参数梯度范数" : ": gradient norm of each block's parameters"), xLabels: blocks, xTitle: zh ? "块" : "block", log: true,
        series: [{ name: zh ? "初始化" : "at init", values: v.grad_init, color: OKABE[5], dash: "6 3", marker: "square" },
                 { name: zh ? "训练后" : "trained", values: v.grad_trained, color: OKABE[4] }] });
      g.setAttribute("id", "chart-grad");
      add(view, [a, g]);
      lossBox.textContent = "";
      var loss = lineChart({ title: zh ? "训练损失（选中的加粗）" : "training loss (the selected one bold)", xLabels: F.steps.map(String), xTitle: zh ? "步" : "step", width: 760,
        series: V.map(function (w, j) { return { name: w.name, values: w.loss, color: OKABE[j % OKABE.length], width: j === i ? 4 : 1.5, dash: j === i ? null : "5 3", marker: j === i ? "circle" : "none" }; }) });
      loss.setAttribute("id", "chart-loss");
      add(lossBox, loss);
    }
    add(app, [bar, view, lossBox]);
    show(0);
  }

  // ---- kind "training": train --html (src/train/train_page.c) ------------------------------------------------
  // Loss with validation loss, learning rate, gradient norm, the largest attention logit and tokens/s by step.
  // While the run trains (live) the page reloads itself every refresh_s seconds; the last write does not.
  function renderTraining(app, D) {
    var P = D.points, Vd = D.validation;
    add(app, h("h1", { text: "tinylm train " + D.run }));
    add(app, h("div", { class: "meta" },
      h("span", { id: "train-status", "data-status": D.status, "data-live": String(D.live) }, "status ", h("b", { text: D.status })),
      h("span", {}, "step ", h("b", { id: "train-step", text: D.step + " / " + D.steps })),
      h("span", {}, "last loss ", h("b", { text: fmt(D.last_loss) })),
      h("span", {}, "last validation loss ", h("b", { text: fmt(D.last_val_loss) }))));
    add(app, h("p", { class: "hint", text: D.live ? "The run is training: this page is rewritten at each evaluation and reloads itself every " + D.refresh_s + " s."
      : "The run's report: written at its last step, it no longer reloads." }));
    var xl = P.step.map(function (x) { return String(x); });
    var at = {};
    P.step.forEach(function (x, i) { at[x] = i; });
    var vx = Vd.step.map(function (x) { return at[x]; });
    var box = h("div", { class: "lesson-charts", id: "train-charts" });
    function chart(id, opt) { var c = lineChart(opt); c.setAttribute("id", id); add(box, c); }
    chart("chart-loss", { title: "loss", xLabels: xl, xTitle: "step", series: [
      { name: "training loss", values: P.loss, color: OKABE[0], marker: "none", width: 1.5 },
      { name: "validation loss", values: Vd.loss, x: vx, color: OKABE[4], marker: "square", noLine: false }] });
    chart("chart-lr", { title: "learning rate", xLabels: xl, xTitle: "step", series: [{ name: "lr", values: P.lr, color: OKABE[2], marker: "none" }] });
    chart("chart-grad", { title: "gradient norm (before clipping)", xLabels: xl, xTitle: "step", log: true, series: [{ name: "grad norm", values: P.grad_norm, color: OKABE[3], marker: "none" }] });
    if (D.has_attn) chart("chart-attn", { title: "largest attention logit (any layer, head)", xLabels: xl, xTitle: "step", series: [{ name: "max |logit|", values: P.attn_max, color: OKABE[1], marker: "none" }] });
    else add(box, h("p", { class: "notice", text: "No attention-logit maxima in this run's metrics (an older run, or --log-attn was off for its steps)." }));
    chart("chart-tps", { title: "tokens per second", xLabels: xl, xTitle: "step", series: [{ name: "tokens/s", values: P.tokens_per_s, color: OKABE[5], marker: "none" }] });
    add(app, box);
    if (D.live) setTimeout(function () { location.reload(); }, Math.max(1, D.refresh_s || 5) * 1000);
  }

  // ---- main ---------------------------------------------------------------------------------------------------
  var app = document.getElementById("app");
  try {
    var D = JSON.parse(document.getElementById("tlm-data").textContent);
    app.textContent = "";
    if (D.kind === "inspect") renderInspect(app, D);
    else if (D.kind === "grad") renderGrad(app, D);
    else if (D.kind === "experiment") renderExperiment(app, D);
    else if (D.kind === "pattern") renderPattern(app, D);
    else if (D.kind === "positions") renderPositions(app, D);
    else if (D.kind === "lesson") renderLesson(app, D);
    else if (D.kind === "training") renderTraining(app, D);
    else throw new Error("unknown report kind " + D.kind);
    document.body.setAttribute("data-ready", "1");
  } catch (e) {
    app.textContent = "This report could not be drawn: " + e.message;
    document.body.setAttribute("data-ready", "error");
    throw e;
  }
})();
