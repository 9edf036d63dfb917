/* family.h — the checkpoint families, one table entry each (families.c): everything the formats
 * know of a family in one place, as llama.cpp keeps one table per architecture for its names and
 * keys. An entry holds
 *   - its Hugging Face config.json reader: the fixed architecture and class defaults (arch), the
 *     keys that change the numbers (common + keys), the check of the keys that need more than a
 *     copy (check), the keys known not to matter (extra_known); a multimodal wrapper's model_type
 *     read through it (wrapper);
 *   - its tensor names: the naming style of hf_map.c (loader and exporter alike);
 *   - its GGUF architecture: general.architecture, what llama.cpp's converter fixes and changes,
 *     and the metadata keys of its own (gguf_load.c reads the common ones);
 *   - its export: the blocker (NULL when the family expresses a config exactly) and the config.json
 *     writer (family_export.c; hf_export.c writes the directory).
 * A new family is one entry (and the functions it names) plus its tests; docs/architecture.md.
 * model_type "tinylm", the engine's own format, is no entry: model/config.c reads and writes it.
 *
 * And reading a config.json of any family: config_parse / config_load. */
#ifndef TLM_FAMILY_H
#define TLM_FAMILY_H

#include <stdbool.h>

#include "hf_map.h"
#include "model/config.h"
#include "model/config_keys.h"
#include "util/finite.h"

/* A GGUF architecture (gguf_load.c reads the metadata keys every architecture has, "{arch}.block_count", ...,
 * then these) */
typedef struct {
    const char *arch;       /* general.architecture */
    const char *model_type; /* the engine config's model_type for it */
    bool interleaved_qk;    /* q, k rows stored in rope mode 0's interleaved pairs (undone on load) */
    /* what the architecture fixes (Gemma's gains are stored as 1 + w: plain-weight RMSNorm on the stored value) */
    void (*shape)(tlm_config *c);
    int sliding_pattern; /* "{arch}.attention.sliding_window" on the sliding layers of this pattern
                            (config_sliding_pattern); 0: no window */
    struct {
        const char *suffix; /* "{arch}.suffix", optional, >= 0 */
        size_t field;       /* offsetof(tlm_config, the float it sets) */
    } floats[3];            /* its own float keys ({NULL}-ended) */
    int wide_scale_layers;  /* the block_count at which llama.cpp scales q by (d / H)^-0.5 rather than
                               head_dim^-0.5 (Gemma 2 / 3 27B: 46 / 62 layers; it tells the model by its
                               depth); 0: never */
    /* export (family_export.c; NULL: tinylm does not write it): the first feature of a config this
     * architecture of llama.cpp's does not compute as the engine does, or NULL when it computes it exactly */
    const char *(*export_blocker)(const tlm_config *c);
} gguf_family;

typedef struct {
    const char *model_type; /* config.json's model_type: the table's key */
    const char *wrapper;    /* a multimodal checkpoint's model_type whose text model this family is, or NULL */
    /* config.json (NULL arch: no config.json of its own, as llama2.c's) */
    void (*arch)(tlm_config *c);
    const config_key *common, *keys; /* common: the keys every RoPE family reads alike, or NULL */
    int (*check)(tlm_config *c, const cJSON *root, const char *src);
    const char *const *extra_known; /* keys read by `check`, or known not to change the numbers */
    bool strict;                    /* a key it does not know is an error naming it (else a warning) */
    int (*wrapper_parse)(tlm_config *c, const cJSON *root, const char *src); /* `wrapper`'s config.json */
    /* the wrapper's checkpoints: the text model's tensor prefixes (the first whose embedding is in the
     * file, else the last), the other towers' prefixes (their tensors skipped) and what the note calls them */
    const char *const *wrapper_prefixes, *const *wrapper_towers;
    const char *wrapper_towers_are;
    /* tensor names */
    hf_family_style names;
    /* GGUF (NULL: llama.cpp has no architecture of it that tinylm reads) */
    const gguf_family *gguf;
    /* why `export --format gguf` writes no model of this family (NULL: its own architecture's, or another
     * family's that computes it, writes it: gguf_export_family) */
    const char *gguf_refused;
    /* export (NULL: not written): NULL when the family expresses c exactly, else the first feature that
     * rules it out; the config.json (malloc'd); its files hold every bias (a model without some is written
     * with them zero: GPT-2) */
    const char *(*export_blocker)(const tlm_config *c);
    char *(*export_config)(const tlm_config *c);
    bool export_all_biases;
} tlm_family;

/* the entry of a model_type (a family's own or its wrapper's), of a GGUF architecture; NULL when none */
const tlm_family *family_find(const char *model_type);
const tlm_family *family_find_gguf(const char *arch, size_t len);
/* entry i of the table in order, NULL past the end */
const tlm_family *family_at(int i);

/* family_export.c: the exported families' blockers and config.json writers (the entries' export fields;
 * the llama blocker also rules the GGUF and llama2.c exports) */
const char *hf_llama_blocker(const tlm_config *c);
const char *hf_mistral_blocker(const tlm_config *c);
const char *hf_gpt2_blocker(const tlm_config *c);
const char *hf_qwen3_moe_blocker(const tlm_config *c);
const char *hf_mixtral_blocker(const tlm_config *c);
const char *hf_qwen2_moe_blocker(const tlm_config *c);
const char *hf_deepseek_v3_blocker(const tlm_config *c);
char *hf_llama_config(const tlm_config *c);
char *hf_mistral_config(const tlm_config *c);
char *hf_gpt2_config(const tlm_config *c);
char *hf_qwen3_moe_config(const tlm_config *c);
char *hf_mixtral_config(const tlm_config *c);
char *hf_qwen2_moe_config(const tlm_config *c);
char *hf_deepseek_v3_config(const tlm_config *c);
/* the GGUF architectures' export blockers (the gguf_family entries') */
const char *gguf_llama_blocker(const tlm_config *c);
const char *gguf_qwen2_blocker(const tlm_config *c);
const char *gguf_qwen3_blocker(const tlm_config *c);
const char *gguf_qwen2moe_blocker(const tlm_config *c);
const char *gguf_qwen3moe_blocker(const tlm_config *c);
const char *gguf_gemma_blocker(const tlm_config *c);
const char *gguf_gemma2_blocker(const tlm_config *c);
const char *gguf_gemma3_blocker(const tlm_config *c);
const char *gguf_olmo2_blocker(const tlm_config *c);
const char *gguf_gpt2_blocker(const tlm_config *c);
/* The family whose GGUF architecture `export --format gguf` writes c as: c's own family's when its
 * architecture computes c, else the first in the table's order whose does (a Mistral is llama's, an
 * engine-format model the first that fits). NULL with *why set (static text, or a buffer of this
 * thread's) when none does: the family's gguf_refused, or its (else llama's) architecture's blocker. */
const tlm_family *gguf_export_family(const tlm_config *c, const char **why);
/* the context_length a file of architecture `a` says for c: max_seq, or the window when every layer slides
 * alike and the architecture has no window (within the window the two attentions are one) */
int gguf_export_context(const gguf_family *a, const tlm_config *c);
/* c with every bias on (GPT-2's: a model without some is the same function with those biases zero) */
tlm_config family_with_all_biases(const tlm_config *c);

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
