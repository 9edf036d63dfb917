/* quant_int.c — the integer products of quantized weights: each row of x rounded once per call
 * to 8-bit blocks, then every block's dot product summed in integers, exactly.
 *
 * The activation blocks (this file's own, modelled on ggml's Q8_0 and Q8_K): for a weight type
 * of 32-element blocks, x is cut into blocks of 32; for the K types into blocks of 256. Each
 * block has one f32 scale d = amax / 127 (amax the largest |x| of the block), levels
 * q = nearest-even(x * 127 / amax) in -127..127 (so that -q never overflows a byte), and the sums
 * of its levels per 32 (32-element types) or per 16 (K types), for the formats' offsets and
 * minimums. A block holding a NaN or an infinity gets d = NaN: every product with it is NaN, as
 * the f32 product would be. So x ~ d q, off by at most d / 2 per element.
 *
 * The product of a weight row with such a row, per weight block b (ggml's values: quant.c's
 * comments give each layout), the integers exact:
 *   Q8_0:  S = sum w_q a_q                          lane += S (d_w d_a)
 *   Q4_0 / Q5_0: S = sum (q - 8 | 16) a_q            lane += S (d_w d_a)
 *   Q4_1 / Q5_1: S = sum q a_q, A = sum a_q          lane += S (d_w d_a); lane += A (m_w d_a)
 *   Q4_K / Q5_K: I1 = sum_j sc_j sum_{l in j} q a_q, I2 = sum_j m_j sum_{l in j} a_q
 *                                                    lane += I1 (d d_a); lane += I2 (-(dmin d_a))
 *   Q6_K:  I1 = sum_j sc_j sum_{l in j} (q - 32) a_q lane += I1 (d d_a)
 *   Q2_K:  as Q4_K over 16 sub-blocks of 16 (scale sc & 15, minimum sc >> 4)
 *   Q3_K:  I1 = sum_j (s_j - 32) sum_{l in j} (q - 4) a_q  lane += I1 (d d_a)
 * each "lane += v s" one fmaf on the integer converted to float (round to nearest), s one
 * product, into lane b % 8 of 8 running sums; the row's value is ((l0 + l1) + (l2 + l3)) +
 * ((l4 + l5) + (l6 + l7)). The scalar functions below are that definition; every vector kernel
 * (quant_int_kernels.h) computes the same integers and the same float operations in the same
 * order, so all paths give the same bits (tests/ops/test_quant_int.c). Against the exact product
 * dot(x, dequantized row) the error is at most sum |w| d_a / 2 plus float rounding. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "ops.h"
#include "quant.h"
#include "quant_blocks.h"
#include "util/cpu.h"
#include "util/profile.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define TLM_X86_KERNELS 1
#endif

/* one quantized row of x: q [IC], d [IC / block], sum [IC / 32] or [IC / 16] (K types); for
 * Q4_K / Q5_K rows of whole groups of 8 blocks also qk [IC], q with each block's 32-element
 * sub-blocks in the order 0 2 1 3 4 6 5 7 (the order of a block's nibbles: quant_int_512.h), and
 * sum32 [IC / 32], the sums of 32; else both NULL */
typedef struct {
    const int8_t *q;
    const float *d;
    const int16_t *sum;
    const int8_t *qk;
    const int16_t *sum32;
} qx_row;

static inline float reduce8(const float l[8]) { return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])); }

/* a Q4_K / Q5_K / Q2_K block's contribution to its lane */
static inline void k_block_lane(float *lane, int I1, int I2, float d, float dmin, float da) {
    *lane = fmaf((float)I1, d * da, *lane);
    *lane = fmaf((float)I2, -(dmin * da), *lane);
}

/* ---- the activations ------------------------------------------------------------------------------ */

static inline int round_even(float v) { return (int)((v + 12582912.0f) - 12582912.0f); } /* |v| < 2^22 */

/* x [IC] into blocks of `block` (32 or 256) at q, d, and the level sums per `sum_len` (32 or 16) */
static void quantize_x(const float *x, int IC, int block, int sum_len, int8_t *q, float *d, int16_t *sum) {
    for (int b = 0; b < IC / block; b++) {
        const float *xb = x + (size_t)b * block;
        int8_t *qb = q + (size_t)b * block;
        float amax = 0.0f;
        int finite = 1;
        for (int j = 0; j < block; j++) {
            const float v = fabsf(xb[j]);
            finite &= v <= 3.4028235e38f; /* (NaN and infinity fail) */
            amax = v > amax ? v : amax;
        }
        if (!finite || amax == 0.0f) {
            d[b] = finite ? 0.0f : NAN;
            memset(qb, 0, (size_t)block);
        } else {
            d[b] = amax / 127.0f;
            const float iscale = 127.0f / amax;
            for (int j = 0; j < block; j++) {
                const int l = round_even(xb[j] * iscale);
                qb[j] = (int8_t)(l > 127 ? 127 : l < -127 ? -127 : l);
            }
        }
    }
    for (int s = 0; s < IC / sum_len; s++) {
        int v = 0;
        for (int j = 0; j < sum_len; j++) v += q[(size_t)s * sum_len + j];
        sum[s] = (int16_t)v;
    }
}

/* quant.h: x [IC] as type t's activation blocks (the prompt GEMM's rows, quant_gemm.c) */
void wq_int_quantize_row(int t, const float *x, int IC, int8_t *q, float *d, int16_t *sum) {
    const int k = wq_block_elems(t) == QK_K;
    quantize_x(x, IC, k ? QK_K : QK, k ? 16 : 32, q, d, sum);
}

/* ---- the scalar reference ------------------------------------------------------------------------- */

static int level_q4(const uint8_t *qs, int j) { return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4; }
static int level_q5(const uint8_t *qs, const uint8_t qh[4], int j) {
    const uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
    return level_q4(qs, j) | (int)((h >> j) & 1) << 4;
}

static float dot32_ref(int t, const uint8_t *row, const qx_row *a, int nb) {
    float lane[8] = {0};
    const size_t bytes = wq_block_bytes(t);
    for (int i = 0; i < nb; i++) {
        const uint8_t *b = row + (size_t)i * bytes;
        const int8_t *xq = a->q + 32 * i;
        int S = 0, A = 0;
        for (int j = 0; j < 32; j++) {
            int w;
            switch (t) {
            case WQ_Q8_0: w = ((const blk_q8_0 *)b)->qs[j]; break;
            case WQ_Q4_0: w = level_q4(((const blk_q4_0 *)b)->qs, j) - 8; break;
            case WQ_Q4_1: w = level_q4(((const blk_q4_1 *)b)->qs, j); break;
            case WQ_Q5_0: w = level_q5(((const blk_q5_0 *)b)->qs, ((const blk_q5_0 *)b)->qh, j) - 16; break;
            default: w = level_q5(((const blk_q5_1 *)b)->qs, ((const blk_q5_1 *)b)->qh, j); break;
            }
            S += w * xq[j];
            A += xq[j];
        }
        lane[i % 8] = fmaf((float)S, f16_at(b) * a->d[i], lane[i % 8]);
        if (t == WQ_Q4_1 || t == WQ_Q5_1) lane[i % 8] = fmaf((float)A, f16_at(b + 2) * a->d[i], lane[i % 8]);
    }
    return reduce8(lane);
}

/* Q4_K / Q5_K: element e of a block is sub-block e / 32; its low 4 bits the low (sub-block even)
 * or high nibble of qs[32 (e / 64) + e % 32], its 5th (Q5_K) bit e / 32 of qh[e % 32] */
static float dot_k4_ref(int t, const uint8_t *row, const qx_row *a, int nb) {
    float lane[8] = {0};
    for (int i = 0; i < nb; i++) {
        const uint8_t *scales, *qs, *qh = NULL, *d, *dmin;
        if (t == WQ_Q4_K) {
            const blk_q4_k *b = (const blk_q4_k *)row + i;
            scales = b->scales, qs = b->qs, d = b->d, dmin = b->dmin;
        } else {
            const blk_q5_k *b = (const blk_q5_k *)row + i;
            scales = b->scales, qs = b->qs, qh = b->qh, d = b->d, dmin = b->dmin;
        }
        const int8_t *xq = a->q + QK_K * i;
        int I1 = 0, I2 = 0;
        for (int j = 0; j < 8; j++) {
            int sc, m, S = 0, A = 0;
            scale_min_k4(scales, j, &sc, &m);
            for (int l = 0; l < 32; l++) {
                const int e = 32 * j + l;
                int q = (qs[32 * (e / 64) + l] >> (4 * (j & 1))) & 15;
                if (qh) q |= ((qh[l] >> j) & 1) << 4;
                S += q * xq[e];
                A += xq[e];
            }
            I1 += sc * S, I2 += m * A;
        }
        k_block_lane(lane + i % 8, I1, I2, f16_at(d), f16_at(dmin), a->d[i]);
    }
    return reduce8(lane);
}

/* Q6_K: element e = 128 h + 32 g + l: low nibble (g < 2) or high of ql[64 h + 32 (g & 1) + l],
 * bits 2 g of qh[32 h + l]; sub-block e / 16 */
static float dot_q6_k_ref(const uint8_t *row, const qx_row *a, int nb) {
    float lane[8] = {0};
    const blk_q6_k *b = (const blk_q6_k *)row;
    for (int i = 0; i < nb; i++, b++) {
        const int8_t *xq = a->q + QK_K * i;
        int I1 = 0;
        for (int j = 0; j < 16; j++) {
            int S = 0;
            for (int k = 0; k < 16; k++) {
                const int e = 16 * j + k, h = e / 128, g = (e % 128) / 32, l = e % 32;
                const int q = ((b->ql[64 * h + 32 * (g & 1) + l] >> (4 * (g / 2))) & 15) |
                              ((b->qh[32 * h + l] >> (2 * g)) & 3) << 4;
                S += (q - 32) * xq[e];
            }
            I1 += b->scales[j] * S;
        }
        lane[i % 8] = fmaf((float)I1, f16_at(b->d) * a->d[i], lane[i % 8]);
    }
    return reduce8(lane);
}

/* Q2_K / Q3_K: element e = 128 h + 32 s + l: bits 2 s of qs[32 h + l] (and for Q3_K the third bit,
 * bit e / 32 of hmask[l]); sub-block e / 16 */
static float dot_k23_ref(int t, const uint8_t *row, const qx_row *a, int nb) {
    float lane[8] = {0};
    for (int i = 0; i < nb; i++) {
        const int8_t *xq = a->q + QK_K * i;
        const blk_q2_k *b2 = (const blk_q2_k *)row + i;
        const blk_q3_k *b3 = (const blk_q3_k *)row + i;
        const uint8_t *qs = t == WQ_Q2_K ? b2->qs : b3->qs;
        int I1 = 0, I2 = 0;
        for (int j = 0; j < 16; j++) {
            int S = 0, A = 0;
            for (int k = 0; k < 16; k++) {
                const int e = 16 * j + k;
                int q = (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
                if (t == WQ_Q3_K) q = (q | ((b3->hmask[e % 32] >> (e / 32)) & 1) << 2) - 4;
                S += q * xq[e];
                A += xq[e];
            }
            if (t == WQ_Q2_K)
                I1 += (b2->scales[j] & 15) * S, I2 += (b2->scales[j] >> 4) * A;
            else
                I1 += scale_q3_k(b3->scales, j) * S;
        }
        if (t == WQ_Q2_K)
            k_block_lane(lane + i % 8, I1, I2, f16_at(b2->d), f16_at(b2->dmin), a->d[i]);
        else
            lane[i % 8] = fmaf((float)I1, f16_at(b3->d) * a->d[i], lane[i % 8]);
    }
    return reduce8(lane);
}

static void rows_int_scalar(int t, float *y, int OC, const qx_row *a, int N, const uint8_t *W, size_t row_bytes,
                            int IC, int o0, int o1) {
    for (int o = o0; o < o1; o++) {
        const uint8_t *row = W + (size_t)o * row_bytes;
        for (int n = 0; n < N; n++)
            y[(size_t)n * OC + o] = t == WQ_Q6_K                     ? dot_q6_k_ref(row, a + n, IC / QK_K)
                                    : t == WQ_Q4_K || t == WQ_Q5_K ? dot_k4_ref(t, row, a + n, IC / QK_K)
                                    : t == WQ_Q2_K || t == WQ_Q3_K ? dot_k23_ref(t, row, a + n, IC / QK_K)
                                                                   : dot32_ref(t, row, a + n, IC / QK);
    }
}

/* ---- the vector kernels: one body (quant_int_kernels.h) for each 256-bit instruction set, and
 * 512-bit ones for the common types on AVX512-VNNI (quant_int_512.h) ------------------------------ */

#ifdef TLM_X86_KERNELS
#define KT "avx2,fma,f16c"
#define KS(name) name##_avx2
#define DOT_US(a, u, s) _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)))
#include "quant_int_kernels.h"
#undef KT
#undef KS
#undef DOT_US

#define KT "avxvnni,avx2,fma,f16c"
#define KS(name) name##_avxvnni
#define DOT_US(a, u, s) _mm256_dpbusd_avx_epi32(a, u, s)
#include "quant_int_kernels.h"
#undef KT
#undef KS
#undef DOT_US

#define KT "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"
#define KS(name) name##_avx512vnni256
#define DOT_US(a, u, s) _mm256_dpbusd_epi32(a, u, s)
#include "quant_int_kernels.h"
#undef KT
#undef KS
#undef DOT_US

/* rows_int_avx512vnni: 512-bit bodies for Q4_K, Q5_K, Q6_K, the 256-bit one above for the rest */
#include "quant_int_512.h"

/* quantize_x on 16 elements at a time (the AVX512-VNNI set's activations): the same float
 * operations one by one (a product, then the add and subtract that round it, no fused multiply-add),
 * so the same levels, scales and sums */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void quantize_x_512(const float *x, int IC, int block,
                                                                                int sum_len, int8_t *q, float *d,
                                                                                int16_t *sum) {
    const __m512 big = _mm512_set1_ps(3.4028235e38f), magic = _mm512_set1_ps(12582912.0f);
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    for (int b = 0; b < IC / block; b++) {
        const float *xb = x + (size_t)b * block;
        int8_t *qb = q + (size_t)b * block;
        int16_t *sb = sum + (size_t)b * block / sum_len;
        __m512 m = _mm512_setzero_ps();
        __mmask16 finite = 0xffff;
        for (int j = 0; j < block; j += 16) {
            const __m512 v = _mm512_abs_ps(_mm512_loadu_ps(xb + j));
            finite &= _mm512_cmp_ps_mask(v, big, _CMP_LE_OQ); /* (NaN and infinity fail) */
            m = _mm512_max_ps(m, v);
        }
        const float amax = _mm512_reduce_max_ps(m);
        if (finite != 0xffff || amax == 0.0f) {
            d[b] = finite == 0xffff ? 0.0f : NAN;
            for (int j = 0; j < block; j += 16) _mm_storeu_si128((__m128i *)(qb + j), _mm_setzero_si128());
            for (int k = 0; k < block / sum_len; k++) sb[k] = 0;
            continue;
        }
        d[b] = amax / 127.0f;
        const __m512 iscale = _mm512_set1_ps(127.0f / amax);
        int acc = 0;
        for (int j = 0; j < block; j += 16) {
            const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(xb + j), iscale);
            __m512i l = _mm512_cvtps_epi32(_mm512_sub_ps(_mm512_add_ps(v, magic), magic)); /* (integral: exact) */
            l = _mm512_max_epi32(_mm512_min_epi32(l, hi), lo);
            _mm_storeu_si128((__m128i *)(qb + j), _mm512_cvtepi32_epi8(l));
            acc += _mm512_reduce_add_epi32(l);
            if ((j + 16) % sum_len == 0) sb[j / sum_len] = (int16_t)acc, acc = 0;
        }
    }
}
#endif

/* ---- the paths, the mode, the calls ------------------------------------------------------------------ */

typedef void (*rows_int_fn)(int t, float *y, int OC, const qx_row *a, int N, const uint8_t *W, size_t row_bytes,
                            int IC, int o0, int o1);

int wq_int_supported(int t) {
    switch (t) {
    case WQ_Q8_0: case WQ_Q4_0: case WQ_Q4_1: case WQ_Q5_0: case WQ_Q5_1:
    case WQ_Q2_K: case WQ_Q3_K: case WQ_Q4_K: case WQ_Q5_K: case WQ_Q6_K:
        return 1;
    default:
        return 0;
    }
}

/* cpuid leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c") */
static int f16c_present(void) {
#ifdef TLM_X86_KERNELS
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
#else
    return 0;
#endif
}

int wq_int_path_available(wq_int_path p) {
    switch (p) {
    case WQ_INT_SCALAR: return 1;
    case WQ_INT_AVX2: return tlm_cpu_isa() >= TLM_ISA_AVX2 && f16c_present();
    case WQ_INT_AVXVNNI: return tlm_cpu_isa() >= TLM_ISA_AVX2 && f16c_present() && tlm_cpu_has_avxvnni();
    case WQ_INT_AVX512VNNI: return tlm_cpu_has_avx512vnni() && f16c_present();
    default: return 0;
    }
}

wq_int_path wq_int_path_pick(void) {
    static _Atomic int cached = -1; /* (TLM_ISA is read once too: tlm_cpu_isa) */
    int p = atomic_load_explicit(&cached, memory_order_relaxed);
    if (p < 0) {
        p = WQ_INT_SCALAR;
        for (int q = WQ_INT_PATHS - 1; q > WQ_INT_SCALAR; q--)
            if (wq_int_path_available((wq_int_path)q)) {
                p = q;
                break;
            }
        atomic_store_explicit(&cached, p, memory_order_relaxed);
    }
    return (wq_int_path)p;
}

const char *wq_int_path_name(wq_int_path p) {
    switch (p) {
    case WQ_INT_SCALAR: return "scalar";
    case WQ_INT_AVX2: return "AVX2";
    case WQ_INT_AVXVNNI: return "AVX-VNNI";
    case WQ_INT_AVX512VNNI: return "AVX512-VNNI";
    default: return "none";
    }
}

static rows_int_fn path_fn(wq_int_path p) {
#ifdef TLM_X86_KERNELS
    switch (p) {
    case WQ_INT_AVX2: return rows_int_avx2;
    case WQ_INT_AVXVNNI: return rows_int_avxvnni;
    case WQ_INT_AVX512VNNI: return rows_int_avx512vnni;
    default: break;
    }
#endif
    (void)p;
    return rows_int_scalar;
}

static _Atomic int products_mode = WQ_PRODUCTS_EXACT;
void wq_set_products(wq_products p) { atomic_store(&products_mode, (int)p); }
wq_products wq_get_products(void) { return (wq_products)atomic_load(&products_mode); }

/* this thread's quantized rows (grown, never shrunk; freed with the thread) */
static _Thread_local struct {
    void *p;
    size_t cap;
} xbuf;

static size_t r64(size_t n) { return (n + 63) / 64 * 64; }
/* a quantized row's bytes: q, d, sum; then qk and sum32 (Q4_K / Q5_K) */
static size_t qx_head(int IC) { return r64(r64((size_t)IC) + (size_t)IC / 32 * 4 + (size_t)IC / 16 * 2); }
static size_t qx_bytes(int IC) { return r64(qx_head(IC) + r64((size_t)IC) + (size_t)IC / 32 * 2); }

/* N rows of x [N, IC] quantized for type t into this thread's buffer: a [N] (with qk and sum32
 * when set p takes them: one row of Q4_K / Q5_K on AVX512-VNNI); -1 if no memory */
static int quantize_rows(wq_int_path p, int t, const float *x, int N, int IC, qx_row *a) {
    const size_t per = qx_bytes(IC), need = per * (size_t)N;
    if (need > xbuf.cap) {
        void *m = NULL;
        if (posix_memalign(&m, 64, need)) return -1;
        free(xbuf.p);
        xbuf.p = m, xbuf.cap = need;
    }
    const int k = wq_block_elems(t) == QK_K, block = k ? QK_K : QK, sum_len = k ? 16 : 32;
    for (int n = 0; n < N; n++) {
        uint8_t *base = (uint8_t *)xbuf.p + per * n;
        int8_t *q = (int8_t *)base;
        float *d = (float *)(base + r64((size_t)IC));
        int16_t *sum = (int16_t *)(d + IC / block);
#ifdef TLM_X86_KERNELS
        if (p == WQ_INT_AVX512VNNI)
            quantize_x_512(x + (size_t)n * IC, IC, block, sum_len, q, d, sum);
        else
#endif
            quantize_x(x + (size_t)n * IC, IC, block, sum_len, q, d, sum);
        a[n] = (qx_row){q, d, sum, NULL, NULL};
        if (p == WQ_INT_AVX512VNNI && N == 1 && (t == WQ_Q4_K || t == WQ_Q5_K) && IC / QK_K % 8 == 0) {
            int8_t *qk = (int8_t *)(base + qx_head(IC));
            int16_t *sum32 = (int16_t *)(base + qx_head(IC) + r64((size_t)IC));
            static const int from[8] = {0, 2, 1, 3, 4, 6, 5, 7};
            for (int b = 0; b < IC / QK_K; b++)
                for (int c = 0; c < 8; c++) memcpy(qk + QK_K * b + 32 * c, q + QK_K * b + 32 * from[c], 32);
            /* (per 8 blocks, those of even index first: the order quant_int_512.h's unpacks leave
             * them in; rows of whole groups of 8 blocks only, those the kernel takes) */
            for (int j = 0; j < IC / 32; j++) {
                const int g = j / 64, blk = j / 8 % 8, s = j % 8;
                sum32[64 * g + (blk % 2) * 32 + (blk / 2) * 8 + s] = (int16_t)(sum[2 * j] + sum[2 * j + 1]);
            }
            a[n].qk = qk, a[n].sum32 = sum32;
        }
    }
    return 0;
}

static int int_shape_ok(int t, int IC) { return wq_int_supported(t) && IC > 0 && IC % wq_block_elems(t) == 0; }

int wq_int_products(wq_int_path p, float *y, const float *x, const void *W, int t, int N, int IC, int OC, int o0,
                    int o1) {
    qx_row a[WQ_INT_MAX_ROWS];
    if (!wq_int_path_available(p) || !int_shape_ok(t, IC) || N < 1 || N > WQ_INT_MAX_ROWS) return -1;
    if (quantize_rows(p, t, x, N, IC, a)) return -1;
    path_fn(p)(t, y, OC, a, N, W, wq_row_bytes(t, IC), IC, o0, o1);
    return 0;
}

/* whether matvec_quant takes the integer kernels: asked for, a type and width they read, and a
 * vector set to run them (the plain C reference is the definition the tests hold the sets to, and
 * about 5x slower than the plain C widening products: without AVX2 the products stay exact) */
static int int_products_on(int t, int IC) {
    return wq_get_products() == WQ_PRODUCTS_INT8 && int_shape_ok(t, IC) && wq_int_path_pick() != WQ_INT_SCALAR;
}

int wq_int_matvec(float *y, const float *x, const void *W, int t, const float *bias, int N, int IC, int OC) {
    if (!int_products_on(t, IC)) return -1;
    const rows_int_fn fn = path_fn(wq_int_path_pick());
    const size_t row_bytes = wq_row_bytes(t, IC);
    for (int n0 = 0; n0 < N; n0 += WQ_INT_MAX_ROWS) {
        const int rows = N - n0 < WQ_INT_MAX_ROWS ? N - n0 : WQ_INT_MAX_ROWS;
        qx_row a[WQ_INT_MAX_ROWS];
        /* (the first group is the largest: once its buffer is had, the others fit in it) */
        if (quantize_rows(wq_int_path_pick(), t, x + (size_t)n0 * IC, rows, IC, a)) return -1;
        float *yn = y + (size_t)n0 * OC;
        /* (the widening kernels' split: each thread a contiguous share of the rows, a multiple of 16) */
#pragma omp parallel
        {
            const int nt = omp_get_num_threads(), id = omp_get_thread_num();
            const int per = ((OC + nt - 1) / nt + 15) & ~15;
            const int o0 = id * per < OC ? id * per : OC, o1 = o0 + per < OC ? o0 + per : OC;
            if (o1 > o0) {
                fn(t, yn, OC, a, rows, W, row_bytes, IC, o0, o1);
                if (bias)
                    for (int n = 0; n < rows; n++)
                        for (int o = o0; o < o1; o++) yn[(size_t)n * OC + o] += bias[o];
            }
        }
    }
    return 0;
}

int wq_int_matvec_part(float *y, const float *x, const void *W, int t, const float *bias, int IC, int o0, int o1) {
    if (!int_products_on(t, IC)) return -1;
    qx_row a;
    {
        PROF_SCOPE("quantize_activations");
        if (quantize_rows(wq_int_path_pick(), t, x, 1, IC, &a)) return -1;
    }
    path_fn(wq_int_path_pick())(t, y, o1, &a, 1, W, wq_row_bytes(t, IC), IC, o0, o1);
    if (bias)
        for (int o = o0; o < o1; o++) y[o] += bias[o];
    return 0;
}

const char *wq_product_kernel(int t, wq_products mode) {
    static _Thread_local char s[192];
    if (mode == WQ_PRODUCTS_INT8 && wq_int_supported(t) && wq_int_path_pick() == WQ_INT_SCALAR)
        snprintf(s, sizeof s, "%s (no vector integer kernels here: the exact products)", wq_widening_kernel(t));
    else if (mode == WQ_PRODUCTS_INT8 && wq_int_supported(t))
        snprintf(s, sizeof s, "int8 x int8 dot products (%s%s), activations in 8-bit blocks of %d",
                 wq_int_path_name(wq_int_path_pick()),
                 wq_int_path_pick() == WQ_INT_AVX512VNNI && (t == WQ_Q4_K || t == WQ_Q5_K || t == WQ_Q6_K)
                     ? ", 512-bit"
                     : "",
                 wq_block_elems(t) == QK_K ? QK_K : QK);
    else
        snprintf(s, sizeof s, "%s", wq_widening_kernel(t));
    return s;
}
