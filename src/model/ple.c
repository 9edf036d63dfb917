/* ple.c — Gemma 4's per-layer input: every layer's input made once from the embedding
 * (ple_inputs_*), and each layer's epilogue after its FFN sublayer (layer_epilogue_*: the per-layer input
 * gated in, then the layer scalar), forward and backward over rows and the decode step's share. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "components.h"
#include "kv_cache.h"

/* a layer's epilogue's own buffers (with a per-layer input: gate = x W_gate^T [N, P], prod = act(gate) *
 * ple_in's slice [N, P], pout = prod W_proj^T [N, d], its norm, sum = x + norm(pout) [N, d], before the
 * scalar; x is the block's epilogue_in) */
typedef struct {
    float *ple_gate, *ple_prod, *ple_out, *epilogue_sum;
    norm_acts ple_out_n;
} ple_acts;

/* the pass's: the per-layer inputs of every layer, ple_ctx = (res[0] W^T) d^-0.5 [N, L*P] (before its
 * norm), its rstd [N*L], ple_in = (norm(ple_ctx) + sqrt(P) ple_embed[tok]) / sqrt(2) [N, L*P]; the
 * backward's: d ple_in, d ple_ctx [N, L*P], d prod, d gate, d up, d dup [N, P], d pout [N, d], d x0 [N, d] */
typedef struct {
    float *ple_ctx, *ple_rstd, *ple_in;
    float *dple_in, *dple_ctx, *dple_prod, *dple_gate, *dple_up, *dple_dup, *dple_out, *dple_x0;
} ple_pass_acts;

/* ---- the layer's epilogue (Gemma 4): the per-layer input, then the layer scalar ---------------------
 *   gate = x W_gate^T            [N, P]      (x: the stream after the FFN's residual add)
 *   prod = act(gate) * ple_in_l  [N, P]      (ple_in_l: layer l's slice of the per-layer inputs)
 *   pout = prod W_proj^T         [N, d]
 *   sum  = x + N(pout)           [N, d]      (N: the model's norm, weight of its own)
 *   out  = scalar * sum          [N, d] */

/* ple_in's slice of layer l [N, P] out of [N, L*P] into / from a contiguous [N, P] */
static void ple_slice(float *dst, const float *src, int N, int L, int P, int l, int to_slice) {
    for (int n = 0; n < N; n++) {
        if (to_slice)
            memcpy(dst + ((size_t)n * L + l) * P, src + (size_t)n * P, sizeof(float) * P);
        else
            memcpy(dst + (size_t)n * P, src + ((size_t)n * L + l) * P, sizeof(float) * P);
    }
}

void layer_epilogue_forward(pass_ctx *ctx, int l, const float *x, float *out) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    ple_acts *a = ctx->A->layers[l].own[COMPONENT_PLE];
    const ple_pass_acts *S = ctx->A->own[COMPONENT_PLE];
    const int N = ctx->A->B * ctx->A->T, d = c->d_model, Pd = c->ple_dim;
    const size_t n = (size_t)N * d;
    const float *sum = x;
    if (Pd > 0) {
        linear_forward(pass_product_bf16(ctx), ctx->A->w_tile, a->ple_gate, x, &P->ple_gate, N, d, Pd);
        ple_slice(a->ple_prod, S->ple_in, N, c->n_layers, Pd, l, 0);
        glu_forward(a->ple_prod, a->ple_gate, a->ple_prod, (size_t)N * Pd, model_ffn_activation(c));
        linear_forward(pass_product_bf16(ctx), ctx->A->w_tile, a->ple_out, a->ple_prod, &P->ple_proj, N, Pd, d);
        model_norm_forward(c, a->ple_out_n.y, &a->ple_out_n, &P->ple_norm, a->ple_out, N);
        vec_add(a->epilogue_sum, x, a->ple_out_n.y, n);
        sum = a->epilogue_sum;
    }
    const float s = c->layer_scalar ? P->scalar[0] : 1.0f;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) out[i] = s * sum[i];
    PASS_POINT(ctx, model_point_id(c, l, PT_RESID_POST), out, 0);
}

/* dx = d(epilogue)/dx . dout (set); the scalar's and the per-layer input's weight gradients added, and
 * d ple_in's slice of layer l set */
void layer_epilogue_backward(pass_ctx *ctx, int l, const float *x, const float *dout, float *dx) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_params *G = &ctx->g->layers[l];
    const ple_acts *a = ctx->A->layers[l].own[COMPONENT_PLE];
    activations *A = ctx->A;
    const ple_pass_acts *S = A->own[COMPONENT_PLE];
    const int N = A->B * A->T, d = c->d_model, Pd = c->ple_dim;
    const size_t n = (size_t)N * d;
    const float *sum = Pd > 0 ? a->epilogue_sum : x;
    const float s = c->layer_scalar ? P->scalar[0] : 1.0f;
    /* ds = sum(dout * sum): each of TAIL_BLOCKS blocks sums its range in order, and the blocks are added
     * in order, so the result does not depend on the thread count (as DyT's alpha, norm.c) */
    enum { TAIL_BLOCKS = 256 };
    const size_t width = (n + TAIL_BLOCKS - 1) / TAIL_BLOCKS;
    double part[TAIL_BLOCKS];
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int b = 0; b < TAIL_BLOCKS; b++) {
        const size_t i0 = (size_t)b * width, i1 = i0 + width < n ? i0 + width : n;
        double acc = 0.0;
        for (size_t i = i0; i < i1; i++) {
            dx[i] = s * dout[i];
            acc += (double)dout[i] * sum[i];
        }
        part[b] = acc;
    }
    double ds = 0.0;
    for (int b = 0; b < TAIL_BLOCKS; b++) ds += part[b];
    if (c->layer_scalar) G->scalar[0] += (float)ds;
    if (Pd == 0) return;
    /* dx (= d sum) so far; the per-layer input's path adds to it */
    model_norm_backward(c, S->dple_out, NULL, &G->ple_norm, dx, &a->ple_out_n, &P->ple_norm, a->ple_out, N);
    linear_backward(pass_product_bf16(ctx), 1, S->dple_prod, &G->ple_proj, S->dple_out, a->ple_prod, NULL, &P->ple_proj, N, Pd, d);
    /* prod = act(gate) * in: d gate and d in (into its slice of d ple_in) */
    ple_slice(S->dple_up, S->ple_in, N, c->n_layers, Pd, l, 0);
    glu_backward(S->dple_gate, S->dple_dup, S->dple_prod, a->ple_gate, S->dple_up, (size_t)N * Pd,
                 model_ffn_activation(c));
    ple_slice(S->dple_in, S->dple_dup, N, c->n_layers, Pd, l, 1);
    linear_backward(pass_product_bf16(ctx), 0, dx, &G->ple_gate, S->dple_gate, x, NULL, &P->ple_gate, N, d, Pd);
}

/* ---- the per-layer inputs of every layer (Gemma 4), from the embedding ----------------------------
 *   ctx = (x0 W_model_proj^T) d^-0.5                       [N, L*P]   (x0: the scaled token embedding)
 *   in  = (rmsnorm_P(ctx) + sqrt(P) ple_embed[tok]) 2^-0.5  [N, L*P]   (rmsnorm over each layer's P) */
void ple_inputs_forward(pass_ctx *ctx, const float *x0) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    activations *A = ctx->A;
    const ple_pass_acts *S = A->own[COMPONENT_PLE];
    const int N = A->B * A->T, d = c->d_model, L = c->n_layers, Pd = c->ple_dim, LP = L * Pd;
    const size_t nlp = (size_t)N * LP;
    linear_forward(pass_product_bf16(ctx), A->w_tile, S->ple_ctx, x0, &m->p.ple_model_proj, N, d, LP);
    const float ks = 1.0f / sqrtf((float)d), r2 = 1.0f / sqrtf(2.0f);
    for (size_t i = 0; i < nlp; i++) S->ple_ctx[i] *= ks;
    rmsnorm_forward(S->ple_in, S->ple_rstd, S->ple_ctx, m->p.ple_model_norm, config_norm_offset(c), N * L, Pd,
                    c->norm_eps);
    const float es = sqrtf((float)Pd);
    for (int t = 0; t < N; t++) {
        const float *row = m->p.ple_embed + (size_t)A->tokens[t] * LP;
        float *y = S->ple_in + (size_t)t * LP;
        for (int j = 0; j < LP; j++) y[j] = (y[j] + row[j] * es) * r2;
    }
}

/* the per-layer inputs' backward from d ple_in (every layer's slice set): the tables' and the
 * projection's gradients added, d x0 added into dx0 */
void ple_inputs_backward(pass_ctx *ctx, const float *x0, float *dx0) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    activations *A = ctx->A;
    const ple_pass_acts *S = A->own[COMPONENT_PLE];
    model_params *g = ctx->g;
    const int N = A->B * A->T, d = c->d_model, L = c->n_layers, Pd = c->ple_dim, LP = L * Pd;
    const size_t nlp = (size_t)N * LP;
    const float ks = 1.0f / sqrtf((float)d), r2 = 1.0f / sqrtf(2.0f), es = sqrtf((float)Pd);
    for (int t = 0; t < N; t++) { /* the token table: rows += sqrt(P) 2^-0.5 d in */
        float *row = g->ple_embed + (size_t)A->tokens[t] * LP;
        const float *dy = S->dple_in + (size_t)t * LP;
        for (int j = 0; j < LP; j++) row[j] += dy[j] * r2 * es;
    }
    for (size_t i = 0; i < nlp; i++) S->dple_ctx[i] = S->dple_in[i] * r2; /* d norm(ctx) */
    rmsnorm_backward(S->dple_in, NULL, g->ple_model_norm, S->dple_ctx, S->ple_ctx, m->p.ple_model_norm,
                     config_norm_offset(c), S->ple_rstd, N * L, Pd);
    for (size_t i = 0; i < nlp; i++) S->dple_in[i] *= ks; /* (now d of x0 W^T) */
    linear_backward(pass_product_bf16(ctx), 1, S->dple_x0, &g->ple_model_proj, S->dple_in, x0, NULL, &m->p.ple_model_proj, N, d, LP);
    vec_acc(dx0, S->dple_x0, (size_t)N * d);
}

/* ---- the decode step -------------------------------------------------------------------------------- */

/* Gemma 4's per-layer inputs of every layer for this token, as ple_inputs_forward computes them:
 * the embedding's projection (rows shared out, each thread scaling its own), then each thread its
 * share of the layers' slices: RMSNorm, plus the token table's row * sqrt(P), / sqrt(2) */
void ple_inputs_step(const step_ctx *s) {
    const tlm_model *m = s->m;
    const tlm_config *cfg = &m->cfg;
    const step_shared *sh = &s->c->sh;
    const int d = cfg->d_model, L = cfg->n_layers, Pd = cfg->ple_dim, LP = L * Pd;
    const float ks = 1.0f / sqrtf((float)d), r2 = 1.0f / sqrtf(2.0f), es = sqrtf((float)Pd);
    int lo, hi;
    step_share(LP, s, &lo, &hi);
    linear_step(sh->ple_ctx, sh->x0, &m->p.ple_model_proj, d, lo, hi);
    for (int i = lo; i < hi; i++) sh->ple_ctx[i] *= ks;
#pragma omp barrier
    step_share(L, s, &lo, &hi);
    const float *row = m->p.ple_embed + (size_t)s->token * LP;
    for (int j = lo; j < hi; j++) {
        float *y = sh->ple_in + (size_t)j * Pd;
        rmsnorm_row(y, sh->ple_ctx + (size_t)j * Pd, m->p.ple_model_norm, config_norm_offset(cfg), Pd, cfg->norm_eps);
        for (int i = 0; i < Pd; i++) y[i] = (y[i] + row[(size_t)j * Pd + i] * es) * r2;
    }
#pragma omp barrier
}

/* out = layer l's epilogue on the thread's stream x (out may be x), as layer_epilogue_forward: x + N(proj(act(gate x) *
 * its per-layer input)), then times the layer scalar */
void layer_epilogue_step(const step_ctx *s, int l, const float *x, float *out) {
    const tlm_model *m = s->m;
    const tlm_config *cfg = &m->cfg;
    const step_shared *sh = &s->c->sh;
    const layer_params *P = &m->p.layers[l];
    const int d = cfg->d_model, Pd = cfg->ple_dim;
    const float *sum = x;
    if (Pd > 0) {
        int lo, hi;
        step_share(Pd, s, &lo, &hi);
        linear_step(sh->ple_gate, x, &P->ple_gate, d, lo, hi);
        glu_forward_range(sh->ple_prod, sh->ple_gate, sh->ple_in + (size_t)l * Pd, (size_t)lo, (size_t)hi,
                          model_ffn_activation(cfg));
#pragma omp barrier
        step_share(d, s, &lo, &hi);
        linear_step(sh->ple_out, sh->ple_prod, &P->ple_proj, Pd, lo, hi);
#pragma omp barrier
        norm_step(cfg, s->o->fo, &P->ple_norm, sh->ple_out);
        for (int i = 0; i < d; i++) s->o->sum[i] = x[i] + s->o->fo[i];
        sum = s->o->sum;
    }
    const float sc = cfg->layer_scalar ? P->scalar[0] : 1.0f;
    for (int i = 0; i < d; i++) out[i] = sc * sum[i];
}

/* ---- its fragments: the tensors and the buffers ------------------------------------------------------ */

/* before the layers: the token table, the embedding's projection, its norm */
void ple_model_params(param_walk *w, model_params *p) {
    const tlm_config *c = w->cfg;
    if (c->ple_dim <= 0) return;
    const int lp = c->n_layers * c->ple_dim;
    walk_add(w, &p->ple_embed, "ple_embed.weight", c->vocab_size, lp, TENSOR_EMBEDDING, 0.0f);
    walk_linear(w, &p->ple_model_proj, "ple_model_proj", lp, c->d_model, false, TENSOR_MATRIX);
    walk_add(w, &p->ple_model_norm, "ple_model_norm.weight", c->ple_dim, 0, TENSOR_NORM,
             c->norm == NORM_RMSNORM_1P ? 0.0f : 1.0f);
}

/* layer l's: its per-layer input's gate, projection and the projection's norm; the layer scalar */
void layer_epilogue_params(param_walk *w, layer_params *L, int l) {
    const tlm_config *c = w->cfg;
    char n[96];
    if (c->ple_dim > 0) {
        snprintf(n, sizeof n, "layers.%d.ple_gate", l);
        walk_linear(w, &L->ple_gate, n, c->ple_dim, c->d_model, false, TENSOR_MATRIX);
        snprintf(n, sizeof n, "layers.%d.ple_proj", l);
        walk_linear(w, &L->ple_proj, n, c->d_model, c->ple_dim, false, TENSOR_MATRIX);
        snprintf(n, sizeof n, "layers.%d.ple_norm", l), walk_norm(w, &L->ple_norm, n, 0.0f);
    }
    if (c->layer_scalar) { /* (a gain, like a norm's: no weight decay, starts at 1) */
        snprintf(n, sizeof n, "layers.%d.layer_scalar", l);
        walk_add(w, &L->scalar, n, 1, 0, TENSOR_NORM, 1.0f);
    }
}

/* the stream after the FFN's residual add, before the epilogue; the per-layer input's buffers */
static void layer_epilogue_layout(layout_ctx *lc, arena *a, layer_acts *layer, int l) {
    (void)l;
    const tlm_config *c = lc->c;
    ple_acts *L = layer->own[COMPONENT_PLE];
    if (lc->reuse) return;
    const size_t N = lc->N, d = (size_t)c->d_model, P = (size_t)c->ple_dim;
    layer->epilogue_in = config_has_layer_epilogue(c) ? take(a, N * d) : NULL;
    L->ple_gate = P ? take(a, N * P) : NULL;
    L->ple_prod = P ? take(a, N * P) : NULL;
    L->ple_out = P ? take(a, N * d) : NULL;
    memset(&L->ple_out_n, 0, sizeof L->ple_out_n);
    if (P) take_norm(a, &L->ple_out_n, N, d, 1);
    L->epilogue_sum = P ? take(a, N * d) : NULL;
}

/* every layer's per-layer inputs, made once from the embedding */
void ple_model_layout(const layout_ctx *lc, arena *a, activations *acts) {
    const tlm_config *c = lc->c;
    ple_pass_acts *S = acts->own[COMPONENT_PLE];
    const size_t N = lc->N, LP = (size_t)c->n_layers * c->ple_dim;
    S->ple_ctx = LP ? take(a, N * LP) : NULL;
    S->ple_rstd = LP ? take(a, N * c->n_layers) : NULL;
    S->ple_in = LP ? take(a, N * LP) : NULL;
}

/* the backward's: before a layer's scalar, and the per-layer inputs' */
void ple_scratch(const layout_ctx *lc, arena *b, activations *acts) {
    const tlm_config *c = lc->c;
    ple_pass_acts *S = acts->own[COMPONENT_PLE];
    const size_t N = lc->N, d = (size_t)c->d_model, P = (size_t)c->ple_dim, LP = (size_t)c->n_layers * P;
    acts->d_epilogue = config_has_layer_epilogue(c) ? take(b, N * d) : NULL;
    S->dple_in = LP ? take(b, N * LP) : NULL;
    S->dple_ctx = LP ? take(b, N * LP) : NULL;
    S->dple_prod = LP ? take(b, N * P) : NULL;
    S->dple_gate = LP ? take(b, N * P) : NULL;
    S->dple_up = LP ? take(b, N * P) : NULL;
    S->dple_dup = LP ? take(b, N * P) : NULL;
    S->dple_out = LP ? take(b, N * d) : NULL;
    S->dple_x0 = LP ? take(b, N * d) : NULL;
}

/* (the epilogue is no sublayer: the block runs it through block_mode's epilogue; this table gives the
 * layout its buffers. The per-layer inputs' buffers and the backward's are laid out by ple_model_layout
 * and ple_scratch, which layout.c calls where they sit in the arena.) */
const sublayer_ops PLE_OPS = {.layout = layer_epilogue_layout,
                              .layer_acts_size = sizeof(ple_acts),
                              .pass_acts_size = sizeof(ple_pass_acts)};
