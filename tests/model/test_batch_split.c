/* test_batch_split.c — a batch split across the threads (model.c: each thread runs the pass
 * over its sequences, the weight gradients summed per thread and added in order) computes what
 * the unsplit pass does, for every architecture variant:
 *   - the loss, its row count and mean lse^2 (with ignored targets in one part only, so the
 *     parts' means must be weighted by their counts), the logits, every weight gradient and the
 *     residual stream's gradients agree to float rounding;
 *   - the split pass is reproducible: a second run is bit-identical;
 *   - gradients accumulate over two backward passes (gradient accumulation) as unsplit;
 *   - the backward from given logit gradients, and the inference layouts (every position, the
 *     last of each row) agree too;
 *   - a batch that divides among the threads only nearly (17 sequences on 2) is split too,
 *     with the same results; a small one that does not (3 on 2) is not split; the caller's
 *     thread count is the same after a split pass;
 *   - the gradient norm a split backward takes while it sums the parts (model_backward_norm) is
 *     grad_global_norm's of the summed gradient bit for bit; an unsplit pass (here: observed)
 *     gives none (-1). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "train/optim.h"
#include "variants.h"
#include "model/context.h"

enum { T = 8, MAX_B = 17 };

static int failures;

static void check(int ok, const char *variant, const char *what) {
    if (!ok) failures++, printf("  FAIL %s: %s\n", variant, what);
}

/* worst |a - b| relative to the largest |b| */
static double rel_diff(const float *a, const float *b, size_t n) {
    double worst = 0.0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > worst || d != d) worst = d != d ? INFINITY : d;
        if (fabs(b[i]) > scale) scale = fabs(b[i]);
    }
    return worst / scale;
}

typedef struct {
    float loss, lse_sq;
    double norm, norm_ref; /* model_backward_norm's at the second backward, grad_global_norm's after */
    int counted;
    float *logits, *grads, *dres;
} pass;

/* the unsplit pass: an observer that needs the whole batch */
static const model_observer WHOLE = {.needs = OBSERVE_WHOLE_BATCH};

/* forward with targets and two backward passes into zeroed gradients (accumulation) */
static pass run(const tlm_config *c, int B, int split, const int *tok, const int *tgt, const float *dlogits) {
    tlm_model *m = model_create(c);
    model_init_weights(m, 11);
    if (!split) model_observe(m, &WHOLE);
    model_alloc_grads(m);
    model_zero_grads(m);
    pass r = {0};
    const size_t NV = (size_t)B * T * c->vocab_size, Nd = (size_t)B * T * c->d_model;
    for (int k = 0; k < 2; k++) {
        model_forward(m, tok, tgt, B, T, &r.loss);
        if (dlogits)
            model_backward_from_logits(m, dlogits);
        else if (k == 1)
            model_backward_norm(m, 0.5f, &r.norm);
        else
            model_backward(m, 0.5f);
    }
    r.norm_ref = grad_global_norm(m);
    r.lse_sq = m->ctx->acts.lse_sq_mean, r.counted = m->ctx->acts.n_counted;
    r.logits = malloc(NV * sizeof(float)), r.grads = malloc(m->n_params * sizeof(float));
    r.dres = malloc((2 * (size_t)c->n_layers + 1) * Nd * sizeof(float));
    memcpy(r.logits, m->ctx->acts.logits, NV * sizeof(float));
    memcpy(r.grads, m->ctx->grad_mem, m->n_params * sizeof(float));
    memcpy(r.dres, m->ctx->acts.dres, (2 * (size_t)c->n_layers + 1) * Nd * sizeof(float));
    check((m->ctx->split != NULL) == split, "", split ? "the pass was not split" : "the pass was split");
    check(omp_get_max_threads() == 2, "", "the split left the caller's thread count changed");
    model_free(m);
    return r;
}

static void pass_free(pass *p) { free(p->logits), free(p->grads), free(p->dres); }

/* logits of an inference forward (every position, or the last of each row) */
static float *infer(const tlm_config *c, int split, model_mode mode, const int *tok, int batch, int expect_split) {
    tlm_model *m = model_create(c);
    model_init_weights(m, 11);
    if (!split) model_observe(m, &WHOLE);
    model_set_mode(m, mode);
    model_forward(m, tok, NULL, batch, T, NULL);
    const size_t n = (size_t)m->ctx->acts.logits_rows * c->vocab_size;
    float *out = malloc(n * sizeof(float));
    memcpy(out, m->ctx->acts.logits, n * sizeof(float));
    check((m->ctx->split != NULL) == (split && expect_split), "", "split taken where it should not be, or not taken");
    model_free(m);
    return out;
}

int main(void) {
    omp_set_num_threads(2); /* the split needs two threads, whatever the machine has */
    const int n = (int)(sizeof VARIANTS / sizeof VARIANTS[0]);
    int tok[MAX_B * T], tgt[MAX_B * T];
    for (int j = 0; j < MAX_B * T; j++) tok[j] = (j * 7 + 3) % 40, tgt[j] = (j * 5 + 1) % 40;
    tgt[2 * T + 1] = tgt[3 * T + 4] = tgt[3 * T + 5] = -1; /* ignored: in the second half of 4 */
    tgt[12 * T + 2] = -1;                                    /* and of 17 */
    for (int i = 0; i < n; i++) {
        const char *name = VARIANTS[i].name;
        tlm_config c;
        variant_config(&c, &VARIANTS[i]);
        if (config_validate(&c, name)) return printf("invalid variant %s\n", name), 1;
        const int before = failures;
        tlm_model *probe = model_create(&c);
        const size_t P = probe->n_params;
        model_free(probe);
        for (int B = 4; B <= MAX_B; B += MAX_B - 4) { /* 4 (even parts) and 17 (8 + 9) */
            const size_t NV = (size_t)B * T * c.vocab_size, R = (2 * (size_t)c.n_layers + 1) * B * T * c.d_model;
            pass whole = run(&c, B, 0, tok, tgt, NULL), split = run(&c, B, 1, tok, tgt, NULL);
            pass again = run(&c, B, 1, tok, tgt, NULL);
            check(whole.counted == B * T - (B == 4 ? 3 : 4) && split.counted == whole.counted, name, "counted rows");
            check(fabsf(split.loss - whole.loss) <= 1e-6f * fabsf(whole.loss), name, "loss");
            check(fabsf(split.lse_sq - whole.lse_sq) <= 1e-6f * fabsf(whole.lse_sq), name, "mean lse^2");
            check(rel_diff(split.logits, whole.logits, NV) < 1e-5, name, "logits");
            check(rel_diff(split.grads, whole.grads, P) < 1e-5, name, "weight gradients (accumulated over two passes)");
            check(rel_diff(split.dres, whole.dres, R) < 1e-5, name, "residual stream gradients");
            check(!memcmp(split.grads, again.grads, P * sizeof(float)) && split.loss == again.loss, name,
                  "a second split run is bit-identical");
            check(split.norm >= 0.0 && !memcmp(&split.norm, &split.norm_ref, sizeof(double)), name,
                  "the split backward's gradient norm is grad_global_norm's");
            check(fabs(split.norm - whole.norm_ref) <= 1e-5 * whole.norm_ref, name, "gradient norm, split and unsplit");
            check(whole.norm == -1.0, name, "an unsplit backward took a gradient norm");

            float *dl = malloc(NV * sizeof(float));
            for (size_t j = 0; j < NV; j++) dl[j] = (float)((j * 37) % 101) / 101.0f - 0.5f;
            pass whole_l = run(&c, B, 0, tok, tgt, dl), split_l = run(&c, B, 1, tok, tgt, dl);
            check(rel_diff(split_l.grads, whole_l.grads, P) < 1e-5, name, "gradients from given logit gradients");

            float *a = infer(&c, 0, MODEL_INFER, tok, B, 1), *b = infer(&c, 1, MODEL_INFER, tok, B, 1);
            check(rel_diff(b, a, NV) < 1e-5, name, "inference logits, every position");
            float *la = infer(&c, 0, MODEL_INFER_LAST, tok, B, 1), *lb = infer(&c, 1, MODEL_INFER_LAST, tok, B, 1);
            check(rel_diff(lb, la, (size_t)B * c.vocab_size) < 1e-5, name, "inference logits, last positions");
            pass_free(&whole), pass_free(&split), pass_free(&again), pass_free(&whole_l), pass_free(&split_l);
            free(dl), free(a), free(b), free(la), free(lb);
        }
        float *oa = infer(&c, 0, MODEL_INFER, tok, 3, 0), *ob = infer(&c, 1, MODEL_INFER, tok, 3, 0);
        check(!memcmp(oa, ob, (size_t)3 * T * c.vocab_size * sizeof(float)), name, "an odd batch (not split)");
        printf("%-44s %s\n", name, failures == before ? "ok" : "FAIL");
        free(oa), free(ob);
    }
    { /* the norm taken piece by piece over chunks longer than the gradient sum's 4096-float pieces:
       * a 16384-token vocabulary makes 2 x 16384 x 32 embedding and head weights */
        tlm_config c;
        variant_config(&c, &VARIANTS[0]);
        c.vocab_size = 16384;
        pass big = run(&c, 4, 1, tok, tgt, NULL);
        check(big.norm >= 0.0 && !memcmp(&big.norm, &big.norm_ref, sizeof(double)), "16384-token vocabulary",
              "the split backward's gradient norm is grad_global_norm's");
        pass_free(&big);
    }
    printf("%s\n", failures ? "FAILED" : "all variants agree split and unsplit");
    return failures != 0;
}
