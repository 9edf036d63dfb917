/* quant_int_512.h — 512-bit AVX512-VNNI kernels of quant_int.c for the K types of Q4_K_M / Q5_K_M
 * files (Q4_K, Q5_K, Q6_K); the other types take the 256-bit body (quant_int_kernels.h, suffix
 * _avx512vnni256). Included once by quant_int.c after that body, whose helpers it calls.
 *
 * A block's 256 levels are widened to bytes 64 at a time in the activations' own order (a zmm of
 * x is two 32-element sub-blocks, or four of 16 for Q6_K), and each pair of levels' 16-bit scale
 * laid beside it: that unpacking is done once per weight block and serves every row of x (up to
 * WQ_INT_MAX_ROWS: a short prompt's rows reuse the block from registers). Per row: vpmaddubsw
 * (u8 levels x s8 activations, pairs summed into 16 bits: at most 2 * 63 * 127, no saturation)
 * and vpdpwssd (times the pair's scale, summed into 32 bits), so the block's I1 of quant_int.c
 * is the sum of one vector's lanes (the 256-bit body sums every sub-block apart and meets the
 * scales after an hadd tree); eight blocks' vectors then go through the same tree8 and the same
 * float operations as there. The integers are the reference's, so every output is bit for bit
 * the reference's (tests/ops/test_quant_int.c). Decoding's Q4_K and Q5_K (one row of x, rows of
 * whole groups of 8 blocks) take their own body instead (z_dec_*, below), written to the count of
 * vector operations a block. */

#define Z5 "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"
#define ZFN static inline __attribute__((always_inline, target(Z5)))

ZFN __m256i z_fold(__m512i v) { return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)); }

/* Q4_K / Q5_K: the 8 6-bit scales (bytes of *sc) and minimums (*mn), scale_min_k4 four at a time */
ZFN void z_k4_fields(const uint8_t s[12], uint64_t *sc, uint64_t *mn) {
    uint32_t a0, a1, a2;
    memcpy(&a0, s, 4), memcpy(&a1, s + 4, 4), memcpy(&a2, s + 8, 4);
    const uint32_t sc_lo = a0 & 0x3f3f3f3fu, m_lo = a1 & 0x3f3f3f3fu;
    const uint32_t sc_hi = (a2 & 0x0f0f0f0fu) | ((a0 >> 6) & 0x03030303u) << 4;
    const uint32_t m_hi = ((a2 >> 4) & 0x0f0f0f0fu) | ((a1 >> 6) & 0x03030303u) << 4;
    *sc = (uint64_t)sc_hi << 32 | sc_lo, *mn = (uint64_t)m_hi << 32 | m_lo;
}

/* the lanes of m_j times the activations' two sums of 16 of sub-block j: they sum to I2 */
ZFN __m256i z_k4_mins(uint64_t mn, const int16_t *sum16) {
    const __m128i m = _mm_cvtsi64_si128((long long)mn);
    return _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m, m)), _mm256_loadu_si256((const __m256i *)sum16));
}

/* pshufb controls: chunk c's scale words, sub-block 2c in the low 256 bits, 2c + 1 in the high
 * (from the 8 scales as 16-bit words, repeated in every 128-bit lane) */
ZFN __m512i z_k4_ctrl(int c) {
    const short lo = (short)((4 * c + 1) << 8 | 4 * c), hi = (short)((4 * c + 3) << 8 | (4 * c + 2));
    return _mm512_inserti64x4(_mm512_set1_epi16(lo), _mm256_set1_epi16(hi), 1);
}

/* a K block's levels and scales, unpacked once for every row of x: chunk c's 64 levels as bytes
 * in the activations' order (u) and the scale of each pair of them as 16-bit words (s); Q4_K /
 * Q5_K's minimums (mn), Q6_K's 16 scales as words (sc16) */
typedef struct {
    __m512i u[4], s[4];
    uint64_t mn;
    __m256i sc16;
} zk_block;

/* Q4_K (Q5_K: qh non-NULL): chunk c is sub-blocks 2c (qs[32c + l]'s low nibbles, the low 256
 * bits) and 2c + 1 (high nibbles) */
ZFN void z_prep_k4(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh, zk_block *k) {
    uint64_t sc;
    z_k4_fields(scales, &sc, &k->mn);
    const __m512i S = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
    const __m512i cnt = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    const __m512i m15 = _mm512_set1_epi8(15);
    __m512i QH = _mm512_setzero_si512();
    if (qh) QH = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qh));
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * c)));
        __m512i u = _mm512_and_si512(_mm512_srlv_epi16(q, cnt), m15);
        if (qh) { /* the 5th bit: bit 2c (low half) or 2c + 1 (high) of qh[l] */
            const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << 2 * c)),
                                                   _mm256_set1_epi8((char)(1 << (2 * c + 1))), 1);
            u = _mm512_mask_add_epi8(u, _mm512_test_epi8_mask(QH, bit), u, _mm512_set1_epi8(16));
        }
        k->u[c] = u;
        k->s[c] = _mm512_shuffle_epi8(S, z_k4_ctrl(c));
    }
}

/* Q6_K: chunk c = 2h + gg of 64 elements is groups 2gg, 2gg + 1 of half h (ql's low nibbles for
 * gg = 0, high for 1; the 2 high bits 2g of qh[32h + l] moved to bits 4-5), its 128-bit lane k
 * sub-block 4c + k, whose signed scale the lane's words get (vpermw) */
ZFN void z_prep_q6(const blk_q6_k *b, zk_block *k) {
    const __m512i m15 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
    const __m512i up0 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i dn1 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    /* (word i of chunk 0: sub-block i / 8) */
    const __m512i lane = _mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16,
                                                            15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           3);
    k->sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    const __m512i SC = _mm512_castsi256_si512(k->sc16);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m512i QL = _mm512_loadu_si512((const void *)(b->ql + 64 * h));
        const __m512i QH = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b->qh + 32 * h)));
        k->u[2 * h] = _mm512_or_si512(_mm512_and_si512(QL, m15), _mm512_and_si512(_mm512_sllv_epi16(QH, up0), m30));
        k->u[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(QL, 4), m15),
                                          _mm512_and_si512(_mm512_srlv_epi16(QH, dn1), m30));
        k->s[2 * h] = _mm512_permutexvar_epi16(_mm512_add_epi16(lane, _mm512_set1_epi16((short)(8 * h))), SC);
        k->s[2 * h + 1] = _mm512_permutexvar_epi16(_mm512_add_epi16(lane, _mm512_set1_epi16((short)(8 * h + 4))), SC);
    }
}

/* an unpacked block with one row's activations: v1's lanes sum to I1, v2's to I2 (0 for Q6_K,
 * whose offset of 32 is taken off I1: 32 sum_j scale_j times the activations' sum of sub-block j) */
ZFN void z_block_mul(const int T, const zk_block *k, const int8_t *xq, const int16_t *sum16, __m256i *v1, __m256i *v2) {
    __m512i acc0 = _mm512_setzero_si512(), acc1 = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m512i p = _mm512_maddubs_epi16(k->u[c], _mm512_loadu_si512((const void *)(xq + 64 * c)));
        if (c & 1)
            acc1 = _mm512_dpwssd_epi32(acc1, p, k->s[c]);
        else
            acc0 = _mm512_dpwssd_epi32(acc0, p, k->s[c]);
    }
    const __m256i sum = z_fold(_mm512_add_epi32(acc0, acc1));
    if (T == WQ_Q6_K) {
        const __m256i off = _mm256_madd_epi16(k->sc16, _mm256_loadu_si256((const __m256i *)sum16));
        *v1 = _mm256_sub_epi32(sum, _mm256_slli_epi32(off, 5));
        *v2 = _mm256_setzero_si256();
    } else {
        *v1 = sum;
        *v2 = z_k4_mins(k->mn, sum16);
    }
}

ZFN void z_prep(const int T, const uint8_t *b, zk_block *k) {
    if (T == WQ_Q4_K)
        z_prep_k4(((const blk_q4_k *)b)->scales, ((const blk_q4_k *)b)->qs, NULL, k);
    else if (T == WQ_Q5_K)
        z_prep_k4(((const blk_q5_k *)b)->scales, ((const blk_q5_k *)b)->qs, ((const blk_q5_k *)b)->qh, k);
    else
        z_prep_q6((const blk_q6_k *)b, k);
}

/* one weight row of nb K blocks of type T with the N (1 .. WQ_INT_MAX_ROWS) quantized rows a into
 * out [N]: each block unpacked once, then met with every row; per row, dotk_avx512vnni256's loop
 * and float operations (8 blocks' I1 and I2 side by side after tree8, lane j block i + j) */
ZFN void z_dotk(const int T, const uint8_t *row, const qx_row *a, const int N, int nb, float *out) {
    const int bytes = T == WQ_Q4_K ? 144 : T == WQ_Q5_K ? 176 : 210;
    const int d_at = T == WQ_Q6_K ? 208 : 0, has_min = T != WQ_Q6_K, dmin_at = d_at + 2;
    __m256 acc[WQ_INT_MAX_ROWS];
    for (int n = 0; n < N; n++) acc[n] = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= nb; i += 8) {
        __m256i v1[WQ_INT_MAX_ROWS][8], v2[WQ_INT_MAX_ROWS][8];
        prefetch_ahead_avx512vnni256(row + (size_t)i * bytes, 8 * (size_t)bytes, MATVEC_PREFETCH_BYTES);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            zk_block k;
            z_prep(T, row + (size_t)(i + j) * bytes, &k);
            for (int n = 0; n < N; n++)
                z_block_mul(T, &k, a[n].q + QK_K * (i + j), a[n].sum + 16 * (i + j), &v1[n][j], &v2[n][j]);
        }
        const uint8_t *b = row + (size_t)i * bytes;
        const __m256 dw = scales8_avx512vnni256(b + d_at, bytes);
        const __m256 mw = has_min ? scales8_avx512vnni256(b + dmin_at, bytes) : _mm256_setzero_ps();
        for (int n = 0; n < N; n++) {
            const __m256 da = _mm256_loadu_ps(a[n].d + i);
            acc[n] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tree8_avx512vnni256(v1[n])), _mm256_mul_ps(dw, da), acc[n]);
            if (has_min) {
                const __m256 neg = _mm256_xor_ps(_mm256_mul_ps(mw, da), _mm256_set1_ps(-0.0f));
                acc[n] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tree8_avx512vnni256(v2[n])), neg, acc[n]);
            }
        }
    }
    float lane[WQ_INT_MAX_ROWS][8];
    for (int n = 0; n < N; n++) _mm256_storeu_ps(lane[n], acc[n]);
    for (; i < nb; i++) {
        const uint8_t *b = row + (size_t)i * bytes;
        prefetch_ahead_avx512vnni256(b, (size_t)bytes, MATVEC_PREFETCH_BYTES);
        zk_block k;
        z_prep(T, b, &k);
        for (int n = 0; n < N; n++) {
            __m256i v1, v2;
            z_block_mul(T, &k, a[n].q + QK_K * i, a[n].sum + 16 * i, &v1, &v2);
            int I1, I2;
            hsum2_i32_avx512vnni256(v1, v2, &I1, &I2);
            lane[n][i % 8] = fmaf((float)I1, f16_avx512vnni256(b + d_at) * a[n].d[i], lane[n][i % 8]);
            if (has_min)
                lane[n][i % 8] = fmaf((float)I2, -(f16_avx512vnni256(b + dmin_at) * a[n].d[i]), lane[n][i % 8]);
        }
    }
    for (int n = 0; n < N; n++) out[n] = reduce8(lane[n]);
}

/* decoding's case: two weight rows (row, row + rb) with one row of x, z_dotk's operations for each,
 * the activations' loads shared and the two rows' chains interleaved */
ZFN void z_dotk_pair(const int T, const uint8_t *row, size_t rb, const qx_row *a, int nb, float out[2]) {
    const int bytes = T == WQ_Q4_K ? 144 : T == WQ_Q5_K ? 176 : 210;
    const int d_at = T == WQ_Q6_K ? 208 : 0, has_min = T != WQ_Q6_K, dmin_at = d_at + 2;
    if (nb % 8) { /* (a row of other than whole groups of 8 blocks: each row by itself) */
        z_dotk(T, row, a, 1, nb, out);
        z_dotk(T, row + rb, a, 1, nb, out + 1);
        return;
    }
    /* (each row's lines asked for at the same place in a pair of rows whole pairs ahead, at least
     * MATVEC_PREFETCH_BYTES: a row's own stream ahead runs into the pair's other row once a row
     * is about that long, 8 KiB at 14336 wide, and the next pair's second row went unasked) */
    const size_t ahead = 2 * rb * ((MATVEC_PREFETCH_BYTES + 2 * rb - 1) / (2 * rb));
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int i = 0; i < nb; i += 8) {
        __m256i v1[2][8], v2[2][8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            for (int r = 0; r < 2; r++) {
                prefetch_ahead_avx512vnni256(row + r * rb + (size_t)(i + j) * bytes, (size_t)bytes, ahead);
                zk_block k;
                z_prep(T, row + r * rb + (size_t)(i + j) * bytes, &k);
                z_block_mul(T, &k, a->q + QK_K * (i + j), a->sum + 16 * (i + j), &v1[r][j], &v2[r][j]);
            }
        const __m256 da = _mm256_loadu_ps(a->d + i);
        for (int r = 0; r < 2; r++) {
            const uint8_t *b = row + r * rb + (size_t)i * bytes;
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tree8_avx512vnni256(v1[r])),
                                     _mm256_mul_ps(scales8_avx512vnni256(b + d_at, bytes), da), acc[r]);
            if (has_min) {
                const __m256 neg = _mm256_xor_ps(_mm256_mul_ps(scales8_avx512vnni256(b + dmin_at, bytes), da),
                                                 _mm256_set1_ps(-0.0f));
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tree8_avx512vnni256(v2[r])), neg, acc[r]);
            }
        }
    }
    for (int r = 0; r < 2; r++) {
        float lane[8];
        _mm256_storeu_ps(lane, acc[r]);
        out[r] = reduce8(lane);
    }
}

/* ---- decoding's Q4_K / Q5_K: up to 4 weight rows a pass against one row of x ----------------------
 * On the CPUs measured (docs/performance.md) a 512-bit operation takes two of the four 256-bit
 * vector pipes, and the multiplies and byte shuffles share one pair of them, so what counts is the
 * number of vector operations a block takes, shuffles and multiplies first. Here, per block:
 *  - the activations are kept in the order the nibbles come out of the weights (qx_row.qk:
 *    sub-blocks 0 2 1 3 4 6 5 7, 32 each), so the block's 128 bytes of nibbles are two 64-byte
 *    loads, each an and (low nibbles: sub-blocks s and s + 2 in a chunk's two halves) and a shift
 *    and an and (high: s + 1, s + 3);
 *  - one vpdpbusd a chunk (levels u8 x activations s8, four products a 32-bit lane, exact), no
 *    scale yet; two unpack levels then leave, in each 128-bit lane, one partial sum per chunk:
 *    sub-blocks 0 1 4 5 in the low two lanes, 2 3 6 7 in the high two;
 *  - one vpmulld by the 8 scales laid out in that order (widened from bytes laid out once per 8
 *    blocks), so the block's 16 lanes sum to I1.
 * Per 8 blocks: their lanes summed by an unpack tree (lane j block j), the 8 blocks' scales,
 * minimums, d and dmin taken apart on 64-bit lanes (scale_min_k4, a block a lane), and I2 =
 * sum_j m_j A_j from the minimums as words against the activations' sums of 32 (qx_row.sum32, in
 * the order the unpacks leave the blocks). Then z_dotk's float operations, so every output is the
 * reference's. The weight rows of a pass share the activations' loads. */

/* eight blocks' fields (b, blocks of `bytes`): d and dmin as floats, the 8 scales (sc) and the
 * 8 minimums (mn) of block j as qword j; scale_min_k4 on 64-bit lanes of g0 (bytes 0-7 of each
 * block: d, dmin, scales 0-3) and g1 (scales 4-11), from each block's first 16 bytes (blocks 0 2
 * 4 6 in one vector's 128-bit lanes, 1 3 5 7 in another's, then their qwords unpacked) */
ZFN void z_dec_fields(const uint8_t *b, int bytes, __m256 *d, __m256 *dmin, __m512i *sc, __m512i *mn) {
#define Z_AT(j) _mm_loadu_si128((const __m128i *)(b + (j) * (size_t)bytes))
    __m512i e = _mm512_castsi128_si512(Z_AT(0)), o = _mm512_castsi128_si512(Z_AT(1));
    e = _mm512_inserti32x4(e, Z_AT(2), 1), o = _mm512_inserti32x4(o, Z_AT(3), 1);
    e = _mm512_inserti32x4(e, Z_AT(4), 2), o = _mm512_inserti32x4(o, Z_AT(5), 2);
    e = _mm512_inserti32x4(e, Z_AT(6), 3), o = _mm512_inserti32x4(o, Z_AT(7), 3);
#undef Z_AT
    const __m512i g0 = _mm512_unpacklo_epi64(e, o), g1 = _mm512_unpackhi_epi64(e, o);
    *d = _mm256_cvtph_ps(_mm512_cvtepi64_epi16(g0));
    *dmin = _mm256_cvtph_ps(_mm512_cvtepi64_epi16(_mm512_srli_epi64(g0, 16)));
    /* (a0 = g0's high dword, a1 = g1's low, a2 = g1's high: scales j < 4 are a0's low 6 bits, j >= 4
     * a2's low nibbles with a0's top 2 bits; minimums the same from a1 and a2's high nibbles;
     * vpternlog 0xf8: a | (b & c)) */
    const __m512i lo6 = _mm512_set1_epi64(0x3f3f3f3fll), hi4 = _mm512_set1_epi64(0x0f0f0f0f00000000ll);
    const __m512i hi2 = _mm512_set1_epi64(0x3030303000000000ll);
    *sc = _mm512_ternarylogic_epi64(_mm512_and_si512(_mm512_srli_epi64(g0, 32), lo6), g1, hi4, 0xf8);
    *sc = _mm512_ternarylogic_epi64(*sc, _mm512_srli_epi64(g0, 2), hi2, 0xf8);
    *mn = _mm512_ternarylogic_epi64(_mm512_and_si512(g1, lo6), _mm512_srli_epi64(g1, 4), hi4, 0xf8);
    *mn = _mm512_ternarylogic_epi64(*mn, _mm512_slli_epi64(g1, 30), hi2, 0xf8);
}

/* 16 bytes widened to dwords, read from memory by the widening itself (a compiler would otherwise
 * forward the bytes just stored through a register and an extra lane shuffle) */
ZFN __m512i z_dec_zx8to32(const uint8_t *p) {
    __m512i v;
    __asm__("vpmovzxbd %1, %0" : "=v"(v) : "m"(*(const __m128i *)p));
    return v;
}

/* one Q4_K / Q5_K block (b) with a row's activations of that block in K4 order (xq) and its 8
 * scales as bytes in z_dec_rows' order (scp [16]): 16 lanes that sum to I1 */
ZFN __m512i z_dec_block(const int q5, const uint8_t *b, const int8_t *xq, const uint8_t *scp) {
    const __m512i m15 = _mm512_set1_epi8(15), z = _mm512_setzero_si512();
    const uint8_t *qs = b + (q5 ? 48 : 16);
    const __m512i Q0 = _mm512_loadu_si512((const void *)qs), Q1 = _mm512_loadu_si512((const void *)(qs + 64));
    /* (Q4_K: the high nibbles left in place, 16 times their level: no shift, and the chunks of low
     * nibbles get 16 times their scales, so the block's lanes sum to 16 I1, exactly) */
    const __m512i m240 = _mm512_set1_epi8((char)0xf0);
    __m512i u[4] = {_mm512_and_si512(Q0, m15),
                    q5 ? _mm512_and_si512(_mm512_srli_epi16(Q0, 4), m15) : _mm512_and_si512(Q0, m240),
                    _mm512_and_si512(Q1, m15),
                    q5 ? _mm512_and_si512(_mm512_srli_epi16(Q1, 4), m15) : _mm512_and_si512(Q1, m240)};
    if (q5) {
        /* the 5th bit of sub-block s is bit s of qh[l]: with qh in the low 256 bits and qh >> 2
         * in the high, chunk c's (sub-blocks s, s + 2) is bit (0, 1, 4, 5)[c] of each half, moved
         * to bit 4 and or'ed in (vpternlog 0xf8: u | (h & 16)) */
        const __m512i QH = _mm512_srlv_epi16(_mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + 16))),
                                             _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1));
        const __m512i b4 = _mm512_set1_epi8(16);
        u[0] = _mm512_ternarylogic_epi32(u[0], _mm512_slli_epi16(QH, 4), b4, 0xf8);
        u[1] = _mm512_ternarylogic_epi32(u[1], _mm512_slli_epi16(QH, 3), b4, 0xf8);
        u[2] = _mm512_ternarylogic_epi32(u[2], QH, b4, 0xf8);
        u[3] = _mm512_ternarylogic_epi32(u[3], _mm512_srli_epi16(QH, 1), b4, 0xf8);
    }
    const __m512i d0 = _mm512_dpbusd_epi32(z, u[0], _mm512_load_si512((const void *)xq));
    const __m512i d1 = _mm512_dpbusd_epi32(z, u[1], _mm512_load_si512((const void *)(xq + 64)));
    const __m512i d2 = _mm512_dpbusd_epi32(z, u[2], _mm512_load_si512((const void *)(xq + 128)));
    const __m512i d3 = _mm512_dpbusd_epi32(z, u[3], _mm512_load_si512((const void *)(xq + 192)));
    /* (per 128-bit lane: [d0 d1 d0 d1] partials, then [d0 d1 d2 d3]) */
    const __m512i e01 = _mm512_add_epi32(_mm512_unpacklo_epi32(d0, d1), _mm512_unpackhi_epi32(d0, d1));
    const __m512i e23 = _mm512_add_epi32(_mm512_unpacklo_epi32(d2, d3), _mm512_unpackhi_epi32(d2, d3));
    const __m512i f = _mm512_add_epi32(_mm512_unpacklo_epi64(e01, e23), _mm512_unpackhi_epi64(e01, e23));
    __m512i sc = z_dec_zx8to32(scp);
    if (!q5) sc = _mm512_sllv_epi32(sc, _mm512_set4_epi32(0, 4, 0, 4)); /* (lanes 0, 2 of each 4: low nibbles) */
    return _mm512_mullo_epi32(f, sc);
}

/* eight vectors' lane sums (lane j: the sum of vector j's lanes), built as the vectors come:
 * pairs summed by 32-bit unpacks, pairs of pairs by 64-bit ones (each 128-bit lane then holds
 * four vectors' partials), then the 128-bit lanes of the two quads */
ZFN __m512i z_dec_pair(__m512i a, __m512i b) {
    return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
}
ZFN __m512i z_dec_quad(__m512i p0, __m512i p1) {
    return _mm512_add_epi32(_mm512_unpacklo_epi64(p0, p1), _mm512_unpackhi_epi64(p0, p1));
}
ZFN __m256i z_dec_lanes(__m512i q0, __m512i q1) {
    /* [q0 L0 + L2, q0 L1 + L3, q1 L0 + L2, q1 L1 + L3], then its 128-bit lanes 0 + 1 and 2 + 3 */
    const __m512i s = _mm512_add_epi32(_mm512_shuffle_i64x2(q0, q1, _MM_SHUFFLE(1, 0, 1, 0)),
                                       _mm512_shuffle_i64x2(q0, q1, _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512i v = _mm512_shuffle_i64x2(s, s, _MM_SHUFFLE(3, 1, 2, 0));
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

/* eight blocks' I2 (lane j block j) from their minimums (qword j of mn) and the activations' sums
 * of 32 (s32 [64]: blocks 0 2 4 6, then 1 3 5 7, the order of the bytes' unpacks into words) */
ZFN __m256i z_dec_i2(__m512i mn, const int16_t *s32) {
    const __m512i m0 = _mm512_madd_epi16(_mm512_unpacklo_epi8(mn, _mm512_setzero_si512()),
                                         _mm512_load_si512((const void *)s32));
    const __m512i m1 = _mm512_madd_epi16(_mm512_unpackhi_epi8(mn, _mm512_setzero_si512()),
                                         _mm512_load_si512((const void *)(s32 + 32)));
    /* (128-bit lane k: [2k, 2k + 1, 2k, 2k + 1] after two unpack levels) */
    __m512i t = _mm512_add_epi32(_mm512_unpacklo_epi32(m0, m1), _mm512_unpackhi_epi32(m0, m1));
    t = _mm512_add_epi32(_mm512_unpacklo_epi64(t, t), _mm512_unpackhi_epi64(t, t));
    return _mm512_castsi512_si256(
        _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 0, 0, 0, 0, 0, 0, 0, 0), t));
}

enum { Z_DEC_AHEAD = MATVEC_PREFETCH_BYTES };

/* R (1 .. 4) weight rows (row + r rb) of nb blocks (a multiple of 8) of type T with the row of x
 * a (its qk and sum32) into out [R] */
ZFN void z_dec_rows(const int T, const int R, const uint8_t *row, size_t rb, const qx_row *a, int nb, float *out) {
    const int bytes = T == WQ_Q4_K ? 144 : 176;
    /* (a 128-bit lane of the 8 blocks' scale bytes is blocks 2k and 2k + 1: each block's 8 scales
     * in z_dec_block's order, sub-blocks 0 1 4 5 twice then 2 3 6 7 twice) */
    const __m512i even = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 4, 5, 0, 1, 4, 5, 2, 3, 6, 7, 2, 3, 6, 7));
    const __m512i odd = _mm512_add_epi8(even, _mm512_set1_epi8(8));
    uint8_t scp[4][128] __attribute__((aligned(64)));
    /* (each row's lines asked for at its place in a pass of R rows whole passes ahead, at least
     * Z_DEC_AHEAD: as z_dotk_pair) */
    const size_t pass = (size_t)R * rb, ahead = pass * ((Z_DEC_AHEAD + pass - 1) / pass);
    __m256 acc[4];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i += 8) {
        __m512i mn[4];
        __m256 dw[4], mw[4];
        for (int r = 0; r < R; r++) {
            __m512i sc;
            z_dec_fields(row + r * rb + (size_t)i * bytes, bytes, &dw[r], &mw[r], &sc, &mn[r]);
            _mm512_store_si512((void *)scp[r], _mm512_shuffle_epi8(sc, even));
            _mm512_store_si512((void *)(scp[r] + 64), _mm512_shuffle_epi8(sc, odd));
        }
        /* (each block's lanes go into the tree as they come: fewer vectors live at once) */
        __m512i c[4], pr[4], qd[4][2];
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            for (int r = 0; r < R; r++) {
                prefetch_ahead_avx512vnni256(row + r * rb + (size_t)(i + j) * bytes, (size_t)bytes, ahead);
                const __m512i v = z_dec_block(T == WQ_Q5_K, row + r * rb + (size_t)(i + j) * bytes,
                                              a->qk + QK_K * (i + j), scp[r] + (j % 2) * 64 + (j / 2) * 16);
                if (j % 2 == 0)
                    c[r] = v;
                else if (j % 4 == 1)
                    pr[r] = z_dec_pair(c[r], v);
                else
                    qd[r][j / 4] = z_dec_quad(pr[r], z_dec_pair(c[r], v));
            }
        const __m256 da = _mm256_loadu_ps(a->d + i);
        for (int r = 0; r < R; r++) {
            __m256i i1 = z_dec_lanes(qd[r][0], qd[r][1]);
            if (T == WQ_Q4_K) i1 = _mm256_srai_epi32(i1, 4); /* (16 I1: see z_dec_block) */
            const __m256i i2 = z_dec_i2(mn[r], a->sum32 + 8 * i);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1), _mm256_mul_ps(dw[r], da), acc[r]);
            const __m256 neg = _mm256_xor_ps(_mm256_mul_ps(mw[r], da), _mm256_set1_ps(-0.0f));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i2), neg, acc[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        float lane[8];
        _mm256_storeu_ps(lane, acc[r]);
        out[r] = reduce8(lane);
    }
}

/* the rows [o0, o1) of a Q4_K / Q5_K matrix with one row of x: four rows a pass (z_dec_rows asks
 * for their lines ahead as it goes) */
ZFN void z_dec_matvec(const int T, float *y, const qx_row *a, const uint8_t *W, size_t row_bytes, int nb, int o0,
                      int o1) {
    int o = o0;
    for (; o + 4 <= o1; o += 4) z_dec_rows(T, 4, W + (size_t)o * row_bytes, row_bytes, a, nb, y + o);
    for (; o < o1; o++) z_dec_rows(T, 1, W + (size_t)o * row_bytes, row_bytes, a, nb, y + o);
}

/* y[n * OC + o] for the rows [o0, o1) of W and the N quantized rows of x (the dot products ask
 * for the rows' lines ahead as they go: prefetch_ahead, quant_int_kernels.h) */
__attribute__((target(Z5))) static void rows_int_avx512vnni(int t, float *y, int OC, const qx_row *a, int N,
                                                            const uint8_t *W, size_t row_bytes, int IC, int o0, int o1) {
    if (t != WQ_Q4_K && t != WQ_Q5_K && t != WQ_Q6_K) {
        rows_int_avx512vnni256(t, y, OC, a, N, W, row_bytes, IC, o0, o1);
        return;
    }
    int o = o0;
    if (N == 1 && (t == WQ_Q4_K || t == WQ_Q5_K) && (IC / QK_K) % 8 == 0 && a->qk) { /* (decoding's case) */
        if (t == WQ_Q4_K)
            z_dec_matvec(WQ_Q4_K, y, a, W, row_bytes, IC / QK_K, o0, o1);
        else
            z_dec_matvec(WQ_Q5_K, y, a, W, row_bytes, IC / QK_K, o0, o1);
        return;
    }
    if (N == 1) /* (two weight rows a pass) */
        for (; o + 2 <= o1; o += 2) {
            const uint8_t *row = W + (size_t)o * row_bytes;
            switch (t) {
            case WQ_Q4_K: z_dotk_pair(WQ_Q4_K, row, row_bytes, a, IC / QK_K, y + o); break;
            case WQ_Q5_K: z_dotk_pair(WQ_Q5_K, row, row_bytes, a, IC / QK_K, y + o); break;
            default: z_dotk_pair(WQ_Q6_K, row, row_bytes, a, IC / QK_K, y + o); break;
            }
        }
    for (; o < o1; o++) {
        const uint8_t *row = W + (size_t)o * row_bytes;
        float out[WQ_INT_MAX_ROWS];
        /* (one row of x, decoding's case, with N a constant) */
        switch (t) {
        case WQ_Q4_K: N == 1 ? z_dotk(WQ_Q4_K, row, a, 1, IC / QK_K, out) : z_dotk(WQ_Q4_K, row, a, N, IC / QK_K, out); break;
        case WQ_Q5_K: N == 1 ? z_dotk(WQ_Q5_K, row, a, 1, IC / QK_K, out) : z_dotk(WQ_Q5_K, row, a, N, IC / QK_K, out); break;
        default: N == 1 ? z_dotk(WQ_Q6_K, row, a, 1, IC / QK_K, out) : z_dotk(WQ_Q6_K, row, a, N, IC / QK_K, out); break;
        }
        for (int n = 0; n < N; n++) y[(size_t)n * OC + o] = out[n];
    }
}

#undef Z5
#undef ZFN

