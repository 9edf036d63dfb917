/* test_memory_estimate.c — `tinylm info`'s activation estimate is the engine's own layout:
 * model_activation_floats(config, mode, B, T), computed from the config alone, equals the
 * floats model_forward actually allocates for that batch (m->ctx->acts.capacity), for every
 * architecture variant, in training and inference mode, at several (B, T). */
#include <stdio.h>
#include <stdlib.h>

#include "model/model.h"
#include "variants.h"
#include "model/context.h"

int main(void) {
    int failures = 0, checks = 0, n = (int)(sizeof VARIANTS / sizeof VARIANTS[0]);
    static const int SHAPES[][2] = {{1, 1}, {2, 8}, {3, 5}};
    for (int i = 0; i < n; i++) {
        tlm_config c;
        variant_config(&c, &VARIANTS[i]);
        if (config_validate(&c, VARIANTS[i].name)) return printf("invalid variant %s\n", VARIANTS[i].name), 1;
        for (int mode = MODEL_TRAIN; mode <= MODEL_INFER; mode++)
            for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
                const int B = SHAPES[s][0], T = SHAPES[s][1];
                tlm_model *m = model_create(&c); /* a fresh model: the buffer only grows */
                model_init_weights(m, 3);
                model_set_mode(m, (model_mode)mode);
                int *tok = malloc(sizeof(int) * B * T);
                for (int j = 0; j < B * T; j++) tok[j] = (j * 5 + 1) % c.vocab_size;
                int rc = model_forward(m, tok, mode == MODEL_TRAIN ? tok : NULL, B, T, NULL);
                size_t want = model_activation_floats(&c, (model_mode)mode, B, T);
                int ok = rc == 0 && m->ctx->acts.capacity == want && want > 0;
                checks++;
                failures += !ok;
                if (!ok)
                    printf("%-30s %s B=%d T=%d: allocated %zu floats, estimated %zu  FAIL\n", VARIANTS[i].name,
                           mode == MODEL_TRAIN ? "train" : "infer", B, T, m->ctx->acts.capacity, want);
                free(tok);
                model_free(m);
            }
    }
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures != 0;
}
