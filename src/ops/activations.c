/* activations.c — SiLU, tanh-GELU, gated units (SwiGLU/GeGLU), soft-capping, small vector ops. */
#include <math.h>

#include "ops.h"

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

float act_apply(activation act, float x) {
    if (act == ACT_SILU) return x / (1.0f + expf(-x));
    /* GPT-2 gelu_new / PyTorch gelu(approximate="tanh") */
    return 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
}

float act_grad(activation act, float x) {
    if (act == ACT_SILU) {
        float s = 1.0f / (1.0f + expf(-x));
        return s * (1.0f + x * (1.0f - s));
    }
    float u = GELU_K * (x + 0.044715f * x * x * x);
    float t = tanhf(u);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
}

void glu_forward(float *out, const float *gate, const float *up, size_t n, activation act) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = act_apply(act, gate[i]) * up[i];
}

void glu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up, size_t n,
                  activation act) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        dgate[i] += dout[i] * up[i] * act_grad(act, gate[i]);
        dup[i] += dout[i] * act_apply(act, gate[i]);
    }
}

void act_forward(float *out, const float *inp, size_t n, activation act) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = act_apply(act, inp[i]);
}

void act_backward(float *dinp, const float *dout, const float *inp, size_t n, activation act) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) dinp[i] += dout[i] * act_grad(act, inp[i]);
}

void softcap_forward(float *out, const float *inp, size_t n, float cap) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = cap * tanhf(inp[i] / cap);
}

void softcap_backward(float *dinp, const float *dout, const float *out, size_t n, float cap) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float t = out[i] / cap;
        dinp[i] += dout[i] * (1.0f - t * t);
    }
}

void vec_add(float *out, const float *a, const float *b, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void vec_acc(float *out, const float *a, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) out[i] += a[i];
}
