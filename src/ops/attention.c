/* attention.c — causal multi-head self-attention with GQA, soft-capped logits and an
 * optional sliding window. One inner routine, attention_row(), serves both the full-sequence
 * forward (training, scoring) and incremental decoding with a KV cache, so both compute the
 * same numbers in the same order. */
#include <math.h>
#include <omp.h>

#include "ops.h"

void attention_row(float *out, float *scores, float *probs, const float *q, const float *keys,
                   const float *values, size_t kv_stride, int first_key, int n_keys, int head_dim, float scale,
                   float softcap) {
    float mx = -INFINITY;
    for (int j = first_key; j < n_keys; j++) {
        const float *kj = keys + (size_t)j * kv_stride;
        float s = 0.0f;
        for (int i = 0; i < head_dim; i++) s += q[i] * kj[i];
        s *= scale;
        if (softcap > 0.0f) s = softcap * tanhf(s / softcap);
        scores[j] = s;
        mx = s > mx ? s : mx;
    }
    float sum = 0.0f;
    for (int j = first_key; j < n_keys; j++) {
        probs[j] = expf(scores[j] - mx);
        sum += probs[j];
    }
    float inv = 1.0f / sum;
    for (int i = 0; i < head_dim; i++) out[i] = 0.0f;
    for (int j = first_key; j < n_keys; j++) {
        probs[j] *= inv;
        const float *vj = values + (size_t)j * kv_stride;
        for (int i = 0; i < head_dim; i++) out[i] += probs[j] * vj[i];
    }
}

static int first_visible(int t, int window) { return (window > 0 && t - window + 1 > 0) ? t - window + 1 : 0; }

void attention_forward(float *out, float *scores, float *probs, const float *q, const float *k, const float *v,
                       int B, int T, const attention_spec *spec) {
    const int H = spec->n_heads, KV = spec->n_kv_heads, hd = spec->head_dim, group = H / KV;
    const size_t q_row = (size_t)H * hd, kv_row = (size_t)KV * hd;
#pragma omp parallel for collapse(3) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *qt = q + ((size_t)b * T + t) * q_row + (size_t)h * hd;
                const float *kb = k + (size_t)b * T * kv_row + (size_t)(h / group) * hd;
                const float *vb = v + (size_t)b * T * kv_row + (size_t)(h / group) * hd;
                float *s = scores + (((size_t)b * H + h) * T + t) * T;
                float *p = probs + (((size_t)b * H + h) * T + t) * T;
                int first = first_visible(t, spec->window);
                attention_row(out + ((size_t)b * T + t) * q_row + (size_t)h * hd, s, p, qt, kb, vb, kv_row, first,
                              t + 1, hd, spec->scale, spec->softcap);
                for (int j = 0; j < T; j++)
                    if (j < first || j > t) {
                        s[j] = -INFINITY;
                        p[j] = 0.0f;
                    }
            }
}

void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *scores,
                        const float *probs, const float *q, const float *k, const float *v, int B, int T,
                        const attention_spec *spec, float *scratch) {
    const int H = spec->n_heads, KV = spec->n_kv_heads, hd = spec->head_dim, group = H / KV;
    const size_t q_row = (size_t)H * hd, kv_row = (size_t)KV * hd;
    const float cap = spec->softcap;
    /* one task per (batch row, kv head): it owns the dk/dv of that kv head, so no races */
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int g = 0; g < KV; g++) {
            float *dp = scratch + (size_t)omp_get_thread_num() * T;
            const float *kb = k + (size_t)b * T * kv_row + (size_t)g * hd;
            const float *vb = v + (size_t)b * T * kv_row + (size_t)g * hd;
            float *dkb = dk + (size_t)b * T * kv_row + (size_t)g * hd;
            float *dvb = dv + (size_t)b * T * kv_row + (size_t)g * hd;
            for (int h = g * group; h < (g + 1) * group; h++)
                for (int t = 0; t < T; t++) {
                    size_t qo = ((size_t)b * T + t) * q_row + (size_t)h * hd;
                    const float *qt = q + qo, *dot = dout + qo;
                    float *dqt = dq + qo;
                    const float *s = scores + (((size_t)b * H + h) * T + t) * T;
                    const float *p = probs + (((size_t)b * H + h) * T + t) * T;
                    int first = first_visible(t, spec->window);
                    float pdp = 0.0f;
                    for (int j = first; j <= t; j++) {
                        const float *vj = vb + (size_t)j * kv_row;
                        float d = 0.0f;
                        for (int i = 0; i < hd; i++) d += dot[i] * vj[i];
                        dp[j] = d;
                        pdp += p[j] * d;
                    }
                    for (int j = first; j <= t; j++) {
                        float ds = p[j] * (dp[j] - pdp); /* softmax backward */
                        if (cap > 0.0f) {
                            float c = s[j] / cap;
                            ds *= 1.0f - c * c; /* soft-cap backward, from the saved capped score */
                        }
                        ds *= spec->scale;
                        const float *kj = kb + (size_t)j * kv_row;
                        float *dkj = dkb + (size_t)j * kv_row, *dvj = dvb + (size_t)j * kv_row;
                        for (int i = 0; i < hd; i++) {
                            dqt[i] += ds * kj[i];
                            dkj[i] += ds * qt[i];
                            dvj[i] += p[j] * dot[i];
                        }
                    }
                }
        }
}
