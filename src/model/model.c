/* model.c — the forward and backward pass of one decoder-only transformer, for every
 * architecture variant in tlm_config.
 *
 *   res[0]      = embed(tokens) (* sqrt(d) for Gemma) (+ learned positions)
 *   res[2l+1]   = sublayer(res[2l],   attention)      for each layer l
 *   res[2l+2]   = sublayer(res[2l+1], feed-forward)
 *   logits      = softcap(lm_head(final_norm(res[2L])))
 *
 * where one sublayer with function F, by norm placement, is
 *   pre: x + F(N(x))   post: N(x + F(x))   sandwich: x + N2(F(N1(x)))   output: x + N(F(x))
 * (and without the "x +" when residual is off). The placement is data: sublayer_forward()
 * asks the config which norms exist; there is one block, not five. */
#include "model.h"

#include <math.h>
#include <omp.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "util/error.h"
#include "util/hugepage.h"
#include "util/profile.h"

typedef enum { SUB_ATTN, SUB_FFN } sublayer_kind;

/* ---- activation memory: one buffer per (B, T), laid out by one walk -------------------------- */

/* An arena hands out the buffers of one layout in order. Every buffer but the shared scratch
 * is the whole batch's, sequence after sequence, so the rows of sequences [b0, b0 + nb) of any
 * of them sit at (its floats / B) * b0: an arena with b0 set binds the same layout's pointers to
 * those rows (a part of a split batch, batch_split below) instead of to the whole. */
typedef struct {
    float *base;
    size_t used;
    int B, b0; /* B 0: bind the whole batch */
} arena;

/* every buffer starts on a 64-byte line (the base is aligned, ARENA_ALIGN floats each): a
 * matrix-vector product re-reads its input row per output, and an input row off the line
 * makes every 16-float load touch two lines (measured: the 110M shape's decode 17% slower) */
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
static float *arena_base(float *mem) {
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
    size_t w = (size_t)c->d_model, qd = (size_t)c->n_heads * c->head_dim;
    if (qd > w) w = qd;
    if ((size_t)c->d_ff > w) w = (size_t)c->d_ff;
    return w;
}

/* One walk lays out every activation for (B, T) in the model's mode; run once with a NULL
 * base to count, then with the buffer to bind the pointers. */
static void layout_activations(const tlm_model *m, activations *A, arena *a, int B, int T) {
    const tlm_config *c = &m->cfg;
    const int lean = m->mode != MODEL_TRAIN;
    const size_t N = (size_t)B * T, d = c->d_model, qd = (size_t)c->n_heads * c->head_dim,
                 kvd = (size_t)c->n_kv_heads * c->head_dim, f = c->d_ff, V = c->vocab_size;
    const size_t att = (size_t)B * c->n_heads * T * T;
    const norm_placement pl = c->placement;
    /* attention through a KV cache needs no [B,H,T,T] matrices (decode.c) */
    const int full_attention = !(lean && m->kv), maps = full_attention && model_keeps_attention_maps(m);
    A->lean = lean, A->maps = maps;
    /* the residual stream: every stage for training and probes; two alternating slots for inference */
    A->res = take_stages(a, lean ? 2 : 2 * (size_t)c->n_layers + 1, N * d);
    A->stage = N * d;
    for (int l = 0; l < c->n_layers; l++) {
        layer_acts *L = &A->layers[l];
        if (lean && l > 0) { /* inference: every layer reuses layer 0's activations */
            *L = A->layers[0];
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
        L->q = take(a, N * qd);
        L->k = take(a, N * kvd);
        L->v = take(a, N * kvd);
        L->qn = L->q, L->kn = L->k, L->q_rstd = L->k_rstd = NULL;
        if (c->qk_norm != QK_NORM_NONE) {
            int per_head = c->qk_norm == QK_NORM_HEAD;
            L->q_rstd = take(a, per_head ? N * c->n_heads : N);
            L->k_rstd = take(a, per_head ? N * c->n_kv_heads : N);
            L->qn = take(a, N * qd);
            L->kn = take(a, N * kvd);
        }
        L->qr = L->qn, L->kr = L->kn;
        if (c->position == POS_ROPE) {
            L->qr = take(a, N * qd);
            L->kr = take(a, N * kvd);
        }
        /* [B,H,T,T] maps: both for those who look at them (attention.c); in training also the
         * probabilities alone (and the scores under a soft-cap, whose backward reads them) while
         * they take no more than the layer's FFN activations, so that the backward does not
         * compute them again: nanoGPT's shape -0.35 ms of attention backward per step (of 1.6),
         * the small GPT-2's -11 ms (of 33). Past that size (long T) they are computed again. */
        const int keep_probs = maps || (!lean && full_attention && att <= 2 * N * f);
        L->scores = maps || (keep_probs && model_layer_attention(c, l).softcap > 0.0f) ? take(a, att) : NULL;
        L->probs = keep_probs ? take(a, att) : NULL;
        L->att = take(a, N * qd);
        L->gate = c->ffn != FFN_GELU ? take(a, N * f) : NULL;
        L->up = take(a, N * f);
        L->hid = take(a, N * f);
    }
    const size_t fused = qd + 2 * kvd > 2 * f ? qd + 2 * kvd : 2 * f;
    A->fused = take_shared(a, (N < MATVEC_MAX_ROWS ? N : MATVEC_MAX_ROWS) * fused); /* decoding's rows only */
    A->w_tile = m->w16_mem ? take_shared(a, (size_t)MATMUL_BF16_TILE * widest_input(c)) : NULL;
    /* the head: every position, or the last of each row */
    const size_t R = m->mode == MODEL_INFER_LAST ? (size_t)B : N;
    A->logits_rows = (int)R;
    memset(&A->final, 0, sizeof A->final);
    if (c->final_norm || R != N) take_norm(a, &A->final, R, d, 1); /* (y also gathers the last rows) */
    A->logits_raw = c->final_softcap > 0.0f ? take(a, R * V) : NULL;
    A->logits = take(a, R * V);
    const int with_loss = m->mode != MODEL_INFER_LAST;
    A->probs = with_loss ? take(a, N * V) : NULL;
    A->losses = with_loss ? take(a, N) : NULL;
    A->lse = with_loss ? take(a, N) : NULL;
    /* backward scratch: training layout only (an arena without memory hands out NULLs) */
    arena none = {0};
    arena *b = lean ? &none : a;
    A->dres = take_stages(b, 2 * (size_t)c->n_layers + 1, N * d);
    A->dsum = take(b, N * d);
    A->df = take(b, N * d);
    A->du = take(b, N * d);
    A->dfinal = take(b, N * d);
    A->datt = take(b, N * qd);
    A->dq = take(b, N * qd);
    A->dq2 = take(b, N * qd);
    A->dk = take(b, N * kvd);
    A->dk2 = take(b, N * kvd);
    A->dv = take(b, N * kvd);
    A->dgate = take(b, N * f);
    A->dup = take(b, N * f);
    A->dhid = take(b, N * f);
    A->dlogits = take(b, N * V);
    A->dlogits_raw = c->final_softcap > 0.0f ? take(b, N * V) : NULL; /* the pre-cap gradient */
    /* per thread: a query block's S, P, dS and the tile kernels' keys (attention.c) */
    A->attn_slots = (size_t)omp_get_max_threads();
    A->attn_scratch = take_shared(full_attention ? a : &none, attention_scratch_floats(T, c->head_dim) * A->attn_slots);
}

size_t model_activation_floats(const tlm_config *cfg, model_mode mode, int B, int T) {
    tlm_model m = {.cfg = *cfg, .mode = mode}; /* f32 weights, no KV cache: the layout's inputs */
    activations A = {.layers = calloc((size_t)cfg->n_layers, sizeof(layer_acts))};
    if (!A.layers) return 0;
    arena count = {0};
    layout_activations(&m, &A, &count, B, T);
    free(A.layers);
    return count.used;
}

int model_keeps_attention_maps(const tlm_model *m) {
    return m->hooks || m->after_pass || m->layer_hook || m->keep_attention_maps;
}

/* RoPE tables for positions [0, len): cos/sin of pos * inv_freq[i], computed in float32 as
 * Hugging Face's rotary embedding does (inv_freq, then the product, then cos/sin). */
static void rope_tables(const tlm_config *c, float theta, int scaled, float *cos_tab, float *sin_tab, int len) {
    const int half = c->head_dim / 2;
    float inv_freq[half];
    for (int i = 0; i < half; i++) {
        inv_freq[i] = 1.0f / powf(theta, (float)(2 * i) / (float)c->head_dim);
        if (!scaled) continue;
        if (c->rope_scaling == ROPE_SCALING_LINEAR) {
            inv_freq[i] /= c->rope_factor;
        } else if (c->rope_scaling == ROPE_SCALING_LLAMA3) {
            float old = (float)c->rope_original_max_pos;
            float low_wavelen = old / c->rope_low_freq_factor, high_wavelen = old / c->rope_high_freq_factor;
            float wavelen = 2.0f * (float)M_PI / inv_freq[i];
            if (wavelen > low_wavelen) {
                inv_freq[i] /= c->rope_factor;
            } else if (wavelen >= high_wavelen) {
                float smooth = (old / wavelen - c->rope_low_freq_factor) /
                               (c->rope_high_freq_factor - c->rope_low_freq_factor);
                inv_freq[i] = (1.0f - smooth) * inv_freq[i] / c->rope_factor + smooth * inv_freq[i];
            }
        }
    }
    for (int p = 0; p < len; p++)
        for (int i = 0; i < half; i++) {
            float angle = (float)p * inv_freq[i];
            cos_tab[(size_t)p * half + i] = cosf(angle);
            sin_tab[(size_t)p * half + i] = sinf(angle);
        }
}

int model_ensure_rope(tlm_model *m, int len) {
    const tlm_config *c = &m->cfg;
    if (c->position != POS_ROPE || len <= m->rope_len) return 0;
    size_t n = (size_t)len * (c->head_dim / 2);
    int local = c->rope_theta_local > 0.0f;
    float *t[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < (local ? 4 : 2); i++)
        if (!(t[i] = malloc(n * sizeof(float)))) {
            for (int j = 0; j < 4; j++) free(t[j]);
            return tlm_error("out of memory for RoPE tables of %d positions", len);
        }
    free(m->rope_cos), free(m->rope_sin), free(m->rope_cos_local), free(m->rope_sin_local);
    m->rope_cos = t[0], m->rope_sin = t[1], m->rope_cos_local = t[2], m->rope_sin_local = t[3];
    rope_tables(c, c->rope_theta, 1, m->rope_cos, m->rope_sin, len);
    if (local) rope_tables(c, c->rope_theta_local, 0, m->rope_cos_local, m->rope_sin_local, len);
    m->rope_len = len;
    return 0;
}

/* Lays the activations out for (B, T) in the model's mode. The buffer only grows: a smaller
 * shape (a decoding step after a prefill, an evaluation batch) reuses it without allocating. */
static int ensure_activations(tlm_model *m, int B, int T) {
    activations *A = &m->acts;
    const int kv_layout = m->mode != MODEL_TRAIN && m->kv; /* (the layout depends on these) */
    const int maps = !(kv_layout) && model_keeps_attention_maps(m);
    if (A->mem && A->B == B && A->T == T && A->mode == m->mode && A->kv_layout == kv_layout && A->w16 == !!m->w16_mem &&
        A->maps == maps)
        return 0;
    if (!A->layers && !(A->layers = calloc((size_t)m->cfg.n_layers, sizeof(layer_acts))))
        return tlm_error("out of memory");
    arena count = {0};
    layout_activations(m, A, &count, B, T);
    const size_t n_tokens = (size_t)B * T;
    if (count.used > A->capacity || n_tokens > A->token_capacity) {
        free(A->mem), free(A->tokens), free(A->targets);
        A->mem = calloc(count.used + ARENA_ALIGN, sizeof(float));
        tlm_advise_huge(A->mem, (count.used + ARENA_ALIGN) * sizeof(float));
        A->tokens = calloc(n_tokens, sizeof(int));
        A->targets = calloc(n_tokens, sizeof(int));
        A->capacity = count.used, A->token_capacity = n_tokens;
        if (!A->mem || !A->tokens || !A->targets) {
            free(A->mem), free(A->tokens), free(A->targets);
            A->mem = NULL, A->tokens = A->targets = NULL, A->capacity = A->token_capacity = 0;
            return tlm_error("out of memory: activations for batch %d x %d need %.1f MiB", B, T,
                             count.used * 4.0 / 1048576.0);
        }
    }
    arena a = {.base = arena_base(A->mem)};
    layout_activations(m, A, &a, B, T);
    A->B = B, A->T = T, A->mode = m->mode, A->kv_layout = kv_layout, A->w16 = !!m->w16_mem;
    return model_ensure_rope(m, T);
}

static void split_free(struct batch_split *s);

void model_free(tlm_model *m) {
    if (!m) return;
    free(m->acts.mem), free(m->acts.tokens), free(m->acts.targets), free(m->acts.layers);
    free(m->rope_cos), free(m->rope_sin), free(m->rope_cos_local), free(m->rope_sin_local);
    model_hooks_free(m);
    free(m->p.layers), free(m->g.layers), free(m->tensors), free(m->grad_mem);
    if (m->file_map)
        munmap(m->file_map, m->file_map_len); /* (param_mem points into it) */
    else
        free(m->param_mem);
    free(m->w16_mem);
    split_free(m->split);
    free(m);
}

/* ---- linear layers: f32 or bf16 weights ------------------------------------------------------ */

/* out [N,OC] = inp [N,IC] @ W^T + b with the layer's weights in whichever type they are kept */
static void linear_forward(const tlm_model *m, float *out, const float *inp, const linear_params *lp, int N, int IC,
                           int OC) {
    if (lp->w16)
        matmul_forward_bf16(out, inp, lp->w16, lp->b, N, IC, OC, m->acts.w_tile);
    else
        matmul_forward(out, inp, lp->w, lp->b, N, IC, OC);
}

/* Projections of one input stored back to back (q|k|v, gate|up; params.c), each into its own
 * buffer. Many rows (training, prompts): a GEMM per part over its rows of the weights, straight
 * into its buffer (the parts' GEMMs cost about what the fused one does, and no pass copies the
 * columns apart). A few rows (decoding): one matrix-vector stream over the fused weights, then
 * the columns split. */
static void project_parts(const tlm_model *m, float *const *outs, const linear_params *const *parts,
                          const int *widths, int n_parts, const linear_params *fused, const float *u, int N, int d) {
    if (N > MATVEC_MAX_ROWS) {
        for (int i = 0; i < n_parts; i++) linear_forward(m, outs[i], u, parts[i], N, d, widths[i]);
        return;
    }
    int total = 0;
    for (int i = 0; i < n_parts; i++) total += widths[i];
    linear_forward(m, m->acts.fused, u, fused, N, d, total);
    split_columns(outs, widths, n_parts, m->acts.fused, N);
}

/* ---- norms: one call site for the four kinds ------------------------------------------------ */

void model_norm_forward(const tlm_config *c, float *y, const norm_acts *a, const norm_params *p, const float *x,
                         int N) {
    if (c->norm == NORM_DYT) {
        dyt_forward(y, x, p->a, p->w, p->b, N, c->d_model);
        /* no per-row statistics: the saved "rstd" is alpha (the scale before the tanh) */
        for (int n = 0; a->rstd && n < N; n++) a->rstd[n] = p->a[0];
    } else if (c->norm == NORM_LAYERNORM)
        layernorm_forward(y, a->mean, a->rstd, x, p->w, p->b, N, c->d_model, c->norm_eps);
    else
        rmsnorm_forward(y, a->rstd, x, p->w, config_norm_offset(c), N, c->d_model, c->norm_eps);
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

attention_spec model_layer_attention(const tlm_config *c, int l) {
    attention_spec s = {.n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim,
                        .scale = config_attn_scale(c), .softcap = c->attn_softcap,
                        .window = c->layer_sliding[l] ? c->sliding_window : 0};
    return s;
}

void model_layer_rope(const tlm_model *m, int l, const float **cos_tab, const float **sin_tab) {
    int local = m->cfg.rope_theta_local > 0.0f && m->cfg.layer_sliding[l];
    *cos_tab = local ? m->rope_cos_local : m->rope_cos;
    *sin_tab = local ? m->rope_sin_local : m->rope_sin;
}

/* QK-norm: RMSNorm per head (rows of head_dim) or over the whole projection (rows of n*hd) */
void model_qk_norm_shape(const tlm_config *c, int N, int n_heads, int *rows, int *cols) {
    int per_head = c->qk_norm == QK_NORM_HEAD;
    *rows = per_head ? N * n_heads : N;
    *cols = per_head ? c->head_dim : n_heads * c->head_dim;
}

static void attention_sublayer_forward(tlm_model *m, int l, const float *u, float *f) {
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_acts *a = &m->acts.layers[l];
    const int B = m->acts.B, T = m->acts.T, N = B * T, d = c->d_model;
    const int qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    float *qkv_out[3] = {a->q, a->k, a->v};
    const linear_params *qkv_parts[3] = {&P->q, &P->k, &P->v};
    const int qkv_widths[3] = {qd, kvd, kvd};
    project_parts(m, qkv_out, qkv_parts, qkv_widths, 3, &P->qkv, u, N, d);
    MODEL_HOOK(m, model_hook_id(l, HL_Q), a->q, 0);
    MODEL_HOOK(m, model_hook_id(l, HL_K), a->k, 0);
    MODEL_HOOK(m, model_hook_id(l, HL_V), a->v, 0);
    if (c->qk_norm != QK_NORM_NONE) {
        float off = config_norm_offset(c);
        int rows, cols;
        model_qk_norm_shape(c, N, c->n_heads, &rows, &cols);
        rmsnorm_forward(a->qn, a->q_rstd, a->q, P->q_norm, off, rows, cols, c->norm_eps);
        model_qk_norm_shape(c, N, c->n_kv_heads, &rows, &cols);
        rmsnorm_forward(a->kn, a->k_rstd, a->k, P->k_norm, off, rows, cols, c->norm_eps);
        MODEL_HOOK(m, model_hook_id(l, HL_Q_NORMED), a->qn, 0);
        MODEL_HOOK(m, model_hook_id(l, HL_K_NORMED), a->kn, 0);
    }
    const int pos0 = m->kv ? kv_cache_length(m->kv) : 0;
    if (c->position == POS_ROPE) {
        const float *cs, *sn;
        model_layer_rope(m, l, &cs, &sn);
        rope_forward(a->qr, a->qn, cs, sn, B, T, c->n_heads, c->head_dim, pos0);
        rope_forward(a->kr, a->kn, cs, sn, B, T, c->n_kv_heads, c->head_dim, pos0);
        MODEL_HOOK(m, model_hook_id(l, HL_ROT_Q), a->qr, 0);
        MODEL_HOOK(m, model_hook_id(l, HL_ROT_K), a->kr, 0);
    }
    if (m->kv) { /* incremental decoding: append k, v to the cache and attend over all of it */
        kv_attention_forward(m->kv, l, a->att, a->qr, a->kr, a->v, T, model_layer_attention(c, l));
    } else {
        attention_spec spec = model_layer_attention(c, l);
        attention_forward(a->att, a->scores, a->probs, a->qr, a->kr, a->v, B, T, &spec, m->acts.attn_scratch);
        if (m->hooks) {
            model_hook_fire(m, model_hook_id(l, HL_ATTN_SCORES), a->scores, 0);
            model_hook_fire(m, model_hook_id(l, HL_PATTERN), a->probs, 0);
            model_hook_attention_from_probs(m, l, a->att, a->probs, a->v);
        }
    }
    MODEL_HOOK(m, model_hook_id(l, HL_Z), a->att, 0);
    linear_forward(m, f, a->att, &P->o, N, qd, d);
}

/* du = d(attention sublayer)/du . df (set) */
static void attention_sublayer_backward(tlm_model *m, int l, const float *u, const float *df, float *du) {
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_params *G = &m->g.layers[l];
    const layer_acts *a = &m->acts.layers[l];
    activations *A = &m->acts;
    const int B = A->B, T = A->T, N = B * T, d = c->d_model;
    const int qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    matmul_backward_into(A->datt, G->o.w, G->o.b, df, a->att, P->o.w, N, qd, d);
    MODEL_HOOK(m, model_hook_id(l, HL_Z), A->datt, 1);
    attention_spec spec = model_layer_attention(c, l);
    attention_backward(A->dq, A->dk, A->dv, A->datt, a->scores, a->probs, a->qr, a->kr, a->v, B, T, &spec,
                       A->attn_scratch);
    MODEL_HOOK(m, model_hook_id(l, HL_V), A->dv, 1);
    if (c->position == POS_ROPE) {
        MODEL_HOOK(m, model_hook_id(l, HL_ROT_Q), A->dq, 1);
        MODEL_HOOK(m, model_hook_id(l, HL_ROT_K), A->dk, 1);
    }
    /* walk back through RoPE and QK-norm, alternating between two gradient buffers */
    float *dq = A->dq, *dq_next = A->dq2, *dk = A->dk, *dk_next = A->dk2, *t;
    if (c->position == POS_ROPE) {
        const float *cs, *sn;
        model_layer_rope(m, l, &cs, &sn);
        rope_backward(dq_next, dq, cs, sn, B, T, c->n_heads, c->head_dim, 0);
        rope_backward(dk_next, dk, cs, sn, B, T, c->n_kv_heads, c->head_dim, 0);
        t = dq, dq = dq_next, dq_next = t;
        t = dk, dk = dk_next, dk_next = t;
    }
    if (c->qk_norm != QK_NORM_NONE) {
        float off = config_norm_offset(c);
        int rows, cols;
        MODEL_HOOK(m, model_hook_id(l, HL_Q_NORMED), dq, 1);
        MODEL_HOOK(m, model_hook_id(l, HL_K_NORMED), dk, 1);
        model_qk_norm_shape(c, N, c->n_heads, &rows, &cols);
        rmsnorm_backward(dq_next, NULL, G->q_norm, dq, a->q, P->q_norm, off, a->q_rstd, rows, cols);
        model_qk_norm_shape(c, N, c->n_kv_heads, &rows, &cols);
        rmsnorm_backward(dk_next, NULL, G->k_norm, dk, a->k, P->k_norm, off, a->k_rstd, rows, cols);
        dq = dq_next, dk = dk_next;
    }
    MODEL_HOOK(m, model_hook_id(l, HL_Q), dq, 1);
    MODEL_HOOK(m, model_hook_id(l, HL_K), dk, 1);
    /* the three input projections, each into its rows of the fused gradient (no join pass) */
    matmul_backward_into(du, G->q.w, G->q.b, dq, u, P->q.w, N, d, qd);
    matmul_backward(du, G->k.w, G->k.b, dk, u, P->k.w, N, d, kvd);
    matmul_backward(du, G->v.w, G->v.b, A->dv, u, P->v.w, N, d, kvd);
}

/* ---- feed-forward sublayer --------------------------------------------------------------------- */

activation model_ffn_activation(const tlm_config *c) { return c->ffn == FFN_SWIGLU ? ACT_SILU : ACT_GELU_TANH; }

static void ffn_sublayer_forward(tlm_model *m, int l, const float *u, float *f) {
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_acts *a = &m->acts.layers[l];
    const int N = m->acts.B * m->acts.T, d = c->d_model, ff = c->d_ff;
    if (c->ffn == FFN_GELU) {
        linear_forward(m, a->up, u, &P->up, N, d, ff);
        MODEL_HOOK(m, model_hook_id(l, HL_MLP_PRE), a->up, 0);
        act_forward(a->hid, a->up, (size_t)N * ff, ACT_GELU_TANH);
    } else {
        float *gu_out[2] = {a->gate, a->up};
        const linear_params *gu_parts[2] = {&P->gate, &P->up};
        const int gu_widths[2] = {ff, ff};
        project_parts(m, gu_out, gu_parts, gu_widths, 2, &P->gate_up, u, N, d);
        MODEL_HOOK(m, model_hook_id(l, HL_MLP_PRE), a->gate, 0);
        MODEL_HOOK(m, model_hook_id(l, HL_MLP_PRE_LINEAR), a->up, 0);
        glu_forward(a->hid, a->gate, a->up, (size_t)N * ff, model_ffn_activation(c));
    }
    MODEL_HOOK(m, model_hook_id(l, HL_MLP_POST), a->hid, 0);
    linear_forward(m, f, a->hid, &P->down, N, ff, d);
}

/* du = d(feed-forward sublayer)/du . df (set) */
static void ffn_sublayer_backward(tlm_model *m, int l, const float *u, const float *df, float *du) {
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_params *G = &m->g.layers[l];
    const layer_acts *a = &m->acts.layers[l];
    activations *A = &m->acts;
    const int N = A->B * A->T, d = c->d_model, ff = c->d_ff;
    const size_t n = (size_t)N * ff;
    matmul_backward_into(A->dhid, G->down.w, G->down.b, df, a->hid, P->down.w, N, ff, d);
    MODEL_HOOK(m, model_hook_id(l, HL_MLP_POST), A->dhid, 1);
    if (c->ffn == FFN_GELU) {
        act_backward(A->dup, A->dhid, a->up, n, ACT_GELU_TANH);
        MODEL_HOOK(m, model_hook_id(l, HL_MLP_PRE), A->dup, 1);
        matmul_backward_into(du, G->up.w, G->up.b, A->dup, u, P->up.w, N, d, ff);
    } else {
        glu_backward(A->dgate, A->dup, A->dhid, a->gate, a->up, n, model_ffn_activation(c));
        MODEL_HOOK(m, model_hook_id(l, HL_MLP_PRE), A->dgate, 1);
        MODEL_HOOK(m, model_hook_id(l, HL_MLP_PRE_LINEAR), A->dup, 1);
        matmul_backward_into(du, G->gate.w, G->gate.b, A->dgate, u, P->gate.w, N, d, ff);
        matmul_backward(du, G->up.w, G->up.b, A->dup, u, P->up.w, N, d, ff);
    }
}

/* ---- one sublayer, whatever the norm placement --------------------------------------------------- */

static sublayer_acts *sublayer_of(tlm_model *m, int l, sublayer_kind k) {
    return k == SUB_ATTN ? &m->acts.layers[l].attn_s : &m->acts.layers[l].ffn_s;
}

/* first norm (input, or post for Post-Norm) and output norm of a sublayer */
static norm_params *first_norm(model_params *p, int l, sublayer_kind k) {
    return k == SUB_ATTN ? &p->layers[l].attn_norm : &p->layers[l].ffn_norm;
}
static norm_params *out_norm(model_params *p, int l, sublayer_kind k) {
    return k == SUB_ATTN ? &p->layers[l].attn_out_norm : &p->layers[l].ffn_out_norm;
}

/* hook points of a sublayer: input norm scale, its output, F before the output norm, the output
 * norm's scale, what is added to the stream, the sum before a post norm, its scale, the stream after */
static const int SUB_HOOKS[2][8] = {
    {HL_LN1_SCALE, HL_LN1_NORMALIZED, HL_ATTN_RAW, HL_LN1_OUT_SCALE, HL_ATTN_OUT, HL_ATTN_SUM, HL_LN1_POST_SCALE,
     HL_RESID_MID},
    {HL_LN2_SCALE, HL_LN2_NORMALIZED, HL_MLP_RAW, HL_LN2_OUT_SCALE, HL_MLP_OUT, HL_MLP_SUM, HL_LN2_POST_SCALE,
     HL_RESID_POST}};

/* h = x + N_out(F(N_in(x))), or N_post(x + F(x)), ... as the placement says */
static void sublayer_forward(tlm_model *m, int l, sublayer_kind k, const float *x, float *h) {
    const tlm_config *c = &m->cfg;
    sublayer_acts *s = sublayer_of(m, l, k);
    const int N = m->acts.B * m->acts.T;
    const size_t Nd = (size_t)N * c->d_model;
    const float *u = x;
    if (placement_has_input_norm(c->placement)) {
        model_norm_forward(c, s->in.y, &s->in, first_norm(&m->p, l, k), x, N);
        u = s->in.y;
        MODEL_HOOK(m, model_hook_id(l, SUB_HOOKS[k][0]), s->in.rstd, 0);
        MODEL_HOOK(m, model_hook_id(l, SUB_HOOKS[k][1]), s->in.y, 0);
    }
    if (k == SUB_ATTN)
        attention_sublayer_forward(m, l, u, s->f);
    else
        ffn_sublayer_forward(m, l, u, s->f);
    float *fo = s->f;
    if (placement_has_output_norm(c->placement)) {
        MODEL_HOOK(m, model_hook_id(l, SUB_HOOKS[k][2]), s->f, 0);
        model_norm_forward(c, s->out.y, &s->out, out_norm(&m->p, l, k), s->f, N);
        fo = s->out.y;
        MODEL_HOOK(m, model_hook_id(l, SUB_HOOKS[k][3]), s->out.rstd, 0);
    }
    MODEL_HOOK(m, model_hook_id(l, SUB_HOOKS[k][4]), fo, 0);
    int post = placement_has_post_norm(c->placement);
    float *sum = post ? s->sum : h;
    if (c->residual)
        vec_add(sum, x, fo, Nd);
    else
        memcpy(sum, fo, Nd * sizeof(float));
    if (post) {
        MODEL_HOOK(m, model_hook_id(l, SUB_HOOKS[k][5]), sum, 0);
        model_norm_forward(c, h, &s->post, first_norm(&m->p, l, k), sum, N);
        MODEL_HOOK(m, model_hook_id(l, SUB_HOOKS[k][6]), s->post.rstd, 0);
    }
    MODEL_HOOK(m, model_hook_id(l, SUB_HOOKS[k][7]), h, 0);
}

/* dx = d(sublayer)/dx . dh (set: each residual slot's gradient comes from the one sublayer that
 * reads it) */
static void sublayer_backward(tlm_model *m, int l, sublayer_kind k, const float *x, const float *dh, float *dx) {
    const tlm_config *c = &m->cfg;
    activations *A = &m->acts;
    sublayer_acts *s = sublayer_of(m, l, k);
    const int N = A->B * A->T;
    const size_t Nd = (size_t)N * c->d_model;
    const float *dsum = dh;
    if (placement_has_post_norm(c->placement)) {
        model_norm_backward(c, A->dsum, NULL, first_norm(&m->g, l, k), dh, &s->post, first_norm(&m->p, l, k), s->sum,
                            N);
        dsum = A->dsum;
        MODEL_HOOK(m, model_hook_id(l, SUB_HOOKS[k][5]), A->dsum, 1);
    }
    MODEL_HOOK(m, model_hook_id(l, SUB_HOOKS[k][4]), (float *)dsum, 1);
    const float *df = dsum;
    if (placement_has_output_norm(c->placement)) {
        model_norm_backward(c, A->df, NULL, out_norm(&m->g, l, k), dsum, &s->out, out_norm(&m->p, l, k), s->f, N);
        df = A->df;
        MODEL_HOOK(m, model_hook_id(l, SUB_HOOKS[k][2]), A->df, 1);
    }
    const int has_in = placement_has_input_norm(c->placement);
    const float *u = has_in ? s->in.y : x;
    if (k == SUB_ATTN) /* (each sets du: its input projection is du's only contributor) */
        attention_sublayer_backward(m, l, u, df, A->du);
    else
        ffn_sublayer_backward(m, l, u, df, A->du);
    if (has_in) MODEL_HOOK(m, model_hook_id(l, SUB_HOOKS[k][1]), A->du, 1);
    /* dx = the residual's dsum (if any) + the sublayer's path, in one pass */
    const float *residual = c->residual ? dsum : NULL;
    if (has_in)
        model_norm_backward(c, dx, residual, first_norm(&m->g, l, k), A->du, &s->in, first_norm(&m->p, l, k), x, N);
    else if (residual)
        vec_add(dx, residual, A->du, Nd);
    else
        vec_copy(dx, A->du, Nd);
}

/* ---- the whole model ------------------------------------------------------------------------------- */

/* stage i of the residual stream [N,d]: all 2L+1 are kept for training and probes; inference
 * alternates between two slots (a sublayer reads one and writes the other) */
static float *residual_at(const activations *A, int i) { return A->res + (size_t)(A->lean ? i % 2 : i) * A->stage; }

float model_embed_scale(const tlm_config *c) { return c->embed_scale ? sqrtf((float)c->d_model) : 1.0f; }

void model_head_logits(const tlm_model *m, float *logits, float *logits_raw, const float *h, int R) {
    const tlm_config *c = &m->cfg;
    float *head_out = c->final_softcap > 0.0f && logits_raw ? logits_raw : logits;
    const linear_params head = {.w = m->p.lm_head, .w16 = m->p.lm_head16};
    linear_forward(m, head_out, h, &head, R, c->d_model, c->vocab_size);
    if (c->final_softcap > 0.0f) softcap_forward(logits, head_out, (size_t)R * c->vocab_size, c->final_softcap);
}

void model_head_forward(const tlm_model *m, float *logits, float *logits_raw, const norm_acts *fn, const float *h,
                        int R) {
    if (m->cfg.final_norm) {
        model_norm_forward(&m->cfg, fn->y, fn, &m->p.final_norm, h, R);
        h = fn->y;
    }
    model_head_logits(m, logits, logits_raw, h, R);
}

/* ---- splitting a batch across the threads ------------------------------------------------------ */

/* A batch of B sequences on P threads: either every op splits its own loop among the threads
 * (a fork and a join per op, each GEMM cut in P), or each thread runs the whole pass over its
 * B/P sequences (or one more) with single-threaded ops, on views of its rows of the one
 * activation layout, and the threads meet once per pass. The second measured 6-7% faster on
 * nanoGPT's GEMMs alone (every operand of a thread stays in its own core's caches, and no GEMM
 * is cut small) and 8% per training step, whose ~150 forks and joins it removes. The sequences
 * are independent in every op but the weight gradients, which are sums over all rows: each
 * part sums its rows into its own gradient buffer, and the parts are added in order at the
 * end, so a run is reproducible for a given thread count (not across thread counts, as the
 * GEMM library's is not either).
 * The GEMM library is then called from several threads at once: oneDNN and OpenBLAS's OpenMP
 * build (the one CMake links) run such a call on the calling thread. */
typedef struct batch_split {
    int parts, n_layers;
    activations *views;  /* [parts] */
    layer_acts *layers;  /* [parts * n_layers] */
    model_params *g;     /* [parts] the weight gradients of each part; g[0] is the model's own */
    layer_params *g_layers;
    float *grad_mem;     /* [(parts - 1) * n_params], zero between passes */
} batch_split;

static void split_free(batch_split *s) {
    if (!s) return;
    free(s->views), free(s->layers), free(s->g), free(s->g_layers), free(s->grad_mem);
    free(s);
}

/* part p's sequences: [split_first(p), split_first(p + 1)), B/P each or one more */
static int split_first(int B, int parts, int p) { return (int)((long long)p * B / parts); }

/* how many parts this pass splits into: 1 (the ops split themselves) unless there are several
 * threads, B divides among them evenly or nearly (B >= 8 P: the largest part at most 1/8 above
 * the mean; the pass waits for it), every part has more rows than decoding's matrix-vector
 * path takes, and nothing watches the pass from inside (hooks, a layer hook, a KV cache, the
 * bf16 weights' shared tile of widened rows) */
static int split_parts(const tlm_model *m, int B, int T) {
    const int P = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (P < 2 || m->no_batch_split || (B % P && B < 8 * P) || (B / P) * T <= MATVEC_MAX_ROWS) return 1;
    if (m->hooks || m->layer_hook || m->kv || m->w16_mem) return 1;
    const activations *A = &m->acts;
    if (A->attn_scratch && (size_t)P > A->attn_slots) return 1;
    return P;
}

/* binds part `part`'s views of the current layout (a walk of pointer arithmetic, no memory) and,
 * with_grads, its gradient buffer; 0 on success */
static int split_prepare(tlm_model *m, int parts, int with_grads) {
    batch_split *s = m->split;
    const int L = m->cfg.n_layers;
    if (s && (s->parts != parts || s->n_layers != L)) split_free(s), s = m->split = NULL;
    if (!s) {
        s = m->split = calloc(1, sizeof *s);
        if (!s) return -1;
        s->parts = parts, s->n_layers = L;
        s->views = calloc((size_t)parts, sizeof *s->views);
        s->layers = calloc((size_t)parts * L, sizeof *s->layers);
        if (!s->views || !s->layers) return split_free(s), m->split = NULL, -1;
    }
    activations *A = &m->acts;
    const size_t per_seq = (size_t)A->T, scratch = attention_scratch_floats(A->T, m->cfg.head_dim);
    for (int p = 0; p < parts; p++) {
        activations *v = &s->views[p];
        const int b0 = split_first(A->B, parts, p), nb = split_first(A->B, parts, p + 1) - b0;
        *v = *A;
        v->layers = s->layers + (size_t)p * L;
        arena a = {.base = arena_base(A->mem), .B = A->B, .b0 = b0};
        layout_activations(m, v, &a, A->B, A->T);
        v->B = nb;
        v->logits_rows = A->logits_rows / A->B * nb; /* (T or 1 per sequence) */
        v->tokens = A->tokens + (size_t)b0 * per_seq;
        v->targets = A->targets + (size_t)b0 * per_seq;
        if (v->attn_scratch) v->attn_scratch += (size_t)p * scratch;
    }
    if (!with_grads) return 0;
    /* the parts' own gradients cost (P-1) copies of the parameters: taken while that is no more
     * than the activations themselves, else the backward splits its ops instead */
    if ((size_t)(parts - 1) * m->n_params > A->capacity) return -1;
    if (!s->grad_mem) {
        s->g = calloc((size_t)parts, sizeof *s->g);
        s->g_layers = calloc((size_t)parts * L, sizeof *s->g_layers);
        s->grad_mem = calloc((size_t)(parts - 1) * m->n_params, sizeof(float));
        if (!s->g || !s->g_layers || !s->grad_mem) {
            free(s->g), free(s->g_layers), free(s->grad_mem);
            s->g = NULL, s->g_layers = NULL, s->grad_mem = NULL;
            return -1;
        }
        for (int p = 1; p < parts; p++) {
            s->g[p].layers = s->g_layers + (size_t)p * L;
            model_bind_params(m, &s->g[p], s->grad_mem + (size_t)(p - 1) * m->n_params);
        }
    }
    s->g[0] = m->g;
    return 0;
}

/* part p's model: the same weights, its rows of the activations, its gradients */
static tlm_model split_part(const tlm_model *m, int p, int with_grads) {
    tlm_model v = *m;
    v.acts = m->split->views[p];
    if (with_grads) v.g = m->split->g[p];
    return v;
}

/* on a thread of the split: the ops it calls run on it alone (their own loops and the GEMM
 * library see one thread), and only part 0's thread times them for --profile */
static void split_enter(int thread) {
    omp_set_num_threads(1);
    tlm_prof_quiet = thread != 0;
}

/* (the team's end: the thread's own OpenMP settings end with its implicit task) */
static void split_leave(void) { tlm_prof_quiet = 0; }

/* the gradients of parts 1.. added into the model's (in part order) and zeroed again; every
 * thread of the team takes its chunk */
static void split_reduce_grads(tlm_model *m, int thread, int threads) {
    PROF_SCOPE("split_grad_reduce"); /* (part 0's thread's chunk: the others are quiet) */
    const batch_split *s = m->split;
    const size_t n = m->n_params, per = (n + (size_t)threads - 1) / (size_t)threads;
    const size_t lo = (size_t)thread * per < n ? (size_t)thread * per : n, hi = lo + per < n ? lo + per : n;
    float *g = m->grad_mem;
    for (int p = 1; p < s->parts; p++) {
        float *gp = s->grad_mem + (size_t)(p - 1) * n;
        for (size_t i = lo; i < hi; i++) g[i] += gp[i], gp[i] = 0.0f;
    }
}

/* ---- the whole model ------------------------------------------------------------------------------- */

/* the pass over the rows of m->acts (the whole batch's, or a part's); with targets the mean loss
 * over its counted rows (and their count, lse^2 mean) */
static int forward_rows(tlm_model *m, float *loss) {
    const tlm_config *c = &m->cfg;
    activations *A = &m->acts;
    const int B = A->B, T = A->T, N = B * T, d = c->d_model, V = c->vocab_size;
    const int pos0 = m->kv ? kv_cache_length(m->kv) : 0;
    const float *wpe = m->p.pos_embed ? m->p.pos_embed + (size_t)pos0 * d : NULL;
    if (m->p.embed16)
        embedding_forward_bf16(A->res, A->tokens, m->p.embed16, wpe, model_embed_scale(c), B, T, d);
    else
        embedding_forward(A->res, A->tokens, m->p.embed, wpe, model_embed_scale(c), B, T, d);
    MODEL_HOOK(m, 0, A->res, 0);
    if (m->layer_hook && m->layer_hook(m->layer_hook_ctx, m, -1)) return -1;
    for (int l = 0; l < c->n_layers; l++) {
        float *x = residual_at(A, 2 * l), *mid = residual_at(A, 2 * l + 1);
        MODEL_HOOK(m, model_hook_id(l, HL_RESID_PRE), x, 0);
        sublayer_forward(m, l, SUB_ATTN, x, mid);
        sublayer_forward(m, l, SUB_FFN, mid, residual_at(A, 2 * l + 2));
        if (m->layer_hook && m->layer_hook(m->layer_hook_ctx, m, l)) return -1;
    }
    const float *h = residual_at(A, 2 * c->n_layers);
    const int R = A->logits_rows;
    if (R != N) { /* the last position of each row only */
        for (int b = 0; b < B; b++) memcpy(A->final.y + (size_t)b * d, h + ((size_t)b * T + T - 1) * d, sizeof(float) * d);
        h = A->final.y;
    }
    if (c->final_norm) { /* (the hooks see, and may rewrite, the final norm's output) */
        model_norm_forward(c, A->final.y, &A->final, &m->p.final_norm, h, R);
        h = A->final.y;
        MODEL_HOOK(m, model_hook_count(c) - 2, A->final.rstd, 0);
        MODEL_HOOK(m, model_hook_count(c) - 1, A->final.y, 0);
    }
    model_head_logits(m, A->logits, A->logits_raw, h, R);
    if (A->has_targets)
        *loss = crossentropy_forward(A->losses, A->lse, A->probs, A->logits, A->targets, N, V, &A->n_counted,
                                     &A->lse_sq_mean);
    return 0;
}

int model_forward(tlm_model *m, const int *tokens, const int *targets, int B, int T, float *loss) {
    const tlm_config *c = &m->cfg;
    const int pos0 = m->kv ? kv_cache_length(m->kv) : 0;
    if (B <= 0 || T <= 0) return tlm_error("forward: batch %d x %d is empty", B, T);
    if (c->position == POS_LEARNED && pos0 + T > c->max_seq)
        return tlm_error("forward: sequence of %d tokens exceeds max_position_embeddings = %d", pos0 + T, c->max_seq);
    if (m->kv && (B != 1 || targets || kv_cache_room(m->kv) < T))
        return tlm_error("forward: with a KV cache, feed one sequence without targets within the cache's %d positions",
                         kv_cache_length(m->kv) + kv_cache_room(m->kv));
    for (int i = 0; i < B * T; i++) {
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return tlm_error("forward: token id %d at position %d is outside the vocabulary [0, %d)", tokens[i], i,
                             c->vocab_size);
        if (targets && targets[i] >= c->vocab_size)
            return tlm_error("forward: target id %d at position %d is outside the vocabulary [0, %d)", targets[i], i,
                             c->vocab_size);
    }
    if (m->hooks && (m->mode != MODEL_TRAIN || m->kv))
        return tlm_error("forward: hooks need the model in training mode without a KV cache");
    if (ensure_activations(m, B, T) || model_ensure_rope(m, pos0 + T)) return -1;
    activations *A = &m->acts;
    if (targets && !A->probs) return tlm_error("forward: the model is set up for generation (last logits only): no loss");
    model_hooks_begin(m);
    const int N = B * T;
    memcpy(A->tokens, tokens, sizeof(int) * N);
    A->has_targets = targets != NULL;
    if (targets) memcpy(A->targets, targets, sizeof(int) * N);
    float l = 0.0f;
    const int parts = split_parts(m, B, T);
    if (parts > 1 && !split_prepare(m, parts, 0)) {
        float part_loss[parts];
#pragma omp parallel num_threads(parts)
        {
            split_enter(omp_get_thread_num());
            for (int p = omp_get_thread_num(); p < parts; p += omp_get_num_threads()) {
                tlm_model v = split_part(m, p, 0);
                part_loss[p] = 0.0f;
                (void)forward_rows(&v, &part_loss[p]); /* (no hooks in a split pass: it cannot fail) */
                m->split->views[p].n_counted = v.acts.n_counted, m->split->views[p].lse_sq_mean = v.acts.lse_sq_mean;
            }
            split_leave();
        }
        if (targets) { /* the means over all counted rows, from the parts' */
            double total = 0.0, total_sq = 0.0;
            int count = 0;
            for (int p = 0; p < parts; p++) {
                const activations *v = &m->split->views[p];
                total += (double)part_loss[p] * v->n_counted, total_sq += (double)v->lse_sq_mean * v->n_counted;
                count += v->n_counted;
            }
            A->n_counted = count;
            l = count ? (float)(total / count) : 0.0f;
            A->lse_sq_mean = count ? (float)(total_sq / count) : 0.0f;
        }
    } else if (forward_rows(m, &l)) {
        return -1;
    }
    if (targets && loss) *loss = l;
    if (m->kv) kv_cache_advance(m->kv, T);
    if (m->hooks && model_hooks_end(m)) return -1;
    /* (a probe copies what it selects out of m->acts here: the pass itself is untouched) */
    if (m->after_pass && m->after_pass(m->after_pass_user, m, 0)) return -1;
    return 0;
}

static int backward_check(tlm_model *m, int need_targets) {
    activations *A = &m->acts;
    if (!A->mem || (need_targets && !A->has_targets) || m->kv)
        return tlm_error("backward: no forward pass with targets to differentiate");
    if (A->lean || !m->p.embed)
        return tlm_error("backward: the model is set up for inference (model_set_mode or bf16 weights)");
    return model_alloc_grads(m);
}

/* the backward over the rows of m->acts (the whole batch's, or a part's), from the gradient of
 * its logits: dlogits_in's rows when given, else the loss's (dloss, over global_count rows),
 * into m->g (added to what it holds) */
static void backward_rows(tlm_model *m, const float *dlogits_in, float dloss, int global_count) {
    const tlm_config *c = &m->cfg;
    activations *A = &m->acts;
    const int B = A->B, T = A->T, N = B * T, d = c->d_model, V = c->vocab_size, L = c->n_layers;
    const size_t Nd = (size_t)N * d, NV = (size_t)N * V;
    if (dlogits_in) {
        memcpy(A->dlogits, dlogits_in, NV * sizeof(float));
    } else {
        vec_zero(A->dlogits, NV);
        crossentropy_backward(A->dlogits, A->probs, A->lse, A->targets, N, V, dloss, global_count, m->z_loss);
    }
    const float *dz = A->dlogits;
    if (c->final_softcap > 0.0f) {
        vec_zero(A->dlogits_raw, NV); /* (softcap_backward accumulates) */
        softcap_backward(A->dlogits_raw, A->dlogits, A->logits, NV, c->final_softcap);
        dz = A->dlogits_raw;
    }
    const float *hL = residual_at(A, 2 * L);
    matmul_backward_into(A->dfinal, m->g.lm_head, NULL, dz, c->final_norm ? A->final.y : hL, m->p.lm_head, N, d, V);
    if (c->final_norm) MODEL_HOOK(m, model_hook_count(c) - 1, A->dfinal, 1);
    float *dhL = A->dres + 2 * (size_t)L * A->stage;
    if (c->final_norm) {
        model_norm_backward(c, dhL, NULL, &m->g.final_norm, A->dfinal, &A->final, &m->p.final_norm, hL, N);
    } else {
        vec_copy(dhL, A->dfinal, Nd);
    }
    for (int l = L - 1; l >= 0; l--) {
        const float *x = residual_at(A, 2 * l);
        float *dx = A->dres + 2 * (size_t)l * A->stage;
        sublayer_backward(m, l, SUB_FFN, x + A->stage, dx + 2 * A->stage, dx + A->stage);
        sublayer_backward(m, l, SUB_ATTN, x, dx + A->stage, dx);
    }
    embedding_backward(m->g.embed, m->g.pos_embed, A->dres, A->tokens, model_embed_scale(c), B, T, d);
}

static int backward_run(tlm_model *m, const float *dlogits_in, float dloss) {
    const tlm_config *c = &m->cfg;
    activations *A = &m->acts;
    const int L = c->n_layers;
    model_hooks_begin(m);
    const int parts = split_parts(m, A->B, A->T);
    if (parts > 1 && !split_prepare(m, parts, 1)) {
        const size_t seq_logits = (size_t)A->T * c->vocab_size;
#pragma omp parallel num_threads(parts)
        {
            const int thread = omp_get_thread_num(), threads = omp_get_num_threads();
            split_enter(thread);
            for (int p = thread; p < parts; p += threads) {
                tlm_model v = split_part(m, p, 1);
                const size_t first = (size_t)split_first(A->B, parts, p);
                backward_rows(&v, dlogits_in ? dlogits_in + first * seq_logits : NULL, dloss, A->n_counted);
            }
#pragma omp barrier
            split_reduce_grads(m, thread, threads);
            split_leave();
        }
    } else {
        backward_rows(m, dlogits_in, dloss, A->n_counted);
    }
    if (m->hooks) { /* the residual stream's gradients are complete only now */
        model_hook_fire(m, 0, A->dres, 1);
        for (int l = 0; l < L; l++) {
            model_hook_fire(m, model_hook_id(l, HL_RESID_PRE), A->dres + 2 * l * A->stage, 1);
            model_hook_fire(m, model_hook_id(l, HL_RESID_MID), A->dres + (2 * l + 1) * A->stage, 1);
            model_hook_fire(m, model_hook_id(l, HL_RESID_POST), A->dres + (2 * l + 2) * A->stage, 1);
        }
        if (model_hooks_end(m)) return -1;
    }
    if (m->after_pass && m->after_pass(m->after_pass_user, m, 1)) return -1;
    return 0;
}

int model_backward(tlm_model *m, float dloss) {
    if (backward_check(m, 1)) return -1;
    return backward_run(m, NULL, dloss);
}

int model_backward_from_logits(tlm_model *m, const float *dlogits) {
    if (backward_check(m, 0)) return -1;
    return backward_run(m, dlogits, 0.0f);
}

void model_set_mode(tlm_model *m, model_mode mode) { m->mode = mode; }

const float *model_last_logits(const tlm_model *m) {
    return m->acts.logits + (size_t)(m->acts.logits_rows - 1) * m->cfg.vocab_size;
}
