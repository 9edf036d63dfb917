/* norm.c — LayerNorm, RMSNorm (incl. Gemma's 1 + w) and DyT, forward and backward.
 * Statistics are float32 (as the reference implementations compute them), summed with
 * OpenMP SIMD reductions so that each row vectorizes (the clause allows reordering the float
 * sum; element-wise loops need no hint: -O3 vectorizes them, and an explicit `omp simd` there
 * is a request clang reports as failed, an error under -Werror, in sanitizer builds whose
 * per-element checks prevent vectorizing). Parameter gradients are reductions
 * over rows: they run parallel over blocks of columns, each block summing rows in order, so
 * the result does not depend on the thread count. */
#include <math.h>

#include "fastmath.h"
#include "ops.h"
#include "util/profile.h"

/* DyT's dalpha: column blocks of COL_BLOCK (or wider); the norms' weight gradients: each thread's
 * columns (thread_columns) in pieces of up to COL_PIECE, whose sums stay in L1 */
enum { COL_BLOCK = 64, COL_PIECE = 1024 };

static float row_sum(const float *x, int C) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int c = 0; c < C; c++) s += x[c];
    return s;
}

/* (noinline: one compiled body for the N-row forward and the decode step's callers, so that both
 * sum each row in the same order, bit for bit) */
__attribute__((noinline)) float layernorm_row(float *y, float *mean, const float *x, const float *weight,
                                              const float *bias, int C, float eps) {
    float m = row_sum(x, C) / C, v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
    float r = 1.0f / sqrtf(v / C + eps);
    if (bias) {
        for (int c = 0; c < C; c++) y[c] = (x[c] - m) * r * weight[c] + bias[c];
    } else {
        for (int c = 0; c < C; c++) y[c] = (x[c] - m) * r * weight[c];
    }
    *mean = m;
    return r;
}

void layernorm_forward_bf16(float *out, uint16_t *out16, float *mean, float *rstd, const float *inp,
                            const float *weight, const float *bias, int N, int C, float eps) {
    PROF_SCOPE("layernorm_forward");
#pragma omp parallel for schedule(static) if((size_t)N * C > OMP_MIN_WORK)
    for (int n = 0; n < N; n++) {
        rstd[n] = layernorm_row(out + (size_t)n * C, mean + n, inp + (size_t)n * C, weight, bias, C, eps);
        if (out16) f32_to_bf16_rows(out16 + (size_t)n * C, C, out + (size_t)n * C, C, 1, C);
    }
}

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                       const float *bias, int N, int C, float eps) {
    layernorm_forward_bf16(out, NULL, mean, rstd, inp, weight, bias, N, C, eps);
}

void layernorm_backward(float *dinp, const float *dadd, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean, const float *rstd, int N, int C) {
    PROF_SCOPE("layernorm_backward");
    /* dinp = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dout * weight */
#pragma omp parallel for schedule(static) if((size_t)N * C > OMP_MIN_WORK)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        const float m = mean[n], r = rstd[n];
        float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
        for (int c = 0; c < C; c++) {
            float g = dy[c] * weight[c];
            sum_g += g;
            sum_gx += g * ((x[c] - m) * r);
        }
        const float mg = sum_g / C, mgx = sum_gx / C;
        float *dx = dinp + (size_t)n * C;
        if (dadd) {
            const float *add = dadd + (size_t)n * C;
            for (int c = 0; c < C; c++) dx[c] = add[c] + r * (dy[c] * weight[c] - mg - (x[c] - m) * r * mgx);
        } else {
            for (int c = 0; c < C; c++) dx[c] = r * (dy[c] * weight[c] - mg - (x[c] - m) * r * mgx);
        }
    }
    if (!dweight && !dbias) return;
#pragma omp parallel
    {
        int c_begin, c_end;
        thread_columns(C, &c_begin, &c_end);
        for (int c0 = c_begin; c0 < c_end; c0 += COL_PIECE) {
            const int w = c_end - c0 < COL_PIECE ? c_end - c0 : COL_PIECE;
            /* the piece's sums in locals (through the output pointers, which may alias the inputs,
             * the compiler would load and store them per row); the same additions in the same order */
            float gw[COL_PIECE], gb[COL_PIECE];
            for (int j = 0; j < w; j++) gw[j] = dweight ? dweight[c0 + j] : 0.0f, gb[j] = dbias ? dbias[c0 + j] : 0.0f;
            for (int n = 0; n < N; n++) {
                const float *x = inp + (size_t)n * C + c0, *dy = dout + (size_t)n * C + c0;
                const float m = mean[n], r = rstd[n];
                for (int j = 0; j < w; j++) {
                    gw[j] += dy[j] * (x[j] - m) * r;
                    gb[j] += dy[j];
                }
            }
            for (int j = 0; j < w; j++) {
                if (dweight) dweight[c0 + j] = gw[j];
                if (dbias) dbias[c0 + j] = gb[j];
            }
        }
    }
}

__attribute__((noinline)) float rmsnorm_row(float *y, const float *x, const float *weight, float weight_offset, int C,
                                            float eps) {
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int c = 0; c < C; c++) ss += x[c] * x[c];
    float r = 1.0f / sqrtf(ss / C + eps);
    if (weight) {
        for (int c = 0; c < C; c++) y[c] = x[c] * r * (weight_offset + weight[c]);
    } else { /* (no weight: Gemma 4's v norm) */
        for (int c = 0; c < C; c++) y[c] = x[c] * r;
    }
    return r;
}

void rmsnorm_forward_bf16(float *out, uint16_t *out16, float *rstd, const float *inp, const float *weight,
                          float weight_offset, int N, int C, float eps) {
    PROF_SCOPE("rmsnorm_forward");
#pragma omp parallel for schedule(static) if((size_t)N * C > OMP_MIN_WORK)
    for (int n = 0; n < N; n++) {
        rstd[n] = rmsnorm_row(out + (size_t)n * C, inp + (size_t)n * C, weight, weight_offset, C, eps);
        if (out16) f32_to_bf16_rows(out16 + (size_t)n * C, C, out + (size_t)n * C, C, 1, C);
    }
}

void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, float weight_offset, int N,
                     int C, float eps) {
    rmsnorm_forward_bf16(out, NULL, rstd, inp, weight, weight_offset, N, C, eps);
}

void rmsnorm_backward(float *dinp, const float *dadd, float *dweight, const float *dout, const float *inp,
                      const float *weight, float weight_offset, const float *rstd, int N, int C) {
    PROF_SCOPE("rmsnorm_backward");
    /* y = x r g: dx = r * (dy g - xhat * mean(dy g xhat)), xhat = x r */
#pragma omp parallel for schedule(static) if((size_t)N * C > OMP_MIN_WORK)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        const float r = rstd[n];
        float s = 0.0f;
        float *dx = dinp + (size_t)n * C;
        const float *add = dadd ? dadd + (size_t)n * C : NULL;
        if (!weight) { /* (no weight: g = 1) */
#pragma omp simd reduction(+ : s)
            for (int c = 0; c < C; c++) s += dy[c] * (x[c] * r);
            const float m = s / C;
            for (int c = 0; c < C; c++) dx[c] = (add ? add[c] : 0.0f) + r * (dy[c] - x[c] * r * m);
            continue;
        }
#pragma omp simd reduction(+ : s)
        for (int c = 0; c < C; c++) s += dy[c] * (weight_offset + weight[c]) * (x[c] * r);
        const float m = s / C;
        if (add) {
            for (int c = 0; c < C; c++) dx[c] = add[c] + r * (dy[c] * (weight_offset + weight[c]) - x[c] * r * m);
        } else {
            for (int c = 0; c < C; c++) dx[c] = r * (dy[c] * (weight_offset + weight[c]) - x[c] * r * m);
        }
    }
    if (!dweight || !weight) return;
#pragma omp parallel
    {
        int c_begin, c_end;
        thread_columns(C, &c_begin, &c_end);
        for (int c0 = c_begin; c0 < c_end; c0 += COL_PIECE) {
            const int w = c_end - c0 < COL_PIECE ? c_end - c0 : COL_PIECE;
            float gw[COL_PIECE]; /* (in locals: as in layernorm_backward) */
            for (int j = 0; j < w; j++) gw[j] = dweight[c0 + j];
            for (int n = 0; n < N; n++) {
                const float *x = inp + (size_t)n * C + c0, *dy = dout + (size_t)n * C + c0;
                const float r = rstd[n];
                for (int j = 0; j < w; j++) gw[j] += dy[j] * x[j] * r;
            }
            for (int j = 0; j < w; j++) dweight[c0 + j] = gw[j];
        }
    }
}

/* ---- DyT: y = g * tanh(a x) + b, no statistics ------------------------------------------------ */

void dyt_row(float *y, const float *x, float alpha, const float *weight, const float *bias, int C) {
    if (bias) {
        for (int c = 0; c < C; c++) y[c] = weight[c] * tanh_inline(alpha * x[c]) + bias[c];
    } else {
        for (int c = 0; c < C; c++) y[c] = weight[c] * tanh_inline(alpha * x[c]);
    }
}

void dyt_forward(float *out, const float *inp, const float *alpha, const float *weight, const float *bias, int N,
                 int C) {
    PROF_SCOPE("dyt_forward");
    const float a = alpha[0];
#pragma omp parallel for schedule(static) if((size_t)N * C > OMP_MIN_WORK)
    for (int n = 0; n < N; n++) dyt_row(out + (size_t)n * C, inp + (size_t)n * C, a, weight, bias, C);
}

/* dalpha is one sum over all N*C elements: each column block sums its share over the rows in
 * order into part[block], and the blocks are added in order, so the result does not depend on
 * the thread count. At most DYT_BLOCKS blocks (wider rows get wider blocks). */
enum { DYT_BLOCKS = 256 };

void dyt_backward(float *dinp, const float *dadd, float *dalpha, float *dweight, float *dbias, const float *dout,
                  const float *inp, const float *alpha, const float *weight, int N, int C) {
    PROF_SCOPE("dyt_backward");
    const float a = alpha[0];
    if (dinp) {
#pragma omp parallel for schedule(static) if((size_t)N * C > OMP_MIN_WORK)
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
            float *dx = dinp + (size_t)n * C;
            const float *add = dadd ? dadd + (size_t)n * C : NULL;
            for (int c = 0; c < C; c++) {
                const float t = tanh_inline(a * x[c]);
                dx[c] = (add ? add[c] : 0.0f) + dy[c] * weight[c] * a * (1.0f - t * t);
            }
        }
    }
    int width = COL_BLOCK;
    if ((C + width - 1) / width > DYT_BLOCKS) width = (C + DYT_BLOCKS - 1) / DYT_BLOCKS;
    const int nb = (C + width - 1) / width;
    double part[DYT_BLOCKS];
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nb; blk++) {
        const int c0 = blk * width, c1 = c0 + width < C ? c0 + width : C;
        double s = 0.0;
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
            float sa = 0.0f;
            for (int c = c0; c < c1; c++) {
                const float t = tanh_inline(a * x[c]);
                if (dweight) dweight[c] += dy[c] * t;
                if (dbias) dbias[c] += dy[c];
                sa += dy[c] * weight[c] * x[c] * (1.0f - t * t);
            }
            s += sa;
        }
        part[blk] = s;
    }
    if (dalpha) {
        double s = 0.0;
        for (int blk = 0; blk < nb; blk++) s += part[blk];
        dalpha[0] += (float)s;
    }
}
