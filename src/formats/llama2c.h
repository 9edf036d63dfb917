/* llama2c.h — checkpoints of Karpathy's llama2.c (`run.c`), legacy "version 0" format.
 *
 * Layout (all little-endian): 7 int32 header fields dim, hidden_dim, n_layers, n_heads,
 * n_kv_heads, vocab_size, seq_len (a negative vocab_size means the classifier is stored
 * separately at the end; positive means it is tied to the token embedding), then float32
 * arrays: token_embedding [V, dim], rms_att [L, dim], wq [L, H*hs, dim], wk [L, KV*hs, dim],
 * wv [L, KV*hs, dim], wo [L, dim, H*hs], rms_ffn [L, dim], w1 [L, hidden, dim],
 * w2 [L, dim, hidden], w3 [L, hidden, dim], rms_final [dim], freq_cis_real and freq_cis_imag
 * [seq_len, hs/2] each (unused: RoPE is recomputed), and wcls [V, dim] when untied.
 * hs = dim / n_heads. The file size must match the header exactly.
 *
 * The model is a Llama: RMSNorm (eps 1e-5), RoPE (theta 10000), SwiGLU with w1 = gate,
 * w3 = up, w2 = down. llama2.c rotates interleaved pairs (2i, 2i+1) of each head while the
 * engine rotates halves (i, i + hs/2), so the rows of wq and wk are permuted within each head
 * at load time (the permutation Hugging Face's Llama conversion applies); the attention
 * scores are then exactly those of run.c. */
#ifndef TLM_LLAMA2C_H
#define TLM_LLAMA2C_H

#include "model/model.h"

/* Reads and validates only the header (and the file size) as an engine config. */
int llama2c_read_config(const char *path, tlm_config *cfg);

/* Loads the checkpoint. NULL + tlm_error naming the file and the field on failure. */
tlm_model *llama2c_load(const char *path);

/* 1 when data[0..len) is a whole llama2.c checkpoint (a header whose implied size is len):
 * to tell a model given where a tokenizer.bin belongs. Leaves the last error as it was. */
int llama2c_is_checkpoint(const void *data, size_t len);

#endif
