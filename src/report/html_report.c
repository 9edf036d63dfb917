/* html_report.c — writes a self-contained HTML page: template + embedded CSS and JS + a JSON
 * data blob (report.h); and checks `tinylm report`'s experiment descriptions. */
#include "report.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/io.h"

char *report_base64(const void *data, size_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *s = data;
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out) return NULL;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (unsigned)s[i + 1] << 8 | s[i + 2];
        *o++ = A[v >> 18], *o++ = A[v >> 12 & 63], *o++ = A[v >> 6 & 63], *o++ = A[v & 63];
    }
    if (i < n) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0);
        *o++ = A[v >> 18], *o++ = A[v >> 12 & 63];
        *o++ = i + 1 < n ? A[v >> 6 & 63] : '=';
        *o++ = '=';
    }
    *o = '\0';
    return out;
}

/* the page in memory, grown as it is written */
typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} page_buf;

static int put_n(page_buf *b, const char *s, size_t n) {
    if (b->oom) return -1;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (b->n + n + 1 > cap) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) return b->oom = 1, -1;
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

static int put(page_buf *b, const char *s) { return put_n(b, s, strlen(s)); }

/* text with &, <, >, " as entities (for the <title>) */
static int write_escaped_html(page_buf *b, const char *s) {
    int rc = 0;
    for (const char *p = s; *p && !rc; p++) {
        const char *e = *p == '&' ? "&amp;" : *p == '<' ? "&lt;" : *p == '>' ? "&gt;" : *p == '"' ? "&quot;" : NULL;
        rc = e ? put(b, e) : put_n(b, p, 1);
    }
    return rc;
}

/* JSON with every '<' written as \u003c: '<' only occurs inside JSON strings, where the escape
 * means the same character, and no "</script>" or "<!--" can then end or confuse the element */
static int write_json_for_script(page_buf *b, const char *s) {
    const char *p = s;
    int rc = 0;
    while (*p && !rc) {
        const char *lt = strchr(p, '<');
        size_t n = lt ? (size_t)(lt - p) : strlen(p);
        rc = put_n(b, p, n);
        if (!rc && lt) rc = put(b, "\\u003c");
        p += n + (lt ? 1 : 0);
    }
    return rc;
}

/* the CSP source 'sha256-BASE64' of the embedded report.js (its hex digest is computed at build
 * time by embed.cmake): the page runs that script and no other, so nothing in the data blob can
 * run even if a bug ever put it into the page as markup (no 'unsafe-inline' for scripts) */
static int js_hash_source(char out[64]) {
    unsigned char digest[32];
    const char *hex = tlm_report_js_sha256;
    if (strlen(hex) != 64) return -1;
    for (int i = 0; i < 32; i++) {
        unsigned v = 0;
        for (int k = 0; k < 2; k++) {
            const char c = hex[2 * i + k];
            const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (d < 0) return -1;
            v = v << 4 | (unsigned)d;
        }
        digest[i] = (unsigned char)v;
    }
    char *b64 = report_base64(digest, sizeof digest);
    if (!b64) return -1;
    snprintf(out, 64, "'sha256-%s'", b64);
    free(b64);
    return 0;
}

char *report_page(const char *title, const char *data_json, size_t *len) {
    /* the script and stylesheet are ours; a stray closing tag in them would cut the page */
    if (strstr(tlm_report_js, "</script") || strstr(tlm_report_css, "</style"))
        return tlm_error("the embedded report.js/report.css hold a closing tag (a build error)"), NULL;
    char js_hash[64];
    if (js_hash_source(js_hash)) return tlm_error("the embedded report.js has no valid SHA-256 (a build error)"), NULL;
    page_buf b = {0};
    /* default-src 'none': no fetch, frame, font, media or object; images only from data: URLs (the
     * experiment figures, themselves images that run nothing); styles inline (the page's own and
     * the style attributes report.js sets); scripts: report.js by its hash, nothing else */
    put(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "img-src data:; base-uri 'none'; form-action 'none'; script-src ");
    put(&b, js_hash);
    put(&b, "\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
    write_escaped_html(&b, title);
    put(&b, "</title>\n<style>\n");
    put(&b, tlm_report_css);
    put(&b, "</style>\n</head>\n<body>\n<main id=\"app\"><noscript>This report is drawn by JavaScript: enable it to "
            "see the page.</noscript></main>\n<script type=\"application/json\" id=\"tlm-data\">");
    write_json_for_script(&b, data_json);
    /* the script element's text is exactly report.js's bytes: the hash above is of them */
    put(&b, "</script>\n<script>");
    put(&b, tlm_report_js);
    if (put(&b, "</script>\n</body>\n</html>\n")) {
        free(b.p);
        return tlm_error("out of memory writing the HTML report"), NULL;
    }
    if (len) *len = b.n;
    return b.p;
}

int report_write_html(const char *path, const char *title, const char *data_json) {
    size_t n = 0;
    char *page = report_page(title, data_json, &n);
    if (!page) return tlm_error_prefix("%s", path);
    tlm_atomic *f = tlm_atomic_open(path);
    if (!f) {
        free(page);
        return tlm_error_prefix("cannot write the HTML report");
    }
    if (tlm_atomic_write(f, page, n)) {
        free(page);
        tlm_atomic_abort(f);
        return tlm_error_prefix("writing the HTML report");
    }
    free(page);
    return tlm_atomic_commit(f) ? tlm_error_prefix("writing the HTML report") : 0;
}

/* ---- experiment pages ---------------------------------------------------------------------------- */

static int bad(const char *name, const char *field, const char *what) {
    return tlm_error("%s: field \"%s\": %s", name, field, what);
}

static int opt_string(const char *name, const cJSON *o, const char *key, int required) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) return required ? bad(name, key, "missing (a string is required)") : 0;
    if (!cJSON_IsString(v)) return bad(name, key, "must be a string");
    return 0;
}

/* an SVG document: after whitespace, an optional XML declaration and comments, the root element
 * <svg (the page shows a figure as an SVG image, which anything before the root would break) */
static int is_svg_document(const char *s) {
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
        const char *end = strncmp(s, "<?xml", 5) == 0 ? strstr(s, "?>") : strncmp(s, "<!--", 4) == 0 ? strstr(s + 4, "-->") : NULL;
        if (!end) break;
        s = end + (end[0] == '?' ? 2 : 3);
    }
    return strncmp(s, "<svg", 4) == 0 && (s[4] == ' ' || s[4] == '\t' || s[4] == '\n' || s[4] == '\r' || s[4] == '>' || s[4] == '/');
}

static int check_experiment(const char *name, const cJSON *root) {
    if (!cJSON_IsObject(root)) return tlm_error("%s: the top level must be a JSON object", name);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "kind");
    if (!kind) return bad(name, "kind", "missing (must be \"experiment\")");
    if (!cJSON_IsString(kind) || strcmp(kind->valuestring, "experiment") != 0)
        return bad(name, "kind", "must be \"experiment\" (tinylm report renders experiment descriptions)");
    if (opt_string(name, root, "title", 1) || opt_string(name, root, "name", 0) || opt_string(name, root, "claim", 0) ||
        opt_string(name, root, "command", 0))
        return -1;
    const cJSON *verdict = cJSON_GetObjectItemCaseSensitive(root, "verdict");
    if (verdict) {
        if (!cJSON_IsObject(verdict))
            return bad(name, "verdict", "must be an object {\"supported\": ..., \"text\": ...}");
        const cJSON *sup = cJSON_GetObjectItemCaseSensitive(verdict, "supported");
        if (sup && !cJSON_IsBool(sup) && !cJSON_IsNull(sup))
            return bad(name, "verdict.supported", "must be true, false or null");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(verdict, "text");
        if (text && !cJSON_IsString(text)) return bad(name, "verdict.text", "must be a string");
    }
    char field[96];
    const cJSON *tables = cJSON_GetObjectItemCaseSensitive(root, "tables");
    if (tables && !cJSON_IsArray(tables)) return bad(name, "tables", "must be an array of tables");
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tables) {
        snprintf(field, sizeof field, "tables[%d]", i);
        if (!cJSON_IsObject(t)) return bad(name, field, "must be an object {\"title\", \"columns\", \"rows\"}");
        const cJSON *title = cJSON_GetObjectItemCaseSensitive(t, "title");
        snprintf(field, sizeof field, "tables[%d].title", i);
        if (title && !cJSON_IsString(title)) return bad(name, field, "must be a string");
        const cJSON *cols = cJSON_GetObjectItemCaseSensitive(t, "columns"), *c;
        snprintf(field, sizeof field, "tables[%d].columns", i);
        if (!cols || !cJSON_IsArray(cols)) return bad(name, field, "must be an array of strings");
        cJSON_ArrayForEach(c, cols) if (!cJSON_IsString(c)) return bad(name, field, "must be an array of strings");
        const int nc = cJSON_GetArraySize(cols);
        const cJSON *rows = cJSON_GetObjectItemCaseSensitive(t, "rows"), *row;
        snprintf(field, sizeof field, "tables[%d].rows", i);
        if (!rows || !cJSON_IsArray(rows)) return bad(name, field, "must be an array of rows (arrays)");
        int j = 0;
        cJSON_ArrayForEach(row, rows) {
            snprintf(field, sizeof field, "tables[%d].rows[%d]", i, j);
            if (!cJSON_IsArray(row)) return bad(name, field, "must be an array of cells");
            if (cJSON_GetArraySize(row) != nc) {
                char what[96];
                snprintf(what, sizeof what, "has %d cells; columns has %d", cJSON_GetArraySize(row), nc);
                return bad(name, field, what);
            }
            cJSON_ArrayForEach(c, row) if (cJSON_IsObject(c) || cJSON_IsArray(c)) return bad(
                name, field, "cells must be strings, numbers, booleans or null");
            j++;
        }
        i++;
    }
    const cJSON *figs = cJSON_GetObjectItemCaseSensitive(root, "figures");
    if (figs && !cJSON_IsArray(figs)) return bad(name, "figures", "must be an array of figures");
    i = 0;
    cJSON_ArrayForEach(t, figs) {
        snprintf(field, sizeof field, "figures[%d]", i);
        if (!cJSON_IsObject(t)) return bad(name, field, "must be an object {\"title\", \"svg\"}");
        const cJSON *title = cJSON_GetObjectItemCaseSensitive(t, "title"),
                    *svg = cJSON_GetObjectItemCaseSensitive(t, "svg");
        snprintf(field, sizeof field, "figures[%d].title", i);
        if (title && !cJSON_IsString(title)) return bad(name, field, "must be a string");
        snprintf(field, sizeof field, "figures[%d].svg", i);
        if (!svg || !cJSON_IsString(svg) || !is_svg_document(svg->valuestring))
            return bad(name, field, "must be a string holding an SVG document (<svg ...>...</svg>, nothing before it "
                                    "but an <?xml ...?> declaration or comments)");
        i++;
    }
    const cJSON *notes = cJSON_GetObjectItemCaseSensitive(root, "notes");
    if (notes && !cJSON_IsArray(notes)) return bad(name, "notes", "must be an array of strings");
    i = 0;
    cJSON_ArrayForEach(t, notes) {
        snprintf(field, sizeof field, "notes[%d]", i++);
        if (!cJSON_IsString(t)) return bad(name, field, "must be a string");
    }
    return 0;
}

int report_experiment_html(const char *name, const char *text, size_t n, const char *out) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, n, &end, 0);
    if (!root && tlm_json_nesting_error(name, text, n)) return -1; /* (cJSON's depth limit) */
    if (!root) {
        size_t off = end && end >= text ? (size_t)(end - text) : 0, line = 1, col = 1;
        for (size_t i = 0; i < off && i < n; i++) {
            if (text[i] == '\n')
                line++, col = 1;
            else
                col++;
        }
        return tlm_error("%s: not valid JSON (near line %zu, column %zu)", name, line, col);
    }
    int rc = check_experiment(name, root);
    if (!rc) {
        char *data = cJSON_PrintUnformatted(root);
        const cJSON *title = cJSON_GetObjectItemCaseSensitive(root, "title");
        rc = data ? report_write_html(out, title->valuestring, data) : tlm_error("out of memory");
        free(data);
    }
    cJSON_Delete(root);
    return rc;
}
