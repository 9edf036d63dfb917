/* layout.c — the activation memory: one buffer per (B, T) and mode, laid out by one walk
 * (layout_activations) that counts with a NULL base and binds with the buffer; a part of a
 * split batch binds the same walk to its rows (split.c). The walk is the driver: the buffers of
 * each component are its own file's layout fragment (its sublayer_ops table). */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "pass.h"
#include "util/error.h"
#include "util/hugepage.h"

/* widest input of any matrix: the tile of widened bf16 weights holds MATMUL_BF16_TILE rows of it */
static size_t widest_input(const tlm_config *c) {
    size_t w = (size_t)c->d_model, qd = (size_t)config_max_q_dim(c);
    if (qd > w) w = qd;
    if ((size_t)config_max_ff(c) > w) w = (size_t)config_max_ff(c);
    if ((size_t)c->ple_dim > w) w = (size_t)c->ple_dim;
    const size_t fs = (size_t)c->moe_d_ff > (size_t)config_shared_ff(c) ? (size_t)c->moe_d_ff : (size_t)config_shared_ff(c);
    if (c->n_experts > 0 && fs > w) w = fs; /* (the experts' and the shared expert's down) */
    if ((size_t)c->q_lora_rank > w) w = (size_t)c->q_lora_rank; /* (MLA's q_b and kv_b) */
    if ((size_t)c->kv_lora_rank > w) w = (size_t)c->kv_lora_rank;
    return w;
}

/* a component's own struct in the block of the layers: in 16-byte steps (each starts aligned) */
static size_t own_round(size_t n) { return (n + 15) & ~(size_t)15; }

int activations_alloc_layers(activations *A, int n_layers) {
    size_t per_layer = 0, per_pass = 0;
    for (int i = 0; block_components(i); i++) {
        per_layer += own_round(block_components(i)->layer_acts_size);
        per_pass += own_round(block_components(i)->pass_acts_size);
    }
    const size_t head = own_round((size_t)n_layers * sizeof(layer_acts));
    char *mem = calloc(1, head + (size_t)n_layers * per_layer + per_pass);
    if (!mem) return -1;
    A->layers = (layer_acts *)mem;
    char *at = mem + head;
    for (int l = 0; l < n_layers; l++)
        for (int i = 0; block_components(i); i++)
            if (block_components(i)->layer_acts_size)
                A->layers[l].own[i] = at, at += own_round(block_components(i)->layer_acts_size);
    for (int i = 0; block_components(i); i++)
        if (block_components(i)->pass_acts_size) A->own[i] = at, at += own_round(block_components(i)->pass_acts_size);
    return 0;
}

void activations_view(activations *v, const activations *A) {
    layer_acts *layers = v->layers;
    void *own[ACTS_OWN_SLOTS];
    memcpy(own, v->own, sizeof own);
    *v = *A;
    v->layers = layers;
    memcpy(v->own, own, sizeof own);
}

/* the inference layout's later layer l: layer 0's buffers, and each component's own struct a copy of
 * layer 0's (layer l keeps its own struct: a later layout of another mode binds it again) */
static void reuse_layer0(activations *A, int l) {
    layer_acts *L = &A->layers[l];
    void *own[ACTS_OWN_SLOTS];
    memcpy(own, L->own, sizeof own);
    *L = A->layers[0];
    memcpy(L->own, own, sizeof own);
    for (int i = 0; block_components(i); i++)
        if (own[i]) memcpy(own[i], A->layers[0].own[i], block_components(i)->layer_acts_size);
}

/* One walk lays out every activation for (B, T) in the context's mode; run once with a NULL
 * base to count, then with the buffer to bind the pointers. Each layer: the block's (the
 * placement's norms around each sublayer), then every component's fragment (block_components:
 * each lays out what the layer's kind needs, in its own file), then the epilogue's. */
void layout_activations(const tlm_context *ctx, activations *A, arena *a, int B, int T) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const int one_layer = ctx->mode != MODEL_TRAIN;
    /* (qd, kvd: the widest of any layer: the inference layout's one layer and the backward's scratch
     * serve them all) */
    const size_t N = (size_t)B * T, d = c->d_model, qd = (size_t)config_max_q_dim(c),
                 kvd = (size_t)config_max_kv_dim(c), f = config_max_ff(c), V = c->vocab_size;
    const norm_placement pl = c->placement;
    /* attention through a KV cache needs no [B,H,T,T] matrices (decode.c) */
    const int full_attention = !(one_layer && ctx->kv), maps = full_attention && context_keeps_attention_maps(ctx);
    layout_ctx lc = {.ctx = ctx, .c = c, .B = B, .T = T, .N = N, .one_layer = one_layer,
                     .full_attention = full_attention, .maps = maps};
    A->one_layer = one_layer, A->maps = maps;
    /* the residual stream: every stage for training and probes; two alternating slots for inference */
    A->res = take_stages(a, one_layer ? 2 : 2 * (size_t)c->n_layers + 1, N * d);
    A->stage = N * d;
    for (int l = 0; l < c->n_layers; l++) {
        layer_acts *L = &A->layers[l];
        lc.reuse = one_layer && l > 0;
        if (lc.reuse) { /* inference: every layer reuses layer 0's activations (the fragments add what not) */
            reuse_layer0(A, l);
        } else {
            sublayer_acts *subs[2] = {&L->attn_s, &L->ffn_s};
            for (int s = 0; s < 2; s++) {
                memset(subs[s], 0, sizeof *subs[s]);
                if (placement_has_input_norm(pl)) take_norm(a, &subs[s]->in, N, d, 1);
                subs[s]->f = take(a, N * d);
                if (placement_has_output_norm(pl)) take_norm(a, &subs[s]->out, N, d, 1);
                if (placement_has_post_norm(pl)) {
                    subs[s]->sum = take(a, N * d);
                    take_norm(a, &subs[s]->post, N, d, 0); /* its output is the residual stream itself */
                }
            }
        }
        /* mixed-precision training (bf16 products on the bf16 copy of f32 weights: the layer's
         * linears are stored alike, o asks for them): the products keep their inputs as the forward
         * rounded them, for the backward's weight gradients (linear.c) */
        lc.keep16 = !one_layer && m->p.layers && linear_mixed(&m->p.layers[l].o, ctx->product_bf16, (int)N);
        for (int i = 0; block_components(i); i++) /* (the epilogue's, PLE_OPS, last) */
            if (block_components(i)->layout) block_components(i)->layout(&lc, a, L, l);
    }
    ple_model_layout(&lc, a, A);
    const size_t fused = qd + 2 * kvd > 2 * f ? qd + 2 * kvd : 2 * f;
    A->fused = take_shared(a, (N < MATVEC_MAX_ROWS ? N : MATVEC_MAX_ROWS) * fused); /* decoding's rows only */
    A->w_tile = m->stored16 || m->wq_mem ? take_shared(a, (size_t)MATMUL_BF16_TILE * widest_input(c)) : NULL;
    /* the head: every position, or the last of each row */
    const size_t R = ctx->mode == MODEL_INFER_LAST ? (size_t)B : N;
    A->logits_rows = (int)R;
    memset(&A->final, 0, sizeof A->final);
    if (c->final_norm || R != N) take_norm(a, &A->final, R, d, 1); /* (y also gathers the last rows) */
    A->logits_raw = c->final_softcap > 0.0f ? take(a, R * V) : NULL;
    A->logits = take(a, R * V);
    const int with_loss = ctx->mode != MODEL_INFER_LAST;
    A->probs = with_loss ? take(a, N * V) : NULL;
    A->losses = with_loss ? take(a, N) : NULL;
    A->lse = with_loss ? take(a, N) : NULL;
    /* backward scratch: training layout only (an arena without memory hands out NULLs) */
    arena none = {0};
    arena *b = one_layer ? &none : a;
    A->dres = take_stages(b, 2 * (size_t)c->n_layers + 1, N * d);
    A->dsum = take(b, N * d);
    A->df = take(b, N * d);
    A->du = take(b, N * d);
    A->dfinal = take(b, N * d);
    ple_scratch(&lc, b, A);
    A->dlogits = take(b, N * V);
    A->dlogits_raw = c->final_softcap > 0.0f ? take(b, N * V) : NULL; /* the pre-cap gradient */
    for (int i = 0; block_components(i); i++)
        if (block_components(i)->scratch) block_components(i)->scratch(&lc, a, b, A);
}

size_t model_activation_floats(const tlm_config *cfg, model_mode mode, int B, int T) {
    const tlm_model m = {.cfg = *cfg};
    const tlm_context ctx = {.m = &m, .mode = mode}; /* f32 weights, no KV cache: the layout's inputs */
    activations A = {0};
    if (activations_alloc_layers(&A, cfg->n_layers)) return 0;
    arena count = {0};
    layout_activations(&ctx, &A, &count, B, T);
    free(A.layers);
    return count.used;
}

/* Lays the activations out for (B, T) in the context's mode. The buffer only grows: a smaller
 * shape (a decoding step after a prefill, an evaluation batch) reuses it without allocating. */
int ensure_activations(tlm_context *ctx, int B, int T) {
    const tlm_model *m = ctx->m;
    activations *A = &ctx->acts;
    const int kv_layout = ctx->mode != MODEL_TRAIN && ctx->kv; /* (the layout depends on these) */
    const int maps = !(kv_layout) && context_keeps_attention_maps(ctx);
    /* (the attention's scratch has a slot per thread: more threads than when it was laid out need a new
     * layout — tinylm.set_threads(2) after a pass on one thread wrote past it) */
    const int slots_ok = !A->attn_scratch || A->attn_slots >= (size_t)omp_get_max_threads();
    if (A->mem && A->B == B && A->T == T && A->mode == ctx->mode && A->kv_layout == kv_layout &&
        A->w16 == !!m->stored16 && A->wq == !!m->wq_mem && A->product_bf16 == ctx->product_bf16 && A->maps == maps &&
        slots_ok)
        return 0;
    if (!A->layers && activations_alloc_layers(A, m->cfg.n_layers))
        return tlm_error("out of memory");
    arena count = {0};
    layout_activations(ctx, A, &count, B, T);
    const size_t n_tokens = (size_t)B * T;
    if (count.used > A->capacity || n_tokens > A->token_capacity) {
        free(A->mem), free(A->tokens), free(A->targets), free(A->start_mem);
        A->start = NULL;
        A->mem = calloc(count.used + ARENA_ALIGN, sizeof(float));
        tlm_advise_huge(A->mem, (count.used + ARENA_ALIGN) * sizeof(float));
        A->tokens = calloc(n_tokens, sizeof(int));
        A->targets = calloc(n_tokens, sizeof(int));
        A->start_mem = calloc(n_tokens, sizeof(int));
        A->capacity = count.used, A->token_capacity = n_tokens;
        if (!A->mem || !A->tokens || !A->targets || !A->start_mem) {
            free(A->mem), free(A->tokens), free(A->targets), free(A->start_mem);
            A->mem = NULL, A->tokens = A->targets = A->start_mem = NULL, A->capacity = A->token_capacity = 0;
            return tlm_error("out of memory: activations for batch %d x %d need %.1f MiB", B, T,
                             count.used * 4.0 / 1048576.0);
        }
    }
    arena a = {.base = arena_base(A->mem)};
    layout_activations(ctx, A, &a, B, T);
    A->B = B, A->T = T, A->mode = ctx->mode, A->kv_layout = kv_layout, A->w16 = !!m->stored16, A->wq = !!m->wq_mem;
    A->product_bf16 = ctx->product_bf16;
    return context_ensure_rope(ctx, T);
}

