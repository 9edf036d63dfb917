/* loss.c — softmax cross-entropy over the vocabulary for next-token prediction. */
#include <math.h>

#include "ops.h"
#include "util/profile.h"

float crossentropy_forward(float *losses, float *probs, const float *logits, const int *targets, int N, int V,
                           int *n_counted) {
    PROF_SCOPE("crossentropy_forward");
    double total = 0.0;
    int count = 0;
#pragma omp parallel for schedule(static) reduction(+ : total, count)
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        float *p = probs + (size_t)n * V;
        float mx = z[0];
        for (int v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
        double s = 0.0;
        for (int v = 0; v < V; v++) {
            p[v] = expf(z[v] - mx);
            s += p[v];
        }
        float inv = (float)(1.0 / s);
        for (int v = 0; v < V; v++) p[v] *= inv;
        if (targets[n] >= 0) {
            /* -log softmax computed from the logits, not from a rounded probability */
            losses[n] = (float)(log(s) - (double)(z[targets[n]] - mx));
            total += losses[n];
            count++;
        } else {
            losses[n] = 0.0f;
        }
    }
    if (n_counted) *n_counted = count;
    return count ? (float)(total / count) : 0.0f;
}

void crossentropy_backward(float *dlogits, const float *probs, const int *targets, int N, int V, float dloss_mean,
                           int n_counted) {
    PROF_SCOPE("crossentropy_backward");
    if (n_counted <= 0) return;
    float scale = dloss_mean / (float)n_counted;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        if (targets[n] < 0) continue;
        const float *p = probs + (size_t)n * V;
        float *d = dlogits + (size_t)n * V;
        for (int v = 0; v < V; v++) d[v] += scale * (p[v] - (v == targets[n] ? 1.0f : 0.0f));
    }
}
