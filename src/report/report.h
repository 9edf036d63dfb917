/* report.h — self-contained HTML pages: one page = a fixed template + the stylesheet and script
 * (src/report/report.css, report.js, embedded into the program at build time by embed.cmake) +
 * one JSON data blob in a <script type="application/json"> that the script renders. No network:
 * everything is inline, and the page's Content-Security-Policy forbids any fetch and runs no
 * script but report.js (allowed by its SHA-256). Data never becomes markup: report.js writes
 * every string as text and shows an experiment's SVG figures as <img> of data: URLs (an SVG
 * image runs no script, loads nothing and takes no events).
 *
 * Pages: `tinylm inspect --html` (kind "inspect" / "grad", src/probes/inspect_html.c),
 * `tinylm report DATA.json --html OUT.html` (kind "experiment", the schema below), and the Python
 * package's views (kind "pattern": attention patterns; "positions": arrays over the positions;
 * python/tinylm/views.py through tlm_report_html). */
#ifndef TLM_REPORT_H
#define TLM_REPORT_H

#include <stddef.h>

/* Writes the page atomically (src/util/atomic_file.h). `data_json` is one JSON value (its '<'
 * are escaped here so that no string can end the script element). -1 + tlm_error naming `path`. */
int report_write_html(const char *path, const char *title, const char *data_json);
/* The same page in memory (malloc'd, NUL-terminated, *len bytes): what the Python package's views
 * show in Jupyter and write to .html files (tlm_report_html). NULL + tlm_error when out of memory. */
char *report_page(const char *title, const char *data_json, size_t *len);

/* Checks an experiment description (text of `n` bytes read from `name`) against the schema
 *   {"kind":"experiment","name":"...","title":"...","claim":"...","terms":"...","command":"...",
 *    "verdict":{"supported":true|false|null,"text":"..."},
 *    "tables":[{"title":"...","columns":["a","b"],"rows":[[1,"x"],[2,"y"]]}],
 *    "figures":[{"title":"...","svg":"<svg ...>...</svg>"}],"notes":["..."]}
 * (kind and title required, the rest optional; unknown fields are kept and ignored) and writes
 * its page to `out`. -1 + tlm_error "NAME: field F: what is wrong" on a bad description. */
int report_experiment_html(const char *name, const char *text, size_t n, const char *out);

/* base64 (RFC 4648, padded) of n bytes; malloc'd, NUL-terminated */
char *report_base64(const void *data, size_t n);

/* the embedded assets (generated report_assets.c) */
extern const char tlm_report_css[];
extern const char tlm_report_js[];
extern const char tlm_report_js_sha256[]; /* report.js's SHA-256, 64 hex digits (its CSP hash) */

#endif
