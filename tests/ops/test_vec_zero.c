/* test_vec_zero.c — vec_zero clears exactly [out, out + n): below its streaming threshold (plain
 * stores) and above it (non-temporal stores on x86-64, from an address that is not 16-byte
 * aligned and a length that is not a multiple of 4), leaving the floats on either side alone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/ops.h"

static int check(size_t n, size_t offset) {
    const size_t total = n + offset + 3;
    float *buf = malloc(total * sizeof(float));
    if (!buf) return printf("SKIP: cannot allocate %zu floats\n", total), 0;
    for (size_t i = 0; i < total; i++) buf[i] = NAN;
    vec_zero(buf + offset, n);
    size_t bad = 0;
    for (size_t i = 0; i < total; i++) {
        const int inside = i >= offset && i < offset + n;
        if (inside ? !(buf[i] == 0.0f && !signbit(buf[i])) : !isnan(buf[i])) bad++;
    }
    free(buf);
    printf("vec_zero n=%zu at +%zu floats: %zu wrong\n", n, offset, bad);
    return bad != 0;
}

int main(void) {
    int fail = 0;
    fail |= check(1000, 1);
    fail |= check(((size_t)1 << 26) + 7, 1); /* 256 MiB + 28 bytes: the streaming path */
    fail |= check(((size_t)1 << 26) + 1, 4);
    printf(fail ? "FAIL\n" : "PASS\n");
    return fail;
}
