/* test_decode_step.c — kv_decode_step (one parallel region per token, model/decode.c) computes
 * exactly what model_forward computes for one token through the KV cache. Both run the one block
 * (model/block.c: the norm placement written once) over the components, in its two modes: the
 * full pass over rows and the one-token step (each component's step beside its forward), so this
 * checks one code path in two modes: the same logits bit
 * for bit (memcmp), at every position of a prefill + decode up to the cache's end, for every
 * architecture variant (placements, norms, QK-norm, GQA/MQA, sliding window, learned positions,
 * soft-caps, biases, DyT, DeepNorm) and a shape whose widths are no multiple of 16; with f32
 * weights, bf16 weights, f32 weights beside mixed precision's bf16 mirror (products over a
 * few rows stay f32 there: the prefill uses the mirror where the CPU has bf16 products, the steps
 * must not), and matrices in ggml block formats of two types (no fused q|k|v, gate|up views); on 1 and 2 threads (3 for two shapes: shares of 64 rows in thirds, a thread with no
 * kv head of its own, as MQA's second thread has on 2). Then: a full cache and a token outside
 * the vocabulary are refused (nothing written), and with an observer attached the step is
 * model_forward itself. Every variant but Gemma 4's MoE block runs the step itself (not the
 * fallback to model_forward), Gemma 4's layer types, K = V, shared K/V, v norm, per-layer inputs,
 * layer scalar and latent attention (MLA, in both its absorbed and, with f32 weights, its expanded
 * form) included. */
#include "isa_cap.h"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/decode.h"
#include "model/model.h"
#include "ops/quant.h"
#include "util/error.h"
#include "variants.h"
#include "model/context.h"

/* m's weights with its matrices in ggml block formats, as a GGUF file would hold them: v and the
 * FFN's down projection Q8_0, the other matrices Q4_0 (so that q|k|v and gate|up have parts of
 * different types: no fused view), where rows are whole blocks of 32; the rest f32 */
static tlm_model *quantized_copy(const tlm_model *m) {
    int *storage = calloc((size_t)m->n_tensors, sizeof *storage);
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_info *t = &m->tensors[i];
        const int q8 = strstr(t->name, "v_proj") || strstr(t->name, "down_proj");
        storage[i] = t->ndim == 2 && strcmp(t->name, "pos_embed.weight") && t->shape[1] % 32 == 0
                         ? (q8 ? WQ_Q8_0 : WQ_Q4_0) : WQ_F32;
    }
    tlm_model *q = model_create_stored(&m->cfg, storage);
    for (int i = 0; q && i < m->n_tensors; i++) {
        const tensor_info *t = &q->tensors[i];
        size_t bytes;
        unsigned char *dst = model_tensor_data(q, i, &bytes);
        const float *src = model_param(m, i);
        if (!t->qtype) {
            memcpy(dst, src, bytes);
            continue;
        }
        const size_t row = wq_row_bytes(t->qtype, t->shape[1]);
        for (int r = 0; r < t->shape[0]; r++)
            wq_quantize_row(t->qtype, src + (size_t)r * t->shape[1], dst + r * row, t->shape[1]);
    }
    free(storage);
    return q;
}

static void v_odd(tlm_config *c) { c->d_model = 40, c->head_dim = 10, c->d_ff = 56, c->vocab_size = 37; }

enum { T = 14, PREFILL = 5 };

/* steps that ran model_forward instead of the one-region step (its logits are model_forward's) */
static int fell_back;
/* latent attention's decode form for the next caches: 1 expanded (kv_cache_set_mla_absorbed 0) */
static int mla_expanded;

/* the logits of positions PREFILL..T-1, one token at a time: through kv_decode_step (step 1) or
 * model_forward (step 0), after the same prefill; -1 when a pass failed */
static int decode_all(tlm_model *m, const int *tok, int step, float *logits) {
    const int V = m->cfg.vocab_size;
    kv_cache *kv = kv_cache_create(m, T);
    if (!kv) return -1;
    if (mla_expanded && kv_cache_set_mla_absorbed(kv, m, 0)) return kv_cache_free(kv), -1;
    m->ctx->kv = kv;
    int rc = model_forward(m, tok, NULL, 1, PREFILL, NULL);
    for (int t = PREFILL; t < T && !rc; t++) {
        const float *lg = NULL;
        if (step) {
            lg = kv_decode_step(m->ctx, tok[t]);
            fell_back += lg && lg == model_last_logits(m);
        } else if (!model_forward(m, tok + t, NULL, 1, 1, NULL)) {
            lg = model_last_logits(m);
        }
        if (!lg) rc = -1;
        else memcpy(logits + (size_t)(t - PREFILL) * V, lg, sizeof(float) * V);
    }
    if (!rc && step) { /* the cache is full: refused, its length unchanged */
        if (kv_decode_step(m->ctx, tok[0]) || kv_cache_length(kv) != T) rc = -1;
    }
    m->ctx->kv = NULL;
    kv_cache_free(kv);
    return rc;
}

static int dummy_after_pass(void *user, const tlm_context *run, int is_backward) {
    (void)run, (void)is_backward;
    ++*(int *)user;
    return 0;
}

int main(void) {
    if (isa_cap_changes_nothing("test_decode_step")) return ISA_CAP_SKIP;
    int failures = 0, checks = 0;
    const int n_var = (int)(sizeof VARIANTS / sizeof VARIANTS[0]);
    for (int i = 0; i <= n_var; i++) {
        const variant odd = {"pre-norm, widths no multiple of 16", v_odd};
        const variant *var = i < n_var ? &VARIANTS[i] : &odd;
        /* f32 weights, bf16 weights, f32 + the bf16 mirror of mixed precision, ggml block formats */
        for (int wt = 0; wt < 4; wt++) {
            const char *wt_name = wt == 0 ? "f32" : wt == 1 ? "bf16" : wt == 2 ? "mixed" : "quantized";
            tlm_config c;
            variant_config(&c, var);
            /* (a mixture of experts or MLA kept in ggml blocks is refused: model_create_stored, checked below) */
            if (wt == 3 && (config_moe_layers(&c) || config_mla(&c))) {
                tlm_model *f = model_create(&c);
                tlm_model *q = quantized_copy(f);
                const int ok =
                    !q && strstr(tlm_last_error(), config_mla(&c) ? "multi-head latent attention" : "mixture of experts");
                checks++, failures += !ok;
                printf("%-44s %-9s refused: %s\n", var->name, wt_name, ok ? "ok" : "FAIL");
                model_free(q), model_free(f);
                continue;
            }
            tlm_model *m = model_create(&c);
            model_init_weights(m, 11);
            for (size_t j = 0; j < m->n_params; j++) m->param_mem[j] *= 10.0f; /* logits far from uniform */
            const char *why;
            if (wt == 1 && model_weights_to_bf16(m)) return printf("%s: bf16 conversion failed\n", var->name), 1;
            if (wt == 2 && model_set_mixed_bf16(m, 1, &why) < 0) return printf("%s: no bf16 mirror\n", var->name), 1;
            if (wt == 3) {
                tlm_model *q = quantized_copy(m);
                if (!q) return printf("%s: no quantized copy\n", var->name), 1;
                model_free(m);
                m = q;
            }
            model_set_mode(m, MODEL_INFER_LAST);
            const int V = c.vocab_size;
            int tok[T];
            for (int t = 0; t < T; t++) tok[t] = (t * 13 + 5) % V;
            float *ref = malloc(sizeof(float) * T * V), *got = malloc(sizeof(float) * T * V);
            /* (3 threads on the first and the last shape only: more threads than this machine's 2
             * cores spin at every barrier while one waits for a core, ~0.5 s per variant) */
            const int max_threads = i == 0 || i == n_var ? 3 : 2;
            fell_back = 0;
            for (int form = 0; form <= (config_mla(&c) && wt == 0); form++)
            for (int nt = 1; nt <= max_threads; nt++) {
                mla_expanded = form;
                omp_set_num_threads(nt);
                int rc = decode_all(m, tok, 0, ref) || decode_all(m, tok, 1, got);
                int same = !rc && !memcmp(ref, got, sizeof(float) * (T - PREFILL) * V);
                checks++;
                if (!same) {
                    failures++;
                    int first = -1;
                    for (int j = 0; !rc && j < (T - PREFILL) * V && first < 0; j++)
                        if (memcmp(ref + j, got + j, sizeof(float))) first = j;
                    printf("FAIL %-44s %s%s %d threads: %s (first difference at position %d, logit %d)\n", var->name,
                           wt_name, form ? " (MLA expanded)" : "", nt, rc ? "a pass failed" : "logits differ",
                           first < 0 ? -1 : PREFILL + first / V, first < 0 ? -1 : first % V);
                }
            }
            omp_set_num_threads(2);
            mla_expanded = 0;
            /* every variant decodes through the one-region step (Gemma 4's layer types, K = V, shared
             * K/V, v norm, per-layer inputs, layer scalar, latent attention included) but Gemma 4's
             * MoE block */
            const bool falls_back = c.moe_block;
            checks++;
            if ((fell_back > 0) != falls_back) {
                failures++;
                printf("FAIL %-44s %s: %d steps %s model_forward\n", var->name, wt_name, fell_back,
                       falls_back ? "expected from" : "fell back to");
            }
            free(ref), free(got);
            model_free(m);
        }
        printf("%-44s f32, bf16, mixed, quantized; 1-%d threads: %s\n", var->name, i == 0 || i == n_var ? 3 : 2,
               failures ? "(failures above)" : "identical");
    }
    /* a token outside the vocabulary: refused before anything is written; an observer: model_forward */
    tlm_config c;
    variant_config(&c, &VARIANTS[0]);
    tlm_model *m = model_create(&c);
    model_init_weights(m, 3);
    model_set_mode(m, MODEL_INFER_LAST);
    kv_cache *kv = kv_cache_create(m, 4);
    m->ctx->kv = kv;
    int bad = kv_decode_step(m->ctx, c.vocab_size) == NULL && kv_decode_step(m->ctx, -1) == NULL && kv_cache_length(kv) == 0;
    int calls = 0;
    model_observer ob = {.after_pass = dummy_after_pass, .user = &calls};
    model_observe(m, &ob);
    const float *lg = kv_decode_step(m->ctx, 1);
    int observed = lg == model_last_logits(m) && calls == 1 && kv_cache_length(kv) == 1;
    model_unobserve(m, &ob);
    checks += 2;
    if (!bad) failures++, printf("FAIL a token outside the vocabulary was not refused, or it was written\n");
    if (!observed) failures++, printf("FAIL with an observer attached the step did not run model_forward\n");
    m->ctx->kv = NULL;
    kv_cache_free(kv);
    model_free(m);
    printf("%d checks, %d failed\n", checks, failures);
    return failures != 0;
}
