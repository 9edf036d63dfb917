/* context.h — what runs a model: the state one sequence of passes writes, apart from the model
 * (config and weights) it reads. The split llama.cpp makes between llama_model and llama_context,
 * llama2.c between TransformerWeights and RunState.
 *
 * A context holds the mode, the activations, the attached KV cache, the observers and hooks, the
 * batch split and the training coefficients. Every tlm_model owns one default context (m->ctx),
 * which the model_* passes and the tlm_* functions that take a model run in. Internal header;
 * the public API is include/tinylm.h. */
#ifndef TLM_MODEL_CONTEXT_H
#define TLM_MODEL_CONTEXT_H

#include "model.h"
#include "tinylm.h"

typedef struct tlm_context {
    const tlm_model *m; /* the model this context runs */
    model_mode mode;
    float z_loss;     /* training: model_backward adds the gradient of z_loss * mean(lse^2) (0 = off) */
    float router_aux; /* training: model_backward adds the gradient of router_aux * acts.moe_aux, the
                         load-balancing loss (Switch / Hugging Face's load_balancing_loss_func) (0 = off) */
    activations acts;
    struct kv_cache *kv; /* attached: forward continues the cached sequence (decode.c) */
    /* attached observers of every pass (model_observe), in attach order; what they need decides
     * what the pass keeps (attention maps) and whether it may split the batch */
    const struct model_observer *observers[MODEL_MAX_OBSERVERS];
    int n_observers;
    struct model_hooks *hooks; /* tlm_set_hooks's state (hooks.c), one of the observers when set */
    struct batch_split *split; /* the per-thread views of a split batch; NULL until one is split */
} tlm_context;

/* a context for model m (mode MODEL_TRAIN, nothing attached); NULL + tlm_error */
tlm_context *context_create(const tlm_model *m);
/* frees what the context allocated (not an attached KV cache or observer: the caller's) */
void context_free(tlm_context *c);

/* attaches observer o to this context's passes (model.h model_observe) */
int context_observe(tlm_context *c, const struct model_observer *o);
void context_unobserve(tlm_context *c, const struct model_observer *o);
/* tlm_set_hooks on this context (hooks.c); fn NULL detaches */
int context_set_hooks(tlm_context *c, tlm_hook_fn fn, void *user, const unsigned char *fwd, const unsigned char *bwd);
void context_hooks_free(tlm_context *c);

#endif
