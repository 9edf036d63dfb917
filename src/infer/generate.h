/* generate.h — text generation with a KV cache, streaming each token as it is produced. */
#ifndef TLM_GENERATE_H
#define TLM_GENERATE_H

#include <stdint.h>
#include <stdio.h>

#include "model/context.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    int max_new_tokens;
    float temperature; /* 0 = greedy */
    int top_k;         /* 0 = off */
    float top_p;       /* 0 or 1 = off */
    uint64_t seed;
    int mla_expanded;  /* multi-head latent attention: decode in the expanded form (else the absorbed one) */
} gen_options;

/* What a generation measured (seconds; tokens) */
typedef struct {
    int n_prompt, n_generated;
    double setup_s;   /* the KV cache's allocation and clearing (kv_cache_create) */
    size_t kv_bytes;  /* its size */
    double prefill_s; /* the prompt's forward pass and the first token's sampling (step.h gen_step) */
    double decode_s;  /* every later step: print, forward, sample (one per generated token after the first) */
    int n_decoded;    /* forwards timed in decode_s */
} gen_stats;

/* Prints the prompt's text, then up to max_new_tokens sampled tokens, to `out` (flushed per
 * token; control bytes escaped when `out` is a terminal); stops early at the tokenizer's BOS or EOS. Past the model's context
 * (max_position_embeddings) each token is predicted from the last `context` tokens. Writes the generated ids (without the
 * prompt) to ids_out when not NULL (room for max_new_tokens) and their count to *n_out, and the
 * timings to *stats when not NULL. The KV cache holds prompt + max_new_tokens positions (at most
 * the context), not the whole context. tok NULL: no text (out may be NULL), and no stop before
 * max_new_tokens. Runs in ctx (context.h: its mode and threads; a model's
 * default one is m->ctx), which must have no KV cache attached; attaches its own while it runs. */
int generate(tlm_context *ctx, const tlm_tokenizer *tok, const int *prompt, int n_prompt, const gen_options *o,
             FILE *out, int *ids_out, int *n_out, gen_stats *stats);

#endif
