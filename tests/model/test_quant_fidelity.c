/* test_quant_fidelity.c — what the integer products (ops/quant.h's WQ_PRODUCTS_INT8) cost a
 * model's predictions, against the exact products on the same quantized weights, both measured
 * against the f32 weights: each position of a real text decoded one token at a time
 * (kv_decode_step, the path the integer kernels serve), per position the KL divergence
 * KL(p_f32 || p_path) of the next-token distributions and whether their top tokens agree.
 *
 * As a test (no arguments): stories260K (data/, a trained llama2.c model) over the first 256
 * tokens of data/tinyshakespeare.txt, its matrices written as Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1
 * GGUF files (rows of 172 fall back to another type; stories260K's 64-wide rows are not whole
 * blocks of 256, so the K types are measured with another model: docs/gguf.md). The bound: the
 * activations' rounding is an 8-bit rounding per block of the kind Q8_0 applies to the weights, so
 * it may add to a type's divergence about what Q8_0's weights cost: the integer path's mean KL is
 * at most 1.1x the exact path's plus twice the exact path's KL of Q8_0 (measured first), and its
 * top-1 agreement at least the exact path's minus 2 points. The same text run as prompts (a full
 * pass per window of the model's context: more than 16 rows, the integer GEMM of ops/quant_gemm.c,
 * which computes each row as a decoding step does) is held to the same bound.
 *
 * As a measurement (docs/gguf.md's table):
 *   test_quant_fidelity MODEL TOKENIZER TEXT TOKENS TYPE ...
 * MODEL a tinylm checkpoint or run directory, a llama2.c .bin or a GGUF file (its f32 weights are
 * the reference), TOKENIZER a path or "model" (the one stored with it), TEXT's last 10% (what
 * `tinylm train` holds out), TOKENS positions (in windows of the model's context), TYPE q8_0,
 * q4_k, ...
 *   test_quant_fidelity --dump FILE.gguf "ID ID ..." OUT
 * decodes the ids one at a time under the exact and the integer products and writes the logits
 * [T, V] as raw little-endian float32 to OUT.exact.f32 and OUT.int8.f32 (for
 * bench/quant_vs_llamacpp.py, which compares them with llama.cpp's on the same file). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_count.h"
#include "convert/checkpoint.h"
#include "model/context.h"
#include "model/decode.h"
#include "convert/gguf_export.h"
#include "model/model.h"
#include "ops/quant.h"
#include "ops/quant_gemm.h"
#include "tokenizer/tokenizer.h"
#include "util/io.h"

static tlm_model *load_any(const char *path) {
    const size_t n = strlen(path);
    if (n > 5 && !strcmp(path + n - 5, ".gguf")) return gguf_model_load(path);
    if (is_llama2c_file(path)) return llama2c_load(path, 0);
    char *dir = model_dir_resolve(path);
    tlm_model *m = dir ? model_load_dir(dir) : NULL;
    free(dir);
    return m;
}

/* logits [T, V] of every position, decoded one token at a time (in windows of the model's
 * context, each from an empty cache) */
static float *decode_all(tlm_model *m, const int *ids, int T) {
    const int V = m->cfg.vocab_size, W = T < m->cfg.max_seq ? T : m->cfg.max_seq;
    float *out = malloc(sizeof(float) * (size_t)T * V);
    kv_cache *kv = kv_cache_create(m, W);
    if (!out || !kv) {
        free(out), kv_cache_free(kv);
        return NULL;
    }
    m->ctx->kv = kv;
    for (int t = 0; t < T; t++) {
        if (t % W == 0) kv_cache_reset(kv);
        const float *l = kv_decode_step(m->ctx, ids[t]);
        if (!l) {
            free(out), out = NULL;
            break;
        }
        memcpy(out + (size_t)t * V, l, sizeof(float) * V);
    }
    m->ctx->kv = NULL;
    kv_cache_free(kv);
    return out;
}

/* the same logits from full passes (the prompt's path: each window in one model_forward, its
 * quantized products through matmul_forward_quant's GEMM for more than 16 rows) */
static float *prompt_all(tlm_model *m, const int *ids, int T) {
    const int V = m->cfg.vocab_size, W = T < m->cfg.max_seq ? T : m->cfg.max_seq;
    float *out = malloc(sizeof(float) * (size_t)T * V);
    for (int t0 = 0; out && t0 < T; t0 += W) {
        const int n = T - t0 < W ? T - t0 : W;
        if (model_forward(m, ids + t0, NULL, 1, n, NULL)) free(out), out = NULL;
        else memcpy(out + (size_t)t0 * V, m->ctx->acts.logits, sizeof(float) * (size_t)n * V);
    }
    return out;
}

typedef struct {
    double kl_mean, kl_max, top1; /* nats; fraction of positions */
} fidelity;

static void log_softmax(const float *l, int V, double *out) {
    double mx = -INFINITY, s = 0;
    for (int v = 0; v < V; v++) mx = fmax(mx, l[v]);
    for (int v = 0; v < V; v++) s += exp(l[v] - mx);
    const double lse = mx + log(s);
    for (int v = 0; v < V; v++) out[v] = l[v] - lse;
}

static int argmax(const float *l, int V) {
    int a = 0;
    for (int v = 1; v < V; v++)
        if (l[v] > l[a]) a = v;
    return a;
}

static fidelity compare(const float *ref, const float *q, int T, int V) {
    fidelity f = {0, 0, 0};
    double *lp = malloc(sizeof(double) * V), *lq = malloc(sizeof(double) * V);
    for (int t = 0; t < T; t++) {
        const float *a = ref + (size_t)t * V, *b = q + (size_t)t * V;
        log_softmax(a, V, lp), log_softmax(b, V, lq);
        double kl = 0;
        for (int v = 0; v < V; v++) kl += exp(lp[v]) * (lp[v] - lq[v]);
        f.kl_mean += kl / T, f.kl_max = fmax(f.kl_max, kl);
        f.top1 += (argmax(a, V) == argmax(b, V)) / (double)T;
    }
    free(lp), free(lq);
    return f;
}

/* the type's file written from ref, loaded, decoded under both products, and run as prompts
 * (full passes) under the integer products (*prompt_int: whether they differ from the same
 * prompts under the exact products); 0, or -1 */
static int measure(const tlm_model *ref, const float *ref_logits, const int *ids, int T, int type, fidelity *exact,
                   fidelity *integer, fidelity *prompt, int *prompt_int, int *fallback) {
    char path[256];
    snprintf(path, sizeof path, "quant_fidelity_%d_%s.gguf", (int)getpid(), wq_name(type));
    if (gguf_export_file(ref, NULL, type, path, "fidelity", fallback)) return -1;
    tlm_model *m = gguf_model_load(path);
    unlink(path);
    if (!m) return -1;
    const int V = ref->cfg.vocab_size;
    int rc = -1;
    wq_set_products(WQ_PRODUCTS_EXACT);
    float *le = decode_all(m, ids, T);
    float *lpe = prompt_all(m, ids, T);
    wq_set_products(WQ_PRODUCTS_INT8);
    float *li = decode_all(m, ids, T), *lp = prompt_all(m, ids, T);
    wq_set_products(WQ_PRODUCTS_EXACT);
    if (le && li && lp && lpe) {
        *exact = compare(ref_logits, le, T, V), *integer = compare(ref_logits, li, T, V);
        *prompt = compare(ref_logits, lp, T, V);
        *prompt_int = memcmp(lp, lpe, sizeof(float) * (size_t)T * V) != 0;
        rc = 0;
    }
    free(le), free(li), free(lp), free(lpe);
    model_free(m);
    return rc;
}

static int *tokens_of(const char *tok_path, const char *model_path, const char *text_path, int T, int held_out) {
    tlm_tokenizer *tok = strcmp(tok_path, "model") ? tlm_tokenizer_load(tok_path) : model_load_tokenizer(model_path);
    size_t len = 0;
    char *text = tok ? read_text_file(text_path, &len) : NULL;
    int *ids = NULL;
    size_t n = 0;
    /* the text's last 10% (what `tinylm train` holds out for validation) when asked */
    const size_t start = held_out ? len - len / 10 : 0;
    len -= start;
    if (text && len > (size_t)T * 8) len = (size_t)T * 8; /* (enough text for T tokens) */
    if (!text || tlm_tokenizer_encode(tok, text + start, len, 1, &ids, &n) || n < (size_t)T) {
        fprintf(stderr, "tokens: %s (%zu of %d)\n", tlm_last_error(), n, T);
        free(ids), ids = NULL;
    }
    free(text);
    tlm_tokenizer_free(tok);
    return ids;
}

static int dump(const char *path, const char *id_text, const char *out) {
    tlm_model *m = gguf_model_load(path);
    if (!m) return fprintf(stderr, "%s\n", tlm_last_error()), 1;
    int ids[4096], T = 0, rc = 0;
    for (const char *p = id_text; *p && T < 4096;) {
        char *end;
        const long v = strtol(p, &end, 10);
        if (end == p) break;
        ids[T++] = (int)v, p = end;
    }
    for (int mode = 0; mode < 2 && !rc; mode++) {
        wq_set_products(mode ? WQ_PRODUCTS_INT8 : WQ_PRODUCTS_EXACT);
        float *l = decode_all(m, ids, T);
        char name[1024];
        snprintf(name, sizeof name, "%s.%s.f32", out, mode ? "int8" : "exact");
        FILE *f = l ? fopen(name, "wb") : NULL;
        rc = !f || fwrite(l, sizeof(float), (size_t)T * m->cfg.vocab_size, f) != (size_t)T * m->cfg.vocab_size;
        if (f && fclose(f)) rc = 1;
        free(l);
    }
    wq_set_products(WQ_PRODUCTS_EXACT);
    model_free(m);
    if (rc) fprintf(stderr, "--dump: failed (%s)\n", tlm_last_error());
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--dump")) return dump(argv[2], argv[3], argv[4]);
    const int as_test = argc < 2;
    const char *model_path = as_test ? TLM_SOURCE_DIR "/data/stories260K.bin" : argv[1];
    const char *tok_path = as_test ? TLM_SOURCE_DIR "/data/tok512.bin" : argc > 2 ? argv[2] : "model";
    const char *text_path = as_test ? TLM_SOURCE_DIR "/data/tinyshakespeare.txt" : argc > 3 ? argv[3] : "";
    const int T = as_test ? 256 : argc > 4 ? atoi(argv[4]) : 256;
    int types[16], nt = 0;
    if (as_test) {
        const int def[] = {WQ_Q8_0, WQ_Q4_0, WQ_Q4_1, WQ_Q5_0, WQ_Q5_1};
        for (int i = 0; i < 5; i++) types[nt++] = def[i];
    } else {
        for (int i = 5; i < argc && nt < 16; i++)
            if (wq_from_name(argv[i], &types[nt++])) return fprintf(stderr, "%s\n", tlm_last_error()), 2;
    }
    if (T < 2 || !nt) return fprintf(stderr, "usage: test_quant_fidelity [MODEL TOKENIZER TEXT TOKENS TYPE ...]\n"), 2;
    tlm_model *ref = load_any(model_path);
    int *ids = ref ? tokens_of(tok_path, model_path, text_path, T, !as_test) : NULL;
    float *ref_logits = ids ? decode_all(ref, ids, T) : NULL;
    CHECK(ref_logits != NULL, "the reference decoded %s", model_path);
    if (!ref_logits) return 1;
    printf("%s, %d tokens of %s; integer products: %s\n", model_path, T, text_path,
           wq_int_path_name(wq_int_path_pick()));
    printf("| type | exact: mean KL | max KL | top-1 | integer: mean KL | max KL | top-1 | integer prompts: mean KL | "
           "max KL | top-1 |\n");
    printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    double kl_q8 = 0;
    for (int i = 0; i < nt; i++) {
        fidelity e, q, p;
        int fb = 0, pi = 0;
        if (measure(ref, ref_logits, ids, T, types[i], &e, &q, &p, &pi, &fb)) {
            CHECK(0, "%s: %s", wq_name(types[i]), tlm_last_error());
            continue;
        }
        printf("| %s%s | %.2e | %.2e | %.1f%% | %.2e | %.2e | %.1f%% | %.2e | %.2e | %.1f%% |\n", wq_name(types[i]),
               fb ? " (some rows fall back)" : "", e.kl_mean, e.kl_max, 100 * e.top1, q.kl_mean, q.kl_max,
               100 * q.top1, p.kl_mean, p.kl_max, 100 * p.top1);
        if (types[i] == WQ_Q8_0) kl_q8 = e.kl_mean;
        if (as_test) {
            CHECK(q.kl_mean <= 1.1 * e.kl_mean + 2 * kl_q8, "%s: the integer path's mean KL %.3g against the exact's %.3g",
                  wq_name(types[i]), q.kl_mean, e.kl_mean);
            CHECK(q.top1 >= e.top1 - 0.02, "%s: top-1 agreement %.3f against the exact path's %.3f", wq_name(types[i]),
                  q.top1, e.top1);
            CHECK(e.kl_mean > 0 && q.kl_mean > 0, "%s: both paths differ from f32 (the measurement sees them)",
                  wq_name(types[i]));
            /* the prompts' integer GEMM (each row as a decoding step computes it) under the same bound */
            CHECK(p.kl_mean <= 1.1 * e.kl_mean + 2 * kl_q8, "%s: the integer prompts' mean KL %.3g against the exact's %.3g",
                  wq_name(types[i]), p.kl_mean, e.kl_mean);
            CHECK(p.top1 >= e.top1 - 0.02, "%s: the integer prompts' top-1 agreement %.3f against the exact path's %.3f",
                  wq_name(types[i]), p.top1, e.top1);
            CHECK(pi == (wq_gemm_pick(types[i]) != WQ_GEMM_SCALAR),
                  "%s: the prompts took the integer GEMM where a vector body runs it, else the exact products",
                  wq_name(types[i]));
        }
    }
    free(ids), free(ref_logits);
    model_free(ref);
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures != 0;
}
