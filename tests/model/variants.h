/* variants.h — architecture variants shared by the model-level tests (causality, KV cache):
 * a small base config and one tweak per variant. */
#ifndef TLM_TEST_VARIANTS_H
#define TLM_TEST_VARIANTS_H

#include "model/config.h"

static void v_pre(tlm_config *c) { (void)c; }
static void v_post(tlm_config *c) { c->placement = PLACE_POST, c->final_norm = false, c->norm = NORM_LAYERNORM; }
static void v_sandwich(tlm_config *c) {
    c->placement = PLACE_SANDWICH, c->norm = NORM_RMSNORM_1P, c->attn_softcap = 20, c->final_softcap = 15;
    c->embed_scale = true, c->ffn = FFN_GEGLU, c->query_pre_attn_scalar = 12;
}
static void v_output(tlm_config *c) { c->placement = PLACE_OUTPUT, c->qk_norm = QK_NORM_FULL; }
static void v_none(tlm_config *c) { c->placement = PLACE_NONE; }
static void v_learned(tlm_config *c) {
    c->position = POS_LEARNED, c->ffn = FFN_GELU, c->norm = NORM_LAYERNORM, c->norm_bias = true;
    c->attn_bias = c->attn_out_bias = c->mlp_bias = true;
}
static void v_sliding(tlm_config *c) { c->sliding_window = 3, c->layer_sliding[0] = 1, c->rope_theta_local = 500; }
static void v_mqa(tlm_config *c) { c->n_kv_heads = 1, c->tie_embeddings = false; }
static void v_no_residual(tlm_config *c) { c->residual = false, c->qk_norm = QK_NORM_HEAD; }
static void v_dyt(tlm_config *c) { c->norm = NORM_DYT, c->placement = PLACE_SANDWICH, c->dyt_alpha_init = 0.7f; }

/* DeepNorm with its derived alpha (2N)^(1/4), beta (8N)^(-1/4); LayerNorm as in the paper */
static void v_deepnorm(tlm_config *c) {
    c->placement = PLACE_DEEPNORM, c->final_norm = false, c->norm = NORM_LAYERNORM, c->scale_residual_init = false;
}

/* mixtures of experts: softmax top-2 of 4 renormalised with a shared expert (Qwen3-MoE /
 * Mixtral routing); DeepSeek-V3's sigmoid routing, group-limited top-2 (2 of 4 groups of 2),
 * scaled weights, after a dense first layer; top-1 without renormalising on every second layer */
static void v_moe_softmax(tlm_config *c) {
    c->n_experts = 4, c->n_experts_per_tok = 2, c->moe_d_ff = 16, c->n_shared_experts = 1, c->norm_topk_prob = true;
}
static void v_moe_sigmoid(tlm_config *c) {
    c->n_experts = 8, c->n_experts_per_tok = 2, c->moe_d_ff = 12, c->scoring = SCORING_SIGMOID;
    c->n_group = 4, c->topk_group = 2, c->routed_scaling_factor = 2.5f, c->norm_topk_prob = true;
    c->first_k_dense = 1, c->ffn = FFN_GEGLU;
}
static void v_moe_step2(tlm_config *c) {
    c->n_experts = 4, c->n_experts_per_tok = 1, c->moe_d_ff = 24, c->sparse_step = 2, c->placement = PLACE_SANDWICH;
}

/* Gemma 4's dense block: plain-w sandwich norms, per-head QK-norm and a v norm without weight,
 * attention scale 1, a sliding layer (head_dim 8, 2 kv heads, local RoPE base) and a full one of
 * its own shape (head_dim 16, 1 kv head, proportional RoPE: half the frequencies rotate), the
 * layer scalar, final soft-cap */
static void v_gemma4(tlm_config *c) {
    c->placement = PLACE_SANDWICH, c->qk_norm = QK_NORM_HEAD, c->v_norm = true, c->query_pre_attn_scalar = 1;
    c->embed_scale = true, c->ffn = FFN_GEGLU, c->final_softcap = 15, c->layer_scalar = true;
    c->sliding_window = 3, c->rope_theta_local = 500, c->n_layer_types = c->n_layers;
    for (int l = 0; l < c->n_layers; l++) c->layer_sliding[l] = l % 2 == 0;
    c->head_dim_full = 16, c->n_kv_heads_full = 1, c->rope_proportional = 0.5f;
}
/* ... with K = V on the full layers and the last two of four layers (S F S F) sharing the keys and
 * values of layers 0 (sliding) and 1 (full) */
static void v_gemma4_shared(tlm_config *c) {
    c->n_layers = 4;
    v_gemma4(c);
    c->k_eq_v = true, c->n_kv_shared = 2, c->ffn_double_shared = true;
}

/* ... with per-layer inputs of 4 dims a layer (Gemma 4's hidden_size_per_layer_input) */
static void v_gemma4_ple(tlm_config *c) {
    v_gemma4(c);
    c->ple_dim = 4;
}

/* ... with Gemma 4's MoE block: 4 experts (top 2, renormalised, each its own weight scale) beside
 * the dense FFN of every layer, the router on the stream's own scaled RMSNorm */
static void v_gemma4_moe(tlm_config *c) {
    v_gemma4_ple(c);
    c->n_experts = 4, c->n_experts_per_tok = 2, c->moe_d_ff = 12, c->norm_topk_prob = true, c->moe_block = true;
}
/* multi-head latent attention (DeepSeek-V2/V3): q through q_lora (12), c_kv of 10, heads of 6 nope + 4
 * rope dims for q.k and 5 for v (padded heads of 10), interleaved RoPE pairs; a plain q projection with
 * v wider than q.k (12 > 4 + 6) and YaRN (factor 4 over 8 original positions, mscale 0.8 / all-dim 1:
 * scaled RoPE tables and a corrected softmax scale); MLA with DeepSeek-V3's routing after a dense layer */
static void v_mla(tlm_config *c) {
    c->q_lora_rank = 12, c->kv_lora_rank = 10, c->qk_nope_dim = 6, c->qk_rope_dim = 4, c->v_head_dim = 5;
    c->rope_interleave = true;
    config_mla_finish(c);
}
static void v_mla_yarn(tlm_config *c) {
    c->kv_lora_rank = 8, c->qk_nope_dim = 4, c->qk_rope_dim = 6, c->v_head_dim = 12, c->rope_theta = 100;
    c->rope_scaling = ROPE_SCALING_YARN, c->rope_factor = 4, c->rope_original_max_pos = 8;
    c->rope_beta_fast = 32, c->rope_beta_slow = 1, c->rope_mscale = 0.8f, c->rope_mscale_all_dim = 1;
    c->rope_truncate = true;
    config_mla_finish(c);
}
static void v_mla_moe(tlm_config *c) {
    v_moe_sigmoid(c);
    v_mla(c);
    c->rope_interleave = false;
}

/* Gemma 1's block: Llama's pre-norm layout with (1 + w) RMSNorm, GeGLU, the scaled embedding, MQA; Mistral's
 * window in every layer */
static void v_gemma1(tlm_config *c) {
    c->norm = NORM_RMSNORM_1P, c->ffn = FFN_GEGLU, c->embed_scale = true, c->n_kv_heads = 1;
}
/* Qwen2-MoE: softmax top-2 of 4 not renormalised, a shared expert of its own width behind a sigmoid gate */
static void v_qwen2_moe(tlm_config *c) {
    c->n_experts = 4, c->n_experts_per_tok = 2, c->moe_d_ff = 12, c->n_shared_experts = 1, c->shared_d_ff = 20;
    c->shared_gate = true, c->attn_bias = true;
}
static void v_mistral(tlm_config *c) {
    c->sliding_window = 4; /* (two layers of 4 still reach back 6 positions: test_causal's change at 2 reaches 7) */
    for (int l = 0; l < c->n_layers; l++) c->layer_sliding[l] = 1;
}

typedef struct {
    const char *name;
    void (*tweak)(tlm_config *);
} variant;

static const variant VARIANTS[] = {
    {"pre-norm rmsnorm rope swiglu gqa", v_pre},
    {"post-norm layernorm", v_post},
    {"sandwich (1+w) softcaps geglu", v_sandwich},
    {"output norms, full qk-norm", v_output},
    {"no norms in blocks", v_none},
    {"learned positions, gelu mlp, biases", v_learned},
    {"sliding window 3 on layer 0, local rope", v_sliding},
    {"mqa, untied head", v_mqa},
    {"no residual, per-head qk-norm", v_no_residual},
    {"dyt sandwich", v_dyt},
    {"deepnorm layernorm", v_deepnorm},
    {"moe softmax top-2/4, shared expert", v_moe_softmax},
    {"moe sigmoid group-limited, dense layer 0", v_moe_sigmoid},
    {"moe top-1 every 2nd layer, sandwich", v_moe_step2},
    {"gemma4: v norm, layer types, scalar", v_gemma4},
    {"gemma4: k = v, shared kv (4 layers)", v_gemma4_shared},
    {"gemma4: per-layer inputs", v_gemma4_ple},
    {"gemma4: moe block beside the dense ffn", v_gemma4_moe},
    {"mla: q_lora, interleaved rope, dv < qk", v_mla},
    {"mla: plain q, yarn, dv > qk", v_mla_yarn},
    {"mla + moe sigmoid (deepseek-v3 block)", v_mla_moe},
    {"gemma1: pre-norm (1+w), geglu, mqa", v_gemma1},
    {"mistral: every layer sliding (window 4)", v_mistral},
    {"qwen2-moe: shared expert behind a sigmoid gate", v_qwen2_moe},
};

/* 40 tokens, d 32, 2 layers, 4 heads / 2 kv heads of 8 dims, d_ff 48, 16 positions */
static void variant_config(tlm_config *c, const variant *v) {
    config_defaults(c);
    c->vocab_size = 40, c->d_model = 32, c->n_layers = 2, c->n_heads = 4, c->n_kv_heads = 2, c->head_dim = 8;
    c->d_ff = 48, c->max_seq = 16;
    v->tweak(c);
}

#endif
