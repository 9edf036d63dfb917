/* decode.h — a KV cache for incremental decoding (its API: kv_cache_api.h, included). Attached to a
 * context (ctx->kv), it makes context_forward() continue one sequence: positions start where the
 * cache ends, each layer appends its keys/values and attends over everything cached (kv_cache.c
 * stores it; attention.c and mla.c write and read it). kv_decode_step, the one-token step
 * (decode.c), runs the same block (block.c) in its one-token mode over each component's step,
 * beside the component's forward; each value comes from the same kernel in the same order, so the
 * logits are the full pass's bit for bit (tests/model/test_decode_step.c). */
#ifndef TLM_DECODE_H
#define TLM_DECODE_H

#include "model/kv_cache_api.h"

struct tlm_context;

/* One token through the model with the cache ctx->kv attached: context_forward(ctx, &token, NULL,
 * 1, 1, NULL) bit for bit, in one parallel region per token and without allocating after the first
 * step (which sizes the context's RoPE tables for the cache) (decode.c). Returns the token's logits
 * [V] (in the cache's buffers, valid until the next step; context_last_logits is not updated), or
 * NULL with tlm_error. With an observer or hooks attached it is context_forward itself (and
 * returns context_last_logits). */
const float *kv_decode_step(struct tlm_context *ctx, int token);

#endif
