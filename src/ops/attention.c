/* attention.c — causal multi-head self-attention with GQA, soft-capped logits and an
 * optional sliding window. The full-sequence pass (training, scoring) and the KV-cache pass
 * (model/decode.c) share the visibility rule (attention_first_key) and the capped, masked
 * softmax of one row of scores (attention_softmax_row); they differ in how the dot products
 * are computed (GEMMs here, attention_row's or decode.c's own loops there), so their results
 * agree to float32 rounding, not bit for bit. */
#include <math.h>
#include <omp.h>

#include "fastmath.h"
#include "ops.h"
#include "simd_avx512.h"
#include "util/cpu.h"
#include "util/profile.h"

int attention_first_key(int pos, int window) { return (window > 0 && pos - window + 1 > 0) ? pos - window + 1 : 0; }

/* ---- one row of the softmax, forward and backward: portable C and AVX-512 ----------------------- */

static void softmax_row_c(float *s, float *p, int n, int first, int last, float softcap) {
    /* separate loops, each without branches and counting from 0 over the visible keys, so that
     * gcc and clang vectorize every one */
    float *vs = s + first, *vp = p + first;
    const int m = last + 1 - first;
    if (softcap > 0.0f)
        for (int j = 0; j < m; j++) vs[j] = softcap * tanh_inline(vs[j] / softcap);
    const float mx = max_lanes(vs, m);
    for (int j = 0; j < m; j++) vp[j] = exp_approx(vs[j] - mx);
    const float inv = 1.0f / dot_lanes(vp, NULL, m);
    for (int j = 0; j < m; j++) vp[j] *= inv;
    for (int j = 0; j < first; j++) s[j] = -INFINITY, p[j] = 0.0f; /* (p may be s: p last) */
    for (int j = last + 1; j < n; j++) s[j] = -INFINITY, p[j] = 0.0f;
}

/* One row of dP [n] -> d(scaled q.k) in place: softmax backward over the visible keys
 * first..last, then the soft-cap's (from the saved capped scores s), times the q.k scale;
 * 0 elsewhere. Branch-free loops from 0, so that they vectorize (as above). */
static void softmax_row_backward_c(float *d, const float *p, const float *s, int n, int first, int last, float cap,
                                   float scale) {
    float *vd = d + first;
    const float *vp = p + first, *vs = s + first;
    const int m = last + 1 - first;
    const float pdp = dot_lanes(vp, vd, m);
    for (int j = 0; j < m; j++) vd[j] = vp[j] * (vd[j] - pdp) * scale;
    if (cap > 0.0f)
        for (int j = 0; j < m; j++) vd[j] *= 1.0f - (vs[j] / cap) * (vs[j] / cap);
    for (int j = 0; j < first; j++) d[j] = 0.0f;
    for (int j = last + 1; j < n; j++) d[j] = 0.0f;
}

#if defined(__x86_64__)
/* The same rows 16 keys at a time, the last partial vector masked: a row of a short causal
 * attention (T = 64) is mostly tail, which the compiler's vector loops leave to scalar code. */
TLM_AVX512 static void softmax_row_avx512(float *s, float *p, int n, int first, int last, float softcap) {
    float *vs = s + first, *vp = p + first;
    const int m = last + 1 - first;
    if (softcap > 0.0f)
        for (int j = 0; j < m; j++) vs[j] = softcap * tanh_inline(vs[j] / softcap);
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (int j = 0; j < m; j += 16) /* (x > max ? x : max: a NaN score never wins, as in max_lanes) */
        vmax = _mm512_mask_max_ps(vmax, tail16(m - j), load16(vs + j, m - j), vmax);
    const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < m; j += 16) {
        const __m512 e = exp16(_mm512_sub_ps(load16(vs + j, m - j), mx));
        store16(vp + j, e, m - j);
        sum = _mm512_mask_add_ps(sum, tail16(m - j), sum, e);
    }
    const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
    for (int j = 0; j < m; j += 16) store16(vp + j, _mm512_mul_ps(load16(vp + j, m - j), inv), m - j);
    for (int j = 0; j < first; j++) s[j] = -INFINITY, p[j] = 0.0f;
    for (int j = last + 1; j < n; j++) s[j] = -INFINITY, p[j] = 0.0f;
}

TLM_AVX512 static void softmax_row_backward_avx512(float *d, const float *p, const float *s, int n, int first,
                                                   int last, float cap, float scale) {
    float *vd = d + first;
    const float *vp = p + first, *vs = s + first;
    const int m = last + 1 - first;
    __m512 acc = _mm512_setzero_ps();
    for (int j = 0; j < m; j += 16) acc = _mm512_fmadd_ps(load16(vp + j, m - j), load16(vd + j, m - j), acc);
    const __m512 pdp = _mm512_set1_ps(_mm512_reduce_add_ps(acc)), sc = _mm512_set1_ps(scale);
    const __m512 one = _mm512_set1_ps(1.0f), inv_cap = _mm512_set1_ps(cap > 0.0f ? 1.0f / cap : 0.0f);
    for (int j = 0; j < m; j += 16) {
        __m512 g = _mm512_mul_ps(_mm512_mul_ps(load16(vp + j, m - j), _mm512_sub_ps(load16(vd + j, m - j), pdp)), sc);
        if (cap > 0.0f) {
            const __m512 t = _mm512_mul_ps(load16(vs + j, m - j), inv_cap);
            g = _mm512_mul_ps(g, _mm512_fnmadd_ps(t, t, one));
        }
        store16(vd + j, g, m - j);
    }
    for (int j = 0; j < first; j++) d[j] = 0.0f;
    for (int j = last + 1; j < n; j++) d[j] = 0.0f;
}
#endif

typedef void (*softmax_row_fn)(float *, float *, int, int, int, float);
typedef void (*softmax_row_backward_fn)(float *, const float *, const float *, int, int, int, float, float);

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
    pick_softmax_row()(s, p, n, first, last, softcap);
}

static void attention_row_c(float *out, float *scores, const float *q, const float *keys, const float *values,
                            size_t kv_stride, int first_key, int n_keys, int head_dim, float scale, float softcap) {
    for (int j = first_key; j < n_keys; j++) {
        const float *kj = keys + (size_t)j * kv_stride;
        scores[j] = dot_lanes(q, kj, head_dim) * scale;
    }
    /* (in place: the probabilities overwrite the scores) */
    softmax_row_c(scores, scores, n_keys, first_key, n_keys - 1, softcap);
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
    softmax_row_avx512(scores, scores, n_keys, first_key, n_keys - 1, softcap);
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
 * masked), including those no GEMM touched. */
enum { ATTN_QUERY_BLOCK = 64 };

/* the keys [*k0, *k1) the queries [q0, q0 + rows) can see */
static void block_keys(int q0, int rows, int window, int *k0, int *k1) {
    *k0 = attention_first_key(q0, window);
    *k1 = q0 + rows;
}

void attention_forward(float *out, float *scores, float *probs, const float *q, const float *k, const float *v,
                       int B, int T, const attention_spec *spec) {
    PROF_SCOPE("attention_forward");
    const int H = spec->n_heads, KV = spec->n_kv_heads, hd = spec->head_dim, group = H / KV;
    const int q_row = H * hd, kv_row = KV * hd;
    const softmax_row_fn softmax_row = pick_softmax_row();
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *qh = q + (size_t)b * T * q_row + (size_t)h * hd;
            const float *kg = k + (size_t)b * T * kv_row + (size_t)(h / group) * hd;
            const float *vg = v + (size_t)b * T * kv_row + (size_t)(h / group) * hd;
            float *oh = out + (size_t)b * T * q_row + (size_t)h * hd;
            float *S = scores + ((size_t)b * H + h) * T * T, *P = probs + ((size_t)b * H + h) * T * T;
            for (int q0 = 0; q0 < T; q0 += ATTN_QUERY_BLOCK) {
                const int rows = T - q0 < ATTN_QUERY_BLOCK ? T - q0 : ATTN_QUERY_BLOCK;
                int k0, k1;
                block_keys(q0, rows, spec->window, &k0, &k1);
                float *Sb = S + (size_t)q0 * T + k0, *Pb = P + (size_t)q0 * T + k0;
                /* S = scale Q K^T */
                gemm(0, 1, rows, k1 - k0, hd, spec->scale, qh + (size_t)q0 * q_row, q_row, kg + (size_t)k0 * kv_row,
                     kv_row, 0.0f, Sb, T);
                for (int t = q0; t < q0 + rows; t++)
                    softmax_row(S + (size_t)t * T, P + (size_t)t * T, T, attention_first_key(t, spec->window), t,
                                spec->softcap);
                /* O = P V */
                gemm(0, 0, rows, hd, k1 - k0, 1.0f, Pb, T, vg + (size_t)k0 * kv_row, kv_row, 0.0f, oh + (size_t)q0 * q_row,
                     q_row);
            }
        }
}

void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *scores,
                        const float *probs, const float *q, const float *k, const float *v, int B, int T,
                        const attention_spec *spec, float *scratch) {
    PROF_SCOPE("attention_backward");
    const int H = spec->n_heads, KV = spec->n_kv_heads, hd = spec->head_dim, group = H / KV;
    const int q_row = H * hd, kv_row = KV * hd;
    const float cap = spec->softcap;
    const softmax_row_backward_fn softmax_row_backward = pick_softmax_row_backward();
    /* one task per (batch row, kv head): it owns the dk/dv of that kv head, so no races; query
     * blocks and visible keys as in the forward pass */
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int g = 0; g < KV; g++) {
            float *dS = scratch + (size_t)omp_get_thread_num() * T * T;
            const float *kg = k + (size_t)b * T * kv_row + (size_t)g * hd;
            const float *vg = v + (size_t)b * T * kv_row + (size_t)g * hd;
            float *dkg = dk + (size_t)b * T * kv_row + (size_t)g * hd;
            float *dvg = dv + (size_t)b * T * kv_row + (size_t)g * hd;
            for (int h = g * group; h < (g + 1) * group; h++) {
                const size_t qo = (size_t)b * T * q_row + (size_t)h * hd;
                const float *S = scores + ((size_t)b * H + h) * T * T, *P = probs + ((size_t)b * H + h) * T * T;
                for (int q0 = 0; q0 < T; q0 += ATTN_QUERY_BLOCK) {
                    const int rows = T - q0 < ATTN_QUERY_BLOCK ? T - q0 : ATTN_QUERY_BLOCK;
                    int k0, k1;
                    block_keys(q0, rows, spec->window, &k0, &k1);
                    const size_t qb = qo + (size_t)q0 * q_row, blk = (size_t)q0 * T + k0;
                    /* dV += P^T dO */
                    gemm(1, 0, k1 - k0, hd, rows, 1.0f, P + blk, T, dout + qb, q_row, 1.0f, dvg + (size_t)k0 * kv_row,
                         kv_row);
                    /* dP = dO V^T */
                    gemm(0, 1, rows, k1 - k0, hd, 1.0f, dout + qb, q_row, vg + (size_t)k0 * kv_row, kv_row, 0.0f,
                         dS + blk, T);
                    for (int t = q0; t < q0 + rows; t++)
                        softmax_row_backward(dS + (size_t)t * T, P + (size_t)t * T, S + (size_t)t * T, T,
                                             attention_first_key(t, spec->window), t, cap, spec->scale);
                    /* dQ += dS K */
                    gemm(0, 0, rows, hd, k1 - k0, 1.0f, dS + blk, T, kg + (size_t)k0 * kv_row, kv_row, 1.0f, dq + qb,
                         q_row);
                    /* dK += dS^T Q */
                    gemm(1, 0, k1 - k0, hd, rows, 1.0f, dS + blk, T, q + qb, q_row, 1.0f, dkg + (size_t)k0 * kv_row,
                         kv_row);
                }
            }
        }
}
