/* norm.c — the model's norm (LayerNorm, RMSNorm, DyT: config.norm) forward and backward over rows,
 * the QK-norm (per head or over the projection), and the decode step's rows of each. Where the norms go around a sublayer
 * is block.c's. */
#include <stdio.h>

#include "components.h"
#include "util/profile.h"

/* ---- norms: one call site for the four kinds ------------------------------------------------ */

/* (y16, or NULL: y's bf16 copy, written in the norm's own pass) */
void model_norm_forward_bf16(const tlm_config *c, float *y, uint16_t *y16, const norm_acts *a, const norm_params *p,
                             const float *x, int N) {
    if (c->norm == NORM_DYT) {
        dyt_forward(y, x, p->a, p->w, p->b, N, c->d_model);
        /* no per-row statistics: the saved "rstd" is alpha (the scale before the tanh) */
        for (int n = 0; a->rstd && n < N; n++) a->rstd[n] = p->a[0];
        if (y16) f32_to_bf16(y16, y, (size_t)N * c->d_model);
    } else if (c->norm == NORM_LAYERNORM)
        layernorm_forward_bf16(y, y16, a->mean, a->rstd, x, p->w, p->b, N, c->d_model, c->norm_eps);
    else
        rmsnorm_forward_bf16(y, y16, a->rstd, x, p->w, config_norm_offset(c), N, c->d_model, c->norm_eps);
}

void model_norm_forward(const tlm_config *c, float *y, const norm_acts *a, const norm_params *p, const float *x,
                         int N) {
    model_norm_forward_bf16(c, y, NULL, a, p, x, N);
}

void model_norm_backward(const tlm_config *c, float *dx, const float *dadd, norm_params *g, const float *dy,
                         const norm_acts *a, const norm_params *p, const float *x, int N) {
    if (c->norm == NORM_DYT)
        dyt_backward(dx, dadd, g->a, g->w, g->b, dy, x, p->a, p->w, N, c->d_model);
    else if (c->norm == NORM_LAYERNORM)
        layernorm_backward(dx, dadd, g->w, g->b, dy, x, p->w, a->mean, a->rstd, N, c->d_model);
    else
        rmsnorm_backward(dx, dadd, g->w, dy, x, p->w, config_norm_offset(c), a->rstd, N, c->d_model);
}

/* ---- QK-norm: RMSNorm per head or over the whole projection --------------------------------------- */

/* QK-norm (and Gemma 4's v norm): RMSNorm per head (rows of layer l's head_dim) or over the whole
 * projection (rows of n * head_dim) */
void model_qk_norm_shape(const tlm_config *c, int l, int N, int n_heads, int *rows, int *cols) {
    int per_head = c->qk_norm == QK_NORM_HEAD;
    *rows = per_head ? N * n_heads : N;
    *cols = per_head ? config_layer_head_dim(c, l) : n_heads * config_layer_head_dim(c, l);
}

void qk_norm_forward(const tlm_config *c, int l, float *y, float *rstd, const float *x, const float *w, int N,
                     int n_heads) {
    int rows, cols;
    model_qk_norm_shape(c, l, N, n_heads, &rows, &cols);
    rmsnorm_forward(y, rstd, x, w, config_norm_offset(c), rows, cols, c->norm_eps);
}

void qk_norm_backward(const tlm_config *c, int l, float *dx, const float *dadd, float *dw, const float *dy,
                      const float *x, const float *w, const float *rstd, int N, int n_heads) {
    int rows, cols;
    model_qk_norm_shape(c, l, N, n_heads, &rows, &cols);
    rmsnorm_backward(dx, dadd, dw, dy, x, w, config_norm_offset(c), rstd, rows, cols);
}

/* ---- the decode step: one row ------------------------------------------------------------------ */

/* model_norm_forward's arithmetic on one row (the statistics it saves are not needed) */
void norm_step(const tlm_config *c, float *y, const norm_params *p, const float *x) {
    /* (profiled on thread 0 only: every thread normalizes its own copy of the row at the same time,
     * so thread 0's time is the step's; kv_decode_step quiets the others) */
    PROF_SCOPE("decode_norm");
    float mean;
    if (c->norm == NORM_DYT)
        dyt_row(y, x, p->a[0], p->w, p->b, c->d_model);
    else if (c->norm == NORM_LAYERNORM)
        layernorm_row(y, &mean, x, p->w, p->b, c->d_model, c->norm_eps);
    else
        rmsnorm_row(y, x, p->w, config_norm_offset(c), c->d_model, c->norm_eps);
}

/* QK-norm rows of one projection [n_heads * hd] of layer l (per head, or over all of it): rows [r0, r1) */
void qk_norm_step(const tlm_config *c, int l, float *y, const float *x, const float *w, int n_heads, int h0,
                  int h1) {
    int rows, cols;
    model_qk_norm_shape(c, l, 1, n_heads, &rows, &cols);
    if (rows == 1) h0 = 0, h1 = 1; /* (over the whole projection: every thread the whole row) */
    for (int r = h0; r < h1; r++)
        rmsnorm_row(y + (size_t)r * cols, x + (size_t)r * cols, w, config_norm_offset(c), cols, c->norm_eps);
}

/* ---- the norm's fragment of the parameter walk ------------------------------------------------- */

void walk_norm(param_walk *w, norm_params *np, const char *name, float alpha0) {
    const tlm_config *c = w->cfg;
    char buf[96];
    snprintf(buf, sizeof buf, "%.80s.weight", name);
    walk_add(w, &np->w, buf, c->d_model, 0, TENSOR_NORM, c->norm == NORM_RMSNORM_1P ? 0.0f : 1.0f);
    if ((c->norm == NORM_LAYERNORM && c->norm_bias) || c->norm == NORM_DYT) {
        snprintf(buf, sizeof buf, "%.80s.bias", name);
        walk_add(w, &np->b, buf, c->d_model, 0, TENSOR_BIAS, 0.0f);
    }
    if (c->norm == NORM_DYT) { /* the scalar alpha: a norm parameter (no weight decay), init dyt_alpha_init */
        snprintf(buf, sizeof buf, "%.80s.alpha", name);
        walk_add(w, &np->a, buf, 1, 0, TENSOR_NORM, alpha0 > 0.0f ? alpha0 : c->dyt_alpha_init);
    }
}
