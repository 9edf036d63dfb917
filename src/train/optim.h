/* optim.h — AdamW over the model's one parameter buffer, global-norm gradient clipping,
 * and the learning-rate schedule (linear warmup, cosine decay to min_lr). */
#ifndef TLM_OPTIM_H
#define TLM_OPTIM_H

#include <stdbool.h>
#include <stddef.h>

#include "model/model.h"

typedef struct {
    float lr, min_lr, beta1, beta2, eps, weight_decay, grad_clip;
    int warmup_steps, total_steps;
    bool decay_embeddings; /* weight decay on embeddings (and a tied head) too */
} optim_config;

typedef struct {
    optim_config cfg;
    float *m, *v;       /* first/second moments, one float per parameter of [lo, hi) */
    size_t lo, hi;      /* the parameters this process updates: all, or its ZeRO-1 shard */
    unsigned char *decays; /* [n_tensors] 1 = apply weight decay */
    long step;          /* updates done */
} adamw;

int adamw_init(adamw *o, const tlm_model *m, const optim_config *cfg);
void adamw_free(adamw *o);
/* ZeRO-1: keep the moments of parameters [lo, hi) only (the caller's shard of the flat buffer;
 * moments already loaded for all parameters are cut down to it). adamw_step then updates only
 * those parameters; the caller gathers the others from their owners. */
int adamw_shard(adamw *o, size_t lo, size_t hi);
/* Clips the gradient, whose global L2 norm grad_norm the caller computed (once per step, with
 * grad_global_norm), to cfg.grad_clip (0 = off) and applies one AdamW update
 * with learning rate lr (PyTorch AdamW semantics: p *= 1 - lr*wd; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps)).
 * The bf16 copy of the weights (mixed precision) is the caller's to make again afterwards
 * (model_weights_changed), once the other shards' weights are in too. */
void adamw_step(adamw *o, tlm_model *m, float lr, double grad_norm);
/* The same update, and in the same pass, when this process updates every parameter (not a ZeRO-1
 * shard): each new weight rounded into the model's bf16 copy (product16, mixed precision, when it
 * has one), which is then made and needs no model_weights_changed; and the gradient cleared as it
 * is read, marked (grad_clear) so that the next model_zero_grads has nothing to do (a pass over
 * the weights and one over the gradient fewer a step). For a caller that reads no gradient after
 * it (the trainer). A shard's step writes neither: as adamw_step. */
void adamw_step_fused(adamw *o, tlm_model *m, float lr, double grad_norm);

/* L2 norm of the whole gradient, summed in a fixed order (deterministic for any thread count). */
double grad_global_norm(const tlm_model *m);

/* nanoGPT's schedule: lr * (step+1)/(warmup+1) during warmup, then cosine to min_lr at total_steps. */
float lr_at(const optim_config *c, int step);

#endif
