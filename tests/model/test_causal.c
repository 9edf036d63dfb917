/* test_causal.c — causality of the whole model, for every architecture variant:
 * changing the token at position 2 leaves the logits at positions 0 and 1 bit-identical
 * and changes every position from 2 on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "variants.h"

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
        memcpy(before, m->acts.logits, sizeof(float) * B * T * V);
        model_forward(m, b, NULL, B, T, NULL);
        int ok = 1;
        for (int r = 0; r < B; r++)
            for (int t = 0; t < T; t++) {
                int same = !memcmp(before + (r * T + t) * V, m->acts.logits + (r * T + t) * V, sizeof(float) * V);
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
