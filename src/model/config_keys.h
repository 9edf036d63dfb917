/* config_keys.h — the table machinery shared by the tinylm config reader (config.c) and the
 * Hugging Face family readers (hf_families.c). Internal to src/model. */
#ifndef TLM_CONFIG_KEYS_H
#define TLM_CONFIG_KEYS_H

#include <cjson/cJSON.h>

#include "config.h"

typedef enum {
    KEY_INT,
    KEY_INT_OR_NULL,
    KEY_FLOAT,
    KEY_FLOAT_OR_NULL,
    KEY_BOOL,
    KEY_ENUM,        /* a string from `names`, stored as its index */
    KEY_LAYER_TYPES, /* ["full_attention" | "sliding_attention", ...] */
    KEY_ROPE_SCALING, /* null or {"rope_type": "linear" | "llama3", "factor", ...} as Hugging Face writes it */
    KEY_LAYER_LIST,  /* [layer indices] as flags in an unsigned char [TLM_MAX_LAYERS] (mlp_only_layers) */
    KEY_IGNORE,      /* known, does not change the numbers */
} key_kind;

typedef struct {
    const char *key;
    key_kind kind;
    size_t offset; /* offsetof(tlm_config, field) */
    const char *const *names;
} config_key;

int config_read_key(tlm_config *cfg, const config_key *k, const cJSON *it, const char *src);
const config_key *config_find_key(const config_key *table, const char *name);
void config_finish(tlm_config *cfg, const cJSON *root);
/* The size keys shared by tinylm and Llama-style configs (vocab_size ... max_position_embeddings). */
void config_json_add_sizes(cJSON *o, const tlm_config *c);

/* One RoPE dict ({"rope_type", "factor", ...}) into cfg's rope_scaling fields (`scalable`), or a
 * check that it is the default. `where` names the key in messages. hf_families.c. */
int config_read_rope_dict(tlm_config *cfg, const cJSON *rs, const char *src, const char *where, bool scalable);
/* Adds "rope_scaling": null or the dict config_read_rope_dict reads back, values exact (`tidy`:
 * each float as the shortest decimal that reads back as the same float). */
void config_json_add_rope_scaling(cJSON *o, const tlm_config *c, double (*tidy)(float));

/* Reads a Hugging Face family's config (model_type `mt`). hf_families.c. */
int hf_config_parse(tlm_config *cfg, const cJSON *root, const char *mt, const char *src);

#endif
