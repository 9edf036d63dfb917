/* test_model_gradcheck.c — the whole model's backward against central finite differences of
 * its forward, for every architecture variant of variants.h (DeepNorm's alpha-scaled residual
 * included), and DeepNorm's beta init.
 *
 * 1. Directional derivative: for a random direction u (N(0,1) over all parameters, x30 on the
 *    1-D tensors; or over the tensors of one name), the analytic sum(grad * u) must match the
 *    fourth-order central difference (8 (L(h) - L(-h)) - (L(2h) - L(-2h))) / (12 h), L(s) the
 *    objective at p + s u, h = 3e-5 (x200 along one tensor's few coordinates), within TOL = 3e-3 of
 *    |grad w| (w: u's scale per coordinate; the typical size of sum(grad * u), which unlike the sum
 *    itself does not come near 0 for an unlucky u). The objective is summed in double from the
 *    forward's float32 logits (and the routers' probabilities); what is left is the float32
 *    forward's rounding, about 1e-7 of the loss, which the difference divides by 12 h. The steps
 *    are as large as the MoE variants allow: at 2h = 1e-4 a top-k choice flips inside the
 *    difference for some directions. Measured floor, tolerance and the backward mutations it
 *    catches: docs/testing.md. A backward that drops a term of one sublayer (e.g. DeepNorm's alpha
 *    on the residual gradient) is off by far more.
 * 2. DeepNorm init: v, o and the FFN matrices have std initializer_range * beta, q and k
 *    keep initializer_range (the derived beta for 2 layers is 16^(-1/4) = 0.5). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/moe.h"
#include "util/rng.h"
#include "variants.h"
#include "model/context.h"

enum { B = 2, T = 6 };
static double worst; /* the largest err/|grad w| of the directional checks (the floor, on a correct build) */
static const double STEP = 3e-5, STEP_ONE_TENSOR = 200 * 3e-5, TOL = 3e-3;
static const float W1D = 30.0f; /* u's scale on the 1-D tensors of the all-parameter direction */

/* the load-balancing loss of the last forward (moe.c's moe_pool_stats), summed in double from the
 * routers' float32 probabilities and choices: acts.moe_aux is rounded to float32, whose half-ulp
 * (~1e-7 at 2) times the coefficient was the largest noise term of the derivative along it */
static double moe_aux_double(const tlm_model *m) {
    const tlm_config *c = &m->cfg;
    const int E = c->n_experts, k = c->n_experts_per_tok, N = B * T;
    double cnt[TLM_MAX_EXPERTS] = {0}, psum[TLM_MAX_EXPERTS] = {0};
    int L = 0;
    for (int l = 0; l < c->n_layers; l++) {
        if (!config_layer_is_moe(c, l)) continue;
        const moe_acts *a = moe_layer_acts(&m->ctx->acts, l);
        for (int n = 0; n < N * k; n++) cnt[a->topk_idx[n]] += 1.0;
        for (int n = 0; n < N * E; n++) psum[n % E] += a->router_probs[n];
        L++;
    }
    const double R = (double)L * N;
    double aux = 0.0;
    for (int e = 0; e < E; e++) aux += cnt[e] / R * (psum[e] / R);
    return E * aux;
}

/* the objective model_backward differentiates: the mean cross-entropy, plus the load-balancing loss
 * times its coefficient when one is set. Evaluated in double from the forward's float32 logits, not
 * taken from the forward's float32 loss: that rounding (half an ulp of ~4, 2.4e-7) sat inside a
 * difference of ~1e-4 and was a large part of the check's noise */
static double loss_at(tlm_model *m, const int *tok, const int *tgt) {
    float loss = 0.0f;
    if (model_forward(m, tok, tgt, B, T, &loss)) return NAN;
    const int V = m->cfg.vocab_size;
    double ce = 0.0;
    int counted = 0;
    for (int i = 0; i < B * T; i++) {
        if (tgt[i] < 0) continue;
        const float *z = m->ctx->acts.logits + (size_t)i * V;
        double mx = z[0], s = 0.0;
        for (int v = 1; v < V; v++) mx = fmax(mx, z[v]);
        for (int v = 0; v < V; v++) s += exp(z[v] - mx);
        ce += log(s) + mx - z[tgt[i]], counted++;
    }
    const double aux = m->ctx->router_aux > 0.0f && m->cfg.scoring == SCORING_SOFTMAX ? moe_aux_double(m) : 0.0;
    return ce / counted + (double)m->ctx->router_aux * aux;
}

/* the direction u over the tensors whose names contain `only` (NULL: every parameter) */
static int check_variant_dir(const variant *v, float router_aux, const char *only) {
    tlm_config c;
    variant_config(&c, v);
    tlm_model *m = model_create(&c);
    m->ctx->router_aux = router_aux;
    if (!m) return printf("%-44s model_create failed\n", v->name), 1;
    model_init_weights(m, 5);
    /* larger weights than the init, so that every sublayer contributes to the loss */
    /* (not the Gemma 4 variants: the central differences of a float32 forward lose their digits on
     * them at x3 — measured: the 4-layer shared-K/V variant 1.8e-1 off at x3, 6.4e-2 at x2, 3.1e-4
     * at x1 — while their gradients match the float64 PyTorch reference per tensor at that scale
     * (tests/parity: 5.5e-6 with weights of std 0.9, B 2, T 6). At x1 they still contribute: the
     * directional derivatives are 5.7, 20 and 5.0) */
    const float scale = c.layer_scalar ? 1.0f : 3.0f;
    for (size_t j = 0; j < m->n_params; j++) m->param_mem[j] *= scale;
    /* Gemma 4's MoE block at x1: its router reads rows of RMS d^-0.5, so at the init's std its logits
     * are within a finite difference's step of a tie (the choice flips inside the difference):
     * router x30 (logits of std ~0.6) and experts x3, so that their scales move the loss */
    for (int i = 0; c.moe_block && i < m->n_tensors; i++) {
        const float g = strstr(m->tensors[i].name, ".ffn.router.weight") ? 30.0f
                        : strstr(m->tensors[i].name, ".ffn.experts.") ? 3.0f : 1.0f;
        for (size_t j = 0; j < m->tensors[i].numel; j++) m->param_mem[m->tensors[i].offset + j] *= g;
    }
    int tok[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++) tok[i] = (i * 7 + 3) % c.vocab_size, tgt[i] = (i * 11 + 1) % c.vocab_size;
    model_alloc_grads(m);
    model_zero_grads(m);
    float loss;
    int rc = model_forward(m, tok, tgt, B, T, &loss) || model_backward(m, 1.0f);
    const size_t n = m->n_params;
    float *p0 = malloc(n * sizeof(float)), *u = malloc(n * sizeof(float));
    memcpy(p0, m->param_mem, n * sizeof(float));
    rng_state r;
    rng_seed(&r, 99);
    /* u = w z, z ~ N(0,1): w 1 over the tensors named *only*, or over every parameter with W1D on
     * the 1-D tensors (norms' gains and biases, scalars), whose few coordinates would otherwise be
     * too small a part of the derivative for a wrong term in their gradients to show (measured: a
     * layer norm's mean(g xhat) over C + 1 moved err/|grad| by 1e-4 at w 1, 2e-2 at 30). Not the
     * routers' 1-D tensors: a step on the selection-only bias flips top-k choices, and Gemma 4's
     * router scales have directions of their own */
    float *w = malloc(n * sizeof(float));
    for (size_t j = 0; j < n; j++) w[j] = 0.0f;
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_info *t = &m->tensors[i];
        const float wt = only ? (strstr(t->name, only) ? 1.0f : 0.0f) : t->ndim == 1 && !strstr(t->name, ".router.") ? W1D : 1.0f;
        for (size_t j = 0; j < t->numel; j++) w[t->offset + j] = wt;
    }
    double analytic = 0.0, gnorm = 0.0; /* gnorm: |grad w|, the typical size of sum(grad * u) */
    for (size_t j = 0; j < n; j++) {
        u[j] = w[j] * (float)rng_normal(&r);
        analytic += (double)m->ctx->grad_mem[j] * u[j];
        gnorm += (double)m->ctx->grad_mem[j] * w[j] * m->ctx->grad_mem[j] * w[j];
    }
    free(w);
    gnorm = sqrt(gnorm);
    const double h = only ? STEP_ONE_TENSOR : STEP;
    double L[4]; /* at +h, -h, +2h, -2h */
    for (int k = 0; k < 4; k++) {
        const double s = (k & 1 ? -1 : 1) * (k < 2 ? h : 2 * h);
        for (size_t j = 0; j < n; j++) m->param_mem[j] = (float)(p0[j] + s * u[j]);
        L[k] = loss_at(m, tok, tgt);
    }
    /* (the h^2 terms cancel: the output norms' curvature is large) */
    const double fd = (8 * (L[0] - L[1]) - (L[2] - L[3])) / (12 * h);
    const double rel = fabs(fd - analytic) / gnorm;
    const int ok = !rc && isfinite(fd) && gnorm > 0.0 && rel <= TOL;
    worst = fmax(worst, rel);
    printf("%-44s fd %+.5e analytic %+.5e |grad w| %.3e err/|grad w| %.1e %s\n", v->name, fd, analytic, gnorm, rel, ok ? "ok" : "FAIL");
    if (only) printf("%-44s (the direction only over the tensors named *%s*)\n", "", only);
    if (router_aux > 0.0f) printf("%-44s (with the load-balancing loss x %g: %.4f)\n", "", router_aux, m->ctx->acts.moe_aux);
    free(p0), free(u);
    model_free(m);
    return !ok;
}

static int check_variant_aux(const variant *v, float router_aux) { return check_variant_dir(v, router_aux, NULL); }
static int check_variant(const variant *v) { return check_variant_aux(v, 0.0f); }

static double std_of(const tlm_model *m, const char *name) {
    const tensor_info *t = model_find_tensor(m, name);
    if (!t) return NAN;
    const float *x = m->param_mem + t->offset;
    double s = 0, s2 = 0;
    for (size_t j = 0; j < t->numel; j++) s += x[j], s2 += (double)x[j] * x[j];
    const double mean = s / t->numel;
    return sqrt(s2 / t->numel - mean * mean);
}

static int check_deepnorm_init(void) {
    tlm_config c;
    config_defaults(&c);
    c.vocab_size = 40, c.d_model = 96, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 4, c.head_dim = 24;
    c.d_ff = 128, c.max_seq = 16;
    c.placement = PLACE_DEEPNORM, c.final_norm = false, c.scale_residual_init = false, c.init_std = 0.05f;
    const double beta = config_deepnorm_beta(&c);
    tlm_model *m = model_create(&c);
    if (!m) return printf("deepnorm init: model_create failed\n"), 1;
    model_init_weights(m, 3);
    struct {
        const char *name;
        double want;
    } rows[] = {{"layers.1.attn.q_proj.weight", 0.05},        {"layers.1.attn.k_proj.weight", 0.05},
                {"layers.1.attn.v_proj.weight", 0.05 * beta}, {"layers.1.attn.o_proj.weight", 0.05 * beta},
                {"layers.1.ffn.gate_proj.weight", 0.05 * beta}, {"layers.1.ffn.up_proj.weight", 0.05 * beta},
                {"layers.1.ffn.down_proj.weight", 0.05 * beta}, {"embed.weight", 0.05}};
    int bad = fabs(beta - 0.5) > 1e-6;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const double s = std_of(m, rows[i].name);
        const int ok = fabs(s - rows[i].want) <= 0.05 * rows[i].want;
        bad += !ok;
        printf("deepnorm init %-32s std %.4f want %.4f %s\n", rows[i].name, s, rows[i].want, ok ? "ok" : "FAIL");
    }
    model_free(m);
    return bad;
}

int main(void) {
    int failures = 0, n = (int)(sizeof VARIANTS / sizeof VARIANTS[0]);
    for (int i = 0; i < n; i++) failures += check_variant(&VARIANTS[i]);
    failures += check_deepnorm_init() != 0;
    /* the load-balancing loss's gradient (Hugging Face's load_balancing_loss_func, pooled over the
     * MoE layers), weighted far above its usual 0.001 so that it moves the derivative */
    int extra = 0;
    for (int i = 0; i < n; i++)
        if (VARIANTS[i].tweak == v_moe_softmax || VARIANTS[i].tweak == v_moe_step2 ||
            VARIANTS[i].tweak == v_gemma4_moe)
            failures += check_variant_aux(&VARIANTS[i], 3.0f), extra++;
    /* Gemma 4's MoE block: the router's input scale and the experts' weight scales, and the block's
     * three norms, each along a direction of its own (a random one over all parameters could hide
     * a small wrong term in them) */
    static const char *const BLOCK[] = {".router.scale", ".router.expert_scale", "dense_out_norm", "moe_in_norm",
                                        "moe_out_norm"};
    for (int i = 0; i < n; i++)
        for (size_t b = 0; VARIANTS[i].tweak == v_gemma4_moe && b < sizeof BLOCK / sizeof BLOCK[0]; b++)
            failures += check_variant_dir(&VARIANTS[i], 0.0f, BLOCK[b]), extra++;
    /* Qwen2-MoE's shared-expert gate: its weight alone, and the input norms before it (whose gradient takes
     * the gate's input term) */
    static const char *const QGATE[] = {".ffn.shared_expert_gate", "ffn_norm"};
    for (int i = 0; i < n; i++)
        for (size_t b = 0; VARIANTS[i].tweak == v_qwen2_moe && b < sizeof QGATE / sizeof QGATE[0]; b++)
            failures += check_variant_dir(&VARIANTS[i], 0.0f, QGATE[b]), extra++;
    /* the scalar gains, DyT's alpha and Gemma 4's layer scalar: a handful of coordinates, too small a
     * part of |grad| for a direction over every parameter to see a wrong term in their gradients */
    static const struct {
        void (*tweak)(tlm_config *);
        const char *only;
    } GAINS[] = {{v_dyt, ".alpha"}, {v_gemma4, "layer_scalar"}};
    for (int i = 0; i < n; i++)
        for (size_t b = 0; b < sizeof GAINS / sizeof GAINS[0]; b++)
            if (VARIANTS[i].tweak == GAINS[b].tweak) failures += check_variant_dir(&VARIANTS[i], 0.0f, GAINS[b].only), extra++;
    printf("worst err/|grad w| of the directional checks %.1e (tolerance %.0e)\n", worst, TOL);
    printf("%d passed, %d failed\n", n + 1 + extra - failures, failures);
    return failures != 0;
}
