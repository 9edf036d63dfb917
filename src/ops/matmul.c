/* matmul.c — linear layers on top of one GEMM entry point.
 * gemm() is the only function that knows about CBLAS, so a different backend
 * (another BLAS, a hand-written kernel) replaces this one function. */
#include <cblas.h>
#include <string.h>

#include "ops.h"

void gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
          int ldb, float beta, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc);
}

void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int IC, int OC) {
    /* out[N,OC] = inp[N,IC] @ weight[OC,IC]^T */
    gemm(0, 1, N, OC, IC, 1.0f, inp, IC, weight, IC, 0.0f, out, OC);
    if (bias) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < OC; o++) out[(size_t)n * OC + o] += bias[o];
    }
}

void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                     const float *weight, int N, int IC, int OC) {
    if (dinp) gemm(0, 0, N, IC, OC, 1.0f, dout, OC, weight, IC, 1.0f, dinp, IC);    /* dout @ W */
    if (dweight) gemm(1, 0, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dweight, IC); /* dout^T @ inp */
    if (dbias) {
#pragma omp parallel for schedule(static)
        for (int o = 0; o < OC; o++) {
            float s = 0.0f;
            for (int n = 0; n < N; n++) s += dout[(size_t)n * OC + o];
            dbias[o] += s;
        }
    }
}

void split_columns(float *const *dst, const int *widths, int parts, const float *src, int N) {
    int total = 0;
    for (int i = 0; i < parts; i++) total += widths[i];
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *row = src + (size_t)n * total;
        for (int i = 0; i < parts; i++) {
            memcpy(dst[i] + (size_t)n * widths[i], row, sizeof(float) * widths[i]);
            row += widths[i];
        }
    }
}

void join_columns(float *dst, const float *const *src, const int *widths, int parts, int N) {
    int total = 0;
    for (int i = 0; i < parts; i++) total += widths[i];
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *row = dst + (size_t)n * total;
        for (int i = 0; i < parts; i++) {
            memcpy(row, src[i] + (size_t)n * widths[i], sizeof(float) * widths[i]);
            row += widths[i];
        }
    }
}
