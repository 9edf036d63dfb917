/* test_vec_ops.c — the vector helpers of ops.h that the training step leans on:
 *   - vec_zero clears exactly [out, out + n): below its streaming threshold (plain stores) and
 *     above it (non-temporal stores on x86-64, from an address that is not 16-byte aligned and a
 *     length that is not a multiple of 4), leaving the floats on either side alone;
 *   - vec_stream / copy_stream (non-temporal stores: the Python cache's copies) copy exactly
 *     [a, a + n) to [out, out + n), from any float alignment, on the OpenMP threads and on one,
 *     leaving the floats on either side alone;
 *   - the gradient norm's sum of squares (sumsq_lanes): the lanes are exactly their definition's
 *     (lanes[j % SUMSQ_LANES] += x[j]^2 in order, written out here), fed whole or in pieces, with
 *     tails of every length. ctest runs it natively (the AVX-512 kernel where the CPU has it) and
 *     with TLM_ISA=avx2 (the portable loop). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"
#include "util/cpu.h"

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

/* vec_stream (threads) or copy_stream (one) of n floats to out + offset, from src + offset2 */
static int check_stream(size_t n, size_t offset, size_t offset2, int threads) {
    const size_t total = n + 16 + 3;
    float *buf = malloc(total * sizeof(float)), *src = malloc((n + 16) * sizeof(float));
    if (!buf || !src) return free(buf), free(src), printf("SKIP: cannot allocate %zu floats\n", total), 0;
    for (size_t i = 0; i < total; i++) buf[i] = NAN;
    for (size_t i = 0; i < n + 16; i++) src[i] = (float)i * 0.5f - 7.0f;
    (threads ? vec_stream : copy_stream)(buf + offset, src + offset2, n);
    size_t bad = 0;
    for (size_t i = 0; i < total; i++) {
        const int inside = i >= offset && i < offset + n;
        if (inside ? memcmp(&buf[i], &src[i - offset + offset2], sizeof(float)) != 0 : !isnan(buf[i])) bad++;
    }
    free(buf), free(src);
    if (bad) printf("%s n=%zu to +%zu from +%zu floats: %zu wrong\n", threads ? "vec_stream" : "copy_stream", n, offset,
                    offset2, bad);
    return bad != 0;
}

/* n floats fed to sumsq_lanes in pieces of `piece` (a multiple of SUMSQ_LANES), against the
 * definition; 1 when a lane differs */
static int check_sumsq(const float *x, size_t n, size_t piece) {
    float want[SUMSQ_LANES] = {0}, got[SUMSQ_LANES] = {0};
    for (size_t j = 0; j < n; j++) {
        const float sq = x[j] * x[j]; /* (rounded, then added: no contraction in this build) */
        want[j % SUMSQ_LANES] += sq;
    }
    for (size_t lo = 0; lo < n; lo += piece) sumsq_lanes(got, x + lo, n - lo < piece ? n - lo : piece);
    int bad = memcmp(want, got, sizeof want) != 0;
    const float tw = sumsq_lanes_total(want), tg = sumsq_lanes_total(got);
    bad |= memcmp(&tw, &tg, sizeof tw) != 0;
    if (bad) printf("sumsq_lanes n=%zu in pieces of %zu: lanes differ from the definition\n", n, piece);
    return bad;
}

int main(void) {
    int fail = 0;
    printf("kernels: %s\n", tlm_isa_name(tlm_cpu_isa()));
    enum { N = 4 * 4096 + 77 };
    float *x = malloc(N * sizeof(float));
    unsigned seed = 12345;
    for (int j = 0; j < N; j++) { /* magnitudes over many binades, so that the order of the sums shows */
        seed = seed * 1664525u + 1013904223u;
        x[j] = ((float)(seed >> 8) / 16777216.0f - 0.5f) * ldexpf(1.0f, (int)(seed % 24) - 12);
    }
    for (size_t n = 0; n <= 200; n++) fail |= check_sumsq(x, n, 4096);
    fail |= check_sumsq(x, N, 4096);
    fail |= check_sumsq(x, N, 64);
    fail |= check_sumsq(x, N, N);
    free(x);
    printf("sumsq_lanes: %s\n", fail ? "differs" : "the definition's lanes, whole and in pieces");
    int bad_stream = 0;
    const size_t stream_n[] = {0, 1, 3, 4, 5, 17, 64, 1000, 16384, 16385, 100003};
    for (size_t i = 0; i < sizeof stream_n / sizeof *stream_n; i++)
        for (size_t off = 0; off < 5; off++)
            for (int threads = 0; threads < 2; threads++)
                bad_stream |= check_stream(stream_n[i], off, (off * 3) % 5, threads);
    printf("vec_stream, copy_stream: %s\n", bad_stream ? "differ" : "exact copies, nothing outside written");
    fail |= bad_stream;
    fail |= check(1000, 1);
    fail |= check(((size_t)1 << 26) + 7, 1); /* 256 MiB + 28 bytes: the streaming path */
    fail |= check(((size_t)1 << 26) + 1, 4);
    printf(fail ? "FAIL\n" : "PASS\n");
    return fail;
}
