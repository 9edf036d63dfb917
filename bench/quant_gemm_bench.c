/* quant_gemm_bench.c — a prompt's products with quantized weights (matmul_forward_quant, N rows of
 * x), the widening GEMM (bf16 products, as `generate --precision auto` takes them on a CPU with
 * AVX512-BF16 / AMX-BF16, and f32) against the integer GEMM (quant_gemm.c, WQ_PRODUCTS_INT8).
 *
 *   quant_gemm_bench [TYPE ...] [--rows N] [--reps R] [--int8-only] [--shape OCxIC]
 *
 * Default: Q4_K and Q8_0, 512 rows, the matrices of one Llama-3.2-1B layer (d 2048, 8 KV heads
 * of 64, FFN 8192: q and o 2048x2048, k and v 512x2048, gate and up 8192x2048, down 2048x8192),
 * on the threads OMP_NUM_THREADS gives (--shape: that one matrix instead). The paths take turns, R rounds (default 5); per shape the
 * best and the median milliseconds of each path and the best CPU time (all threads), and the
 * layer's totals (the best times summed) with the integer GEMM's speedup. On a shared machine the best rounds are the ones to compare.
 * (Built on demand: make quant_gemm_bench.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <omp.h>

#include "ops/ops.h"
#include "ops/quant.h"
#include "ops/quant_gemm.h"
#include "util/rng.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* the process's CPU time (all threads): on a shared machine, the work done rather than the wait */
static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int types[16], nt = 0, N = 512, R = 5, first = 0;
    int shapes[4][3] = {{2048, 2048, 2}, {512, 2048, 2}, {8192, 2048, 2}, {2048, 8192, 1}}; /* OC, IC, per layer */
    int nshapes = 4;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rows") && i + 1 < argc) N = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) R = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--int8-only")) first = 2;
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc && sscanf(argv[++i], "%dx%d", &shapes[0][0], &shapes[0][1]) == 2)
            nshapes = 1, shapes[0][2] = 1;
        else if (nt < 16 && !wq_from_name(argv[i], &types[nt])) nt++;
        else return fprintf(stderr, "usage: quant_gemm_bench [TYPE ...] [--rows N] [--reps R] [--int8-only] [--shape OCxIC]\n"), 2;
    }
    if (!nt) types[nt++] = WQ_Q4_K, types[nt++] = WQ_Q8_0;
    if (N < 1 || R < 1 || R > 64) return fprintf(stderr, "--rows and --reps: positive (reps at most 64)\n"), 2;
    const char *names[3] = {"bf16 GEMM", "f32 GEMM", "int8 GEMM"};
    rng_state rng;
    rng_seed(&rng, 1);
    printf("%d rows of x, %d threads; int8 body: ", N, omp_get_max_threads());
    for (int ti = 0; ti < nt; ti++) printf("%s %s%s", wq_name(types[ti]), wq_gemm_name(wq_gemm_pick(types[ti])), ti + 1 < nt ? ", " : "\n");
    for (int ti = 0; ti < nt; ti++) {
        const int t = types[ti];
        double layer[3] = {0}, layer_cpu[3] = {0};
        for (int s = 0; s < nshapes; s++) {
            const int OC = shapes[s][0], IC = shapes[s][1];
            const size_t row = wq_row_bytes(t, IC);
            uint8_t *W = malloc(row * OC);
            float *x = malloc(sizeof(float) * (size_t)N * IC), *y = malloc(sizeof(float) * (size_t)N * OC);
            float *tile = malloc(sizeof(float) * MATMUL_BF16_TILE * IC), *w = malloc(sizeof(float) * IC);
            /* (16 gaussian rows quantized, repeated: only the time is measured) */
            for (int o = 0; o < OC; o++) {
                if (o < 16) {
                    for (int k = 0; k < IC; k++) w[k] = (float)rng_normal(&rng) * 0.02f;
                    wq_quantize_row(t, w, W + o * row, IC);
                } else
                    memcpy(W + o * row, W + (o % 16) * row, row);
            }
            for (size_t i = 0; i < (size_t)N * IC; i++) x[i] = (float)rng_normal(&rng);
            double ms[3][64], cpu[3][64];
            for (int r = 0; r <= R; r++) /* (round 0 warms up) */
                for (int p = first; p < 3; p++) {
                    wq_set_products(p == 2 ? WQ_PRODUCTS_INT8 : WQ_PRODUCTS_EXACT);
                    const double t0 = now_ms(), c0 = cpu_ms();
                    matmul_forward_quant(y, x, W, t, NULL, N, IC, OC, tile, p == 0);
                    if (r) ms[p][r - 1] = now_ms() - t0, cpu[p][r - 1] = cpu_ms() - c0;
                }
            wq_set_products(WQ_PRODUCTS_EXACT);
            for (int p = first; p < 3; p++) {
                qsort(ms[p], R, sizeof(double), cmp_double);
                qsort(cpu[p], R, sizeof(double), cmp_double);
                printf("%-5s %5dx%-5d %-10s best %8.2f ms  median %8.2f ms  %6.1f GMAC/s (best)  cpu %8.2f ms (best)\n",
                       wq_name(t), OC, IC, names[p], ms[p][0], ms[p][R / 2], (double)N * OC * IC / ms[p][0] * 1e-6,
                       cpu[p][0]);
                layer[p] += shapes[s][2] * ms[p][0], layer_cpu[p] += shapes[s][2] * cpu[p][0];
            }
            free(W), free(x), free(y), free(tile), free(w);
        }
        printf("%-5s one layer (best rounds): bf16 %.1f ms, f32 %.1f ms, int8 %.1f ms: int8 %.2fx bf16; cpu time: "
               "bf16 %.1f ms, f32 %.1f ms, int8 %.1f ms: int8 %.2fx bf16\n",
               wq_name(t), layer[0], layer[1], layer[2], layer[0] / layer[2], layer_cpu[0], layer_cpu[1], layer_cpu[2],
               layer_cpu[0] / layer_cpu[2]);
    }
    return 0;
}
