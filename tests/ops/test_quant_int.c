/* test_quant_int.c — the integer products of quantized weights (ops/quant_int.c).
 *
 *  - every kernel set this CPU runs (under TLM_ISA's cap: ctest runs this natively and with
 *    TLM_ISA=avx2 / scalar) gives bit for bit what the plain C reference gives, on rows of random
 *    bytes (every level, Q8_0's -128 included) with random finite f16 scales, for 1, 4 and 11 rows
 *    of x, an odd number of weight rows, and row widths whose block counts are and are not
 *    multiples of 8;
 *  - the reference itself against float64: the activations rounded as quant.h defines (recomputed
 *    here from the definition: per block d = amax / 127, q = nearest-even(x / d)), the exact
 *    product is sum w_k x_k with w = wq_dequantize_row(W), and the integer product may differ by
 *    the rounding of the activations, sum_k |w_k| d_k / 2, plus f32 rounding (bounded by
 *    2^-20 sum_k |w_k| (|x_k| + d_k)); checked against the float64 product of w with the rounded
 *    activations too, within the f32 rounding alone, which a wrong level or scale would break;
 *  - the mode: WQ_PRODUCTS_INT8 makes matvec_quant and matvec_quant_part equal the picked set's
 *    products (plus the bias) where a vector set runs (else, TLM_ISA=scalar, they stay exact),
 *    the same on 1, 2 and 3 threads, WQ_PRODUCTS_EXACT leaves them as they were; a type with no
 *    integer kernel (F16) still widens; a NaN or infinity in x makes the outputs NaN;
 *  - decoding's shapes (one row of x) of the K types on every set: row widths of 8 and 16 blocks
 *    and 9 and 3 (not whole groups of 8), 1 to 6 and 37 weight rows (the passes of 4 rows and what
 *    is left over), and a range of rows starting at an odd row, equal to the reference;
 *  - a short prompt: matmul_forward_quant under WQ_PRODUCTS_INT8 gives the integer products for up
 *    to WQ_INT_PROMPT_ROWS rows of x (two passes' worth when that exceeds WQ_INT_MAX_ROWS), and
 *    for more rows the same integer products (quant_gemm.c's GEMM) where a vector body runs the
 *    type, else what it gives under WQ_PRODUCTS_EXACT (the widening GEMM). */
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

/* N rows of x: gaussian, each 32-block with its own magnitude (some zero, one large) */
static float *random_x(int N, int IC) {
    float *x = malloc(sizeof(float) * N * IC);
    for (int i = 0; i < N * IC; i += 32) {
        const int kind = (int)rng_below(&rng, 8);
        const double s = kind == 0 ? 0.0 : kind == 1 ? 300.0 : kind == 2 ? 1e-3 : 1.0;
        for (int j = 0; j < 32; j++) x[i + j] = (float)(rng_normal(&rng) * s);
    }
    return x;
}

/* the activations as the integer products see them (quant.h's definition), and each element's d */
static void rounded_x(int t, const float *x, int IC, double *xr, double *dk) {
    const int block = wq_block_elems(t) == 256 ? 256 : 32;
    for (int b = 0; b < IC; b += block) {
        float amax = 0;
        for (int j = 0; j < block; j++) amax = fmaxf(amax, fabsf(x[b + j]));
        const float d = amax / 127.0f;
        for (int j = 0; j < block; j++) {
            xr[b + j] = amax > 0 ? d * nearbyintf(x[b + j] * (127.0f / amax)) : 0.0;
            dk[b + j] = d;
        }
    }
}

static void test_paths(void) {
    const int ics32[] = {32, 256, 608}, icsk[] = {256, 2048, 2304};
    int runs[WQ_INT_PATHS] = {0};
    for (int ti = 0; ti < NT; ti++) {
        const int t = int_types[ti];
        const int *ics = wq_block_elems(t) == 256 ? icsk : ics32;
        double worst_bound = 0, worst_round = 0;
        for (int s = 0; s < 3; s++) {
            /* (1 row of x on whole groups of 8 blocks, decoding's case; 4, and 11 rows: a short prompt's) */
            const int IC = ics[s], OC = 37, N = s == 0 ? 4 : s == 1 ? 1 : 11;
            uint8_t *W = random_rows(&rng, t, OC, IC);
            float *x = random_x(N, IC), *ref = malloc(sizeof(float) * N * OC), *y = malloc(sizeof(float) * N * OC);
            CHECK(wq_int_products(WQ_INT_SCALAR, ref, x, W, t, N, IC, OC, 0, OC) == 0, "%s: the reference ran",
                  wq_name(t));
            for (int p = WQ_INT_SCALAR + 1; p < WQ_INT_PATHS; p++) {
                if (!wq_int_path_available((wq_int_path)p)) continue;
                memset(y, 0xff, sizeof(float) * N * OC);
                CHECK(wq_int_products((wq_int_path)p, y, x, W, t, N, IC, OC, 0, OC) == 0, "%s ran", wq_int_path_name(p));
                CHECK(!memcmp(y, ref, sizeof(float) * N * OC), "%s %s IC %d N %d: not the reference's bits (y[0] %.9g, ref %.9g)",
                      wq_name(t), wq_int_path_name(p), IC, N, y[0], ref[0]);
                runs[p]++;
            }
            /* the reference against float64 */
            float *w = malloc(sizeof(float) * IC);
            double *xr = malloc(sizeof(double) * IC), *dk = malloc(sizeof(double) * IC);
            for (int n = 0; n < N; n++) {
                rounded_x(t, x + (size_t)n * IC, IC, xr, dk);
                for (int o = 0; o < OC; o++) {
                    wq_dequantize_row(t, W + (size_t)o * wq_row_bytes(t, IC), w, IC);
                    double exact = 0, rounded = 0, bound = 0, mag = 0;
                    for (int k = 0; k < IC; k++) {
                        exact += (double)w[k] * x[(size_t)n * IC + k];
                        rounded += (double)w[k] * xr[k];
                        bound += fabs(w[k]) * dk[k] / 2;
                        mag += fabs(w[k]) * (fabs(x[(size_t)n * IC + k]) + dk[k]);
                    }
                    const double v = ref[(size_t)n * OC + o], slack = mag * 0x1p-20 + 1e-30;
                    const double e_round = fabs(v - rounded) / slack, e_bound = fabs(v - exact) / (bound + slack);
                    worst_round = fmax(worst_round, e_round), worst_bound = fmax(worst_bound, e_bound);
                    CHECK(e_round <= 1, "%s IC %d row %d out %d: %.9g against %.9g (rounded x, float64): %.3g of the f32 slack",
                          wq_name(t), IC, n, o, v, rounded, e_round);
                    CHECK(e_bound <= 1, "%s IC %d row %d out %d: %.9g against %.9g (exact): %.3g of the rounding bound",
                          wq_name(t), IC, n, o, v, exact, e_bound);
                }
            }
            free(w), free(xr), free(dk), free(W), free(x), free(ref), free(y);
        }
        printf("%-5s integer products: reference within %.3f of the f32 slack of float64, %.3f of the activation "
               "rounding bound\n", wq_name(t), worst_round, worst_bound);
    }
    for (int p = WQ_INT_SCALAR + 1; p < WQ_INT_PATHS; p++)
        printf("%-12s %s (%d cases equal to the reference)\n", wq_int_path_name(p),
               wq_int_path_available((wq_int_path)p) ? "ran" : "not on this CPU (or capped): skipped", runs[p]);
}

/* one row of x with the K types: every set equal to the reference over whole matrices (the 4-row
 * passes and the rows left over) and over rows [o0, o1) starting at an odd row */
static void test_decode_shapes(void) {
    const int kt[] = {WQ_Q4_K, WQ_Q5_K, WQ_Q6_K, WQ_Q2_K, WQ_Q3_K}, ics[] = {2048, 4096, 2304, 768};
    const int ocs[] = {1, 2, 3, 4, 5, 6, 37};
    int runs = 0;
    /* a short row (3 blocks) first on a thread whose activation buffer that call sizes, so that a
     * write past it shows under ASan */
    for (int ti = 0; ti < 2; ti++) {
        const int t = kt[ti], IC = 768, OC = 5;
        uint8_t *W = random_rows(&rng, t, OC, IC);
        float *x = random_x(1, IC), ref[5], y[5];
        int rc = -1;
#pragma omp parallel num_threads(2)
        if (omp_get_thread_num() == 1) rc = wq_int_products(wq_int_path_pick(), y, x, W, t, 1, IC, OC, 0, OC);
        CHECK(rc == 0 && wq_int_products(WQ_INT_SCALAR, ref, x, W, t, 1, IC, OC, 0, OC) == 0 &&
                  !memcmp(y, ref, sizeof y),
              "%s IC %d on a fresh thread: the reference's bits", wq_name(t), IC);
        free(W), free(x);
    }
    for (int ti = 0; ti < 5; ti++)
        for (int s = 0; s < 4; s++)
            for (int k = 0; k < 7; k++) {
                const int t = kt[ti], IC = ics[s], OC = ocs[k];
                uint8_t *W = random_rows(&rng, t, OC, IC);
                float *x = random_x(1, IC), ref[37], y[37];
                CHECK(wq_int_products(WQ_INT_SCALAR, ref, x, W, t, 1, IC, OC, 0, OC) == 0, "%s: the reference ran",
                      wq_name(t));
                for (int p = WQ_INT_SCALAR + 1; p < WQ_INT_PATHS; p++) {
                    if (!wq_int_path_available((wq_int_path)p)) continue;
                    memset(y, 0xff, sizeof y);
                    CHECK(wq_int_products((wq_int_path)p, y, x, W, t, 1, IC, OC, 0, OC) == 0, "%s ran",
                          wq_int_path_name(p));
                    CHECK(!memcmp(y, ref, sizeof(float) * OC),
                          "%s %s IC %d OC %d, one row of x: not the reference's bits", wq_name(t), wq_int_path_name(p),
                          IC, OC);
                    if (OC > 6) { /* (rows [3, 34): 7 passes of 4 and 3 rows left, from an odd row) */
                        memset(y, 0xff, sizeof y);
                        CHECK(wq_int_products((wq_int_path)p, y, x, W, t, 1, IC, OC, 3, 34) == 0, "%s ran",
                              wq_int_path_name(p));
                        CHECK(!memcmp(y + 3, ref + 3, sizeof(float) * 31) && y[2] != y[2] && y[34] != y[34],
                              "%s %s IC %d, rows [3, 34): the reference's bits, nothing else written", wq_name(t),
                              wq_int_path_name(p), IC);
                    }
                    runs++;
                }
                free(W), free(x);
            }
    printf("decoding's shapes: %d cases equal to the reference\n", runs);
}

static void test_mode(void) {
    const int IC = 512, OC = 48, N = 3;
    float bias[48];
    for (int o = 0; o < OC; o++) bias[o] = (float)rng_normal(&rng);
    for (int ti = 0; ti < NT + 1; ti++) {
        const int t = ti < NT ? int_types[ti] : WQ_F16;
        uint8_t *W = random_rows(&rng, t, OC, IC);
        if (t == WQ_F16) { /* (finite values: rows quantized from gaussians) */
            float row[512];
            for (int o = 0; o < OC; o++) {
                for (int k = 0; k < IC; k++) row[k] = (float)rng_normal(&rng);
                wq_quantize_row(t, row, W + (size_t)o * wq_row_bytes(t, IC), IC);
            }
        }
        float *x = random_x(N, IC), y[3 * 48], want[3 * 48], exact[3 * 48], part[48];
        wq_set_products(WQ_PRODUCTS_EXACT);
        matvec_quant(exact, x, W, t, bias, N, IC, OC);
        wq_set_products(WQ_PRODUCTS_INT8);
        matvec_quant(y, x, W, t, bias, N, IC, OC);
        if (t == WQ_F16) {
            CHECK(!wq_int_supported(t) && wq_int_products(WQ_INT_SCALAR, want, x, W, t, 1, IC, OC, 0, OC) < 0,
                  "F16 has no integer kernel");
            CHECK(!memcmp(y, exact, sizeof y), "F16 under WQ_PRODUCTS_INT8: widened as before");
        } else if (wq_int_path_pick() == WQ_INT_SCALAR) { /* (no vector set: the products stay exact) */
            CHECK(!memcmp(y, exact, sizeof y), "%s under WQ_PRODUCTS_INT8 without a vector set: exact", wq_name(t));
        } else {
            CHECK(wq_int_products(wq_int_path_pick(), want, x, W, t, N, IC, OC, 0, OC) == 0, "%s: the picked set ran",
                  wq_name(t));
            for (int i = 0; i < N * OC; i++) want[i] += bias[i % OC];
            CHECK(!memcmp(y, want, sizeof y), "%s: matvec_quant under WQ_PRODUCTS_INT8 is the integer products",
                  wq_name(t));
            CHECK(memcmp(y, exact, sizeof y) != 0, "%s: the exact products differ from the integer ones", wq_name(t));
        }
        /* the same bits on 1, 2 and 3 threads (each output row is one thread's) */
        for (int nt = 1; nt <= 3; nt++) {
            float yt[3 * 48];
            omp_set_num_threads(nt);
            matvec_quant(yt, x, W, t, bias, N, IC, OC);
            CHECK(!memcmp(yt, y, sizeof y), "%s: matvec_quant on %d threads", wq_name(t), nt);
        }
        omp_set_num_threads(2);
        /* a decoding step's share: rows [16, 40) of the last row of x */
        matvec_quant_part(part, x + 2 * IC, W, t, bias, IC, 16, 40);
        CHECK(!memcmp(part + 16, y + 2 * OC + 16, sizeof(float) * 24), "%s: matvec_quant_part equals matvec_quant",
              wq_name(t));
        wq_set_products(WQ_PRODUCTS_EXACT);
        matvec_quant_part(part, x + 2 * IC, W, t, bias, IC, 16, 40);
        CHECK(!memcmp(part + 16, exact + 2 * OC + 16, sizeof(float) * 24), "%s: WQ_PRODUCTS_EXACT widens again",
              wq_name(t));
        if (t != WQ_F16 && wq_int_path_pick() != WQ_INT_SCALAR) { /* a NaN, then an infinity, in one block of x */
            wq_set_products(WQ_PRODUCTS_INT8);
            for (int v = 0; v < 2; v++) {
                x[IC - 5] = v ? INFINITY : NAN;
                matvec_quant(y, x, W, t, NULL, 1, IC, OC);
                int all_nan = 1;
                for (int o = 0; o < OC; o++) all_nan &= isnan(y[o]);
                CHECK(all_nan, "%s: a %s in x makes every output NaN", wq_name(t), v ? "infinity" : "NaN");
            }
            wq_set_products(WQ_PRODUCTS_EXACT);
        }
        free(W), free(x);
    }
}

static void test_prompt(void) {
    enum { IC = 512, OC = 48, NMAX = WQ_INT_PROMPT_ROWS + 1 };
    float bias[OC], *tile = malloc(sizeof(float) * MATMUL_BF16_TILE * IC);
    for (int o = 0; o < OC; o++) bias[o] = (float)rng_normal(&rng);
    for (int ti = 0; ti < NT; ti++) {
        const int t = int_types[ti];
        uint8_t *W = random_rows(&rng, t, OC, IC);
        float *x = random_x(NMAX, IC), y[NMAX * OC], want[NMAX * OC];
        const int ns[] = {MATVEC_MAX_ROWS + 1, WQ_INT_PROMPT_ROWS, WQ_INT_PROMPT_ROWS + 1};
        for (int k = 0; k < 3; k++) {
            /* (longer prompts: the integer GEMM of quant_gemm.c, the same bits, where a vector body runs t) */
            const int N = ns[k], by_int = (N <= WQ_INT_PROMPT_ROWS ? wq_int_path_pick() != WQ_INT_SCALAR
                                                                    : wq_gemm_pick(t) != WQ_GEMM_SCALAR);
            wq_set_products(WQ_PRODUCTS_EXACT);
            matmul_forward_quant(want, x, W, t, bias, N, IC, OC, tile, 0);
            if (by_int) {
                for (int n0 = 0; n0 < N; n0 += WQ_INT_MAX_ROWS) {
                    const int rows = N - n0 < WQ_INT_MAX_ROWS ? N - n0 : WQ_INT_MAX_ROWS;
                    CHECK(!wq_int_products(wq_int_path_pick(), want + (size_t)n0 * OC, x + (size_t)n0 * IC, W, t, rows,
                                           IC, OC, 0, OC),
                          "%s: the picked set ran", wq_name(t));
                }
                for (int i = 0; i < N * OC; i++) want[i] += bias[i % OC];
            }
            wq_set_products(WQ_PRODUCTS_INT8);
            matmul_forward_quant(y, x, W, t, bias, N, IC, OC, tile, 0);
            CHECK(!memcmp(y, want, sizeof(float) * N * OC), "%s, %d rows of x under WQ_PRODUCTS_INT8: %s", wq_name(t), N,
                  by_int ? "the integer products" : "the widening GEMM, as under WQ_PRODUCTS_EXACT");
        }
        wq_set_products(WQ_PRODUCTS_EXACT);
        free(W), free(x);
    }
    free(tile);
}

int main(void) {
    const char *cap = getenv("TLM_ISA");
    printf("kernels: %s (TLM_ISA=%s); integer products: %s\n", tlm_isa_name(tlm_cpu_isa()), cap ? cap : "unset",
           wq_int_path_name(wq_int_path_pick()));
    CHECK(!(cap && !strcmp(cap, "scalar")) || wq_int_path_pick() == WQ_INT_SCALAR, "TLM_ISA=scalar ignored");
    CHECK(!(cap && !strcmp(cap, "avx2")) || wq_int_path_pick() != WQ_INT_AVX512VNNI, "TLM_ISA=avx2 ignored");
    CHECK(cap || tlm_cpu_isa() < TLM_ISA_AVX512 || !tlm_cpu_features_get()->avx512_vnni ||
              wq_int_path_pick() == WQ_INT_AVX512VNNI,
          "AVX512-VNNI present but not picked");
    rng_seed(&rng, 43);
    test_paths();
    test_decode_shapes();
    test_mode();
    test_prompt();
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures != 0;
}
