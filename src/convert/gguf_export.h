/* gguf_export.h — writing an engine model as a GGUF file (llama.cpp's format), and the tensor
 * names the two formats share (gguf_load.c reads them back). */
#ifndef TLM_GGUF_EXPORT_H
#define TLM_GGUF_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

struct tlm_tokenizer;

/* NULL when one of llama.cpp's architectures that tinylm writes computes `c` exactly (the family
 * table's GGUF export column: gguf_export_family), else why none does. */
const char *gguf_export_blocker(const tlm_config *c);
/* the general.architecture `c` is written as ("llama", "qwen2", "gemma2", ...), NULL when none */
const char *gguf_export_arch(const tlm_config *c);

/* Writes `path` atomically in the architecture gguf_export_arch names: metadata (general.name =
 * name), the tokenizer's metadata (tok may be NULL: none), each matrix as ggml type `type`
 * (ops/quant.h; where its rows are not whole blocks of it, the fallback type, counted in
 * *n_fallback), vectors, the learned positions and the routers as F32. -1 + tlm_error. */
int gguf_export_file(const tlm_model *m, const struct tlm_tokenizer *tok, int type, const char *path,
                     const char *name, int *n_fallback);

/* The model of config c that model_init_weights(seed) makes, written as gguf_export_file writes
 * it, byte for byte, without forming it: each tensor drawn a chunk of rows at a time in f32 and
 * quantized, the writer holding one tensor in `type` (a model larger than memory in f32). */
int gguf_export_init_file(const tlm_config *c, uint64_t seed, const struct tlm_tokenizer *tok, int type,
                          const char *path, const char *name, int *n_fallback);

/* "layers.3.attn.q_proj.weight" -> "blk.3.attn_q.weight" (docs/formats.md lists them); 0, or -1
 * for a name without a GGUF counterpart */
int gguf_engine_name_to_file(const char *engine, char *out, size_t cap);

#endif
