/* inspect_svg.c — the figures of `tinylm inspect --plot FILE.svg`, as plain SVG text:
 *   forward: residual-stream norm and sublayer increments by layer on a log axis, beside the
 *            logit-lens grid (rows: embedding and each block's output; columns: positions;
 *            cell: the top-1 token, shaded by its probability);
 *   --grad:  gradient norms reaching the residual stream and parameter-gradient norms by layer.
 * Written atomically; text is XML-escaped (token text is made printable UTF-8 first). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect.h"
#include "util/atomic_file.h"
#include "util/buf.h"
#include "util/error.h"

/* XML-escaped text; spaces shown as a middle dot when `show_spaces` (token boundaries matter) */
static void sb_text(tlm_buf *b, const char *t, int show_spaces) {
    for (; *t; t++) {
        switch (*t) {
        case '&': tlm_buf_printf(b, "&amp;"); break;
        case '<': tlm_buf_printf(b, "&lt;"); break;
        case '>': tlm_buf_printf(b, "&gt;"); break;
        case '"': tlm_buf_printf(b, "&quot;"); break;
        case ' ': tlm_buf_printf(b, show_spaces ? "\xC2\xB7" : " "); break;
        default: tlm_buf_printf(b, "%c", *t);
        }
    }
}

/* the first max_chars UTF-8 characters of t (an ellipsis marks a cut) */
static void clip_chars(const char *t, int max_chars, char *out, size_t n) {
    size_t i = 0, o = 0;
    int chars = 0;
    while (t[i] && chars < max_chars) {
        size_t k = 1;
        while ((t[i + k] & 0xC0) == 0x80) k++;
        if (o + k >= n) break;
        memcpy(out + o, t + i, k);
        o += k, i += k, chars++;
    }
    if (t[i] && o + 3 < n) memcpy(out + o, "\xE2\x80\xA6", 3), o += 3;
    out[o] = '\0';
}

static int sb_save(tlm_buf *b, const char *path) {
    int rc = b->oom ? tlm_error("out of memory writing %s", path) : tlm_write_file_atomic(path, b->data, b->len);
    free(b->data);
    return rc;
}

/* ---- a line chart with a log y axis --------------------------------------------------------------- */

typedef struct {
    const char *label, *color;
    int dashed;
    int n;
    const double *x, *y; /* points with y <= 0 or not finite are left out */
} series;

typedef struct {
    double x, y, w, h; /* the whole panel */
    const char *title, *xlabel, *ylabel;
    int n_ticks; /* x runs over 0..n_ticks-1 */
    const char *const *ticks;
} chart;

static void log_chart(tlm_buf *b, const chart *c, const series *s, int ns) {
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < ns; i++)
        for (int j = 0; j < s[i].n; j++)
            if (s[i].y[j] > 0 && isfinite(s[i].y[j])) lo = fmin(lo, s[i].y[j]), hi = fmax(hi, s[i].y[j]);
    if (!(lo <= hi)) lo = hi = 1.0;
    double elo = floor(log10(lo)), ehi = ceil(log10(hi));
    if (ehi <= elo) ehi = elo + 1;
    const double px = c->x + 64, py = c->y + 30 + 16 * ((ns + 1) / 2) + 22, pw = c->w - 80, ph = c->y + c->h - 44 - py;
    const double span = c->n_ticks > 1 ? c->n_ticks - 1 : 1;
#define XP(v) (px + 10 + ((v) / span) * (pw - 20))
#define YP(v) (py + ph - (log10(v) - elo) / (ehi - elo) * ph)
    tlm_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" font-weight=\"bold\">", c->x + 10, c->y + 20);
    sb_text(b, c->title, 0);
    tlm_buf_printf(b, "</text>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafafa\" stroke=\"#444\"/>\n",
              px, py, pw, ph);
    int step = (int)ceil((ehi - elo) / 8.0);
    for (double e = elo; e <= ehi + 1e-9; e += step) {
        double yy = py + ph - (e - elo) / (ehi - elo) * ph;
        tlm_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ccc\"/>\n", px, yy, px + pw, yy);
        tlm_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">1e%d</text>\n", px - 4, yy + 4,
                  (int)e);
    }
    int every = c->n_ticks > 24 ? (c->n_ticks + 23) / 24 : 1;
    for (int i = 0; i < c->n_ticks; i += every) {
        tlm_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n", XP(i), py + ph, XP(i),
                  py + ph + 4);
        tlm_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">", XP(i), py + ph + 15);
        sb_text(b, c->ticks[i], 0);
        tlm_buf_printf(b, "</text>\n");
    }
    tlm_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">", px + pw / 2, py + ph + 32);
    sb_text(b, c->xlabel, 0);
    /* the y axis's title: horizontal, above the plot */
    tlm_buf_printf(b, "</text>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">", px - 40, py - 8);
    sb_text(b, c->ylabel, 0);
    tlm_buf_printf(b, "</text>\n");
    for (int i = 0; i < ns; i++) {
        const series *se = &s[i];
        tlm_buf_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", se->color,
                  se->dashed ? " stroke-dasharray=\"6 4\"" : "");
        for (int j = 0; j < se->n; j++)
            if (se->y[j] > 0 && isfinite(se->y[j])) tlm_buf_printf(b, "%.1f,%.1f ", XP(se->x[j]), YP(se->y[j]));
        tlm_buf_printf(b, "\"/>\n");
        for (int j = 0; j < se->n && !se->dashed; j++)
            if (se->y[j] > 0 && isfinite(se->y[j]))
                tlm_buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", XP(se->x[j]), YP(se->y[j]),
                          se->color);
        /* legend: two columns under the title */
        double lx = px + 4 + (pw / 2) * (i % 2), ly = c->y + 42 + 16 * (i / 2);
        tlm_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"%s/>\n", lx,
                  ly - 4, lx + 18, ly - 4, se->color, se->dashed ? " stroke-dasharray=\"6 4\"" : "");
        tlm_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">", lx + 22, ly);
        sb_text(b, se->label, 0);
        tlm_buf_printf(b, "</text>\n");
    }
#undef XP
#undef YP
}

/* tick labels of the residual-stream points: emb, 0a, 0f, 1a, ... */
static char **point_ticks(int L) {
    char **t = calloc((size_t)2 * L + 1, sizeof(char *));
    for (int k = 0; t && k <= 2 * L; k++) {
        t[k] = malloc(16);
        if (!t[k]) continue;
        if (k == 0)
            snprintf(t[k], 16, "emb");
        else
            snprintf(t[k], 16, "%d%s", (k - 1) / 2, k % 2 ? "a" : "f");
    }
    return t;
}

static void free_ticks(char **t, int n) {
    for (int i = 0; t && i < n; i++) free(t[i]);
    free(t);
}

static int ticks_ok(char **t, int n) {
    for (int i = 0; t && i < n; i++)
        if (!t[i]) return 0;
    return t != NULL;
}

static void svg_open(tlm_buf *b, double w, double h) {
    tlm_buf_printf(b,
              "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
              "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
              "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
              w, h, w, h);
}

/* ---- the forward figure --------------------------------------------------------------------------- */

/* the logit-lens grid: at most MAX_COLS positions, a window around the report's position (which
 * the grid's subtitle names); horizontal labels of at least 11px; rows as tall as fills the figure */
enum { CELL_W = 60, MAX_COLS = 32, GRID_TOP = 76, GRID_BOTTOM = 14, MIN_H = 300 };

static int lens_first(const inspect_report *r, int cols) {
    int first = r->position - cols / 2;
    if (first > r->T - cols) first = r->T - cols;
    return first < 0 ? 0 : first;
}

static int lens_cell_h(const inspect_report *r) {
    int h = (MIN_H - GRID_TOP - GRID_BOTTOM) / (r->n_lens > 0 ? r->n_lens : 1);
    return h < 22 ? 22 : h > 34 ? 34 : h;
}

static void lens_grid(tlm_buf *b, double x0, double y0, const inspect_report *r, const struct tlm_tokenizer *tok) {
    const int T = r->T, cols = T < MAX_COLS ? T : MAX_COLS, first = lens_first(r, cols), CELL_H = lens_cell_h(r);
    char t[128], clip[64];
    tlm_buf_printf(b,
                   "<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" font-weight=\"bold\">Logit lens: top-1 token by "
                   "layer</text>\n",
                   x0, y0 + 18);
    if (cols < T)
        tlm_buf_printf(b,
                       "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#444\">shade = probability; positions "
                       "%d\xE2\x80\x93%d of %d (a window around position %d)</text>\n",
                       x0, y0 + 36, first, first + cols - 1, T, r->position);
    else
        tlm_buf_printf(b,
                       "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#444\">shade = probability; positions "
                       "0\xE2\x80\x93%d of %d</text>\n",
                       x0, y0 + 36, T - 1, T);
    const double gx = x0 + 64, gy = y0 + GRID_TOP;
    for (int c = 0; c < cols; c++) {
        int i = first + c;
        double cx = gx + c * CELL_W + CELL_W / 2.0;
        inspect_token_text(tok, i > 0 ? r->tokens[i - 1] : -1, r->tokens[i], t, sizeof t);
        clip_chars(t, 7, clip, sizeof clip);
        tlm_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\"%s>", cx, gy - 20,
                       i == r->position ? " fill=\"#c00\" font-weight=\"bold\"" : "");
        sb_text(b, clip, 1);
        tlm_buf_printf(
            b, "</text>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\" fill=\"#666\">%d</text>\n",
            cx, gy - 6, i);
    }
    for (int k = 0; k < r->n_lens; k++) {
        /* the last layer on top, as the stream flows upwards */
        double ry = gy + (r->n_lens - 1 - k) * CELL_H;
        if (k == 0)
            snprintf(t, sizeof t, "embed");
        else
            snprintf(t, sizeof t, "layer %d", k - 1);
        tlm_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n", gx - 6,
                       ry + CELL_H / 2.0 + 4, t);
        for (int c = 0; c < cols; c++) {
            int i = first + c;
            double q = r->lens_grid_prob[k * T + i];
            if (!(q >= 0)) q = 0;
            if (q > 1) q = 1;
            int R = (int)(255 - 215 * q), G = (int)(255 - 135 * q), B = (int)(255 - 20 * q);
            tlm_buf_printf(
                b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"rgb(%d,%d,%d)\" stroke=\"#ddd\"/>\n",
                gx + c * CELL_W, ry, CELL_W, CELL_H, R, G, B);
            inspect_token_text(tok, r->tokens[i], r->lens_grid[k * T + i], t, sizeof t);
            clip_chars(t, 7, clip, sizeof clip);
            tlm_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\" fill=\"%s\">",
                           gx + c * CELL_W + CELL_W / 2.0, ry + CELL_H / 2.0 + 4, q > 0.55 ? "white" : "black");
            sb_text(b, clip, 1);
            tlm_buf_printf(b, "</text>\n");
        }
    }
    /* the chosen position */
    tlm_buf_printf(
        b,
        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#c00\" stroke-width=\"2\"/>\n",
        gx + (r->position - first) * CELL_W, gy, CELL_W, r->n_lens * CELL_H);
}

int inspect_plot_svg(const char *path, const inspect_report *r, const struct tlm_tokenizer *tok) {
    const int L = r->n_layers, n = 2 * L + 1, cols = r->T < MAX_COLS ? r->T : MAX_COLS;
    double *x = malloc(sizeof(double) * n * 4), *y = malloc(sizeof(double) * n * 4);
    char **ticks = point_ticks(L);
    if (!x || !y || !ticks_ok(ticks, n)) {
        free(x), free(y), free_ticks(ticks, n);
        return tlm_error("out of memory drawing %s", path);
    }
    /* series 0: stream at the position, 1: stream mean, 2: attention increments, 3: FFN increments */
    double *x0 = x, *y0 = y, *y1 = y + n, *x2 = x + 2 * n, *y2 = y + 2 * n, *x3 = x + 3 * n, *y3 = y + 3 * n;
    for (int k = 0; k < n; k++) x0[k] = k, y0[k] = r->points[k].v.at, y1[k] = r->points[k].v.mean;
    for (int l = 0; l < L; l++) {
        x2[l] = 2 * l + 1, y2[l] = r->incr[2 * l].v.at;
        x3[l] = 2 * l + 2, y3[l] = r->incr[2 * l + 1].v.at;
    }
    char title[96], lab0[64];
    snprintf(title, sizeof title, "Residual stream and sublayer increments (position %d)", r->position);
    snprintf(lab0, sizeof lab0, "|stream| at position %d", r->position);
    series s[4] = {{lab0, "#1f77b4", 0, n, x0, y0},
                   {"|stream|, mean over positions", "#6baed6", 1, n, x0, y1},
                   {"|attention output|", "#ff7f0e", 0, L, x2, y2},
                   {"|FFN output|", "#2ca02c", 0, L, x3, y3}};
    /* the figure is as tall as the grid (at least MIN_H), the chart fills that height */
    const double grid_h = GRID_TOP + r->n_lens * lens_cell_h(r) + GRID_BOTTOM;
    const double chart_w = 560, chart_h = fmax(grid_h, MIN_H);
    chart c = {0, 0, chart_w, chart_h, title, "residual stream point (layer + a: after attention, f: after FFN)",
               "L2 norm (log scale)", n, (const char *const *)ticks};
    const double grid_x = chart_w + 20;
    const double W = grid_x + fmax(64 + cols * CELL_W + 16, 440); /* room for the grid's subtitle */
    const double H = chart_h;
    tlm_buf b = {0};
    svg_open(&b, W, H);
    log_chart(&b, &c, s, 4);
    lens_grid(&b, grid_x, 0, r, tok);
    tlm_buf_printf(&b, "</svg>\n");
    free(x), free(y), free_ticks(ticks, n);
    return sb_save(&b, path);
}

/* ---- the gradient figure -------------------------------------------------------------------------- */

int inspect_grad_plot_svg(const char *path, const inspect_grad_report *r) {
    const int L = r->n_layers, n = 2 * L + 1;
    double *x = malloc(sizeof(double) * n * 3), *y = malloc(sizeof(double) * n * 3);
    char **ticks = point_ticks(L);
    if (!x || !y || !ticks_ok(ticks, n)) {
        free(x), free(y), free_ticks(ticks, n);
        return tlm_error("out of memory drawing %s", path);
    }
    double *x0 = x, *y0 = y, *x1 = x + n, *y1 = y + n, *x2 = x + 2 * n, *y2 = y + 2 * n;
    for (int k = 0; k < n; k++) x0[k] = k, y0[k] = r->dres[k].v.at;
    for (int l = 0; l < L; l++) {
        x1[l] = 2 * l + 1, y1[l] = r->layer_attn[l];
        x2[l] = 2 * l + 2, y2[l] = r->layer_ffn[l];
    }
    char title[96];
    snprintf(title, sizeof title, "Gradient norms by layer (one batch of %d x %d, loss %.4g)", r->B, r->T, r->loss);
    series s[3] = {{"|dL/d stream|", "#1f77b4", 0, n, x0, y0},
                   {"|attention param grads|", "#ff7f0e", 0, L, x1, y1},
                   {"|FFN param grads|", "#2ca02c", 0, L, x2, y2}};
    chart c = {0,
               0,
               640,
               400,
               title,
               "residual stream point (layer + a: after attention, f: after FFN)",
               "L2 norm (log scale)",
               n,
               (const char *const *)ticks};
    tlm_buf b = {0};
    svg_open(&b, 640, 400);
    log_chart(&b, &c, s, 3);
    tlm_buf_printf(&b, "</svg>\n");
    free(x), free(y), free_ticks(ticks, n);
    return sb_save(&b, path);
}
