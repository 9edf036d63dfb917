/* inspect_out.c — `tinylm inspect` reports as an aligned terminal table, CSV (one value per
 * row: section,layer,name,head,position,metric,value,text) and JSON. Token text is made
 * printable first (escapes for control bytes and invalid UTF-8), so every output is valid
 * UTF-8 whatever the tokenizer's pieces hold. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/utf8.h"

/* ---- printable token text ---------------------------------------------------------------------- */

static void printable(const char *text, size_t len, char *out, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        char esc[8] = "";
        uint32_t cp = s[i];
        const int k = (int)tlm_utf8_valid_len(text + i, len - i);
        if (k) tlm_utf8_decode(text + i, len - i, &cp);
        if (k && cp >= 0x20 && cp != 0x7F && !(cp >= 0x80 && cp < 0xA0)) {
            if (o + (size_t)k >= n) break;
            memcpy(out + o, s + i, (size_t)k);
            o += (size_t)k, i += (size_t)k;
            continue;
        }
        if (k == 1 && cp == '\n')
            strcpy(esc, "\\n");
        else if (k == 1 && cp == '\t')
            strcpy(esc, "\\t");
        else if (k == 1 && cp == '\r')
            strcpy(esc, "\\r");
        else
            snprintf(esc, sizeof esc, "\\x%02X", s[i]);
        size_t el = strlen(esc);
        if (o + el >= n) break;
        memcpy(out + o, esc, el);
        o += el, i += k > 1 ? (size_t)k : 1;
    }
    out[o] = '\0';
}

void inspect_token_text(const struct tlm_tokenizer *tok, int prev, int id, char *out, size_t n) {
    size_t len = 0;
    const char *piece = tok ? tlm_tokenizer_piece(tok, prev, id, &len) : NULL;
    if (!piece) {
        snprintf(out, n, "#%d", id);
        return;
    }
    printable(piece, len, out, n);
}

/* the token at input position i (its text depends on the one before it) */
static void input_text(const struct tlm_tokenizer *tok, const inspect_report *r, int i, char *out, size_t n) {
    inspect_token_text(tok, i > 0 ? r->tokens[i - 1] : -1, r->tokens[i], out, n);
}

/* a token predicted at the position: it follows the input token there */
static void predicted_text(const struct tlm_tokenizer *tok, const inspect_report *r, int id, char *out, size_t n) {
    inspect_token_text(tok, r->tokens[r->position], id, out, n);
}

/* one lens's readings (the logit lens, or the tuned lens beside it): same shapes, two outputs */
typedef struct {
    const int *top, *grid;                         /* [n_lens, K], [n_lens, T] */
    const float *top_prob, *top_logit, *grid_prob; /* likewise */
    const double *kl_at, *kl;                      /* [n_lens] */
} lens_view;

static lens_view lens_view_of(const inspect_report *r, int tuned) {
    return tuned ? (lens_view){r->tuned_top, r->tuned_grid, r->tuned_top_prob, r->tuned_top_logit, r->tuned_grid_prob,
                               r->tuned_kl_at, r->tuned_kl}
                 : (lens_view){r->lens_top, r->lens_grid, r->lens_top_prob, r->lens_top_logit, r->lens_grid_prob,
                               r->lens_kl_at, r->lens_kl};
}

static void lens_table(FILE *f, const struct tlm_tokenizer *tok, const inspect_report *r, lens_view v) {
    const int K = r->top_k;
    char a[32];
    for (int k = 0; k < r->n_lens; k++) {
        if (k == 0)
            fprintf(f, "  %-10s", "embed");
        else
            fprintf(f, "  layer %-4d", k - 1);
        for (int j = 0; j < K; j++) {
            predicted_text(tok, r, v.top[k * K + j], a, 24);
            fprintf(f, "  \"%s\" %.3f", a, v.top_prob[k * K + j]);
        }
        fprintf(f, "\n");
    }
}

/* ---- terminal table ---------------------------------------------------------------------------- */

int inspect_print_table(FILE *f, const inspect_report *r, const struct tlm_tokenizer *tok) {
    const int P = r->position, K = r->top_k, L = r->n_layers;
    char a[128], b[128];
    input_text(tok, r, P, a, sizeof a);
    predicted_text(tok, r, r->predicted, b, sizeof b);
    fprintf(f, "%d tokens; position %d is \"%s\"; the model predicts \"%s\" (p = %.4f)\n\n", r->T, P, a, b,
            r->predicted_prob);

    fprintf(f, "Residual stream: L2 norm after each step, and of what each sublayer adds\n");
    fprintf(f, "  %-22s %12s %12s   %-20s %12s %12s\n", "stream after", "at pos", "mean", "increment", "at pos", "mean");
    for (int k = 0; k < r->n_points; k++) {
        const inspect_value *pt = &r->points[k];
        fprintf(f, "  %-22s %12.5g %12.5g", pt->name, pt->v.at, pt->v.mean);
        if (k > 0) {
            const inspect_value *in = &r->incr[k - 1];
            fprintf(f, "   %-20s %12.5g %12.5g", in->name, in->v.at, in->v.mean);
        }
        fprintf(f, "\n");
    }

    fprintf(f, "\nNorms: RMS of the input -> RMS of the output\n");
    fprintf(f, "  %-26s %11s %11s %11s %11s %9s\n", "norm", "in at pos", "out at pos", "in mean", "out mean",
            "out/in");
    for (int i = 0; i < r->n_norms; i++) {
        const inspect_norm *n = &r->norms[i];
        fprintf(f, "  %-26s %11.5g %11.5g %11.5g %11.5g %9.4g\n", n->name, n->in_rms.at, n->out_rms.at, n->in_rms.mean,
                n->out_rms.mean, n->in_rms.at > 0 ? n->out_rms.at / n->in_rms.at : NAN);
    }
    if (r->n_norms == 0) fprintf(f, "  (this model has no norms)\n");

    fprintf(f, "\nAttention heads: largest pre-softmax logit and entropy (nats) of the attention row\n");
    fprintf(f, "  %5s %4s %12s %12s %12s %12s\n", "layer", "head", "max at pos", "max mean", "entropy pos", "entropy mean");
    for (int i = 0; i < L * r->n_heads; i++) {
        const inspect_head *h = &r->heads[i];
        fprintf(f, "  %5d %4d %12.5g %12.5g %12.5g %12.5g\n", h->layer, h->head, h->max_logit.at, h->max_logit.mean,
                h->entropy.at, h->entropy.mean);
    }

    if (r->n_experts > 0) {
        const int E = r->n_experts, k = r->k_experts;
        fprintf(f, "\nMixture of experts: each layer's router over these %d tokens (share of the %d x %d routed slots "
                   "per expert, uniform %.4f; no capacity limit: nothing dropped)\n",
                r->T, r->T, k, 1.0 / E);
        fprintf(f, "  %5s %9s %9s %9s %9s   %s\n", "layer", "entropy", "max/unif", "min/unif", "unused", "experts at the position (weight)");
        for (int l = 0; l < L; l++) {
            if (!r->moe_layer[l]) continue;
            const float *load = r->moe_load + (size_t)l * E;
            float mx = 0, mn = 1;
            int unused = 0;
            for (int e = 0; e < E; e++) mx = load[e] > mx ? load[e] : mx, mn = load[e] < mn ? load[e] : mn, unused += load[e] == 0;
            fprintf(f, "  %5d %9.4f %9.3f %9.3f %9d  ", l, r->moe_entropy[l], mx * E, mn * E, unused);
            for (int j = 0; j < k; j++) {
                const size_t i = ((size_t)l * r->T + P) * k + j;
                fprintf(f, " %d (%.3f)", r->moe_experts[i], r->moe_weights[i]);
            }
            fprintf(f, "\n");
        }
    }

    fprintf(f, "\nLogit lens at position %d: top %d tokens of each layer's residual stream through the final norm "
               "and the LM head\n",
            P, K);
    lens_table(f, tok, r, lens_view_of(r, 0));
    if (r->has_tuned) {
        fprintf(f, "\nTuned lens at position %d: the same rows through each layer's translator h + A h + b first\n", P);
        lens_table(f, tok, r, lens_view_of(r, 1));
    }
    fprintf(f, "\nKL(final || lens) in nats, at position %d and the mean over positions\n", P);
    fprintf(f, "  %-10s %12s %12s%s\n", "", "logit at", "logit mean", r->has_tuned ? "     tuned at   tuned mean" : "");
    for (int k = 0; k < r->n_lens; k++) {
        if (k == 0)
            fprintf(f, "  %-10s", "embed");
        else
            fprintf(f, "  layer %-4d", k - 1);
        fprintf(f, " %12.4f %12.4f", r->lens_kl_at[k], r->lens_kl[k]);
        if (r->has_tuned) fprintf(f, " %12.4f %12.4f", r->tuned_kl_at[k], r->tuned_kl[k]);
        fprintf(f, "\n");
    }

    predicted_text(tok, r, r->predicted, b, sizeof b);
    fprintf(f, "\nResidual stream as a sum at position %d: h_final = embed + attn_0 + ffn_0 + ... + ffn_%d\n", P, L - 1);
    if (!r->decomp_applies) {
        fprintf(f, "  does not apply: %s\n", r->decomp_reason);
        return ferror(f) ? tlm_error("writing the report failed") : 0;
    }
    fprintf(f, "  %-22s %12s %14s\n", "term", "L2 norm", "direct logit");
    for (int i = 0; i < r->n_terms; i++)
        fprintf(f, "  %-22s %12.5g %14.5g\n", r->terms[i].name, r->terms[i].norm, r->terms[i].dla);
    if (r->has_dla_bias) fprintf(f, "  %-22s %12s %14.5g\n", "final_norm.bias", "", r->dla_bias);
    fprintf(f, "  the terms add up to the final residual: max abs error %.3g, relative %.3g (worst position %.3g)\n",
            r->sum_err_abs, r->sum_err_rel, r->sum_err_rel_max);
    fprintf(f, "  direct logit attribution to \"%s\" (final norm scale from the full residual): sum %.6g, logit %.6g%s\n",
            b, r->dla_sum, r->logit_raw, r->logit_raw != r->logit ? " (before the final soft-cap)" : "");
    return ferror(f) ? tlm_error("writing the report failed") : 0;
}

/* ---- CSV ------------------------------------------------------------------------------------------ */

/* text as a CSV field: quoted, quotes doubled */
static void csv_text(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void csv_row(FILE *f, const char *section, int layer, const char *name, int head, int pos, const char *metric,
                    double value, const char *text) {
    fprintf(f, "%s,", section);
    if (layer >= 0) fprintf(f, "%d", layer);
    fprintf(f, ",%s,", name);
    if (head >= 0) fprintf(f, "%d", head);
    if (pos >= 0)
        fprintf(f, ",%d,", pos);
    else
        fprintf(f, ",mean,");
    fprintf(f, "%s,%.9g,", metric, value);
    if (text) csv_text(f, text);
    fputc('\n', f);
}

static void lens_csv(FILE *f, const struct tlm_tokenizer *tok, const inspect_report *r, lens_view v,
                     const char *section, const char *grid_section) {
    const int K = r->top_k, P = r->position;
    char t[64];
    for (int k = 0; k < r->n_lens; k++) {
        char name[64];
        inspect_stage_name(name, sizeof name, k);
        for (int j = 0; j < K; j++) {
            char metric[32];
            predicted_text(tok, r, v.top[k * K + j], t, sizeof t);
            snprintf(metric, sizeof metric, "top%d_prob", j + 1);
            csv_row(f, section, k - 1, name, -1, P, metric, v.top_prob[k * K + j], t);
            snprintf(metric, sizeof metric, "top%d_id", j + 1);
            csv_row(f, section, k - 1, name, -1, P, metric, v.top[k * K + j], t);
        }
        for (int i = 0; i < r->T; i++) {
            inspect_token_text(tok, r->tokens[i], v.grid[k * r->T + i], t, sizeof t);
            csv_row(f, grid_section, k - 1, name, -1, i, "top1_prob", v.grid_prob[k * r->T + i], t);
        }
        csv_row(f, section, k - 1, name, -1, P, "kl_to_final", v.kl_at[k], NULL);
        csv_row(f, section, k - 1, name, -1, -1, "kl_to_final", v.kl[k], NULL);
    }
}

static int layer_of(const char *name) {
    int l;
    return sscanf(name, "layers.%d.", &l) == 1 ? l : -1;
}

int inspect_print_csv(FILE *f, const inspect_report *r, const struct tlm_tokenizer *tok) {
    const int P = r->position;
    char t[128];
    fprintf(f, "section,layer,name,head,position,metric,value,text\n");
    for (int i = 0; i < r->T; i++) {
        input_text(tok, r, i, t, sizeof t);
        csv_row(f, "input", -1, "token", -1, i, "id", r->tokens[i], t);
    }
    for (int k = 0; k < r->n_points; k++) {
        const inspect_value *v = &r->points[k];
        csv_row(f, "residual", layer_of(v->name), v->name, -1, P, "norm", v->v.at, NULL);
        csv_row(f, "residual", layer_of(v->name), v->name, -1, -1, "norm", v->v.mean, NULL);
    }
    for (int k = 0; k < r->n_points - 1; k++) {
        const inspect_value *v = &r->incr[k];
        csv_row(f, "increment", layer_of(v->name), v->name, -1, P, "norm", v->v.at, NULL);
        csv_row(f, "increment", layer_of(v->name), v->name, -1, -1, "norm", v->v.mean, NULL);
    }
    for (int i = 0; i < r->n_norms; i++) {
        const inspect_norm *n = &r->norms[i];
        csv_row(f, "norm", layer_of(n->name), n->name, -1, P, "in_rms", n->in_rms.at, NULL);
        csv_row(f, "norm", layer_of(n->name), n->name, -1, -1, "in_rms", n->in_rms.mean, NULL);
        csv_row(f, "norm", layer_of(n->name), n->name, -1, P, "out_rms", n->out_rms.at, NULL);
        csv_row(f, "norm", layer_of(n->name), n->name, -1, -1, "out_rms", n->out_rms.mean, NULL);
    }
    for (int i = 0; i < r->n_layers * r->n_heads; i++) {
        const inspect_head *h = &r->heads[i];
        char name[64];
        snprintf(name, sizeof name, "layers.%d.attn", h->layer);
        csv_row(f, "head", h->layer, name, h->head, P, "max_logit", h->max_logit.at, NULL);
        csv_row(f, "head", h->layer, name, h->head, -1, "max_logit", h->max_logit.mean, NULL);
        csv_row(f, "head", h->layer, name, h->head, P, "entropy", h->entropy.at, NULL);
        csv_row(f, "head", h->layer, name, h->head, -1, "entropy", h->entropy.mean, NULL);
    }
    lens_csv(f, tok, r, lens_view_of(r, 0), "logit_lens", "logit_lens_grid");
    if (r->has_tuned) lens_csv(f, tok, r, lens_view_of(r, 1), "tuned_lens", "tuned_lens_grid");
    predicted_text(tok, r, r->predicted, t, sizeof t);
    csv_row(f, "prediction", -1, "logits", -1, P, "id", r->predicted, t);
    csv_row(f, "prediction", -1, "logits", -1, P, "prob", r->predicted_prob, t);
    csv_row(f, "prediction", -1, "logits", -1, P, "logit", r->logit, t);
    csv_row(f, "prediction", -1, "logits", -1, P, "logit_before_softcap", r->logit_raw, t);
    csv_row(f, "decomposition", -1, "applies", -1, P, "flag", r->decomp_applies, r->decomp_applies ? NULL : r->decomp_reason);
    for (int i = 0; r->decomp_applies && i < r->n_terms; i++) {
        const inspect_term *term = &r->terms[i];
        csv_row(f, "decomposition", layer_of(term->name), term->name, -1, P, "norm", term->norm, NULL);
        csv_row(f, "decomposition", layer_of(term->name), term->name, -1, P, "dla", term->dla, NULL);
    }
    if (r->decomp_applies) {
        if (r->has_dla_bias) csv_row(f, "decomposition", -1, "final_norm.bias", -1, P, "dla", r->dla_bias, NULL);
        csv_row(f, "decomposition", -1, "sum", -1, P, "dla", r->dla_sum, NULL);
        csv_row(f, "decomposition", -1, "sum", -1, P, "max_abs_error", r->sum_err_abs, NULL);
        csv_row(f, "decomposition", -1, "sum", -1, P, "rel_error", r->sum_err_rel, NULL);
        csv_row(f, "decomposition", -1, "sum", -1, -1, "rel_error_worst", r->sum_err_rel_max, NULL);
    }
    return ferror(f) ? tlm_error("writing the CSV failed") : 0;
}

/* ---- JSON ----------------------------------------------------------------------------------------- */

static cJSON *stat_json(inspect_stat s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "at", s.at);
    cJSON_AddNumberToObject(o, "mean", s.mean);
    return o;
}

static cJSON *token_json(const struct tlm_tokenizer *tok, int prev, int id, double prob, double logit) {
    char t[128];
    inspect_token_text(tok, prev, id, t, sizeof t);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", id);
    cJSON_AddStringToObject(o, "text", t);
    if (!isnan(prob)) cJSON_AddNumberToObject(o, "prob", prob);
    if (!isnan(logit)) cJSON_AddNumberToObject(o, "logit", logit);
    return o;
}

static void lens_json(cJSON *arr, const struct tlm_tokenizer *tok, const inspect_report *r, lens_view v) {
    const int K = r->top_k, P = r->position, T = r->T;
    for (int k = 0; k < r->n_lens; k++) {
        cJSON *o = cJSON_CreateObject();
        char name[64];
        inspect_stage_name(name, sizeof name, k);
        cJSON_AddStringToObject(o, "name", name);
        cJSON *top = cJSON_AddArrayToObject(o, "top");
        for (int j = 0; j < K; j++)
            cJSON_AddItemToArray(top, token_json(tok, r->tokens[P], v.top[k * K + j], v.top_prob[k * K + j],
                                                 v.top_logit[k * K + j]));
        cJSON *grid = cJSON_AddArrayToObject(o, "top1_by_position");
        for (int i = 0; i < T; i++)
            cJSON_AddItemToArray(grid, token_json(tok, r->tokens[i], v.grid[k * T + i], v.grid_prob[k * T + i], NAN));
        cJSON_AddItemToObject(o, "kl_to_final", stat_json((inspect_stat){v.kl_at[k], v.kl[k]}));
        cJSON_AddItemToArray(arr, o);
    }
}

/* cJSON writes non-finite numbers as null; the masked-out cases never reach here */
cJSON *inspect_json_object(const inspect_report *r, const struct tlm_tokenizer *tok) {
    const int P = r->position, T = r->T;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "position", P);
    cJSON *toks = cJSON_AddArrayToObject(root, "tokens");
    for (int i = 0; i < T; i++)
        cJSON_AddItemToArray(toks, token_json(tok, i > 0 ? r->tokens[i - 1] : -1, r->tokens[i], NAN, NAN));
    cJSON_AddItemToObject(root, "prediction",
                          token_json(tok, r->tokens[P], r->predicted, r->predicted_prob, r->logit));
    cJSON *res = cJSON_AddArrayToObject(root, "residual");
    for (int k = 0; k < r->n_points; k++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", r->points[k].name);
        cJSON_AddItemToObject(o, "norm", stat_json(r->points[k].v));
        cJSON_AddItemToArray(res, o);
    }
    cJSON *inc = cJSON_AddArrayToObject(root, "increments");
    for (int k = 0; k < r->n_points - 1; k++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", r->incr[k].name);
        cJSON_AddItemToObject(o, "norm", stat_json(r->incr[k].v));
        cJSON_AddItemToArray(inc, o);
    }
    cJSON *norms = cJSON_AddArrayToObject(root, "norms");
    for (int i = 0; i < r->n_norms; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", r->norms[i].name);
        cJSON_AddItemToObject(o, "in_rms", stat_json(r->norms[i].in_rms));
        cJSON_AddItemToObject(o, "out_rms", stat_json(r->norms[i].out_rms));
        cJSON_AddItemToArray(norms, o);
    }
    cJSON *heads = cJSON_AddArrayToObject(root, "heads");
    for (int i = 0; i < r->n_layers * r->n_heads; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "layer", r->heads[i].layer);
        cJSON_AddNumberToObject(o, "head", r->heads[i].head);
        cJSON_AddItemToObject(o, "max_logit", stat_json(r->heads[i].max_logit));
        cJSON_AddItemToObject(o, "entropy", stat_json(r->heads[i].entropy));
        cJSON_AddItemToArray(heads, o);
    }
    if (r->n_experts > 0) { /* a mixture of experts: per MoE layer, the router's load and each token's experts */
        const int E = r->n_experts, k = r->k_experts;
        cJSON *moe = cJSON_AddArrayToObject(root, "experts");
        for (int l = 0; l < r->n_layers; l++) {
            if (!r->moe_layer[l]) continue;
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "layer", l);
            cJSON_AddItemToObject(o, "load", cJSON_CreateFloatArray(r->moe_load + (size_t)l * E, E));
            cJSON_AddNumberToObject(o, "entropy", r->moe_entropy[l]);
            cJSON_AddNumberToObject(o, "dropped_fraction", 0);
            cJSON *ids = cJSON_AddArrayToObject(o, "token_experts"), *ws = cJSON_AddArrayToObject(o, "token_weights");
            for (int t = 0; t < r->T; t++) {
                const size_t i = ((size_t)l * r->T + t) * k;
                cJSON_AddItemToArray(ids, cJSON_CreateIntArray(r->moe_experts + i, k));
                cJSON_AddItemToArray(ws, cJSON_CreateFloatArray(r->moe_weights + i, k));
            }
            cJSON_AddItemToArray(moe, o);
        }
    }
    lens_json(cJSON_AddArrayToObject(root, "logit_lens"), tok, r, lens_view_of(r, 0));
    if (r->has_tuned) lens_json(cJSON_AddArrayToObject(root, "tuned_lens"), tok, r, lens_view_of(r, 1));
    cJSON_AddNumberToObject(root, "logit_lens_last_row_vs_logits", r->lens_final_diff);
    cJSON *dec = cJSON_AddObjectToObject(root, "decomposition");
    cJSON_AddBoolToObject(dec, "applies", r->decomp_applies);
    if (!r->decomp_applies) {
        cJSON_AddStringToObject(dec, "reason", r->decomp_reason);
    } else {
        cJSON *terms = cJSON_AddArrayToObject(dec, "terms");
        for (int i = 0; i < r->n_terms; i++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "name", r->terms[i].name);
            cJSON_AddNumberToObject(o, "norm", r->terms[i].norm);
            cJSON_AddNumberToObject(o, "dla", r->terms[i].dla);
            cJSON_AddItemToArray(terms, o);
        }
        if (r->has_dla_bias) cJSON_AddNumberToObject(dec, "dla_final_norm_bias", r->dla_bias);
        cJSON_AddNumberToObject(dec, "dla_sum", r->dla_sum);
        cJSON_AddNumberToObject(dec, "logit_before_softcap", r->logit_raw);
        cJSON_AddNumberToObject(dec, "sum_max_abs_error", r->sum_err_abs);
        cJSON_AddNumberToObject(dec, "sum_rel_error", r->sum_err_rel);
        cJSON_AddNumberToObject(dec, "sum_rel_error_worst_position", r->sum_err_rel_max);
    }
    return root;
}

char *inspect_json(const inspect_report *r, const struct tlm_tokenizer *tok) {
    cJSON *root = inspect_json_object(r, tok);
    char *s = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!s) tlm_error("out of memory writing JSON");
    return s;
}

/* ---- gradient report ------------------------------------------------------------------------------ */

int inspect_grad_print_table(FILE *f, const inspect_grad_report *r) {
    const int L = r->n_layers;
    fprintf(f, "one batch of %d x %d tokens: loss %.6g\n\n", r->B, r->T, r->loss);
    fprintf(f, "Gradient reaching the residual stream (L2 norm over the batch)\n");
    fprintf(f, "  %-22s %12s %10s\n", "stream after", "|dL/dx|", "vs last");
    const double last = r->dres[2 * L].v.at;
    for (int k = 0; k <= 2 * L; k++)
        fprintf(f, "  %-22s %12.5g %10.4g\n", r->dres[k].name, r->dres[k].v.at, last > 0 ? r->dres[k].v.at / last : NAN);
    fprintf(f, "\nParameter gradients by layer (L2 norm)\n");
    fprintf(f, "  %-8s %12s %12s %12s %12s\n", "layer", "attention", "ffn", "norms", "all");
    for (int l = 0; l < L; l++)
        fprintf(f, "  %-8d %12.5g %12.5g %12.5g %12.5g\n", l, r->layer_attn[l], r->layer_ffn[l], r->layer_norms[l],
                r->layer_total[l]);
    fprintf(f, "  embed.weight %.5g", r->embed);
    if (r->has_pos_embed) fprintf(f, "   pos_embed.weight %.5g", r->pos_embed);
    if (r->has_final_norm) fprintf(f, "   final_norm %.5g", r->final_norm);
    if (r->has_lm_head) fprintf(f, "   lm_head.weight %.5g", r->lm_head);
    fprintf(f, "   all parameters %.5g\n", r->total);
    fprintf(f, "\n|dL/dx| entering layer 0 / at the last layer's output = %.4g (far below 1: vanishing; far above: exploding)\n",
            last > 0 ? r->dres[0].v.at / last : NAN);
    return ferror(f) ? tlm_error("writing the report failed") : 0;
}

int inspect_grad_print_csv(FILE *f, const inspect_grad_report *r) {
    fprintf(f, "section,layer,name,head,position,metric,value,text\n");
    csv_row(f, "loss", -1, "loss", -1, -1, "loss", r->loss, NULL);
    for (int k = 0; k <= 2 * r->n_layers; k++)
        csv_row(f, "grad_residual", layer_of(r->dres[k].name), r->dres[k].name, -1, -1, "norm", r->dres[k].v.at, NULL);
    for (int l = 0; l < r->n_layers; l++) {
        char name[32];
        snprintf(name, sizeof name, "layers.%d", l);
        csv_row(f, "grad_layer", l, name, -1, -1, "attention", r->layer_attn[l], NULL);
        csv_row(f, "grad_layer", l, name, -1, -1, "ffn", r->layer_ffn[l], NULL);
        csv_row(f, "grad_layer", l, name, -1, -1, "norms", r->layer_norms[l], NULL);
        csv_row(f, "grad_layer", l, name, -1, -1, "all", r->layer_total[l], NULL);
    }
    for (int i = 0; i < r->n_tensors; i++)
        csv_row(f, "grad_param", layer_of(r->tensors[i].name), r->tensors[i].name, -1, -1, "norm", r->tensors[i].v.at,
                NULL);
    return ferror(f) ? tlm_error("writing the CSV failed") : 0;
}

cJSON *inspect_grad_json_object(const inspect_grad_report *r, const int *ids, int n_ids) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "batch", r->B);
    cJSON_AddNumberToObject(root, "seq", r->T);
    cJSON_AddNumberToObject(root, "loss", r->loss);
    cJSON *tk = cJSON_AddArrayToObject(root, "tokens");
    for (int i = 0; i < n_ids; i++) cJSON_AddItemToArray(tk, cJSON_CreateNumber(ids[i]));
    cJSON *dres = cJSON_AddArrayToObject(root, "grad_residual");
    for (int k = 0; k <= 2 * r->n_layers; k++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", r->dres[k].name);
        cJSON_AddNumberToObject(o, "norm", r->dres[k].v.at);
        cJSON_AddItemToArray(dres, o);
    }
    cJSON *layers = cJSON_AddArrayToObject(root, "grad_layers");
    for (int l = 0; l < r->n_layers; l++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "layer", l);
        cJSON_AddNumberToObject(o, "attention", r->layer_attn[l]);
        cJSON_AddNumberToObject(o, "ffn", r->layer_ffn[l]);
        cJSON_AddNumberToObject(o, "norms", r->layer_norms[l]);
        cJSON_AddNumberToObject(o, "all", r->layer_total[l]);
        cJSON_AddItemToArray(layers, o);
    }
    cJSON *params = cJSON_AddObjectToObject(root, "grad_params");
    for (int i = 0; i < r->n_tensors; i++) cJSON_AddNumberToObject(params, r->tensors[i].name, r->tensors[i].v.at);
    cJSON_AddNumberToObject(root, "grad_total", r->total);
    return root;
}

char *inspect_grad_json(const inspect_grad_report *r, const int *ids, int n_ids) {
    cJSON *root = inspect_grad_json_object(r, ids, n_ids);
    char *s = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!s) tlm_error("out of memory writing JSON");
    return s;
}
