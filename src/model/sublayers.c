/* sublayers.c — one transformer sublayer (attention or feed-forward) forward and backward,
 * whatever the norm placement, over the rows of a pass context (pass.h). Flat op lists, the
 * shapes beside each op, for N = B*T rows, d = d_model, H heads, KV kv heads, hd head_dim:
 *
 *   attention (u [N,d] -> f [N,d])          feed-forward (u [N,d] -> f [N,d])
 *     q|k|v = u W_qkv^T     [N,H hd|KV hd]    gelu:  up = u W_up^T          [N,f]
 *     qn,kn = rmsnorm(q,k)  (QK-norm)                hid = gelu(up)         [N,f]
 *     qr,kr = rope(qn,kn)   (RoPE)            gated: gate|up = u W_gu^T     [N,f|f]
 *     att   = softmax(qr kr^T) v  [N,H hd]           hid = act(gate) * up   [N,f]
 *     f     = att W_o^T     [N,d]             f = hid W_down^T              [N,d]
 *
 *   a sublayer with F (pre: x + F(N(x)); post: N(x + F(x)); sandwich: x + N2(F(N1(x)));
 *   output: x + N(F(x)); deepnorm: N(alpha x + F(x))): the placement is data, asked of the
 *   config; one block, not six.
 *
 * Each op's activation point fires (PASS_POINT) right after it, with the id of points.c's
 * table. */
#include <math.h>
#include <string.h>

#include "decode.h"
#include "pass.h"
#include "util/profile.h"

/* ---- linear layers: f32, bf16 or quantized weights ------------------------------------------ */

/* out [N,OC] = inp [N,IC] @ W^T + b with the layer's weights in whichever type they are kept:
 * f32 (w), bf16 only (w16: inference with bf16 weights; bf16 products over many rows when the
 * model asks for them), both (a mixed-precision mirror: bf16 products over many rows, f32
 * matrix-vector products for a few), or a ggml block format (wq: a GGUF file's, inference) */
void linear_forward(const tlm_model *m, float *w_tile, float *out, const float *inp, const linear_params *lp, int N,
                    int IC, int OC) {
    if (lp->wq)
        matmul_forward_quant(out, inp, lp->wq, lp->wq_type, lp->b, N, IC, OC, w_tile, m->bf16_products);
    else if (lp->w16 && !lp->w)
        matmul_forward_bf16(out, inp, lp->w16, lp->b, N, IC, OC, w_tile, m->bf16_products);
    else if (lp->w16 && N > MATVEC_MAX_ROWS)
        matmul_forward_mixed(out, inp, NULL, lp->w, lp->w16, lp->b, N, IC, OC);
    else
        matmul_forward(out, inp, lp->w, lp->b, N, IC, OC);
}

/* whether linear layer lp runs in mixed precision over N rows (a bf16 mirror beside its f32 weights) */
int linear_mixed(const linear_params *lp, int N) { return lp->w16 && lp->w && N > MATVEC_MAX_ROWS; }

/* the layer's backward: dinp (accumulated, or set when `into`), G's weight and bias gradients
 * (accumulated); in bf16 products when the forward ran in them (inp16: inp's bf16 copy in
 * stage 1 when the caller made it for several layers of the same input, else NULL) */
void linear_backward(int into, float *dinp, linear_params *G, const float *dout, const float *inp,
                     const uint16_t *inp16, const linear_params *P, int N, int IC, int OC) {
    if (linear_mixed(P, N))
        matmul_backward_bf16(into, dinp, G->w, G->b, dout, inp, inp16, P->w, P->w16, N, IC, OC);
    else
        (into ? matmul_backward_into : matmul_backward)(dinp, G->w, G->b, dout, inp, P->w, N, IC, OC);
}

/* input u [N, IC] of mixed-precision layer lp (and others of the same input) as bf16, once for all of
 * them: into `kept` (the layer's copy for the backward, layout.c) when there is one (`ready`: its
 * producer has written it already, pass_ctx.rounded), else into a staging buffer; NULL: f32 layers */
static const uint16_t *stage_shared_input(const linear_params *lp, const float *u, int N, int IC, int stage,
                                          uint16_t *kept, int ready) {
    if (!linear_mixed(lp, N) || gemm_bf16_path() == GEMM_BF16_NONE) return NULL;
    if (!kept) return bf16_stage(stage, u, (size_t)N * IC);
    if (!ready) f32_to_bf16(kept, u, (size_t)N * IC);
    return kept;
}

/* the backward's bf16 copy of the input u of mixed-precision layer lp (and others of the same
 * input): the forward's (kept), else a new one when `shared`, else NULL (matmul_backward_bf16
 * rounds it) */
static const uint16_t *backward_input(const linear_params *lp, const float *u, int N, int IC, const uint16_t *kept,
                                      int shared) {
    if (kept && linear_mixed(lp, N)) return kept;
    return shared ? stage_shared_input(lp, u, N, IC, 1, NULL, 0) : NULL;
}

/* linear_forward that leaves the bf16 copy of its input in `kept` for the backward (when mixed) */
static void linear_forward_kept(pass_ctx *ctx, float *out, const float *inp, uint16_t *kept, const linear_params *lp,
                                int N, int IC, int OC) {
    const uint16_t *inp16 = kept ? stage_shared_input(lp, inp, N, IC, 0, kept, ctx->rounded == inp) : NULL;
    if (inp16)
        matmul_forward_mixed(out, inp, inp16, lp->w, lp->w16, lp->b, N, IC, OC);
    else
        linear_forward(ctx->m, ctx->A->w_tile, out, inp, lp, N, IC, OC);
}

/* Projections of one input stored back to back (q|k|v, gate|up; params.c), each into its own
 * buffer. Many rows (training, prompts): a GEMM per part over its rows of the weights, straight
 * into its buffer (the parts' GEMMs cost about what the fused one does, and no pass copies the
 * columns apart). A few rows (decoding): one matrix-vector stream over the fused weights, then
 * the columns split. */
static void project_parts(pass_ctx *ctx, float *const *outs, const linear_params *const *parts,
                          const int *widths, int n_parts, const linear_params *fused, const float *u, uint16_t *u16_kept,
                          int N, int d) {
    /* (quantized parts of different types have no fused view: params.c) */
    if (N > MATVEC_MAX_ROWS || !(fused->w || fused->w16 || fused->wq)) {
        /* (mixed precision: u rounded once) */
        const uint16_t *u16 = stage_shared_input(parts[0], u, N, d, 0, u16_kept, u16_kept && ctx->rounded == u);
        for (int i = 0; i < n_parts; i++) {
            if (u16)
                matmul_forward_mixed(outs[i], u, u16, parts[i]->w, parts[i]->w16, parts[i]->b, N, d, widths[i]);
            else
                linear_forward(ctx->m, ctx->A->w_tile, outs[i], u, parts[i], N, d, widths[i]);
        }
        return;
    }
    int total = 0;
    for (int i = 0; i < n_parts; i++) total += widths[i];
    linear_forward(ctx->m, ctx->A->w_tile, ctx->A->fused, u, fused, N, d, total);
    split_columns(outs, widths, n_parts, ctx->A->fused, N);
}

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

/* ---- attention sublayer ------------------------------------------------------------------------ */

void attention_full_pass(pass_ctx *ctx, int l, float *att, float *scores, float *probs, const float *q,
                         const float *k, const float *v, int B, int T) {
    const tlm_config *c = &ctx->m->cfg;
    attention_spec spec = model_layer_attention(c, l);
    spec.bf16 = ctx->m->bf16_products;
    spec.start = ctx->A->start; /* (left padding: no key before a row's first real token) */
    attention_forward(att, scores, probs, q, k, v, B, T, &spec, ctx->A->attn_scratch);
    if (ctx->watched) {
        pass_fire(ctx, model_point_id(c, l, HL_ATTN_SCORES), scores, 0);
        pass_fire(ctx, model_point_id(c, l, HL_PATTERN), probs, 0);
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
    PASS_POINT(ctx, model_point_id(c, l, HL_Q), a->q, 0);
    if (own) {
        PASS_POINT(ctx, model_point_id(c, l, HL_K), a->k, 0);
        PASS_POINT(ctx, model_point_id(c, l, HL_V), a->v, 0);
    }
    if (c->qk_norm != QK_NORM_NONE) {
        float off = config_norm_offset(c);
        int rows, cols;
        model_qk_norm_shape(c, l, N, c->n_heads, &rows, &cols);
        rmsnorm_forward(a->qn, a->q_rstd, a->q, P->q_norm, off, rows, cols, c->norm_eps);
        PASS_POINT(ctx, model_point_id(c, l, HL_Q_NORMED), a->qn, 0);
        if (own) {
            model_qk_norm_shape(c, l, N, KV, &rows, &cols);
            rmsnorm_forward(a->kn, a->k_rstd, a->k, P->k_norm, off, rows, cols, c->norm_eps);
            PASS_POINT(ctx, model_point_id(c, l, HL_K_NORMED), a->kn, 0);
        }
    }
    if (own && c->v_norm) /* per head, no weight (Gemma 4) */
        rmsnorm_forward(a->vn, a->v_rstd, a->v, NULL, 0.0f, N * KV, hd, c->norm_eps);
    const int pos0 = ctx->run->kv && !ctx->A->start ? kv_cache_length(ctx->run->kv) : 0; /* (as forward_rows') */
    if (c->position == POS_ROPE) {
        const float *cs, *sn;
        context_layer_rope(ctx->run, l, &cs, &sn);
        rope_forward(a->qr, a->qn, cs, sn, B, T, c->n_heads, hd, pos0, ctx->A->start);
        PASS_POINT(ctx, model_point_id(c, l, HL_ROT_Q), a->qr, 0);
        if (own) {
            rope_forward(a->kr, a->kn, cs, sn, B, T, KV, hd, pos0, ctx->A->start);
            PASS_POINT(ctx, model_point_id(c, l, HL_ROT_K), a->kr, 0);
        }
    }
    const layer_acts *kv = kv_acts(ctx, l);
    if (ctx->run->kv) { /* incremental decoding: append k, v to the cache (a shared layer: none) and attend over all of it */
        attention_spec spec = model_layer_attention(c, l);
        spec.bf16 = m->bf16_products; /* (a chunk of several tokens: the full pass's bf16 products) */
        kv_attention_forward(ctx->run->kv, l, a->att, a->qr, own ? a->kr : NULL, own ? a->vn : NULL, T, spec);
    } else {
        attention_full_pass(ctx, l, a->att, a->scores, a->probs, a->qr, kv->kr, kv->vn, B, T);
    }
    PASS_POINT(ctx, model_point_id(c, l, HL_Z), a->att, 0);
    linear_forward_kept(ctx, f, a->att, a->att16, &P->o, N, qd, d);
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
    linear_backward(1, A->datt, &G->o, df, a->att, backward_input(&P->o, a->att, N, qd, a->att16, 0), &P->o, N, qd, d);
    PASS_POINT(ctx, model_point_id(c, l, HL_Z), A->datt, 1);
    attention_spec spec = model_layer_attention(c, l);
    const layer_acts *kv = kv_acts(ctx, l);
    spec.bf16 = m->bf16_products;
    spec.start = A->start;
    attention_backward(A->dq, A->dk, A->dv, A->datt, a->scores, a->probs, a->qr, kv->kr, kv->vn, B, T, &spec,
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
    if (own) PASS_POINT(ctx, model_point_id(c, l, HL_V), dv, 1);
    if (c->position == POS_ROPE) {
        PASS_POINT(ctx, model_point_id(c, l, HL_ROT_Q), A->dq, 1);
        if (own) PASS_POINT(ctx, model_point_id(c, l, HL_ROT_K), A->dk, 1);
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
        float off = config_norm_offset(c);
        int rows, cols;
        PASS_POINT(ctx, model_point_id(c, l, HL_Q_NORMED), dq, 1);
        model_qk_norm_shape(c, l, N, c->n_heads, &rows, &cols);
        rmsnorm_backward(dq_next, NULL, G->q_norm, dq, a->q, P->q_norm, off, a->q_rstd, rows, cols);
        dq = dq_next;
        if (own) {
            PASS_POINT(ctx, model_point_id(c, l, HL_K_NORMED), dk, 1);
            model_qk_norm_shape(c, l, N, KV, &rows, &cols);
            rmsnorm_backward(dk_next, k_eq_v ? dv : NULL, G->k_norm, dk, a->k, P->k_norm, off, a->k_rstd, rows, cols);
            dk = dk_next, k_has_v = k_eq_v;
        }
    }
    if (k_eq_v && !k_has_v) vec_acc(dk, dv, nkv);
    PASS_POINT(ctx, model_point_id(c, l, HL_Q), dq, 1);
    if (own) PASS_POINT(ctx, model_point_id(c, l, HL_K), dk, 1);
    /* the input projections, each into its rows of the fused gradient (no join pass) */
    const uint16_t *u16 = backward_input(&P->q, u, N, d, a->u16[SUB_ATTN], 1);
    linear_backward(1, du, &G->q, dq, u, u16, &P->q, N, d, qd);
    if (own) linear_backward(0, du, &G->k, dk, u, u16, &P->k, N, d, kvd);
    if (own && !k_eq_v) linear_backward(0, du, &G->v, dv, u, u16, &P->v, N, d, kvd);
}

/* ---- feed-forward sublayer --------------------------------------------------------------------- */

void ffn_sublayer_forward(pass_ctx *ctx, int l, const float *u, float *f) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_acts *a = &ctx->A->layers[l];
    const int N = ctx->A->B * ctx->A->T, d = c->d_model, ff = config_layer_ff(c, l);
    uint16_t *hid16 = ctx->watched ? NULL : a->hid16; /* (the activation rounds hid for down's product) */
    if (c->ffn == FFN_GELU) {
        linear_forward_kept(ctx, a->up, u, a->u16[SUB_FFN], &P->up, N, d, ff);
        PASS_POINT(ctx, model_point_id(c, l, HL_MLP_PRE), a->up, 0);
        act_forward_bf16(a->hid, hid16, a->up, (size_t)N * ff, ACT_GELU_TANH);
    } else {
        float *gu_out[2] = {a->gate, a->up};
        const linear_params *gu_parts[2] = {&P->gate, &P->up};
        const int gu_widths[2] = {ff, ff};
        project_parts(ctx, gu_out, gu_parts, gu_widths, 2, &P->gate_up, u, a->u16[SUB_FFN], N, d);
        PASS_POINT(ctx, model_point_id(c, l, HL_MLP_PRE), a->gate, 0);
        PASS_POINT(ctx, model_point_id(c, l, HL_MLP_PRE_LINEAR), a->up, 0);
        glu_forward_bf16(a->hid, hid16, a->gate, a->up, (size_t)N * ff, model_ffn_activation(c));
    }
    ctx->rounded = hid16 ? a->hid : NULL;
    PASS_POINT(ctx, model_point_id(c, l, HL_MLP_POST), a->hid, 0);
    linear_forward_kept(ctx, f, a->hid, a->hid16, &P->down, N, ff, d);
}

/* du = d(feed-forward sublayer)/du . df (set) */
void ffn_sublayer_backward(pass_ctx *ctx, int l, const float *u, const float *df, float *du) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_params *G = &ctx->g->layers[l];
    const layer_acts *a = &ctx->A->layers[l];
    activations *A = ctx->A;
    const int N = A->B * A->T, d = c->d_model, ff = config_layer_ff(c, l);
    const size_t n = (size_t)N * ff;
    linear_backward(1, A->dhid, &G->down, df, a->hid, backward_input(&P->down, a->hid, N, ff, a->hid16, 0), &P->down, N,
                    ff, d);
    PASS_POINT(ctx, model_point_id(c, l, HL_MLP_POST), A->dhid, 1);
    if (c->ffn == FFN_GELU) {
        act_backward(A->dup, A->dhid, a->up, n, ACT_GELU_TANH);
        PASS_POINT(ctx, model_point_id(c, l, HL_MLP_PRE), A->dup, 1);
        linear_backward(1, du, &G->up, A->dup, u, backward_input(&P->up, u, N, d, a->u16[SUB_FFN], 0), &P->up, N, d,
                        ff);
    } else {
        glu_backward(A->dgate, A->dup, A->dhid, a->gate, a->up, n, model_ffn_activation(c));
        PASS_POINT(ctx, model_point_id(c, l, HL_MLP_PRE), A->dgate, 1);
        PASS_POINT(ctx, model_point_id(c, l, HL_MLP_PRE_LINEAR), A->dup, 1);
        const uint16_t *u16 = backward_input(&P->gate, u, N, d, a->u16[SUB_FFN], 1);
        linear_backward(1, du, &G->gate, A->dgate, u, u16, &P->gate, N, d, ff);
        linear_backward(0, du, &G->up, A->dup, u, u16, &P->up, N, d, ff);
    }
}

/* ---- Gemma 4's MoE block (moe_block): the experts beside the dense FFN ---------------------------
 * On the FFN sublayer's stream x [N, d] and its input norm's output u [N, d] (Gemma4TextDecoderLayer):
 *   mlp_f = MLP(u)                              the dense FFN          [N, d]
 *   r     = rmsnorm(x) * scale * d^-0.5         the router's input (no weight of its own; scale [d])
 *   u2    = N_in2(x)                            the experts' input     (pre_feedforward_layernorm_2)
 *   moe_f = MoE(router on r, experts on u2)     weights p_j / S * expert_scale[idx_j]
 *   f     = N_1(mlp_f) + N_2(moe_f)             (post_feedforward_layernorm_1 / _2)
 * and the sublayer's output norm (post_feedforward_layernorm) then norms f as for every FFN. */
void moe_block_forward(pass_ctx *ctx, int l, const float *x, const float *u, float *f) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_acts *a = &ctx->A->layers[l];
    const int N = ctx->A->B * ctx->A->T, d = c->d_model;
    const size_t Nd = (size_t)N * d;
    ffn_sublayer_forward(ctx, l, u, a->mlp_f);
    model_norm_forward(c, a->dense_n.y, &a->dense_n, &P->dense_out_norm, a->mlp_f, N);
    rmsnorm_forward(a->router_in.y, a->router_in.rstd, x, P->router_scale, 0.0f, N, d, c->norm_eps);
    const float rs = 1.0f / sqrtf((float)d);
    for (size_t i = 0; i < Nd; i++) a->router_in.y[i] *= rs;
    model_norm_forward(c, a->moe_in.y, &a->moe_in, &P->moe_in_norm, x, N);
    moe_forward(ctx, l, a->router_in.y, a->moe_in.y, a->moe_f);
    model_norm_forward(c, a->moe_n.y, &a->moe_n, &P->moe_out_norm, a->moe_f, N);
    vec_add(f, a->dense_n.y, a->moe_n.y, Nd);
}

/* df -> du (set) through the dense path; the experts' and the router's input gradients kept in
 * A->d_moe_u, A->d_router_in for moe_block_backward_x */
void moe_block_backward(pass_ctx *ctx, int l, const float *u, const float *df, float *du) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_params *G = &ctx->g->layers[l];
    const layer_acts *a = &ctx->A->layers[l];
    activations *A = ctx->A;
    const int N = A->B * A->T;
    model_norm_backward(c, A->d_mlp_f, NULL, &G->dense_out_norm, df, &a->dense_n, &P->dense_out_norm, a->mlp_f, N);
    ffn_sublayer_backward(ctx, l, u, A->d_mlp_f, du);
    model_norm_backward(c, A->d_moe_f, NULL, &G->moe_out_norm, df, &a->moe_n, &P->moe_out_norm, a->moe_f, N);
    moe_backward(ctx, l, a->router_in.y, a->moe_in.y, A->d_moe_f, A->d_router_in, A->d_moe_u);
}

/* dx += the gradients at x of the experts' input norm and of the router's input */
void moe_block_backward_x(pass_ctx *ctx, int l, const float *x, float *dx) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_params *G = &ctx->g->layers[l];
    const layer_acts *a = &ctx->A->layers[l];
    activations *A = ctx->A;
    const int N = A->B * A->T, d = c->d_model;
    const size_t Nd = (size_t)N * d;
    model_norm_backward(c, dx, dx, &G->moe_in_norm, A->d_moe_u, &a->moe_in, &P->moe_in_norm, x, N);
    const float rs = 1.0f / sqrtf((float)d);
    for (size_t i = 0; i < Nd; i++) A->d_router_in[i] *= rs;
    rmsnorm_backward(dx, dx, G->router_scale, A->d_router_in, x, P->router_scale, 0.0f, a->router_in.rstd, N, d);
}

/* ---- the layer's tail (Gemma 4): the per-layer input, then the layer scalar ---------------------
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

void layer_tail_forward(pass_ctx *ctx, int l, const float *x, float *out) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_acts *a = &ctx->A->layers[l];
    const int N = ctx->A->B * ctx->A->T, d = c->d_model, Pd = c->ple_dim;
    const size_t n = (size_t)N * d;
    const float *sum = x;
    if (Pd > 0) {
        linear_forward(m, ctx->A->w_tile, a->ple_gate, x, &P->ple_gate, N, d, Pd);
        ple_slice(a->ple_prod, ctx->A->ple_in, N, c->n_layers, Pd, l, 0);
        glu_forward(a->ple_prod, a->ple_gate, a->ple_prod, (size_t)N * Pd, model_ffn_activation(c));
        linear_forward(m, ctx->A->w_tile, a->ple_out, a->ple_prod, &P->ple_proj, N, Pd, d);
        model_norm_forward(c, a->ple_out_n.y, &a->ple_out_n, &P->ple_norm, a->ple_out, N);
        vec_add(a->tail_sum, x, a->ple_out_n.y, n);
        sum = a->tail_sum;
    }
    const float s = c->layer_scalar ? P->scalar[0] : 1.0f;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) out[i] = s * sum[i];
    PASS_POINT(ctx, model_point_id(c, l, HL_RESID_POST), out, 0);
}

/* dx = d(tail)/dx . dout (set); the scalar's and the per-layer input's weight gradients added, and
 * d ple_in's slice of layer l set */
void layer_tail_backward(pass_ctx *ctx, int l, const float *x, const float *dout, float *dx) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_params *G = &ctx->g->layers[l];
    const layer_acts *a = &ctx->A->layers[l];
    activations *A = ctx->A;
    const int N = A->B * A->T, d = c->d_model, Pd = c->ple_dim;
    const size_t n = (size_t)N * d;
    const float *sum = Pd > 0 ? a->tail_sum : x;
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
    model_norm_backward(c, A->dple_out, NULL, &G->ple_norm, dx, &a->ple_out_n, &P->ple_norm, a->ple_out, N);
    linear_backward(1, A->dple_prod, &G->ple_proj, A->dple_out, a->ple_prod, NULL, &P->ple_proj, N, Pd, d);
    /* prod = act(gate) * in: d gate and d in (into its slice of d ple_in) */
    ple_slice(A->dple_up, A->ple_in, N, c->n_layers, Pd, l, 0);
    glu_backward(A->dple_gate, A->dple_dup, A->dple_prod, a->ple_gate, A->dple_up, (size_t)N * Pd,
                 model_ffn_activation(c));
    ple_slice(A->dple_in, A->dple_dup, N, c->n_layers, Pd, l, 1);
    linear_backward(0, dx, &G->ple_gate, A->dple_gate, x, NULL, &P->ple_gate, N, d, Pd);
}

/* ---- the per-layer inputs of every layer (Gemma 4), from the embedding ----------------------------
 *   ctx = (x0 W_model_proj^T) d^-0.5                       [N, L*P]   (x0: the scaled token embedding)
 *   in  = (rmsnorm_P(ctx) + sqrt(P) ple_embed[tok]) 2^-0.5  [N, L*P]   (rmsnorm over each layer's P) */
void ple_inputs_forward(pass_ctx *ctx, const float *x0) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    activations *A = ctx->A;
    const int N = A->B * A->T, d = c->d_model, L = c->n_layers, Pd = c->ple_dim, LP = L * Pd;
    const size_t nlp = (size_t)N * LP;
    linear_forward(m, A->w_tile, A->ple_ctx, x0, &m->p.ple_model_proj, N, d, LP);
    const float ks = 1.0f / sqrtf((float)d), r2 = 1.0f / sqrtf(2.0f);
    for (size_t i = 0; i < nlp; i++) A->ple_ctx[i] *= ks;
    rmsnorm_forward(A->ple_in, A->ple_rstd, A->ple_ctx, m->p.ple_model_norm, config_norm_offset(c), N * L, Pd,
                    c->norm_eps);
    const float es = sqrtf((float)Pd);
    for (int t = 0; t < N; t++) {
        const float *row = m->p.ple_embed + (size_t)A->tokens[t] * LP;
        float *y = A->ple_in + (size_t)t * LP;
        for (int j = 0; j < LP; j++) y[j] = (y[j] + row[j] * es) * r2;
    }
}

/* the per-layer inputs' backward from d ple_in (every layer's slice set): the tables' and the
 * projection's gradients added, d x0 into dx0 (set) */
void ple_inputs_backward(pass_ctx *ctx, const float *x0, float *dx0) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    activations *A = ctx->A;
    model_params *g = ctx->g;
    const int N = A->B * A->T, d = c->d_model, L = c->n_layers, Pd = c->ple_dim, LP = L * Pd;
    const size_t nlp = (size_t)N * LP;
    const float ks = 1.0f / sqrtf((float)d), r2 = 1.0f / sqrtf(2.0f), es = sqrtf((float)Pd);
    for (int t = 0; t < N; t++) { /* the token table: rows += sqrt(P) 2^-0.5 d in */
        float *row = g->ple_embed + (size_t)A->tokens[t] * LP;
        const float *dy = A->dple_in + (size_t)t * LP;
        for (int j = 0; j < LP; j++) row[j] += dy[j] * r2 * es;
    }
    for (size_t i = 0; i < nlp; i++) A->dple_ctx[i] = A->dple_in[i] * r2; /* d norm(ctx) */
    rmsnorm_backward(A->dple_in, NULL, g->ple_model_norm, A->dple_ctx, A->ple_ctx, m->p.ple_model_norm,
                     config_norm_offset(c), A->ple_rstd, N * L, Pd);
    for (size_t i = 0; i < nlp; i++) A->dple_in[i] *= ks; /* (now d of x0 W^T) */
    linear_backward(1, dx0, &g->ple_model_proj, A->dple_in, x0, NULL, &m->p.ple_model_proj, N, d, LP);
}
