#include "data.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* inputs [seq], targets [seq]: the text from start, shifted by one; with a BOS the inputs are the
 * BOS and seq - 1 text tokens, the targets the seq text tokens from start (the first is predicted
 * from the BOS alone) */
static void window(const int *tokens, size_t start, int seq, int bos, int *inputs, int *targets) {
    if (bos >= 0) {
        inputs[0] = bos;
        memcpy(inputs + 1, tokens + start, sizeof(int) * (seq - 1));
        memcpy(targets, tokens + start, sizeof(int) * seq);
        return;
    }
    memcpy(inputs, tokens + start, sizeof(int) * seq);
    memcpy(targets, tokens + start + 1, sizeof(int) * seq);
}

int dataset_init(dataset *d, const int *tokens, size_t n_tokens, int seq, int batch, int n_val_batches,
                 uint64_t seed, const char *source) {
    memset(d, 0, sizeof *d);
    if (seq <= 0 || batch <= 0 || n_val_batches < 0)
        return tlm_error("%s: sequence length %d and batch size %d must be positive", source, seq, batch);
    d->tokens = tokens, d->n_tokens = n_tokens, d->seq = seq, d->batch = batch, d->bos = -1;
    d->n_train = n_tokens - n_tokens / 10;
    size_t need = (size_t)seq + 1, n_val = n_tokens - d->n_train;
    if (d->n_train < need || n_val < need)
        return tlm_error("%s: the corpus has %zu tokens: the training split (90%%, %zu) and the validation split "
                         "(10%%, %zu) each need at least one window of seq + 1 = %zu tokens",
                         source, n_tokens, d->n_train, n_val, need);
    d->n_val_batches = n_val_batches;
    d->val_starts = calloc((size_t)n_val_batches * batch + 1, sizeof(size_t));
    if (!d->val_starts) return tlm_error("out of memory");
    rng_state r;
    rng_seed(&r, seed ^ 0x76616c6964617465ull); /* its own stream: validation windows never move */
    for (int i = 0; i < n_val_batches * batch; i++) d->val_starts[i] = d->n_train + rng_below(&r, n_val - seq);
    return 0;
}

void dataset_free(dataset *d) {
    free(d->val_starts);
    d->val_starts = NULL;
}

void dataset_train_batch(const dataset *d, rng_state *rng, int *inputs, int *targets) {
    for (int b = 0; b < d->batch; b++) {
        size_t start = rng_below(rng, d->n_train - d->seq); /* start + seq < n_train: target stays in train */
        window(d->tokens, start, d->seq, d->bos, inputs + (size_t)b * d->seq, targets + (size_t)b * d->seq);
    }
}

void dataset_val_batch(const dataset *d, int k, int *inputs, int *targets) {
    for (int b = 0; b < d->batch; b++)
        window(d->tokens, d->val_starts[(size_t)k * d->batch + b], d->seq, d->bos, inputs + (size_t)b * d->seq,
               targets + (size_t)b * d->seq);
}
