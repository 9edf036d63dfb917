/* activations.c — SiLU, tanh-GELU, gated units (SwiGLU/GeGLU), soft-capping, small vector ops. */
#include <math.h>

#include "fastmath.h"
#include "ops.h"
#include "util/profile.h"

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

float tanh_approx(float x) { return tanh_inline(x); }

/* SiLU and tanh-GELU as x * sigmoid(z): 0.5 x (1 + tanh(u)) = x / (1 + e^{-2u}), one exp and
 * one division, and no cancellation in 1 + tanh(u) for negative x. A NaN x stays NaN through
 * the factor x, so the exp needs no NaN test. */
static inline float silu(float x) { return x / (1.0f + exp_clamped(-x)); }
static inline float silu_grad(float x) {
    float s = 1.0f / (1.0f + exp_clamped(-x));
    return s * (1.0f + x * (1.0f - s));
}
static inline float gelu(float x) { return x / (1.0f + exp_clamped(-2.0f * GELU_K * (x + 0.044715f * x * x * x))); }
/* d/dx [x s(2u)] = s + 2 x s (1 - s) u'(x), u' = K (1 + 3 * 0.044715 x^2) */
static inline float gelu_grad(float x) {
    float s = 1.0f / (1.0f + exp_clamped(-2.0f * GELU_K * (x + 0.044715f * x * x * x)));
    return s + 2.0f * x * s * (1.0f - s) * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
}

float act_apply(activation act, float x) { return act == ACT_SILU ? silu(x) : gelu(x); }
float act_grad(activation act, float x) { return act == ACT_SILU ? silu_grad(x) : gelu_grad(x); }

/* Each loop below is written once per activation so that the compiler vectorizes it
 * (a call through `act` inside the loop would not). No `simd` clause: -O3 vectorizes these
 * element-wise loops by itself (checked with gcc -fopt-info-vec and clang -Rpass), and an
 * explicit request is one clang must report as failed (-Wpass-failed, an error under
 * -Werror) in sanitizer builds, whose per-element checks make vectorizing impossible. */
#define FOR_ACT(act, BODY_SILU, BODY_GELU)                                                                             \
    do {                                                                                                               \
        if ((act) == ACT_SILU) {                                                                                       \
            _Pragma("omp parallel for schedule(static) if(n > OMP_MIN_WORK)") for (size_t i = 0; i < n; i++) BODY_SILU;                    \
        } else {                                                                                                       \
            _Pragma("omp parallel for schedule(static) if(n > OMP_MIN_WORK)") for (size_t i = 0; i < n; i++) BODY_GELU;                    \
        }                                                                                                              \
    } while (0)

void glu_forward(float *out, const float *gate, const float *up, size_t n, activation act) {
    PROF_SCOPE("glu_forward");
    FOR_ACT(act, out[i] = silu(gate[i]) * up[i], out[i] = gelu(gate[i]) * up[i]);
}

void glu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up, size_t n,
                  activation act) {
    PROF_SCOPE("glu_backward");
    FOR_ACT(act, (dgate[i] = dout[i] * up[i] * silu_grad(gate[i]), dup[i] = dout[i] * silu(gate[i])),
            (dgate[i] = dout[i] * up[i] * gelu_grad(gate[i]), dup[i] = dout[i] * gelu(gate[i])));
}

void act_forward(float *out, const float *inp, size_t n, activation act) {
    PROF_SCOPE("act_forward");
    FOR_ACT(act, out[i] = silu(inp[i]), out[i] = gelu(inp[i]));
}

void act_backward(float *dinp, const float *dout, const float *inp, size_t n, activation act) {
    PROF_SCOPE("act_backward");
    FOR_ACT(act, dinp[i] = dout[i] * silu_grad(inp[i]), dinp[i] = dout[i] * gelu_grad(inp[i]));
}

void softcap_forward(float *out, const float *inp, size_t n, float cap) {
    PROF_SCOPE("softcap_forward");
#pragma omp parallel for schedule(static) if(n > OMP_MIN_WORK)
    for (size_t i = 0; i < n; i++) out[i] = cap * tanh_inline(inp[i] / cap);
}

void softcap_backward(float *dinp, const float *dout, const float *out, size_t n, float cap) {
    PROF_SCOPE("softcap_backward");
#pragma omp parallel for schedule(static) if(n > OMP_MIN_WORK)
    for (size_t i = 0; i < n; i++) {
        float t = out[i] / cap;
        dinp[i] += dout[i] * (1.0f - t * t);
    }
}

void vec_add(float *out, const float *a, const float *b, size_t n) {
    PROF_SCOPE("vec_add");
#pragma omp parallel for schedule(static) if(n > OMP_MIN_WORK)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void vec_zero(float *out, size_t n) {
    PROF_SCOPE("vec_zero");
#pragma omp parallel for schedule(static) if(n > OMP_MIN_WORK)
    for (size_t i = 0; i < n; i++) out[i] = 0.0f;
}

void vec_acc(float *out, const float *a, size_t n) {
    PROF_SCOPE("vec_acc");
#pragma omp parallel for schedule(static) if(n > OMP_MIN_WORK)
    for (size_t i = 0; i < n; i++) out[i] += a[i];
}
