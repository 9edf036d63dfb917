/* kv_cache.h — the KV cache's layout (kv_cache.c), for the components that write and read it
 * (attention.c, mla.c) and the one-token decode step's buffers, laid out with it (decode.c and
 * each component's step). The cache's API is kv_cache_api.h's. Internal to src/model. */
#ifndef TLM_MODEL_KV_CACHE_H
#define TLM_MODEL_KV_CACHE_H

#include "kv_cache_api.h"
#include "model.h"

/* the decode step's buffers, laid out once with the cache: what every thread reads (the
 * projections' outputs, each thread writing its share of the rows) and each thread's own */
typedef struct {
    float *x0;              /* the token's embedding [d] */
    float *qkv, *att, *f;   /* q|k|v [qd + 2 kvd], attention output [qd], a sublayer's F [d] */
    float *gu, *hid;        /* gate|up [2 f] (or up [f]), FFN hidden [f] (f: the widest FFN, dense, expert or shared) */
    float *router, *ey, *sy; /* a mixture of experts: the router's logits [E], the chosen experts' outputs [k, d],
                                the shared expert's [d] */
    float *sgate;           /* the shared expert's gate logit [1] (shared_gate) */
    float *logits;          /* [V] */
    /* Gemma 4's per-layer inputs: the embedding's projection [L P] (scaled), every layer's input [L P],
     * a layer's gate and product [P] and its projection [d] */
    float *ple_ctx, *ple_in, *ple_gate, *ple_prod, *ple_out;
    /* latent attention (mla.c): c_q [rq], the queries [H qk], [c_kv | k_pe] [rkv + dr] (its output: att) */
    float *mla_cq, *mla_q, *mla_ckv;
} step_shared;

typedef struct step_private {
    float *x, *u, *fo, *sum; /* the residual stream, a norm's output, the output norm's, x + F before a post norm [d] */
    float *qn, *kn, *qr, *kr; /* after QK-norm / RoPE [qd], [kvd] */
    float *vn;                /* after the v norm (Gemma 4) [kvd] */
    float *scores;            /* one head's scores [max_len] */
    /* latent attention: norm(c_q) [rq], norm(c_kv) [rkv], the rotated k_pe [dr] and q_pe of the thread's
     * heads [H dr] */
    float *mla_cqn, *mla_ckvn, *mla_kpe, *mla_qpe;
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

/* layer l's keys (or values) of kv head g: [max_len, hd]. Head-major, so one token's attention
 * reads each head's cache front to back, a stream the prefetcher follows; position-major
 * ([max_len, KV*hd], run.c's layout) strides through it one 256-byte row per 3 KB (d 768)
 * (what that cost: docs/performance.md, "Figures behind the code"). */
static inline float *kv_head(const kv_cache *c, float *base, int b, int l, int g) {
    return base + (size_t)b * c->row_floats + c->at[l] + (size_t)g * c->max_len * c->layer_hd[l];
}

/* the first key that the query at position pos of row b sees */
static inline int kv_first_key(const kv_cache *c, int b, int pos, int window) {
    return c->start ? attention_first_key_padded(pos, window, c->start[b]) : attention_first_key(pos, window);
}

#endif
