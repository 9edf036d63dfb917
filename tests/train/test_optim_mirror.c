/* test_optim_mirror.c — adamw_step_mirrored (train/optim.c): the AdamW update that also rounds
 * the new weights into the model's bf16 mirror in its own pass:
 *   - the weights and moments are bit-identical to adamw_step's, and the mirror equals
 *     f32_to_bf16 of the new weights, value for value; the mirror is marked fresh;
 *   - the next forward's model_refresh_mirror takes it as it is (the mark cleared, the mirror
 *     unchanged), and the one after rounds the weights again (a weight changed in between is seen);
 *   - a ZeRO-1 shard (this process updates part of the weights) and a model without a mirror
 *     leave nothing marked.
 * Skipped (exit 77) where the CPU has no bf16 products (no mirror to write). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "train/optim.h"
#include "util/f16.h"

static int failures, checks;
#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        checks++;                                                                                                      \
        if (!(cond)) failures++, printf("FAIL %s:%d: ", __FILE__, __LINE__), printf(__VA_ARGS__), printf("\n");      \
    } while (0)

static tlm_model *make(void) {
    tlm_config c;
    config_defaults(&c);
    c.vocab_size = 40, c.d_model = 32, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 8;
    c.d_ff = 48, c.max_seq = 16;
    tlm_model *m = model_create(&c);
    if (!m) return NULL;
    model_init_weights(m, 7);
    model_alloc_grads(m);
    for (size_t i = 0; i < m->n_params; i++) m->grad_mem[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    return m;
}

int main(void) {
    const optim_config cfg = {.lr = 1e-2f, .min_lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                              .weight_decay = 0.1f, .grad_clip = 1.0f, .warmup_steps = 0, .total_steps = 10};
    tlm_model *a = make(), *b = make();
    if (!a || !b) return printf("FAIL: no model\n"), 1;
    if (model_set_mixed_bf16(a, 1, NULL) != 1 || model_set_mixed_bf16(b, 1, NULL) != 1) {
        printf("no bf16 products on this CPU: skipped\n");
        return 77;
    }
    adamw oa, ob;
    if (adamw_init(&oa, a, &cfg) || adamw_init(&ob, b, &cfg)) return printf("FAIL: adamw_init\n"), 1;
    for (int s = 0; s < 3; s++) {
        adamw_step(&oa, a, cfg.lr, 3.0);
        adamw_step_mirrored(&ob, b, cfg.lr, 3.0);
    }
    CHECK(!memcmp(a->param_mem, b->param_mem, sizeof(float) * a->n_params) &&
              !memcmp(oa.m, ob.m, sizeof(float) * a->n_params) && !memcmp(oa.v, ob.v, sizeof(float) * a->n_params),
          "the mirrored step's weights or moments differ from adamw_step's");
    int same = 1;
    for (size_t i = 0; i < b->n_params; i++) same &= b->mirror16[i] == tlm_f32_to_bf16(b->param_mem[i]);
    CHECK(same, "the mirror is not the new weights rounded");
    CHECK(b->mirror_fresh == 1 && a->mirror_fresh == 0, "fresh marks: mirrored %d, plain %d", b->mirror_fresh,
          a->mirror_fresh);
    /* the next forward takes the mirror as it is; a weight changed after that is rounded again */
    b->mirror16[0] ^= 1; /* (a bit the refresh would put back if it rounded) */
    model_refresh_mirror(b);
    CHECK(b->mirror_fresh == 0 && b->mirror16[0] == (uint16_t)(tlm_f32_to_bf16(b->param_mem[0]) ^ 1),
          "the refresh after the mirrored step rounded the weights again or left the mark");
    b->param_mem[1] = 3.0f;
    model_refresh_mirror(b);
    CHECK(b->mirror16[0] == tlm_f32_to_bf16(b->param_mem[0]) && b->mirror16[1] == tlm_f32_to_bf16(3.0f),
          "the refresh after that did not round the weights");
    /* a shard of the weights, and a model without a mirror: no mark */
    if (adamw_shard(&ob, 0, b->n_params / 2)) return printf("FAIL: adamw_shard\n"), 1;
    adamw_step_mirrored(&ob, b, cfg.lr, 3.0);
    CHECK(b->mirror_fresh == 0, "a shard's step marked the mirror fresh");
    model_set_mixed_bf16(a, 0, NULL);
    adamw_step_mirrored(&oa, a, cfg.lr, 3.0);
    CHECK(a->mirror_fresh == 0 && !a->mirror16, "a model without a mirror was marked");
    adamw_free(&oa), adamw_free(&ob);
    model_free(a), model_free(b);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
