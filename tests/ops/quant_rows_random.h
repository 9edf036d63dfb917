/* quant_rows_random.h — random quantized weight rows for the integer-product tests (test_quant_int.c,
 * test_quant_gemm.c): every level of a block's bytes, its f16 fields finite scales of either sign. */
#ifndef TLM_TEST_QUANT_ROWS_RANDOM_H
#define TLM_TEST_QUANT_ROWS_RANDOM_H

#include <stdint.h>
#include <stdlib.h>

#include "ops/quant.h"
#include "util/f16.h"
#include "util/rng.h"

/* the types with integer products */
static const int int_types[] = {WQ_Q8_0, WQ_Q4_0, WQ_Q4_1, WQ_Q5_0, WQ_Q5_1, WQ_Q2_K, WQ_Q3_K, WQ_Q4_K, WQ_Q5_K, WQ_Q6_K};
#define NT (int)(sizeof int_types / sizeof int_types[0])

/* the byte offsets of a block's f16 fields (ggml-common.h): d and the minimum (-1: none) */
static void f16_fields(int t, int *d, int *m) {
    *m = -1;
    switch (t) {
    case WQ_Q4_1: case WQ_Q5_1: case WQ_Q4_K: case WQ_Q5_K: *d = 0, *m = 2; break;
    case WQ_Q6_K: *d = 208; break;
    case WQ_Q2_K: *d = 80, *m = 82; break;
    case WQ_Q3_K: *d = 108; break;
    default: *d = 0; break;
    }
}

static void put_f16(uint8_t *p, float v) {
    const uint16_t h = tlm_f32_to_f16(v);
    p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}

/* OC rows of IC random bytes of type t, each block's f16 fields a finite scale of either sign */
static uint8_t *random_rows(rng_state *rng, int t, int OC, int IC) {
    const size_t row = wq_row_bytes(t, IC), bb = wq_block_bytes(t);
    uint8_t *W = malloc(row * OC);
    for (size_t i = 0; i < row * OC; i++) W[i] = (uint8_t)rng_u64(rng);
    int d, m;
    f16_fields(t, &d, &m);
    for (size_t b = 0; b < row * OC; b += bb) {
        put_f16(W + b + d, (float)(rng_normal(rng) * 1e-3));
        if (m >= 0) put_f16(W + b + m, (float)(rng_normal(rng) * 1e-3));
    }
    return W;
}

#endif
