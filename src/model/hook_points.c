/* hook_points.c — the activation points a pass makes only when observed (hook_points.h):
 *
 *   hook_attn_in  [N, d]     a copy of the attention's input stream; its branch (the input norm,
 *                            q, k, v) reads the copy, the residual path the stream itself
 *   hook_q_input, hook_k_input, hook_v_input [N, d]
 *                            copies of hook_attn_in, each feeding its own projection through its
 *                            own input norm (q_input is the one the sublayer's norm points show)
 *   attn.hook_result [N, H, d]  result_h = z_h W_O[:, h]^T (head h's columns), attn_out = sum_h + b_O
 *   hook_mlp_in   [N, d]     a copy of the FFN's input stream, as hook_attn_in
 *
 * Backward: d hook_q_input = N^T(dq W_Q), d hook_k_input = N_k^T(dk W_K), ... with each input's
 * own norm statistics; d hook_attn_in = their sum; dx = d resid + d hook_attn_in. d result_h = d
 * attn_out for every head; a hook that changes it makes datt_h = d result_h W_O[:, h] and
 * dW_O[:, h] = sum_n d result_h^T z_h.
 *
 * Nothing here runs unless a hook or the cache asks for one of these points (pass_point_wanted):
 * an unwatched pass pays one test per call site, a observed one only for what is asked. */
#include <string.h>

#include "hook_points.h"
#include "util/error.h"

enum { MADE_COPY = 1, MADE_SPLIT = 2 }; /* per (layer, sublayer): what the forward made */

static int has_point(const pass_ctx *x, int id) {
    int64_t shape[5];
    int flags;
    return model_point_describe(&x->m->cfg, id, x->A->B, x->A->T, NULL, 0, shape, &flags) > 0;
}

/* point `kind` of layer l asked for, forward or backward (and the config has it) */
static int wanted(const pass_ctx *x, int l, int kind) {
    const int id = model_point_id(&x->m->cfg, l, kind);
    return (pass_point_wanted(x, id, 0) || pass_point_wanted(x, id, 1)) && has_point(x, id);
}

static int wants_split(const pass_ctx *x, int l) {
    return wanted(x, l, PT_Q_INPUT) || wanted(x, l, PT_K_INPUT) || wanted(x, l, PT_V_INPUT);
}

static int layer_wants(const pass_ctx *x, int l) {
    return wanted(x, l, PT_ATTN_IN) || wants_split(x, l) || wanted(x, l, PT_MLP_IN);
}

/* ---- the side memory: a block per layer that asks, then the shared scratch ----------------------- */

typedef struct {
    float *x_attn, *xk, *xv, *yk, *yv, *x_mlp; /* [N, d] (the layer's) */
    norm_acts nk, nv;                          /* k's and v's input norm: y, mean, rstd [N] */
    float *dxq, *dxk, *dxv, *du;               /* backward [N, d] (shared) */
    float *heads;                              /* [N, H, d]: hook_result, or its gradient (shared) */
    float *zm;                                 /* [N, qd]: one head's z, the others 0 (shared) */
    float *one;                                /* [N, d] (shared) */
} side;

static size_t layer_floats(size_t N, size_t d) { return 6 * N * d + 4 * N; }

/* the side buffers of layer l (its block: NULL members when the layer asks for nothing), or 0 with
 * the pass failed when there is no memory */
static int side_of(pass_ctx *x, int l, side *s) {
    const tlm_config *c = &x->m->cfg;
    const size_t N = (size_t)x->A->B * x->A->T, d = (size_t)c->d_model, H = (size_t)c->n_heads,
                 qd = (size_t)config_max_q_dim(c);
    int slot = -1, n_slots = 0;
    for (int j = 0; j < c->n_layers; j++)
        if (layer_wants(x, j)) {
            if (j == l) slot = n_slots;
            n_slots++;
        }
    const size_t base = (size_t)n_slots * layer_floats(N, d);
    float *m = pass_hook_memory(x, base + N * H * d + 5 * N * d + N * qd);
    if (!m) {
        if (!x->failed) x->failed = model_point_id(c, l, PT_ATTN_IN) + 1;
        return 0;
    }
    memset(s, 0, sizeof *s);
    if (slot >= 0) {
        float *p = m + (size_t)slot * layer_floats(N, d);
        s->x_attn = p, s->xk = p + N * d, s->xv = p + 2 * N * d, s->yk = p + 3 * N * d, s->yv = p + 4 * N * d;
        s->x_mlp = p + 5 * N * d;
        float *st = p + 6 * N * d;
        s->nk = (norm_acts){.y = s->yk, .mean = st, .rstd = st + N};
        s->nv = (norm_acts){.y = s->yv, .mean = st + 2 * N, .rstd = st + 3 * N};
    }
    float *sh = m + base;
    s->heads = sh;
    sh += N * H * d;
    s->dxq = sh, s->dxk = sh + N * d, s->dxv = sh + 2 * N * d, s->du = sh + 3 * N * d, s->one = sh + 4 * N * d;
    s->zm = sh + 5 * N * d;
    return 1;
}

static unsigned char *made_of(pass_ctx *x, int l, sublayer_kind k) {
    unsigned char *f = pass_hook_flags(x, 2 * x->m->cfg.n_layers);
    return f ? &f[2 * l + k] : NULL;
}

static norm_params *input_norm(const model_params *p, int l, sublayer_kind k) {
    return k == SUB_ATTN ? &p->layers[l].attn_norm : &p->layers[l].ffn_norm;
}

/* ---- forward ------------------------------------------------------------------------------------ */

const float *hook_points_input(pass_ctx *x, int l, sublayer_kind k, const float *x_in) {
    const tlm_config *c = &x->m->cfg;
    unsigned char *made = made_of(x, l, k);
    if (!made) return x_in;
    *made = 0;
    const int split = k == SUB_ATTN && wants_split(x, l);
    if (!(wanted(x, l, k == SUB_ATTN ? PT_ATTN_IN : PT_MLP_IN) || split)) return x_in;
    side s;
    if (!side_of(x, l, &s)) return x_in;
    const size_t n = (size_t)x->A->B * x->A->T * c->d_model;
    float *X = k == SUB_ATTN ? s.x_attn : s.x_mlp;
    vec_copy(X, x_in, n);
    *made = MADE_COPY;
    pass_fire(x, model_point_id(c, l, k == SUB_ATTN ? PT_ATTN_IN : PT_MLP_IN), X, 0);
    if (split) {
        vec_copy(s.xk, X, n);
        vec_copy(s.xv, X, n);
        *made |= MADE_SPLIT;
        pass_fire(x, model_point_id(c, l, PT_Q_INPUT), X, 0); /* (X is q's input from here on) */
        pass_fire(x, model_point_id(c, l, PT_K_INPUT), s.xk, 0);
        pass_fire(x, model_point_id(c, l, PT_V_INPUT), s.xv, 0);
    }
    return X;
}

/* u = the input norm of layer l's attention applied to xin (with its own statistics), or xin */
static const float *normed(pass_ctx *x, int l, const float *xin, norm_acts *na) {
    const tlm_config *c = &x->m->cfg;
    if (!placement_has_input_norm(c->placement)) return xin;
    model_norm_forward(c, na->y, na, input_norm(&x->m->p, l, SUB_ATTN), xin, x->A->B * x->A->T);
    return na->y;
}

void hook_points_split_kv(pass_ctx *x, int l, float *k, float *v) {
    const tlm_model *m = x->m;
    const tlm_config *c = &m->cfg;
    unsigned char *made = made_of(x, l, SUB_ATTN);
    side s;
    if (!made || !(*made & MADE_SPLIT) || config_kv_source(c, l) != l || !side_of(x, l, &s)) return;
    const layer_params *P = &m->p.layers[l];
    const int N = x->A->B * x->A->T, d = c->d_model, kvd = config_layer_kv_heads(c, l) * config_layer_head_dim(c, l);
    const size_t n = (size_t)N * d;
    const int k_eq_v = config_layer_k_eq_v(c, l);
    /* (the norms always, for the backward; the products only where the input differs from q's, so
     * that an unchanged split gives the sublayer's own bits) */
    const float *uk = normed(x, l, s.xk, &s.nk);
    if (memcmp(s.xk, s.x_attn, n * sizeof(float))) {
        linear_forward(pass_product_bf16(x), x->A->w_tile, k, uk, &P->k, N, d, kvd);
        if (k_eq_v) vec_copy(v, k, (size_t)N * kvd); /* (v is the k projection) */
    }
    if (k_eq_v) return;
    const float *uv = normed(x, l, s.xv, &s.nv);
    if (memcmp(s.xv, s.x_attn, n * sizeof(float))) linear_forward(pass_product_bf16(x), x->A->w_tile, v, uv, &P->v, N, d, kvd);
}

void hook_points_result(pass_ctx *x, int l, float *f) {
    const tlm_model *m = x->m;
    const tlm_config *c = &m->cfg;
    const int id = model_point_id(c, l, PT_RESULT);
    side s; /* (asked for backward only: nothing to fire here) */
    if (!pass_point_wanted(x, id, 0) || !has_point(x, id) || !side_of(x, l, &s)) return;
    const linear_params *o = &m->p.layers[l].o;
    const float *z = x->A->layers[l].att;
    const int N = x->A->B * x->A->T, d = c->d_model, H = c->n_heads, hd = config_layer_head_dim(c, l), qd = H * hd;
    float *R = s.heads;
    if (o->w) { /* result[n, h, i] = sum_j z[n, h hd + j] W_O[i, h hd + j] */
#pragma omp parallel for schedule(static)
        for (int nn = 0; nn < N; nn++)
            for (int h = 0; h < H; h++) {
                const float *zh = z + (size_t)nn * qd + (size_t)h * hd;
                float *r = R + ((size_t)nn * H + h) * d;
                for (int i = 0; i < d; i++) {
                    const float *w = o->w + (size_t)i * qd + (size_t)h * hd;
                    float acc = 0.0f;
                    for (int j = 0; j < hd; j++) acc += zh[j] * w[j];
                    r[i] = acc;
                }
            }
    } else { /* bf16 or quantized weights: o_proj over z with every other head's columns zeroed */
        linear_params ob = *o;
        ob.b = NULL;
        for (int h = 0; h < H; h++) {
            memset(s.zm, 0, sizeof(float) * (size_t)N * qd);
            for (int nn = 0; nn < N; nn++)
                memcpy(s.zm + (size_t)nn * qd + (size_t)h * hd, z + (size_t)nn * qd + (size_t)h * hd,
                       sizeof(float) * hd);
            linear_forward(pass_product_bf16(x), x->A->w_tile, s.one, s.zm, &ob, N, qd, d);
            for (int nn = 0; nn < N; nn++)
                memcpy(R + ((size_t)nn * H + h) * d, s.one + (size_t)nn * d, sizeof(float) * d);
        }
    }
    pass_fire(x, id, R, 0);
    if (!pass_point_rewritten(x, id)) return;
#pragma omp parallel for schedule(static)
    for (int nn = 0; nn < N; nn++)
        for (int i = 0; i < d; i++) {
            float acc = o->b ? o->b[i] : 0.0f;
            for (int h = 0; h < H; h++) acc += R[((size_t)nn * H + h) * d + i];
            f[(size_t)nn * d + i] = acc;
        }
}

/* ---- backward ----------------------------------------------------------------------------------- */

int hook_points_result_backward(pass_ctx *x, int l, const float *df) {
    const tlm_model *m = x->m;
    const tlm_config *c = &m->cfg;
    const int id = model_point_id(c, l, PT_RESULT);
    side s;
    if (!pass_point_wanted(x, id, 1) || !has_point(x, id) || !side_of(x, l, &s)) return 0;
    const int N = x->A->B * x->A->T, d = c->d_model, H = c->n_heads, hd = config_layer_head_dim(c, l), qd = H * hd;
    float *G = s.heads;
    for (int nn = 0; nn < N; nn++)
        for (int h = 0; h < H; h++) memcpy(G + ((size_t)nn * H + h) * d, df + (size_t)nn * d, sizeof(float) * d);
    pass_fire(x, id, G, 1);
    int same = 1;
    for (int nn = 0; nn < N && same; nn++)
        for (int h = 0; h < H && same; h++)
            same = !memcmp(G + ((size_t)nn * H + h) * d, df + (size_t)nn * d, sizeof(float) * d);
    if (same || x->failed) return 0;
    const linear_params *P = &m->p.layers[l].o;
    linear_params *Gw = &x->g->layers[l].o;
    if (!P->w || !Gw->w) {
        tlm_error("hook blocks.%d.attn.hook_result: a changed gradient needs float32 weights", l);
        x->failed = id + 1;
        return 0;
    }
    const float *z = x->A->layers[l].att;
    float *datt = x->A->datt;
    /* datt[n, h hd + j] = sum_i G[n, h, i] W[i, h hd + j] */
#pragma omp parallel for schedule(static)
    for (int nn = 0; nn < N; nn++)
        for (int h = 0; h < H; h++) {
            const float *g = G + ((size_t)nn * H + h) * d;
            float *o = datt + (size_t)nn * qd + (size_t)h * hd;
            memset(o, 0, sizeof(float) * hd);
            for (int i = 0; i < d; i++) {
                const float *w = P->w + (size_t)i * qd + (size_t)h * hd;
                for (int j = 0; j < hd; j++) o[j] += g[i] * w[j];
            }
        }
        /* dW[i, h hd + j] += sum_n G[n, h, i] z[n, h hd + j]; db += sum_n df (b_O is added after the sum) */
#pragma omp parallel for schedule(static)
    for (int i = 0; i < d; i++) {
        float *dw = Gw->w + (size_t)i * qd;
        for (int nn = 0; nn < N; nn++)
            for (int h = 0; h < H; h++) {
                const float g = G[((size_t)nn * H + h) * d + i];
                const float *zh = z + (size_t)nn * qd + (size_t)h * hd;
                for (int j = 0; j < hd; j++) dw[h * hd + j] += g * zh[j];
            }
        if (Gw->b) {
            float acc = 0.0f;
            for (int nn = 0; nn < N; nn++) acc += df[(size_t)nn * d + i];
            Gw->b[i] += acc;
        }
    }
    return 1;
}

int hook_points_split_kv_backward(pass_ctx *x, int l, const float *dk, const float *dv) {
    const tlm_model *m = x->m;
    const tlm_config *c = &m->cfg;
    unsigned char *made = made_of(x, l, SUB_ATTN);
    side s;
    if (!made || !(*made & MADE_SPLIT) || !side_of(x, l, &s)) return 0;
    const int N = x->A->B * x->A->T, d = c->d_model, kvd = config_layer_kv_heads(c, l) * config_layer_head_dim(c, l);
    memset(s.dxk, 0, sizeof(float) * (size_t)N * d);
    memset(s.dxv, 0, sizeof(float) * (size_t)N * d);
    if (config_kv_source(c, l) != l) return 0; /* (an earlier layer's keys and values: q alone reads the input) */
    const layer_params *P = &m->p.layers[l];
    layer_params *G = &x->g->layers[l];
    const int has_in = placement_has_input_norm(c->placement), k_eq_v = config_layer_k_eq_v(c, l);
    /* each input's gradient through its projection, then its own norm (the norm's weight gradients
     * added, as the shared one's are) */
    const float *in[2] = {s.xk, s.xv}, *dout[2] = {dk, dv};
    const float *u[2] = {has_in ? s.yk : s.xk, has_in ? s.yv : s.xv};
    norm_acts *na[2] = {&s.nk, &s.nv};
    float *dx[2] = {s.dxk, s.dxv};
    const linear_params *W[2] = {&P->k, &P->v};
    linear_params *GW[2] = {&G->k, &G->v};
    for (int i = 0; i < (k_eq_v ? 1 : 2); i++) {
        float *du = has_in ? s.du : dx[i];
        linear_backward(pass_product_bf16(x), 1, du, GW[i], dout[i], u[i], NULL, W[i], N, d, kvd);
        if (has_in)
            model_norm_backward(c, dx[i], NULL, input_norm(x->g, l, SUB_ATTN), du, na[i],
                                input_norm(&m->p, l, SUB_ATTN), in[i], N);
    }
    return 1;
}

int hook_points_input_backward(pass_ctx *x, int l, sublayer_kind k, const float *du, const float *residual, float alpha,
                               float *dx) {
    const tlm_model *m = x->m;
    const tlm_config *c = &m->cfg;
    unsigned char *made = made_of(x, l, k);
    side s;
    if (!made || !*made || !side_of(x, l, &s)) return 0;
    const int N = x->A->B * x->A->T;
    const size_t n = (size_t)N * c->d_model;
    const sublayer_acts *sa = k == SUB_ATTN ? &x->A->layers[l].attn_s : &x->A->layers[l].ffn_s;
    const float *X = k == SUB_ATTN ? s.x_attn : s.x_mlp;
    if (placement_has_input_norm(c->placement))
        model_norm_backward(c, s.dxq, NULL, input_norm(x->g, l, k), du, &sa->in, input_norm(&m->p, l, k), X, N);
    else
        vec_copy(s.dxq, du, n);
    if (*made & MADE_SPLIT) {
        pass_fire(x, model_point_id(c, l, PT_V_INPUT), s.dxv, 1);
        pass_fire(x, model_point_id(c, l, PT_K_INPUT), s.dxk, 1);
        pass_fire(x, model_point_id(c, l, PT_Q_INPUT), s.dxq, 1);
        vec_acc(s.dxq, s.dxk, n);
        vec_acc(s.dxq, s.dxv, n);
    }
    pass_fire(x, model_point_id(c, l, k == SUB_ATTN ? PT_ATTN_IN : PT_MLP_IN), s.dxq, 1);
    if (!residual)
        vec_copy(dx, s.dxq, n);
    else {
        vec_add(dx, residual, s.dxq, n);
        if (alpha != 1.0f) /* (DeepNorm: alpha x + F(x)) */
            for (size_t i = 0; i < n; i++) dx[i] += (alpha - 1.0f) * residual[i];
    }
    return 1;
}
