/* finite.h — refusing weights that hold NaN or Inf.
 *
 * Every model loader (tinylm checkpoints, Hugging Face safetensors, llama2.c .bin) and export
 * pass each tensor through tlm_check_finite: a non-finite weight is an error naming the file,
 * the tensor and the flat index (row-major, in the file's layout) of the first bad element,
 * unless the process allows them (`--allow-nonfinite`), in which case each such tensor gets
 * one warning on stderr. */
#ifndef TLM_FINITE_H
#define TLM_FINITE_H

#include <stddef.h>

/* Process-wide switch (the CLI's --allow-nonfinite); off by default. */
void tlm_set_allow_nonfinite(int allow);
int tlm_get_allow_nonfinite(void);

/* Index of the first NaN/Inf among x[0..n), or n when all are finite (and the count of
 * non-finite values in *count when not NULL). A branch-free OR over the bits first (OpenMP
 * over large buffers), the scalar scan only when something was found. */
size_t tlm_first_nonfinite(const float *x, size_t n, size_t *count);

/* 0: all finite. Otherwise the first bad element is reported as flat index base + i of
 * `tensor` in `file`: with --allow-nonfinite a warning and 1, else tlm_error and -1. */
int tlm_check_finite(const float *x, size_t n, size_t base, const char *file, const char *tensor);

#endif
