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

/* ---- one float read from a file (a config key, a metadata value, a score) -------------------- */

/* What a key's value may be, once it is a finite float32. */
typedef enum {
    TLM_FLOAT_ANY,      /* any finite float32 */
    TLM_FLOAT_POSITIVE, /* > 0 (a RoPE base, a gain, a divisor) */
    TLM_FLOAT_NONNEG,   /* >= 0 (a soft-cap or an optional value, where 0 means off) */
    TLM_FLOAT_EPS,      /* in (0, 1]: an epsilon added to a variance, small next to it */
    TLM_FLOAT_FACTOR,   /* >= 1: a RoPE scaling factor (a context extension) */
} tlm_float_range;

/* v, as the file's parser read it (a JSON number as a double, a float32 or float64 field), as a
 * float32 in *out: 0. NaN, +-Inf, a value beyond float32's range (1e39 would become +Inf) and
 * one outside `range` (checked after the rounding to float32: 1e-50 is 0) are refused with
 * tlm_error naming file and key (and nothing is written to *out): -1. */
int tlm_float_from_file(double v, tlm_float_range range, const char *file, const char *key, float *out);

/* The text that range's rule reads as ("> 0", "in (0, 1]", ...); "" for TLM_FLOAT_ANY. */
const char *tlm_float_range_rule(tlm_float_range range);

#endif
