/* amx.c — bf16 products on AMX tiles, for gemm_bf16_task (gemm_bf16.c): the small ones and those of
 * threads inside a parallel region (which gemm_bf16.c's comment says why).
 *
 * oneDNN builds a primitive per shape (a JIT compilation) and spends more on every call than the
 * arithmetic of attention's per-block products (a 128 x 256 x 64 product is 4 MFLOP). A prompt fed
 * through the KV cache in chunks meets a new key count, so a new shape, at every block, and a fresh
 * process paid for building them all (the figures: docs/performance.md, "Figures behind the
 * code"). Here the same products run with no per-shape cost:
 *
 *   Ap [M32, K32]   = op(A) rounded up to whole 32 x 32 blocks with zeros (where A cannot be read in place)
 *   Bp [K32/2, N32, 2] = op(B) in the tiles' pair-interleaved layout (VNNI): Bp[k/2][n][k%2] = op(B)[k][n]
 *   C = Ap Bp on the tiles (TDPBF16PS: f32 sums of bf16 pair products) (+ C when beta is 1) (+ bias),
 *   a 32 x 32 block at a time, only its M x N part (A's whole strips read in place where it can be)
 *
 * Tiles: 0-3 hold a 32 x 32 block of C, 4-5 two 16-row strips of A, 6-7 two 16-column strips of Bp.
 * Each element of C sums its K products in the same order whatever M, N and the block it falls in,
 * so a row computed in a short block (a prompt's chunk) equals the same row in a long one. */
#include <stdint.h>
#include <string.h>

#include "ops.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "simd_avx512.h"
#define TLM_AMX_KERNEL 1
#endif

static size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

/* columns of B packed and multiplied at a time (a panel: K x PANEL x 2 bytes, 384 KiB for K = 768), and
 * rows of C computed at a time (the copy of A they need: ROW_CHUNK x K x 2 bytes at most; the
 * head's weight gradient, 50304 rows, had 103 MB of them per thread) */
enum { PANEL = 256, ROW_CHUNK = 512 };

/* B is packed whole, once for all of C's row chunks, when that takes at most this many bytes */
#define WHOLE_B_BYTES ((size_t)4 << 20)
static int whole_b_fits(int N, int K) {
    return sizeof(uint16_t) * round_up((size_t)N, 32) * round_up((size_t)K, 32) <= WHOLE_B_BYTES;
}

size_t amx_scratch_bytes(int M, int N, int K) {
    const size_t m32 = round_up((size_t)(M < ROW_CHUNK ? M : ROW_CHUNK), 32), k32 = round_up((size_t)K, 32);
    const size_t cols = round_up((size_t)(whole_b_fits(N, K) ? N : N < PANEL ? N : PANEL), 32);
    return sizeof(uint16_t) * (m32 * k32 + k32 * cols) + 64; /* (Ap, B or a panel) */
}

#ifdef TLM_AMX_KERNEL

/* the LDTILECFG operand (Intel SDM: palette 1, bytes per row and rows of each tile) */
typedef struct {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((packed)) tile_config;

/* How a product's A strips are read: rows [0, direct_rows) in place from A (ld lda, K a multiple of
 * 32), the rest from the padded copy Ap (ld k32) whose row 0 is row `ap_row0` */
typedef struct {
    const uint16_t *A, *Ap;
    int lda, direct_rows, ap_row0;
} a_source;

static const uint16_t *a_strip(const a_source *src, int m, size_t *stride, int k32) {
    if (m < src->direct_rows) {
        *stride = sizeof(uint16_t) * (size_t)src->lda;
        return src->A + (size_t)m * src->lda;
    }
    *stride = sizeof(uint16_t) * (size_t)k32;
    return src->Ap + (size_t)(m - src->ap_row0) * k32;
}

/* C [M, N] (ldc) = (beta 1: C +) A Bp (+ bias [N]) for one panel of at most PANEL columns (Bp's pair
 * rows ldbp elements apart): 32 x 32
 * blocks of C in tiles 0-3, stored straight into C where a block lies inside it and is neither added
 * to C nor given a bias, else through a block in L1 whose M x N part is then put (or added: the same
 * one f32 addition of the whole sum as before) */
__attribute__((target("amx-tile,amx-bf16"))) static void tiles_panel(float *C, int ldc, float beta, const float *bias,
                                                                        const a_source *as, const uint16_t *Bp,
                                                                        size_t ldbp, int M, int N, int K) {
    const int m32 = (int)round_up((size_t)M, 32), n32 = (int)round_up((size_t)N, 32),
              k32 = (int)round_up((size_t)K, 32);
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.rows[t] = 16, cfg.colsb[t] = 64;
    _tile_loadconfig(&cfg);
    const size_t b_stride = sizeof(uint16_t) * ldbp;
    float block[32 * 32];
    for (int m = 0; m < m32; m += 32) {
        size_t a_stride;
        const uint16_t *a0 = a_strip(as, m, &a_stride, k32), *a1 = a_strip(as, m + 16, &a_stride, k32);
        for (int n = 0; n < n32; n += 32) {
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int k = 0; k < k32; k += 32) {
                const uint16_t *b = Bp + (size_t)(k / 2) * ldbp + 2 * (size_t)n;
                _tile_loadd(4, a0 + k, a_stride);
                _tile_loadd(5, a1 + k, a_stride);
                _tile_loadd(6, b, b_stride);
                _tile_loadd(7, b + 32, b_stride);
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
            }
            if (m + 32 <= M && n + 32 <= N && beta == 0.0f && !bias) {
                float *c = C + (size_t)m * ldc + n;
                const size_t c_stride = sizeof(float) * (size_t)ldc;
                _tile_stored(0, c, c_stride);
                _tile_stored(1, c + 16, c_stride);
                _tile_stored(2, c + 16 * (size_t)ldc, c_stride);
                _tile_stored(3, c + 16 * (size_t)ldc + 16, c_stride);
                continue;
            }
            _tile_stored(0, block, 128);
            _tile_stored(1, block + 16, 128);
            _tile_stored(2, block + 16 * 32, 128);
            _tile_stored(3, block + 16 * 32 + 16, 128);
            const int rows = M - m < 32 ? M - m : 32, cols = N - n < 32 ? N - n : 32;
            for (int i = 0; i < rows; i++) {
                float *c = C + (size_t)(m + i) * ldc + n;
                const float *d = block + 32 * i;
                for (int j = 0; j < cols; j++) {
                    const float v = bias ? d[j] + bias[n + j] : d[j];
                    c[j] = beta != 0.0f ? c[j] + v : v;
                }
            }
        }
    }
    _tile_release();
}

/* dst [cols, rows] = src [rows, cols]^T of 32-bit words (leading dimensions in words): 16 x 16 blocks
 * in registers, the edges one word at a time */
TLM_AVX512 static void transpose_words(uint32_t *dst, size_t ld_dst, const uint32_t *src, size_t ld_src, int rows,
                                      int cols) {
    int r0 = 0;
    for (; r0 + 16 <= rows; r0 += 16) {
        int c0 = 0;
        for (; c0 + 16 <= cols; c0 += 16) {
            __m512 r[16]; /* (32-bit words moved as floats: shuffles only) */
            for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps((const float *)(src + (size_t)(r0 + i) * ld_src + c0));
            transpose16x16(r);
            for (int j = 0; j < 16; j++) _mm512_storeu_ps((float *)(dst + (size_t)(c0 + j) * ld_dst + r0), r[j]);
        }
        for (int c = c0; c < cols; c++)
            for (int i = r0; i < r0 + 16; i++) dst[(size_t)c * ld_dst + i] = src[(size_t)i * ld_src + c];
    }
    for (int i = r0; i < rows; i++)
        for (int c = 0; c < cols; c++) dst[(size_t)c * ld_dst + i] = src[(size_t)i * ld_src + c];
}

/* Bp rows kp = 0 .. K/2-1 of op(B) = B^T, B [N, K] (ldb): the pairs (2kp, 2kp+1) of B's row n are
 * one 32-bit word, so this is a transpose of [N, K/2] words */
static void pack_b_rows_of_bt(uint16_t *Bp, int n32, const uint16_t *B, int ldb, int N, int K) {
    const int KP = K / 2;
    if (ldb % 2 == 0 && (uintptr_t)B % 4 == 0) {
        transpose_words((uint32_t *)Bp, (size_t)n32, (const uint32_t *)B, (size_t)ldb / 2, N, KP);
    } else {
        for (int n = 0; n < N; n++)
            for (int kp = 0; kp < KP; kp++) {
                const uint16_t *src = B + (size_t)n * ldb + 2 * kp;
                uint16_t *dst = Bp + (size_t)kp * 2 * n32 + 2 * (size_t)n;
                dst[0] = src[0], dst[1] = src[1];
            }
    }
    if (K & 1) /* the last k alone: its pair's second half stays 0 */
        for (int n = 0; n < N; n++) Bp[(size_t)KP * 2 * n32 + 2 * (size_t)n] = B[(size_t)n * ldb + K - 1];
}

/* Bp rows of op(B) = B [K, N] (ldb): rows 2kp and 2kp+1 interleaved, 32 columns at a time */
__attribute__((target("avx512f,avx512bw"))) static void pack_b_rows_of_b(uint16_t *Bp, int n32, const uint16_t *B,
                                                                        int ldb, int N, int K) {
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                        37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    for (int k = 0; k < K; k += 2) {
        const uint16_t *r0 = B + (size_t)k * ldb, *r1 = k + 1 < K ? r0 + ldb : NULL;
        uint16_t *dst = Bp + (size_t)(k / 2) * 2 * n32;
        for (int n = 0; n < N; n += 32) {
            const __mmask32 m = N - n >= 32 ? 0xffffffffu : (__mmask32)((1u << (N - n)) - 1);
            const __m512i a = _mm512_maskz_loadu_epi16(m, r0 + n);
            const __m512i b = r1 ? _mm512_maskz_loadu_epi16(m, r1 + n) : _mm512_setzero_si512();
            _mm512_storeu_si512((void *)(dst + 2 * (size_t)n), _mm512_permutex2var_epi16(a, lo, b));
            _mm512_storeu_si512((void *)(dst + 2 * (size_t)n + 32), _mm512_permutex2var_epi16(a, hi, b));
        }
    }
}

/* Ap [m32, k32] = A^T for A [K, M] (lda) in one pass: Ap's row m holds the pairs (A[2kp][m],
 * A[2kp+1][m]) as words, zeros past M and K. Per 16 x 16 block of words, two rows of A's 16 columns are
 * widened and joined into 16 words (pair kp), and a register transpose turns the 16 pairs' vectors into
 * 16 rows of Ap (the weight gradient's doutᵀ: it was interleaved into memory and transposed from there,
 * two passes over it) */
TLM_AVX512 static void pack_a_transposed(uint16_t *Ap, int k32, const uint16_t *A, int lda, int M, int m32, int K) {
    for (int m0 = 0; m0 < m32; m0 += 16) {
        const __mmask16 cols = M - m0 >= 16 ? (__mmask16)0xffff : M - m0 > 0 ? (__mmask16)((1u << (M - m0)) - 1) : 0;
        for (int kp0 = 0; kp0 < k32 / 2; kp0 += 16) {
            __m512 r[16];
            for (int i = 0; i < 16; i++) {
                const int k = 2 * (kp0 + i);
                const __m256i lo = k < K ? _mm256_maskz_loadu_epi16(cols, A + (size_t)k * lda + m0) : _mm256_setzero_si256();
                const __m256i hi =
                    k + 1 < K ? _mm256_maskz_loadu_epi16(cols, A + (size_t)(k + 1) * lda + m0) : _mm256_setzero_si256();
                const __m512i w = _mm512_or_si512(_mm512_cvtepu16_epi32(lo), _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
                r[i] = _mm512_castsi512_ps(w);
            }
            transpose16x16(r);
            for (int j = 0; j < 16; j++) _mm512_storeu_ps((float *)(Ap + (size_t)(m0 + j) * k32 + 2 * (size_t)kp0), r[j]);
        }
    }
}

/* Bp [k32/2, pw32, 2] = op(B)'s columns n0 .. n0 + pw, zeros to whole tiles (the packers write the
 * columns past pw as zeros where they fill whole vectors; the rest of each row and the rows past K here) */
static void pack_b(uint16_t *Bp, int trans_b, const uint16_t *B, int ldb, int n0, int pw, int K) {
    const int pw32 = (int)round_up((size_t)pw, 32), k32 = (int)round_up((size_t)K, 32);
    const size_t brow = 2 * (size_t)pw32;
    for (int kp = 0; kp < k32 / 2; kp++) {
        const int from = kp < K / 2 ? 2 * pw : 0; /* (an odd K's last pair: all zeros first) */
        memset(Bp + (size_t)kp * brow + from, 0, sizeof(uint16_t) * (brow - from));
    }
    if (trans_b)
        pack_b_rows_of_bt(Bp, pw32, B + (size_t)n0 * ldb, ldb, pw, K);
    else
        pack_b_rows_of_b(Bp, pw32, B + n0, ldb, pw, K);
}

/* K is taken K_CHUNK at a time past 2 K_CHUNK: the head's input gradient (K = the vocabulary,
 * 50304 for GPT-2) packed B 25 MB per panel and read each strip of A and the panel from memory again
 * for every other strip, at a third of the speed of the head's two other products
 * (docs/performance.md, "Figures behind the code"). Each chunk's sums are added to C in K's order
 * (beta 1 after the first):
 * every row of C still sums the same products in the same order whatever M and N. */
enum { K_CHUNK = 1024 };

int amx_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
                  int ldb, float beta, float *C, int ldc, const float *bias, void *scratch) {
    if (K > 2 * K_CHUNK) {
        for (int k0 = 0; k0 < K; k0 += K_CHUNK) {
            const int kc = K - k0 < K_CHUNK ? K - k0 : K_CHUNK;
            const uint16_t *Ak = trans_a ? A + (size_t)k0 * lda : A + k0, *Bk = trans_b ? B + k0 : B + (size_t)k0 * ldb;
            amx_gemm_bf16(trans_a, trans_b, M, N, kc, Ak, lda, Bk, ldb, k0 ? 1.0f : beta, C, ldc, k0 ? NULL : bias,
                          scratch);
        }
        return 0;
    }
    const int k32 = (int)round_up((size_t)K, 32), n32 = (int)round_up((size_t)N, 32);
    const int mc32 = (int)round_up((size_t)(M < ROW_CHUNK ? M : ROW_CHUNK), 32);
    uint16_t *Ap = (uint16_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    uint16_t *Bp = Ap + (size_t)mc32 * k32; /* (B packed whole, or a panel of it) */
    const int whole_b = whole_b_fits(N, K);
    if (whole_b) pack_b(Bp, trans_b, B, ldb, 0, N, K);
    for (int m0 = 0; m0 < M; m0 += ROW_CHUNK) { /* C's rows a chunk at a time (A's copies stay bounded) */
        const int mc = M - m0 < ROW_CHUNK ? M - m0 : ROW_CHUNK, m32 = (int)round_up((size_t)mc, 32);
        const uint16_t *Ac = trans_a ? A + m0 : A + (size_t)m0 * lda;
        a_source as = {Ac, Ap, lda, 0, 0};
        if (!trans_a) { /* whole 32-row strips of A in place when its rows hold whole tiles of K; the
                         * rest copied into Ap with zeros around */
            if (K % 32 == 0) as.direct_rows = as.ap_row0 = mc / 32 * 32;
            for (int i = as.ap_row0; i < m32; i++) {
                uint16_t *row = Ap + (size_t)(i - as.ap_row0) * k32;
                if (i < mc) memcpy(row, Ac + (size_t)i * lda, sizeof(uint16_t) * K);
                memset(row + (i < mc ? K : 0), 0, sizeof(uint16_t) * (k32 - (i < mc ? K : 0)));
            }
        } else { /* A [K, M]: transposed into Ap */
            pack_a_transposed(Ap, k32, Ac, lda, mc, m32, K);
        }
        /* a panel of PANEL columns at a time, multiplied by every strip of A while it is in L2: B packed
         * whole once when it is small (a weight gradient's), else each panel packed here (a head of
         * 50304 x 768 packed whole took 77 MB per thread) */
        for (int n0 = 0; n0 < N; n0 += PANEL) {
            const int pw = N - n0 < PANEL ? N - n0 : PANEL;
            if (!whole_b) pack_b(Bp, trans_b, B, ldb, n0, pw, K);
            const uint16_t *bp = whole_b ? Bp + 2 * (size_t)n0 : Bp;
            const size_t ldbp = 2 * (whole_b ? (size_t)n32 : round_up((size_t)pw, 32));
            tiles_panel(C + (size_t)m0 * ldc + n0, ldc, beta, bias ? bias + n0 : NULL, &as, bp, ldbp, mc, pw, K);
        }
    }
    return 0;
}

#else

int amx_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
                  int ldb, float beta, float *C, int ldc, const float *bias, void *scratch) {
    (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)beta;
    (void)C, (void)ldc, (void)bias, (void)scratch;
    return -1;
}

#endif
