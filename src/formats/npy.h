/* npy.h — NumPy .npy arrays of float32 ('<f4') and int32 ('<i4'): what tools and
 * tests exchange with Python (activations, logits, token ids).
 *
 * Writing produces format version 1.0, little-endian, C order, with the header padded
 * so the data starts at a multiple of 64 bytes, written atomically (util/atomic_file.h).
 * Reading accepts versions 1.0, 2.0 and 3.0 with dtype '<f4' or '<i4' in C order, and
 * rejects anything else (bad magic, other dtypes, fortran_order, truncated or extra
 * data) with an error that names the file and the problem. */
#ifndef TLM_NPY_H
#define TLM_NPY_H

#include "dtype.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tlm_npy {
    tlm_dtype dtype; /* TLM_DT_F32 or TLM_DT_I32 */
    int ndim;        /* 0 = scalar */
    int64_t shape[TLM_MAX_DIMS];
    size_t numel;
    void *data; /* malloc'd: float* or int32_t*, numel elements; free with tlm_npy_free */
} tlm_npy;

/* Reads a whole file. On failure *out is zeroed and -1 + tlm_error is returned. */
int tlm_npy_read(const char *path, tlm_npy *out);

/* Same, and also fails unless the dtype is `want` (TLM_DT_F32 or TLM_DT_I32). */
int tlm_npy_read_as(const char *path, tlm_dtype want, tlm_npy *out);

/* Parses an .npy image in memory (copies the data; `label` names it in errors). */
int tlm_npy_parse(const void *bytes, size_t n, const char *label, tlm_npy *out);

/* The same, also taking '<f8' and '<f2' (converted to float32: f8 rounded to nearest) and '<i8'
 * (converted to int32; a value outside int32 is an error naming the flat index): what NumPy and
 * PyTorch users save without a cast (an .npz of reference activations, formats/npz.h). */
int tlm_npy_parse_widen(const void *bytes, size_t n, const char *label, tlm_npy *out);

/* The header alone of an .npy image of which the first n bytes are given (widened dtypes as
 * tlm_npy_parse_widen): dtype, ndim, shape and numel in *out, data NULL, and in *total the image's
 * size that header implies (header and data). Enough bytes: the header's length (at most 10 +
 * 65535 bytes in version 1.0). */
int tlm_npy_peek_widen(const void *bytes, size_t n, const char *label, tlm_npy *out, size_t *total);

void tlm_npy_free(tlm_npy *a); /* frees data, zeroes *a; NULL allowed */

/* Writes an array; dtype must be TLM_DT_F32 or TLM_DT_I32, 0 <= ndim <= TLM_MAX_DIMS. */
int tlm_npy_write(const char *path, tlm_dtype dtype, int ndim, const int64_t *shape, const void *data);
int tlm_npy_write_f32(const char *path, int ndim, const int64_t *shape, const float *data);
int tlm_npy_write_i32(const char *path, int ndim, const int64_t *shape, const int32_t *data);

#endif
