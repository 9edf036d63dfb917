/* step.h — one generation step: tokens in through a context's KV cache, each row's next token
 * out. `tinylm generate` (generate.c), tlm_gen_* and tlm_gen_batch_* (api.c) all generate with
 * these two functions, so one seed gives the same tokens through each. */
#ifndef TLM_INFER_STEP_H
#define TLM_INFER_STEP_H

#include <stdint.h>

#include "infer/sampler.h"
#include "model/config.h"
#include "model/context.h"

/* A prompt goes through the cache in chunks of this many positions, so that the activations hold
 * one chunk (a 2048-token prompt needs the memory of 256 positions, not of 2048). */
enum { GEN_PREFILL_CHUNK = 256 };

/* The sampler of a generation from a model of config c: sampler_init; a llama2.c checkpoint
 * samples run.c's stream for the seed (sampler_seed_runc), so its outputs can be compared with
 * run.c's. -1 + tlm_error. */
int gen_sampler_init(sampler *s, const tlm_config *c, float temperature, int top_k, float top_p, uint64_t seed);

/* Feeds tokens [batch, T] (row b's at tokens + b * T) through the KV cache attached to ctx (whose
 * batch it must be) and samples each row's next token into next[batch] with its sampler s[b].
 * A prompt (T > 1, or the cache empty): context_forward in chunks of GEN_PREFILL_CHUNK positions,
 * or in one pass while hooks are attached (they see the prompt whole). One token after the
 * cache's: kv_decode_step for one sequence (one parallel region a token), context_forward over a
 * batch. next may be tokens (T == 1: each row's token is read before it is replaced). 0, or -1 +
 * tlm_error. */
int gen_step(tlm_context *ctx, sampler *s, const int *tokens, int batch, int T, int *next);

#endif
