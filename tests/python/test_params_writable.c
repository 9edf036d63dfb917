/* test_params_writable.c — tlm_params_writable, the C side of python/tinylm's Model.weights(
 * writable=True), on the two buffers that must not be written in place: a model whose parameters
 * are a read-only file mapping (model_load_dir_mapped, as `tinylm logits` loads) gets an owned
 * copy (the same values; an edit then changes the next forward; the file is untouched), and a
 * model converted to bf16 is refused with a message (tlm_param too, for its matrices). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "convert/checkpoint.h"
#include "model/model.h"
#include "tinylm.h"

static int failures = 0;
static void expect(int ok, const char *what) {
    failures += !ok;
    printf("%-72s %s\n", what, ok ? "ok" : "FAIL");
}

enum { V = 23, T = 5 };

static int forward(tlm_model *m, float *out) {
    int ids[T] = {1, 4, 9, 16, 2};
    if (tlm_forward(m, ids, NULL, 1, T, NULL)) return -1;
    memcpy(out, tlm_logits(m), sizeof(float) * T * V);
    return 0;
}

int main(void) {
    char dir[] = "/tmp/tlm_writable_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char cfg_path[256], model_dir[256];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
    snprintf(model_dir, sizeof model_dir, "%s/model", dir);
    FILE *f = fopen(cfg_path, "w");
    if (!f) return 1;
    fputs("{\"model_type\": \"tinylm\", \"vocab_size\": 23, \"hidden_size\": 16, \"num_hidden_layers\": 2,"
          " \"num_attention_heads\": 2, \"intermediate_size\": 24, \"max_position_embeddings\": 8}",
          f);
    fclose(f);
    tlm_model *a = tlm_create(cfg_path, 7);
    if (!a || tlm_save(a, model_dir)) return fprintf(stderr, "%s\n", tlm_error_message()), 1;
    float base[T * V], got[T * V], again[T * V];
    expect(forward(a, base) == 0, "forward of the created model");
    expect(tlm_params_writable(a) == 0, "an owned buffer is writable as it is");

    /* the file mapping */
    tlm_model *m = model_load_dir_mapped(model_dir, 0);
    expect(m && m->file_map, "model_load_dir_mapped maps the parameters");
    if (!m || !m->file_map) return 1;
    const float *before = tlm_param(m, "layers.0.ffn.down_proj.weight", NULL, NULL);
    expect(tlm_params_writable(m) == 0 && !m->file_map, "tlm_params_writable copies out of the mapping");
    int64_t shape[2];
    int nd = 0;
    float *w = (float *)tlm_param(m, "layers.0.ffn.down_proj.weight", shape, &nd);
    expect(w && w != before && nd == 2 && shape[0] == 16 && shape[1] == 24, "tlm_param now points into the copy");
    expect(forward(m, got) == 0 && !memcmp(got, base, sizeof got), "the copy computes the same logits, bit for bit");
    for (int r = 0; r < 16; r++) w[r * 24 + 3] = 0.0f; /* neuron 3 of layer 0 writes nothing */
    expect(forward(m, got) == 0 && memcmp(got, base, sizeof got), "an edit of the copy changes the next forward");
    tlm_free(m);
    tlm_model *fresh = tlm_load(model_dir);
    expect(fresh && forward(fresh, again) == 0 && !memcmp(again, base, sizeof again), "the file is untouched");
    tlm_free(fresh);

    /* bf16 */
    tlm_model *b = tlm_load(model_dir);
    expect(b && model_weights_to_bf16(b) == 0, "bf16 conversion");
    expect(tlm_params_writable(b) == -1 && strstr(tlm_error_message(), "bf16"), "tlm_params_writable refuses bf16");
    expect(!tlm_param(b, "layers.0.attn.q_proj.weight", NULL, NULL) && strstr(tlm_error_message(), "bf16"),
           "tlm_param refuses a bf16 matrix, naming it");
    expect(tlm_param(b, "final_norm.weight", NULL, NULL) != NULL, "a norm weight (kept f32) is still readable");
    tlm_free(b);
    tlm_free(a);

    char cmd[320];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
