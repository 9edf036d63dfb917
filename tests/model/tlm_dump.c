/* tlm_dump.c — test tool for the PyTorch parity test (tests/parity/).
 *   tlm_dump CASE_DIR OUT_DIR [--precision bf16]
 * loads CASE_DIR (config.json + model.safetensors), runs forward and backward on
 * CASE_DIR/tokens.npy and targets.npy (int32 [B,T]) and writes, as float32 .npy:
 *   OUT_DIR/logits.npy [B,T,V], OUT_DIR/loss.npy [1], OUT_DIR/grad/<tensor>.npy,
 *   OUT_DIR/dx/layers.<N>.npy [B,T,d] (gradient of the residual stream entering block N).
 * --precision bf16: the pass in mixed precision (model_set_mixed_bf16); exit 77 (a skip) on a
 * CPU without bf16 products. It prints whether the attention's products are bf16 too
 * ("attention products: bf16|f32"). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../case_io.h"
#include "formats/npy.h"
#include "convert/checkpoint.h"
#include "util/error.h"
#include "util/io.h"
#include "model/context.h"

static int write_f32(const char *dir, const char *name, int ndim, const int64_t *shape, const float *data) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    return tlm_npy_write_f32(path, ndim, shape, data);
}

int main(int argc, char **argv) {
    const int bf16 = argc == 5 && !strcmp(argv[3], "--precision") && !strcmp(argv[4], "bf16");
    if (argc != 3 && !bf16) {
        fprintf(stderr, "usage: tlm_dump CASE_DIR OUT_DIR [--precision bf16]\n");
        return 2;
    }
    const char *case_dir = argv[1], *out = argv[2];
    char sub[4096];
    tlm_npy tok = {0}, tgt = {0};
    tlm_model *m = model_load_dir(case_dir);
    int rc = 1;
    if (!m) goto fail;
    if (bf16) {
        const char *why = NULL;
        const int on = model_set_mixed_bf16(m, 1, &why);
        if (on < 0) goto fail;
        if (!on) {
            fprintf(stderr, "tlm_dump: no bf16 products here: %s\n", why);
            model_free(m);
            return 77;
        }
    }
    if (bf16) { /* which products the attention rounds (attention_bf16_products): the oracle does the same */
        attention_spec spec = model_layer_attention(&m->cfg, 0);
        spec.bf16 = 1;
        printf("attention products: %s\n", attention_bf16_products(&spec) ? "bf16" : "f32");
    }
    /* training options beside the model (train.json, optional): the load-balancing loss's coefficient */
    snprintf(sub, sizeof sub, "%s/train.json", case_dir);
    if (access(sub, F_OK) == 0) {
        size_t n;
        char *text = read_text_file(sub, &n);
        cJSON *o = text ? cJSON_Parse(text) : NULL;
        const cJSON *coef = cJSON_GetObjectItemCaseSensitive(o, "router_aux_loss_coef");
        if (cJSON_IsNumber(coef)) m->ctx->router_aux = (float)coef->valuedouble;
        cJSON_Delete(o);
        free(text);
        if (!o) {
            tlm_error("%s: not valid JSON", sub);
            goto fail;
        }
    }
    if (case_read_batches(case_dir, 2, "[B, T]", &tok, &tgt)) goto fail;
    const int B = (int)tok.shape[0], T = (int)tok.shape[1], V = m->cfg.vocab_size, d = m->cfg.d_model;
    float loss;
    if (model_forward(m, tok.data, tgt.data, B, T, &loss) || model_backward(m, 1.0f)) goto fail;

    snprintf(sub, sizeof sub, "%s/grad", out);
    if (make_dirs(sub)) goto fail;
    snprintf(sub, sizeof sub, "%s/dx", out);
    if (make_dirs(sub)) goto fail;
    int64_t lshape[3] = {B, T, V}, one = 1, xshape[3] = {B, T, d};
    if (write_f32(out, "logits", 3, lshape, m->ctx->acts.logits) || write_f32(out, "loss", 1, &one, &loss)) goto fail;
    snprintf(sub, sizeof sub, "%s/grad", out);
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_info *t = &m->tensors[i];
        int64_t shape[2] = {t->shape[0], t->shape[1]};
        if (write_f32(sub, t->name, t->ndim, shape, model_grad(m, i))) goto fail;
    }
    snprintf(sub, sizeof sub, "%s/dx", out);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        char name[64];
        snprintf(name, sizeof name, "layers.%d", l);
        if (write_f32(sub, name, 3, xshape, m->ctx->acts.dres + (size_t)2 * l * B * T * d)) goto fail;
    }
    rc = 0;
fail:
    if (rc) fprintf(stderr, "tlm_dump: %s\n", tlm_last_error());
    tlm_npy_free(&tok);
    tlm_npy_free(&tgt);
    model_free(m);
    return rc;
}
