/* pass.c — the forward and backward drivers of one decoder-only transformer, for every
 * architecture variant in tlm_config. The forward over the rows of a pass context, as a flat
 * op list with the shapes (N = B*T rows, d = d_model, V = vocab, L layers):
 *
 *   res[0]    = embed(tokens) (* sqrt(d) for Gemma) (+ learned positions)   [N,d]
 *   res[2l+1] = sublayer(res[2l],   attention)      for each layer l           [N,d]
 *   res[2l+2] = sublayer(res[2l+1], feed-forward)                              [N,d]
 *   h         = final_norm(res[2L])   (the last row of each sequence only when generating)
 *   logits    = softcap(h lm_head^T)                                           [N or B, V]
 *   loss      = crossentropy(logits, targets)  (+ probs [N,V], lse [N])
 *
 * and the backward the same list in reverse (the residual stream's gradients in dres, a stage
 * each). Each layer is the block (block.c) over the components (attention.c, mla.c, ffn.c, moe.c,
 * ple.c); a batch may run split across the threads (split.c), each part through this same code
 * with a context of its own. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "decode.h"
#include "hook_points.h"
#include "pass.h"
#include "util/error.h"
#include "util/signals.h"

float model_embed_scale(const tlm_config *c) { return c->embed_scale ? sqrtf((float)c->d_model) : 1.0f; }

/* head_out = h lm_head^T; logits = softcap(head_out) (in place without logits_raw) */
static void head_logits(const tlm_model *m, int pass_bf16, float *w_tile, float *logits, float *logits_raw,
                        const float *h, int R) {
    const tlm_config *c = &m->cfg;
    float *head_out = c->final_softcap > 0.0f && logits_raw ? logits_raw : logits;
    const linear_params head = {
        .w = m->p.lm_head, .w16 = m->p.lm_head16, .wq = m->p.lm_head_q, .wq_type = m->p.lm_head_q_type};
    linear_forward(pass_bf16, w_tile, head_out, h, &head, R, c->d_model, c->vocab_size);
    if (c->final_softcap > 0.0f) softcap_forward(logits, head_out, (size_t)R * c->vocab_size, c->final_softcap);
}

void context_head_logits(const tlm_context *ctx, float *logits, float *logits_raw, const float *h, int R) {
    head_logits(ctx->m, ctx->product_bf16, ctx->acts.w_tile, logits, logits_raw, h, R);
}

void context_head_forward(const tlm_context *ctx, float *logits, float *logits_raw, const norm_acts *fn,
                          const float *h, int R) {
    const tlm_model *m = ctx->m;
    if (m->cfg.final_norm) {
        model_norm_forward(&m->cfg, fn->y, fn, &m->p.final_norm, h, R);
        h = fn->y;
    }
    context_head_logits(ctx, logits, logits_raw, h, R);
}

/* ---- a context's lifetime ------------------------------------------------------------------------ */

tlm_context *context_create(const tlm_model *m) {
    tlm_context *c = calloc(1, sizeof *c);
    if (!c) return tlm_error("out of memory creating a context"), NULL;
    c->m = m;
    c->mode = MODEL_TRAIN;
    return c;
}

void context_free(tlm_context *c) {
    if (!c) return;
    context_hooks_free(c);
    free(c->acts.mem), free(c->acts.tokens), free(c->acts.targets), free(c->acts.start_mem), free(c->acts.layers);
    free(c->rope_cos), free(c->rope_sin), free(c->rope_cos_local), free(c->rope_sin_local);
    free(c->grad_mem), free(c->g.layers);
    split_free(c->split);
    free(c);
}

/* ---- the full pass's way of running a block (block.h): over the rows of a pass context --------- */

static block_bufs full_bufs(void *run, int l, sublayer_kind k) {
    sublayer_acts *s = k == SUB_ATTN ? &((pass_ctx *)run)->A->layers[l].attn_s : &((pass_ctx *)run)->A->layers[l].ffn_s;
    return (block_bufs){.u = s->in.y, .f = s->f, .fo = s->out.y, .sum = s->sum};
}

static const float *full_input(void *run, int l, sublayer_kind k, const float *x) {
    pass_ctx *ctx = run;
    return ctx->observed ? hook_points_input(ctx, l, k, x) : x;
}

static void full_norm(void *run, int l, sublayer_kind k, block_norm which, float *y, const float *x) {
    pass_ctx *ctx = run;
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    layer_acts *a = &ctx->A->layers[l];
    sublayer_acts *s = k == SUB_ATTN ? &a->attn_s : &a->ffn_s;
    const int N = ctx->A->B * ctx->A->T;
    const norm_params *p = block_norm_params(&m->p, l, k, which);
    if (which == BLOCK_NORM_IN) {
        /* mixed-precision training: the norm writes u's bf16 copy for the sublayer's products too
         * (not when an observer may rewrite u at its point) */
        uint16_t *u16 = ctx->observed ? NULL : a->u16[k];
        model_norm_forward_bf16(c, y, u16, &s->in, p, x, N);
        ctx->copy16_of = u16 ? y : NULL;
        PASS_POINT(ctx, block_point_id(c, l, k, BLOCK_POINT_IN_SCALE), s->in.rstd, 0);
    } else {
        norm_acts *st = which == BLOCK_NORM_OUT ? &s->out : &s->post;
        model_norm_forward(c, y, st, p, x, N);
        PASS_POINT(ctx, block_point_id(c, l, k, which == BLOCK_NORM_OUT ? BLOCK_POINT_OUT_SCALE : BLOCK_POINT_POST_SCALE),
                   st->rstd, 0);
    }
}

static void full_sublayer(void *run, const sublayer_ops *op, int l, const float *x, const float *u, float *f) {
    op->forward(run, l, x, u, f);
}
static void full_epilogue(void *run, int l, const float *x, float *out) { layer_epilogue_forward(run, l, x, out); }

static void full_add(void *run, float *sum, const float *x, float alpha, const float *fo) {
    pass_ctx *ctx = run;
    const size_t n = (size_t)ctx->A->B * ctx->A->T * ctx->m->cfg.d_model;
    ctx->copy16_of = NULL; /* (the sublayer's bf16 copies are spent) */
    block_residual_add(sum, x, alpha, fo, n);
}

static void full_point(void *run, int l, sublayer_kind k, block_point p, float *data) {
    pass_ctx *ctx = run;
    PASS_POINT(ctx, block_point_id(&ctx->m->cfg, l, k, p), data, 0);
}

static const block_mode FULL_PASS = {.bufs = full_bufs,
                                     .input = full_input,
                                     .norm = full_norm,
                                     .sublayer = full_sublayer,
                                     .epilogue = full_epilogue,
                                     .add = full_add,
                                     .point = full_point};

int forward_rows(pass_ctx *ctx, float *loss) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    activations *A = ctx->A;
    const int B = A->B, T = A->T, N = B * T, d = c->d_model, V = c->vocab_size;
    /* (left padding: positions come from A->start alone, which a batched KV cache's pass shifts by
     * the cached length) */
    const int pos0 = ctx->run->kv && !A->start ? kv_cache_length(ctx->run->kv) : 0;
    const float *wpe = m->p.pos_embed ? m->p.pos_embed + (size_t)pos0 * d : NULL;
    if (m->p.embed_q)
        embedding_forward_quant(A->res, A->tokens, m->p.embed_q, m->p.embed_q_type, wpe, model_embed_scale(c), B, T, d,
                                A->start);
    else if (m->p.embed16)
        embedding_forward_bf16(A->res, A->tokens, m->p.embed16, wpe, model_embed_scale(c), B, T, d, A->start);
    else
        embedding_forward(A->res, A->tokens, m->p.embed, wpe, model_embed_scale(c), B, T, d, A->start);
    PASS_POINT(ctx, model_point_id(c, -1, PT_EMBED), A->res, 0);
    if (c->ple_dim > 0) ple_inputs_forward(ctx, A->res); /* (Gemma 4: every layer's per-layer input) */
    if (pass_after_layer(ctx, -1)) return -1;
    for (int l = 0; l < c->n_layers; l++) {
        float *x = model_residual(A, 2 * l), *mid = model_residual(A, 2 * l + 1);
        PASS_POINT(ctx, model_point_id(c, l, PT_RESID_PRE), x, 0);
        block_forward(&FULL_PASS, ctx, c, l, x, mid, A->layers[l].epilogue_in, model_residual(A, 2 * l + 2));
        if (pass_after_layer(ctx, l)) return -1;
    }
    const float *h = model_residual(A, 2 * c->n_layers);
    const int R = A->logits_rows;
    if (R != N) { /* the last position of each row only */
        for (int b = 0; b < B; b++) memcpy(A->final.y + (size_t)b * d, h + ((size_t)b * T + T - 1) * d, sizeof(float) * d);
        h = A->final.y;
    }
    if (c->final_norm) { /* (the hooks see, and may rewrite, the final norm's output) */
        model_norm_forward(c, A->final.y, &A->final, &m->p.final_norm, h, R);
        h = A->final.y;
        if (R == N) { /* (the points are [B, T, ...]: not fired for the last rows alone) */
            PASS_POINT(ctx, model_point_id(c, -1, PT_FINAL_SCALE), A->final.rstd, 0);
            PASS_POINT(ctx, model_point_id(c, -1, PT_FINAL_NORMALIZED), A->final.y, 0);
        }
    }
    head_logits(m, pass_product_bf16(ctx), A->w_tile, A->logits, A->logits_raw, h, R);
    if (R == N) PASS_POINT(ctx, model_point_id(c, -1, PT_LOGITS), A->logits, 0);
    if (A->has_targets)
        *loss = crossentropy_forward(A->losses, A->lse, A->probs, A->logits, A->targets, N, V, &A->n_counted,
                                     &A->lse_sq_mean);
    return 0;
}

int model_forward(tlm_model *m, const int *tokens, const int *targets, int B, int T, float *loss) {
    return context_forward_padded(m->ctx, tokens, targets, NULL, B, T, loss);
}

int model_forward_padded(tlm_model *m, const int *tokens, const int *targets, const int *start, int B, int T,
                         float *loss) {
    return context_forward_padded(m->ctx, tokens, targets, start, B, T, loss);
}

int context_forward(tlm_context *ctx, const int *tokens, const int *targets, int B, int T, float *loss) {
    return context_forward_padded(ctx, tokens, targets, NULL, B, T, loss);
}

static int forward_run(tlm_context *ctx, const int *tokens, const int *targets, const int *start, int B, int T,
                       float *loss) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const int pos0 = ctx->kv ? kv_cache_length(ctx->kv) : 0;
    if (B <= 0 || T <= 0) return tlm_error("forward: batch %d x %d is empty", B, T);
    if (pos0 + T > c->max_seq) /* (any position type: past it a model with RoPE runs on untrained positions) */
        return tlm_error("forward: sequence of %d tokens exceeds max_position_embeddings = %d", pos0 + T, c->max_seq);
    if (ctx->kv && (B != kv_cache_batch(ctx->kv) || targets || kv_cache_room(ctx->kv) < T))
        return tlm_error("forward: with a KV cache, feed its %d sequence(s) without targets within the cache's %d "
                         "positions", kv_cache_batch(ctx->kv), kv_cache_length(ctx->kv) + kv_cache_room(ctx->kv));
    int padded = 0;
    for (int b = 0; start && b < B; b++) {
        if (start[b] < 0 || start[b] >= T)
            return tlm_error("forward: row %d's first real token %d is outside [0, %d): every row needs one", b,
                             start[b], T);
        padded |= start[b] > 0;
    }
    if (padded && ctx->kv)
        return tlm_error("forward: with a KV cache the left padding is the cache's (kv_cache_create_batch)");
    for (int i = 0; i < B * T; i++) {
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return tlm_error("forward: token id %d at position %d is outside the vocabulary [0, %d)", tokens[i], i,
                             c->vocab_size);
        if (targets && targets[i] >= c->vocab_size)
            return tlm_error("forward: target id %d at position %d is outside the vocabulary [0, %d)", targets[i], i,
                             c->vocab_size);
    }
    /* (the hooks may rewrite what the pass goes on from, which the inference layouts do not keep; a
     * probe only reads each point as it fires, in any mode. With a KV cache (tlm_gen_next) the hooks
     * see the new positions, and what they leave in k and v is what the cache keeps) */
    if (ctx->hooks && ctx->mode != MODEL_TRAIN)
        return tlm_error("forward: hooks need the model in training mode");
    /* (with a cache: the tables for every position it holds at once, not regrown at each step) */
    const int rope_len = ctx->kv ? kv_cache_length(ctx->kv) + kv_cache_room(ctx->kv) : pos0 + T;
    ctx->product_bf16 = precision_pass_bf16(m); /* (this forward's and its backward's: the layout asks it) */
    if (ensure_activations(ctx, B, T) || context_ensure_rope(ctx, rope_len)) return -1;
    activations *A = &ctx->acts;
    if (targets && !A->probs) return tlm_error("forward: the model is set up for generation (last logits only): no loss");
    const int N = B * T;
    memcpy(A->tokens, tokens, sizeof(int) * N);
    A->start = NULL;
    if (padded) {
        memcpy(A->start_mem, start, sizeof(int) * B);
        A->start = A->start_mem;
    } else if (ctx->kv && kv_cache_start(ctx->kv)) { /* relative to this pass's first position (may be < 0) */
        for (int b = 0; b < B; b++) A->start_mem[b] = kv_cache_start(ctx->kv)[b] - pos0;
        A->start = A->start_mem;
    }
    A->has_targets = targets != NULL;
    if (targets) memcpy(A->targets, targets, sizeof(int) * N);
    float l = 0.0f;
    signals_hold(); /* (util/signals.h: one hold for the pass's products) */
    pass_ctx x = pass_whole(ctx);
    const int failed = split_forward(ctx, targets != NULL, &l) && (forward_rows(&x, &l) || pass_check_points(&x));
    signals_release();
    if (failed) return -1;
    moe_pool_stats(ctx);
    if (targets && loss) *loss = l;
    if (ctx->kv) kv_cache_advance(ctx->kv, T);
    return context_after_pass(ctx, 0);
}

/* (the threads are the context's from the layout on: it sizes the per-thread scratch) */
int context_forward_padded(tlm_context *ctx, const int *tokens, const int *targets, const int *start, int B, int T,
                           float *loss) {
    const int held = context_threads_enter(ctx);
    const int rc = forward_run(ctx, tokens, targets, start, B, T, loss);
    context_threads_leave(held);
    return rc;
}

static int backward_check(tlm_context *ctx, int need_targets) {
    const tlm_model *m = ctx->m;
    activations *A = &ctx->acts;
    if (!A->mem || (need_targets && !A->has_targets) || ctx->kv)
        return tlm_error("backward: no forward pass with targets to differentiate");
    if (A->one_layer || !m->p.embed || m->wq_mem)
        return tlm_error("backward: the model is set up for inference (model_set_mode, bf16 or quantized weights)");
    return context_alloc_grads(ctx);
}

void backward_rows(pass_ctx *ctx, const float *dlogits_in, float dloss, int global_count) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    activations *A = ctx->A;
    model_params *g = ctx->g;
    const int B = A->B, T = A->T, N = B * T, d = c->d_model, V = c->vocab_size, L = c->n_layers;
    const size_t Nd = (size_t)N * d, NV = (size_t)N * V;
    const linear_params head = {.w = m->p.lm_head, .w16 = m->p.lm_head16};
    /* Mixed precision: the loss's gradient written as bf16 alone, which is all the head's products
     * read, unless something reads the f32 one (the soft-cap's backward, an observer of the
     * logits' gradient) */
    uint16_t *dlogits16 =
        !dlogits_in && c->final_softcap <= 0.0f && !ctx->observed && linear_mixed(&head, pass_product_bf16(ctx), N)
            ? bf16_stage_buffer(0, NV)
            : NULL;
    if (dlogits_in)
        memcpy(A->dlogits, dlogits_in, NV * sizeof(float));
    else if (dlogits16)
        crossentropy_backward_bf16(dlogits16, A->probs, A->lse, A->targets, N, V, dloss, global_count,
                                   ctx->run->z_loss);
    else
        crossentropy_backward_into(A->dlogits, A->probs, A->lse, A->targets, N, V, dloss, global_count,
                                   ctx->run->z_loss);
    /* the load-balancing loss's gradient (the loss's backward only, not a given metric's) */
    const int moe_layers = config_moe_layers(c);
    ctx->aux_scale = !dlogits_in && ctx->run->router_aux > 0.0f && moe_layers
                         ? (float)((double)ctx->run->router_aux * dloss * c->n_experts /
                                   ((double)moe_layers * ctx->run->acts.B * ctx->run->acts.T))
                         : 0.0f;
    const float *dz = A->dlogits;
    if (c->final_softcap > 0.0f) {
        vec_zero(A->dlogits_raw, NV); /* (softcap_backward accumulates) */
        softcap_backward(A->dlogits_raw, A->dlogits, A->logits, NV, c->final_softcap);
        dz = A->dlogits_raw;
    }
    const float *hL = model_residual(A, 2 * L);
    linear_params dhead = {.w = g->lm_head};
    if (dlogits16) /* (A->dlogits: the f32 scratch, should a bf16 product fail) */
        matmul_backward_bf16_rounded(1, A->dfinal, dhead.w, dlogits16, A->dlogits, c->final_norm ? A->final.y : hL,
                                     NULL, head.w, head.w16, N, d, V);
    else
        linear_backward(pass_product_bf16(ctx), 1, A->dfinal, &dhead, dz, c->final_norm ? A->final.y : hL, NULL, &head,
                        N, d, V);
    if (c->final_norm) PASS_POINT(ctx, model_point_id(c, -1, PT_FINAL_NORMALIZED), A->dfinal, 1);
    float *dhL = model_residual_grad(A, 2 * L);
    if (c->final_norm) {
        model_norm_backward(c, dhL, NULL, &g->final_norm, A->dfinal, &A->final, &m->p.final_norm, hL, N);
    } else {
        vec_copy(dhL, A->dfinal, Nd);
    }
    /* (the gradients that layers sharing keys and values send back to their source layer add up) */
    for (int l = 0; l < L; l++)
        if (A->layers[l].dk_shared) {
            const size_t nkv = (size_t)N * config_layer_kv_heads(c, l) * config_layer_head_dim(c, l);
            vec_zero(A->layers[l].dk_shared, nkv);
            vec_zero(A->layers[l].dv_shared, nkv);
        }
    /* the residual stream's gradient at each stage is complete once the one sublayer that reads the
     * stage has run its backward: its points fire then, before anything upstream reads it (a hook
     * that edits it changes every gradient upstream; aliases fire in the forward's reverse order) */
    PASS_POINT(ctx, model_point_id(c, L - 1, PT_RESID_POST), model_residual_grad(A, 2 * L), 1);
    for (int l = L - 1; l >= 0; l--) {
        const float *x = model_residual(A, 2 * l), *mid = model_residual(A, 2 * l + 1);
        const float *dpost = model_residual_grad(A, 2 * l + 2);
        if (A->layers[l].epilogue_in) {
            layer_epilogue_backward(ctx, l, A->layers[l].epilogue_in, dpost, A->d_epilogue);
            dpost = A->d_epilogue;
        }
        sublayer_backward(ctx, l, SUB_FFN, mid, dpost, model_residual_grad(A, 2 * l + 1));
        PASS_POINT(ctx, model_point_id(c, l, PT_RESID_MID), model_residual_grad(A, 2 * l + 1), 1);
        sublayer_backward(ctx, l, SUB_ATTN, x, model_residual_grad(A, 2 * l + 1), model_residual_grad(A, 2 * l));
        if (l == 0 && c->ple_dim > 0) { /* the per-layer inputs were made from the embedding too */
            ple_inputs_backward(ctx, model_residual(A, 0), A->dres);
        }
        PASS_POINT(ctx, model_point_id(c, l, PT_RESID_PRE), model_residual_grad(A, 2 * l), 1);
        PASS_POINT(ctx, l ? model_point_id(c, l - 1, PT_RESID_POST) : model_point_id(c, -1, PT_EMBED),
                   model_residual_grad(A, 2 * l), 1);
    }
    embedding_backward(g->embed, g->pos_embed, A->dres, A->tokens, model_embed_scale(c), B, T, d, A->start);
}

static int backward_run(tlm_context *ctx, const float *dlogits_in, float dloss, double *grad_norm) {
    const tlm_config *c = &ctx->m->cfg;
    activations *A = &ctx->acts;
    pass_ctx x = pass_whole(ctx);
    ctx->grad_clear = 0; /* (the pass writes the gradient) */
    const int held = context_threads_enter(ctx);
    signals_hold();
    if (grad_norm) *grad_norm = -1.0;
    /* (not with observers or hooks: what they do after the pass could change the gradients) */
    if (ctx->n_observers || ctx->hooks) grad_norm = NULL;
    if (split_backward(ctx, dlogits_in, dloss, grad_norm)) backward_rows(&x, dlogits_in, dloss, A->n_counted);
    signals_release();
    if (x.observed) /* (the logits' gradient: reported, after the pass) */
        pass_fire(&x, model_point_id(c, -1, PT_LOGITS), A->dlogits, 1);
    const int rc = pass_check_points(&x) ? -1 : context_after_pass(ctx, 1);
    context_threads_leave(held);
    return rc;
}

int context_backward(tlm_context *ctx, float dloss) {
    if (backward_check(ctx, 1)) return -1;
    return backward_run(ctx, NULL, dloss, NULL);
}

int context_backward_norm(tlm_context *ctx, float dloss, double *grad_norm) {
    *grad_norm = -1.0;
    if (backward_check(ctx, 1)) return -1;
    return backward_run(ctx, NULL, dloss, grad_norm);
}

int context_backward_from_logits(tlm_context *ctx, const float *dlogits) {
    if (backward_check(ctx, 0)) return -1;
    return backward_run(ctx, dlogits, 0.0f, NULL);
}

int model_backward(tlm_model *m, float dloss) { return context_backward(m->ctx, dloss); }
int model_backward_norm(tlm_model *m, float dloss, double *grad_norm) {
    return context_backward_norm(m->ctx, dloss, grad_norm);
}
int model_backward_from_logits(tlm_model *m, const float *dlogits) {
    return context_backward_from_logits(m->ctx, dlogits);
}
