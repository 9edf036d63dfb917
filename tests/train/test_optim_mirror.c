/* test_optim_mirror.c — adamw_step_fused (train/optim.c): the AdamW update that also rounds
 * the new weights into the model's bf16 copy (product16) and clears the gradient in its own pass:
 *   - adamw_step (AVX-512 where the CPU has it) gives the bits of the update written out in C here
 *     (PyTorch's AdamW, the operations in optim.c's order) for weights, moments, decay and clipping;
 *   - the weights and moments are bit-identical to adamw_step's, and the copy equals
 *     f32_to_bf16 of the new weights, value for value;
 *   - a forward leaves the copy as it is (a pass never writes the model), and model_weights_changed
 *     rounds the weights again (a weight changed in between is seen);
 *   - the gradient reads zero after it and is marked clear, which model_zero_grads trusts, and the
 *     next backward takes the mark away;
 *   - a ZeRO-1 shard (this process updates part of the weights) leaves the copy and the gradient as
 *     they were; a model without a copy gets none (its gradient is cleared).
 * The mirror's checks are skipped (exit 77) where the CPU has no bf16 products; ctest runs it
 * natively (the update on AVX-512 where the CPU has it) and with TLM_ISA=avx2 (the portable loop). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/context.h"
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
    for (size_t i = 0; i < m->n_params; i++) m->ctx->grad_mem[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    return m;
}

int main(void) {
    const optim_config cfg = {.lr = 1e-2f, .min_lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                              .weight_decay = 0.1f, .grad_clip = 1.0f, .warmup_steps = 0, .total_steps = 10};
    tlm_model *a = make(), *b = make();
    if (!a || !b) return printf("FAIL: no model\n"), 1;
    adamw oa, ob;
    if (adamw_init(&oa, a, &cfg) || adamw_init(&ob, b, &cfg)) return printf("FAIL: adamw_init\n"), 1;
    { /* two steps (the second from moments that are not 0) against the update written out here
       * (clipped: the norm 3 is over grad_clip 1) */
        const size_t n = a->n_params;
        float *p = malloc(sizeof(float) * n), *mm = calloc(n, sizeof(float)), *vv = calloc(n, sizeof(float));
        if (!p || !mm || !vv) return printf("FAIL: out of memory\n"), 1;
        memcpy(p, a->param_mem, sizeof(float) * n);
        const float clip = (float)(cfg.grad_clip / (3.0 + 1e-6));
        for (int s = 1; s <= 2; s++) {
            for (int t = 0; t < a->n_tensors; t++) {
                const float bc1 = 1.0f - powf(cfg.beta1, (float)s), bc2 = 1.0f - powf(cfg.beta2, (float)s);
                const float step_size = cfg.lr / bc1, bc2_sqrt = sqrtf(bc2);
                const tensor_info *ti = &a->tensors[t];
                const float decay = oa.decays[t] ? 1.0f - cfg.lr * cfg.weight_decay : 1.0f;
                for (size_t i = ti->offset; i < ti->offset + ti->numel; i++) {
                    const float gi = a->ctx->grad_mem[i] * clip;
                    mm[i] = cfg.beta1 * mm[i] + (1.0f - cfg.beta1) * gi;
                    vv[i] = cfg.beta2 * vv[i] + (1.0f - cfg.beta2) * gi * gi;
                    p[i] = p[i] * decay - step_size * mm[i] / (sqrtf(vv[i]) / bc2_sqrt + cfg.eps);
                }
            }
        }
        tlm_model *r = make();
        adamw orr;
        if (!r || adamw_init(&orr, r, &cfg)) return printf("FAIL: reference model\n"), 1;
        adamw_step(&orr, r, cfg.lr, 3.0);
        adamw_step(&orr, r, cfg.lr, 3.0);
        CHECK(!memcmp(r->param_mem, p, sizeof(float) * n) && !memcmp(orr.m, mm, sizeof(float) * n) &&
                  !memcmp(orr.v, vv, sizeof(float) * n),
              "adamw_step differs from the update written out");
        adamw_free(&orr), model_free(r), free(p), free(mm), free(vv);
    }
    { /* without a mirror (any CPU; the portable loop under TLM_ISA=avx2): the plain update's bits,
       * the gradient cleared and marked */
        tlm_model *x = make(), *y = make();
        adamw ox, oy;
        if (!x || !y || adamw_init(&ox, x, &cfg) || adamw_init(&oy, y, &cfg)) return printf("FAIL: models\n"), 1;
        adamw_step(&ox, x, cfg.lr, 3.0);
        adamw_step_fused(&oy, y, cfg.lr, 3.0);
        int cleared = y->ctx->grad_clear == 1 && !y->product16;
        for (size_t i = 0; i < y->n_params; i++) cleared &= y->ctx->grad_mem[i] == 0.0f;
        CHECK(!memcmp(x->param_mem, y->param_mem, sizeof(float) * x->n_params) &&
                  !memcmp(ox.m, oy.m, sizeof(float) * x->n_params) && !memcmp(ox.v, oy.v, sizeof(float) * x->n_params),
              "the fused step (no mirror) differs from adamw_step");
        CHECK(cleared, "the fused step (no mirror) did not clear and mark the gradient");
        adamw_free(&ox), adamw_free(&oy), model_free(x), model_free(y);
    }
    if (model_set_mixed_bf16(a, 1, NULL) != 1 || model_set_mixed_bf16(b, 1, NULL) != 1) {
        printf("%d checks, %d failures; no bf16 products on this CPU: the mirror's checks skipped\n", checks, failures);
        adamw_free(&oa), adamw_free(&ob);
        model_free(a), model_free(b);
        return failures ? 1 : 77;
    }
    for (int s = 0; s < 3; s++) { /* (the same gradient each step: b's cleared one is put back) */
        memcpy(b->ctx->grad_mem, a->ctx->grad_mem, sizeof(float) * a->n_params);
        adamw_step(&oa, a, cfg.lr, 3.0);
        adamw_step_fused(&ob, b, cfg.lr, 3.0);
    }
    int cleared = b->ctx->grad_clear == 1;
    for (size_t i = 0; i < b->n_params; i++) cleared &= b->ctx->grad_mem[i] == 0.0f && !signbit(b->ctx->grad_mem[i]);
    CHECK(cleared && a->ctx->grad_clear == 0, "the fused step did not clear and mark the gradient (plain step's mark %d)",
          a->ctx->grad_clear);
    CHECK(!memcmp(a->param_mem, b->param_mem, sizeof(float) * a->n_params) &&
              !memcmp(oa.m, ob.m, sizeof(float) * a->n_params) && !memcmp(oa.v, ob.v, sizeof(float) * a->n_params),
          "the mirrored step's weights or moments differ from adamw_step's");
    int same = 1;
    for (size_t i = 0; i < b->n_params; i++) same &= b->product16[i] == tlm_f32_to_bf16(b->param_mem[i]);
    CHECK(same, "the mirror is not the new weights rounded");
    /* a forward reads the copy as it is; model_weights_changed rounds the weights again */
    model_weights_changed(b);
    b->product16[0] ^= 1; /* (a bit a refresh would put back if it rounded) */
    {
        int tok[8] = {1, 5, 9, 2, 7, 3, 3, 8};
        CHECK(!model_forward(b, tok, NULL, 1, 8, NULL) &&
                  b->product16[0] == (uint16_t)(tlm_f32_to_bf16(b->param_mem[0]) ^ 1),
              "a forward wrote the bf16 copy of the weights");
    }
    b->param_mem[1] = 3.0f;
    model_weights_changed(b);
    CHECK(b->product16[0] == tlm_f32_to_bf16(b->param_mem[0]) && b->product16[1] == tlm_f32_to_bf16(3.0f),
          "model_weights_changed did not round the weights");
    { /* model_zero_grads trusts the mark; a backward takes it away */
        b->ctx->grad_mem[3] = 5.0f;
        model_zero_grads(b);
        CHECK(b->ctx->grad_mem[3] == 5.0f, "model_zero_grads zeroed a gradient marked clear");
        b->ctx->grad_mem[3] = 0.0f;
        int tok[8] = {1, 5, 9, 2, 7, 3, 3, 8}, tgt[8] = {5, 9, 2, 7, 3, 3, 8, 1};
        float loss;
        CHECK(!model_forward(b, tok, tgt, 1, 8, &loss) && !model_backward(b, 1.0f) && b->ctx->grad_clear == 0,
              "a backward left the gradient marked clear");
        model_zero_grads(b);
        int zero = 1;
        for (size_t i = 0; i < b->n_params; i++) zero &= b->ctx->grad_mem[i] == 0.0f;
        CHECK(zero, "model_zero_grads after a backward left a gradient");
        memcpy(b->ctx->grad_mem, a->ctx->grad_mem, sizeof(float) * a->n_params);
    }
    /* a shard of the weights: the copy left to model_weights_changed; a model without a copy */
    if (adamw_shard(&ob, 0, b->n_params / 2)) return printf("FAIL: adamw_shard\n"), 1;
    uint16_t *before = malloc(sizeof(uint16_t) * b->n_params);
    if (!before) return printf("FAIL: out of memory\n"), 1;
    memcpy(before, b->product16, sizeof(uint16_t) * b->n_params);
    adamw_step_fused(&ob, b, cfg.lr, 3.0);
    CHECK(!memcmp(before, b->product16, sizeof(uint16_t) * b->n_params) && b->ctx->grad_clear == 0 &&
              !memcmp(b->ctx->grad_mem, a->ctx->grad_mem, sizeof(float) * a->n_params),
          "a shard's step wrote the bf16 copy or cleared the gradient");
    free(before);
    model_set_mixed_bf16(a, 0, NULL);
    adamw_step_fused(&oa, a, cfg.lr, 3.0);
    CHECK(!a->product16, "a model without a copy got one");
    adamw_free(&oa), adamw_free(&ob);
    model_free(a), model_free(b);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
