/* test_gemm_bf16.c — the mixed-precision products (gemm_bf16.c, matmul.c's bf16 layers):
 *  - gemm_bf16 against a float64 product of the same bf16 values, for every transpose pair,
 *    leading dimensions wider than the matrices, beta 0 and 1, with and without a bias, and shapes
 *    off every block size: within float32 summation error (1e-5 of sum |a b|);
 *  - f32_to_bf16 equal bit for bit to tlm_f32_to_bf16 (ties to even, subnormals, inf, NaN
 *    quieted), for lengths off the vector width; bf16_stage_colsum the same bits and column sums;
 *    the activations' and norms' _bf16 forms: the plain op's f32 output and its tlm_f32_to_bf16;
 *  - matmul_forward_mixed and matmul_backward_bf16(_into): the products on rounded operands,
 *    dweight and dbias accumulated, dinp accumulated or set;
 *  - where there is no path (TLM_ISA=avx2 here), gemm_bf16 refuses and the layers give the f32
 *    results bit for bit.
 * ctest runs it natively (on AMX: the small products on amx.c's tiles, the large on oneDNN's), with
 * oneDNN capped to AVX512-BF16, and with TLM_ISA=avx2. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_count.h"
#include "ops/ops.h"
#include "util/cpu.h"
#include "util/f16.h"

static unsigned seed = 12345;
static float rnd(void) {
    seed = seed * 1664525u + 1013904223u;
    return ((seed >> 8) / 16777216.0f) * 2.0f - 1.0f;
}
static float r16(float x) { return tlm_bf16_to_f32(tlm_f32_to_bf16(x)); }

/* element (i, j) of op(X), X stored row-major with leading dimension ld */
static double at(const uint16_t *X, int ld, int trans, int i, int j) {
    return tlm_bf16_to_f32(trans ? X[(size_t)j * ld + i] : X[(size_t)i * ld + j]);
}

static void test_gemm(int ta, int tb, int M, int N, int K, int pad, float beta, int with_bias) {
    const int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    const size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
    uint16_t *A = malloc(na * 2), *B = malloc(nb * 2);
    float *C = malloc(nc * 4), *C0 = malloc(nc * 4), *bias = malloc((size_t)N * 4);
    for (int j = 0; j < N; j++) bias[j] = rnd();
    for (size_t i = 0; i < na; i++) A[i] = tlm_f32_to_bf16(rnd());
    for (size_t i = 0; i < nb; i++) B[i] = tlm_f32_to_bf16(rnd());
    for (size_t i = 0; i < nc; i++) C[i] = C0[i] = rnd();
    const int rc = gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, with_bias ? bias : NULL);
    if (gemm_bf16_path() == GEMM_BF16_NONE) {
        CHECK(rc == -1, "gemm_bf16 without a path returned %d", rc);
    } else {
        double worst = 0;
        int pad_kept = 1;
        for (int i = 0; i < M; i++) {
            for (int j = 0; j < N; j++) {
                double want = (beta ? C0[(size_t)i * ldc + j] : 0) + (with_bias ? bias[j] : 0), mag = fabs(want);
                for (int k = 0; k < K; k++) {
                    const double p = at(A, lda, ta, i, k) * at(B, ldb, tb, k, j);
                    want += p, mag += fabs(p);
                }
                const double e = fabs(C[(size_t)i * ldc + j] - want) / (mag > 0 ? mag : 1);
                if (!(e <= worst)) worst = e;
            }
            for (int j = N; j < ldc; j++) pad_kept &= C[(size_t)i * ldc + j] == C0[(size_t)i * ldc + j];
        }
        CHECK(rc == 0 && worst <= 1e-5, "gemm_bf16 %c%c %dx%dx%d pad %d beta %g bias %d: rc %d, error %.3g of sum|ab|",
              ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, pad, beta, with_bias, rc, worst);
        CHECK(pad_kept, "gemm_bf16 %dx%dx%d wrote past N into the padding of C", M, N, K);
    }
    free(A), free(B), free(C), free(C0), free(bias);
}

static void test_conversion(void) {
    const float special[] = {0.0f, -0.0f, 1.0f, 1.00390625f /* tie: 1 + 2^-8, rounds to even 1 */,
                             1.01171875f /* tie up to 1 + 2^-6 */, 3.4e38f, -3.4e38f, 1e-40f, -1e-45f,
                             INFINITY, -INFINITY, NAN};
    enum { N = 1000 };
    float src[N];
    uint16_t got[N];
    for (int i = 0; i < N; i++) src[i] = i < (int)(sizeof special / sizeof special[0]) ? special[i] : rnd() * 1e3f;
    for (int n = 0; n <= 67; n += 67 - 33 * (n == 0)) { /* lengths 0, 34, 67 (off the 32-wide loop), then N */
        f32_to_bf16(got, src, (size_t)n);
        int same = 1;
        for (int i = 0; i < n; i++) same &= got[i] == tlm_f32_to_bf16(src[i]) || (isnan(src[i]) && (got[i] & 0x7fc0) == 0x7fc0);
        CHECK(same, "f32_to_bf16 of %d values differs from tlm_f32_to_bf16", n);
    }
    f32_to_bf16(got, src, N);
    int same = 1;
    for (int i = 0; i < N; i++) same &= got[i] == tlm_f32_to_bf16(src[i]) || (isnan(src[i]) && (got[i] & 0x7fc0) == 0x7fc0);
    CHECK(same, "f32_to_bf16 of %d values differs from tlm_f32_to_bf16", N);
    /* the same values as rows of 37 (off the 16-wide vectors) 41 apart, into rows 39 apart */
    {
        enum { ROWS = N / 41, COLS = 37, LDD = 39 };
        uint16_t rows16[ROWS * LDD];
        for (int i = 0; i < ROWS * LDD; i++) rows16[i] = 0xdead;
        f32_to_bf16_rows(rows16, LDD, src, 41, ROWS, COLS);
        int rows_same = 1;
        for (int r = 0; r < ROWS; r++)
            for (int c = 0; c < LDD; c++) {
                const float x = src[r * 41 + c];
                rows_same &= c < COLS ? rows16[r * LDD + c] == tlm_f32_to_bf16(x) || (isnan(x) && (rows16[r * LDD + c] & 0x7fc0) == 0x7fc0)
                                      : rows16[r * LDD + c] == 0xdead;
            }
        CHECK(rows_same, "f32_to_bf16_rows [%d x %d] differs from tlm_f32_to_bf16 or wrote past its rows", ROWS, COLS);
    }
    const uint16_t *st = bf16_stage(1, src, N);
    CHECK(st && !memcmp(st, got, sizeof got), "bf16_stage's copy differs from f32_to_bf16's");
    /* the same values as [10, 100] and [40, 25] (column blocks of 64, a partial one): the same bits,
     * and the column sums in row order */
    for (int cols = 100; cols >= 25; cols -= 75) {
        const int rows = N / cols;
        float colsum[100], want[100];
        for (int c = 0; c < cols; c++) colsum[c] = want[c] = 0.5f;
        for (int c = 0; c < cols; c++) {
            float acc = 0.0f;
            for (int r = 0; r < rows; r++) acc += src[r * cols + c];
            want[c] += acc;
        }
        st = bf16_stage_colsum(0, src, rows, cols, colsum);
        CHECK(st && !memcmp(st, got, sizeof(uint16_t) * rows * cols) && !memcmp(colsum, want, sizeof(float) * cols),
              "bf16_stage_colsum [%d, %d]: the copy or the column sums differ", rows, cols);
    }
}

/* the producers' bf16 copies (act/glu_forward_bf16, layernorm/rmsnorm_forward_bf16: mixed-precision
 * training's product inputs): the f32 output the plain op's bit for bit, the copy tlm_f32_to_bf16 of
 * it, for outputs that are subnormal, NaN, ties and ordinary, in lengths off the 16-wide vectors and
 * long enough to be shared among the threads */
static int same_bf16(const uint16_t *got, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (got[i] != tlm_f32_to_bf16(y[i])) return 0;
    return 1;
}
static void test_producer_copies(void) {
    enum { N = 300007, C = 97 };
    float *x = malloc(sizeof(float) * N), *u = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N),
          *ref = malloc(sizeof(float) * N), *w = malloc(sizeof(float) * C), *b = malloc(sizeof(float) * C),
          *mean = malloc(sizeof(float) * (N / C)), *rstd = malloc(sizeof(float) * (N / C));
    uint16_t *y16 = malloc(sizeof(uint16_t) * N);
    if (!x || !u || !y || !ref || !w || !b || !mean || !rstd || !y16) {
        CHECK(0, "out of memory");
        return;
    }
    const float special[] = {1e-40f, -3e-39f, 2e-45f, NAN, 1.00390625f, 0.0f, -0.0f, 40.0f, -40.0f};
    for (int i = 0; i < N; i++) {
        x[i] = i < (int)(sizeof special / sizeof special[0]) ? special[i] : rnd() * 4.0f;
        u[i] = i == 20 ? 1e-39f : rnd();
    }
    const uint32_t payload_nan = 0x7fc0ffffu; /* (a NaN whose dropped bits would carry if it were rounded) */
    memcpy(&x[3], &payload_nan, sizeof x[3]);
    for (int c = 0; c < C; c++) w[c] = rnd(), b[c] = rnd() * 0.1f;
    for (int kind = 0; kind < 2; kind++) {
        const activation act = kind ? ACT_SILU : ACT_GELU_TANH;
        const size_t lens[] = {N, 1000, 37};
        for (int k = 0; k < 3; k++) {
            act_forward(ref, x, lens[k], act);
            act_forward_bf16(y, y16, x, lens[k], act);
            CHECK(!memcmp(y, ref, sizeof(float) * lens[k]) && same_bf16(y16, y, lens[k]),
                  "act_forward_bf16 (%s, %zu values): f32 output or its bf16 copy differs", kind ? "silu" : "gelu",
                  lens[k]);
            glu_forward(ref, x, u, lens[k], act);
            glu_forward_bf16(y, y16, x, u, lens[k], act);
            CHECK(!memcmp(y, ref, sizeof(float) * lens[k]) && same_bf16(y16, y, lens[k]),
                  "glu_forward_bf16 (%s, %zu values): f32 output or its bf16 copy differs", kind ? "silu" : "gelu",
                  lens[k]);
        }
    }
    const int rows = N / C;
    layernorm_forward(ref, mean, rstd, u, w, b, rows, C, 1e-5f);
    layernorm_forward_bf16(y, y16, mean, rstd, u, w, b, rows, C, 1e-5f);
    CHECK(!memcmp(y, ref, sizeof(float) * rows * C) && same_bf16(y16, y, (size_t)rows * C),
          "layernorm_forward_bf16: f32 output or its bf16 copy differs");
    rmsnorm_forward(ref, rstd, u, w, 1.0f, rows, C, 1e-6f);
    rmsnorm_forward_bf16(y, y16, rstd, u, w, 1.0f, rows, C, 1e-6f);
    CHECK(!memcmp(y, ref, sizeof(float) * rows * C) && same_bf16(y16, y, (size_t)rows * C),
          "rmsnorm_forward_bf16: f32 output or its bf16 copy differs");
    int subnormal = 0, nan = 0;
    act_forward_bf16(y, y16, x, 16, ACT_GELU_TANH);
    for (int i = 0; i < 16; i++) subnormal += y[i] != 0.0f && fabsf(y[i]) < 1.17549435e-38f, nan += isnan(y[i]);
    CHECK(subnormal >= 2 && nan == 1, "the copies' test values: %d subnormal outputs, %d NaN", subnormal, nan);
    free(x), free(u), free(y), free(ref), free(w), free(b), free(mean), free(rstd), free(y16);
}

/* the layers: forward and backward against float64 products of the rounded operands */
static void test_layers(int N, int IC, int OC) {
    float *x = malloc(sizeof(float) * N * IC), *w = malloc(sizeof(float) * OC * IC), *b = malloc(sizeof(float) * OC);
    float *dy = malloc(sizeof(float) * N * OC), *y = malloc(sizeof(float) * N * OC), *y32 = malloc(sizeof(float) * N * OC);
    float *dx = malloc(sizeof(float) * N * IC), *dw = malloc(sizeof(float) * OC * IC), *db = malloc(sizeof(float) * OC);
    float *dx32 = malloc(sizeof(float) * N * IC), *dw32 = malloc(sizeof(float) * OC * IC), *db32 = malloc(sizeof(float) * OC);
    uint16_t *w16 = malloc(2 * (size_t)OC * IC);
    for (int i = 0; i < N * IC; i++) x[i] = rnd();
    for (int i = 0; i < OC * IC; i++) w[i] = rnd(), w16[i] = tlm_f32_to_bf16(w[i]);
    for (int i = 0; i < OC; i++) b[i] = rnd();
    for (int i = 0; i < N * OC; i++) dy[i] = rnd();
    const int have = gemm_bf16_path() != GEMM_BF16_NONE;
    for (int into = 0; into < 2; into++) {
        for (int i = 0; i < N * IC; i++) dx[i] = dx32[i] = 0.5f;
        for (int i = 0; i < OC * IC; i++) dw[i] = dw32[i] = 0.25f;
        for (int i = 0; i < OC; i++) db[i] = db32[i] = -1.0f;
        matmul_forward_mixed(y, x, NULL, w, w16, b, N, IC, OC);
        matmul_backward_bf16(into, dx, dw, db, dy, x, NULL, w, w16, N, IC, OC);
        if (!have) { /* the f32 layers exactly */
            matmul_forward(y32, x, w, b, N, IC, OC);
            (into ? matmul_backward_into : matmul_backward)(dx32, dw32, db32, dy, x, w, N, IC, OC);
            CHECK(!memcmp(y, y32, sizeof(float) * N * OC) && !memcmp(dx, dx32, sizeof(float) * N * IC) &&
                      !memcmp(dw, dw32, sizeof(float) * OC * IC) && !memcmp(db, db32, sizeof(float) * OC),
                  "without a bf16 path the mixed layers differ from the f32 ones (%dx%dx%d)", N, IC, OC);
            continue;
        }
        double ey = 0, ex = 0, ew = 0, eb = 0;
        for (int n = 0; n < N; n++)
            for (int o = 0; o < OC; o++) {
                double want = b[o], mag = fabs(b[o]);
                for (int k = 0; k < IC; k++) {
                    const double p = (double)r16(x[n * IC + k]) * r16(w[o * IC + k]);
                    want += p, mag += fabs(p);
                }
                ey = fmax(ey, fabs(y[n * OC + o] - want) / mag);
            }
        for (int n = 0; n < N; n++)
            for (int k = 0; k < IC; k++) {
                double want = into ? 0 : 0.5, mag = fabs(want);
                for (int o = 0; o < OC; o++) {
                    const double p = (double)r16(dy[n * OC + o]) * r16(w[o * IC + k]);
                    want += p, mag += fabs(p);
                }
                ex = fmax(ex, fabs(dx[n * IC + k] - want) / mag);
            }
        for (int o = 0; o < OC; o++) {
            double wantb = -1.0, magb = 1.0;
            for (int n = 0; n < N; n++) wantb += dy[n * OC + o], magb += fabs(dy[n * OC + o]);
            eb = fmax(eb, fabs(db[o] - wantb) / magb); /* (the bias gradient sums f32 dout: no rounding) */
            for (int k = 0; k < IC; k++) {
                double want = 0.25, mag = 0.25;
                for (int n = 0; n < N; n++) {
                    const double p = (double)r16(dy[n * OC + o]) * r16(x[n * IC + k]);
                    want += p, mag += fabs(p);
                }
                ew = fmax(ew, fabs(dw[o * IC + k] - want) / mag);
            }
        }
        CHECK(ey <= 1e-5 && ex <= 1e-5 && ew <= 1e-5 && eb <= 1e-5,
              "mixed layer %dx%dx%d (%s): errors y %.2g dx %.2g dw %.2g db %.2g of sum |terms|", N, IC, OC,
              into ? "dinp set" : "dinp accumulated", ey, ex, ew, eb);
    }
    free(x), free(w), free(b), free(dy), free(y), free(y32), free(dx), free(dw), free(db), free(dx32), free(dw32);
    free(db32), free(w16);
}

int main(void) {
    const char *cap = getenv("TLM_ISA"), *dnnl_cap = getenv("ONEDNN_MAX_CPU_ISA");
    const gemm_bf16_path_t path = gemm_bf16_path();
    printf("bf16 products: %s (TLM_ISA=%s, ONEDNN_MAX_CPU_ISA=%s)\n", gemm_bf16_path_name(path), cap ? cap : "unset",
           dnnl_cap ? dnnl_cap : "unset");
    /* oneDNN capped to AVX512-BF16 on a CPU without AMX: the native run's path, code and data, which
     * test_gemm_bf16 has just checked (the sanitizer build felt the repeat most) */
    if (dnnl_cap && !strcmp(dnnl_cap, "AVX512_CORE_BF16") && !tlm_cpu_features_get()->amx_bf16) {
        printf("no AMX: capped to AVX512-BF16 is the native path (test_gemm_bf16): skipped\n");
        return 77;
    }
    /* the caps must take: below AVX-512 no path, oneDNN capped below AMX no AMX */
    if (cap && strcmp(cap, "avx512")) CHECK(path == GEMM_BF16_NONE, "TLM_ISA=%s left the %s path on", cap, gemm_bf16_path_name(path));
    if (dnnl_cap && !strcmp(dnnl_cap, "AVX512_CORE_BF16"))
        CHECK(path != GEMM_BF16_AMX, "ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 left AMX on");
    test_conversion();
    test_producer_copies();
    /* (up to 2^24 multiply-adds on AMX: amx.c's tiles, with the transposed B's 16 x 16 blocks for K/2 >= 16
     * and an even ldb, odd K included, K over 2048 in chunks; the last shape: oneDNN's primitive) */
    const int shapes[][3] = {{1, 1, 1},     {3, 5, 7},     {17, 33, 64},  {64, 48, 100},
                             {100, 257, 31}, {256, 96, 384}, {40, 64, 65}, {40, 64, 66}, {70, 50, 4200},
                             {300, 260, 256}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int beta = 0; beta < 2; beta++)
                    for (int bias = 0; bias < 2; bias++)
                        test_gemm(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], (int)s % 3 * 5, (float)beta, bias);
    /* the same shape again (a primitive found, not built) */
    test_gemm(0, 1, 64, 48, 100, 0, 1.0f, 1);
    test_gemm(0, 1, 64, 48, 100, 0, 1.0f, 1);
    /* a large product from a thread inside a parallel region (a split batch's linear layers): on
     * AMX amx.c's, whatever the size */
#pragma omp parallel num_threads(2)
    {
#pragma omp single
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                test_gemm(ta, tb, 300, 260, 256, 3, (float)(ta ^ tb), ta);
                test_gemm(ta, tb, 600, 70, 96, 1, (float)ta, tb); /* (C's rows in two chunks) */
                test_gemm(ta, tb, 40, 2100, 1030, 2, (float)tb, ta); /* (B over 4 MiB: packed a panel at a time) */
            }
    }
    test_layers(40, 24, 36);
    test_layers(256, 384, 96);
    test_layers(512, 64, 160); /* (the bias gradient's column blocks on the threads) */
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
