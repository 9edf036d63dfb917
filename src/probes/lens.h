/* lens.h — the tuned lens (Belrose et al. 2023, "Eliciting Latent Predictions from Transformers
 * with the Tuned Lens"): one affine translator per stage of the residual stream,
 *
 *     u_k = h_k + A_k h_k + b_k        (A_k [d, d], b_k [d]; A_k = 0, b_k = 0 is the identity)
 *
 * read through the model's own final norm and LM head (and final soft-cap): lens logits_k =
 * head(final_norm(u_k)). Stage k is the lens row of `inspect`: 0 = the embedding, k = the output
 * of block k-1, for k = 0 .. L-1; the last stage (the output of the last block) needs no
 * translator (the model's own logits). Each translator is trained, the model frozen, to
 * minimise KL(final || lens_k) averaged over positions, with the engine's backward through the
 * head and final norm and AdamW (src/train/optim.c). The identity lens is the logit lens
 * exactly (u_k = h_k + 0 + 0).
 *
 * File: safetensors, tensors "translators.K.weight" [d, d] (A_K) and "translators.K.bias" [d]
 * for K = 0 .. L-1, metadata "format": "tinylm-tuned-lens", "d_model", "num_hidden_layers",
 * "vocab_size" (the model's shape), "model" (the path it was trained on, informative). */
#ifndef TLM_LENS_H
#define TLM_LENS_H

#include <stddef.h>
#include <stdint.h>

struct tlm_model;

typedef struct tlm_lens tlm_lens;

/* The identity lens for model m (A = 0, b = 0). NULL + tlm_error on failure. */
tlm_lens *lens_create(const struct tlm_model *m);
/* Reads a lens file and checks it against the model: the recorded shape (d_model, layers,
 * vocab) and every tensor's shape; errors name the file and the tensor. */
tlm_lens *lens_load(const char *path, const struct tlm_model *m);
/* Writes the lens atomically (util/atomic_file.h) as safetensors; `model_path` is recorded. */
int lens_save(const tlm_lens *l, const char *path, const char *model_path);
void lens_free(tlm_lens *l);
int lens_stages(const tlm_lens *l); /* translators: the model's layer count L */
/* The translators as a parameter-only model: tensors, param_mem, grad_mem (for tests) */
struct tlm_model *lens_params(tlm_lens *l);

/* out [N, d] = h + A_k h + b_k (k < L), or h (k == L). out must not alias h. */
void lens_apply(const tlm_lens *l, int k, float *out, const float *h, int N);

/* One pass of the model over tokens [B, T] (the model is put in training mode to keep every
 * stage of the residual stream) and, for every stage k = 0..L, kl[k] = mean over the B*T
 * positions of KL(p_final || p_lens_k) in nats (kl[L] = 0: the model itself). With `lens` NULL
 * the logit lens. With grad, the translators' gradients of sum_k kl[k] are accumulated. */
int lens_kl(tlm_lens *lens, struct tlm_model *m, const int *tokens, int B, int T, double *kl, int grad);

typedef struct {
    int steps, batch, seq, eval_batches, warmup;
    float lr, weight_decay, grad_clip;
    uint64_t seed;
    int log_every; /* progress lines on stderr every this many steps (0 = none) */
} lens_train_options;

/* Trains the translators on windows of `tokens` (first 90%; the last 10% is held out), AdamW
 * with a linear warmup and cosine decay to lr/10. kl_before/kl_after [L+1] (may be NULL): the
 * mean KL per stage on the held-out windows for the logit lens (before) and the trained lens
 * (after). */
int lens_train(tlm_lens *lens, struct tlm_model *m, const int *tokens, size_t n_tokens, const lens_train_options *o,
               const char *source, double *kl_before, double *kl_after);

/* The mean KL per stage [L+1] on the held-out windows (the last 10% of tokens, eval_batches
 * fixed windows of batch x seq), for `lens` (NULL: the logit lens). */
int lens_eval(tlm_lens *lens, struct tlm_model *m, const int *tokens, size_t n_tokens, int batch, int seq,
              int eval_batches, const char *source, double *kl);

#endif
