/* layout.c — the activation memory: one buffer per (B, T) and mode, laid out by one walk
 * (layout_activations) that counts with a NULL base and binds with the buffer; a part of a
 * split batch binds the same walk to its rows (split.c). */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pass.h"
#include "util/error.h"
#include "util/hugepage.h"

/* ---- activation memory: one buffer per (B, T), laid out by one walk -------------------------- */

/* An arena hands out the buffers of one layout in order. Every buffer but the shared scratch
 * is the whole batch's, sequence after sequence, so the rows of sequences [b0, b0 + nb) of any
 * of them sit at (its floats / B) * b0: an arena with b0 set binds the same layout's pointers to
 * those rows (a part of a split batch, split.c's batch_split) instead of to the whole. */
/* every buffer starts on a 64-byte line (the base is aligned, ARENA_ALIGN floats each): a
 * matrix-vector product re-reads its input row per output, and an input row off the line
 * makes every 16-float load touch two lines (what it cost a decode: docs/performance.md, "Figures behind the code") */
enum { ARENA_ALIGN = 16 };

static float *take_at(arena *a, size_t n, size_t offset) {
    a->used = (a->used + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    float *p = a->base ? a->base + a->used + offset : NULL;
    a->used += n;
    return p;
}

/* a buffer of the batch: n floats, B sequences' rows after each other */
static float *take(arena *a, size_t n) { return take_at(a, n, a->B ? n / (size_t)a->B * (size_t)a->b0 : 0); }

/* `stages` buffers of the batch of n floats each, back to back (the residual stream's stages) */
static float *take_stages(arena *a, size_t stages, size_t n) {
    return take_at(a, stages * n, a->B ? n / (size_t)a->B * (size_t)a->b0 : 0);
}

/* scratch that is not the batch's rows (shared by the parts of a split batch) */
static float *take_shared(arena *a, size_t n) { return take_at(a, n, 0); }

/* the first ARENA_ALIGN-float boundary in a block allocated ARENA_ALIGN floats larger */
float *arena_base(float *mem) {
    const uintptr_t line = ARENA_ALIGN * sizeof(float);
    return (float *)(((uintptr_t)mem + line - 1) & ~(line - 1));
}

static void take_norm(arena *a, norm_acts *na, size_t N, size_t C, int with_y) {
    na->y = with_y ? take(a, N * C) : NULL;
    na->mean = take(a, N);
    na->rstd = take(a, N);
}

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

/* An MoE layer's buffers (when `moe`, else NULL): the router's, the routing (ints in float slots),
 * the gathered rows and the experts' activations, the shared expert's, the load statistics. The
 * per-expert offsets are E + 1 per sequence, so that a part of a split batch (an arena with b0
 * set) gets room of its own. */
static void take_moe(arena *a, layer_acts *L, const tlm_config *c, int moe, int B, size_t N) {
    arena none = {0};
    arena *m = moe ? a : &none;
    const size_t E = (size_t)c->n_experts, K = (size_t)c->n_experts_per_tok, fe = (size_t)c->moe_d_ff,
                 fs = (size_t)config_shared_ff(c), d = (size_t)c->d_model;
    L->router_logits = take(m, N * E);
    L->router_probs = take(m, N * E);
    L->topk_idx = (int *)take(m, N * K);
    L->topk_w = take(m, N * K);
    L->slot_of = (int *)take(m, N * K);
    L->slot_row = (int *)take(m, N * K);
    L->expert_off = (int *)take(m, (size_t)B * (E + 1));
    L->xs = take(m, N * K * d);
    L->eg = take(m, N * K * fe);
    L->eu = take(m, N * K * fe);
    L->eh = take(m, N * K * fe);
    L->ey = take(m, N * K * d);
    arena *sm = moe && fs ? a : &none;
    L->sg = take(sm, N * fs);
    L->su = take(sm, N * fs);
    L->sh = take(sm, N * fs);
    L->sy = take(sm, N * d);
    L->s_gate = take(moe && fs && c->shared_gate ? a : &none, N);
    L->moe_stats = take(m, (size_t)B * 2 * E);
    /* Gemma 4's MoE block: the dense output and its norm, the router's and the experts' inputs, the
     * experts' sum and its norm */
    arena *gb = moe && c->moe_block ? a : &none;
    L->mlp_f = take(gb, N * d);
    L->moe_f = take(gb, N * d);
    norm_acts *ns[4] = {&L->dense_n, &L->router_in, &L->moe_in, &L->moe_n};
    for (int i = 0; i < 4; i++) {
        ns[i]->y = take(gb, N * d);
        ns[i]->mean = take(gb, N);
        ns[i]->rstd = take(gb, N);
    }
}

/* an MLA layer's own buffers (mla.c; NULL without MLA) */
static void take_mla(arena *a, layer_acts *L, const tlm_config *c, size_t N) {
    arena none = {0};
    arena *m = config_mla(c) ? a : &none, *q = config_mla(c) && c->q_lora_rank > 0 ? a : &none;
    const size_t H = (size_t)c->n_heads, rq = (size_t)c->q_lora_rank, rkv = (size_t)c->kv_lora_rank,
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

/* a bf16 copy of a batch buffer [B*T, width] (two to a float), or NULL when a sequence's rows
 * would not start on a float (T * width odd: a split part's rows could not be bound) */
static uint16_t *take16(arena *a, size_t B, size_t T, size_t width) {
    return T * width % 2 ? NULL : (uint16_t *)take(a, B * T * width / 2);
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

/* One walk lays out every activation for (B, T) in the context's mode; run once with a NULL
 * base to count, then with the buffer to bind the pointers. */
void layout_activations(const tlm_context *ctx, activations *A, arena *a, int B, int T) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const int one_layer = ctx->mode != MODEL_TRAIN;
    /* (qd, kvd: the widest of any layer: the inference layout's one layer and the backward's scratch
     * serve them all) */
    const size_t N = (size_t)B * T, d = c->d_model, qd = (size_t)config_max_q_dim(c),
                 kvd = (size_t)config_max_kv_dim(c), f = config_max_ff(c), V = c->vocab_size;
    const size_t att = (size_t)B * c->n_heads * T * T;
    const norm_placement pl = c->placement;
    /* attention through a KV cache needs no [B,H,T,T] matrices (decode.c) */
    const int full_attention = !(one_layer && ctx->kv), maps = full_attention && context_keeps_attention_maps(ctx);
    const int any_moe = config_moe_layers(c) > 0, any_dense = config_moe_layers(c) < c->n_layers || c->moe_block;
    A->one_layer = one_layer, A->maps = maps;
    /* the residual stream: every stage for training and probes; two alternating slots for inference */
    A->res = take_stages(a, one_layer ? 2 : 2 * (size_t)c->n_layers + 1, N * d);
    A->stage = N * d;
    layer_acts common = {0}; /* the inference layout's keys and values */
    for (int l = 0; l < c->n_layers; l++) {
        layer_acts *L = &A->layers[l];
        /* this layer's widths (training); the inference layout's one layer has the widest */
        const int hd = config_layer_head_dim(c, l), KV = config_layer_kv_heads(c, l);
        const size_t lqd = one_layer ? qd : (size_t)c->n_heads * hd, lkvd = one_layer ? kvd : (size_t)KV * hd;
        const int KVmax = one_layer ? c->n_heads : KV; /* (rows of the per-head statistics) */
        if (one_layer && l > 0) { /* inference: every layer reuses layer 0's activations */
            *L = A->layers[0];
            copy_kv(L, &common);
            /* ... but the keys and values that a later layer reads (shared K/V) stay until it has:
             * without a KV cache, which then holds them */
            if (!ctx->kv && kv_shared_from(c, l)) take_kv(a, L, c, N, lkvd, KVmax);
            continue;
        }
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
            copy_kv(&common, L);
            if (!ctx->kv && kv_shared_from(c, 0)) take_kv(a, L, c, N, lkvd, KVmax);
        }
        /* the gradients that the sharing layers send back to this layer's keys and values */
        const int shared = !one_layer && kv_shared_from(c, l);
        L->dk_shared = shared ? take(a, N * lkvd) : NULL;
        L->dv_shared = shared ? take(a, N * lkvd) : NULL;
        /* [B,H,T,T] maps: both for those who look at them (attention.c); in training also the
         * probabilities alone (and the scores under a soft-cap, whose backward reads them) while
         * they take no more than the layer's FFN activations, so that the backward does not
         * compute them again. Past that size (long T) they are computed again; and in mixed
         * precision with attention's products on bf16 operands (AMX), where the recomputation is
         * two small tile products per block: there the maps saved about as much in the backward as
         * writing them cost in the forward, and took memory. (Mixed precision without AMX keeps
         * attention in f32, and the maps with it.) The figures: docs/performance.md, "Figures behind the code". */
        const attention_spec mixed = {.bf16 = ctx->product_bf16}; /* (the pass's own spec.bf16: attention.c) */
        const int keep_probs =
            maps || (!one_layer && full_attention && att <= 2 * N * f && !attention_bf16_products(&mixed));
        L->scores = maps || (keep_probs && model_layer_attention(c, l).softcap > 0.0f) ? take(a, att) : NULL;
        L->probs = keep_probs ? take(a, att) : NULL;
        L->att = take(a, N * lqd);
        take_mla(a, L, c, N);
        /* the FFN: dense, or a mixture of experts (inference: layer 0's buffers serve every layer,
         * so they hold both kinds when the model has both) */
        const int dense = one_layer ? any_dense : config_layer_has_dense(c, l),
                  moe = one_layer ? any_moe : config_layer_is_moe(c, l);
        const size_t lf = one_layer ? f : (size_t)config_layer_ff(c, l);
        L->gate = dense && c->ffn != FFN_GELU ? take(a, N * lf) : NULL;
        L->up = dense ? take(a, N * lf) : NULL;
        L->hid = dense ? take(a, N * lf) : NULL;
        /* mixed-precision training (bf16 products on the bf16 copy of f32 weights: the layer's
         * linears are stored alike, o asks for them): the products' inputs as the forward rounded
         * them, for the backward's weight gradients (linear.c; MLA's and the experts' products
         * round their own) */
        arena none16 = {0};
        arena *k16 = !one_layer && m->p.layers && linear_mixed(&m->p.layers[l].o, ctx->product_bf16, (int)N) ? a : &none16;
        L->u16[SUB_ATTN] = !config_mla(c) ? take16(k16, B, T, d) : NULL;
        L->att16 = !config_mla(c) ? take16(k16, B, T, lqd) : NULL;
        L->u16[SUB_FFN] = dense ? take16(k16, B, T, d) : NULL;
        L->hid16 = dense ? take16(k16, B, T, lf) : NULL;
        take_moe(a, L, c, moe, B, N);
        /* the stream after the FFN's residual add, before the layer's epilogue (per-layer input, scalar) */
        L->epilogue_in = config_has_layer_epilogue(c) ? take(a, N * d) : NULL;
        const size_t P = (size_t)c->ple_dim;
        L->ple_gate = P ? take(a, N * P) : NULL;
        L->ple_prod = P ? take(a, N * P) : NULL;
        L->ple_out = P ? take(a, N * d) : NULL;
        memset(&L->ple_out_n, 0, sizeof L->ple_out_n);
        if (P) take_norm(a, &L->ple_out_n, N, d, 1);
        L->epilogue_sum = P ? take(a, N * d) : NULL;
    }
    /* Gemma 4's per-layer inputs of every layer, made once from the embedding */
    const size_t LP = (size_t)c->n_layers * c->ple_dim;
    A->ple_ctx = LP ? take(a, N * LP) : NULL;
    A->ple_rstd = LP ? take(a, N * c->n_layers) : NULL;
    A->ple_in = LP ? take(a, N * LP) : NULL;
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
    A->d_epilogue = config_has_layer_epilogue(c) ? take(b, N * d) : NULL;
    A->dple_in = LP ? take(b, N * LP) : NULL;
    A->dple_ctx = LP ? take(b, N * LP) : NULL;
    A->dple_prod = LP ? take(b, N * c->ple_dim) : NULL;
    A->dple_gate = LP ? take(b, N * c->ple_dim) : NULL;
    A->dple_up = LP ? take(b, N * c->ple_dim) : NULL;
    A->dple_dup = LP ? take(b, N * c->ple_dim) : NULL;
    A->dple_out = LP ? take(b, N * d) : NULL;
    A->dple_x0 = LP ? take(b, N * d) : NULL;
    A->datt = take(b, N * qd);
    A->dq = take(b, N * qd);
    A->dq2 = take(b, N * qd);
    A->dk = take(b, N * kvd);
    A->dk2 = take(b, N * kvd);
    A->dv = take(b, N * kvd);
    A->dv2 = c->v_norm ? take(b, N * kvd) : NULL;
    {
        arena *mb = config_mla(c) ? b : &none;
        const size_t H = (size_t)c->n_heads, rq = (size_t)c->q_lora_rank, rkv = (size_t)c->kv_lora_rank,
                     dr = (size_t)c->qk_rope_dim;
        A->d_kvb = take(mb, N * H * (size_t)(c->qk_nope_dim + c->v_head_dim));
        A->d_ckv = take(mb, N * (rkv + dr));
        A->d_ckvn = take(mb, N * rkv);
        A->d_cqn = take(mb, N * rq);
        A->d_cq = take(mb, N * rq);
        A->d_kpe = take(mb, N * dr);
        A->d_qpe = take(mb, N * H * dr);
    }
    A->dgate = take(b, N * f);
    A->dup = take(b, N * f);
    A->dhid = take(b, N * f);
    A->dlogits = take(b, N * V);
    A->dlogits_raw = c->final_softcap > 0.0f ? take(b, N * V) : NULL; /* the pre-cap gradient */
    {
        const size_t E = (size_t)c->n_experts, K = (size_t)c->n_experts_per_tok, fe = (size_t)c->moe_d_ff,
                     fs = (size_t)config_shared_ff(c);
        arena *mb = any_moe ? b : &none;
        A->d_ey = take(mb, N * K * d);
        A->d_xs = take(mb, N * K * d);
        A->d_eg = take(mb, N * K * fe);
        A->d_eu = take(mb, N * K * fe);
        A->d_eh = take(mb, N * K * fe);
        A->d_router = take(mb, N * E);
        arena *gb = any_moe && c->moe_block ? b : &none;
        A->d_mlp_f = take(gb, N * d);
        A->d_moe_f = take(gb, N * d);
        A->d_moe_u = take(gb, N * d);
        A->d_router_in = take(gb, N * d);
        A->d_topk = take(gb, N * K);
        arena *sb = any_moe && fs ? b : &none;
        A->d_sg = take(sb, N * fs);
        A->d_su = take(sb, N * fs);
        A->d_sh = take(sb, N * fs);
        arena *gs = any_moe && fs && c->shared_gate ? b : &none;
        A->d_sy = take(gs, N * d);
        A->d_sgate = take(gs, N);
        /* the pooled load statistics: the whole batch's (a split pass's parts write only their rows' sums) */
        arena *st = any_moe ? a : &none;
        A->moe_frac = take_shared(st, E);
        A->moe_prob = take_shared(st, E);
    }
    /* per thread: a query block's S, P, dS and the tile kernels' keys (attention.c) */
    A->attn_slots = (size_t)omp_get_max_threads();
    A->attn_scratch =
        take_shared(full_attention ? a : &none, attention_scratch_floats(T, config_max_head_dim(c)) * A->attn_slots);
}

size_t model_activation_floats(const tlm_config *cfg, model_mode mode, int B, int T) {
    const tlm_model m = {.cfg = *cfg};
    const tlm_context ctx = {.m = &m, .mode = mode}; /* f32 weights, no KV cache: the layout's inputs */
    activations A = {.layers = calloc((size_t)cfg->n_layers, sizeof(layer_acts))};
    if (!A.layers) return 0;
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
    if (!A->layers && !(A->layers = calloc((size_t)m->cfg.n_layers, sizeof(layer_acts))))
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

