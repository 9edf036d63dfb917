/* attn_log.c — per-step attention-logit maxima and QK-norm gains for metrics.jsonl (attn_log.h) */
#include "attn_log.h"
#include "model/context.h"

#include <math.h>
#include <stdlib.h>

attn_log *attn_log_new(const tlm_model *m) {
    attn_log *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->L = m->cfg.n_layers, a->H = m->cfg.n_heads;
    a->amax = calloc((size_t)a->L * a->H, sizeof *a->amax);
    a->gain = calloc((size_t)a->L * a->H * 2, sizeof *a->gain);
    if (!a->amax || !a->gain) return attn_log_free(a), NULL;
    return a;
}

void attn_log_free(attn_log *a) {
    if (a) free(a->amax), free(a->gain), free(a);
}

int attn_log_attach(tlm_model *m) {
    static const model_observer keeps_scores = {.needs = OBSERVE_MAPS}; /* (it reads every layer's scores) */
    return model_observe(m, &keeps_scores);
}

void attn_log_reset(attn_log *a) {
    for (int i = 0; i < a->L * a->H; i++) a->amax[i] = 0.0f;
}

void attn_log_after_forward(attn_log *a, const tlm_model *m) {
    const int B = m->ctx->acts.B, T = m->ctx->acts.T, H = a->H;
    for (int l = 0; l < a->L; l++) {
        const float *S = m->ctx->acts.layers[l].scores;
        if (!S) continue;
        for (int h = 0; h < H; h++) {
            float mx = a->amax[l * H + h];
            for (int b = 0; b < B; b++) {
                const float *s = S + ((size_t)b * H + h) * T * T;
                for (size_t i = 0; i < (size_t)T * T; i++) {
                    float v = fabsf(s[i]); /* masked keys are -inf: not a logit */
                    if (v > mx && isfinite(v)) mx = v;
                }
            }
            a->amax[l * H + h] = mx;
            /* the gains this forward used (the optimizer changes them after the step) */
            a->gain[2 * (l * H + h)] = attn_log_qk_gain(m, l, h, 0);
            a->gain[2 * (l * H + h) + 1] = attn_log_qk_gain(m, l, h, 1);
        }
    }
}

float attn_log_qk_gain(const tlm_model *m, int layer, int head, int is_k) {
    const tlm_config *c = &m->cfg;
    const float *w = is_k ? m->p.layers[layer].k_norm : m->p.layers[layer].q_norm;
    if (c->qk_norm == QK_NORM_NONE || !w) return NAN; /* (Gemma 4's shared-K/V layers have no k_norm) */
    const int hd = config_layer_head_dim(c, layer); /* (Gemma 4: full layers of their own head_dim, kv heads) */
    int slice = is_k ? head / (c->n_heads / config_layer_kv_heads(c, layer)) : head;
    if (c->qk_norm == QK_NORM_HEAD) slice = 0; /* one weight of head_dim shared by the heads */
    const float *g = w + (size_t)slice * hd;
    float mx = 0.0f;
    for (int i = 0; i < hd; i++) {
        float v = fabsf(model_norm_gain(c, g[i]));
        if (v > mx) mx = v;
    }
    return mx;
}

void attn_log_write(const attn_log *a, const tlm_model *m, FILE *f) {
    fputs(", \"attn_max\": [", f);
    for (int l = 0; l < a->L; l++) {
        fputs(l ? ", [" : "[", f);
        for (int h = 0; h < a->H; h++) fprintf(f, "%s%.7g", h ? ", " : "", a->amax[l * a->H + h]);
        fputc(']', f);
    }
    fputc(']', f);
    if (m->cfg.qk_norm == QK_NORM_NONE) return;
    fputs(", \"qk_gain_max\": [", f);
    for (int l = 0; l < a->L; l++) {
        fputs(l ? ", [" : "[", f);
        for (int h = 0; h < a->H; h++) {
            /* (a layer without its own k_norm, Gemma 4's shared K/V: null) */
            const float gq = a->gain[2 * (l * a->H + h)], gk = a->gain[2 * (l * a->H + h) + 1];
            fprintf(f, "%s[", h ? ", " : "");
            if (isfinite(gq)) fprintf(f, "%.7g", gq); else fputs("null", f);
            if (isfinite(gk)) fprintf(f, ", %.7g]", gk); else fputs(", null]", f);
        }
        fputc(']', f);
    }
    fputc(']', f);
}
