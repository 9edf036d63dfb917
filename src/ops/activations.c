/* activations.c — SiLU, tanh-GELU, gated units (SwiGLU/GeGLU), soft-capping, small vector ops. */
#include <math.h>

#include <omp.h>

#include "fastmath.h"
#include "ops.h"
#include "simd_avx512.h"
#include "util/cpu.h"
#include "util/profile.h"

/* vec_zero clears a buffer this large with non-temporal stores (x86-64's SSE, on any CPU): they
 * skip reading each line before writing it. Only where no cache would keep the zeros anyway: the
 * 496 MB gradient of the GPT-2 124M shape (docs/performance.md, "Figures behind the code"); a
 * small GPT-2's 43 MB stay below and in the cache. */
enum { VEC_ZERO_STREAM_BYTES = 1 << 28 };

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f            /* the cubic term's coefficient of the tanh approximation */

float tanh_approx(float x) { return tanh_inline(x); }

/* SiLU and tanh-GELU as x * sigmoid(z): 0.5 x (1 + tanh(u)) = x / (1 + e^{-2u}), one exp and
 * one division, and no cancellation in 1 + tanh(u) for negative x. A NaN x stays NaN through
 * the factor x, so the exp needs no NaN test. */
static inline float silu(float x) { return x / (1.0f + exp_clamped(-x)); }
static inline float silu_grad(float x) {
    float s = 1.0f / (1.0f + exp_clamped(-x));
    return s * (1.0f + x * (1.0f - s));
}
static inline float gelu(float x) { return x / (1.0f + exp_clamped(-2.0f * GELU_K * (x + GELU_C * x * x * x))); }
/* d/dx [x s(2u)] = s + 2 x s (1 - s) u'(x), u' = K (1 + 3 * 0.044715 x^2) */
static inline float gelu_grad(float x) {
    float s = 1.0f / (1.0f + exp_clamped(-2.0f * GELU_K * (x + GELU_C * x * x * x)));
    return s + 2.0f * x * s * (1.0f - s) * GELU_K * (1.0f + 3.0f * GELU_C * x * x);
}

float act_apply(activation act, float x) { return act == ACT_SILU ? silu(x) : gelu(x); }
float act_grad(activation act, float x) { return act == ACT_SILU ? silu_grad(x) : gelu_grad(x); }

/* Each loop below is written once per activation so that the compiler vectorizes it
 * (a call through `act` inside the loop would not). No `simd` clause: -O3 vectorizes these
 * element-wise loops by itself (checked with gcc -fopt-info-vec and clang -Rpass), and an
 * explicit request is one clang must report as failed (-Wpass-failed, an error under
 * -Werror) in sanitizer builds, whose per-element checks make vectorizing impossible. */
#define FOR_ACT(act, BODY_SILU, BODY_GELU)                                                                             \
    do {                                                                                                               \
        if ((act) == ACT_SILU) {                                                                                       \
            _Pragma("omp parallel for schedule(static) if(n > OMP_MIN_WORK)") for (size_t i = 0; i < n; i++) BODY_SILU;                    \
        } else {                                                                                                       \
            _Pragma("omp parallel for schedule(static) if(n > OMP_MIN_WORK)") for (size_t i = 0; i < n; i++) BODY_GELU;                    \
        }                                                                                                              \
    } while (0)

#if defined(__x86_64__)
/* The same two activations 16 at a time with AVX-512: the sigmoid's division as a reciprocal
 * estimate and one Newton step (recip16), which the compiler may not do for a plain C division.
 * z = -x (SiLU) or -2u (GELU); s = 1 / (1 + e^z); act = x s. */
TLM_AVX512 static inline __m512 act_z16(__m512 x, int gelu_act) {
    if (!gelu_act) return _mm512_sub_ps(_mm512_setzero_ps(), x);
    const __m512 x2 = _mm512_mul_ps(x, x); /* -2K (x + 0.044715 x^3) = x (-2K + (-2K 0.044715) x^2) */
    return _mm512_mul_ps(x, _mm512_fmadd_ps(_mm512_set1_ps(-2.0f * GELU_K * GELU_C), x2,
                                            _mm512_set1_ps(-2.0f * GELU_K)));
}

TLM_AVX512 static inline __m512 sigmoid16(__m512 z) {
    return recip16(_mm512_add_ps(_mm512_set1_ps(1.0f), exp16_clamped(z)));
}

/* act(x) = x s */
TLM_AVX512 static inline __m512 act16(__m512 x, int gelu_act) { return _mm512_mul_ps(x, sigmoid16(act_z16(x, gelu_act))); }

/* d act/dx: SiLU s (1 + x (1 - s)); GELU s + x s (1 - s) 2K (1 + 3 * 0.044715 x^2). *a = act(x). */
TLM_AVX512 static inline __m512 act_grad16(__m512 x, int gelu_act, __m512 *a) {
    const __m512 one = _mm512_set1_ps(1.0f), s = sigmoid16(act_z16(x, gelu_act)), xs = _mm512_mul_ps(x, s);
    const __m512 f = gelu_act ? _mm512_fmadd_ps(_mm512_set1_ps(6.0f * GELU_K * GELU_C), _mm512_mul_ps(x, x),
                                                _mm512_set1_ps(2.0f * GELU_K))
                              : one; /* the factor on x s (1 - s) */
    *a = xs;
    return _mm512_fmadd_ps(_mm512_mul_ps(xs, _mm512_sub_ps(one, s)), f, s);
}

/* Each kernel below runs over [i0, i1): whole vectors with plain loads and stores, then the
 * last partial vector masked (masked stores in the main loop cost this CPU's write stream) */
/* (out16, when not NULL: the results rounded to bf16 as well, bf16_round16) */
TLM_AVX512 static void act_forward_avx512(float *out, uint16_t *out16, const float *inp, size_t i0, size_t i1,
                                          int gelu_act) {
    size_t i = i0;
    for (; i + 16 <= i1; i += 16) {
        const __m512 y = act16(_mm512_loadu_ps(inp + i), gelu_act);
        _mm512_storeu_ps(out + i, y);
        if (out16) _mm256_storeu_si256((__m256i *)(out16 + i), bf16_round16(y));
    }
    if (i < i1) {
        const __mmask16 k = tail16((int)(i1 - i));
        const __m512 y = act16(_mm512_maskz_loadu_ps(k, inp + i), gelu_act);
        _mm512_mask_storeu_ps(out + i, k, y);
        if (out16) _mm256_mask_storeu_epi16(out16 + i, k, bf16_round16(y));
    }
}

TLM_AVX512 static void act_backward_avx512(float *dinp, const float *dout, const float *inp, size_t i0, size_t i1,
                                           int gelu_act) {
    __m512 a;
    size_t i = i0;
    for (; i + 16 <= i1; i += 16)
        _mm512_storeu_ps(dinp + i, _mm512_mul_ps(_mm512_loadu_ps(dout + i), act_grad16(_mm512_loadu_ps(inp + i), gelu_act, &a)));
    if (i < i1) {
        const __mmask16 k = tail16((int)(i1 - i));
        const __m512 g = act_grad16(_mm512_maskz_loadu_ps(k, inp + i), gelu_act, &a);
        _mm512_mask_storeu_ps(dinp + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, dout + i), g));
    }
}

/* one contiguous share of [0, n) per thread, a multiple of 16 elements (thread_share) */
#define FOR_SHARES(n, CALL)                                                                                           \
    _Pragma("omp parallel if(n > OMP_MIN_WORK)") {                                                                   \
        size_t i0, i1;                                                                                                \
        thread_share(n, &i0, &i1);                                                                                    \
        CALL;                                                                                                         \
    }

/* gated: out = act(gate) up; dgate = dout up act'(gate), dup = dout act(gate) */
TLM_AVX512 static void glu_forward_avx512(float *out, uint16_t *out16, const float *gate, const float *up, size_t i0,
                                          size_t i1, int gelu_act) {
    size_t i = i0;
    for (; i + 16 <= i1; i += 16) {
        const __m512 y = _mm512_mul_ps(act16(_mm512_loadu_ps(gate + i), gelu_act), _mm512_loadu_ps(up + i));
        _mm512_storeu_ps(out + i, y);
        if (out16) _mm256_storeu_si256((__m256i *)(out16 + i), bf16_round16(y));
    }
    if (i < i1) {
        const __mmask16 k = tail16((int)(i1 - i));
        const __m512 y =
            _mm512_mul_ps(act16(_mm512_maskz_loadu_ps(k, gate + i), gelu_act), _mm512_maskz_loadu_ps(k, up + i));
        _mm512_mask_storeu_ps(out + i, k, y);
        if (out16) _mm256_mask_storeu_epi16(out16 + i, k, bf16_round16(y));
    }
}

TLM_AVX512 static inline void glu_backward16(float *dgate, float *dup, __m512 x, __m512 d, __m512 u, int gelu_act,
                                             size_t i, __mmask16 k) {
    __m512 a;
    const __m512 g = act_grad16(x, gelu_act, &a);
    const __m512 dg = _mm512_mul_ps(_mm512_mul_ps(d, u), g), du = _mm512_mul_ps(d, a);
    if (k == 0xffff) {
        _mm512_storeu_ps(dgate + i, dg);
        _mm512_storeu_ps(dup + i, du);
    } else {
        _mm512_mask_storeu_ps(dgate + i, k, dg);
        _mm512_mask_storeu_ps(dup + i, k, du);
    }
}

TLM_AVX512 static void glu_backward_avx512(float *dgate, float *dup, const float *dout, const float *gate,
                                           const float *up, size_t i0, size_t i1, int gelu_act) {
    size_t i = i0;
    for (; i + 16 <= i1; i += 16)
        glu_backward16(dgate, dup, _mm512_loadu_ps(gate + i), _mm512_loadu_ps(dout + i), _mm512_loadu_ps(up + i),
                       gelu_act, i, 0xffff);
    if (i < i1) {
        const __mmask16 k = tail16((int)(i1 - i));
        glu_backward16(dgate, dup, _mm512_maskz_loadu_ps(k, gate + i), _mm512_maskz_loadu_ps(k, dout + i),
                       _mm512_maskz_loadu_ps(k, up + i), gelu_act, i, k);
    }
}

/* on a CPU with AVX-512, the kernel CALL over each thread's share [i0, i1) of [0, n), with
 * g = 1 for GELU, 0 for SiLU, and return; elsewhere nothing (the portable loop follows) */
#define AVX512_KERNEL(n, CALL)                                                                                        \
    if (tlm_cpu_isa() == TLM_ISA_AVX512) {                                                                            \
        const int g = act == ACT_GELU_TANH;                                                                           \
        FOR_SHARES(n, CALL);                                                                                          \
        return;                                                                                                       \
    }
#else
#define AVX512_KERNEL(n, CALL)
#endif

void glu_forward_bf16(float *out, uint16_t *out16, const float *gate, const float *up, size_t n, activation act) {
    PROF_SCOPE("glu_forward");
    AVX512_KERNEL(n, glu_forward_avx512(out, out16, gate, up, i0, i1, g));
    FOR_ACT(act, out[i] = silu(gate[i]) * up[i], out[i] = gelu(gate[i]) * up[i]);
    if (out16) f32_to_bf16(out16, out, n);
}

void glu_forward(float *out, const float *gate, const float *up, size_t n, activation act) {
    glu_forward_bf16(out, NULL, gate, up, n, act);
}

/* the serial forms over [i0, i1) (ops.h): the same kernel, or the same expression, per element */
void glu_forward_range(float *out, const float *gate, const float *up, size_t i0, size_t i1, activation act) {
#if defined(__x86_64__)
    if (tlm_cpu_isa() == TLM_ISA_AVX512) {
        glu_forward_avx512(out, NULL, gate, up, i0, i1, act == ACT_GELU_TANH);
        return;
    }
#endif
    if (act == ACT_SILU)
        for (size_t i = i0; i < i1; i++) out[i] = silu(gate[i]) * up[i];
    else
        for (size_t i = i0; i < i1; i++) out[i] = gelu(gate[i]) * up[i];
}

void act_forward_range(float *out, const float *inp, size_t i0, size_t i1, activation act) {
#if defined(__x86_64__)
    if (tlm_cpu_isa() == TLM_ISA_AVX512) {
        act_forward_avx512(out, NULL, inp, i0, i1, act == ACT_GELU_TANH);
        return;
    }
#endif
    if (act == ACT_SILU)
        for (size_t i = i0; i < i1; i++) out[i] = silu(inp[i]);
    else
        for (size_t i = i0; i < i1; i++) out[i] = gelu(inp[i]);
}

void glu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up, size_t n,
                  activation act) {
    PROF_SCOPE("glu_backward");
    AVX512_KERNEL(n, glu_backward_avx512(dgate, dup, dout, gate, up, i0, i1, g));
    FOR_ACT(act, (dgate[i] = dout[i] * up[i] * silu_grad(gate[i]), dup[i] = dout[i] * silu(gate[i])),
            (dgate[i] = dout[i] * up[i] * gelu_grad(gate[i]), dup[i] = dout[i] * gelu(gate[i])));
}

void act_forward_bf16(float *out, uint16_t *out16, const float *inp, size_t n, activation act) {
    PROF_SCOPE("act_forward");
    AVX512_KERNEL(n, act_forward_avx512(out, out16, inp, i0, i1, g));
    FOR_ACT(act, out[i] = silu(inp[i]), out[i] = gelu(inp[i]));
    if (out16) f32_to_bf16(out16, out, n);
}

void act_forward(float *out, const float *inp, size_t n, activation act) { act_forward_bf16(out, NULL, inp, n, act); }

void act_backward(float *dinp, const float *dout, const float *inp, size_t n, activation act) {
    PROF_SCOPE("act_backward");
    AVX512_KERNEL(n, act_backward_avx512(dinp, dout, inp, i0, i1, g));
    FOR_ACT(act, dinp[i] = dout[i] * silu_grad(inp[i]), dinp[i] = dout[i] * gelu_grad(inp[i]));
}

void softcap_forward(float *out, const float *inp, size_t n, float cap) {
    PROF_SCOPE("softcap_forward");
#pragma omp parallel for schedule(static) if(n > OMP_MIN_WORK)
    for (size_t i = 0; i < n; i++) out[i] = softcap_inline(inp[i], cap);
}

void softcap_forward_range(float *out, const float *inp, size_t i0, size_t i1, float cap) {
    for (size_t i = i0; i < i1; i++) out[i] = softcap_inline(inp[i], cap);
}

void softcap_backward(float *dinp, const float *dout, const float *out, size_t n, float cap) {
    PROF_SCOPE("softcap_backward");
#pragma omp parallel for schedule(static) if(n > OMP_MIN_WORK)
    for (size_t i = 0; i < n; i++) {
        float t = out[i] / cap;
        dinp[i] += dout[i] * (1.0f - t * t);
    }
}

void vec_add(float *out, const float *a, const float *b, size_t n) {
    PROF_SCOPE("vec_add");
#pragma omp parallel for schedule(static) if(n > OMP_MIN_WORK)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void thread_share(size_t n, size_t *i0, size_t *i1) {
    const size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
    const size_t per = ((n + nt - 1) / nt + 15) & ~(size_t)15;
    *i0 = id * per < n ? id * per : n;
    *i1 = *i0 + per < n ? *i0 + per : n;
}

void sumsq_chunk(size_t n, int c, size_t *begin, size_t *end) {
    const size_t per = (n + SUMSQ_CHUNKS - 1) / SUMSQ_CHUNKS;
    *begin = (size_t)c * per < n ? (size_t)c * per : n;
    *end = *begin + per < n ? *begin + per : n;
}

#if defined(__x86_64__)
/* (four vectors hold the lanes: the portable loop's sums, vector by vector) */
TLM_AVX512 static void sumsq_lanes_avx512(float lanes[SUMSQ_LANES], const float *x, size_t n) {
    __m512 acc[4];
    for (int v = 0; v < 4; v++) acc[v] = _mm512_loadu_ps(lanes + 16 * v);
    size_t j = 0;
    for (; j + SUMSQ_LANES <= n; j += SUMSQ_LANES)
        for (int v = 0; v < 4; v++) {
            const __m512 x16 = _mm512_loadu_ps(x + j + 16 * v);
            acc[v] = _mm512_add_ps(acc[v], _mm512_mul_ps(x16, x16));
        }
    for (int v = 0; v < 4 && j + 16 * v < n; v++) { /* (the missing lanes add +0: no change) */
        const __m512 x16 = load16(x + j + 16 * v, (int)(n - j - 16 * v));
        acc[v] = _mm512_add_ps(acc[v], _mm512_mul_ps(x16, x16));
    }
    for (int v = 0; v < 4; v++) _mm512_storeu_ps(lanes + 16 * v, acc[v]);
}
#endif

void sumsq_lanes(float lanes[SUMSQ_LANES], const float *x, size_t n) {
#if defined(__x86_64__)
    if (tlm_cpu_isa() == TLM_ISA_AVX512) {
        sumsq_lanes_avx512(lanes, x, n);
        return;
    }
#endif
    size_t j = 0;
    for (; j + SUMSQ_LANES <= n; j += SUMSQ_LANES)
        for (int k = 0; k < SUMSQ_LANES; k++) lanes[k] += x[j + k] * x[j + k];
    for (int k = 0; j + k < n; k++) lanes[k] += x[j + k] * x[j + k];
}

float sumsq_lanes_total(const float lanes[SUMSQ_LANES]) {
    float s = 0.0f;
    for (int k = 0; k < SUMSQ_LANES; k++) s += lanes[k];
    return s;
}

double sumsq_total(const float chunk_totals[SUMSQ_CHUNKS]) {
    double total = 0.0;
    for (int c = 0; c < SUMSQ_CHUNKS; c++) total += chunk_totals[c];
    return total;
}

void thread_columns(int C, int *c0, int *c1) {
    size_t i0, i1;
    thread_share((size_t)C, &i0, &i1);
    *c0 = (int)i0, *c1 = (int)i1;
}

void vec_zero(float *out, size_t n) {
    PROF_SCOPE("vec_zero");
#if defined(__x86_64__)
    if (n * sizeof(float) >= VEC_ZERO_STREAM_BYTES) {
#pragma omp parallel
        {
            size_t i0, i1;
            thread_share(n, &i0, &i1);
            size_t i = i0;
            for (; i < i1 && ((uintptr_t)(out + i) & 15); i++) out[i] = 0.0f;
            const __m128 z = _mm_setzero_ps();
            for (; i + 4 <= i1; i += 4) _mm_stream_ps(out + i, z);
            for (; i < i1; i++) out[i] = 0.0f;
            _mm_sfence();
        }
        return;
    }
#endif
#pragma omp parallel for schedule(static) if(n > OMP_MIN_WORK)
    for (size_t i = 0; i < n; i++) out[i] = 0.0f;
}

void vec_copy(float *out, const float *a, size_t n) {
    PROF_SCOPE("vec_copy");
#pragma omp parallel for schedule(static) if(n > OMP_MIN_WORK)
    for (size_t i = 0; i < n; i++) out[i] = a[i];
}

void copy_stream(float *out, const float *a, size_t n) {
    size_t i = 0;
#if defined(__x86_64__)
    for (; i < n && ((uintptr_t)(out + i) & 15); i++) out[i] = a[i];
    for (; i + 4 <= n; i += 4) _mm_stream_ps(out + i, _mm_loadu_ps(a + i));
    _mm_sfence(); /* (the stores are weakly ordered: visible before the region's barrier) */
#endif
    for (; i < n; i++) out[i] = a[i];
}

void vec_stream(float *out, const float *a, size_t n) {
    PROF_SCOPE("vec_stream");
    if (n <= OMP_MIN_WORK || omp_get_max_threads() == 1) { /* (a split batch's part: its own thread) */
        copy_stream(out, a, n);
        return;
    }
#pragma omp parallel
    {
        size_t i0, i1;
        thread_share(n, &i0, &i1);
        copy_stream(out + i0, a + i0, i1 - i0);
    }
}

void vec_acc(float *out, const float *a, size_t n) {
    PROF_SCOPE("vec_acc");
#pragma omp parallel for schedule(static) if(n > OMP_MIN_WORK)
    for (size_t i = 0; i < n; i++) out[i] += a[i];
}
