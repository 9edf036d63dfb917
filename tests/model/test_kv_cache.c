/* test_kv_cache.c — incremental decoding with the KV cache gives the logits of a full
 * recomputation, for every architecture variant (placements, norms, GQA/MQA, sliding
 * window, learned positions, soft-caps): a prefill of 5 tokens, then one token at a time up
 * to 14, compared position by position with one forward over all 14.
 * Tolerance 5e-5 relative (of the largest logit): a 1-row product (matvec kernels) sums in
 * another order than a 14-row one (the GEMM backend); with weights x10 the norms amplify it:
 * measured up to 5.1e-6 with oneDNN and 2.0e-5 with OpenBLAS (three variants over 1e-5: post
 * norms, output norms, sliding window). A wrong position, cache slot or mask is off by O(1).
 * Multi-head latent attention's variants decode twice: the absorbed form (the default: W_UK folded
 * into the query, W_UV after the weighted sum of c_kv) and the expanded one, both within the same
 * tolerance of the full recomputation. */
#include "isa_cap.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/decode.h"
#include "model/model.h"
#include "ops/ops.h"
#include "util/error.h"
#include "variants.h"
#include "model/context.h"

int main(void) {
    if (isa_cap_changes_nothing("test_kv_cache")) return ISA_CAP_SKIP;
    int failures = 0, n = (int)(sizeof VARIANTS / sizeof VARIANTS[0]);
    enum { T = 14, PREFILL = 5 };
    int runs = n;
    for (int i = 0; i < n; i++)
      for (int form = 0; form < (VARIANTS[i].tweak == v_mla || VARIANTS[i].tweak == v_mla_yarn ||
                                 VARIANTS[i].tweak == v_mla_moe ? 2 : 1); form++) {
        runs += form;
        tlm_config c;
        variant_config(&c, &VARIANTS[i]);
        tlm_model *m = model_create(&c);
        model_init_weights(m, 11);
        /* larger weights than the init so the logits are far from uniform */
        for (size_t j = 0; j < m->n_params; j++) m->param_mem[j] *= 10.0f;
        const int V = c.vocab_size;
        int tok[T];
        for (int t = 0; t < T; t++) tok[t] = (t * 13 + 5) % V;
        float *full = malloc(sizeof(float) * T * V), *inc = malloc(sizeof(float) * T * V);
        model_forward(m, tok, NULL, 1, T, NULL);
        memcpy(full, m->ctx->acts.logits, sizeof(float) * T * V);
        kv_cache *kv = kv_cache_create(m, T);
        if (form == 1 && kv_cache_set_mla_absorbed(kv, m, 0)) {
            printf("%s: %s\n", VARIANTS[i].name, tlm_last_error());
            return 1;
        }
        m->ctx->kv = kv;
        int rc = model_forward(m, tok, NULL, 1, PREFILL, NULL);
        memcpy(inc, m->ctx->acts.logits, sizeof(float) * PREFILL * V);
        for (int t = PREFILL; t < T && !rc; t++) {
            rc = model_forward(m, tok + t, NULL, 1, 1, NULL);
            memcpy(inc + t * V, m->ctx->acts.logits, sizeof(float) * V);
        }
        /* the cache is full now: one more token must be refused, not written past the end */
        int refused = model_forward(m, tok, NULL, 1, 1, NULL) != 0;
        m->ctx->kv = NULL;
        double max_err = 0, max_ref = 0;
        for (int j = 0; j < T * V; j++) {
            max_err = fmax(max_err, fabs(full[j] - inc[j]));
            max_ref = fmax(max_ref, fabs(full[j]));
        }
        int ok = !rc && refused && max_err <= 5e-5 * max_ref;
        failures += !ok;
        printf("%-44s %s rel err %.1e %s\n", VARIANTS[i].name,
               config_mla(&c) ? (kv_cache_mla_absorbed(kv) ? "(absorbed)" : "(expanded)") : "", max_err / max_ref,
               ok ? "ok" : "FAIL");
        kv_cache_free(kv);
        free(full), free(inc);
        model_free(m);
    }
    /* Gemma 4's shared keys and values are stored once: v_gemma4_shared has 4 layers S F S F, the
     * last two reading layers 0 and 1; a sliding layer's K (or V) is 2 kv heads x 8 = 16 floats a
     * position, a full one's 1 x 16 = 16: 2 x T x (16 + 16) floats, not 2 x T x 4 x 16 */
    {
        tlm_config c;
        variant_config(&c, &(variant){"shared", v_gemma4_shared});
        const size_t got = kv_cache_floats(&c, T), want = 2 * (size_t)T * (16 + 16);
        c.n_kv_shared = 0;
        const size_t unshared = kv_cache_floats(&c, T), want_unshared = 2 * (size_t)T * 4 * 16;
        const int ok = got == want && unshared == want_unshared;
        failures += !ok, runs++;
        printf("%-44s %zu floats (%zu without sharing) %s\n", "shared K/V stored once", got, unshared,
               ok ? "ok" : "FAIL");
    }
    /* MLA caches c_kv and k_pe alone: v_mla's 2 layers x T x (10 + 4) floats */
    {
        tlm_config c;
        variant_config(&c, &(variant){"mla", v_mla});
        const size_t got = kv_cache_floats(&c, T), want = 2 * (size_t)T * (10 + 4);
        const int ok = got == want;
        failures += !ok, runs++;
        printf("%-44s %zu floats (want %zu) %s\n", "mla caches c_kv + k_pe", got, want, ok ? "ok" : "FAIL");
    }
    /* Mixed precision on AMX: a prompt fed through the cache in chunks (9 + 7 rows, so the linear
     * layers multiply in bf16 too) gives the full pass's logits. The chunks' attention rounds what the
     * full pass rounds (q, k, v, P to bf16, f32 sums and softmax), so what is left is the order of a
     * few f32 sums: measured 0 in 13 of the 14 variants and 3.3e-7 of the largest logit in one; attention
     * computed in f32 instead differs by bf16's rounding, 1e-3 and more. Not the mixtures of experts:
     * an expert multiplies in bf16 only when more than MATVEC_MAX_ROWS tokens chose it, which chunking
     * changes (one variant differed by 7.6e-4 in the sanitizer build, where its routing differs). */
    if (gemm_bf16_path() == GEMM_BF16_AMX) {
        enum { TB = 16, FIRST = 9 };
        for (int i = 0; i < n; i++) {
            if (VARIANTS[i].tweak == v_mla || VARIANTS[i].tweak == v_mla_yarn || VARIANTS[i].tweak == v_mla_moe)
                continue; /* (MLA's cache has its own attention, f32 whatever the precision) */
            tlm_config c;
            variant_config(&c, &VARIANTS[i]);
            if (c.n_experts > 0) continue;
            tlm_model *m = model_create(&c);
            model_init_weights(m, 11);
            for (size_t j = 0; j < m->n_params; j++) m->param_mem[j] *= 10.0f;
            if (model_set_mixed_bf16(m, 1, NULL) != 1) {
                printf("%s: mixed precision refused on an AMX CPU\n", VARIANTS[i].name);
                return 1;
            }
            model_weights_changed(m);
            const int V = c.vocab_size;
            int tok[TB];
            for (int t = 0; t < TB; t++) tok[t] = (t * 13 + 5) % V;
            float *full = malloc(sizeof(float) * TB * V), *inc = malloc(sizeof(float) * TB * V);
            int rc = model_forward(m, tok, NULL, 1, TB, NULL);
            memcpy(full, m->ctx->acts.logits, sizeof(float) * TB * V);
            kv_cache *kv = kv_cache_create(m, TB);
            m->ctx->kv = kv;
            rc |= model_forward(m, tok, NULL, 1, FIRST, NULL);
            memcpy(inc, m->ctx->acts.logits, sizeof(float) * FIRST * V);
            rc |= model_forward(m, tok + FIRST, NULL, 1, TB - FIRST, NULL);
            memcpy(inc + FIRST * V, m->ctx->acts.logits, sizeof(float) * (TB - FIRST) * V);
            m->ctx->kv = NULL;
            double max_err = 0, max_ref = 0;
            for (int j = 0; j < TB * V; j++) {
                max_err = fmax(max_err, fabs(full[j] - inc[j]));
                max_ref = fmax(max_ref, fabs(full[j]));
            }
            const int ok = !rc && max_err <= 1e-5 * max_ref;
            failures += !ok, runs++;
            printf("%-44s bf16 chunks rel err %.1e %s\n", VARIANTS[i].name, max_err / max_ref, ok ? "ok" : "FAIL");
            kv_cache_free(kv);
            free(full), free(inc);
            model_free(m);
        }
    } else {
        printf("(no AMX: the mixed-precision chunked prefill is not checked here)\n");
    }
    printf("%d passed, %d failed\n", runs - failures, failures);
    return failures != 0;
}
