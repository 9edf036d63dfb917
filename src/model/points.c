/* points.c — the one table of a pass's activation points: id, TransformerLens name, shape for a
 * batch [B, T], flags, where in the pass the tensor lives, and its probe names (points.h). Hooks
 * (hooks.c, Python through tlm_hook_info), probes (src/probes/probe.c: they record when a point
 * fires), the pass's firing (PASS_POINT in pass.c, block.c and the components) and the docs (docs/python.md,
 * docs/probes.md) all read it; one name is one tensor everywhere. Where both are useful, q
 * before and after RoPE are two points (hook_q, hook_rot_q), as TransformerLens names them. */
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "points.h"
#include "tinylm.h"

/* the shape after [B, T]: */
enum { SH_D, SH_ROW, SH_Q, SH_KV, SH_MAP, SH_FF, SH_VOCAB, SH_EXPERTS, SH_TOPK, SH_TOPK_D, SH_QLORA, SH_KVLORA,
       SH_HEADS_D /* [H, d]: a vector of the stream per head */,
       SH_Q_INPUT, SH_KV_INPUT /* [d], or per head ([H, d], [kv heads, d]) with cfg.split_qkv_heads */ };
/* what the config must have for a name of the point to exist */
enum {
    REQ_IN_NORM = 1, REQ_OUT_NORM = 2, REQ_POST_NORM = 4, REQ_STATS = 8 /* a per-row scale: not DyT */,
    REQ_QK_NORM = 16, REQ_ROPE = 32, REQ_GATED = 64, REQ_FINAL_NORM = 128, REQ_GELU = 256 /* not gated */,
    REQ_LAST_LAYER = 512 /* (only the last layer's point) */, REQ_DENSE = 1024 /* a dense FFN layer */,
    REQ_MOE = 2048 /* a mixture-of-experts layer */,
    REQ_OWN_KV = 4096 /* the layer makes its own keys and values (not a Gemma 4 layer that shares them) */,
    REQ_MLA = 8192 /* multi-head latent attention */, REQ_NOT_MLA = 16384, REQ_Q_LORA = 32768 /* MLA's q_a */,
    REQ_OWN_V = 65536 /* a v projection of its own (not Gemma 4's K = V) */,
    REQ_NOT_MOE_BLOCK = 131072 /* not Gemma 4's MoE block (whose router reads the stream too) */
};
#define SCALE_FLAGS (TLM_HOOK_RSTD | TLM_HOOK_READONLY | TLM_HOOK_NO_GRAD)

/* a probe name of a point: P_TOP names it without the "layers.<l>." prefix, P_GRAD is also
 * recorded in backward (as "grad.<name>"), P_RMS is the RMS of each row */
enum { P_TOP = 1, P_GRAD = 2, P_RMS = 4 };
typedef struct {
    const char *name;
    unsigned short req, kind;
} probe_name;
#define PROBE_NAMES 4

typedef struct {
    const char *name; /* the TransformerLens name (a layer's after "blocks.<l>."); NULL: probes only */
    unsigned char shape;
    unsigned req; /* of the TransformerLens name (the probe names have their own) */
    int flags;
    const char *lives; /* where the pass keeps it (activations / layer_acts; backward: its gradient buffer) */
    probe_name probe[PROBE_NAMES]; /* (docs/probes.md) in the order they are listed */
} point_desc;

static const point_desc POINTS[PT_COUNT + 4] = {
    [PT_RESID_PRE] = {"hook_resid_pre", SH_D, 0, 0, "res[2l]",
                      {{"resid_pre", 0, P_GRAD}, {"attn_norm.in_rms", REQ_IN_NORM, P_RMS}}},
    /* The attention's and the FFN's input stream (TransformerLens' use_attn_in, use_split_qkv_input,
     * use_hook_mlp_in), made only when a hook or the cache asks (hook_points.c): a rewrite changes
     * the sublayer's input and not the residual path; q_input, k_input, v_input each feed their own
     * projection (through their own input norm). One [B, T, d] copy each, or with
     * cfg.split_qkv_heads TransformerLens' copy per head: [B, T, H, d] for q, [B, T, kv heads, d]
     * for k and v (docs/python.md). */
    [PT_ATTN_IN] = {"hook_attn_in", SH_D, 0, TLM_HOOK_ON_DEMAND, "hook_points.c: a copy of res[2l] (the norm reads it)",
                    {{0}}},
    [PT_Q_INPUT] = {"hook_q_input", SH_Q_INPUT, REQ_NOT_MLA, TLM_HOOK_ON_DEMAND, "hook_points.c: a copy of hook_attn_in",
                    {{0}}},
    [PT_K_INPUT] = {"hook_k_input", SH_KV_INPUT, REQ_NOT_MLA | REQ_OWN_KV, TLM_HOOK_ON_DEMAND,
                    "hook_points.c: a copy of hook_attn_in", {{0}}},
    [PT_V_INPUT] = {"hook_v_input", SH_KV_INPUT, REQ_NOT_MLA | REQ_OWN_KV | REQ_OWN_V, TLM_HOOK_ON_DEMAND,
                    "hook_points.c: a copy of hook_attn_in", {{0}}},
    [PT_LN1_SCALE] = {"ln1.hook_scale", SH_ROW, REQ_IN_NORM | REQ_STATS, SCALE_FLAGS, "attn_s.in.rstd", {{0}}},
    [PT_LN1_NORMALIZED] = {"ln1.hook_normalized", SH_D, REQ_IN_NORM, 0, "attn_s.in.y",
                           {{"attn_norm.out", REQ_IN_NORM, 0}, {"attn_norm.out_rms", REQ_IN_NORM, P_RMS}}},
    [PT_Q] = {"attn.hook_q", SH_Q, REQ_NOT_MLA, 0, "q (the projection, before QK-norm and RoPE)", {{"attn.q", REQ_NOT_MLA, 0}}},
    [PT_K] = {"attn.hook_k", SH_KV, REQ_OWN_KV | REQ_NOT_MLA, 0, "k (the projection, before QK-norm and RoPE)",
              {{"attn.k", REQ_OWN_KV | REQ_NOT_MLA, 0}}},
    [PT_V] = {"attn.hook_v", SH_KV, REQ_OWN_KV, 0, "v (the projection, before Gemma 4's v norm)",
              {{"attn.v", REQ_OWN_KV, 0}}},
    [PT_Q_NORMED] = {"attn.hook_q_normed", SH_Q, REQ_QK_NORM, 0, "qn (after QK-norm)",
                     {{"attn.q_normed", REQ_QK_NORM, 0}}},
    [PT_K_NORMED] = {"attn.hook_k_normed", SH_KV, REQ_QK_NORM | REQ_OWN_KV, 0, "kn (after QK-norm)",
                     {{"attn.k_normed", REQ_QK_NORM | REQ_OWN_KV, 0}}},
    [PT_ROT_Q] = {"attn.hook_rot_q", SH_Q, REQ_ROPE, 0, "qr (after RoPE: what attention reads)",
                  {{"attn.rot_q", REQ_ROPE, 0}}},
    [PT_ROT_K] = {"attn.hook_rot_k", SH_KV, REQ_ROPE | REQ_OWN_KV, 0, "kr (after RoPE: what attention reads)",
                  {{"attn.rot_k", REQ_ROPE | REQ_OWN_KV, 0}}},
    [PT_ATTN_SCORES] = {"attn.hook_attn_scores", SH_MAP, 0, TLM_HOOK_MASKED | TLM_HOOK_READONLY | TLM_HOOK_NO_GRAD,
                        "scores (scaled, capped; masked keys never written)", {{"attn.scores", 0, 0}}},
    [PT_PATTERN] = {"attn.hook_pattern", SH_MAP, 0, TLM_HOOK_NO_GRAD, "probs", {{"attn.probs", 0, 0}}},
    [PT_Z] = {"attn.hook_z", SH_Q, 0, 0, "att (per head, before o_proj)", {{"attn.heads", 0, 0}}},
    /* each head's z through its columns of W_O, without the bias (attn_out = their sum + b_O) */
    [PT_RESULT] = {"attn.hook_result", SH_HEADS_D, REQ_NOT_MLA, TLM_HOOK_ON_DEMAND,
                   "hook_points.c: made from att when observed",
                   {{0}}},
    /* (fired in every placement: it is the probes' attn.o_proj; a hook only with an output norm) */
    [PT_ATTN_RAW] = {"hook_attn_out_pre_norm", SH_D, REQ_OUT_NORM, 0, "attn_s.f",
                     {{"attn.o_proj", 0, 0}, {"attn_out_norm.in_rms", REQ_OUT_NORM, P_RMS}}},
    [PT_LN1_OUT_SCALE] = {"ln1_out.hook_scale", SH_ROW, REQ_OUT_NORM | REQ_STATS, SCALE_FLAGS, "attn_s.out.rstd",
                          {{0}}},
    [PT_ATTN_OUT] = {"hook_attn_out", SH_D, 0, 0, "attn_s.out.y, else attn_s.f (what is added to the stream)",
                     {{"attn_out_norm.out", REQ_OUT_NORM, 0},
                      {"attn_out_norm.out_rms", REQ_OUT_NORM, P_RMS},
                      {"attn.out", 0, 0}}},
    [PT_ATTN_SUM] = {"hook_resid_mid_pre_norm", SH_D, REQ_POST_NORM, 0, "attn_s.sum",
                     {{"attn_norm.in_rms", REQ_POST_NORM, P_RMS}}},
    [PT_LN1_POST_SCALE] = {"ln1_post.hook_scale", SH_ROW, REQ_POST_NORM | REQ_STATS, SCALE_FLAGS,
                           "attn_s.post.rstd", {{0}}},
    [PT_RESID_MID] = {"hook_resid_mid", SH_D, 0, 0, "res[2l+1]",
                      {{"attn_norm.out", REQ_POST_NORM, 0},
                       {"attn_norm.out_rms", REQ_POST_NORM, P_RMS},
                       {"resid_mid", 0, P_GRAD},
                       {"ffn_norm.in_rms", REQ_IN_NORM, P_RMS}}},
    [PT_MLP_IN] = {"hook_mlp_in", SH_D, REQ_NOT_MOE_BLOCK, TLM_HOOK_ON_DEMAND, "hook_points.c: a copy of res[2l+1]",
                   {{0}}},
    [PT_LN2_SCALE] = {"ln2.hook_scale", SH_ROW, REQ_IN_NORM | REQ_STATS, SCALE_FLAGS, "ffn_s.in.rstd", {{0}}},
    [PT_LN2_NORMALIZED] = {"ln2.hook_normalized", SH_D, REQ_IN_NORM, 0, "ffn_s.in.y",
                           {{"ffn_norm.out", REQ_IN_NORM, 0}, {"ffn_norm.out_rms", REQ_IN_NORM, P_RMS}}},
    [PT_MLP_PRE] = {"mlp.hook_pre", SH_FF, REQ_DENSE, 0, "gate (gated FFNs), else up",
                    {{"ffn.gate", REQ_GATED | REQ_DENSE, 0}, {"ffn.up", REQ_GELU | REQ_DENSE, 0}}},
    [PT_MLP_PRE_LINEAR] = {"mlp.hook_pre_linear", SH_FF, REQ_GATED | REQ_DENSE, 0, "up (gated FFNs)",
                           {{"ffn.up", REQ_GATED | REQ_DENSE, 0}}},
    [PT_MLP_POST] = {"mlp.hook_post", SH_FF, REQ_DENSE, 0, "hid", {{"ffn.hidden", REQ_DENSE, 0}}},
    /* a mixture of experts: the router's logits (rewritable: routing follows what the hook leaves;
     * its gradient is the router's dz), the chosen experts best first (their indices as floats),
     * their weights in the sum, and each chosen expert's output before its weight */
    [PT_ROUTER_LOGITS] = {"mlp.hook_router_logits", SH_EXPERTS, REQ_MOE, 0, "router_logits; backward d_router",
                          {{"ffn.router_logits", REQ_MOE, 0}}},
    [PT_EXPERT_IDS] = {"mlp.hook_expert_ids", SH_TOPK, REQ_MOE, TLM_HOOK_READONLY | TLM_HOOK_NO_GRAD,
                       "topk_idx (as floats)", {{"ffn.expert_ids", REQ_MOE, 0}}},
    [PT_EXPERT_WEIGHTS] = {"mlp.hook_expert_weights", SH_TOPK, REQ_MOE, TLM_HOOK_READONLY | TLM_HOOK_NO_GRAD,
                           "topk_w", {{"ffn.expert_weights", REQ_MOE, 0}}},
    [PT_EXPERT_OUT] = {"mlp.hook_expert_out", SH_TOPK_D, REQ_MOE, TLM_HOOK_READONLY | TLM_HOOK_NO_GRAD,
                       "ey gathered by row (the backward's d_ey as scratch)", {{0}}},
    /* MLA (an MLA layer's hook_v, hook_rot_q, hook_rot_k and hook_z are its zero-padded heads of head_dim
     * = max(qk_nope + qk_rope, v_head_dim); it has no hook_q, hook_k): c_q and c_kv before and after the
     * RMSNorms DeepSeek puts on them (the probes' in_rms / out_rms of attn.q_a_norm and attn.kv_a_norm) */
    [PT_Q_A] = {"attn.hook_q_a", SH_QLORA, REQ_Q_LORA, 0, "cq (q_a_proj's output)",
                {{"attn.q_a", REQ_Q_LORA, 0}, {"attn.q_a_norm.in_rms", REQ_Q_LORA, P_RMS}}},
    [PT_Q_A_NORMED] = {"attn.hook_q_a_normed", SH_QLORA, REQ_Q_LORA, 0, "cqn (after q_a_norm)",
                       {{"attn.q_a_normed", REQ_Q_LORA, 0}, {"attn.q_a_norm.out_rms", REQ_Q_LORA, P_RMS}}},
    [PT_KV_A] = {"attn.hook_kv_a", SH_KVLORA, REQ_MLA, 0, "ckv (c_kv: kv_a_proj's first kv_lora_rank outputs)",
                 {{"attn.kv_a", REQ_MLA, 0}, {"attn.kv_a_norm.in_rms", REQ_MLA, P_RMS}}},
    [PT_KV_A_NORMED] = {"attn.hook_kv_a_normed", SH_KVLORA, REQ_MLA, 0, "ckvn (after kv_a_norm: what the cache holds)",
                        {{"attn.kv_a_normed", REQ_MLA, 0}, {"attn.kv_a_norm.out_rms", REQ_MLA, P_RMS}}},
    [PT_MLP_RAW] = {"hook_mlp_out_pre_norm", SH_D, REQ_OUT_NORM, 0, "ffn_s.f",
                    {{"ffn.down_proj", 0, 0}, {"ffn_out_norm.in_rms", REQ_OUT_NORM, P_RMS}}},
    [PT_LN2_OUT_SCALE] = {"ln2_out.hook_scale", SH_ROW, REQ_OUT_NORM | REQ_STATS, SCALE_FLAGS, "ffn_s.out.rstd",
                          {{0}}},
    [PT_MLP_OUT] = {"hook_mlp_out", SH_D, 0, 0, "ffn_s.out.y, else ffn_s.f",
                    {{"ffn_out_norm.out", REQ_OUT_NORM, 0},
                     {"ffn_out_norm.out_rms", REQ_OUT_NORM, P_RMS},
                     {"ffn.out", 0, 0}}},
    [PT_MLP_SUM] = {"hook_resid_post_pre_norm", SH_D, REQ_POST_NORM, 0, "ffn_s.sum",
                    {{"ffn_norm.in_rms", REQ_POST_NORM, P_RMS}}},
    [PT_LN2_POST_SCALE] = {"ln2_post.hook_scale", SH_ROW, REQ_POST_NORM | REQ_STATS, SCALE_FLAGS,
                           "ffn_s.post.rstd", {{0}}},
    [PT_RESID_POST] = {"hook_resid_post", SH_D, 0, 0, "res[2l+2]",
                       {{"ffn_norm.out", REQ_POST_NORM, 0},
                        {"ffn_norm.out_rms", REQ_POST_NORM, P_RMS},
                        {"resid_post", 0, P_GRAD},
                        {"final_norm.in_rms", REQ_FINAL_NORM | REQ_LAST_LAYER, P_TOP | P_RMS}}},
    [PT_EMBED] = {"hook_embed", SH_D, 0, 0, "res[0]", {{"embed", 0, P_TOP}}},
    [PT_FINAL_SCALE] = {"ln_final.hook_scale", SH_ROW, REQ_FINAL_NORM | REQ_STATS, SCALE_FLAGS, "final.rstd", {{0}}},
    [PT_FINAL_NORMALIZED] = {"ln_final.hook_normalized", SH_D, REQ_FINAL_NORM, 0, "final.y",
                             {{"final_norm.out", REQ_FINAL_NORM, P_TOP},
                              {"final_norm.out_rms", REQ_FINAL_NORM, P_TOP | P_RMS}}},
    /* (no hook: TransformerLens has none for the logits) */
    [PT_LOGITS] = {NULL, SH_VOCAB, 0, 0, "logits; backward dlogits", {{"logits", 0, P_TOP | P_GRAD}}},
};

/* the model's own points after the layers' */
enum { TAIL_POINTS = PT_LOGITS - PT_FINAL_SCALE + 1 };

int model_point_count(const tlm_config *c) { return 1 + c->n_layers * PT_COUNT + TAIL_POINTS; }

int model_point_of(const tlm_config *c, int id, int *layer, int *kind) {
    const int n = model_point_count(c);
    if (id < 0 || id >= n) return 0;
    if (id == 0) *layer = -1, *kind = PT_EMBED;
    else if (id >= n - TAIL_POINTS) *layer = -1, *kind = PT_FINAL_SCALE + (id - (n - TAIL_POINTS));
    else *layer = (id - 1) / PT_COUNT, *kind = (id - 1) % PT_COUNT;
    return 1;
}

static int config_has(const tlm_config *c, int layer, unsigned req) {
    const norm_placement pl = c->placement;
    if ((req & REQ_IN_NORM) && !placement_has_input_norm(pl)) return 0;
    if ((req & REQ_OUT_NORM) && !placement_has_output_norm(pl)) return 0;
    if ((req & REQ_POST_NORM) && !placement_has_post_norm(pl)) return 0;
    if ((req & REQ_STATS) && c->norm == NORM_DYT) return 0; /* DyT has no per-row scale */
    if ((req & REQ_QK_NORM) && c->qk_norm == QK_NORM_NONE) return 0;
    if ((req & REQ_ROPE) && c->position != POS_ROPE) return 0;
    if ((req & REQ_GATED) && c->ffn == FFN_GELU) return 0;
    if ((req & REQ_FINAL_NORM) && !c->final_norm) return 0;
    if ((req & REQ_GELU) && c->ffn != FFN_GELU) return 0;
    if ((req & REQ_LAST_LAYER) && layer != c->n_layers - 1) return 0;
    if ((req & REQ_DENSE) && layer >= 0 && !config_layer_has_dense(c, layer)) return 0;
    if ((req & REQ_MOE) && (layer < 0 || !config_layer_is_moe(c, layer))) return 0;
    if ((req & REQ_OWN_KV) && layer >= 0 && config_kv_source(c, layer) != layer) return 0;
    if ((req & REQ_MLA) && !config_mla(c)) return 0;
    if ((req & REQ_NOT_MLA) && config_mla(c)) return 0;
    if ((req & REQ_Q_LORA) && !(config_mla(c) && c->q_lora_rank > 0)) return 0;
    if ((req & REQ_OWN_V) && layer >= 0 && config_layer_k_eq_v(c, layer)) return 0;
    if ((req & REQ_NOT_MOE_BLOCK) && layer >= 0 && config_layer_is_moe(c, layer) && c->moe_block) return 0;
    return 1;
}

/* shape [B, T, ...] of a point of kind p->shape; the number of dimensions */
static int shape_of(const tlm_config *c, int l, const point_desc *p, int B, int T, int64_t shape[5]) {
    shape[0] = B, shape[1] = T, shape[2] = c->d_model;
    const int hd = l >= 0 ? config_layer_head_dim(c, l) : c->head_dim; /* (Gemma 4's layer types differ) */
    switch (p->shape) {
    case SH_ROW: shape[2] = 1; return 3;
    case SH_Q: shape[2] = c->n_heads, shape[3] = hd; return 4;
    case SH_KV: shape[2] = l >= 0 ? config_layer_kv_heads(c, l) : c->n_kv_heads, shape[3] = hd; return 4;
    case SH_MAP: shape[1] = c->n_heads, shape[2] = T, shape[3] = T; return 4;
    case SH_FF: shape[2] = l >= 0 ? config_layer_ff(c, l) : c->d_ff; return 3;
    case SH_VOCAB: shape[2] = c->vocab_size; return 3;
    case SH_EXPERTS: shape[2] = c->n_experts; return 3;
    case SH_TOPK: shape[2] = c->n_experts_per_tok; return 3;
    case SH_TOPK_D: shape[2] = c->n_experts_per_tok, shape[3] = c->d_model; return 4;
    case SH_QLORA: shape[2] = c->q_lora_rank; return 3;
    case SH_KVLORA: shape[2] = c->kv_lora_rank; return 3;
    case SH_HEADS_D: shape[2] = c->n_heads, shape[3] = c->d_model; return 4;
    case SH_Q_INPUT:
    case SH_KV_INPUT:
        if (!c->split_qkv_heads) return 3;
        shape[2] = p->shape == SH_Q_INPUT ? c->n_heads : l >= 0 ? config_layer_kv_heads(c, l) : c->n_kv_heads;
        shape[3] = c->d_model;
        return 4;
    default: return 3;
    }
}

int model_point_describe(const tlm_config *c, int id, int B, int T, char *name, size_t cap, int64_t shape[5],
                         int *flags) {
    int l, k;
    *flags = 0;
    shape[0] = B, shape[1] = T, shape[2] = c->d_model;
    if (!model_point_of(c, id, &l, &k) || !POINTS[k].name || !config_has(c, l, POINTS[k].req)) return 0;
    const point_desc *p = &POINTS[k];
    if (name && cap && l >= 0)
        snprintf(name, cap, "blocks.%d.%s", l, p->name);
    else if (name && cap)
        snprintf(name, cap, "%s", p->name);
    *flags = p->flags;
    return shape_of(c, l, p, B, T, shape);
}

int model_point_probe(const tlm_config *c, int id, int j, int is_grad, int B, int T, point_probe *out) {
    int l, k;
    if (!model_point_of(c, id, &l, &k) || j < 0 || j >= PROBE_NAMES || !POINTS[k].probe[j].name) return -1;
    const point_desc *p = &POINTS[k];
    const probe_name *pn = &p->probe[j];
    if ((is_grad && !(pn->kind & P_GRAD)) || !config_has(c, l, pn->req)) return 0;
    const char *grad = is_grad ? "grad." : "";
    if (pn->kind & P_TOP)
        snprintf(out->name, sizeof out->name, "%s%s", grad, pn->name);
    else
        snprintf(out->name, sizeof out->name, "%slayers.%d.%s", grad, l, pn->name);
    int64_t shape[5];
    out->ndim = shape_of(c, l, p, B, T, shape);
    if (pn->kind & P_RMS) out->ndim = 2; /* [B, T]: one value per row */
    memcpy(out->shape, shape, sizeof out->shape);
    out->flags = (pn->kind & P_RMS ? POINT_PROBE_RMS : 0) | (p->flags & TLM_HOOK_MASKED ? POINT_PROBE_MASKED : 0) |
                 (p->shape == SH_MAP ? POINT_PROBE_MAP : 0);
    out->layer = l;
    return 1;
}
