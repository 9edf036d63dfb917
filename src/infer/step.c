/* step.c — one generation step (step.h). */
#include "step.h"

#include <stdlib.h>
#include <string.h>

#include "model/decode.h"
#include "util/error.h"

int gen_sampler_init(sampler *s, const tlm_config *c, float temperature, int top_k, float top_p, uint64_t seed) {
    if (sampler_init(s, c->vocab_size, temperature, top_k, top_p, seed)) return -1;
    if (!strcmp(c->model_type, "llama2c")) sampler_seed_runc(s, seed);
    return 0;
}

/* a prompt [batch, T] through the cache: chunks of positions (each row's next n tokens side by
 * side, copied for a batch), or one pass */
static int prefill(tlm_context *ctx, const int *tokens, int batch, int T) {
    if (ctx->hooks || T <= GEN_PREFILL_CHUNK) return context_forward(ctx, tokens, NULL, batch, T, NULL);
    int *chunk = batch > 1 ? malloc(sizeof(int) * (size_t)batch * GEN_PREFILL_CHUNK) : NULL;
    if (batch > 1 && !chunk) return tlm_error("out of memory");
    int rc = 0;
    for (int i = 0; !rc && i < T; i += GEN_PREFILL_CHUNK) {
        const int n = T - i < GEN_PREFILL_CHUNK ? T - i : GEN_PREFILL_CHUNK;
        if (chunk)
            for (int b = 0; b < batch; b++)
                memcpy(chunk + (size_t)b * n, tokens + (size_t)b * T + i, sizeof(int) * (size_t)n);
        rc = context_forward(ctx, chunk ? chunk : tokens + i, NULL, batch, n, NULL);
    }
    free(chunk);
    return rc;
}

int gen_step(tlm_context *ctx, sampler *s, const int *tokens, int batch, int T, int *next) {
    if (!ctx->kv || kv_cache_batch(ctx->kv) != batch)
        return tlm_error("generate: the step needs a KV cache of %d sequences attached", batch);
    const int V = ctx->m->cfg.vocab_size;
    if (T == 1 && batch == 1 && kv_cache_length(ctx->kv) > 0) {
        const float *logits = kv_decode_step(ctx, tokens[0]);
        if (!logits) return -1;
        next[0] = sampler_next(&s[0], logits);
        return 0;
    }
    if (prefill(ctx, tokens, batch, T)) return -1;
    /* each row's last position: the logits are [batch, V] (generation's layout) or [batch, T', V] */
    const int per_row = ctx->acts.logits_rows / batch;
    for (int b = 0; b < batch; b++)
        next[b] = sampler_next(&s[b], ctx->acts.logits + ((size_t)b * per_row + per_row - 1) * V);
    return 0;
}
