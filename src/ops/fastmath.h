/* fastmath.h — exp and tanh as inline float arithmetic (no libm call), so that loops over
 * activations, soft-caps and softmax rows vectorize. Accuracy is tested against libm in
 * tests/ops (tanh: absolute error < 3e-7; exp: relative error < 2e-7). */
#ifndef TLM_FASTMATH_H
#define TLM_FASTMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* cond ? a : b on the bit patterns: no branch, so that gcc and clang vectorize the loops
 * around it (a ternary on a NaN test becomes control flow that neither vectorizes) */
static inline float select_bits(int cond, float a, float b) {
    uint32_t ua, ub, mask = 0u - (uint32_t)(cond != 0);
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    ua = (ua & mask) | (ub & ~mask);
    float r;
    memcpy(&r, &ua, sizeof r);
    return r;
}

/* exp: x = n ln2 + r, |r| <= ln2/2, e^r by its degree-6 Taylor polynomial, times 2^n built
 * in the exponent bits. The input is clamped to [-87, 88] first, NaN to -87 (the comparisons
 * are false for NaN), so the float-to-int conversion is always defined: for callers whose
 * result carries a NaN input through another factor (x * sigmoid(x)), this is all they need. */
static inline float exp_clamped(float x) {
    x = x > -87.0f ? x : -87.0f;
    x = x < 88.0f ? x : 88.0f;
    /* n = round(x / ln2) by the 1.5 * 2^23 trick: plain arithmetic, so the loop vectorizes */
    float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693145752f - n * 1.42860677e-6f;
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (0.166666672f + r * (0.0416666679f + r * (0.00833333377f + r * 0.00138888892f)))));
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* exp with NaN in, NaN out */
static inline float exp_approx(float x) { return select_bits(x != x, x, exp_clamped(x)); }

/* tanh(x) = 1 - 2 / (e^{2x} + 1) */
static inline float tanh_inline(float x) {
    x = x < -10.0f ? -10.0f : x; /* tanh(10) rounds to 1 in float */
    x = x > 10.0f ? 10.0f : x;
    return 1.0f - 2.0f / (exp_approx(2.0f * x) + 1.0f);
}

/* The soft-cap cap * tanh(x / cap). Where |x / cap| < 1/16 it is x (1 - u^2/3 + 2u^4/15), u = x / cap
 * (tanh's series, the next term below 4e-9 of x): 1 - 2 / (e^{2u} + 1) cancels u's digits away
 * there, to 0 below float's epsilon, so that a cap far above the logits (1e38) would zero them
 * all instead of leaving them about as they are. */
static inline float softcap_inline(float x, float cap) {
    const float u = x / cap, u2 = u * u;
    const float series = x * (1.0f - u2 * (1.0f / 3.0f - u2 * (2.0f / 15.0f)));
    return select_bits(fabsf(u) < 0.0625f, series, cap * tanh_inline(u));
}

/* Reductions over x[0..n) in 16 independent lanes, combined at the end: plain loops that gcc
 * and clang both vectorize without an `omp simd` request (which clang must report as failed
 * when it cannot honour it, as under the sanitizers). The order of the additions is fixed by n
 * alone, so results do not depend on the thread count. */
enum { FM_LANES = 16 };

static inline float max_lanes(const float *x, int n) {
    float lane[FM_LANES];
    for (int k = 0; k < FM_LANES; k++) lane[k] = -INFINITY;
    int j = 0;
    for (; j + FM_LANES <= n; j += FM_LANES)
        for (int k = 0; k < FM_LANES; k++) lane[k] = x[j + k] > lane[k] ? x[j + k] : lane[k];
    for (int k = 0; j + k < n; k++) lane[k] = x[j + k] > lane[k] ? x[j + k] : lane[k];
    float m = lane[0];
    for (int k = 1; k < FM_LANES; k++) m = lane[k] > m ? lane[k] : m;
    return m;
}

/* sum of a[i] * b[i] (b NULL: sum of a[i]) */
static inline float dot_lanes(const float *a, const float *b, int n) {
    float lane[FM_LANES] = {0};
    int j = 0;
    if (b) {
        for (; j + FM_LANES <= n; j += FM_LANES)
            for (int k = 0; k < FM_LANES; k++) lane[k] += a[j + k] * b[j + k];
        for (int k = 0; j + k < n; k++) lane[k] += a[j + k] * b[j + k];
    } else {
        for (; j + FM_LANES <= n; j += FM_LANES)
            for (int k = 0; k < FM_LANES; k++) lane[k] += a[j + k];
        for (int k = 0; j + k < n; k++) lane[k] += a[j + k];
    }
    float s = 0.0f;
    for (int k = 0; k < FM_LANES; k++) s += lane[k];
    return s;
}

#endif
