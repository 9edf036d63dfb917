/* lens_dump.c — test tool for tests/probes/test_lens.py: the tuned lens's loss and gradient.
 *   lens_dump CASE_DIR LENS OUT_DIR
 * loads CASE_DIR (config.json + model.safetensors) and the lens file LENS, runs lens_kl with
 * the gradient on CASE_DIR/tokens.npy (int32 [B, T]) and writes float32 .npy files:
 *   OUT_DIR/kl.npy [L+1] (KL(final || lens) per stage, mean over positions),
 *   OUT_DIR/grad/<translators.K.weight|bias>.npy (the gradient of sum_k kl[k]). */
#include <stdio.h>
#include <stdlib.h>

#include "formats/npy.h"
#include "convert/checkpoint.h"
#include "model/context.h"
#include "probes/lens.h"
#include "util/error.h"
#include "util/io.h"

static int lens_dump(const char *case_dir, const char *lens_path, const char *out) {
    char path[4096];
    tlm_npy tok = {0};
    tlm_lens *lens = NULL;
    float *kl32 = NULL;
    double *kl = NULL;
    int rc = -1;
    tlm_model *m = model_load_dir(case_dir);
    if (!m || !(lens = lens_load(lens_path, m))) goto fail;
    snprintf(path, sizeof path, "%s/tokens.npy", case_dir);
    if (tlm_npy_read_as(path, TLM_DT_I32, &tok)) goto fail;
    if (tok.ndim != 2) {
        tlm_error("%s: tokens must be [B, T]", path);
        goto fail;
    }
    const int L = m->cfg.n_layers;
    kl = calloc((size_t)L + 1, sizeof *kl);
    kl32 = calloc((size_t)L + 1, sizeof *kl32);
    if (!kl || !kl32) goto fail;
    tlm_model *pm = lens_params(lens);
    model_zero_grads(pm);
    if (lens_kl(lens, m, tok.data, (int)tok.shape[0], (int)tok.shape[1], kl, 1)) goto fail;
    snprintf(path, sizeof path, "%s/grad", out);
    if (make_dirs(path)) goto fail;
    for (int k = 0; k <= L; k++) kl32[k] = (float)kl[k];
    int64_t n = L + 1;
    snprintf(path, sizeof path, "%s/kl.npy", out);
    if (tlm_npy_write_f32(path, 1, &n, kl32)) goto fail;
    for (int i = 0; i < pm->n_tensors; i++) {
        const tensor_info *t = &pm->tensors[i];
        int64_t shape[2] = {t->shape[0], t->shape[1]};
        snprintf(path, sizeof path, "%s/grad/%s.npy", out, t->name);
        if (tlm_npy_write_f32(path, t->ndim, shape, model_grad(pm, i))) goto fail;
    }
    rc = 0;
fail:
    free(kl), free(kl32);
    tlm_npy_free(&tok);
    lens_free(lens);
    model_free(m);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: lens_dump CASE_DIR LENS OUT_DIR\n");
        return 2;
    }
    if (lens_dump(argv[1], argv[2], argv[3]) == 0) return 0;
    fprintf(stderr, "lens_dump: %s\n", tlm_last_error());
    return 1;
}
