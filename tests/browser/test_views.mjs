// test_views.mjs — the Python package's HTML views (python/tinylm/views.py) in headless Chromium.
//
//   node test_views.mjs --pages DIR [--chromium /usr/bin/chromium]
//
// DIR is make_views.py's output (manifest.json says what each page must show). Each page is opened from
// file:// with request interception (only its own URL and data: may load; any request, console error or
// exception fails), as test_report.mjs opens the inspect pages. Checks: the heatmaps of every layer x head;
// the opened head's rows = the Python array (to 16 bits); a patched run's head shows the patch; weights
// above 1 are noticed; arrays over the positions: every cell's value and label; hostile token strings and
// titles are text and run nothing; _repr_html_'s sandboxed iframes draw inside a host page and cannot
// reach it.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import puppeteer from "puppeteer-core";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), []));
const DIR = path.resolve(args.pages);
const CHROMIUM = args.chromium || "/usr/bin/chromium";
const M = JSON.parse(fs.readFileSync(path.join(DIR, "manifest.json"), "utf8"));
const t0 = Date.now();
let passed = 0, failed = 0;
function check(ok, what, detail = "") {
  ok ? passed++ : failed++;
  console.log(`${what.padEnd(86)} ${ok ? "ok" : "FAIL"}${!ok && detail ? "  " + String(detail).slice(0, 600) : ""}`);
  return ok;
}

const browser = await puppeteer.launch({
  executablePath: CHROMIUM, headless: true,
  args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--no-first-run", "--disable-dev-shm-usage"],
});

async function open(file, what, frameReady = false) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1300, height: 1000 });
  const url = pathToFileURL(file).href, problems = [], dialogs = [];
  await page.setRequestInterception(true);
  page.on("request", (r) => {
    const u = r.url();
    if (u === url || u.startsWith("data:") || u === "about:srcdoc") r.continue();
    else { problems.push("request " + u); r.abort(); }
  });
  page.on("console", (m) => { if (["error", "warning", "warn", "assert"].includes(m.type())) problems.push(`console ${m.type()}: ${m.text()}`); });
  page.on("pageerror", (e) => problems.push("exception: " + e.message));
  page.on("dialog", (d) => { dialogs.push(d.message()); d.dismiss(); });
  await page.goto(url, { waitUntil: "load" });
  if (!frameReady) {
    await page.waitForSelector("body[data-ready]", { timeout: 10000 }).catch(() => problems.push("the page never finished drawing"));
    const ready = await page.evaluate(() => document.body.getAttribute("data-ready"));
    if (ready !== "1") problems.push("drawing failed: " + (await page.evaluate(() => document.getElementById("app").textContent)).slice(0, 200));
  }
  return { page, problems, dialogs, what };
}
function clean(o) {
  return check(o.problems.length === 0 && o.dialogs.length === 0, `${o.what}: loads with no request, dialog, console error or exception`,
               o.problems.concat(o.dialogs).join("; "));
}

// the opened head's rows (report.js writes them to #attn-rows) against the array's
async function openedRows(page, layer, head) {
  await page.click(`.head-cell[data-layer="${layer}"][data-head="${head}"]`);
  await page.waitForSelector("#attn-rows");
  return JSON.parse(await page.$eval("#attn-rows", (e) => e.textContent));
}
function worstDiff(got, want) {
  let w = 0;
  if (got.length !== want.length) return Infinity;
  for (let i = 0; i < want.length; i++) {
    if (got[i].length !== i + 1) return Infinity;
    for (let j = 0; j <= i; j++) w = Math.max(w, Math.abs(got[i][j] - want[i][j]));
  }
  return w;
}

// ---- patterns -----------------------------------------------------------------------------------------
for (const key of ["cache", "patched", "scaled"]) {
  const m = M[key];
  const o = await open(m.file, `view ${key}`);
  const { page } = o;
  const info = await page.evaluate(() => ({
    thumbs: document.querySelectorAll("canvas.head-thumb").length,
    toks: [...document.querySelectorAll("#tokens .tok")].map((t) => t.textContent),
    rowLabels: [...document.querySelectorAll(".head-row .rowlabel")].map((e) => e.textContent),
    note: document.getElementById("view-note")?.textContent || "",
    tables: document.querySelectorAll("table.head-table").length,
  }));
  check(info.thumbs === m.layers * m.heads, `view ${key}: ${info.thumbs} heatmaps = ${m.layers} layers x ${m.heads} heads`);
  check(JSON.stringify(info.toks) === JSON.stringify(m.tokens), `view ${key}: the token strip is the run's tokens`);
  if (m.label) check(info.rowLabels[0] === "layer " + m.label, `view ${key}: the layer keeps its own number (${info.rowLabels[0]})`);
  check(info.tables === 2, `view ${key}: the per-head max-logit and entropy tables`);
  const top = Math.max(1, ...m.rows.flat());
  const rows = await openedRows(page, m.open[0], m.open[1]);
  const w = worstDiff(rows, m.rows);
  check(w <= top / 65535 + 1e-6, `view ${key}: opened head L${m.open[0]}H${m.open[1]}: rows = the array's (worst ${w.toExponential(2)})`);
  if (key === "patched") {
    const u = rows.every((r, i) => r.every((x) => Math.abs(x - 1 / (i + 1)) < 2e-5));
    check(u && worstDiff(rows, m.clean_rows) > 0.05, "view patched: the patched head shows uniform attention, not the clean run's");
  }
  if (key === "scaled") check(/outside \[0, 1\]/.test(info.note), "view scaled: weights above 1 are noticed", info.note);
  // hovering a token moves the caps' position
  await page.hover(`#tokens .tok[data-pos="3"]`);
  const cap = await page.$eval(".head-cell .head-cap + .head-cap", (e) => e.textContent).catch(() => "");
  check(/max .* · H /.test(cap), `view ${key}: hovering a token updates every head's caption`, cap);
  if (key === "cache") fs.writeFileSync(path.join(DIR, "cache.png"), await page.screenshot({ fullPage: true }));
  clean(o);
  await page.close();
}

// ---- arrays over the positions ---------------------------------------------------------------------------------
for (const key of ["loss", "two"]) {
  const m = M[key];
  const o = await open(m.file, `view ${key}`);
  const { page } = o;
  const info = await page.evaluate(() => ({
    labels: [...document.querySelectorAll("#values-table tbody th")].map((e) => e.textContent),
    head: [...document.querySelectorAll("#values-table thead tr:first-child th")].slice(1).map((e) => e.textContent),
    cells: [...document.querySelectorAll("#values-table tbody tr")].map((tr) => [...tr.querySelectorAll("td")].map((td) => td.getAttribute("data-value"))),
    chart: document.querySelectorAll("#values-chart svg path").length,
  }));
  check(JSON.stringify(info.labels) === JSON.stringify(m.labels) && JSON.stringify(info.head) === JSON.stringify(m.tokens),
        `view ${key}: row labels and the tokens over the columns`, JSON.stringify(info.labels));
  let worst = 0, shape = info.cells.length === m.rows.length;
  m.rows.forEach((r, k) => {
    if (!info.cells[k] || info.cells[k].length !== r.length) { shape = false; return; }
    r.forEach((x, j) => {
      const g = info.cells[k][j];
      if (x === null) { if (g !== "") shape = false; return; }
      worst = Math.max(worst, Math.abs(+g - x) / Math.max(1e-9, Math.abs(x)));
    });
  });
  check(shape && worst < 1e-5, `view ${key}: every cell holds the array's value (relative ${worst.toExponential(2)}; NaN blank)`);
  check(info.chart >= m.rows.length, `view ${key}: a line chart of each row`);
  clean(o);
  await page.close();
}

// ---- hostile strings ------------------------------------------------------------------------------------------------
for (const key of ["hostile", "hostile_positions"]) {
  const m = M[key];
  const o = await open(m.file, `view ${key}`);
  const { page } = o;
  if (key === "hostile") await openedRows(page, 0, 0);
  for (const t of await page.$$("#tokens .tok, #values-table td")) await t.hover().catch(() => {});
  await new Promise((r) => setTimeout(r, 200));
  const info = await page.evaluate(() => ({
    pwned: window.__pwned || [], url: location.href, frames: window.frames.length, title: document.title,
    h1: document.querySelector("h1")?.textContent,
    toks: [...document.querySelectorAll("#tokens .tok")].map((t) => t.textContent),
    head: [...document.querySelectorAll("#values-table thead tr:first-child th")].slice(1).map((e) => e.textContent),
    label: document.querySelector("#values-table tbody th")?.textContent,
    live: document.querySelectorAll("#app script, #app iframe, #app img, #app a, #app object, #app embed, #app form, #app foreignObject").length,
  }));
  check(info.pwned.length === 0, `view ${key}: no token or title string ran`, info.pwned.join(", "));
  check(info.title === m.title && info.h1 === m.title, `view ${key}: the title is text (page title and heading)`, JSON.stringify([info.title, info.h1]));
  const shown = key === "hostile" ? info.toks : info.head;
  check(JSON.stringify(shown) === JSON.stringify(m.tokens), `view ${key}: every token string shown as itself, as text`, JSON.stringify(shown));
  if (key === "hostile_positions") check(info.label === m.labels[0], "view hostile_positions: the row label is text");
  check(info.live === 0 && info.frames === 0 && info.url === pathToFileURL(m.file).href,
        `view ${key}: no element of the data is live, no frame, no navigation`, JSON.stringify(info));
  clean(o);
  await page.close();
}

// ---- Jupyter: _repr_html_ in a host page --------------------------------------------------------------------------
{
  const m = M.notebook;
  const o = await open(m.file, "notebook host page (_repr_html_)", true);
  const { page } = o;
  const deadline = Date.now() + 10000;
  let frames = [];
  while (Date.now() < deadline) {
    frames = page.frames().filter((f) => f !== page.mainFrame());
    const ready = await Promise.all(frames.map((f) => f.evaluate(() => document.body && document.body.getAttribute("data-ready")).catch(() => null)));
    if (frames.length === m.frames && ready.every((r) => r === "1")) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const inner = await Promise.all(frames.map((f) => f.evaluate(() => ({
    ready: document.body.getAttribute("data-ready"), toks: [...document.querySelectorAll("#tokens .tok")].map((t) => t.textContent),
    head: [...document.querySelectorAll("#values-table thead tr:first-child th")].slice(1).map((e) => e.textContent),
    thumbs: document.querySelectorAll("canvas.head-thumb").length, pwned: (window.__pwned || []).length,
    parent: (() => { try { return window.parent.document.getElementById("host").textContent; } catch (e) { return "blocked"; } })(),
    origin: window.origin,
  })).catch((e) => ({ error: String(e) }))));
  check(frames.length === m.frames && inner.every((i) => i.ready === "1"), `_repr_html_: ${m.frames} sandboxed frames draw their pages in the host page`, JSON.stringify(inner));
  check(inner[0] && inner[0].thumbs === 40 && JSON.stringify(inner[0].toks) === JSON.stringify(m.tokens), "_repr_html_: the cache's 40 heatmaps and tokens");
  check(inner[1] && JSON.stringify(inner[1].head) === JSON.stringify(m.hostile_tokens), "_repr_html_: the hostile tokens shown as text inside the frame");
  check(inner.every((i) => i.parent === "blocked" && i.origin === "null"), "_repr_html_: a frame's script has an origin of its own and cannot reach the notebook",
        JSON.stringify(inner.map((i) => [i.parent, i.origin])));
  const host = await page.evaluate(() => ({ pwned: window.__pwned || [], text: document.getElementById("host").textContent }));
  check(host.pwned.length === 0 && inner.every((i) => i.pwned === 0) && host.text === "notebook", "_repr_html_: nothing ran in the host page or the frames");
  clean(o);
  await page.close();
}

check(M.misuse.length === 0, "views: misuse raises TypeError / ValueError / KeyError", M.misuse.join("; "));
await browser.close();
console.log(`${passed} passed, ${failed} failed (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
process.exit(failed ? 1 : 0);
