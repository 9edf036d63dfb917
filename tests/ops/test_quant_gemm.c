/* test_quant_gemm.c — the integer GEMM of a prompt's rows with quantized weights (ops/quant_gemm.c).
 *
 *  - every kernel body this CPU runs (under TLM_ISA's cap: ctest runs this natively and with
 *    TLM_ISA=avx2 / scalar), the plain C one included, gives bit for bit what quant_int.c's plain C
 *    reference (wq_int_products, WQ_INT_SCALAR, 16 rows of x at a time) gives, for every type with
 *    integer products, on rows of random bytes (every level, Q8_0's -128 included) with random finite
 *    f16 scales; numbers of rows of x that leave short tiles (1, 7, 23), weight rows that leave a
 *    short panel (93: 29 rows, 16 for the 16-row unpacking and 13 it leaves to the row by row one),
 *    block counts that are and are not multiples of 8;
 *  - a NaN in a row of x makes that row's outputs NaN and leaves the others as they were;
 *  - the route: matmul_forward_quant under WQ_PRODUCTS_INT8 for more than WQ_INT_PROMPT_ROWS rows
 *    gives the GEMM's products plus the bias where a vector body runs the type (else, as under
 *    WQ_PRODUCTS_EXACT, the widening GEMM), the same on 1, 2 and 3 threads; under
 *    WQ_PRODUCTS_EXACT it stays the widening GEMM. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "check_count.h"
#include "ops/ops.h"
#include "ops/quant.h"
#include "ops/quant_gemm.h"
#include "util/cpu.h"
#include "util/f16.h"
#include "util/rng.h"

#include "quant_rows_random.h"

static rng_state rng;

/* N rows of x: gaussian, each 32-block with its own magnitude (some zero, one large, some ties) */
static float *random_x(int N, int IC) {
    float *x = malloc(sizeof(float) * N * IC);
    for (int i = 0; i < N * IC; i += 32) {
        const int kind = (int)rng_below(&rng, 8);
        const double s = kind == 0 ? 0.0 : kind == 1 ? 300.0 : kind == 2 ? 1e-3 : 1.0;
        for (int j = 0; j < 32; j++) x[i + j] = (float)(rng_normal(&rng) * s);
        if (kind == 3) /* (a block of ties: amax 127, so 127 / amax = 1 and every k + 0.5 rounds to even) */
            for (int j = 0; j < 32; j++) x[i + j] = j == 0 ? -127.0f : (float)(j % 16) - 7.5f;
    }
    return x;
}

/* quant_int.c's plain C reference for N rows, 16 at a time */
static int reference(float *y, const float *x, const uint8_t *W, int t, int N, int IC, int OC) {
    for (int n0 = 0; n0 < N; n0 += WQ_INT_MAX_ROWS) {
        const int rows = N - n0 < WQ_INT_MAX_ROWS ? N - n0 : WQ_INT_MAX_ROWS;
        if (wq_int_products(WQ_INT_SCALAR, y + (size_t)n0 * OC, x + (size_t)n0 * IC, W, t, rows, IC, OC, 0, OC))
            return -1;
    }
    return 0;
}

static void test_bodies(void) {
    enum { OC = 93, NMAX = 23 };
    for (int ti = 0; ti < NT; ti++) {
        const int t = int_types[ti], K = wq_block_elems(t);
        const int widths[] = {8 * K, 9 * K};
        for (int wi = 0; wi < 2; wi++) {
            const int IC = widths[wi];
            uint8_t *W = random_rows(&rng, t, OC, IC);
            float *x = random_x(NMAX, IC), *want = malloc(sizeof(float) * NMAX * OC), *y = malloc(sizeof(float) * NMAX * OC);
            const int ns[] = {1, 7, NMAX};
            for (int k = 0; k < 3; k++) {
                const int N = ns[k];
                CHECK(!reference(want, x, W, t, N, IC, OC), "%s: the reference ran", wq_name(t));
                for (int b = 0; b < WQ_GEMM_KERNELS; b++) {
                    if (!wq_gemm_available((wq_gemm_kernel)b, t)) continue;
                    memset(y, 0xff, sizeof(float) * N * OC);
                    CHECK(!wq_gemm_products((wq_gemm_kernel)b, y, x, W, t, N, IC, OC), "%s: %s ran", wq_name(t),
                          wq_gemm_name((wq_gemm_kernel)b));
                    CHECK(!memcmp(y, want, sizeof(float) * N * OC), "%s, IC %d, %d rows of x: %s = the reference",
                          wq_name(t), IC, N, wq_gemm_name((wq_gemm_kernel)b));
                }
            }
            /* a NaN in row 3: that row NaN, the others unchanged */
            x[3 * IC + IC / 2] = NAN;
            CHECK(!reference(want, x, W, t, NMAX, IC, OC), "%s: the reference ran", wq_name(t));
            for (int b = 0; b < WQ_GEMM_KERNELS; b++) {
                if (!wq_gemm_available((wq_gemm_kernel)b, t)) continue;
                CHECK(!wq_gemm_products((wq_gemm_kernel)b, y, x, W, t, NMAX, IC, OC), "ran");
                int nan_ok = 1, rest_ok = 1;
                for (int n = 0; n < NMAX; n++)
                    for (int o = 0; o < OC; o++) {
                        const float v = y[(size_t)n * OC + o];
                        if (n == 3) nan_ok &= isnan(v) != 0;
                        else rest_ok &= !memcmp(&v, want + (size_t)n * OC + o, sizeof v);
                    }
                CHECK(nan_ok && rest_ok, "%s, %s: a NaN in a row of x makes that row NaN (%d), the rest as before (%d)",
                      wq_name(t), wq_gemm_name((wq_gemm_kernel)b), nan_ok, rest_ok);
            }
            free(W), free(x), free(want), free(y);
        }
    }
    /* what the bodies refuse */
    float y[4], x[64] = {0};
    uint8_t W[64] = {0};
    CHECK(wq_gemm_products(WQ_GEMM_SCALAR, y, x, W, WQ_F16, 1, 32, 1) == -1, "F16: no integer GEMM");
    CHECK(wq_gemm_products(WQ_GEMM_SCALAR, y, x, W, WQ_Q8_0, 1, 48, 1) == -1, "a row of 1.5 blocks refused");
    CHECK(!wq_gemm_available(WQ_GEMM_AVX2, WQ_Q8_0), "Q8_0's offset levels never go through vpmaddubsw");
}

static void test_route(void) {
    enum { IC = 512, OC = 100, NMAX = 40 };
    float bias[OC], *tile = malloc(sizeof(float) * MATMUL_BF16_TILE * IC);
    for (int o = 0; o < OC; o++) bias[o] = (float)rng_normal(&rng);
    float *y = malloc(sizeof(float) * NMAX * OC), *want = malloc(sizeof(float) * NMAX * OC),
          *exact = malloc(sizeof(float) * NMAX * OC);
    for (int ti = 0; ti < NT; ti++) {
        const int t = int_types[ti];
        const int by_gemm = wq_gemm_pick(t) != WQ_GEMM_SCALAR;
        uint8_t *W = random_rows(&rng, t, OC, IC);
        float *x = random_x(NMAX, IC);
        const int ns[] = {WQ_INT_PROMPT_ROWS + 1, NMAX};
        for (int k = 0; k < 2; k++) {
            const int N = ns[k];
            wq_set_products(WQ_PRODUCTS_EXACT);
            matmul_forward_quant(exact, x, W, t, bias, N, IC, OC, tile, 0);
            memcpy(want, exact, sizeof(float) * N * OC);
            if (by_gemm) {
                CHECK(!reference(want, x, W, t, N, IC, OC), "reference");
                for (int i = 0; i < N * OC; i++) want[i] += bias[i % OC];
            }
            wq_set_products(WQ_PRODUCTS_INT8);
            for (int threads = 1; threads <= 3; threads++) {
                omp_set_num_threads(threads);
                matmul_forward_quant(y, x, W, t, bias, N, IC, OC, tile, 0);
                CHECK(!memcmp(y, want, sizeof(float) * N * OC), "%s, %d rows, %d threads under WQ_PRODUCTS_INT8: %s",
                      wq_name(t), N, threads, by_gemm ? "the integer GEMM plus the bias" : "the widening GEMM");
            }
            omp_set_num_threads(2);
            wq_set_products(WQ_PRODUCTS_EXACT);
            matmul_forward_quant(y, x, W, t, bias, N, IC, OC, tile, 0);
            CHECK(!memcmp(y, exact, sizeof(float) * N * OC), "%s: WQ_PRODUCTS_EXACT still widens", wq_name(t));
            if (by_gemm)
                CHECK(memcmp(exact, want, sizeof(float) * N * OC), "%s: the two products differ (the test sees the route)",
                      wq_name(t));
        }
        free(W), free(x);
    }
    free(y), free(want), free(exact), free(tile);
}

int main(void) {
    const char *cap = getenv("TLM_ISA");
    printf("kernels: %s (TLM_ISA=%s); GEMM bodies here:", tlm_isa_name(tlm_cpu_isa()), cap ? cap : "unset");
    for (int b = 0; b < WQ_GEMM_KERNELS; b++)
        if (wq_gemm_available((wq_gemm_kernel)b, WQ_Q4_K)) printf(" %s", wq_gemm_name((wq_gemm_kernel)b));
    printf("; route for Q4_K: %s, Q8_0: %s\n", wq_gemm_name(wq_gemm_pick(WQ_Q4_K)), wq_gemm_name(wq_gemm_pick(WQ_Q8_0)));
    CHECK(!(cap && !strcmp(cap, "scalar")) || wq_gemm_pick(WQ_Q4_K) == WQ_GEMM_SCALAR, "TLM_ISA=scalar ignored");
    CHECK(!(cap && !strcmp(cap, "avx2")) || !wq_gemm_available(WQ_GEMM_VNNI512, WQ_Q4_K), "TLM_ISA=avx2 ignored");
    rng_seed(&rng, 4343);
    test_bodies();
    test_route();
    printf("%d checks, %d failures\n", checks, failures);
    return failures != 0;
}
