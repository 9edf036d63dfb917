/* tinylm.h — the public C API of libtinylm.
 *
 * A small, stable surface: load or build a model, run it, differentiate it, save it.
 * Everything else (ops, the parameter table, probes, formats) is internal and may change.
 *
 *   tlm_model *m = tlm_load("runs/shakespeare");          // config.json + model.safetensors
 *   int ids[3] = {1, 5, 9};
 *   if (tlm_forward(m, ids, NULL, 1, 3, NULL)) fprintf(stderr, "%s\n", tlm_error_message());
 *   const float *logits = tlm_logits(m);                   // [1, 3, vocab]
 *   tlm_free(m);
 *
 * Every function that can fail returns -1 (or NULL) and leaves a message naming the file
 * and the field in tlm_error_message() (per thread). */
#ifndef TINYLM_H
#define TINYLM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tlm_model tlm_model;

/* A model directory: config.json (model_type "tinylm" or a supported Hugging Face family)
 * plus model.safetensors (or shards with model.safetensors.index.json). */
tlm_model *tlm_load(const char *dir);
/* A new model from a config.json file, weights initialised from `seed` (docs/config.md). */
tlm_model *tlm_create(const char *config_path, uint64_t seed);
/* Writes config.json + model.safetensors into dir, each file atomically. */
int tlm_save(const tlm_model *m, const char *dir);
void tlm_free(tlm_model *m);

size_t tlm_num_params(const tlm_model *m);
int tlm_vocab_size(const tlm_model *m);

/* Runs tokens [B, T]; with targets [B, T] (a negative target = no loss there) also the mean
 * cross-entropy into *loss. */
int tlm_forward(tlm_model *m, const int *tokens, const int *targets, int B, int T, float *loss);
/* Logits [B, T, vocab] of the last forward; valid until the next call. */
const float *tlm_logits(const tlm_model *m);
/* Gradients of the last forward's loss * dloss, accumulated into the model's gradient buffer. */
int tlm_backward(tlm_model *m, float dloss);
/* The gradient of a named parameter (docs/tensors.md), or NULL; *numel receives its size. */
const float *tlm_grad(const tlm_model *m, const char *tensor_name, size_t *numel);
void tlm_zero_grad(tlm_model *m);

const char *tlm_error_message(void);

#ifdef __cplusplus
}
#endif
#endif
