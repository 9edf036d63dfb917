/* test_causal.c — causality of the whole model, for every architecture variant:
 * changing the token at position 2 leaves the logits at positions 0 and 1 bit-identical
 * and changes every position from 2 on. A mixture-of-experts model: positions 0 and 1 equal
 * to float rounding (1e-5 of the largest logit) — the changed token moves rows between the
 * experts' products, whose summation order depends on how many rows an expert has (a few go
 * through the matrix-vector kernels), while their routing stays the same (checked exactly). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/moe.h"
#include "variants.h"
#include "model/context.h"

int main(void) {
    int failures = 0, n = (int)(sizeof VARIANTS / sizeof VARIANTS[0]);
    for (int i = 0; i < n; i++) {
        tlm_config c;
        variant_config(&c, &VARIANTS[i]);
        if (config_validate(&c, VARIANTS[i].name)) return printf("invalid variant %s\n", VARIANTS[i].name), 1;
        tlm_model *m = model_create(&c);
        model_init_weights(m, 7);
        enum { B = 2, T = 8 };
        int a[B * T], b[B * T];
        for (int j = 0; j < B * T; j++) a[j] = b[j] = (j * 7 + 3) % c.vocab_size;
        b[2] = (a[2] + 1) % c.vocab_size;         /* row 0, position 2 */
        b[T + 2] = (a[T + 2] + 5) % c.vocab_size; /* row 1, position 2 */
        const size_t V = (size_t)c.vocab_size;
        float *before = malloc(sizeof(float) * B * T * V);
        model_forward(m, a, NULL, B, T, NULL);
        memcpy(before, m->ctx->acts.logits, sizeof(float) * B * T * V);
        /* the experts chosen at positions 0 and 1 of each row, every MoE layer */
        int chosen[2][TLM_MAX_LAYERS * B * 2 * 4], n_chosen = 0;
        for (int pass = 0; pass < 2; pass++) {
            if (pass) model_forward(m, b, NULL, B, T, NULL);
            n_chosen = 0;
            for (int l = 0; l < c.n_layers; l++)
                for (int r = 0; r < B && config_layer_is_moe(&c, l); r++)
                    for (int t = 0; t < 2; t++)
                        for (int j = 0; j < c.n_experts_per_tok && j < 4; j++)
                            chosen[pass][n_chosen++] = moe_layer_acts(&m->ctx->acts, l)->topk_idx[(r * T + t) * c.n_experts_per_tok + j];
        }
        int ok = !memcmp(chosen[0], chosen[1], sizeof(int) * n_chosen);
        const int moe = config_moe_layers(&c) > 0;
        for (int r = 0; r < B; r++)
            for (int t = 0; t < T; t++) {
                const float *x = before + (r * T + t) * V, *y = m->ctx->acts.logits + (r * T + t) * V;
                int same = !memcmp(x, y, sizeof(float) * V);
                if (moe && t < 2 && !same) {
                    double worst = 0, scale = 1e-30;
                    for (size_t v = 0; v < V; v++) worst = fmax(worst, fabs((double)x[v] - y[v])), scale = fmax(scale, fabs(y[v]));
                    same = worst <= 1e-5 * scale;
                }
                ok &= t < 2 ? same : !same;
            }
        failures += !ok;
        printf("%-44s %s\n", VARIANTS[i].name, ok ? "ok" : "FAIL");
        free(before);
        model_free(m);
    }
    printf("%d passed, %d failed\n", n - failures, failures);
    return failures != 0;
}
