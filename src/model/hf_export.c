/* hf_export.c — an engine model -> a Hugging Face style directory (see hf_export.h).
 *
 * The family is chosen from the architecture switches, never from where the model came
 * from. Tensor names and layouts come from the same map the loader uses (hf_map.c), run
 * backwards, so an export loads back into the identical parameter buffer. */
#include "hf_export.h"
#include "config_keys.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/safetensors.h"
#include "hf_map.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/finite.h"
#include "util/io.h"

#define PRODUCER "tinylm export"

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

static const char *gpt2_blocker(const tlm_config *c) {
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
static tlm_config with_all_biases(const tlm_config *c) {
    tlm_config b = *c;
    b.norm_bias = b.attn_bias = b.attn_out_bias = b.mlp_bias = true;
    return b;
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

/* Qwen2-MoE (Qwen2MoeForCausalLM): the llama body with q/k/v biases or none and no o bias, softmax routing
 * without groups or scaling, one shared expert (of any width) behind its sigmoid gate, head_dim hidden / heads
 * (Qwen2MoeAttention of transformers 4.x derives it so) */
static const char *qwen2_moe_blocker(const tlm_config *c) {
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
static const char *deepseek_blocker(const tlm_config *c) {
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
static const char *mistral_blocker(const tlm_config *c) {
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

const char *hf_export_family(const tlm_config *c, const char **why) {
    if (config_mla(c)) {
        const char *bd = deepseek_blocker(c);
        if (!bd) return "deepseek_v3";
        if (why) *why = bd;
        return "tinylm";
    }
    if (c->n_experts > 0) {
        const char *bq = moe_blocker(c, 1), *bm = moe_blocker(c, 0), *b2 = qwen2_moe_blocker(c);
        if (!bq) return "qwen3_moe";
        if (!bm) return "mixtral";
        if (!b2) return "qwen2_moe";
        if (why) *why = c->shared_gate ? b2 : c->qk_norm == QK_NORM_HEAD ? bq : bm;
        return "tinylm";
    }
    const char *bl = hf_llama_blocker(c);
    if (!bl) return "llama";
    if (!mistral_blocker(c)) return "mistral";
    const tlm_config biased = with_all_biases(c);
    const char *bg = c->norm == NORM_LAYERNORM ? gpt2_blocker(&biased) : gpt2_blocker(c);
    if (!bg) return "gpt2";
    if (why) *why = c->position == POS_LEARNED ? bg : bl;
    return "tinylm";
}

/* ---- the target directory ------------------------------------------------------------------------- */

static int is_previous_export(const char *path) {
    const int paused = tlm_inputs_pause(1); /* the export's target, not an input (util/io.h) */
    tlm_safetensors *st = tlm_st_open(path);
    tlm_inputs_pause(paused);
    if (!st) return 0;
    const char *p = tlm_st_metadata(st, "producer");
    int ok = p && !strcmp(p, PRODUCER);
    tlm_st_close(st);
    return ok;
}

/* the files an export writes beside the weights (model_export_tokenizer) */
static int is_exported_tokenizer_file(const char *name) {
    static const char *const names[] = {"tokenizer.json", "tokenizer_config.json", "tinylm_tokenizer.json",
                                        "tokenizer.bin", "encoder.json", "vocab.bpe"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(name, names[i])) return 1;
    return 0;
}

int hf_export_check_target(const char *dir) {
    if (!is_directory(dir)) {
        if (file_exists(dir)) return tlm_error("%s: exists and is not a directory; refusing to export there", dir);
        return 0;
    }
    DIR *d = opendir(dir);
    if (!d) return tlm_error("%s: cannot list the directory", dir);
    int rc = 0, has_weights = 0;
    for (struct dirent *e; !rc && (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!strcmp(e->d_name, "config.json") || is_exported_tokenizer_file(e->d_name)) continue;
        if (!strcmp(e->d_name, "model.safetensors")) {
            has_weights = 1;
            continue;
        }
        rc = tlm_error("%s: holds \"%s\", so it is not empty and not a previous tinylm export; refusing to write "
                       "there (choose an empty or new directory)",
                       dir, e->d_name);
    }
    closedir(d);
    if (rc) return -1;
    char *w = path_join(dir, "model.safetensors");
    int prev = has_weights && w && is_previous_export(w);
    free(w);
    if (has_weights && !prev)
        return tlm_error("%s: holds a model.safetensors that tinylm export did not write; refusing to overwrite it",
                         dir);
    if (!has_weights && !dir_is_empty(dir))
        return tlm_error("%s: holds a config.json or tokenizer without an exported model.safetensors; refusing to "
                         "overwrite it", dir);
    return 0;
}

/* ---- config.json ------------------------------------------------------------------------------------ */

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

/* LlamaConfig, or MistralConfig: the llama body's keys, Mistral's without the biases and with the
 * window of every layer */
static char *llama_body_config(const tlm_config *c, int mistral) {
    cJSON *o = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(mistral ? "MistralForCausalLM" : "LlamaForCausalLM"));
    cJSON_AddStringToObject(o, "model_type", mistral ? "mistral" : "llama");
    config_json_add_sizes(o, c);
    cJSON_AddNumberToObject(o, "rms_norm_eps", tidy(c->norm_eps));
    add_rope(o, c);
    if (mistral) {
        cJSON_AddNumberToObject(o, "sliding_window", c->sliding_window);
    } else {
        cJSON_AddBoolToObject(o, "attention_bias", c->attn_bias);
        cJSON_AddBoolToObject(o, "mlp_bias", c->mlp_bias);
    }
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_embeddings);
    cJSON_AddNumberToObject(o, "initializer_range", tidy(c->init_std));
    cJSON_AddStringToObject(o, "torch_dtype", "float32");
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

/* Qwen3MoeConfig / MixtralConfig: the llama body's keys and the experts' (first_k_dense_replace
 * becomes mlp_only_layers, which Qwen3-MoE has) */
static char *moe_config(const tlm_config *c, int qwen) {
    cJSON *o = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(qwen ? "Qwen3MoeForCausalLM" : "MixtralForCausalLM"));
    cJSON_AddStringToObject(o, "model_type", qwen ? "qwen3_moe" : "mixtral");
    config_json_add_sizes(o, c);
    cJSON_AddNumberToObject(o, "rms_norm_eps", tidy(c->norm_eps));
    add_rope(o, c);
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_embeddings);
    cJSON_AddNumberToObject(o, "initializer_range", tidy(c->init_std));
    cJSON_AddNumberToObject(o, "num_experts_per_tok", c->n_experts_per_tok);
    if (qwen) {
        cJSON_AddBoolToObject(o, "attention_bias", c->attn_bias);
        cJSON_AddNumberToObject(o, "num_experts", c->n_experts);
        cJSON_AddNumberToObject(o, "moe_intermediate_size", c->moe_d_ff);
        cJSON_AddBoolToObject(o, "norm_topk_prob", c->norm_topk_prob);
        cJSON_AddNumberToObject(o, "decoder_sparse_step", c->sparse_step);
        cJSON_AddBoolToObject(o, "use_sliding_window", false);
        cJSON *only = cJSON_AddArrayToObject(o, "mlp_only_layers");
        for (int l = 0; l < c->n_layers; l++)
            if (l < c->first_k_dense || c->mlp_only[l]) cJSON_AddItemToArray(only, cJSON_CreateNumber(l));
    } else {
        cJSON_AddNumberToObject(o, "num_local_experts", c->n_experts);
        cJSON_ReplaceItemInObject(o, "intermediate_size", cJSON_CreateNumber(c->moe_d_ff)); /* (the experts') */
        cJSON_AddNullToObject(o, "sliding_window");
    }
    cJSON_AddStringToObject(o, "torch_dtype", "float32");
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

/* Qwen2MoeConfig: the body's keys (qkv_bias for the q/k/v biases), the experts' and the shared expert's
 * (first_k_dense_replace becomes mlp_only_layers) */
static char *qwen2_moe_config(const tlm_config *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("Qwen2MoeForCausalLM"));
    cJSON_AddStringToObject(o, "model_type", "qwen2_moe");
    config_json_add_sizes(o, c);
    cJSON_DeleteItemFromObject(o, "head_dim"); /* (no Qwen2MoeConfig key: hidden_size / heads) */
    cJSON_AddNumberToObject(o, "rms_norm_eps", tidy(c->norm_eps));
    add_rope(o, c);
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_embeddings);
    cJSON_AddNumberToObject(o, "initializer_range", tidy(c->init_std));
    cJSON_AddBoolToObject(o, "qkv_bias", c->attn_bias);
    cJSON_AddNumberToObject(o, "num_experts", c->n_experts);
    cJSON_AddNumberToObject(o, "num_experts_per_tok", c->n_experts_per_tok);
    cJSON_AddNumberToObject(o, "moe_intermediate_size", c->moe_d_ff);
    cJSON_AddNumberToObject(o, "shared_expert_intermediate_size", config_shared_ff(c));
    cJSON_AddBoolToObject(o, "norm_topk_prob", c->norm_topk_prob);
    cJSON_AddNumberToObject(o, "decoder_sparse_step", c->sparse_step);
    cJSON_AddBoolToObject(o, "use_sliding_window", false);
    cJSON *only = cJSON_AddArrayToObject(o, "mlp_only_layers");
    for (int l = 0; l < c->n_layers; l++)
        if (l < c->first_k_dense || c->mlp_only[l]) cJSON_AddItemToArray(only, cJSON_CreateNumber(l));
    cJSON_AddStringToObject(o, "torch_dtype", "float32");
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

/* DeepseekV3Config: the body's keys, MLA's and DeepseekV3MoE's */
static char *deepseek_config(const tlm_config *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("DeepseekV3ForCausalLM"));
    cJSON_AddStringToObject(o, "model_type", "deepseek_v3");
    config_json_add_sizes(o, c);
    cJSON_DeleteItemFromObject(o, "head_dim"); /* (DeepseekV3Config sets it to qk_rope_head_dim) */
    cJSON_AddNumberToObject(o, "rms_norm_eps", tidy(c->norm_eps));
    add_rope(o, c);
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_embeddings);
    cJSON_AddNumberToObject(o, "initializer_range", tidy(c->init_std));
    cJSON_AddBoolToObject(o, "attention_bias", false);
    if (c->q_lora_rank > 0) cJSON_AddNumberToObject(o, "q_lora_rank", c->q_lora_rank);
    else cJSON_AddNullToObject(o, "q_lora_rank");
    cJSON_AddNumberToObject(o, "kv_lora_rank", c->kv_lora_rank);
    cJSON_AddNumberToObject(o, "qk_nope_head_dim", c->qk_nope_dim);
    cJSON_AddNumberToObject(o, "qk_rope_head_dim", c->qk_rope_dim);
    cJSON_AddNumberToObject(o, "v_head_dim", c->v_head_dim);
    cJSON_AddBoolToObject(o, "rope_interleave", c->rope_interleave);
    cJSON_AddNumberToObject(o, "n_routed_experts", c->n_experts);
    cJSON_AddNumberToObject(o, "num_experts_per_tok", c->n_experts_per_tok);
    cJSON_AddNumberToObject(o, "moe_intermediate_size", c->moe_d_ff);
    cJSON_AddNumberToObject(o, "n_shared_experts", c->n_shared_experts);
    cJSON_AddNumberToObject(o, "routed_scaling_factor", tidy(c->routed_scaling_factor));
    cJSON_AddNumberToObject(o, "n_group", c->n_group);
    cJSON_AddNumberToObject(o, "topk_group", c->topk_group);
    cJSON_AddNumberToObject(o, "first_k_dense_replace", c->first_k_dense);
    cJSON_AddBoolToObject(o, "norm_topk_prob", c->norm_topk_prob);
    cJSON_AddStringToObject(o, "torch_dtype", "float32");
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

static char *gpt2_config(const tlm_config *c) {
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
    cJSON_AddStringToObject(o, "torch_dtype", "float32");
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

/* ---- tensors ------------------------------------------------------------------------------------------ */

typedef struct {
    tlm_st_entry *e;
    float **owned; /* buffers built here (transposed / fused), freed at the end */
    int n, n_owned;
} entry_list;

static float *own(entry_list *L, size_t n) {
    float *p = calloc(n ? n : 1, sizeof(float));
    if (p) L->owned[L->n_owned++] = p;
    return p;
}

static int find_entry(const entry_list *L, const char *name) {
    for (int i = 0; i < L->n; i++)
        if (!strcmp(L->e[i].name, name)) return i;
    return -1;
}

/* Adds engine tensor i under its HF name, inverting the loader's layout change. */
static int add_tensor(entry_list *L, char (*names)[160], const tlm_model *m, int i, const hf_tensor_ref *ref) {
    const tensor_info *t = &m->tensors[i];
    const float *src = model_param(m, i);
    const int rows = t->shape[0], cols = t->ndim == 2 ? t->shape[1] : 1;
    if (ref->layout == HF_COPY) {
        tlm_st_entry *e = &L->e[L->n];
        snprintf(names[L->n], 160, "%s", ref->name);
        e->name = names[L->n++];
        e->dtype = TLM_DT_F32, e->ndim = t->ndim, e->shape[0] = t->shape[0], e->shape[1] = t->shape[1];
        e->data = src;
        return 0;
    }
    if (ref->layout == HF_TRANSPOSE) {
        float *dst = own(L, (size_t)rows * cols);
        if (!dst) return tlm_error("out of memory exporting %s", ref->name);
        for (int r = 0; r < rows; r++)
            for (int k = 0; k < cols; k++) dst[(size_t)k * rows + r] = src[(size_t)r * cols + k];
        tlm_st_entry *e = &L->e[L->n];
        snprintf(names[L->n], 160, "%s", ref->name);
        e->name = names[L->n++];
        e->dtype = TLM_DT_F32, e->ndim = 2, e->shape[0] = cols, e->shape[1] = rows;
        e->data = dst;
        return 0;
    }
    /* HF_QKV_SLICE: q, k and v fill parts of one fused tensor */
    int j = find_entry(L, ref->name);
    if (j < 0) {
        size_t n = (size_t)ref->fused_cols * (t->ndim == 2 ? (size_t)cols : 1);
        float *dst = own(L, n);
        if (!dst) return tlm_error("out of memory exporting %s", ref->name);
        j = L->n++;
        snprintf(names[j], 160, "%s", ref->name);
        tlm_st_entry *e = &L->e[j];
        e->name = names[j];
        e->dtype = TLM_DT_F32, e->ndim = t->ndim;
        if (t->ndim == 2) e->shape[0] = cols, e->shape[1] = ref->fused_cols;
        else e->shape[0] = ref->fused_cols;
        e->data = dst;
    }
    float *dst = (float *)L->e[j].data;
    if (t->ndim == 2) {
        for (int r = 0; r < rows; r++)
            for (int k = 0; k < cols; k++) dst[(size_t)k * ref->fused_cols + ref->offset + r] = src[(size_t)r * cols + k];
    } else {
        memcpy(dst + ref->offset, src, (size_t)rows * sizeof(float));
    }
    return 0;
}

/* every entry's f32 values as BF16, in buffers the list owns */
static int entries_to_bf16(entry_list *L) {
    for (int i = 0; i < L->n; i++) {
        tlm_st_entry *e = &L->e[i];
        size_t n = 1;
        for (int d = 0; d < e->ndim; d++) n *= (size_t)e->shape[d];
        uint16_t *b = (uint16_t *)own(L, (n + 1) / 2);
        if (!b) return tlm_error("out of memory exporting %s as bf16", e->name);
        tlm_f32_to_bf16_array((const float *)e->data, b, n);
        e->dtype = TLM_DT_BF16, e->data = b;
    }
    return 0;
}

static int write_weights(const tlm_model *m, const char *dir, const char *family, int bf16) {
    const int style = !strcmp(family, "llama") || !strcmp(family, "qwen3_moe") || !strcmp(family, "deepseek_v3") ||
                              !strcmp(family, "mistral") || !strcmp(family, "qwen2_moe")
                          ? HF_FAMILY_LLAMA
                      : !strcmp(family, "mixtral")                            ? HF_FAMILY_MIXTRAL
                      : !strcmp(family, "gpt2")                               ? HF_FAMILY_GPT2
                                                                              : -1;
    entry_list L = {calloc((size_t)m->n_tensors, sizeof(tlm_st_entry)), calloc((size_t)m->n_tensors, sizeof(float *)), 0, 0};
    char(*names)[160] = calloc((size_t)m->n_tensors, sizeof *names);
    int rc = (!L.e || !L.owned || !names) ? tlm_error("out of memory exporting to %s", dir) : 0;
    for (int i = 0; i < m->n_tensors && !rc; i++) {
        hf_tensor_ref ref = {.layout = HF_COPY};
        if (style < 0)
            snprintf(ref.name, sizeof ref.name, "%s", m->tensors[i].name); /* engine naming */
        else
            rc = hf_map_tensor(&m->cfg, (hf_family_style)style, hf_default_prefix((hf_family_style)style),
                               m->tensors[i].name, &ref);
        if (!rc) rc = add_tensor(&L, names, m, i, &ref);
    }
    if (!rc && bf16) rc = entries_to_bf16(&L);
    if (!rc) {
        char *path = path_join(dir, "model.safetensors");
        rc = path ? tlm_st_write(path, L.e, (size_t)L.n, "{\"format\":\"pt\",\"producer\":\"" PRODUCER "\"}")
                  : tlm_error("out of memory");
        free(path);
    }
    for (int i = 0; i < L.n_owned; i++) free(L.owned[i]);
    free(L.owned), free(L.e), free(names);
    return rc;
}

static int export_dir(const tlm_model *m, const char *dir, const char **family, int bf16);
int hf_export_dir(const tlm_model *m, const char *dir, const char **family) { return export_dir(m, dir, family, 0); }
int hf_export_dir_bf16(const tlm_model *m, const char *dir, const char **family) { return export_dir(m, dir, family, 1); }

/* config.json's torch_dtype (a Hugging Face family's; the tinylm format has none) set to the weights' */
static char *with_dtype(char *json, const char *dtype) {
    cJSON *o = json ? cJSON_Parse(json) : NULL;
    if (!o || !cJSON_GetObjectItemCaseSensitive(o, "torch_dtype")) return cJSON_Delete(o), json;
    free(json);
    cJSON_ReplaceItemInObject(o, "torch_dtype", cJSON_CreateString(dtype));
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

static int export_dir(const tlm_model *m, const char *dir, const char **family, int bf16) {
    const char *why = NULL;
    const char *fam = hf_export_family(&m->cfg, &why);
    /* non-finite weights are refused before anything is written */
    for (int i = 0; i < m->n_tensors; i++)
        if (tlm_check_finite(model_param(m, i), m->tensors[i].numel, 0, dir, m->tensors[i].name) < 0)
            return tlm_error_prefix("cannot export");
    if (hf_export_check_target(dir) || make_dirs(dir)) return -1;
    /* a GPT-2 export of a model without some biases writes them as zeros */
    tlm_model *biased = NULL;
    if (!strcmp(fam, "gpt2")) {
        const tlm_config c = with_all_biases(&m->cfg);
        if (!(biased = model_create(&c))) return -1; /* (zeroed: the biases it adds stay 0) */
        for (int i = 0; i < m->n_tensors; i++) {
            const tensor_info *t = model_find_tensor(biased, m->tensors[i].name);
            memcpy(biased->param_mem + t->offset, model_param(m, i), m->tensors[i].numel * sizeof(float));
        }
        m = biased;
    }
    int written = write_weights(m, dir, fam, bf16);
    char *json = written ? NULL
                 : !strcmp(fam, "llama") ? llama_body_config(&m->cfg, 0)
                 : !strcmp(fam, "mistral") ? llama_body_config(&m->cfg, 1)
                 : !strcmp(fam, "gpt2")  ? gpt2_config(&m->cfg)
                 : !strcmp(fam, "qwen3_moe") ? moe_config(&m->cfg, 1)
                 : !strcmp(fam, "mixtral")   ? moe_config(&m->cfg, 0)
                 : !strcmp(fam, "qwen2_moe") ? qwen2_moe_config(&m->cfg)
                 : !strcmp(fam, "deepseek_v3") ? deepseek_config(&m->cfg)
                                         : config_to_json(&m->cfg);
    if (json && bf16) json = with_dtype(json, "bfloat16");
    model_free(biased);
    if (written) return -1;
    char *path = path_join(dir, "config.json");
    int rc = json && path ? tlm_write_file_atomic(path, json, strlen(json)) : tlm_error("out of memory");
    free(path), free(json);
    if (rc) return -1;
    if (family) *family = fam;
    return 0;
}
