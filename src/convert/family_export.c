/* family_export.c — what the family table (family.h) says of each family tinylm writes: its
 * blocker, the first feature of a config the family cannot express exactly (NULL: it expresses it;
 * the families' blockers rule each other out), and its config.json. The export itself, the
 * tensors and the target directory, is hf_export.c's. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family.h"

/* ---- which family expresses the config -------------------------------------------------------- */

static bool any_sliding(const tlm_config *c) {
    if (c->sliding_window <= 0) return false;
    for (int l = 0; l < c->n_layers; l++)
        if (c->layer_sliding[l]) return true;
    return false;
}

/* features shared by both HF targets; returns the first one that is off, or NULL */
static const char *common_blocker(const tlm_config *c) {
    if (c->norm == NORM_DYT) return "norm_type \"dyt\" (Dynamic Tanh: no Hugging Face family has it)";
    if (c->placement != PLACE_PRE) return "norm placement other than pre";
    if (!c->residual) return "no residual";
    if (!c->final_norm) return "no final norm";
    if (c->embed_scale) return "embedding scale";
    if (c->qk_norm != QK_NORM_NONE) return "QK-norm";
    if (c->attn_softcap != 0.0f) return "attention soft-capping";
    if (c->final_softcap != 0.0f) return "final logit soft-capping";
    if (any_sliding(c)) return "sliding-window attention";
    if (c->n_experts > 0) return "a mixture-of-experts FFN (num_experts)";
    if (config_mla(c)) return "multi-head latent attention (kv_lora_rank)";
    /* Gemma 4's switches (no Llama or GPT-2 checkpoint holds them; the family's own export is not written) */
    if ((c->head_dim_full && c->head_dim_full != c->head_dim) || (c->n_kv_heads_full && c->n_kv_heads_full != c->n_kv_heads))
        return "full-attention layers of their own head_dim / kv heads (Gemma 4)";
    if (c->rope_proportional > 0.0f && c->rope_proportional < 1.0f) return "proportional RoPE (Gemma 4)";
    if (c->v_norm) return "v norm (Gemma 4)";
    if (c->k_eq_v) return "K = V (Gemma 4)";
    if (c->n_kv_shared) return "shared keys and values (Gemma 4)";
    if (c->ple_dim) return "per-layer inputs (Gemma 4)";
    if (c->layer_scalar) return "layer scalar (Gemma 4)";
    return NULL;
}

const char *hf_llama_blocker(const tlm_config *c) {
    const char *b = common_blocker(c);
    if (b) return b;
    if (c->norm != NORM_RMSNORM) return "norm type other than rmsnorm";
    if (c->position != POS_ROPE) return "positions other than RoPE";
    if (c->ffn != FFN_SWIGLU) return "FFN other than SwiGLU";
    if (c->attn_bias != c->attn_out_bias) return "q/k/v biases without the o bias (or the reverse)";
    if (c->query_pre_attn_scalar != 0.0f && c->query_pre_attn_scalar != (float)c->head_dim)
        return "attention scale other than head_dim^-0.5";
    return NULL;
}

static const char *gpt2_blocker_as_is(const tlm_config *c) {
    const char *b = common_blocker(c);
    if (b) return b;
    if (c->norm != NORM_LAYERNORM || !c->norm_bias) return "norm other than LayerNorm with bias";
    if (c->position != POS_LEARNED) return "positions other than learned";
    if (c->ffn != FFN_GELU || !c->mlp_bias) return "FFN other than GELU with biases";
    if (!c->attn_bias || !c->attn_out_bias) return "attention without biases";
    if (c->n_kv_heads != c->n_heads || c->head_dim * c->n_heads != c->d_model) return "GQA or head_dim != d/H";
    if (c->query_pre_attn_scalar != 0.0f && c->query_pre_attn_scalar != 1.0f &&
        c->query_pre_attn_scalar != (float)c->head_dim)
        return "attention scale other than head_dim^-0.5 or 1";
    return NULL;
}

/* GPT-2 has every bias; a model without some of them is the same function as GPT-2 with those
 * biases zero (the nanogpt-baby preset: LayerNorm without bias, linear layers without) */
tlm_config family_with_all_biases(const tlm_config *c) {
    tlm_config b = *c;
    b.norm_bias = b.attn_bias = b.attn_out_bias = b.mlp_bias = true;
    return b;
}

const char *hf_gpt2_blocker(const tlm_config *c) {
    if (c->norm != NORM_LAYERNORM) return gpt2_blocker_as_is(c);
    const tlm_config biased = family_with_all_biases(c);
    return gpt2_blocker_as_is(&biased);
}

/* a mixture of experts that Qwen3-MoE (per-head QK-Norm) or Mixtral (none; every layer's FFN
 * experts of one size, always renormalised) computes: softmax routing without DeepSeek-V3's
 * shared experts, groups or scaling, on a llama-like body */
static const char *moe_blocker(const tlm_config *c, int qwen) {
    if (c->n_experts == 0) return "no experts";
    tlm_config body = *c;
    body.n_experts = 0, body.qk_norm = QK_NORM_NONE;
    const char *b = hf_llama_blocker(&body);
    if (b) return b;
    if (c->mlp_bias) return "MLP biases";
    if (c->scoring != SCORING_SOFTMAX) return "sigmoid routing (DeepSeek-V3's)";
    if (c->n_shared_experts) return "shared experts";
    if (c->n_group > 1) return "group-limited top-k";
    if (c->routed_scaling_factor != 1.0f) return "routed_scaling_factor other than 1";
    if (qwen) return c->qk_norm == QK_NORM_HEAD ? NULL : "QK-norm other than per head";
    if (c->qk_norm != QK_NORM_NONE) return "QK-norm";
    if (config_moe_layers(c) != c->n_layers) return "dense layers";
    if (!c->norm_topk_prob) return "routed weights not renormalised";
    return NULL;
}

const char *hf_qwen3_moe_blocker(const tlm_config *c) { return moe_blocker(c, 1); }
const char *hf_mixtral_blocker(const tlm_config *c) { return moe_blocker(c, 0); }

/* Qwen2-MoE (Qwen2MoeForCausalLM): the llama body with q/k/v biases or none and no o bias, softmax routing
 * without groups or scaling, one shared expert (of any width) behind its sigmoid gate, head_dim hidden / heads
 * (Qwen2MoeAttention of transformers 4.x derives it so) */
const char *hf_qwen2_moe_blocker(const tlm_config *c) {
    if (c->n_experts == 0) return "no experts";
    if (!c->shared_gate) return "no shared expert behind a sigmoid gate";
    tlm_config body = *c;
    body.n_experts = 0, body.n_shared_experts = 0, body.shared_d_ff = 0, body.shared_gate = false;
    body.attn_out_bias = body.attn_bias;
    const char *b = hf_llama_blocker(&body);
    if (b) return b;
    if (c->attn_out_bias) return "an o_proj bias (Qwen2MoeAttention has none)";
    if (c->mlp_bias) return "MLP biases";
    if (c->qk_norm != QK_NORM_NONE) return "QK-norm";
    if (c->scoring != SCORING_SOFTMAX) return "sigmoid routing";
    if (c->n_group > 1) return "group-limited top-k";
    if (c->routed_scaling_factor != 1.0f) return "routed_scaling_factor other than 1";
    if (c->head_dim * c->n_heads != c->d_model) return "head_dim other than hidden_size / num_attention_heads";
    return NULL;
}

/* DeepSeek-V3 (DeepseekV3ForCausalLM): MLA on a llama-like body, DeepseekV3MoE (sigmoid routing with the
 * selection bias, a shared expert) in every layer from first_k_dense_replace on */
const char *hf_deepseek_v3_blocker(const tlm_config *c) {
    if (!config_mla(c)) return "no multi-head latent attention";
    if (c->n_experts == 0) return "MLA without a mixture of experts (DeepSeek-V3's layers after the dense ones are MoE)";
    tlm_config body = *c;
    body.n_experts = 0, body.kv_lora_rank = 0, body.q_lora_rank = 0, body.rope_scaling = ROPE_SCALING_NONE;
    const char *b = hf_llama_blocker(&body);
    if (b) return b;
    if (c->attn_bias) return "attention biases";
    if (c->mlp_bias) return "MLP biases";
    if (c->scoring != SCORING_SIGMOID) return "softmax routing (DeepSeek-V3 routes by sigmoid scores)";
    if (c->n_shared_experts < 1) return "no shared expert";
    if (c->shared_gate || config_shared_ff(c) != c->n_shared_experts * c->moe_d_ff)
        return "a shared expert of its own width or behind a gate (DeepSeek-V3's is n_shared_experts experts' width, "
               "ungated)";
    if (c->sparse_step != 1 || c->n_mlp_only > 0) return "decoder_sparse_step / mlp_only_layers";
    return NULL;
}

/* Mistral (MistralForCausalLM): the llama body without biases, one sliding window in every layer */
const char *hf_mistral_blocker(const tlm_config *c) {
    if (!any_sliding(c)) return "no sliding window";
    for (int l = 0; l < c->n_layers; l++)
        if (!c->layer_sliding[l]) return "a sliding window on some layers only";
    if (c->rope_theta_local > 0.0f && c->rope_theta_local != c->rope_theta) return "a RoPE base of its own on the "
                                                                                   "sliding layers";
    tlm_config body = *c;
    body.sliding_window = 0;
    memset(body.layer_sliding, 0, sizeof body.layer_sliding);
    const char *b = hf_llama_blocker(&body);
    if (b) return b;
    if (c->attn_bias || c->attn_out_bias || c->mlp_bias) return "biases (MistralAttention and MistralMLP have none)";
    return NULL;
}

/* ---- each family's config.json ------------------------------------------------------------------------------------ */

/* the shortest decimal that reads back as the same float (1e-05, not 9.99999974737875e-06) */
static double tidy(float x) {
    char buf[40];
    for (int p = 6; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)x);
        if (strtof(buf, NULL) == x) return strtod(buf, NULL);
    }
    return (double)x;
}

static void add_rope(cJSON *o, const tlm_config *c) {
    cJSON_AddNumberToObject(o, "rope_theta", tidy(c->rope_theta));
    config_json_add_rope_scaling(o, c, tidy);
}

/* a config.json's opening: architectures [arch], model_type, the sizes every RoPE family names alike */
static cJSON *config_open(const tlm_config *c, const char *arch, const char *model_type) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "architectures"), cJSON_CreateString(arch));
    cJSON_AddStringToObject(o, "model_type", model_type);
    config_json_add_sizes(o, c);
    return o;
}

static void add_eps_rope(cJSON *o, const tlm_config *c) {
    cJSON_AddNumberToObject(o, "rms_norm_eps", tidy(c->norm_eps));
    add_rope(o, c);
}

/* SiLU, the tied head, the init's std */
static void add_act_tie_init(cJSON *o, const tlm_config *c) {
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_embeddings);
    cJSON_AddNumberToObject(o, "initializer_range", tidy(c->init_std));
}

/* the dense layers among the experts' (first_k_dense_replace as mlp_only_layers) */
static void add_mlp_only(cJSON *o, const tlm_config *c) {
    cJSON *only = cJSON_AddArrayToObject(o, "mlp_only_layers");
    for (int l = 0; l < c->n_layers; l++)
        if (l < c->first_k_dense || c->mlp_only[l]) cJSON_AddItemToArray(only, cJSON_CreateNumber(l));
}

/* torch_dtype float32 (the weights as written; a bf16 export replaces it), then the text */
static char *config_close(cJSON *o) {
    cJSON_AddStringToObject(o, "torch_dtype", "float32");
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

/* LlamaConfig, or MistralConfig: the llama body's keys, Mistral's without the biases and with the
 * window of every layer */
static char *llama_body_config(const tlm_config *c, int mistral) {
    cJSON *o = config_open(c, mistral ? "MistralForCausalLM" : "LlamaForCausalLM", mistral ? "mistral" : "llama");
    add_eps_rope(o, c);
    if (mistral) {
        cJSON_AddNumberToObject(o, "sliding_window", c->sliding_window);
    } else {
        cJSON_AddBoolToObject(o, "attention_bias", c->attn_bias);
        cJSON_AddBoolToObject(o, "mlp_bias", c->mlp_bias);
    }
    add_act_tie_init(o, c);
    return config_close(o);
}

char *hf_llama_config(const tlm_config *c) { return llama_body_config(c, 0); }
char *hf_mistral_config(const tlm_config *c) { return llama_body_config(c, 1); }

/* Qwen3MoeConfig / MixtralConfig: the llama body's keys and the experts' (first_k_dense_replace
 * becomes mlp_only_layers, which Qwen3-MoE has) */
static char *moe_config(const tlm_config *c, int qwen) {
    cJSON *o = config_open(c, qwen ? "Qwen3MoeForCausalLM" : "MixtralForCausalLM", qwen ? "qwen3_moe" : "mixtral");
    add_eps_rope(o, c);
    add_act_tie_init(o, c);
    cJSON_AddNumberToObject(o, "num_experts_per_tok", c->n_experts_per_tok);
    if (qwen) {
        cJSON_AddBoolToObject(o, "attention_bias", c->attn_bias);
        cJSON_AddNumberToObject(o, "num_experts", c->n_experts);
        cJSON_AddNumberToObject(o, "moe_intermediate_size", c->moe_d_ff);
        cJSON_AddBoolToObject(o, "norm_topk_prob", c->norm_topk_prob);
        cJSON_AddNumberToObject(o, "decoder_sparse_step", c->sparse_step);
        cJSON_AddBoolToObject(o, "use_sliding_window", false);
        add_mlp_only(o, c);
    } else {
        cJSON_AddNumberToObject(o, "num_local_experts", c->n_experts);
        cJSON_ReplaceItemInObject(o, "intermediate_size", cJSON_CreateNumber(c->moe_d_ff)); /* (the experts') */
        cJSON_AddNullToObject(o, "sliding_window");
    }
    return config_close(o);
}

char *hf_qwen3_moe_config(const tlm_config *c) { return moe_config(c, 1); }
char *hf_mixtral_config(const tlm_config *c) { return moe_config(c, 0); }

/* Qwen2MoeConfig: the body's keys (qkv_bias for the q/k/v biases), the experts' and the shared expert's
 * (first_k_dense_replace becomes mlp_only_layers) */
char *hf_qwen2_moe_config(const tlm_config *c) {
    cJSON *o = config_open(c, "Qwen2MoeForCausalLM", "qwen2_moe");
    cJSON_DeleteItemFromObject(o, "head_dim"); /* (no Qwen2MoeConfig key: hidden_size / heads) */
    add_eps_rope(o, c);
    add_act_tie_init(o, c);
    cJSON_AddBoolToObject(o, "qkv_bias", c->attn_bias);
    cJSON_AddNumberToObject(o, "num_experts", c->n_experts);
    cJSON_AddNumberToObject(o, "num_experts_per_tok", c->n_experts_per_tok);
    cJSON_AddNumberToObject(o, "moe_intermediate_size", c->moe_d_ff);
    cJSON_AddNumberToObject(o, "shared_expert_intermediate_size", config_shared_ff(c));
    cJSON_AddBoolToObject(o, "norm_topk_prob", c->norm_topk_prob);
    cJSON_AddNumberToObject(o, "decoder_sparse_step", c->sparse_step);
    cJSON_AddBoolToObject(o, "use_sliding_window", false);
    add_mlp_only(o, c);
    return config_close(o);
}

/* DeepseekV3Config: the body's keys, MLA's and DeepseekV3MoE's */
char *hf_deepseek_v3_config(const tlm_config *c) {
    cJSON *o = config_open(c, "DeepseekV3ForCausalLM", "deepseek_v3");
    cJSON_DeleteItemFromObject(o, "head_dim"); /* (DeepseekV3Config sets it to qk_rope_head_dim) */
    add_eps_rope(o, c);
    add_act_tie_init(o, c);
    cJSON_AddBoolToObject(o, "attention_bias", false);
    config_json_add_mla(o, c);
    cJSON_AddNumberToObject(o, "n_routed_experts", c->n_experts);
    cJSON_AddNumberToObject(o, "num_experts_per_tok", c->n_experts_per_tok);
    cJSON_AddNumberToObject(o, "moe_intermediate_size", c->moe_d_ff);
    cJSON_AddNumberToObject(o, "n_shared_experts", c->n_shared_experts);
    cJSON_AddNumberToObject(o, "routed_scaling_factor", tidy(c->routed_scaling_factor));
    cJSON_AddNumberToObject(o, "n_group", c->n_group);
    cJSON_AddNumberToObject(o, "topk_group", c->topk_group);
    cJSON_AddNumberToObject(o, "first_k_dense_replace", c->first_k_dense);
    cJSON_AddBoolToObject(o, "norm_topk_prob", c->norm_topk_prob);
    return config_close(o);
}

char *hf_gpt2_config(const tlm_config *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("GPT2LMHeadModel"));
    cJSON_AddStringToObject(o, "model_type", "gpt2");
    cJSON_AddNumberToObject(o, "vocab_size", c->vocab_size);
    cJSON_AddNumberToObject(o, "n_embd", c->d_model);
    cJSON_AddNumberToObject(o, "n_layer", c->n_layers);
    cJSON_AddNumberToObject(o, "n_head", c->n_heads);
    cJSON_AddNumberToObject(o, "n_positions", c->max_seq);
    cJSON_AddNumberToObject(o, "n_inner", c->d_ff);
    cJSON_AddStringToObject(o, "activation_function", "gelu_new");
    cJSON_AddNumberToObject(o, "layer_norm_epsilon", tidy(c->norm_eps));
    cJSON_AddBoolToObject(o, "scale_attn_weights", c->query_pre_attn_scalar != 1.0f);
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_embeddings);
    cJSON_AddNumberToObject(o, "initializer_range", tidy(c->init_std));
    return config_close(o);
}
