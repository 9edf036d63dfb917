/* test_public_api.c — include/tinylm.h used as a library user would: create, save, load,
 * forward, backward; the loaded model reproduces the saved one's logits bit for bit and
 * named gradients are reachable (their values are checked by the PyTorch parity test). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tinylm.h"

static int failures = 0, checks = 0;
static void expect(int ok, const char *what) {
    checks++;
    failures += !ok;
    printf("%-60s %s\n", what, ok ? "ok" : "FAIL");
}

int main(void) {
    char dir[] = "/tmp/tlm_api_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char cfg_path[256], model_dir[256];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
    snprintf(model_dir, sizeof model_dir, "%s/model", dir);
    FILE *f = fopen(cfg_path, "w");
    fputs("{\"model_type\": \"tinylm\", \"vocab_size\": 23, \"hidden_size\": 16, \"num_hidden_layers\": 2,"
          " \"num_attention_heads\": 2, \"intermediate_size\": 24, \"max_position_embeddings\": 8}",
          f);
    fclose(f);
    tlm_model *a = tlm_create(cfg_path, 42);
    expect(a != NULL, "tlm_create from a config file");
    if (!a) return 1;
    expect(tlm_vocab_size(a) == 23 && tlm_num_params(a) > 0, "vocab size and parameter count");
    int ids[6] = {1, 2, 3, 4, 5, 6}, tg[6] = {2, 3, 4, 5, 6, 7};
    float la, lb;
    expect(tlm_forward(a, ids, tg, 2, 3, &la) == 0 && isfinite(la), "forward with targets gives a finite loss");
    float *saved = malloc(sizeof(float) * 6 * 23);
    memcpy(saved, tlm_logits(a), sizeof(float) * 6 * 23);
    expect(tlm_save(a, model_dir) == 0, "tlm_save writes the directory");
    tlm_model *b = tlm_load(model_dir);
    expect(b != NULL, "tlm_load reads it back");
    if (!b) return 1;
    tlm_forward(b, ids, tg, 2, 3, &lb);
    expect(memcmp(saved, tlm_logits(b), sizeof(float) * 6 * 23) == 0 && la == lb, "reloaded logits bit-identical");
    expect(tlm_backward(b, 1.0f) == 0, "backward");
    size_t n;
    const float *g = tlm_grad(b, "layers.1.ffn.down_proj.weight", &n);
    expect(g && n == 16 * 24, "named gradient of layers.1.ffn.down_proj.weight");
    expect(tlm_grad(b, "no.such.tensor", &n) == NULL, "unknown tensor name gives NULL");
    expect(tlm_load("/nonexistent/dir") == NULL && strstr(tlm_error_message(), "/nonexistent/dir"),
           "loading a missing directory names it");
    tlm_free(a);
    tlm_free(b);
    free(saved);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) return 1;
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures != 0;
}
