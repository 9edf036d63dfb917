/* compare_out.c — the report of `tinylm compare` as text, JSON and an HTML page (compare.h). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "util/atomic_file.h"
#include "util/buf.h"
#include "util/error.h"

static void shape_str(char *buf, size_t cap, const cmp_point *p) {
    size_t u = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < p->ndim && u < cap; i++)
        u += (size_t)snprintf(buf + u, cap - u, i ? ", %lld" : "%lld", (long long)p->shape[i]);
    if (u < cap) snprintf(buf + u, cap - u, "]");
}

/* what made a point diverge when its entries were not all finite and visible on both sides (its
 * max rel Δ and cosine are over the rest: all-NaN reads as 0 and 1): 1 and the text, else 0 */
static int special_entries(const cmp_point *p, char *why, size_t cap) {
    if (!p->nonfinite && !p->mask_mismatch) return 0;
    size_t u = 0;
    if (p->nonfinite)
        u += (size_t)snprintf(why, cap, "%zu entr%s NaN or infinite (in A or B)", p->nonfinite,
                              p->nonfinite == 1 ? "y" : "ies");
    if (p->mask_mismatch && u < cap)
        snprintf(why + u, cap - u, "%s%zu entr%s masked on one side only", u ? ", " : "", p->mask_mismatch,
                 p->mask_mismatch == 1 ? "y" : "ies");
    return 1;
}

static const char *ref_side(const cmp_report *r) { return r->res->ref_b ? "B" : "A"; }

/* ---- text --------------------------------------------------------------------------------- */

static void print_names(FILE *f, const char *what, const char (*names)[CMP_NAME], int n) {
    if (!n) return;
    fprintf(f, "%s (%d):", what, n);
    for (int i = 0; i < n && i < 12; i++) fprintf(f, " %s", names[i]);
    fprintf(f, "%s\n", n > 12 ? " ..." : "");
}

/* the keys that size or initialise a model without changing the logits of a sequence both can run */
static int numerics_neutral(const char *key) {
    return !strcmp(key, "initializer_range") || !strcmp(key, "scale_residual_init") ||
           !strcmp(key, "max_position_embeddings");
}

/* a config value as text: a number as the shortest decimal that reads back as the same float (the config holds
 * float32 values), anything else as JSON */
static void value_text(const cJSON *v, char *buf, size_t cap) {
    if (!v) {
        snprintf(buf, cap, "(absent)");
        return;
    }
    if (cJSON_IsNumber(v)) {
        if (v->valuedouble == floor(v->valuedouble) && fabs(v->valuedouble) < 1e15) {
            snprintf(buf, cap, "%.0f", v->valuedouble);
            return;
        }
        for (int p = 1; p <= 17; p++) {
            snprintf(buf, cap, "%.*g", p, v->valuedouble);
            if ((float)strtod(buf, NULL) == (float)v->valuedouble) return;
        }
        return;
    }
    char *t = cJSON_PrintUnformatted(v);
    snprintf(buf, cap, "%s", t ? t : "?");
    cJSON_free(t);
}

static cJSON *value_json(const cJSON *v) {
    if (!v) return cJSON_CreateNull();
    if (!cJSON_IsNumber(v)) return cJSON_Duplicate(v, 1);
    char t[64];
    value_text(v, t, sizeof t);
    return cJSON_CreateNumber(strtod(t, NULL));
}

/* The keys whose values differ between A's and B's configs (each as the tinylm format writes it, every
 * switch spelled out, so a family's defaults count as values), printed to f and/or added to arr; their count */
static int config_diff(const cmp_report *r, FILE *f, cJSON *arr) {
    if (!r->config_a || !r->config_b) return 0;
    cJSON *a = cJSON_Parse(r->config_a), *b = cJSON_Parse(r->config_b);
    int n = 0;
    for (int side = 0; a && b && side < 2; side++)
        for (const cJSON *it = (side ? b : a)->child; it; it = it->next) {
            const cJSON *other = cJSON_GetObjectItemCaseSensitive(side ? a : b, it->string);
            if (side && other) continue; /* (both have it: seen from A's side) */
            if (other && cJSON_Compare(it, other, 1)) continue;
            const cJSON *ia = side ? other : it, *ib = side ? it : other;
            char va[160], vb[160];
            value_text(ia, va, sizeof va), value_text(ib, vb, sizeof vb);
            const int numeric = !numerics_neutral(it->string);
            if (f)
                fprintf(f, "  %-28s A %-18s B %-18s %s\n", it->string, va, vb,
                        numeric ? "changes the numerics" : "does not change the logits");
            if (arr) {
                cJSON *d = cJSON_CreateObject();
                cJSON_AddStringToObject(d, "key", it->string);
                cJSON_AddItemToObject(d, "a", value_json(ia));
                cJSON_AddItemToObject(d, "b", value_json(ib));
                cJSON_AddBoolToObject(d, "changes_numerics", numeric);
                cJSON_AddItemToArray(arr, d);
            }
            n++;
        }
    cJSON_Delete(a), cJSON_Delete(b);
    return n;
}

void cmp_print(FILE *f, const cmp_report *r) {
    const cmp_result *res = r->res;
    fprintf(f, "A: %s (%s)\nB: %s (%s)\n", r->a_path, r->a_desc, r->b_path, r->b_desc);
    fprintf(f, "tokens (%d):", r->T);
    for (int i = 0; i < r->T && i < 32; i++) fprintf(f, " %d", r->tokens[i]);
    fprintf(f, "%s\n", r->T > 32 ? " ..." : "");
    if (r->config_a && r->config_b) { /* the config diff first: what differs before any number is compared */
        cJSON *probe = cJSON_CreateArray();
        const int nd = config_diff(r, NULL, probe);
        cJSON_Delete(probe);
        if (nd) {
            fprintf(f, "config: %d key%s differ (as the engine reads each side, family defaults included):\n", nd,
                    nd > 1 ? "s" : "");
            config_diff(r, f, NULL);
        } else {
            fprintf(f, "config: the same on both sides (as the engine reads them)\n");
        }
    }
    fprintf(f, "tolerance %.3g: a point diverges where max |Δ| / max |%s| exceeds it\n\n", res->tol, ref_side(r));
    /* (Δ is two bytes of UTF-8 and one column: its fields are one byte wider) */
    fprintf(f, "%-44s %-18s %12s %12s %10s %4s\n", "point", "shape", "max |Δ|", "max rel Δ", "cosine", "pos");
    for (int i = 0; i < res->n; i++) {
        const cmp_point *p = &res->p[i];
        char sh[64];
        shape_str(sh, sizeof sh, p);
        char pos[16] = "-";
        if (p->pos >= 0) snprintf(pos, sizeof pos, "%d", p->pos);
        fprintf(f, "%-44s %-18s %11.3e %11.3e %10.6f %4s%s", p->name, sh, p->max_abs, p->max_rel, p->cosine, pos,
                i == res->first ? "  <- first divergence" : p->diverged ? "  *" : "");
        if (p->mask_mismatch) fprintf(f, "  (%zu entries masked on one side only)", p->mask_mismatch);
        if (p->nonfinite) fprintf(f, "  (%zu entries NaN or infinite)", p->nonfinite);
        fputc('\n', f);
    }
    fputc('\n', f);
    if (!r->b_is_file) print_names(f, "points only in A", res->only_a, res->n_only_a); /* (else: the missing below) */
    print_names(f, "points only in B", res->only_b, res->n_only_b);
    print_names(f, "points of A not in the file (skipped)", r->missing, r->n_missing);
    print_names(f, "keys of the file that are no point of A (ignored)", r->unknown, r->n_unknown);
    if (res->has_output)
        fprintf(f, "output: KL(A || B) mean %.3e nats, max %.3e at position %d; top-1 agreement %d/%d\n", res->kl_mean,
                res->kl_max, res->kl_max_pos, res->top1_same, res->top1_n);
    else
        fprintf(f, "output: no logits on both sides (no KL, no top-1 agreement)\n");
    if (res->first < 0) {
        fprintf(f, "no divergence: every point within %.3g (largest max rel Δ %.3e)\n", res->tol, res->worst_rel);
    } else {
        const cmp_point *p = &res->p[res->first];
        char why[160];
        fprintf(f, "first divergence: %s: ", p->name);
        if (special_entries(p, why, sizeof why)) { /* (the figures cover the other entries only) */
            fprintf(f, "%s", why);
            if (p->max_rel > res->tol) fprintf(f, "; the others: max rel Δ %.3e > %.3g", p->max_rel, res->tol);
            fprintf(f, "\n");
        } else {
            fprintf(f, "max rel Δ %.3e > %.3g", p->max_rel, res->tol);
            if (p->pos >= 0) fprintf(f, ", largest at position %d", p->pos);
            fprintf(f, " (max |Δ| %.3e, cosine %.6f)\n", p->max_abs, p->cosine);
        }
    }
    if (r->note[0]) fprintf(f, "note: %s\n", r->note);
    if (r->factor[0]) fprintf(f, "constant factor: %s\n", r->factor);
    if (r->one_side[0]) fprintf(f, "one side only: %s\n", r->one_side);
    const cmp_search *s = r->search;
    if (!s) return;
    fprintf(f, "\nconvention search: each single change applied to %s, rerun, compared with %s\n", s->cand, s->ref);
    for (int i = 0; i < s->n; i++) {
        const cmp_trial *t = &s->t[i];
        if (!t->tried)
            fprintf(f, "  %-22s not tried: %s\n", t->id, t->note);
        else if (t->matched)
            fprintf(f, "  %-22s MATCHES: every point within %.3g after: %s\n", t->id, res->tol, t->change);
        else
            fprintf(f, "  %-22s still diverges at %s (%.3e)\n", t->id, t->first, t->first_rel);
    }
    if (s->cause >= 0)
        fprintf(f, "cause: %s\n", s->t[s->cause].cause);
    else
        fprintf(f, "cause: no single change of those makes %s match %s\n", s->cand, s->ref);
}

/* ---- JSON --------------------------------------------------------------------------------- */

static void add_num(cJSON *o, const char *k, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

static cJSON *names_json(const char (*names)[CMP_NAME], int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(names[i]));
    return a;
}

static cJSON *point_json(const cmp_point *p) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", p->name);
    cJSON *sh = cJSON_AddArrayToObject(o, "shape");
    for (int d = 0; d < p->ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)p->shape[d]));
    cJSON_AddNumberToObject(o, "layer", p->layer);
    add_num(o, "max_abs", p->max_abs);
    add_num(o, "max_rel", p->max_rel);
    add_num(o, "cosine", p->cosine);
    add_num(o, "ref_max", p->ref_max);
    if (p->pos >= 0) cJSON_AddNumberToObject(o, "pos", p->pos);
    else cJSON_AddNullToObject(o, "pos");
    cJSON_AddNumberToObject(o, "mask_mismatch", (double)p->mask_mismatch);
    cJSON_AddNumberToObject(o, "nonfinite", (double)p->nonfinite);
    cJSON_AddBoolToObject(o, "diverged", p->diverged);
    return o;
}

int cmp_write_json(const char *path, const cmp_report *r) {
    const cmp_result *res = r->res;
    cJSON *o = cJSON_CreateObject();
    cJSON *a = cJSON_AddObjectToObject(o, "a"), *b = cJSON_AddObjectToObject(o, "b");
    cJSON_AddStringToObject(a, "path", r->a_path), cJSON_AddStringToObject(a, "what", r->a_desc);
    cJSON_AddStringToObject(b, "path", r->b_path), cJSON_AddStringToObject(b, "what", r->b_desc);
    cJSON_AddStringToObject(b, "kind", r->b_is_file ? "npz" : "model");
    cJSON *tk = cJSON_AddArrayToObject(o, "tokens");
    for (int i = 0; i < r->T; i++) cJSON_AddItemToArray(tk, cJSON_CreateNumber(r->tokens[i]));
    if (r->config_a && r->config_b) config_diff(r, NULL, cJSON_AddArrayToObject(o, "config_diff"));
    else cJSON_AddNullToObject(o, "config_diff");
    add_num(o, "tolerance", res->tol);
    cJSON_AddStringToObject(o, "reference", ref_side(r));
    cJSON *pts = cJSON_AddArrayToObject(o, "points");
    for (int i = 0; i < res->n; i++) cJSON_AddItemToArray(pts, point_json(&res->p[i]));
    cJSON_AddItemToObject(o, "only_in_a", names_json(res->only_a, res->n_only_a));
    cJSON_AddItemToObject(o, "only_in_b", names_json(res->only_b, res->n_only_b));
    cJSON_AddItemToObject(o, "missing_in_file", names_json(r->missing, r->n_missing));
    cJSON_AddItemToObject(o, "unknown_keys", names_json(r->unknown, r->n_unknown));
    if (res->has_output) {
        cJSON *out = cJSON_AddObjectToObject(o, "output");
        add_num(out, "kl_mean", res->kl_mean);
        add_num(out, "kl_max", res->kl_max);
        cJSON_AddNumberToObject(out, "kl_max_pos", res->kl_max_pos);
        cJSON_AddNumberToObject(out, "top1_agree", res->top1_same);
        cJSON_AddNumberToObject(out, "positions", res->top1_n);
    } else {
        cJSON_AddNullToObject(o, "output");
    }
    add_num(o, "worst_rel", res->worst_rel);
    if (res->first >= 0) cJSON_AddItemToObject(o, "first_divergence", point_json(&res->p[res->first]));
    else cJSON_AddNullToObject(o, "first_divergence");
    if (r->note[0]) cJSON_AddStringToObject(o, "note", r->note);
    if (r->factor[0]) cJSON_AddStringToObject(o, "constant_factor", r->factor);
    else cJSON_AddNullToObject(o, "constant_factor");
    if (r->one_side[0]) cJSON_AddStringToObject(o, "one_side", r->one_side);
    else cJSON_AddNullToObject(o, "one_side");
    const cmp_search *s = r->search;
    if (s) {
        cJSON *so = cJSON_AddObjectToObject(o, "search");
        cJSON_AddStringToObject(so, "changed", s->cand);
        cJSON_AddStringToObject(so, "matched_against", s->ref);
        cJSON *tr = cJSON_AddArrayToObject(so, "tried");
        for (int i = 0; i < s->n; i++) {
            const cmp_trial *t = &s->t[i];
            cJSON *x = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "id", t->id);
            cJSON_AddBoolToObject(x, "applies", t->tried);
            if (t->tried) {
                cJSON_AddStringToObject(x, "change", t->change);
                cJSON_AddBoolToObject(x, "matched", t->matched);
                if (t->first[0]) cJSON_AddStringToObject(x, "first_divergence", t->first);
                else cJSON_AddNullToObject(x, "first_divergence");
                add_num(x, "first_rel", t->first_rel);
                add_num(x, "worst_rel", t->worst_rel);
            } else {
                cJSON_AddStringToObject(x, "why_not", t->note);
            }
            cJSON_AddItemToArray(tr, x);
        }
        if (s->cause >= 0) {
            cJSON *c = cJSON_AddObjectToObject(so, "cause");
            cJSON_AddStringToObject(c, "id", s->t[s->cause].id);
            cJSON_AddStringToObject(c, "change", s->t[s->cause].change);
            cJSON_AddStringToObject(c, "text", s->t[s->cause].cause);
        } else {
            cJSON_AddNullToObject(so, "cause");
        }
        cJSON_AddNumberToObject(so, "n_matched", s->n_matched);
    } else {
        cJSON_AddNullToObject(o, "search");
    }
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text) return tlm_error("%s: out of memory", path);
    tlm_atomic *f = tlm_atomic_open(path);
    int rc = !f ? -1 : tlm_atomic_write(f, text, strlen(text)) || tlm_atomic_write(f, "\n", 1) ? (tlm_atomic_abort(f), -1)
                                                                                                : tlm_atomic_commit(f);
    free(text);
    return rc;
}

/* ---- HTML (no script; every string escaped) ------------------------------------------------ */

static void esc(tlm_buf *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': tlm_buf_puts(b, "&amp;"); break;
        case '<': tlm_buf_puts(b, "&lt;"); break;
        case '>': tlm_buf_puts(b, "&gt;"); break;
        case '"': tlm_buf_puts(b, "&quot;"); break;
        case '\'': tlm_buf_puts(b, "&#39;"); break;
        default: tlm_buf_put(b, s, 1);
        }
    }
}

/* a bar for a relative Δ on a log scale: 1e-9 (or 0) empty, 1 and above full */
static void bar(tlm_buf *b, double rel, int over) {
    double w = rel > 0.0 ? (log10(rel) + 9.0) / 9.0 : 0.0;
    if (!(w >= 0.0)) w = isnan(rel) || rel > 0.0 ? 1.0 : 0.0;
    if (w > 1.0) w = 1.0;
    tlm_buf_printf(b, "<span class=\"bar\"><span class=\"%s\" style=\"width:%.1f%%\"></span></span>", over ? "over" : "ok",
                   100.0 * w);
}

static void num_cell(tlm_buf *b, double v) {
    if (isfinite(v)) tlm_buf_printf(b, "<td class=\"n\">%.3e</td>", v);
    else tlm_buf_printf(b, "<td class=\"n\">%s</td>", isnan(v) ? "NaN" : "inf");
}

int cmp_write_html(const char *path, const cmp_report *r) {
    const cmp_result *res = r->res;
    tlm_buf b = {0};
    tlm_buf_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>tinylm compare: ");
    esc(&b, r->a_path), tlm_buf_puts(&b, " vs "), esc(&b, r->b_path);
    tlm_buf_puts(&b, "</title>\n<style>\nbody{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}"
                     "table{border-collapse:collapse;margin:1em 0}td,th{padding:2px 8px;border-bottom:1px solid #ddd;"
                     "text-align:left}td.n{text-align:right;font-family:monospace}"
                     ".bar{display:inline-block;width:220px;height:10px;background:#eee;vertical-align:middle}"
                     ".bar span{display:block;height:10px}.ok{background:#4a8}.over{background:#d44}"
                     "tr.first td{font-weight:bold;background:#fee}code{font-size:13px}\n</style></head><body>\n");
    tlm_buf_puts(&b, "<h1>tinylm compare</h1>\n<p>A: <code>");
    esc(&b, r->a_path), tlm_buf_puts(&b, "</code> ("), esc(&b, r->a_desc);
    tlm_buf_puts(&b, ")<br>B: <code>"), esc(&b, r->b_path), tlm_buf_puts(&b, "</code> ("), esc(&b, r->b_desc);
    tlm_buf_printf(&b, ")<br>%d tokens; tolerance %.3g on max |&Delta;| / max |%s| per point</p>\n", r->T, res->tol,
                   ref_side(r));
    tlm_buf_puts(&b, "<p>");
    if (res->first < 0) {
        tlm_buf_printf(&b, "<b>No divergence</b>: every point within the tolerance (largest %.3e).", res->worst_rel);
    } else {
        tlm_buf_puts(&b, "<b>First divergence</b>: <code>"), esc(&b, res->p[res->first].name);
        char why[160];
        if (special_entries(&res->p[res->first], why, sizeof why)) tlm_buf_puts(&b, "</code>, "), esc(&b, why), tlm_buf_puts(&b, ".");
        else tlm_buf_printf(&b, "</code>, max rel &Delta; %.3e.", res->p[res->first].max_rel);
    }
    if (res->has_output)
        tlm_buf_printf(&b, " Output: KL(A&#8214;B) mean %.3e, max %.3e nats; top-1 agreement %d/%d.", res->kl_mean,
                       res->kl_max, res->top1_same, res->top1_n);
    tlm_buf_puts(&b, "</p>\n");
    if (r->search) {
        tlm_buf_puts(&b, "<p><b>Cause</b>: ");
        if (r->search->cause >= 0) esc(&b, r->search->t[r->search->cause].cause);
        else tlm_buf_printf(&b, "no single change tried makes %s match %s.", r->search->cand, r->search->ref);
        tlm_buf_puts(&b, "</p>\n");
    }
    if (r->note[0]) tlm_buf_puts(&b, "<p>"), esc(&b, r->note), tlm_buf_puts(&b, "</p>\n");
    /* per layer: the largest relative Δ over the layer's points */
    tlm_buf_puts(&b, "<h2>Per layer</h2>\n<table><tr><th>layer</th><th>largest max rel &Delta;</th><th></th>"
                     "<th>at point</th></tr>\n");
    int max_layer = -1;
    for (int i = 0; i < res->n; i++)
        if (res->p[i].layer > max_layer) max_layer = res->p[i].layer;
    for (int g = -2; g <= max_layer + 1; g++) { /* -2: before the layers (hook_embed); max+1: after (final, logits) */
        double worst = -1.0;
        int at = -1, seen = 0;
        for (int i = 0; i < res->n; i++) {
            const cmp_point *p = &res->p[i];
            int grp = p->layer >= 0 ? p->layer : (strncmp(p->name, "hook_embed", 10) ? max_layer + 1 : -2);
            if (grp != g) continue;
            seen = 1;
            if (p->max_rel > worst || isnan(p->max_rel)) worst = p->max_rel, at = i;
        }
        if (g == -1 || !seen) continue;
        tlm_buf_puts(&b, "<tr><td>");
        if (g == -2) tlm_buf_puts(&b, "embedding");
        else if (g == max_layer + 1) tlm_buf_puts(&b, "final norm, logits");
        else tlm_buf_printf(&b, "%d", g);
        tlm_buf_puts(&b, "</td>");
        num_cell(&b, worst);
        tlm_buf_puts(&b, "<td>"), bar(&b, worst, res->p[at].diverged), tlm_buf_puts(&b, "</td><td><code>");
        esc(&b, res->p[at].name), tlm_buf_puts(&b, "</code></td></tr>\n");
    }
    tlm_buf_puts(&b, "</table>\n<h2>Every point, in pass order</h2>\n<table><tr><th>point</th><th>max |&Delta;|</th>"
                     "<th>max rel &Delta;</th><th></th><th>cosine</th><th>pos</th></tr>\n");
    for (int i = 0; i < res->n; i++) {
        const cmp_point *p = &res->p[i];
        tlm_buf_printf(&b, "<tr%s><td><code>", i == res->first ? " class=\"first\"" : "");
        esc(&b, p->name), tlm_buf_puts(&b, "</code></td>");
        num_cell(&b, p->max_abs), num_cell(&b, p->max_rel);
        tlm_buf_puts(&b, "<td>"), bar(&b, p->max_rel, p->diverged), tlm_buf_puts(&b, "</td>");
        tlm_buf_printf(&b, "<td class=\"n\">%.6f</td>", isfinite(p->cosine) ? p->cosine : 0.0);
        if (p->pos >= 0) tlm_buf_printf(&b, "<td class=\"n\">%d</td></tr>\n", p->pos);
        else tlm_buf_puts(&b, "<td class=\"n\">-</td></tr>\n");
    }
    tlm_buf_puts(&b, "</table>\n");
    if (r->search) {
        tlm_buf_printf(&b, "<h2>Convention search (changes to %s)</h2>\n<table><tr><th>change</th><th>result</th></tr>\n",
                       r->search->cand);
        for (int i = 0; i < r->search->n; i++) {
            const cmp_trial *t = &r->search->t[i];
            tlm_buf_puts(&b, "<tr><td><code>"), esc(&b, t->id), tlm_buf_puts(&b, "</code><br>");
            esc(&b, t->tried ? t->change : t->note);
            tlm_buf_puts(&b, "</td><td>");
            if (!t->tried) tlm_buf_puts(&b, "not tried");
            else if (t->matched) tlm_buf_puts(&b, "<b>matches</b>");
            else tlm_buf_puts(&b, "diverges at <code>"), esc(&b, t->first), tlm_buf_printf(&b, "</code> (%.3e)", t->first_rel);
            tlm_buf_puts(&b, "</td></tr>\n");
        }
        tlm_buf_puts(&b, "</table>\n");
    }
    tlm_buf_puts(&b, "</body></html>\n");
    if (b.oom) {
        tlm_buf_free(&b);
        return tlm_error("%s: out of memory", path);
    }
    int rc = tlm_write_file_atomic(path, b.data, b.len);
    tlm_buf_free(&b);
    return rc;
}
