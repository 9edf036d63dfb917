/* config.c — config.json -> tlm_config, table-driven.
 *
 * Each accepted key is one row: JSON key, kind, the field it sets. model_type "tinylm" accepts
 * the engine's own switches (docs/config.md); an unknown key is an error (a typo would silently
 * run another ablation). The checkpoint families' readers (convert/families.c) use the same
 * rows and readers (config_keys.h) from their family's fixed architecture. */
#include "config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_keys.h"
#include "util/error.h"
#include "util/finite.h"
#include "util/io.h"

/* ---- enum names (the values accepted in config.json) -------------------------------------- */

static const char *const NORM_NAMES[] = {"layernorm", "rmsnorm", "rmsnorm_1p", "dyt", NULL};
static const char *const PLACEMENT_NAMES[] = {"pre", "post", "sandwich", "output", "none", "deepnorm", NULL};
static const char *const POSITION_NAMES[] = {"rope", "learned", "none", NULL};
static const char *const QK_NORM_NAMES[] = {"none", "head", "full", NULL};
static const char *const FFN_NAMES[] = {"swiglu", "geglu", "gelu", NULL};
static const char *const SCORING_NAMES[] = {"softmax", "sigmoid", NULL};

const char *norm_type_name(norm_type t) { return NORM_NAMES[t]; }
const char *placement_name(norm_placement p) { return PLACEMENT_NAMES[p]; }
const char *position_name(position_type p) { return POSITION_NAMES[p]; }
const char *qk_norm_name(qk_norm_type q) { return QK_NORM_NAMES[q]; }
const char *ffn_name(ffn_type f) { return FFN_NAMES[f]; }
const char *scoring_name(router_scoring s) { return SCORING_NAMES[s]; }

int config_moe_layers(const tlm_config *c) {
    int n = 0;
    for (int l = 0; l < c->n_layers; l++) n += config_layer_is_moe(c, l);
    return n;
}

int config_moe_index(const tlm_config *c, int l) {
    if (!config_layer_is_moe(c, l)) return -1;
    int n = 0;
    for (int i = 0; i < l; i++) n += config_layer_is_moe(c, i);
    return n;
}

/* ---- the engine's own keys ------------------------------------------------------------------ */

#define F(field) offsetof(tlm_config, field)
static const config_key TINYLM_KEYS[] = {
    {"vocab_size", KEY_INT, F(vocab_size), NULL},
    {"hidden_size", KEY_INT, F(d_model), NULL},
    {"num_hidden_layers", KEY_INT, F(n_layers), NULL},
    {"num_attention_heads", KEY_INT, F(n_heads), NULL},
    {"num_key_value_heads", KEY_INT, F(n_kv_heads), NULL},
    {"head_dim", KEY_INT, F(head_dim), NULL},
    {"intermediate_size", KEY_INT, F(d_ff), NULL},
    {"max_position_embeddings", KEY_INT, F(max_seq), NULL},
    {"norm_type", KEY_ENUM, F(norm), NORM_NAMES},
    {"norm_eps", KEY_FLOAT, F(norm_eps), NULL},
    {"norm_bias", KEY_BOOL, F(norm_bias), NULL},
    {"dyt_alpha_init", KEY_FLOAT, F(dyt_alpha_init), NULL},
    {"dyt_alpha_init_attn", KEY_FLOAT_OR_NULL, F(dyt_alpha_init_attn), NULL},
    {"dyt_alpha_init_ffn", KEY_FLOAT_OR_NULL, F(dyt_alpha_init_ffn), NULL},
    {"dyt_alpha_init_final", KEY_FLOAT_OR_NULL, F(dyt_alpha_init_final), NULL},
    {"norm_placement", KEY_ENUM, F(placement), PLACEMENT_NAMES},
    {"deepnorm_alpha", KEY_FLOAT, F(deepnorm_alpha), NULL},
    {"deepnorm_beta", KEY_FLOAT, F(deepnorm_beta), NULL},
    {"residual", KEY_BOOL, F(residual), NULL},
    {"final_norm", KEY_BOOL, F(final_norm), NULL},
    {"position_embedding", KEY_ENUM, F(position), POSITION_NAMES},
    {"rope_theta", KEY_FLOAT, F(rope_theta), NULL},
    {"rope_local_base_freq", KEY_FLOAT, F(rope_theta_local), NULL},
    {"embedding_scale", KEY_BOOL, F(embed_scale), NULL},
    {"attention_bias", KEY_BOOL, F(attn_bias), NULL},
    {"attention_out_bias", KEY_BOOL, F(attn_out_bias), NULL},
    {"qk_norm", KEY_ENUM, F(qk_norm), QK_NORM_NAMES},
    {"query_pre_attn_scalar", KEY_FLOAT_OR_NULL, F(query_pre_attn_scalar), NULL},
    {"attn_logit_softcapping", KEY_FLOAT_OR_NULL, F(attn_softcap), NULL},
    {"sliding_window", KEY_INT_OR_NULL, F(sliding_window), NULL},
    {"layer_types", KEY_LAYER_TYPES, F(layer_sliding), NULL},
    {"rope_scaling", KEY_ROPE_SCALING, F(rope_scaling), NULL},
    {"global_head_dim", KEY_INT_OR_NULL, F(head_dim_full), NULL},
    {"num_global_key_value_heads", KEY_INT_OR_NULL, F(n_kv_heads_full), NULL},
    {"rope_proportional_fraction", KEY_FLOAT, F(rope_proportional), NULL},
    {"v_norm", KEY_BOOL, F(v_norm), NULL},
    {"attention_k_eq_v", KEY_BOOL, F(k_eq_v), NULL},
    {"num_kv_shared_layers", KEY_INT, F(n_kv_shared), NULL},
    {"hidden_size_per_layer_input", KEY_INT, F(ple_dim), NULL},
    {"layer_scalar", KEY_BOOL, F(layer_scalar), NULL},
    {"use_double_wide_mlp", KEY_BOOL, F(ffn_double_shared), NULL},
    {"q_lora_rank", KEY_INT_OR_NULL, F(q_lora_rank), NULL},
    {"kv_lora_rank", KEY_INT_OR_NULL, F(kv_lora_rank), NULL},
    {"qk_nope_head_dim", KEY_INT, F(qk_nope_dim), NULL},
    {"qk_rope_head_dim", KEY_INT, F(qk_rope_dim), NULL},
    {"v_head_dim", KEY_INT, F(v_head_dim), NULL},
    {"rope_interleave", KEY_BOOL, F(rope_interleave), NULL},
    {"ffn_type", KEY_ENUM, F(ffn), FFN_NAMES},
    {"mlp_bias", KEY_BOOL, F(mlp_bias), NULL},
    {"num_experts", KEY_INT, F(n_experts), NULL},
    {"num_experts_per_tok", KEY_INT, F(n_experts_per_tok), NULL},
    {"moe_intermediate_size", KEY_INT, F(moe_d_ff), NULL},
    {"n_shared_experts", KEY_INT_OR_NULL, F(n_shared_experts), NULL},
    {"shared_expert_intermediate_size", KEY_INT_OR_NULL, F(shared_d_ff), NULL},
    {"shared_expert_gate", KEY_BOOL, F(shared_gate), NULL},
    {"norm_topk_prob", KEY_BOOL, F(norm_topk_prob), NULL},
    {"scoring_func", KEY_ENUM, F(scoring), SCORING_NAMES},
    {"n_group", KEY_INT_OR_NULL, F(n_group), NULL},
    {"topk_group", KEY_INT_OR_NULL, F(topk_group), NULL},
    {"routed_scaling_factor", KEY_FLOAT, F(routed_scaling_factor), NULL},
    {"first_k_dense_replace", KEY_INT, F(first_k_dense), NULL},
    {"decoder_sparse_step", KEY_INT, F(sparse_step), NULL},
    {"mlp_only_layers", KEY_LAYER_LIST, F(mlp_only), NULL},
    {"enable_moe_block", KEY_BOOL, F(moe_block), NULL},
    {"tie_word_embeddings", KEY_BOOL, F(tie_embeddings), NULL},
    {"final_logit_softcapping", KEY_FLOAT_OR_NULL, F(final_softcap), NULL},
    {"initializer_range", KEY_FLOAT, F(init_std), NULL},
    {"scale_residual_init", KEY_BOOL, F(scale_residual_init), NULL},
    {"model_type", KEY_IGNORE, 0, NULL},
    {NULL, 0, 0, NULL},
};
#undef F

void config_defaults(tlm_config *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->model_type, sizeof c->model_type, "tinylm");
    c->max_seq = 1024;
    c->norm = NORM_RMSNORM;
    c->norm_eps = 1e-5f;
    c->dyt_alpha_init = 0.5f;
    c->placement = PLACE_PRE;
    c->residual = true;
    c->final_norm = true;
    c->position = POS_ROPE;
    c->rope_theta = 10000.0f;
    c->ffn = FFN_SWIGLU;
    c->tie_embeddings = true;
    c->init_std = 0.02f;
    c->scale_residual_init = true;
    c->n_group = c->topk_group = 1;
    c->routed_scaling_factor = 1.0f;
    c->sparse_step = 1;
}

/* ---- reading one key ------------------------------------------------------------------------ */

static int read_int(const cJSON *it, const char *src, const char *key, int *out) {
    if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || fabs(it->valuedouble) > 2147483647.0) {
        char *s = cJSON_PrintUnformatted(it);
        tlm_error("%s: key \"%s\" must be an integer, got %s", src, key, s ? s : "?");
        free(s);
        return -1;
    }
    *out = (int)it->valuedouble;
    return 0;
}

/* The range of a float field, whichever family's key sets it (0 in the optional ones and the
 * soft-caps means off: a null in the file). */
static tlm_float_range field_range(size_t field) {
#define IS(f) (field == offsetof(tlm_config, f))
    if (IS(norm_eps)) return TLM_FLOAT_EPS;
    if (IS(rope_theta) || IS(init_std) || IS(routed_scaling_factor)) return TLM_FLOAT_POSITIVE;
    /* (dyt_alpha_init: > 0, refused by config_validate; the DeepNorm keys: > 0, by config_parse) */
    if (IS(attn_softcap) || IS(final_softcap) || IS(rope_theta_local) || IS(query_pre_attn_scalar) ||
        IS(dyt_alpha_init) ||
        IS(dyt_alpha_init_attn) || IS(dyt_alpha_init_ffn) || IS(dyt_alpha_init_final) || IS(deepnorm_alpha) ||
        IS(deepnorm_beta) || IS(rope_proportional))
        return TLM_FLOAT_NONNEG;
#undef IS
    return TLM_FLOAT_ANY;
}

static int read_float(const cJSON *it, const char *src, const char *key, size_t field, float *out) {
    if (!cJSON_IsNumber(it)) {
        char *s = cJSON_PrintUnformatted(it);
        tlm_error("%s: key \"%s\" must be a number, got %s", src, key, s ? s : "?");
        free(s);
        return -1;
    }
    return tlm_float_from_file(it->valuedouble, field_range(field), src, key, out);
}

static int read_layer_types(const cJSON *it, const char *src, const char *key, unsigned char *out) {
    if (!cJSON_IsArray(it)) return tlm_error("%s: key \"%s\" must be a list of strings", src, key);
    int n = cJSON_GetArraySize(it);
    if (n > TLM_MAX_LAYERS) return tlm_error("%s: key \"%s\" has %d entries, at most %d supported", src, key, n, TLM_MAX_LAYERS);
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(it, i);
        const char *s = cJSON_GetStringValue(e);
        if (s && !strcmp(s, "sliding_attention"))
            out[i] = 1;
        else if (s && !strcmp(s, "full_attention"))
            out[i] = 0;
        else
            return tlm_error("%s: %s[%d] = %s: expected \"full_attention\" or \"sliding_attention\"", src, key, i,
                             s ? s : "(not a string)");
    }
    return n;
}

/* [layer, ...] as flags; returns the number of entries or -1 */
static int read_layer_list(const cJSON *it, const char *src, const char *key, unsigned char *out) {
    if (!cJSON_IsArray(it)) return tlm_error("%s: key \"%s\" must be a list of layer indices", src, key);
    memset(out, 0, TLM_MAX_LAYERS);
    int n = cJSON_GetArraySize(it);
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(it, i);
        if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 0 ||
            e->valuedouble >= TLM_MAX_LAYERS)
            return tlm_error("%s: %s[%d] must be a layer index in [0, %d)", src, key, i, TLM_MAX_LAYERS);
        out[(int)e->valuedouble] = 1;
    }
    return n;
}

/* where.key: a number, finite as a float32 and in range (finite.h) */
int config_read_number(const cJSON *o, const char *src, const char *where, const char *key, tlm_float_range range,
                       double *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(it)) return tlm_error("%s: %s.%s must be a number", src, where, key);
    char name[160];
    snprintf(name, sizeof name, "%s.%s", where, key);
    float f;
    if (tlm_float_from_file(it->valuedouble, range, src, name, &f)) return -1;
    *out = it->valuedouble;
    return 0;
}

/* Applies one rope dict ({"rope_type"|"type", "factor", ...}) as the scaling of the global RoPE
 * (`scalable`) or checks that it is the default (Gemma 3 sliding layers): the tinylm format's
 * rope_scaling key and the families' RoPE keys (convert/families.c). */
int config_read_rope_dict(tlm_config *c, const cJSON *rs, const char *src, const char *where, bool scalable) {
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rs, "rope_type"));
    if (!type) type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rs, "type"));
    if (!type) type = "default";
    if (!strcmp(type, "default")) {
        if (scalable) c->rope_scaling = ROPE_SCALING_NONE;
        return 0;
    }
    if (!scalable)
        return tlm_error("%s: %s: rope_type \"%s\" on sliding-window layers is not supported (only \"default\")",
                         src, where, type);
    double factor = 0;
    if (!strcmp(type, "linear")) {
        if (config_read_number(rs, src, where, "factor", TLM_FLOAT_FACTOR, &factor)) return -1;
        c->rope_scaling = ROPE_SCALING_LINEAR;
        c->rope_factor = (float)factor;
        return 0;
    }
    if (!strcmp(type, "llama3")) {
        double lo = 0, hi = 0, om = 0;
        if (config_read_number(rs, src, where, "factor", TLM_FLOAT_FACTOR, &factor) ||
            config_read_number(rs, src, where, "low_freq_factor", TLM_FLOAT_POSITIVE, &lo) ||
            config_read_number(rs, src, where, "high_freq_factor", TLM_FLOAT_POSITIVE, &hi) ||
            config_read_number(rs, src, where, "original_max_position_embeddings", TLM_FLOAT_ANY, &om))
            return -1;
        if (hi <= lo) return tlm_error("%s: %s.high_freq_factor must exceed low_freq_factor", src, where);
        if (om <= 0 || om != floor(om) || om > 2147483647.0)
            return tlm_error("%s: %s.original_max_position_embeddings must be a positive integer", src, where);
        c->rope_scaling = ROPE_SCALING_LLAMA3;
        c->rope_factor = (float)factor;
        c->rope_low_freq_factor = (float)lo, c->rope_high_freq_factor = (float)hi;
        c->rope_original_max_pos = (int)om;
        return 0;
    }
    if (!strcmp(type, "yarn")) { /* (YaRN, Peng et al. 2023, as modeling_rope_utils reads it; with MLA only) */
        if (config_read_number(rs, src, where, "factor", TLM_FLOAT_FACTOR, &factor)) return -1;
        c->rope_scaling = ROPE_SCALING_YARN;
        c->rope_factor = (float)factor;
        c->rope_beta_fast = 32.0f, c->rope_beta_slow = 1.0f;
        c->rope_mscale = c->rope_mscale_all_dim = c->rope_attn_factor = 0.0f;
        c->rope_original_max_pos = 0, c->rope_truncate = true;
        static const char *const opt[] = {"beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor"};
        float *dst[] = {&c->rope_beta_fast, &c->rope_beta_slow, &c->rope_mscale, &c->rope_mscale_all_dim,
                        &c->rope_attn_factor};
        for (int i = 0; i < 5; i++) {
            const cJSON *it = cJSON_GetObjectItemCaseSensitive(rs, opt[i]);
            if (!it || cJSON_IsNull(it)) continue; /* (null: the default, as `or 32` reads it) */
            double v = 0;
            if (config_read_number(rs, src, where, opt[i], TLM_FLOAT_ANY, &v)) return -1;
            if (v < 0) return tlm_error("%s: %s.%s = %g must be >= 0", src, where, opt[i], v);
            if (v > 0 || i >= 2) *dst[i] = (float)v;
        }
        const cJSON *om = cJSON_GetObjectItemCaseSensitive(rs, "original_max_position_embeddings");
        if (om && !cJSON_IsNull(om)) {
            if (!cJSON_IsNumber(om) || om->valuedouble != floor(om->valuedouble) || om->valuedouble < 1 ||
                om->valuedouble > 2147483647.0)
                return tlm_error("%s: %s.original_max_position_embeddings must be a positive integer", src, where);
            c->rope_original_max_pos = (int)om->valuedouble;
        }
        const cJSON *tr = cJSON_GetObjectItemCaseSensitive(rs, "truncate");
        if (tr && !cJSON_IsBool(tr)) return tlm_error("%s: %s.truncate must be true or false", src, where);
        if (tr) c->rope_truncate = cJSON_IsTrue(tr);
        return 0;
    }
    return tlm_error("%s: %s: rope_type \"%s\" is not supported (supported: default, linear, llama3, yarn)", src,
                     where, type);
}

int config_read_key(tlm_config *cfg, const config_key *k, const cJSON *it, const char *src) {
    void *field = (char *)cfg + k->offset;
    switch (k->kind) {
    case KEY_INT:
        return read_int(it, src, k->key, field);
    case KEY_INT_OR_NULL:
        if (cJSON_IsNull(it)) return *(int *)field = 0;
        return read_int(it, src, k->key, field);
    case KEY_FLOAT:
        return read_float(it, src, k->key, k->offset, field);
    case KEY_FLOAT_OR_NULL:
        if (cJSON_IsNull(it)) return (*(float *)field = 0.0f), 0;
        return read_float(it, src, k->key, k->offset, field);
    case KEY_BOOL:
        if (!cJSON_IsBool(it)) return tlm_error("%s: key \"%s\" must be true or false", src, k->key);
        *(bool *)field = cJSON_IsTrue(it);
        return 0;
    case KEY_ENUM: {
        const char *s = cJSON_GetStringValue(it);
        for (int i = 0; s && k->names[i]; i++)
            if (!strcmp(s, k->names[i])) return (*(int *)field = i), 0;
        char allowed[256] = "";
        for (int i = 0; k->names[i]; i++)
            snprintf(allowed + strlen(allowed), sizeof allowed - strlen(allowed), "%s\"%s\"", i ? ", " : "",
                     k->names[i]);
        char *v = cJSON_PrintUnformatted(it);
        tlm_error("%s: key \"%s\" = %s is not one of %s", src, k->key, v ? v : "?", allowed);
        free(v);
        return -1;
    }
    case KEY_LAYER_TYPES: {
        int n = read_layer_types(it, src, k->key, field);
        if (n < 0) return -1;
        cfg->n_layer_types = n;
        return 0;
    }
    case KEY_LAYER_LIST: {
        if (cJSON_IsNull(it)) return memset(field, 0, TLM_MAX_LAYERS), cfg->n_mlp_only = 0; /* (None: none) */
        int n = read_layer_list(it, src, k->key, field);
        if (n < 0) return -1;
        cfg->n_mlp_only = n;
        return 0;
    }
    case KEY_ROPE_SCALING:
        cfg->rope_scaling = ROPE_SCALING_NONE;
        if (cJSON_IsNull(it)) return 0;
        if (!cJSON_IsObject(it)) return tlm_error("%s: key \"%s\" must be an object or null", src, k->key);
        return config_read_rope_dict(cfg, it, src, k->key, true);
    case KEY_IGNORE:
        return 0;
    }
    return tlm_error("%s: key \"%s\": internal error (unknown key kind)", src, k->key);
}

const config_key *config_find_key(const config_key *table, const char *name) {
    for (const config_key *k = table; k->key; k++)
        if (!strcmp(k->key, name)) return k;
    return NULL;
}

/* Derived defaults that depend on other keys (root: the parsed file, to tell whether a key was
 * present). */
void config_finish(tlm_config *c, const cJSON *root) {
    if (!cJSON_GetObjectItemCaseSensitive(root, "num_key_value_heads") || cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(root, "num_key_value_heads"))) c->n_kv_heads = c->n_heads;
    /* head_dim defaults to hidden_size / heads only when that divides; else it must be given */
    if (!c->head_dim && c->n_heads > 0 && c->d_model % c->n_heads == 0) c->head_dim = c->d_model / c->n_heads;
    if (!cJSON_GetObjectItemCaseSensitive(root, "intermediate_size")) c->d_ff = 4 * c->d_model;
    if (!cJSON_GetObjectItemCaseSensitive(root, "final_norm") && !strcmp(c->model_type, "tinylm"))
        c->final_norm = !placement_has_post_norm(c->placement); /* (post, deepnorm: the stream is normed) */
    /* DeepNet's beta replaces GPT-2's 1/sqrt(2N) residual init */
    if (!cJSON_GetObjectItemCaseSensitive(root, "scale_residual_init") && !strcmp(c->model_type, "tinylm") &&
        c->placement == PLACE_DEEPNORM)
        c->scale_residual_init = false;
    if (!cJSON_GetObjectItemCaseSensitive(root, "attention_out_bias") && !strcmp(c->model_type, "tinylm"))
        c->attn_out_bias = c->attn_bias;
    if (!cJSON_GetObjectItemCaseSensitive(root, "moe_intermediate_size")) c->moe_d_ff = c->n_experts > 0 ? c->d_ff : 0;
    if (c->n_layer_types == 0 && c->sliding_window > 0)
        for (int l = 0; l < c->n_layers && l < TLM_MAX_LAYERS; l++) c->layer_sliding[l] = 1;
    config_mla_finish(c);
}

void config_mla_finish(tlm_config *c) {
    if (!config_mla(c)) return;
    c->head_dim = config_mla_head_dim(c); /* (the padded heads attention runs on) */
    c->n_kv_heads = c->n_heads;
}

/* MLA sizes head_dim and num_key_value_heads itself: a tinylm config that gives other values is
 * refused (a HF config's head_dim is DeepSeek's qk_rope_head_dim, read by its family) */
static int config_mla_given(const tlm_config *c, const cJSON *root, const char *src) {
    if (!config_mla(c)) return 0;
    const cJSON *hd = cJSON_GetObjectItemCaseSensitive(root, "head_dim");
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(root, "num_key_value_heads");
    if (cJSON_IsNumber(hd) && hd->valuedouble != c->head_dim)
        return tlm_error("%s: head_dim = %g with kv_lora_rank (MLA): the attention heads are max(qk_nope_head_dim + "
                         "qk_rope_head_dim, v_head_dim) = %d wide; leave head_dim out",
                         src, hd->valuedouble, c->head_dim);
    if (cJSON_IsNumber(kv) && kv->valuedouble != c->n_heads)
        return tlm_error("%s: num_key_value_heads = %g with kv_lora_rank (MLA): every head has its own k_nope and v "
                         "(num_key_value_heads = num_attention_heads = %d); leave it out",
                         src, kv->valuedouble, c->n_heads);
    return 0;
}

int config_from_json(tlm_config *cfg, const cJSON *root, const char *src) {
    config_defaults(cfg);
    for (const cJSON *it = root->child; it; it = it->next) {
        const config_key *k = config_find_key(TINYLM_KEYS, it->string);
        if (!k)
            return tlm_error("%s: unknown key \"%s\" (see docs/config.md for the keys of model_type \"tinylm\")", src,
                             it->string);
        if (config_read_key(cfg, k, it, src)) return -1;
        /* (0 in the struct means "derive from the depth": a 0 in the file is a bad value, not that) */
        if ((k->offset == offsetof(tlm_config, deepnorm_alpha) || k->offset == offsetof(tlm_config, deepnorm_beta) ||
             k->offset == offsetof(tlm_config, rope_proportional)) &&
            !(*(float *)((char *)cfg + k->offset) > 0.0f))
            return tlm_error("%s: %s = %g must be positive", src, k->key, *(float *)((char *)cfg + k->offset));
    }
    config_finish(cfg, root);
    if (config_mla_given(cfg, root, src)) return -1;
    return config_validate(cfg, src);
}

/* ---- validation ------------------------------------------------------------------------------ */

#define REQUIRE(cond, ...)                                                                                         \
    do {                                                                                                           \
        if (!(cond)) return tlm_error(__VA_ARGS__);                                                                \
    } while (0)

/* Gemma 4's switches: layer types with their own shapes, K = V, shared K/V, per-layer inputs */
static int config_validate_layer_shapes(const tlm_config *c, const char *src) {
    REQUIRE(c->head_dim_full >= 0, "%s: global_head_dim = %d must be positive", src, c->head_dim_full);
    REQUIRE(c->n_kv_heads_full >= 0, "%s: num_global_key_value_heads = %d must be positive", src, c->n_kv_heads_full);
    REQUIRE(c->n_kv_heads_full == 0 || c->n_heads % c->n_kv_heads_full == 0,
            "%s: num_global_key_value_heads = %d does not divide num_attention_heads = %d", src, c->n_kv_heads_full,
            c->n_heads);
    REQUIRE(c->position != POS_ROPE || c->head_dim_full % 2 == 0, "%s: global_head_dim = %d must be even for RoPE",
            src, c->head_dim_full);
    REQUIRE(c->rope_proportional >= 0.0f && c->rope_proportional <= 1.0f,
            "%s: rope_proportional_fraction = %g must be in (0, 1]", src, c->rope_proportional);
    REQUIRE(c->rope_proportional == 0.0f || c->position == POS_ROPE,
            "%s: rope_proportional_fraction = %g needs position_embedding \"rope\"", src, c->rope_proportional);
    /* sliding layers without a base of their own use the full layers' RoPE tables: one width */
    bool any_sliding = false;
    for (int l = 0; l < c->n_layers; l++) any_sliding |= !config_layer_full_attention(c, l);
    REQUIRE(!(c->position == POS_ROPE && any_sliding && c->rope_theta_local == 0.0f && c->head_dim_full > 0 &&
              c->head_dim_full != c->head_dim),
            "%s: global_head_dim = %d differs from head_dim = %d: the sliding layers need a RoPE base of their own "
            "(rope_local_base_freq)",
            src, c->head_dim_full, c->head_dim);
    REQUIRE(c->n_kv_shared >= 0 && c->n_kv_shared < c->n_layers,
            "%s: num_kv_shared_layers = %d must be between 0 and num_hidden_layers - 1 = %d", src, c->n_kv_shared,
            c->n_layers - 1);
    for (int l = config_first_kv_shared(c); l < c->n_layers; l++)
        REQUIRE(config_kv_source(c, l) >= 0,
                "%s: num_kv_shared_layers = %d: layer %d (%s) shares the keys and values of the last earlier layer "
                "of its type, but no layer before %d is %s",
                src, c->n_kv_shared, l, config_layer_full_attention(c, l) ? "full_attention" : "sliding_attention",
                config_first_kv_shared(c), config_layer_full_attention(c, l) ? "full_attention" : "sliding_attention");
    REQUIRE(c->ple_dim >= 0, "%s: hidden_size_per_layer_input = %d must be >= 0", src, c->ple_dim);
    return 0;
}

void config_sliding_pattern(tlm_config *c, int pattern) {
    for (int l = 0; l < c->n_layers && l < TLM_MAX_LAYERS; l++) c->layer_sliding[l] = pattern > 0 && (l + 1) % pattern != 0;
    c->n_layer_types = c->n_layers;
}

int config_kv_source(const tlm_config *c, int l) {
    const int first = config_first_kv_shared(c);
    if (l < first) return l;
    for (int j = first - 1; j >= 0; j--)
        if (config_layer_full_attention(c, j) == config_layer_full_attention(c, l)) return j;
    return -1;
}

int config_max_head_dim(const tlm_config *c) { return c->head_dim_full > c->head_dim ? c->head_dim_full : c->head_dim; }

int config_max_q_dim(const tlm_config *c) {
    int w = 0;
    for (int l = 0; l < c->n_layers; l++)
        if (c->n_heads * config_layer_head_dim(c, l) > w) w = c->n_heads * config_layer_head_dim(c, l);
    return w;
}

int config_max_kv_dim(const tlm_config *c) {
    int w = 0;
    for (int l = 0; l < c->n_layers; l++)
        if (config_layer_kv_heads(c, l) * config_layer_head_dim(c, l) > w)
            w = config_layer_kv_heads(c, l) * config_layer_head_dim(c, l);
    return w;
}

/* every float field finite, whichever reader filled it (each reader refuses what is not finite
 * as a float32 by the file's key; this names the engine's key for what reached here otherwise) */
static int config_validate_finite(const tlm_config *c, const char *src) {
#define FIN(f, name) REQUIRE(isfinite(c->f), "%s: %s = %g must be a finite number", src, name, c->f)
    FIN(norm_eps, "norm eps");
    FIN(dyt_alpha_init, "dyt_alpha_init");
    FIN(dyt_alpha_init_attn, "dyt_alpha_init_attn");
    FIN(dyt_alpha_init_ffn, "dyt_alpha_init_ffn");
    FIN(dyt_alpha_init_final, "dyt_alpha_init_final");
    FIN(deepnorm_alpha, "deepnorm_alpha");
    FIN(deepnorm_beta, "deepnorm_beta");
    FIN(rope_theta, "rope_theta");
    FIN(rope_theta_local, "rope_local_base_freq");
    FIN(rope_factor, "rope_scaling.factor");
    FIN(rope_low_freq_factor, "rope_scaling.low_freq_factor");
    FIN(rope_high_freq_factor, "rope_scaling.high_freq_factor");
    FIN(rope_beta_fast, "rope_scaling.beta_fast");
    FIN(rope_beta_slow, "rope_scaling.beta_slow");
    FIN(rope_mscale, "rope_scaling.mscale");
    FIN(rope_mscale_all_dim, "rope_scaling.mscale_all_dim");
    FIN(rope_attn_factor, "rope_scaling.attention_factor");
    FIN(query_pre_attn_scalar, "query_pre_attn_scalar");
    FIN(attn_softcap, "attn_logit_softcapping");
    FIN(rope_proportional, "rope_proportional_fraction");
    FIN(routed_scaling_factor, "routed_scaling_factor");
    FIN(final_softcap, "final_logit_softcapping");
    FIN(init_std, "initializer_range");
#undef FIN
    return 0;
}

int config_validate(const tlm_config *c, const char *src) {
    if (config_validate_finite(c, src)) return -1;
    REQUIRE(c->vocab_size > 0, "%s: vocab_size = %d must be positive", src, c->vocab_size);
    REQUIRE(c->d_model > 0, "%s: hidden_size = %d must be positive", src, c->d_model);
    REQUIRE(c->n_layers > 0, "%s: num_hidden_layers = %d must be positive", src, c->n_layers);
    REQUIRE(c->n_layers <= TLM_MAX_LAYERS, "%s: num_hidden_layers = %d: at most %d supported", src, c->n_layers,
            TLM_MAX_LAYERS);
    REQUIRE(c->n_heads > 0, "%s: num_attention_heads = %d must be positive", src, c->n_heads);
    REQUIRE(c->n_kv_heads > 0, "%s: num_key_value_heads = %d must be positive", src, c->n_kv_heads);
    REQUIRE(c->n_heads % c->n_kv_heads == 0, "%s: num_key_value_heads = %d does not divide num_attention_heads = %d",
            src, c->n_kv_heads, c->n_heads);
    REQUIRE(c->head_dim > 0, "%s: head_dim = %d must be positive (hidden_size %d / num_attention_heads %d)", src,
            c->head_dim, c->d_model, c->n_heads);
    /* the attention's widths (heads x head_dim) are ints wherever the engine lays them out: bounded
     * here so that no product of them overflows (the largest released models are near 2^14) */
    REQUIRE((int64_t)c->n_heads * config_max_head_dim(c) <= TLM_MAX_ATTN_WIDTH,
            "%s: num_attention_heads = %d x head_dim = %d is wider than the %d supported", src, c->n_heads,
            config_max_head_dim(c), TLM_MAX_ATTN_WIDTH);
    REQUIRE(c->d_ff > 0, "%s: intermediate_size = %d must be positive", src, c->d_ff);
    REQUIRE(c->max_seq > 0, "%s: max_position_embeddings = %d must be positive", src, c->max_seq);
    REQUIRE(c->norm_eps > 0.0f && c->norm_eps <= 1.0f, "%s: norm eps = %g must be in (0, 1] (an epsilon next to "
            "the variance)", src, c->norm_eps);
    REQUIRE(c->init_std > 0.0f, "%s: initializer_range = %g must be positive", src, c->init_std);
    REQUIRE(!c->norm_bias || c->norm == NORM_LAYERNORM, "%s: norm_bias = true needs norm_type \"layernorm\" (got \"%s\")",
            src, norm_type_name(c->norm));
    REQUIRE(c->dyt_alpha_init > 0.0f, "%s: dyt_alpha_init = %g must be positive", src, c->dyt_alpha_init);
    REQUIRE(c->dyt_alpha_init_attn >= 0.0f, "%s: dyt_alpha_init_attn = %g must be positive (or null)", src,
            c->dyt_alpha_init_attn);
    REQUIRE(c->dyt_alpha_init_ffn >= 0.0f, "%s: dyt_alpha_init_ffn = %g must be positive (or null)", src,
            c->dyt_alpha_init_ffn);
    REQUIRE(c->dyt_alpha_init_final >= 0.0f, "%s: dyt_alpha_init_final = %g must be positive (or null)", src,
            c->dyt_alpha_init_final);
    REQUIRE(c->norm != NORM_DYT || c->qk_norm == QK_NORM_NONE,
            "%s: qk_norm = \"%s\" with norm_type \"dyt\": QK-norm is always an RMSNorm of q and k (a bounded "
            "scale is what it is for); use qk_norm \"none\" with dyt, or another norm_type",
            src, qk_norm_name(c->qk_norm));
    REQUIRE(c->position != POS_ROPE || config_mla(c) || c->head_dim % 2 == 0, /* (MLA: qk_rope_head_dim is) */
            "%s: head_dim = %d must be even for RoPE", src, c->head_dim);
    REQUIRE(c->rope_theta > 0.0f, "%s: rope_theta = %g must be positive", src, c->rope_theta);
    REQUIRE(c->rope_theta_local >= 0.0f, "%s: rope_local_base_freq = %g must be positive", src, c->rope_theta_local);
    REQUIRE(c->query_pre_attn_scalar >= 0.0f, "%s: query_pre_attn_scalar = %g must be positive", src,
            c->query_pre_attn_scalar);
    REQUIRE(c->attn_softcap >= 0.0f, "%s: attn_logit_softcapping = %g must be >= 0", src, c->attn_softcap);
    REQUIRE(c->final_softcap >= 0.0f, "%s: final_logit_softcapping = %g must be >= 0", src, c->final_softcap);
    REQUIRE(c->sliding_window >= 0, "%s: sliding_window = %d must be >= 0", src, c->sliding_window);
    REQUIRE(c->n_layer_types == 0 || c->n_layer_types == c->n_layers,
            "%s: layer_types has %d entries but num_hidden_layers = %d", src, c->n_layer_types, c->n_layers);
    if (c->n_layer_types) {
        bool any = false;
        for (int l = 0; l < c->n_layers; l++) any |= c->layer_sliding[l];
        REQUIRE(!any || c->sliding_window > 0, "%s: layer_types has sliding_attention layers but sliding_window = %d",
                src, c->sliding_window);
    }
    REQUIRE(c->placement == PLACE_DEEPNORM || c->deepnorm_alpha == 0.0f,
            "%s: deepnorm_alpha = %g is DeepNorm's residual scale: it needs norm_placement \"deepnorm\" (got \"%s\")",
            src, c->deepnorm_alpha, placement_name(c->placement));
    REQUIRE(c->placement == PLACE_DEEPNORM || c->deepnorm_beta == 0.0f,
            "%s: deepnorm_beta = %g is DeepNorm's init gain: it needs norm_placement \"deepnorm\" (got \"%s\")", src,
            c->deepnorm_beta, placement_name(c->placement));
    REQUIRE(c->deepnorm_alpha >= 0.0f, "%s: deepnorm_alpha = %g must be positive", src, c->deepnorm_alpha);
    REQUIRE(c->deepnorm_beta >= 0.0f, "%s: deepnorm_beta = %g must be positive", src, c->deepnorm_beta);
    if (c->placement == PLACE_DEEPNORM) {
        REQUIRE(c->residual, "%s: norm_placement \"deepnorm\" scales the residual, but residual = false has none", src);
        REQUIRE(!c->scale_residual_init,
                "%s: scale_residual_init = true with norm_placement \"deepnorm\": DeepNorm's init is its own "
                "(v, o and FFN matrices * deepnorm_beta); set scale_residual_init false",
                src);
    }
    if (c->rope_scaling != ROPE_SCALING_NONE)
        REQUIRE(c->rope_factor >= 1.0f, "%s: rope_scaling.factor = %g must be >= 1 (a context extension)", src,
                c->rope_factor);
    if (c->rope_scaling == ROPE_SCALING_LLAMA3)
        REQUIRE(c->rope_low_freq_factor > 0.0f, "%s: rope_scaling.low_freq_factor = %g must be positive", src,
                c->rope_low_freq_factor);
    if (config_validate_layer_shapes(c, src)) return -1;
    if (config_validate_mla(c, src)) return -1;
    return config_validate_moe(c, src);
}

/* multi-head latent attention: its sizes, and every switch it is not defined with refused by its key */
int config_validate_mla(const tlm_config *c, const char *src) {
    REQUIRE(c->kv_lora_rank >= 0, "%s: kv_lora_rank = %d must be >= 0", src, c->kv_lora_rank);
    REQUIRE(c->q_lora_rank >= 0, "%s: q_lora_rank = %d must be >= 0 (null: a plain q projection)", src, c->q_lora_rank);
    if (!config_mla(c)) {
        REQUIRE(c->q_lora_rank == 0, "%s: q_lora_rank = %d needs kv_lora_rank > 0 (MLA)", src, c->q_lora_rank);
        REQUIRE(c->qk_nope_dim == 0, "%s: qk_nope_head_dim = %d needs kv_lora_rank > 0 (MLA)", src, c->qk_nope_dim);
        REQUIRE(c->qk_rope_dim == 0, "%s: qk_rope_head_dim = %d needs kv_lora_rank > 0 (MLA)", src, c->qk_rope_dim);
        REQUIRE(c->v_head_dim == 0, "%s: v_head_dim = %d needs kv_lora_rank > 0 (MLA)", src, c->v_head_dim);
        REQUIRE(!c->rope_interleave, "%s: rope_interleave = true needs kv_lora_rank > 0 (MLA)", src);
        REQUIRE(c->rope_scaling != ROPE_SCALING_YARN,
                "%s: rope_scaling \"yarn\" is supported with MLA (kv_lora_rank > 0) only", src);
        return 0;
    }
    REQUIRE(c->qk_rope_dim > 0 && c->qk_rope_dim % 2 == 0, "%s: qk_rope_head_dim = %d must be positive and even",
            src, c->qk_rope_dim);
    REQUIRE(c->qk_nope_dim >= 0, "%s: qk_nope_head_dim = %d must be >= 0", src, c->qk_nope_dim);
    REQUIRE(c->v_head_dim > 0, "%s: v_head_dim = %d must be positive", src, c->v_head_dim);
    REQUIRE(c->position == POS_ROPE, "%s: position_embedding = \"%s\" with kv_lora_rank (MLA): its decoupled keys "
            "k_pe need \"rope\"", src, position_name(c->position));
    REQUIRE(c->qk_norm == QK_NORM_NONE, "%s: qk_norm = \"%s\" with kv_lora_rank (MLA) is not defined (MLA's own "
            "RMSNorms are on c_q and c_kv)", src, qk_norm_name(c->qk_norm));
    REQUIRE(c->attn_softcap == 0.0f, "%s: attn_logit_softcapping = %g with kv_lora_rank (MLA) is not defined (the "
            "reference has no soft-capped MLA)", src, c->attn_softcap);
    REQUIRE(c->sliding_window == 0, "%s: sliding_window = %d with kv_lora_rank (MLA) is not supported", src,
            c->sliding_window);
    REQUIRE(c->query_pre_attn_scalar == 0.0f, "%s: query_pre_attn_scalar = %g with kv_lora_rank (MLA): the scale is "
            "(qk_nope_head_dim + qk_rope_head_dim)^-0.5", src, c->query_pre_attn_scalar);
    REQUIRE(!c->attn_bias && !c->attn_out_bias, "%s: attention_bias with kv_lora_rank (MLA) is not supported", src);
    REQUIRE(!c->v_norm, "%s: v_norm with kv_lora_rank (MLA) is not defined", src);
    REQUIRE(!c->k_eq_v, "%s: attention_k_eq_v with kv_lora_rank (MLA) is not defined", src);
    REQUIRE(c->n_kv_shared == 0, "%s: num_kv_shared_layers with kv_lora_rank (MLA) is not supported", src);
    REQUIRE(c->head_dim_full == 0 && c->n_kv_heads_full == 0,
            "%s: global_head_dim / num_global_key_value_heads with kv_lora_rank (MLA) are not supported", src);
    REQUIRE(c->rope_proportional == 0.0f, "%s: rope_proportional_fraction with kv_lora_rank (MLA) is not supported",
            src);
    REQUIRE(c->rope_theta_local == 0.0f, "%s: rope_local_base_freq with kv_lora_rank (MLA) is not supported", src);
    REQUIRE(c->placement != PLACE_DEEPNORM, "%s: norm_placement \"deepnorm\" with kv_lora_rank (MLA) is not defined "
            "(DeepNet's init scales v_proj, which MLA does not have)", src);
    REQUIRE(c->head_dim == config_mla_head_dim(c) && c->n_kv_heads == c->n_heads,
            "%s: kv_lora_rank (MLA): head_dim must be %d and num_key_value_heads %d", src, config_mla_head_dim(c),
            c->n_heads);
    REQUIRE(c->rope_scaling == ROPE_SCALING_NONE || c->rope_scaling == ROPE_SCALING_YARN,
            "%s: rope_scaling \"%s\" with kv_lora_rank (MLA) is not defined (\"yarn\" or none)", src,
            c->rope_scaling == ROPE_SCALING_LINEAR ? "linear" : "llama3");
    if (c->rope_scaling == ROPE_SCALING_YARN) {
        REQUIRE(c->rope_theta != 1.0f, "%s: rope_theta = 1 with rope_scaling \"yarn\": YaRN's correction range "
                "divides by ln(rope_theta) (NaN frequencies)", src);
        REQUIRE(c->rope_beta_fast > c->rope_beta_slow && c->rope_beta_slow > 0.0f,
                "%s: rope_scaling.beta_fast = %g must exceed beta_slow = %g > 0", src, c->rope_beta_fast,
                c->rope_beta_slow);
        REQUIRE(c->rope_mscale >= 0.0f && c->rope_mscale_all_dim >= 0.0f && c->rope_attn_factor >= 0.0f,
                "%s: rope_scaling.mscale / mscale_all_dim / attention_factor must be >= 0", src);
        REQUIRE(c->rope_original_max_pos >= 0, "%s: rope_scaling.original_max_position_embeddings must be positive",
                src);
    }
    return 0;
}

float config_yarn_mscale(float factor, float m) {
    return factor <= 1.0f ? 1.0f : (float)(0.1 * m * log((double)factor) + 1.0);
}

float config_attention_scale(const tlm_config *c, int l) {
    if (!config_mla(c))
        return 1.0f / sqrtf(c->query_pre_attn_scalar > 0.0f ? c->query_pre_attn_scalar : (float)config_layer_head_dim(c, l));
    float s = 1.0f / sqrtf((float)config_mla_qk_dim(c));
    if (c->rope_scaling == ROPE_SCALING_YARN && c->rope_mscale_all_dim > 0.0f) {
        const float m = config_yarn_mscale(c->rope_factor, c->rope_mscale_all_dim);
        s = s * m * m;
    }
    return s;
}

int config_rope_dim(const tlm_config *c) {
    if (config_mla(c)) return c->qk_rope_dim;
    return c->head_dim_full > 0 ? c->head_dim_full : c->head_dim;
}

/* the mixture-of-experts keys: each combination the engine (and its reference) does not define
 * is refused naming the key */
int config_validate_moe(const tlm_config *c, const char *src) {
    REQUIRE(c->n_experts >= 0 && c->n_experts <= TLM_MAX_EXPERTS, "%s: num_experts = %d: between 0 and %d supported",
            src, c->n_experts, TLM_MAX_EXPERTS);
    REQUIRE(c->first_k_dense >= 0, "%s: first_k_dense_replace = %d must be >= 0", src, c->first_k_dense);
    REQUIRE(c->sparse_step >= 1, "%s: decoder_sparse_step = %d must be >= 1", src, c->sparse_step);
    for (int l = c->n_layers; l < TLM_MAX_LAYERS; l++)
        REQUIRE(!c->mlp_only[l], "%s: mlp_only_layers lists layer %d, but num_hidden_layers = %d", src, l, c->n_layers);
    if (c->n_experts == 0) { /* a dense model: no MoE key may say otherwise */
        REQUIRE(c->n_experts_per_tok == 0, "%s: num_experts_per_tok = %d needs num_experts > 0", src,
                c->n_experts_per_tok);
        REQUIRE(c->n_shared_experts == 0, "%s: n_shared_experts = %d needs num_experts > 0", src, c->n_shared_experts);
        REQUIRE(c->shared_d_ff == 0 && !c->shared_gate,
                "%s: shared_expert_intermediate_size / shared_expert_gate need num_experts > 0", src);
        REQUIRE(c->scoring == SCORING_SOFTMAX, "%s: scoring_func = \"%s\" needs num_experts > 0", src,
                scoring_name(c->scoring));
        REQUIRE(c->n_group <= 1 && c->topk_group <= 1, "%s: n_group / topk_group need num_experts > 0", src);
        REQUIRE(!c->moe_block, "%s: enable_moe_block = true needs num_experts > 0", src);
        return 0;
    }
    const int E = c->n_experts, k = c->n_experts_per_tok;
    REQUIRE(k >= 1 && k <= E, "%s: num_experts_per_tok = %d must be between 1 and num_experts = %d", src, k, E);
    REQUIRE(c->moe_d_ff > 0, "%s: moe_intermediate_size = %d must be positive", src, c->moe_d_ff);
    REQUIRE(c->n_shared_experts >= 0 && c->n_shared_experts <= 64, "%s: n_shared_experts = %d: between 0 and 64",
            src, c->n_shared_experts);
    REQUIRE(c->shared_d_ff >= 0 && c->shared_d_ff <= (1 << 20),
            "%s: shared_expert_intermediate_size = %d: between 0 and 1048576", src, c->shared_d_ff);
    REQUIRE(c->shared_d_ff == 0 || c->n_shared_experts >= 1,
            "%s: shared_expert_intermediate_size = %d needs a shared expert (n_shared_experts >= 1)", src,
            c->shared_d_ff);
    REQUIRE(!c->shared_gate || c->n_shared_experts >= 1,
            "%s: shared_expert_gate = true needs a shared expert (n_shared_experts >= 1)", src);
    REQUIRE(c->ffn != FFN_GELU,
            "%s: ffn_type = \"gelu\" with num_experts > 0: the experts are gated MLPs (use \"swiglu\" or \"geglu\")",
            src);
    REQUIRE(!c->mlp_bias, "%s: mlp_bias = true with num_experts > 0: the experts and the router have no biases", src);
    REQUIRE(c->routed_scaling_factor > 0.0f, "%s: routed_scaling_factor = %g must be positive", src,
            c->routed_scaling_factor);
    REQUIRE(c->n_group >= 1, "%s: n_group = %d must be >= 1", src, c->n_group);
    REQUIRE(c->topk_group >= 1 && c->topk_group <= c->n_group, "%s: topk_group = %d must be between 1 and n_group = %d",
            src, c->topk_group, c->n_group);
    if (c->n_group > 1) {
        REQUIRE(c->scoring == SCORING_SIGMOID,
                "%s: n_group = %d: group-limited top-k is DeepSeek-V3's routing, defined here with scoring_func "
                "\"sigmoid\" only (got \"%s\")",
                src, c->n_group, scoring_name(c->scoring));
        REQUIRE(E % c->n_group == 0, "%s: n_group = %d does not divide num_experts = %d", src, c->n_group, E);
        REQUIRE(E / c->n_group >= 2, "%s: n_group = %d leaves groups of %d expert: a group's score is the sum of its "
                "best two", src, c->n_group, E / c->n_group);
        REQUIRE(c->topk_group * (E / c->n_group) >= k,
                "%s: topk_group = %d groups of %d experts hold fewer than num_experts_per_tok = %d", src,
                c->topk_group, E / c->n_group, k);
    }
    if (c->moe_block) { /* Gemma 4's block: what its router and its sums are (Gemma4TextRouter, DecoderLayer) */
        REQUIRE(c->placement == PLACE_SANDWICH,
                "%s: enable_moe_block = true needs norm_placement \"sandwich\" (the dense and expert outputs are "
                "each normed, summed, and normed again by the FFN's output norm; got \"%s\")",
                src, placement_name(c->placement));
        REQUIRE(c->scoring == SCORING_SOFTMAX, "%s: enable_moe_block = true routes by softmax (scoring_func \"%s\")",
                src, scoring_name(c->scoring));
        REQUIRE(c->norm_topk_prob, "%s: enable_moe_block = true renormalises the chosen weights (norm_topk_prob false)",
                src);
        REQUIRE(c->n_shared_experts == 0, "%s: enable_moe_block = true has no shared experts (n_shared_experts = %d)",
                src, c->n_shared_experts);
        REQUIRE(c->routed_scaling_factor == 1.0f,
                "%s: enable_moe_block = true scales by each expert's learned scale, not routed_scaling_factor = %g",
                src, c->routed_scaling_factor);
    }
    return 0;
}

float config_deepnorm_alpha(const tlm_config *c) {
    if (c->placement != PLACE_DEEPNORM) return 1.0f;
    return c->deepnorm_alpha > 0.0f ? c->deepnorm_alpha : (float)pow(2.0 * c->n_layers, 0.25);
}

float config_deepnorm_beta(const tlm_config *c) {
    if (c->placement != PLACE_DEEPNORM) return 1.0f;
    return c->deepnorm_beta > 0.0f ? c->deepnorm_beta : (float)pow(8.0 * c->n_layers, -0.25);
}

/* ---- writing ---------------------------------------------------------------------------------- */

static double exact(float x) { return (double)x; }

void config_json_add_rope_scaling(cJSON *o, const tlm_config *c, double (*tidy)(float)) {
    if (!tidy) tidy = exact;
    if (c->rope_scaling == ROPE_SCALING_NONE) {
        cJSON_AddNullToObject(o, "rope_scaling");
        return;
    }
    cJSON *rs = cJSON_AddObjectToObject(o, "rope_scaling");
    cJSON_AddStringToObject(rs, "rope_type", c->rope_scaling == ROPE_SCALING_LINEAR   ? "linear"
                                             : c->rope_scaling == ROPE_SCALING_LLAMA3 ? "llama3"
                                                                                      : "yarn");
    cJSON_AddNumberToObject(rs, "factor", tidy(c->rope_factor));
    if (c->rope_scaling == ROPE_SCALING_YARN) {
        cJSON_AddNumberToObject(rs, "beta_fast", tidy(c->rope_beta_fast));
        cJSON_AddNumberToObject(rs, "beta_slow", tidy(c->rope_beta_slow));
        if (c->rope_mscale > 0.0f) cJSON_AddNumberToObject(rs, "mscale", tidy(c->rope_mscale));
        if (c->rope_mscale_all_dim > 0.0f) cJSON_AddNumberToObject(rs, "mscale_all_dim", tidy(c->rope_mscale_all_dim));
        if (c->rope_attn_factor > 0.0f) cJSON_AddNumberToObject(rs, "attention_factor", tidy(c->rope_attn_factor));
        if (c->rope_original_max_pos > 0)
            cJSON_AddNumberToObject(rs, "original_max_position_embeddings", c->rope_original_max_pos);
        cJSON_AddBoolToObject(rs, "truncate", c->rope_truncate);
    }
    if (c->rope_scaling == ROPE_SCALING_LLAMA3) {
        cJSON_AddNumberToObject(rs, "low_freq_factor", tidy(c->rope_low_freq_factor));
        cJSON_AddNumberToObject(rs, "high_freq_factor", tidy(c->rope_high_freq_factor));
        cJSON_AddNumberToObject(rs, "original_max_position_embeddings", c->rope_original_max_pos);
    }
}

/* multi-head latent attention's keys, as DeepseekV3Config names them (the engine's format uses the same) */
void config_json_add_mla(cJSON *o, const tlm_config *c) {
    if (c->q_lora_rank > 0) cJSON_AddNumberToObject(o, "q_lora_rank", c->q_lora_rank);
    else cJSON_AddNullToObject(o, "q_lora_rank");
    cJSON_AddNumberToObject(o, "kv_lora_rank", c->kv_lora_rank);
    cJSON_AddNumberToObject(o, "qk_nope_head_dim", c->qk_nope_dim);
    cJSON_AddNumberToObject(o, "qk_rope_head_dim", c->qk_rope_dim);
    cJSON_AddNumberToObject(o, "v_head_dim", c->v_head_dim);
    cJSON_AddBoolToObject(o, "rope_interleave", c->rope_interleave);
}

void config_json_add_sizes(cJSON *o, const tlm_config *c) {
    cJSON_AddNumberToObject(o, "vocab_size", c->vocab_size);
    cJSON_AddNumberToObject(o, "hidden_size", c->d_model);
    cJSON_AddNumberToObject(o, "num_hidden_layers", c->n_layers);
    cJSON_AddNumberToObject(o, "num_attention_heads", c->n_heads);
    cJSON_AddNumberToObject(o, "num_key_value_heads", c->n_kv_heads);
    cJSON_AddNumberToObject(o, "head_dim", c->head_dim);
    cJSON_AddNumberToObject(o, "intermediate_size", c->d_ff);
    cJSON_AddNumberToObject(o, "max_position_embeddings", c->max_seq);
}

char *config_to_json(const tlm_config *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model_type", "tinylm");
    config_json_add_sizes(o, c);
    cJSON_AddStringToObject(o, "norm_type", norm_type_name(c->norm));
    cJSON_AddNumberToObject(o, "norm_eps", c->norm_eps);
    cJSON_AddBoolToObject(o, "norm_bias", c->norm_bias);
    cJSON_AddNumberToObject(o, "dyt_alpha_init", c->dyt_alpha_init);
    /* (only when given: absent ones follow dyt_alpha_init) */
    if (c->dyt_alpha_init_attn > 0.0f) cJSON_AddNumberToObject(o, "dyt_alpha_init_attn", c->dyt_alpha_init_attn);
    if (c->dyt_alpha_init_ffn > 0.0f) cJSON_AddNumberToObject(o, "dyt_alpha_init_ffn", c->dyt_alpha_init_ffn);
    if (c->dyt_alpha_init_final > 0.0f) cJSON_AddNumberToObject(o, "dyt_alpha_init_final", c->dyt_alpha_init_final);
    cJSON_AddStringToObject(o, "norm_placement", placement_name(c->placement));
    /* (only when given: derived ones stay derived, so the file says the same as the one read) */
    if (c->deepnorm_alpha > 0.0f) cJSON_AddNumberToObject(o, "deepnorm_alpha", c->deepnorm_alpha);
    if (c->deepnorm_beta > 0.0f) cJSON_AddNumberToObject(o, "deepnorm_beta", c->deepnorm_beta);
    cJSON_AddBoolToObject(o, "residual", c->residual);
    cJSON_AddBoolToObject(o, "final_norm", c->final_norm);
    cJSON_AddStringToObject(o, "position_embedding", position_name(c->position));
    cJSON_AddNumberToObject(o, "rope_theta", c->rope_theta);
    if (c->rope_theta_local > 0.0f) cJSON_AddNumberToObject(o, "rope_local_base_freq", c->rope_theta_local);
    config_json_add_rope_scaling(o, c, NULL);
    cJSON_AddBoolToObject(o, "embedding_scale", c->embed_scale);
    cJSON_AddBoolToObject(o, "attention_bias", c->attn_bias);
    cJSON_AddBoolToObject(o, "attention_out_bias", c->attn_out_bias);
    cJSON_AddStringToObject(o, "qk_norm", qk_norm_name(c->qk_norm));
    if (c->query_pre_attn_scalar > 0.0f) cJSON_AddNumberToObject(o, "query_pre_attn_scalar", c->query_pre_attn_scalar);
    cJSON_AddNumberToObject(o, "attn_logit_softcapping", c->attn_softcap);
    cJSON_AddNumberToObject(o, "sliding_window", c->sliding_window);
    if (c->sliding_window > 0 || c->n_layer_types > 0) {
        cJSON *lt = cJSON_AddArrayToObject(o, "layer_types");
        for (int l = 0; l < c->n_layers; l++)
            cJSON_AddItemToArray(lt, cJSON_CreateString(c->layer_sliding[l] ? "sliding_attention" : "full_attention"));
    }
    /* (Gemma 4's switches: written when on, so an older reader of the file sees no new keys) */
    if (c->head_dim_full > 0) cJSON_AddNumberToObject(o, "global_head_dim", c->head_dim_full);
    if (c->n_kv_heads_full > 0) cJSON_AddNumberToObject(o, "num_global_key_value_heads", c->n_kv_heads_full);
    if (c->rope_proportional > 0.0f) cJSON_AddNumberToObject(o, "rope_proportional_fraction", c->rope_proportional);
    if (c->v_norm) cJSON_AddBoolToObject(o, "v_norm", true);
    if (c->k_eq_v) cJSON_AddBoolToObject(o, "attention_k_eq_v", true);
    if (c->n_kv_shared) cJSON_AddNumberToObject(o, "num_kv_shared_layers", c->n_kv_shared);
    if (c->ple_dim) cJSON_AddNumberToObject(o, "hidden_size_per_layer_input", c->ple_dim);
    if (c->layer_scalar) cJSON_AddBoolToObject(o, "layer_scalar", true);
    if (c->ffn_double_shared) cJSON_AddBoolToObject(o, "use_double_wide_mlp", true);
    if (config_mla(c)) config_json_add_mla(o, c);
    cJSON_AddStringToObject(o, "ffn_type", ffn_name(c->ffn));
    cJSON_AddBoolToObject(o, "mlp_bias", c->mlp_bias);
    if (c->n_experts > 0) {
        cJSON_AddNumberToObject(o, "num_experts", c->n_experts);
        cJSON_AddNumberToObject(o, "num_experts_per_tok", c->n_experts_per_tok);
        cJSON_AddNumberToObject(o, "moe_intermediate_size", c->moe_d_ff);
        cJSON_AddNumberToObject(o, "n_shared_experts", c->n_shared_experts);
        if (c->shared_d_ff > 0) cJSON_AddNumberToObject(o, "shared_expert_intermediate_size", c->shared_d_ff);
        if (c->shared_gate) cJSON_AddBoolToObject(o, "shared_expert_gate", true);
        cJSON_AddBoolToObject(o, "norm_topk_prob", c->norm_topk_prob);
        cJSON_AddStringToObject(o, "scoring_func", scoring_name(c->scoring));
        cJSON_AddNumberToObject(o, "n_group", c->n_group);
        cJSON_AddNumberToObject(o, "topk_group", c->topk_group);
        cJSON_AddNumberToObject(o, "routed_scaling_factor", c->routed_scaling_factor);
        cJSON_AddNumberToObject(o, "first_k_dense_replace", c->first_k_dense);
        cJSON_AddNumberToObject(o, "decoder_sparse_step", c->sparse_step);
        cJSON *ml = cJSON_AddArrayToObject(o, "mlp_only_layers");
        for (int l = 0; l < c->n_layers; l++)
            if (c->mlp_only[l]) cJSON_AddItemToArray(ml, cJSON_CreateNumber(l));
        if (c->moe_block) cJSON_AddBoolToObject(o, "enable_moe_block", true);
    }
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_embeddings);
    cJSON_AddNumberToObject(o, "final_logit_softcapping", c->final_softcap);
    cJSON_AddNumberToObject(o, "initializer_range", c->init_std);
    cJSON_AddBoolToObject(o, "scale_residual_init", c->scale_residual_init);
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}
