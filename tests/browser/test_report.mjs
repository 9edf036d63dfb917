// test_report.mjs — tinylm's HTML reports in a real browser (headless Chromium via puppeteer-core).
//
//   node test_report.mjs --tinylm PATH --work DIR [--chromium /usr/bin/chromium] [--python python3]
//
// Launched by run_browser_test.py (which checks that node, npm and Chromium are there). Every page is
// opened from file:// with request interception: only the page's own file:// URL and data: URLs may
// load; any other request, any console error or warning, any uncaught exception fails the test.
// Pages: stories260K (llama2.c .bin + tok512.bin) on 64 tokens (hover = `inspect --json --position i`,
// attention rows sum to 1 and equal the engine's probabilities dumped with --probe, a non-blank
// screenshot, < 1 MB), a long prompt (attention omitted, pagers), tiny trained tinylm models
// (Pre-Norm, Post-Norm: DLA unsupported), a Hugging Face export, --grad, and `tinylm report`
// (experiment page; malformed input and bad paths give messages naming the file and field; the
// experiments' svgplot figures; a hostile description whose every field and figure tries to run
// script or load something: nothing runs, nothing is requested, the figures are SVG images).
import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import puppeteer from "puppeteer-core";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "..", "..");
const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), []));
const TINYLM = path.resolve(args.tinylm);
const WORK = path.resolve(args.work);
const CHROMIUM = args.chromium || "/usr/bin/chromium";
const PYTHON = args.python || "python3";
const STORIES = path.join(ROOT, "data", "stories260K.bin"), TOK512 = path.join(ROOT, "data", "tok512.bin");
const t0 = Date.now();

let passed = 0, failed = 0;
function check(ok, what, detail = "") {
  ok ? passed++ : failed++;
  console.log(`${what.padEnd(80)} ${ok ? "ok" : "FAIL"}${!ok && detail ? "  " + String(detail).slice(0, 600) : ""}`);
  return ok;
}
function tinylm(...a) {
  const p = spawnSync(TINYLM, a.map(String), { encoding: "utf8", maxBuffer: 1 << 28, env: { ...process.env, OMP_NUM_THREADS: "2" } });
  return { rc: p.status, out: p.stdout, err: p.stderr };
}
function must(r, what) {
  if (r.rc !== 0) throw new Error(`${what} failed (exit ${r.rc}): ${r.err}`);
  return r.out;
}

// a .npy float32 array (C order): {shape, data}
function readNpy(file) {
  const b = fs.readFileSync(file);
  const hlen = b[6] === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8), off = b[6] === 1 ? 10 : 12;
  const header = b.toString("latin1", off, off + hlen);
  if (!/'descr':\s*'<f4'/.test(header) || /'fortran_order':\s*True/.test(header)) throw new Error(`${file}: not C-order float32`);
  const shape = header.match(/'shape':\s*\(([^)]*)\)/)[1].split(",").filter((x) => x.trim()).map(Number);
  const start = off + hlen;
  return { shape, data: new Float32Array(b.buffer.slice(b.byteOffset + start, b.byteOffset + b.length)) };
}

fs.rmSync(WORK, { recursive: true, force: true });
fs.mkdirSync(WORK, { recursive: true });

const browser = await puppeteer.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--no-first-run", "--disable-dev-shm-usage", "--allow-file-access-from-files"],
});

// opens a report; returns {page, problems[]} (requests other than the file and data:, console errors/warnings, exceptions)
async function open(file, what) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1300, height: 1000 });
  const url = pathToFileURL(file).href, problems = [];
  await page.setRequestInterception(true);
  page.on("request", (r) => {
    const u = r.url();
    if (u === url || u.startsWith("data:")) r.continue();
    else { problems.push("request " + u); r.abort(); }
  });
  page.on("console", (m) => { if (["error", "warning", "warn", "assert"].includes(m.type())) problems.push(`console ${m.type()}: ${m.text()}`); });
  page.on("pageerror", (e) => problems.push("exception: " + e.message));
  page.on("requestfailed", (r) => { if (r.url() === url) problems.push("the page failed to load"); });
  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("body[data-ready]", { timeout: 10000 }).catch(() => problems.push("the page never finished drawing"));
  const ready = await page.evaluate(() => document.body.getAttribute("data-ready"));
  if (ready !== "1") problems.push("drawing failed: " + (await page.evaluate(() => document.getElementById("app").textContent)).slice(0, 200));
  return { page, problems, what };
}
function clean(o) {
  return check(o.problems.length === 0, `${o.what}: loads from file:// with no request, console error or exception`, o.problems.join("; "));
}

// counts distinct colours and non-white pixels of a PNG (decoded by the browser itself, in a blank page)
async function pngStats(png) {
  const p = await browser.newPage();
  await p.setContent("<canvas id=c></canvas>");
  const r = await p.evaluate(async (b64) => {
    const img = new Image();
    img.src = "data:image/png;base64," + b64;
    await img.decode();
    const c = document.getElementById("c");
    c.width = img.width, c.height = img.height;
    const ctx = c.getContext("2d");
    ctx.drawImage(img, 0, 0);
    const d = ctx.getImageData(0, 0, c.width, c.height).data, seen = new Set();
    let nonWhite = 0;
    for (let i = 0; i < d.length; i += 4) {
      seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      if (d[i] < 240 || d[i + 1] < 240 || d[i + 2] < 240) nonWhite++;
    }
    return { colours: seen.size, nonWhite: nonWhite / (d.length / 4), w: c.width, h: c.height };
  }, Buffer.from(png).toString("base64"));
  await p.close();
  return r;
}

// ---- 1. stories260K, 64 tokens ---------------------------------------------------------------------------
{
  const text = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. " +
    "One day, she saw a big red ball in the grass. She ran to it and kicked it high into the sky. Her friend Tom laughed.";
  const ids = must(tinylm("tokenize", "--tokenizer", TOK512, "--text", text, "--bos"), "tokenize").trim().split(/\s+/).slice(0, 64);
  check(ids.length === 64, "stories260K: 64 tokens of text", ids.length);
  const idText = ids.join(" ");
  const html = path.join(WORK, "stories64.html"), dump = path.join(WORK, "dump64");
  const r = tinylm("inspect", "--model", STORIES, "--tokenizer", TOK512, "--ids", idText, "--html", html,
                   "--probe", "layers.*.attn.probs", "--dump", dump);
  check(r.rc === 0 && fs.existsSync(html), "stories260K: inspect --html writes the page", r.err);
  const size = fs.statSync(html).size;
  check(size < 1 << 20, `stories260K: 64-token page is under 1 MB (${(size / 1024).toFixed(0)} KiB)`, size);
  const o = await open(html, "stories260K 64 tokens");
  const { page } = o;
  const nThumb = await page.$$eval("canvas.head-thumb", (a) => a.length);
  check(nThumb === 5 * 8, `stories260K: ${nThumb} attention heatmaps = 5 layers x 8 heads`);
  // hovering token i shows inspect --json --position i's top-k
  for (const i of [0, 7, 31, 50, 63]) {
    const j = JSON.parse(must(tinylm("inspect", "--model", STORIES, "--tokenizer", TOK512, "--ids", idText, "--json", "--position", i), "inspect --json"));
    const want = j.logit_lens[j.logit_lens.length - 1].top;
    await page.hover(`.tok[data-pos="${i}"]`);
    const got = await page.evaluate(() => ({
      pos: document.getElementById("pred").getAttribute("data-pos"),
      rows: [...document.querySelectorAll("#pred-table tr[data-rank]")].map((tr) => ({
        text: tr.getAttribute("data-text"), shown: tr.querySelector(".ptext").textContent,
        prob: +tr.getAttribute("data-prob"), probShown: tr.querySelector(".pprob").textContent })),
    }));
    const bad = [];
    if (got.pos !== String(i)) bad.push(`panel shows position ${got.pos}`);
    if (got.rows.length !== want.length) bad.push(`${got.rows.length} rows, want ${want.length}`);
    want.forEach((w, k) => {
      const g = got.rows[k];
      if (!g) return;
      if (g.text !== w.text || g.shown !== w.text) bad.push(`rank ${k}: "${g.shown}" vs "${w.text}"`);
      if (Math.abs(g.prob - w.prob) > 1e-6) bad.push(`rank ${k}: p ${g.prob} vs ${w.prob}`);
      if (Math.abs(parseFloat(g.probShown) - w.prob) > 6e-5) bad.push(`rank ${k}: shown "${g.probShown}" vs ${w.prob}`);
    });
    if (j.prediction.text !== want[0].text) bad.push("prediction != lens top-1");
    check(bad.length === 0, `stories260K: hover token ${i}: top-${want.length} = inspect --json --position ${i}`, bad.join("; "));
  }
  // click selects a token; the arrow keys move the selection
  await page.click('.tok[data-pos="10"]');
  await page.keyboard.press("ArrowRight");
  await page.keyboard.press("ArrowRight");
  const sel = await page.evaluate(() => [document.getElementById("pred").getAttribute("data-pos"), document.querySelector(".tok.sel")?.getAttribute("data-pos")]);
  check(sel[0] === "12" && sel[1] === "12", "stories260K: click token 10, then → → selects token 12", JSON.stringify(sel));
  // a head opened: its rows sum to 1 and equal the engine's probabilities (--probe ... --dump)
  for (const [l, hh] of [[0, 0], [2, 5], [4, 7]]) {
    await page.click(`.head-cell[data-layer="${l}"][data-head="${hh}"]`);
    const rows = await page.evaluate(() => {
      const d = document.getElementById("head-detail"), pre = document.getElementById("attn-rows");
      return { l: d.getAttribute("data-layer"), h: d.getAttribute("data-head"), rows: JSON.parse(pre.textContent) };
    });
    const T = 64, sums = rows.rows.map((r) => r.reduce((a, b) => a + b, 0));
    const shapeOk = rows.rows.length === T && rows.rows.every((r, i) => r.length === i + 1);
    const worstSum = Math.max(...sums.map((x) => Math.abs(x - 1)));
    check(rows.l === String(l) && rows.h === String(hh) && shapeOk && worstSum < 1e-3,
          `stories260K: head L${l} H${hh} opened: ${T} rows, each sums to 1 (worst ${worstSum.toExponential(1)})`, JSON.stringify(sums.slice(0, 4)));
    const probs = readNpy(path.join(dump, `layers.${l}.attn.probs.npy`)); // [1, H, T, T]
    let worst = 0;
    for (let i = 0; i < T; i++)
      for (let k = 0; k <= i; k++) worst = Math.max(worst, Math.abs(rows.rows[i][k] - probs.data[((hh * T) + i) * T + k]));
    check(worst < 1e-4, `stories260K: head L${l} H${hh}: the page's weights = the engine's (worst ${worst.toExponential(1)})`);
  }
  // hover on the opened pattern names the source and destination tokens and the weight
  await page.$eval("#pattern-canvas", (c) => c.scrollIntoView({ block: "center" }));
  const box = await (await page.$("#pattern-canvas")).boundingBox();
  await page.mouse.move(box.x + box.width - 5, box.y + box.height - 120); // near the last row, last keys (right of the labels)
  const tipText = await page.evaluate(() => { const t = document.getElementById("tip"); return t && t.style.display !== "none" ? t.textContent : ""; });
  check(/destination/.test(tipText) && /source/.test(tipText) && /weight/.test(tipText), "stories260K: hovering the pattern shows destination, source and weight", tipText);
  const dla = await page.$$eval("#dla svg rect", (a) => a.length);
  check(dla === 11, `stories260K: direct logit attribution has ${dla} bars (embed + 2 x 5 sublayers)`);
  const png = await page.screenshot({ fullPage: true });
  fs.writeFileSync(path.join(WORK, "stories64.png"), png);
  const st = await pngStats(png);
  check(st.colours > 200 && st.nonWhite > 0.05, `stories260K: screenshot ${st.w}x${st.h} is not blank (${st.colours} colours, ${(100 * st.nonWhite).toFixed(1)}% non-white)`);
  clean(o);
  await page.close();
}

// ---- 2. a long prompt: pagers, attention omitted past the page's limit --------------------------------------
{
  // 480 tokens: past the token pager (400) and the page's attention limit (5 x 8 heads x T(T+1)/2 > 4M
  // weights from T = 458), within stories260K's 512 positions
  const text = fs.readFileSync(path.join(ROOT, "data", "tinyshakespeare.txt"), "utf8").slice(0, 2400);
  const ids = must(tinylm("tokenize", "--tokenizer", TOK512, "--text", text), "tokenize").trim().split(/\s+/).slice(0, 480);
  const html = path.join(WORK, "long.html");
  const r = tinylm("inspect", "--model", STORIES, "--tokenizer", TOK512, "--ids", ids.join(" "), "--html", html);
  check(r.rc === 0 && ids.length === 480, "long prompt: inspect --html runs (480 tokens)", r.err);
  const o = await open(html, "long prompt");
  const info = await o.page.evaluate(() => ({
    T: document.querySelectorAll(".tok").length, omitted: !!document.getElementById("attn-omitted"),
    pager: !!document.getElementById("lens-pager"), cols: document.querySelectorAll("#lens-grid thead tr:first-child th").length - 1,
    thumbs: document.querySelectorAll("canvas.head-thumb").length, lastTok: !!document.querySelector('.tok[data-pos]'),
  }));
  check(info.pager && info.cols === 40 && info.omitted && info.thumbs === 40,
        "long prompt: logit lens in a window of 40 positions with a pager; attention omitted with a note", JSON.stringify(info));
  clean(o);
  await o.page.close();
}

// ---- 3. tiny trained models: Pre-Norm (tinylm dir, HF export), Post-Norm, --grad ------------------------------
const small = path.join(WORK, "small.txt");
fs.writeFileSync(small, fs.readFileSync(path.join(ROOT, "data", "tinyshakespeare.txt"), "utf8").slice(0, 20000));
function trainTiny(name, ...sets) {
  const out = path.join(WORK, name);
  must(tinylm("train", "--data", small, "--tokenizer", "chars", "--preset", "lesson15", "--steps", 1, "--seq", 16, "--batch", 2,
              "--sample", 0, "--set", "num_hidden_layers=3", "--set", "num_attention_heads=4", ...sets.flatMap((s) => ["--set", s]),
              "--out", out), "train " + name);
  return out;
}
const pre = trainTiny("pre"), post = trainTiny("post", "norm_placement=post");
for (const [name, model, L, H, dlaOk] of [["Pre-Norm (tinylm dir)", pre, 3, 4, true], ["Post-Norm (tinylm dir)", post, 3, 4, false]]) {
  const html = path.join(WORK, name.split(" ")[0] + ".html");
  const r = tinylm("inspect", "--model", model, "--prompt", "ROMEO: what light", "--html", html);
  if (!check(r.rc === 0, `${name}: inspect --html runs`, r.err)) continue;
  const o = await open(html, name);
  const info = await o.page.evaluate(() => ({
    thumbs: document.querySelectorAll("canvas.head-thumb").length, unsupported: document.querySelector("#dla .dla-unsupported")?.textContent || "",
    bars: document.querySelectorAll("#dla svg rect").length }));
  check(info.thumbs === L * H, `${name}: ${info.thumbs} heatmaps = ${L} x ${H}`);
  if (dlaOk) check(info.bars === 2 * L + 1 && !info.unsupported, `${name}: direct logit attribution drawn (${info.bars} bars)`);
  else check(/Post-Norm/.test(info.unsupported) && info.bars === 0, `${name}: the DLA section says it does not apply (Post-Norm)`, info.unsupported);
  await o.page.click('.head-cell[data-layer="1"][data-head="2"]');
  const sums = await o.page.evaluate(() => JSON.parse(document.getElementById("attn-rows").getAttribute("data-row-sums")));
  check(sums.every((x) => Math.abs(x - 1) < 1e-3), `${name}: head L1 H2's rows sum to 1`);
  clean(o);
  await o.page.close();
}
{
  const hf = path.join(WORK, "pre_hf");
  const e = tinylm("export", "--model", pre, "--out", hf);
  const html = path.join(WORK, "hf.html");
  const r = e.rc === 0 ? tinylm("inspect", "--model", hf, "--ids", "5 20 31 40 12 9", "--html", html) : e;
  if (check(r.rc === 0, "Hugging Face export: inspect --html runs", r.err)) {
    const o = await open(html, "Hugging Face dir");
    check(await o.page.$$eval("canvas.head-thumb", (a) => a.length) === 12, "Hugging Face dir: 3 x 4 heatmaps");
    clean(o);
    await o.page.close();
  }
}
{
  // a mixture of experts (a dense first layer, then 4 experts, top 2): the router section, and the
  // selected token's experts as the page's data says
  const moe = trainTiny("moe", "num_experts=4", "num_experts_per_tok=2", "moe_intermediate_size=16", "first_k_dense_replace=1");
  const html = path.join(WORK, "moe.html");
  const r = tinylm("inspect", "--model", moe, "--prompt", "ROMEO: what light", "--html", html);
  if (check(r.rc === 0, "MoE: inspect --html runs", r.err)) {
    const o = await open(html, "MoE");
    await o.page.click('.tok[data-pos="3"]');
    const info = await o.page.evaluate(() => {
      const X = JSON.parse(document.getElementById("tlm-data").textContent).report.experts;
      const rows = [...document.querySelectorAll("#experts tbody tr")];
      return { layers: X.map((x) => x.layer), rows: rows.length, cells: rows.map((tr) => tr.querySelectorAll("td").length),
               outlined: rows.map((tr) => [...tr.querySelectorAll("td.sel")].map((td) => td.cellIndex - 2)),
               want: X.map((x) => x.token_experts), head: document.querySelector("#experts thead th.wide")?.textContent || "" };
    });
    const pos = +(/position (\d+)/.exec(info.head) || [0, -1])[1];
    check(info.rows === 2 && info.layers.join() === "1,2" && info.cells.every((n) => n === 4 + 2),
          "MoE: the router table has layers 1 and 2 (layer 0 dense), 4 experts each", JSON.stringify(info));
    check(pos >= 0 && info.outlined.every((o, k) => o.slice().sort().join() === info.want[k][pos].slice().sort().join()),
          `MoE: the outlined experts are the ones position ${pos} went to`, JSON.stringify(info));
    clean(o);
    await o.page.close();
  }
}
{
  const html = path.join(WORK, "grad.html");
  const r = tinylm("inspect", "--grad", "--model", pre, "--data", small, "--seq", 16, "--batch", 2, "--html", html);
  if (check(r.rc === 0, "--grad: inspect --grad --html runs", r.err)) {
    const o = await open(html, "--grad");
    const info = await o.page.evaluate(() => ({ rows: document.querySelectorAll("#grad-table tr[data-layer]").length, charts: document.querySelectorAll("#grad svg.chart").length }));
    check(info.rows === 3 && info.charts === 2, "--grad: per-layer gradient norms (table of 3 layers, 2 charts)", JSON.stringify(info));
    clean(o);
    await o.page.close();
  }
}

// ---- 4. tinylm report: an experiment page; bad input --------------------------------------------------------
{
  const sample = path.join(HERE, "sample_experiment.json"), html = path.join(WORK, "experiment.html");
  const d = JSON.parse(fs.readFileSync(sample, "utf8"));
  const r = tinylm("report", sample, "--html", html);
  if (check(r.rc === 0, "tinylm report: writes the experiment page", r.err)) {
    const o = await open(html, "experiment page");
    const info = await o.page.evaluate(() => ({
      h1: document.querySelector("h1")?.textContent, verdict: document.querySelector(".verdict")?.className,
      verdictText: document.querySelector(".verdict")?.textContent, rows: document.querySelectorAll("table.experiment-table tr").length,
      bold: document.querySelectorAll("table.experiment-table b").length,
      figs: [...document.querySelectorAll("figure img.figure-img")].map((i) => [i.complete, i.naturalWidth, i.naturalHeight, i.width]),
      notes: document.querySelectorAll("ul.notes li").length, command: document.querySelector("pre.command")?.textContent,
      claim: document.querySelector(".claim")?.textContent }));
    check(info.h1 === d.title, "experiment page: the title", info.h1);
    check(info.verdict === "verdict yes" && info.verdictText.includes(d.verdict.text), "experiment page: the verdict (supported) and its text", info.verdictText);
    check(info.rows === 1 + d.tables[0].rows.length && info.bold === 0, "experiment page: the table (header + 5 rows, cell text escaped)", JSON.stringify(info));
    check(info.notes === 2 && info.command === d.command && info.claim.includes(d.claim), "experiment page: notes, command, claim");
    // the figure is an SVG image of its own size, and draws: its blue and orange lines are on screen
    const figImg = await o.page.$("figure.experiment-figure img");
    const fst = figImg ? await pngStats(await figImg.screenshot()) : { colours: 0, nonWhite: 0 };
    check(info.figs.length === 1 && info.figs[0][0] && info.figs[0][1] === 320 && info.figs[0][2] === 160 && info.figs[0][3] === 320 &&
          fst.colours > 8 && fst.nonWhite > 0.02,
          `experiment page: the figure drawn (320x160 SVG image, ${fst.colours} colours on screen)`, JSON.stringify([info.figs, fst]));
    const png = await o.page.screenshot({ fullPage: true });
    fs.writeFileSync(path.join(WORK, "experiment.png"), png);
    clean(o);
    await o.page.close();
  }
  const bad = [
    ["malformed.json", '{"kind": "experiment", "title": "x",', /malformed\.json.*not valid JSON/],
    ["wrong_kind.json", '{"kind": "inspect", "title": "x"}', /wrong_kind\.json.*"kind"/],
    ["bad_rows.json", '{"kind": "experiment", "title": "x", "tables": [{"columns": ["a", "b"], "rows": [[1]]}]}', /bad_rows\.json.*tables\[0\]\.rows\[0\]/],
    ["bad_verdict.json", '{"kind": "experiment", "title": "x", "verdict": {"supported": "yes"}}', /bad_verdict\.json.*verdict\.supported/],
  ];
  for (const [name, text, want] of bad) {
    const f = path.join(WORK, name);
    fs.writeFileSync(f, text);
    const b = tinylm("report", f, "--html", path.join(WORK, "never.html"));
    check(b.rc === 1 && want.test(b.err) && !fs.existsSync(path.join(WORK, "never.html")), `tinylm report ${name}: exit 1, names the file and field`, b.err);
  }
  const u = tinylm("report", sample, "--html", "/nonexistent-dir/x.html");
  check(u.rc === 1 && /\/nonexistent-dir\/x\.html/.test(u.err), "tinylm report to an unwritable path: exit 1 naming it", u.err);
  const u2 = tinylm("inspect", "--model", pre, "--prompt", "hi", "--html", "/nonexistent-dir/y.html");
  check(u2.rc === 1 && /\/nonexistent-dir\/y\.html/.test(u2.err), "inspect --html to an unwritable path: exit 1 naming it", u2.err);
}

// ---- 4b. the experiments' own figures (experiments/svgplot.py) drawn on an experiment page ---------------------
{
  const py = `import json, sys; sys.path.insert(0, sys.argv[1]); import svgplot as p
xs = list(range(1, 9))
line = p.line_plot([p.Series("pre-norm", xs, [2 ** (x / 2) for x in xs]), p.Series("post-norm", xs, [8.0] * 8),
                    p.Series("nan", xs, [1.0, float("nan"), 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])],
                   title="Norm by layer", xlabel="layer", ylabel="norm", ylog=True)
bar = p.bar_plot(["a", "b", "c"], [p.Series("loss", None, [1.2, 3.4, 2.2]), p.Series("val", None, [1.5, 3.0, 2.0])],
                 title="Loss", ylabel="loss")
print(json.dumps({"kind": "experiment", "title": "svgplot figures", "figures": [{"title": "line", "svg": line}, {"title": "bar", "svg": bar}]}))`;
  const p = spawnSync(PYTHON, ["-c", py, path.join(ROOT, "experiments")], { encoding: "utf8" });
  const json = path.join(WORK, "svgplot.json"), html = path.join(WORK, "svgplot.html");
  if (check(p.status === 0, "svgplot figures: experiments/svgplot.py draws a line and a bar plot", p.stderr)) {
    fs.writeFileSync(json, p.stdout);
    const r = tinylm("report", json, "--html", html);
    if (check(r.rc === 0, "svgplot figures: tinylm report writes the page", r.err)) {
      const o = await open(html, "svgplot figures");
      const imgs = await o.page.$$("figure img.figure-img");
      const sizes = await o.page.$$eval("figure img.figure-img", (a) => a.map((i) => [i.complete, i.naturalWidth, i.naturalHeight]));
      const stats = [];
      for (const im of imgs) stats.push(await pngStats(await im.screenshot()));
      check(sizes.length === 2 && stats.length === 2 && sizes.every((z) => z[0] && z[1] === 760 && z[2] === 460) && stats.every((st) => st.colours > 20 && st.nonWhite > 0.03),
            "svgplot figures: both drawn as 760x460 SVG images, not blank", JSON.stringify([sizes, stats]));
      fs.writeFileSync(path.join(WORK, "svgplot.png"), await o.page.screenshot({ fullPage: true }));
      clean(o);
      await o.page.close();
    }
  }
}

// ---- 5. a hostile experiment description: nothing in it may run or fetch ---------------------------------------
// Every field that reaches the page carries markup; the figures carry every way an SVG string can run
// script or load something. Each payload that runs records itself in top.__pwned (a global of the
// page); each load goes to http://127.0.0.1:9/ (aborted, and recorded by open()). The page must
// draw, show the fields as text and the figures as pictures, run none of it and request nothing.
{
  const RUN = (tag) => `(top.__pwned=top.__pwned||[]).push('${tag}')`;
  const EVIL = "http://127.0.0.1:9/";
  const NS = 'xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"';
  const box = (inner, extra = "") => `<svg ${NS} width="200" height="80" ${extra}><rect width="200" height="80" fill="#1f5fa8"/>${inner}</svg>`;
  const markup = (tag) => `<img src="${EVIL}${tag}.png" onerror="${RUN(tag)}"><script>${RUN(tag + "-script")}</script><b>bold?</b>`;
  const esc = (t) => t.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/"/g, "&quot;"); // for an XML attribute
  const XHTML = (inner) => `<foreignObject width="200" height="80"><div xmlns="http://www.w3.org/1999/xhtml">${inner}</div></foreignObject>`;
  const figures = [ // each is well-formed XML (so that it is drawn), bar the last
    ["img onerror", box(XHTML(`<img src="x" onerror="${RUN("img-onerror")}"/><img src="${EVIL}fo.png" onerror="${RUN("foreign-onerror")}"/>`) +
      `<img src="x" onerror="${RUN("svg-img-onerror")}"/>`)],
    ["svg onload", box("", `onload="${RUN("svg-onload")}"`)],
    ["script element", box(`<script>${RUN("svg-script")}</script><script href="${EVIL}s.js"/><script xlink:href="${EVIL}x.js"/>` +
      `<script type="text/javascript"><![CDATA[${RUN("cdata-script")}]]></script>`)],
    ["animate onbegin", box(`<animate onbegin="${RUN("animate-onbegin")}" attributeName="x" dur="1ms"/>` +
      `<rect width="10" height="10"><animate attributeName="width" from="10" to="20" dur="1ms" onend="${RUN("animate-onend")}"/></rect>`)],
    ["set onbegin / set href", box(`<set onbegin="${RUN("set-onbegin")}" attributeName="fill" to="red" dur="1ms"/>` +
      `<a id="setlink"><set attributeName="href" to="javascript:${RUN("set-href")}"/><rect width="200" height="80" fill-opacity="0"/></a>`)],
    ["iframe srcdoc", box(XHTML(`<iframe srcdoc="${esc(`<script>${RUN("iframe-srcdoc")}</script><img src="${EVIL}iframe.png">`)}"></iframe>` +
      `<iframe src="javascript:${RUN("iframe-js")}"></iframe>`))],
    ["javascript: links", box(`<a href="javascript:${RUN("a-href")}"><rect width="200" height="80" fill-opacity="0"/></a>` +
      `<a xlink:href="javascript:${RUN("a-xlink")}"><text x="10" y="40">click</text></a>`)],
    ["external references", box(`<image href="${EVIL}image.png" width="10" height="10"/><image xlink:href="${EVIL}ximage.png" width="10" height="10"/>` +
      `<use href="${EVIL}sprite.svg#a"/><use xlink:href="${EVIL}xsprite.svg#a"/>` +
      `<filter id="f"><feImage href="${EVIL}fe.png"/></filter><rect width="5" height="5" filter="url(#f)"/>`)],
    ["foreignObject", box(XHTML(`<object data="${EVIL}o.svg"></object><embed src="${EVIL}e.svg"/><link rel="stylesheet" href="${EVIL}l.css"/>` +
      `<details open="" ontoggle="${RUN("details-ontoggle")}"><summary>s</summary></details><base href="${EVIL}"/>` +
      `<meta http-equiv="refresh" content="0;url=javascript:${RUN("meta-refresh")}"/><form action="${EVIL}"><button>go</button></form>` +
      `<video src="${EVIL}v.mp4" onerror="${RUN("video-onerror")}"></video>`))],
    ["CSS url()", box(`<style>@import url(${EVIL}import.css); rect { fill: url(${EVIL}fill.svg#p); } @font-face { font-family: x; src: url(${EVIL}f.woff); }</style>` +
      `<rect width="50" height="50" style="fill:url(${EVIL}style.svg#p); background-image:url(${EVIL}bg.png); cursor:url(${EVIL}c.cur), auto"/>` +
      `<text x="5" y="70" style="font-family: x">font</text>`)],
    ["not XML", box(`<img src=x onerror="${RUN("malformed-onerror")}"><br>`)],
  ];
  const d = {
    kind: "experiment", name: markup("name"), title: "</title><script>" + RUN("title") + "</script>" + markup("title"),
    claim: markup("claim"), command: markup("command"), verdict: { supported: false, text: markup("verdict") },
    tables: [{ title: markup("table-title"), columns: [markup("column"), "n"], rows: [[markup("cell"), 1], ["</script><!--", 2]] }],
    figures: figures.map(([title, svg]) => ({ title: markup("fig-title") + " " + title, svg })),
    notes: [markup("note"), "javascript:" + RUN("note-js")],
  };
  const json = path.join(WORK, "hostile.json"), html = path.join(WORK, "hostile.html");
  fs.writeFileSync(json, JSON.stringify(d));
  const r = tinylm("report", json, "--html", html);
  if (check(r.rc === 0, "hostile experiment: tinylm report writes the page", r.err)) {
    const o = await open(html, "hostile experiment");
    const { page } = o;
    // hover and click every figure (event handlers, links), then give timers and animations time to fire
    for (const f of await page.$$("figure.experiment-figure")) {
      await f.scrollIntoView().catch(() => {});
      const b = await f.boundingBox();
      if (b) { await page.mouse.move(b.x + b.width / 2, b.y + b.height - 20); await page.mouse.click(b.x + b.width / 2, b.y + b.height - 20); }
    }
    await new Promise((res) => setTimeout(res, 300));
    const info = await page.evaluate(() => ({
      pwned: window.__pwned || [], url: location.href, frames: window.frames.length, ready: document.body.getAttribute("data-ready"),
      h1: document.querySelector("h1")?.textContent, title: document.title, figures: document.querySelectorAll("figure.experiment-figure").length,
      images: [...document.querySelectorAll("figure.experiment-figure img")].map((i) => ({ ok: i.complete && i.naturalWidth > 0, src: i.src.slice(0, 30) })),
      live: document.querySelectorAll("#app script, #app iframe, #app object, #app embed, #app img:not(figure img), #app svg, #app foreignObject, #app a, #app form, #app base, #app meta, #app link").length,
      cell: document.querySelector("table.experiment-table td")?.textContent, notices: document.querySelectorAll("figure .figure-error").length,
      notes: [...document.querySelectorAll("ul.notes li")].map((li) => li.textContent), command: document.querySelector("pre.command")?.textContent,
    }));
    const frames = page.frames().length;
    check(info.pwned.length === 0, "hostile experiment: no script of the description ran", info.pwned.join(", "));
    check(info.ready === "1" && info.url === pathToFileURL(html).href && info.frames === 0 && frames === 1,
          "hostile experiment: the page drew and stayed itself (no navigation, no frame)", JSON.stringify({ ...info, frames }));
    check(info.h1 === d.title && info.title === d.title && info.cell === d.tables[0].rows[0][0] && info.command === d.command &&
          info.notes[0] === d.notes[0] && info.notes[1] === d.notes[1],
          "hostile experiment: title, table cell, notes and command are shown as text", JSON.stringify(info));
    check(info.live === 0, "hostile experiment: no element of the description is live in the page", info.live);
    const n = figures.length - 1;
    check(info.figures === figures.length && info.images.length === n && info.images.every((i) => i.ok && i.src.startsWith("data:image/svg+xml")) &&
          info.notices === 1, `hostile experiment: ${n} figures drawn as SVG images, the one that is not XML replaced by a notice`, JSON.stringify(info));
    fs.writeFileSync(path.join(WORK, "hostile.png"), await page.screenshot({ fullPage: true }));
    clean(o);
    await page.close();
  }
}

await browser.close();
console.log(`${passed} passed, ${failed} failed (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
process.exit(failed ? 1 : 0);
