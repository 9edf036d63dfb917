/* points.c — the one table of a pass's activation points: id, TransformerLens name, shape for a
 * batch [B, T], flags, and where in the pass the tensor lives. Hooks (hooks.c, Python through
 * tlm_hook_info), the pass's firing (PASS_POINT in pass.c / sublayers.c) and the docs
 * (docs/python.md) all read it; one name is one tensor everywhere. Where both are useful, q
 * before and after RoPE are two points (hook_q, hook_rot_q), as TransformerLens names them. */
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "tinylm.h"

/* the shape after [B, T]: */
enum { SH_D, SH_ROW, SH_Q, SH_KV, SH_MAP, SH_FF };
/* what the config must have for the point to exist */
enum {
    REQ_IN_NORM = 1, REQ_OUT_NORM = 2, REQ_POST_NORM = 4, REQ_STATS = 8 /* a per-row scale: not DyT */,
    REQ_QK_NORM = 16, REQ_ROPE = 32, REQ_GATED = 64, REQ_FINAL_NORM = 128
};
#define SCALE_FLAGS (TLM_HOOK_RSTD | TLM_HOOK_READONLY | TLM_HOOK_NO_GRAD)

typedef struct {
    const char *name; /* a layer's points after "blocks.<l>." */
    unsigned char shape, req;
    int flags;
    const char *lives; /* where the pass keeps it (activations / layer_acts; backward: its gradient buffer) */
} point_desc;

static const point_desc POINTS[HL_COUNT + 3] = {
    [HL_RESID_PRE] = {"hook_resid_pre", SH_D, 0, 0, "res[2l]"},
    [HL_LN1_SCALE] = {"ln1.hook_scale", SH_ROW, REQ_IN_NORM | REQ_STATS, SCALE_FLAGS, "attn_s.in.rstd"},
    [HL_LN1_NORMALIZED] = {"ln1.hook_normalized", SH_D, REQ_IN_NORM, 0, "attn_s.in.y"},
    [HL_Q] = {"attn.hook_q", SH_Q, 0, 0, "q (the projection, before QK-norm and RoPE)"},
    [HL_K] = {"attn.hook_k", SH_KV, 0, 0, "k (the projection, before QK-norm and RoPE)"},
    [HL_V] = {"attn.hook_v", SH_KV, 0, 0, "v"},
    [HL_Q_NORMED] = {"attn.hook_q_normed", SH_Q, REQ_QK_NORM, 0, "qn (after QK-norm)"},
    [HL_K_NORMED] = {"attn.hook_k_normed", SH_KV, REQ_QK_NORM, 0, "kn (after QK-norm)"},
    [HL_ROT_Q] = {"attn.hook_rot_q", SH_Q, REQ_ROPE, 0, "qr (after RoPE: what attention reads)"},
    [HL_ROT_K] = {"attn.hook_rot_k", SH_KV, REQ_ROPE, 0, "kr (after RoPE: what attention reads)"},
    [HL_ATTN_SCORES] = {"attn.hook_attn_scores", SH_MAP, 0, TLM_HOOK_MASKED | TLM_HOOK_READONLY | TLM_HOOK_NO_GRAD,
                        "scores (scaled, capped; masked keys never written)"},
    [HL_PATTERN] = {"attn.hook_pattern", SH_MAP, 0, TLM_HOOK_NO_GRAD, "probs"},
    [HL_Z] = {"attn.hook_z", SH_Q, 0, 0, "att (per head, before o_proj)"},
    [HL_ATTN_RAW] = {"hook_attn_out_pre_norm", SH_D, REQ_OUT_NORM, 0, "attn_s.f"},
    [HL_LN1_OUT_SCALE] = {"ln1_out.hook_scale", SH_ROW, REQ_OUT_NORM | REQ_STATS, SCALE_FLAGS, "attn_s.out.rstd"},
    [HL_ATTN_OUT] = {"hook_attn_out", SH_D, 0, 0, "attn_s.out.y, else attn_s.f (what is added to the stream)"},
    [HL_ATTN_SUM] = {"hook_resid_mid_pre_norm", SH_D, REQ_POST_NORM, 0, "attn_s.sum"},
    [HL_LN1_POST_SCALE] = {"ln1_post.hook_scale", SH_ROW, REQ_POST_NORM | REQ_STATS, SCALE_FLAGS, "attn_s.post.rstd"},
    [HL_RESID_MID] = {"hook_resid_mid", SH_D, 0, 0, "res[2l+1]"},
    [HL_LN2_SCALE] = {"ln2.hook_scale", SH_ROW, REQ_IN_NORM | REQ_STATS, SCALE_FLAGS, "ffn_s.in.rstd"},
    [HL_LN2_NORMALIZED] = {"ln2.hook_normalized", SH_D, REQ_IN_NORM, 0, "ffn_s.in.y"},
    [HL_MLP_PRE] = {"mlp.hook_pre", SH_FF, 0, 0, "gate (gated FFNs), else up"},
    [HL_MLP_PRE_LINEAR] = {"mlp.hook_pre_linear", SH_FF, REQ_GATED, 0, "up (gated FFNs)"},
    [HL_MLP_POST] = {"mlp.hook_post", SH_FF, 0, 0, "hid"},
    [HL_MLP_RAW] = {"hook_mlp_out_pre_norm", SH_D, REQ_OUT_NORM, 0, "ffn_s.f"},
    [HL_LN2_OUT_SCALE] = {"ln2_out.hook_scale", SH_ROW, REQ_OUT_NORM | REQ_STATS, SCALE_FLAGS, "ffn_s.out.rstd"},
    [HL_MLP_OUT] = {"hook_mlp_out", SH_D, 0, 0, "ffn_s.out.y, else ffn_s.f"},
    [HL_MLP_SUM] = {"hook_resid_post_pre_norm", SH_D, REQ_POST_NORM, 0, "ffn_s.sum"},
    [HL_LN2_POST_SCALE] = {"ln2_post.hook_scale", SH_ROW, REQ_POST_NORM | REQ_STATS, SCALE_FLAGS, "ffn_s.post.rstd"},
    [HL_RESID_POST] = {"hook_resid_post", SH_D, 0, 0, "res[2l+2]"},
    [HL_EMBED] = {"hook_embed", SH_D, 0, 0, "res[0]"},
    [HL_FINAL_SCALE] = {"ln_final.hook_scale", SH_ROW, REQ_FINAL_NORM | REQ_STATS, SCALE_FLAGS, "final.rstd"},
    [HL_FINAL_NORMALIZED] = {"ln_final.hook_normalized", SH_D, REQ_FINAL_NORM, 0, "final.y"},
};

int model_point_count(const tlm_config *c) { return 1 + c->n_layers * HL_COUNT + 2; }

/* the layer (-1 for the model's own points) and kind of id; 0 when out of range */
static int point_of(const tlm_config *c, int id, int *layer, int *kind) {
    const int n = model_point_count(c);
    if (id < 0 || id >= n) return 0;
    if (id == 0) *layer = -1, *kind = HL_EMBED;
    else if (id >= n - 2) *layer = -1, *kind = HL_FINAL_SCALE + (id - (n - 2));
    else *layer = (id - 1) / HL_COUNT, *kind = (id - 1) % HL_COUNT;
    return 1;
}

static int config_has(const tlm_config *c, unsigned req) {
    const norm_placement pl = c->placement;
    if ((req & REQ_IN_NORM) && !placement_has_input_norm(pl)) return 0;
    if ((req & REQ_OUT_NORM) && !placement_has_output_norm(pl)) return 0;
    if ((req & REQ_POST_NORM) && !placement_has_post_norm(pl)) return 0;
    if ((req & REQ_STATS) && c->norm == NORM_DYT) return 0; /* DyT has no per-row scale */
    if ((req & REQ_QK_NORM) && c->qk_norm == QK_NORM_NONE) return 0;
    if ((req & REQ_ROPE) && c->position != POS_ROPE) return 0;
    if ((req & REQ_GATED) && c->ffn == FFN_GELU) return 0;
    if ((req & REQ_FINAL_NORM) && !c->final_norm) return 0;
    return 1;
}

int model_point_describe(const tlm_config *c, int id, int B, int T, char *name, size_t cap, int64_t shape[5],
                         int *flags) {
    int l, k;
    *flags = 0;
    shape[0] = B, shape[1] = T, shape[2] = c->d_model;
    if (!point_of(c, id, &l, &k) || !config_has(c, POINTS[k].req)) return 0;
    const point_desc *p = &POINTS[k];
    if (l >= 0)
        snprintf(name, cap, "blocks.%d.%s", l, p->name);
    else
        snprintf(name, cap, "%s", p->name);
    *flags = p->flags;
    switch (p->shape) {
    case SH_ROW: shape[2] = 1; return 3;
    case SH_Q: shape[2] = c->n_heads, shape[3] = c->head_dim; return 4;
    case SH_KV: shape[2] = c->n_kv_heads, shape[3] = c->head_dim; return 4;
    case SH_MAP: shape[1] = c->n_heads, shape[2] = T, shape[3] = T; return 4;
    case SH_FF: shape[2] = c->d_ff; return 3;
    default: return 3;
    }
}
