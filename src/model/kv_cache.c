/* kv_cache.c — the KV cache's storage (see decode.h, kv_cache.h): made, sized, freed, its length.
 * Keys are cached after QK-norm and RoPE, exactly as the full forward feeds them to attention, so
 * a step costs one token's work; what is written and read is the attention's (attention.c:
 * kv_attention_forward, attention_step) and latent attention's (mla.c). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kv_cache.h"
#include "util/error.h"
#include "util/hugepage.h"

/* n floats from base + *used (layout.c's take, for the step's buffers), each buffer on a 64-byte
 * line of its own (ARENA_ALIGN's reason: the matrix-vector kernels read their input once per
 * output row); base NULL counts */
static float *take(float *base, size_t *used, size_t n) {
    float *p = base ? base + *used : NULL;
    *used += (n + 15) & ~(size_t)15;
    return p;
}

static size_t layout_step(kv_cache *c, const tlm_config *cfg, float *base) {
    const size_t d = cfg->d_model, qd = (size_t)config_max_q_dim(cfg), kvd = (size_t)c->kv_dim;
    size_t ff = (size_t)config_max_ff(cfg);
    if (cfg->n_experts > 0 && (size_t)cfg->moe_d_ff > ff) ff = (size_t)cfg->moe_d_ff;
    if (cfg->n_experts > 0 && (size_t)config_shared_ff(cfg) > ff) ff = (size_t)config_shared_ff(cfg);
    size_t used = 0;
    step_shared *s = &c->sh;
    s->x0 = take(base, &used, d);
    s->qkv = take(base, &used, qd + 2 * kvd);
    s->att = take(base, &used, qd);
    s->f = take(base, &used, d);
    s->gu = take(base, &used, 2 * ff);
    s->hid = take(base, &used, ff);
    s->router = take(base, &used, (size_t)cfg->n_experts);
    s->ey = take(base, &used, (size_t)cfg->n_experts_per_tok * d);
    s->sy = take(base, &used, d);
    s->sgate = take(base, &used, cfg->shared_gate ? 1 : 0);
    s->logits = take(base, &used, (size_t)cfg->vocab_size);
    const size_t P = (size_t)cfg->ple_dim, LP = (size_t)cfg->n_layers * P;
    s->ple_ctx = take(base, &used, LP), s->ple_in = take(base, &used, LP);
    s->ple_gate = take(base, &used, P), s->ple_prod = take(base, &used, P);
    s->ple_out = take(base, &used, P ? d : 0);
    const int mla = config_mla(cfg);
    const size_t rq = mla ? (size_t)cfg->q_lora_rank : 0, rkv = mla ? (size_t)cfg->kv_lora_rank : 0,
                 dr = mla ? (size_t)cfg->qk_rope_dim : 0, H = (size_t)cfg->n_heads;
    s->mla_cq = take(base, &used, rq);
    s->mla_q = take(base, &used, mla ? H * (size_t)config_mla_qk_dim(cfg) : 0);
    s->mla_ckv = take(base, &used, rkv + dr);
    for (int t = 0; t < c->n_threads; t++) {
        step_private o;
        o.x = take(base, &used, d), o.u = take(base, &used, d), o.fo = take(base, &used, d);
        o.sum = take(base, &used, d);
        o.qn = take(base, &used, qd), o.qr = take(base, &used, qd);
        o.kn = take(base, &used, kvd), o.kr = take(base, &used, kvd), o.vn = take(base, &used, kvd);
        o.scores = take(base, &used, (size_t)c->max_len);
        o.mla_cqn = take(base, &used, rq), o.mla_ckvn = take(base, &used, rkv);
        o.mla_kpe = take(base, &used, dr), o.mla_qpe = take(base, &used, H * dr);
        if (base) c->own[t] = o;
    }
    return used;
}

kv_cache *kv_cache_create(const tlm_model *m, int max_len) { return kv_cache_create_batch(m, max_len, 1, NULL); }

kv_cache *kv_cache_create_batch(const tlm_model *m, int max_len, int batch, const int *start) {
    const tlm_config *cfg = &m->cfg;
    if (max_len <= 0) return tlm_error("KV cache: length %d must be positive", max_len), NULL;
    if (batch <= 0) return tlm_error("KV cache: batch %d must be positive", batch), NULL;
    for (int b = 0; start && b < batch; b++)
        if (start[b] < 0 || start[b] >= max_len)
            return tlm_error("KV cache: row %d's first real position %d is outside [0, %d)", b, start[b], max_len),
                   NULL;
    if (cfg->position == POS_LEARNED && max_len > cfg->max_seq)
        return tlm_error("KV cache: %d positions exceed max_position_embeddings = %d", max_len, cfg->max_seq), NULL;
    if (config_mla(cfg) && (batch > 1 || start)) /* (the latent cache and its decode hold one sequence) */
        return tlm_error("KV cache: multi-head latent attention decodes one sequence at a time (batch %d asked)",
                         batch),
               NULL;
    kv_cache *c = calloc(1, sizeof *c);
    if (!c) return tlm_error("out of memory for the KV cache"), NULL;
    c->n_layers = cfg->n_layers, c->max_len = max_len, c->kv_dim = config_max_kv_dim(cfg);
    c->n_kv_heads = cfg->n_kv_heads, c->head_dim = cfg->head_dim;
    c->n_threads = omp_get_max_threads();
    c->mla = config_mla(cfg), c->absorbed = 1;
    c->at = malloc(sizeof(size_t) * cfg->n_layers);
    c->layer_kv = malloc(sizeof(int) * cfg->n_layers);
    c->layer_hd = malloc(sizeof(int) * cfg->n_layers);
    size_t n = 0;
    for (int l = 0; c->at && c->layer_kv && c->layer_hd && l < cfg->n_layers; l++) {
        c->layer_kv[l] = config_layer_kv_heads(cfg, l), c->layer_hd[l] = config_layer_head_dim(cfg, l);
        const int src = config_kv_source(cfg, l);
        if (src != l) { /* (shared keys and values: stored once, by the layer that makes them) */
            c->at[l] = c->at[src];
            continue;
        }
        c->at[l] = n;
        if (c->mla) c->layer_kv[l] = 1, c->layer_hd[l] = config_mla_cache_dim(cfg); /* (one latent row a position) */
        n += (size_t)max_len * c->layer_kv[l] * c->layer_hd[l];
    }
    c->batch = batch, c->row_floats = n;
    n *= (size_t)batch;
    c->k = malloc((n ? n : 1) * sizeof(float));
    c->v = malloc((c->mla ? 1 : n ? n : 1) * sizeof(float));
    if (c->mla) c->mla_scratch = malloc(sizeof(float) * 2 * (size_t)cfg->kv_lora_rank * c->n_threads);
    tlm_advise_huge(c->k, n * sizeof(float));
    tlm_advise_huge(c->v, n * sizeof(float));
    /* cleared now, as llama.cpp clears its cache when it makes a context: the pages' first touch
     * (zeroing by the kernel; under memory pressure its compaction for huge pages) is paid here, not
     * inside the prompt's pass, where it made a 512-token prompt's time vary by turns
     * (docs/performance.md, "Figures behind the code") */
    if (c->k) memset(c->k, 0, n * sizeof(float));
    if (c->v && !c->mla) memset(c->v, 0, n * sizeof(float));
    if (start) {
        c->start = malloc(sizeof(int) * (size_t)batch);
        if (c->start) memcpy(c->start, start, sizeof(int) * (size_t)batch);
    }
    c->scratch = malloc((size_t)KV_QUERY_BLOCK * max_len * c->n_threads * sizeof(float));
    const size_t step_floats = layout_step(c, cfg, NULL);
    c->step_mem = aligned_alloc(64, step_floats * sizeof(float));
    c->own = malloc(sizeof(step_private) * c->n_threads);
    if (c->step_mem && c->own) layout_step(c, cfg, c->step_mem);
    if (!c->at || !c->layer_kv || !c->layer_hd || !c->k || !c->v || !c->scratch || !c->step_mem || !c->own ||
        (c->mla && !c->mla_scratch) || (start && !c->start)) {
        kv_cache_free(c);
        return tlm_error("out of memory for a KV cache of %d positions", max_len), NULL;
    }
    return c;
}

void kv_cache_free(kv_cache *c) {
    if (!c) return;
    free(c->k), free(c->v), free(c->scratch), free(c->scratch16), free(c->step_mem), free(c->own);
    free(c->mla_scratch), free(c->expand);
    free(c->at), free(c->layer_kv), free(c->layer_hd), free(c->start), free(c);
}

int kv_cache_batch(const kv_cache *c) { return c->batch; }
const int *kv_cache_start(const kv_cache *c) { return c->start; }

void kv_cache_reset(kv_cache *c) { c->len = 0; }
int kv_cache_length(const kv_cache *c) { return c->len; }
int kv_cache_room(const kv_cache *c) { return c->max_len - c->len; }
int kv_cache_threads(const kv_cache *c) { return c->n_threads; }
void kv_cache_advance(kv_cache *c, int n) { c->len += n; }

size_t kv_cache_floats(const tlm_config *cfg, int max_len) {
    size_t n = 0;
    if (config_mla(cfg)) return (size_t)cfg->n_layers * max_len * config_mla_cache_dim(cfg);
    for (int l = 0; l < cfg->n_layers; l++)
        if (config_kv_source(cfg, l) == l)
            n += 2 * (size_t)max_len * config_layer_kv_heads(cfg, l) * config_layer_head_dim(cfg, l);
    return n;
}

size_t kv_cache_bytes_per_token(const tlm_config *cfg) { return sizeof(float) * kv_cache_floats(cfg, 1); }

size_t kv_cache_mha_bytes_per_token(const tlm_config *cfg) {
    if (!config_mla(cfg)) return kv_cache_bytes_per_token(cfg);
    return sizeof(float) * (size_t)cfg->n_layers * cfg->n_heads * (config_mla_qk_dim(cfg) + cfg->v_head_dim);
}
