/* matvec.c — a few rows times a weight matrix, streaming the weights once: the kernel of
 * decoding (one token) and of short prompts. It is memory-bound, so the only goals are to
 * read each weight byte once at full bandwidth and keep the FMAs out of the way.
 *
 * Weights are f32 or bf16; bf16 is widened to f32 in registers (a shift), so the arithmetic
 * is exactly the f32 path's on the same (rounded) values. Kernels for AVX-512, AVX2+FMA and
 * plain C are compiled into one binary and chosen at run time from cpuid (util/cpu.h).
 *
 * Layout: y [N, OC] (+)= x [N, IC] @ W[OC, IC]^T (+ bias [OC]); N <= MATVEC_MAX_ROWS per call
 * of the inner kernel (longer inputs are done MATVEC_MAX_ROWS rows at a time). */
#include <stdint.h>
#include <string.h>

#include <omp.h>

#include "ops.h"
#include "util/cpu.h"
#include "util/f16.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define TLM_X86_KERNELS 1
#endif

/* ---- plain C ---------------------------------------------------------------------------------- */

static inline float w_at(const void *W, int bf16, size_t i) {
    return bf16 ? tlm_bf16_to_f32(((const uint16_t *)W)[i]) : ((const float *)W)[i];
}

static void rows_scalar(float *y, const float *x, const void *W, int bf16, int rows, int IC, int OC, int o0, int o1) {
    for (int o = o0; o < o1; o++)
        for (int n = 0; n < rows; n++) {
            const float *xn = x + (size_t)n * IC;
            float s = 0.0f;
            for (int k = 0; k < IC; k++) s += xn[k] * w_at(W, bf16, (size_t)o * IC + k);
            y[(size_t)n * OC + o] = s;
        }
}

#ifdef TLM_X86_KERNELS
/* ---- AVX-512 ------------------------------------------------------------------------------------ */

__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) static inline __m512 load16(const void *W, int bf16,
                                                                                       size_t i, __mmask16 m) {
    if (bf16) {
        __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)W + i);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    return _mm512_maskz_loadu_ps(m, (const float *)W + i);
}

/* One output at a time, reading its weight row front to back: each thread streams one
 * contiguous range of W (its share of the output rows), which the hardware prefetcher follows;
 * reading several rows side by side makes several short streams (a row of bf16 weights is
 * 1.5 KB for d = 768) that it does not. Two accumulators per input row hide the FMA latency.
 * rows is a compile-time constant at each call site below, so the accumulators stay in
 * registers.
 *
 * The hardware prefetcher alone keeps too few lines in flight (it stops at each 4 KiB page), so
 * every cache line of the stream is also asked for MATVEC_PREFETCH_BYTES ahead, into L2 (T1).
 * The distance, the level (T1) and the gain over the hardware prefetcher alone were measured
 * (docs/performance.md, "Figures behind the code"). The lines past the thread's share are the next
 * rows or the next matrix, read soon anyway. */

#define PREFETCH_AHEAD(p) _mm_prefetch((const char *)(p) + MATVEC_PREFETCH_BYTES, _MM_HINT_T1)
__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) static inline void
rows_avx512_n(float *y, const float *x, const void *W, int bf16, const int rows, int IC, int OC, int o0, int o1) {
    const int K32 = IC & ~31;
    for (int o = o0; o < o1; o++) {
        const size_t w0 = (size_t)o * IC;
        __m512 acc[MATVEC_MAX_ROWS][2];
        for (int n = 0; n < rows; n++) acc[n][0] = acc[n][1] = _mm512_setzero_ps();
        int k = 0;
        for (; k < K32; k += 32) { /* (32 weights: one line of bf16, two of f32) */
            if (bf16)
                PREFETCH_AHEAD((const uint16_t *)W + w0 + k);
            else {
                PREFETCH_AHEAD((const float *)W + w0 + k);
                PREFETCH_AHEAD((const float *)W + w0 + k + 16);
            }
            const __m512 wa = load16(W, bf16, w0 + k, 0xffff), wb = load16(W, bf16, w0 + k + 16, 0xffff);
            for (int n = 0; n < rows; n++) {
                acc[n][0] = _mm512_fmadd_ps(wa, _mm512_loadu_ps(x + (size_t)n * IC + k), acc[n][0]);
                acc[n][1] = _mm512_fmadd_ps(wb, _mm512_loadu_ps(x + (size_t)n * IC + k + 16), acc[n][1]);
            }
        }
        for (; k < IC; k += 16) {
            const __mmask16 m = IC - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (IC - k)) - 1);
            const __m512 w = load16(W, bf16, w0 + k, m);
            for (int n = 0; n < rows; n++)
                acc[n][0] = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m, x + (size_t)n * IC + k), acc[n][0]);
        }
        for (int n = 0; n < rows; n++) y[(size_t)n * OC + o] = _mm512_reduce_add_ps(_mm512_add_ps(acc[n][0], acc[n][1]));
    }
}

__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) static void
rows_avx512(float *y, const float *x, const void *W, int bf16, int rows, int IC, int OC, int o0, int o1) {
    switch (rows) {
    case 1: rows_avx512_n(y, x, W, bf16, 1, IC, OC, o0, o1); break;
    case 2: rows_avx512_n(y, x, W, bf16, 2, IC, OC, o0, o1); break;
    case 3: rows_avx512_n(y, x, W, bf16, 3, IC, OC, o0, o1); break;
    default: rows_avx512_n(y, x, W, bf16, 4, IC, OC, o0, o1); break;
    }
}

/* ---- AVX2 + FMA ----------------------------------------------------------------------------------- */

__attribute__((target("avx2,fma"))) static inline __m256 load8(const void *W, int bf16, size_t i) {
    if (bf16) {
        __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)W + i));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    return _mm256_loadu_ps((const float *)W + i);
}

__attribute__((target("avx2,fma"))) static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) static inline void rows_avx2_n(float *y, const float *x, const void *W, int bf16,
                                                                   const int rows, int IC, int OC, int o0, int o1) {
    const int K16 = IC & ~15, K8 = IC & ~7;
    for (int o = o0; o < o1; o++) {
        const size_t w0 = (size_t)o * IC;
        __m256 acc[MATVEC_MAX_ROWS][2];
        for (int n = 0; n < rows; n++) acc[n][0] = acc[n][1] = _mm256_setzero_ps();
        int k = 0;
        for (; k < K16; k += 16) { /* (16 weights: half a line of bf16, one of f32) */
            if (!bf16)
                PREFETCH_AHEAD((const float *)W + w0 + k);
            else if ((k & 31) == 0)
                PREFETCH_AHEAD((const uint16_t *)W + w0 + k);
            const __m256 wa = load8(W, bf16, w0 + k), wb = load8(W, bf16, w0 + k + 8);
            for (int n = 0; n < rows; n++) {
                acc[n][0] = _mm256_fmadd_ps(wa, _mm256_loadu_ps(x + (size_t)n * IC + k), acc[n][0]);
                acc[n][1] = _mm256_fmadd_ps(wb, _mm256_loadu_ps(x + (size_t)n * IC + k + 8), acc[n][1]);
            }
        }
        for (; k < K8; k += 8) {
            const __m256 w = load8(W, bf16, w0 + k);
            for (int n = 0; n < rows; n++) acc[n][0] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + (size_t)n * IC + k), acc[n][0]);
        }
        for (int n = 0; n < rows; n++) {
            float s = hsum8(_mm256_add_ps(acc[n][0], acc[n][1]));
            for (int j = K8; j < IC; j++) s += x[(size_t)n * IC + j] * w_at(W, bf16, w0 + j);
            y[(size_t)n * OC + o] = s;
        }
    }
}

__attribute__((target("avx2,fma"))) static void rows_avx2(float *y, const float *x, const void *W, int bf16, int rows,
                                                          int IC, int OC, int o0, int o1) {
    switch (rows) {
    case 1: rows_avx2_n(y, x, W, bf16, 1, IC, OC, o0, o1); break;
    case 2: rows_avx2_n(y, x, W, bf16, 2, IC, OC, o0, o1); break;
    case 3: rows_avx2_n(y, x, W, bf16, 3, IC, OC, o0, o1); break;
    default: rows_avx2_n(y, x, W, bf16, 4, IC, OC, o0, o1); break;
    }
}
#endif

/* ---- dispatch --------------------------------------------------------------------------------------- */

typedef void (*rows_kernel)(float *, const float *, const void *, int, int, int, int, int, int);

static rows_kernel pick(void) {
#ifdef TLM_X86_KERNELS
    switch (tlm_cpu_isa()) {
    case TLM_ISA_AVX512: return rows_avx512;
    case TLM_ISA_AVX2: return rows_avx2;
    default: break;
    }
#endif
    return rows_scalar;
}

static void matvec(float *y, const float *x, const void *W, int bf16, const float *bias, int N, int IC, int OC) {
    const rows_kernel kernel = pick();
    for (int n0 = 0; n0 < N; n0 += MATVEC_MAX_ROWS) {
        const int rows = N - n0 < MATVEC_MAX_ROWS ? N - n0 : MATVEC_MAX_ROWS;
        float *yn = y + (size_t)n0 * OC;
        const float *xn = x + (size_t)n0 * IC;
        /* each thread one contiguous, equal share of the output rows (a multiple of 16), so that it
         * streams its own range of W and all finish together: the time of a memory-bound call is
         * its slowest thread's (64-row blocks split d = 288 as 192 + 96) */
#pragma omp parallel
        {
            const int nt = omp_get_num_threads(), id = omp_get_thread_num();
            const int per = ((OC + nt - 1) / nt + 15) & ~15;
            const int o0 = id * per < OC ? id * per : OC, o1 = o0 + per < OC ? o0 + per : OC;
            if (o1 > o0) {
                kernel(yn, xn, W, bf16, rows, IC, OC, o0, o1);
                if (bias)
                    for (int n = 0; n < rows; n++)
                        for (int o = o0; o < o1; o++) yn[(size_t)n * OC + o] += bias[o];
            }
        }
    }
}

void matvec_f32(float *y, const float *x, const float *W, const float *bias, int N, int IC, int OC) {
    matvec(y, x, W, 0, bias, N, IC, OC);
}

void matvec_bf16(float *y, const float *x, const uint16_t *W, const float *bias, int N, int IC, int OC) {
    matvec(y, x, W, 1, bias, N, IC, OC);
}

void matvec_part(float *y, const float *x, const float *W, const uint16_t *W16, const float *bias, int IC, int o0,
                 int o1) {
    if (o1 <= o0) return;
    /* (one row: the kernel indexes y by the row only, so OC is not used; o1 stands in for it) */
    pick()(y, x, W16 ? (const void *)W16 : (const void *)W, W16 != NULL, 1, IC, o1, o0, o1);
    if (bias)
        for (int o = o0; o < o1; o++) y[o] += bias[o];
}
