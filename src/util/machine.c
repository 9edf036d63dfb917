/* machine.c — see machine.h. The kernels follow util/cpu.h's choice of instruction set. */
#include "machine.h"
#include "hugepage.h"

#include <omp.h>
#include <stdlib.h>

#include "clock.h"
#include "cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

enum { CHAINS = 12 }; /* independent accumulators: more than FMA latency x FMA ports */

/* flops done by `iters` rounds of CHAINS fmas of `width` floats; the result keeps them alive */
#if defined(__x86_64__)
__attribute__((target("avx512f"))) static float fma_avx512(long iters) {
    __m512 acc[CHAINS];
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int j = 0; j < CHAINS; j++) acc[j] = _mm512_set1_ps((float)j);
    for (long i = 0; i < iters; i++)
        for (int j = 0; j < CHAINS; j++) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
    float s = 0;
    for (int j = 0; j < CHAINS; j++) s += _mm512_reduce_add_ps(acc[j]);
    return s;
}

__attribute__((target("avx2,fma"))) static float fma_avx2(long iters) {
    __m256 acc[CHAINS];
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (int j = 0; j < CHAINS; j++) acc[j] = _mm256_set1_ps((float)j);
    for (long i = 0; i < iters; i++)
        for (int j = 0; j < CHAINS; j++) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
    float out[8], s = 0;
    for (int j = 0; j < CHAINS; j++) {
        _mm256_storeu_ps(out, acc[j]);
        for (int k = 0; k < 8; k++) s += out[k];
    }
    return s;
}
#endif

static float fma_scalar(long iters) {
    float acc[CHAINS];
    for (int j = 0; j < CHAINS; j++) acc[j] = (float)j;
    for (long i = 0; i < iters; i++)
        for (int j = 0; j < CHAINS; j++) acc[j] = acc[j] * 0.999999f + 1e-7f;
    float s = 0;
    for (int j = 0; j < CHAINS; j++) s += acc[j];
    return s;
}

/* sum of buf[0..n), n a multiple of 64, with 4 vector accumulators: load-bound, not add-bound */
#if defined(__x86_64__)
__attribute__((target("avx512f"))) static float read_avx512(const float *buf, size_t n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_loadu_ps(buf + i));
        a1 = _mm512_add_ps(a1, _mm512_loadu_ps(buf + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_loadu_ps(buf + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_loadu_ps(buf + i + 48));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

__attribute__((target("avx2"))) static float read_avx2(const float *buf, size_t n) {
    __m256 a[8];
    for (int k = 0; k < 8; k++) a[k] = _mm256_setzero_ps();
    for (size_t i = 0; i < n; i += 64)
        for (int k = 0; k < 8; k++) a[k] = _mm256_add_ps(a[k], _mm256_loadu_ps(buf + i + 8 * k));
    float out[8], s = 0;
    for (int k = 0; k < 8; k++) {
        _mm256_storeu_ps(out, a[k]);
        for (int j = 0; j < 8; j++) s += out[j];
    }
    return s;
}
#endif

static float read_sum(tlm_isa isa, const float *buf, size_t n) {
#if defined(__x86_64__)
    if (isa == TLM_ISA_AVX512) return read_avx512(buf, n);
    if (isa == TLM_ISA_AVX2) return read_avx2(buf, n);
#else
    (void)isa;
#endif
    float s[16] = {0};
    for (size_t i = 0; i < n; i += 16)
        for (int k = 0; k < 16; k++) s[k] += buf[i + k];
    float t = 0;
    for (int k = 0; k < 16; k++) t += s[k];
    return t;
}

static float run_fma(tlm_isa isa, long iters, int *width) {
#if defined(__x86_64__)
    if (isa == TLM_ISA_AVX512) return *width = 16, fma_avx512(iters);
    if (isa == TLM_ISA_AVX2) return *width = 8, fma_avx2(iters);
#endif
    return *width = 1, fma_scalar(iters);
}

double tlm_measure_fma_gflops(double seconds) {
    const tlm_isa isa = tlm_cpu_isa();
    long iters = 1 << 20;
    double best = 0;
    volatile float sink = 0;
    for (int round = 0; round < 6; round++) {
        int width = 1;
        double t0 = tlm_now_s();
#pragma omp parallel reduction(+ : sink)
        {
            int w;
            sink += run_fma(isa, iters, &w);
#pragma omp master
            width = w;
        }
        double dt = tlm_now_s() - t0;
        double gflops = 2.0 * CHAINS * width * (double)iters * omp_get_max_threads() / dt / 1e9;
        if (gflops > best) best = gflops;
        if (dt < seconds / 2) iters *= 2; /* grow until one round takes about `seconds` */
    }
    (void)sink;
    return best;
}

double tlm_measure_read_gbs(int mib) {
    const size_t n = (size_t)mib << 18; /* floats */
    float *buf = malloc(n * sizeof(float));
    if (!buf) return 0;
    tlm_advise_huge(buf, n * sizeof(float)); /* the pages the engine's weights get */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) buf[i] = (float)(i & 7);
    double best = 0;
    volatile float sink = 0;
    for (int round = 0; round < 5; round++) {
        double t0 = tlm_now_s();
        float total = 0;
        const tlm_isa isa = tlm_cpu_isa();
#pragma omp parallel reduction(+ : total)
        { /* each thread reads its contiguous share */
            const int T = omp_get_num_threads(), id = omp_get_thread_num();
            const size_t per = n / 64 / T * 64;
            total += read_sum(isa, buf + per * id, per);
        }
        double dt = tlm_now_s() - t0;
        sink += total;
        double gbs = (double)(n / 64 / omp_get_max_threads() * 64 * omp_get_max_threads()) * sizeof(float) / dt / 1e9;
        if (gbs > best) best = gbs;
    }
    (void)sink; /* (read once, so that clang's -Wunused-but-set-variable sees it used) */
    free(buf);
    (void)sink;
    return best;
}
