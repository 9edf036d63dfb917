/* mla.c — multi-head latent attention (DeepSeek-V2 / V3), the attention sublayer of a config with
 * kv_lora_rank > 0, forward and backward. N = B*T rows, d = d_model, H heads, dn = qk_nope_head_dim,
 * dr = qk_rope_head_dim, qk = dn + dr, dv = v_head_dim, D = head_dim = max(qk, dv), rq = q_lora_rank,
 * rkv = kv_lora_rank:
 *
 *   cq   = u W_qa^T                 [N, rq]          (q_lora_rank > 0; else q = u W_q^T)
 *   cqn  = rmsnorm(cq) g_qa         [N, rq]
 *   q    = cqn W_qb^T               [N, H qk]        per head [q_nope dn | q_pe dr]
 *   ckv  = u W_kva[:rkv]^T          [N, rkv]         (kv_a's first rkv rows)
 *   kpe0 = u W_kva[rkv:]^T          [N, dr]          (its last dr rows: the decoupled key, one for all heads)
 *   ckvn = rmsnorm(ckv) g_kva       [N, rkv]
 *   kvb  = ckvn W_kvb^T             [N, H (dn + dv)] per head [k_nope dn | v dv]
 *   qpe  = rope(P q_pe)             [N, H dr]        (P: de-interleave pairs with rope_interleave, else 1)
 *   kpe  = rope(P kpe0)             [N, dr]
 *   Q    = [q_nope | qpe | 0]       [N, H, D]        (zero-padded to D: the engine's attention kernels)
 *   K    = [k_nope | kpe | 0]       [N, H, D]
 *   V    = [v | 0]                  [N, H, D]
 *   att  = softmax(scale Q K^T) V   [N, H, D]        (scale: config_attention_scale, YaRN's mscale)
 *   attc = att[:, :, :dv]           [N, H dv]
 *   f    = attc W_o^T               [N, d]
 *
 * The zeros add nothing to q.k and leave att's padding 0; their gradients are dropped. With a KV
 * cache (the context's kv) the layer caches ckvn and kpe only and attends through
 * kv_mla_attention_forward (below; the absorbed form by default). Its one-token decode step
 * (mla_step) is that arithmetic on one token, each product's rows and the heads shared out among
 * the threads (decode.c's one parallel region). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "components.h"
#include "hook_points.h"
#include "kv_cache.h"
#include "util/error.h"
#include "util/f16.h"

/* A latent-attention layer's own buffers, N rows, rq, rkv the ranks, dr the rope dims (q, the projection
 * [N, H qk], is in the attention's q's first N H qk floats; the attention's qr, kr, vn [N, H D] are the
 * padded heads it reads and att its output) */
typedef struct {
    float *cq, *cq_rstd, *cqn;    /* c_q = u W_qa^T [N, rq], its RMSNorm's rstd [N] and output */
    float *ckv, *ckv_rstd, *ckvn; /* [c_kv | k_pe] = u W_kva^T [N, rkv + dr], c_kv's rstd [N], RMSNorm(c_kv) [N, rkv] */
    float *kvb;                   /* [k_nope | v] per head = ckvn W_kvb^T [N, H (dn + dv)] */
    float *qpe, *kpe;             /* q_pe [N, H dr], k_pe [N, dr] after RoPE (de-interleaved) */
    float *attc;                  /* the attention output's first dv of each head [N, H dv] (o_proj's input) */
} mla_acts;

/* its backward scratch: d kvb [N, H (dn + dv)], d [c_kv | k_pe] [N, rkv + dr], d ckvn [N, rkv], d cqn,
 * d cq [N, rq], d k_pe [N, dr], d q_pe [N, H dr] */
typedef struct {
    float *d_kvb, *d_ckv, *d_ckvn, *d_cqn, *d_cq, *d_kpe, *d_qpe;
} mla_pass_acts;

/* rows [r0, r0 + rows) of a linear layer's weights (f32 or bf16) as a layer of its own */
static linear_params sub_rows(const linear_params *p, int r0, int IC) {
    linear_params s = {0};
    if (p->w) s.w = p->w + (size_t)r0 * IC;
    if (p->w16) s.w16 = p->w16 + (size_t)r0 * IC;
    return s;
}

/* y [n] = P x: the de-interleaving permutation (y[j] = x[2j], y[n/2 + j] = x[2j + 1]) or a copy;
 * inverse: x = P^T y */
static void pe_permute(float *y, const float *x, int n, int interleave) {
    const int half = n / 2;
    if (!interleave) {
        memcpy(y, x, sizeof(float) * n);
        return;
    }
    for (int j = 0; j < half; j++) y[j] = x[2 * j], y[half + j] = x[2 * j + 1];
}
static void pe_permute_back(float *x, const float *y, int n, int interleave) {
    const int half = n / 2;
    if (!interleave) {
        memcpy(x, y, sizeof(float) * n);
        return;
    }
    for (int j = 0; j < half; j++) x[2 * j] = y[j], x[2 * j + 1] = y[half + j];
}

void mla_forward(pass_ctx *ctx, int l, const float *u, float *f) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_acts *L = &ctx->A->layers[l];
    mla_acts *a = L->own[COMPONENT_MLA];
    const int B = ctx->A->B, T = ctx->A->T, N = B * T, d = c->d_model, H = c->n_heads;
    const int dn = c->qk_nope_dim, dr = c->qk_rope_dim, qk = dn + dr, dv = c->v_head_dim, D = c->head_dim;
    const int rq = c->q_lora_rank, rkv = c->kv_lora_rank, kvw = dn + dv;
    float *w_tile = ctx->A->w_tile;
    /* q */
    if (rq > 0) {
        linear_forward(pass_product_bf16(ctx), w_tile, a->cq, u, &P->q_a, N, d, rq);
        PASS_POINT(ctx, model_point_id(c, l, PT_Q_A), a->cq, 0);
        rmsnorm_forward(a->cqn, a->cq_rstd, a->cq, P->q_a_norm, 0.0f, N, rq, c->norm_eps);
        PASS_POINT(ctx, model_point_id(c, l, PT_Q_A_NORMED), a->cqn, 0);
        linear_forward(pass_product_bf16(ctx), w_tile, L->q, a->cqn, &P->q_b, N, rq, H * qk);
    } else {
        linear_forward(pass_product_bf16(ctx), w_tile, L->q, u, &P->q, N, d, H * qk);
    }
    /* c_kv and the raw k_pe, then c_kv's norm and its expansion to every head's k_nope and v */
    float *kpe0 = a->ckv + (size_t)N * rkv;
    const linear_params kv_lo = sub_rows(&P->kv_a, 0, d), kv_hi = sub_rows(&P->kv_a, rkv, d);
    linear_forward(pass_product_bf16(ctx), w_tile, a->ckv, u, &kv_lo, N, d, rkv);
    linear_forward(pass_product_bf16(ctx), w_tile, kpe0, u, &kv_hi, N, d, dr);
    PASS_POINT(ctx, model_point_id(c, l, PT_KV_A), a->ckv, 0);
    rmsnorm_forward(a->ckvn, a->ckv_rstd, a->ckv, P->kv_a_norm, 0.0f, N, rkv, c->norm_eps);
    PASS_POINT(ctx, model_point_id(c, l, PT_KV_A_NORMED), a->ckvn, 0);
    /* RoPE on q_pe and k_pe (de-interleaved first with rope_interleave) */
    for (int n = 0; n < N; n++) {
        for (int h = 0; h < H; h++)
            pe_permute(a->qpe + ((size_t)n * H + h) * dr, L->q + ((size_t)n * H + h) * qk + dn, dr, c->rope_interleave);
        pe_permute(a->kpe + (size_t)n * dr, kpe0 + (size_t)n * dr, dr, c->rope_interleave);
    }
    const int pos0 = ctx->run->kv ? kv_cache_length(ctx->run->kv) : 0;
    const float *cs, *sn;
    context_layer_rope(ctx->run, l, &cs, &sn);
    rope_forward(a->qpe, a->qpe, cs, sn, B, T, H, dr, pos0, ctx->A->start);
    rope_forward(a->kpe, a->kpe, cs, sn, B, T, 1, dr, pos0, ctx->A->start);
    if (ctx->run->kv) { /* the latent cache: ckvn and kpe per token; the heads never expanded (absorbed form) */
        kv_mla_attention_forward(ctx->run->kv, m, l, a->attc, L->q, a->qpe, a->ckvn, a->kpe, T);
        linear_forward(pass_product_bf16(ctx), w_tile, f, a->attc, &P->o, N, H * dv, d);
        return;
    }
    linear_forward(pass_product_bf16(ctx), w_tile, a->kvb, a->ckvn, &P->kv_b, N, rkv, H * kvw);
    /* the padded heads attention reads */
#pragma omp parallel for schedule(static) if ((size_t)N * H * D > OMP_MIN_WORK)
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++) {
            const size_t at = ((size_t)n * H + h) * D;
            float *Q = L->qr + at, *K = L->kr + at, *V = L->vn + at;
            const float *qh = L->q + ((size_t)n * H + h) * qk, *kv = a->kvb + ((size_t)n * H + h) * kvw;
            memset(Q, 0, sizeof(float) * D), memset(K, 0, sizeof(float) * D), memset(V, 0, sizeof(float) * D);
            memcpy(Q, qh, sizeof(float) * dn);
            memcpy(Q + dn, a->qpe + ((size_t)n * H + h) * dr, sizeof(float) * dr);
            memcpy(K, kv, sizeof(float) * dn);
            memcpy(K + dn, a->kpe + (size_t)n * dr, sizeof(float) * dr);
            memcpy(V, kv + dn, sizeof(float) * dv);
        }
    PASS_POINT(ctx, model_point_id(c, l, PT_V), L->vn, 0);
    PASS_POINT(ctx, model_point_id(c, l, PT_ROT_Q), L->qr, 0);
    PASS_POINT(ctx, model_point_id(c, l, PT_ROT_K), L->kr, 0);
    attention_full_pass(ctx, l, L->att, L->scores, L->probs, L->qr, L->kr, L->vn, B, T);
    PASS_POINT(ctx, model_point_id(c, l, PT_Z), L->att, 0);
    for (size_t r = 0; r < (size_t)N * H; r++) memcpy(a->attc + r * dv, L->att + r * D, sizeof(float) * dv);
    linear_forward(pass_product_bf16(ctx), w_tile, f, a->attc, &P->o, N, H * dv, d);
}

/* du = d(MLA sublayer)/du . df (set); the weight gradients into ctx->g */
void mla_backward(pass_ctx *ctx, int l, const float *u, const float *df, float *du) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_params *G = &ctx->g->layers[l];
    const layer_acts *L = &ctx->A->layers[l];
    const mla_acts *a = L->own[COMPONENT_MLA];
    activations *A = ctx->A;
    const mla_pass_acts *S = A->own[COMPONENT_MLA];
    const int B = A->B, T = A->T, N = B * T, d = c->d_model, H = c->n_heads;
    const int dn = c->qk_nope_dim, dr = c->qk_rope_dim, qk = dn + dr, dv = c->v_head_dim, D = c->head_dim;
    const int rq = c->q_lora_rank, rkv = c->kv_lora_rank, kvw = dn + dv;
    /* o_proj, then the padded heads' gradient (the padding's: 0) */
    linear_backward(pass_product_bf16(ctx), 1, A->datt, &G->o, df, a->attc, NULL, &P->o, N, H * dv, d);
    float *datt = A->dk2; /* [N, H, D] */
    for (size_t r = 0; r < (size_t)N * H; r++) {
        memcpy(datt + r * D, A->datt + r * dv, sizeof(float) * dv);
        memset(datt + r * D + dv, 0, sizeof(float) * (D - dv));
    }
    PASS_POINT(ctx, model_point_id(c, l, PT_Z), datt, 1);
    attention_spec spec = model_layer_attention(c, l);
    spec.bf16 = pass_product_bf16(ctx);
    spec.start = A->start;
    attention_backward(A->dq, A->dk, A->dv, datt, hook_points_map(ctx, l, PT_ATTN_SCORES, L->scores),
                       hook_points_map(ctx, l, PT_PATTERN, L->probs), L->qr, L->kr, L->vn, B, T, &spec,
                       A->attn_scratch);
    PASS_POINT(ctx, model_point_id(c, l, PT_V), A->dv, 1);
    PASS_POINT(ctx, model_point_id(c, l, PT_ROT_Q), A->dq, 1);
    PASS_POINT(ctx, model_point_id(c, l, PT_ROT_K), A->dk, 1);
    /* split the heads' gradients: d q (nope and pe), d kvb (k_nope and v), d k_pe summed over the heads */
    float *dqp = A->dq2, *dqpe = S->d_qpe, *dkpe = S->d_kpe;
#pragma omp parallel for schedule(static) if ((size_t)N * H * D > OMP_MIN_WORK)
    for (int n = 0; n < N; n++) {
        float *dk_pe = dkpe + (size_t)n * dr;
        memset(dk_pe, 0, sizeof(float) * dr);
        for (int h = 0; h < H; h++) {
            const size_t at = ((size_t)n * H + h) * D;
            const float *dQ = A->dq + at, *dK = A->dk + at, *dV = A->dv + at;
            float *dkv = S->d_kvb + ((size_t)n * H + h) * kvw;
            memcpy(dqp + ((size_t)n * H + h) * qk, dQ, sizeof(float) * dn);
            memcpy(dqpe + ((size_t)n * H + h) * dr, dQ + dn, sizeof(float) * dr);
            memcpy(dkv, dK, sizeof(float) * dn);
            memcpy(dkv + dn, dV, sizeof(float) * dv);
            for (int i = 0; i < dr; i++) dk_pe[i] += dK[dn + i];
        }
    }
    /* back through RoPE (the transpose of each rotation) and the de-interleaving */
    const float *cs, *sn;
    context_layer_rope(ctx->run, l, &cs, &sn);
    rope_backward(dqpe, dqpe, cs, sn, B, T, H, dr, 0, A->start);
    rope_backward(dkpe, dkpe, cs, sn, B, T, 1, dr, 0, A->start);
    float *dckv = S->d_ckv, *dkpe0 = S->d_ckv + (size_t)N * rkv;
    for (int n = 0; n < N; n++) {
        for (int h = 0; h < H; h++)
            pe_permute_back(dqp + ((size_t)n * H + h) * qk + dn, dqpe + ((size_t)n * H + h) * dr, dr, c->rope_interleave);
        pe_permute_back(dkpe0 + (size_t)n * dr, dkpe + (size_t)n * dr, dr, c->rope_interleave);
    }
    /* kv: kv_b, c_kv's norm, kv_a (its two row blocks) */
    linear_backward(pass_product_bf16(ctx), 1, S->d_ckvn, &G->kv_b, S->d_kvb, a->ckvn, NULL, &P->kv_b, N, rkv, H * kvw);
    PASS_POINT(ctx, model_point_id(c, l, PT_KV_A_NORMED), S->d_ckvn, 1);
    rmsnorm_backward(dckv, NULL, G->kv_a_norm, S->d_ckvn, a->ckv, P->kv_a_norm, 0.0f, a->ckv_rstd, N, rkv);
    PASS_POINT(ctx, model_point_id(c, l, PT_KV_A), dckv, 1);
    const linear_params kv_lo = sub_rows(&P->kv_a, 0, d), kv_hi = sub_rows(&P->kv_a, rkv, d);
    linear_params g_lo = sub_rows(&G->kv_a, 0, d), g_hi = sub_rows(&G->kv_a, rkv, d);
    linear_backward(pass_product_bf16(ctx), 1, du, &g_lo, dckv, u, NULL, &kv_lo, N, d, rkv);
    linear_backward(pass_product_bf16(ctx), 0, du, &g_hi, dkpe0, u, NULL, &kv_hi, N, d, dr);
    /* q */
    if (rq > 0) {
        linear_backward(pass_product_bf16(ctx), 1, S->d_cqn, &G->q_b, dqp, a->cqn, NULL, &P->q_b, N, rq, H * qk);
        PASS_POINT(ctx, model_point_id(c, l, PT_Q_A_NORMED), S->d_cqn, 1);
        rmsnorm_backward(S->d_cq, NULL, G->q_a_norm, S->d_cqn, a->cq, P->q_a_norm, 0.0f, a->cq_rstd, N, rq);
        PASS_POINT(ctx, model_point_id(c, l, PT_Q_A), S->d_cq, 1);
        linear_backward(pass_product_bf16(ctx), 0, du, &G->q_a, S->d_cq, u, NULL, &P->q_a, N, d, rq);
    } else {
        linear_backward(pass_product_bf16(ctx), 0, du, &G->q, dqp, u, NULL, &P->q, N, d, H * qk);
    }
}

/* ---- multi-head latent attention through the latent cache ------------------------------------- */

int kv_cache_set_mla_absorbed(kv_cache *c, const struct tlm_model *m, int absorbed) {
    if (!c->mla) return tlm_error("KV cache: the model has no multi-head latent attention");
    if (!absorbed)
        for (int l = 0; l < m->cfg.n_layers; l++)
            if (!m->p.layers[l].kv_b.w)
                return tlm_error("KV cache: MLA's expanded form needs f32 kv_b_proj weights");
    if (!absorbed && !c->expand) {
        const tlm_config *cfg = &m->cfg;
        c->expand = malloc(sizeof(float) * (size_t)c->max_len * cfg->n_heads * (cfg->qk_nope_dim + cfg->v_head_dim));
        if (!c->expand) return tlm_error("out of memory for MLA's expanded keys and values");
    }
    c->absorbed = absorbed != 0;
    return 0;
}

int kv_cache_mla_absorbed(const kv_cache *c) { return c->mla && c->absorbed; }

/* row r of a linear layer's weights [., IC] as f32: the f32 weights themselves, or the bf16 ones widened into tmp */
static const float *weight_row(const linear_params *p, int r, int IC, float *tmp) {
    if (p->w) return p->w + (size_t)r * IC;
    const uint16_t *h = p->w16 + (size_t)r * IC;
    for (int i = 0; i < IC; i++) tmp[i] = tlm_bf16_to_f32(h[i]);
    return tmp;
}

static float dot(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* head h of the query at position n_keys - 1 over every cached position [0, n_keys): o [dv] from
 * q_nope qn [dn] and the rotated q_pe qp [dr], in scratch tid's buffers (the full pass's and the
 * step's: each head the same arithmetic in the same order) */
static void mla_cached_head(kv_cache *c, const tlm_config *cfg, const linear_params *kvb, float scale, int l, int h,
                            const float *qn, const float *qp, int n_keys, int tid, float *o) {
    const int H = cfg->n_heads, dn = cfg->qk_nope_dim, dr = cfg->qk_rope_dim, dv = cfg->v_head_dim;
    const int rkv = cfg->kv_lora_rank, cw = rkv + dr, kvw = dn + dv;
    const float *cache = c->k + c->at[l];
    float *s = c->scratch + (size_t)KV_QUERY_BLOCK * c->max_len * tid;
    float *qa = c->mla_scratch + (size_t)2 * rkv * tid, *ol = qa + rkv;
    if (c->absorbed) {
        /* q_abs = W_UK_h^T q_nope [rkv]: rows h kvw .. h kvw + dn of kv_b (ol as the bf16 row's scratch) */
        for (int i = 0; i < rkv; i++) qa[i] = 0.0f;
        for (int j = 0; j < dn; j++) {
            const float *row = weight_row(kvb, h * kvw + j, rkv, ol);
            const float x = qn[j];
            for (int i = 0; i < rkv; i++) qa[i] += x * row[i];
        }
        for (int j = 0; j < n_keys; j++) {
            const float *cj = cache + (size_t)j * cw;
            s[j] = (dot(qa, cj, rkv) + dot(qp, cj + rkv, dr)) * scale;
        }
        attention_softmax_row(s, s, n_keys, 0, n_keys - 1, 0.0f);
        for (int i = 0; i < rkv; i++) ol[i] = 0.0f;
        for (int j = 0; j < n_keys; j++) {
            const float *cj = cache + (size_t)j * cw, p = s[j];
            for (int i = 0; i < rkv; i++) ol[i] += p * cj[i];
        }
        /* out = W_UV_h ol: rows h kvw + dn .. of kv_b (qa as the bf16 row's scratch) */
        for (int i = 0; i < dv; i++) o[i] = dot(weight_row(kvb, h * kvw + dn + i, rkv, qa), ol, rkv);
    } else {
        for (int j = 0; j < n_keys; j++) {
            const float *e = c->expand + ((size_t)j * H + h) * kvw;
            s[j] = (dot(qn, e, dn) + dot(qp, cache + (size_t)j * cw + rkv, dr)) * scale;
        }
        attention_softmax_row(s, s, n_keys, 0, n_keys - 1, 0.0f);
        for (int i = 0; i < dv; i++) o[i] = 0.0f;
        for (int j = 0; j < n_keys; j++) {
            const float *e = c->expand + ((size_t)j * H + h) * kvw + dn, p = s[j];
            for (int i = 0; i < dv; i++) o[i] += p * e[i];
        }
    }
}

/* the expanded form's k_nope and v of cached position j for every head (a matrix-vector product a
 * position: a GEMM of a new row count each step would be a new oneDNN kernel) */
static void mla_expand_position(kv_cache *c, const tlm_config *cfg, const linear_params *kvb, int l, int j) {
    const int rkv = cfg->kv_lora_rank, cw = rkv + cfg->qk_rope_dim, hkv = cfg->n_heads * (cfg->qk_nope_dim + cfg->v_head_dim);
    matvec_part(c->expand + (size_t)j * hkv, c->k + c->at[l] + (size_t)j * cw, kvb->w, NULL, NULL, rkv, 0, hkv);
}

void kv_mla_attention_forward(kv_cache *c, const struct tlm_model *m, int l, float *out, const float *q,
                              const float *qpe, const float *ckvn, const float *kpe, int T) {
    const tlm_config *cfg = &m->cfg;
    const linear_params *kvb = &m->p.layers[l].kv_b;
    const int H = cfg->n_heads, dn = cfg->qk_nope_dim, dr = cfg->qk_rope_dim, dv = cfg->v_head_dim;
    const int qk = dn + dr, rkv = cfg->kv_lora_rank, cw = rkv + dr, len = c->len;
    const float scale = model_layer_attention(cfg, l).scale;
    float *cache = c->k + c->at[l];
    for (int t = 0; t < T; t++) { /* append [ckvn | kpe] of each new position */
        memcpy(cache + (size_t)(len + t) * cw, ckvn + (size_t)t * rkv, sizeof(float) * rkv);
        memcpy(cache + (size_t)(len + t) * cw + rkv, kpe + (size_t)t * dr, sizeof(float) * dr);
    }
    const int n_all = len + T;
    if (!c->absorbed) { /* expanded: every cached position's k_nope and v for every head, again */
#pragma omp parallel for schedule(static)
        for (int j = 0; j < n_all; j++) mla_expand_position(c, cfg, kvb, l, j);
    }
#pragma omp parallel for collapse(2) schedule(static)
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            mla_cached_head(c, cfg, kvb, scale, l, h, q + ((size_t)t * H + h) * qk, qpe + ((size_t)t * H + h) * dr,
                            len + t + 1, omp_get_thread_num(), out + ((size_t)t * H + h) * dv);
}

/* ---- the one-token step: the full pass's arithmetic on one token through the cache ------------------
 * Each product's rows shared out among the threads; the norms and the key's RoPE on every thread's own
 * copy (the same values), the queries' RoPE and the heads on each thread's share of the heads. */
void mla_step(const step_ctx *s, int l, const float *u, float *f) {
    const tlm_config *cfg = &s->m->cfg;
    const layer_params *P = &s->m->p.layers[l];
    kv_cache *c = s->c;
    step_shared *sh = &c->sh;
    step_private *o = s->o;
    const int d = cfg->d_model, H = cfg->n_heads, dn = cfg->qk_nope_dim, dr = cfg->qk_rope_dim, qk = dn + dr;
    const int dv = cfg->v_head_dim, rq = cfg->q_lora_rank, rkv = cfg->kv_lora_rank, cw = rkv + dr, pos = s->pos;
    int lo, hi;
    /* c_q (or q) and [c_kv | k_pe] from u */
    step_share(rq > 0 ? rq : H * qk, s, &lo, &hi);
    linear_step(rq > 0 ? sh->mla_cq : sh->mla_q, u, rq > 0 ? &P->q_a : &P->q, d, lo, hi);
    step_share(cw, s, &lo, &hi);
    linear_step(sh->mla_ckv, u, &P->kv_a, d, lo, hi);
#pragma omp barrier
    if (rq > 0) {
        rmsnorm_row(o->mla_cqn, sh->mla_cq, P->q_a_norm, 0.0f, rq, cfg->norm_eps);
        step_share(H * qk, s, &lo, &hi);
        linear_step(sh->mla_q, o->mla_cqn, &P->q_b, rq, lo, hi);
    }
    const float *cs, *sn;
    context_layer_rope(s->run, l, &cs, &sn);
    rmsnorm_row(o->mla_ckvn, sh->mla_ckv, P->kv_a_norm, 0.0f, rkv, cfg->norm_eps);
    pe_permute(o->mla_kpe, sh->mla_ckv + rkv, dr, cfg->rope_interleave);
    rope_forward_token(o->mla_kpe, o->mla_kpe, cs, sn, 1, dr, pos);
    if (s->id == 0) { /* the cache entry: every thread computed the same */
        float *entry = c->k + c->at[l] + (size_t)pos * cw;
        memcpy(entry, o->mla_ckvn, sizeof(float) * rkv);
        memcpy(entry + rkv, o->mla_kpe, sizeof(float) * dr);
    }
#pragma omp barrier
    const linear_params *kvb = &P->kv_b;
    if (!c->absorbed) {
        step_share(pos + 1, s, &lo, &hi);
        for (int j = lo; j < hi; j++) mla_expand_position(c, cfg, kvb, l, j);
#pragma omp barrier
    }
    int h0, h1;
    step_share(H, s, &h0, &h1);
    for (int h = h0; h < h1; h++)
        pe_permute(o->mla_qpe + (size_t)h * dr, sh->mla_q + (size_t)h * qk + dn, dr, cfg->rope_interleave);
    if (h1 > h0) rope_forward_token(o->mla_qpe + (size_t)h0 * dr, o->mla_qpe + (size_t)h0 * dr, cs, sn, h1 - h0, dr, pos);
    const float scale = model_layer_attention(cfg, l).scale;
    for (int h = h0; h < h1; h++)
        mla_cached_head(c, cfg, kvb, scale, l, h, sh->mla_q + (size_t)h * qk, o->mla_qpe + (size_t)h * dr, pos + 1,
                        s->id, sh->att + (size_t)h * dv);
#pragma omp barrier
    step_share(d, s, &lo, &hi);
    linear_step(f, sh->att, &P->o, H * dv, lo, hi);
#pragma omp barrier
}

/* ---- the component ---------------------------------------------------------------------------------- */

static void mla_forward_op(pass_ctx *ctx, int l, const float *x, const float *u, float *f) {
    (void)x;
    mla_forward(ctx, l, u, f);
}

/* its tensors in layer l (docs/tensors.md): q (q_a, its norm, q_b; or one q projection without
 * q_lora_rank), kv_a (c_kv and k_pe), its norm (over c_kv), kv_b (each head's k_nope and v), o.
 * Its two norms are plain RMSNorms (gain w, starting at 1) whatever norm_type. */
static void mla_params(param_walk *w, layer_params *L, int l) {
    const tlm_config *c = w->cfg;
    const int d = c->d_model, H = c->n_heads, qk = config_mla_qk_dim(c), rq = c->q_lora_rank, rkv = c->kv_lora_rank;
    char n[96];
    if (rq > 0) {
        snprintf(n, sizeof n, "layers.%d.attn.q_a_proj", l);
        walk_linear(w, &L->q_a, n, rq, d, false, TENSOR_MATRIX);
        snprintf(n, sizeof n, "layers.%d.attn.q_a_norm.weight", l);
        walk_add(w, &L->q_a_norm, n, rq, 0, TENSOR_NORM, 1.0f);
        snprintf(n, sizeof n, "layers.%d.attn.q_b_proj", l);
        walk_linear(w, &L->q_b, n, H * qk, rq, false, TENSOR_MATRIX);
    } else {
        snprintf(n, sizeof n, "layers.%d.attn.q_proj", l);
        walk_linear(w, &L->q, n, H * qk, d, false, TENSOR_MATRIX);
    }
    snprintf(n, sizeof n, "layers.%d.attn.kv_a_proj", l);
    walk_linear(w, &L->kv_a, n, rkv + c->qk_rope_dim, d, false, TENSOR_MATRIX);
    snprintf(n, sizeof n, "layers.%d.attn.kv_a_norm.weight", l);
    walk_add(w, &L->kv_a_norm, n, rkv, 0, TENSOR_NORM, 1.0f);
    snprintf(n, sizeof n, "layers.%d.attn.kv_b_proj", l);
    walk_linear(w, &L->kv_b, n, H * (c->qk_nope_dim + c->v_head_dim), rkv, false, TENSOR_MATRIX);
    snprintf(n, sizeof n, "layers.%d.attn.o_proj", l);
    walk_linear(w, &L->o, n, d, H * c->v_head_dim, false, TENSOR_RESIDUAL_MATRIX);
}

/* an MLA layer's own buffers (beside the attention's, attention_layout, whose q, qr, kr, vn and att
 * it writes as the padded heads) */
static void mla_layout(layout_ctx *lc, arena *a, layer_acts *layer, int l) {
    (void)l;
    const tlm_config *c = lc->c;
    mla_acts *L = layer->own[COMPONENT_MLA];
    if (lc->reuse) return;
    arena none = {0};
    arena *m = config_mla(c) ? a : &none, *q = config_mla(c) && c->q_lora_rank > 0 ? a : &none;
    const size_t N = lc->N, H = (size_t)c->n_heads, rq = (size_t)c->q_lora_rank, rkv = (size_t)c->kv_lora_rank,
                 dr = (size_t)c->qk_rope_dim;
    L->cq = take(q, N * rq);
    L->cq_rstd = take(q, N);
    L->cqn = take(q, N * rq);
    L->ckv = take(m, N * (rkv + dr));
    L->ckv_rstd = take(m, N);
    L->ckvn = take(m, N * rkv);
    L->kvb = take(m, N * H * (size_t)(c->qk_nope_dim + c->v_head_dim));
    L->qpe = take(m, N * H * dr);
    L->kpe = take(m, N * dr);
    L->attc = take(m, N * H * (size_t)c->v_head_dim);
}

static void mla_scratch(const layout_ctx *lc, arena *a, arena *b, activations *acts) {
    (void)a;
    mla_pass_acts *S = acts->own[COMPONENT_MLA];
    const tlm_config *c = lc->c;
    arena none = {0};
    arena *mb = config_mla(c) ? b : &none;
    const size_t N = lc->N, H = (size_t)c->n_heads, rq = (size_t)c->q_lora_rank, rkv = (size_t)c->kv_lora_rank,
                 dr = (size_t)c->qk_rope_dim;
    S->d_kvb = take(mb, N * H * (size_t)(c->qk_nope_dim + c->v_head_dim));
    S->d_ckv = take(mb, N * (rkv + dr));
    S->d_ckvn = take(mb, N * rkv);
    S->d_cqn = take(mb, N * rq);
    S->d_cq = take(mb, N * rq);
    S->d_kpe = take(mb, N * dr);
    S->d_qpe = take(mb, N * H * dr);
}

const sublayer_ops MLA_OPS = {.forward = mla_forward_op,
                              .backward = mla_backward,
                              .step = mla_step,
                              .params = mla_params,
                              .layout = mla_layout,
                              .scratch = mla_scratch,
                              .layer_acts_size = sizeof(mla_acts),
                              .pass_acts_size = sizeof(mla_pass_acts)};
