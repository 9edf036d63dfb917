/* rope.c — rotary position embedding in the Hugging Face "rotate half" layout.
 * For head dimension i < hd/2 the pair is (x[i], x[i + hd/2]), rotated by angle pos * inv_freq[i]:
 *   y[i]        = x[i] cos - x[i+half] sin
 *   y[i+half]   = x[i+half] cos + x[i] sin
 * (llama2.c and Meta's original code rotate interleaved pairs (2i, 2i+1) instead; loaders
 * of such checkpoints permute the q/k projection rows so this one layout serves both.) */
#include "ops.h"
#include "util/profile.h"

/* one token's heads x [n_heads, hd] at the angles of the table rows cs, sn */
static void rotate_token(float *y, const float *x, const float *cs, const float *sn, int n_heads, int head_dim,
                         float sign) {
    int half = head_dim / 2;
    for (int h = 0; h < n_heads; h++, x += head_dim, y += head_dim)
        for (int i = 0; i < half; i++) {
            float a = x[i], b = x[i + half], s = sign * sn[i];
            y[i] = a * cs[i] - b * s;
            y[i + half] = b * cs[i] + a * s;
        }
}

static void rotate(float *out, const float *inp, const float *cos_tab, const float *sin_tab, int B, int T,
                   int n_heads, int head_dim, int pos0, const int *start, float sign) {
    int half = head_dim / 2;
#pragma omp parallel for schedule(static) if((size_t)B * T * n_heads * head_dim > OMP_MIN_WORK)
    for (int bt = 0; bt < B * T; bt++) {
        int pos = pos0 + padded_position(bt % T, start, bt / T);
        const size_t at = (size_t)bt * n_heads * head_dim;
        rotate_token(out + at, inp + at, cos_tab + (size_t)pos * half, sin_tab + (size_t)pos * half, n_heads, head_dim,
                     sign);
    }
}

void rope_forward_token(float *out, const float *inp, const float *cos_tab, const float *sin_tab, int n_heads,
                        int head_dim, int pos) {
    const size_t at = (size_t)pos * (head_dim / 2);
    rotate_token(out, inp, cos_tab + at, sin_tab + at, n_heads, head_dim, 1.0f);
}

void rope_forward(float *out, const float *inp, const float *cos_tab, const float *sin_tab, int B, int T,
                  int n_heads, int head_dim, int pos0, const int *start) {
    PROF_SCOPE("rope_forward");
    rotate(out, inp, cos_tab, sin_tab, B, T, n_heads, head_dim, pos0, start, 1.0f);
}

void rope_backward(float *dinp, const float *dout, const float *cos_tab, const float *sin_tab, int B, int T,
                   int n_heads, int head_dim, int pos0, const int *start) {
    PROF_SCOPE("rope_backward");
    /* the transpose of a rotation is the rotation by -angle; dinp is set */
    int half = head_dim / 2;
#pragma omp parallel for schedule(static) if((size_t)B * T * n_heads * head_dim > OMP_MIN_WORK)
    for (int bt = 0; bt < B * T; bt++) {
        int pos = pos0 + padded_position(bt % T, start, bt / T);
        const float *cs = cos_tab + (size_t)pos * half, *sn = sin_tab + (size_t)pos * half;
        for (int h = 0; h < n_heads; h++) {
            const float *dy = dout + ((size_t)bt * n_heads + h) * head_dim;
            float *dx = dinp + ((size_t)bt * n_heads + h) * head_dim;
            for (int i = 0; i < half; i++) {
                float a = dy[i], b = dy[i + half];
                dx[i] = a * cs[i] + b * sn[i];
                dx[i + half] = b * cs[i] - a * sn[i];
            }
        }
    }
}
