/* pass.h — the drivers of a pass: the row-level forward and backward (pass.c), the activation
 * layout (layout.c) and the batch split across the threads (split.c). They run the block
 * (block.h) over its components (components.h); the run state they share with them is run.h's.
 * Internal to src/model. */
#ifndef TLM_MODEL_PASS_H
#define TLM_MODEL_PASS_H

#include "components.h"

/* forward over the rows of x->A; with targets the mean loss over its counted rows */
int forward_rows(pass_ctx *x, float *loss);
/* backward over the rows of x->A from dlogits_in's rows (or the loss's, dloss over global_count
 * rows), into x->g */
void backward_rows(pass_ctx *x, const float *dlogits_in, float dloss, int global_count);

/* ---- the activation layout (layout.c) ------------------------------------------------------- */

/* every activation for (B, T) in the context's mode: counted with an arena without a base, bound
 * with the buffer's (or, b0 set, to a split part's rows) */
void layout_activations(const tlm_context *ctx, activations *A, arena *a, int B, int T);
/* A's layers and every component's own structs (each layer's and the pass's: block_components'
 * sizes), one block that free(A->layers) frees; -1 when out of memory */
int activations_alloc_layers(activations *A, int n_layers);
/* v = A but for v's own layers and own structs (a part of a split batch, which the layout then binds
 * to its rows) */
void activations_view(activations *v, const activations *A);
/* lays the context's activations out for (B, T) in its mode (grows the buffer when needed) */
int ensure_activations(tlm_context *ctx, int B, int T);

/* ---- the batch split (split.c) -------------------------------------------------------------- */

struct batch_split;
void split_free(struct batch_split *s);
/* runs the forward split across the threads; 1 when this pass is not split (run it whole) */
int split_forward(tlm_context *ctx, int has_targets, float *loss);
/* runs the backward split across the threads; 1 when not split. With grad_norm (not NULL): the
 * norm of the whole gradient after it (ctx->grad_mem), as grad_global_norm computes it, bit for bit */
int split_backward(tlm_context *ctx, const float *dlogits_in, float dloss, double *grad_norm);

#endif
