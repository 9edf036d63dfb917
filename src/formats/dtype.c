/* dtype.c — names and sizes of the tensor element types. */
#include "dtype.h"

#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtype_table[TLM_DT_COUNT] = {
    [TLM_DT_F32] = {"F32", 4},         [TLM_DT_F16] = {"F16", 2},   [TLM_DT_BF16] = {"BF16", 2},
    [TLM_DT_F64] = {"F64", 8},         [TLM_DT_I64] = {"I64", 8},   [TLM_DT_I32] = {"I32", 4},
    [TLM_DT_I16] = {"I16", 2},         [TLM_DT_I8] = {"I8", 1},     [TLM_DT_U64] = {"U64", 8},
    [TLM_DT_U32] = {"U32", 4},         [TLM_DT_U16] = {"U16", 2},   [TLM_DT_U8] = {"U8", 1},
    [TLM_DT_BOOL] = {"BOOL", 1},       [TLM_DT_F8_E4M3] = {"F8_E4M3", 1},
    [TLM_DT_F8_E5M2] = {"F8_E5M2", 1},
};

const char *tlm_dtype_name(tlm_dtype dt) {
    return (unsigned)dt < TLM_DT_COUNT ? dtype_table[dt].name : "?";
}

size_t tlm_dtype_size(tlm_dtype dt) { return (unsigned)dt < TLM_DT_COUNT ? dtype_table[dt].size : 0; }

int tlm_dtype_from_name(const char *name, tlm_dtype *out) {
    for (int i = 0; i < TLM_DT_COUNT; i++) {
        if (strcmp(name, dtype_table[i].name) == 0) {
            *out = (tlm_dtype)i;
            return 0;
        }
    }
    return -1;
}

int tlm_dtype_is_float_weight(tlm_dtype dt) {
    return dt == TLM_DT_F32 || dt == TLM_DT_F16 || dt == TLM_DT_BF16;
}
