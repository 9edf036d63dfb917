/* hf_families.c — reading Hugging Face config.json files as engine configs.
 *
 * A family is data: its fixed architecture (what its modeling_*.py hard-codes), the config
 * keys that change the numbers, the bookkeeping keys that do not, and a check for the keys
 * that need more than a copy (rope_scaling, hidden_act). Decisions are documented in
 * docs/hf-families.md. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "config_keys.h"
#include "util/error.h"

#define F(field) offsetof(tlm_config, field)

/* keys every supported family reads the same way */
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
    {"tie_word_embeddings", KEY_BOOL, F(tie_embeddings), NULL},
    {"initializer_range", KEY_FLOAT, F(init_std), NULL},
    {NULL, 0, 0, NULL},
};

/* keys that never change the logits */
static const char *const HF_IGNORED[] = {
    "model_type", "architectures", "bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype",
    "transformers_version", "use_cache", "_name_or_path", "attention_dropout", "hidden_dropout",
    "output_attentions", "output_hidden_states", "return_dict", "dtype", "auto_map", "max_window_layers",
    "use_sliding_window", "use_return_dict", "tokenizer_class", "unsloth_fixed", NULL,
};

static void arch_llama(tlm_config *c) {
    c->norm = NORM_RMSNORM;
    c->placement = PLACE_PRE;
    c->position = POS_ROPE;
    c->ffn = FFN_SWIGLU;
    c->norm_eps = 1e-6f;
    c->tie_embeddings = false;
}

static const config_key LLAMA_KEYS[] = {
    {"rms_norm_eps", KEY_FLOAT, F(norm_eps), NULL},
    {"attention_bias", KEY_BOOL, F(attn_bias), NULL},
    {"mlp_bias", KEY_BOOL, F(mlp_bias), NULL},
    {NULL, 0, 0, NULL},
};

static int check_hidden_act(const cJSON *root, const char *src, const char *expect) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    if (!it) it = cJSON_GetObjectItemCaseSensitive(root, "hidden_activation");
    if (!it) return 0;
    const char *s = cJSON_GetStringValue(it);
    if (!s || strcmp(s, expect) != 0)
        return tlm_error("%s: hidden_act = \"%s\" is not supported for this family (only \"%s\")", src,
                         s ? s : "(not a string)", expect);
    return 0;
}

static int read_rope_scaling(tlm_config *c, const cJSON *root, const char *src) {
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (!rs || cJSON_IsNull(rs)) return 0;
    if (!cJSON_IsObject(rs)) return tlm_error("%s: rope_scaling must be an object or null", src);
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rs, "rope_type"));
    if (!type) type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rs, "type"));
    if (!type) return tlm_error("%s: rope_scaling has no \"rope_type\"", src);
    const cJSON *factor = cJSON_GetObjectItemCaseSensitive(rs, "factor");
    if (!strcmp(type, "default")) return 0;
    if (!cJSON_IsNumber(factor)) return tlm_error("%s: rope_scaling.factor must be a number", src);
    c->rope_factor = (float)factor->valuedouble;
    if (!strcmp(type, "linear")) {
        c->rope_scaling = ROPE_SCALING_LINEAR;
        return 0;
    }
    if (!strcmp(type, "llama3")) {
        const cJSON *lo = cJSON_GetObjectItemCaseSensitive(rs, "low_freq_factor");
        const cJSON *hi = cJSON_GetObjectItemCaseSensitive(rs, "high_freq_factor");
        const cJSON *om = cJSON_GetObjectItemCaseSensitive(rs, "original_max_position_embeddings");
        if (!cJSON_IsNumber(lo) || !cJSON_IsNumber(hi) || !cJSON_IsNumber(om))
            return tlm_error("%s: rope_scaling of type llama3 needs low_freq_factor, high_freq_factor and "
                             "original_max_position_embeddings",
                             src);
        c->rope_scaling = ROPE_SCALING_LLAMA3;
        c->rope_low_freq_factor = (float)lo->valuedouble;
        c->rope_high_freq_factor = (float)hi->valuedouble;
        c->rope_original_max_pos = (int)om->valuedouble;
        if (c->rope_high_freq_factor <= c->rope_low_freq_factor)
            return tlm_error("%s: rope_scaling.high_freq_factor must exceed low_freq_factor", src);
        return 0;
    }
    return tlm_error("%s: rope_scaling type \"%s\" is not supported (supported: linear, llama3)", src, type);
}

static int check_llama(tlm_config *c, const cJSON *root, const char *src) {
    c->attn_out_bias = c->attn_bias; /* LlamaAttention: attention_bias applies to q, k, v and o */
    const cJSON *tp = cJSON_GetObjectItemCaseSensitive(root, "pretraining_tp");
    if (tp && !(cJSON_IsNumber(tp) && tp->valuedouble == 1.0))
        return tlm_error("%s: pretraining_tp other than 1 is not supported", src);
    if (check_hidden_act(root, src, "silu")) return -1;
    return read_rope_scaling(c, root, src);
}

typedef struct {
    const char *model_type;
    void (*arch)(tlm_config *c);
    const config_key *keys;
    int (*check)(tlm_config *c, const cJSON *root, const char *src);
    const char *const *extra_ignored; /* keys known to this family, read by `check` */
} hf_family;

static const char *const LLAMA_EXTRA[] = {"hidden_act", "pretraining_tp", "rope_scaling", NULL};

static const hf_family FAMILIES[] = {
    {"llama", arch_llama, LLAMA_KEYS, check_llama, LLAMA_EXTRA},
};

static int in_list(const char *const *list, const char *s) {
    for (int i = 0; list && list[i]; i++)
        if (!strcmp(list[i], s)) return 1;
    return 0;
}

int hf_config_parse(tlm_config *cfg, const cJSON *root, const char *mt, const char *src) {
    const hf_family *fam = NULL;
    for (size_t i = 0; i < sizeof FAMILIES / sizeof FAMILIES[0]; i++)
        if (!strcmp(FAMILIES[i].model_type, mt)) fam = &FAMILIES[i];
    if (!fam) {
        char names[256] = "";
        for (size_t i = 0; i < sizeof FAMILIES / sizeof FAMILIES[0]; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", FAMILIES[i].model_type);
        return tlm_error("%s: model_type \"%s\" is not supported (supported: tinylm, %s)", src, mt, names);
    }
    config_defaults(cfg);
    fam->arch(cfg);
    snprintf(cfg->model_type, sizeof cfg->model_type, "%s", mt);
    for (const cJSON *it = root->child; it; it = it->next) {
        const config_key *k = config_find_key(HF_COMMON_KEYS, it->string);
        if (!k) k = config_find_key(fam->keys, it->string);
        if (k) {
            if (config_read_key(cfg, k, it, src)) return -1;
        } else if (!in_list(HF_IGNORED, it->string) && !in_list(fam->extra_ignored, it->string)) {
            fprintf(stderr, "tinylm: warning: %s: key \"%s\" is not used by the %s reader\n", src, it->string, mt);
        }
    }
    config_finish(cfg, root);
    if (fam->check(cfg, root, src)) return -1;
    return config_validate(cfg, src);
}
