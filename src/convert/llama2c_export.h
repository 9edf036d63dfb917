/* llama2c_export.h — writing a model as a llama2.c checkpoint (.bin, legacy version 0), the
 * format run.c reads and llama2c_load reads back bit-identically. */
#ifndef TLM_LLAMA2C_EXPORT_H
#define TLM_LLAMA2C_EXPORT_H

#include "model/model.h"

/* NULL when run.c computes `c` exactly (a Llama without biases: RMSNorm eps 1e-5, RoPE theta
 * 10000 unscaled, SwiGLU, head_dim = d_model / n_heads); otherwise the first feature that
 * rules the format out, for the message. */
const char *llama2c_export_blocker(const tlm_config *c);

/* RoPE row order, the inverse of llama2c_rows_to_halves (checkpoint.h): each head's rows from
 * halves (b, b + hs/2) to interleaved pairs (2b, 2b+1). dst and src must not overlap. */
void llama2c_rows_to_pairs(float *dst, const float *src, int n_heads, int hs, int cols);

/* Writes `path` atomically. -1 + tlm_error naming the path (and the blocker) on failure. */
int llama2c_export_file(const tlm_model *m, const char *path);

#endif
