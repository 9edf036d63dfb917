/* attention.c — the attention sublayer (multi-head, grouped-query, multi-query; sliding window,
 * QK-norm, RoPE, soft-cap; Gemma 4's per-layer head shapes, K = V and shared keys and values):
 * forward and backward over rows, attention through the KV cache (kv_attention_forward), and the
 * decode step's share (attention_step). For N = B*T rows, d = d_model, H heads, KV kv heads,
 * hd head_dim, u [N,d] -> f [N,d]:
 *
 *   q|k|v = u W_qkv^T        [N, H hd | KV hd | KV hd]
 *   qn,kn = rmsnorm(q,k)     (QK-norm: per head or over the projection)
 *   qr,kr = rope(qn,kn)      (RoPE)
 *   att   = softmax(qr kr^T) v   [N, H hd]   (causal, windowed, capped; with a cache over every cached key)
 *   f     = att W_o^T        [N, d]
 *
 * Each op's activation point fires (PASS_POINT) right after it, with the id of points.c's table. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hook_points.h"
#include "kv_cache.h"
#include "components.h"
#include "util/f16.h"
#include "util/profile.h"

void attention_full_pass(pass_ctx *ctx, int l, float *att, float *scores, float *probs, const float *q,
                         const float *k, const float *v, int B, int T) {
    const tlm_config *c = &ctx->m->cfg;
    attention_spec spec = model_layer_attention(c, l);
    spec.bf16 = pass_product_bf16(ctx);
    spec.start = ctx->A->start; /* (left padding: no key before a row's first real token) */
    float *const own_scores = scores, *const own_probs = probs;
    scores = hook_points_map(ctx, l, PT_ATTN_SCORES, scores), probs = hook_points_map(ctx, l, PT_PATTERN, probs);
    spec.stream_maps = scores != own_scores || probs != own_probs; /* (a cache's arrays) */
    attention_forward(att, scores, probs, q, k, v, B, T, &spec, ctx->A->attn_scratch);
    if (ctx->observed) {
        pass_fire(ctx, model_point_id(c, l, PT_ATTN_SCORES), scores, 0);
        pass_fire(ctx, model_point_id(c, l, PT_PATTERN), probs, 0);
        model_hook_attention_from_probs(ctx, l, att, probs, v);
    }
}

/* the keys and values layer l attends over: its own, or (shared K/V) those of its source layer */
static const layer_acts *kv_acts(const pass_ctx *ctx, int l) {
    return &ctx->A->layers[config_kv_source(&ctx->m->cfg, l)];
}

void attention_sublayer_forward(pass_ctx *ctx, int l, const float *u, float *f) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_acts *a = &ctx->A->layers[l];
    const int B = ctx->A->B, T = ctx->A->T, N = B * T, d = c->d_model;
    /* the layer's shape: Gemma 4's full layers have their own head_dim and kv heads; a layer that
     * shares an earlier one's keys and values projects q alone; a K = V layer no v */
    const int hd = config_layer_head_dim(c, l), KV = config_layer_kv_heads(c, l);
    const int qd = c->n_heads * hd, kvd = KV * hd;
    const int own = config_kv_source(c, l) == l, k_eq_v = own && config_layer_k_eq_v(c, l);
    float *qkv_out[3] = {a->q, a->k, a->v};
    const linear_params *qkv_parts[3] = {&P->q, &P->k, &P->v};
    const int qkv_widths[3] = {qd, kvd, kvd};
    project_parts(ctx, qkv_out, qkv_parts, qkv_widths, !own ? 1 : k_eq_v ? 2 : 3, &P->qkv, u, a->u16[SUB_ATTN], N,
                  d);
    if (k_eq_v) vec_copy(a->v, a->k, (size_t)N * kvd); /* v is the k projection, before k's norm */
    if (ctx->observed) hook_points_split_kv(ctx, l, a->k, a->v); /* (hook_k_input, hook_v_input) */
    PASS_POINT(ctx, model_point_id(c, l, PT_Q), a->q, 0);
    if (own) {
        PASS_POINT(ctx, model_point_id(c, l, PT_K), a->k, 0);
        PASS_POINT(ctx, model_point_id(c, l, PT_V), a->v, 0);
    }
    if (c->qk_norm != QK_NORM_NONE) {
        qk_norm_forward(c, l, a->qn, a->q_rstd, a->q, P->q_norm, N, c->n_heads);
        PASS_POINT(ctx, model_point_id(c, l, PT_Q_NORMED), a->qn, 0);
        if (own) {
            qk_norm_forward(c, l, a->kn, a->k_rstd, a->k, P->k_norm, N, KV);
            PASS_POINT(ctx, model_point_id(c, l, PT_K_NORMED), a->kn, 0);
        }
    }
    if (own && c->v_norm) /* per head, no weight (Gemma 4) */
        rmsnorm_forward(a->vn, a->v_rstd, a->v, NULL, 0.0f, N * KV, hd, c->norm_eps);
    const int pos0 = ctx->run->kv && !ctx->A->start ? kv_cache_length(ctx->run->kv) : 0; /* (as forward_rows') */
    if (c->position == POS_ROPE) {
        const float *cs, *sn;
        context_layer_rope(ctx->run, l, &cs, &sn);
        rope_forward(a->qr, a->qn, cs, sn, B, T, c->n_heads, hd, pos0, ctx->A->start);
        PASS_POINT(ctx, model_point_id(c, l, PT_ROT_Q), a->qr, 0);
        if (own) {
            rope_forward(a->kr, a->kn, cs, sn, B, T, KV, hd, pos0, ctx->A->start);
            PASS_POINT(ctx, model_point_id(c, l, PT_ROT_K), a->kr, 0);
        }
    }
    const layer_acts *kv = kv_acts(ctx, l);
    if (ctx->run->kv) { /* incremental decoding: append k, v to the cache (a shared layer: none) and attend over all of it */
        attention_spec spec = model_layer_attention(c, l);
        spec.bf16 = pass_product_bf16(ctx); /* (a chunk of several tokens: the full pass's bf16 products) */
        kv_attention_forward(ctx->run->kv, l, a->att, a->qr, own ? a->kr : NULL, own ? a->vn : NULL, T, spec);
    } else {
        attention_full_pass(ctx, l, a->att, a->scores, a->probs, a->qr, kv->kr, kv->vn, B, T);
    }
    PASS_POINT(ctx, model_point_id(c, l, PT_Z), a->att, 0);
    linear_forward_kept(ctx, f, a->att, a->att16, &P->o, N, qd, d);
    if (ctx->observed) hook_points_result(ctx, l, f); /* (attn.hook_result) */
}

/* du = d(attention sublayer)/du . df (set) */
void attention_sublayer_backward(pass_ctx *ctx, int l, const float *u, const float *df, float *du) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_params *G = &ctx->g->layers[l];
    const layer_acts *a = &ctx->A->layers[l];
    activations *A = ctx->A;
    const int B = A->B, T = A->T, N = B * T, d = c->d_model;
    const int hd = config_layer_head_dim(c, l), KV = config_layer_kv_heads(c, l);
    const int qd = c->n_heads * hd, kvd = KV * hd;
    const int own = config_kv_source(c, l) == l, k_eq_v = own && config_layer_k_eq_v(c, l);
    const size_t nkv = (size_t)N * kvd;
    if (!(ctx->observed && hook_points_result_backward(ctx, l, df))) /* (attn.hook_result's gradient changed) */
        linear_backward(pass_product_bf16(ctx), 1, A->datt, &G->o, df, a->att,
                        backward_input(pass_product_bf16(ctx), &P->o, a->att, N, qd, a->att16, 0), &P->o, N, qd, d);
    PASS_POINT(ctx, model_point_id(c, l, PT_Z), A->datt, 1);
    attention_spec spec = model_layer_attention(c, l);
    const layer_acts *kv = kv_acts(ctx, l);
    spec.bf16 = pass_product_bf16(ctx);
    spec.start = A->start;
    attention_backward(A->dq, A->dk, A->dv, A->datt, hook_points_map(ctx, l, PT_ATTN_SCORES, a->scores),
                       hook_points_map(ctx, l, PT_PATTERN, a->probs), a->qr, kv->kr, kv->vn, B, T, &spec,
                       A->attn_scratch);
    if (!own) { /* shared keys and values: their gradients go back to the layer that made them */
        vec_acc(kv->dk_shared, A->dk, nkv);
        vec_acc(kv->dv_shared, A->dv, nkv);
    } else if (a->dk_shared) { /* ... and are added there, to its own */
        vec_acc(A->dk, a->dk_shared, nkv);
        vec_acc(A->dv, a->dv_shared, nkv);
    }
    /* through the v norm (per head, no weight) */
    float *dv = A->dv;
    if (own && c->v_norm) {
        rmsnorm_backward(A->dv2, NULL, NULL, A->dv, a->v, NULL, 0.0f, a->v_rstd, N * KV, hd);
        dv = A->dv2;
    }
    if (own) PASS_POINT(ctx, model_point_id(c, l, PT_V), dv, 1);
    if (c->position == POS_ROPE) {
        PASS_POINT(ctx, model_point_id(c, l, PT_ROT_Q), A->dq, 1);
        if (own) PASS_POINT(ctx, model_point_id(c, l, PT_ROT_K), A->dk, 1);
    }
    /* walk back through RoPE and QK-norm, alternating between two gradient buffers */
    float *dq = A->dq, *dq_next = A->dq2, *dk = A->dk, *dk_next = A->dk2, *t;
    if (c->position == POS_ROPE) {
        const float *cs, *sn;
        context_layer_rope(ctx->run, l, &cs, &sn);
        rope_backward(dq_next, dq, cs, sn, B, T, c->n_heads, hd, 0, A->start);
        t = dq, dq = dq_next, dq_next = t;
        if (own) {
            rope_backward(dk_next, dk, cs, sn, B, T, KV, hd, 0, A->start);
            t = dk, dk = dk_next, dk_next = t;
        }
    }
    int k_has_v = 0; /* (K = V: v's gradient added to the k projection's) */
    if (c->qk_norm != QK_NORM_NONE) {
        PASS_POINT(ctx, model_point_id(c, l, PT_Q_NORMED), dq, 1);
        qk_norm_backward(c, l, dq_next, NULL, G->q_norm, dq, a->q, P->q_norm, a->q_rstd, N, c->n_heads);
        dq = dq_next;
        if (own) {
            PASS_POINT(ctx, model_point_id(c, l, PT_K_NORMED), dk, 1);
            qk_norm_backward(c, l, dk_next, k_eq_v ? dv : NULL, G->k_norm, dk, a->k, P->k_norm, a->k_rstd, N, KV);
            dk = dk_next, k_has_v = k_eq_v;
        }
    }
    if (k_eq_v && !k_has_v) vec_acc(dk, dv, nkv);
    PASS_POINT(ctx, model_point_id(c, l, PT_Q), dq, 1);
    if (own) PASS_POINT(ctx, model_point_id(c, l, PT_K), dk, 1);
    /* the input projections, each into its rows of the fused gradient (no join pass) */
    const uint16_t *u16 = backward_input(pass_product_bf16(ctx), &P->q, u, N, d, a->u16[SUB_ATTN], 1);
    /* (inputs of their own: 1 k's and v's, 2 every head's q, k and v) */
    const int split = ctx->observed ? hook_points_split_backward(ctx, l, dq, dk, dv, du) : 0;
    if (split < 2) linear_backward(pass_product_bf16(ctx), 1, du, &G->q, dq, u, u16, &P->q, N, d, qd);
    if (own && !split) linear_backward(pass_product_bf16(ctx), 0, du, &G->k, dk, u, u16, &P->k, N, d, kvd);
    if (own && !k_eq_v && !split) linear_backward(pass_product_bf16(ctx), 0, du, &G->v, dv, u, u16, &P->v, N, d, kvd);
}

/* ---- through the KV cache ------------------------------------------------------------------------ */

/* A chunk of tokens in mixed precision (spec->bf16 on AMX) rounds what the full pass rounds
 * (ops/attention.c), so a prompt fed through the cache in chunks computes what one full pass does:
 * each head's cached keys and values to bf16 once per chunk, its queries and P once per block; S =
 * q k^T and O = P v one gemm_bf16 call each with f32 sums; the scale, soft-cap, mask and softmax in
 * f32. (row, head) pairs in parallel, their blocks in turn. 0, or -1 (no scratch, or a product oneDNN
 * could not run: the caller computes the chunk in f32, overwriting what was written). */
enum { KV_BF16_BLOCK = 128 }; /* (as the full pass's: a block per oneDNN call is worth more rows) */

static int kv_chunk_attention_bf16(kv_cache *c, int l, float *out, const float *q, int T, const attention_spec *spec) {
    const int H = spec->n_heads, group = H / spec->n_kv_heads, hd = spec->head_dim;
    const int qrow = H * hd, len = c->len, B = c->batch, n_all = len + T, max_len = c->max_len;
    const size_t blk = (size_t)KV_BF16_BLOCK * max_len;
    if (!c->scratch16) { /* (once per cache, for the widest layer's heads) */
        int hd_max = 0;
        for (int i = 0; i < c->n_layers; i++) hd_max = c->layer_hd[i] > hd_max ? c->layer_hd[i] : hd_max;
        const size_t halves = blk + (size_t)KV_BF16_BLOCK * hd_max + 2 * (size_t)max_len * hd_max;
        c->scratch16_floats = (blk + (halves + 1) / 2 + 15) & ~(size_t)15;
        c->scratch16 = aligned_alloc(64, sizeof(float) * c->scratch16_floats * c->n_threads);
        if (!c->scratch16) return -1;
    }
    attention_spec blk_spec = *spec;
    blk_spec.start = c->start; /* (the rows' left padding: kv_first_key's rule) */
    int failed = 0;
#pragma omp parallel reduction(| : failed)
    {
        float *S = c->scratch16 + c->scratch16_floats * omp_get_thread_num();
        uint16_t *p16 = (uint16_t *)(S + blk), *q16 = p16 + blk;
        uint16_t *k16 = q16 + (size_t)KV_BF16_BLOCK * hd, *v16 = k16 + (size_t)max_len * hd;
        int have_b = -1, have_g = -1; /* (the query heads of a GQA group share one rounding of k, v) */
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                if (failed) continue;
                const int g = h / group;
                if (b != have_b || g != have_g) {
                    f32_to_bf16_rows(k16, hd, kv_head(c, c->k, b, l, g), hd, n_all, hd);
                    f32_to_bf16_rows(v16, hd, kv_head(c, c->v, b, l, g), hd, n_all, hd);
                    have_b = b, have_g = g;
                }
                for (int t0 = 0; t0 < T && !failed; t0 += KV_BF16_BLOCK) {
                    /* the block's queries see keys k0 (its first query's first) .. k1 (its last query) */
                    const int rows = T - t0 < KV_BF16_BLOCK ? T - t0 : KV_BF16_BLOCK;
                    const int k0 = kv_first_key(c, b, len + t0, spec->window), k1 = len + t0 + rows;
                    const size_t qo = ((size_t)b * T + t0) * qrow + (size_t)h * hd;
                    f32_to_bf16_rows(q16, hd, q + qo, qrow, rows, hd);
                    failed |= attention_block_bf16(out + qo, qrow, S, S, k1, p16, q16, k16, v16, b, len + t0, rows, k0,
                                                   k1, &blk_spec, 0) != 0;
                }
            }
    }
    return failed ? -1 : 0;
}

void kv_attention_forward(kv_cache *c, int l, float *out, const float *q, const float *k, const float *v, int T,
                          attention_spec spec) {
    PROF_SCOPE("kv_attention_forward");
    const int H = spec.n_heads, group = H / spec.n_kv_heads, hd = spec.head_dim, kvd = spec.n_kv_heads * hd;
    const int qrow = H * hd, len = c->len, B = c->batch;
    for (int b = 0; k && b < B; b++) /* append: row t of head g at position len + t */
        for (int g = 0; g < spec.n_kv_heads; g++)
            for (int t = 0; t < T; t++) {
                const size_t src = ((size_t)b * T + t) * kvd + (size_t)g * hd;
                memcpy(kv_head(c, c->k, b, l, g) + (size_t)(len + t) * hd, k + src, sizeof(float) * hd);
                memcpy(kv_head(c, c->v, b, l, g) + (size_t)(len + t) * hd, v + src, sizeof(float) * hd);
            }
    if (T > 1 && attention_bf16_products(&spec) && !kv_chunk_attention_bf16(c, l, out, q, T, &spec)) return;
    if (T == 1) { /* one new token per row: a dot product per cached key, (row, head) pairs in parallel */
#pragma omp parallel for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                attention_row(out + ((size_t)b * qrow) + (size_t)h * hd,
                              c->scratch + (size_t)KV_QUERY_BLOCK * c->max_len * omp_get_thread_num(),
                              q + (size_t)b * qrow + (size_t)h * hd, kv_head(c, c->k, b, l, h / group),
                              kv_head(c, c->v, b, l, h / group), hd, kv_first_key(c, b, len, spec.window), len + 1, hd,
                              spec.scale, spec.softcap);
        return;
    }
    /* a chunk of tokens: per (row, query block, head) S = scale Q K^T over every key up to the block's
     * last position, masked softmax row by row (in place), O = P V */
    const int blocks = (T + KV_QUERY_BLOCK - 1) / KV_QUERY_BLOCK;
#pragma omp parallel for collapse(3) schedule(static)
    for (int b = 0; b < B; b++)
        for (int qb = 0; qb < blocks; qb++)
            for (int h = 0; h < H; h++) {
                const int t0 = qb * KV_QUERY_BLOCK, rows = T - t0 < KV_QUERY_BLOCK ? T - t0 : KV_QUERY_BLOCK;
                const int n_keys = len + t0 + rows; /* keys visible to the block's last query */
                const float *kg = kv_head(c, c->k, b, l, h / group), *vg = kv_head(c, c->v, b, l, h / group);
                float *S = c->scratch + (size_t)KV_QUERY_BLOCK * c->max_len * omp_get_thread_num();
                const size_t qo = ((size_t)b * T + t0) * qrow + (size_t)h * hd;
                gemm(0, 1, rows, n_keys, hd, spec.scale, q + qo, qrow, kg, hd, 0.0f, S, n_keys);
                for (int r = 0; r < rows; r++) {
                    const int pos = len + t0 + r;
                    float *s = S + (size_t)r * n_keys;
                    attention_softmax_row(s, s, n_keys, kv_first_key(c, b, pos, spec.window), pos, spec.softcap);
                }
                gemm(0, 0, rows, hd, n_keys, 1.0f, S, n_keys, vg, hd, 0.0f, out + qo, qrow);
            }
}

/* ---- the decode step -------------------------------------------------------------------------------- */

/* f (shared) = F of the attention sublayer of layer l on u (the thread's), as
 * attention_sublayer_forward computes it for one row: the layer's own head_dim and kv heads (Gemma 4's
 * layer types), q alone in a layer that reads an earlier layer's keys and values (from that layer's
 * cache, written earlier in this step), v the k projection in a K = V layer, the v norm per head */
void attention_step(const step_ctx *s, int l, const float *u, float *f) {
    const tlm_model *m = s->m;
    const tlm_config *cfg = &m->cfg;
    kv_cache *c = s->c;
    const layer_params *P = &m->p.layers[l];
    const int d = cfg->d_model, hd = config_layer_head_dim(cfg, l), H = cfg->n_heads;
    const int KV = config_layer_kv_heads(cfg, l), group = H / KV, qd = H * hd, kvd = KV * hd;
    const int own = config_kv_source(cfg, l) == l, k_eq_v = own && config_layer_k_eq_v(cfg, l);
    const int n_parts = !own ? 1 : k_eq_v ? 2 : 3;
    int lo, hi;
    step_share(qd + (n_parts - 1) * kvd, s, &lo, &hi);
    const linear_params *qkv_parts[3] = {&P->q, &P->k, &P->v};
    const int qkv_widths[3] = {qd, kvd, kvd};
    linear_parts_step(c->sh.qkv, u, &P->qkv, qkv_parts, qkv_widths, n_parts, d, lo, hi);
#pragma omp barrier
    const float *q = c->sh.qkv, *k = q + qd, *v = k_eq_v ? k : k + kvd, *qn = q, *kn = k;
    int g0, g1;
    step_share(KV, s, &g0, &g1); /* this thread's kv heads, and their query heads */
    const int h0 = g0 * group, h1 = g1 * group;
    if (cfg->qk_norm != QK_NORM_NONE) {
        qk_norm_step(cfg, l, s->o->qn, q, P->q_norm, H, h0, h1);
        if (own) qk_norm_step(cfg, l, s->o->kn, k, P->k_norm, KV, g0, g1);
        qn = s->o->qn, kn = s->o->kn;
    }
    if (own && cfg->v_norm) { /* per head, no weight */
        for (int g = g0; g < g1; g++)
            rmsnorm_row(s->o->vn + (size_t)g * hd, v + (size_t)g * hd, NULL, 0.0f, hd, cfg->norm_eps);
        v = s->o->vn;
    }
    const float *qr = qn, *kr = kn;
    if (cfg->position == POS_ROPE && g1 > g0) {
        const float *cs, *sn;
        context_layer_rope(s->run, l, &cs, &sn);
        rope_forward_token(s->o->qr + (size_t)h0 * hd, qn + (size_t)h0 * hd, cs, sn, h1 - h0, hd, s->pos);
        if (own) rope_forward_token(s->o->kr + (size_t)g0 * hd, kn + (size_t)g0 * hd, cs, sn, g1 - g0, hd, s->pos);
        qr = s->o->qr, kr = s->o->kr;
    }
    const attention_spec spec = model_layer_attention(cfg, l);
    for (int g = g0; g < g1; g++) {
        float *kc = kv_head(c, c->k, 0, l, g), *vc = kv_head(c, c->v, 0, l, g);
        if (own) { /* (a sharing layer reads what its source layer wrote at this position) */
            memcpy(kc + (size_t)s->pos * hd, kr + (size_t)g * hd, sizeof(float) * hd);
            memcpy(vc + (size_t)s->pos * hd, v + (size_t)g * hd, sizeof(float) * hd);
        }
        for (int h = g * group; h < (g + 1) * group; h++)
            attention_row(c->sh.att + (size_t)h * hd, s->o->scores, qr + (size_t)h * hd, kc, vc, hd,
                          attention_first_key(s->pos, spec.window), s->pos + 1, hd, spec.scale, spec.softcap);
    }
#pragma omp barrier
    step_share(d, s, &lo, &hi);
    linear_step(f, c->sh.att, &P->o, qd, lo, hi);
#pragma omp barrier
}

/* ---- the component ---------------------------------------------------------------------------------- */

static void attention_forward_op(pass_ctx *ctx, int l, const float *x, const float *u, float *f) {
    (void)x;
    attention_sublayer_forward(ctx, l, u, f);
}

/* its tensors in layer l: q|k|v back to back (Gemma 4: full layers have their own head_dim and kv
 * heads; a layer that shares an earlier layer's keys and values has no k, v of its own; K = V
 * layers no v), o, the QK-norm's gains */
static void attention_params(param_walk *w, layer_params *L, int l) {
    const tlm_config *c = w->cfg;
    const int d = c->d_model, hd = config_layer_head_dim(c, l), qd = c->n_heads * hd,
              kvd = config_layer_kv_heads(c, l) * hd;
    const bool own_kv = config_kv_source(c, l) == l, own_v = own_kv && !config_layer_k_eq_v(c, l);
    char n[96];
    linear_params *parts[3] = {&L->q, &L->k, &L->v};
    const char *names[3] = {"attn.q_proj", "attn.k_proj", "attn.v_proj"};
    const int outs[3] = {qd, kvd, kvd};
    walk_fused(w, &L->qkv, parts, names, outs, own_v ? 3 : own_kv ? 2 : 1, d, c->attn_bias, l);
    snprintf(n, sizeof n, "layers.%d.attn.o_proj", l);
    walk_linear(w, &L->o, n, d, qd, c->attn_out_bias, TENSOR_RESIDUAL_MATRIX);
    if (c->qk_norm != QK_NORM_NONE) {
        float id = c->norm == NORM_RMSNORM_1P ? 0.0f : 1.0f;
        bool full = c->qk_norm == QK_NORM_FULL;
        snprintf(n, sizeof n, "layers.%d.attn.q_norm.weight", l);
        walk_add(w, &L->q_norm, n, full ? qd : hd, 0, TENSOR_NORM, id);
        if (own_kv) {
            snprintf(n, sizeof n, "layers.%d.attn.k_norm.weight", l);
            walk_add(w, &L->k_norm, n, full ? kvd : hd, 0, TENSOR_NORM, id);
        }
    }
}

/* whether a later layer attends over layer l's keys and values (Gemma 4's shared K/V) */
static int kv_shared_from(const tlm_config *c, int l) {
    for (int j = config_first_kv_shared(c); j < c->n_layers; j++)
        if (config_kv_source(c, j) == l) return 1;
    return 0;
}

/* a layer's keys and values: the projections, after QK-norm, RoPE and the v norm (each aliasing
 * the one before when its step is off), N rows of kv heads KV of kvd floats */
static void take_kv(arena *a, layer_acts *L, const tlm_config *c, size_t N, size_t kvd, int KV) {
    L->k = take(a, N * kvd);
    L->v = take(a, N * kvd); /* (K = V layers: the k projection's copy, what the v norm reads) */
    L->kn = L->k, L->k_rstd = NULL;
    if (c->qk_norm != QK_NORM_NONE) {
        L->k_rstd = take(a, c->qk_norm == QK_NORM_HEAD ? N * KV : N);
        L->kn = take(a, N * kvd);
    }
    L->kr = c->position == POS_ROPE ? take(a, N * kvd) : L->kn;
    L->vn = L->v, L->v_rstd = NULL;
    if (c->v_norm) {
        L->v_rstd = take(a, N * KV);
        L->vn = take(a, N * kvd);
    }
}

static void copy_kv(layer_acts *to, const layer_acts *from) {
    to->k = from->k, to->v = from->v, to->kn = from->kn, to->kr = from->kr, to->vn = from->vn;
    to->k_rstd = from->k_rstd, to->v_rstd = from->v_rstd;
}

void attention_layout(layout_ctx *lc, arena *a, layer_acts *L, int l) {
    const tlm_context *ctx = lc->ctx;
    const tlm_config *c = lc->c;
    const int one_layer = lc->one_layer;
    /* this layer's widths (training); the inference layout's one layer has the widest of any layer,
     * and the per-head statistics' rows of every head */
    const int hd = config_layer_head_dim(c, l), KV = config_layer_kv_heads(c, l);
    const size_t N = lc->N, lqd = one_layer ? (size_t)config_max_q_dim(c) : (size_t)c->n_heads * hd,
                 lkvd = one_layer ? (size_t)config_max_kv_dim(c) : (size_t)KV * hd;
    const int KVmax = one_layer ? c->n_heads : KV;
    if (lc->reuse) { /* the inference layout's later layers: layer 0's buffers, the common keys and values... */
        copy_kv(L, &lc->common);
        /* ... but the keys and values that a later layer reads (shared K/V) stay until it has:
         * without a KV cache, which then holds them */
        if (!ctx->kv && kv_shared_from(c, l)) take_kv(a, L, c, N, lkvd, KVmax);
        return;
    }
    L->q = take(a, N * lqd);
    L->qn = L->q, L->q_rstd = NULL;
    if (c->qk_norm != QK_NORM_NONE) {
        L->q_rstd = take(a, c->qk_norm == QK_NORM_HEAD ? N * c->n_heads : N);
        L->qn = take(a, N * lqd);
    }
    L->qr = c->position == POS_ROPE ? take(a, N * lqd) : L->qn;
    /* a layer that shares an earlier layer's keys and values has none of its own (training: the
     * pass reads the source layer's; the inference layout's layer 0 has them for every layer) */
    if (one_layer || config_kv_source(c, l) == l)
        take_kv(a, L, c, N, lkvd, KVmax);
    else
        L->k = L->v = L->kn = L->kr = L->vn = L->k_rstd = L->v_rstd = NULL;
    if (one_layer) { /* (the buffers every layer uses; layer 0 keeps its own when a later layer reads them) */
        copy_kv(&lc->common, L);
        if (!ctx->kv && kv_shared_from(c, 0)) take_kv(a, L, c, N, lkvd, KVmax);
    }
    /* the gradients that the sharing layers send back to this layer's keys and values */
    const int shared = !one_layer && kv_shared_from(c, l);
    L->dk_shared = shared ? take(a, N * lkvd) : NULL;
    L->dv_shared = shared ? take(a, N * lkvd) : NULL;
    /* [B,H,T,T] maps: both for those who look at them; in training also the probabilities alone
     * (and the scores under a soft-cap, whose backward reads them) while they take no more than the
     * layer's FFN activations, so that the backward does not compute them again. Past that size
     * (long T) they are computed again; and in mixed precision with attention's products on bf16
     * operands (AMX), where the recomputation is two small tile products per block: there the maps
     * saved about as much in the backward as writing them cost in the forward, and took memory.
     * (Mixed precision without AMX keeps attention in f32, and the maps with it.) The figures:
     * docs/performance.md, "Figures behind the code". */
    const size_t att = (size_t)lc->B * c->n_heads * lc->T * lc->T, f = (size_t)config_max_ff(c);
    const attention_spec mixed = {.bf16 = ctx->product_bf16}; /* (the pass's own spec.bf16) */
    const int keep_probs =
        lc->maps || (!one_layer && lc->full_attention && att <= 2 * N * f && !attention_bf16_products(&mixed));
    L->scores = lc->maps || (keep_probs && model_layer_attention(c, l).softcap > 0.0f) ? take(a, att) : NULL;
    L->probs = keep_probs ? take(a, att) : NULL;
    L->att = take(a, N * lqd);
    /* mixed-precision training: the products' inputs as the forward rounded them (linear.c; latent
     * attention's products round their own) */
    arena none16 = {0};
    arena *k16 = lc->keep16 && !config_mla(c) ? a : &none16;
    L->u16[SUB_ATTN] = take16(k16, lc->B, lc->T, c->d_model);
    L->att16 = take16(k16, lc->B, lc->T, lqd);
}

/* the backward's scratch (the widest layer's; latent attention's too) and, for attention over the
 * whole sequence, each thread's: a query block's S, P, dS and the tile kernels' keys */
static void attention_scratch(const layout_ctx *lc, arena *a, arena *b, activations *A) {
    const tlm_config *c = lc->c;
    const size_t N = lc->N, qd = (size_t)config_max_q_dim(c), kvd = (size_t)config_max_kv_dim(c);
    A->datt = take(b, N * qd);
    A->dq = take(b, N * qd);
    A->dq2 = take(b, N * qd);
    A->dk = take(b, N * kvd);
    A->dk2 = take(b, N * kvd);
    A->dv = take(b, N * kvd);
    A->dv2 = c->v_norm ? take(b, N * kvd) : NULL;
    arena none = {0};
    A->attn_slots = (size_t)omp_get_max_threads();
    A->attn_scratch = take_shared(lc->full_attention ? a : &none,
                                  attention_scratch_floats(lc->T, config_max_head_dim(c)) * A->attn_slots);
}

const sublayer_ops ATTENTION_OPS = {.forward = attention_forward_op,
                                    .backward = attention_sublayer_backward,
                                    .step = attention_step,
                                    .params = attention_params,
                                    .layout = attention_layout,
                                    .scratch = attention_scratch};
