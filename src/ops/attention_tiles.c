/* attention_tiles.c — the three products of a causal attention block in AVX-512 register tiles,
 * for heads of 8k floats (attention_tiles.h). attention.c calls them instead of gemm() for one
 * (batch row, head)'s block of up to 64 queries: a 64 x 64 x 32 GEMM call costs about as much in
 * its setup and packing as in its arithmetic, and computes the masked upper triangle too; a
 * 4-query tile here stops at its last query's key, so a causal block does 5/8 of the work.
 *
 * Tiles are 8 rows x up to 2 vectors of 16 (16 accumulators): per step 2 loads and 8 broadcasts
 * feed 16 FMAs.
 * Keys are read from a transposed copy (kt [hd, 64], 16 x 16 register transposes) so that one
 * vector holds 16 keys' products with one query. A head of 16k + 8 floats ends in a half vector
 * (masked loads and stores): small heads (8 floats: stories260K) keep the tiles and their causal
 * cut, where a GEMM call per block costs more than its arithmetic. */
#include "attention_tiles.h"

#if defined(__x86_64__)
#include "simd_avx512.h"

#define TILE_INLINE TLM_AVX512 static inline __attribute__((always_inline))

enum { TILE_ROWS = 8, TILE_VECS = 2, KEY_CHUNK = ATTN_KEY_CHUNK };

/* kt [hd, KEY_CHUNK] = the n <= 64 rows of x (ld floats apart) transposed; keys n.. are 0 */
TLM_AVX512 static void pack_keys(float *kt, const float *x, int ld, int n, int hd) {
    for (int j0 = 0; j0 < KEY_CHUNK; j0 += 16)
        for (int d0 = 0; d0 < hd; d0 += 16) {
            const int dims = hd - d0 < 16 ? hd - d0 : 16;
            __m512 r[16];
            for (int i = 0; i < 16; i++)
                r[i] = j0 + i < n ? load16(x + (size_t)(j0 + i) * ld + d0, dims) : _mm512_setzero_ps();
            transpose16x16(r);
            for (int i = 0; i < dims; i++) _mm512_storeu_ps(kt + (size_t)(d0 + i) * KEY_CHUNK + j0, r[i]);
        }
}

/* a value the compiler must keep in a register: GCC would otherwise fold the load into every
 * FMA that uses it, and on Zen 5 those loads, not the FMAs, then bound the loop */
#define IN_REGISTER(x) __asm__("" : "+v"(x))

/* a vector of `n` (16 or 8: a head of 16k + 8 floats ends in half a vector) columns at p, the rest 0;
 * and the store of its first n. Plain 512- and 256-bit moves: with masked ones in the loop GCC kept
 * the tiles' accumulators in memory. */
TILE_INLINE __m512 load_cols(const float *p, const int n) {
    return n == 16 ? _mm512_loadu_ps(p) : _mm512_zextps256_ps512(_mm256_loadu_ps(p));
}
TILE_INLINE void store_cols(float *p, __m512 v, const int n) {
    if (n == 16)
        _mm512_storeu_ps(p, v);
    else
        _mm256_storeu_ps(p, _mm512_castps512_ps256(v));
}

/* S rows (TILE_ROWS, the first `rows` stored) [16 nv keys from kt's column jc] = scale a . kt */
TILE_INLINE void dots_tile(const int nv, float *const s[TILE_ROWS], const float *const a[TILE_ROWS], int rows,
                           const float *kt, int jc, int left, int hd, float scale) {
    __m512 acc[TILE_ROWS][TILE_VECS];
    for (int r = 0; r < TILE_ROWS; r++)
        for (int v = 0; v < nv; v++) acc[r][v] = _mm512_setzero_ps();
    for (int d = 0; d < hd; d++) {
        __m512 b[TILE_VECS];
        for (int v = 0; v < nv; v++) {
            b[v] = _mm512_loadu_ps(kt + (size_t)d * KEY_CHUNK + jc + 16 * v);
            IN_REGISTER(b[v]);
        }
        for (int r = 0; r < TILE_ROWS; r++) {
            const __m512 x = _mm512_set1_ps(a[r][d]);
            for (int v = 0; v < nv; v++) acc[r][v] = _mm512_fmadd_ps(x, b[v], acc[r][v]);
        }
    }
    const __m512 sc = _mm512_set1_ps(scale);
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < nv; v++) store16(s[r] + 16 * v, _mm512_mul_ps(acc[r][v], sc), left - 16 * v);
}

TLM_AVX512 void attn_tile_dots(float *S, int ldS, const float *a, int lda, const float *keys, int ldk, int rows,
                               int q0, int k0, int k1, int hd, float scale, float *kt) {
    for (int jc = k0; jc < k1; jc += KEY_CHUNK) {
        const int n = k1 - jc < KEY_CHUNK ? k1 - jc : KEY_CHUNK;
        pack_keys(kt, keys + (size_t)jc * ldk, ldk, n, hd);
        for (int r0 = 0; r0 < rows; r0 += TILE_ROWS) {
            const int tr = rows - r0 < TILE_ROWS ? rows - r0 : TILE_ROWS;
            const int kend = q0 + r0 + tr < k1 ? q0 + r0 + tr : k1; /* past the tile's last query's key */
            float *s[TILE_ROWS];
            const float *ar[TILE_ROWS];
            for (int js = jc; js < kend && js < jc + KEY_CHUNK; js += 16 * TILE_VECS) {
                const int left = kend - js < 16 * TILE_VECS ? kend - js : 16 * TILE_VECS;
                for (int r = 0; r < TILE_ROWS; r++) { /* (rows past the block repeat its last: computed, not stored) */
                    const int rr = r < tr ? r0 + r : r0 + tr - 1;
                    s[r] = S + (size_t)rr * ldS + js, ar[r] = a + (size_t)rr * lda;
                }
                if (left > 16)
                    dots_tile(2, s, ar, tr, kt, js - jc, left, hd, scale);
                else
                    dots_tile(1, s, ar, tr, kt, js - jc, left, hd, scale);
            }
        }
    }
}

/* out rows (TILE_ROWS) [16 (nv - 1) + last columns] (+)= sum over keys j0..j1-1 of p[r][j] x[j] */
TILE_INLINE void rows_tile(const int nv, const int last, float *const o[TILE_ROWS], const float *const p[TILE_ROWS],
                           int rows, const float *x, int ldx, int j0, int j1, int accumulate) {
    __m512 acc[TILE_ROWS][TILE_VECS];
    for (int r = 0; r < TILE_ROWS; r++)
        for (int v = 0; v < nv; v++) acc[r][v] = _mm512_setzero_ps();
    for (int j = j0; j < j1; j++) {
        __m512 xv[TILE_VECS];
        for (int v = 0; v < nv; v++) {
            xv[v] = load_cols(x + (size_t)j * ldx + 16 * v, v == nv - 1 ? last : 16);
            IN_REGISTER(xv[v]);
        }
        for (int r = 0; r < TILE_ROWS; r++) {
            const __m512 pr = _mm512_set1_ps(p[r][j]);
            for (int v = 0; v < nv; v++) acc[r][v] = _mm512_fmadd_ps(pr, xv[v], acc[r][v]);
        }
    }
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < nv; v++) {
            float *dst = o[r] + 16 * v;
            const int n = v == nv - 1 ? last : 16;
            __m512 y = acc[r][v];
            if (accumulate) y = _mm512_add_ps(load_cols(dst, n), y);
            store_cols(dst, y, n);
        }
}

/* rows_tile for the last 8 columns alone (heads of 8 floats): 256-bit FMAs, of which a core issues
 * twice as many as 512-bit ones, where a half-empty 512-bit vector would waste half of each */
TILE_INLINE void rows_tile8(float *const o[TILE_ROWS], const float *const p[TILE_ROWS], int rows, const float *x,
                            int ldx, int j0, int j1, int accumulate) {
    __m256 acc[TILE_ROWS];
    for (int r = 0; r < TILE_ROWS; r++) acc[r] = _mm256_setzero_ps();
    for (int j = j0; j < j1; j++) {
        __m256 xv = _mm256_loadu_ps(x + (size_t)j * ldx);
        IN_REGISTER(xv);
        for (int r = 0; r < TILE_ROWS; r++) acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(p[r][j]), xv, acc[r]);
    }
    for (int r = 0; r < rows; r++) {
        __m256 y = acc[r];
        if (accumulate) y = _mm256_add_ps(_mm256_loadu_ps(o[r]), y);
        _mm256_storeu_ps(o[r], y);
    }
}

TLM_AVX512 void attn_tile_rows(float *out, int ldo, const float *P, int ldP, const float *x, int ldx, int rows,
                               int q0, int k0, int k1, int hd, int accumulate) {
    for (int r0 = 0; r0 < rows; r0 += TILE_ROWS) {
        const int tr = rows - r0 < TILE_ROWS ? rows - r0 : TILE_ROWS;
        const int kend = q0 + r0 + tr < k1 ? q0 + r0 + tr : k1;
        const float *p[TILE_ROWS];
        float *o[TILE_ROWS];
        for (int c0 = 0; c0 < hd; c0 += 16 * TILE_VECS) {
            for (int r = 0; r < TILE_ROWS; r++) {
                const int rr = r < tr ? r0 + r : r0 + tr - 1;
                p[r] = P + (size_t)rr * ldP, o[r] = out + (size_t)rr * ldo + c0;
            }
            switch (hd - c0 < 32 ? hd - c0 : 32) { /* (the last vector's columns a constant in each copy) */
            case 32: rows_tile(2, 16, o, p, tr, x + c0, ldx, k0, kend, accumulate); break;
            case 24: rows_tile(2, 8, o, p, tr, x + c0, ldx, k0, kend, accumulate); break;
            case 16: rows_tile(1, 16, o, p, tr, x + c0, ldx, k0, kend, accumulate); break;
            default: rows_tile8(o, p, tr, x + c0, ldx, k0, kend, accumulate); break;
            }
        }
    }
}

/* out rows of keys (TILE_ROWS) [16 (nv - 1) + last columns] += sum over query rows r0..r1-1 of
 * p[r][key] x[r] */
TILE_INLINE void cols_tile(const int nv, const int last, float *const o[TILE_ROWS], const float *P, int ldP,
                           const int key[TILE_ROWS], int keys, const float *x, int ldx, int r0, int r1) {
    __m512 acc[TILE_ROWS][TILE_VECS];
    for (int t = 0; t < TILE_ROWS; t++)
        for (int v = 0; v < nv; v++) acc[t][v] = _mm512_setzero_ps();
    for (int r = r0; r < r1; r++) {
        __m512 xv[TILE_VECS];
        for (int v = 0; v < nv; v++) {
            xv[v] = load_cols(x + (size_t)r * ldx + 16 * v, v == nv - 1 ? last : 16);
            IN_REGISTER(xv[v]);
        }
        const float *pr = P + (size_t)r * ldP;
        for (int t = 0; t < TILE_ROWS; t++) {
            const __m512 pk = _mm512_set1_ps(pr[key[t]]);
            for (int v = 0; v < nv; v++) acc[t][v] = _mm512_fmadd_ps(pk, xv[v], acc[t][v]);
        }
    }
    for (int t = 0; t < keys; t++)
        for (int v = 0; v < nv; v++) {
            float *dst = o[t] + 16 * v;
            const int n = v == nv - 1 ? last : 16;
            store_cols(dst, _mm512_add_ps(load_cols(dst, n), acc[t][v]), n);
        }
}

/* cols_tile for the last 8 columns alone, in 256-bit vectors as rows_tile8 */
TILE_INLINE void cols_tile8(float *const o[TILE_ROWS], const float *P, int ldP, const int key[TILE_ROWS], int keys,
                            const float *x, int ldx, int r0, int r1) {
    __m256 acc[TILE_ROWS];
    for (int t = 0; t < TILE_ROWS; t++) acc[t] = _mm256_setzero_ps();
    for (int r = r0; r < r1; r++) {
        __m256 xv = _mm256_loadu_ps(x + (size_t)r * ldx);
        IN_REGISTER(xv);
        const float *pr = P + (size_t)r * ldP;
        for (int t = 0; t < TILE_ROWS; t++) acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(pr[key[t]]), xv, acc[t]);
    }
    for (int t = 0; t < keys; t++) _mm256_storeu_ps(o[t], _mm256_add_ps(_mm256_loadu_ps(o[t]), acc[t]));
}

TLM_AVX512 void attn_tile_cols(float *out, int ldo, const float *P, int ldP, const float *x, int ldx, int rows,
                               int q0, int k0, int k1, int hd) {
    for (int j0 = k0; j0 < k1; j0 += TILE_ROWS) {
        const int tk = k1 - j0 < TILE_ROWS ? k1 - j0 : TILE_ROWS;
        const int r_first = j0 - q0 > 0 ? j0 - q0 : 0; /* earlier queries do not see these keys */
        int key[TILE_ROWS];
        float *o[TILE_ROWS];
        for (int c0 = 0; c0 < hd; c0 += 16 * TILE_VECS) {
            for (int t = 0; t < TILE_ROWS; t++) {
                key[t] = t < tk ? j0 + t : j0 + tk - 1;
                o[t] = out + (size_t)key[t] * ldo + c0;
            }
            switch (hd - c0 < 32 ? hd - c0 : 32) { /* (the last vector's columns a constant in each copy) */
            case 32: cols_tile(2, 16, o, P, ldP, key, tk, x + c0, ldx, r_first, rows); break;
            case 24: cols_tile(2, 8, o, P, ldP, key, tk, x + c0, ldx, r_first, rows); break;
            case 16: cols_tile(1, 16, o, P, ldP, key, tk, x + c0, ldx, r_first, rows); break;
            default: cols_tile8(o, P, ldP, key, tk, x + c0, ldx, r_first, rows); break;
            }
        }
    }
}
#endif
