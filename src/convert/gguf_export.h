/* gguf_export.h — writing an engine model as a GGUF file (llama.cpp's format), and the tensor
 * names the two formats share (gguf_load.c reads them back). */
#ifndef TLM_GGUF_EXPORT_H
#define TLM_GGUF_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

struct tlm_tokenizer;

/* NULL when llama.cpp's llama architecture computes `c` exactly (a Llama without biases, plain
 * RMSNorm, RoPE unscaled or linear), else the first feature that rules it out. */
const char *gguf_export_blocker(const tlm_config *c);

/* Writes `path` atomically: metadata (general.name = name), the tokenizer's metadata (tok may be
 * NULL: none), each matrix as ggml type `type` (ops/quant.h; where its rows are not whole blocks
 * of it, the fallback type, counted in *n_fallback), vectors as F32. -1 + tlm_error. */
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
