/* decode.c — the KV cache (see decode.h). Keys are cached after QK-norm and RoPE, exactly
 * as the full forward feeds them to attention, so a step costs one token's work. One token
 * attends with a dot product per cached key; a chunk of prompt tokens with two GEMMs per head
 * and block of KV_QUERY_BLOCK queries, into scratch laid out once with the cache (in mixed
 * precision on AMX, bf16 products in blocks of KV_BF16_BLOCK: kv_chunk_attention_bf16).
 *
 * kv_decode_step runs one token through the whole model in ONE parallel region (below). */
#include "decode.h"
#include "ops/quant.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "block.h"
#include "util/error.h"
#include "util/f16.h"
#include "util/hugepage.h"
#include "util/profile.h"

/* the decode step's buffers, laid out once with the cache: what every thread reads (the
 * projections' outputs, each thread writing its share of the rows) and each thread's own */
typedef struct {
    float *x0;              /* the token's embedding [d] */
    float *qkv, *att, *f;   /* q|k|v [qd + 2 kvd], attention output [qd], a sublayer's F [d] */
    float *gu, *hid;        /* gate|up [2 f] (or up [f]), FFN hidden [f] (f: the widest FFN, dense, expert or shared) */
    float *router, *ey, *sy; /* a mixture of experts: the router's logits [E], the chosen experts' outputs [k, d],
                                the shared expert's [d] */
    float *logits;          /* [V] */
    /* Gemma 4's per-layer inputs: the embedding's projection [L P] (scaled), every layer's input [L P],
     * a layer's gate and product [P] and its projection [d] */
    float *ple_ctx, *ple_in, *ple_gate, *ple_prod, *ple_out;
} step_shared;

typedef struct {
    float *x, *u, *fo, *sum; /* the residual stream, a norm's output, the output norm's, x + F before a post norm [d] */
    float *qn, *kn, *qr, *kr; /* after QK-norm / RoPE [qd], [kvd] */
    float *vn;                /* after the v norm (Gemma 4) [kvd] */
    float *scores;            /* one head's scores [max_len] */
} step_private;

struct kv_cache {
    int n_layers, max_len, len, kv_dim, n_kv_heads, head_dim;
    /* multi-head latent attention: each layer caches [ckvn | kpe] (kv_lora_rank + qk_rope_head_dim floats) a
     * position in k (position-major), nothing in v; absorbed: decode through W_UK folded into the query and
     * W_UV after the weighted sum (else the expanded form: every cached position's k_nope and v computed
     * again from the latent cache each pass, into `expand` [max_len, H (dn + dv)]) */
    int mla, absorbed;
    float *mla_scratch; /* per thread: the absorbed query and the weighted sum of c_kv [2 kv_lora_rank] */
    float *expand;
    int batch;          /* sequences, each with its own keys and values (row_floats apart) */
    size_t row_floats;
    int *start;         /* [batch] each row's first real position (left padding), or NULL: none */
    float *k, *v;       /* each stored layer's [KV, max_len, hd] after the last's: each head's keys contiguous
                           (see kv_head); a layer that shares an earlier one's keys stores none */
    size_t *at;         /* [L] where layer l's keys start in k (and its values in v): its source layer's */
    int *layer_kv, *layer_hd; /* [L] each layer's kv heads and head_dim (Gemma 4's layer types differ) */
    float *scratch;     /* scores of KV_QUERY_BLOCK queries: KV_QUERY_BLOCK * max_len per thread */
    float *scratch16;   /* a chunk's attention in mixed precision (kv_chunk_attention_bf16), made at the
                           first such chunk: per thread, S of a block [KV_BF16_BLOCK, max_len] in f32, then as
                           bf16 its P [KV_BF16_BLOCK, max_len], queries [KV_BF16_BLOCK, hd] and the head's keys
                           and values [max_len, hd] each */
    size_t scratch16_floats; /* (per thread, a multiple of 16: each thread's part on a 64-byte line) */
    int n_threads;
    float *step_mem;    /* kv_decode_step's buffers */
    step_shared sh;
    step_private *own;  /* [n_threads] */
};

/* n floats from *p, each buffer on a 64-byte line of its own (ARENA_ALIGN's reason: the matrix-vector
 * kernels read their input once per output row); base NULL counts */
static float *carve(float *base, size_t *used, size_t n) {
    float *p = base ? base + *used : NULL;
    *used += (n + 15) & ~(size_t)15;
    return p;
}

static size_t layout_step(kv_cache *c, const tlm_config *cfg, float *base) {
    const size_t d = cfg->d_model, qd = (size_t)config_max_q_dim(cfg), kvd = (size_t)c->kv_dim;
    size_t ff = (size_t)config_max_ff(cfg);
    if (cfg->n_experts > 0 && (size_t)cfg->moe_d_ff * (cfg->n_shared_experts > 1 ? cfg->n_shared_experts : 1) > ff)
        ff = (size_t)cfg->moe_d_ff * (cfg->n_shared_experts > 1 ? cfg->n_shared_experts : 1);
    size_t used = 0;
    step_shared *s = &c->sh;
    s->x0 = carve(base, &used, d);
    s->qkv = carve(base, &used, qd + 2 * kvd);
    s->att = carve(base, &used, qd);
    s->f = carve(base, &used, d);
    s->gu = carve(base, &used, 2 * ff);
    s->hid = carve(base, &used, ff);
    s->router = carve(base, &used, (size_t)cfg->n_experts);
    s->ey = carve(base, &used, (size_t)cfg->n_experts_per_tok * d);
    s->sy = carve(base, &used, d);
    s->logits = carve(base, &used, (size_t)cfg->vocab_size);
    const size_t P = (size_t)cfg->ple_dim, LP = (size_t)cfg->n_layers * P;
    s->ple_ctx = carve(base, &used, LP), s->ple_in = carve(base, &used, LP);
    s->ple_gate = carve(base, &used, P), s->ple_prod = carve(base, &used, P);
    s->ple_out = carve(base, &used, P ? d : 0);
    for (int t = 0; t < c->n_threads; t++) {
        step_private o;
        o.x = carve(base, &used, d), o.u = carve(base, &used, d), o.fo = carve(base, &used, d);
        o.sum = carve(base, &used, d);
        o.qn = carve(base, &used, qd), o.qr = carve(base, &used, qd);
        o.kn = carve(base, &used, kvd), o.kr = carve(base, &used, kvd), o.vn = carve(base, &used, kvd);
        o.scores = carve(base, &used, (size_t)c->max_len);
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

/* layer l's keys (or values) of kv head g: [max_len, hd]. Head-major, so one token's attention
 * reads each head's cache front to back, a stream the prefetcher follows; position-major
 * ([max_len, KV*hd], run.c's layout) strides through it one 256-byte row per 3 KB (d 768)
 * (what that cost: docs/performance.md, "Figures behind the code"). */
static float *kv_head(const kv_cache *c, float *base, int b, int l, int g) {
    return base + (size_t)b * c->row_floats + c->at[l] + (size_t)g * c->max_len * c->layer_hd[l];
}

/* the first key that the query at position pos of row b sees */
static int kv_first_key(const kv_cache *c, int b, int pos, int window) {
    return c->start ? attention_first_key_padded(pos, window, c->start[b]) : attention_first_key(pos, window);
}

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

void kv_mla_attention_forward(kv_cache *c, const struct tlm_model *m, int l, float *out, const float *q,
                              const float *qpe, const float *ckvn, const float *kpe, int T) {
    const tlm_config *cfg = &m->cfg;
    const linear_params *kvb = &m->p.layers[l].kv_b;
    const int H = cfg->n_heads, dn = cfg->qk_nope_dim, dr = cfg->qk_rope_dim, dv = cfg->v_head_dim;
    const int qk = dn + dr, rkv = cfg->kv_lora_rank, cw = rkv + dr, kvw = dn + dv, len = c->len;
    const float scale = model_layer_attention(cfg, l).scale;
    float *cache = c->k + c->at[l];
    for (int t = 0; t < T; t++) { /* append [ckvn | kpe] of each new position */
        memcpy(cache + (size_t)(len + t) * cw, ckvn + (size_t)t * rkv, sizeof(float) * rkv);
        memcpy(cache + (size_t)(len + t) * cw + rkv, kpe + (size_t)t * dr, sizeof(float) * dr);
    }
    const int n_all = len + T;
    if (!c->absorbed) { /* expanded: every cached position's k_nope and v for every head, again (a matrix-vector
                           product a position: a GEMM of a new row count each step would be a new oneDNN kernel) */
#pragma omp parallel for schedule(static)
        for (int j = 0; j < n_all; j++)
            matvec_part(c->expand + (size_t)j * H * kvw, cache + (size_t)j * cw, kvb->w, NULL, NULL, rkv, 0, H * kvw);
    }
#pragma omp parallel for collapse(2) schedule(static)
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            const int tid = omp_get_thread_num(), n_keys = len + t + 1;
            float *s = c->scratch + (size_t)KV_QUERY_BLOCK * c->max_len * tid;
            float *qa = c->mla_scratch + (size_t)2 * rkv * tid, *ol = qa + rkv;
            const float *qn = q + ((size_t)t * H + h) * qk, *qp = qpe + ((size_t)t * H + h) * dr;
            float *o = out + ((size_t)t * H + h) * dv;
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
}

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
 * layer: after the router and two per chosen expert, step_moe; Gemma 4's per-layer input: two more,
 * and two per token for the inputs of every layer, step_ple_inputs). Every value is
 * computed by the same kernel, in the same order, as model_forward computes it (the row forms of
 * ops.h), so the logits are bit for bit those of model_forward (tests/model/test_decode_step.c). */

typedef struct {
    const tlm_model *m;
    const tlm_context *run; /* (its RoPE tables) */
    kv_cache *c;
    int id, nt, pos, token;
    step_private *o;
} step_ctx;

static void share(int n, const step_ctx *s, int *lo, int *hi) {
    *lo = (int)((long long)n * s->id / s->nt);
    *hi = (int)((long long)n * (s->id + 1) / s->nt);
}

/* linear_forward's choice for a few rows: the quantized weights when there are, the f32 ones
 * (a mixed-precision bf16 mirror beside them serves only products over many rows), else the bf16 ones */
static void step_linear(float *y, const float *x, const linear_params *lp, int IC, int o0, int o1) {
    if (lp->wq)
        matvec_quant_part(y, x, lp->wq, lp->wq_type, lp->b, IC, o0, o1);
    else
        matvec_part(y, x, lp->w, lp->w ? NULL : lp->w16, lp->b, IC, o0, o1);
}

/* rows [o0, o1) of projections stored back to back (q|k|v, gate|up) into y, their outputs side by
 * side: through the fused view when there is one, else part by part (quantized parts of
 * different types); each output is the same dot product either way */
static void step_linear_parts(float *y, const float *x, const linear_params *fused, const linear_params *const *parts,
                              const int *widths, int n_parts, int IC, int o0, int o1) {
    if (fused->w || fused->w16 || fused->wq) {
        step_linear(y, x, fused, IC, o0, o1);
        return;
    }
    for (int i = 0, base = 0; i < n_parts; base += widths[i], i++) {
        const int lo = o0 > base ? o0 - base : 0, hi = o1 - base < widths[i] ? o1 - base : widths[i];
        if (hi > lo) step_linear(y + base, x, parts[i], IC, lo, hi);
    }
}

/* model_norm_forward's arithmetic on one row (the statistics it saves are not needed) */
static void step_norm(const tlm_config *c, float *y, const norm_params *p, const float *x) {
    /* (profiled on thread 0 only: every thread normalizes its own copy of the row at the same time,
     * so thread 0's time is the step's; kv_decode_step quiets the others) */
    PROF_SCOPE("decode_norm");
    float mean;
    if (c->norm == NORM_DYT)
        dyt_row(y, x, p->a[0], p->w, p->b, c->d_model);
    else if (c->norm == NORM_LAYERNORM)
        layernorm_row(y, &mean, x, p->w, p->b, c->d_model, c->norm_eps);
    else
        rmsnorm_row(y, x, p->w, config_norm_offset(c), c->d_model, c->norm_eps);
}

/* QK-norm rows of one projection [n_heads * hd] of layer l (per head, or over all of it): rows [r0, r1) */
static void step_qk_norm(const tlm_config *c, int l, float *y, const float *x, const float *w, int n_heads, int h0,
                         int h1) {
    int rows, cols;
    model_qk_norm_shape(c, l, 1, n_heads, &rows, &cols);
    if (rows == 1) h0 = 0, h1 = 1; /* (over the whole projection: every thread the whole row) */
    for (int r = h0; r < h1; r++)
        rmsnorm_row(y + (size_t)r * cols, x + (size_t)r * cols, w, config_norm_offset(c), cols, c->norm_eps);
}

/* F of the attention sublayer of layer l on u (the thread's) into s->c->sh.f (shared), as
 * attention_sublayer_forward computes it for one row: the layer's own head_dim and kv heads (Gemma 4's
 * layer types), q alone in a layer that reads an earlier layer's keys and values (from that layer's
 * cache, written earlier in this step), v the k projection in a K = V layer, the v norm per head */
static void step_attention(const step_ctx *s, int l, const float *u) {
    const tlm_model *m = s->m;
    const tlm_config *cfg = &m->cfg;
    kv_cache *c = s->c;
    const layer_params *P = &m->p.layers[l];
    const int d = cfg->d_model, hd = config_layer_head_dim(cfg, l), H = cfg->n_heads;
    const int KV = config_layer_kv_heads(cfg, l), group = H / KV, qd = H * hd, kvd = KV * hd;
    const int own = config_kv_source(cfg, l) == l, k_eq_v = own && config_layer_k_eq_v(cfg, l);
    const int n_parts = !own ? 1 : k_eq_v ? 2 : 3;
    int lo, hi;
    share(qd + (n_parts - 1) * kvd, s, &lo, &hi);
    const linear_params *qkv_parts[3] = {&P->q, &P->k, &P->v};
    const int qkv_widths[3] = {qd, kvd, kvd};
    step_linear_parts(c->sh.qkv, u, &P->qkv, qkv_parts, qkv_widths, n_parts, d, lo, hi);
#pragma omp barrier
    const float *q = c->sh.qkv, *k = q + qd, *v = k_eq_v ? k : k + kvd, *qn = q, *kn = k;
    int g0, g1;
    share(KV, s, &g0, &g1); /* this thread's kv heads, and their query heads */
    const int h0 = g0 * group, h1 = g1 * group;
    if (cfg->qk_norm != QK_NORM_NONE) {
        step_qk_norm(cfg, l, s->o->qn, q, P->q_norm, H, h0, h1);
        if (own) step_qk_norm(cfg, l, s->o->kn, k, P->k_norm, KV, g0, g1);
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
    share(d, s, &lo, &hi);
    step_linear(c->sh.f, c->sh.att, &P->o, qd, lo, hi);
#pragma omp barrier
}

/* Gemma 4's per-layer inputs of every layer for this token, as ple_inputs_forward computes them:
 * the embedding's projection (rows shared out, each thread scaling its own), then each thread its
 * share of the layers' slices: RMSNorm, plus the token table's row * sqrt(P), / sqrt(2) */
static void step_ple_inputs(const step_ctx *s) {
    const tlm_model *m = s->m;
    const tlm_config *cfg = &m->cfg;
    const step_shared *sh = &s->c->sh;
    const int d = cfg->d_model, L = cfg->n_layers, Pd = cfg->ple_dim, LP = L * Pd;
    const float ks = 1.0f / sqrtf((float)d), r2 = 1.0f / sqrtf(2.0f), es = sqrtf((float)Pd);
    int lo, hi;
    share(LP, s, &lo, &hi);
    step_linear(sh->ple_ctx, sh->x0, &m->p.ple_model_proj, d, lo, hi);
    for (int i = lo; i < hi; i++) sh->ple_ctx[i] *= ks;
#pragma omp barrier
    share(L, s, &lo, &hi);
    const float *row = m->p.ple_embed + (size_t)s->token * LP;
    for (int j = lo; j < hi; j++) {
        float *y = sh->ple_in + (size_t)j * Pd;
        rmsnorm_row(y, sh->ple_ctx + (size_t)j * Pd, m->p.ple_model_norm, config_norm_offset(cfg), Pd, cfg->norm_eps);
        for (int i = 0; i < Pd; i++) y[i] = (y[i] + row[(size_t)j * Pd + i] * es) * r2;
    }
#pragma omp barrier
}

/* layer l's tail on the thread's stream x (in place), as layer_tail_forward: x + N(proj(act(gate x) *
 * its per-layer input)), then times the layer scalar */
static void step_tail(const step_ctx *s, int l, float *x) {
    const tlm_model *m = s->m;
    const tlm_config *cfg = &m->cfg;
    const step_shared *sh = &s->c->sh;
    const layer_params *P = &m->p.layers[l];
    const int d = cfg->d_model, Pd = cfg->ple_dim;
    const float *sum = x;
    if (Pd > 0) {
        int lo, hi;
        share(Pd, s, &lo, &hi);
        step_linear(sh->ple_gate, x, &P->ple_gate, d, lo, hi);
        glu_forward_range(sh->ple_prod, sh->ple_gate, sh->ple_in + (size_t)l * Pd, (size_t)lo, (size_t)hi,
                          model_ffn_activation(cfg));
#pragma omp barrier
        share(d, s, &lo, &hi);
        step_linear(sh->ple_out, sh->ple_prod, &P->ple_proj, Pd, lo, hi);
#pragma omp barrier
        step_norm(cfg, s->o->fo, &P->ple_norm, sh->ple_out);
        for (int i = 0; i < d; i++) s->o->sum[i] = x[i] + s->o->fo[i];
        sum = s->o->sum;
    }
    const float sc = cfg->layer_scalar ? P->scalar[0] : 1.0f;
    for (int i = 0; i < d; i++) x[i] = sc * sum[i];
}

/* F of the feed-forward sublayer of layer l on u into s->c->sh.f */
static void step_ffn(const step_ctx *s, int l, const float *u) {
    const tlm_config *cfg = &s->m->cfg;
    const step_shared *sh = &s->c->sh;
    const layer_params *P = &s->m->p.layers[l];
    const int d = cfg->d_model, ff = config_layer_ff(cfg, l); /* (Gemma 4's double-wide layers) */
    int lo, hi;
    share(ff, s, &lo, &hi);
    if (cfg->ffn == FFN_GELU) {
        step_linear(sh->gu, u, &P->up, d, lo, hi);
        act_forward_range(sh->hid, sh->gu, (size_t)lo, (size_t)hi, ACT_GELU_TANH);
    } else { /* the same rows of gate and of up (fused: up's rows follow gate's), then their GLU */
        const linear_params *parts[2] = {&P->gate, &P->up};
        const int widths[2] = {ff, ff};
        step_linear_parts(sh->gu, u, &P->gate_up, parts, widths, 2, d, lo, hi);
        step_linear_parts(sh->gu, u, &P->gate_up, parts, widths, 2, d, ff + lo, ff + hi);
        glu_forward_range(sh->hid, sh->gu, sh->gu + ff, (size_t)lo, (size_t)hi, model_ffn_activation(cfg));
    }
#pragma omp barrier
    share(d, s, &lo, &hi);
    step_linear(sh->f, sh->hid, &P->down, ff, lo, hi);
#pragma omp barrier
}

/* F of a mixture-of-experts layer l on u into s->c->sh.f, as moe_forward computes it for one row:
 * the router's rows shared out, then every thread routes (the same bits on each), then each chosen
 * expert as a dense FFN (its gate and up rows, the GLU, its down rows: two barriers), the shared
 * expert, and each thread its share of f = sum_j w_j y_j (+ shared), in moe_forward's order */
static void step_moe(const step_ctx *s, int l, const float *u) {
    const tlm_config *cfg = &s->m->cfg;
    const step_shared *sh = &s->c->sh;
    const layer_params *P = &s->m->p.layers[l];
    const int d = cfg->d_model, E = cfg->n_experts, k = cfg->n_experts_per_tok, fe = cfg->moe_d_ff;
    const int fs = fe * cfg->n_shared_experts;
    const size_t stride = moe_expert_stride(cfg);
    const activation act = model_ffn_activation(cfg);
    int lo, hi;
    share(E, s, &lo, &hi);
    step_linear(sh->router, u, &P->router, d, lo, hi);
#pragma omp barrier
    float p[TLM_MAX_EXPERTS], w[TLM_MAX_EXPERTS], choice[TLM_MAX_EXPERTS];
    int idx[TLM_MAX_EXPERTS];
    unsigned char allow[TLM_MAX_EXPERTS];
    moe_route_row(cfg, P->score_bias, P->expert_scale, sh->router, p, idx, w, choice, allow);
    for (int j = 0; j < k; j++) {
        const linear_params gate = moe_expert(&P->expert_gate, idx[j], stride),
                            up = moe_expert(&P->expert_up, idx[j], stride),
                            down = moe_expert(&P->expert_down, idx[j], stride);
        share(fe, s, &lo, &hi);
        step_linear(sh->gu, u, &gate, d, lo, hi);
        step_linear(sh->gu + fe, u, &up, d, lo, hi);
        glu_forward_range(sh->hid, sh->gu, sh->gu + fe, (size_t)lo, (size_t)hi, act);
#pragma omp barrier
        share(d, s, &lo, &hi);
        step_linear(sh->ey + (size_t)j * d, sh->hid, &down, fe, lo, hi);
#pragma omp barrier /* (the next expert writes hid) */
    }
    if (fs) {
        share(fs, s, &lo, &hi);
        step_linear(sh->gu, u, &P->shared_gate, d, lo, hi);
        step_linear(sh->gu + fs, u, &P->shared_up, d, lo, hi);
        glu_forward_range(sh->hid, sh->gu, sh->gu + fs, (size_t)lo, (size_t)hi, act);
#pragma omp barrier
        share(d, s, &lo, &hi);
        step_linear(sh->sy, sh->hid, &P->shared_down, fs, lo, hi);
    }
    share(d, s, &lo, &hi); /* (the rows of ey and sy this thread wrote itself) */
    for (int i = lo; i < hi; i++) {
        float acc = 0.0f;
        for (int j = 0; j < k; j++) acc += w[j] * sh->ey[(size_t)j * d + i];
        if (fs) acc += sh->sy[i];
        sh->f[i] = acc;
    }
#pragma omp barrier
}

/* ---- the step's way of running a block (block.h): one row, every thread of the region ------------ */

static block_bufs step_bufs(void *run, int l, sublayer_kind k) {
    const step_ctx *s = run;
    (void)l, (void)k;
    return (block_bufs){.u = s->o->u, .f = s->c->sh.f, .fo = s->o->fo, .sum = s->o->sum};
}

static void step_block_norm(void *run, int l, sublayer_kind k, block_norm which, float *y, const float *x) {
    const step_ctx *s = run;
    step_norm(&s->m->cfg, y, block_norm_params(&s->m->p, l, k, which), x);
}

static void step_block_attention(void *run, int l, const float *u, float *f) {
    (void)f; /* (into the shared F, step_bufs') */
    step_attention(run, l, u);
}
static void step_block_ffn(void *run, int l, const float *u, float *f) {
    (void)f;
    step_ffn(run, l, u);
}
static void step_block_moe(void *run, int l, const float *u, float *f) {
    (void)f;
    step_moe(run, l, u);
}
static void step_block_tail(void *run, int l, const float *x, float *out) {
    (void)x; /* (in place: x is out) */
    step_tail(run, l, out);
}

static void step_add(void *run, float *sum, const float *x, float alpha, const float *fo) {
    const int d = ((const step_ctx *)run)->m->cfg.d_model;
    if (x && alpha != 1.0f)
        for (int i = 0; i < d; i++) sum[i] = alpha * x[i] + fo[i];
    else if (x)
        for (int i = 0; i < d; i++) sum[i] = x[i] + fo[i];
    else
        memcpy(sum, fo, sizeof(float) * d);
}

/* (no latent attention, no Gemma 4 MoE block, no points: step_applies) */
static const block_mode DECODE_STEP = {.bufs = step_bufs,
                                       .norm = step_block_norm,
                                       .attention = step_block_attention,
                                       .ffn = step_block_ffn,
                                       .moe = step_block_moe,
                                       .tail = step_block_tail,
                                       .add = step_add};

/* whether the step can run this pass: no observer or hook (they need model_forward's activations),
 * and no Gemma 4 MoE block or latent attention (those decode through model_forward with the cache: the same function,
 * without the one-region step) */
static int step_applies(const tlm_context *ctx) {
    const tlm_model *m = ctx->m;
    return !m->cfg.moe_block && !config_mla(&m->cfg) && !ctx->hooks && ctx->n_observers == 0 && ctx->kv->batch == 1;
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
        if (cfg->ple_dim > 0) step_ple_inputs(&s);
        const int quiet = tlm_prof_quiet;
        tlm_prof_quiet = quiet || s.id != 0;
        const float *x = c->sh.x0; /* (read by all; from the first sublayer on each thread's own copy) */
        for (int l = 0; l < cfg->n_layers; l++) {
            block_forward(&DECODE_STEP, &s, cfg, l, x, s.o->x, config_has_layer_tail(cfg) ? s.o->x : NULL, s.o->x);
            x = s.o->x;
        }
        const float *h = x;
        if (cfg->final_norm) {
            step_norm(cfg, s.o->u, &m->p.final_norm, x);
            h = s.o->u;
        }
        int lo, hi;
        share(V, &s, &lo, &hi);
        const linear_params head = {
            .w = m->p.lm_head, .w16 = m->p.lm_head16, .wq = m->p.lm_head_q, .wq_type = m->p.lm_head_q_type};
        step_linear(c->sh.logits, h, &head, d, lo, hi);
        if (cfg->final_softcap > 0.0f)
            softcap_forward_range(c->sh.logits, c->sh.logits, (size_t)lo, (size_t)hi, cfg->final_softcap);
        tlm_prof_quiet = quiet;
    }
    c->len++;
    return c->sh.logits;
}
