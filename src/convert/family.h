/* family.h — reading a config.json of any checkpoint family: model_type "tinylm" (the engine's own
 * format, model/config.c) or a Hugging Face family (families.c), each validated as an engine config. */
#ifndef TLM_FAMILY_H
#define TLM_FAMILY_H

#include "model/config.h"

/* Parses a config.json (model_type "tinylm", or a Hugging Face family) and validates it.
 * `source` names the file in error messages. Returns 0, or -1 with tlm_last_error() set. */
int config_parse(tlm_config *cfg, const char *json_text, const char *source);
int config_load(tlm_config *cfg, const char *path);

/* The keys of a Hugging Face config that its family's reader did not use (each is also warned
 * about on stderr). config_collect_unknown(&keys) before a config_parse / config_load makes it
 * list them there; config_collect_unknown(NULL) stops. (Not thread-safe: for the CLI.) */
#define CONFIG_MAX_UNKNOWN 64
typedef struct {
    int n;        /* keys listed */
    int n_missed; /* more keys than fit */
    char keys[CONFIG_MAX_UNKNOWN][64];
} config_unknown_keys;
void config_collect_unknown(config_unknown_keys *sink);

#endif
