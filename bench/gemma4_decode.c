/* gemma4_decode.c — decode tokens/s of a small Gemma 4 model (layer types of their own head_dim and
 * kv heads, K = V, shared K/V, the v norm, per-layer inputs, layer scalars) through the two paths a
 * step can take: model_forward over one token with the KV cache (what every Gemma 4 model decoded
 * with before kv_decode_step covered its switches) and kv_decode_step (one parallel region per
 * token). Both decode the same tokens from the same prefill, alternately, ROUNDS times; prints
 * each round's tok/s and the medians, and checks that both paths give the same logits bit for bit.
 *
 *   gemma4_decode [--threads N] [--tokens N] [--rounds N]     (built on demand: make gemma4_decode)
 *
 * The shape: d 512, 12 layers (5 sliding : 1 full, the last 2 sharing K/V), 8 query heads, sliding
 * layers 2 kv heads of 64, full layers 1 kv head of 128 (K = V), FFN 2048, per-layer inputs of 64,
 * vocabulary 8192, random weights (the speed does not depend on them). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/decode.h"
#include "model/model.h"
#include "util/error.h"
#include "model/context.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

enum { PREFILL = 16 };

/* tok/s of decoding n tokens after the prefill; the last token's logits into last */
static double decode(tlm_model *m, const int *tok, int n, int step, float *last) {
    kv_cache *kv = kv_cache_create(m, PREFILL + n);
    if (!kv) return -1;
    m->ctx->kv = kv;
    if (model_forward(m, tok, NULL, 1, PREFILL, NULL)) return -1;
    const double t0 = now_s();
    const float *lg = NULL;
    for (int t = PREFILL; t < PREFILL + n; t++) {
        if (step) {
            lg = kv_decode_step(m->ctx, tok[t]);
        } else {
            lg = model_forward(m, tok + t, NULL, 1, 1, NULL) ? NULL : model_last_logits(m);
        }
        if (!lg) return -1;
    }
    const double dt = now_s() - t0;
    memcpy(last, lg, sizeof(float) * m->cfg.vocab_size);
    m->ctx->kv = NULL;
    kv_cache_free(kv);
    return n / dt;
}

int main(int argc, char **argv) {
    int threads = 2, n = 64, rounds = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--tokens")) n = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else return fprintf(stderr, "usage: gemma4_decode [--threads N] [--tokens N] [--rounds N]\n"), 2;
    }
    if (threads < 1 || n < 1 || rounds < 1 || rounds > 100) return fprintf(stderr, "bad arguments\n"), 2;
    omp_set_num_threads(threads);
    tlm_config c;
    config_defaults(&c);
    c.vocab_size = 8192, c.d_model = 512, c.n_layers = 12, c.n_heads = 8, c.n_kv_heads = 2, c.head_dim = 64;
    c.d_ff = 2048, c.max_seq = 4096;
    c.placement = PLACE_SANDWICH, c.qk_norm = QK_NORM_HEAD, c.v_norm = true, c.query_pre_attn_scalar = 1;
    c.embed_scale = true, c.ffn = FFN_GEGLU, c.final_softcap = 30, c.layer_scalar = true, c.norm_eps = 1e-6f;
    c.sliding_window = 512, c.rope_theta = 1e6f, c.rope_theta_local = 1e4f, c.n_layer_types = c.n_layers;
    for (int l = 0; l < c.n_layers; l++) c.layer_sliding[l] = (l + 1) % 6 != 0;
    c.layer_sliding[c.n_layers - 1] = 0;
    c.head_dim_full = 128, c.n_kv_heads_full = 1, c.rope_proportional = 0.25f, c.k_eq_v = true;
    c.n_kv_shared = 2, c.ple_dim = 64;
    if (config_validate(&c, "gemma4_decode")) return fprintf(stderr, "%s\n", tlm_last_error()), 1;
    tlm_model *m = model_create(&c);
    if (!m) return 1;
    model_init_weights(m, 7);
    model_set_mode(m, MODEL_INFER_LAST);
    int *tok = malloc(sizeof(int) * (PREFILL + n));
    for (int t = 0; t < PREFILL + n; t++) tok[t] = (t * 7919 + 13) % c.vocab_size;
    float *a = malloc(sizeof(float) * c.vocab_size), *b = malloc(sizeof(float) * c.vocab_size);
    double fwd[100], stp[100];
    printf("gemma4_decode: d %d, %d layers, %d threads, %d tokens after a prefill of %d, %d rounds\n", c.d_model,
           c.n_layers, threads, n, PREFILL, rounds);
    int same = 1;
    for (int r = 0; r < rounds; r++) {
        fwd[r] = decode(m, tok, n, 0, a);
        stp[r] = decode(m, tok, n, 1, b);
        same &= !memcmp(a, b, sizeof(float) * c.vocab_size);
        printf("round %d: model_forward %.1f tok/s, kv_decode_step %.1f tok/s\n", r, fwd[r], stp[r]);
    }
    qsort(fwd, rounds, sizeof fwd[0], cmp_double);
    qsort(stp, rounds, sizeof stp[0], cmp_double);
    printf("median: model_forward %.1f tok/s, kv_decode_step %.1f tok/s (%.2fx); last logits %s\n", fwd[rounds / 2],
           stp[rounds / 2], stp[rounds / 2] / fwd[rounds / 2], same ? "bit-identical" : "DIFFER");
    free(tok), free(a), free(b);
    model_free(m);
    return same ? 0 : 1;
}
