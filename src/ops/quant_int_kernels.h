/* quant_int_kernels.h — the vector integer dot products of quant_int.c, one body for every
 * 256-bit kernel set. quant_int.c includes this file once per set, with
 *   KT             the target attribute string,
 *   KS(name)       the set's suffix on each name,
 *   DOT_US(a,u,s)  a + the sums of 4 adjacent u8 * s8 products, in each 32-bit lane
 * (AVX2: vpmaddubsw + vpmaddwd with ones + vpaddd; AVX-VNNI and AVX512-VNNI: vpdpbusd). No pair
 * of u8 * s8 products saturates AVX2's 16 bits: the largest level is 63 (Q6_K) or |q| <= 128
 * (Q8_0's magnitude), the activations |a| <= 127, and 2 * 128 * 127 < 32768. Each block's
 * sub-block sums meet their scales after an hadd tree (one 32-bit multiply per 8 scales). So
 * every path computes the same integers as quant_int.c's scalar reference, and then the same
 * float operations on them in the same order (the per-block formulas there). */

#define KFN static inline __attribute__((always_inline, target(KT)))

KFN int KS(hsum_i32)(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* the 8 lane sums of s[0..7] as one vector (lane j: the sum of s[j]'s lanes): hadd within the
 * 128-bit halves, then the halves' partial sums added */
KFN __m256i KS(tree8)(const __m256i s[8]) {
    const __m256i t0 = _mm256_hadd_epi32(s[0], s[1]), t1 = _mm256_hadd_epi32(s[2], s[3]);
    const __m256i t2 = _mm256_hadd_epi32(s[4], s[5]), t3 = _mm256_hadd_epi32(s[6], s[7]);
    const __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
    return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
}

/* the f16 scales of 8 consecutive blocks of `stride` bytes, as floats */
KFN __m256 KS(scales8)(const uint8_t *d, int stride) {
    uint16_t h[8];
    for (int j = 0; j < 8; j++) h[j] = (uint16_t)(d[stride * j] | d[stride * j + 1] << 8);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

/* an f16 field as f32 (F16C: the same exact value as tlm_f16_to_f32) */
KFN float KS(f16)(const uint8_t *p) { return _cvtsh_ss((unsigned short)(p[0] | p[1] << 8)); }

KFN __m256i KS(bytes)(int b) { return _mm256_set1_epi8((char)b); }

/* the lines of [p + ahead, p + ahead + n) asked for into L2, a few per group of blocks as the
 * blocks are read (a row's stream: ahead MATVEC_PREFETCH_BYTES). Asked for a whole row at a time,
 * a row of 4 KiB or more (the 8192-wide matrices) was more requests at once than the core holds,
 * and the loads waited on them. */
KFN void KS(prefetch_ahead)(const uint8_t *p, size_t n, size_t ahead) {
    const uintptr_t e = (uintptr_t)p + ahead + n;
    for (uintptr_t l = ((uintptr_t)p + ahead) & ~(uintptr_t)63; l < e; l += 64)
        _mm_prefetch((const char *)l, _MM_HINT_T1);
}

/* 16 bytes of nibbles as the 32 levels of a Q4_0 / Q4_1 / Q5 block in element order (low
 * nibbles are elements 0..15, high 16..31) */
KFN __m256i KS(nibbles32)(const uint8_t *qs) {
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), KS(bytes)(15));
}

/* the 5th bits of a Q5 block (bit j of the little-endian qh is element j's) as 16 or 0 per byte */
KFN __m256i KS(q5_bit4)(const uint8_t qh[4]) {
    uint32_t v;
    memcpy(&v, qh, 4);
    const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                          3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)v), pick), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(b, bit), KS(bytes)(16));
}

/* ---- the 32-element formats: 8 blocks at a time, their integer sums side by side ---------------- */

/* the integer sum of one block (levels `u`, unsigned) with its activations */
#define KBLOCK_LEVELS(T, b)                                                                                             \
    (T == WQ_Q8_0   ? _mm256_loadu_si256((const __m256i *)((const blk_q8_0 *)(b))->qs)                               \
     : T == WQ_Q4_0 ? KS(nibbles32)(((const blk_q4_0 *)(b))->qs)                                                     \
     : T == WQ_Q4_1 ? KS(nibbles32)(((const blk_q4_1 *)(b))->qs)                                                     \
     : T == WQ_Q5_0 ? _mm256_or_si256(KS(nibbles32)(((const blk_q5_0 *)(b))->qs), KS(q5_bit4)(((const blk_q5_0 *)(b))->qh)) \
                    : _mm256_or_si256(KS(nibbles32)(((const blk_q5_1 *)(b))->qs), KS(q5_bit4)(((const blk_q5_1 *)(b))->qh)))

KFN __m256i KS(block32)(const int T, const uint8_t *b, const int8_t *xq) {
    const __m256i x = _mm256_loadu_si256((const __m256i *)xq), zero = _mm256_setzero_si256();
    const __m256i u = KBLOCK_LEVELS(T, b);
    if (T == WQ_Q8_0) /* signed weights: |w| times x with w's sign */
        return DOT_US(zero, _mm256_abs_epi8(u), _mm256_sign_epi8(x, u));
    return DOT_US(zero, u, x);
}

/* one weight row of nb 32-element blocks of type T (a constant) with one quantized row */
KFN float KS(dot32)(const int T, const uint8_t *row, const qx_row *a, int nb) {
    const int bytes = T == WQ_Q8_0 ? 34 : T == WQ_Q4_0 ? 18 : T == WQ_Q4_1 ? 20 : T == WQ_Q5_0 ? 22 : 24;
    const int has_min = T == WQ_Q4_1 || T == WQ_Q5_1, offset = T == WQ_Q4_0 ? 8 : T == WQ_Q5_0 ? 16 : 0;
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= nb; i += 8) {
        const uint8_t *b = row + (size_t)i * bytes;
        KS(prefetch_ahead)(b, 8 * (size_t)bytes, MATVEC_PREFETCH_BYTES);
        __m256i s[8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) s[j] = KS(block32)(T, b + j * bytes, a->q + 32 * (i + j));
        __m256i S = KS(tree8)(s);
        const __m256 da = _mm256_loadu_ps(a->d + i);
        if (offset || has_min) {
            const __m256i A = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)(a->sum + i)));
            if (offset) S = _mm256_sub_epi32(S, _mm256_mullo_epi32(A, _mm256_set1_epi32(offset)));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S), _mm256_mul_ps(KS(scales8)(b, bytes), da), acc);
            if (has_min) acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(A), _mm256_mul_ps(KS(scales8)(b + 2, bytes), da), acc);
        } else {
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S), _mm256_mul_ps(KS(scales8)(b, bytes), da), acc);
        }
    }
    float lane[8];
    _mm256_storeu_ps(lane, acc);
    for (; i < nb; i++) {
        const uint8_t *b = row + (size_t)i * bytes;
        KS(prefetch_ahead)(b, (size_t)bytes, MATVEC_PREFETCH_BYTES);
        const int A = a->sum[i], S = KS(hsum_i32)(KS(block32)(T, b, a->q + 32 * i)) - offset * A;
        lane[i % 8] = fmaf((float)S, KS(f16)(b) * a->d[i], lane[i % 8]);
        if (has_min) lane[i % 8] = fmaf((float)A, KS(f16)(b + 2) * a->d[i], lane[i % 8]);
    }
    return reduce8(lane);
}

/* ---- the K formats: one super-block at a time, its integers in scalars ----------------------------- */

/* Q4_K / Q5_K: the 8 scales as 32-bit lanes, and the minimums applied to the activations' sums
 * of 16 (m_j times the two sums of sub-block j, 8 lanes) */
KFN __m256i KS(k4_scales)(const uint8_t s[12], const int16_t *sum16, __m256i *sc32) {
    uint32_t a0, a1, a2;
    memcpy(&a0, s, 4), memcpy(&a1, s + 4, 4), memcpy(&a2, s + 8, 4);
    /* (scale_min_k4 four fields at a time: j < 4 in the low 6 bits of bytes j, j + 4; j >= 4 in
     * byte j + 4's nibbles with the top 2 bits in the spare bits of bytes j - 4 and j) */
    const uint32_t sc_lo = a0 & 0x3f3f3f3fu, m_lo = a1 & 0x3f3f3f3fu;
    const uint32_t sc_hi = (a2 & 0x0f0f0f0fu) | ((a0 >> 6) & 0x03030303u) << 4;
    const uint32_t m_hi = ((a2 >> 4) & 0x0f0f0f0fu) | ((a1 >> 6) & 0x03030303u) << 4;
    const __m128i m = _mm_cvtsi64_si128((long long)((uint64_t)m_hi << 32 | m_lo));
    *sc32 = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)((uint64_t)sc_hi << 32 | sc_lo)));
    return _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m, m)),
                             _mm256_loadu_si256((const __m256i *)sum16));
}

/* the lane sums of v1 and v2 */
KFN void KS(hsum2_i32)(__m256i v1, __m256i v2, int *s1, int *s2) {
    const __m256i h = _mm256_hadd_epi32(v1, v2); /* [v1 01 23, v2 01 23 | v1 45 67, v2 45 67] */
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    t = _mm_hadd_epi32(t, t);
    *s1 = _mm_cvtsi128_si32(t), *s2 = _mm_extract_epi32(t, 1);
}

/* -- one K block: v1's lanes sum to its I1, v2's to its I2 (none for Q6_K) -- */

KFN void KS(block_q4_k)(const blk_q4_k *b, const int8_t *xq, const int16_t *sum16, __m256i *v1, __m256i *v2) {
    const __m256i zero = _mm256_setzero_si256();
    __m256i s[8], sc32;
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
        const __m256i lo = _mm256_and_si256(q, KS(bytes)(15)), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), KS(bytes)(15));
        s[2 * c] = DOT_US(zero, lo, _mm256_loadu_si256((const __m256i *)(xq + 64 * c)));
        s[2 * c + 1] = DOT_US(zero, hi, _mm256_loadu_si256((const __m256i *)(xq + 64 * c + 32)));
    }
    *v2 = KS(k4_scales)(b->scales, sum16, &sc32);
    *v1 = _mm256_mullo_epi32(KS(tree8)(s), sc32);
}

KFN void KS(block_q5_k)(const blk_q5_k *b, const int8_t *xq, const int16_t *sum16, __m256i *v1, __m256i *v2) {
    const __m256i zero = _mm256_setzero_si256();
    __m256i s[8], sc32, qh_run = _mm256_loadu_si256((const __m256i *)b->qh);
    /* (qh shifted right 2c in 16-bit lanes: bits 0 and 1 of each byte are then chunk c's) */
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++, qh_run = _mm256_srli_epi16(qh_run, 2)) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
        const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, KS(bytes)(15)),
                                           _mm256_and_si256(_mm256_slli_epi16(qh_run, 4), KS(bytes)(16)));
        const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), KS(bytes)(15)),
                                           _mm256_and_si256(_mm256_slli_epi16(qh_run, 3), KS(bytes)(16)));
        s[2 * c] = DOT_US(zero, lo, _mm256_loadu_si256((const __m256i *)(xq + 64 * c)));
        s[2 * c + 1] = DOT_US(zero, hi, _mm256_loadu_si256((const __m256i *)(xq + 64 * c + 32)));
    }
    *v2 = KS(k4_scales)(b->scales, sum16, &sc32);
    *v1 = _mm256_mullo_epi32(KS(tree8)(s), sc32);
}

/* Q6_K: group g of half h (32 elements, sub-blocks 8h + 2g and 8h + 2g + 1) into s[4h + g]; the
 * hadd tree's second level leaves each sub-block's sum in its own lane: [S0 S2 S4 S6 | S1 S3 S5
 * S7] for a half, and the scales are put in that order to meet them */
KFN void KS(block_q6_k)(const blk_q6_k *b, const int8_t *xq, const int16_t *sum16, __m256i *v1, __m256i *v2) {
    const __m256i zero = _mm256_setzero_si256();
    __m256i s[8];
    for (int h = 0; h < 2; h++) {
        __m256i qh_run = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++, qh_run = _mm256_srli_epi16(qh_run, 2)) {
            const __m256i ql = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32 * (g & 1)));
            const __m256i low = g < 2 ? _mm256_and_si256(ql, KS(bytes)(15))
                                      : _mm256_and_si256(_mm256_srli_epi16(ql, 4), KS(bytes)(15));
            const __m256i u = _mm256_or_si256(low, _mm256_and_si256(_mm256_slli_epi16(qh_run, 4), KS(bytes)(0x30)));
            s[4 * h + g] = DOT_US(zero, u, _mm256_loadu_si256((const __m256i *)(xq + 128 * h + 32 * g)));
        }
    }
    const __m128i order = _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
    const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
    const __m128i sc = _mm_loadu_si128((const __m128i *)b->scales), sco = _mm_shuffle_epi8(sc, order);
    const __m256i acc = _mm256_add_epi32(_mm256_mullo_epi32(h0, _mm256_cvtepi8_epi32(sco)),
                                         _mm256_mullo_epi32(h1, _mm256_cvtepi8_epi32(_mm_srli_si128(sco, 8))));
    /* the levels' offset of 32: minus 32 sum_j scale_j (sum of the activations of sub-block j) */
    const __m256i off = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc), _mm256_loadu_si256((const __m256i *)sum16));
    *v1 = _mm256_sub_epi32(acc, _mm256_slli_epi32(off, 5));
    *v2 = zero;
}

/* Q2_K: group s of half h (levels: bits 2s of qs[32h + l]) is, like Q6_K's, sub-blocks 8h + 2s and
 * 8h + 2s + 1; scales in the low nibbles, minimums in the high */
KFN void KS(block_q2_k)(const blk_q2_k *b, const int8_t *xq, const int16_t *sum16, __m256i *v1, __m256i *v2) {
    const __m256i zero = _mm256_setzero_si256();
    __m256i s[8];
    for (int h = 0; h < 2; h++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * h));
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++)
            s[4 * h + g] = DOT_US(zero, _mm256_and_si256(_mm256_srli_epi16(q, 2 * g), KS(bytes)(3)),
                                  _mm256_loadu_si256((const __m256i *)(xq + 128 * h + 32 * g)));
    }
    const __m128i order = _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
    const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
    const __m128i sc = _mm_loadu_si128((const __m128i *)b->scales), nib = _mm_set1_epi8(15);
    const __m128i sco = _mm_and_si128(_mm_shuffle_epi8(sc, order), nib);
    *v1 = _mm256_add_epi32(_mm256_mullo_epi32(h0, _mm256_cvtepu8_epi32(sco)),
                           _mm256_mullo_epi32(h1, _mm256_cvtepu8_epi32(_mm_srli_si128(sco, 8))));
    *v2 = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), nib)),
                            _mm256_loadu_si256((const __m256i *)sum16));
}

/* Q3_K: as Q2_K, the level's third bit bit 4h + s of hmask[l], the offset of 4 applied to the
 * activations' sums, and the signed 6-bit scales */
KFN void KS(block_q3_k)(const blk_q3_k *b, const int8_t *xq, const int16_t *sum16, __m256i *v1, __m256i *v2) {
    const __m256i zero = _mm256_setzero_si256(), hm = _mm256_loadu_si256((const __m256i *)b->hmask);
    __m256i s[8];
    for (int h = 0; h < 2; h++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * h));
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            const __m256i hbit = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + g), KS(bytes)(1)), 2);
            const __m256i u = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * g), KS(bytes)(3)), hbit);
            s[4 * h + g] = DOT_US(zero, u, _mm256_loadu_si256((const __m256i *)(xq + 128 * h + 32 * g)));
        }
    }
    int8_t sc8[16];
    for (int j = 0; j < 16; j++) sc8[j] = (int8_t)scale_q3_k(b->scales, j);
    const __m128i order = _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
    const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
    const __m128i sc = _mm_loadu_si128((const __m128i *)sc8), sco = _mm_shuffle_epi8(sc, order);
    const __m256i acc = _mm256_add_epi32(_mm256_mullo_epi32(h0, _mm256_cvtepi8_epi32(sco)),
                                         _mm256_mullo_epi32(h1, _mm256_cvtepi8_epi32(_mm_srli_si128(sco, 8))));
    const __m256i off = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc), _mm256_loadu_si256((const __m256i *)sum16));
    *v1 = _mm256_sub_epi32(acc, _mm256_slli_epi32(off, 2));
    *v2 = zero;
}

#define KBLOCK_K(T, b, xq, sum16, v1, v2)                                                                             \
    (T == WQ_Q4_K   ? KS(block_q4_k)((const blk_q4_k *)(b), xq, sum16, v1, v2)                                      \
     : T == WQ_Q5_K ? KS(block_q5_k)((const blk_q5_k *)(b), xq, sum16, v1, v2)                                      \
     : T == WQ_Q2_K ? KS(block_q2_k)((const blk_q2_k *)(b), xq, sum16, v1, v2)                                      \
     : T == WQ_Q3_K ? KS(block_q3_k)((const blk_q3_k *)(b), xq, sum16, v1, v2)                                      \
                    : KS(block_q6_k)((const blk_q6_k *)(b), xq, sum16, v1, v2))

/* one weight row of nb K blocks of type T with one quantized row: 8 blocks at a time, their I1
 * and I2 side by side after an hadd tree, scaled as 8 lanes (lane j block i + j) */
KFN float KS(dotk)(const int T, const uint8_t *row, const qx_row *a, int nb) {
    const int bytes = T == WQ_Q4_K ? 144 : T == WQ_Q5_K ? 176 : T == WQ_Q2_K ? 84 : T == WQ_Q3_K ? 110 : 210;
    const int d_at = T == WQ_Q6_K ? 208 : T == WQ_Q2_K ? 80 : T == WQ_Q3_K ? 108 : 0;
    const int has_min = T != WQ_Q6_K && T != WQ_Q3_K, dmin_at = d_at + 2;
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= nb; i += 8) {
        __m256i v1[8], v2[8];
        KS(prefetch_ahead)(row + (size_t)i * bytes, 8 * (size_t)bytes, MATVEC_PREFETCH_BYTES);
        for (int j = 0; j < 8; j++)
            KBLOCK_K(T, row + (size_t)(i + j) * bytes, a->q + QK_K * (i + j), a->sum + 16 * (i + j), &v1[j], &v2[j]);
        const uint8_t *b = row + (size_t)i * bytes;
        const __m256 da = _mm256_loadu_ps(a->d + i);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(KS(tree8)(v1)), _mm256_mul_ps(KS(scales8)(b + d_at, bytes), da), acc);
        if (has_min) {
            const __m256 neg = _mm256_xor_ps(_mm256_mul_ps(KS(scales8)(b + dmin_at, bytes), da), _mm256_set1_ps(-0.0f));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(KS(tree8)(v2)), neg, acc);
        }
    }
    float lane[8];
    _mm256_storeu_ps(lane, acc);
    for (; i < nb; i++) {
        const uint8_t *b = row + (size_t)i * bytes;
        KS(prefetch_ahead)(b, (size_t)bytes, MATVEC_PREFETCH_BYTES);
        __m256i v1, v2;
        KBLOCK_K(T, b, a->q + QK_K * i, a->sum + 16 * i, &v1, &v2);
        int I1, I2;
        KS(hsum2_i32)(v1, v2, &I1, &I2);
        lane[i % 8] = fmaf((float)I1, KS(f16)(b + d_at) * a->d[i], lane[i % 8]);
        if (has_min) lane[i % 8] = fmaf((float)I2, -(KS(f16)(b + dmin_at) * a->d[i]), lane[i % 8]);
    }
    return reduce8(lane);
}

/* y[n * OC + o] for the rows [o0, o1) of W and the N quantized rows of x (a weight row is read
 * from memory once, the other rows of x reread it from L1; the dot products ask for the row's
 * lines ahead as they go: prefetch_ahead) */
__attribute__((target(KT))) static void KS(rows_int)(int t, float *y, int OC, const qx_row *a, int N,
                                                     const uint8_t *W, size_t row_bytes, int IC, int o0, int o1) {
#define KROWS(dot_expr)                                                                                                \
    for (int o = o0; o < o1; o++) {                                                                                    \
        const uint8_t *row = W + (size_t)o * row_bytes;                                                                \
        for (int n = 0; n < N; n++) y[(size_t)n * OC + o] = dot_expr;                                                  \
    }
    switch (t) {
    case WQ_Q8_0: KROWS(KS(dot32)(WQ_Q8_0, row, a + n, IC / QK)) break;
    case WQ_Q4_0: KROWS(KS(dot32)(WQ_Q4_0, row, a + n, IC / QK)) break;
    case WQ_Q4_1: KROWS(KS(dot32)(WQ_Q4_1, row, a + n, IC / QK)) break;
    case WQ_Q5_0: KROWS(KS(dot32)(WQ_Q5_0, row, a + n, IC / QK)) break;
    case WQ_Q5_1: KROWS(KS(dot32)(WQ_Q5_1, row, a + n, IC / QK)) break;
    case WQ_Q4_K: KROWS(KS(dotk)(WQ_Q4_K, row, a + n, IC / QK_K)) break;
    case WQ_Q5_K: KROWS(KS(dotk)(WQ_Q5_K, row, a + n, IC / QK_K)) break;
    case WQ_Q6_K: KROWS(KS(dotk)(WQ_Q6_K, row, a + n, IC / QK_K)) break;
    case WQ_Q2_K: KROWS(KS(dotk)(WQ_Q2_K, row, a + n, IC / QK_K)) break;
    case WQ_Q3_K: KROWS(KS(dotk)(WQ_Q3_K, row, a + n, IC / QK_K)) break;
    default: break;
    }
#undef KROWS
}

#undef KFN
#undef KBLOCK_LEVELS
#undef KBLOCK_K
