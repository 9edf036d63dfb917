/* block.h — one transformer layer (block.c): where the norms and the residual adds go around each
 * sublayer (the norm placement), written once for both ways the engine runs a layer:
 *
 *   - the full pass over the rows of a pass context (pass.c: training, prompts, probes), and
 *   - the cached one-token decode step (decode.c: one OpenMP parallel region per token, each
 *     component's product rows shared out among the threads).
 *
 * A way of running (a block_mode) is a small table: where a sublayer's values go, the norm, how it
 * runs a component (run.h's sublayer_ops: attention.c, mla.c, ffn.c, moe.c), the layer's epilogue
 * (ple.c), the residual add and the activation points. The block chooses the component and calls
 * the table in the placement's order. Internal to src/model. */
#ifndef TLM_MODEL_BLOCK_H
#define TLM_MODEL_BLOCK_H

#include "components.h"

/* a sublayer's norms: its input norm (pre, sandwich), output norm (sandwich, output), post norm
 * (post, deepnorm: the input norm's weights) */
typedef enum { BLOCK_NORM_IN, BLOCK_NORM_OUT, BLOCK_NORM_POST } block_norm;

/* a sublayer's activation points, in the order they fire (the layer's point names of points.c:
 * ln1_* / attn_* / resid_mid for attention, ln2_* / mlp_* / resid_post for the FFN) */
typedef enum {
    BLOCK_POINT_IN_SCALE,   /* the input norm's scale */
    BLOCK_POINT_IN_NORMED,  /* its output: the sublayer's input */
    BLOCK_POINT_RAW,        /* F, before an output norm (the probes' o_proj / down_proj) */
    BLOCK_POINT_OUT_SCALE,  /* the output norm's scale */
    BLOCK_POINT_OUT,        /* what is added to the stream */
    BLOCK_POINT_SUM,        /* x + F before a post norm */
    BLOCK_POINT_POST_SCALE, /* the post norm's scale */
    BLOCK_POINT_RESID,      /* the stream after the sublayer */
    BLOCK_POINTS
} block_point;

/* where one sublayer's values go: u its input (the input norm's output), f its F, fo F after an
 * output norm, sum x + F before a post norm */
typedef struct {
    float *u, *f, *fo, *sum;
} block_bufs;

/* a way of running a layer; `run` is its state (pass_ctx *, step_ctx *) */
typedef struct block_mode {
    block_bufs (*bufs)(void *run, int l, sublayer_kind k);
    /* the branch's input for sublayer k (x, or a copy a hook may edit: hook_attn_in / hook_mlp_in; the
     * residual reads x); NULL: x */
    const float *(*input)(void *run, int l, sublayer_kind k, const float *x);
    /* y = norm `which` of sublayer k of layer l on x (firing its scale point when the mode has points) */
    void (*norm)(void *run, int l, sublayer_kind k, block_norm which, float *y, const float *x);
    /* f = F of component op on the sublayer's input u (x: the stream before the input norm) */
    void (*sublayer)(void *run, const sublayer_ops *op, int l, const float *x, const float *u, float *f);
    /* Gemma 4's per-layer input and layer scalar after the FFN sublayer: out from x (may be x) */
    void (*epilogue)(void *run, int l, const float *x, float *out);
    /* sum = alpha x + fo (x NULL: sum = fo; alpha 1: x + fo), after F */
    void (*add)(void *run, float *sum, const float *x, float alpha, const float *fo);
    /* fires point p of sublayer k of layer l on data; NULL: a mode without points */
    void (*point)(void *run, int l, sublayer_kind k, block_point p, float *data);
} block_mode;

/* the component that sublayer k of layer l runs (the one place that chooses it) */
const sublayer_ops *block_component(const tlm_config *c, int l, sublayer_kind k);
/* every component, in the order the activation layout visits them (layout.c); NULL after the last */
const sublayer_ops *block_components(int i);
/* 1 when every component of the model has a one-token step (block_mode DECODE_STEP can run it) */
int block_has_step(const tlm_config *c);
/* h = sublayer k of layer l on the stream x, as the placement says (h may be x) */
void block_sublayer_forward(const block_mode *bm, void *run, const tlm_config *c, int l, sublayer_kind k,
                            const float *x, float *h);
/* layer l on the stream x: mid = x through the attention sublayer, out = mid through the FFN
 * sublayer (through epilogue_in and the layer's epilogue when the config has one); mid and out may be x */
void block_forward(const block_mode *bm, void *run, const tlm_config *c, int l, const float *x, float *mid,
                   float *epilogue_in, float *out);
/* dx = d(sublayer of kind k of layer l)/dx . dh (set), any norm placement (the full pass's backward) */
void sublayer_backward(pass_ctx *x, int l, sublayer_kind k, const float *x_in, const float *dh, float *dx);
/* sum = alpha x + fo (x NULL: fo; alpha 1: x + fo): the residual add, over i in [i0, i1) on the
 * calling thread, or over n values on the OpenMP threads (sum may be x or fo) */
void block_residual_rows(float *sum, const float *x, float alpha, const float *fo, size_t i0, size_t i1);
void block_residual_add(float *sum, const float *x, float alpha, const float *fo, size_t n);
/* the norm weights of norm `which` of sublayer k of layer l in p (the model's, or gradients) */
norm_params *block_norm_params(const model_params *p, int l, sublayer_kind k, block_norm which);
/* the model point id of point p of sublayer k of layer l */
int block_point_id(const tlm_config *c, int l, sublayer_kind k, block_point p);

#endif
