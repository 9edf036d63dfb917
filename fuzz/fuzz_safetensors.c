/* fuzz_safetensors.c — libFuzzer target: the input bytes are a .safetensors file.
 * Parses it from memory and, when it opens, reads every tensor (F32/F16/BF16 converted to
 * float32, other dtypes byte-summed) and every metadata entry, so any out-of-range offset
 * the validator let through would be caught by ASan. Build: see fuzz/README.md. */
#include "formats/safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tlm_safetensors *st = tlm_st_open_memory(data, size, "fuzz.safetensors");
    if (!st)
        return 0;
    volatile float sink = 0;
    for (size_t i = 0; i < tlm_st_count(st); i++) {
        const tlm_st_tensor *t = tlm_st_at(st, i);
        if (tlm_st_find(st, t->name) != t)
            abort(); /* names are unique, so lookup must find this very tensor */
        if (tlm_dtype_is_float_weight(t->dtype)) {
            float *x = malloc(t->numel ? t->numel * sizeof *x : 1);
            if (!x)
                continue;
            if (tlm_st_read_f32(t, x, t->numel) != 0)
                abort(); /* a float tensor that opened must always read */
            for (size_t k = 0; k < t->numel; k++)
                sink += x[k];
            free(x);
        } else {
            const unsigned char *p = t->data;
            for (size_t k = 0; k < t->nbytes; k++)
                sink += p[k];
        }
    }
    for (size_t i = 0; i < tlm_st_metadata_count(st); i++) {
        const char *k, *v;
        if (tlm_st_metadata_at(st, i, &k, &v) == 0 && tlm_st_metadata(st, k) == NULL)
            abort();
    }
    (void)sink;
    tlm_st_close(st);
    return 0;
}
