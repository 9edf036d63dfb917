/* probe_dump.c — test tool for tests/probes/test_probes.py.
 *   probe_dump CASE_DIR OUT_DIR [PATTERN ...]      (default pattern: "*")
 * Loads CASE_DIR (config.json + model.safetensors, tokens.npy and targets.npy int32 [B,T]),
 * runs forward + backward twice — first with no probe attached, then with a probe selecting
 * the patterns — and writes two files:
 *   OUT_DIR/tensors.f32   every array, float32 little-endian, one after the other
 *   OUT_DIR/tensors.json  [{"name", "shape", "offset" (in floats)}, ...] for:
 *       off.logits, off.grads (the whole gradient buffer), on.logits, on.grads, then every
 *       recorded probe under its own name
 * so the test can check that recording changes nothing and that each record is right.
 * (One plain file instead of probe_dump()'s one atomic .npy per record: hundreds of fsyncs
 * per case would dominate the test's time; probe_dump() is tested by test_probe_api.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../case_io.h"
#include "formats/npy.h"
#include "convert/checkpoint.h"
#include "probes/probe.h"
#include "util/error.h"
#include "util/io.h"
#include "model/context.h"

typedef struct {
    FILE *data, *index;
    size_t offset;
    int n;
} writer;

static int put(writer *w, const char *name, int ndim, const int64_t *shape, const float *x) {
    size_t numel = 1;
    fprintf(w->index, "%s{\"name\": \"%s\", \"shape\": [", w->n++ ? ",\n " : "[", name);
    for (int i = 0; i < ndim; i++) {
        fprintf(w->index, "%s%lld", i ? ", " : "", (long long)shape[i]);
        numel *= (size_t)shape[i];
    }
    fprintf(w->index, "], \"offset\": %zu}", w->offset);
    w->offset += numel;
    if (fwrite(x, sizeof(float), numel, w->data) != numel) return tlm_error("writing %s failed", name);
    return 0;
}

/* forward + backward; writes <tag>.logits and <tag>.grads */
static int pass(tlm_model *m, const tlm_npy *tok, const tlm_npy *tgt, writer *w, const char *tag) {
    const int B = (int)tok->shape[0], T = (int)tok->shape[1];
    float loss;
    model_zero_grads(m);
    if (model_forward(m, tok->data, tgt->data, B, T, &loss) || model_backward(m, 1.0f)) return -1;
    int64_t lshape[3] = {B, T, m->cfg.vocab_size}, gshape[1] = {(int64_t)m->n_params};
    char name[64];
    snprintf(name, sizeof name, "%s.logits", tag);
    if (put(w, name, 3, lshape, m->ctx->acts.logits)) return -1;
    snprintf(name, sizeof name, "%s.grads", tag);
    return put(w, name, 1, gshape, m->ctx->grad_mem);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: probe_dump CASE_DIR OUT_DIR [PATTERN ...]\n");
        return 2;
    }
    const char *case_dir = argv[1], *out = argv[2];
    char path[4200];
    tlm_npy tok = {0}, tgt = {0};
    tlm_probe *p = NULL;
    writer w = {0};
    int rc = 1;
    tlm_model *m = model_load_dir(case_dir);
    if (!m || model_alloc_grads(m) || make_dirs(out)) goto fail;
    if (case_read_batches(case_dir, 2, "[B, T]", &tok, &tgt)) goto fail;
    snprintf(path, sizeof path, "%s/tensors.f32", out);
    w.data = fopen(path, "wb");
    snprintf(path, sizeof path, "%s/tensors.json", out);
    w.index = fopen(path, "w");
    if (!w.data || !w.index) {
        tlm_error("%s: cannot create the output files", out);
        goto fail;
    }
    if (pass(m, &tok, &tgt, &w, "off")) goto fail;
    if (!(p = probe_create())) goto fail;
    for (int i = 3; i < argc; i++)
        if (probe_select(p, argv[i])) goto fail;
    if (argc == 3 && probe_select(p, "*")) goto fail;
    if (probe_check(p, m, 1)) goto fail;
    probe_attach(p, m);
    if (pass(m, &tok, &tgt, &w, "on")) goto fail;
    probe_detach(m);
    for (size_t i = 0; i < probe_count(p); i++) {
        const probe_tensor *t = probe_at(p, i);
        if (put(&w, t->name, t->ndim, t->shape, t->data)) goto fail;
    }
    fprintf(w.index, "]\n");
    rc = 0;
fail:
    if (w.data && fclose(w.data) && !rc) rc = 1, tlm_error("%s: write failed", out);
    if (w.index && fclose(w.index) && !rc) rc = 1, tlm_error("%s: write failed", out);
    if (rc) fprintf(stderr, "probe_dump: %s\n", tlm_last_error());
    probe_free(p);
    tlm_npy_free(&tok);
    tlm_npy_free(&tgt);
    model_free(m);
    return rc;
}
