/* pass.h — the per-pass state of a forward or backward, apart from the model it runs.
 *
 * A pass reads the model (config and weights) and runs in a context (context.h: the activations,
 * the RoPE tables, an attached KV cache, the observers); everything one pass writes goes through a
 * pass_ctx: the rows of activations it runs over, where its weight gradients go, and whether
 * observers watch it. A batch split across the threads (split.c) gives each thread its own
 * pass_ctx over its rows and its own gradient view: no thread copies or writes the model itself.
 * Internal to src/model (the row-level drivers, the sublayers, the split, hooks.c). */
#ifndef TLM_MODEL_PASS_H
#define TLM_MODEL_PASS_H

#include "context.h"
#include "precision.h"

typedef struct pass_ctx {
    const tlm_model *m; /* config, weights (m->p) */
    tlm_context *run;   /* the context the pass runs in: RoPE tables, run->kv, observers, hooks */
    activations *A;     /* the rows this pass runs over: the context's whole batch, or a part's */
    model_params *g;    /* weight gradients (added to): the context's, or a part's own */
    int observed;        /* an observer takes activation points (model_observer.at_point) */
    int failed;         /* the first point whose observer failed, + 1 (later points are skipped) */
    float aux_scale;    /* backward: what the load-balancing loss's gradient at the router's probability
                           p_e is, divided by F_e (router_aux * dloss * E / R; 0 = off) */
    const float *copy16_of; /* forward, mixed-precision training: the activation whose producer (a norm,
                             the activation function) has just written its bf16 copy into the layer's
                             kept one (layer_acts u16, hid16), so that its products need not; else NULL */
} pass_ctx;

/* an unsplit pass over the context's activations and the model's gradients */
pass_ctx pass_whole(tlm_context *ctx);

/* fires activation point `id` (model_point_id) at every observer that takes points: forward,
 * data may be rewritten in place and the pass continues from it; backward, data is the
 * gradient there. One pointer test when nothing watches. */
void pass_fire(pass_ctx *x, int id, float *data, int is_grad);
#ifdef TLM_NO_PROBE_HOOKS /* (the build without hooks of bench/probe_overhead.sh) */
#define PASS_POINT(x, id, data, is_grad) ((void)(x), (void)(id), (void)(data), (void)(is_grad))
#else
#define PASS_POINT(x, id, data, is_grad) \
    do { if ((x)->observed) pass_fire((x), (id), (data), (is_grad)); } while (0)
#endif
/* after a pass: -1 naming the point whose observer failed */
int pass_check_points(const pass_ctx *x);

/* when the pattern hook of layer l may have rewritten probs: att = probs @ v again (hooks.c) */
void model_hook_attention_from_probs(const pass_ctx *x, int l, float *att, const float *probs, const float *v);

/* every observer's after_layer, in attach order; non-zero stops the pass */
int pass_after_layer(const pass_ctx *x, int layer);

/* ---- the one-token decode step (decode.c): each component's step beside its forward -------------
 * Run by every thread of kv_decode_step's one parallel region: each product's output rows shared
 * out (step_share), a barrier after each, the small ops on each thread's own copy of the row. */

struct kv_cache;
struct step_private;
typedef struct step_ctx {
    const tlm_model *m;
    const tlm_context *run; /* (its RoPE tables) */
    struct kv_cache *c;     /* the cache, and the step's buffers laid out with it (kv_cache.h) */
    int id, nt, pos, token; /* this thread, the team's size, the token's position, the token */
    struct step_private *o; /* this thread's own buffers */
} step_ctx;

/* this thread's equal share [lo, hi) of n */
static inline void step_share(int n, const step_ctx *s, int *lo, int *hi) {
    *lo = (int)((long long)n * s->id / s->nt);
    *hi = (int)((long long)n * (s->id + 1) / s->nt);
}
/* rows [o0, o1) of y = x W^T + b (linear.c); of projections stored back to back (q|k|v, gate|up) */
void linear_step(float *y, const float *x, const linear_params *lp, int IC, int o0, int o1);
void linear_parts_step(float *y, const float *x, const linear_params *fused, const linear_params *const *parts,
                       const int *widths, int n_parts, int IC, int o0, int o1);
/* the model's norm of one row (norm.c); QK-norm rows [h0, h1) of one projection */
void norm_step(const tlm_config *c, float *y, const norm_params *p, const float *x);
void qk_norm_step(const tlm_config *c, int l, float *y, const float *x, const float *w, int n_heads, int h0, int h1);

/* ---- a sublayer's component: what the block (block.c) runs for it ------------------------------- */

/* Its forward over rows (f [N,d] from the sublayer's input u [N,d]; x_in: the stream before the
 * input norm, which Gemma 4's MoE block reads too), its backward (du set; the weight gradients into
 * x->g), the gradient at the stream when F reads it (NULL: F reads only u) and its one-token decode
 * step (f [d] shared, from the thread's u [d]; NULL: the step does not run it and a model with it
 * decodes through the full pass with the cache). Each component file defines its table. */
typedef struct sublayer_ops {
    void (*forward)(pass_ctx *x, int l, const float *x_in, const float *u, float *f);
    void (*backward)(pass_ctx *x, int l, const float *u, const float *df, float *du);
    void (*backward_x)(pass_ctx *x, int l, const float *x_in, float *dx); /* dx += */
    void (*step)(const step_ctx *s, int l, const float *u, float *f);
} sublayer_ops;
extern const sublayer_ops ATTENTION_OPS; /* attention.c: MHA / GQA / MQA, sliding */
extern const sublayer_ops MLA_OPS;       /* mla.c: multi-head latent attention */
extern const sublayer_ops FFN_OPS;       /* ffn.c: the dense feed-forward */
extern const sublayer_ops MOE_OPS;       /* moe.c: a mixture of experts */
extern const sublayer_ops MOE_BLOCK_OPS; /* moe.c: Gemma 4's experts beside the dense FFN */

/* ---- the row-level pass (pass.c), the block (block.c) and its components ------------------------ */

typedef enum { SUB_ATTN, SUB_FFN } sublayer_kind;

/* forward over the rows of x->A; with targets the mean loss over its counted rows */
int forward_rows(pass_ctx *x, float *loss);
/* backward over the rows of x->A from dlogits_in's rows (or the loss's, dloss over global_count
 * rows), into x->g */
void backward_rows(pass_ctx *x, const float *dlogits_in, float dloss, int global_count);

/* dx = d(sublayer of kind k of layer l)/dx . dh (set), any norm placement (block.c; its forward:
 * block_sublayer_forward, block.h) */
void sublayer_backward(pass_ctx *x, int l, sublayer_kind k, const float *x_in, const float *dh, float *dx);

/* f [N,d] = the attention sublayer (MHA/GQA/sliding) of layer l on u [N,d] (with x->run->kv: through
 * the cache), and its backward (du set; the weight gradients into x->g) */
void attention_sublayer_forward(pass_ctx *x, int l, const float *u, float *f);
void attention_sublayer_backward(pass_ctx *x, int l, const float *u, const float *df, float *du);
/* f [N,d] = the dense feed-forward sublayer of layer l on u [N,d], and its backward (du set) */
void ffn_sublayer_forward(pass_ctx *x, int l, const float *u, float *f);
void ffn_sublayer_backward(pass_ctx *x, int l, const float *u, const float *df, float *du);
/* the linear layers' forward that keeps the bf16 copy of its input in `kept` for the backward (when
 * mixed), and projections of one input stored back to back (q|k|v, gate|up) each into its buffer
 * (linear.c) */
void linear_forward_kept(pass_ctx *ctx, float *out, const float *inp, uint16_t *kept, const linear_params *lp, int N,
                         int IC, int OC);
void project_parts(pass_ctx *ctx, float *const *outs, const linear_params *const *parts, const int *widths,
                   int n_parts, const linear_params *fused, const float *u, uint16_t *u16_kept, int N, int d);
/* the backward's bf16 copy of the input u of mixed-precision layer lp: the forward's (kept), else a
 * new one when `shared`, else NULL */
const uint16_t *backward_input(int pass_bf16, const linear_params *lp, const float *u, int N, int IC, const uint16_t *kept,
                               int shared);
/* the QK-norm of layer l over N rows of n_heads heads (norm.c: per head or over the projection, as
 * model_qk_norm_shape says); its backward (dx = dadd + ..., dadd NULL: none; dw += the weight's) */
void qk_norm_forward(const tlm_config *c, int l, float *y, float *rstd, const float *x, const float *w, int N,
                     int n_heads);
void qk_norm_backward(const tlm_config *c, int l, float *dx, const float *dadd, float *dw, const float *dy,
                      const float *x, const float *w, const float *rstd, int N, int n_heads);
/* model_norm_forward that also writes y's bf16 copy y16 (NULL: none) in the norm's own pass */
void model_norm_forward_bf16(const tlm_config *c, float *y, uint16_t *y16, const norm_acts *a, const norm_params *p,
                             const float *x, int N);

/* a layer's epilogue (config_has_layer_epilogue): out = the stream after layer l from the FFN sublayer's
 * output x (the layer scalar), and its backward (dx set, the scalar's gradient added) */
void layer_epilogue_forward(pass_ctx *x, int l, const float *x_in, float *out);
void layer_epilogue_backward(pass_ctx *x, int l, const float *x_in, const float *dout, float *dx);
/* Gemma 4's per-layer inputs of every layer (A->ple_in) from the scaled embedding x0, and their
 * backward from A->dple_in (dx0 set) */
void ple_inputs_forward(pass_ctx *x, const float *x0);
void ple_inputs_backward(pass_ctx *x, const float *x0, float *dx0);

/* att [B,T,H,hd] = layer l's attention over the whole sequence (its spec, the pass's precision and
 * left padding), then the scores and pattern points fired to the pass's observers and hooks */
void attention_full_pass(pass_ctx *ctx, int l, float *att, float *scores, float *probs, const float *q,
                         const float *k, const float *v, int B, int T);

/* the product dtype of the pass x runs (precision.h; 1: bf16), what every product site asks */
static inline int pass_product_bf16(const pass_ctx *x) { return x->run->product_bf16; }

/* out [N,OC] = inp [N,IC] @ W^T + b, with the weights in whatever dtype they are stored, in a pass
 * whose product dtype is bf16 when pass_bf16 (w_tile: the bf16 and block paths' scratch) */
void linear_forward(int pass_bf16, float *w_tile, float *out, const float *inp, const linear_params *lp, int N, int IC,
                    int OC);

/* its backward (into: dinp set, else accumulated; the weight and bias gradients into G) */
void linear_backward(int pass_bf16, int into, float *dinp, linear_params *G, const float *dout, const float *inp,
                     const uint16_t *inp16, const linear_params *P, int N, int IC, int OC);

/* ---- the mixture-of-experts FFN (moe.c) ---------------------------------------------------- */

/* one row's routing: the scores p [E] from the logits z [E], the k chosen experts idx (best first,
 * ties to the lower index) and their weights w; choice [E], allow [E] scratch */
void moe_route_row(const tlm_config *c, const float *score_bias, const float *expert_scale, const float *z, float *p,
                   int *idx, float *w, float *choice, unsigned char *allow);
/* f [N,d] = the MoE FFN of layer l: its router on ur [N,d], its experts on u [N,d] (the same rows
 * but for Gemma 4's MoE block) */
void moe_forward(pass_ctx *x, int l, const float *ur, const float *u, float *f);
/* its backward: du through the experts (set), dur through the router (set; dur == du: both add
 * into it); the weight gradients into x->g */
void moe_backward(pass_ctx *x, int l, const float *ur, const float *u, const float *df, float *dur, float *du);
/* Gemma 4's MoE block (moe_block) on the FFN sublayer's stream x and its normed u: f [N,d] =
 * N_1(MLP(u)) + N_2(MoE(N_in2(x))) with the router on rmsnorm(x) * scale * d^-0.5; its backward sets
 * du (the dense path's) and leaves the gradients at x of the router's and the experts' input norms
 * for moe_block_backward_x, which adds them into dx */
void moe_block_forward(pass_ctx *x, int l, const float *x_in, const float *u, float *f);
void moe_block_backward(pass_ctx *x, int l, const float *u, const float *df, float *du);
void moe_block_backward_x(pass_ctx *x, int l, const float *x_in, float *dx);
/* after a forward in the training layout: every MoE layer's per-sequence statistics pooled into
 * acts.moe_frac / moe_prob and the load-balancing loss acts.moe_aux */
void moe_pool_stats(tlm_context *ctx);

/* ---- multi-head latent attention (mla.c) ------------------------------------------------------ */

/* f [N,d] = the MLA attention sublayer of layer l on u [N,d] (with x->run->kv: through the latent cache) */
void mla_forward(pass_ctx *x, int l, const float *u, float *f);
/* du = its backward (set); the weight gradients into x->g */
void mla_backward(pass_ctx *x, int l, const float *u, const float *df, float *du);

/* ---- each component's decode step (the struct sublayer_ops' step and the per-layer input's) ---- */

/* f [d] (shared) = each component's F on the thread's u [d] (attention.c, ffn.c, moe.c) */
void attention_step(const step_ctx *s, int l, const float *u, float *f);
void ffn_step(const step_ctx *s, int l, const float *u, float *f);
void moe_step(const step_ctx *s, int l, const float *u, float *f);
/* Gemma 4's per-layer input (ple.c): every layer's input for this token; layer l's epilogue, out from x
 * (the thread's; out may be x) */
void ple_inputs_step(const step_ctx *s);
void layer_epilogue_step(const step_ctx *s, int l, const float *x, float *out);

/* ---- the activation layout (layout.c) ------------------------------------------------------- */

/* An arena hands out the buffers of one layout in order (layout.c). */
typedef struct {
    float *base;
    size_t used;
    int B, b0; /* B 0: bind the whole batch; else the rows of sequences from b0 on */
} arena;
float *arena_base(float *mem);
void layout_activations(const tlm_context *ctx, activations *A, arena *a, int B, int T);
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
