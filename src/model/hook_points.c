/* hook_points.c — the activation points a pass makes only when observed (hook_points.h):
 *
 *   hook_attn_in  [N, d]     a copy of the attention's input stream; its branch (the input norm,
 *                            q, k, v) reads the copy, the residual path the stream itself
 *   hook_q_input, hook_k_input, hook_v_input [N, d]
 *                            copies of hook_attn_in, each feeding its own projection through its
 *                            own input norm (q_input is the one the sublayer's norm points show)
 *                or per head (cfg.split_qkv_heads, TransformerLens' use_split_qkv_input):
 *                [N, H, d] for q, [N, KV, d] for k and v: head h's q_h = N(X_h) W_Q[h]^T + b_Q[h]
 *                            with the input norm N applied to each copy; the branch's norm (ln1's
 *                            points) reads hook_attn_in, which no projection reads then
 *   attn.hook_result [N, H, d]  result_h = z_h W_O[:, h]^T (head h's columns), attn_out = sum_h + b_O
 *   hook_mlp_in   [N, d]     a copy of the FFN's input stream, as hook_attn_in
 *
 * Backward: d hook_q_input = N^T(dq W_Q), d hook_k_input = N_k^T(dk W_K), ... with each input's
 * own norm statistics (per head: d X_h = N_h^T(dq_h W_Q[h]), dW_Q[h] += dq_h^T N(X_h)); d
 * hook_attn_in = their sum (over the heads too); dx = d resid + d hook_attn_in. d result_h = d
 * attn_out for every head; a hook that changes it makes datt_h = d result_h W_O[:, h] and
 * dW_O[:, h] = sum_n d result_h^T z_h.
 *
 * Nothing here runs unless a hook or the cache asks for one of these points (pass_point_wanted):
 * an unwatched pass pays one test per call site, a observed one only for what is asked. */
#include <string.h>

#include "hook_points.h"
#include "tinylm.h"
#include "util/error.h"

enum { MADE_COPY = 1, MADE_SPLIT = 2, MADE_HEADS = 4 }; /* per (layer, sublayer): what the forward made */

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
    /* per head (cfg.split_qkv_heads): the copies [N, H | KV | KV, d] back to back (q's, k's, v's),
     * their norms' outputs and statistics [N, H | KV | KV] (the layer's) */
    float *hx, *hy;
    norm_acts hn;
    float *hdx, *hdu;                          /* per head, backward: [rows, d] (shared) */
    float *dxq, *dxk, *dxv, *du;               /* backward [N, d] (shared) */
    float *heads;                              /* [N, H, d]: hook_result, or its gradient (shared) */
    float *zm;                                 /* [N, qd]: one head's z, the others 0 (shared) */
    float *one;                                /* [N, d] (shared) */
} side;

/* the most rows of per-head copies a layer makes per token: H + 2 KV (the widest layer's) */
static size_t head_rows(const tlm_config *c) {
    if (!c->split_qkv_heads) return 0;
    int kv = 0;
    for (int l = 0; l < c->n_layers; l++) kv = config_layer_kv_heads(c, l) > kv ? config_layer_kv_heads(c, l) : kv;
    return (size_t)c->n_heads + 2 * (size_t)kv;
}

static size_t layer_floats(const tlm_config *c, size_t N, size_t d) {
    const size_t R = head_rows(c);
    return 6 * N * d + 4 * N + 2 * N * R * d + 2 * N * R;
}

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
    const size_t R = head_rows(c), base = (size_t)n_slots * layer_floats(c, N, d);
    float *m = pass_hook_memory(x, base + N * H * d + 5 * N * d + N * qd + 2 * N * R * d);
    if (!m) {
        if (!x->failed) x->failed = model_point_id(c, l, PT_ATTN_IN) + 1;
        return 0;
    }
    memset(s, 0, sizeof *s);
    if (slot >= 0) {
        float *p = m + (size_t)slot * layer_floats(c, N, d);
        s->x_attn = p, s->xk = p + N * d, s->xv = p + 2 * N * d, s->yk = p + 3 * N * d, s->yv = p + 4 * N * d;
        s->x_mlp = p + 5 * N * d;
        float *st = p + 6 * N * d;
        s->nk = (norm_acts){.y = s->yk, .mean = st, .rstd = st + N};
        s->nv = (norm_acts){.y = s->yv, .mean = st + 2 * N, .rstd = st + 3 * N};
        if (R) {
            s->hx = st + 4 * N, s->hy = s->hx + N * R * d;
            s->hn = (norm_acts){.y = s->hy, .mean = s->hy + N * R * d, .rstd = s->hy + N * R * d + N * R};
        }
    }
    float *sh = m + base;
    s->heads = sh;
    sh += N * H * d;
    s->dxq = sh, s->dxk = sh + N * d, s->dxv = sh + 2 * N * d, s->du = sh + 3 * N * d, s->one = sh + 4 * N * d;
    s->zm = sh + 5 * N * d;
    if (R) s->hdx = s->zm + N * qd, s->hdu = s->hdx + N * R * d;
    return 1;
}

static unsigned char *made_of(pass_ctx *x, int l, sublayer_kind k) {
    unsigned char *f = pass_hook_flags(x, 2 * x->m->cfg.n_layers);
    return f ? &f[2 * l + k] : NULL;
}

static norm_params *input_norm(const model_params *p, int l, sublayer_kind k) {
    return k == SUB_ATTN ? &p->layers[l].attn_norm : &p->layers[l].ffn_norm;
}

/* layer l's per-head inputs (cfg.split_qkv_heads): q's H copies, then (its own keys and values) k's
 * KV and v's KV (none with K = V), each part [N, heads, d], back to back */
typedef struct {
    int n[3];      /* heads of q, k, v */
    size_t off[3]; /* rows per token before the part: the part starts at N * off * d */
    int total;
} head_parts;

static head_parts parts_of(const tlm_config *c, int l) {
    const int own = config_kv_source(c, l) == l, KV = own ? config_layer_kv_heads(c, l) : 0;
    head_parts hp = {{c->n_heads, KV, own && !config_layer_k_eq_v(c, l) ? KV : 0}, {0}, 0};
    hp.off[1] = (size_t)hp.n[0], hp.off[2] = (size_t)hp.n[0] + hp.n[1];
    hp.total = hp.n[0] + hp.n[1] + hp.n[2];
    return hp;
}

static const int PART_POINT[3] = {PT_Q_INPUT, PT_K_INPUT, PT_V_INPUT};

int tlm_set_split_qkv_input(tlm_model *m, int per_head) {
    if (!m) return tlm_error("split qkv input: no model");
    m->cfg.split_qkv_heads = per_head != 0;
    return 0;
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
    if (split && c->split_qkv_heads) { /* a copy per head; X (hook_attn_in) is what ln1 reads */
        const head_parts hp = parts_of(c, l);
        const int N = x->A->B * x->A->T, d = c->d_model;
        *made |= MADE_SPLIT | MADE_HEADS;
        for (int part = 0; part < 3; part++) {
            const int nh = hp.n[part];
            float *dst = s.hx + hp.off[part] * (size_t)N * d;
            if (!nh) continue;
#pragma omp parallel for schedule(static)
            for (int r = 0; r < N * nh; r++) memcpy(dst + (size_t)r * d, X + (size_t)(r / nh) * d, sizeof(float) * d);
            pass_fire(x, model_point_id(c, l, PART_POINT[part]), dst, 0);
        }
    } else if (split) {
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

/* out[:, h hd .. (h+1) hd] (rows of `width`) = head h's projection by W of its copy, row (n, h) of
 * Y [N, nh, d]: through that head's rows of W (float32 or bf16 weights), else (ggml blocks) the whole
 * product of the copy, of which head h's columns are kept */
static void project_head(pass_ctx *x, const side *s, const linear_params *W, const float *Y, int nh, int h, int hd,
                         float *out, int width) {
    const int N = x->A->B * x->A->T, d = x->m->cfg.d_model;
    for (int n = 0; n < N; n++) memcpy(s->one + (size_t)n * d, Y + ((size_t)n * nh + h) * d, sizeof(float) * d);
    const size_t w0 = (size_t)h * hd * d;
    if (W->w || W->w16) {
        linear_params sub = *W;
        sub.w = W->w ? W->w + w0 : NULL, sub.w16 = W->w16 ? W->w16 + w0 : NULL, sub.b = W->b ? W->b + h * hd : NULL;
        linear_forward(pass_product_bf16(x), x->A->w_tile, s->zm, s->one, &sub, N, d, hd);
        for (int n = 0; n < N; n++)
            memcpy(out + (size_t)n * width + (size_t)h * hd, s->zm + (size_t)n * hd, sizeof(float) * hd);
    } else {
        linear_forward(pass_product_bf16(x), x->A->w_tile, s->zm, s->one, W, N, d, width);
        for (int n = 0; n < N; n++)
            memcpy(out + (size_t)n * width + (size_t)h * hd, s->zm + (size_t)n * width + (size_t)h * hd,
                   sizeof(float) * hd);
    }
}

/* per head: every copy through the input norm (kept for the backward); a head whose normed copy is
 * not bit for bit what the sublayer's projections read (u) gets its q, k or v again from its own */
static void heads_forward(pass_ctx *x, int l, const side *s) {
    const tlm_model *m = x->m;
    const tlm_config *c = &m->cfg;
    layer_acts *a = &x->A->layers[l];
    const layer_params *P = &m->p.layers[l];
    const head_parts hp = parts_of(c, l);
    const int N = x->A->B * x->A->T, d = c->d_model, hd = config_layer_head_dim(c, l);
    const int has_in = placement_has_input_norm(c->placement);
    if (has_in) model_norm_forward(c, s->hy, &s->hn, input_norm(&m->p, l, SUB_ATTN), s->hx, N * hp.total);
    const float *Y = has_in ? s->hy : s->hx, *u = has_in ? a->attn_s.in.y : s->x_attn;
    float *outs[3] = {a->q, a->k, a->v};
    const linear_params *W[3] = {&P->q, &P->k, &P->v};
    int k_changed = 0;
    for (int part = 0; part < 3; part++) {
        const int nh = hp.n[part];
        const float *Yp = Y + hp.off[part] * (size_t)N * d;
        for (int h = 0; h < nh; h++) {
            int changed = 0;
            for (int n = 0; n < N && !changed; n++)
                changed = memcmp(Yp + ((size_t)n * nh + h) * d, u + (size_t)n * d, sizeof(float) * d) != 0;
            if (!changed) continue;
            project_head(x, s, W[part], Yp, nh, h, hd, outs[part], nh * hd);
            k_changed |= part == 1;
        }
    }
    if (k_changed && hp.n[1] && !hp.n[2]) /* (K = V: v is the k projection) */
        vec_copy(a->v, a->k, (size_t)N * hp.n[1] * hd);
}

void hook_points_split_kv(pass_ctx *x, int l, float *k, float *v) {
    const tlm_model *m = x->m;
    const tlm_config *c = &m->cfg;
    unsigned char *made = made_of(x, l, SUB_ATTN);
    side s;
    if (!made || !(*made & MADE_SPLIT)) return;
    if (*made & MADE_HEADS) {
        if (side_of(x, l, &s)) heads_forward(x, l, &s);
        return;
    }
    if (config_kv_source(c, l) != l || !side_of(x, l, &s)) return;
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

float *hook_points_map(const pass_ctx *x, int l, int kind, float *own) {
    if (!own || !x->observed) return own;
    float *dst = pass_capture_of(x, model_point_id(&x->m->cfg, l, kind));
    return dst ? dst : own;
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

/* per head: each head's gradient at its normed copy from its rows of W (and W's, b's gradients from
 * its copy), then through the input norm with the copy's own statistics: s->hdx [rows, d] */
static void heads_backward(pass_ctx *x, int l, const side *s, const float *dq, const float *dk, const float *dv) {
    const tlm_model *m = x->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_params *G = &x->g->layers[l];
    const head_parts hp = parts_of(c, l);
    const int N = x->A->B * x->A->T, d = c->d_model, hd = config_layer_head_dim(c, l);
    const int has_in = placement_has_input_norm(c->placement);
    const float *Y = has_in ? s->hy : s->hx;
    const float *dout[3] = {dq, dk, dv};
    const linear_params *W[3] = {&P->q, &P->k, &P->v};
    linear_params *GW[3] = {&G->q, &G->k, &G->v};
    for (int part = 0; part < 3; part++) {
        const int nh = hp.n[part], width = nh * hd;
        const float *Yp = Y + hp.off[part] * (size_t)N * d;
        float *dUp = s->hdu + hp.off[part] * (size_t)N * d;
        for (int h = 0; h < nh; h++) {
            for (int n = 0; n < N; n++) {
                memcpy(s->one + (size_t)n * d, Yp + ((size_t)n * nh + h) * d, sizeof(float) * d);
                memcpy(s->zm + (size_t)n * hd, dout[part] + (size_t)n * width + (size_t)h * hd, sizeof(float) * hd);
            }
            const size_t w0 = (size_t)h * hd * d;
            linear_params sp = *W[part], sg = *GW[part];
            sp.w = sp.w ? sp.w + w0 : NULL, sp.w16 = sp.w16 ? sp.w16 + w0 : NULL, sp.b = sp.b ? sp.b + h * hd : NULL;
            sg.w = sg.w ? sg.w + w0 : NULL, sg.b = sg.b ? sg.b + h * hd : NULL;
            linear_backward(pass_product_bf16(x), 1, s->dxq, &sg, s->zm, s->one, NULL, &sp, N, d, hd);
            for (int n = 0; n < N; n++)
                memcpy(dUp + ((size_t)n * nh + h) * d, s->dxq + (size_t)n * d, sizeof(float) * d);
        }
    }
    const size_t rows = (size_t)N * hp.total;
    if (has_in)
        model_norm_backward(c, s->hdx, NULL, input_norm(x->g, l, SUB_ATTN), s->hdu, &s->hn, input_norm(&m->p, l, SUB_ATTN),
                            s->hx, (int)rows);
    else
        vec_copy(s->hdx, s->hdu, rows * d);
}

int hook_points_split_backward(pass_ctx *x, int l, const float *dq, const float *dk, const float *dv, float *du) {
    const tlm_model *m = x->m;
    const tlm_config *c = &m->cfg;
    unsigned char *made = made_of(x, l, SUB_ATTN);
    side s;
    if (!made || !(*made & MADE_SPLIT) || !side_of(x, l, &s)) return 0;
    if (*made & MADE_HEADS) { /* (nothing reads ln1's output: its gradient is 0) */
        heads_backward(x, l, &s, dq, dk, dv);
        memset(du, 0, sizeof(float) * (size_t)x->A->B * x->A->T * c->d_model);
        return 2;
    }
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
    if (*made & MADE_HEADS) { /* the heads' gradients (hooks may change them), their sum */
        const head_parts hp = parts_of(c, l);
        const int d = c->d_model;
        for (int part = 2; part >= 0; part--)
            if (hp.n[part]) pass_fire(x, model_point_id(c, l, PART_POINT[part]), s.hdx + hp.off[part] * n, 1);
#pragma omp parallel for schedule(static)
        for (int r = 0; r < N; r++) {
            float *o = s.dxq + (size_t)r * d;
            memset(o, 0, sizeof(float) * d);
            for (int part = 0; part < 3; part++)
                for (int h = 0; h < hp.n[part]; h++) {
                    const float *g = s.hdx + hp.off[part] * n + ((size_t)r * hp.n[part] + h) * d;
                    for (int i = 0; i < d; i++) o[i] += g[i];
                }
        }
    } else if (placement_has_input_norm(c->placement))
        model_norm_backward(c, s.dxq, NULL, input_norm(x->g, l, k), du, &sa->in, input_norm(&m->p, l, k), X, N);
    else
        vec_copy(s.dxq, du, n);
    if ((*made & MADE_SPLIT) && !(*made & MADE_HEADS)) {
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
