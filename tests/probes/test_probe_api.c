/* test_probe_api.c — the probe API on its own: pattern selection and checking, what a pass
 * records (names, shapes, the attention mask written as -inf, rows of probabilities summing
 * to 1), probe_record, the empty and detached cases, dumping, and errors. The values of every
 * record against PyTorch are checked by test_probes.py. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/npy.h"
#include "convert/family.h"
#include "model/model.h"
#include "probes/probe.h"
#include "util/error.h"

#include "check_count.h"
#include "model/context.h"

static tlm_model *make_model(const char *json) {
    tlm_config cfg;
    if (config_parse(&cfg, json, "test config")) return NULL;
    tlm_model *m = model_create(&cfg);
    if (m) model_init_weights(m, 7);
    return m;
}

static int count_names(void *ctx, const char *name, int ndim, const int64_t *shape) {
    (void)name, (void)ndim, (void)shape;
    (*(int *)ctx)++;
    return 0;
}

int main(void) {
    /* 3 layers, sliding window 2 on layer 1 only: the mask differs by layer */
    tlm_model *m = make_model("{\"model_type\": \"tinylm\", \"vocab_size\": 40, \"hidden_size\": 16, "
                              "\"num_hidden_layers\": 3, \"num_attention_heads\": 2, \"intermediate_size\": 24, "
                              "\"sliding_window\": 2, \"layer_types\": [\"full_attention\", \"sliding_attention\", "
                              "\"full_attention\"]}");
    if (!m) {
        printf("FAIL: cannot build the test model: %s\n", tlm_last_error());
        return 1;
    }
    const int T = 5, H = 2, L = 3;
    int tokens[5] = {3, 14, 15, 9, 26}, targets[5] = {14, 15, 9, 26, 5};

    /* patterns */
    tlm_probe *p = probe_create();
    CHECK(probe_select(p, "") == -1, "an empty pattern is refused\n");
    CHECK(probe_select(p, "layers.*.attn.probs") == 0, "select\n");
    CHECK(probe_wants(p, "layers.2.attn.probs") && !probe_wants(p, "layers.2.attn.scores"), "glob matching\n");
    CHECK(probe_check(p, m, 0) == 0, "a matching pattern passes the check\n");
    tlm_probe *bad = probe_create();
    probe_select(bad, "layers.*.atn.probs");
    CHECK(probe_check(bad, m, 1) == -1 && strstr(tlm_last_error(), "layers.*.atn.probs"),
          "an unknown pattern is an error naming it\n");
    probe_free(bad);
    bad = probe_create();
    probe_select(bad, "grad.layers.*.resid_pre");
    CHECK(probe_check(bad, m, 0) == -1, "a backward name is unknown to a forward-only check\n");
    CHECK(probe_check(bad, m, 1) == 0, "... and known with backward\n");
    probe_free(bad);
    bad = probe_create();
    probe_select(bad, "layers.3.*"); /* there are 3 layers: 0..2 */
    CHECK(probe_check(bad, m, 1) == -1, "a layer that does not exist matches nothing\n");
    probe_free(bad);

    /* names: the listing has no duplicates among the forward names of one layer */
    int n_fwd = 0, n_all = 0;
    probe_list(m, 1, T, 0, count_names, &n_fwd);
    probe_list(m, 1, T, 1, count_names, &n_all);
    /* per layer: resid_pre/mid/post 3, two input norms x 3, q k v rot_q rot_k (RoPE) scores probs
     * heads o_proj out 10, gate up hidden down_proj out 5; plus embed, final_norm x 3, logits */
    CHECK(n_fwd == 1 + L * (3 + 6 + 10 + 5) + 3 + 1, "forward names: %d\n", n_fwd);
    CHECK(n_all == n_fwd + 1 + 3 * L + m->n_tensors, "forward + backward names: %d\n", n_all);

    /* zero cost when detached: nothing recorded */
    CHECK(model_forward(m, tokens, targets, 1, T, NULL) == 0, "forward without a probe\n");
    CHECK(probe_count(p) == 0, "nothing is recorded while detached\n");
    float *ref_logits = malloc(sizeof(float) * T * 40);
    memcpy(ref_logits, m->ctx->acts.logits, sizeof(float) * T * 40);

    /* an attached probe records exactly what its patterns select */
    probe_select(p, "layers.*.attn.scores");
    probe_attach(p, m);
    CHECK(model_forward(m, tokens, targets, 1, T, NULL) == 0, "forward with a probe\n");
    CHECK(memcmp(ref_logits, m->ctx->acts.logits, sizeof(float) * T * 40) == 0, "logits bit-identical with a probe\n");
    CHECK(probe_count(p) == 2 * (size_t)L, "2 records per layer, got %zu\n", probe_count(p));
    for (int l = 0; l < L; l++) {
        char name[64];
        snprintf(name, sizeof name, "layers.%d.attn.probs", l);
        const probe_tensor *pr = probe_find(p, name);
        snprintf(name, sizeof name, "layers.%d.attn.scores", l);
        const probe_tensor *sc = probe_find(p, name);
        CHECK(pr && sc, "layer %d probs and scores recorded\n", l);
        if (!pr || !sc) continue;
        CHECK(pr->ndim == 4 && pr->shape[0] == 1 && pr->shape[1] == H && pr->shape[2] == T && pr->shape[3] == T,
              "probs shape [1,H,T,T]\n");
        int window = l == 1 ? 2 : 0, ok_mask = 1, ok_sum = 1;
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                double s = 0;
                for (int j = 0; j < T; j++) {
                    int visible = j <= i && (!window || i - j < window);
                    float pv = pr->data[(h * T + i) * T + j], sv = sc->data[(h * T + i) * T + j];
                    s += pv;
                    if (visible != (sv != -INFINITY) || (!visible && pv != 0.0f)) ok_mask = 0;
                }
                if (fabs(s - 1.0) > 1e-5) ok_sum = 0;
            }
        CHECK(ok_mask, "layer %d: masked scores are -inf exactly where the (window %d) mask hides a key\n", l, window);
        CHECK(ok_sum, "layer %d: each probability row sums to 1\n", l);
    }

    /* backward records param gradients under grad.<tensor name> */
    probe_select(p, "grad.layers.0.attn.q_proj.weight");
    CHECK(model_backward(m, 1.0f) == 0, "backward with a probe\n");
    const probe_tensor *g = probe_find(p, "grad.layers.0.attn.q_proj.weight");
    const tensor_info *ti = model_find_tensor(m, "layers.0.attn.q_proj.weight");
    CHECK(g && ti && g->numel == ti->numel && memcmp(g->data, m->ctx->grad_mem + ti->offset, ti->numel * 4) == 0,
          "the recorded gradient is the model's\n");

    /* probe_record: selected names only; a new shape replaces the old record */
    float vals[6] = {1, 2, 3, 4, 5, 6};
    int64_t s23[2] = {2, 3}, s4[1] = {4};
    CHECK(probe_record(p, "custom.unselected", vals, 2, s23) == 0 && !probe_find(p, "custom.unselected"),
          "an unselected custom name is not recorded\n");
    probe_select(p, "custom.*");
    CHECK(probe_record(p, "custom.x", vals, 2, s23) == 0, "record\n");
    CHECK(probe_record(p, "custom.x", vals + 1, 1, s4) == 0, "record again with another shape\n");
    const probe_tensor *cx = probe_find(p, "custom.x");
    CHECK(cx && cx->ndim == 1 && cx->shape[0] == 4 && cx->numel == 4 && cx->data[0] == 2.0f && cx->data[3] == 5.0f,
          "the last record of a name wins\n");
    CHECK(probe_record(p, "custom.y", vals, 5, s23) == -1, "5 dimensions are refused\n");

    /* an attached but empty probe records nothing and changes nothing */
    tlm_probe *empty = probe_create();
    probe_detach(m);
    probe_attach(empty, m);
    CHECK(model_forward(m, tokens, targets, 1, T, NULL) == 0 && probe_count(empty) == 0, "empty probe\n");
    CHECK(memcmp(ref_logits, m->ctx->acts.logits, sizeof(float) * T * 40) == 0, "logits bit-identical, empty probe\n");
    probe_detach(m);
    probe_free(empty);

    /* dumping: one .npy per record; an unwritable directory is an error naming it */
    char dir[] = "/tmp/tlm_probe_api_XXXXXX";
    if (mkdtemp(dir)) {
        CHECK(probe_dump(p, dir) == 0, "dump\n");
        char path[256];
        snprintf(path, sizeof path, "%s/layers.1.attn.scores.npy", dir);
        tlm_npy a = {0};
        CHECK(tlm_npy_read_as(path, TLM_DT_F32, &a) == 0 && a.ndim == 4 && a.numel == (size_t)H * T * T,
              "the dumped scores read back\n");
        tlm_npy_free(&a);
        snprintf(path, sizeof path, "%s/file", dir);
        FILE *f = fopen(path, "w");
        if (f) fclose(f);
        snprintf(path, sizeof path, "%s/file/sub", dir);
        CHECK(probe_dump(p, path) == -1 && strstr(tlm_last_error(), "file"), "dump under a regular file fails\n");
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) printf("(could not remove %s)\n", dir);
    }
    probe_free(p);
    free(ref_logits);
    model_free(m);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
