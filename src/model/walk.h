/* walk.h — what each component's two fragments are written with (walk.c): the parameter walk,
 * which names, counts and binds the tensors of the one parameter buffer (params.c drives it: the
 * embedding, then each layer's block and components, then the head), and the arena of the
 * activation layout, which hands out the buffers of one (B, T) and mode (layout.c drives it).
 * A component's fragments sit in its own file beside its forward and backward and are reached
 * through its sublayer_ops table (run.h). Internal to src/model. */
#ifndef TLM_MODEL_WALK_H
#define TLM_MODEL_WALK_H

#include <stdbool.h>

#include "model.h"

/* ---- the parameter walk ------------------------------------------------------------------------- */

typedef struct param_walk {
    const tlm_config *cfg;
    tensor_info *table; /* NULL: only count */
    int count;
    size_t offset;
    float *base; /* NULL: do not bind views */
    /* binding after model_weights_to_bf16 moved the tensors: each tensor's place comes from
     * this table (offset into base, or into base16 when bf16) */
    const tensor_info *placed;
    const uint16_t *base16;
    const uint8_t *baseq;
} param_walk;

/* Where a matrix's views go in each type it can be kept in (NULL members: never is) */
typedef struct {
    float **f32;
    const uint16_t **bf16;
    const void **q;
    int *q_type;
} matrix_slots;

#define LINEAR_SLOTS(lp) ((matrix_slots){&(lp)->w, &(lp)->w16, &(lp)->wq, &(lp)->wq_type})

/* the next tensor: its table entry (name, shape [rows, cols] (cols 0: a vector), kind, the norm
 * identity) and its views */
void walk_kept(param_walk *w, matrix_slots s, const char *name, int rows, int cols, tensor_kind kind, float identity);
/* a tensor kept in f32 only (norms, biases, learned positions) */
void walk_add(param_walk *w, float **slot, const char *name, int rows, int cols, tensor_kind kind, float identity);
/* a linear layer `name`.weight [out, in] (and `name`.bias [out]) */
void walk_linear(param_walk *w, linear_params *lp, const char *name, int out, int in, bool bias, tensor_kind kind);
/* Several projections of the same input stored back to back (layers.<layer>.<names[i]>): all
 * weights, then all biases, so that `fused` views them as one [sum(outs), in] matrix (and one
 * bias vector) and the forward needs one GEMM instead of n (q|k|v, gate|up). */
void walk_fused(param_walk *w, linear_params *fused, linear_params *const *parts, const char *const *names,
                const int *outs, int n, int in, bool bias, int layer);
/* a norm of the model's kind (norm_type): `name`.weight [d] (and its bias, DyT's alpha, whose
 * init is alpha0 when positive, else dyt_alpha_init) (norm.c: the norm's fragment) */
void walk_norm(param_walk *w, norm_params *np, const char *name, float alpha0);

/* ---- the activation arena ------------------------------------------------------------------------ */

/* An arena hands out the buffers of one layout in order. Every buffer but the shared scratch is
 * the whole batch's, sequence after sequence, so the rows of sequences [b0, b0 + nb) of any of
 * them sit at (its floats / B) * b0: an arena with b0 set binds the same layout's pointers to
 * those rows (a part of a split batch, split.c's batch_split) instead of to the whole. An arena
 * without a base counts (and hands out NULLs). */
typedef struct {
    float *base;
    size_t used;
    int B, b0; /* B 0: bind the whole batch; else the rows of sequences from b0 on */
} arena;

/* every buffer starts on a 64-byte line (the base is aligned, ARENA_ALIGN floats each): a
 * matrix-vector product re-reads its input row per output, and an input row off the line makes
 * every 16-float load touch two lines (docs/performance.md, "Figures behind the code") */
enum { ARENA_ALIGN = 16 };

/* the first ARENA_ALIGN-float boundary in a block allocated ARENA_ALIGN floats larger */
float *arena_base(float *mem);
/* a buffer of the batch: n floats, B sequences' rows after each other */
float *take(arena *a, size_t n);
/* `stages` buffers of the batch of n floats each, back to back (the residual stream's stages) */
float *take_stages(arena *a, size_t stages, size_t n);
/* scratch that is not the batch's rows (shared by the parts of a split batch) */
float *take_shared(arena *a, size_t n);
/* a norm's output [N, C] (with_y) and statistics [N] */
void take_norm(arena *a, norm_acts *na, size_t N, size_t C, int with_y);
/* a bf16 copy of a batch buffer [B*T, width] (two to a float), or NULL when a sequence's rows
 * would not start on a float (T * width odd: a split part's rows could not be bound) */
uint16_t *take16(arena *a, size_t B, size_t T, size_t width);

/* What a component's layout fragment lays out for: the context, the shape, the mode. The
 * inference layout (one_layer) keeps one layer's buffers, laid out at layer 0 for every kind of
 * layer the model has and reused by the others; the training layout every layer's. */
typedef struct layout_ctx {
    const struct tlm_context *ctx;
    const tlm_config *c;
    int B, T;
    size_t N;             /* B * T rows */
    int one_layer;        /* the inference layout */
    int full_attention;   /* attention over the whole sequence (no KV cache in the inference layout) */
    int maps;             /* the [B,H,T,T] attention maps are kept for observers */
    int reuse;            /* one_layer, a layer after the first: its buffers are layer 0's (set before the
                             fragment runs); the fragment adds what must stay the layer's own */
    int keep16;           /* mixed-precision training: the layer's products keep the bf16 copies of their
                             inputs that the forward rounded, for the backward's weight gradients */
    layer_acts common;    /* the inference layout: the keys and values every layer's pass writes (attention.c) */
} layout_ctx;

#endif
