/* decode.c — kv_decode_step: one token through the whole model with the KV cache attached, in ONE
 * OpenMP parallel region (below): the block (block.c) in its one-token mode over each component's
 * step (attention.c, ffn.c, moe.c, ple.c, norm.c, linear.c). The cache's storage is kv_cache.c. */
#include <omp.h>
#include <string.h>

#include "block.h"
#include "kv_cache.h"
#include "util/error.h"
#include "util/profile.h"

/* ---- one token in one parallel region ----------------------------------------------------------
 * A decoding step of a small model is mostly fork/join and op overhead when its weights sit in
 * the cache (stories15M: 61 MB per token, 25 products): each op of the full forward opens its
 * own OpenMP team. Here the team is opened once per token and runs the layer loop itself:
 *   - every matrix-vector product: each thread its equal share of the output rows (matvec_part),
 *     then one barrier, after which every thread reads the whole output;
 *   - the small ops between (norms, residual adds, QK-norm, RoPE, the final norm) are computed by
 *     every thread on its own copy of the residual stream (step_private): the same code on the
 *     same inputs, so the same bits on each, and no barrier or copy for them;
 *   - attention: each thread the kv heads of its share (it appends their keys and values and
 *     attends with their query heads), so the cache needs no barrier either;
 *   - the gate|up product and the GLU: each thread the same range of gate rows, up rows and
 *     hidden units, so the GLU needs no barrier.
 * Five barriers per layer (after q|k|v, attention, o, the hidden units, down; a mixture-of-experts
 * layer: after the router and two per chosen expert, moe_step; Gemma 4's per-layer input: two more,
 * and two per token for the inputs of every layer, ple_inputs_step). Every value is
 * computed by the same kernel, in the same order, as model_forward computes it (the row forms of
 * ops.h), so the logits are bit for bit those of model_forward (tests/model/test_decode_step.c). */

/* ---- the step's way of running a block (block.h): one row, every thread of the region ------------ */

static block_bufs step_bufs(void *run, int l, sublayer_kind k) {
    const step_ctx *s = run;
    (void)l, (void)k;
    return (block_bufs){.u = s->o->u, .f = s->c->sh.f, .fo = s->o->fo, .sum = s->o->sum};
}

static void step_block_norm(void *run, int l, sublayer_kind k, block_norm which, float *y, const float *x) {
    const step_ctx *s = run;
    norm_step(&s->m->cfg, y, block_norm_params(&s->m->p, l, k, which), x);
}

static void step_sublayer(void *run, const sublayer_ops *op, int l, const float *x, const float *u, float *f) {
    (void)x;
    op->step(run, l, u, f);
}
static void step_block_epilogue(void *run, int l, const float *x, float *out) { layer_epilogue_step(run, l, x, out); }

static void step_add(void *run, float *sum, const float *x, float alpha, const float *fo) {
    block_residual_rows(sum, x, alpha, fo, 0, (size_t)((const step_ctx *)run)->m->cfg.d_model);
}

/* (every component with a step, no points: step_applies) */
static const block_mode DECODE_STEP = {.bufs = step_bufs,
                                       .norm = step_block_norm,
                                       .sublayer = step_sublayer,
                                       .epilogue = step_block_epilogue,
                                       .add = step_add};

/* whether the step can run this pass: no observer or hook (they need model_forward's activations),
 * and every component with a step (block_has_step: Gemma 4's MoE block has none, and decodes
 * through context_forward with the cache: the same components, without the one-region step) */
static int step_applies(const tlm_context *ctx) {
    const tlm_model *m = ctx->m;
    return block_has_step(&m->cfg) && !ctx->hooks && ctx->n_observers == 0 && ctx->kv->batch == 1;
}

const float *kv_decode_step(tlm_context *ctx, int token) {
    PROF_SCOPE("decode_step");
    const tlm_model *m = ctx->m;
    kv_cache *c = ctx->kv;
    if (!c || !step_applies(ctx)) {
        if (context_forward(ctx, &token, NULL, 1, 1, NULL)) return NULL;
        return context_last_logits(ctx);
    }
    const tlm_config *cfg = &m->cfg;
    const int pos = c->len, d = cfg->d_model, V = cfg->vocab_size;
    if (token < 0 || token >= V)
        return tlm_error("forward: token id %d at position 0 is outside the vocabulary [0, %d)", token, V), NULL;
    if (pos + 1 > cfg->max_seq)
        return tlm_error("forward: sequence of %d tokens exceeds max_position_embeddings = %d", pos + 1, cfg->max_seq),
               NULL;
    if (kv_cache_room(c) < 1)
        return tlm_error("forward: with a KV cache, feed one sequence without targets within the cache's %d positions",
                         c->max_len),
               NULL;
    /* (the tables for every position the cache holds, made at the first step: none after it) */
    if (context_ensure_rope(ctx, c->max_len)) return NULL;
    const float *wpe = m->p.pos_embed ? m->p.pos_embed + (size_t)pos * d : NULL;
    if (m->p.embed_q)
        embedding_forward_quant(c->sh.x0, &token, m->p.embed_q, m->p.embed_q_type, wpe, model_embed_scale(cfg), 1, 1, d,
                                NULL);
    else if (m->p.embed16)
        embedding_forward_bf16(c->sh.x0, &token, m->p.embed16, wpe, model_embed_scale(cfg), 1, 1, d, NULL);
    else
        embedding_forward(c->sh.x0, &token, m->p.embed, wpe, model_embed_scale(cfg), 1, 1, d, NULL);
#pragma omp parallel num_threads(context_threads(ctx))
    {
        step_ctx s = {.m = m, .run = ctx, .c = c, .id = omp_get_thread_num(), .nt = omp_get_num_threads(), .pos = pos,
                      .token = token};
        s.o = &c->own[s.id];
        if (cfg->ple_dim > 0) ple_inputs_step(&s);
        const int quiet = tlm_prof_quiet;
        tlm_prof_quiet = quiet || s.id != 0;
        const float *x = c->sh.x0; /* (read by all; from the first sublayer on each thread's own copy) */
        for (int l = 0; l < cfg->n_layers; l++) {
            block_forward(&DECODE_STEP, &s, cfg, l, x, s.o->x, config_has_layer_epilogue(cfg) ? s.o->x : NULL, s.o->x);
            x = s.o->x;
        }
        const float *h = x;
        if (cfg->final_norm) {
            norm_step(cfg, s.o->u, &m->p.final_norm, x);
            h = s.o->u;
        }
        int lo, hi;
        step_share(V, &s, &lo, &hi);
        const linear_params head = {
            .w = m->p.lm_head, .w16 = m->p.lm_head16, .wq = m->p.lm_head_q, .wq_type = m->p.lm_head_q_type};
        linear_step(c->sh.logits, h, &head, d, lo, hi);
        if (cfg->final_softcap > 0.0f)
            softcap_forward_range(c->sh.logits, c->sh.logits, (size_t)lo, (size_t)hi, cfg->final_softcap);
        tlm_prof_quiet = quiet;
    }
    c->len++;
    return c->sh.logits;
}
