/* lesson15.c — "build a small model to understand large models", lesson 15 (residual
 * connections, LayerNorm vs RMSNorm, soft-capping, depth), made runnable: every number
 * below is produced by the same kernels the model uses (ops/), then compared with the
 * value the lesson states, at the precision the lesson states it. */
#include "lesson15.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "ops/ops.h"
#include "util/error.h"
#include "model/context.h"

typedef struct {
    lesson_check *out;
    int n, max;
} checks;

static void fmt_vec(char *buf, size_t size, const float *v, int n, int digits) {
    size_t k = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < n && k < size; i++) k += (size_t)snprintf(buf + k, size - k, "%s%.*f", i ? ", " : "", digits, v[i]);
    if (k < size) snprintf(buf + k, size - k, "]");
}

/* records a check: computed v[0..n) against stated s[0..n) within tol */
static void add(checks *c, const char *what, const float *v, const float *s, int n, double tol, int digits,
                const char *stated) {
    if (c->n >= c->max) return;
    lesson_check *k = &c->out[c->n++];
    snprintf(k->what, sizeof k->what, "%s", what);
    fmt_vec(k->computed, sizeof k->computed, v, n, digits);
    snprintf(k->stated, sizeof k->stated, "%s", stated);
    k->ok = 1;
    for (int i = 0; i < n; i++)
        if (!(fabs((double)v[i] - s[i]) <= tol)) k->ok = 0;
}

static void rms(float *y, const float *x, int n) {
    float ones[16], rstd;
    for (int i = 0; i < n; i++) ones[i] = 1.0f;
    rmsnorm_forward(y, &rstd, x, ones, 0.0f, 1, n, 1e-5f);
}

static void layer(float *y, const float *x, int n) {
    float ones[16], mean, rstd;
    for (int i = 0; i < n; i++) ones[i] = 1.0f;
    layernorm_forward(y, &mean, &rstd, x, ones, NULL, 1, n, 1e-5f);
}

/* y = x + F(x) with F a linear layer of weight gain * I; returns y and dy/dx (per unit dy) */
static void residual_linear(float *y, float *dx, const float *x, float gain, int n) {
    float w[16 * 16] = {0}, f[16], dy[16];
    for (int i = 0; i < n; i++) w[i * n + i] = gain, dy[i] = 1.0f, dx[i] = 0.0f;
    matmul_forward(f, x, w, NULL, 1, n, n);
    vec_add(y, x, f, (size_t)n);
    vec_acc(dx, dy, (size_t)n);                                 /* the identity path */
    matmul_backward(dx, NULL, NULL, dy, x, w, 1, n, n);         /* the F path */
}

/* |dL/dx| / |dL/dy| through `depth` layers whose Jacobian is gain * I, plus I when residual
 * (lesson15.h) */
double lesson_chain_gradient(float gain, int depth, int residual) {
    enum { D = 8 };
    float w[D * D] = {0}, g[D], prev[D];
    for (int i = 0; i < D; i++) w[i * D + i] = gain, g[i] = 1.0f;
    for (int l = 0; l < depth; l++) {
        memcpy(prev, g, sizeof g);
        if (residual)
            memcpy(g, prev, sizeof g);
        else
            memset(g, 0, sizeof g);
        matmul_backward(g, NULL, NULL, prev, prev /* unused without dweight */, w, 1, D, D);
    }
    double a = 0;
    for (int i = 0; i < D; i++) a += (double)g[i] * g[i];
    return sqrt(a / D);
}

/* a one-block model at the lesson's default size: [1,3,64] in, [1,3,64] out, finite dx */
static int block_shapes(checks *c) {
    tlm_config cfg;
    config_defaults(&cfg);
    cfg.vocab_size = 32, cfg.d_model = 64, cfg.n_layers = 1, cfg.n_heads = 2, cfg.n_kv_heads = 2;
    cfg.head_dim = 32, cfg.d_ff = 128, cfg.max_seq = 16;
    if (config_validate(&cfg, "lesson15")) return -1;
    tlm_model *m = model_create(&cfg);
    if (!m) return -1;
    model_init_weights(m, 15);
    int tokens[3] = {1, 5, 9}, targets[3] = {5, 9, 2};
    float loss;
    if (model_forward(m, tokens, targets, 1, 3, &loss) || model_backward(m, 1.0f)) {
        model_free(m);
        return -1;
    }
    /* the block's input is the residual stream after the embedding, its output after the FFN */
    const float *dx = m->ctx->acts.dres;
    int finite = 1;
    double norm = 0;
    for (int i = 0; i < 3 * 64; i++) finite &= isfinite(dx[i]), norm += (double)dx[i] * dx[i];
    float v[3] = {(float)m->ctx->acts.B, (float)m->ctx->acts.T, (float)cfg.d_model};
    float want[3] = {1, 3, 64};
    add(c, "block d_model 64, 2 heads, d_ff 128: output shape", v, want, 3, 0, 0, "[1, 3, 64]");
    float g[1] = {finite && norm > 0 ? 1.0f : 0.0f}, one[1] = {1.0f};
    char what[96];
    snprintf(what, sizeof what, "  input gradient finite and nonzero (|dx| = %.3g)", sqrt(norm));
    add(c, what, g, one, 1, 0, 0, "finite");
    /* causality: changing the token at position 2 must leave positions 0 and 1 bit-identical */
    enum { T = 5 };
    const int V = cfg.vocab_size;
    int a[T] = {1, 5, 9, 3, 7}, b[T] = {1, 5, 11, 3, 7};
    float *before = malloc(sizeof(float) * T * V);
    int rc = before ? model_forward(m, a, NULL, 1, T, NULL) : -1;
    if (!rc) memcpy(before, m->ctx->acts.logits, sizeof(float) * T * V);
    if (!rc) rc = model_forward(m, b, NULL, 1, T, NULL);
    if (!rc) {
        float same[T], want[T] = {1, 1, 0, 0, 0};
        for (int t = 0; t < T; t++)
            same[t] = memcmp(before + t * V, m->ctx->acts.logits + t * V, sizeof(float) * V) == 0 ? 1.0f : 0.0f;
        add(c, "causal: token 2 changed; logits row t identical?", same, want, T, 0, 0, "[1, 1, 0, 0, 0]");
    }
    free(before);
    model_free(m);
    return rc;
}

int lesson15_run(lesson_check *out, int max) {
    checks c = {out, 0, max};
    float y[4], y2[4], dx[4];

    const float x34[2] = {3, 4}, x3040[2] = {30, 40}, zero2[2] = {0, 0};
    rms(y, x34, 2);
    add(&c, "RMSNorm([3, 4]), eps 1e-5", y, (const float[]){0.848528f, 1.131370f}, 2, 1e-6, 6, "[0.848528, 1.131370]");
    rms(y2, x3040, 2);
    add(&c, "RMSNorm([30, 40]) (eps matters less)", y2, (const float[]){0.848528f, 1.131371f}, 2, 2e-6, 7,
        "close to, not equal to, the above");
    float diff[1] = {y2[0] - y[0]};
    float differs[1] = {diff[0] != 0.0f && fabsf(diff[0]) < 1e-5f ? 1.0f : 0.0f}, yes[1] = {1};
    add(&c, "  RMSNorm([30,40]) - RMSNorm([3,4]), first entry", diff, diff, 1, 0, 9, "small, non-zero");
    c.out[c.n - 1].ok = differs[0] == yes[0];
    rms(y, zero2, 2);
    add(&c, "RMSNorm([0, 0]) (eps keeps it finite)", y, zero2, 2, 0, 6, "[0, 0]");

    residual_linear(y, dx, x34, 0.0f, 2);
    add(&c, "residual x + F(x), F = 0, x = [3, 4]", y, x34, 2, 0, 1, "[3, 4]");
    residual_linear(y, dx, x34, 2.0f, 2);
    add(&c, "residual x + F(x), F = 2x", y, (const float[]){9, 12}, 2, 0, 1, "[9, 12]");
    add(&c, "  dy/dx with F = 2x", dx, (const float[]){3, 3}, 1, 0, 1, "3");
    residual_linear(y, dx, x34, -1.0f, 2);
    add(&c, "  dy/dx with F = -x", dx, (const float[]){0, 0}, 1, 0, 1, "0");

    const float x2446[4] = {2, 4, 4, 6};
    layer(y, x2446, 4);
    add(&c, "LayerNorm([2, 4, 4, 6])", y, (const float[]){-1.414f, 0, 0, 1.414f}, 4, 5e-4, 3, "[-1.414, 0, 0, 1.414]");
    float ones[4] = {1, 1, 1, 1}, rstd;
    rmsnorm_forward(y, &rstd, x2446, ones, 0.0f, 1, 4, 1e-5f);
    float r[1] = {1.0f / rstd};
    add(&c, "  RMS of [2, 4, 4, 6] (= sqrt 18)", r, (const float[]){4.24f}, 1, 5e-3, 4, "4.24");

    const float x[4] = {2, -1, 3, 0};
    rms(y, x, 4);
    add(&c, "RMSNorm([2, -1, 3, 0])", y, (const float[]){1.069f, -0.535f, 1.604f, 0}, 4, 5e-4, 3,
        "[1.069, -0.535, 1.604, 0]");
    layer(y2, x, 4);
    add(&c, "LayerNorm([2, -1, 3, 0])", y2, (const float[]){0.632f, -1.265f, 1.265f, -0.632f}, 4, 5e-4, 3,
        "[0.632, -1.265, 1.265, -0.632]");
    float x10[4], y10[4];
    for (int i = 0; i < 4; i++) x10[i] = 10 * x[i];
    rms(y10, x10, 4);
    add(&c, "RMSNorm(10x) equals RMSNorm(x)", y10, y, 4, 1e-5, 5, "equal to 1e-5");

    const float caps_in[4] = {10, 30, 60, 200};
    softcap_forward(y, caps_in, 4, 30.0f);
    /* printed at the text's precision (one decimal: 22.8, not 22.85) */
    add(&c, "soft-cap 30 of [10, 30, 60, 200]", y, (const float[]){9.6f, 22.8f, 28.9f, 30.0f}, 4, 0.05, 1,
        "[9.6, 22.8, 28.9, 30.0]");
    const float hundred[1] = {100};
    softcap_forward(y, hundred, 1, 50.0f);
    add(&c, "soft-cap 50 of 100", y, (const float[]){48.2f}, 1, 0.05, 1, "48.2");

    float g08[1] = {(float)lesson_chain_gradient(0.8f, 32, 0)}, g12[1] = {(float)lesson_chain_gradient(1.2f, 32, 0)};
    add(&c, "32 linear layers, gain 0.8, no residual: |dx|/|dy|", g08, (const float[]){0.0008f}, 1, 5e-5, 6,
        "about 0.0008");
    add(&c, "32 linear layers, gain 1.2, no residual: |dx|/|dy|", g12, (const float[]){342.0f}, 1, 1.0, 1,
        "about 342");
    if (block_shapes(&c)) return -1;
    return c.n;
}
