/* gemm_backends.c — GFLOP/s of the two GEMM libraries tinylm can use (CMake option TLM_GEMM),
 * side by side in one process, on the engine's own shapes: the training GEMMs of nanogpt-baby
 * and of the small GPT-2 (forward NT, backward NN and TN), attention blocks, and M = 1
 * decoding products. Built and run by bench/gemm_backends.sh. Row-major, like the engine. */
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
    /* M, N, K, A transposed, B transposed, what */
    static const struct { int M, N, K, ta, tb; const char *what; } shapes[] = {
        {768, 384, 128, 0, 1, "nanogpt-baby q|k|v forward"},
        {768, 128, 512, 0, 0, "nanogpt-baby fc backward (dinp)"},
        {2048, 1536, 384, 0, 1, "small GPT-2 fc forward"},
        {2048, 384, 1536, 0, 0, "small GPT-2 proj backward (dinp)"},
        {1536, 384, 2048, 1, 0, "small GPT-2 fc weight gradient"},
        {256, 256, 64, 0, 1, "attention Q K^T (T 256, hd 64)"},
        {256, 64, 256, 0, 0, "attention P V"},
        {1, 2048, 768, 0, 1, "decode, one token, FFN"},
        {1, 32000, 768, 0, 1, "decode, one token, LM head"},
    };
    printf("%-26s %-34s %10s %10s\n", "shape (M x N x K)", "what", "OpenBLAS", "oneDNN");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int M = shapes[s].M, N = shapes[s].N, K = shapes[s].K, ta = shapes[s].ta, tb = shapes[s].tb;
        float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N), *C = malloc(sizeof(float) * M * N);
        for (long i = 0; i < (long)M * K; i++) A[i] = (float)(i % 7) * 0.1f;
        for (long i = 0; i < (long)K * N; i++) B[i] = (float)(i % 5) * 0.1f;
        const int lda = ta ? M : K, ldb = tb ? K : N;
        double gflops[2];
        for (int lib = 0; lib < 2; lib++) {
            double best = 1e30;
            for (int round = 0; round < 5; round++) { /* best of 5 rounds of >= 0.1 s */
                int reps = 0;
                double t0 = now(), t;
                do {
                    if (lib == 0)
                        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K,
                                    1.0f, A, lda, B, ldb, 0.0f, C, N);
                    else
                        dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N);
                    reps++;
                } while ((t = now() - t0) < 0.1);
                if (t / reps < best) best = t / reps;
            }
            gflops[lib] = 2.0 * M * N * K / best / 1e9;
        }
        char shape[40];
        snprintf(shape, sizeof shape, "%d x %d x %d %s%s", M, N, K, ta ? "T" : "N", tb ? "T" : "N");
        printf("%-26s %-34s %10.1f %10.1f\n", shape, shapes[s].what, gflops[0], gflops[1]);
        free(A), free(B), free(C);
    }
    return 0;
}
