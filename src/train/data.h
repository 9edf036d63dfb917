/* data.h — the training corpus as token ids: a train/validation split (first 90% / last
 * 10%), random windows of seq+1 tokens for training, and a fixed set of validation windows
 * so that every evaluation measures the same text. Deterministic for a seed; the sampling
 * RNG is part of the trainer state, so a resumed run draws the same batches. */
#ifndef TLM_DATA_H
#define TLM_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "util/rng.h"

typedef struct {
    const int *tokens; /* borrowed */
    size_t n_tokens, n_train;   /* train = [0, n_train), validation = [n_train, n_tokens) */
    int seq, batch;
    int bos; /* >= 0: each window is this token, then seq - 1 text tokens (targets: seq text tokens); -1 = none */
    size_t *val_starts; /* [n_val_batches * batch] */
    int n_val_batches;
} dataset;

/* Checks that both splits hold at least one window of seq + 1 tokens; `source` names the
 * corpus in errors. */
int dataset_init(dataset *d, const int *tokens, size_t n_tokens, int seq, int batch, int n_val_batches,
                 uint64_t seed, const char *source);
void dataset_free(dataset *d);
/* One training batch: inputs [batch, seq] and targets shifted by one, from random windows. */
void dataset_train_batch(const dataset *d, rng_state *rng, int *inputs, int *targets);
/* Validation batch k (0 <= k < n_val_batches): always the same windows. */
void dataset_val_batch(const dataset *d, int k, int *inputs, int *targets);

#endif
