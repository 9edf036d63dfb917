/* hook_points.h — the activation points that exist only when observed (hook_points.c):
 * TransformerLens' hook_attn_in, hook_q_input / hook_k_input / hook_v_input, attn.hook_result and
 * hook_mlp_in. A pass makes them when a hook (tlm_set_hooks) or the cache (tlm_set_capture) asks
 * for one, forward or backward; otherwise each call below costs one test. Internal to src/model:
 * the sublayers call them at the spots named below. */
#ifndef TLM_MODEL_HOOK_POINTS_H
#define TLM_MODEL_HOOK_POINTS_H

#include "components.h"

/* Forward, before sublayer k of layer l reads its input stream x_in [N, d]: the stream its branch
 * reads — x_in itself, or (attn_in / mlp_in / the split inputs observed) the layer's own copy, with
 * those points fired on it. The residual path keeps reading x_in. */
const float *hook_points_input(pass_ctx *x, int l, sublayer_kind k, const float *x_in);

/* Forward, after the attention's q|k|v projections: k and v again from hook_k_input /
 * hook_v_input through their own input norm, when those differ from hook_q_input; per head
 * (cfg.split_qkv_heads), each head's q, k or v again from its own normed copy where that differs
 * from what the projections read. */
void hook_points_split_kv(pass_ctx *x, int l, float *k, float *v);

/* Forward, after o_proj wrote f [N, d] from att: attn.hook_result [N, H, d] fired; a rewrite sets f
 * to the sum of the heads' results + b_O. */
void hook_points_result(pass_ctx *x, int l, float *f);

/* Backward, instead of o_proj's backward when attn.hook_result's gradient is observed and a hook
 * changed it: datt and W_O's gradients from the per-head gradients; 0 when the caller's own
 * backward is right (nothing observed, or the gradient left as it was). */
int hook_points_result_backward(pass_ctx *x, int l, const float *df);

/* Backward, instead of the input projections when the forward split them: the gradients at
 * hook_k_input / hook_v_input (kept for hook_points_input_backward): 1 when k's and v's are done
 * (q's is the caller's), 2 when every head's q, k and v are (per head; du set to 0: no projection
 * reads the sublayer's norm then), 0 when the caller's own backward is right. */
int hook_points_split_backward(pass_ctx *x, int l, const float *dq, const float *dk, const float *dv, float *du);

/* Backward, instead of the input norm's backward and the residual add: dx = alpha * residual (when
 * not NULL) + the branch's gradient at its input, with the input points' gradients fired; 0 when
 * the forward made no copy (the caller's own path). du: the gradient at the norm's output (or at
 * the branch input without an input norm). */
int hook_points_input_backward(pass_ctx *x, int l, sublayer_kind k, const float *du, const float *residual, float alpha,
                               float *dx);

/* The [B, H, T, T] attention map of kind PT_ATTN_SCORES or PT_PATTERN of layer l that the pass keeps
 * (own, NULL: none): the cache's array when the capture (tlm_set_capture) takes that point and the
 * hooks are the pass's only observer, so that the kernel writes the map there and no copy is made;
 * else own. The forward and its backward ask alike (the backward reads the maps from there). */
float *hook_points_map(const pass_ctx *x, int l, int kind, float *own);

/* (hooks.c's side of it, pass_capture_of, pass_point_wanted ... pass_hook_flags: run.h) */

#endif
