/* decode.c — the KV cache (see decode.h). Keys are cached after QK-norm and RoPE, exactly
 * as the full forward feeds them to attention, so a step costs one token's work. One token
 * attends with a dot product per cached key; a chunk of prompt tokens with two GEMMs per head
 * and block of KV_QUERY_BLOCK queries, into scratch laid out once with the cache. */
#include "decode.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "util/error.h"
#include "util/hugepage.h"

struct kv_cache {
    int n_layers, max_len, len, kv_dim, n_kv_heads, head_dim;
    float *k, *v;       /* [L, KV, max_len, hd]: each head's keys contiguous (see kv_head) */
    float *scratch;     /* scores of KV_QUERY_BLOCK queries: KV_QUERY_BLOCK * max_len per thread */
    int n_threads;
};

kv_cache *kv_cache_create(tlm_model *m, int max_len) {
    const tlm_config *cfg = &m->cfg;
    if (max_len <= 0) return tlm_error("KV cache: length %d must be positive", max_len), NULL;
    if (cfg->position == POS_LEARNED && max_len > cfg->max_seq)
        return tlm_error("KV cache: %d positions exceed max_position_embeddings = %d", max_len, cfg->max_seq), NULL;
    kv_cache *c = calloc(1, sizeof *c);
    if (!c) return tlm_error("out of memory for the KV cache"), NULL;
    c->n_layers = cfg->n_layers, c->max_len = max_len, c->kv_dim = cfg->n_kv_heads * cfg->head_dim;
    c->n_kv_heads = cfg->n_kv_heads, c->head_dim = cfg->head_dim;
    c->n_threads = omp_get_max_threads();
    size_t n = (size_t)c->n_layers * max_len * c->kv_dim;
    c->k = malloc(n * sizeof(float));
    c->v = malloc(n * sizeof(float));
    tlm_advise_huge(c->k, n * sizeof(float));
    tlm_advise_huge(c->v, n * sizeof(float));
    c->scratch = malloc((size_t)KV_QUERY_BLOCK * max_len * c->n_threads * sizeof(float));
    if (!c->k || !c->v || !c->scratch || model_ensure_rope(m, max_len)) {
        kv_cache_free(c);
        return tlm_error("out of memory for a KV cache of %d positions", max_len), NULL;
    }
    return c;
}

void kv_cache_free(kv_cache *c) {
    if (!c) return;
    free(c->k), free(c->v), free(c->scratch), free(c);
}

void kv_cache_reset(kv_cache *c) { c->len = 0; }
int kv_cache_length(const kv_cache *c) { return c->len; }
int kv_cache_room(const kv_cache *c) { return c->max_len - c->len; }
void kv_cache_advance(kv_cache *c, int n) { c->len += n; }

/* layer l's keys (or values) of kv head g: [max_len, hd]. Head-major, so one token's attention
 * reads each head's cache front to back, a stream the prefetcher follows; position-major
 * ([max_len, KV*hd], run.c's layout) strides through it one 256-byte row per 3 KB (d 768):
 * 0.5 of 9.6 ms per token on the 110M shape at ~100 positions. */
static float *kv_head(const kv_cache *c, float *base, int l, int g) {
    return base + ((size_t)l * c->n_kv_heads + g) * c->max_len * c->head_dim;
}

void kv_attention_forward(kv_cache *c, int l, float *out, const float *q, const float *k, const float *v, int T,
                          attention_spec spec) {
    const int H = spec.n_heads, group = H / spec.n_kv_heads, hd = spec.head_dim, kvd = c->kv_dim;
    const int qrow = H * hd, len = c->len;
    for (int g = 0; g < c->n_kv_heads; g++) /* append: row t of head g at position len + t */
        for (int t = 0; t < T; t++) {
            memcpy(kv_head(c, c->k, l, g) + (size_t)(len + t) * hd, k + (size_t)t * kvd + (size_t)g * hd, sizeof(float) * hd);
            memcpy(kv_head(c, c->v, l, g) + (size_t)(len + t) * hd, v + (size_t)t * kvd + (size_t)g * hd, sizeof(float) * hd);
        }
    if (T == 1) { /* one new token: a dot product per cached key, heads in parallel */
#pragma omp parallel for schedule(static)
        for (int h = 0; h < H; h++)
            attention_row(out + (size_t)h * hd, c->scratch + (size_t)KV_QUERY_BLOCK * c->max_len * omp_get_thread_num(),
                          q + (size_t)h * hd, kv_head(c, c->k, l, h / group), kv_head(c, c->v, l, h / group), hd,
                          attention_first_key(len, spec.window), len + 1, hd, spec.scale, spec.softcap);
        return;
    }
    /* a chunk of tokens: per (query block, head) S = scale Q K^T over every key up to the block's
     * last position, masked softmax row by row (in place), O = P V */
    const int blocks = (T + KV_QUERY_BLOCK - 1) / KV_QUERY_BLOCK;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < blocks; b++)
        for (int h = 0; h < H; h++) {
            const int t0 = b * KV_QUERY_BLOCK, rows = T - t0 < KV_QUERY_BLOCK ? T - t0 : KV_QUERY_BLOCK;
            const int n_keys = len + t0 + rows; /* keys visible to the block's last query */
            const float *kg = kv_head(c, c->k, l, h / group), *vg = kv_head(c, c->v, l, h / group);
            float *S = c->scratch + (size_t)KV_QUERY_BLOCK * c->max_len * omp_get_thread_num();
            gemm(0, 1, rows, n_keys, hd, spec.scale, q + (size_t)t0 * qrow + (size_t)h * hd, qrow, kg, hd, 0.0f, S,
                 n_keys);
            for (int r = 0; r < rows; r++) {
                const int pos = len + t0 + r;
                float *s = S + (size_t)r * n_keys;
                attention_softmax_row(s, s, n_keys, attention_first_key(pos, spec.window), pos, spec.softcap);
            }
            gemm(0, 0, rows, hd, n_keys, 1.0f, S, n_keys, vg, hd, 0.0f, out + (size_t)t0 * qrow + (size_t)h * hd, qrow);
        }
}
