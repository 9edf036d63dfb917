/* explain.h — a config read aloud: what the "build a small model" lessons teach to read off a
 * config.json (norm type and formula, placement and the norms of a layer by their checkpoint
 * names, QK-norm, soft-caps, sliding layers, heads, RoPE, head, init), in plain words. */
#ifndef TLM_EXPLAIN_H
#define TLM_EXPLAIN_H

#include <stdio.h>

#include "family.h"

/* Writes the explanation of `c` to `out`; `unknown` (may be NULL) lists the keys of the file
 * that its reader did not understand (config_collect_unknown), named at the end. */
void config_explain(FILE *out, const tlm_config *c, const config_unknown_keys *unknown);

/* One line on the checkpoint's quantization_config (nothing when it has none): the method, FP8's format and
 * block size, GPTQ's / AWQ's bits and groups, and whether tinylm loads it. */
void config_explain_quantization(FILE *out, const tlm_config *c);

#endif
