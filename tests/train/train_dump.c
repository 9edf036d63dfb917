/* train_dump.c — test tool for the training-trajectory test (tests/train/test_train_parity.py).
 *   train_dump CASE_DIR OUT_DIR KEY=VALUE...
 * loads CASE_DIR (config.json + model.safetensors) and trains it on the batches of
 * CASE_DIR/tokens.npy and targets.npy (int32 [steps, accum, B, T]) exactly as the trainer's
 * step does (src/train/trainer.c: zero the gradients; per micro-batch forward + backward
 * scaled by 1/accum; global gradient norm; adamw_step with lr_at(step)). The optimizer
 * settings come as KEY=VALUE: lr, min_lr, beta1, beta2, eps, weight_decay, grad_clip,
 * warmup_steps, total_steps, decay_embeddings (0/1), and z_loss (the model's z-loss coefficient).
 * Writes float32 .npy files:
 *   OUT_DIR/loss.npy [steps] (the mean over the micro-batches, as the trainer logs it),
 *   OUT_DIR/grad_norm.npy [steps] (before clipping), OUT_DIR/lr.npy [steps],
 *   OUT_DIR/lse_sq.npy [steps] (mean logsumexp^2, averaged over the micro-batches),
 *   OUT_DIR/params/<tensor>.npy (the weights after the last step). */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../case_io.h"
#include "formats/npy.h"
#include "convert/checkpoint.h"
#include "train/optim.h"
#include "util/error.h"
#include "util/io.h"
#include "model/context.h"

/* the optimizer settings KEY=VALUE may set */
static const struct {
    const char *key;
    size_t offset;
    char type; /* f float, i int, b bool */
} OPTIONS[] = {
    {"lr", offsetof(optim_config, lr), 'f'},
    {"min_lr", offsetof(optim_config, min_lr), 'f'},
    {"beta1", offsetof(optim_config, beta1), 'f'},
    {"beta2", offsetof(optim_config, beta2), 'f'},
    {"eps", offsetof(optim_config, eps), 'f'},
    {"weight_decay", offsetof(optim_config, weight_decay), 'f'},
    {"grad_clip", offsetof(optim_config, grad_clip), 'f'},
    {"warmup_steps", offsetof(optim_config, warmup_steps), 'i'},
    {"total_steps", offsetof(optim_config, total_steps), 'i'},
    {"decay_embeddings", offsetof(optim_config, decay_embeddings), 'b'},
};

static int set_option(optim_config *c, float *z_loss, const char *arg) {
    const char *eq = strchr(arg, '=');
    char *end = NULL;
    if (!eq) return tlm_error("option %s: want KEY=VALUE", arg);
    const double v = strtod(eq + 1, &end);
    if (end == eq + 1 || *end) return tlm_error("option %s: not a number", arg);
    if (!strncmp(arg, "z_loss=", 7)) return (*z_loss = (float)v), 0;
    for (size_t i = 0; i < sizeof OPTIONS / sizeof OPTIONS[0]; i++) {
        if (strlen(OPTIONS[i].key) != (size_t)(eq - arg) || strncmp(arg, OPTIONS[i].key, (size_t)(eq - arg))) continue;
        char *field = (char *)c + OPTIONS[i].offset;
        if (OPTIONS[i].type == 'f') *(float *)field = (float)v;
        if (OPTIONS[i].type == 'i') *(int *)field = (int)v;
        if (OPTIONS[i].type == 'b') *(bool *)field = v != 0;
        return 0;
    }
    return tlm_error("option %s: unknown key", arg);
}

/* the whole run; 0, or -1 + tlm_error */
static int train_dump(const char *case_dir, const char *out, int n_options, char **options) {
    char path[4096];
    tlm_npy tok = {0}, tgt = {0};
    adamw opt = {0};
    float *losses = NULL, *lrs = NULL, *norms = NULL, *lse_sq = NULL;
    optim_config oc = {0};
    int rc = -1;
    tlm_model *m = model_load_dir(case_dir);
    if (!m) goto fail;
    for (int i = 0; i < n_options; i++)
        if (set_option(&oc, &m->ctx->z_loss, options[i])) goto fail;
    if (case_read_batches(case_dir, 4, "[steps, accum, B, T]", &tok, &tgt)) goto fail;
    const int steps = (int)tok.shape[0], accum = (int)tok.shape[1], B = (int)tok.shape[2], T = (int)tok.shape[3];
    losses = calloc((size_t)steps, sizeof *losses);
    lrs = calloc((size_t)steps, sizeof *lrs);
    norms = calloc((size_t)steps, sizeof *norms);
    lse_sq = calloc((size_t)steps, sizeof *lse_sq);
    if (!losses || !lrs || !norms || !lse_sq || model_alloc_grads(m) || adamw_init(&opt, m, &oc)) goto fail;
    const int *tokens = tok.data, *targets = tgt.data;
    for (int s = 0; s < steps; s++) {
        model_zero_grads(m);
        double loss_sum = 0.0;
        for (int a = 0; a < accum; a++) {
            const size_t at = ((size_t)s * accum + a) * B * T;
            float loss = 0.0f;
            if (model_forward(m, tokens + at, targets + at, B, T, &loss) || model_backward(m, 1.0f / accum)) goto fail;
            loss_sum += loss;
            lse_sq[s] += m->ctx->acts.lse_sq_mean / accum;
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
    snprintf(path, sizeof path, "%s/lse_sq.npy", out);
    if (tlm_npy_write_f32(path, 1, &n, lse_sq)) goto fail;
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
    adamw_free(&opt);
    free(losses), free(lrs), free(norms), free(lse_sq);
    tlm_npy_free(&tok);
    tlm_npy_free(&tgt);
    model_free(m);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: train_dump CASE_DIR OUT_DIR KEY=VALUE...\n");
        return 2;
    }
    if (train_dump(argv[1], argv[2], argc - 3, argv + 3) == 0) return 0;
    fprintf(stderr, "train_dump: %s\n", tlm_last_error());
    return 1;
}
