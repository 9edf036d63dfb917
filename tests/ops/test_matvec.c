/* test_matvec.c — the matvec kernels (f32 and bf16 weights), the bf16 tiled GEMM path and its
 * mixed-precision form (inputs rounded to bf16 too, path 4)
 * against a float64 reference, on shapes that hit every edge: inputs not a multiple of the
 * vector width, outputs not a multiple of the 4-column block, 1..4 rows and more (chunks),
 * with and without bias. Run once per kernel set: ctest runs it natively and with
 * TLM_ISA=avx2 / scalar, and it checks that the kernel set asked for is the one that ran. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"
#include "util/cpu.h"
#include "util/f16.h"

static float rnd(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return ((*s >> 8) / 16777216.0f) * 2.0f - 1.0f;
}

/* max |got - want| / sum_k |x||w| over all outputs: the rounding error bound's scale */
static double check(const float *got, const float *x, const float *w, const float *bias, int N, int IC, int OC) {
    double worst = 0;
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double want = bias ? bias[o] : 0.0, mag = bias ? fabs(bias[o]) : 0.0;
            for (int k = 0; k < IC; k++) {
                want += (double)x[(size_t)n * IC + k] * w[(size_t)o * IC + k];
                mag += fabs((double)x[(size_t)n * IC + k] * w[(size_t)o * IC + k]);
            }
            double e = fabs(got[(size_t)n * OC + o] - want) / (mag > 0 ? mag : 1);
            if (!(e <= worst)) worst = e; /* (NaN propagates as a failure) */
        }
    return worst;
}

int main(void) {
    const char *cap = getenv("TLM_ISA");
    tlm_isa isa = tlm_cpu_isa();
    printf("kernels: %s (TLM_ISA=%s)\n", tlm_isa_name(isa), cap ? cap : "unset");
    int failures = 0, checks = 0;
    if (cap && !strcmp(cap, "scalar") && isa != TLM_ISA_SCALAR) failures++, printf("FAIL: TLM_ISA=scalar ignored\n");
    if (cap && !strcmp(cap, "avx2") && isa == TLM_ISA_AVX512) failures++, printf("FAIL: TLM_ISA=avx2 ignored\n");
    const int shapes[][3] = {{1, 16, 4}, {1, 17, 5}, {2, 33, 7}, {3, 100, 64}, {4, 768, 130}, {5, 31, 9},
                             {7, 288, 67}, {9, 64, 300}, {1, 1, 1},   {4, 2048, 3}};
    unsigned seed = 7;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int N = shapes[s][0], IC = shapes[s][1], OC = shapes[s][2];
        float *x = malloc(sizeof(float) * N * IC), *w = malloc(sizeof(float) * OC * IC), *b = malloc(sizeof(float) * OC);
        float *wr = malloc(sizeof(float) * OC * IC), *y = malloc(sizeof(float) * N * OC);
        float *tile = malloc(sizeof(float) * MATMUL_BF16_TILE * IC);
        uint16_t *w16 = malloc(sizeof(uint16_t) * OC * IC);
        float *xr = malloc(sizeof(float) * N * IC);
        for (int i = 0; i < N * IC; i++) x[i] = rnd(&seed), xr[i] = tlm_bf16_to_f32(tlm_f32_to_bf16(x[i]));
        for (int i = 0; i < OC * IC; i++) {
            w[i] = rnd(&seed);
            w16[i] = tlm_f32_to_bf16(w[i]);
            wr[i] = tlm_bf16_to_f32(w16[i]); /* the values the bf16 kernels multiply */
        }
        for (int i = 0; i < OC; i++) b[i] = rnd(&seed);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            const float *bias = with_bias ? b : NULL;
            double e[5];
            if (N <= MATVEC_MAX_ROWS) {
                matvec_f32(y, x, w, bias, N, IC, OC);
                e[0] = check(y, x, w, bias, N, IC, OC);
                matvec_bf16(y, x, w16, bias, N, IC, OC);
                e[1] = check(y, x, wr, bias, N, IC, OC);
            } else {
                e[0] = e[1] = 0;
            }
            matmul_forward(y, x, w, bias, N, IC, OC);
            e[2] = check(y, x, w, bias, N, IC, OC);
            matmul_forward_bf16(y, x, w16, bias, N, IC, OC, tile, 0);
            e[3] = check(y, x, wr, bias, N, IC, OC);
            /* mixed precision: over many rows the inputs are rounded to bf16 too (where the CPU
             * has bf16 products; elsewhere the same f32 arithmetic as path 3) */
            matmul_forward_bf16(y, x, w16, bias, N, IC, OC, tile, 1);
            e[4] = check(y, N > MATVEC_MAX_ROWS && gemm_bf16_path() != GEMM_BF16_NONE ? xr : x, wr, bias, N, IC, OC);
            for (int k = 0; k < 5; k++) {
                int ok = e[k] <= 1e-6; /* float32 summation of up to 2048 terms, relative to sum |x w| */
                failures += !ok, checks++;
                if (!ok) printf("FAIL %dx%dx%d bias=%d path %d: error %.2e\n", N, IC, OC, with_bias, k, e[k]);
            }
        }
        free(x), free(xr), free(w), free(b), free(wr), free(y), free(tile), free(w16);
    }
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures != 0;
}
