/* context.c — a context's lifetime (context.h). */
#include "context.h"

#include <stdlib.h>

#include "pass.h"
#include "util/error.h"

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
    split_free(c->split);
    free(c);
}
