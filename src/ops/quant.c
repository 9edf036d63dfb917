/* quant.c — ggml's block formats (what GGUF files hold): the type table, the scalar reference
 * conversions, and the products that read the blocks where they lie.
 *
 * Every layout below is bit for bit what llama.cpp reads (ggml-common.h's block_* structs, all
 * fields little-endian); every value is what ggml's dequantize_row_* computes. In every format
 * a weight is one rounding of an exact expression: the products of an f16 scale, a small
 * integer sub-block scale and a small integer level fit in 24 bits, so only the final add or
 * subtract of a minimum (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K) rounds. That makes the value the same
 * however it is computed (mul then sub, or one FMA), which is what lets the vector kernels
 * widen each weight to exactly the f32 value the scalar dequantizer writes.
 *
 * The exact products (matvec_quant; quant_int.c has the integer ones, which it hands over to when
 * they are chosen): x stays f32, each weight is widened to that value in registers
 * and multiplied in f32 with FMA; so y = dot(x, wq_dequantize_row(W)) up to f32 summation
 * order, and the only error is the format's own. Decoding is memory-bound: W is streamed once
 * per MATVEC_MAX_ROWS rows of x, each thread a contiguous share of the output rows. */
#include "quant.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <omp.h>

#include "ops.h"
#include "util/cpu.h"
#include "util/error.h"
#include "util/profile.h"
#include "util/f16.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define TLM_X86_KERNELS 1
#endif

#include "quant_blocks.h"

/* ---- scalar dequantizers (the reference) ------------------------------------------------------- */
/* nb blocks from src into dst. The order of operations is ggml's, which for these exact products
 * means the values are its values. Each block is cut into runs of levels under one scale, a
 * loop the compiler vectorizes (these also serve the kernels' generic path). */

/* out[l] = (((q[l] >> shift) & mask) - bias) * scale - minus for l < n: a run of levels under one
 * scale (minus 0 for the formats without a minimum: p - 0 is p, signed zeros included) */
static inline void run_to_f32(float *restrict out, const uint8_t *restrict q, int n, int shift, int mask, int bias,
                              float scale, float minus) {
    for (int l = 0; l < n; l++) out[l] = (((q[l] >> shift) & mask) - bias) * scale - minus;
}

static inline uint32_t u32_at(const uint8_t p[4]) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Q5_0 / Q5_1: the 32 levels of a block (nibbles and the bits of qh) */
static inline void levels_q5(const uint8_t qs[16], const uint8_t qh_bytes[4], uint8_t *restrict levels) {
    const uint32_t qh = u32_at(qh_bytes);
    for (int j = 0; j < QK / 2; j++) {
        levels[j] = (uint8_t)((qs[j] & 15) | ((qh >> j) & 1) << 4);
        levels[j + QK / 2] = (uint8_t)((qs[j] >> 4) | ((qh >> (j + QK / 2)) & 1) << 4);
    }
}

static void deq_f32(const uint8_t *restrict src, float *restrict dst, int64_t nb) {
    memcpy(dst, src, (size_t)nb * sizeof(float));
}

static void deq_f16(const uint8_t *restrict src, float *restrict dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) dst[i] = f16_at(src + 2 * i);
}

static void deq_bf16(const uint8_t *restrict src, float *restrict dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) dst[i] = tlm_bf16_to_f32((uint16_t)(src[2 * i] | src[2 * i + 1] << 8));
}

static void deq_q4_0(const uint8_t *restrict src, float *restrict dst, int64_t nb) {
    const blk_q4_0 *b = (const blk_q4_0 *)src;
    for (int64_t i = 0; i < nb; i++, b++, dst += QK) {
        const float d = f16_at(b->d);
        run_to_f32(dst, b->qs, QK / 2, 0, 15, 8, d, 0.0f);
        run_to_f32(dst + QK / 2, b->qs, QK / 2, 4, 15, 8, d, 0.0f);
    }
}

/* (q * d + m computed as q * d - (-m): the same IEEE operation) */
static void deq_q4_1(const uint8_t *restrict src, float *restrict dst, int64_t nb) {
    const blk_q4_1 *b = (const blk_q4_1 *)src;
    for (int64_t i = 0; i < nb; i++, b++, dst += QK) {
        const float d = f16_at(b->d), m = f16_at(b->m);
        run_to_f32(dst, b->qs, QK / 2, 0, 15, 0, d, -m);
        run_to_f32(dst + QK / 2, b->qs, QK / 2, 4, 15, 0, d, -m);
    }
}

static void deq_q5_0(const uint8_t *restrict src, float *restrict dst, int64_t nb) {
    const blk_q5_0 *b = (const blk_q5_0 *)src;
    uint8_t levels[QK];
    for (int64_t i = 0; i < nb; i++, b++, dst += QK) {
        levels_q5(b->qs, b->qh, levels);
        run_to_f32(dst, levels, QK, 0, 31, 16, f16_at(b->d), 0.0f);
    }
}

static void deq_q5_1(const uint8_t *restrict src, float *restrict dst, int64_t nb) {
    const blk_q5_1 *b = (const blk_q5_1 *)src;
    uint8_t levels[QK];
    for (int64_t i = 0; i < nb; i++, b++, dst += QK) {
        levels_q5(b->qs, b->qh, levels);
        run_to_f32(dst, levels, QK, 0, 31, 0, f16_at(b->d), -f16_at(b->m));
    }
}

static void deq_q8_0(const uint8_t *restrict src, float *restrict dst, int64_t nb) {
    const blk_q8_0 *b = (const blk_q8_0 *)src;
    for (int64_t i = 0; i < nb; i++, b++, dst += QK) {
        const float d = f16_at(b->d);
        for (int j = 0; j < QK; j++) dst[j] = b->qs[j] * d;
    }
}

/* element 128 h + 32 s + 16 half + l: bits 2 s of qs[32 h + 16 half + l], scale byte 8 h + 2 s + half */
static void deq_q2_k(const uint8_t *restrict src, float *restrict dst, int64_t nb) {
    const blk_q2_k *b = (const blk_q2_k *)src;
    for (int64_t i = 0; i < nb; i++, b++) {
        const float d = f16_at(b->d), dmin = f16_at(b->dmin);
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 4; s++)
                for (int half = 0; half < 2; half++, dst += 16) {
                    const int sc = b->scales[8 * h + 2 * s + half];
                    run_to_f32(dst, b->qs + 32 * h + 16 * half, 16, 2 * s, 3, 0, d * (sc & 15), dmin * (sc >> 4));
                }
    }
}

/* the level is low - (hbit ? 0 : 4) = (low | hbit << 2) - 4 */
static void deq_q3_k(const uint8_t *restrict src, float *restrict dst, int64_t nb) {
    const blk_q3_k *b = (const blk_q3_k *)src;
    uint8_t levels[QK_K];
    for (int64_t i = 0; i < nb; i++, b++) {
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 4; s++)
                for (int l = 0; l < 32; l++)
                    levels[128 * h + 32 * s + l] =
                        (uint8_t)(((b->qs[32 * h + l] >> (2 * s)) & 3) | ((b->hmask[l] >> (4 * h + s)) & 1) << 2);
        const float d = f16_at(b->d);
        for (int j = 0; j < QK_K / 16; j++, dst += 16)
            run_to_f32(dst, levels + 16 * j, 16, 0, 7, 4, d * scale_q3_k(b->scales, j), 0.0f);
    }
}

static void deq_q4_k(const uint8_t *restrict src, float *restrict dst, int64_t nb) {
    const blk_q4_k *b = (const blk_q4_k *)src;
    for (int64_t i = 0; i < nb; i++, b++) {
        const float d = f16_at(b->d), dmin = f16_at(b->dmin);
        for (int j = 0; j < QK_K / 32; j += 2, dst += 64) { /* (low nibbles, then high: constant shifts) */
            int sc, m;
            scale_min_k4(b->scales, j, &sc, &m);
            run_to_f32(dst, b->qs + 16 * j, 32, 0, 15, 0, d * sc, dmin * m);
            scale_min_k4(b->scales, j + 1, &sc, &m);
            run_to_f32(dst + 32, b->qs + 16 * j, 32, 4, 15, 0, d * sc, dmin * m);
        }
    }
}

static void deq_q5_k(const uint8_t *restrict src, float *restrict dst, int64_t nb) {
    const blk_q5_k *b = (const blk_q5_k *)src;
    uint8_t levels[32];
    for (int64_t i = 0; i < nb; i++, b++) {
        const float d = f16_at(b->d), dmin = f16_at(b->dmin);
        for (int j = 0; j < QK_K / 32; j++, dst += 32) {
            int sc, m;
            scale_min_k4(b->scales, j, &sc, &m);
            const uint8_t *q = b->qs + 32 * (j / 2);
            for (int l = 0; l < 32; l++)
                levels[l] = (uint8_t)(((q[l] >> (4 * (j & 1))) & 15) | ((b->qh[l] >> j) & 1) << 4);
            run_to_f32(dst, levels, 32, 0, 31, 0, d * sc, dmin * m);
        }
    }
}

/* (d * scale) * (q - 32): ggml's d * sc * q, the same exact product) */
static void deq_q6_k(const uint8_t *restrict src, float *restrict dst, int64_t nb) {
    const blk_q6_k *b = (const blk_q6_k *)src;
    uint8_t levels[32];
    for (int64_t i = 0; i < nb; i++, b++) {
        const float d = f16_at(b->d);
        for (int h = 0; h < 2; h++)
            for (int g = 0; g < 4; g++, dst += 32) {
                const uint8_t *ql = b->ql + 64 * h + 32 * (g & 1), *qh = b->qh + 32 * h;
                for (int l = 0; l < 32; l++)
                    levels[l] = (uint8_t)(((ql[l] >> (4 * (g / 2))) & 15) | ((qh[l] >> (2 * g)) & 3) << 4);
                run_to_f32(dst, levels, 16, 0, 63, 32, d * b->scales[8 * h + 2 * g], 0.0f);
                run_to_f32(dst + 16, levels + 16, 16, 0, 63, 32, d * b->scales[8 * h + 2 * g + 1], 0.0f);
            }
    }
}

/* ---- rounding and the scale searches -------------------------------------------------------- */
/* ggml's: nearest integer with ties to even (its nearest_int), and for the K formats the
 * searches of make_qkx2_quants (a scale and a minimum, least squares over candidate grids) and
 * make_qx_quants (a signed scale), in the same float operations so that the same input gives the
 * same blocks (with this build's strict IEEE evaluation: no contraction into FMA). */

/* v + 1.5 * 2^23 lands where the float spacing is 1, so the add rounds v to an integer (ties to
 * even); |v| < 2^22 */
static inline int nearest_even(float v) { return (int)((v + 12582912.0f) - 12582912.0f); }

/* nearest_even clamped to [lo, hi] (NaN: lo), whatever v is */
static inline int nearest_clamped(float v, int lo, int hi) {
    if (!(v > (float)lo)) return lo;
    if (v >= (float)hi) return hi;
    return nearest_even(v);
}

/* One sub-block's levels L [n] in 0..nmax, scale and minimum: x ~ scale * L - *neg_min (the
 * minimum is <= 0, *neg_min >= 0), minimizing sum w (scale L + min - x)^2 over the grids
 * nmax + rmin + rdelta * is, is = 0 .. nstep, each fitted by least squares (ggml's
 * make_qkx2_quants; later grids start from the best minimum so far, as there). */
static float search_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, float rmin,
                              float rdelta, int nstep) {
    float lo = x[0], hi = x[0], sum_w = 0, sum_x = 0;
    for (int i = 0; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0) lo = 0;
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *neg_min = -lo;
        return 0.0f;
    }
    float iscale = nmax / (hi - lo), scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)nearest_clamped(iscale * (x[i] - lo), 0, nmax);
        const float diff = scale * L[i] + lo - x[i];
        best += w[i] * (diff * diff);
    }
    uint8_t trial[QK_K];
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = nearest_clamped(iscale * (x[i] - lo), 0, nmax);
            trial[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float err = 0;
            for (int i = 0; i < n; i++) {
                const float diff = this_scale * trial[i] + this_min - x[i];
                err += w[i] * (diff * diff);
            }
            if (err < best) {
                memcpy(L, trial, (size_t)n);
                best = err;
                scale = this_scale;
                lo = this_min;
            }
        }
    }
    *neg_min = -lo;
    return scale;
}

/* One sub-block's signed levels L [n] (stored + nmax, so 0 .. 2 nmax - 1) and scale, weighted
 * by x^2 (ggml's make_qx_quants with rmse_type 1): the grid through the largest magnitude,
 * then 18 slightly wider and narrower ones, keeping the best least-squares fit */
static float search_scale_signed(int n, int nmax, const float *x, int8_t *L) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), max = x[i];
    if (amax < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = -nmax / max, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = nearest_clamped(iscale * x[i], -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = nearest_clamped(iscale * x[i], -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) L[i] = (int8_t)(nearest_clamped(iscale * x[i], -nmax, nmax - 1) + nmax);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* ---- scalar quantizers (ggml's quantize_row_*_ref) -------------------------------------------- */

static void q_f32(const float *src, uint8_t *dst, int64_t nb) { memcpy(dst, src, (size_t)nb * sizeof(float)); }

static void q_f16(const float *src, uint8_t *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) f16_put(dst + 2 * i, src[i]);
}

static void q_bf16(const float *src, uint8_t *dst, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        const uint16_t h = tlm_f32_to_bf16(src[i]);
        dst[2 * i] = (uint8_t)h, dst[2 * i + 1] = (uint8_t)(h >> 8);
    }
}

/* the element of largest magnitude, sign kept (the first of equals) */
static float signed_absmax(const float *x, int n) {
    float amax = 0, max = 0;
    for (int j = 0; j < n; j++)
        if (amax < fabsf(x[j])) amax = fabsf(x[j]), max = x[j];
    return max;
}

static void minmax(const float *x, int n, float *lo, float *hi) {
    *lo = INFINITY, *hi = -INFINITY;
    for (int j = 0; j < n; j++) {
        if (x[j] < *lo) *lo = x[j];
        if (x[j] > *hi) *hi = x[j];
    }
}

/* (x / d + offset) truncated and capped at top (the + 0.5 of offset rounds to nearest) */
static inline int level_truncated(float v, float offset, int top) {
    const int q = (int)(v + offset);
    return q < 0 ? 0 : q > top ? top : q;
}

static void q_q4_0(const float *x, uint8_t *dst, int64_t nb) {
    blk_q4_0 *b = (blk_q4_0 *)dst;
    for (int64_t i = 0; i < nb; i++, b++, x += QK) {
        /* the largest magnitude maps to -8, the level with no positive twin */
        const float d = signed_absmax(x, QK) / -8, id = d != 0 ? 1.0f / d : 0.0f;
        f16_put(b->d, d);
        for (int j = 0; j < QK / 2; j++)
            b->qs[j] =
                (uint8_t)(level_truncated(x[j] * id, 8.5f, 15) | level_truncated(x[j + QK / 2] * id, 8.5f, 15) << 4);
    }
}

static void q_q4_1(const float *x, uint8_t *dst, int64_t nb) {
    blk_q4_1 *b = (blk_q4_1 *)dst;
    for (int64_t i = 0; i < nb; i++, b++, x += QK) {
        float lo, hi;
        minmax(x, QK, &lo, &hi);
        const float d = (hi - lo) / 15, id = d != 0 ? 1.0f / d : 0.0f;
        f16_put(b->d, d), f16_put(b->m, lo);
        for (int j = 0; j < QK / 2; j++)
            b->qs[j] = (uint8_t)(level_truncated((x[j] - lo) * id, 0.5f, 15) |
                                 level_truncated((x[j + QK / 2] - lo) * id, 0.5f, 15) << 4);
    }
}

static void q_q5_0(const float *x, uint8_t *dst, int64_t nb) {
    blk_q5_0 *b = (blk_q5_0 *)dst;
    for (int64_t i = 0; i < nb; i++, b++, x += QK) {
        const float d = signed_absmax(x, QK) / -16, id = d != 0 ? 1.0f / d : 0.0f;
        f16_put(b->d, d);
        uint32_t qh = 0;
        for (int j = 0; j < QK / 2; j++) {
            const int lo = level_truncated(x[j] * id, 16.5f, 31), hi = level_truncated(x[j + QK / 2] * id, 16.5f, 31);
            b->qs[j] = (uint8_t)((lo & 15) | (hi & 15) << 4);
            qh |= (uint32_t)(lo >> 4) << j | (uint32_t)(hi >> 4) << (j + QK / 2);
        }
        for (int k = 0; k < 4; k++) b->qh[k] = (uint8_t)(qh >> 8 * k);
    }
}

static void q_q5_1(const float *x, uint8_t *dst, int64_t nb) {
    blk_q5_1 *b = (blk_q5_1 *)dst;
    for (int64_t i = 0; i < nb; i++, b++, x += QK) {
        float lo, hi;
        minmax(x, QK, &lo, &hi);
        const float d = (hi - lo) / 31, id = d != 0 ? 1.0f / d : 0.0f;
        f16_put(b->d, d), f16_put(b->m, lo);
        uint32_t qh = 0;
        for (int j = 0; j < QK / 2; j++) {
            const int l0 = level_truncated((x[j] - lo) * id, 0.5f, 31);
            const int l1 = level_truncated((x[j + QK / 2] - lo) * id, 0.5f, 31);
            b->qs[j] = (uint8_t)((l0 & 15) | (l1 & 15) << 4);
            qh |= (uint32_t)(l0 >> 4) << j | (uint32_t)(l1 >> 4) << (j + QK / 2);
        }
        for (int k = 0; k < 4; k++) b->qh[k] = (uint8_t)(qh >> 8 * k);
    }
}

static void q_q8_0(const float *x, uint8_t *dst, int64_t nb) {
    blk_q8_0 *b = (blk_q8_0 *)dst;
    for (int64_t i = 0; i < nb; i++, b++, x += QK) {
        float amax = 0;
        for (int j = 0; j < QK; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        const float d = amax / 127, id = d != 0 ? 1.0f / d : 0.0f;
        f16_put(b->d, d);
        for (int j = 0; j < QK; j++) b->qs[j] = (int8_t)roundf(x[j] * id); /* (half away from zero) */
    }
}

/* Q4_K / Q5_K: each sub-block of 32 fitted (search_scale_min, weights |x| + rms), the 8 scales
 * and 8 minimums then quantized to 6 bits against the largest, and the levels recomputed from
 * the rounded scales (ggml's quantize_row_q4_K_ref / q5_K_ref). L [256] gets the levels. */
static void fit_k_block(const float *x, int nmax, float rmin, float rdelta, int nstep, uint8_t d[2], uint8_t dmin[2],
                        uint8_t scales[12], uint8_t L[QK_K]) {
    float sub_scale[8], sub_min[8], max_scale = 0, max_min = 0, w[32];
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        const float rms = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = rms + fabsf(xs[l]);
        sub_scale[j] = search_scale_min(32, nmax, xs, w, L + 32 * j, &sub_min[j], rmin, rdelta, nstep);
        if (sub_scale[j] > max_scale) max_scale = sub_scale[j];
        if (sub_min[j] > max_min) max_min = sub_min[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f, inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    memset(scales, 0, 12);
    for (int j = 0; j < 8; j++) {
        const int ls = nearest_clamped(inv_scale * sub_scale[j], 0, 63),
                  lm = nearest_clamped(inv_min * sub_min[j], 0, 63);
        if (j < 4) {
            scales[j] = (uint8_t)ls, scales[j + 4] = (uint8_t)lm;
        } else {
            scales[j + 4] = (uint8_t)((ls & 15) | (lm & 15) << 4);
            scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    f16_put(d, max_scale / 63.f), f16_put(dmin, max_min / 63.f);
    const float d_all = f16_at(d), dmin_all = f16_at(dmin);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        scale_min_k4(scales, j, &sc, &m);
        const float d1 = d_all * sc;
        if (d1 == 0) continue; /* (every level gives -m1 there) */
        const float m1 = dmin_all * m;
        for (int l = 0; l < 32; l++) L[32 * j + l] = (uint8_t)nearest_clamped((x[32 * j + l] + m1) / d1, 0, nmax);
    }
}

static void q_q4_k(const float *x, uint8_t *dst, int64_t nb) {
    blk_q4_k *b = (blk_q4_k *)dst;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; i++, b++, x += QK_K) {
        fit_k_block(x, 15, -1.0f, 0.1f, 20, b->d, b->dmin, b->scales, L);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) b->qs[32 * c + l] = (uint8_t)(L[64 * c + l] | L[64 * c + 32 + l] << 4);
    }
}

static void q_q5_k(const float *x, uint8_t *dst, int64_t nb) {
    blk_q5_k *b = (blk_q5_k *)dst;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; i++, b++, x += QK_K) {
        fit_k_block(x, 31, -0.5f, 0.1f, 15, b->d, b->dmin, b->scales, L);
        memset(b->qh, 0, sizeof b->qh);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
                b->qs[32 * c + l] = (uint8_t)((lo & 15) | (hi & 15) << 4);
                b->qh[l] |= (uint8_t)((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
            }
    }
}

/* Q6_K: 16 signed sub-block scales (search_scale_signed, 6-bit levels), quantized to int8
 * against the largest, levels recomputed from the rounded scales (quantize_row_q6_K_ref) */
static void q_q6_k(const float *x, uint8_t *dst, int64_t nb) {
    blk_q6_k *b = (blk_q6_k *)dst;
    int8_t L[QK_K];
    for (int64_t i = 0; i < nb; i++, b++, x += QK_K) {
        float sub_scale[16], max_scale = 0, max_abs = 0;
        for (int j = 0; j < 16; j++) {
            sub_scale[j] = search_scale_signed(16, 32, x + 16 * j, L + 16 * j);
            if (fabsf(sub_scale[j]) > max_abs) max_abs = fabsf(sub_scale[j]), max_scale = sub_scale[j];
        }
        if (max_abs < 1e-15f) {
            memset(b, 0, sizeof *b);
            continue;
        }
        const float iscale = -128.f / max_scale;
        f16_put(b->d, 1 / iscale);
        for (int j = 0; j < 16; j++) b->scales[j] = (int8_t)nearest_clamped(iscale * sub_scale[j], -128, 127);
        const float d_all = f16_at(b->d);
        for (int j = 0; j < 16; j++) {
            const float d1 = d_all * b->scales[j];
            if (d1 == 0) continue;
            for (int l = 0; l < 16; l++) L[16 * j + l] = (int8_t)(nearest_clamped(x[16 * j + l] / d1, -32, 31) + 32);
        }
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const int g0 = L[128 * h + l], g1 = L[128 * h + 32 + l], g2 = L[128 * h + 64 + l],
                          g3 = L[128 * h + 96 + l];
                b->ql[64 * h + l] = (uint8_t)((g0 & 15) | (g2 & 15) << 4);
                b->ql[64 * h + 32 + l] = (uint8_t)((g1 & 15) | (g3 & 15) << 4);
                b->qh[32 * h + l] = (uint8_t)((g0 >> 4) | (g1 >> 4) << 2 | (g2 >> 4) << 4 | (g3 >> 4) << 6);
            }
    }
}

/* ---- the type table ------------------------------------------------------------------------------- */

typedef void (*dequant_fn)(const uint8_t *src, float *dst, int64_t nblocks);
typedef void (*quant_fn)(const float *src, uint8_t *dst, int64_t nblocks);

typedef struct {
    const char *name;
    int block_elems, block_bytes; /* 0 where tinylm does not read the type */
    dequant_fn dequantize;
    quant_fn quantize; /* NULL: not written */
} type_info;

static const type_info types[WQ_TYPE_LIMIT] = {
    [WQ_F32] = {"F32", 1, 4, deq_f32, q_f32},
    [WQ_F16] = {"F16", 1, 2, deq_f16, q_f16},
    [WQ_BF16] = {"BF16", 1, 2, deq_bf16, q_bf16},
    [WQ_Q4_0] = {"Q4_0", QK, sizeof(blk_q4_0), deq_q4_0, q_q4_0},
    [WQ_Q4_1] = {"Q4_1", QK, sizeof(blk_q4_1), deq_q4_1, q_q4_1},
    [WQ_Q5_0] = {"Q5_0", QK, sizeof(blk_q5_0), deq_q5_0, q_q5_0},
    [WQ_Q5_1] = {"Q5_1", QK, sizeof(blk_q5_1), deq_q5_1, q_q5_1},
    [WQ_Q8_0] = {"Q8_0", QK, sizeof(blk_q8_0), deq_q8_0, q_q8_0},
    [WQ_Q8_1] = {"Q8_1", 0, 0, NULL, NULL},
    [WQ_Q2_K] = {"Q2_K", QK_K, sizeof(blk_q2_k), deq_q2_k, NULL},
    [WQ_Q3_K] = {"Q3_K", QK_K, sizeof(blk_q3_k), deq_q3_k, NULL},
    [WQ_Q4_K] = {"Q4_K", QK_K, sizeof(blk_q4_k), deq_q4_k, q_q4_k},
    [WQ_Q5_K] = {"Q5_K", QK_K, sizeof(blk_q5_k), deq_q5_k, q_q5_k},
    [WQ_Q6_K] = {"Q6_K", QK_K, sizeof(blk_q6_k), deq_q6_k, q_q6_k},
    [WQ_Q8_K] = {"Q8_K", 0, 0, NULL, NULL},
};

static const type_info *info(int t) { return t >= 0 && t < WQ_TYPE_LIMIT && types[t].dequantize ? &types[t] : NULL; }

int wq_supported(int t) { return info(t) != NULL; }

const char *wq_name(int t) {
    if (t >= 0 && t < WQ_TYPE_LIMIT && types[t].name) return types[t].name;
    static _Thread_local char unnamed[24];
    snprintf(unnamed, sizeof unnamed, "type %d", t);
    return unnamed;
}

int wq_from_name(const char *name, int *t) {
    for (int i = 0; name && i < WQ_TYPE_LIMIT; i++) {
        const char *a = types[i].name, *b = name;
        if (!a) continue;
        while (*a && *b && (*a == *b || (*b >= 'a' && *b <= 'z' && *a == *b - 'a' + 'A'))) a++, b++;
        if (!*a && !*b) {
            *t = i;
            return 0;
        }
    }
    return tlm_error("unknown weight type '%s' (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K .. Q6_K)",
                     name ? name : "(null)");
}

int wq_block_elems(int t) { return info(t) ? info(t)->block_elems : 0; }
size_t wq_block_bytes(int t) { return info(t) ? (size_t)info(t)->block_bytes : 0; }

size_t wq_row_bytes(int t, int64_t n) {
    const type_info *ti = info(t);
    if (!ti || n < 0 || n % ti->block_elems) return 0;
    return (size_t)(n / ti->block_elems) * (size_t)ti->block_bytes;
}

double wq_bits_per_weight(int t) { return info(t) ? 8.0 * info(t)->block_bytes / info(t)->block_elems : 0.0; }

int wq_can_quantize(int t) { return info(t) && info(t)->quantize; }

/* a call the header's preconditions rule out: NaN out, so that no caller mistakes it for a result */
static void fill_nan(float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = NAN;
}

void wq_dequantize_row(int t, const void *src, float *dst, int64_t n) {
    const type_info *ti = info(t);
    if (!ti || n % ti->block_elems) {
        tlm_error("dequantize: %s rows of %lld elements are not readable", wq_name(t), (long long)n);
        fill_nan(dst, n);
        return;
    }
    ti->dequantize(src, dst, n / ti->block_elems);
}

int wq_quantize_row(int t, const float *src, void *dst, int64_t n) {
    const type_info *ti = info(t);
    if (!ti || !ti->quantize)
        return tlm_error("quantize: %s is not a type tinylm writes (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, "
                         "Q4_K, Q5_K, Q6_K)",
                         wq_name(t));
    if (n < 0 || n % ti->block_elems)
        return tlm_error("quantize: a row of %lld elements is not whole %s blocks of %d", (long long)n, ti->name,
                         ti->block_elems);
    if (ti->block_elems > 1) /* the block formats have no NaN or infinity to give it */
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(src[i]))
                return tlm_error("quantize: element %lld is %g: %s has no encoding for it", (long long)i, src[i],
                                 ti->name);
    ti->quantize(src, dst, n / ti->block_elems);
    return 0;
}

void wq_dequantize_rows_bf16(int t, const void *W, int IC, int o0, int o1, uint16_t *dst16) {
    const type_info *ti = info(t);
    if (o1 <= o0) return;
    if (!ti || IC % ti->block_elems) {
        tlm_error("dequantize: %s rows of %d elements are not readable", wq_name(t), IC);
        for (size_t i = 0; i < (size_t)(o1 - o0) * IC; i++) dst16[i] = 0x7fc0; /* (a bf16 NaN) */
        return;
    }
    const size_t row_bytes = wq_row_bytes(t, IC);
    enum { PIECE = 256 }; /* (whole blocks of every type) */
    float piece[PIECE] __attribute__((aligned(64)));
    for (int o = o0; o < o1; o++) {
        const uint8_t *row = (const uint8_t *)W + (size_t)o * row_bytes;
        uint16_t *out = dst16 + (size_t)(o - o0) * IC;
        for (int k0 = 0; k0 < IC; k0 += PIECE) {
            const int len = IC - k0 < PIECE ? IC - k0 : PIECE;
            const uint8_t *blocks = row + (size_t)(k0 / ti->block_elems) * ti->block_bytes;
            wq_dequantize_rows(t, blocks, len, 0, 1, piece);
            f32_to_bf16(out + k0, piece, (size_t)len);
        }
    }
}

/* ---- products: plain C ------------------------------------------------------------------------------ */
/* A chunk of CHUNK elements (whole blocks of every type) of the weight row is dequantized by the
 * reference above onto the stack, then each row of x is summed against it in 8 lanes (element k
 * into lane k % 8, the lanes added pairwise at the end): independent sums the compiler keeps in
 * vector registers, where one running sum would wait on each add. */

#define CHUNK 256
#define LANES 8

typedef void (*rows_kernel)(float *y, const float *x, const uint8_t *W, size_t row_bytes, int rows, int IC, int OC,
                            int o0, int o1, const type_info *ti);

static void rows_scalar(float *y, const float *x, const uint8_t *W, size_t row_bytes, int rows, int IC, int OC, int o0,
                        int o1, const type_info *ti) {
    float w[CHUNK];
    for (int o = o0; o < o1; o++) {
        const uint8_t *row = W + (size_t)o * row_bytes;
        float lane[MATVEC_MAX_ROWS][LANES] = {{0}};
        for (int k0 = 0; k0 < IC; k0 += CHUNK) {
            const int len = IC - k0 < CHUNK ? IC - k0 : CHUNK;
            ti->dequantize(row + (size_t)(k0 / ti->block_elems) * ti->block_bytes, w, len / ti->block_elems);
            for (int n = 0; n < rows; n++) {
                const float *xn = x + (size_t)n * IC + k0;
                float *s = lane[n];
                int k = 0;
                for (; k + LANES <= len; k += LANES)
                    for (int j = 0; j < LANES; j++) s[j] += xn[k + j] * w[k + j];
                for (int j = 0; k + j < len; j++) s[j] += xn[k + j] * w[k + j]; /* (F16 rows of any width) */
            }
        }
        for (int n = 0; n < rows; n++) {
            const float *s = lane[n];
            y[(size_t)n * OC + o] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
        }
    }
}

#ifdef TLM_X86_KERNELS
/* ---- products: AVX2 + FMA (+ F16C for the f16 scales) ---------------------------------------------
 *
 * Every kernel sums a row of x against a weight row the same way: the weights in units of 32
 * (4 vectors of 8), vector v of each unit into that row's accumulator v, units in order, and at
 * the end (a0 + a1) + (a2 + a3) across the 8 lanes. Four chains hide the FMA latency when there
 * is one row (decoding), and as no row's order depends on the others, one row alone
 * (matvec_quant_part) gets exactly what it gets among four. Rows go two at a time: 8
 * accumulators and the decoding fit the 16 registers, and a third and fourth row decode the
 * weight row again from L1, not from memory.
 *
 * Decoding widens bytes to 32-bit lanes (vpmovzxbd straight from the block where a byte holds
 * two levels, byte arithmetic on 32 at a time where the bits of a level lie in two arrays),
 * converts them to float and applies the block's scales (an fmsub, a multiply, or for Q4_0 a
 * subtraction and a multiply), exact by the argument at the top of the file, so each weight is
 * the dequantizer's value, bit for bit (wq_dequantize_rows uses the same decoders). */

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

AVX2_INLINE void zero_acc(__m256 acc[2][4]) {
    for (int n = 0; n < 2; n++)
        for (int v = 0; v < 4; v++) acc[n][v] = _mm256_setzero_ps();
}

/* acc[n][v] += w * x[n][0..7] for the rows (1 or 2, x rows IC apart) */
AVX2_INLINE void fma_rows(__m256 acc[][4], const int rows, const int v, __m256 w, const float *x, int IC) {
    acc[0][v] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x), acc[0][v]);
    if (rows > 1) acc[1][v] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + IC), acc[1][v]);
}

AVX2_INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX2_INLINE void store_rows(float *y, int OC, const int rows, __m256 acc[][4]) {
    for (int n = 0; n < rows; n++)
        y[(size_t)n * OC] =
            hsum8(_mm256_add_ps(_mm256_add_ps(acc[n][0], acc[n][1]), _mm256_add_ps(acc[n][2], acc[n][3])));
}

AVX2_INLINE __m256 f16_bcast(const uint8_t p[2]) {
    return _mm256_set1_ps(_cvtsh_ss((unsigned short)(p[0] | p[1] << 8)));
}
AVX2_INLINE __m256i u8x8_to_i32(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
AVX2_INLINE __m256i i8x8_to_i32(const int8_t *p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
AVX2_INLINE __m256i bytes_set(int b) { return _mm256_set1_epi8((char)b); }

/* 32 bytes as 4 vectors of 8 floats (unsigned or signed bytes) */
AVX2_INLINE void u8x32_to_f32(__m256i q, __m256 out[4]) {
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    out[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
    out[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(lo, lo)));
    out[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
    out[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(hi, hi)));
}
AVX2_INLINE void i8x32_to_f32(__m256i q, __m256 out[4]) {
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    out[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
    out[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(lo, lo)));
    out[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
    out[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(hi, hi)));
}

/* Q8_0: q * d, the 32 weights of block b */
AVX2_INLINE void q8_0_weights(const blk_q8_0 *b, __m256 w[4]) {
    const __m256 d = f16_bcast(b->d);
#pragma GCC unroll 4
    for (int v = 0; v < 4; v++) w[v] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(i8x8_to_i32(b->qs + 8 * v)));
}

/* Q4_0: (q - 8) * d, the subtraction in float (exact; not q d - 8 d in one fmsub, which gives
 * +0 where the dequantizer's 0 * d is -0 for a negative d); bytes 0..7 hold elements 0..7 (low
 * nibbles) and 16..23 (high), bytes 8..15 elements 8..15 and 24..31 */
AVX2_INLINE __m256 q4_0_weight8(__m256i q, __m256 d) {
    return _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(8.0f)), d);
}
AVX2_INLINE void q4_0_weights(const blk_q4_0 *b, __m256 w[4]) {
    const __m256 d = f16_bcast(b->d);
    const __m256i nibble = _mm256_set1_epi32(15);
    const __m256i q0 = u8x8_to_i32(b->qs), q1 = u8x8_to_i32(b->qs + 8);
    w[0] = q4_0_weight8(_mm256_and_si256(q0, nibble), d);
    w[1] = q4_0_weight8(_mm256_and_si256(q1, nibble), d);
    w[2] = q4_0_weight8(_mm256_srli_epi32(q0, 4), d);
    w[3] = q4_0_weight8(_mm256_srli_epi32(q1, 4), d);
}

/* Q4_K / Q5_K: the 8 sub-block scales d * sc and minimums dmin * m as floats. The 6-bit fields
 * of scale_min_k4 taken 4 at a time from the three little-endian words of the 12 bytes. */
AVX2_INLINE void k_scales(const uint8_t d[2], const uint8_t dmin[2], const uint8_t s[12], float d1[8], float m1[8]) {
    uint32_t a0, a1, a2;
    memcpy(&a0, s, 4), memcpy(&a1, s + 4, 4), memcpy(&a2, s + 8, 4);
    const uint32_t sc_lo = a0 & 0x3f3f3f3fu, m_lo = a1 & 0x3f3f3f3fu;
    const uint32_t sc_hi = (a2 & 0x0f0f0f0fu) | ((a0 >> 6) & 0x03030303u) << 4;
    const uint32_t m_hi = ((a2 >> 4) & 0x0f0f0f0fu) | ((a1 >> 6) & 0x03030303u) << 4;
    const __m128i sc = _mm_cvtsi64_si128((long long)((uint64_t)sc_hi << 32 | sc_lo));
    const __m128i m = _mm_cvtsi64_si128((long long)((uint64_t)m_hi << 32 | m_lo));
    _mm256_storeu_ps(d1, _mm256_mul_ps(f16_bcast(d), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc))));
    _mm256_storeu_ps(m1, _mm256_mul_ps(f16_bcast(dmin), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m))));
}

/* Q4_K: 8 bytes of a 64-element chunk give 8 weights of its first sub-block (low nibbles) and 8
 * of its second (high): d1 q - m1, the product exact, one rounding as in the dequantizer */
AVX2_INLINE void q4_k_pair(const uint8_t *q8, __m256 d_lo, __m256 m_lo, __m256 d_hi, __m256 m_hi, __m256 *lo,
                           __m256 *hi) {
    const __m256i q = u8x8_to_i32(q8);
    *lo = _mm256_fmsub_ps(_mm256_cvtepi32_ps(_mm256_and_si256(q, _mm256_set1_epi32(15))), d_lo, m_lo);
    *hi = _mm256_fmsub_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(q, 4)), d_hi, m_hi);
}

/* Q5_K: the levels (0..31) of the two sub-blocks of chunk c. qh_run is qh shifted right by 2c
 * in 16-bit lanes (bits 0 and 1 of each byte are then the chunk's: a lane's shift moves the low
 * byte's bits and the high byte's alike, and the masks keep one bit of each byte). */
AVX2_INLINE void q5_k_levels(const blk_q5_k *b, int c, __m256i qh_run, __m256 lo[4], __m256 hi[4]) {
    const __m256i qs = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
    const __m256i nibble = bytes_set(15), bit4 = bytes_set(16);
    const __m256i q_lo =
        _mm256_or_si256(_mm256_and_si256(qs, nibble), _mm256_and_si256(_mm256_slli_epi16(qh_run, 4), bit4));
    const __m256i q_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qs, 4), nibble),
                                         _mm256_and_si256(_mm256_slli_epi16(qh_run, 3), bit4));
    u8x32_to_f32(q_lo, lo);
    u8x32_to_f32(q_hi, hi);
}

/* Q6_K: the levels minus 32 of group g (0..3) of a half: nibbles of ql_half + 32 (g & 1), the
 * two high bits from qh_run = the half's qh shifted right by 2g in 16-bit lanes (as Q5_K) */
AVX2_INLINE __m256i q6_k_level_bytes(const uint8_t *ql_half, int g, __m256i qh_run) {
    const __m256i ql = _mm256_loadu_si256((const __m256i *)(ql_half + 32 * (g & 1)));
    const __m256i nibble = bytes_set(15);
    const __m256i low = g < 2 ? _mm256_and_si256(ql, nibble) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), nibble);
    const __m256i high = _mm256_and_si256(_mm256_slli_epi16(qh_run, 4), bytes_set(0x30));
    return _mm256_sub_epi8(_mm256_or_si256(low, high), bytes_set(32));
}
AVX2_INLINE void q6_k_levels(const uint8_t *ql_half, int g, __m256i qh_run, __m256 out[4]) {
    i8x32_to_f32(q6_k_level_bytes(ql_half, g, qh_run), out);
}

/* the 16 sub-block scales d * scales[j] of a Q6_K block */
AVX2_INLINE void q6_k_scales(const blk_q6_k *b, float ds[16]) {
    const __m256 d = f16_bcast(b->d);
    _mm256_storeu_ps(ds, _mm256_mul_ps(d, _mm256_cvtepi32_ps(i8x8_to_i32(b->scales))));
    _mm256_storeu_ps(ds + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(i8x8_to_i32(b->scales + 8))));
}

AVX2_INLINE __m256 f16x8(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

/* -- one block of one weight row into the accumulators acc[0 .. rows) of rows (1 or 2) rows of x
 * (x at the block's first element, rows IC apart) -- */

AVX2_INLINE void q8_0_block(__m256 acc[][4], const int rows, const blk_q8_0 *b, const float *x, int IC) {
    __m256 w[4];
    q8_0_weights(b, w);
#pragma GCC unroll 4
    for (int v = 0; v < 4; v++) fma_rows(acc, rows, v, w[v], x + 8 * v, IC);
}

AVX2_INLINE void q4_0_block(__m256 acc[][4], const int rows, const blk_q4_0 *b, const float *x, int IC) {
    __m256 w[4];
    q4_0_weights(b, w);
#pragma GCC unroll 4
    for (int v = 0; v < 4; v++) fma_rows(acc, rows, v, w[v], x + 8 * v, IC);
}

AVX2_INLINE void q4_k_block(__m256 acc[][4], const int rows, const blk_q4_k *b, const float *x, int IC) {
    float d1[8], m1[8];
    k_scales(b->d, b->dmin, b->scales, d1, m1);
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m256 d_lo = _mm256_broadcast_ss(d1 + 2 * c), m_lo = _mm256_broadcast_ss(m1 + 2 * c);
        const __m256 d_hi = _mm256_broadcast_ss(d1 + 2 * c + 1), m_hi = _mm256_broadcast_ss(m1 + 2 * c + 1);
        const float *xc = x + 64 * c;
        /* (vector v of the first sub-block, then of the second: each accumulator still sees its
         * vectors unit after unit) */
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) {
            __m256 lo, hi;
            q4_k_pair(b->qs + 32 * c + 8 * v, d_lo, m_lo, d_hi, m_hi, &lo, &hi);
            fma_rows(acc, rows, v, lo, xc + 8 * v, IC);
            fma_rows(acc, rows, v, hi, xc + 32 + 8 * v, IC);
        }
    }
}

AVX2_INLINE void q5_k_block(__m256 acc[][4], const int rows, const blk_q5_k *b, const float *x, int IC) {
    float d1[8], m1[8];
    k_scales(b->d, b->dmin, b->scales, d1, m1);
    __m256i qh_run = _mm256_loadu_si256((const __m256i *)b->qh);
    for (int c = 0; c < 4; c++, qh_run = _mm256_srli_epi16(qh_run, 2)) {
        __m256 lo[4], hi[4];
        q5_k_levels(b, c, qh_run, lo, hi);
        const __m256 d_lo = _mm256_broadcast_ss(d1 + 2 * c), m_lo = _mm256_broadcast_ss(m1 + 2 * c);
        const __m256 d_hi = _mm256_broadcast_ss(d1 + 2 * c + 1), m_hi = _mm256_broadcast_ss(m1 + 2 * c + 1);
        const float *xc = x + 64 * c;
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) fma_rows(acc, rows, v, _mm256_fmsub_ps(lo[v], d_lo, m_lo), xc + 8 * v, IC);
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) fma_rows(acc, rows, v, _mm256_fmsub_ps(hi[v], d_hi, m_hi), xc + 32 + 8 * v, IC);
    }
}

AVX2_INLINE void q6_k_block(__m256 acc[][4], const int rows, const blk_q6_k *b, const float *x, int IC) {
    float ds[16];
    q6_k_scales(b, ds);
    for (int h = 0; h < 2; h++) {
        __m256i qh_run = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++, qh_run = _mm256_srli_epi16(qh_run, 2)) {
            __m256 q[4];
            q6_k_levels(b->ql + 64 * h, g, qh_run, q);
            const __m256 s0 = _mm256_broadcast_ss(ds + 8 * h + 2 * g), s1 = _mm256_broadcast_ss(ds + 8 * h + 2 * g + 1);
            const float *xg = x + 128 * h + 32 * g;
            fma_rows(acc, rows, 0, _mm256_mul_ps(q[0], s0), xg, IC);
            fma_rows(acc, rows, 1, _mm256_mul_ps(q[1], s0), xg + 8, IC);
            fma_rows(acc, rows, 2, _mm256_mul_ps(q[2], s1), xg + 16, IC);
            fma_rows(acc, rows, 3, _mm256_mul_ps(q[3], s1), xg + 24, IC);
        }
    }
}

/* -- one output: y[n * OC] = row . x[n] for rows (1 or 2) rows of x (a constant at each call) -- */

/* (one macro for both widths: the vector type and its zero / store helpers are its arguments) */
#define BLOCK_OUT(INLINE, VEC, ZERO, STORE, name, blk_type, elems, block)                                              \
    INLINE void name(float *y, const float *x, const uint8_t *row, int IC, int OC, const int rows,                     \
                     const type_info *ti) {                                                                            \
        (void)ti;                                                                                                      \
        VEC acc[2][4];                                                                                                 \
        ZERO(acc);                                                                                                     \
        const blk_type *b = (const blk_type *)row;                                                                     \
        for (int k = 0; k < IC; k += elems, b++) block(acc, rows, b, x + k, IC);                                       \
        STORE(y, OC, rows, acc);                                                                                       \
    }
#define AVX2_BLOCK_OUT(name, blk_type, elems, block)                                                                   \
    BLOCK_OUT(AVX2_INLINE, __m256, zero_acc, store_rows, name, blk_type, elems, block)
AVX2_BLOCK_OUT(q8_0_out, blk_q8_0, QK, q8_0_block)
AVX2_BLOCK_OUT(q4_0_out, blk_q4_0, QK, q4_0_block)
AVX2_BLOCK_OUT(q4_k_out, blk_q4_k, QK_K, q4_k_block)
AVX2_BLOCK_OUT(q5_k_out, blk_q5_k, QK_K, q5_k_block)
AVX2_BLOCK_OUT(q6_k_out, blk_q6_k, QK_K, q6_k_block)

/* F16: 8 at a time through F16C; IC need not be a multiple of 8 (block of 1): the last vectors
 * of a row continue the unit order, the last IC % 8 products are added one by one */
AVX2_INLINE void f16_out(float *y, const float *x, const uint8_t *row, int IC, int OC, const int rows,
                         const type_info *ti) {
    (void)ti;
    __m256 acc[2][4];
    zero_acc(acc);
    int k = 0;
    for (; k + 32 <= IC; k += 32) {
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) fma_rows(acc, rows, v, f16x8(row + 2 * (k + 8 * v)), x + k + 8 * v, IC);
    }
    if (k + 8 <= IC) fma_rows(acc, rows, 0, f16x8(row + 2 * k), x + k, IC);
    if (k + 16 <= IC) fma_rows(acc, rows, 1, f16x8(row + 2 * (k + 8)), x + k + 8, IC);
    if (k + 24 <= IC) fma_rows(acc, rows, 2, f16x8(row + 2 * (k + 16)), x + k + 16, IC);
    store_rows(y, OC, rows, acc);
    for (int n = 0; n < rows; n++)
        for (int j = k + (IC - k) / 8 * 8; j < IC; j++)
            y[(size_t)n * OC] += x[(size_t)n * IC + j] * f16_at(row + 2 * j);
}

/* the other types (Q4_1, Q5_0, Q5_1, Q2_K, Q3_K: blocks of 32 or 256): a chunk dequantized by
 * the reference onto the stack, then summed from there in the unit order */
AVX2_INLINE void generic_out(float *y, const float *x, const uint8_t *row, int IC, int OC, const int rows,
                             const type_info *ti) {
    __m256 acc[2][4];
    float w[CHUNK] __attribute__((aligned(32)));
    zero_acc(acc);
    for (int k0 = 0; k0 < IC; k0 += CHUNK) {
        const int len = IC - k0 < CHUNK ? IC - k0 : CHUNK;
        ti->dequantize(row + (size_t)(k0 / ti->block_elems) * ti->block_bytes, w, len / ti->block_elems);
        for (int k = 0; k < len; k += 32) {
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++) fma_rows(acc, rows, v, _mm256_load_ps(w + k + 8 * v), x + k0 + k + 8 * v, IC);
        }
    }
    store_rows(y, OC, rows, acc);
}

/* rows [o0, o1) of W for `rows` rows of x, two rows of x at a time per weight row (a third and
 * fourth decode the weight row again, from L1). (Two weight rows side by side for one row of x,
 * to overlap their FMA chains, measured no faster on Zen 3: the decoding's own throughput is the
 * limit; docs/performance.md, "Figures behind the code".) */
/* (each row's lines are also asked for MATVEC_PREFETCH_BYTES ahead, into L2, as matvec.c does) */
#define ROWS_KERNEL(TARGET, name, out)                                                                                 \
    TARGET static void name(float *y, const float *x, const uint8_t *W, size_t row_bytes, int rows, int IC, int OC,    \
                            int o0, int o1, const type_info *ti) {                                                     \
        for (int o = o0; o < o1; o++) {                                                                                \
            const uint8_t *row = W + (size_t)o * row_bytes;                                                            \
            for (size_t b = 0; b < row_bytes; b += 64) _mm_prefetch((const char *)row + b + MATVEC_PREFETCH_BYTES,     \
                                                                    _MM_HINT_T1);                                      \
            int n = 0;                                                                                                 \
            for (; n + 2 <= rows; n += 2) out(y + (size_t)n * OC + o, x + (size_t)n * IC, row, IC, OC, 2, ti);         \
            if (n < rows) out(y + (size_t)n * OC + o, x + (size_t)n * IC, row, IC, OC, 1, ti);                         \
        }                                                                                                              \
    }
#define AVX2_ROWS_KERNEL(name, out) ROWS_KERNEL(AVX2, name, out)
AVX2_ROWS_KERNEL(rows_q8_0_avx2, q8_0_out)
AVX2_ROWS_KERNEL(rows_q4_0_avx2, q4_0_out)
AVX2_ROWS_KERNEL(rows_q4_k_avx2, q4_k_out)
AVX2_ROWS_KERNEL(rows_q5_k_avx2, q5_k_out)
AVX2_ROWS_KERNEL(rows_q6_k_avx2, q6_k_out)
AVX2_ROWS_KERNEL(rows_f16_avx2, f16_out)
AVX2_ROWS_KERNEL(rows_generic_avx2, generic_out)

/* One weight row of IC elements into dst with the same decoders (a prompt's GEMM tile is
 * dequantized row by row); 0 for a type without its own decoder here */
AVX2 static int dequantize_row_avx2(int t, const uint8_t *row, float *dst, int IC) {
    __m256 w[4];
    switch (t) {
    case WQ_Q8_0:
        for (int k = 0; k < IC; k += QK) {
            q8_0_weights((const blk_q8_0 *)row + k / QK, w);
            for (int v = 0; v < 4; v++) _mm256_storeu_ps(dst + k + 8 * v, w[v]);
        }
        return 1;
    case WQ_Q4_0:
        for (int k = 0; k < IC; k += QK) {
            q4_0_weights((const blk_q4_0 *)row + k / QK, w);
            for (int v = 0; v < 4; v++) _mm256_storeu_ps(dst + k + 8 * v, w[v]);
        }
        return 1;
    case WQ_Q4_K:
        for (int k = 0; k < IC; k += QK_K) {
            const blk_q4_k *b = (const blk_q4_k *)row + k / QK_K;
            float d1[8], m1[8];
            k_scales(b->d, b->dmin, b->scales, d1, m1);
            for (int c = 0; c < 4; c++)
                for (int v = 0; v < 4; v++) {
                    __m256 lo, hi;
                    q4_k_pair(b->qs + 32 * c + 8 * v, _mm256_broadcast_ss(d1 + 2 * c), _mm256_broadcast_ss(m1 + 2 * c),
                              _mm256_broadcast_ss(d1 + 2 * c + 1), _mm256_broadcast_ss(m1 + 2 * c + 1), &lo, &hi);
                    _mm256_storeu_ps(dst + k + 64 * c + 8 * v, lo);
                    _mm256_storeu_ps(dst + k + 64 * c + 32 + 8 * v, hi);
                }
        }
        return 1;
    case WQ_Q5_K:
        for (int k = 0; k < IC; k += QK_K) {
            const blk_q5_k *b = (const blk_q5_k *)row + k / QK_K;
            float d1[8], m1[8];
            k_scales(b->d, b->dmin, b->scales, d1, m1);
            __m256i qh_run = _mm256_loadu_si256((const __m256i *)b->qh);
            for (int c = 0; c < 4; c++, qh_run = _mm256_srli_epi16(qh_run, 2)) {
                __m256 lo[4], hi[4];
                q5_k_levels(b, c, qh_run, lo, hi);
                for (int v = 0; v < 4; v++) {
                    _mm256_storeu_ps(dst + k + 64 * c + 8 * v, _mm256_fmsub_ps(lo[v], _mm256_broadcast_ss(d1 + 2 * c),
                                                                               _mm256_broadcast_ss(m1 + 2 * c)));
                    _mm256_storeu_ps(dst + k + 64 * c + 32 + 8 * v,
                                     _mm256_fmsub_ps(hi[v], _mm256_broadcast_ss(d1 + 2 * c + 1),
                                                     _mm256_broadcast_ss(m1 + 2 * c + 1)));
                }
            }
        }
        return 1;
    case WQ_Q6_K:
        for (int k = 0; k < IC; k += QK_K) {
            const blk_q6_k *b = (const blk_q6_k *)row + k / QK_K;
            float ds[16];
            q6_k_scales(b, ds);
            for (int h = 0; h < 2; h++) {
                __m256i qh_run = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
                for (int g = 0; g < 4; g++, qh_run = _mm256_srli_epi16(qh_run, 2)) {
                    q6_k_levels(b->ql + 64 * h, g, qh_run, w);
                    float *out = dst + k + 128 * h + 32 * g;
                    for (int v = 0; v < 4; v++)
                        _mm256_storeu_ps(out + 8 * v,
                                         _mm256_mul_ps(w[v], _mm256_broadcast_ss(ds + 8 * h + 2 * g + v / 2)));
                }
            }
        }
        return 1;
    case WQ_F16: {
        int k = 0;
        for (; k + 8 <= IC; k += 8) _mm256_storeu_ps(dst + k, f16x8(row + 2 * k));
        for (; k < IC; k++) dst[k] = f16_at(row + 2 * k);
        return 1;
    }
    default:
        return 0;
    }
}

/* ---- products: AVX-512 (F, BW, VL + FMA, F16C) -------------------------------------------------------
 *
 * The AVX2 kernels' decoders at twice the width for the common types (Q8_0, Q4_0, Q4_K, Q6_K,
 * F16): 16 weights a vector, each the dequantizer's value bit for bit (the same exact products
 * and single rounding), four accumulators per row of x in the unit order of 64 weights, and
 * (a0 + a1) + (a2 + a3) reduced across the 16 lanes. A row's sum is the same whichever
 * MATVEC_MAX_ROWS group it is in, as with AVX2; it differs from AVX2's in f32 summation order
 * only. The other types keep their AVX2 kernels. Measured on AMD Zen 4 (1 thread, 2048x768, best
 * of the calls): the same GB/s as AVX2 for Q8_0 (18.5), Q4_K (8.0) and Q6_K (9.5): Zen 4 runs
 * 512-bit float ops as two 256-bit halves, and the conversions and FMAs are the limit there. */

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define AVX512_INLINE static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

AVX512_INLINE void zero_acc16(__m512 acc[2][4]) {
    for (int n = 0; n < 2; n++)
        for (int v = 0; v < 4; v++) acc[n][v] = _mm512_setzero_ps();
}
AVX512_INLINE void fma_rows16(__m512 acc[][4], const int rows, const int v, __m512 w, const float *x, int IC) {
    acc[0][v] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x), acc[0][v]);
    if (rows > 1) acc[1][v] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + IC), acc[1][v]);
}
AVX512_INLINE void store_rows16(float *y, int OC, const int rows, __m512 acc[][4]) {
    for (int n = 0; n < rows; n++)
        y[(size_t)n * OC] =
            _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[n][0], acc[n][1]), _mm512_add_ps(acc[n][2], acc[n][3])));
}
AVX512_INLINE __m512 f16_bcast16(const uint8_t p[2]) {
    return _mm512_set1_ps(_cvtsh_ss((unsigned short)(p[0] | p[1] << 8)));
}
AVX512_INLINE __m512i u8x16_to_i32(const uint8_t *p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)); }
AVX512_INLINE __m512i i8x16_to_i32(const int8_t *p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)); }

/* Q8_0: block b's 32 weights into accumulators v0, v0 + 1 */
AVX512_INLINE void q8_0_block16(__m512 acc[][4], const int rows, int v0, const blk_q8_0 *b, const float *x, int IC) {
    const __m512 d = f16_bcast16(b->d);
    fma_rows16(acc, rows, v0, _mm512_mul_ps(d, _mm512_cvtepi32_ps(i8x16_to_i32((const int8_t *)b->qs))), x, IC);
    fma_rows16(acc, rows, v0 + 1, _mm512_mul_ps(d, _mm512_cvtepi32_ps(i8x16_to_i32((const int8_t *)b->qs + 16))),
               x + 16, IC);
}

/* Q4_0: bytes 0..15 hold elements 0..15 (low nibbles) and 16..31 (high); (q - 8) * d as AVX2 */
AVX512_INLINE void q4_0_block16(__m512 acc[][4], const int rows, int v0, const blk_q4_0 *b, const float *x, int IC) {
    const __m512 d = f16_bcast16(b->d), eight = _mm512_set1_ps(8.0f);
    const __m512i q = u8x16_to_i32(b->qs);
    const __m512 lo = _mm512_cvtepi32_ps(_mm512_and_si512(q, _mm512_set1_epi32(15)));
    const __m512 hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(q, 4));
    fma_rows16(acc, rows, v0, _mm512_mul_ps(_mm512_sub_ps(lo, eight), d), x, IC);
    fma_rows16(acc, rows, v0 + 1, _mm512_mul_ps(_mm512_sub_ps(hi, eight), d), x + 16, IC);
}

#define AVX512_PAIRED_OUT(name, blk_type, block)                                                                       \
    AVX512_INLINE void name(float *y, const float *x, const uint8_t *row, int IC, int OC, const int rows,              \
                            const type_info *ti) {                                                                     \
        (void)ti;                                                                                                      \
        __m512 acc[2][4];                                                                                              \
        zero_acc16(acc);                                                                                               \
        const blk_type *b = (const blk_type *)row;                                                                     \
        int k = 0;                                                                                                     \
        for (; k + 2 * QK <= IC; k += 2 * QK, b += 2) {                                                                \
            block(acc, rows, 0, b, x + k, IC);                                                                         \
            block(acc, rows, 2, b + 1, x + k + QK, IC);                                                                \
        }                                                                                                              \
        if (k < IC) block(acc, rows, 0, b, x + k, IC);                                                                 \
        store_rows16(y, OC, rows, acc);                                                                                \
    }
AVX512_PAIRED_OUT(q8_0_out16, blk_q8_0, q8_0_block16)
AVX512_PAIRED_OUT(q4_0_out16, blk_q4_0, q4_0_block16)

/* Q4_K: 16 bytes of chunk c give 16 weights of its first sub-block (low nibbles) and 16 of its
 * second (high): d1 q - m1 as AVX2's q4_k_pair */
AVX512_INLINE void q4_k_block16(__m512 acc[][4], const int rows, const blk_q4_k *b, const float *x, int IC) {
    float d1[8], m1[8];
    k_scales(b->d, b->dmin, b->scales, d1, m1);
    const __m512i nibble = _mm512_set1_epi32(15);
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m512 d_lo = _mm512_set1_ps(d1[2 * c]), m_lo = _mm512_set1_ps(m1[2 * c]);
        const __m512 d_hi = _mm512_set1_ps(d1[2 * c + 1]), m_hi = _mm512_set1_ps(m1[2 * c + 1]);
        const float *xc = x + 64 * c;
        const __m512i qa = u8x16_to_i32(b->qs + 32 * c), qb = u8x16_to_i32(b->qs + 32 * c + 16);
        fma_rows16(acc, rows, 0, _mm512_fmsub_ps(_mm512_cvtepi32_ps(_mm512_and_si512(qa, nibble)), d_lo, m_lo), xc, IC);
        fma_rows16(acc, rows, 1, _mm512_fmsub_ps(_mm512_cvtepi32_ps(_mm512_and_si512(qb, nibble)), d_lo, m_lo), xc + 16,
                   IC);
        fma_rows16(acc, rows, 2, _mm512_fmsub_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(qa, 4)), d_hi, m_hi), xc + 32, IC);
        fma_rows16(acc, rows, 3, _mm512_fmsub_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(qb, 4)), d_hi, m_hi), xc + 48, IC);
    }
}

/* Q6_K: group g's 32 levels (AVX2's byte arithmetic) as two vectors, 16 weights of one scale each */
AVX512_INLINE void q6_k_block16(__m512 acc[][4], const int rows, const blk_q6_k *b, const float *x, int IC) {
    float ds[16];
    q6_k_scales(b, ds);
    for (int h = 0; h < 2; h++) {
        __m256i qh_run = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++, qh_run = _mm256_srli_epi16(qh_run, 2)) {
            const __m256i q = q6_k_level_bytes(b->ql + 64 * h, g, qh_run);
            const __m512 q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)));
            const __m512 q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)));
            const float *xg = x + 128 * h + 32 * g;
            /* (groups alternate between the accumulator pairs: four chains per row) */
            const int v0 = 2 * (g & 1);
            fma_rows16(acc, rows, v0, _mm512_mul_ps(q0, _mm512_set1_ps(ds[8 * h + 2 * g])), xg, IC);
            fma_rows16(acc, rows, v0 + 1, _mm512_mul_ps(q1, _mm512_set1_ps(ds[8 * h + 2 * g + 1])), xg + 16, IC);
        }
    }
}

#define AVX512_BLOCK_OUT(name, blk_type, elems, block)                                                                 \
    BLOCK_OUT(AVX512_INLINE, __m512, zero_acc16, store_rows16, name, blk_type, elems, block)
AVX512_BLOCK_OUT(q4_k_out16, blk_q4_k, QK_K, q4_k_block16)
AVX512_BLOCK_OUT(q6_k_out16, blk_q6_k, QK_K, q6_k_block16)

/* F16: 16 at a time; the last vectors of a row continue the unit order, the rest one by one */
AVX512_INLINE void f16_out16(float *y, const float *x, const uint8_t *row, int IC, int OC, const int rows,
                             const type_info *ti) {
    (void)ti;
    __m512 acc[2][4];
    zero_acc16(acc);
    int k = 0;
    for (; k + 64 <= IC; k += 64) {
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
            fma_rows16(acc, rows, v, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 2 * (k + 16 * v)))),
                       x + k + 16 * v, IC);
    }
    for (int v = 0; k + 16 <= IC; k += 16, v++)
        fma_rows16(acc, rows, v, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 2 * k))), x + k, IC);
    store_rows16(y, OC, rows, acc);
    for (int n = 0; n < rows; n++)
        for (int j = k; j < IC; j++) y[(size_t)n * OC] += x[(size_t)n * IC + j] * f16_at(row + 2 * j);
}

/* (the AVX2 kernels' row loop, ROWS_KERNEL, over the 16-wide outputs) */
#define AVX512_ROWS_KERNEL(name, out) ROWS_KERNEL(AVX512, name, out)
AVX512_ROWS_KERNEL(rows_q8_0_avx512, q8_0_out16)
AVX512_ROWS_KERNEL(rows_q4_0_avx512, q4_0_out16)
AVX512_ROWS_KERNEL(rows_q4_k_avx512, q4_k_out16)
AVX512_ROWS_KERNEL(rows_q6_k_avx512, q6_k_out16)
AVX512_ROWS_KERNEL(rows_f16_avx512, f16_out16)
#endif

/* ---- dispatch ----------------------------------------------------------------------------------------- */

/* the AVX2 kernels: AVX2 + FMA (tlm_cpu_isa, which TLM_ISA caps; AVX-512 CPUs run these too)
 * and F16C for the scales (every AVX2 CPU has it; asked of cpuid all the same) */
static int avx2_kernels(void) {
#ifdef TLM_X86_KERNELS
    static _Atomic int f16c = -1;
    if (tlm_cpu_isa() < TLM_ISA_AVX2) return 0;
    if (f16c < 0) {
        unsigned a, b, c, d;
        f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    }
    return f16c;
#else
    return 0;
#endif
}

static rows_kernel pick(int t) {
#ifdef TLM_X86_KERNELS
    if (avx2_kernels() && tlm_cpu_isa() >= TLM_ISA_AVX512) switch (t) {
        case WQ_Q8_0:
            return rows_q8_0_avx512;
        case WQ_Q4_0:
            return rows_q4_0_avx512;
        case WQ_Q4_K:
            return rows_q4_k_avx512;
        case WQ_Q6_K:
            return rows_q6_k_avx512;
        case WQ_F16:
            return rows_f16_avx512;
        default:
            break; /* (the AVX2 kernels below) */
        }
    if (avx2_kernels()) switch (t) {
        case WQ_Q8_0:
            return rows_q8_0_avx2;
        case WQ_Q4_0:
            return rows_q4_0_avx2;
        case WQ_Q4_K:
            return rows_q4_k_avx2;
        case WQ_Q5_K:
            return rows_q5_k_avx2;
        case WQ_Q6_K:
            return rows_q6_k_avx2;
        case WQ_F16:
            return rows_f16_avx2;
        default:
            return rows_generic_avx2;
        }
#endif
    (void)t;
    return rows_scalar;
}

const char *wq_widening_kernel(int t) {
    if (t == WQ_F32 || t == WQ_BF16) return "f32 FMA (matvec.c)";
    if (!info(t)) return "none (not readable)";
#ifdef TLM_X86_KERNELS
    const rows_kernel k = pick(t);
    if (k == rows_generic_avx2) return "f32 FMA, weights dequantized a chunk at a time (AVX2)";
    if (k == rows_q8_0_avx512 || k == rows_q4_0_avx512 || k == rows_q4_k_avx512 || k == rows_q6_k_avx512 ||
        k == rows_f16_avx512)
        return "f32 FMA, weights widened in registers (AVX-512)";
    if (k != rows_scalar) return "f32 FMA, weights widened in registers (AVX2)";
#endif
    return "f32, weights dequantized a chunk at a time (plain C)";
}

/* the type and width the products can read (F32 and BF16 are matvec.c's) */
static const type_info *product_type(int t, int IC) {
    const type_info *ti = info(t);
    if (!ti || IC % ti->block_elems) {
        tlm_error("matvec_quant: %s weights with rows of %d are not readable", wq_name(t), IC);
        return NULL;
    }
    return ti;
}

void matvec_quant(float *y, const float *x, const void *W, int t, const float *bias, int N, int IC, int OC) {
    if (t == WQ_F32 || t == WQ_BF16) { /* matvec.c's kernels */
        if (t == WQ_F32)
            matvec_f32(y, x, W, bias, N, IC, OC);
        else
            matvec_bf16(y, x, W, bias, N, IC, OC);
        return;
    }
    if (!wq_int_matvec(y, x, W, t, bias, N, IC, OC)) return; /* (quant_int.c, when chosen) */
    const type_info *ti = product_type(t, IC);
    if (!ti) {
        fill_nan(y, (int64_t)N * OC);
        return;
    }
    const rows_kernel kernel = pick(t);
    const size_t row_bytes = wq_row_bytes(t, IC);
    for (int n0 = 0; n0 < N; n0 += MATVEC_MAX_ROWS) {
        const int rows = N - n0 < MATVEC_MAX_ROWS ? N - n0 : MATVEC_MAX_ROWS;
        float *yn = y + (size_t)n0 * OC;
        const float *xn = x + (size_t)n0 * IC;
        /* each thread one contiguous, equal share of the output rows (a multiple of 16), so that it
         * streams its own range of W and all finish together (as matvec.c) */
#pragma omp parallel
        {
            const int nt = omp_get_num_threads(), id = omp_get_thread_num();
            const int per = ((OC + nt - 1) / nt + 15) & ~15;
            const int o0 = id * per < OC ? id * per : OC, o1 = o0 + per < OC ? o0 + per : OC;
            if (o1 > o0) {
                kernel(yn, xn, W, row_bytes, rows, IC, OC, o0, o1, ti);
                if (bias)
                    for (int n = 0; n < rows; n++)
                        for (int o = o0; o < o1; o++) yn[(size_t)n * OC + o] += bias[o];
            }
        }
    }
}

void matvec_quant_part(float *y, const float *x, const void *W, int t, const float *bias, int IC, int o0, int o1) {
    if (o1 <= o0) return;
    /* (a decoding step's products as `generate --profile` shows them: timed on the step's first
     * thread only, as its norms are) */
    PROF_SCOPE("matvec_quant_part");
    if (t == WQ_F32 || t == WQ_BF16) { /* matvec.c's kernels, as matvec_quant */
        matvec_part(y, x, t == WQ_F32 ? W : NULL, t == WQ_BF16 ? W : NULL, bias, IC, o0, o1);
        return;
    }
    if (!wq_int_matvec_part(y, x, W, t, bias, IC, o0, o1)) return;
    const type_info *ti = product_type(t, IC);
    if (!ti) {
        fill_nan(y + o0, o1 - o0);
        return;
    }
    /* (one row: the kernel indexes y by the row only, so OC is not used; o1 stands in for it) */
    pick(t)(y, x, W, wq_row_bytes(t, IC), 1, IC, o1, o0, o1, ti);
    if (bias)
        for (int o = o0; o < o1; o++) y[o] += bias[o];
}

void wq_dequantize_rows(int t, const void *W, int IC, int o0, int o1, float *dst) {
    const type_info *ti = info(t);
    if (o1 <= o0) return;
    if (!ti || IC % ti->block_elems) {
        tlm_error("dequantize: %s rows of %d elements are not readable", wq_name(t), IC);
        fill_nan(dst, (int64_t)(o1 - o0) * IC);
        return;
    }
    const size_t row_bytes = wq_row_bytes(t, IC);
#ifdef TLM_X86_KERNELS
    const int avx2 = avx2_kernels();
#endif
    for (int o = o0; o < o1; o++) {
        const uint8_t *row = (const uint8_t *)W + (size_t)o * row_bytes;
        float *out = dst + (size_t)(o - o0) * IC;
#ifdef TLM_X86_KERNELS
        if (avx2 && dequantize_row_avx2(t, row, out, IC)) continue;
#endif
        ti->dequantize(row, out, IC / ti->block_elems);
    }
}
