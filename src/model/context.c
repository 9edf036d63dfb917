/* context.c — a context's mode, its last logits and its threads (context.h): what the components may
 * ask of the context they run in. Its lifetime (context_create, context_free) is pass.c's, beside the
 * drivers whose state it frees. */
#include "context.h"

#include <omp.h>
#include <stdlib.h>

#include "kv_cache.h"
#include "util/fork.h"

void context_set_mode(tlm_context *ctx, model_mode mode) { ctx->mode = mode; }

const float *context_last_logits(const tlm_context *ctx) {
    return ctx->acts.logits + (size_t)(ctx->acts.logits_rows - 1) * ctx->m->cfg.vocab_size;
}

/* ---- threads ------------------------------------------------------------------------------------ */

int context_threads(const tlm_context *ctx) {
    if (process_forked_child()) return 1; /* (libgomp's pool does not survive fork: util/fork.h) */
    int n = ctx->n_threads > 0 ? ctx->n_threads : omp_get_max_threads();
    if (ctx->kv && n > kv_cache_threads(ctx->kv)) n = kv_cache_threads(ctx->kv); /* (its per-thread scratch) */
    return n;
}

int context_threads_enter(const tlm_context *ctx) {
    const int held = omp_get_max_threads(), n = context_threads(ctx);
    if (n != held) omp_set_num_threads(n);
    return held;
}

void context_threads_leave(int held) {
    if (omp_get_max_threads() != held) omp_set_num_threads(held);
}
