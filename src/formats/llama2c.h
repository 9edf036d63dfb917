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
 * This file reads the format and knows nothing of the engine's model; src/convert/llama2c_load.c
 * (llama2c_load, llama2c_read_config in convert/checkpoint.h) maps the header to a tlm_config and
 * builds the model from the arrays. */
#ifndef TLM_LLAMA2C_H
#define TLM_LLAMA2C_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The header, as the file states it (validated: positive sizes, dim a multiple of n_heads, n_heads
 * of n_kv_heads, an even head size, a file of exactly the implied size). */
typedef struct {
    int dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
    int shared_classifier; /* the stored vocab_size was positive: the classifier is the embedding */
    int head_size;         /* dim / n_heads */
    uint64_t n_floats;     /* the floats after the header */
} llama2c_header;

/* An open checkpoint, read array by array in file order. */
typedef struct {
    FILE *f;
    const char *path;
    const char *field; /* the array being read (a layer's slice at a time) */
    size_t field_off;  /* floats of it read so far: the flat index of the next one */
    int field_warned;  /* a non-finite value in it was already reported (--allow-nonfinite) */
} llama2c_file;

/* Opens path and reads its header into *h (validated, file size checked). -1 + tlm_error. */
int llama2c_open(llama2c_file *lf, const char *path, llama2c_header *h);
/* Reads the next n floats, of array `what` (consecutive calls with one name read consecutive
 * slices of it), checked for NaN/Inf, reported with the index in that array. */
int llama2c_read_floats(llama2c_file *lf, float *dst, size_t n, const char *what);
/* Skips the next n floats (of array `what`, for the message). */
int llama2c_skip_floats(llama2c_file *lf, size_t n, const char *what);
void llama2c_close(llama2c_file *lf);

/* 1 when data[0..len) is a whole llama2.c checkpoint (a header whose implied size is len):
 * to tell a model given where a tokenizer.bin belongs. Leaves the last error as it was. */
int llama2c_is_checkpoint(const void *data, size_t len);

#endif
