/* context.h — what runs a model: the state a sequence of passes writes, apart from the model
 * (config and weights) it reads. The split llama.cpp makes between llama_model and llama_context,
 * llama2.c between TransformerWeights and RunState.
 *
 * A context holds the mode, the activations, the RoPE tables, the attached KV cache, the
 * observers and hooks, the batch split, the gradients, the thread count and the training
 * coefficients. Every tlm_model owns one default context (m->ctx), which the model_* passes and
 * the tlm_* functions that take a model run in (the trainer's gradients are its); more may be
 * made on one model (context_create), and contexts of one model may run at once from several
 * threads, in either precision: a pass writes nothing in the model (docs/architecture.md).
 * Internal header; the public API is include/tinylm.h. */
#ifndef TLM_MODEL_CONTEXT_H
#define TLM_MODEL_CONTEXT_H

#include "model.h"
#include "tinylm.h"

typedef struct tlm_context {
    const tlm_model *m; /* the model this context runs (read only) */
    model_mode mode;
    int product_bf16; /* the product dtype of the last forward and its backward (precision.h): 1 bf16,
                         taken from the model once as the forward starts (precision_pass_bf16) */
    int n_threads;    /* the OpenMP threads its passes run on; 0: the calling thread's count
                         (omp_get_max_threads()), as the default context does */
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
    float *hook_side;          /* the on-demand hook points' memory (hooks.c): kept from one set of */
    size_t hook_side_cap;      /* hooks to the next (no fresh pages per call), freed with the context */
    struct batch_split *split; /* the per-thread views of a split batch; NULL until one is split */
    /* the weight gradients a backward adds to, laid out as the parameters (NULL until
     * context_alloc_grads), and their named views */
    float *grad_mem;
    model_params g;
    int grad_clear; /* grad_mem is all zero: the trainer's AdamW step cleared it as it read it
                       (adamw_step_fused), and no backward has run since (backward_run clears the
                       mark); context_zero_grads then has nothing to do */
    /* RoPE's cos/sin of position x frequency [rope_len, hd/2] for the global layers and (Gemma 3)
     * the sliding layers' own base; grown by context_ensure_rope (a context's own: a pass of one
     * context never reallocates what another reads) */
    float *rope_cos, *rope_sin, *rope_cos_local, *rope_sin_local;
    int rope_len;
} tlm_context;

/* a context for model m (mode MODEL_TRAIN, nothing attached); NULL + tlm_error */
tlm_context *context_create(const tlm_model *m);
/* frees what the context allocated (not an attached KV cache or observer: the caller's) */
void context_free(tlm_context *c);

/* the gradient buffer (zeroed) and its views; refused for weights a backward cannot train
 * (quantized, bf16, a read-only mapping) */
int context_alloc_grads(tlm_context *ctx);
void context_zero_grads(tlm_context *ctx);
/* the gradient of tensor i in the model's default context */
static inline float *model_grad(const tlm_model *m, int i) { return m->ctx->grad_mem + m->tensors[i].offset; }

/* ---- passes (pass.c): model.h's model_forward ... run these on the model's default context --- */

int context_forward(tlm_context *ctx, const int *tokens, const int *targets, int B, int T, float *loss);
int context_forward_padded(tlm_context *ctx, const int *tokens, const int *targets, const int *start, int B, int T,
                           float *loss);
int context_backward(tlm_context *ctx, float dloss);
int context_backward_norm(tlm_context *ctx, float dloss, double *grad_norm);
int context_backward_from_logits(tlm_context *ctx, const float *dlogits);
/* what the context's next forwards are for (model_mode) */
void context_set_mode(tlm_context *ctx, model_mode mode);
/* the logits of the last position of the context's last forward (of its last row) [V] */
const float *context_last_logits(const tlm_context *ctx);
/* The head over rows h [R, d]: final norm (output and statistics in *fn) -> LM head -> final
 * soft-cap into logits [R, V]; the logits before the cap go to logits_raw (NULL: capped in
 * place). The forward's last step, and the logit lens's on any stage of the stream. */
void context_head_forward(const tlm_context *ctx, float *logits, float *logits_raw, const norm_acts *fn, const float *h,
                          int R);
/* The head's second half alone: LM head -> final soft-cap over rows h [R, d] already normed */
void context_head_logits(const tlm_context *ctx, float *logits, float *logits_raw, const float *h, int R);

/* Makes the context's RoPE tables cover positions [0, len) (rope_tables.c). */
int context_ensure_rope(tlm_context *ctx, int len);
/* the tables layer l reads (the sliding layers' own base, else the global ones) */
void context_layer_rope(const tlm_context *ctx, int l, const float **cos_tab, const float **sin_tab);

/* The threads a pass of this context runs on: n_threads, else the caller's, and never more than
 * an attached KV cache has scratch for. */
int context_threads(const tlm_context *ctx);
/* Around a pass: the calling thread's OpenMP thread count (its own nthreads-var: no other thread
 * sees it) set to context_threads and put back; the value to give back to leave. (The kernels'
 * parallel regions below src/model take the calling thread's count.) */
int context_threads_enter(const tlm_context *ctx);
void context_threads_leave(int held);

/* ---- observers (hooks.c) ----------------------------------------------------------------------- */

/* attaches observer o to this context's passes (model.h model_observe) */
int context_observe(tlm_context *c, const struct model_observer *o);
void context_unobserve(tlm_context *c, const struct model_observer *o);
/* tlm_set_hooks on this context (hooks.c); fn NULL detaches */
int context_set_hooks(tlm_context *c, tlm_hook_fn fn, void *user, const unsigned char *fwd, const unsigned char *bwd);
void context_hooks_free(tlm_context *c);
/* what the attached observers need: forwards keep [B,H,T,T] maps (else attention works block
 * by block in scratch and its backward computes them again); the pass runs unsplit; points fire */
int context_keeps_attention_maps(const tlm_context *ctx);
int context_needs_whole_batch(const tlm_context *ctx);
int context_observes_points(const tlm_context *ctx);
/* every observer's after_pass, in attach order */
int context_after_pass(tlm_context *ctx, int is_backward);

#endif
