/* checkpoint.h — loading and saving model directories (config.json + model.safetensors). */
#ifndef TLM_CHECKPOINT_H
#define TLM_CHECKPOINT_H

#include "model/model.h"

struct tlm_safetensors;

/* Loads DIR/config.json and the weights; dispatches to the Hugging Face family loaders for
 * any model_type other than "tinylm". NULL + tlm_error naming the file on failure. */
tlm_model *model_load_dir(const char *dir);
/* The same for inference: where the checkpoint file lays the parameters out exactly as the
 * engine does (a tinylm checkpoint: one F32 safetensors file in table order), they stay in
 * the read-only file mapping, shared with the page cache, instead of being copied. The model
 * cannot be trained (model_alloc_grads refuses). Other formats load as model_load_dir.
 * bf16_weights: the caller will keep the matrices as bf16 (--dtype bf16: LOAD_BF16): a format whose f32
 * weights are copied in anyway (llama2.c, Hugging Face directories) rounds them as it reads them; the others
 * are converted by model_weights_to_bf16 afterwards (from the mapping, a tensor at a time). LOAD_AUTO (--dtype
 * auto): a Hugging Face directory whose matrices are all BF16 or FP8 is read as bf16 (the others as f32). */
enum { LOAD_F32 = 0, LOAD_BF16 = 1, LOAD_AUTO = 2 };
tlm_model *model_load_dir_mapped(const char *dir, int bf16_weights);
/* The checkpoint file of a llama2.c export directory (`tinylm export --format llama2c`), with
 * the tokenizer beside it. */
#define LLAMA2C_EXPORT_FILE "model.bin"
/* A training run directory (OUT with OUT/latest -> step-N) resolves to its latest
 * checkpoint, a directory holding only a llama2.c export to its model.bin; anything else to
 * itself. malloc'd. */
char *model_dir_resolve(const char *dir);
/* A path to a regular file ending in ".bin": a llama2.c checkpoint. */
int is_llama2c_file(const char *path);
/* The tokenizer stored with a model: in the directory (tokenizer.json, tinylm_tokenizer.json,
 * ...), in a training run's latest checkpoint. NULL + tlm_error when there is none. */
struct tlm_tokenizer *model_load_tokenizer(const char *model_path);
/* Copies the tokenizer at tokenizer_path (a file, or a directory tlm_tokenizer_load searches)
 * into export directory dir under the name tlm_tokenizer_load looks for (tokenizer.bin,
 * tokenizer.json + its tokenizer_config.json, tinylm_tokenizer.json, encoder.json + vocab.bpe),
 * each file atomically, after checking that it loads and fits the model's vocab_size. *kind
 * (optional) receives the tokenizer kind. -1 + tlm_error naming the file. */
int model_export_tokenizer(const char *tokenizer_path, const char *dir, int vocab_size, const char **kind);
/* Writes DIR/config.json (model_type "tinylm") and DIR/model.safetensors (F32), each atomically. */
int model_save_dir(const tlm_model *m, const char *dir);

/* The weights in model directory DIR (its safetensors headers only: nothing is read or
 * allocated) hold every tensor cfg needs with cfg's shape; for `tinylm info`. 0, or -1 +
 * tlm_error naming the file, the tensor and both shapes. */
int model_check_weights(const char *dir, const tlm_config *cfg);

/* hf_load.c: builds the engine model for a Hugging Face family config and reads its tensors. */
tlm_model *hf_model_load(const char *dir, const tlm_config *cfg, int bf16_weights);
/* llama2c_load.c: a llama2.c checkpoint .bin (src/formats/llama2c.h); bf16_weights: its matrices
 * rounded to bf16 as they are read, the layout and values model_weights_to_bf16 would give without
 * the whole f32 model in memory first. NULL + tlm_error naming the file and the field on failure. */
tlm_model *llama2c_load(const char *path, int bf16_weights);
/* only the header (validated, the file size checked) as an engine config. -1 + tlm_error */
int llama2c_read_config(const char *path, tlm_config *cfg);
/* RoPE row order: dst = src with each of n_heads heads' hs rows (of cols floats) moved from
 * interleaved pairs (2b, 2b+1; llama2.c, Meta, llama.cpp) to halves (b, b + hs/2; Hugging Face,
 * the engine). dst and src must not overlap. (The inverse: llama2c_export.h.) */
void llama2c_rows_to_halves(float *dst, const float *src, int n_heads, int hs, int cols);
/* gguf_load.c: a GGUF file (llama.cpp's format; formats/gguf.h) of an architecture tinylm runs
 * (llama, qwen2, qwen3, gemma2, gemma3, olmo2, gpt2), its matrices kept in the file's types
 * (f32, bf16, ggml block formats) for inference. NULL + tlm_error naming the file and the key or
 * tensor. */
tlm_model *gguf_model_load(const char *path);
/* its metadata as an engine config (nothing else read) */
int gguf_read_config(const char *path, tlm_config *cfg);
/* hf_load.c: the same check as model_check_weights for a Hugging Face family directory. */
int hf_check_shapes(const tlm_config *c, const struct tlm_safetensors *st, const char *dir);

#endif
