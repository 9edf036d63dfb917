// test_course_pages.mjs — `tinylm lesson TOPIC --html` pages in headless Chromium (puppeteer-core).
//
//   node test_course_pages.mjs --tinylm PATH --work DIR [--chromium /usr/bin/chromium]
//
// Launched by run_course_pages.py. Each page is opened from file:// with request interception: any
// request but the page's own file and data: URLs, any console error or warning, any exception fails.
// Checked: every number of the lesson's --json is a row of the page with its computed and stated
// value; the placement page's switch (one button per variant) redraws the stream-norm and gradient-
// norm charts side by side with the selected variant's values and marks it in the loss chart; the
// stream page draws its two charts; the Chinese page is in Chinese. train --html: the final page
// (status finished, every chart drawn, its last loss and validation points those of metrics.jsonl,
// no reload), a copy taken while the run trained (live: it reloads itself), a bad path refused
// before training.
import { spawn, spawnSync } from "node:child_process";
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
const STORIES = path.join(ROOT, "data", "stories260K.bin"), DATA = path.join(ROOT, "data", "tinyshakespeare.txt");

let passed = 0, failed = 0;
function check(ok, what, detail = "") {
  ok ? passed++ : failed++;
  console.log(`${what.padEnd(86)} ${ok ? "ok" : "FAIL"}${!ok && detail ? "  " + String(detail).slice(0, 600) : ""}`);
  return ok;
}
function tinylm(...a) {
  const p = spawnSync(TINYLM, a.map(String), { encoding: "utf8", maxBuffer: 1 << 26, env: { ...process.env, OMP_NUM_THREADS: "2" } });
  return { rc: p.status, out: p.stdout, err: p.stderr };
}
// the page's number format for chart values (report.js fmtG)
function fmtG(x) {
  const a = Math.abs(x);
  if (a !== 0 && (a >= 1e4 || a < 1e-2)) return x.toExponential(2);
  return x.toPrecision(4);
}

fs.rmSync(WORK, { recursive: true, force: true });
fs.mkdirSync(WORK, { recursive: true });
const browser = await puppeteer.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--no-first-run", "--disable-dev-shm-usage", "--allow-file-access-from-files"],
});

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
  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("body[data-ready]", { timeout: 10000 }).catch(() => problems.push("the page never finished drawing"));
  const ready = await page.evaluate(() => document.body.getAttribute("data-ready"));
  if (ready !== "1") problems.push("drawing failed: " + (await page.evaluate(() => document.getElementById("app").textContent)).slice(0, 200));
  check(problems.length === 0, `${what}: loads from file:// with no request, console error or exception`, problems.join("; "));
  return page;
}

// writes the page and the JSON of the same lesson (one run: --html writes the page besides what --json prints,
// and the placement demo trains its five variants each run); returns {page, json}
async function lesson(topic, extra, what) {
  const html = path.join(WORK, `${topic}${extra.includes("zh") ? "-zh" : ""}.html`);
  const r = tinylm("lesson", topic, "--stories", STORIES, "--html", html, "--json", ...extra);
  check(r.rc === 0 && fs.existsSync(html), `${what}: lesson ${topic} --html writes the page`, r.err);
  const j = JSON.parse(r.out);
  const page = await open(html, what);
  const rows = await page.$$eval("tr.num-row", (a) => a.map((tr) => ({ ok: tr.getAttribute("data-ok"), cells: [...tr.children].map((td) => td.textContent) })));
  const same = rows.length === j.numbers.length && rows.every((r, i) => r.ok === "true" && r.cells[0] === j.numbers[i].section &&
    r.cells[2] === j.numbers[i].computed && r.cells[3] === j.numbers[i].stated);
  check(same, `${what}: every number of --json is a row (section, computed, stated, ok): ${rows.length}`, JSON.stringify(rows.slice(0, 3)));
  const agree = await page.$eval("#agree", (e) => [e.getAttribute("data-agree"), e.getAttribute("data-total")]);
  check(agree[0] === String(j.total) && agree[1] === String(j.total), `${what}: the page says ${agree[0]} of ${agree[1]} agree`);
  return { page, json: j, html };
}

// ---- placement: the switch ------------------------------------------------------------------------------
{
  const { page, html } = await lesson("placement", ["--data", DATA, "--quick"], "placement");
  const data = JSON.parse(await page.$eval("#tlm-data", (e) => e.textContent));
  const V = data.figures.variants;
  const names = await page.$$eval(".variant-btn", (a) => a.map((b) => b.getAttribute("data-variant")));
  check(JSON.stringify(names) === JSON.stringify(["pre", "post", "sandwich", "output", "none"]), "placement: one button per variant", names);
  const paths = [];
  for (const [i, v] of V.entries()) {
    await page.click(`.variant-btn[data-variant="${v.name}"]`);
    const st = await page.evaluate(() => {
      const box = document.getElementById("variant-charts"), a = document.getElementById("chart-stream"), g = document.getElementById("chart-grad");
      const ra = a && a.getBoundingClientRect(), rg = g && g.getBoundingClientRect();
      return {
        sel: box.getAttribute("data-variant"),
        active: [...document.querySelectorAll(".variant-btn.active")].map((b) => b.getAttribute("data-variant")),
        side: !!(ra && rg && ra.width > 200 && rg.width > 200 && ra.height > 150 && Math.abs(ra.top - rg.top) < 2 && ra.right <= rg.left + 1),
        titles: [...document.querySelectorAll("#chart-stream title, #chart-grad title")].map((t) => t.textContent),
        path: [...document.querySelectorAll("#chart-stream path, #chart-grad path")].map((p) => p.getAttribute("d")).join("|"),
        lossWidths: [...document.querySelectorAll("#chart-loss path")].map((p) => p.getAttribute("stroke-width")),
      };
    });
    check(st.sel === v.name && st.active.length === 1 && st.active[0] === v.name, `placement: ${v.name} selected`, JSON.stringify(st.active));
    check(st.side, `placement ${v.name}: stream and gradient charts side by side`);
    const want = [`trained — emb: ${fmtG(v.stream_trained[0])}`, `trained — L3: ${fmtG(v.stream_trained[4])}`,
                  `at init — L0: ${fmtG(v.stream_init[1])}`, `trained — L0: ${fmtG(v.grad_trained[0])}`, `at init — L3: ${fmtG(v.grad_init[3])}`];
    const missing = want.filter((w) => !st.titles.some((t) => t.endsWith(w)));
    check(missing.length === 0, `placement ${v.name}: the charts show its stream and gradient norms`, missing.join("; "));
    check(st.lossWidths.filter((w) => w === "4").length === 1, `placement ${v.name}: one bold curve in the loss chart`, st.lossWidths);
    paths.push(st.path);
  }
  check(new Set(paths).size === V.length, "placement: each variant draws different curves");
  await page.close();
}

// ---- stream: its charts; rms in Chinese -------------------------------------------------------------------
{
  const { page } = await lesson("stream", [], "stream");
  const n = await page.$$eval("#stream-charts svg", (a) => a.length);
  check(n === 2, "stream: the stream-norm and increment charts are drawn", n);
  await page.close();
}
{
  const { page } = await lesson("rms", ["--lang", "zh"], "rms --lang zh");
  const text = await page.$eval("#app", (e) => e.textContent);
  check(text.includes("思考题") && text.includes("[0.962, 1.036]"), "rms --lang zh: the Chinese page with the check question's answer");
  await page.close();
}

// ---- inspect --html: spaces shown, the attribution's position, the captions in the lessons' terms ----------------
{
  const html = path.join(WORK, "inspect.html");
  const r = tinylm("inspect", "--model", STORIES, "--tokenizer", path.join(ROOT, "data", "tok512.bin"), "--prompt",
                   "Once upon a time, there was a little girl", "--html", html);
  check(r.rc === 0, "inspect --html on stories260K", r.err);
  const page = await open(html, "inspect --html");
  const chips = await page.$$eval("#tokens .tok", (a) => a.map((c) => ({ text: c.textContent, title: c.getAttribute("data-text"), pos: c.getAttribute("data-pos") })));
  const spaced = chips.filter((c) => c.title.includes(" "));
  check(spaced.length > 0 && spaced.every((c) => c.text.includes("\u00b7") && !c.text.includes(" ")) && chips.every((c) => c.text.trim() !== ""),
        `inspect --html: tokens with spaces show them as · (${spaced.length} of ${chips.length}), none blank`, JSON.stringify(chips.slice(0, 4)));
  const cells = await page.$$eval("#lens-grid td", (a) => a.map((td) => td.textContent));
  check(cells.length > 0 && cells.every((t) => t.trim() !== "" && !t.includes(" ")), "inspect --html: no blank logit-lens cell", cells.filter((t) => t.trim() === "").length);
  const last = chips.length - 1;
  const before = await page.$eval("#dla-position", (e) => e.style.display);
  await page.click('.tok[data-pos="2"]');
  const after = await page.$eval("#dla-position", (e) => [e.style.display, e.textContent]);
  check(before === "none" && after[0] === "" && after[1].includes("Position 2 is selected") && after[1].includes("position " + last),
        "inspect --html: selecting another token says the attribution is the report position's", JSON.stringify(after));
  await page.click(`.tok[data-pos="${last}"]`);
  check(await page.$eval("#dla-position", (e) => e.style.display) === "none", "inspect --html: back at the report position, the notice goes");
  const dla = await page.$eval("#dla", (e) => e.textContent);
  check(!dla.includes("soft-cap"), "inspect --html: no soft-cap named for a model without one");
  const caps = await page.$$eval(".lesson-terms", (a) => a.map((e) => e.textContent));
  check(caps.length === 2 && caps[0].includes("An increment is") && caps[0].includes("Pre-Norm") && caps[1].includes("input token"),
        "inspect --html: captions in the lessons' terms (increment, placement, early lens)", caps);
  await page.close();
}

// ---- an experiment page with a wide table (stream_growth's columns): it fits, nothing hidden --------------
{
  const cols = ["model", "after embedding", "middle", "largest before the last block", "after the last block",
                "last / embedding", "|inc|/|stream| block 0", "|inc|/|stream| last block", "another long column title"];
  const rows = [["pre, 4 layers, tied, 1500 steps, bytes + BOS (attention_sinks' run) (val 1.746)", 0.8401, 4.583, 5.399, 6.971, 8.298, 3.88, 0.5578, 12.25],
                ["Qwen2.5-0.5B (the lesson's numbers; middle: 15-20)", 0.47, 17.5, 76.1, 58.1, 123.6, "-", "-", "-"]];
  const desc = path.join(WORK, "wide.json"), html = path.join(WORK, "wide.html");
  fs.writeFileSync(desc, JSON.stringify({ kind: "experiment", title: "wide", claim: "a claim", terms: "An increment is what a block adds.",
                                          tables: [{ title: "wide", columns: cols, rows }] }));
  const r = tinylm("report", desc, "--html", html);
  check(r.rc === 0, "tinylm report: the wide table's page", r.err);
  const page = await open(html, "experiment page, wide table");
  const fit = await page.$eval("table.experiment-table", (t) => [t.scrollWidth, t.parentElement.clientWidth]);
  check(fit[0] <= fit[1], `experiment page: the 9-column table fits (${fit[0]} <= ${fit[1]} px), no column hidden`, fit);
  const terms = await page.$eval("#terms", (e) => e.textContent).catch(() => "");
  check(terms === "In the lessons' terms: An increment is what a block adds.", "experiment page: the caption in the lessons' terms", terms);
  await page.close();
}

// ---- train --html ---------------------------------------------------------------------------------------------
{
  const run = path.join(WORK, "run"), html = path.join(WORK, "train.html");
  const r = tinylm("train", "--data", DATA, "--preset", "lesson15", "--steps", "60", "--eval-every", "20", "--eval-batches", "2",
                   "--sample", "0", "--out", run, "--html", html);
  check(r.rc === 0 && fs.existsSync(html), "train --html: the run writes its page", r.err);
  const lines = fs.readFileSync(path.join(run, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  const last = lines[lines.length - 1], vals = lines.filter((l) => l.val_loss !== undefined);
  const page = await open(html, "train --html (finished)");
  let navigations = 0;
  page.on("framenavigated", () => navigations++);
  const st = await page.evaluate(() => ({
    status: document.getElementById("train-status").getAttribute("data-status"),
    live: document.getElementById("train-status").getAttribute("data-live"),
    charts: [...document.querySelectorAll("#train-charts svg")].map((e) => e.id),
    titles: [...document.querySelectorAll("#chart-loss title")].map((t) => t.textContent),
    attn: [...document.querySelectorAll("#chart-attn title")].map((t) => t.textContent),
  }));
  check(st.status === "finished" && st.live === "false", "train --html: the final page says finished and is not live", JSON.stringify(st.status));
  check(JSON.stringify(st.charts) === JSON.stringify(["chart-loss", "chart-lr", "chart-grad", "chart-attn", "chart-tps"]),
        "train --html: loss, lr, gradient norm, attention-logit maximum and tokens/s charts", st.charts);
  check(st.titles.includes(`training loss — ${last.step}: ${fmtG(last.loss)}`), "train --html: the last loss is metrics.jsonl's", st.titles.slice(-2));
  check(st.titles.filter((t) => t.startsWith("validation loss")).length === vals.length && vals.every((v) => st.titles.includes(`validation loss — ${v.step}: ${fmtG(v.val_loss)}`)),
        `train --html: the ${vals.length} validation points are metrics.jsonl's`);
  const amax = Math.max(...last.attn_max.flat());
  check(st.attn.includes(`max |logit| — ${last.step}: ${fmtG(amax)}`), "train --html: the attention-logit maximum is metrics.jsonl's attn_max", st.attn.slice(-1));
  await new Promise((res) => setTimeout(res, 6500));
  check(navigations === 0, "train --html: the final page does not reload itself", navigations);
  await page.close();

  // a page taken while the run trains: live, it reloads itself
  const run2 = path.join(WORK, "run2"), html2 = path.join(WORK, "train-live.html"), copy = path.join(WORK, "live-copy.html");
  const child = spawn(TINYLM, ["train", "--data", DATA, "--preset", "lesson15", "--steps", "4000", "--eval-every", "10", "--eval-batches", "1",
                               "--sample", "0", "--out", run2, "--html", html2], { stdio: "ignore", env: { ...process.env, OMP_NUM_THREADS: "1" } });
  let got = false;
  for (let i = 0; i < 600 && !got; i++) {
    await new Promise((res) => setTimeout(res, 50));
    try {
      const t = fs.readFileSync(html2, "utf8");
      if (t.includes('"live":true')) { fs.writeFileSync(copy, t); got = true; }
    } catch (e) { /* not written yet */ }
  }
  child.kill("SIGINT");
  await new Promise((res) => child.on("exit", res));
  if (check(got, "train --html: a page written while the run trains")) {
    const p2 = await open(copy, "train --html (live)");
    const live = await p2.evaluate(() => document.getElementById("train-status").getAttribute("data-live"));
    check(live === "true", "train --html: the live page says so");
    const nav = await p2.waitForNavigation({ timeout: 9000 }).then(() => true).catch(() => false);
    check(nav, "train --html: the live page reloads itself");
    await p2.close();
  }
  const after = fs.readFileSync(html2, "utf8");
  check(after.includes('"status":"stopped"') && after.includes('"live":false'), "train --html: interrupted, the page says stopped and stops reloading");
  const bad = tinylm("train", "--data", DATA, "--preset", "lesson15", "--steps", "2", "--out", path.join(WORK, "run3"), "--html", WORK);
  check(bad.rc !== 0 && bad.err.includes(WORK) && !fs.existsSync(path.join(WORK, "run3")), "train --html DIR: refused before training, naming it", bad.err);
}

await browser.close();
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
