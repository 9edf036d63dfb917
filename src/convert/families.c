/* families.c — the family table (family.h): one entry per checkpoint family, and the readers of
 * the Hugging Face config.json files as engine configs.
 *
 * A family is data: its fixed architecture (what its modeling_*.py hard-codes) together with
 * the defaults of its configuration_*.py class (config.json files are written as a diff
 * against those defaults, so a missing key means the class default), the config keys that
 * change the numbers, the bookkeeping keys that do not, and a check for the keys that need
 * more than a copy (RoPE, activation, sliding-window layers). Every decision is documented
 * in docs/hf-families.md. */
#include "family.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/config_keys.h"
#include "util/error.h"
#include "util/finite.h"
#include "util/io.h"

#define F(field) offsetof(tlm_config, field)

/* keys every RoPE family (all but gpt2) reads the same way */
static const config_key HF_COMMON_KEYS[] = {
    {"vocab_size", KEY_INT, F(vocab_size), NULL},
    {"hidden_size", KEY_INT, F(d_model), NULL},
    {"num_hidden_layers", KEY_INT, F(n_layers), NULL},
    {"num_attention_heads", KEY_INT, F(n_heads), NULL},
    {"num_key_value_heads", KEY_INT_OR_NULL, F(n_kv_heads), NULL},
    {"head_dim", KEY_INT_OR_NULL, F(head_dim), NULL},
    {"intermediate_size", KEY_INT, F(d_ff), NULL},
    {"max_position_embeddings", KEY_INT, F(max_seq), NULL},
    {"rope_theta", KEY_FLOAT, F(rope_theta), NULL},
    {"rms_norm_eps", KEY_FLOAT, F(norm_eps), NULL},
    {"tie_word_embeddings", KEY_BOOL, F(tie_embeddings), NULL},
    {"initializer_range", KEY_FLOAT, F(init_std), NULL},
    {NULL, 0, 0, NULL},
};

/* keys that never change the logits, in any family */
static const char *const HF_IGNORED[] = {
    "model_type", "architectures", "bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype",
    "transformers_version", "use_cache", "_name_or_path", "attention_dropout", "hidden_dropout",
    "output_attentions", "output_hidden_states", "return_dict", "dtype", "auto_map", "max_window_layers",
    "use_sliding_window", "use_return_dict", "tokenizer_class", "unsloth_fixed", "initializer_factor",
    "is_decoder", "chunk_size_feed_forward", "task_specific_params",
    "problem_type", "id2label", "label2id", NULL,
};

/* ---- the fixed architecture and class defaults of each family ------------------------------ */

static void sizes(tlm_config *c, int V, int d, int f, int L, int H, int KV, int hd, int max_pos) {
    c->vocab_size = V, c->d_model = d, c->d_ff = f, c->n_layers = L;
    c->n_heads = H, c->n_kv_heads = KV, c->head_dim = hd, c->max_seq = max_pos;
}

/* LlamaConfig: num_key_value_heads None -> heads, head_dim None -> hidden/heads */
static void arch_llama(tlm_config *c) {
    sizes(c, 32000, 4096, 11008, 32, 32, 0, 0, 2048);
    c->norm = NORM_RMSNORM, c->placement = PLACE_PRE, c->position = POS_ROPE, c->ffn = FFN_SWIGLU;
    c->norm_eps = 1e-6f, c->rope_theta = 10000.0f, c->tie_embeddings = false;
}

/* Qwen2Attention: q, k, v with bias, o without (hard-coded, not a config key) */
static void arch_qwen2(tlm_config *c) {
    sizes(c, 151936, 4096, 22016, 32, 32, 32, 0, 32768);
    c->norm = NORM_RMSNORM, c->placement = PLACE_PRE, c->position = POS_ROPE, c->ffn = FFN_SWIGLU;
    c->norm_eps = 1e-6f, c->rope_theta = 10000.0f, c->tie_embeddings = false;
    c->attn_bias = true, c->attn_out_bias = false;
    c->sliding_window = 4096; /* the class default; only used with use_sliding_window */
}

/* Qwen3: per-head QK-Norm (plain w), head_dim default 128, attention_bias on q, k, v, o */
static void arch_qwen3(tlm_config *c) {
    arch_qwen2(c);
    c->head_dim = 128;
    c->attn_bias = c->attn_out_bias = false;
    c->qk_norm = QK_NORM_HEAD;
}

/* Qwen3-MoE (configuration_qwen3_moe.py): Qwen3's attention (per-head QK-Norm; head_dim None ->
 * hidden / heads here), every layer's FFN a mixture of experts unless decoder_sparse_step or
 * mlp_only_layers keep it dense (Qwen3MoeDecoderLayer); softmax routing, norm_topk_prob false */
static void arch_qwen3_moe(tlm_config *c) {
    sizes(c, 151936, 2048, 6144, 24, 32, 4, 0, 32768);
    c->norm = NORM_RMSNORM, c->placement = PLACE_PRE, c->position = POS_ROPE, c->ffn = FFN_SWIGLU;
    c->norm_eps = 1e-6f, c->rope_theta = 10000.0f, c->tie_embeddings = false;
    c->qk_norm = QK_NORM_HEAD, c->sliding_window = 4096;
    c->n_experts = 128, c->n_experts_per_tok = 8, c->moe_d_ff = 768, c->norm_topk_prob = false;
}

/* Qwen2-MoE (configuration_qwen2_moe.py, Qwen1.5-MoE-A2.7B's sizes): Qwen2's attention (q, k, v with bias,
 * qkv_bias in transformers 5; o without), every layer's FFN Qwen2MoeSparseMoeBlock unless decoder_sparse_step
 * or mlp_only_layers keep it dense: softmax top-k (norm_topk_prob false) plus one shared expert of
 * shared_expert_intermediate_size whose output is times sigmoid(shared_expert_gate(x)) */
static void arch_qwen2_moe(tlm_config *c) {
    sizes(c, 151936, 2048, 5632, 24, 16, 16, 0, 32768);
    c->norm = NORM_RMSNORM, c->placement = PLACE_PRE, c->position = POS_ROPE, c->ffn = FFN_SWIGLU;
    c->norm_eps = 1e-6f, c->rope_theta = 10000.0f, c->tie_embeddings = false;
    c->attn_bias = true, c->attn_out_bias = false, c->sliding_window = 4096;
    c->n_experts = 60, c->n_experts_per_tok = 4, c->moe_d_ff = 1408, c->norm_topk_prob = false;
    c->n_shared_experts = 1, c->shared_d_ff = 5632, c->shared_gate = true;
}

/* Mixtral (configuration_mixtral.py): Mistral's attention (one sliding window for every layer when
 * set), every FFN a mixture of num_local_experts experts of intermediate_size, softmax routing
 * always renormalised over the chosen (MixtralSparseMoeBlock) */
static void arch_mixtral(tlm_config *c) {
    sizes(c, 32000, 4096, 14336, 32, 32, 8, 0, 131072);
    c->norm = NORM_RMSNORM, c->placement = PLACE_PRE, c->position = POS_ROPE, c->ffn = FFN_SWIGLU;
    c->norm_eps = 1e-5f, c->rope_theta = 1000000.0f, c->tie_embeddings = false;
    c->n_experts = 8, c->n_experts_per_tok = 2, c->norm_topk_prob = true;
}

/* DeepSeek-V3 (configuration_deepseek_v3.py, modeling_deepseek_v3.py): Llama's Pre-Norm RMSNorm body with
 * multi-head latent attention in every layer (q_lora_rank 1536, kv_lora_rank 512, q.k over 128 nope + 64
 * rope dims, v 128, interleaved RoPE pairs), dense SwiGLU FFNs in the first first_k_dense_replace layers and
 * DeepseekV3MoE after them: sigmoid scores, e_score_correction_bias for the choice only, the best topk_group
 * of n_group groups, weights renormalised and times routed_scaling_factor, one shared expert of
 * n_shared_experts * moe_intermediate_size */
static void arch_deepseek_v3(tlm_config *c) {
    sizes(c, 129280, 7168, 18432, 61, 128, 128, 0, 4096);
    c->norm = NORM_RMSNORM, c->placement = PLACE_PRE, c->position = POS_ROPE, c->ffn = FFN_SWIGLU;
    c->norm_eps = 1e-6f, c->rope_theta = 10000.0f, c->tie_embeddings = false;
    c->q_lora_rank = 1536, c->kv_lora_rank = 512, c->qk_nope_dim = 128, c->qk_rope_dim = 64, c->v_head_dim = 128;
    c->rope_interleave = true;
    c->n_experts = 256, c->n_experts_per_tok = 8, c->moe_d_ff = 2048, c->n_shared_experts = 1;
    c->scoring = SCORING_SIGMOID, c->n_group = 8, c->topk_group = 4, c->norm_topk_prob = true;
    c->routed_scaling_factor = 2.5f, c->first_k_dense = 3;
}

static void arch_gemma_common(tlm_config *c) {
    c->norm = NORM_RMSNORM_1P, c->placement = PLACE_SANDWICH, c->position = POS_ROPE, c->ffn = FFN_GEGLU;
    c->embed_scale = true;
    c->norm_eps = 1e-6f, c->tie_embeddings = true;
    c->query_pre_attn_scalar = 256.0f, c->sliding_window = 4096;
}

static void arch_gemma2(tlm_config *c) {
    sizes(c, 256000, 2304, 9216, 26, 8, 4, 256, 8192);
    arch_gemma_common(c);
    c->rope_theta = 10000.0f;
    c->attn_softcap = 50.0f, c->final_softcap = 30.0f;
}

static void arch_gemma3(tlm_config *c) {
    sizes(c, 262208, 2304, 9216, 26, 8, 4, 256, 131072);
    arch_gemma_common(c);
    c->qk_norm = QK_NORM_HEAD;
    c->rope_theta = 1000000.0f, c->rope_theta_local = 10000.0f;
}

/* Gemma4TextConfig's defaults and Gemma4TextDecoderLayer's fixed structure: RMSNorm that multiplies
 * by the weight itself (Gemma4RMSNorm: w, not Gemma 2/3's 1 + w; the v norm has no weight), four
 * norms a layer (sandwich), per-head QK-norm and a v norm, attention scaling 1.0, the layer scalar
 * (a buffer of every checkpoint), embedding * sqrt(d); sliding layers head_dim 256 on RoPE base 1e4,
 * full layers global_head_dim 512 on base 1e6 "proportional" (a quarter of the frequencies turn);
 * hidden_size_per_layer_input 256 */
static void arch_gemma4(tlm_config *c) {
    sizes(c, 262144, 2304, 9216, 30, 8, 4, 256, 131072);
    c->norm = NORM_RMSNORM, c->placement = PLACE_SANDWICH, c->position = POS_ROPE, c->ffn = FFN_GEGLU;
    c->embed_scale = true, c->norm_eps = 1e-6f, c->tie_embeddings = true;
    c->qk_norm = QK_NORM_HEAD, c->v_norm = true, c->query_pre_attn_scalar = 1.0f, c->layer_scalar = true;
    c->sliding_window = 512;
    c->rope_theta = 1000000.0f, c->rope_theta_local = 10000.0f, c->rope_proportional = 0.25f;
    c->head_dim_full = 512, c->ple_dim = 256;
}

/* Mistral (configuration_mistral.py, MistralAttention): Llama's body without biases (hard-coded), one
 * sliding window for every layer (class default 4096; null: none), num_key_value_heads default 8 */
static void arch_mistral(tlm_config *c) {
    sizes(c, 32000, 4096, 14336, 32, 32, 8, 0, 131072);
    c->norm = NORM_RMSNORM, c->placement = PLACE_PRE, c->position = POS_ROPE, c->ffn = FFN_SWIGLU;
    c->norm_eps = 1e-6f, c->rope_theta = 10000.0f, c->tie_embeddings = false;
    c->sliding_window = 4096;
}

/* Gemma 1 (configuration_gemma.py, modeling_gemma.py): Llama's Pre-Norm layout (input_layernorm,
 * post_attention_layernorm as the FFN's input norm) with GemmaRMSNorm's 1 + w, the GeGLU MLP (gelu tanh),
 * the embedding times sqrt(hidden_size), a tied head, scale 1/sqrt(head_dim), head_dim 256; no soft-caps,
 * no sliding window */
static void arch_gemma1(tlm_config *c) {
    sizes(c, 256000, 3072, 24576, 28, 16, 16, 256, 8192);
    c->norm = NORM_RMSNORM_1P, c->placement = PLACE_PRE, c->position = POS_ROPE, c->ffn = FFN_GEGLU;
    c->embed_scale = true, c->norm_eps = 1e-6f, c->rope_theta = 10000.0f, c->tie_embeddings = true;
}

/* OLMo 2: a norm after each sublayer's output, no input norm; QK-Norm over the whole projection */
static void arch_olmo2(tlm_config *c) {
    sizes(c, 50304, 4096, 11008, 32, 32, 0, 0, 2048);
    c->norm = NORM_RMSNORM, c->placement = PLACE_OUTPUT, c->position = POS_ROPE, c->ffn = FFN_SWIGLU;
    c->qk_norm = QK_NORM_FULL;
    c->norm_eps = 1e-5f, c->rope_theta = 10000.0f, c->tie_embeddings = false;
}

/* GPT-2: LayerNorm with bias, learned positions, GELU (tanh) MLP, biases everywhere, tied head */
static void arch_gpt2(tlm_config *c) {
    sizes(c, 50257, 768, 0, 12, 12, 0, 0, 1024);
    c->norm = NORM_LAYERNORM, c->norm_bias = true, c->placement = PLACE_PRE;
    c->position = POS_LEARNED, c->ffn = FFN_GELU;
    c->attn_bias = c->attn_out_bias = true, c->mlp_bias = true;
    c->norm_eps = 1e-5f, c->tie_embeddings = true;
    /* GPT2PreTrainedModel._init_weights divides the residual projections (c_proj) by sqrt(2 n_layer), as the
     * engine's default does; the other families' do not */
    c->scale_residual_init = true;
}

/* ---- family keys ---------------------------------------------------------------------------- */

static const config_key LLAMA_KEYS[] = {
    {"attention_bias", KEY_BOOL, F(attn_bias), NULL},
    {"mlp_bias", KEY_BOOL, F(mlp_bias), NULL},
    {NULL, 0, 0, NULL},
};

static const config_key QWEN2_KEYS[] = {
    {"layer_types", KEY_LAYER_TYPES, F(layer_sliding), NULL},
    {NULL, 0, 0, NULL},
};

static const config_key QWEN3_KEYS[] = {
    {"attention_bias", KEY_BOOL, F(attn_bias), NULL},
    {"layer_types", KEY_LAYER_TYPES, F(layer_sliding), NULL},
    {NULL, 0, 0, NULL},
};

static const config_key QWEN3_MOE_KEYS[] = {
    {"attention_bias", KEY_BOOL, F(attn_bias), NULL},
    {"layer_types", KEY_LAYER_TYPES, F(layer_sliding), NULL},
    {"num_experts", KEY_INT, F(n_experts), NULL},
    {"num_local_experts", KEY_INT, F(n_experts), NULL}, /* (transformers 5's attribute_map) */
    {"num_experts_per_tok", KEY_INT, F(n_experts_per_tok), NULL},
    {"moe_intermediate_size", KEY_INT, F(moe_d_ff), NULL},
    {"norm_topk_prob", KEY_BOOL, F(norm_topk_prob), NULL},
    {"decoder_sparse_step", KEY_INT, F(sparse_step), NULL},
    {"mlp_only_layers", KEY_LAYER_LIST, F(mlp_only), NULL},
    {NULL, 0, 0, NULL},
};

static const config_key QWEN2_MOE_KEYS[] = {
    {"qkv_bias", KEY_BOOL, F(attn_bias), NULL}, /* (transformers 5; 4.x hard-codes the biases) */
    {"layer_types", KEY_LAYER_TYPES, F(layer_sliding), NULL},
    {"num_experts", KEY_INT, F(n_experts), NULL},
    {"num_experts_per_tok", KEY_INT, F(n_experts_per_tok), NULL},
    {"moe_intermediate_size", KEY_INT, F(moe_d_ff), NULL},
    {"shared_expert_intermediate_size", KEY_INT, F(shared_d_ff), NULL},
    {"norm_topk_prob", KEY_BOOL, F(norm_topk_prob), NULL},
    {"decoder_sparse_step", KEY_INT, F(sparse_step), NULL},
    {"mlp_only_layers", KEY_LAYER_LIST, F(mlp_only), NULL},
    {NULL, 0, 0, NULL},
};

/* (head_dim: DeepseekV3Config sets it to qk_rope_head_dim itself, and num_key_value_heads is not used by
 * MLA: both known, neither read) */
static const config_key DEEPSEEK_V3_COMMON_KEYS[] = {
    {"vocab_size", KEY_INT, F(vocab_size), NULL},
    {"hidden_size", KEY_INT, F(d_model), NULL},
    {"num_hidden_layers", KEY_INT, F(n_layers), NULL},
    {"num_attention_heads", KEY_INT, F(n_heads), NULL},
    {"intermediate_size", KEY_INT, F(d_ff), NULL},
    {"max_position_embeddings", KEY_INT, F(max_seq), NULL},
    {"rope_theta", KEY_FLOAT, F(rope_theta), NULL},
    {"rms_norm_eps", KEY_FLOAT, F(norm_eps), NULL},
    {"tie_word_embeddings", KEY_BOOL, F(tie_embeddings), NULL},
    {"initializer_range", KEY_FLOAT, F(init_std), NULL},
    {NULL, 0, 0, NULL},
};

static const config_key DEEPSEEK_V3_KEYS[] = {
    {"attention_bias", KEY_BOOL, F(attn_bias), NULL},
    {"q_lora_rank", KEY_INT_OR_NULL, F(q_lora_rank), NULL},
    {"kv_lora_rank", KEY_INT, F(kv_lora_rank), NULL},
    {"qk_nope_head_dim", KEY_INT, F(qk_nope_dim), NULL},
    {"qk_rope_head_dim", KEY_INT, F(qk_rope_dim), NULL},
    {"v_head_dim", KEY_INT, F(v_head_dim), NULL},
    {"rope_interleave", KEY_BOOL, F(rope_interleave), NULL},
    {"n_routed_experts", KEY_INT, F(n_experts), NULL},
    {"num_local_experts", KEY_INT, F(n_experts), NULL}, /* (the attribute_map's name) */
    {"num_experts_per_tok", KEY_INT, F(n_experts_per_tok), NULL},
    {"moe_intermediate_size", KEY_INT, F(moe_d_ff), NULL},
    {"n_shared_experts", KEY_INT, F(n_shared_experts), NULL},
    {"routed_scaling_factor", KEY_FLOAT, F(routed_scaling_factor), NULL},
    {"n_group", KEY_INT, F(n_group), NULL},
    {"topk_group", KEY_INT, F(topk_group), NULL},
    {"first_k_dense_replace", KEY_INT, F(first_k_dense), NULL},
    {"norm_topk_prob", KEY_BOOL, F(norm_topk_prob), NULL},
    {"num_nextn_predict_layers", KEY_INT, F(n_nextn), NULL},
    {NULL, 0, 0, NULL},
};

static const config_key MIXTRAL_KEYS[] = {
    {"num_local_experts", KEY_INT, F(n_experts), NULL},
    {"num_experts_per_tok", KEY_INT, F(n_experts_per_tok), NULL},
    {"sliding_window", KEY_INT_OR_NULL, F(sliding_window), NULL},
    {NULL, 0, 0, NULL},
};

#define GEMMA_KEY_ROWS                                                                                         \
    {"attention_bias", KEY_BOOL, F(attn_bias), NULL},                                                          \
        {"query_pre_attn_scalar", KEY_FLOAT, F(query_pre_attn_scalar), NULL},                                  \
        {"attn_logit_softcapping", KEY_FLOAT_OR_NULL, F(attn_softcap), NULL},                                  \
        {"final_logit_softcapping", KEY_FLOAT_OR_NULL, F(final_softcap), NULL},                                \
        {"sliding_window", KEY_INT_OR_NULL, F(sliding_window), NULL},                                          \
        {"layer_types", KEY_LAYER_TYPES, F(layer_sliding), NULL}

static const config_key GEMMA2_KEYS[] = {GEMMA_KEY_ROWS, {NULL, 0, 0, NULL}};
/* Gemma 3 adds the RoPE base of its sliding-window layers */
static const config_key GEMMA3_KEYS[] = {
    GEMMA_KEY_ROWS,
    {"rope_local_base_freq", KEY_FLOAT, F(rope_theta_local), NULL},
    {NULL, 0, 0, NULL},
};

/* (query_pre_attn_scalar, attn_logit_softcapping, rope_theta, rope_scaling, sliding_window_pattern are no
 * Gemma4TextConfig fields: a file that has them is refused, as every key this reader does not know) */
static const config_key GEMMA4_KEYS[] = {
    {"attention_bias", KEY_BOOL, F(attn_bias), NULL},
    {"final_logit_softcapping", KEY_FLOAT_OR_NULL, F(final_softcap), NULL},
    {"sliding_window", KEY_INT_OR_NULL, F(sliding_window), NULL},
    {"layer_types", KEY_LAYER_TYPES, F(layer_sliding), NULL},
    {"global_head_dim", KEY_INT_OR_NULL, F(head_dim_full), NULL},
    {"attention_k_eq_v", KEY_BOOL, F(k_eq_v), NULL},
    {"num_kv_shared_layers", KEY_INT, F(n_kv_shared), NULL},
    {"hidden_size_per_layer_input", KEY_INT_OR_NULL, F(ple_dim), NULL},
    /* the MoE block (enable_moe_block, read by check_gemma4): Gemma4TextExperts / Gemma4TextRouter */
    {"num_experts", KEY_INT_OR_NULL, F(n_experts), NULL},
    {"top_k_experts", KEY_INT_OR_NULL, F(n_experts_per_tok), NULL},
    {"moe_intermediate_size", KEY_INT_OR_NULL, F(moe_d_ff), NULL},
    {NULL, 0, 0, NULL},
};

/* (MistralAttention and MistralMLP have no biases: attention_bias / mlp_bias are no MistralConfig keys) */
static const config_key MISTRAL_KEYS[] = {
    {"sliding_window", KEY_INT_OR_NULL, F(sliding_window), NULL},
    {NULL, 0, 0, NULL},
};

static const config_key GEMMA1_KEYS[] = {
    {"attention_bias", KEY_BOOL, F(attn_bias), NULL},
    {NULL, 0, 0, NULL},
};

static const config_key OLMO2_KEYS[] = {
    {"attention_bias", KEY_BOOL, F(attn_bias), NULL},
    {NULL, 0, 0, NULL},
};

/* GPT2Config has its own key names (attribute_map: hidden_size -> n_embd, ...) */
static const config_key GPT2_KEYS[] = {
    {"vocab_size", KEY_INT, F(vocab_size), NULL},
    {"n_embd", KEY_INT, F(d_model), NULL},
    {"n_layer", KEY_INT, F(n_layers), NULL},
    {"n_head", KEY_INT, F(n_heads), NULL},
    {"n_positions", KEY_INT, F(max_seq), NULL},
    {"n_inner", KEY_INT_OR_NULL, F(d_ff), NULL},
    {"layer_norm_epsilon", KEY_FLOAT, F(norm_eps), NULL},
    {"tie_word_embeddings", KEY_BOOL, F(tie_embeddings), NULL},
    {"initializer_range", KEY_FLOAT, F(init_std), NULL},
    {NULL, 0, 0, NULL},
};

/* ---- helpers for the checks ------------------------------------------------------------------ */

static const cJSON *item(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

/* The activation in key `key` (default `dflt` when absent) must be one of `ok` (NULL-ended). */
static int check_activation(const cJSON *root, const char *src, const char *key, const char *dflt,
                            const char *const *ok) {
    const cJSON *it = item(root, key);
    const char *s = it ? cJSON_GetStringValue(it) : dflt;
    for (int i = 0; s && ok[i]; i++)
        if (!strcmp(s, ok[i])) return 0;
    char list[160] = "";
    for (int i = 0; ok[i]; i++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"", i ? ", " : "", ok[i]);
    return tlm_error("%s: %s = \"%s\" is not supported for this family (the engine implements %s)", src, key,
                     s ? s : "(not a string)", list);
}

static const char *const SILU[] = {"silu", "swish", NULL};              /* ACT2FN: both are nn.SiLU */
static const char *const GELU_TANH[] = {"gelu_pytorch_tanh", "gelu_new", NULL}; /* tanh approximations */

static int read_bool(const cJSON *root, const char *src, const char *key, bool dflt, bool *out) {
    const cJSON *it = item(root, key);
    if (!it || cJSON_IsNull(it)) return (*out = dflt), 0;
    if (!cJSON_IsBool(it)) return tlm_error("%s: key \"%s\" must be true or false", src, key);
    *out = cJSON_IsTrue(it);
    return 0;
}

static int must_be_false(const cJSON *root, const char *src, const char *key, const char *why) {
    bool v = false;
    if (read_bool(root, src, key, false, &v)) return -1;
    if (v) return tlm_error("%s: %s = true is not supported (%s)", src, key, why);
    return 0;
}

/* ---- quantization_config ------------------------------------------------------------------------ */

/* an optional positive integer of quantization_config (absent or null: 0) */
static int quant_int(const cJSON *q, const char *src, const char *key, int *out) {
    const cJSON *it = item(q, key);
    if (!it || cJSON_IsNull(it)) return 0;
    if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 1 ||
        it->valuedouble > (1 << 20))
        return tlm_error("%s: quantization_config.%s must be an integer from 1 to 1048576", src, key);
    *out = (int)it->valuedouble;
    return 0;
}

/* transformers' quantizers (FineGrainedFP8Config, GPTQConfig, AwqConfig, ...): read so that info and --explain
 * describe the checkpoint; a method is never refused here (hf_model_load refuses what it cannot load) */
static int read_quantization(tlm_config *c, const cJSON *root, const char *src) {
    const cJSON *q = item(root, "quantization_config");
    if (!q || cJSON_IsNull(q)) return 0;
    if (!cJSON_IsObject(q)) return tlm_error("%s: quantization_config must be an object", src);
    const char *m = cJSON_GetStringValue(item(q, "quant_method"));
    if (!m || !*m || strlen(m) >= sizeof c->quant_method)
        return tlm_error("%s: quantization_config.quant_method must be a short string (fp8, gptq, awq, ...)", src);
    snprintf(c->quant_method, sizeof c->quant_method, "%s", m);
    if (!strcmp(m, "fp8")) {
        const cJSON *f = item(q, "fmt");
        const char *fmt = f && !cJSON_IsNull(f) ? cJSON_GetStringValue(f) : "e4m3";
        if (!fmt || (strcmp(fmt, "e4m3") != 0 && strcmp(fmt, "e5m2") != 0))
            return tlm_error("%s: quantization_config.fmt must be \"e4m3\" or \"e5m2\"", src);
        snprintf(c->quant_fmt, sizeof c->quant_fmt, "%s", fmt);
        const cJSON *b = item(q, "weight_block_size");
        if (b && !cJSON_IsNull(b)) {
            if (!cJSON_IsArray(b) || cJSON_GetArraySize(b) != 2)
                return tlm_error("%s: quantization_config.weight_block_size must be [rows, cols] or null", src);
            for (int i = 0; i < 2; i++) {
                const cJSON *e = cJSON_GetArrayItem(b, i);
                if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 1 ||
                    e->valuedouble > (1 << 20))
                    return tlm_error("%s: quantization_config.weight_block_size[%d] must be an integer from 1 to "
                                     "1048576 (a block of 0 rows or columns holds no weights)", src, i);
                c->quant_block[i] = (int)e->valuedouble;
            }
        }
        return 0;
    }
    return quant_int(q, src, "bits", &c->quant_bits) || quant_int(q, src, "group_size", &c->quant_group) ? -1 : 0;
}

/* ---- RoPE: rope_theta, rope_scaling (transformers 4.x) and rope_parameters (5.x) ------------ */

/* rope_theta inside a rope_parameters dict overrides the top-level key (transformers 5 keeps
 * it there; 4.x configs have it at the top level). */
static int apply_rope_theta(const cJSON *rp, const char *src, const char *where, float *theta) {
    const cJSON *t = item(rp, "rope_theta");
    if (!t) return 0;
    if (!cJSON_IsNumber(t)) return tlm_error("%s: %s.rope_theta must be a positive number", src, where);
    char name[160];
    snprintf(name, sizeof name, "%s.rope_theta", where);
    return tlm_float_from_file(t->valuedouble, TLM_FLOAT_POSITIVE, src, name, theta);
}

static int read_rope(tlm_config *c, const cJSON *root, const char *src, bool per_layer_type) {
    const cJSON *prf = item(root, "partial_rotary_factor");
    if (prf && !(cJSON_IsNumber(prf) && prf->valuedouble == 1.0))
        return tlm_error("%s: partial_rotary_factor other than 1 is not supported", src);
    const cJSON *rp = item(root, "rope_parameters");
    if (rp && !cJSON_IsNull(rp)) {
        if (!cJSON_IsObject(rp)) return tlm_error("%s: rope_parameters must be an object or null", src);
        const cJSON *full = item(rp, "full_attention"), *slide = item(rp, "sliding_attention");
        if (per_layer_type && (full || slide)) {
            /* Gemma 3 (transformers 5): one dict per layer type */
            if (full && (!cJSON_IsObject(full) || apply_rope_theta(full, src, "rope_parameters.full_attention", &c->rope_theta) ||
                         config_read_rope_dict(c, full, src, "rope_parameters.full_attention", true)))
                return cJSON_IsObject(full) ? -1 : tlm_error("%s: rope_parameters.full_attention must be an object", src);
            if (slide && (!cJSON_IsObject(slide) ||
                          apply_rope_theta(slide, src, "rope_parameters.sliding_attention", &c->rope_theta_local) ||
                          config_read_rope_dict(c, slide, src, "rope_parameters.sliding_attention", false)))
                return cJSON_IsObject(slide) ? -1 : tlm_error("%s: rope_parameters.sliding_attention must be an object", src);
        } else {
            if (apply_rope_theta(rp, src, "rope_parameters", &c->rope_theta) ||
                config_read_rope_dict(c, rp, src, "rope_parameters", true))
                return -1;
        }
    }
    const cJSON *rs = item(root, "rope_scaling");
    if (rs && !cJSON_IsNull(rs)) {
        if (!cJSON_IsObject(rs)) return tlm_error("%s: rope_scaling must be an object or null", src);
        if (config_read_rope_dict(c, rs, src, "rope_scaling", true)) return -1;
    }
    return 0;
}

/* kv heads null -> heads; head_dim null/absent (when the class default is None) -> hidden/heads */
static void derive_heads(tlm_config *c) {
    if (c->n_kv_heads == 0) c->n_kv_heads = c->n_heads;
    if (c->head_dim == 0 && c->n_heads > 0) c->head_dim = c->d_model / c->n_heads;
}

/* Qwen2/Qwen3 (configuration_qwen2.py): sliding_window only counts with use_sliding_window;
 * without layer_types, layers i >= max_window_layers slide. */
static int qwen_sliding(tlm_config *c, const cJSON *root, const char *src) {
    bool use = false;
    if (read_bool(root, src, "use_sliding_window", false, &use)) return -1;
    const cJSON *sw = item(root, "sliding_window");
    int window = c->sliding_window; /* class default 4096 */
    if (sw) {
        if (cJSON_IsNull(sw)) window = 0;
        else if (!cJSON_IsNumber(sw) || sw->valuedouble != floor(sw->valuedouble) || sw->valuedouble < 1 ||
                 sw->valuedouble > 2147483647.0)
            return tlm_error("%s: key \"sliding_window\" must be a positive integer or null", src);
        else window = (int)sw->valuedouble;
    }
    /* (Qwen2Config: sliding_window = None without use_sliding_window; the released Qwen2.5 / Qwen3 files carry a
     * window anyway: inert, said once) */
    if (!use && window > 0 && sw && !cJSON_IsNull(sw))
        fprintf(stderr, "tinylm: note: %s: sliding_window = %d is inert: use_sliding_window is %s, so every layer "
                        "attends in full (as transformers, which sets the window to None)\n", src, window,
                item(root, "use_sliding_window") ? "false" : "absent (false)");
    if (!use) window = 0;
    int mwl = 28;
    const cJSON *m = item(root, "max_window_layers");
    if (m && !cJSON_IsNull(m)) {
        if (!cJSON_IsNumber(m) || m->valuedouble != floor(m->valuedouble))
            return tlm_error("%s: key \"max_window_layers\" must be an integer", src);
        mwl = (int)fmax(fmin(m->valuedouble, 1e9), -1e9);
    }
    c->sliding_window = window;
    if (c->n_layer_types == 0) {
        for (int l = 0; l < c->n_layers && l < TLM_MAX_LAYERS; l++) c->layer_sliding[l] = window > 0 && l >= mwl;
        c->n_layer_types = c->n_layers;
    }
    /* sliding layers without a window: transformers' mask builder raises, so do we */
    for (int l = 0; l < c->n_layer_types; l++)
        if (c->layer_sliding[l] && window == 0)
            return tlm_error("%s: layer_types[%d] is \"sliding_attention\" but the sliding window is off "
                             "(use_sliding_window false or sliding_window null)",
                             src, l);
    return 0;
}

/* ---- per-family checks ----------------------------------------------------------------------- */

static int check_llama(tlm_config *c, const cJSON *root, const char *src) {
    c->attn_out_bias = c->attn_bias; /* LlamaAttention: attention_bias applies to q, k, v and o */
    derive_heads(c);
    const cJSON *tp = item(root, "pretraining_tp");
    if (tp && !(cJSON_IsNumber(tp) && tp->valuedouble == 1.0))
        return tlm_error("%s: pretraining_tp other than 1 is not supported", src);
    if (check_activation(root, src, "hidden_act", "silu", SILU)) return -1;
    return read_rope(c, root, src, false);
}

static int check_qwen2(tlm_config *c, const cJSON *root, const char *src) {
    derive_heads(c);
    if (check_activation(root, src, "hidden_act", "silu", SILU)) return -1;
    if (qwen_sliding(c, root, src)) return -1;
    return read_rope(c, root, src, false);
}

static int check_qwen3(tlm_config *c, const cJSON *root, const char *src) {
    c->attn_out_bias = c->attn_bias;
    return check_qwen2(c, root, src);
}

/* Gemma 2 and 3: sliding layers from layer_types, else from the family's pattern */
static int gemma_layers(tlm_config *c, int pattern, const char *src) {
    if (c->n_layer_types == 0) {
        if (pattern < 1) return tlm_error("%s: sliding_window_pattern = %d must be positive", src, pattern);
        config_sliding_pattern(c, pattern);
    }
    return 0;
}

static int qwen3_moe_check(tlm_config *c, const cJSON *root, const char *src) {
    if (c->sparse_step < 1) return tlm_error("%s: decoder_sparse_step = %d must be >= 1", src, c->sparse_step);
    c->attn_out_bias = c->attn_bias;
    return check_qwen2(c, root, src);
}

/* Qwen2-MoE. The sliding window: transformers 5 (Qwen2MoeConfig.__post_init__) makes the even layers below
 * max_window_layers slide when use_sliding_window is true and layer_types is absent, unlike Qwen2's rule
 * (layers >= max_window_layers), and 4.x's eager / sdpa attention applied no window at all: such a config is
 * ambiguous and refused; with layer_types the layers are those (as Qwen2); without use_sliding_window the
 * window is inert (the released Qwen1.5-MoE / Qwen2-57B-A14B files) */
static int check_qwen2_moe(tlm_config *c, const cJSON *root, const char *src) {
    if (c->sparse_step < 1) return tlm_error("%s: decoder_sparse_step = %d must be >= 1", src, c->sparse_step);
    if (c->n_experts > 0 && c->shared_d_ff < 1)
        return tlm_error("%s: shared_expert_intermediate_size = %d must be positive (Qwen2MoeSparseMoeBlock always "
                         "has its shared expert)", src, c->shared_d_ff);
    if (c->n_experts == 0) { /* (Qwen2MoeDecoderLayer: every FFN the dense Qwen2MoeMLP; the MoE sizes unused) */
        fprintf(stderr, "tinylm: note: %s: num_experts = 0: every layer's FFN is dense (intermediate_size); the "
                        "experts' keys are inert\n", src);
        c->n_experts_per_tok = c->moe_d_ff = c->n_shared_experts = c->shared_d_ff = 0;
        c->shared_gate = c->norm_topk_prob = false;
        memset(c->mlp_only, 0, sizeof c->mlp_only), c->sparse_step = 1;
    }
    bool use = false;
    if (read_bool(root, src, "use_sliding_window", false, &use)) return -1;
    if (use && c->n_layer_types == 0)
        return tlm_error("%s: use_sliding_window = true without layer_types is ambiguous for qwen2_moe: transformers "
                         "5 slides the even layers below max_window_layers, 4.x's eager attention no layer; give "
                         "layer_types to say which layers slide", src);
    return check_qwen2(c, root, src);
}

static int check_mixtral(tlm_config *c, const cJSON *root, const char *src) {
    derive_heads(c);
    c->moe_d_ff = c->d_ff; /* (the experts are MixtralBlockSparseTop2MLP of intermediate_size) */
    if (check_activation(root, src, "hidden_act", "silu", SILU)) return -1;
    const cJSON *jit = item(root, "router_jitter_noise");
    if (jit && !cJSON_IsNull(jit) && !(cJSON_IsNumber(jit) && jit->valuedouble == 0.0))
        return tlm_error("%s: router_jitter_noise other than 0 is not supported (the engine trains without it)", src);
    for (int l = 0; l < c->n_layers && l < TLM_MAX_LAYERS; l++) c->layer_sliding[l] = c->sliding_window > 0;
    c->n_layer_types = 0;
    return read_rope(c, root, src, false);
}

/* Mistral: the window (when set) in every layer; transformers warns about a layer_types key and ignores it */
static int check_mistral(tlm_config *c, const cJSON *root, const char *src) {
    derive_heads(c);
    if (check_activation(root, src, "hidden_act", "silu", SILU)) return -1;
    for (int l = 0; l < c->n_layers && l < TLM_MAX_LAYERS; l++) c->layer_sliding[l] = c->sliding_window > 0;
    c->n_layer_types = 0;
    return read_rope(c, root, src, false);
}

/* Gemma 1's activation: transformers 4.x's GemmaMLP reads hidden_activation (None: gelu_pytorch_tanh, hidden_act
 * ignored); transformers 5 dropped that key and reads hidden_act. The released files carry both (hidden_act
 * "gelu", hidden_activation "gelu_pytorch_tanh": the tanh form the models were trained with), so
 * hidden_activation decides when present and an inert hidden_act is noted once; without it, hidden_act must be a
 * tanh GELU, since the two versions would compute different functions from an exact "gelu" */
static int gemma1_activation(const cJSON *root, const char *src) {
    const cJSON *ha = item(root, "hidden_activation");
    if (ha && !cJSON_IsNull(ha)) {
        if (check_activation(root, src, "hidden_activation", "gelu_pytorch_tanh", GELU_TANH)) return -1;
        const char *act = cJSON_GetStringValue(item(root, "hidden_act"));
        if (act && strcmp(act, cJSON_GetStringValue(ha) ? cJSON_GetStringValue(ha) : "") != 0)
            fprintf(stderr, "tinylm: note: %s: hidden_act \"%s\" is not used: hidden_activation \"%s\" decides "
                            "Gemma's activation (GemmaMLP of transformers 4.x; the released models' tanh GELU)\n",
                    src, act, cJSON_GetStringValue(ha));
        return 0;
    }
    const cJSON *act = item(root, "hidden_act");
    const char *a = act ? cJSON_GetStringValue(act) : "gelu_pytorch_tanh";
    if (a && (!strcmp(a, "gelu") || !strcmp(a, "gelu_python")))
        return tlm_error("%s: hidden_act = \"%s\" without hidden_activation is ambiguous for Gemma: transformers 4.x "
                         "computes the tanh GELU (it ignores hidden_act), transformers 5 the exact one; add "
                         "\"hidden_activation\": \"gelu_pytorch_tanh\" (the released models') to choose", src, a);
    return check_activation(root, src, "hidden_act", "gelu_pytorch_tanh", GELU_TANH);
}

static int check_gemma1(tlm_config *c, const cJSON *root, const char *src) {
    c->attn_out_bias = c->attn_bias; /* (GemmaAttention: attention_bias on q, k, v and o, as Llama) */
    derive_heads(c);
    if (gemma1_activation(root, src)) return -1;
    if (must_be_false(root, src, "use_bidirectional_attention", "bidirectional attention")) return -1;
    return read_rope(c, root, src, false);
}

/* a string key that must be absent, null or `want` (DeepSeek's remote-code keys that name its one method) */
static int must_be_string(const cJSON *root, const char *src, const char *key, const char *want) {
    const cJSON *it = item(root, key);
    if (!it || cJSON_IsNull(it)) return 0;
    const char *s = cJSON_GetStringValue(it);
    if (!s || strcmp(s, want) != 0)
        return tlm_error("%s: %s other than \"%s\" is not supported (DeepSeek-V3's routing)", src, key, want);
    return 0;
}

static int check_deepseek_v3(tlm_config *c, const cJSON *root, const char *src) {
    if (check_activation(root, src, "hidden_act", "silu", SILU)) return -1;
    const cJSON *tp = item(root, "pretraining_tp");
    if (tp && !(cJSON_IsNumber(tp) && tp->valuedouble == 1.0))
        return tlm_error("%s: pretraining_tp other than 1 is not supported", src);
    if (must_be_string(root, src, "scoring_func", "sigmoid") || must_be_string(root, src, "topk_method", "noaux_tc"))
        return -1;
    const cJSON *freq = item(root, "moe_layer_freq");
    if (freq && !cJSON_IsNull(freq) && !(cJSON_IsNumber(freq) && freq->valuedouble == 1.0))
        return tlm_error("%s: moe_layer_freq other than 1 is not supported (DeepseekV3DecoderLayer: every layer "
                         "from first_k_dense_replace on)", src);
    if (c->kv_lora_rank <= 0)
        return tlm_error("%s: kv_lora_rank = %d: DeepSeek-V3's attention is MLA, kv_lora_rank must be positive", src,
                         c->kv_lora_rank);
    if (c->n_experts <= 0)
        return tlm_error("%s: n_routed_experts = %d must be positive", src, c->n_experts);
    if (c->n_nextn < 0) return tlm_error("%s: num_nextn_predict_layers = %d must be >= 0", src, c->n_nextn);
    c->attn_out_bias = c->attn_bias;
    if (read_rope(c, root, src, false)) return -1;
    config_mla_finish(c); /* (the padded heads; num_key_value_heads and head_dim of the file are not MLA's) */
    return 0;
}

static int check_gemma2(tlm_config *c, const cJSON *root, const char *src) {
    c->attn_out_bias = c->attn_bias;
    derive_heads(c);
    if (check_activation(root, src, "hidden_activation", "gelu_pytorch_tanh", GELU_TANH)) return -1;
    if (must_be_false(root, src, "use_bidirectional_attention", "bidirectional attention")) return -1;
    if (gemma_layers(c, 2, src)) return -1;
    return read_rope(c, root, src, false);
}

static int check_gemma3(tlm_config *c, const cJSON *root, const char *src) {
    c->attn_out_bias = c->attn_bias;
    derive_heads(c);
    if (check_activation(root, src, "hidden_activation", "gelu_pytorch_tanh", GELU_TANH)) return -1;
    if (must_be_false(root, src, "use_bidirectional_attention", "bidirectional attention")) return -1;
    /* Gemma3Attention keeps attn_logit_softcapping but never passes it to the attention
     * function; a config that sets it is ambiguous, so refuse rather than guess */
    if (c->attn_softcap != 0.0f)
        return tlm_error("%s: attn_logit_softcapping = %g: Gemma 3 does not apply attention soft-capping "
                         "(transformers ignores the key); refusing an ambiguous config",
                         src, c->attn_softcap);
    int pattern = 6;
    const cJSON *p = item(root, "sliding_window_pattern");
    if (p && !cJSON_IsNull(p)) {
        if (!cJSON_IsNumber(p) || p->valuedouble != floor(p->valuedouble) || fabs(p->valuedouble) > 1e6)
            return tlm_error("%s: key \"sliding_window_pattern\" must be an integer", src);
        pattern = (int)p->valuedouble;
    }
    if (gemma_layers(c, pattern, src)) return -1;
    if (read_rope(c, root, src, true)) return -1;
    if (!(c->rope_theta_local > 0.0f)) return tlm_error("%s: rope_local_base_freq must be positive", src);
    return 0;
}

/* One rope_parameters entry of Gemma 4 ({"rope_type", "rope_theta", "partial_rotary_factor",
 * "factor"}): every key read or refused by name. full: the full-attention layers' (default or
 * proportional), else the sliding layers' (default only). */
static int gemma4_rope_entry(tlm_config *c, const cJSON *e, const char *src, bool full) {
    const char *where = full ? "rope_parameters.full_attention" : "rope_parameters.sliding_attention";
    if (!cJSON_IsObject(e)) return tlm_error("%s: %s must be an object", src, where);
    const char *type = NULL;
    double theta = 0, prf = 1.0, factor = 1.0;
    for (const cJSON *it = e->child; it; it = it->next) {
        const char *k = it->string;
        if (!strcmp(k, "rope_type")) {
            if (!(type = cJSON_GetStringValue(it))) return tlm_error("%s: %s.rope_type must be a string", src, where);
        } else if (!strcmp(k, "rope_theta")) {
            if (config_read_number(e, src, where, k, TLM_FLOAT_POSITIVE, &theta)) return -1;
        } else if (!strcmp(k, "partial_rotary_factor")) {
            if (config_read_number(e, src, where, k, TLM_FLOAT_ANY, &prf)) return -1;
            if (!(prf > 0 && prf <= 1))
                return tlm_error("%s: %s.partial_rotary_factor must be in (0, 1]", src, where);
        } else if (!strcmp(k, "factor")) {
            if (config_read_number(e, src, where, k, TLM_FLOAT_FACTOR, &factor)) return -1;
        } else {
            return tlm_error("%s: %s.%s is not supported (the Gemma 4 reader knows rope_type, rope_theta, "
                             "partial_rotary_factor, factor)", src, where, k);
        }
    }
    if (!type) type = "default"; /* (transformers' standardize_rope_params: a missing rope_type is the default) */
    if (!(theta > 0)) return tlm_error("%s: %s.rope_theta is missing", src, where);
    if (!full) { /* Gemma4TextRotaryEmbedding: sliding layers on the default RoPE over head_dim */
        if (strcmp(type, "default") != 0)
            return tlm_error("%s: %s.rope_type \"%s\" is not supported (only \"default\" on sliding layers)", src,
                             where, type);
        if (prf != 1.0 || factor != 1.0)
            return tlm_error("%s: %s: partial_rotary_factor / factor with rope_type \"default\" are not supported",
                             src, where);
        c->rope_theta_local = (float)theta;
        return 0;
    }
    c->rope_theta = (float)theta;
    if (!strcmp(type, "proportional")) {
        /* _compute_proportional_rope_parameters over global_head_dim: floor(prf * hd / 2) frequencies
         * theta^(-2i/hd) turn, the others are 0; all divided by factor */
        c->rope_proportional = (float)prf;
        c->rope_scaling = factor != 1.0 ? ROPE_SCALING_LINEAR : ROPE_SCALING_NONE;
        c->rope_factor = (float)factor;
        return 0;
    }
    if (!strcmp(type, "default")) {
        /* the default RoPE reads config.head_dim: only the full layers' width when they have it */
        if (c->head_dim_full > 0 && c->head_dim_full != c->head_dim)
            return tlm_error("%s: %s.rope_type \"default\" with global_head_dim %d != head_dim %d: transformers "
                             "builds its frequencies over head_dim, which does not fit the full layers' heads "
                             "(use \"proportional\")", src, where, c->head_dim_full, c->head_dim);
        if (prf != 1.0 || factor != 1.0)
            return tlm_error("%s: %s: partial_rotary_factor / factor with rope_type \"default\" are not supported",
                             src, where);
        c->rope_proportional = 0.0f, c->rope_scaling = ROPE_SCALING_NONE;
        return 0;
    }
    return tlm_error("%s: %s.rope_type \"%s\" is not supported (the Gemma 4 reader implements \"proportional\" "
                     "and \"default\")", src, where, type);
}

/* Gemma4TextConfig.__post_init__ and Gemma4TextAttention / Gemma4TextDecoderLayer */
static int check_gemma4(tlm_config *c, const cJSON *root, const char *src) {
    c->attn_out_bias = c->attn_bias;
    if (c->n_kv_heads == 0) return tlm_error("%s: num_key_value_heads must be a positive integer", src);
    if (c->head_dim == 0) return tlm_error("%s: head_dim must be a positive integer", src);
    if (check_activation(root, src, "hidden_activation", "gelu_pytorch_tanh", GELU_TANH)) return -1;
    /* use_bidirectional_attention: None (causal), "vision" (bidirectional among image tokens only: on
     * text alone, causal); "all" is refused */
    const cJSON *bi = item(root, "use_bidirectional_attention");
    if (bi && !cJSON_IsNull(bi)) {
        const char *v = cJSON_GetStringValue(bi);
        if (!v || strcmp(v, "vision") != 0)
            return tlm_error("%s: use_bidirectional_attention = %s is not supported (causal text only: null or "
                             "\"vision\")", src, v ? v : "(not a string)");
    }
    /* layer types: 5 sliding : 1 full by default; the last layer is always full (__post_init__ forces it) */
    if (c->n_layer_types == 0) config_sliding_pattern(c, 6);
    if (c->n_layers > 0 && c->n_layer_types == c->n_layers && c->layer_sliding[c->n_layers - 1]) {
        fprintf(stderr, "tinylm: warning: %s: layer_types ends in \"sliding_attention\"; as transformers does, the "
                        "last layer is made \"full_attention\"\n", src);
        c->layer_sliding[c->n_layers - 1] = 0;
    }
    bool any_sliding = false;
    for (int l = 0; l < c->n_layer_types; l++) any_sliding |= c->layer_sliding[l];
    if (any_sliding && c->sliding_window <= 0)
        return tlm_error("%s: sliding_window must be a positive integer (the config has sliding_attention layers)", src);
    /* global_head_dim null or 0: the full layers keep head_dim */
    if (c->head_dim_full == c->head_dim) c->head_dim_full = 0;
    /* K = V: the full layers' kv heads are num_global_key_value_heads (read only then, as transformers) */
    if (c->k_eq_v) {
        const cJSON *g = item(root, "num_global_key_value_heads");
        if (!g || !cJSON_IsNumber(g) || g->valuedouble != floor(g->valuedouble) || g->valuedouble < 1 ||
            g->valuedouble > 1e6)
            return tlm_error("%s: attention_k_eq_v = true needs num_global_key_value_heads, a positive integer", src);
        c->n_kv_heads_full = (int)g->valuedouble == c->n_kv_heads ? 0 : (int)g->valuedouble;
    }
    /* RoPE: one entry per layer type (the class default when the key is absent or null) */
    const cJSON *rp = item(root, "rope_parameters");
    if (rp && !cJSON_IsNull(rp)) {
        if (!cJSON_IsObject(rp)) return tlm_error("%s: rope_parameters must be an object or null", src);
        for (const cJSON *it = rp->child; it; it = it->next) {
            if (!strcmp(it->string, "full_attention") || !strcmp(it->string, "sliding_attention")) continue;
            return tlm_error("%s: rope_parameters.%s is not supported (Gemma 4 has one entry per layer type: "
                             "full_attention, sliding_attention)", src, it->string);
        }
        const cJSON *full = item(rp, "full_attention"), *slide = item(rp, "sliding_attention");
        bool any_full = false;
        for (int l = 0; l < c->n_layer_types; l++) any_full |= !c->layer_sliding[l];
        if ((any_full && !full) || (any_sliding && !slide))
            return tlm_error("%s: rope_parameters has no entry \"%s\" for the config's %s layers", src,
                             !full && any_full ? "full_attention" : "sliding_attention",
                             !full && any_full ? "full_attention" : "sliding_attention");
        if (full && gemma4_rope_entry(c, full, src, true)) return -1;
        if (slide && gemma4_rope_entry(c, slide, src, false)) return -1;
    }
    /* per-layer inputs: their token table has vocab_size_per_layer_input rows (class default 262144);
     * the engine looks the tokens up in both tables, so the two vocabularies must be one */
    if (c->ple_dim > 0) {
        const cJSON *vp = item(root, "vocab_size_per_layer_input");
        const double vpl = vp && !cJSON_IsNull(vp) && cJSON_IsNumber(vp) ? vp->valuedouble : 262144.0;
        if (vpl != (double)c->vocab_size)
            return tlm_error("%s: vocab_size_per_layer_input = %g differs from vocab_size = %d: not supported (the "
                             "per-layer inputs' table must cover the vocabulary)", src, vpl, c->vocab_size);
    }
    /* the MoE block (Gemma4TextDecoderLayer with enable_moe_block): in every layer the experts beside
     * the dense MLP, softmax top-k renormalised then times router.per_expert_scale (Gemma4TextRouter);
     * its three sizes must be given (the class defaults are None), and are refused without it */
    if (read_bool(root, src, "enable_moe_block", false, &c->moe_block)) return -1;
    static const char *const MOE_KEYS[] = {"num_experts", "top_k_experts", "moe_intermediate_size"};
    const int moe_vals[3] = {c->n_experts, c->n_experts_per_tok, c->moe_d_ff};
    char inert[96] = "";
    for (int i = 0; i < 3; i++) {
        const cJSON *it = item(root, MOE_KEYS[i]);
        const bool set = it && !cJSON_IsNull(it);
        if (set && !c->moe_block) /* (read above, so a bad value is still an error; inert, as transformers) */
            snprintf(inert + strlen(inert), sizeof inert - strlen(inert), "%s%s", *inert ? ", " : "", MOE_KEYS[i]);
        if (c->moe_block && (!set || moe_vals[i] <= 0))
            return tlm_error("%s: enable_moe_block = true needs %s, a positive integer", src, MOE_KEYS[i]);
    }
    /* the sizes of a block that enable_moe_block false turns off: transformers builds the dense model and
     * never reads them; so does the engine, saying so */
    if (*inert) {
        fprintf(stderr, "tinylm: note: %s: %s set while enable_moe_block is %s: inert (they size Gemma 4's "
                        "mixture-of-experts block, which is off), ignored: the model is dense\n", src, inert,
                item(root, "enable_moe_block") ? "false" : "absent (false)");
        c->n_experts = c->n_experts_per_tok = c->moe_d_ff = 0;
    }
    if (c->moe_block && c->n_experts_per_tok > c->n_experts)
        return tlm_error("%s: top_k_experts = %d exceeds num_experts = %d", src, c->n_experts_per_tok, c->n_experts);
    if (c->moe_block) c->norm_topk_prob = true, c->scoring = SCORING_SOFTMAX;
    /* Gemma4TextMLP: the layers that share keys and values have 2 * intermediate_size */
    if (read_bool(root, src, "use_double_wide_mlp", false, &c->ffn_double_shared)) return -1;
    const cJSON *vp = item(root, "vocab_size_per_layer_input");
    if (vp && !cJSON_IsNull(vp) && !cJSON_IsNumber(vp))
        return tlm_error("%s: vocab_size_per_layer_input must be an integer", src);
    return 0;
}

static int check_olmo2(tlm_config *c, const cJSON *root, const char *src) {
    c->attn_out_bias = c->attn_bias;
    derive_heads(c);
    if (check_activation(root, src, "hidden_act", "silu", SILU)) return -1;
    return read_rope(c, root, src, false);
}

static int check_gpt2(tlm_config *c, const cJSON *root, const char *src) {
    if (c->n_heads > 0 && c->d_model % c->n_heads != 0)
        return tlm_error("%s: n_embd = %d is not a multiple of n_head = %d", src, c->d_model, c->n_heads);
    c->n_kv_heads = c->n_heads;
    c->head_dim = c->n_heads > 0 ? c->d_model / c->n_heads : 0;
    if (c->d_ff == 0) c->d_ff = 4 * c->d_model; /* n_inner None */
    if (check_activation(root, src, "activation_function", "gelu_new", GELU_TANH)) return -1;
    bool scale = true;
    if (read_bool(root, src, "scale_attn_weights", true, &scale)) return -1;
    if (!scale) c->query_pre_attn_scalar = 1.0f; /* scores not divided by sqrt(head_dim) */
    if (must_be_false(root, src, "scale_attn_by_inverse_layer_idx", "per-layer attention scaling")) return -1;
    if (must_be_false(root, src, "add_cross_attention", "cross-attention")) return -1;
    return 0;
}

/* ---- GGUF: what llama.cpp's architectures fix (gguf_load.c reads the common metadata) -------- */

/* (with experts, Mixtral's, llama.cpp's llama renormalises the chosen weights: gguf_load.c) */
static void gguf_llama_shape(tlm_config *c) {
    c->norm = NORM_RMSNORM, c->placement = PLACE_PRE, c->position = POS_ROPE, c->ffn = FFN_SWIGLU;
}
static void gguf_qwen2_shape(tlm_config *c) { gguf_llama_shape(c), c->attn_bias = true; }
static void gguf_qwen3_shape(tlm_config *c) { gguf_llama_shape(c), c->qk_norm = QK_NORM_HEAD; }
/* Qwen3-MoE as llm_build_qwen3moe computes it: Qwen3's attention, every layer a mixture of experts, softmax top-k
 * renormalised, no shared expert */
static void gguf_qwen3moe_shape(tlm_config *c) { gguf_qwen3_shape(c), c->norm_topk_prob = true; }
static void gguf_qwen2moe_shape(tlm_config *c) {
    gguf_qwen2_shape(c);
    c->n_shared_experts = 1, c->shared_gate = true, c->norm_topk_prob = false;
}
static void gguf_gemma2_shape(tlm_config *c) {
    gguf_llama_shape(c);
    c->placement = PLACE_SANDWICH, c->ffn = FFN_GEGLU, c->embed_scale = true;
}
/* Gemma 3: its sliding layers on llama.cpp's fixed base */
static void gguf_gemma3_shape(tlm_config *c) {
    gguf_gemma2_shape(c);
    c->qk_norm = QK_NORM_HEAD, c->rope_theta_local = 10000.0f;
}
/* Gemma 1: Llama's pre-norm layout with GeGLU and the scaled embedding (its gains stored as 1 + w too); nothing
 * else of Gemma 2/3's: no window, no soft-caps, scale 1/sqrt(head_dim) */
static void gguf_gemma_shape(tlm_config *c) { gguf_llama_shape(c), c->ffn = FFN_GEGLU, c->embed_scale = true; }
static void gguf_olmo2_shape(tlm_config *c) { gguf_llama_shape(c), c->placement = PLACE_OUTPUT, c->qk_norm = QK_NORM_FULL; }
static void gguf_gpt2_shape(tlm_config *c) {
    c->norm = NORM_LAYERNORM, c->norm_bias = true, c->placement = PLACE_PRE, c->position = POS_LEARNED;
    c->ffn = FFN_GELU, c->attn_bias = c->attn_out_bias = c->mlp_bias = true;
}

#define GGUF(name, qk, shape_fn, blocker)                                                                              \
    .arch = name, .model_type = name, .interleaved_qk = qk, .shape = shape_fn, .export_blocker = blocker
static const gguf_family GGUF_LLAMA = {GGUF("llama", true, gguf_llama_shape, gguf_llama_blocker)};
static const gguf_family GGUF_QWEN2 = {GGUF("qwen2", false, gguf_qwen2_shape, gguf_qwen2_blocker)};
static const gguf_family GGUF_QWEN3 = {GGUF("qwen3", false, gguf_qwen3_shape, gguf_qwen3_blocker)};
/* Gemma 2 slides on even layers, Gemma 3 on five of every six (llama.cpp's rule too); Gemma 3 has no attention
 * soft-cap (the converter asserts it is unset), but the converter writes final_logit_softcapping when the config
 * sets one, and the model applies it */
static const gguf_family GGUF_GEMMA2 = {
    GGUF("gemma2", false, gguf_gemma2_shape, gguf_gemma2_blocker), .sliding_pattern = 2, .wide_scale_layers = 46,
    .floats = {{"attn_logit_softcapping", F(attn_softcap)}, {"final_logit_softcapping", F(final_softcap)}}};
static const gguf_family GGUF_GEMMA3 = {GGUF("gemma3", false, gguf_gemma3_shape, gguf_gemma3_blocker),
                                        .sliding_pattern = 6, .wide_scale_layers = 62,
                                        .floats = {{"final_logit_softcapping", F(final_softcap)}}};
static const gguf_family GGUF_OLMO2 = {GGUF("olmo2", false, gguf_olmo2_shape, gguf_olmo2_blocker)};
static const gguf_family GGUF_GPT2 = {GGUF("gpt2", false, gguf_gpt2_shape, gguf_gpt2_blocker)};
static const gguf_family GGUF_GEMMA = {GGUF("gemma", false, gguf_gemma_shape, gguf_gemma_blocker)};
/* Qwen3-MoE (llm_build_qwen3moe; gguf_qwen3moe_shape); its sizes are required metadata keys (gguf_load.c) */
static const gguf_family GGUF_QWEN3MOE = {.arch = "qwen3moe", .model_type = "qwen3_moe", .shape = gguf_qwen3moe_shape,
                                          .export_blocker = gguf_qwen3moe_blocker};
/* Qwen2-MoE as llama.cpp builds it (llm_build_qwen2moe): every layer a mixture of experts, softmax top-k not
 * renormalised, one shared expert times sigmoid(ffn_gate_inp_shexp . x); its sizes are required metadata keys
 * (gguf_load.c) */
static const gguf_family GGUF_QWEN2MOE = {.arch = "qwen2moe", .model_type = "qwen2_moe", .shape = gguf_qwen2moe_shape,
                                          .export_blocker = gguf_qwen2moe_blocker};
#undef GGUF

/* ---- the table -------------------------------------------------------------------------------- */

static const char *const LLAMA_EXTRA[] = {"hidden_act", "pretraining_tp", "rope_scaling", "rope_parameters",
                                          "partial_rotary_factor", NULL};
static const char *const QWEN_EXTRA[] = {"hidden_act", "rope_scaling", "rope_parameters", "partial_rotary_factor",
                                         "sliding_window", "use_sliding_window", "max_window_layers", NULL};
/* (router_aux_loss_coef and output_router_logits are training settings: tinylm train's
 * --router-aux-loss-coef; they do not change the logits) */
static const char *const QWEN3_MOE_EXTRA[] = {"hidden_act", "rope_scaling", "rope_parameters", "partial_rotary_factor",
                                              "sliding_window", "use_sliding_window", "max_window_layers",
                                              "router_aux_loss_coef", "output_router_logits", NULL};
static const char *const QWEN2_MOE_EXTRA[] = {"hidden_act", "rope_scaling", "rope_parameters", "partial_rotary_factor",
                                              "sliding_window", "use_sliding_window", "max_window_layers",
                                              "router_aux_loss_coef", "output_router_logits", NULL};
static const char *const MIXTRAL_EXTRA[] = {"hidden_act", "rope_scaling", "rope_parameters", "partial_rotary_factor",
                                            "router_aux_loss_coef", "output_router_logits", "router_jitter_noise",
                                            NULL};
/* (num_key_value_heads and head_dim: see DEEPSEEK_V3_COMMON_KEYS; ep_size, aux_loss_alpha, seq_aux: the original
 * remote code's training settings) */
static const char *const DEEPSEEK_V3_EXTRA[] = {"hidden_act", "pretraining_tp", "rope_scaling", "rope_parameters",
                                                "partial_rotary_factor", "num_key_value_heads", "head_dim",
                                                "scoring_func", "topk_method", "moe_layer_freq", "ep_size",
                                                "aux_loss_alpha", "seq_aux", "router_aux_loss_coef", NULL};
static const char *const GEMMA_EXTRA[] = {"hidden_act", "hidden_activation", "rope_scaling", "rope_parameters",
                                          "partial_rotary_factor", "cache_implementation", "sliding_window_pattern",
                                          "use_bidirectional_attention", NULL};
static const char *const MISTRAL_EXTRA[] = {"hidden_act", "rope_scaling", "rope_parameters", "partial_rotary_factor",
                                            NULL};
static const char *const GEMMA1_EXTRA[] = {"hidden_act", "hidden_activation", "rope_scaling", "rope_parameters",
                                           "partial_rotary_factor", "use_bidirectional_attention", NULL};
static const char *const OLMO2_EXTRA[] = {"hidden_act", "rope_scaling", "rope_parameters", "partial_rotary_factor",
                                          NULL};
/* (rope_theta and rms_norm_eps of HF_COMMON_KEYS: rope_theta is no Gemma4TextConfig field, refused as unknown) */
static const config_key GEMMA4_COMMON_KEYS[] = {
    {"vocab_size", KEY_INT, F(vocab_size), NULL},
    {"hidden_size", KEY_INT, F(d_model), NULL},
    {"num_hidden_layers", KEY_INT, F(n_layers), NULL},
    {"num_attention_heads", KEY_INT, F(n_heads), NULL},
    {"num_key_value_heads", KEY_INT, F(n_kv_heads), NULL},
    {"head_dim", KEY_INT, F(head_dim), NULL},
    {"intermediate_size", KEY_INT, F(d_ff), NULL},
    {"max_position_embeddings", KEY_INT, F(max_seq), NULL},
    {"rms_norm_eps", KEY_FLOAT, F(norm_eps), NULL},
    {"tie_word_embeddings", KEY_BOOL, F(tie_embeddings), NULL},
    {"initializer_range", KEY_FLOAT, F(init_std), NULL},
    {NULL, 0, 0, NULL},
};
static const char *const GEMMA4_EXTRA[] = {"hidden_activation", "rope_parameters", "num_global_key_value_heads",
                                           "use_bidirectional_attention", "enable_moe_block", "use_double_wide_mlp",
                                           "vocab_size_per_layer_input", NULL};
static const char *const GPT2_EXTRA[] = {"activation_function", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
                                         "reorder_and_upcast_attn", "add_cross_attention", "resid_pdrop", "embd_pdrop",
                                         "attn_pdrop", "summary_type", "summary_use_proj", "summary_activation",
                                         "summary_proj_to_labels", "summary_first_dropout", "n_ctx", NULL};

static int gemma3_multimodal_parse(tlm_config *cfg, const cJSON *root, const char *src);
static int gemma4_multimodal_parse(tlm_config *cfg, const cJSON *root, const char *src);

/* Gemma3ForConditionalGeneration: language_model.model. in the released files (transformers 4.5x),
 * model.language_model. since transformers 4.52; the SigLIP tower and the projector, in both layouts */
static const char *const GEMMA3_MM_PREFIXES[] = {"language_model.model.", "model.language_model.", NULL};
static const char *const GEMMA3_MM_TOWERS[] = {"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                                               "model.multi_modal_projector.", NULL};
/* Gemma4ForConditionalGeneration: the text model is model.language_model; the vision and audio towers */
static const char *const GEMMA4_MM_PREFIXES[] = {"model.language_model.", NULL};
static const char *const GEMMA4_MM_TOWERS[] = {"model.vision_tower.", "model.embed_vision.", "model.audio_tower.",
                                               "model.embed_audio.", NULL};

/* (in the order the messages list them) */
static const tlm_family FAMILIES[] = {
    {.model_type = "llama", .arch = arch_llama, .common = HF_COMMON_KEYS, .keys = LLAMA_KEYS, .check = check_llama,
     .extra_known = LLAMA_EXTRA, .names = HF_FAMILY_LLAMA, .gguf = &GGUF_LLAMA, .export_blocker = hf_llama_blocker,
     .export_config = hf_llama_config},
    {.model_type = "qwen2", .arch = arch_qwen2, .common = HF_COMMON_KEYS, .keys = QWEN2_KEYS, .check = check_qwen2,
     .extra_known = QWEN_EXTRA, .names = HF_FAMILY_LLAMA, .gguf = &GGUF_QWEN2},
    {.model_type = "qwen3", .arch = arch_qwen3, .common = HF_COMMON_KEYS, .keys = QWEN3_KEYS, .check = check_qwen3,
     .extra_known = QWEN_EXTRA, .names = HF_FAMILY_LLAMA, .gguf = &GGUF_QWEN3},
    {.model_type = "qwen3_moe", .arch = arch_qwen3_moe, .common = HF_COMMON_KEYS, .keys = QWEN3_MOE_KEYS,
     .check = qwen3_moe_check, .extra_known = QWEN3_MOE_EXTRA, .names = HF_FAMILY_LLAMA,
     .gguf = &GGUF_QWEN3MOE, .export_blocker = hf_qwen3_moe_blocker, .export_config = hf_qwen3_moe_config},
    {.model_type = "mixtral", .arch = arch_mixtral, .common = HF_COMMON_KEYS, .keys = MIXTRAL_KEYS,
     .check = check_mixtral, .extra_known = MIXTRAL_EXTRA, .names = HF_FAMILY_MIXTRAL,
     .export_blocker = hf_mixtral_blocker, .export_config = hf_mixtral_config},
    {.model_type = "qwen2_moe", .arch = arch_qwen2_moe, .common = HF_COMMON_KEYS, .keys = QWEN2_MOE_KEYS,
     .check = check_qwen2_moe, .extra_known = QWEN2_MOE_EXTRA, .names = HF_FAMILY_LLAMA, .gguf = &GGUF_QWEN2MOE,
     .export_blocker = hf_qwen2_moe_blocker, .export_config = hf_qwen2_moe_config},
    {.model_type = "deepseek_v3", .arch = arch_deepseek_v3, .common = DEEPSEEK_V3_COMMON_KEYS, .keys = DEEPSEEK_V3_KEYS,
     .check = check_deepseek_v3, .extra_known = DEEPSEEK_V3_EXTRA, .names = HF_FAMILY_LLAMA,
     .gguf_refused = "llama.cpp's deepseek2 stores multi-head latent attention in its own layout (kv_b_proj split "
                     "into attn_k_b and attn_v_b), which tinylm neither writes nor reads",
     .export_blocker = hf_deepseek_v3_blocker, .export_config = hf_deepseek_v3_config},
    {.model_type = "gemma2", .arch = arch_gemma2, .common = HF_COMMON_KEYS, .keys = GEMMA2_KEYS, .check = check_gemma2,
     .extra_known = GEMMA_EXTRA, .names = HF_FAMILY_GEMMA, .gguf = &GGUF_GEMMA2},
    {.model_type = "gemma3_text", .wrapper = "gemma3", .arch = arch_gemma3, .common = HF_COMMON_KEYS,
     .keys = GEMMA3_KEYS, .check = check_gemma3, .extra_known = GEMMA_EXTRA, .wrapper_parse = gemma3_multimodal_parse,
     .wrapper_prefixes = GEMMA3_MM_PREFIXES, .wrapper_towers = GEMMA3_MM_TOWERS,
     .wrapper_towers_are = "vision tower and its projector", .names = HF_FAMILY_GEMMA, .gguf = &GGUF_GEMMA3},
    {.model_type = "olmo2", .arch = arch_olmo2, .common = HF_COMMON_KEYS, .keys = OLMO2_KEYS, .check = check_olmo2,
     .extra_known = OLMO2_EXTRA, .names = HF_FAMILY_OLMO2, .gguf = &GGUF_OLMO2},
    {.model_type = "gpt2", .arch = arch_gpt2, .keys = GPT2_KEYS, .check = check_gpt2, .extra_known = GPT2_EXTRA,
     .names = HF_FAMILY_GPT2, .gguf = &GGUF_GPT2, .export_blocker = hf_gpt2_blocker, .export_config = hf_gpt2_config,
     .export_all_biases = true},
    {.model_type = "gemma4_text", .wrapper = "gemma4", .arch = arch_gemma4, .common = GEMMA4_COMMON_KEYS,
     .keys = GEMMA4_KEYS, .check = check_gemma4, .extra_known = GEMMA4_EXTRA, .strict = true,
     .wrapper_parse = gemma4_multimodal_parse, .wrapper_prefixes = GEMMA4_MM_PREFIXES,
     .wrapper_towers = GEMMA4_MM_TOWERS, .wrapper_towers_are = "vision and audio towers", .names = HF_FAMILY_GEMMA,
     .gguf_refused = "llama.cpp's gemma4 (per-layer inputs, shared keys and values, layer types of their own shapes) "
                     "is not written: tinylm's GGUF reader does not read it"},
    {.model_type = "mistral", .arch = arch_mistral, .common = HF_COMMON_KEYS, .keys = MISTRAL_KEYS,
     .check = check_mistral, .extra_known = MISTRAL_EXTRA, .names = HF_FAMILY_LLAMA,
     .export_blocker = hf_mistral_blocker, .export_config = hf_mistral_config},
    {.model_type = "gemma", .arch = arch_gemma1, .common = HF_COMMON_KEYS, .keys = GEMMA1_KEYS, .check = check_gemma1,
     .extra_known = GEMMA1_EXTRA, .names = HF_FAMILY_LLAMA, .gguf = &GGUF_GEMMA},
    /* llama2.c checkpoints (llama2c_load.c: a header, no config.json): Llama's body and names */
    {.model_type = "llama2c", .names = HF_FAMILY_LLAMA},
};

#define N_FAMILIES ((int)(sizeof FAMILIES / sizeof FAMILIES[0]))

const tlm_family *family_at(int i) { return i >= 0 && i < N_FAMILIES ? &FAMILIES[i] : NULL; }

const tlm_family *family_find(const char *mt) {
    for (int i = 0; i < N_FAMILIES; i++)
        if (!strcmp(FAMILIES[i].model_type, mt) || (FAMILIES[i].wrapper && !strcmp(FAMILIES[i].wrapper, mt)))
            return &FAMILIES[i];
    return NULL;
}

const tlm_family *family_find_gguf(const char *arch, size_t len) {
    for (int i = 0; i < N_FAMILIES; i++)
        if (FAMILIES[i].gguf && strlen(FAMILIES[i].gguf->arch) == len && !memcmp(FAMILIES[i].gguf->arch, arch, len))
            return &FAMILIES[i];
    return NULL;
}

static int in_list(const char *const *list, const char *s) {
    for (int i = 0; list && list[i]; i++)
        if (!strcmp(list[i], s)) return 1;
    return 0;
}

static config_unknown_keys *unknown_sink;

void config_collect_unknown(config_unknown_keys *sink) {
    unknown_sink = sink;
    if (sink) sink->n = sink->n_missed = 0;
}

static void note_unknown(const char *key) {
    if (!unknown_sink) return;
    if (unknown_sink->n < CONFIG_MAX_UNKNOWN)
        snprintf(unknown_sink->keys[unknown_sink->n++], sizeof unknown_sink->keys[0], "%s", key);
    else
        unknown_sink->n_missed++;
}

static int hf_family_parse(tlm_config *cfg, const cJSON *root, const char *mt, const char *src);

/* Gemma4Config (a multimodal checkpoint, Gemma4ForConditionalGeneration): the text model of its
 * text_config, read as gemma4_text; the vision and audio towers are skipped with a note; any other
 * key than the multimodal token ids and bookkeeping is refused by name */
static int gemma4_multimodal_parse(tlm_config *cfg, const cJSON *root, const char *src) {
    static const char *const KNOWN[] = {"text_config", "vision_config", "audio_config", "boi_token_id", "eoi_token_id",
                                        "image_token_id", "video_token_id", "boa_token_id", "eoa_token_index",
                                        "eoa_token_id", "audio_token_id", "vision_soft_tokens_per_image",
                                        "audio_soft_tokens_per_image", "initializer_range", "tie_word_embeddings",
                                        "quantization_config", NULL};
    for (const cJSON *it = root->child; it; it = it->next)
        if (!in_list(KNOWN, it->string) && !in_list(HF_IGNORED, it->string))
            return tlm_error("%s: key \"%s\" is not supported by the gemma4 (multimodal) reader", src, it->string);
    const cJSON *text = item(root, "text_config");
    if (!cJSON_IsObject(text)) return tlm_error("%s: text_config must be an object (the text model's config)", src);
    const char *tmt = cJSON_GetStringValue(item(text, "model_type"));
    if (tmt && strcmp(tmt, "gemma4_text") != 0)
        return tlm_error("%s: text_config.model_type = \"%s\": expected \"gemma4_text\"", src, tmt);
    char where[300];
    snprintf(where, sizeof where, "%s (text_config)", src);
    if (hf_family_parse(cfg, text, "gemma4_text", where)) return -1;
    /* the head: tied unless either config unties it (the two must agree) */
    const cJSON *tie = item(root, "tie_word_embeddings");
    if (tie && (!cJSON_IsBool(tie) || cJSON_IsTrue(tie) != cfg->tie_embeddings))
        return tlm_error("%s: tie_word_embeddings differs between the top level and text_config", src);
    const char *skipped[2] = {NULL, NULL};
    int n = 0;
    if (item(root, "vision_config") && !cJSON_IsNull(item(root, "vision_config"))) skipped[n++] = "vision_config";
    if (item(root, "audio_config") && !cJSON_IsNull(item(root, "audio_config"))) skipped[n++] = "audio_config";
    if (n)
        fprintf(stderr, "tinylm: note: %s: the text model of a multimodal Gemma 4; %s%s%s skipped (the engine reads "
                        "text: image, video and audio token ids are embedded as themselves, not as transformers' "
                        "placeholders)\n", src, skipped[0], n > 1 ? " and " : "", n > 1 ? skipped[1] : "");
    snprintf(cfg->model_type, sizeof cfg->model_type, "gemma4");
    return 0;
}

/* Gemma3Config (Gemma3ForConditionalGeneration: Gemma 3 4B / 12B / 27B): the text model of its text_config,
 * read as gemma3_text (its class defaults where the file leaves keys out); the vision tower (vision_config and
 * its tensors) is skipped with a note; other top-level keys than the multimodal token ids and bookkeeping get
 * the family's warning */
static int gemma3_multimodal_parse(tlm_config *cfg, const cJSON *root, const char *src) {
    static const char *const KNOWN[] = {"text_config", "vision_config", "mm_tokens_per_image", "boi_token_index",
                                        "eoi_token_index", "image_token_index", "boi_token_id", "eoi_token_id",
                                        "image_token_id", "initializer_range", "tie_word_embeddings",
                                        "quantization_config", NULL};
    const cJSON *text = item(root, "text_config");
    if (!cJSON_IsObject(text)) return tlm_error("%s: text_config must be an object (the text model's config)", src);
    const char *tmt = cJSON_GetStringValue(item(text, "model_type"));
    if (tmt && strcmp(tmt, "gemma3_text") != 0)
        return tlm_error("%s: text_config.model_type = \"%s\": expected \"gemma3_text\"", src, tmt);
    char where[300];
    snprintf(where, sizeof where, "%s (text_config)", src);
    if (hf_family_parse(cfg, text, "gemma3_text", where)) return -1;
    for (const cJSON *it = root->child; it; it = it->next)
        if (!in_list(KNOWN, it->string) && !in_list(HF_IGNORED, it->string)) {
            fprintf(stderr, "tinylm: warning: %s: key \"%s\" is not used by the gemma3 (multimodal) reader\n", src,
                    it->string);
            note_unknown(it->string);
        }
    const cJSON *tie = item(root, "tie_word_embeddings");
    if (tie && (!cJSON_IsBool(tie) || cJSON_IsTrue(tie) != cfg->tie_embeddings))
        return tlm_error("%s: tie_word_embeddings differs between the top level and text_config", src);
    if (item(root, "vision_config") && !cJSON_IsNull(item(root, "vision_config")))
        fprintf(stderr, "tinylm: note: %s: the text model of a multimodal Gemma 3; vision_config and the vision "
                        "tower skipped (the engine reads text: image token ids are embedded as themselves)\n", src);
    snprintf(cfg->model_type, sizeof cfg->model_type, "gemma3");
    return 0;
}

static int hf_config_parse(tlm_config *cfg, const cJSON *root, const char *mt, const char *src) {
    const tlm_family *f = family_find(mt);
    if (f && f->wrapper && !strcmp(f->wrapper, mt)) { /* (the wrapper's quantization_config, at its top) */
        tlm_config q;
        config_defaults(&q);
        if (read_quantization(&q, root, src)) return -1;
        if (f->wrapper_parse(cfg, root, src)) return -1;
        if (!q.quant_method[0]) return 0; /* (none at the top: text_config's own, if any, stands) */
        memcpy(cfg->quant_method, q.quant_method, sizeof q.quant_method);
        memcpy(cfg->quant_fmt, q.quant_fmt, sizeof q.quant_fmt);
        memcpy(cfg->quant_block, q.quant_block, sizeof q.quant_block);
        cfg->quant_bits = q.quant_bits, cfg->quant_group = q.quant_group;
        return 0;
    }
    return hf_family_parse(cfg, root, mt, src);
}

static int hf_family_parse(tlm_config *cfg, const cJSON *root, const char *mt, const char *src) {
    const tlm_family *fam = family_find(mt);
    if (!fam || !fam->arch || strcmp(fam->model_type, mt) != 0) {
        char names[256] = "", wrappers[64] = "";
        for (int i = 0; i < N_FAMILIES; i++) {
            if (!FAMILIES[i].arch) continue;
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", *names ? ", " : "",
                     FAMILIES[i].model_type);
            if (FAMILIES[i].wrapper)
                snprintf(wrappers + strlen(wrappers), sizeof wrappers - strlen(wrappers), ", %s", FAMILIES[i].wrapper);
        }
        return tlm_error("%s: model_type \"%s\" is not supported (supported: tinylm, %s%s)", src, mt, names, wrappers);
    }
    config_defaults(cfg);
    /* the family's _init_weights: normal(0, initializer_range) for every matrix (arch_gpt2 scales the residual
     * projections) */
    cfg->scale_residual_init = false;
    fam->arch(cfg);
    if (read_quantization(cfg, root, src)) return -1;
    snprintf(cfg->model_type, sizeof cfg->model_type, "%s", mt);
    for (const cJSON *it = root->child; it; it = it->next) {
        const config_key *k = fam->common ? config_find_key(fam->common, it->string) : NULL;
        if (!k) k = config_find_key(fam->keys, it->string);
        if (k) {
            if (config_read_key(cfg, k, it, src)) return -1;
        } else if (!in_list(HF_IGNORED, it->string) && !in_list(fam->extra_known, it->string) &&
                   strcmp(it->string, "quantization_config") != 0) {
            if (fam->strict) /* (Gemma 4: a key the reader does not know may change the numbers; never ignored) */
                return tlm_error("%s: key \"%s\" is not supported by the %s reader (refused: it is no key of the "
                                 "family's configuration that the engine implements or knows to leave the numbers "
                                 "alone)", src, it->string, mt);
            fprintf(stderr, "tinylm: warning: %s: key \"%s\" is not used by the %s reader\n", src, it->string, mt);
            note_unknown(it->string);
        }
    }
    /* head_dim: the class default (Qwen3's 128, Gemma's 256, ...) or, when the family has none and the file
     * gives none, hidden_size / heads, which must then divide (GPT-2 and MLA check their own) */
    const cJSON *hd_key = item(root, "head_dim");
    const bool hd_absent = !hd_key || cJSON_IsNull(hd_key);
    cfg->head_dim_default = hd_absent && cfg->head_dim > 0;
    if (hd_absent && cfg->head_dim == 0 && cfg->kv_lora_rank == 0 && fam->common == HF_COMMON_KEYS &&
        cfg->n_heads > 0 && cfg->d_model % cfg->n_heads != 0)
        return tlm_error("%s: hidden_size = %d is not a multiple of num_attention_heads = %d (without head_dim, "
                         "each head is hidden_size / num_attention_heads wide)", src, cfg->d_model, cfg->n_heads);
    /* per-layer tables (layer_sliding) have TLM_MAX_LAYERS entries: refuse more layers before
     * any family check fills them */
    if (cfg->n_layers > TLM_MAX_LAYERS || cfg->n_layers < 0)
        return tlm_error("%s: num_hidden_layers = %d: between 1 and %d supported", src, cfg->n_layers, TLM_MAX_LAYERS);
    if (fam->check(cfg, root, src)) return -1;
    return config_validate(cfg, src);
}

/* ---- any config.json: the engine's own format or a family's ------------------------------------- */

int config_parse(tlm_config *cfg, const char *json_text, const char *src) {
    cJSON *root = cJSON_Parse(json_text);
    if (!root && tlm_json_nesting_error(src, json_text, strlen(json_text))) return -1; /* (cJSON's depth limit) */
    if (!root) return tlm_error("%s: not valid JSON (near \"%.20s\")", src, cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "");
    int rc = -1;
    const char *mt = cJSON_IsObject(root) ? cJSON_GetStringValue(item(root, "model_type")) : NULL;
    if (!cJSON_IsObject(root))
        tlm_error("%s: the top level must be a JSON object", src);
    else if (!mt)
        tlm_error("%s: key \"model_type\" is missing (use \"tinylm\" for the engine's own configs)", src);
    else
        rc = !strcmp(mt, "tinylm") ? config_from_json(cfg, root, src) : hf_config_parse(cfg, root, mt, src);
    cJSON_Delete(root);
    return rc;
}

int config_load(tlm_config *cfg, const char *path) {
    size_t n;
    char *text = read_text_file(path, &n);
    if (!text) return -1;
    int rc = config_parse(cfg, text, path);
    free(text);
    return rc;
}
