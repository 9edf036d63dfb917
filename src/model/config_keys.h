/* config_keys.h — the table machinery of the engine's config reader (config.c), which the
 * checkpoint families' readers (convert/families.c) use too. */
#ifndef TLM_CONFIG_KEYS_H
#define TLM_CONFIG_KEYS_H

#include <cjson/cJSON.h>

#include "config.h"
#include "util/finite.h"

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
/* multi-head latent attention's keys (DeepseekV3Config's names) */
void config_json_add_mla(cJSON *o, const tlm_config *c);

/* The engine's own config.json (model_type "tinylm", docs/config.md), parsed, into cfg, validated.
 * 0, or -1 + tlm_error naming `src` and the key. */
int config_from_json(tlm_config *cfg, const cJSON *root, const char *src);

/* where.key of object o: a number, finite as a float32 and in range (finite.h) */
int config_read_number(const cJSON *o, const char *src, const char *where, const char *key, tlm_float_range range,
                       double *out);
/* One RoPE dict ({"rope_type", "factor", ...}) into cfg's rope_scaling fields (`scalable`), or a
 * check that it is the default. `where` names the key in messages. */
int config_read_rope_dict(tlm_config *cfg, const cJSON *rs, const char *src, const char *where, bool scalable);
/* Adds "rope_scaling": null or the dict config_read_rope_dict reads back, values exact (`tidy`:
 * each float as the shortest decimal that reads back as the same float). */
void config_json_add_rope_scaling(cJSON *o, const tlm_config *c, double (*tidy)(float));

#endif
