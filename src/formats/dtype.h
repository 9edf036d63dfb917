/* dtype.h — element types of tensors stored in checkpoint files (safetensors, npy).
 *
 * The names are the safetensors spellings ("F32", "BF16", ...). Only F32, F16 and BF16
 * can be converted to float32 weights; the others are known so that a file holding
 * them (token ids, masks, step counters) still opens and the error about using one as a
 * weight names the real type. */
#ifndef TLM_DTYPE_H
#define TLM_DTYPE_H

#include <stddef.h>

#define TLM_MAX_DIMS 8

typedef enum {
    TLM_DT_F32,
    TLM_DT_F16,
    TLM_DT_BF16,
    TLM_DT_F64,
    TLM_DT_I64,
    TLM_DT_I32,
    TLM_DT_I16,
    TLM_DT_I8,
    TLM_DT_U64,
    TLM_DT_U32,
    TLM_DT_U16,
    TLM_DT_U8,
    TLM_DT_BOOL,
    TLM_DT_F8_E4M3,
    TLM_DT_F8_E5M2,
    TLM_DT_COUNT
} tlm_dtype;

/* "F32", "BF16", ...; "?" for a value outside the enum. */
const char *tlm_dtype_name(tlm_dtype dt);

/* Bytes per element; 0 for a value outside the enum. */
size_t tlm_dtype_size(tlm_dtype dt);

/* Looks up a safetensors dtype name (exact, case-sensitive). Returns 0 and sets *out,
 * or -1 without touching the error message (the caller knows the file and tensor). */
int tlm_dtype_from_name(const char *name, tlm_dtype *out);

/* 1 for F32, F16 and BF16: the types tlm_st_read_f32 converts. */
int tlm_dtype_is_float_weight(tlm_dtype dt);

#endif
