/* loss.c — softmax cross-entropy over the vocabulary for next-token prediction, with the
 * optional z-loss z * logsumexp(logits)^2 (PaLM; Wortsman et al. 2023) fused into the same
 * passes: lse is a by-product of the softmax, and d lse / d logits = probs. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fastmath.h"
#include "ops.h"
#include "simd_avx512.h"
#include "util/cpu.h"
#include "util/f16.h"
#include "util/profile.h"

/* One row's softmax p [V] of logits z, its exp-sum s and max mx (lse = mx + log s). The portable
 * loops vectorize to the default build's SSE2 only; the AVX-512 form takes 16 lanes with
 * simd_avx512.h's exp16 (the same polynomial, fused multiply-adds: values within float rounding of
 * the portable ones). At a GPT-2 head (50304 columns) the loss is a visible part of a bf16 step (docs/performance.md,
 * "Figures behind the code"). */
static double vocab_softmax_c(float *p, const float *z, int V, float *mx_out) {
    const float mx = max_lanes(z, V);
    for (int v = 0; v < V; v++) p[v] = exp_approx(z[v] - mx);
    const double s = dot_lanes(p, NULL, V);
    const float inv = (float)(1.0 / s);
    for (int v = 0; v < V; v++) p[v] *= inv;
    *mx_out = mx;
    return s;
}

#if defined(__x86_64__)
TLM_AVX512 static double vocab_softmax_avx512(float *p, const float *z, int V, float *mx_out) {
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (int v = 0; v < V; v += 16) /* (x > max ? x : max: a NaN logit never wins, as in max_lanes) */
        vmax = _mm512_mask_max_ps(vmax, tail16(V - v), load16(z + v, V - v), vmax);
    const float mx = _mm512_reduce_max_ps(vmax);
    const __m512 vmx = _mm512_set1_ps(mx);
    __m512 sum = _mm512_setzero_ps();
    for (int v = 0; v < V; v += 16) {
        const __m512 e = _mm512_maskz_mov_ps(tail16(V - v), exp16(_mm512_sub_ps(load16(z + v, V - v), vmx)));
        store16(p + v, e, V - v);
        sum = _mm512_add_ps(sum, e);
    }
    const double s = _mm512_reduce_add_ps(sum);
    const __m512 inv = _mm512_set1_ps((float)(1.0 / s));
    for (int v = 0; v < V; v += 16) store16(p + v, _mm512_mul_ps(load16(p + v, V - v), inv), V - v);
    *mx_out = mx;
    return s;
}

/* d [V] (into: =, else +=) scale (k p - onehot(target)) */
TLM_AVX512 static void loss_grad_row_avx512(float *d, const float *p, int V, int target, float scale, float k,
                                            int into) {
    const __m512 sk = _mm512_set1_ps(scale * k);
    for (int v = 0; v < V; v += 16) {
        const __m512 g = _mm512_mul_ps(sk, load16(p + v, V - v));
        store16(d + v, into ? g : _mm512_add_ps(g, load16(d + v, V - v)), V - v);
    }
    d[target] -= scale;
}

/* the same row written as bf16 only (into): the bits of loss_grad_row_avx512's f32 values rounded */
TLM_AVX512 static void loss_grad_row_bf16_avx512(uint16_t *d16, const float *p, int V, int target, float scale, float k) {
    const __m512 sk = _mm512_set1_ps(scale * k);
    int v = 0;
    for (; v + 16 <= V; v += 16)
        _mm256_storeu_si256((__m256i *)(d16 + v), bf16_round16(_mm512_mul_ps(sk, _mm512_loadu_ps(p + v))));
    if (v < V)
        _mm256_mask_storeu_epi16(d16 + v, tail16(V - v), bf16_round16(_mm512_mul_ps(sk, load16(p + v, V - v))));
    d16[target] = tlm_f32_to_bf16(scale * k * p[target] - scale);
}
#endif

float crossentropy_forward(float *losses, float *lse, float *probs, const float *logits, const int *targets, int N,
                           int V, int *n_counted, float *lse_sq_mean) {
    PROF_SCOPE("crossentropy_forward");
    double total = 0.0, total_sq = 0.0;
    int count = 0;
    double (*vocab_softmax)(float *, const float *, int, float *) = vocab_softmax_c;
#if defined(__x86_64__)
    if (tlm_cpu_isa() == TLM_ISA_AVX512) vocab_softmax = vocab_softmax_avx512;
#endif
#pragma omp parallel for schedule(static) reduction(+ : total, total_sq, count)
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        float *p = probs + (size_t)n * V;
        /* vectorized passes: max and sum in 16 float lanes, exp inline (NaN in, NaN out, so a
         * NaN logit still gives a NaN loss); libm's expf and a serial double sum were ten times
         * slower (docs/performance.md, "Figures behind the code") */
        float mx;
        const double s = vocab_softmax(p, z, V, &mx);
        const double row_lse = (double)mx + log(s);
        if (lse) lse[n] = (float)row_lse;
        if (targets[n] >= 0) {
            total_sq += row_lse * row_lse;
            /* -log softmax computed from the logits, not from a rounded probability */
            losses[n] = (float)(log(s) - (double)(z[targets[n]] - mx));
            total += losses[n];
            count++;
        } else {
            losses[n] = 0.0f;
        }
    }
    if (n_counted) *n_counted = count;
    if (lse_sq_mean) *lse_sq_mean = count ? (float)(total_sq / count) : 0.0f;
    return count ? (float)(total / count) : 0.0f;
}

/* The gradient rows, one mechanism for the three forms: added into dlogits (into = 0), set there
 * (into = 1), or set as bf16 into dlogits16 (dlogits NULL): the bf16 rounding of the set form's
 * values, from the same arithmetic in each kernel */
static void backward(int into, float *dlogits, uint16_t *dlogits16, const float *probs, const float *lse,
                     const int *targets, int N, int V, float dloss_mean, int n_counted, float z) {
    PROF_SCOPE("crossentropy_backward");
    if (n_counted <= 0) {
        if (dlogits16)
            memset(dlogits16, 0, sizeof(uint16_t) * (size_t)N * V);
        else if (into)
            vec_zero(dlogits, (size_t)N * V);
        return;
    }
    float scale = dloss_mean / (float)n_counted;
    int avx512 = 0;
#if defined(__x86_64__)
    avx512 = tlm_cpu_isa() == TLM_ISA_AVX512;
#endif
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *p = probs + (size_t)n * V;
        float *d = dlogits16 ? NULL : dlogits + (size_t)n * V;
        uint16_t *d16 = dlogits16 ? dlogits16 + (size_t)n * V : NULL;
        if (targets[n] < 0) { /* (no loss at this row) */
            if (d16)
                memset(d16, 0, sizeof(uint16_t) * V);
            else if (into)
                memset(d, 0, sizeof(float) * V);
            continue;
        }
        const float k = z != 0.0f ? 1.0f + 2.0f * z * lse[n] : 1.0f;
#if defined(__x86_64__)
        if (avx512) {
            if (d16)
                loss_grad_row_bf16_avx512(d16, p, V, targets[n], scale, k);
            else
                loss_grad_row_avx512(d, p, V, targets[n], scale, k, into);
            continue;
        }
#endif
        /* the portable loop accumulates scale (k p - onehot) (d/dz_v [z lse^2] = 2 z lse p_v; k = 1
         * without the z-loss, and 1 * p is p exactly), into 0 for the set forms */
        if (into && !d16) memset(d, 0, sizeof(float) * V);
        for (int v = 0; v < V; v++) {
            const float g = scale * (k * p[v] - (v == targets[n] ? 1.0f : 0.0f));
            if (d16)
                d16[v] = tlm_f32_to_bf16(0.0f + g);
            else
                d[v] += g;
        }
    }
}

void crossentropy_backward(float *dlogits, const float *probs, const float *lse, const int *targets, int N, int V,
                           float dloss_mean, int n_counted, float z) {
    backward(0, dlogits, NULL, probs, lse, targets, N, V, dloss_mean, n_counted, z);
}

void crossentropy_backward_into(float *dlogits, const float *probs, const float *lse, const int *targets, int N,
                                int V, float dloss_mean, int n_counted, float z) {
    backward(1, dlogits, NULL, probs, lse, targets, N, V, dloss_mean, n_counted, z);
}

void crossentropy_backward_bf16(uint16_t *dlogits16, const float *probs, const float *lse, const int *targets, int N,
                                int V, float dloss_mean, int n_counted, float z) {
    backward(1, NULL, dlogits16, probs, lse, targets, N, V, dloss_mean, n_counted, z);
}
