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

/* ---- which of llama.cpp's GGUF architectures computes the config ---------------------------------------------------

   Each blocker takes the features its architecture has off a copy of the config and hands the rest to the body
   every one of them shares with llama (gguf_body); the first feature left that the architecture lacks is the
   answer. What llama.cpp fixes rather than reads (Gemma 2 slides on even layers, Gemma 3 on five of six with
   base 10000 there, Gemma's attention scale from head_dim, its tied head) must be what the config says. */

/* every layer slides with one window and one RoPE base: within the window that is full attention */
static bool uniform_sliding(const tlm_config *c) {
    if (!any_sliding(c)) return false;
    for (int l = 0; l < c->n_layers; l++)
        if (!c->layer_sliding[l]) return false;
    return c->rope_theta_local <= 0.0f || c->rope_theta_local == c->rope_theta;
}

static void clear_sliding(tlm_config *b) {
    b->sliding_window = 0, b->rope_theta_local = 0.0f;
    memset(b->layer_sliding, 0, sizeof b->layer_sliding);
}

/* the llama body (hf_llama_blocker: no Gemma 4 switch, MLA, experts, DyT, ...), plain RMSNorm, RoPE unscaled
 * or linear; a window in every layer alike is written as the context (gguf_export_context) */
static const char *gguf_body(const tlm_config *c) {
    tlm_config b = *c;
    if (uniform_sliding(c)) clear_sliding(&b);
    if (any_sliding(&b)) return "a sliding window on some layers only (the architecture has none)";
    const char *why = hf_llama_blocker(&b);
    if (why) return why;
    if (c->rope_scaling == ROPE_SCALING_LLAMA3) return "Llama 3 RoPE scaling (llama.cpp wants a rope_freqs tensor)";
    if (c->norm != NORM_RMSNORM) return "a norm other than plain-weight RMSNorm";
    return NULL;
}

static const char *no_biases(const tlm_config *c) {
    return c->attn_bias || c->attn_out_bias || c->mlp_bias ? "biases (the architecture has none)" : NULL;
}

/* (with experts: Mixtral's, every layer, softmax top-k renormalised; llama.cpp's llama with an expert_count) */
const char *gguf_llama_blocker(const tlm_config *c) {
    const char *why = c->n_experts > 0 ? hf_mixtral_blocker(c) : gguf_body(c);
    if (!why && c->rope_scaling == ROPE_SCALING_LLAMA3)
        why = "Llama 3 RoPE scaling (llama.cpp wants a rope_freqs tensor)";
    return why ? why : no_biases(c);
}

/* Qwen2: q, k, v with biases, o and the MLP without */
const char *gguf_qwen2_blocker(const tlm_config *c) {
    if (!c->attn_bias || c->attn_out_bias || c->mlp_bias) return "biases other than on q, k and v only";
    tlm_config b = *c;
    b.attn_bias = false;
    return gguf_body(&b);
}

/* Qwen3: per-head QK-norm, no biases */
const char *gguf_qwen3_blocker(const tlm_config *c) {
    if (c->qk_norm != QK_NORM_HEAD) return "no per-head QK-norm";
    tlm_config b = *c;
    b.qk_norm = QK_NORM_NONE;
    const char *why = gguf_body(&b);
    return why ? why : no_biases(c);
}

/* OLMo 2: a norm after each sublayer only, QK-norm over the whole projection, no biases */
const char *gguf_olmo2_blocker(const tlm_config *c) {
    if (c->placement != PLACE_OUTPUT) return "norm placement other than after each sublayer (OLMo 2's)";
    if (c->qk_norm != QK_NORM_FULL) return "no QK-norm over the whole projection";
    tlm_config b = *c;
    b.placement = PLACE_PRE, b.qk_norm = QK_NORM_NONE;
    const char *why = gguf_body(&b);
    return why ? why : no_biases(c);
}

/* Qwen2-MoE as llm_build_qwen2moe computes it: every layer experts (softmax top-k, not renormalised) and one
 * shared expert behind its sigmoid gate; q, k, v biases */
const char *gguf_qwen2moe_blocker(const tlm_config *c) {
    const char *why = hf_qwen2_moe_blocker(c);
    if (why) return why;
    if (!c->attn_bias) return "no q/k/v biases (llama.cpp's qwen2moe has them)";
    if (config_moe_layers(c) != c->n_layers) return "dense layers among the experts' (llama.cpp's qwen2moe has none)";
    if (c->norm_topk_prob) return "routed weights renormalised (llama.cpp's qwen2moe does not)";
    if (c->n_shared_experts != 1) return "other than one shared expert";
    if (c->rope_scaling == ROPE_SCALING_LLAMA3) return "Llama 3 RoPE scaling (llama.cpp wants a rope_freqs tensor)";
    return NULL;
}

/* Qwen3-MoE as llm_build_qwen3moe computes it: Qwen3's attention, every layer experts (softmax top-k, always
 * renormalised), no shared expert */
const char *gguf_qwen3moe_blocker(const tlm_config *c) {
    const char *why = hf_qwen3_moe_blocker(c);
    if (why) return why;
    if (config_moe_layers(c) != c->n_layers) return "dense layers among the experts' (llama.cpp's qwen3moe has none)";
    if (!c->norm_topk_prob) return "routed weights not renormalised (llama.cpp's qwen3moe renormalises them)";
    if (c->rope_scaling == ROPE_SCALING_LLAMA3) return "Llama 3 RoPE scaling (llama.cpp wants a rope_freqs tensor)";
    return no_biases(c);
}

/* the Gemma features every Gemma architecture has: the (1 + w) RMSNorm (or plain, on a model read from a GGUF
 * file, whose gains hold the 1), GeGLU, the embedding times sqrt(d), a tied head (llama.cpp's gemma and gemma2
 * have no output tensor), the attention scale llama.cpp derives (head_dim^-0.5, or (d / H)^-0.5 at the depth
 * wide_scale_layers; tinylm's reader too) */
static const char *gemma_common(const tlm_config *c, int wide_scale_layers, tlm_config *b) {
    if (c->norm != NORM_RMSNORM_1P && c->norm != NORM_RMSNORM) return "a norm other than RMSNorm";
    if (c->ffn != FFN_GEGLU) return "an FFN other than GeGLU";
    if (!c->embed_scale) return "no embedding scale sqrt(d)";
    if (!c->tie_embeddings) return "an untied head (llama.cpp's Gemma architectures read none)";
    /* (llama.cpp's scalar: head_dim, or d / H at the 27B's depth) */
    const float qpas = c->query_pre_attn_scalar != 0.0f ? c->query_pre_attn_scalar : (float)c->head_dim;
    if (wide_scale_layers && c->n_layers == wide_scale_layers) {
        if (qpas != (float)(c->d_model / c->n_heads))
            return "query_pre_attn_scalar other than hidden_size / heads at the depth where llama.cpp scales by it "
                   "(the 27B's)";
    } else if (qpas != (float)c->head_dim) {
        return "query_pre_attn_scalar other than head_dim (llama.cpp scales by head_dim^-0.5 but at the 27B's depth)";
    }
    *b = *c;
    b->norm = NORM_RMSNORM, b->ffn = FFN_SWIGLU, b->embed_scale = false, b->query_pre_attn_scalar = 0.0f;
    return NULL;
}

/* Gemma 1: the llama layout otherwise, no soft-caps, no window */
const char *gguf_gemma_blocker(const tlm_config *c) {
    tlm_config b;
    const char *why = gemma_common(c, 0, &b);
    if (why) return why;
    if (c->placement != PLACE_PRE) return "norm placement other than pre (Gemma 1's)";
    const char *body = gguf_body(&b);
    return body ? body : no_biases(c);
}

/* the sliding layers of Gemma 2 (pattern 2) or Gemma 3 (pattern 6) exactly, or (Gemma 2) none */
static const char *gemma_sliding(const tlm_config *c, int pattern, bool none_ok) {
    if (c->sliding_window <= 0 || !any_sliding(c))
        return none_ok ? NULL : "no sliding window (llama.cpp's gemma3 slides on five layers of every six)";
    for (int l = 0; l < c->n_layers; l++)
        if ((bool)c->layer_sliding[l] != ((l + 1) % pattern != 0))
            return pattern == 2 ? "sliding layers other than the even ones (llama.cpp's gemma2 slides on those)"
                                : "sliding layers other than five of every six (llama.cpp's gemma3 slides on those)";
    return NULL;
}

/* Gemma 2: the sandwich norms, both soft-caps (llama.cpp applies them always), even layers sliding */
const char *gguf_gemma2_blocker(const tlm_config *c) {
    tlm_config b;
    const char *why = gemma_common(c, family_find("gemma2")->gguf->wide_scale_layers, &b);
    if (why) return why;
    if (c->placement != PLACE_SANDWICH) return "norm placement other than the sandwich (Gemma 2's)";
    if (c->qk_norm != QK_NORM_NONE) return "QK-norm";
    if (c->attn_softcap <= 0.0f || c->final_softcap <= 0.0f)
        return "an attention or final soft-cap off (llama.cpp's gemma2 applies both)";
    if ((why = gemma_sliding(c, 2, true))) return why;
    if (c->rope_theta_local > 0.0f && c->rope_theta_local != c->rope_theta)
        return "a RoPE base of the sliding layers' own";
    b.placement = PLACE_PRE, b.attn_softcap = b.final_softcap = 0.0f;
    clear_sliding(&b);
    const char *body = gguf_body(&b);
    return body ? body : no_biases(c);
}

/* Gemma 3: Gemma 2's body with per-head QK-norm, no attention soft-cap, five of six layers sliding on RoPE base
 * 10000 (llama.cpp fixes it), the global layers on rope.freq_base (and the linear scaling) */
const char *gguf_gemma3_blocker(const tlm_config *c) {
    tlm_config b;
    const char *why = gemma_common(c, family_find("gemma3_text")->gguf->wide_scale_layers, &b);
    if (why) return why;
    if (c->placement != PLACE_SANDWICH) return "norm placement other than the sandwich (Gemma 3's)";
    if (c->qk_norm != QK_NORM_HEAD) return "no per-head QK-norm (Gemma 3's)";
    if (c->attn_softcap != 0.0f) return "attention soft-capping (llama.cpp's gemma3 has none)";
    if ((why = gemma_sliding(c, 6, false))) return why;
    if ((c->rope_theta_local > 0.0f ? c->rope_theta_local : c->rope_theta) != 10000.0f)
        return "a RoPE base of the sliding layers other than 10000 (llama.cpp's gemma3 fixes it)";
    b.placement = PLACE_PRE, b.qk_norm = QK_NORM_NONE, b.final_softcap = 0.0f;
    clear_sliding(&b);
    const char *body = gguf_body(&b);
    return body ? body : no_biases(c);
}

/* GPT-2: LayerNorm, learned positions, GELU, heads of d / H without GQA, scale head_dim^-0.5; every bias (those the
 * model has not are written zero: gguf_export_file) */
const char *gguf_gpt2_blocker(const tlm_config *c) {
    const char *why = hf_gpt2_blocker(c);
    if (why) return why;
    if (c->query_pre_attn_scalar == 1.0f) return "attention scores not scaled (scale_attn_weights false)";
    return NULL;
}

const tlm_family *gguf_export_family(const tlm_config *c, const char **why) {
    const tlm_family *own = family_find(c->model_type), *f;
    if (own && own->gguf_refused) return *why = own->gguf_refused, NULL;
    const char *own_why = own && own->gguf && own->gguf->export_blocker ? own->gguf->export_blocker(c) : NULL;
    if (own && own->gguf && own->gguf->export_blocker && !own_why) return own;
    for (int i = 0; (f = family_at(i)) != NULL; i++)
        if (f->gguf && f->gguf->export_blocker && !f->gguf->export_blocker(c)) return f;
    static _Thread_local char msg[256];
    if (own_why)
        snprintf(msg, sizeof msg, "llama.cpp's %s architecture: %s", own->gguf->arch, own_why);
    else
        snprintf(msg, sizeof msg, "no architecture of llama.cpp's that tinylm writes computes it (llama: %s)",
                 gguf_llama_blocker(c));
    return *why = msg, NULL;
}

int gguf_export_context(const gguf_family *a, const tlm_config *c) {
    if (!a->sliding_pattern && uniform_sliding(c) && c->sliding_window < c->max_seq) return c->sliding_window;
    return c->max_seq;
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
