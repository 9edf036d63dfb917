/* test_ops_gradcheck.c — every op's backward against central finite differences.
 *
 * For an op y = f(x) and a fixed random cotangent R, the scalar L = sum(y * R) has
 * dL/dx = backward(dout = R). The numerical derivative (L(x+h) - L(x-h)) / 2h is formed
 * in double from the float forward. We compare per tensor: max|num - ana| / max|ana|. */
#include "isa_cap.h"
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"
#include "util/f16.h"
#include "util/rng.h"

static int failures = 0, checks = 0;
static rng_state rng;

static float *rand_vec(size_t n, float scale) {
    float *v = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) v[i] = (float)(scale * rng_normal(&rng));
    return v;
}
static float *zeros(size_t n) { return calloc(n, sizeof(float)); }
/* a gradient buffer an op must set, not accumulate into: NaN until written */
static float *unset(size_t n) {
    float *v = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) v[i] = NAN;
    return v;
}

typedef void (*forward_fn)(void *ctx, float *out);

static double loss_of(forward_fn f, void *ctx, float *out, const float *R, size_t n_out) {
    f(ctx, out);
    double s = 0.0;
    for (size_t i = 0; i < n_out; i++) s += (double)out[i] * R[i];
    return s;
}

/* compares the analytic gradient of x with finite differences of L = sum(f(ctx) * R) */
static void check(const char *name, float *x, size_t n, const float *analytic, forward_fn f, void *ctx, size_t n_out,
                  const float *R, float h, double tol) {
    float *out = malloc(n_out * sizeof(float));
    /* the 2n forward passes on one thread: ctest runs two tests at once on two cores, where the
     * OpenMP barriers of thousands of small passes would wait on each other (the analytic
     * gradient, computed by the caller, still runs on every thread) */
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    double max_err = 0.0, max_ref = 0.0;
    size_t worst = 0, nonfinite = 0; /* (a NaN compares false: counted apart, a failure) */
    for (size_t i = 0; i < n; i++)
        if (!isfinite(analytic[i])) nonfinite++;
    /* Every element in the release build. The sanitizer build is there for memory errors, on
     * the same code paths (every perturbed pass runs the whole op): it checks an odd-strided
     * sample of about 256 elements of a large tensor, whose 2 forward passes each took most of
     * the test's time under ASan (3 minutes with 1024, on a shared machine). */
    size_t step = 1;
#if defined(__SANITIZE_ADDRESS__)
    step = n > 256 ? (n / 256) | 1 : 1;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    step = n > 256 ? (n / 256) | 1 : 1;
#endif
#endif
    for (size_t i = 0; i < n; i += step) {
        float saved = x[i];
        x[i] = saved + h;
        double lp = loss_of(f, ctx, out, R, n_out);
        x[i] = saved - h;
        double lm = loss_of(f, ctx, out, R, n_out);
        x[i] = saved;
        double num = (lp - lm) / (2.0 * h);
        double err = fabs(num - analytic[i]);
        if (err > max_err) max_err = err, worst = i;
        if (fabs(num) > max_ref) max_ref = fabs(num);
    }
    free(out);
    omp_set_num_threads(threads);
    double rel = max_ref > 0 ? max_err / max_ref : max_err;
    checks++;
    int ok = rel <= tol && max_ref > 1e-6 && !nonfinite; /* a zero gradient would make the check vacuous */
    if (!ok) failures++;
    printf("%-44s rel err %.2e (max |grad| %.3g, worst at %zu%s%s) %s\n", name, rel, max_ref, worst,
           nonfinite ? ", non-finite values" : "", step > 1 ? ", a sample: sanitizer build" : "", ok ? "ok" : "FAIL");
}

/* ---- matmul --------------------------------------------------------------------------------- */
typedef struct { float *inp, *w, *b; int N, IC, OC; } mm_ctx;
static void mm_fwd(void *c, float *out) {
    mm_ctx *m = c;
    matmul_forward(out, m->inp, m->w, m->b, m->N, m->IC, m->OC);
}
static void test_matmul(void) {
    mm_ctx c = {.N = 5, .IC = 7, .OC = 6};
    c.inp = rand_vec(35, 1), c.w = rand_vec(42, 1), c.b = rand_vec(6, 1);
    float *R = rand_vec(30, 1), *di = zeros(35), *dw = zeros(42), *db = zeros(6);
    matmul_backward(di, dw, db, R, c.inp, c.w, c.N, c.IC, c.OC);
    check("matmul dinp", c.inp, 35, di, mm_fwd, &c, 30, R, 1e-2f, 1e-3);
    check("matmul dweight", c.w, 42, dw, mm_fwd, &c, 30, R, 1e-2f, 1e-3);
    check("matmul dbias", c.b, 6, db, mm_fwd, &c, 30, R, 1e-2f, 1e-3);
    /* matmul_backward_into sets dinp (its NaN is never read) and accumulates the rest */
    float *di2 = unset(35), *dw2 = zeros(42), *db2 = zeros(6);
    matmul_backward_into(di2, dw2, db2, R, c.inp, c.w, c.N, c.IC, c.OC);
    check("matmul_backward_into dinp (set)", c.inp, 35, di2, mm_fwd, &c, 30, R, 1e-2f, 1e-3);
    check("matmul_backward_into dweight", c.w, 42, dw2, mm_fwd, &c, 30, R, 1e-2f, 1e-3);
    free(c.inp), free(c.w), free(c.b), free(R), free(di), free(dw), free(db), free(di2), free(dw2), free(db2);
}

/* ---- norms ------------------------------------------------------------------------------------ */
typedef struct { float *inp, *w, *b, *mean, *rstd; int N, C; float offset; int layer; } norm_ctx;
static void norm_fwd(void *c, float *out) {
    norm_ctx *n = c;
    if (n->layer)
        layernorm_forward(out, n->mean, n->rstd, n->inp, n->w, n->b, n->N, n->C, 1e-5f);
    else
        rmsnorm_forward(out, n->rstd, n->inp, n->w, n->offset, n->N, n->C, 1e-5f);
}
static void test_norm(int layer, float offset, int with_bias) {
    norm_ctx c = {.N = 4, .C = 9, .offset = offset, .layer = layer};
    size_t n = 36;
    c.inp = rand_vec(n, 2), c.w = rand_vec(9, 1), c.b = with_bias ? rand_vec(9, 1) : NULL;
    c.mean = zeros(4), c.rstd = zeros(4);
    float *R = rand_vec(n, 1), *out = zeros(n), *di = unset(n), *dw = zeros(9), *db = zeros(9); /* dinp: set */
    norm_fwd(&c, out);
    if (layer)
        layernorm_backward(di, NULL, dw, with_bias ? db : NULL, R, c.inp, c.w, c.mean, c.rstd, c.N, c.C);
    else
        rmsnorm_backward(di, NULL, dw, R, c.inp, c.w, offset, c.rstd, c.N, c.C);
    /* dinp = dadd + the norm's gradient, dadd apart or dinp itself (accumulate): the same sums */
    float *add = rand_vec(n, 1), *d2 = unset(n), *d3 = malloc(n * sizeof(float)), *scratch = zeros(9);
    memcpy(d3, add, n * sizeof(float));
    if (layer) {
        layernorm_backward(d2, add, scratch, NULL, R, c.inp, c.w, c.mean, c.rstd, c.N, c.C);
        layernorm_backward(d3, d3, scratch, NULL, R, c.inp, c.w, c.mean, c.rstd, c.N, c.C);
    } else {
        rmsnorm_backward(d2, add, scratch, R, c.inp, c.w, offset, c.rstd, c.N, c.C);
        rmsnorm_backward(d3, d3, scratch, R, c.inp, c.w, offset, c.rstd, c.N, c.C);
    }
    int sums = 1;
    /* (d2 against add + di within rounding: a compiler may fuse the kernel's add into an FMA) */
    for (size_t i = 0; i < n; i++)
        sums &= fabsf(d2[i] - (add[i] + di[i])) <= 1e-6f * (1.0f + fabsf(d2[i])) && d3[i] == d2[i];
    checks++;
    failures += !sums;
    printf("%-44s %s\n", layer ? "layernorm: dinp = dadd + its gradient" : "rmsnorm: dinp = dadd + its gradient",
           sums ? "ok" : "FAIL");
    free(add), free(d2), free(d3), free(scratch);
    char name[64];
    const char *kind = layer ? (with_bias ? "layernorm" : "layernorm (no bias)") : (offset ? "rmsnorm(1+w)" : "rmsnorm");
    snprintf(name, sizeof name, "%s dinp", kind);
    check(name, c.inp, n, di, norm_fwd, &c, n, R, 1e-2f, 2e-3);
    snprintf(name, sizeof name, "%s dweight", kind);
    check(name, c.w, 9, dw, norm_fwd, &c, n, R, 1e-2f, 2e-3);
    if (with_bias) check("layernorm dbias", c.b, 9, db, norm_fwd, &c, n, R, 1e-2f, 2e-3);
    free(c.inp), free(c.w), free(c.b), free(c.mean), free(c.rstd), free(R), free(out), free(di), free(dw), free(db);
}

/* RMSNorm without a weight (Gemma 4's v norm: weight NULL, gain 1): dinp, with and without dadd */
static void test_rmsnorm_no_weight(void) {
    norm_ctx c = {.N = 6, .C = 8, .offset = 0.0f, .layer = 0};
    size_t n = 48;
    c.inp = rand_vec(n, 2), c.w = NULL, c.b = NULL, c.mean = zeros(6), c.rstd = zeros(6);
    float *R = rand_vec(n, 1), *out = zeros(n), *di = unset(n), *add = rand_vec(n, 1), *d2 = unset(n);
    norm_fwd(&c, out);
    rmsnorm_backward(di, NULL, NULL, R, c.inp, NULL, 0.0f, c.rstd, c.N, c.C);
    rmsnorm_backward(d2, add, NULL, R, c.inp, NULL, 0.0f, c.rstd, c.N, c.C);
    /* without a weight it is the unit-weight norm: the same outputs as weight 1 */
    float *ones = malloc(8 * sizeof(float)), *out1 = zeros(n), rstd1[6];
    for (int i = 0; i < 8; i++) ones[i] = 1.0f;
    rmsnorm_forward(out1, rstd1, c.inp, ones, 0.0f, c.N, c.C, 1e-5f);
    int same = 1;
    for (size_t i = 0; i < n; i++)
        same &= out1[i] == out[i] && fabsf(d2[i] - (add[i] + di[i])) <= 1e-6f * (1.0f + fabsf(d2[i]));
    checks++;
    failures += !same;
    printf("%-44s %s\n", "rmsnorm (no weight) = weight 1; dadd added", same ? "ok" : "FAIL");
    check("rmsnorm (no weight) dinp", c.inp, n, di, norm_fwd, &c, n, R, 1e-2f, 2e-3);
    free(c.inp), free(c.mean), free(c.rstd), free(R), free(out), free(di), free(add), free(d2), free(ones), free(out1);
}

/* DyT: y = g tanh(alpha x) + b; a row wide enough (C = 150) for several column blocks of dalpha */
typedef struct { float *inp, *a, *w, *b; int N, C; } dyt_ctx;
static void dyt_fwd(void *c, float *out) {
    dyt_ctx *n = c;
    dyt_forward(out, n->inp, n->a, n->w, n->b, n->N, n->C);
}
static void test_dyt(int with_bias) {
    dyt_ctx c = {.N = 3, .C = 150};
    size_t n = (size_t)c.N * c.C;
    float alpha = 0.7f;
    c.inp = rand_vec(n, 2), c.a = &alpha, c.w = rand_vec((size_t)c.C, 1), c.b = with_bias ? rand_vec((size_t)c.C, 1) : NULL;
    float *R = rand_vec(n, 1), *di = unset(n), *dw = zeros((size_t)c.C), *db = zeros((size_t)c.C), da = 0.0f;
    dyt_backward(di, NULL, &da, dw, with_bias ? db : NULL, R, c.inp, c.a, c.w, c.N, c.C);
    float *add = rand_vec(n, 1), *d2 = unset(n), unused = 0.0f;
    dyt_backward(d2, add, &unused, NULL, NULL, R, c.inp, c.a, c.w, c.N, c.C);
    int sums = 1;
    for (size_t i = 0; i < n; i++) sums &= fabsf(d2[i] - (add[i] + di[i])) <= 1e-6f * (1.0f + fabsf(d2[i]));
    checks++;
    failures += !sums;
    printf("%-44s %s\n", "dyt: dinp = dadd + its gradient", sums ? "ok" : "FAIL");
    free(add), free(d2);
    const char *kind = with_bias ? "dyt" : "dyt (no bias)";
    char name[64];
    snprintf(name, sizeof name, "%s dinp", kind);
    check(name, c.inp, n, di, dyt_fwd, &c, n, R, 1e-2f, 2e-3);
    snprintf(name, sizeof name, "%s dalpha", kind);
    check(name, c.a, 1, &da, dyt_fwd, &c, n, R, 1e-3f, 2e-3);
    snprintf(name, sizeof name, "%s dweight", kind);
    check(name, c.w, (size_t)c.C, dw, dyt_fwd, &c, n, R, 1e-2f, 2e-3);
    if (with_bias) check("dyt dbias", c.b, (size_t)c.C, db, dyt_fwd, &c, n, R, 1e-2f, 2e-3);
    free(c.inp), free(c.w), free(c.b), free(R), free(di), free(dw), free(db);
}

/* ---- embedding ---------------------------------------------------------------------------------- */
typedef struct { float *wte, *wpe; int *tok; int B, T, C; float scale; const int *start; } emb_ctx;
static void emb_fwd(void *c, float *out) {
    emb_ctx *e = c;
    embedding_forward(out, e->tok, e->wte, e->wpe, e->scale, e->B, e->T, e->C, e->start);
}
/* start: NULL, or each row's left padding (positions count from its first real token) */
static void test_embedding(const int *start) {
    int tok[6] = {3, 1, 3, 0, 2, 3}; /* repeats: their gradients must add up */
    emb_ctx c = {.tok = tok, .B = 2, .T = 3, .C = 4, .scale = 2.5f, .start = start};
    c.wte = rand_vec(16, 1), c.wpe = rand_vec(12, 1);
    float *R = rand_vec(24, 1), *dwte = zeros(16), *dwpe = zeros(12);
    embedding_backward(dwte, dwpe, R, tok, c.scale, c.B, c.T, c.C, start);
    check(start ? "embedding dwte (left-padded rows)" : "embedding dwte (scaled, repeated ids)", c.wte, 16, dwte,
          emb_fwd, &c, 24, R, 1e-2f, 1e-3);
    check(start ? "embedding dwpe (left-padded rows)" : "embedding dwpe", c.wpe, 12, dwpe, emb_fwd, &c, 24, R, 1e-2f,
          1e-3);
    free(c.wte), free(c.wpe), free(R), free(dwte), free(dwpe);
}

/* ---- rope ----------------------------------------------------------------------------------------- */
typedef struct { float *x, *cs, *sn; int B, T, H, hd, pos0; const int *start; } rope_ctx;
static void rope_fwd(void *c, float *out) {
    rope_ctx *r = c;
    rope_forward(out, r->x, r->cs, r->sn, r->B, r->T, r->H, r->hd, r->pos0, r->start);
}
static void test_rope(const int *start) {
    rope_ctx c = {.B = 2, .T = 3, .H = 2, .hd = 6, .pos0 = 2, .start = start};
    int maxp = 8, half = 3;
    c.cs = zeros((size_t)maxp * half), c.sn = zeros((size_t)maxp * half);
    for (int p = 0; p < maxp; p++)
        for (int i = 0; i < half; i++) {
            double a = p * pow(10000.0, -2.0 * i / c.hd);
            c.cs[p * half + i] = (float)cos(a), c.sn[p * half + i] = (float)sin(a);
        }
    size_t n = 2 * 3 * 2 * 6;
    c.x = rand_vec(n, 1);
    float *R = rand_vec(n, 1), *dx = unset(n); /* set */
    rope_backward(dx, R, c.cs, c.sn, c.B, c.T, c.H, c.hd, c.pos0, start);
    check(start ? "rope dinp (left-padded rows)" : "rope dinp", c.x, n, dx, rope_fwd, &c, n, R, 1e-2f, 1e-3);
    free(c.cs), free(c.sn), free(c.x), free(R), free(dx);
}

/* ---- attention ---------------------------------------------------------------------------------------- */
typedef struct { float *q, *k, *v, *scores, *probs, *scratch; int B, T; attention_spec spec; } att_ctx;
static void att_fwd(void *c, float *out) {
    att_ctx *a = c;
    attention_forward(out, a->scores, a->probs, a->q, a->k, a->v, a->B, a->T, &a->spec, a->scratch);
}
/* out against a float64 evaluation of the definition, and every row of probs defined: it sums
 * to 1 over the visible keys and is exactly 0 elsewhere (T > 64 spans several query blocks,
 * whose keys above the diagonal blocks no GEMM computes) */
static void check_attention_forward(const char *label, const att_ctx *c, const float *out) {
    const attention_spec *sp = &c->spec;
    const int H = sp->n_heads, KV = sp->n_kv_heads, hd = sp->head_dim, T = c->T;
    double worst = 0.0, worst_row = 0.0;
    double *w = malloc(sizeof(double) * T);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const int g = h / (H / KV);
                const int first = sp->start ? attention_first_key_padded(t, sp->window, sp->start[b])
                                            : attention_first_key(t, sp->window);
                const float *qt = c->q + ((size_t)(b * T + t) * H + h) * hd;
                double mx = -INFINITY, sum = 0.0;
                for (int j = first; j <= t; j++) {
                    const float *kj = c->k + ((size_t)(b * T + j) * KV + g) * hd;
                    double s = 0.0;
                    for (int i = 0; i < hd; i++) s += (double)qt[i] * kj[i];
                    s *= sp->scale;
                    if (sp->softcap > 0.0f) s = sp->softcap * tanh(s / sp->softcap);
                    w[j] = s;
                    if (s > mx) mx = s;
                }
                for (int j = first; j <= t; j++) sum += w[j] = exp(w[j] - mx);
                for (int i = 0; i < hd; i++) {
                    double o = 0.0;
                    for (int j = first; j <= t; j++) o += w[j] / sum * c->v[((size_t)(b * T + j) * KV + g) * hd + i];
                    double e = fabs(o - out[((size_t)(b * T + t) * H + h) * hd + i]);
                    if (!(e <= worst)) worst = e;
                }
                const float *pr = c->probs + (((size_t)b * H + h) * T + t) * T;
                double row = 0.0, outside = 0.0;
                for (int j = 0; j < T; j++) {
                    if (j < first || j > t) outside += fabs(pr[j]);
                    else row += pr[j];
                }
                double e = fabs(row - 1.0) + (outside != 0.0 ? 1.0 : 0.0);
                if (!(e <= worst_row)) worst_row = e;
            }
    free(w);
    checks++;
    int ok = worst <= 1e-5 && worst_row <= 1e-5;
    if (!ok) failures++;
    printf("attention %-34s forward err %.2e, prob rows %.2e %s\n", label, worst, worst_row, ok ? "ok" : "FAIL");
}

/* start: NULL, or each row's left padding (no key before it; a pad query sees itself) */
static void test_attention_padded(const char *label, int B, int T, int H, int KV, int hd, float softcap, int window,
                                  const int *start) {
    att_ctx c = {.B = B, .T = T, .spec = {.n_heads = H, .n_kv_heads = KV, .head_dim = hd, .scale = 1.0f / sqrtf(hd),
                                          .softcap = softcap, .window = window, .start = start}};
    size_t nq = (size_t)c.B * c.T * H * hd, nk = (size_t)c.B * c.T * KV * hd, ns = (size_t)c.B * H * c.T * c.T;
    c.q = rand_vec(nq, 1.5), c.k = rand_vec(nk, 1.5), c.v = rand_vec(nk, 1);
    c.scores = malloc(ns * sizeof(float)), c.probs = malloc(ns * sizeof(float));
    for (size_t i = 0; i < ns; i++) c.scores[i] = c.probs[i] = NAN; /* whatever the forward leaves is seen */
    float *R = rand_vec(nq, 1), *out = zeros(nq), *dq = unset(nq), *dk = unset(nk), *dv = unset(nk); /* set */
    const size_t n_scratch = attention_scratch_floats(c.T, c.spec.head_dim) * (size_t)omp_get_max_threads();
    float *scratch = c.scratch = unset(n_scratch);
    att_fwd(&c, out);
    check_attention_forward(label, &c, out);
    if (softcap == 0.0f) { /* (the kept scores are capped already) */
        /* each row of probabilities bit for bit what the one-row softmax of the KV-cache pass makes
         * of its kept scores (the full pass does a block of rows at a time) */
        float *row = malloc((size_t)c.T * sizeof(float));
        int rows_same = 1;
        for (int b = 0; b < c.B; b++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < c.T; t++) {
                    const size_t at = (((size_t)b * H + h) * c.T + t) * c.T;
                    const int first = start ? attention_first_key_padded(t, window, start[b])
                                            : attention_first_key(t, window);
                    memcpy(row, c.scores + at, (size_t)c.T * sizeof(float));
                    attention_softmax_row(row, row, c.T, first, t, 0.0f);
                    rows_same &= !memcmp(row, c.probs + at, (size_t)c.T * sizeof(float));
                }
        free(row);
        checks++;
        if (!rows_same) failures++;
        printf("attention %-34s probabilities = attention_softmax_row of the scores, bit for bit %s\n", label,
               rows_same ? "ok" : "FAIL");
    }
    attention_backward(dq, dk, dv, R, c.scores, c.probs, c.q, c.k, c.v, c.B, c.T, &c.spec, scratch);
    /* without the maps (training without probes): the blocks in scratch, the backward computing
     * them again: the same bits */
    float *out2 = zeros(nq), *dq2 = unset(nq), *dk2 = unset(nk), *dv2 = unset(nk);
    for (size_t i = 0; i < n_scratch; i++) scratch[i] = NAN;
    attention_forward(out2, NULL, NULL, c.q, c.k, c.v, c.B, c.T, &c.spec, scratch);
    for (size_t i = 0; i < n_scratch; i++) scratch[i] = NAN;
    attention_backward(dq2, dk2, dv2, R, NULL, NULL, c.q, c.k, c.v, c.B, c.T, &c.spec, scratch);
    int same = !memcmp(out, out2, nq * sizeof(float)) && !memcmp(dq, dq2, nq * sizeof(float)) &&
               !memcmp(dk, dk2, nk * sizeof(float)) && !memcmp(dv, dv2, nk * sizeof(float));
    checks++;
    if (!same) failures++;
    printf("attention %-34s without maps: out, dq, dk, dv bit-identical %s\n", label, same ? "ok" : "FAIL");
    /* the maps streamed out (a cache's arrays: each block made in scratch, written with
     * non-temporal stores): the same out and maps, every column written */
    {
        /* (on 64-byte lines, as a cache's arrays: with T a multiple of 16 the block softmax writes
         * them as it goes; else each block is copied out after it) */
        const size_t bytes = (ns * sizeof(float) + 63) & ~(size_t)63;
        float *s3 = aligned_alloc(64, bytes), *p3 = aligned_alloc(64, bytes);
        attention_spec streamed = c.spec;
        streamed.stream_maps = 1;
        for (size_t i = 0; i < ns; i++) s3[i] = p3[i] = NAN;
        for (size_t i = 0; i < nq; i++) out2[i] = NAN;
        for (size_t i = 0; i < n_scratch; i++) scratch[i] = NAN;
        attention_forward(out2, s3, p3, c.q, c.k, c.v, c.B, c.T, &streamed, scratch);
        int ok = !memcmp(out, out2, nq * sizeof(float)) && !memcmp(s3, c.scores, ns * sizeof(float)) &&
                 !memcmp(p3, c.probs, ns * sizeof(float));
        /* one map alone (a cache that keeps the pattern and not the scores) */
        for (size_t i = 0; i < ns; i++) p3[i] = NAN;
        for (size_t i = 0; i < nq; i++) out2[i] = NAN;
        attention_forward(out2, NULL, p3, c.q, c.k, c.v, c.B, c.T, &streamed, scratch);
        ok &= !memcmp(out, out2, nq * sizeof(float)) && !memcmp(p3, c.probs, ns * sizeof(float));
        checks++;
        if (!ok) failures++;
        printf("attention %-34s maps streamed: out, scores, probs bit-identical %s\n", label, ok ? "ok" : "FAIL");
        free(s3), free(p3);
    }
    /* the probabilities alone (training without a soft-cap) and, under one, both again */
    float *probs2 = unset(ns), *scores2 = softcap > 0.0f ? unset(ns) : NULL;
    for (size_t i = 0; i < nq; i++) out2[i] = dq2[i] = NAN;
    for (size_t i = 0; i < nk; i++) dk2[i] = dv2[i] = NAN;
    for (size_t i = 0; i < n_scratch; i++) scratch[i] = NAN;
    attention_forward(out2, scores2, probs2, c.q, c.k, c.v, c.B, c.T, &c.spec, scratch);
    for (size_t i = 0; i < n_scratch; i++) scratch[i] = NAN;
    attention_backward(dq2, dk2, dv2, R, scores2, probs2, c.q, c.k, c.v, c.B, c.T, &c.spec, scratch);
    same = !memcmp(out, out2, nq * sizeof(float)) && !memcmp(dq, dq2, nq * sizeof(float)) &&
           !memcmp(dk, dk2, nk * sizeof(float)) && !memcmp(dv, dv2, nk * sizeof(float)) &&
           !memcmp(probs2, c.probs, ns * sizeof(float));
    checks++;
    if (!same) failures++;
    printf("attention %-34s %s: bit-identical %s\n", label, scores2 ? "both maps again" : "probabilities only",
           same ? "ok" : "FAIL");
    free(probs2), free(scores2);
    free(out2), free(dq2), free(dk2), free(dv2);
    char name[80];
    snprintf(name, sizeof name, "attention %s dq", label);
    check(name, c.q, nq, dq, att_fwd, &c, nq, R, 1e-2f, 2e-3);
    snprintf(name, sizeof name, "attention %s dk", label);
    check(name, c.k, nk, dk, att_fwd, &c, nq, R, 1e-2f, 2e-3);
    snprintf(name, sizeof name, "attention %s dv", label);
    check(name, c.v, nk, dv, att_fwd, &c, nq, R, 1e-2f, 2e-3);
    free(c.q), free(c.k), free(c.v), free(c.scores), free(c.probs), free(R), free(out), free(dq), free(dk), free(dv),
        free(scratch);
}

static void test_attention(const char *label, int B, int T, int H, int KV, int hd, float softcap, int window) {
    test_attention_padded(label, B, T, H, KV, hd, softcap, window, NULL);
}

/* ---- activations, gated units, soft-cap --------------------------------------------------------------- */
typedef struct { float *a, *b; size_t n; activation act; int kind; float cap; } act_ctx;
static void act_fwd(void *c, float *out) {
    act_ctx *a = c;
    if (a->kind == 0) glu_forward(out, a->a, a->b, a->n, a->act);
    if (a->kind == 1) act_forward(out, a->a, a->n, a->act);
    if (a->kind == 2) softcap_forward(out, a->a, a->n, a->cap);
}
static void test_activations(void) {
    size_t n = 24;
    activation acts[2] = {ACT_SILU, ACT_GELU_TANH};
    const char *names[2] = {"swiglu", "geglu"};
    for (int i = 0; i < 2; i++) {
        act_ctx c = {.n = n, .act = acts[i], .kind = 0};
        c.a = rand_vec(n, 2), c.b = rand_vec(n, 1);
        float *R = rand_vec(n, 1), *dg = unset(n), *du = unset(n); /* set, not accumulated */
        glu_backward(dg, du, R, c.a, c.b, n, c.act);
        char name[64];
        snprintf(name, sizeof name, "%s dgate", names[i]);
        check(name, c.a, n, dg, act_fwd, &c, n, R, 1e-2f, 1e-3);
        snprintf(name, sizeof name, "%s dup", names[i]);
        check(name, c.b, n, du, act_fwd, &c, n, R, 1e-2f, 1e-3);
        free(c.a), free(c.b), free(R), free(dg), free(du);
    }
    act_ctx g = {.n = n, .act = ACT_GELU_TANH, .kind = 1};
    g.a = rand_vec(n, 2);
    float *R = rand_vec(n, 1), *d = unset(n), *out = zeros(n);
    act_backward(d, R, g.a, n, g.act);
    check("gelu_tanh dinp", g.a, n, d, act_fwd, &g, n, R, 1e-2f, 1e-3);
    act_ctx s = {.n = n, .kind = 2, .cap = 3.0f};
    s.a = rand_vec(n, 4);
    float *ds = zeros(n);
    softcap_forward(out, s.a, n, s.cap);
    softcap_backward(ds, R, out, n, s.cap);
    check("softcap dinp", s.a, n, ds, act_fwd, &s, n, R, 1e-2f, 1e-3);
    free(g.a), free(R), free(d), free(out), free(s.a), free(ds);
}

/* ---- cross-entropy ---------------------------------------------------------------------------------------- */
/* the loss mean CE + z * mean(lse^2) over the counted rows (z = 0: plain cross-entropy) */
typedef struct { float *logits, *probs, *losses, *lse; int *targets; int N, V; float z; } ce_ctx;
static void ce_fwd(void *c, float *out) {
    ce_ctx *e = c;
    float sq;
    out[0] = crossentropy_forward(e->losses, e->lse, e->probs, e->logits, e->targets, e->N, e->V, NULL, &sq);
    out[0] += e->z * sq;
}
static void test_crossentropy(float z, float shift) {
    int targets[4] = {2, -1, 0, 4}; /* -1: no loss at that row */
    ce_ctx c = {.targets = targets, .N = 4, .V = 5, .z = z};
    c.logits = rand_vec(20, 2), c.probs = zeros(20), c.losses = zeros(4), c.lse = zeros(4);
    for (int i = 0; i < 20; i++) c.logits[i] += shift; /* lse far from 0: the z-loss's gradient is large */
    float R = 1.0f, *dl = zeros(20), sq;
    int counted;
    crossentropy_forward(c.losses, c.lse, c.probs, c.logits, targets, 4, 5, &counted, &sq);
    crossentropy_backward(dl, c.probs, c.lse, targets, 4, 5, 1.0f, counted, z);
    char name[64];
    snprintf(name, sizeof name, z ? "crossentropy + z-loss %g dlogits" : "crossentropy dlogits", z);
    /* the set form: what zeroing and adding gives, over a buffer holding garbage (the row without a
     * target: zeros); before the check, whose forwards move probs */
    float *set = zeros(20);
    for (int i = 0; i < 20; i++) set[i] = 1e30f;
    crossentropy_backward_into(set, c.probs, c.lse, targets, 4, 5, 1.0f, counted, z);
    const int same = !memcmp(set, dl, sizeof(float) * 20);
    checks++;
    failures += !same;
    printf("%-44s %s\n", z ? "crossentropy_backward_into (z-loss) = zero + add" : "crossentropy_backward_into = zero + add",
           same ? "ok" : "FAIL");
    check(name, c.logits, 20, dl, ce_fwd, &c, 1, &R, 1e-2f, 1e-3);
    free(c.logits), free(c.probs), free(c.losses), free(c.lse), free(dl), free(set);
}

/* crossentropy_backward_bf16 writes the bf16 rounding of crossentropy_backward_into's values bit
 * for bit (vocabularies 1..40 and 1000: the vectors' tails; the target in a vector and in a tail;
 * a row without a target; the z-loss; no counted row at all) */
static void test_crossentropy_bf16(void) {
    int bad = 0;
    for (int V = 1; V <= 1000; V = V < 40 ? V + 1 : 1001)
        for (int variant = 0; variant < 3; variant++) {
            const int N = 4;
            const float z = variant == 1 ? 0.1f : 0.0f;
            int targets[4] = {V - 1, -1, V / 2, 0};
            if (variant == 2) targets[0] = targets[2] = targets[3] = -1;
            float *lg = rand_vec((size_t)N * V, 3.0f), *pr = zeros((size_t)N * V), *ls = zeros(N), *lse = zeros(N);
            float *d = unset((size_t)N * V), sq;
            uint16_t *d16 = malloc(sizeof(uint16_t) * N * V);
            for (int i = 0; i < N * V; i++) lg[i] *= 4.0f, d16[i] = 0x7fc1; /* (garbage to be overwritten) */
            int counted;
            crossentropy_forward(ls, lse, pr, lg, targets, N, V, &counted, &sq);
            crossentropy_backward_into(d, pr, lse, targets, N, V, 0.7f, counted, z);
            crossentropy_backward_bf16(d16, pr, lse, targets, N, V, 0.7f, counted, z);
            for (int i = 0; i < N * V; i++) bad += d16[i] != tlm_f32_to_bf16(d[i]);
            free(lg), free(pr), free(ls), free(lse), free(d), free(d16);
        }
    checks++;
    failures += bad != 0;
    printf("%-44s %s\n", "crossentropy_backward_bf16 = bf16(_into)", bad ? "FAIL" : "ok");
}

/* the loss, the probabilities and lse against float64, for vocabularies of 1..70 (the lanes'
 * tails) and 1000, logits far from 0; a NaN logit gives a NaN loss and NaN probabilities */
static void test_crossentropy_values(void) {
    double worst = 0.0;
    int nan_ok = 1;
    for (int V = 1; V <= 1000; V = V < 70 ? V + 1 : 1000) {
        const int N = 3;
        float *lg = rand_vec((size_t)N * V, 8), *pr = unset((size_t)N * V), *ls = unset(N), *lse = unset(N);
        for (int i = 0; i < N * V; i++) lg[i] += 30.0f;
        int targets[3] = {0, V - 1, V / 2}, counted;
        float sq, mean = crossentropy_forward(ls, lse, pr, lg, targets, N, V, &counted, &sq);
        double total = 0.0;
        for (int n = 0; n < N; n++) {
            const float *z = lg + (size_t)n * V;
            double mx = z[0], sum = 0.0;
            for (int v = 1; v < V; v++) mx = fmax(mx, z[v]);
            for (int v = 0; v < V; v++) sum += exp(z[v] - mx);
            const double l = mx + log(sum), loss = l - z[targets[n]];
            total += loss;
            worst = fmax(worst, fabs(ls[n] - loss) / fmax(1.0, fabs(loss)));
            worst = fmax(worst, fabs(lse[n] - l) / fabs(l));
            for (int v = 0; v < V; v++) worst = fmax(worst, fabs(pr[(size_t)n * V + v] - exp(z[v] - l)));
        }
        worst = fmax(worst, fabs(mean - total / N) / fmax(1.0, total / N));
        lg[V / 2] = NAN; /* row 0 */
        crossentropy_forward(ls, lse, pr, lg, targets, N, V, &counted, &sq);
        nan_ok &= isnan(ls[0]) && isnan(pr[0]) && !isnan(ls[1]);
        free(lg), free(pr), free(ls), free(lse);
        if (V == 1000) break;
    }
    checks += 2;
    failures += !(worst <= 2e-6) + !nan_ok;
    printf("%-44s max err %.2e %s\n", "crossentropy vs float64, V 1..70 and 1000", worst, worst <= 2e-6 ? "ok" : "FAIL");
    printf("%-44s %s\n", "crossentropy: a NaN logit gives a NaN loss", nan_ok ? "ok" : "FAIL");
}

/* the libm-free tanh/exp behind GELU, SiLU and soft-caps, against libm in double */
static void test_tanh_approx(void) {
    double worst_tanh = 0, worst_silu = 0;
    for (int i = -200000; i <= 200000; i++) {
        float x = i * 1e-4f; /* [-20, 20] */
        worst_tanh = fmax(worst_tanh, fabs(tanh_approx(x) - tanh((double)x)));
        double silu = x / (1.0 + exp(-(double)x));
        worst_silu = fmax(worst_silu, fabs(act_apply(ACT_SILU, x) - silu) / fmax(1.0, fabs(silu)));
    }
    int nan_ok = isnan(tanh_approx(NAN)) && isnan(act_apply(ACT_SILU, NAN)) && tanh_approx(INFINITY) == 1.0f &&
                 tanh_approx(-INFINITY) == -1.0f;
    checks += 3;
    failures += !nan_ok;
    printf("%-44s %s\n", "tanh_approx/silu: NaN propagates, +-inf -> +-1", nan_ok ? "ok" : "FAIL");
    failures += worst_tanh > 3e-7;
    failures += worst_silu > 3e-7;
    printf("%-44s max abs err %.2e %s\n", "tanh_approx vs libm tanh on [-20, 20]", worst_tanh, worst_tanh <= 3e-7 ? "ok" : "FAIL");
    printf("%-44s max rel err %.2e %s\n", "silu (exp_approx) vs libm on [-20, 20]", worst_silu, worst_silu <= 3e-7 ? "ok" : "FAIL");
}

/* softcap_forward against cap * tanh(x / cap) in double, relative to the value, for caps from 1
 * to 1e38: a cap far above the logits leaves them as they are (1 - 2/(e^{2u} + 1) alone zeroed
 * every logit below cap * 6e-8: all of them for a cap of 1e38) */
static void test_softcap_range(void) {
    enum { N = 4001 };
    static float x[N], y[N];
    const float caps[] = {1.0f, 30.0f, 50.0f, 1e4f, 1e20f, 1e38f, 3.4e38f};
    double worst = 0;
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        for (int i = 0; i < N; i++) x[i] = (float)((i - N / 2) * 0.05); /* [-100, 100] */
        softcap_forward(y, x, N, caps[c]);
        for (int i = 0; i < N; i++) {
            const double ref = (double)caps[c] * tanh((double)x[i] / caps[c]);
            /* (tanh's absolute 3e-7 is at most 5e-6 of the value where |x / cap| >= 1/16) */
            const double err = ref == 0.0 ? fabs((double)y[i]) : fabs(y[i] - ref) / fabs(ref);
            worst = fmax(worst, isfinite(err) ? err : 1.0);
        }
    }
    const int ok = worst <= 1e-5;
    checks++;
    failures += !ok;
    printf("%-44s max rel err %.2e %s\n", "softcap vs libm, caps 1 .. 3.4e38", worst, ok ? "ok" : "FAIL");
}

/* act_forward / act_backward over an array (the kernels the model runs: AVX-512 where the CPU
 * has it, the portable loops under TLM_ISA=avx2), against float64 GELU-tanh and SiLU and their
 * derivatives on [-20, 20] (1e-6 and, for the derivative's longer float formula, 5e-6 relative),
 * 400001 values (several threads' shares and a partial vector), and
 * NaN through both */
static void test_act_arrays(void) {
    const size_t n = 400001;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *dy = malloc(n * sizeof(float));
    float *ones = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = -20.0f + 1e-4f * (float)i, ones[i] = 1.0f;
    x[n / 3] = NAN;
    const activation acts[2] = {ACT_GELU_TANH, ACT_SILU};
    const char *names[2] = {"gelu_tanh", "silu"};
    float *du = malloc(n * sizeof(float));
    for (int a = 0; a < 4; a++) {
        const int gated = a >= 2; /* glu with up = 1: out = act(gate), dgate = act'(gate), dup = act(gate) */
        if (gated) {
            glu_forward(y, x, ones, n, acts[a - 2]);
            glu_backward(dy, du, ones, x, ones, n, acts[a - 2]);
            for (size_t i = 0; i < n; i++) /* dup must equal the forward */
                if (!(du[i] == y[i]) && !(isnan(du[i]) && isnan(y[i]))) dy[i] = NAN, y[i] = 0.0f;
        } else {
            act_forward(y, x, n, acts[a]);
            act_backward(dy, ones, x, n, acts[a]);
        }
        double worst = 0, worst_grad = 0;
        for (size_t i = 0; i < n; i++) {
            if (i == n / 3) continue;
            const double v = x[i];
            double f, g;
            if (acts[a % 2] == ACT_GELU_TANH) {
                const double k = sqrt(2.0 / M_PI), t = tanh(k * (v + 0.044715 * v * v * v));
                f = 0.5 * v * (1.0 + t);
                g = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * v * v);
            } else {
                const double sg = 1.0 / (1.0 + exp(-v));
                f = v * sg;
                g = sg * (1.0 + v * (1.0 - sg));
            }
            worst = fmax(worst, fabs(y[i] - f) / fmax(1.0, fabs(f)));
            worst_grad = fmax(worst_grad, fabs(dy[i] - g) / fmax(1.0, fabs(g)));
        }
        const int ok = worst <= 1e-6 && worst_grad <= 5e-6 && isnan(y[n / 3]) && isnan(dy[n / 3]);
        checks++;
        failures += !ok;
        printf("%s%-*s err %.2e, grad err %.2e, NaN kept %s\n", gated ? "glu " : "", gated ? 40 : 44, names[a % 2],
               worst, worst_grad, ok ? "ok" : "FAIL");
    }
    free(x), free(y), free(dy), free(ones), free(du);
}

int main(void) {
    if (isa_cap_changes_nothing("test_ops_gradcheck")) return ISA_CAP_SKIP;
    rng_seed(&rng, 1234);
    test_tanh_approx();
    test_softcap_range();
    test_act_arrays();
    test_matmul();
    test_norm(1, 0.0f, 1);
    test_norm(1, 0.0f, 0);
    test_norm(0, 0.0f, 0);
    test_norm(0, 1.0f, 0);
    test_rmsnorm_no_weight();
    test_dyt(1);
    test_dyt(0);
    const int pads[2] = {2, 0}, pads3[3] = {0, 3, 1}; /* (left padding: each row's first real token) */
    test_embedding(NULL);
    test_embedding(pads);
    test_rope(NULL);
    test_rope(pads);
    test_attention_padded("GQA softcap left-padded", 2, 5, 4, 2, 4, 2.0f, 0, pads);
    test_attention_padded("MQA window left-padded", 3, 6, 3, 1, 4, 0.0f, 3, pads3);
    test_attention_padded("hd 32 MHA left-padded", 3, 23, 2, 2, 32, 0.0f, 0, pads3);
    test_attention("MHA", 2, 5, 2, 2, 4, 0.0f, 0);
    test_attention("GQA softcap", 2, 5, 4, 2, 4, 2.0f, 0);
    test_attention("MQA window", 2, 5, 3, 1, 4, 0.0f, 2);
    /* three query blocks of 64 (the last partial): keys above the diagonal blocks are skipped,
     * and with a window the blocks also start past key 0 */
    test_attention("T 150 MHA", 1, 150, 2, 2, 4, 0.0f, 0);
    test_attention("T 150 GQA softcap window", 1, 150, 4, 2, 4, 2.0f, 70);
    /* heads of 8k floats: with AVX-512 the register-tile kernels (attention_tiles.c), partial
     * 8-row and 8-key tiles, 32-float column chunks (80 = 2 x 32 + 16), windows starting mid-chunk */
    test_attention("hd 32 MHA", 2, 23, 2, 2, 32, 0.0f, 0);
    test_attention("hd 80 MQA window", 1, 70, 2, 1, 80, 0.0f, 29);
    test_attention("hd 16 T 150 GQA softcap window", 1, 150, 4, 2, 16, 2.0f, 53);
    /* heads of 16k + 8 floats end in half a vector (8: stories260K's heads; 24 = 16 + 8; 40 = 32 + 8):
     * each head's columns are stored, its neighbour's left alone */
    test_attention("hd 8 T 150 MQA softcap window", 1, 150, 2, 1, 8, 2.0f, 53);
    test_attention("hd 8 MHA", 2, 40, 4, 4, 8, 0.0f, 0);
    test_attention("hd 24 MHA", 2, 23, 2, 2, 24, 0.0f, 0);
    test_attention("hd 40 MQA window", 1, 40, 2, 1, 40, 0.0f, 29);
    test_attention_padded("hd 8 GQA left-padded", 3, 23, 4, 2, 8, 0.0f, 0, pads3);
    /* T a multiple of 16: a streamed cache's maps written by the block softmax itself */
    test_attention("hd 8 T 96 GQA", 1, 96, 4, 2, 8, 0.0f, 0);
    test_attention("hd 16 T 80 MQA window", 1, 80, 2, 1, 16, 0.0f, 37);
    test_attention_padded("hd 8 T 32 MQA left-padded", 3, 32, 2, 1, 8, 0.0f, 0, pads3);
    test_attention("hd 8 T 64 softcap", 1, 64, 2, 2, 8, 2.0f, 0);
    test_activations();
    test_crossentropy_values();
    test_crossentropy_bf16();
    test_crossentropy(0.0f, 0.0f);
    test_crossentropy(1e-2f, 3.0f);
    test_crossentropy(0.5f, -2.0f);
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures != 0;
}
