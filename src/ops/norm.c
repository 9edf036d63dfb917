/* norm.c — LayerNorm and RMSNorm (incl. Gemma's 1 + w), forward and backward.
 * Per-row statistics are accumulated in double: for wide rows a float sum drifts. */
#include <math.h>

#include "ops.h"

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                       const float *bias, int N, int C, float eps) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        double s = 0.0;
        for (int c = 0; c < C; c++) s += x[c];
        float m = (float)(s / C);
        double v = 0.0;
        for (int c = 0; c < C; c++) {
            double d = x[c] - m;
            v += d * d;
        }
        float r = (float)(1.0 / sqrt(v / C + (double)eps));
        float *y = out + (size_t)n * C;
        for (int c = 0; c < C; c++) y[c] = (x[c] - m) * r * weight[c] + (bias ? bias[c] : 0.0f);
        mean[n] = m;
        rstd[n] = r;
    }
}

void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                        const float *weight, const float *mean, const float *rstd, int N, int C) {
    /* dinp = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dout * weight */
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        float m = mean[n], r = rstd[n];
        double sum_g = 0.0, sum_gx = 0.0;
        for (int c = 0; c < C; c++) {
            float g = dy[c] * weight[c];
            sum_g += g;
            sum_gx += (double)g * ((x[c] - m) * r);
        }
        float mg = (float)(sum_g / C), mgx = (float)(sum_gx / C);
        float *dx = dinp + (size_t)n * C;
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * r;
            dx[c] += r * (dy[c] * weight[c] - mg - xhat * mgx);
        }
    }
    /* parameter gradients: a reduction over rows, parallel over columns (no races) */
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        double dw = 0.0, db = 0.0;
        for (int n = 0; n < N; n++) {
            float dy = dout[(size_t)n * C + c];
            dw += (double)dy * ((inp[(size_t)n * C + c] - mean[n]) * rstd[n]);
            db += dy;
        }
        if (dweight) dweight[c] += (float)dw;
        if (dbias) dbias[c] += (float)db;
    }
}

void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, float weight_offset, int N,
                     int C, float eps) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        double ss = 0.0;
        for (int c = 0; c < C; c++) ss += (double)x[c] * x[c];
        float r = (float)(1.0 / sqrt(ss / C + (double)eps));
        float *y = out + (size_t)n * C;
        for (int c = 0; c < C; c++) y[c] = x[c] * r * (weight_offset + weight[c]);
        rstd[n] = r;
    }
}

void rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                      float weight_offset, const float *rstd, int N, int C) {
    /* y = x r g: dx = r * (dy g - xhat * mean(dy g xhat)), xhat = x r */
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        float r = rstd[n];
        double s = 0.0;
        for (int c = 0; c < C; c++) s += (double)dy[c] * (weight_offset + weight[c]) * (x[c] * r);
        float m = (float)(s / C);
        float *dx = dinp + (size_t)n * C;
        for (int c = 0; c < C; c++) dx[c] += r * (dy[c] * (weight_offset + weight[c]) - x[c] * r * m);
    }
    if (!dweight) return;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        double dw = 0.0;
        for (int n = 0; n < N; n++) dw += (double)dout[(size_t)n * C + c] * (inp[(size_t)n * C + c] * rstd[n]);
        dweight[c] += (float)dw;
    }
}
