/* hf_export.h — writing an engine model as a Hugging Face style directory
 * (config.json + model.safetensors, F32) in the family whose architecture it matches:
 *   "llama": RMSNorm, Pre-Norm, RoPE (optionally linear/llama3 scaled), SwiGLU, no QK-Norm,
 *            no soft-caps, no sliding window, no embedding scale (q/k/v/o biases all or none);
 *   "gpt2":  LayerNorm with bias, Pre-Norm, learned positions, GELU (tanh) MLP with biases,
 *            biases on q/k/v/o, no GQA;
 *   otherwise "tinylm": the engine's own config.json and tensor names (docs/tensors.md).
 * Loading the export (model_load_dir) gives the same logits. */
#ifndef TLM_HF_EXPORT_H
#define TLM_HF_EXPORT_H

#include "model/model.h"

/* The family that expresses `c` exactly: "llama", "gpt2" or "tinylm". For "tinylm", *why (if
 * not NULL) names the first feature that rules out the HF families. */
const char *hf_export_family(const tlm_config *c, const char **why);

/* (each family's blocker and config.json: family.h) */

/* Checks that `dir` may be written: absent, empty, or holding only a previous export
 * (config.json + model.safetensors whose metadata says producer "tinylm export", and the
 * tokenizer files an export writes). Never
 * touches anything else. -1 + tlm_error naming the offending file. */
int hf_export_check_target(const char *dir);

/* Checks the target, creates it if needed and writes model.safetensors then config.json, each
 * atomically. *family receives the model_type written. */
int hf_export_dir(const tlm_model *m, const char *dir, const char **family);
/* the same with every tensor written as BF16 (round to nearest even; `export --type bf16`), config.json's
 * torch_dtype "bfloat16" */
int hf_export_dir_bf16(const tlm_model *m, const char *dir, const char **family);

#endif
