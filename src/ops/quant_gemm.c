/* quant_gemm.c — the integer products of a quantized matrix W [OC, IC] with many rows of x [N, IC]
 * (a prompt), with quant_int.c's numerics (quant.h) and in a GEMM's order.
 *
 * x: every row rounded once to the type's activation blocks (wq_int_quantize_row: levels a in
 * -127..127, one f32 scale d_a per block of 32 or 256), and the level sums of each sub-block kept
 * as 32-bit integers (A_j).
 *
 * W: a panel of PW = 32 weight rows at a time, every block of them unpacked once (the per-type
 * bit layouts of quant_blocks.h, four levels per 32-bit word; Q4_K / Q5_K with AVX-512 16 rows at
 * a time, a 16 x 16 word transpose in registers, since the row by row scalar unpacking of weights
 * read from memory was a large share of a prompt's time) into
 *   u   [block][k / 4][PW][4]   the levels as unsigned bytes u = w + off (w the signed level the
 *                               format defines: Q8_0 off 128, Q4_0 8, Q5_0 16, Q6_K 32, Q3_K 4,
 *                               the others 0), so that vpdpbusd (u8 x s8) takes them as they are;
 *   sc [block][sub-block][PW]   the sub-block scales (1 where the format has none);
 *   mm [block][sub-block / 2][PW]   the minimums (Q4_K, Q5_K, Q2_K; 1 for Q4_1 / Q5_1, whose m
 *                               multiplies the block's A) as 16-bit pairs: sub-blocks 2h, 2h + 1;
 *   dw, m2 [block][PW]          the block's f16 d and its minimum factor (-dmin for the K types,
 *                               m for Q4_1 / Q5_1) as f32.
 * The panel then serves every row of x: a tile of weight rows (the vector's lanes) x NR rows of x
 * (register-blocked) sums per sub-block j S_j = sum u a (vpdpbusd, four products per lane) and
 *   I1 = sum_j sc_j (S_j - off A_j)        I2 = sum_j mm_j A_j
 * (I2 by vpdpwssd on the 16-bit pairs of mm and of A_j, |A_j| <= 32 * 127) which are quant_int.c's
 * integers exactly (exact integer sums in any order, no overflow: each
 * fits the reference's own int), then per block, as there:
 *   lane[i % 8] = fmaf((float)I1, d_w d_a, lane);  lane = fmaf((float)I2, m2 d_a, lane)
 * (m2 d_a = -(dmin d_a) exactly: negation is exact) and the row's value ((l0 + l1) + (l2 + l3)) +
 * ((l4 + l5) + (l6 + l7)). The float lanes of a tile live in a small buffer in L1. So every
 * output is bit for bit the reference's (tests/ops/test_quant_gemm.c). */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "ops.h"
#include "quant.h"
#include "quant_blocks.h"
#include "quant_gemm.h"
#include "util/cpu.h"
#include "util/profile.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define TLM_X86_KERNELS 1
#endif

enum { PW = 32 }; /* weight rows per panel */

/* a type's shape for the GEMM: block, sub-block, level offset, whether it has sub-block scales
 * and a minimums term */
typedef struct {
    int bk, sl, off, has_sc, has_mm;
} gfmt;

static int gfmt_of(int t, gfmt *f) {
    switch (t) {
    case WQ_Q8_0: *f = (gfmt){QK, QK, 128, 0, 0}; return 0;
    case WQ_Q4_0: *f = (gfmt){QK, QK, 8, 0, 0}; return 0;
    case WQ_Q4_1: *f = (gfmt){QK, QK, 0, 0, 1}; return 0;
    case WQ_Q5_0: *f = (gfmt){QK, QK, 16, 0, 0}; return 0;
    case WQ_Q5_1: *f = (gfmt){QK, QK, 0, 0, 1}; return 0;
    case WQ_Q2_K: *f = (gfmt){QK_K, 16, 0, 1, 1}; return 0;
    case WQ_Q3_K: *f = (gfmt){QK_K, 16, 4, 1, 0}; return 0;
    case WQ_Q4_K: case WQ_Q5_K: *f = (gfmt){QK_K, 32, 0, 1, 1}; return 0;
    case WQ_Q6_K: *f = (gfmt){QK_K, 16, 32, 1, 0}; return 0;
    default: return -1;
    }
}

/* one panel of unpacked weight rows (layout above), nb blocks */
typedef struct {
    uint8_t *u;
    int32_t *sc, *mm;
    float *dw, *m2;
} gpanel;

/* the quantized rows of x: row n's levels q + n * IC, scales d + n * nb, sub-block sums A + n * nb * ns
 * and the same as 16-bit pairs (sub-blocks 2h, 2h + 1 of a block) A2 + n * nb * nh */
typedef struct {
    const int8_t *q;
    const float *d;
    const int32_t *A, *A2;
    int IC, nb, ns, nh;
} gacts;

static inline int32_t pair16(int lo, int hi) { return (int32_t)((uint32_t)(uint16_t)lo | (uint32_t)(uint16_t)hi << 16); }

/* ---- unpacking ------------------------------------------------------------------------------------- */

static inline uint32_t ld32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
/* bits 0..3 of b as the low bit of four bytes */
static inline uint32_t spread4(uint32_t b) { return (b & 1) | (b & 2) << 7 | (b & 4) << 14 | (b & 8) << 21; }

/* Q4_K / Q5_K block b's sub-block scales, minimums' pairs, d and -dmin into panel block i, row pr
 * (the same offsets in both layouts) */
static void scales_k4(const uint8_t *b, const gpanel *P, int i, int pr) {
    const blk_q4_k *q = (const blk_q4_k *)b;
    int32_t *sc = P->sc + (size_t)i * 8 * PW + pr, *mm = P->mm + (size_t)i * 4 * PW + pr;
    for (int h = 0; h < 4; h++) {
        int s0, m0, s1, m1;
        scale_min_k4(q->scales, 2 * h, &s0, &m0), scale_min_k4(q->scales, 2 * h + 1, &s1, &m1);
        sc[2 * h * PW] = s0, sc[(2 * h + 1) * PW] = s1, mm[h * PW] = pair16(m0, m1);
    }
    P->dw[(size_t)i * PW + pr] = f16_at(q->d), P->m2[(size_t)i * PW + pr] = -f16_at(q->dmin);
}

/* weight row `row` (nb blocks of t) into panel row pr */
static void unpack_row(int t, const gfmt *f, const uint8_t *row, int nb, const gpanel *P, int pr) {
    const size_t bytes = wq_block_bytes(t);
    const int g4 = f->bk / 4, ns = f->bk / f->sl;
    for (int i = 0; i < nb; i++) {
        const uint8_t *b = row + (size_t)i * bytes;
        uint32_t *u = (uint32_t *)P->u + (size_t)i * g4 * PW + pr;
        int32_t *sc = P->sc + (size_t)i * ns * PW + pr, *mm = P->mm + (size_t)i * ((ns + 1) / 2) * PW + pr;
        float *dw = P->dw + (size_t)i * PW + pr, *m2 = P->m2 + (size_t)i * PW + pr;
        switch (t) {
        case WQ_Q8_0: {
            const blk_q8_0 *q = (const blk_q8_0 *)b;
            for (int k = 0; k < 8; k++) u[k * PW] = ld32((const uint8_t *)q->qs + 4 * k) ^ 0x80808080u;
            *dw = f16_at(q->d);
            break;
        }
        case WQ_Q4_0: case WQ_Q4_1: {
            const uint8_t *qs = t == WQ_Q4_0 ? ((const blk_q4_0 *)b)->qs : ((const blk_q4_1 *)b)->qs;
            for (int k = 0; k < 8; k++) u[k * PW] = (ld32(qs + (4 * k) % 16) >> (4 * (k / 4))) & 0x0f0f0f0fu;
            *dw = f16_at(b);
            if (t == WQ_Q4_1) *m2 = f16_at(b + 2), *mm = pair16(1, 0);
            break;
        }
        case WQ_Q5_0: case WQ_Q5_1: {
            const uint8_t *qs = t == WQ_Q5_0 ? ((const blk_q5_0 *)b)->qs : ((const blk_q5_1 *)b)->qs;
            const uint32_t h = ld32(t == WQ_Q5_0 ? ((const blk_q5_0 *)b)->qh : ((const blk_q5_1 *)b)->qh);
            for (int k = 0; k < 8; k++)
                u[k * PW] = ((ld32(qs + (4 * k) % 16) >> (4 * (k / 4))) & 0x0f0f0f0fu) | spread4(h >> (4 * k) & 15) << 4;
            *dw = f16_at(b);
            if (t == WQ_Q5_1) *m2 = f16_at(b + 2), *mm = pair16(1, 0);
            break;
        }
        case WQ_Q2_K: {
            const blk_q2_k *q = (const blk_q2_k *)b;
            for (int k = 0; k < 64; k++) {
                const int e = 4 * k;
                u[k * PW] = (ld32(q->qs + 32 * (e / 128) + e % 32) >> (2 * ((e % 128) / 32))) & 0x03030303u;
            }
            for (int j = 0; j < 16; j++) sc[j * PW] = q->scales[j] & 15;
            for (int h = 0; h < 8; h++) mm[h * PW] = pair16(q->scales[2 * h] >> 4, q->scales[2 * h + 1] >> 4);
            *dw = f16_at(q->d), *m2 = -f16_at(q->dmin);
            break;
        }
        case WQ_Q3_K: {
            const blk_q3_k *q = (const blk_q3_k *)b;
            for (int k = 0; k < 64; k++) {
                const int e = 4 * k;
                u[k * PW] = ((ld32(q->qs + 32 * (e / 128) + e % 32) >> (2 * ((e % 128) / 32))) & 0x03030303u) |
                            ((ld32(q->hmask + e % 32) >> (e / 32)) & 0x01010101u) << 2;
            }
            for (int j = 0; j < 16; j++) sc[j * PW] = scale_q3_k(q->scales, j);
            *dw = f16_at(q->d);
            break;
        }
        case WQ_Q4_K: case WQ_Q5_K: {
            const blk_q4_k *q4 = (const blk_q4_k *)b;
            const blk_q5_k *q5 = (const blk_q5_k *)b;
            const uint8_t *qs = t == WQ_Q4_K ? q4->qs : q5->qs;
            for (int k = 0; k < 64; k++) {
                const int e = 4 * k, j = e / 32, l = e % 32;
                uint32_t v = (ld32(qs + 32 * (e / 64) + l) >> (4 * (j & 1))) & 0x0f0f0f0fu;
                if (t == WQ_Q5_K) v |= ((ld32(q5->qh + l) >> j) & 0x01010101u) << 4;
                u[k * PW] = v;
            }
            scales_k4(b, P, i, pr);
            break;
        }
        default: { /* WQ_Q6_K */
            const blk_q6_k *q = (const blk_q6_k *)b;
            for (int k = 0; k < 64; k++) {
                const int e = 4 * k, h = e / 128, g = (e % 128) / 32, l = e % 32;
                u[k * PW] = ((ld32(q->ql + 64 * h + 32 * (g & 1) + l) >> (4 * (g / 2))) & 0x0f0f0f0fu) |
                            ((ld32(q->qh + 32 * h + l) >> (2 * g)) & 0x03030303u) << 4;
            }
            for (int j = 0; j < 16; j++) sc[j * PW] = q->scales[j];
            *dw = f16_at(q->d);
            break;
        }
        }
    }
}

#ifdef TLM_X86_KERNELS
/* 16 x 16 32-bit words: o[k] word q = r[q] word k (4 x 4 words within each 128-bit lane, then
 * 4 x 4 of the lanes) */
__attribute__((target("avx512f"), always_inline)) static inline void transpose16(const __m512i r[16], __m512i o[16]) {
    __m512i x[4][4]; /* x[R][w], 128-bit lane L: word 4L + w of rows 4R .. 4R + 3 */
    for (int R = 0; R < 4; R++) {
        const __m512i t0 = _mm512_unpacklo_epi32(r[4 * R], r[4 * R + 1]), t1 = _mm512_unpackhi_epi32(r[4 * R], r[4 * R + 1]);
        const __m512i t2 = _mm512_unpacklo_epi32(r[4 * R + 2], r[4 * R + 3]), t3 = _mm512_unpackhi_epi32(r[4 * R + 2], r[4 * R + 3]);
        x[R][0] = _mm512_unpacklo_epi64(t0, t2), x[R][1] = _mm512_unpackhi_epi64(t0, t2);
        x[R][2] = _mm512_unpacklo_epi64(t1, t3), x[R][3] = _mm512_unpackhi_epi64(t1, t3);
    }
    for (int w = 0; w < 4; w++) {
        const __m512i A = _mm512_shuffle_i32x4(x[0][w], x[1][w], 0x88), B = _mm512_shuffle_i32x4(x[0][w], x[1][w], 0xdd);
        const __m512i C = _mm512_shuffle_i32x4(x[2][w], x[3][w], 0x88), D = _mm512_shuffle_i32x4(x[2][w], x[3][w], 0xdd);
        o[w] = _mm512_shuffle_i32x4(A, C, 0x88), o[w + 8] = _mm512_shuffle_i32x4(A, C, 0xdd);
        o[w + 4] = _mm512_shuffle_i32x4(B, D, 0x88), o[w + 12] = _mm512_shuffle_i32x4(B, D, 0xdd);
    }
}

/* unpack_row for Q4_K / Q5_K, 16 weight rows (row stride rb) into panel rows [pr, pr + 16), block
 * by block: each row's 256 levels made in registers in u's order (per 32 bytes of qs, the low
 * nibbles then the high ones), then 16 x 16 words transposed so that each store is one k of the 16
 * rows; then the 16 rows' scales, minimums, d and dmin; the same bytes as unpack_row's */
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) static void unpack16_k4(int t, const uint8_t *row, size_t rb, int nb,
                                                                    const gpanel *P, int pr) {
    const size_t bytes = wq_block_bytes(t);
    const size_t qs_at = t == WQ_Q4_K ? offsetof(blk_q4_k, qs) : offsetof(blk_q5_k, qs);
    const __m512i m4 = _mm512_set1_epi8(0x0f), one = _mm512_set1_epi8(1);
    const __m512i rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32((int)rb)); /* (rb * 15 < 2^31: checked by the caller) */
    /* (Q5_K: the 5th bit of element e is bit e / 32 of qh[e % 32]; word group g covers sub-blocks 2g, 2g + 1:
     * qh's 32 bytes twice, shifted by 2g and by 2g + 1) */
    for (int i = 0; i < nb; i++) {
        __m512i r[4][16];
        for (int q = 0; q < 16; q++) {
            const uint8_t *b = row + (size_t)q * rb + (size_t)i * bytes;
            if (i + 2 < nb) /* (the rows' next blocks on their way from memory while this one is unpacked) */
                for (size_t c = 0; c < bytes; c += 64) _mm_prefetch((const char *)(b + 2 * bytes + c), _MM_HINT_T0);
            for (int h = 0; h < 2; h++) {
                const __m512i v = _mm512_loadu_si512((const void *)(b + qs_at + 64 * h));
                const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                __m512i g0 = _mm512_shuffle_i64x2(lo, hi, 0x44), g1 = _mm512_shuffle_i64x2(lo, hi, 0xee);
                if (t == WQ_Q5_K) {
                    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const void *)((const blk_q5_k *)b)->qh));
                    const int s0 = 4 * h, s1 = 4 * h + 2;
                    const __m512i sh0 = _mm512_mask_srl_epi16(_mm512_srl_epi16(qh, _mm_cvtsi32_si128(s0)), 0xffff0000u, qh,
                                                              _mm_cvtsi32_si128(s0 + 1));
                    const __m512i sh1 = _mm512_mask_srl_epi16(_mm512_srl_epi16(qh, _mm_cvtsi32_si128(s1)), 0xffff0000u, qh,
                                                              _mm_cvtsi32_si128(s1 + 1));
                    g0 = _mm512_or_si512(g0, _mm512_slli_epi16(_mm512_and_si512(sh0, one), 4));
                    g1 = _mm512_or_si512(g1, _mm512_slli_epi16(_mm512_and_si512(sh1, one), 4));
                }
                r[2 * h][q] = g0, r[2 * h + 1][q] = g1;
            }
        }
        uint32_t *u = (uint32_t *)P->u + (size_t)i * 64 * PW + pr;
        for (int g = 0; g < 4; g++) {
            __m512i o[16];
            transpose16(r[g], o);
            for (int k = 0; k < 16; k++) _mm512_storeu_si512((void *)(u + (size_t)(16 * g + k) * PW), o[k]);
        }
        /* scales_k4 for the 16 rows: the 12 scale bytes as three words w0 w1 w2 per row (gathered),
         * byte j of sc_lo / m_lo the scale / minimum of sub-block j < 4, of sc_hi / m_hi of j + 4
         * (scale_min_k4's bits, four bytes at a time); d and dmin through the exact f16 conversion */
        const uint8_t *b0 = row + (size_t)i * bytes;
        const __m512i w0 = _mm512_i32gather_epi32(rows, (const void *)(b0 + 4), 1);
        const __m512i w1 = _mm512_i32gather_epi32(rows, (const void *)(b0 + 8), 1);
        const __m512i w2 = _mm512_i32gather_epi32(rows, (const void *)(b0 + 12), 1);
        const __m512i dd = _mm512_i32gather_epi32(rows, (const void *)b0, 1);
        const __m512i k3f = _mm512_set1_epi32(0x3f3f3f3f), k0f = _mm512_set1_epi32(0x0f0f0f0f), k30 = _mm512_set1_epi32(0x30303030);
        const __m512i sc4[2] = {_mm512_and_si512(w0, k3f),
                                _mm512_or_si512(_mm512_and_si512(w2, k0f), _mm512_and_si512(_mm512_srli_epi32(w0, 2), k30))};
        const __m512i m4s[2] = {_mm512_and_si512(w1, k3f), _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, 4), k0f),
                                                                             _mm512_and_si512(_mm512_srli_epi32(w1, 2), k30))};
        const __m512i ff = _mm512_set1_epi32(0xff), ff16 = _mm512_set1_epi32(0xff0000);
        int32_t *sc = P->sc + (size_t)i * 8 * PW + pr, *mm = P->mm + (size_t)i * 4 * PW + pr;
        for (int j = 0; j < 8; j++)
            _mm512_storeu_si512((void *)(sc + j * PW), _mm512_and_si512(_mm512_srli_epi32(sc4[j / 4], 8 * (j % 4)), ff));
        for (int h = 0; h < 4; h++) { /* (pair16(m 2h, m 2h + 1)) */
            const __m512i x = _mm512_srli_epi32(m4s[h / 2], 16 * (h % 2));
            _mm512_storeu_si512((void *)(mm + h * PW), _mm512_or_si512(_mm512_and_si512(x, ff), _mm512_and_si512(_mm512_slli_epi32(x, 8), ff16)));
        }
        _mm512_storeu_ps(P->dw + (size_t)i * PW + pr, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd)));
        _mm512_storeu_ps(P->m2 + (size_t)i * PW + pr,
                         _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)))),
                                                              _mm512_set1_epi32((int)0x80000000u))));
    }
}
#endif

/* panel rows [0, rows) from the weight rows at row (stride rb): Q4_K / Q5_K 16 rows at a time with
 * AVX-512, the rest by unpack_row */
static void unpack_rows(int t, const gfmt *f, const uint8_t *row, size_t rb, int nb, const gpanel *P, int rows) {
    int r0 = 0;
#ifdef TLM_X86_KERNELS
    if ((t == WQ_Q4_K || t == WQ_Q5_K) && tlm_cpu_isa() >= TLM_ISA_AVX512 && rb < (size_t)INT32_MAX / 16) {
        for (; r0 + 16 <= rows; r0 += 16) unpack16_k4(t, row + (size_t)r0 * rb, rb, nb, P, r0);
    }
#endif
    for (int r = r0; r < rows; r++) unpack_row(t, f, row + (size_t)r * rb, nb, P, r);
}

/* ---- the plain C body: the definition on the panel ------------------------------------------------- */

static void panel_scalar(const gfmt *f, const gpanel *P, int nb, const gacts *X, int N, float *y, int OC, int o0,
                         int rows) {
    const int g4 = f->bk / 4, ns = f->bk / f->sl;
    for (int n = 0; n < N; n++) {
        const int8_t *xq = X->q + (size_t)n * X->IC;
        const float *xd = X->d + (size_t)n * nb;
        const int32_t *xa = X->A + (size_t)n * nb * ns;
        for (int p = 0; p < rows; p++) {
            float lane[8] = {0};
            for (int i = 0; i < nb; i++) {
                const uint8_t *u = P->u + (size_t)i * g4 * PW * 4;
                int I1 = 0, I2 = 0;
                for (int j = 0; j < ns; j++) {
                    int S = 0;
                    for (int e = j * f->sl; e < (j + 1) * f->sl; e++)
                        S += u[((e / 4) * PW + p) * 4 + e % 4] * xq[(size_t)i * f->bk + e];
                    S -= f->off * xa[i * ns + j];
                    I1 += f->has_sc ? P->sc[((size_t)i * ns + j) * PW + p] * S : S;
                    if (f->has_mm) {
                        const int32_t w = P->mm[((size_t)i * ((ns + 1) / 2) + j / 2) * PW + p];
                        I2 += (int16_t)(uint16_t)((uint32_t)w >> (16 * (j & 1))) * xa[i * ns + j];
                    }
                }
                lane[i % 8] = fmaf((float)I1, P->dw[(size_t)i * PW + p] * xd[i], lane[i % 8]);
                if (f->has_mm) lane[i % 8] = fmaf((float)I2, P->m2[(size_t)i * PW + p] * xd[i], lane[i % 8]);
            }
            y[(size_t)n * OC + o0 + p] = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
        }
    }
}

/* a body: the panel's rows [0, rows) with every row of x into y's columns o0..; pf, pfn: bytes of
 * weights the body fetches towards the cache a slice per tile as it goes (the next panel this
 * thread unpacks; NULL: none) */
typedef void (*panel_fn)(int t, const gpanel *P, int nb, const gacts *X, int N, float *y, int OC, int o0, int rows,
                         const uint8_t *pf, size_t pfn);

static void run_scalar(int t, const gpanel *P, int nb, const gacts *X, int N, float *y, int OC, int o0, int rows,
                       const uint8_t *pf, size_t pfn) {
    (void)pf, (void)pfn;
    gfmt f = {0};
    gfmt_of(t, &f);
    panel_scalar(&f, P, nb, X, N, y, OC, o0, rows);
}

/* ---- the vector bodies (quant_gemm_kernels.h) ------------------------------------------------------ */

#ifdef TLM_X86_KERNELS
#define GT "avx2,fma"
#define GS(name) name##_avx2
#define GW 8
#define GOV 2
#define GNR 3
#define VI __m256i
#define VF __m256
#define V_LD(p) _mm256_load_si256((const __m256i *)(p))
#define V_BC(p) _mm256_set1_epi32(*(const int32_t *)(const void *)(p))
#define V_DOT(a, u, s) _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)))
#define V_DOTW(a, u, v) _mm256_add_epi32(a, _mm256_madd_epi16(u, v))
#define V_ADD _mm256_add_epi32
#define V_MUL _mm256_mullo_epi32
#define V_SET1 _mm256_set1_epi32
#define V_ZERO _mm256_setzero_si256
#define F_CVT _mm256_cvtepi32_ps
#define F_FMA _mm256_fmadd_ps
#define F_MUL _mm256_mul_ps
#define F_ADD _mm256_add_ps
#define F_LD _mm256_load_ps
#define F_ST _mm256_store_ps
#define F_STU _mm256_storeu_ps
#define F_SET1 _mm256_set1_ps
#define F_ZERO _mm256_setzero_ps
#include "quant_gemm_kernels.h"
#undef GT
#undef GS
#undef V_DOT
#undef V_DOTW

#define GT "avxvnni,avx2,fma"
#define GS(name) name##_avxvnni
#define V_DOT(a, u, s) _mm256_dpbusd_avx_epi32(a, u, s)
#define V_DOTW(a, u, v) _mm256_dpwssd_avx_epi32(a, u, v)
#include "quant_gemm_kernels.h"
#undef GT
#undef GS
#undef V_DOT
#undef V_DOTW

#define GT "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma"
#define GS(name) name##_vnni256
#define V_DOT(a, u, s) _mm256_dpbusd_epi32(a, u, s)
#define V_DOTW(a, u, v) _mm256_dpwssd_epi32(a, u, v)
#include "quant_gemm_kernels.h"
#undef GT
#undef GS
#undef GW
#undef GOV
#undef GNR
#undef VI
#undef VF
#undef V_LD
#undef V_BC
#undef V_DOT
#undef V_DOTW
#undef V_ADD
#undef V_MUL
#undef V_SET1
#undef V_ZERO
#undef F_CVT
#undef F_FMA
#undef F_MUL
#undef F_ADD
#undef F_LD
#undef F_ST
#undef F_STU
#undef F_SET1
#undef F_ZERO

#define GT "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma"
#define GS(name) name##_vnni512
#define GW 16
#define GOV 2
#define GNR 6
#define VI __m512i
#define VF __m512
#define V_LD(p) _mm512_load_si512((const void *)(p))
#define V_BC(p) _mm512_set1_epi32(*(const int32_t *)(const void *)(p))
#define V_DOT(a, u, s) _mm512_dpbusd_epi32(a, u, s)
#define V_DOTW(a, u, v) _mm512_dpwssd_epi32(a, u, v)
#define V_ADD _mm512_add_epi32
#define V_MUL _mm512_mullo_epi32
#define V_SET1 _mm512_set1_epi32
#define V_ZERO _mm512_setzero_si512
#define F_CVT _mm512_cvtepi32_ps
#define F_FMA _mm512_fmadd_ps
#define F_MUL _mm512_mul_ps
#define F_ADD _mm512_add_ps
#define F_LD _mm512_load_ps
#define F_ST _mm512_store_ps
#define F_STU _mm512_storeu_ps
#define F_SET1 _mm512_set1_ps
#define F_ZERO _mm512_setzero_ps
#include "quant_gemm_kernels.h"
#endif

/* ---- the bodies, the calls ---------------------------------------------------------------------------- */

const char *wq_gemm_name(wq_gemm_kernel k) {
    switch (k) {
    case WQ_GEMM_SCALAR: return "scalar";
    case WQ_GEMM_AVX2: return "AVX2";
    case WQ_GEMM_AVXVNNI: return "AVX-VNNI";
    case WQ_GEMM_VNNI256: return "AVX512-VNNI (256-bit)";
    case WQ_GEMM_VNNI512: return "AVX512-VNNI";
    default: return "none";
    }
}

int wq_gemm_available(wq_gemm_kernel k, int t) {
    gfmt f = {0};
    if (gfmt_of(t, &f)) return 0;
    switch (k) {
    case WQ_GEMM_SCALAR: return 1;
    /* (vpmaddubsw's pairs would saturate 16 bits on Q8_0's offset levels, up to 255) */
    case WQ_GEMM_AVX2: return t != WQ_Q8_0 && wq_int_path_available(WQ_INT_AVX2);
    case WQ_GEMM_AVXVNNI: return wq_int_path_available(WQ_INT_AVXVNNI);
    case WQ_GEMM_VNNI256:
    case WQ_GEMM_VNNI512: return wq_int_path_available(WQ_INT_AVX512VNNI);
    default: return 0;
    }
}

wq_gemm_kernel wq_gemm_pick(int t) {
    static const wq_gemm_kernel order[] = {WQ_GEMM_VNNI512, WQ_GEMM_AVXVNNI, WQ_GEMM_AVX2};
    for (int i = 0; i < 3; i++)
        if (wq_gemm_available(order[i], t)) return order[i];
    return WQ_GEMM_SCALAR;
}

static panel_fn kernel_fn(wq_gemm_kernel k) {
#ifdef TLM_X86_KERNELS
    switch (k) {
    case WQ_GEMM_AVX2: return run_avx2;
    case WQ_GEMM_AVXVNNI: return run_avxvnni;
    case WQ_GEMM_VNNI256: return run_vnni256;
    case WQ_GEMM_VNNI512: return run_vnni512;
    default: break;
    }
#endif
    (void)k;
    return run_scalar;
}

/* the calling thread's buffers, grown, never shrunk: x's quantized rows, and the panels of the
 * threads of its parallel regions side by side (a worker thread's own would be lost when the
 * runtime ends it) */
typedef struct {
    void *p;
    size_t cap;
} grow_buf;
static _Thread_local grow_buf xbuf, pbuf;

static void *grow(grow_buf *b, size_t need) {
    if (need <= b->cap) return b->p;
    void *p = NULL;
    if (posix_memalign(&p, 64, need)) return NULL;
    free(b->p);
    b->p = p, b->cap = need;
    return p;
}

static size_t up64(size_t n) { return (n + 63) / 64 * 64; }

#ifdef TLM_X86_KERNELS
/* wq_int_quantize_row's rounding 16 lanes at a time, bit for bit: the same amax (a maximum is
 * exact), d = amax / 127 and 127 / amax in scalar f32, x * (127 / amax) rounded to nearest even
 * (vcvtps2dq under the default rounding, as the reference's 1.5 * 2^23 trick for |v| < 2^22),
 * clamped to -127..127; a block with a NaN or infinity d = NaN and levels 0, an all-zero one d = 0;
 * the level sums per sub-block of sl straight into A */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) static void quantize_row_512(const float *x, int IC,
                                                                                         int bk, int sl, int8_t *q,
                                                                                         float *d, int32_t *A) {
    const __m512 big = _mm512_set1_ps(3.4028235e38f);
    for (int b = 0; b < IC / bk; b++) {
        const float *xb = x + (size_t)b * bk;
        int8_t *qb = q + (size_t)b * bk;
        int32_t *ab = A + (size_t)b * (bk / sl);
        __m512 amax = _mm512_setzero_ps();
        __mmask16 bad = 0;
        for (int k = 0; k < bk; k += 16) {
            const __m512 a = _mm512_abs_ps(_mm512_loadu_ps(xb + k));
            bad |= _mm512_cmp_ps_mask(a, big, _CMP_NLE_UQ); /* (NaN or infinity) */
            amax = _mm512_max_ps(amax, a);
        }
        const float m = _mm512_reduce_max_ps(amax);
        if (bad || m == 0.0f) {
            d[b] = bad ? NAN : 0.0f;
            memset(qb, 0, (size_t)bk);
            for (int j = 0; j < bk / sl; j++) ab[j] = 0;
            continue;
        }
        d[b] = m / 127.0f;
        const __m512 is = _mm512_set1_ps(127.0f / m);
        const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
        for (int k = 0; k < bk; k += 16) {
            __m512i l = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + k), is));
            l = _mm512_max_epi32(_mm512_min_epi32(l, hi), lo);
            _mm_storeu_si128((__m128i *)(qb + k), _mm512_cvtepi32_epi8(l));
            const int sum = _mm512_reduce_add_epi32(l);
            if (k % sl == 0) ab[k / sl] = sum;
            else ab[k / sl] += sum;
        }
    }
}
#endif

/* x's N rows quantized for t (as quant_int.c rounds them) into X; -1 if no memory */
static int quantize_acts(int t, const gfmt *f, const float *x, int N, int IC, gacts *X) {
    const int nb = IC / f->bk, ns = f->bk / f->sl, nh = (ns + 1) / 2, sum_len = f->bk == QK_K ? 16 : 32;
    const size_t qb = up64((size_t)N * IC), db = up64(sizeof(float) * N * nb), sb = up64(sizeof(int16_t) * N * (IC / sum_len));
    const size_t ab = up64(sizeof(int32_t) * N * nb * ns);
    uint8_t *base = grow(&xbuf, qb + db + sb + ab + up64(sizeof(int32_t) * N * nb * nh));
    if (!base) return -1;
    int8_t *q = (int8_t *)base;
    float *d = (float *)(base + qb);
    int16_t *s16 = (int16_t *)(base + qb + db);
    int32_t *A = (int32_t *)(base + qb + db + sb), *A2 = (int32_t *)(base + qb + db + sb + ab);
#ifdef TLM_X86_KERNELS
    const int wide = tlm_cpu_isa() >= TLM_ISA_AVX512;
#else
    const int wide = 0;
#endif
    PROF_SCOPE("quantize_activations");
#pragma omp parallel for schedule(dynamic, 16)
    for (int n = 0; n < N; n++) {
        int32_t *a = A + (size_t)n * nb * ns, *a2 = A2 + (size_t)n * nb * nh;
#ifdef TLM_X86_KERNELS
        if (wide)
            quantize_row_512(x + (size_t)n * IC, IC, f->bk, f->sl, q + (size_t)n * IC, d + (size_t)n * nb, a);
        else
#endif
        {
            int16_t *s = s16 + (size_t)n * (IC / sum_len);
            wq_int_quantize_row(t, x + (size_t)n * IC, IC, q + (size_t)n * IC, d + (size_t)n * nb, s);
            const int per = f->sl / sum_len; /* (1, or 2 sums of 16 per sub-block of 32) */
            for (int j = 0; j < nb * ns; j++) a[j] = per == 2 ? s[2 * j] + s[2 * j + 1] : s[j];
        }
        for (int i = 0; i < nb; i++)
            for (int h = 0; h < nh; h++)
                a2[i * nh + h] = pair16(a[i * ns + 2 * h], 2 * h + 1 < ns ? a[i * ns + 2 * h + 1] : 0);
    }
    (void)wide;
    *X = (gacts){q, d, A, A2, IC, nb, ns, nh};
    return 0;
}

/* a panel's bytes for nb blocks (a multiple of 64) */
static size_t panel_bytes(const gfmt *f, int nb) {
    const int ns = f->bk / f->sl;
    return up64((size_t)nb * f->bk * PW + 2 * sizeof(int32_t) * (size_t)nb * ns * PW + 2 * sizeof(float) * (size_t)nb * PW);
}

/* the panel's arrays for nb blocks at base */
static gpanel panel_at(const gfmt *f, int nb, uint8_t *base) {
    const int ns = f->bk / f->sl;
    const size_t ub = (size_t)nb * f->bk * PW, ib = sizeof(int32_t) * (size_t)nb * ns * PW, fb = sizeof(float) * (size_t)nb * PW;
    return (gpanel){base, (int32_t *)(base + ub), (int32_t *)(base + ub + ib), (float *)(base + ub + 2 * ib),
                    (float *)(base + ub + 2 * ib + fb)};
}

/* panels [p0, p1) of W, each unpacked at base, then all N rows through fn, which meanwhile fetches
 * the next panel's weights (the one after, or panel `after` after the last; -1: none) */
static void panels(panel_fn fn, int t, const gfmt *f, const uint8_t *W, const gacts *X, int N, float *y, int OC,
                   int p0, int p1, uint8_t *base, int after) {
    const int nb = X->nb;
    const size_t row_bytes = wq_row_bytes(t, X->IC);
    const gpanel P = panel_at(f, nb, base);
    for (int p = p0; p < p1; p++) {
        const int o0 = p * PW, rows = OC - o0 < PW ? OC - o0 : PW;
        /* (a short last panel: its missing rows all zeros, their outputs never stored) */
        if (rows < PW) memset(base, 0, panel_bytes(f, nb));
        unpack_rows(t, f, W + (size_t)o0 * row_bytes, row_bytes, nb, &P, rows);
        const int pn = p + 1 < p1 ? p + 1 : after;
        const int prow = pn < 0 ? 0 : OC - pn * PW < PW ? OC - pn * PW : PW;
        fn(t, &P, nb, X, N, y, OC, o0, rows, pn < 0 ? NULL : W + (size_t)pn * PW * row_bytes, (size_t)prow * row_bytes);
    }
}

static int int_shape_ok(int t, int IC, gfmt *f) { return !gfmt_of(t, f) && IC > 0 && IC % f->bk == 0; }

int wq_gemm_products(wq_gemm_kernel k, float *y, const float *x, const void *W, int t, int N, int IC, int OC) {
    gfmt f = {0};
    gacts X;
    if (!int_shape_ok(t, IC, &f) || !wq_gemm_available(k, t) || N < 1 || OC < 1) return -1;
    uint8_t *base = quantize_acts(t, &f, x, N, IC, &X) ? NULL : grow(&pbuf, panel_bytes(&f, X.nb));
    if (!base) return -1;
    panels(kernel_fn(k), t, &f, W, &X, N, y, OC, 0, (OC + PW - 1) / PW, base, -1);
    return 0;
}

int wq_gemm_forward(float *y, const float *x, const void *W, int t, const float *bias, int N, int IC, int OC) {
    gfmt f = {0};
    gacts X;
    if (wq_get_products() != WQ_PRODUCTS_INT8 || !int_shape_ok(t, IC, &f) || N < 1 || OC < 1) return -1;
    const wq_gemm_kernel k = wq_gemm_pick(t);
    if (k == WQ_GEMM_SCALAR) return -1;
    PROF_SCOPE("quant_gemm");
    const int threads = omp_get_max_threads();
    if (quantize_acts(t, &f, x, N, IC, &X)) return -1;
    const size_t per = panel_bytes(&f, X.nb);
    uint8_t *base = grow(&pbuf, per * threads);
    if (!base) return -1;
    const panel_fn fn = kernel_fn(k);
    const int np = (OC + PW - 1) / PW;
    /* (panels handed out one at a time: a thread the system sets aside for a while leaves its
     * share to the others instead of holding the pass up; each thread claims its next panel as it
     * starts one, so that its weights come from memory during this one's products, but for the
     * last panels, which go one at a time so that no thread ends holding two) */
    int next = 0;
#pragma omp parallel num_threads(threads)
    {
        uint8_t *mine = base + per * omp_get_thread_num();
        int p, pn;
#pragma omp atomic capture
        p = next++;
        while (p < np) {
            pn = -1;
            if (p < np - threads) {
#pragma omp atomic capture
                pn = next++;
            }
            panels(fn, t, &f, W, &X, N, y, OC, p, p + 1, mine, pn < np ? pn : -1);
            if (bias)
                for (int n = 0; n < N; n++)
                    for (int o = p * PW; o < (p * PW + PW < OC ? p * PW + PW : OC); o++) y[(size_t)n * OC + o] += bias[o];
            if (pn < 0) {
#pragma omp atomic capture
                pn = next++;
            }
            p = pn;
        }
    }
    return 0;
}
