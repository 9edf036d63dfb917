/* simd_avx512.h — the AVX-512 pieces the ops' kernels share: the target attribute (kernels are
 * compiled into every build and chosen at run time from cpuid, util/cpu.h), the mask of a
 * row's last, partial vector, and fastmath.h's exp on 16 lanes. x86-64 only. */
#ifndef TLM_SIMD_AVX512_H
#define TLM_SIMD_AVX512_H

#if defined(__x86_64__)
#include <immintrin.h>

#define TLM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

/* lanes [0, min(left, 16)) */
TLM_AVX512 static inline __mmask16 tail16(int left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

/* 16 floats from p, or the first `left` of them (the rest 0) when left < 16; and the store that
 * matches. Whole vectors take plain loads and stores: masked stores in a main loop slow a
 * streaming kernel down on Zen 5 (docs/performance.md, "Figures behind the code"). */
TLM_AVX512 static inline __m512 load16(const float *p, int left) {
    return left >= 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(tail16(left), p);
}
TLM_AVX512 static inline void store16(float *p, __m512 v, int left) {
    if (left >= 16)
        _mm512_storeu_ps(p, v);
    else
        _mm512_mask_storeu_ps(p, tail16(left), v);
}

/* 16 floats rounded to bf16 as tlm_f32_to_bf16 does (util/f16.h: to nearest even in integer
 * arithmetic, NaN kept quiet, subnormals rounded, not flushed), with AVX-512F alone: the same
 * bits as the scalar rounding, and no dependence on AVX512-BF16's vcvtneps2bf16 (which reads
 * subnormals as 0) */
TLM_AVX512 static inline __m256i bf16_round16(__m512 v) {
    const __m512i u = _mm512_castps_si512(v), hi = _mm512_srli_epi32(u, 16);
    const __m512i bias = _mm512_add_epi32(_mm512_and_si512(hi, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7fff));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
    r = _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), hi, _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
}

/* 16 x 16 transpose of 32-bit lanes in registers: r[i] lane j -> r[j] lane i (shuffles only, so any
 * 32-bit data: attention_tiles.c's keys, amx.c's pairs of bf16) */
TLM_AVX512 static inline __attribute__((always_inline)) void transpose16x16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
}

/* exp_clamped of fastmath.h on 16 lanes: the same clamps (NaN to -87), reduction and polynomial */
TLM_AVX512 static inline __m512 exp16_clamped(__m512 x_in) {
    /* (max(x, lo) returns lo for a NaN x: the second operand) */
    const __m512 x = _mm512_min_ps(_mm512_max_ps(x_in, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);
    __m512 q = _mm512_set1_ps(0.00138888892f);
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.00833333377f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.0416666679f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.166666672f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.5f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(q, n); /* q * 2^n */
}

/* exp_approx of fastmath.h on 16 lanes: NaN in, NaN out */
TLM_AVX512 static inline __m512 exp16(__m512 x) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), exp16_clamped(x), x);
}

/* 1 / d for d >= 1: the 14-bit reciprocal estimate and one Newton step (relative error
 * about 2^-28, below float's rounding) instead of a division */
TLM_AVX512 static inline __m512 recip16(__m512 d) {
    const __m512 r = _mm512_rcp14_ps(d);
    return _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0f)));
}
#endif

#endif
