/* safetensors.h — read and write Hugging Face .safetensors checkpoints.
 *
 * File layout: an 8-byte little-endian header length N, N bytes of JSON mapping each
 * tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets into the data
 * that follows the header) plus an optional "__metadata__" object of string values,
 * then the raw little-endian, row-major tensor data.
 *
 * The reader maps the file read-only and treats it as untrusted: every number in the
 * header is checked before use, and the tensor byte ranges must tile the data exactly
 * (no overlap, no gap, nothing after the last tensor), as the reference implementation
 * requires. Errors name the file and the tensor or field.
 *
 * Tensor data pointers point into the mapping and may be unaligned for their dtype
 * (an odd-length BF16 tensor shifts everything after it); read them with memcpy or
 * tlm_st_read_f32. They stay valid until tlm_st_close. Do not truncate a file while it
 * is open (the atomic writer never does: it replaces the file by rename). */
#ifndef TLM_SAFETENSORS_H
#define TLM_SAFETENSORS_H

#include "dtype.h"

#include <stddef.h>
#include <stdint.h>

/* Largest JSON header accepted (same limit as the reference implementation). */
#define TLM_ST_MAX_HEADER ((uint64_t)100 << 20)

typedef struct {
    const char *name;
    const char *file; /* the file it came from (for error messages) */
    tlm_dtype dtype;
    int ndim; /* 0 = scalar */
    int64_t shape[TLM_MAX_DIMS];
    size_t numel;
    size_t nbytes;
    const void *data; /* possibly unaligned, see above */
} tlm_st_tensor;

typedef struct tlm_safetensors tlm_safetensors; /* opaque */

/* Opens one .safetensors file. NULL + tlm_error on any problem. */
tlm_safetensors *tlm_st_open(const char *path);

/* Parses a safetensors image held in memory (copied; `label` names it in errors).
 * Used by the fuzzer and by tests. */
tlm_safetensors *tlm_st_open_memory(const void *data, size_t n, const char *label);

/* Opens a checkpoint directory: DIR/model.safetensors if present, otherwise the shards
 * listed in DIR/model.safetensors.index.json ("weight_map": tensor name -> shard file).
 * Checks that every shard exists and opens, that each tensor of the weight map is in the
 * shard it names, that every tensor of a shard is in the weight map, and that no tensor
 * appears twice. */
tlm_safetensors *tlm_st_open_dir(const char *dir);

void tlm_st_close(tlm_safetensors *st); /* NULL allowed */

/* Tensors in header order (shard by shard, in order of first mention in the index). */
size_t tlm_st_count(const tlm_safetensors *st);
const tlm_st_tensor *tlm_st_at(const tlm_safetensors *st, size_t i);

/* NULL when absent (no error set: absence is often fine, e.g. an optional bias). */
const tlm_st_tensor *tlm_st_find(const tlm_safetensors *st, const char *name);

/* A "__metadata__" value, or NULL. For shards: the first shard that has the key. */
const char *tlm_st_metadata(const tlm_safetensors *st, const char *key);

/* Number of "__metadata__" entries and the i-th key/value (header order). */
size_t tlm_st_metadata_count(const tlm_safetensors *st);
int tlm_st_metadata_at(const tlm_safetensors *st, size_t i, const char **key, const char **value);

/* Hands the file mapping of a checkpoint that is one mapped file over to the caller, who
 * must munmap(*base, *len) it; tensor data pointers into it stay valid after tlm_st_close.
 * Returns 0, or -1 (nothing changes) for shards or an image held in memory. */
int tlm_st_detach_mapping(tlm_safetensors *st, void **base, size_t *len);

/* t has been read (copied or converted out): its pages leave resident memory now, if it lies in
 * a file mapping (util/hugepage.h tlm_advise_done; read again, they come back from the file).
 * Nothing happens for an image held in memory. */
void tlm_st_release(const tlm_safetensors *st, const tlm_st_tensor *t);

/* Converts an F32, F16 or BF16 tensor to float32 into dst[0 .. n_elems). Fails (with
 * the file, tensor and dtype in the message) for other dtypes or when n_elems is not
 * the tensor's element count. Conversions are exact. */
int tlm_st_read_f32(const tlm_st_tensor *t, float *dst, size_t n_elems);

/* Finds `name`, checks its shape is exactly shape[0..ndim), and reads it as float32.
 * Errors: missing tensor, wrong shape (both shapes in the message), non-float dtype. */
int tlm_st_load_f32(const tlm_safetensors *st, const char *name, int ndim, const int64_t *shape, float *dst);
/* The checks of tlm_st_load_f32 without reading: the tensor exists with exactly this shape. */
int tlm_st_check_shape(const tlm_safetensors *st, const char *name, int ndim, const int64_t *shape);

/* Writes "[2, 3]" into buf (always NUL-terminated); returns buf. For messages. */
char *tlm_shape_str(char *buf, size_t size, int ndim, const int64_t *shape);

/* ---- writing ---------------------------------------------------------------------- */

typedef struct {
    const char *name;
    tlm_dtype dtype;
    int ndim;
    int64_t shape[TLM_MAX_DIMS];
    const void *data; /* numel * dtype size bytes, little-endian, row-major */
} tlm_st_entry;

/* Writes a .safetensors file atomically (see util/atomic_file.h): tensors in the given
 * order, contiguous from offset 0, header padded with spaces to a multiple of 8 bytes
 * so the data starts 8-byte aligned. metadata_json is NULL or a JSON object whose values
 * are all strings, stored as "__metadata__". Checks names (non-empty, unique, not
 * "__metadata__"), dtypes, shapes. -1 + tlm_error on failure; the old file stays. */
int tlm_st_write(const char *path, const tlm_st_entry *entries, size_t n, const char *metadata_json);

/* Converts n floats to BF16 / F16 bit patterns (round to nearest even), for export. */
void tlm_f32_to_bf16_array(const float *src, uint16_t *dst, size_t n);
void tlm_f32_to_f16_array(const float *src, uint16_t *dst, size_t n);

#endif
