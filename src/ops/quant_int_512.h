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
 * the reference's (tests/ops/test_quant_int.c). */

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
        prefetch_ahead_avx512vnni256(row + (size_t)i * bytes, 8 * (size_t)bytes, ahead);
        prefetch_ahead_avx512vnni256(row + rb + (size_t)i * bytes, 8 * (size_t)bytes, ahead);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            for (int r = 0; r < 2; r++) {
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

/* y[n * OC + o] for the rows [o0, o1) of W and the N quantized rows of x (the dot products ask
 * for the rows' lines ahead as they go: prefetch_ahead, quant_int_kernels.h) */
__attribute__((target(Z5))) static void rows_int_avx512vnni(int t, float *y, int OC, const qx_row *a, int N,
                                                            const uint8_t *W, size_t row_bytes, int IC, int o0, int o1) {
    if (t != WQ_Q4_K && t != WQ_Q5_K && t != WQ_Q6_K) {
        rows_int_avx512vnni256(t, y, OC, a, N, W, row_bytes, IC, o0, o1);
        return;
    }
    int o = o0;
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

