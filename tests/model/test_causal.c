/* test_causal.c — causality of the whole model, for several architecture variants:
 * changing the token at position 2 leaves the logits at positions 0 and 1 bit-identical
 * and changes every position from 2 on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

static int failures = 0, checks = 0;

static void run(const char *label, void (*tweak)(tlm_config *)) {
    tlm_config c;
    config_defaults(&c);
    c.vocab_size = 40, c.d_model = 32, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 8;
    c.d_ff = 48, c.max_seq = 16;
    tweak(&c);
    if (config_validate(&c, label)) {
        printf("%s: invalid config\n", label);
        failures++;
        return;
    }
    tlm_model *m = model_create(&c);
    model_init_weights(m, 7);
    enum { B = 2, T = 8 };
    int a[B * T], b[B * T];
    for (int i = 0; i < B * T; i++) a[i] = b[i] = (i * 7 + 3) % c.vocab_size;
    b[2] = (a[2] + 1) % c.vocab_size;          /* row 0, position 2 */
    b[T + 2] = (a[T + 2] + 5) % c.vocab_size;  /* row 1, position 2 */
    const size_t V = (size_t)c.vocab_size;
    float *before = malloc(sizeof(float) * B * T * V);
    model_forward(m, a, NULL, B, T, NULL);
    memcpy(before, m->acts.logits, sizeof(float) * B * T * V);
    model_forward(m, b, NULL, B, T, NULL);
    int ok = 1;
    for (int r = 0; r < B; r++)
        for (int t = 0; t < T; t++) {
            int same = !memcmp(before + (r * T + t) * V, m->acts.logits + (r * T + t) * V, sizeof(float) * V);
            ok &= t < 2 ? same : !same;
        }
    checks++;
    failures += !ok;
    printf("%-40s %s\n", label, ok ? "ok" : "FAIL");
    free(before);
    model_free(m);
}

static void pre(tlm_config *c) { (void)c; }
static void post(tlm_config *c) { c->placement = PLACE_POST, c->final_norm = false, c->norm = NORM_LAYERNORM; }
static void sandwich(tlm_config *c) { c->placement = PLACE_SANDWICH, c->norm = NORM_RMSNORM_1P, c->attn_softcap = 20; }
static void output(tlm_config *c) { c->placement = PLACE_OUTPUT, c->qk_norm = QK_NORM_FULL; }
static void learned(tlm_config *c) { c->position = POS_LEARNED, c->ffn = FFN_GELU; }
static void sliding(tlm_config *c) { c->sliding_window = 3, c->layer_sliding[0] = 1; }
static void no_residual(tlm_config *c) { c->residual = false, c->qk_norm = QK_NORM_HEAD; }

int main(void) {
    run("pre-norm rmsnorm rope swiglu gqa", pre);
    run("post-norm layernorm", post);
    run("sandwich (1+w) softcap", sandwich);
    run("output norms, full qk-norm", output);
    run("learned positions, gelu mlp", learned);
    run("sliding window 3 on layer 0", sliding);
    run("no residual, per-head qk-norm", no_residual);
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures != 0;
}
