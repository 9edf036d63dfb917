/* attention.c — causal multi-head self-attention with GQA, soft-capped logits and an
 * optional sliding window. The full-sequence pass (training, scoring) and the KV-cache pass
 * (model/attention.c) share the visibility rule (attention_first_key) and the capped, masked
 * softmax of one row of scores (attention_softmax_row); they differ in how the dot products
 * are computed (GEMMs here, attention_row's or model/attention.c's own loops there), so their
 * results agree to float32 rounding, not bit for bit. */
#include <math.h>
#include <omp.h>

#include "fastmath.h"
#include "ops.h"
#include "attention_tiles.h"
#include "simd_avx512.h"
#include "util/cpu.h"
#include "util/f16.h"
#include "util/profile.h"

int attention_key_visible(int query, int key, int window) {
    return key >= 0 && key <= query && (window <= 0 || query - key < window);
}

/* (the same rule as a range: keys attention_first_key(pos) .. pos) */
int attention_first_key(int pos, int window) { return (window > 0 && pos - window + 1 > 0) ? pos - window + 1 : 0; }

int attention_first_key_padded(int pos, int window, int start) {
    const int first = attention_first_key(pos, window), lo = start < pos ? start : pos;
    return lo > first ? lo : first;
}

/* the first key that query `pos` of batch row b sees under spec (its window, the row's left padding) */
static inline int spec_first_key(const attention_spec *spec, int b, int pos) {
    return spec->start ? attention_first_key_padded(pos, spec->window, spec->start[b])
                       : attention_first_key(pos, spec->window);
}

/* ---- one row of the softmax, forward and backward: portable C and AVX-512 ----------------------- */

/* One row of scores s [n] (q.k products not yet scaled when scale != 1) -> its softmax p over the
 * visible keys first..last, written over columns [lo, hi) (lo <= first, last < hi <= n): p 0 and,
 * when p is not s, s the scaled, capped scores and -inf outside the visible keys. lo 0, hi n: the
 * whole row (kept maps); a block's [k0, k1): what its products read, no more. pb (or NULL): p's
 * columns [lo, hi) rounded to bf16 (pb[0] is column lo), while the row is in L1. */
static void softmax_row_c(float *s, float *p, int n, int lo, int hi, int first, int last, float scale,
                          float softcap, uint16_t *pb) {
    /* separate loops, each without branches and counting from 0 over the visible keys, so that
     * gcc and clang vectorize every one */
    float *vs = s + first, *vp = p + first;
    const int m = last + 1 - first;
    (void)n;
    for (int j = 0; j < m; j++) vs[j] *= scale;
    if (softcap > 0.0f)
        for (int j = 0; j < m; j++) vs[j] = softcap_inline(vs[j], softcap);
    const float mx = max_lanes(vs, m);
    for (int j = 0; j < m; j++) vp[j] = exp_approx(vs[j] - mx);
    const float inv = 1.0f / dot_lanes(vp, NULL, m);
    for (int j = 0; j < m; j++) vp[j] *= inv;
    for (int j = lo; j < first; j++) s[j] = -INFINITY, p[j] = 0.0f; /* (p may be s: p last) */
    for (int j = last + 1; j < hi; j++) s[j] = -INFINITY, p[j] = 0.0f;
    if (pb)
        for (int j = lo; j < hi; j++) pb[j - lo] = tlm_f32_to_bf16(p[j]);
}

/* One row of dP [n] -> d(scaled q.k) in place: softmax backward over the visible keys
 * first..last, then the soft-cap's (from the saved capped scores s), times the q.k scale;
 * 0 elsewhere in [lo, hi); pb as above. Branch-free loops from 0, so that they vectorize (as above). */
static void softmax_row_backward_c(float *d, const float *p, const float *s, int n, int lo, int hi, int first,
                                   int last, float cap, float scale, uint16_t *pb) {
    float *vd = d + first;
    const float *vp = p + first, *vs = s + first;
    const int m = last + 1 - first;
    (void)n;
    const float pdp = dot_lanes(vp, vd, m);
    for (int j = 0; j < m; j++) vd[j] = vp[j] * (vd[j] - pdp) * scale;
    if (cap > 0.0f)
        for (int j = 0; j < m; j++) vd[j] *= 1.0f - (vs[j] / cap) * (vs[j] / cap);
    for (int j = lo; j < first; j++) d[j] = 0.0f;
    for (int j = last + 1; j < hi; j++) d[j] = 0.0f;
    if (pb)
        for (int j = lo; j < hi; j++) pb[j - lo] = tlm_f32_to_bf16(d[j]);
}

#if defined(__x86_64__)
/* The same rows in vectors of 16 columns aligned to the row's start: the lanes outside the
 * visible keys take their constant (-inf, 0) in the same full-vector stores, so that neither
 * the masked half of a causal row nor a partial vector needs a masked store (slow on Zen 5:
 * docs/performance.md, "Figures behind the code"); only a row length not a multiple of 16 ends
 * in one. */
TLM_AVX512 static inline __mmask16 visible16(int j, int first, int last) {
    const int lo = first - j > 0 ? first - j : 0, hi = last - j < 15 ? last - j : 15;
    return lo > hi ? 0 : (__mmask16)(((1u << (hi + 1)) - 1) & ~((1u << lo) - 1));
}

/* columns j..j+15 of a row as bf16 into pb (pb[0]: column lo), those inside [lo, hi) */
TLM_AVX512 static inline void put_bf16(uint16_t *pb, int j, int lo, int hi, __m512 v) {
    const __m256i h = bf16_round16(v);
    if (j >= lo && j + 16 <= hi) {
        _mm256_storeu_si256((__m256i *)(pb + (j - lo)), h);
        return;
    }
    uint16_t t[16]; /* (a row's first or last vector when lo or hi is not a multiple of 16) */
    _mm256_storeu_si256((__m256i *)t, h);
    for (int i = 0; i < 16; i++)
        if (j + i >= lo && j + i < hi) pb[j + i - lo] = t[i];
}

/* (the vectors of [lo, hi) wholly outside first..last: aligned as the row's, so they may reach up
 * to 15 columns outside [lo, hi), inside the row, with the same masked constants) */
TLM_AVX512 static void softmax_row_avx512(float *s, float *p, int n, int lo, int hi, int first, int last,
                                          float scale, float softcap, uint16_t *pb) {
    if (softcap > 0.0f) {
        for (int j = first; j <= last; j++) s[j] = softcap_inline(s[j] * scale, softcap);
        scale = 1.0f; /* (s holds the scaled scores now) */
    }
    const int j_first = first & ~15;
    const __m512 sc = _mm512_set1_ps(scale);
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (int j = j_first; j <= last; j += 16) /* (x > max ? x : max: a NaN score never wins, as in max_lanes) */
        vmax = _mm512_mask_max_ps(vmax, visible16(j, first, last), _mm512_mul_ps(load16(s + j, n - j), sc), vmax);
    const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(vmax)), minus_inf = _mm512_set1_ps(-INFINITY);
    __m512 sum = _mm512_setzero_ps();
    for (int j = j_first; j <= last; j += 16) {
        const __mmask16 vis = visible16(j, first, last);
        const __m512 x = _mm512_mul_ps(load16(s + j, n - j), sc);
        const __m512 e = _mm512_maskz_mov_ps(vis, exp16(_mm512_sub_ps(x, mx)));
        if (p != s) store16(s + j, _mm512_mask_blend_ps(vis, minus_inf, x), n - j);
        store16(p + j, e, n - j);
        sum = _mm512_add_ps(sum, e);
    }
    const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum)), zero = _mm512_setzero_ps();
    for (int j = j_first; j <= last; j += 16) {
        const __m512 pv = _mm512_mul_ps(load16(p + j, n - j), inv);
        store16(p + j, pv, n - j);
        if (pb) put_bf16(pb, j, lo, hi, pv);
    }
    /* the vectors wholly outside the visible keys (p may be s: p last) */
    for (int j = lo & ~15; j < j_first; j += 16) {
        if (p != s) store16(s + j, minus_inf, n - j);
        store16(p + j, zero, n - j);
        if (pb) put_bf16(pb, j, lo, hi, zero);
    }
    for (int j = j_first + ((last - j_first) / 16 + 1) * 16; j < hi; j += 16) {
        if (p != s) store16(s + j, minus_inf, n - j);
        store16(p + j, zero, n - j);
        if (pb) put_bf16(pb, j, lo, hi, zero);
    }
}

TLM_AVX512 static void softmax_row_backward_avx512(float *d, const float *p, const float *s, int n, int lo, int hi,
                                                   int first, int last, float cap, float scale, uint16_t *pb) {
    const int j_first = first & ~15;
    __m512 acc = _mm512_setzero_ps();
    for (int j = j_first; j <= last; j += 16)
        acc = _mm512_mask3_fmadd_ps(load16(p + j, n - j), load16(d + j, n - j), acc, visible16(j, first, last));
    const __m512 pdp = _mm512_set1_ps(_mm512_reduce_add_ps(acc)), sc = _mm512_set1_ps(scale);
    const __m512 one = _mm512_set1_ps(1.0f), inv_cap = _mm512_set1_ps(cap > 0.0f ? 1.0f / cap : 0.0f);
    const __m512 zero = _mm512_setzero_ps();
    for (int j = j_first; j <= last; j += 16) {
        __m512 g = _mm512_mul_ps(_mm512_mul_ps(load16(p + j, n - j), _mm512_sub_ps(load16(d + j, n - j), pdp)), sc);
        if (cap > 0.0f) {
            const __m512 t = _mm512_mul_ps(load16(s + j, n - j), inv_cap);
            g = _mm512_mul_ps(g, _mm512_fnmadd_ps(t, t, one));
        }
        g = _mm512_maskz_mov_ps(visible16(j, first, last), g);
        store16(d + j, g, n - j);
        if (pb) put_bf16(pb, j, lo, hi, g);
    }
    for (int j = lo & ~15; j < j_first; j += 16) {
        store16(d + j, zero, n - j);
        if (pb) put_bf16(pb, j, lo, hi, zero);
    }
    for (int j = j_first + ((last - j_first) / 16 + 1) * 16; j < hi; j += 16) {
        store16(d + j, zero, n - j);
        if (pb) put_bf16(pb, j, lo, hi, zero);
    }
}

enum { SOFTMAX_BLOCK_ROWS = 64 };

/* A row's visible keys first..last as vectors of 16 from j0 = first & ~15 up to j_end: those
 * before j_mid0 and from j_mid1 on are partly visible (masked), those between wholly (plain) */
typedef struct {
    int j0, j_mid0, j_mid1, j_end;
} row_span;

static inline row_span span_of(int first, int last) {
    row_span r;
    r.j0 = first & ~15, r.j_end = r.j0 + ((last - r.j0) / 16 + 1) * 16;
    r.j_mid0 = (first + 15) & ~15, r.j_mid1 = (last + 1) & ~15;
    if (r.j_mid1 < r.j_mid0) r.j_mid1 = r.j_mid0; /* (one vector, partly visible at both ends) */
    return r;
}

TLM_AVX512 static inline __attribute__((always_inline)) __m512 row_max_step(__m512 vmax, const float *s, int j,
                                                                            int n, int first, int last,
                                                                            const int whole) {
    if (whole) return _mm512_max_ps(_mm512_loadu_ps(s + j), vmax);
    return _mm512_mask_max_ps(vmax, visible16(j, first, last), load16(s + j, n - j), vmax);
}

TLM_AVX512 static inline __attribute__((always_inline)) __m512 row_exp_step(__m512 sum, float *s, float *p, __m512 m,
                                                                            int j, int n, int first, int last,
                                                                            const int whole) {
    if (whole) {
        const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + j), m));
        _mm512_storeu_ps(p + j, e);
        return _mm512_add_ps(sum, e);
    }
    const __mmask16 vis = visible16(j, first, last);
    const __m512 x = load16(s + j, n - j);
    const __m512 e = _mm512_maskz_mov_ps(vis, exp16(_mm512_sub_ps(x, m)));
    if (p != s) store16(s + j, _mm512_mask_blend_ps(vis, _mm512_set1_ps(-INFINITY), x), n - j);
    store16(p + j, e, n - j);
    return _mm512_add_ps(sum, e);
}

/* softmax_row_avx512 over the rows of a block (scale 1, no soft-cap, no bf16 copy), pass by pass:
 * every row's max, then every row's exponentials and sum, then every row's scaling; and the wholly
 * visible vectors without masks. The same operations in the same order, so the same bits; but a
 * row's reductions (max, sum, 1/sum) no longer hold up its next pass, as they did row by row, where
 * with short rows (T 128) they were a large part of the time. Row r sees keys first[r]..last[r]
 * and is written over [lo, hi). */
TLM_AVX512 static void softmax_block_avx512(float *S, float *P, int n, int rows, int lo, int hi, const int *first,
                                            const int *last, float *S_out, float *P_out) {
    float mx[SOFTMAX_BLOCK_ROWS], inv[SOFTMAX_BLOCK_ROWS];
    const __m512 minus_inf = _mm512_set1_ps(-INFINITY), zero = _mm512_setzero_ps();
    for (int r = 0; r < rows; r++) {
        const float *s = S + (size_t)r * n;
        const row_span sp = span_of(first[r], last[r]);
        __m512 vmax = minus_inf;
        int j = sp.j0;
        for (; j < sp.j_mid0; j += 16) vmax = row_max_step(vmax, s, j, n, first[r], last[r], 0);
        for (; j < sp.j_mid1; j += 16) vmax = row_max_step(vmax, s, j, n, first[r], last[r], 1);
        for (; j < sp.j_end; j += 16) vmax = row_max_step(vmax, s, j, n, first[r], last[r], 0);
        mx[r] = _mm512_reduce_max_ps(vmax);
    }
    for (int r = 0; r < rows; r++) {
        float *s = S + (size_t)r * n, *p = P + (size_t)r * n;
        const row_span sp = span_of(first[r], last[r]);
        const __m512 m = _mm512_set1_ps(mx[r]);
        __m512 sum = zero;
        int j = sp.j0;
        for (; j < sp.j_mid0; j += 16) sum = row_exp_step(sum, s, p, m, j, n, first[r], last[r], 0);
        for (; j < sp.j_mid1; j += 16) sum = row_exp_step(sum, s, p, m, j, n, first[r], last[r], 1);
        for (; j < sp.j_end; j += 16) sum = row_exp_step(sum, s, p, m, j, n, first[r], last[r], 0);
        inv[r] = 1.0f / _mm512_reduce_add_ps(sum);
        if (S_out) /* (the visible vectors' scores as s now holds them; in L1) */
            for (j = sp.j0; j < sp.j_end; j += 16) _mm512_stream_ps(S_out + (size_t)r * n + j, _mm512_loadu_ps(s + j));
    }
    for (int r = 0; r < rows; r++) {
        float *s = S + (size_t)r * n, *p = P + (size_t)r * n;
        const row_span sp = span_of(first[r], last[r]);
        const __m512 iv = _mm512_set1_ps(inv[r]);
        for (int j = sp.j0; j < sp.j_end; j += 16) {
            const __m512 pv = _mm512_mul_ps(load16(p + j, n - j), iv);
            store16(p + j, pv, n - j);
            if (P_out) _mm512_stream_ps(P_out + (size_t)r * n + j, pv);
        }
        for (int j = lo & ~15; j < sp.j0; j += 16) { /* (a cache's maps: these straight out too) */
            if (S_out) _mm512_stream_ps(S_out + (size_t)r * n + j, minus_inf);
            if (P_out) _mm512_stream_ps(P_out + (size_t)r * n + j, zero);
            if (p != s) store16(s + j, minus_inf, n - j);
            store16(p + j, zero, n - j);
        }
        for (int j = sp.j_end; j < hi; j += 16) {
            if (S_out) _mm512_stream_ps(S_out + (size_t)r * n + j, minus_inf);
            if (P_out) _mm512_stream_ps(P_out + (size_t)r * n + j, zero);
            if (p != s) store16(s + j, minus_inf, n - j);
            store16(p + j, zero, n - j);
        }
    }
    if (S_out || P_out) _mm_sfence(); /* (the stores are weakly ordered: visible before the pass's barrier) */
}

/* softmax_row_backward_avx512 over the rows of a block (no soft-cap, no bf16 copy) pass by pass as
 * softmax_block_avx512: every row's sum of p dP, then every row's dS = scale p (dP - that sum).
 * The same operations in the same order as a row at a time. */
TLM_AVX512 static void softmax_block_backward_avx512(float *D, const float *P, int n, int rows, int lo, int hi,
                                                     const int *first, const int *last, float scale) {
    float pdp[SOFTMAX_BLOCK_ROWS];
    for (int r = 0; r < rows; r++) {
        const float *d = D + (size_t)r * n, *p = P + (size_t)r * n;
        const row_span sp = span_of(first[r], last[r]);
        __m512 acc = _mm512_setzero_ps();
        int j = sp.j0;
        for (; j < sp.j_mid0; j += 16)
            acc = _mm512_mask3_fmadd_ps(load16(p + j, n - j), load16(d + j, n - j), acc,
                                        visible16(j, first[r], last[r]));
        for (; j < sp.j_mid1; j += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(p + j), _mm512_loadu_ps(d + j), acc);
        for (; j < sp.j_end; j += 16)
            acc = _mm512_mask3_fmadd_ps(load16(p + j, n - j), load16(d + j, n - j), acc,
                                        visible16(j, first[r], last[r]));
        pdp[r] = _mm512_reduce_add_ps(acc);
    }
    const __m512 sc = _mm512_set1_ps(scale), zero = _mm512_setzero_ps();
    for (int r = 0; r < rows; r++) {
        float *d = D + (size_t)r * n;
        const float *p = P + (size_t)r * n;
        const row_span sp = span_of(first[r], last[r]);
        const __m512 m = _mm512_set1_ps(pdp[r]);
        int j = sp.j0;
        for (; j < sp.j_end; j += 16) {
            const int whole = j >= sp.j_mid0 && j < sp.j_mid1;
            __m512 g = _mm512_mul_ps(_mm512_mul_ps(load16(p + j, n - j), _mm512_sub_ps(load16(d + j, n - j), m)), sc);
            if (!whole) g = _mm512_maskz_mov_ps(visible16(j, first[r], last[r]), g);
            store16(d + j, g, n - j);
        }
        for (j = lo & ~15; j < sp.j0; j += 16) store16(d + j, zero, n - j);
        for (j = sp.j_end; j < hi; j += 16) store16(d + j, zero, n - j);
    }
}
#endif

typedef void (*softmax_row_fn)(float *, float *, int, int, int, int, int, float, float, uint16_t *);
typedef void (*softmax_row_backward_fn)(float *, const float *, const float *, int, int, int, int, int, float,
                                        float, uint16_t *);

static softmax_row_fn pick_softmax_row(void) {
#if defined(__x86_64__)
    if (tlm_cpu_isa() == TLM_ISA_AVX512) return softmax_row_avx512;
#endif
    return softmax_row_c;
}

static softmax_row_backward_fn pick_softmax_row_backward(void) {
#if defined(__x86_64__)
    if (tlm_cpu_isa() == TLM_ISA_AVX512) return softmax_row_backward_avx512;
#endif
    return softmax_row_backward_c;
}

void attention_softmax_row(float *s, float *p, int n, int first, int last, float softcap) {
    pick_softmax_row()(s, p, n, 0, n, first, last, 1.0f, softcap, NULL);
}

static void attention_row_c(float *out, float *scores, const float *q, const float *keys, const float *values,
                            size_t kv_stride, int first_key, int n_keys, int head_dim, float scale, float softcap) {
    for (int j = first_key; j < n_keys; j++) {
        const float *kj = keys + (size_t)j * kv_stride;
        scores[j] = dot_lanes(q, kj, head_dim) * scale;
    }
    /* (in place: the probabilities overwrite the scores) */
    softmax_row_c(scores, scores, n_keys, 0, n_keys, first_key, n_keys - 1, 1.0f, softcap, NULL);
    for (int i = 0; i < head_dim; i++) out[i] = 0.0f;
    for (int j = first_key; j < n_keys; j++) {
        const float *vj = values + (size_t)j * kv_stride;
        for (int i = 0; i < head_dim; i++) out[i] += scores[j] * vj[i];
    }
}

#if defined(__x86_64__)
/* The same with 16-lane chunks of head_dim (masked at the end, any head_dim): a tree reduction
 * per key instead of 16 dependent scalar adds, and the output chunk held in registers while
 * the keys stream past. */
TLM_AVX512 static void attention_row_avx512(float *out, float *scores, const float *q, const float *keys,
                                            const float *values, size_t kv_stride, int first_key, int n_keys,
                                            int head_dim, float scale, float softcap) {
    for (int j = first_key; j < n_keys; j++) {
        const float *kj = keys + (size_t)j * kv_stride;
        __m512 acc = _mm512_setzero_ps();
        for (int i = 0; i < head_dim; i += 16)
            acc = _mm512_fmadd_ps(load16(q + i, head_dim - i), load16(kj + i, head_dim - i), acc);
        scores[j] = _mm512_reduce_add_ps(acc) * scale;
    }
    softmax_row_avx512(scores, scores, n_keys, 0, n_keys, first_key, n_keys - 1, 1.0f, softcap, NULL);
    for (int i = 0; i < head_dim; i += 16) {
        const int left = head_dim - i;
        const float *vi = values + i;
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(); /* two chains: FMA latency */
        int j = first_key;
        for (; j + 1 < n_keys; j += 2) {
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(scores[j]), load16(vi + (size_t)j * kv_stride, left), a0);
            a1 = _mm512_fmadd_ps(_mm512_set1_ps(scores[j + 1]), load16(vi + (size_t)(j + 1) * kv_stride, left), a1);
        }
        if (j < n_keys) a0 = _mm512_fmadd_ps(_mm512_set1_ps(scores[j]), load16(vi + (size_t)j * kv_stride, left), a0);
        store16(out + i, _mm512_add_ps(a0, a1), left);
    }
}
#endif

void attention_row(float *out, float *scores, const float *q, const float *keys, const float *values,
                   size_t kv_stride, int first_key, int n_keys, int head_dim, float scale, float softcap) {
#if defined(__x86_64__)
    if (tlm_cpu_isa() == TLM_ISA_AVX512) {
        attention_row_avx512(out, scores, q, keys, values, kv_stride, first_key, n_keys, head_dim, scale, softcap);
        return;
    }
#endif
    attention_row_c(out, scores, q, keys, values, kv_stride, first_key, n_keys, head_dim, scale, softcap);
}

/* Full-sequence attention works per (batch row, head) with GEMMs, a block of ATTN_QUERY_BLOCK
 * queries at a time: S = scale Q K^T over the keys the block can see (up to its last query, from
 * the window start of its first), soft-cap, causal/window mask, row softmax, O = P V over the
 * same keys. Inside a block the masked upper triangle is computed and thrown away (small GEMMs
 * beat T^2/2 scalar dot products); above the diagonal blocks nothing is computed, which halves
 * the work of long sequences. The row softmax writes every column of its row (-inf / 0 where
 * masked), including those no GEMM touched.
 *
 * Without [B,H,T,T] maps to keep (training without probes or hooks) a block's S and P live in
 * the thread's scratch, and the backward computes them again (the same GEMM and row softmax, so
 * the same bits): two more small products per block instead of writing and re-reading two
 * B*H*T*T tensors, which at nanoGPT's shape are a sixth of the step's activations and evict the
 * rest from the cache. */
enum { ATTN_QUERY_BLOCK = 64 };

/* floats of one block's [rows, T] matrix, and of a thread's scratch: S, P, dS of one block and
 * the tile kernels' transposed keys */
static size_t block_floats(int T) { return (size_t)(T < ATTN_QUERY_BLOCK ? T : ATTN_QUERY_BLOCK) * T; }

/* Mixed precision (spec->bf16 on AMX) works on larger blocks: each product is one gemm_bf16 call
 * (oneDNN), whose fixed cost per call is worth more rows; a block's S, P, dS [rows, T] in f32, a
 * bf16 copy of P or dS [rows, keys], and the head's q, k, v, dO rows as bf16 [T, hd] each */
enum { ATTN_BF16_BLOCK = 128 };
static int bf16_block_rows(int T) { return T < ATTN_BF16_BLOCK ? T : ATTN_BF16_BLOCK; }
static size_t bf16_scratch_floats(int T, int hd) {
    const size_t blk = (size_t)bf16_block_rows(T) * T;
    return 3 * blk + (blk + 4 * (size_t)T * hd + 1) / 2; /* (bf16: two to a float) */
}

size_t attention_scratch_floats(int T, int head_dim) {
    const size_t f32 = 3 * block_floats(T) + (size_t)ATTN_KEY_CHUNK * head_dim;
    const size_t b16 = bf16_scratch_floats(T, head_dim);
    return f32 > b16 ? f32 : b16;
}

int attention_bf16_products(const attention_spec *spec) {
    /* AMX only: on AVX512-BF16 alone oneDNN's small products do not beat the f32 register tiles */
    return spec->bf16 && gemm_bf16_path() == GEMM_BF16_AMX;
}

/* the keys [*k0, *k1) the queries [q0, q0 + rows) can see */
static void block_keys(int q0, int rows, int window, int *k0, int *k1) {
    *k0 = attention_first_key(q0, window);
    *k1 = q0 + rows;
}

/* A block's three kinds of product, by the AVX-512 tile kernels (attention_tiles.c: heads of
 * 8k floats) or by gemm(). Rows of S, P, dS [rows, T] are the block's, columns absolute keys;
 * keys, values and their gradients are passed from key 0. */
typedef struct {
    int tiles, hd;
    float *kt; /* the tile kernels' transposed keys */
} block_products;

static block_products products_for(const attention_spec *spec, float *kt) {
    block_products bp = {0, spec->head_dim, kt};
#if defined(__x86_64__)
    bp.tiles = tlm_cpu_isa() == TLM_ISA_AVX512 && spec->head_dim % 8 == 0;
#endif
    return bp;
}

/* S [rows, k0..] = scale a [rows, hd] keys^T */
static void block_dots(const block_products *bp, float *S, int T, const float *a, int lda, const float *keys, int ldk,
                       int rows, int q0, int k0, int k1, float scale) {
#if defined(__x86_64__)
    if (bp->tiles) {
        attn_tile_dots(S, T, a, lda, keys, ldk, rows, q0, k0, k1, bp->hd, scale, bp->kt);
        return;
    }
#endif
    gemm(0, 1, rows, k1 - k0, bp->hd, scale, a, lda, keys + (size_t)k0 * ldk, ldk, 0.0f, S + k0, T);
}

/* out [rows, hd] = (accumulate: +=) P [rows, k0..k1) x [k0..k1, hd] */
static void block_rows(const block_products *bp, float *out, int ldo, const float *P, int T, const float *x, int ldx,
                       int rows, int q0, int k0, int k1, int accumulate) {
#if defined(__x86_64__)
    if (bp->tiles) {
        attn_tile_rows(out, ldo, P, T, x, ldx, rows, q0, k0, k1, bp->hd, accumulate);
        return;
    }
#endif
    gemm(0, 0, rows, bp->hd, k1 - k0, 1.0f, P + k0, T, x + (size_t)k0 * ldx, ldx, accumulate ? 1.0f : 0.0f, out, ldo);
}

/* out [k0..k1, hd] += P [rows, k0..k1)^T x [rows, hd] */
static void block_cols(const block_products *bp, float *out, int ldo, const float *P, int T, const float *x, int ldx,
                       int rows, int q0, int k0, int k1) {
#if defined(__x86_64__)
    if (bp->tiles) {
        attn_tile_cols(out, ldo, P, T, x, ldx, rows, q0, k0, k1, bp->hd);
        return;
    }
#endif
    gemm(1, 0, k1 - k0, bp->hd, rows, 1.0f, P + k0, T, x, ldx, 1.0f, out + (size_t)k0 * ldo, ldo);
}

/* one (batch row, head)'s operands: q, k, v rows (q_row / kv_row floats apart) of head h */
typedef struct {
    const float *q, *k, *v;
    int q_row, kv_row;
    int b; /* the batch row */
} head_view;

static head_view head_at(const float *q, const float *k, const float *v, int b, int h, int T,
                         const attention_spec *spec) {
    const int q_row = spec->n_heads * spec->head_dim, kv_row = spec->n_kv_heads * spec->head_dim;
    const int g = h / (spec->n_heads / spec->n_kv_heads);
    head_view hv = {q + (size_t)b * T * q_row + (size_t)h * spec->head_dim,
                    k + (size_t)b * T * kv_row + (size_t)g * spec->head_dim,
                    v + (size_t)b * T * kv_row + (size_t)g * spec->head_dim, q_row, kv_row, b};
    return hv;
}

/* S [rows, T] = capped, masked scale Q K^T of queries q0.. and P its row softmax (P may be S):
 * the forward's block, and the backward's when no maps were kept. Kept maps (`whole`) are written
 * over the whole rows; a scratch block only over the keys k0..k1 that the products read. With
 * S_out / P_out (or NULL), a cache's rows of the maps written out as they are made (non-temporal
 * stores between the softmax's arithmetic, not a burst after it) where the block softmax runs and
 * the rows are whole 64-byte lines; returns whether it wrote them (else the caller copies). */
static int block_probs(const block_products *bp, float *S, float *P, const head_view *hv, int q0, int rows, int T,
                       const attention_spec *spec, softmax_row_fn softmax_row, int whole, float *S_out,
                       float *P_out) {
    int k0, k1;
    block_keys(q0, rows, spec->window, &k0, &k1);
    block_dots(bp, S, T, hv->q + (size_t)q0 * hv->q_row, hv->q_row, hv->k, hv->kv_row, rows, q0, k0, k1, spec->scale);
#if defined(__x86_64__)
    if (softmax_row == softmax_row_avx512 && spec->softcap <= 0.0f && rows <= SOFTMAX_BLOCK_ROWS) {
        int first[SOFTMAX_BLOCK_ROWS], last[SOFTMAX_BLOCK_ROWS];
        for (int r = 0; r < rows; r++) first[r] = spec_first_key(spec, hv->b, q0 + r), last[r] = q0 + r;
        const int out = whole && T % 16 == 0 && !((uintptr_t)S_out & 63) && !((uintptr_t)P_out & 63) &&
                        (S_out || P_out) && S != P;
        softmax_block_avx512(S, P, T, rows, whole ? 0 : k0, whole ? T : k1, first, last, out ? S_out : NULL,
                             out ? P_out : NULL);
        return out;
    }
#endif
    for (int r = 0; r < rows; r++)
        softmax_row(S + (size_t)r * T, P + (size_t)r * T, T, whole ? 0 : k0, whole ? T : k1,
                    spec_first_key(spec, hv->b, q0 + r), q0 + r, 1.0f, spec->softcap, NULL);
    (void)S_out, (void)P_out;
    return 0;
}

/* ---- mixed precision: the products on bf16 operands --------------------------------------------
 *
 * The same blocks and the same f32 softmax (forward and backward) as above; what changes is the
 * products: q, k, v and dO are rounded to bf16 once per head, P and dS once per block, and each of
 * S = scale q k^T, O = P v, dV += P^T dO, dP = dO v^T, dQ = dS k, dK += dS^T q is one gemm_bf16
 * call with f32 sums (AMX tiles). The masked upper triangle of a block is computed and discarded,
 * as gemm() does. A product that oneDNN could not run makes the caller compute the whole pass in
 * f32 (the function returns -1 before writing any output it cannot finish). */
typedef struct {
    float *S, *P, *dS;            /* [rows, T] each */
    uint16_t *pb, *q, *k, *v, *do_; /* pb: P or dS of a block as bf16 [rows, keys]; the rest [T, hd] */
} bf16_scratch;

static bf16_scratch bf16_scratch_at(float *own, int T, int hd) {
    const size_t blk = (size_t)bf16_block_rows(T) * T, head = (size_t)T * hd;
    bf16_scratch s = {own, own + blk, own + 2 * blk, (uint16_t *)(own + 3 * blk), NULL, NULL, NULL, NULL};
    s.q = s.pb + blk, s.k = s.q + head, s.v = s.k + head, s.do_ = s.v + head;
    return s;
}

/* S [rows, ld] = capped, masked scale q k^T of the block's queries (qb16: their rows, the first at
 * position q0) over keys k0..k1 (columns are absolute keys, k16 and the rows of S from key 0), P
 * its row softmax (P may be S; the whole rows when `whole`, else k0..k1), and P's keys k0..k1 as
 * bf16 into pb [rows, k1 - k0], each row rounded while it is in L1 (the scale, the softmax and
 * the rounding used to be three passes over the block); 0 or -1 (no product) */
static int bf16_block_probs(float *S, float *P, int ld, uint16_t *pb, const uint16_t *qb16, const uint16_t *k16,
                            int b, int q0, int rows, int k0, int k1, const attention_spec *spec,
                            softmax_row_fn softmax_row, int whole) {
    const int hd = spec->head_dim, nk = k1 - k0;
    if (gemm_bf16_task(0, 1, rows, nk, hd, qb16, hd, k16 + (size_t)k0 * hd, hd, 0.0f, S + k0, ld, NULL)) return -1;
    for (int r = 0; r < rows; r++) {
        float *sr = S + (size_t)r * ld, *pr = P + (size_t)r * ld;
        softmax_row(sr, pr, ld, k0, k1, spec_first_key(spec, b, q0 + r), q0 + r, spec->scale, spec->softcap,
                    pb + (size_t)r * nk);
        if (whole) { /* the kept maps' columns outside the block's keys: all masked */
            for (int j = 0; j < k0; j++) sr[j] = -INFINITY, pr[j] = 0.0f; /* (P may be S: P last) */
            for (int j = k1; j < ld; j++) sr[j] = -INFINITY, pr[j] = 0.0f;
        }
    }
    return 0;
}

int attention_block_bf16(float *out, int ldo, float *S, float *P, int ld, uint16_t *pb, const uint16_t *qb16,
                         const uint16_t *k16, const uint16_t *v16, int b, int q0, int rows, int k0, int k1,
                         const attention_spec *spec, int whole) {
    if (bf16_block_probs(S, P, ld, pb, qb16, k16, b, q0, rows, k0, k1, spec, pick_softmax_row(), whole)) return -1;
    /* O = P v */
    return gemm_bf16_task(0, 0, rows, spec->head_dim, k1 - k0, pb, k1 - k0, v16 + (size_t)k0 * spec->head_dim,
                          spec->head_dim, 0.0f, out, ldo, NULL);
}

static int attention_forward_bf16(float *out, float *scores, float *probs, const float *q, const float *k,
                                  const float *v, int B, int T, const attention_spec *spec, float *scratch) {
    const int H = spec->n_heads, hd = spec->head_dim, QB = bf16_block_rows(T);
    const int q_row = H * hd;
    const size_t own_floats = attention_scratch_floats(T, hd);
    const int group = H / spec->n_kv_heads;
    int failed = 0;
#pragma omp parallel reduction(| : failed)
    {
        /* the kv head whose k, v this thread's scratch holds as bf16: the query heads of a GQA
         * group that a thread runs one after another round them once */
        int have_b = -1, have_g = -1;
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                if (failed) continue;
                const bf16_scratch w = bf16_scratch_at(scratch + (size_t)omp_get_thread_num() * own_floats, T, hd);
                const head_view hv = head_at(q, k, v, b, h, T, spec);
                f32_to_bf16_rows(w.q, hd, hv.q, hv.q_row, T, hd);
                if (b != have_b || h / group != have_g) {
                    f32_to_bf16_rows(w.k, hd, hv.k, hv.kv_row, T, hd);
                    f32_to_bf16_rows(w.v, hd, hv.v, hv.kv_row, T, hd);
                    have_b = b, have_g = h / group;
                }
                float *oh = out + (size_t)b * T * q_row + (size_t)h * hd;
                const size_t map = ((size_t)b * H + h) * T * T;
                for (int q0 = 0; q0 < T && !failed; q0 += QB) {
                    const int rows = T - q0 < QB ? T - q0 : QB;
                    int k0, k1;
                    block_keys(q0, rows, spec->window, &k0, &k1);
                    float *S = scores ? scores + map + (size_t)q0 * T : w.S;
                    float *P = probs ? probs + map + (size_t)q0 * T : S;
                    if (attention_block_bf16(oh + (size_t)q0 * q_row, q_row, S, P, T, w.pb, w.q + (size_t)q0 * hd,
                                             w.k, w.v, b, q0, rows, k0, k1, spec, scores || probs)) {
                        failed = 1;
                        break;
                    }
                }
            }
    }
    return failed ? -1 : 0;
}

static int attention_backward_bf16(float *dq, float *dk, float *dv, const float *dout, const float *scores,
                                   const float *probs, const float *q, const float *k, const float *v, int B, int T,
                                   const attention_spec *spec, float *scratch) {
    const int H = spec->n_heads, KV = spec->n_kv_heads, hd = spec->head_dim, group = H / KV, QB = bf16_block_rows(T);
    const int q_row = H * hd, kv_row = KV * hd;
    const softmax_row_fn softmax_row = pick_softmax_row();
    const softmax_row_backward_fn softmax_row_backward = pick_softmax_row_backward();
    const size_t own_floats = attention_scratch_floats(T, hd);
    const size_t n_kv = (size_t)B * T * kv_row;
#pragma omp parallel for schedule(static) if(n_kv > OMP_MIN_WORK)
    for (size_t i = 0; i < n_kv; i++) dk[i] = 0.0f, dv[i] = 0.0f;
    int failed = 0;
#pragma omp parallel for collapse(2) schedule(static) reduction(| : failed)
    for (int b = 0; b < B; b++)
        for (int g = 0; g < KV; g++) {
            if (failed) continue;
            const bf16_scratch w = bf16_scratch_at(scratch + (size_t)omp_get_thread_num() * own_floats, T, hd);
            float *dkg = dk + (size_t)b * T * kv_row + (size_t)g * hd;
            float *dvg = dv + (size_t)b * T * kv_row + (size_t)g * hd;
            for (int h = g * group; h < (g + 1) * group && !failed; h++) {
                const head_view hv = head_at(q, k, v, b, h, T, spec);
                if (h == g * group) {
                    f32_to_bf16_rows(w.k, hd, hv.k, kv_row, T, hd);
                    f32_to_bf16_rows(w.v, hd, hv.v, kv_row, T, hd);
                }
                const size_t qo = (size_t)b * T * q_row + (size_t)h * hd, map = ((size_t)b * H + h) * T * T;
                f32_to_bf16_rows(w.q, hd, hv.q, q_row, T, hd);
                f32_to_bf16_rows(w.do_, hd, dout + qo, q_row, T, hd);
                for (int q0 = 0; q0 < T; q0 += QB) {
                    const int rows = T - q0 < QB ? T - q0 : QB;
                    int k0, k1;
                    block_keys(q0, rows, spec->window, &k0, &k1);
                    const int nk = k1 - k0;
                    const float *S, *P;
                    if (probs) { /* the maps the forward kept; the scores read only under a soft-cap */
                        P = probs + map + (size_t)q0 * T;
                        S = scores ? scores + map + (size_t)q0 * T : P;
                        f32_to_bf16_rows(w.pb, nk, P + k0, T, rows, nk);
                    } else { /* the forward's block again, bit for bit, P's bf16 copy with it */
                        if (bf16_block_probs(w.S, w.P, T, w.pb, w.q + (size_t)q0 * hd, w.k, b, q0, rows, k0, k1, spec,
                                             softmax_row, 0)) {
                            failed = 1;
                            break;
                        }
                        S = w.S, P = w.P;
                    }
                    const uint16_t *do_b = w.do_ + (size_t)q0 * hd;
                    /* dV[k0..k1) += P^T dO */
                    int bad = gemm_bf16_task(1, 0, nk, hd, rows, w.pb, nk, do_b, hd, 1.0f, dvg + (size_t)k0 * kv_row,
                                             kv_row, NULL);
                    /* dP = dO v^T */
                    bad |= gemm_bf16_task(0, 1, rows, nk, hd, do_b, hd, w.v + (size_t)k0 * hd, hd, 0.0f, w.dS + k0, T,
                                          NULL);
                    if (bad) {
                        failed = 1;
                        break;
                    }
                    /* dS over the keys k0..k1, each row rounded to bf16 while it is in L1 */
                    for (int r = 0; r < rows; r++)
                        softmax_row_backward(w.dS + (size_t)r * T, P + (size_t)r * T, S + (size_t)r * T, T, k0, k1,
                                             spec_first_key(spec, b, q0 + r), q0 + r, spec->softcap, spec->scale,
                                             w.pb + (size_t)r * nk);
                    /* dQ = dS k (one block holds all of a query's keys: set); dK[k0..k1) += dS^T q */
                    bad = gemm_bf16_task(0, 0, rows, hd, nk, w.pb, nk, w.k + (size_t)k0 * hd, hd, 0.0f,
                                         dq + qo + (size_t)q0 * q_row, q_row, NULL);
                    bad |= gemm_bf16_task(1, 0, nk, hd, rows, w.pb, nk, w.q + (size_t)q0 * hd, hd, 1.0f,
                                          dkg + (size_t)k0 * kv_row, kv_row, NULL);
                    if (bad) {
                        failed = 1;
                        break;
                    }
                }
            }
        }
    return failed ? -1 : 0;
}

/* dS [rows, T] of a block over the keys k0..k1 from dP (in dS), P and S: a row at a time, or on
 * AVX-512 without a soft-cap the block's rows pass by pass */
static void softmax_backward_rows(softmax_row_backward_fn softmax_row_backward, float *dS, const float *P,
                                  const float *S, int T, int rows, int q0, int k0, int k1, const attention_spec *spec,
                                  int b) {
#if defined(__x86_64__)
    if (softmax_row_backward == softmax_row_backward_avx512 && spec->softcap <= 0.0f && rows <= SOFTMAX_BLOCK_ROWS) {
        int first[SOFTMAX_BLOCK_ROWS], last[SOFTMAX_BLOCK_ROWS];
        for (int r = 0; r < rows; r++) first[r] = spec_first_key(spec, b, q0 + r), last[r] = q0 + r;
        softmax_block_backward_avx512(dS, P, T, rows, k0, k1, first, last, spec->scale);
        return;
    }
#endif
    for (int r = 0; r < rows; r++)
        softmax_row_backward(dS + (size_t)r * T, P + (size_t)r * T, S + (size_t)r * T, T, k0, k1,
                             spec_first_key(spec, b, q0 + r), q0 + r, spec->softcap, spec->scale, NULL);
}

void attention_forward(float *out, float *scores, float *probs, const float *q, const float *k, const float *v,
                       int B, int T, const attention_spec *spec, float *scratch) {
    PROF_SCOPE("attention_forward");
    if (attention_bf16_products(spec) &&
        !attention_forward_bf16(out, scores, probs, q, k, v, B, T, spec, scratch))
        return;
    const int H = spec->n_heads, hd = spec->head_dim;
    const int q_row = H * hd;
    const softmax_row_fn softmax_row = pick_softmax_row();
    const size_t own_floats = attention_scratch_floats(T, hd);
    const int stream = spec->stream_maps && (scores || probs);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            float *own = scratch + (size_t)omp_get_thread_num() * own_floats;
            const block_products bp = products_for(spec, own + 3 * block_floats(T));
            const head_view hv = head_at(q, k, v, b, h, T, spec);
            float *oh = out + (size_t)b * T * q_row + (size_t)h * hd;
            const size_t map = ((size_t)b * H + h) * T * T;
            for (int q0 = 0; q0 < T; q0 += ATTN_QUERY_BLOCK) {
                const int rows = T - q0 < ATTN_QUERY_BLOCK ? T - q0 : ATTN_QUERY_BLOCK;
                int k0, k1;
                block_keys(q0, rows, spec->window, &k0, &k1);
                /* S and P: the kept maps' rows, or the thread's scratch (P over S in place; both
                 * there when the maps are streamed out) */
                float *S = scores && !stream ? scores + map + (size_t)q0 * T : own;
                float *P = probs && !stream ? probs + map + (size_t)q0 * T : stream ? own + block_floats(T) : S;
                float *S_out = stream && scores ? scores + map + (size_t)q0 * T : NULL,
                      *P_out = stream && probs ? probs + map + (size_t)q0 * T : NULL;
                if (!block_probs(&bp, S, P, &hv, q0, rows, T, spec, softmax_row, scores || probs, S_out, P_out)) {
                    if (S_out) copy_stream(S_out, S, (size_t)rows * T);
                    if (P_out) copy_stream(P_out, P, (size_t)rows * T);
                }
                /* O = P V */
                block_rows(&bp, oh + (size_t)q0 * q_row, q_row, P, T, hv.v, hv.kv_row, rows, q0, k0, k1, 0);
            }
        }
}

void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *scores,
                        const float *probs, const float *q, const float *k, const float *v, int B, int T,
                        const attention_spec *spec, float *scratch) {
    PROF_SCOPE("attention_backward");
    if (attention_bf16_products(spec) &&
        !attention_backward_bf16(dq, dk, dv, dout, scores, probs, q, k, v, B, T, spec, scratch))
        return;
    const int H = spec->n_heads, KV = spec->n_kv_heads, hd = spec->head_dim, group = H / KV;
    const int q_row = H * hd, kv_row = KV * hd;
    const softmax_row_fn softmax_row = pick_softmax_row();
    const softmax_row_backward_fn softmax_row_backward = pick_softmax_row_backward();
    const size_t blk = block_floats(T), own_floats = attention_scratch_floats(T, hd);
    /* dk and dv sum over query blocks and the group's heads. (Zeroing each task's rows inside
     * the task was slower than this pass before it: docs/performance.md, "Figures behind the code".) */
    const size_t n_kv = (size_t)B * T * kv_row; /* (not vec_zero: its profile scope would nest in this one) */
#pragma omp parallel for schedule(static) if(n_kv > OMP_MIN_WORK)
    for (size_t i = 0; i < n_kv; i++) dk[i] = 0.0f, dv[i] = 0.0f;
    /* one task per (batch row, kv head): it owns the dk/dv of that kv head, so no races; query
     * blocks and visible keys as in the forward pass */
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int g = 0; g < KV; g++) {
            float *own = scratch + (size_t)omp_get_thread_num() * own_floats;
            float *dS = own + 2 * blk;
            const block_products bp = products_for(spec, own + 3 * blk);
            float *dkg = dk + (size_t)b * T * kv_row + (size_t)g * hd;
            float *dvg = dv + (size_t)b * T * kv_row + (size_t)g * hd;
            for (int h = g * group; h < (g + 1) * group; h++) {
                const head_view hv = head_at(q, k, v, b, h, T, spec);
                const size_t qo = (size_t)b * T * q_row + (size_t)h * hd, map = ((size_t)b * H + h) * T * T;
                for (int q0 = 0; q0 < T; q0 += ATTN_QUERY_BLOCK) {
                    const int rows = T - q0 < ATTN_QUERY_BLOCK ? T - q0 : ATTN_QUERY_BLOCK;
                    int k0, k1;
                    block_keys(q0, rows, spec->window, &k0, &k1);
                    const float *S, *P;
                    if (probs) { /* the maps the forward kept (a hook may have rewritten them);
                                  * the scores are read only under a soft-cap */
                        P = probs + map + (size_t)q0 * T;
                        S = scores ? scores + map + (size_t)q0 * T : P;
                    } else { /* the forward's block again */
                        block_probs(&bp, own, own + blk, &hv, q0, rows, T, spec, softmax_row, 0, NULL, NULL);
                        S = own, P = own + blk;
                    }
                    const size_t qb = qo + (size_t)q0 * q_row;
                    /* dV += P^T dO */
                    block_cols(&bp, dvg, kv_row, P, T, dout + qb, q_row, rows, q0, k0, k1);
                    /* dP = dO V^T */
                    block_dots(&bp, dS, T, dout + qb, q_row, hv.v, kv_row, rows, q0, k0, k1, 1.0f);
                    softmax_backward_rows(softmax_row_backward, dS, P, S, T, rows, q0, k0, k1, spec, b);
                    /* dQ = dS K (one block holds all of a query's keys: set) */
                    block_rows(&bp, dq + qb, q_row, dS, T, hv.k, kv_row, rows, q0, k0, k1, 0);
                    /* dK += dS^T Q */
                    block_cols(&bp, dkg, kv_row, dS, T, q + qb, q_row, rows, q0, k0, k1);
                }
            }
        }
}
