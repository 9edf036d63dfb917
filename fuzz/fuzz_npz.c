/* fuzz_npz.c — libFuzzer target: the input bytes are a NumPy .npz archive (a zip of .npy members,
 * stored or deflated), parsed from memory with tlm_npz_parse; when it parses, every member's
 * every element is read and looked up by its key; a refusal must carry a message naming the
 * archive. Build: see fuzz/README.md. */
#include "formats/npz.h"
#include "util/error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tlm_npz z;
    tlm_clear_error();
    if (tlm_npz_parse(data, size, "fuzz.npz", &z) != 0) {
        if (strncmp(tlm_last_error(), "fuzz.npz", 8) != 0) /* every refusal names the archive */
            abort();
        return 0;
    }
    volatile uint32_t sink = 0;
    for (int i = 0; i < z.n; i++) {
        const tlm_npy *a = &z.e[i].a;
        const uint32_t *x = a->data;
        for (size_t k = 0; k < a->numel; k++)
            sink ^= x[k];
        if (tlm_npz_find(&z, z.e[i].key) == NULL) /* each listed key is found */
            abort();
    }
    (void)sink;
    tlm_npz_free(&z);
    return 0;
}
