/* quant_bench.c — GB/s of weights read by matvec_quant (one row of x, the decoding case) for
 * ggml's block formats, on 1 and 2 threads.
 *
 *   quant_bench [TYPE ...] [--shape OCxIC ...] [--ms MS] [--rows N] [--copies K] [--threads N]
 *
 * Default: Q8_0 Q4_0 Q4_K Q5_K Q6_K F16 and the generic path's Q4_1 Q3_K, shapes 2048x768 and
 * 32000x768 (a small model's projection and a 32000-token output head). Each measurement is the
 * median of repeated calls over about MS milliseconds (default 300) after a warm-up, on 1 and on 2
 * threads (--threads N: N only), and the best call (on a shared machine the median includes other
 * processes' time slices); the matrix is the same every call, so a matrix smaller than the caches
 * is read from them. Each type is timed on
 * the exact products (weights widened to f32) and, where it has them, the integer products
 * (quant.h's WQ_PRODUCTS_INT8), one after the other in the same run. Prints: type, path, shape,
 * MB of weights, threads, microseconds per call (median), GB/s (median, best), and for the
 * integer path its speedup over the exact one (the medians' ratio). --copies K: K copies of each
 * matrix back to back in one buffer of 2 MiB pages (as the model's weights are held), each call
 * the next copy, so that with K x MB beyond the last-level cache the weights stream from DRAM as
 * in a decoding step (the default, 1, times the caches). (Built on demand: make quant_bench.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <omp.h>

#include "ops/quant.h"
#include "util/cpu.h"
#include "util/hugepage.h"
#include "util/rng.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* `copies` weight matrices of type t back to back (2 MiB pages): gaussian rows quantized where
 * tinylm writes t, else random bytes with every f16 field set to a small scale (only the speed is
 * measured); the copies are the first's bytes */
static void *make_weights(int t, int OC, int IC, int copies, rng_state *r) {
    const size_t row = wq_row_bytes(t, IC), mat = row * OC;
    uint8_t *W = NULL;
    if (posix_memalign((void **)&W, (size_t)2 << 20, mat * copies)) return NULL;
    tlm_advise_huge(W, mat * copies);
    float *x = malloc(sizeof(float) * IC);
    for (int o = 0; o < OC; o++) {
        if (wq_can_quantize(t)) {
            for (int k = 0; k < IC; k++) x[k] = (float)rng_normal(r) * 0.02f;
            wq_quantize_row(t, x, W + o * row, IC);
        } else {
            for (size_t k = 0; k < row; k++) W[o * row + k] = (uint8_t)rng_u64(r);
            for (size_t k = 0; k + 1 < row; k += wq_block_bytes(t)) /* (d at the block's end for Q2_K / Q3_K) */
                W[o * row + k + wq_block_bytes(t) - 1] = 0x20, W[o * row + k + wq_block_bytes(t) - 3] = 0x20;
        }
    }
    free(x);
    for (int c = 1; c < copies; c++) memcpy(W + mat * c, W, mat);
    return W;
}

int main(int argc, char **argv) {
    int types[32], ntypes = 0, shapes[8][2], nshapes = 0, rows = 1, copies = 1, only_threads = 0;
    double ms = 300;
    for (int i = 1; i < argc; i++) {
        int t;
        if (!strcmp(argv[i], "--shape") && i + 1 < argc && nshapes < 8 &&
            sscanf(argv[i + 1], "%dx%d", &shapes[nshapes][0], &shapes[nshapes][1]) == 2)
            nshapes++, i++;
        else if (!strcmp(argv[i], "--ms") && i + 1 < argc)
            ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc)
            rows = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc && atoi(argv[i + 1]) >= 1)
            only_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--copies") && i + 1 < argc && atoi(argv[i + 1]) >= 1)
            copies = atoi(argv[++i]);
        else if (wq_from_name(argv[i], &t) == 0 && wq_supported(t) && ntypes < 32)
            types[ntypes++] = t;
        else
            return fprintf(stderr, "usage: quant_bench [TYPE ...] [--shape OCxIC ...] [--ms MS] [--rows N] "
                                   "[--copies K] [--threads N]\n"),
                   2;
    }
    if (!ntypes) {
        const int def[] = {WQ_Q8_0, WQ_Q4_0, WQ_Q4_K, WQ_Q5_K, WQ_Q6_K, WQ_F16, WQ_Q4_1, WQ_Q3_K};
        for (size_t i = 0; i < sizeof def / sizeof def[0]; i++) types[ntypes++] = def[i];
    }
    if (!nshapes) shapes[0][0] = 2048, shapes[0][1] = 768, shapes[1][0] = 32000, shapes[1][1] = 768, nshapes = 2;
    printf("kernels: %s, integer products %s; %d row(s) of x; %d cop%s of each matrix\n",
           tlm_isa_name(tlm_cpu_isa()), wq_int_path_name(wq_int_path_pick()), rows, copies, copies > 1 ? "ies" : "y");
    printf("%-5s %-5s %12s %8s %7s %10s %8s %10s %9s\n", "type", "path", "OCxIC", "MB", "threads", "us/call", "GB/s",
           "best GB/s", "speedup");
    rng_state r;
    rng_seed(&r, 1);
    for (int s = 0; s < nshapes; s++) {
        const int OC = shapes[s][0], IC = shapes[s][1];
        float *x = malloc(sizeof(float) * rows * IC), *y = malloc(sizeof(float) * rows * OC);
        for (int k = 0; k < rows * IC; k++) x[k] = (float)rng_normal(&r);
        for (int i = 0; i < ntypes; i++) {
            const int t = types[i];
            if (IC % wq_block_elems(t)) continue;
            uint8_t *W = make_weights(t, OC, IC, copies, &r);
            if (!W) return fprintf(stderr, "quant_bench: out of memory for %d copies of %dx%d\n", copies, OC, IC), 1;
            const size_t mat = wq_row_bytes(t, IC) * (size_t)OC;
            int c = 0;
            const double mb = wq_row_bytes(t, IC) * (double)OC / 1e6;
            for (int nt = 1; nt <= 2; nt++) {
                if (only_threads && nt != only_threads) continue;
                omp_set_num_threads(nt);
                double med_mode[2] = {0, 0};
                for (int mode = 0; mode < 2; mode++) {
                    if (mode == 1 && !wq_int_supported(t)) continue;
                    wq_set_products(mode ? WQ_PRODUCTS_INT8 : WQ_PRODUCTS_EXACT);
                    for (int w = 0; w < 3; w++)
                        matvec_quant(y, x, W + mat * (c = (c + 1) % copies), t, NULL, rows, IC, OC);
                    enum { MAXREP = 20000 };
                    static double times[MAXREP];
                    int reps = 0;
                    const double t_end = now_s() + ms / 1e3;
                    while (reps < MAXREP && (reps < 5 || now_s() < t_end)) {
                        const double t0 = now_s();
                        matvec_quant(y, x, W + mat * (c = (c + 1) % copies), t, NULL, rows, IC, OC);
                        times[reps++] = now_s() - t0;
                    }
                    qsort(times, reps, sizeof times[0], cmp_double);
                    const double med = times[reps / 2];
                    med_mode[mode] = med;
                    char shape[32], ratio[16] = "";
                    snprintf(shape, sizeof shape, "%dx%d", OC, IC);
                    if (mode == 1) snprintf(ratio, sizeof ratio, "%.2fx", med_mode[0] / med);
                    printf("%-5s %-5s %12s %8.2f %7d %10.1f %8.1f %10.1f %9s\n", wq_name(t), mode ? "int8" : "exact",
                           shape, mb, nt, med * 1e6, mb / 1e3 / med, mb / 1e3 / times[0], ratio);
                }
                wq_set_products(WQ_PRODUCTS_EXACT);
            }
            free(W);
        }
        free(x), free(y);
    }
    return 0;
}
