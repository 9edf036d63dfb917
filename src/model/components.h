/* components.h — the components of a block, each in its own file: attention (attention.c), latent
 * attention (mla.c), the dense feed-forward (ffn.c), the mixture of experts (moe.c), Gemma 4's
 * per-layer input (ple.c), the norms (norm.c) and the linear layers (linear.c): their sublayer_ops
 * tables (run.h) for the block (block.c), and what they share with one another and with the
 * drivers. Each calls only what run.h, walk.h, kv_cache.h, hook_points.h and this header declare.
 * Internal to src/model. */
#ifndef TLM_MODEL_COMPONENTS_H
#define TLM_MODEL_COMPONENTS_H

#include "run.h"

extern const sublayer_ops ATTENTION_OPS; /* attention.c: MHA / GQA / MQA, sliding */
extern const sublayer_ops MLA_OPS;       /* mla.c: multi-head latent attention */
extern const sublayer_ops FFN_OPS;       /* ffn.c: the dense feed-forward */
extern const sublayer_ops MOE_OPS;       /* moe.c: a mixture of experts */
extern const sublayer_ops MOE_BLOCK_OPS; /* moe.c: Gemma 4's experts beside the dense FFN */
extern const sublayer_ops PLE_OPS;       /* ple.c: Gemma 4's per-layer input (its buffers only: the
                                            layer's epilogue, not a sublayer) */

/* Each component's slot: its index in block_components (the activation layout's order) and of its own
 * structs in layer_acts.own and activations.own (a component reads its own as own[COMPONENT_X], once
 * per layer) */
typedef enum {
    COMPONENT_ATTENTION,
    COMPONENT_MLA,
    COMPONENT_FFN,
    COMPONENT_MOE,
    COMPONENT_PLE,
    COMPONENT_COUNT
} component_slot;
_Static_assert((int)COMPONENT_COUNT <= (int)ACTS_OWN_SLOTS, "model.h's ACTS_OWN_SLOTS: a slot for each component");

/* ---- the one-token steps' shared pieces --------------------------------------------------------- */

/* rows [o0, o1) of y = x W^T + b (linear.c); of projections stored back to back (q|k|v, gate|up) */
void linear_step(float *y, const float *x, const linear_params *lp, int IC, int o0, int o1);
void linear_parts_step(float *y, const float *x, const linear_params *fused, const linear_params *const *parts,
                       const int *widths, int n_parts, int IC, int o0, int o1);
/* the model's norm of one row (norm.c); QK-norm rows [h0, h1) of one projection */
void norm_step(const tlm_config *c, float *y, const norm_params *p, const float *x);
void qk_norm_step(const tlm_config *c, int l, float *y, const float *x, const float *w, int n_heads, int h0, int h1);


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
/* Gemma 4's per-layer inputs of every layer (ple.c's own) from the scaled embedding x0, and their
 * backward (their gradient at x0 added into dx0) */
void ple_inputs_forward(pass_ctx *x, const float *x0);
void ple_inputs_backward(pass_ctx *x, const float *x0, float *dx0);

/* att [B,T,H,hd] = layer l's attention over the whole sequence (its spec, the pass's precision and
 * left padding), then the scores and pattern points fired to the pass's observers and hooks */
void attention_full_pass(pass_ctx *ctx, int l, float *att, float *scores, float *probs, const float *q,
                         const float *k, const float *v, int B, int T);


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
 * the pass's own (moe.c) and the load-balancing loss acts.moe_aux */
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
void mla_step(const step_ctx *s, int l, const float *u, float *f);
/* Gemma 4's per-layer input (ple.c): every layer's input for this token; layer l's epilogue, out from x
 * (the thread's; out may be x) */
void ple_inputs_step(const step_ctx *s);
void layer_epilogue_step(const step_ctx *s, int l, const float *x, float *out);


/* the dense FFN's tensors in layer l (Gemma 4's MoE block has them too) */
void ffn_params(param_walk *w, layer_params *L, int l);

/* ---- fragments that are not a sublayer's: the attention's buffers that latent attention reuses,
 * Gemma 4's per-layer input (the model's tensors and buffers, and each layer's epilogue) ---------- */

/* the attention buffers every attention kind writes (q, k, v after their norms and RoPE, the maps,
 * att) and, for ordinary attention, the bf16 copies its products keep */
void attention_layout(layout_ctx *lc, arena *a, layer_acts *L, int l);
/* the per-layer inputs' tensors before the layers (ple_embed, ple_model_proj, ple_model_norm), and
 * layer l's epilogue's (ple_gate, ple_proj, ple_norm, layer_scalar) */
void ple_model_params(param_walk *w, model_params *p);
void layer_epilogue_params(param_walk *w, layer_params *L, int l);
/* (layer l's epilogue's buffers: PLE_OPS's layout) the per-layer inputs' (after the layers); their
 * backward scratch */
void ple_model_layout(const layout_ctx *lc, arena *a, activations *A);
void ple_scratch(const layout_ctx *lc, arena *b, activations *A);

#endif
