/* fuzz_npy.c — libFuzzer target: the input bytes are an .npy file, parsed from memory;
 * when it parses, every element is read. Build: see fuzz/README.md. */
#include "formats/npy.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tlm_npy a;
    if (tlm_npy_parse(data, size, "fuzz.npy", &a) != 0)
        return 0;
    volatile int32_t sink = 0;
    const int32_t *x = a.data;
    for (size_t i = 0; i < a.numel; i++)
        sink ^= x[i];
    (void)sink;
    tlm_npy_free(&a);
    return 0;
}
