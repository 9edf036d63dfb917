/* context.c — a context's lifetime (context.h). */
#include "context.h"

#include <omp.h>
#include <stdlib.h>

#include "decode.h"
#include "pass.h"
#include "tinylm.h"
#include "util/error.h"
#include "util/fork.h"

tlm_context *context_create(const tlm_model *m) {
    tlm_context *c = calloc(1, sizeof *c);
    if (!c) return tlm_error("out of memory creating a context"), NULL;
    c->m = m;
    c->mode = MODEL_TRAIN;
    return c;
}

void context_free(tlm_context *c) {
    if (!c) return;
    context_hooks_free(c);
    free(c->acts.mem), free(c->acts.tokens), free(c->acts.targets), free(c->acts.start_mem), free(c->acts.layers);
    free(c->rope_cos), free(c->rope_sin), free(c->rope_cos_local), free(c->rope_sin_local);
    free(c->grad_mem), free(c->g.layers);
    split_free(c->split);
    free(c);
}

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
