// test_experiment_pages.mjs — every experiment's report.html (experiments/run.py NAME --quick, written by
// the experiment_NAME tests) in headless Chromium: it loads from file:// with no other request, no console
// error and no exception, draws (body[data-ready="1"]), shows the claim's title, a verdict, its tables
// with rows, and every figure as an SVG image the browser decoded (non-zero natural size).
//
//   node test_experiment_pages.mjs --chromium /usr/bin/chromium PAGE.html ...
import path from "node:path";
import { pathToFileURL } from "node:url";
import puppeteer from "puppeteer-core";

const argv = process.argv.slice(2);
const ci = argv.indexOf("--chromium");
const CHROMIUM = ci >= 0 ? argv[ci + 1] : "/usr/bin/chromium";
const pages = argv.filter((a, i) => a.endsWith(".html") && i !== ci + 1);
let passed = 0, failed = 0;
function check(ok, what, detail = "") {
  if (ok) passed++; else failed++;
  console.log(`${ok ? "ok  " : "FAIL"} ${what}${ok || !detail ? "" : " -- " + String(detail).slice(0, 400)}`);
  return ok;
}

const browser = await puppeteer.launch({
  executablePath: CHROMIUM, headless: true,
  args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--no-first-run", "--disable-dev-shm-usage", "--allow-file-access-from-files"],
});
check(pages.length > 0, `${pages.length} experiment pages given`);
for (const file of pages) {
  const name = path.basename(path.dirname(path.dirname(file))).replace(/^experiment_/, "");
  const page = await browser.newPage();
  const url = pathToFileURL(path.resolve(file)).href, problems = [];
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
  const info = await page.evaluate(() => ({
    ready: document.body.getAttribute("data-ready"),
    h1: document.querySelector("h1")?.textContent || "",
    verdict: document.querySelector(".verdict")?.textContent || "",
    tables: [...document.querySelectorAll("table.experiment-table")].map((t) => t.querySelectorAll("tr").length),
    figs: [...document.querySelectorAll("figure.experiment-figure img")].map((i) => [i.complete, i.naturalWidth, i.naturalHeight]),
  }));
  check(problems.length === 0 && info.ready === "1", `${name}: loads from file:// and draws, no request, console error or exception`,
        problems.join("; ") + " ready=" + info.ready);
  check(info.h1.length > 0 && info.verdict.trim().length > 0, `${name}: title and verdict shown`, JSON.stringify([info.h1, info.verdict]));
  check(info.tables.length > 0 && info.tables.every((n) => n >= 2), `${name}: ${info.tables.length} tables, each with rows`, JSON.stringify(info.tables));
  check(info.figs.length > 0 && info.figs.every(([c, w, h]) => c && w > 0 && h > 0),
        `${name}: ${info.figs.length} figures decoded as images`, JSON.stringify(info.figs));
  await page.close();
}
await browser.close();
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
