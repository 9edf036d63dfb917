/* inspect_html.c — `tinylm inspect --html`: the report's data as one JSON blob for the page of
 * src/report (report.h): the JSON report of --json ("report"), every position's numbers
 * ("per_position": the model's top tokens, residual / increment / norm profiles, per-head
 * sharpness) and each head's attention pattern (the causal lower triangle as uint16 in base64). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect.h"
#include "model/model.h"
#include "report/report.h"
#include "util/error.h"

/* x to 6 significant digits (the page shows 3-4; the text stays short) */
static cJSON *num6(double x) {
    if (!isfinite(x)) return cJSON_CreateNull();
    char b[32];
    snprintf(b, sizeof b, "%.6g", x);
    return cJSON_CreateNumber(strtod(b, NULL));
}

/* rows x T floats as an array of arrays */
static cJSON *rows_json(const float *x, int rows, int T) {
    cJSON *a = cJSON_CreateArray();
    for (int k = 0; k < rows; k++) {
        cJSON *row = cJSON_CreateArray();
        for (int i = 0; i < T; i++) cJSON_AddItemToArray(row, num6(x[(size_t)k * T + i]));
        cJSON_AddItemToArray(a, row);
    }
    return a;
}

static const char *norm_name(const tlm_config *c) { return norm_type_name(c->norm); }

static cJSON *model_json(const char *model, const tlm_model *m) {
    const tlm_config *c = &m->cfg;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "path", model ? model : "");
    cJSON_AddNumberToObject(o, "n_layers", c->n_layers);
    cJSON_AddNumberToObject(o, "n_heads", c->n_heads);
    cJSON_AddNumberToObject(o, "d_model", c->d_model);
    cJSON_AddNumberToObject(o, "vocab_size", c->vocab_size);
    cJSON_AddStringToObject(o, "norm", norm_name(c));
    cJSON_AddStringToObject(o, "placement", placement_name(c->placement));
    cJSON_AddBoolToObject(o, "residual", c->residual);
    cJSON_AddNumberToObject(o, "final_softcap", c->final_softcap); /* 0: none */
    return o;
}

static int write_page(const char *path, cJSON *root, const char *title) {
    char *data = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    int rc = data ? report_write_html(path, title, data) : tlm_error("out of memory writing the HTML report");
    free(data);
    return rc;
}

int inspect_html(const char *path, const inspect_report *r, const struct tlm_tokenizer *tok, const char *model,
                 const tlm_model *m) {
    const int T = r->T, K = r->top_k, L = r->n_layers, H = r->n_heads;
    if (!r->pred_top) return tlm_error("inspect_html: the report was run without INSPECT_EVERY_POSITION_TOP");
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "kind", "inspect");
    cJSON_AddItemToObject(root, "model", model_json(model, m));
    cJSON *rep = inspect_json_object(r, tok);
    if (!rep) {
        cJSON_Delete(root);
        return tlm_error("out of memory writing the HTML report");
    }
    cJSON_AddItemToObject(root, "report", rep);

    cJSON *pp = cJSON_AddObjectToObject(root, "per_position");
    cJSON *top = cJSON_AddArrayToObject(pp, "top");
    for (int i = 0; i < T; i++) {
        cJSON *row = cJSON_CreateArray();
        for (int j = 0; j < K; j++) {
            char t[128];
            const size_t at = (size_t)i * K + j;
            inspect_token_text(tok, r->tokens[i], r->pred_top[at], t, sizeof t);
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "id", r->pred_top[at]);
            cJSON_AddStringToObject(o, "text", t);
            cJSON_AddNumberToObject(o, "prob", r->pred_top_prob[at]);
            cJSON_AddItemToObject(o, "logit", num6(r->pred_top_logit[at]));
            cJSON_AddItemToArray(row, o);
        }
        cJSON_AddItemToArray(top, row);
    }
    cJSON_AddItemToObject(pp, "residual", rows_json(r->point_norm_pos, r->n_points, T));
    cJSON_AddItemToObject(pp, "increments", rows_json(r->incr_norm_pos, 2 * L, T));
    cJSON_AddItemToObject(pp, "norm_in_rms", rows_json(r->norm_in_pos, r->n_norms, T));
    cJSON_AddItemToObject(pp, "norm_out_rms", rows_json(r->norm_out_pos, r->n_norms, T));
    cJSON_AddItemToObject(pp, "head_max_logit", rows_json(r->head_max_pos, L * H, T));
    cJSON_AddItemToObject(pp, "head_entropy", rows_json(r->head_ent_pos, L * H, T));
    cJSON *lens_prob = cJSON_AddArrayToObject(pp, "lens_top1_prob"); /* the lens grid's probabilities, rounded */
    for (int k = 0; k < r->n_lens; k++) {
        cJSON *row = cJSON_CreateArray();
        for (int i = 0; i < T; i++) cJSON_AddItemToArray(row, num6(r->lens_grid_prob[(size_t)k * T + i]));
        cJSON_AddItemToArray(lens_prob, row);
    }

    cJSON *att = cJSON_AddObjectToObject(root, "attention");
    const long long n_attn = (long long)L * H * T * (T + 1) / 2;
    if (r->attn_q) {
        cJSON_AddStringToObject(att, "encoding", "uint16le-lower-triangle-base64");
        cJSON_AddNumberToObject(att, "scale", 65535);
        cJSON *heads = cJSON_AddArrayToObject(att, "heads");
        const size_t per = (size_t)T * (T + 1) / 2;
        unsigned char *bytes = malloc(per * 2);
        for (int h = 0; bytes && h < L * H; h++) {
            const uint16_t *q = r->attn_q + (size_t)h * per;
            for (size_t i = 0; i < per; i++)
                bytes[2 * i] = (unsigned char)(q[i] & 0xFF), bytes[2 * i + 1] = (unsigned char)(q[i] >> 8);
            char *b64 = report_base64(bytes, per * 2);
            if (!b64) break;
            cJSON_AddItemToArray(heads, cJSON_CreateString(b64));
            free(b64);
        }
        free(bytes);
        if (cJSON_GetArraySize(heads) != L * H) {
            cJSON_Delete(root);
            return tlm_error("out of memory encoding the attention patterns");
        }
    } else {
        char why[400];
        snprintf(why, sizeof why,
                 "%lld attention weights (%d layers x %d heads x %d positions) exceed the page's limit of %lld; "
                 "the per-head numbers are complete, the full patterns are available with --probe "
                 "'layers.*.attn.probs' --dump DIR",
                 n_attn, L, H, T, (long long)INSPECT_ATTENTION_LIMIT);
        cJSON_AddStringToObject(att, "omitted", why);
    }
    char title[300];
    snprintf(title, sizeof title, "tinylm inspect: %s (%d tokens)", model ? model : "model", T);
    return write_page(path, root, title);
}

int inspect_grad_html(const char *path, const inspect_grad_report *r, const struct tlm_tokenizer *tok, const int *ids,
                      int n_ids, const char *model, const tlm_model *m) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "kind", "grad");
    cJSON_AddItemToObject(root, "model", model_json(model, m));
    cJSON *rep = inspect_grad_json_object(r, ids, n_ids);
    if (!rep) {
        cJSON_Delete(root);
        return tlm_error("out of memory writing the HTML report");
    }
    cJSON_AddItemToObject(root, "report", rep);
    /* the text of the first window (up to 256 tokens), for the page's header */
    cJSON *texts = cJSON_AddArrayToObject(root, "token_text");
    for (int i = 0; i < n_ids && i < 256; i++) {
        char t[128];
        inspect_token_text(tok, i > 0 ? ids[i - 1] : -1, ids[i], t, sizeof t);
        cJSON_AddItemToArray(texts, cJSON_CreateString(t));
    }
    char title[300];
    snprintf(title, sizeof title, "tinylm inspect --grad: %s", model ? model : "model");
    return write_page(path, root, title);
}
