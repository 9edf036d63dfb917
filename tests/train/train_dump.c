/* train_dump.c — test tool for the training-trajectory test (tests/train/test_train_parity.py).
 *   train_dump CASE_DIR OUT_DIR KEY=VALUE...
 * loads CASE_DIR (config.json + model.safetensors) and trains it on the batches of
 * CASE_DIR/tokens.npy and targets.npy (int32 [steps, accum, B, T]) exactly as the trainer's
 * step does (src/train/trainer.c: zero the gradients; per micro-batch forward + backward
 * scaled by 1/accum; global gradient norm; adamw_step with lr_at(step)). The optimizer
 * settings come as KEY=VALUE: lr, min_lr, beta1, beta2, eps, weight_decay, grad_clip,
 * warmup_steps, total_steps, decay_embeddings (0/1). Writes float32 .npy files:
 *   OUT_DIR/loss.npy [steps] (the mean over the micro-batches, as the trainer logs it),
 *   OUT_DIR/grad_norm.npy [steps] (before clipping), OUT_DIR/lr.npy [steps],
 *   OUT_DIR/params/<tensor>.npy (the weights after the last step). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/npy.h"
#include "model/checkpoint.h"
#include "train/optim.h"
#include "util/error.h"
#include "util/io.h"

static int set_option(optim_config *c, const char *arg) {
    const char *eq = strchr(arg, '=');
    char *end = NULL;
    if (!eq) return tlm_error("option %s: want KEY=VALUE", arg);
    const double v = strtod(eq + 1, &end);
    if (end == eq + 1 || *end) return tlm_error("option %s: not a number", arg);
    const size_t n = (size_t)(eq - arg);
#define KEY(k) (n == strlen(k) && !strncmp(arg, k, n))
    if (KEY("lr")) c->lr = (float)v;
    else if (KEY("min_lr")) c->min_lr = (float)v;
    else if (KEY("beta1")) c->beta1 = (float)v;
    else if (KEY("beta2")) c->beta2 = (float)v;
    else if (KEY("eps")) c->eps = (float)v;
    else if (KEY("weight_decay")) c->weight_decay = (float)v;
    else if (KEY("grad_clip")) c->grad_clip = (float)v;
    else if (KEY("warmup_steps")) c->warmup_steps = (int)v;
    else if (KEY("total_steps")) c->total_steps = (int)v;
    else if (KEY("decay_embeddings")) c->decay_embeddings = v != 0;
    else return tlm_error("option %s: unknown key", arg);
#undef KEY
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: train_dump CASE_DIR OUT_DIR KEY=VALUE...\n");
        return 2;
    }
    const char *case_dir = argv[1], *out = argv[2];
    char path[4096];
    tlm_npy tok = {0}, tgt = {0};
    adamw opt = {0};
    float *losses = NULL, *lrs = NULL, *norms = NULL;
    optim_config oc = {0};
    int rc = 1;
    tlm_model *m = model_load_dir(case_dir);
    if (!m) goto fail;
    for (int i = 3; i < argc; i++)
        if (set_option(&oc, argv[i])) goto fail;
    snprintf(path, sizeof path, "%s/tokens.npy", case_dir);
    if (tlm_npy_read_as(path, TLM_DT_I32, &tok)) goto fail;
    snprintf(path, sizeof path, "%s/targets.npy", case_dir);
    if (tlm_npy_read_as(path, TLM_DT_I32, &tgt)) goto fail;
    if (tok.ndim != 4 || tgt.ndim != 4 || memcmp(tok.shape, tgt.shape, 4 * sizeof tok.shape[0])) {
        tlm_error("%s: tokens.npy and targets.npy must both be [steps, accum, B, T]", case_dir);
        goto fail;
    }
    const int steps = (int)tok.shape[0], accum = (int)tok.shape[1], B = (int)tok.shape[2], T = (int)tok.shape[3];
    losses = calloc((size_t)steps, sizeof *losses);
    lrs = calloc((size_t)steps, sizeof *lrs);
    norms = calloc((size_t)steps, sizeof *norms);
    if (!losses || !lrs || !norms || model_alloc_grads(m) || adamw_init(&opt, m, &oc)) goto fail;
    const int *tokens = tok.data, *targets = tgt.data;
    for (int s = 0; s < steps; s++) {
        model_zero_grads(m);
        double loss_sum = 0.0;
        for (int a = 0; a < accum; a++) {
            const size_t at = ((size_t)s * accum + a) * B * T;
            float loss = 0.0f;
            if (model_forward(m, tokens + at, targets + at, B, T, &loss) || model_backward(m, 1.0f / accum)) goto fail;
            loss_sum += loss;
        }
        losses[s] = (float)(loss_sum / accum);
        const double norm = grad_global_norm(m);
        norms[s] = (float)norm;
        lrs[s] = lr_at(&oc, s);
        adamw_step(&opt, m, lrs[s], norm);
    }

    snprintf(path, sizeof path, "%s/params", out);
    if (make_dirs(path)) goto fail;
    int64_t n = steps;
    snprintf(path, sizeof path, "%s/loss.npy", out);
    if (tlm_npy_write_f32(path, 1, &n, losses)) goto fail;
    snprintf(path, sizeof path, "%s/lr.npy", out);
    if (tlm_npy_write_f32(path, 1, &n, lrs)) goto fail;
    snprintf(path, sizeof path, "%s/grad_norm.npy", out);
    if (tlm_npy_write_f32(path, 1, &n, norms)) goto fail;
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_info *t = &m->tensors[i];
        int64_t shape[2] = {t->shape[0], t->shape[1]};
        snprintf(path, sizeof path, "%s/params/%s.npy", out, t->name);
        if (tlm_npy_write_f32(path, t->ndim, shape, model_param(m, i))) goto fail;
    }
    rc = 0;
fail:
    if (rc) fprintf(stderr, "train_dump: %s\n", tlm_last_error());
    adamw_free(&opt);
    free(losses), free(lrs), free(norms);
    tlm_npy_free(&tok);
    tlm_npy_free(&tgt);
    model_free(m);
    return rc;
}
