/* kv_cache_api.h — a KV cache for incremental decoding: made, freed, its length, and the cached
 * attention that the components compute through it (kv_cache.c stores it; attention.c and mla.c
 * write and read it). Attached to a context (ctx->kv), it makes context_forward() continue one
 * sequence: positions start where the cache ends, each layer appends its keys/values and attends
 * over everything cached. The one-token step over it is decode.h's. */
#ifndef TLM_KV_CACHE_API_H
#define TLM_KV_CACHE_API_H

#include "model/config.h"
#include "ops/ops.h"

struct tlm_model;
typedef struct kv_cache kv_cache;

/* queries per block when a chunk of tokens attends through the cache (scratch: this many rows
 * of max_len scores per thread) */
#define KV_QUERY_BLOCK 64

/* A cache for up to max_len positions of model m, for passes on as many threads as the caller's
 * omp_get_max_threads() now (its per-thread scratch; context_threads keeps to it). */
kv_cache *kv_cache_create(const struct tlm_model *m, int max_len);
/* ... for `batch` sequences that advance together (model_forward over [batch, T] rows: each row
 * its own keys and values); start [batch] (NULL: none) each row's first real position (its prompt
 * left-padded to the longest): no key before it is seen, positions count from it
 * (model_forward_padded's rule). */
kv_cache *kv_cache_create_batch(const struct tlm_model *m, int max_len, int batch, const int *start);
int kv_cache_batch(const kv_cache *c);
const int *kv_cache_start(const kv_cache *c); /* NULL when unpadded */
void kv_cache_free(kv_cache *c);
/* floats a cache of max_len positions holds (K and V of every layer that stores its own) */
size_t kv_cache_floats(const tlm_config *cfg, int max_len);
/* bytes a position takes in the cache of every layer (f32); MLA: c_kv + k_pe. And what the same model's
 * cache would take with ordinary multi-head attention (MLA: K of nope + rope dims and V of v_head_dim for
 * every head; otherwise the same as kv_cache_bytes_per_token) */
size_t kv_cache_bytes_per_token(const tlm_config *cfg);
size_t kv_cache_mha_bytes_per_token(const tlm_config *cfg);
void kv_cache_reset(kv_cache *c);
int kv_cache_length(const kv_cache *c); /* positions filled */
int kv_cache_room(const kv_cache *c);   /* positions left */
int kv_cache_threads(const kv_cache *c); /* the most threads a pass through it may run on (its scratch) */
void kv_cache_advance(kv_cache *c, int n);

/* For layer l: appends k, v [batch, T, KV*hd] at the cache's end and computes
 * out [batch, T, H*hd] = attention of q [batch, T, H*hd] over each row's cached keys (causal,
 * windowed, capped, from the row's start). k and v
 * NULL: a layer that shares an earlier layer's keys and values (Gemma 4) attends over that
 * layer's, appended earlier in the same pass; nothing is stored for it. */
void kv_attention_forward(kv_cache *c, int l, float *out, const float *q, const float *k, const float *v, int T,
                          attention_spec spec);

/* Multi-head latent attention (config_mla): for layer l, appends the normed c_kv [T, rkv] and the rotated
 * k_pe [T, dr] at the cache's end (the whole cache entry: rkv + dr floats a position) and computes
 * out [T, H dv] for q [T, H qk] (each head's q_nope first) and qpe [T, H dr] over every cached position.
 * Absorbed (the default): W_UK folded into the query (q_nope W_UK_h), W_UV applied after the weighted sum
 * of c_kv, so no head's keys or values are ever formed; expanded: every cached position's k_nope and v
 * made again from the latent cache (one GEMM per layer and pass), then ordinary attention. */
void kv_mla_attention_forward(kv_cache *c, const struct tlm_model *m, int l, float *out, const float *q,
                              const float *qpe, const float *ckvn, const float *kpe, int T);
/* chooses MLA's decode form (1: absorbed, 0: expanded, which needs f32 kv_b weights); -1 + tlm_error */
int kv_cache_set_mla_absorbed(kv_cache *c, const struct tlm_model *m, int absorbed);
int kv_cache_mla_absorbed(const kv_cache *c);

#endif
