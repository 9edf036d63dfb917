/* tinylm info — what a config builds: the architecture switches and the parameter count
 * by component (embeddings, attention, FFN, norms, head) with shares. Shapes only: works
 * for configs far too large to allocate (e.g. Llama-3.1-8B). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "formats/gguf.h"
#include "convert/checkpoint.h"
#include "convert/explain.h"
#include "convert/family.h"
#include "model/decode.h"
#include "model/model.h"
#include "ops/quant.h"
#include "ops/quant_gemm.h"
#include "ops/ops.h"
#include "util/error.h"
#include "util/clock.h"
#include "util/cpu.h"
#include "util/io.h"
#include "util/machine.h"

enum { C_EMBED, C_ATTN, C_FFN, C_NORM, C_PER_LAYER, C_HEAD, C_COUNT };
static const char *const COMPONENT[C_COUNT] = {"embeddings", "attention", "feed-forward", "norms", "per-layer",
                                               "head"};

static int component_of(const tensor_info *t) {
    /* Gemma 4's per-layer inputs (their norms are norms) and layer scalars */
    if (strstr(t->name, "layer_scalar") || (strstr(t->name, "ple_") && !strstr(t->name, "norm."))) return C_PER_LAYER;
    if (strstr(t->name, ".ffn.router.")) return C_FFN; /* (Gemma 4's router scales are gains, not norms) */
    if (t->kind == TENSOR_NORM || strstr(t->name, "norm.")) return C_NORM;
    if (!strncmp(t->name, "embed.", 6) || !strncmp(t->name, "pos_embed.", 10)) return C_EMBED;
    if (strstr(t->name, ".attn.")) return C_ATTN;
    if (strstr(t->name, ".ffn.")) return C_FFN;
    return C_HEAD;
}

static void thousands(char *buf, size_t size, unsigned long long v) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%llu", v), k = 0;
    for (int i = 0; i < n && k + 2 < (int)size; i++) {
        if (i && (n - i) % 3 == 0) buf[k++] = ',';
        buf[k++] = tmp[i];
    }
    buf[k] = '\0';
}

static const char USAGE[] =
    "usage: tinylm info --config FILE | --model DIR | --system | --metadata FILE.gguf  [--context N] [--batch B\n"
    "       --seq T] [--explain]\n"
    "  the architecture, the parameters by component and the memory they need (shapes only: no\n"
    "  weights are loaded): the weights in f32 and bf16, the KV cache of a --context N generation\n"
    "  (default max_position_embeddings), the activations of a training batch --batch B (default 1)\n"
    "  x --seq T (default max_position_embeddings) as the engine lays them out;\n"
    "  --system: the CPU, the kernels and GEMM backend tinylm runs, the AMX / AVX512-BF16 /\n"
    "  AVX512-VNNI units (and whether Linux lets this process use the AMX tiles), and this machine's measured\n"
    "  FMA peak, sgemm speed and DRAM read bandwidth;\n"
    "  --explain: the config in plain words instead (norm type and formula, placement and the norms\n"
    "  of a layer by their checkpoint names, QK-norm, soft-caps, sliding layers, heads, RoPE, head,\n"
    "  init), and the keys of the file its reader did not understand;\n"
    "  --metadata FILE.gguf: every metadata key of a GGUF file with its type and value (arrays: their\n"
    "  element type, count and first elements)\n";

/* One line: the AMX units (cpuid) and whether this process may use them (XCR0, the Linux
 * permission), AVX512-BF16 and AVX512-VNNI; what the hardware has, whatever TLM_ISA says
 * (tests/cli/test_info_system.py checks it against /proc/cpuinfo) */
static void print_units(const tlm_cpu_features *f) {
    printf("AMX:");
    if (!f->amx_tile && !f->amx_bf16 && !f->amx_int8) printf(" absent");
    if (f->amx_tile) printf(" tile");
    if (f->amx_bf16) printf(" bf16");
    if (f->amx_int8) printf(" int8");
    if (f->amx_permitted)
        printf(" (tile data permitted by the kernel)");
    else if (f->amx_tile && !f->amx_os)
        printf(" (unusable: the OS does not enable the tile state in XCR0)");
    else if (f->amx_tile)
        printf(" (unusable: the kernel refused the tile data: %s)", strerror(f->amx_perm_errno));
    printf("; AVX512-BF16 %s; AVX512-VNNI %s", f->avx512_bf16 ? "present" : "absent",
           f->avx512_vnni ? "present" : "absent");
    if (tlm_cpu_isa() != TLM_ISA_AVX512 && (f->amx_permitted || f->avx512_bf16 || f->avx512_vnni))
        printf(" (unused: TLM_ISA caps the kernels at %s)", tlm_isa_name(tlm_cpu_isa()));
    printf("\n");
}

/* tinylm info --system: what runs the arithmetic on this machine, and what the machine can do */
static int info_system(void) {
    printf("cpu: %s\n", tlm_cpu_brand());
    printf("kernels: %s (chosen from cpuid)%s\n", tlm_isa_name(tlm_cpu_isa()),
           getenv("TLM_ISA") ? " capped by TLM_ISA" : "");
    print_units(tlm_cpu_features_get());
    printf("GEMM backend: %s\n", gemm_backend_name());
    printf("OpenMP threads: %d\n", omp_get_max_threads());
    fflush(stdout);
    const double peak = tlm_measure_fma_gflops(0.2);
    printf("measured FMA peak: %.0f GFLOP/s\n", peak);
    fflush(stdout);
    const gemm_bf16_path_t bf16 = gemm_bf16_path();
    if (bf16 == GEMM_BF16_NONE) {
        printf("bf16 products: none (no AMX-BF16 or AVX512-BF16 path%s): --precision bf16 computes in fp32\n",
               getenv("TLM_ISA") ? " under TLM_ISA" : "");
    } else {
        const double bf = gemm_bf16_measure_gflops(1024);
        printf("measured bf16 matmul 1024x1024x1024 (%s, f32 sums): %.0f GFLOP/s (%.1fx the FMA peak)\n",
               gemm_bf16_path_name(bf16), bf, bf / peak);
    }
    fflush(stdout);
    enum { S = 1024 };
    float *a = calloc((size_t)S * S, sizeof(float)), *b = calloc((size_t)S * S, sizeof(float)),
          *c = calloc((size_t)S * S, sizeof(float));
    if (a && b && c) {
        double best = 1e30;
        for (int r = 0; r < 5; r++) {
            double t0 = tlm_now_s();
            gemm(0, 1, S, S, S, 1.0f, a, S, b, S, 0.0f, c, S);
            double dt = tlm_now_s() - t0;
            best = dt < best ? dt : best;
        }
        double gf = 2.0 * S * S * S / best / 1e9;
        printf("measured sgemm %dx%dx%d: %.0f GFLOP/s (%.0f%% of the FMA peak)\n", S, S, S, gf, 100.0 * gf / peak);
    }
    free(a), free(b), free(c);
    fflush(stdout);
    printf("measured DRAM read bandwidth: %.1f GB/s\n", tlm_measure_read_gbs(1024));
    return 0;
}

static double mib(double bytes) { return bytes / 1048576.0; }

/* up to `max` bytes of a GGUF string, quoted, control and non-ASCII bytes escaped (a file's bytes, never trusted
 * to be printable) */
static void print_gguf_str(const char *p, uint64_t len, uint64_t max) {
    putchar('"');
    for (uint64_t i = 0; i < len && i < max; i++) {
        const unsigned char ch = (unsigned char)p[i];
        if (ch == '"' || ch == '\\') printf("\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f) printf("\\x%02x", ch);
        else putchar(ch);
    }
    printf("\"%s", len > max ? "..." : "");
    if (len > max) printf(" (%llu bytes)", (unsigned long long)len);
}

/* one scalar value of key (a NUL-terminated copy) or element i of an array kv */
static void print_gguf_value(const tlm_gguf *g, const gguf_kv *kv, const char *key, gguf_type type, int64_t i) {
    int64_t v = 0;
    float f = 0.0f;
    int b = 0;
    gguf_str str = {"", 0};
    int rc;
    switch (type) {
    case GGUF_STRING:
        rc = i < 0 ? tlm_gguf_get_str(g, key, &str) : tlm_gguf_array_str(g, kv, (uint64_t)i, &str);
        if (rc > 0) print_gguf_str(str.p, str.len, i < 0 ? 120 : 24);
        break;
    case GGUF_FLOAT32:
    case GGUF_FLOAT64:
        rc = i < 0 ? tlm_gguf_get_f32(g, key, &f) : tlm_gguf_array_f32(g, kv, (uint64_t)i, &f);
        if (rc > 0) printf("%.9g", f);
        break;
    case GGUF_BOOL:
        rc = i < 0 ? tlm_gguf_get_bool(g, key, &b) : tlm_gguf_array_i64(g, kv, (uint64_t)i, &v);
        if (rc > 0) printf("%s", (i < 0 ? b : v != 0) ? "true" : "false");
        break;
    default:
        rc = i < 0 ? tlm_gguf_get_i64(g, key, &v) : tlm_gguf_array_i64(g, kv, (uint64_t)i, &v);
        if (rc > 0) printf("%lld", (long long)v);
        break;
    }
    if (rc <= 0) printf("(not readable as %s)", tlm_gguf_type_name(type));
}

/* tinylm info --metadata X.gguf: every metadata key, its type and value; arrays summarised */
static int print_metadata(const char *path) {
    tlm_gguf *g = tlm_gguf_open(path);
    if (!g) return cli_fail("info");
    printf("%s: GGUF version %u, %zu metadata keys, %zu tensors\n", path, tlm_gguf_version(g), tlm_gguf_kv_count(g),
           tlm_gguf_tensor_count(g));
    for (size_t i = 0; i < tlm_gguf_kv_count(g); i++) {
        const gguf_kv *kv = tlm_gguf_kv_at(g, i);
        char key[256];
        const int fits = kv->key.len < sizeof key && !memchr(kv->key.p, 0, kv->key.len);
        snprintf(key, sizeof key, "%.*s", fits ? (int)kv->key.len : 0, kv->key.p);
        if (fits) printf("%-44s ", key);
        else print_gguf_str(kv->key.p, kv->key.len, 60), printf(" ");
        if (kv->type != GGUF_ARRAY) {
            printf("%-8s ", tlm_gguf_type_name(kv->type));
            if (fits) print_gguf_value(g, kv, key, kv->type, -1);
            else printf("(key not addressable)");
            printf("\n");
            continue;
        }
        printf("array of %llu %s", (unsigned long long)kv->count, tlm_gguf_type_name(kv->elem_type));
        if (kv->elem_type != GGUF_ARRAY && kv->count) {
            const uint64_t shown = kv->count < 4 ? kv->count : 4;
            printf(": [");
            for (uint64_t j = 0; j < shown; j++) {
                if (j) printf(", ");
                print_gguf_value(g, kv, key, kv->elem_type, (int64_t)j);
            }
            printf("%s]", kv->count > shown ? ", ..." : "");
        }
        printf("\n");
    }
    tlm_gguf_close(g);
    return 0;
}

/* what the config needs in memory, from the shapes alone */
static void print_memory(const tlm_config *c, const tensor_info *t, int n, int context, int batch, int seq) {
    unsigned long long f32 = 0, bf16 = 0;
    for (int i = 0; i < n; i++) {
        f32 += 4ull * t[i].numel;
        /* model_weights_to_bf16 keeps every matrix but the learned positions as bf16 (params.c) */
        bf16 += (t[i].ndim == 2 && strcmp(t[i].name, "pos_embed.weight") != 0 ? 2ull : 4ull) * t[i].numel;
    }
    const unsigned long long kv_dim = (unsigned long long)c->n_kv_heads * c->head_dim;
    const unsigned long long kv = 4ull * kv_cache_floats(c, context);
    int stored = 0, uniform = 1;
    for (int l = 0; l < c->n_layers; l++) {
        stored += config_kv_source(c, l) == l;
        uniform &= (unsigned long long)config_layer_kv_heads(c, l) * config_layer_head_dim(c, l) == kv_dim;
    }
    const size_t acts = model_activation_floats(c, MODEL_TRAIN, batch, seq);
    char kv_label[64];
    snprintf(kv_label, sizeof kv_label, "KV cache, %d positions", context);
    printf("\nmemory (from the shapes):\n");
    printf("  %-28s %16llu bytes %11.1f MiB\n", "weights f32", f32, mib((double)f32));
    printf("  %-28s %16llu bytes %11.1f MiB  (matrices bf16; norms, biases f32)\n", "weights bf16", bf16,
           mib((double)bf16));
    if (config_mla(c)) { /* the latent cache: c_kv and k_pe per layer and position */
        printf("  %-28s %16llu bytes %11.1f MiB  (MLA: %d layers x %d x (kv_lora_rank %d + qk_rope_head_dim %d) x 4 "
               "bytes)\n", kv_label, kv, mib((double)kv), c->n_layers, context, c->kv_lora_rank, c->qk_rope_dim);
        const size_t mla = kv_cache_bytes_per_token(c), mha = kv_cache_mha_bytes_per_token(c);
        printf("  %-28s %16zu bytes per token, against %zu with ordinary MHA (K of %d + %d dims and V of %d for each "
               "of %d heads): %.1fx smaller\n",
               "KV cache per token", mla, mha, c->qk_nope_dim, c->qk_rope_dim, c->v_head_dim, c->n_heads,
               (double)mha / (double)mla);
    } else if (uniform)
        printf("  %-28s %16llu bytes %11.1f MiB  (%d layers x K and V x %d x kv_dim %llu x 4 bytes)\n", kv_label, kv,
               mib((double)kv), stored, context, kv_dim);
    else { /* Gemma 4: full and sliding layers of their own widths */
        printf("  %-28s %16llu bytes %11.1f MiB  (K and V x %d x 4 bytes x kv_dim of each layer:", kv_label, kv,
               mib((double)kv), context);
        for (int l = 0; l < c->n_layers && l < 12; l++)
            if (config_kv_source(c, l) == l) printf(" %d", config_layer_kv_heads(c, l) * config_layer_head_dim(c, l));
        printf("%s)\n", c->n_layers > 12 ? " ..." : "");
    }
    if (stored < c->n_layers)
        printf("  %-28s %d of the %d layers (num_kv_shared_layers) attend over an earlier layer's keys and values:\n"
               "  %-28s stored once, by that layer\n", "", c->n_layers - stored, c->n_layers, "");
    /* the same cache in a 2-byte element type (transformers' bf16 cache, llama.cpp's default f16 one) */
    printf("  %-28s %16llu bytes %11.1f MiB  (the same positions in 2-byte elements: transformers' bf16 cache, "
           "llama.cpp's default f16 one; tinylm's cache is f32)\n", "KV cache, bf16 / f16", kv / 2, mib((double)kv / 2));
    /* sliding layers at their window: what a rolling cache holds (tinylm's keeps every position of every layer) */
    unsigned long long windowed = 0;
    int n_slide = 0;
    for (int l = 0; !config_mla(c) && l < c->n_layers; l++) {
        if (config_kv_source(c, l) != l) continue;
        const int slide = c->sliding_window > 0 && c->layer_sliding[l] && c->sliding_window < context;
        n_slide += slide;
        windowed += 4ull * 2 * (unsigned long long)(slide ? c->sliding_window : context) * config_layer_kv_heads(c, l) *
                    config_layer_head_dim(c, l);
    }
    if (n_slide)
        printf("  %-28s %16llu bytes %11.1f MiB  (f32; %.1f MiB in bf16 / f16: the %d sliding layers hold their "
               "window of %d positions, as a rolling cache does; tinylm's cache keeps all %d)\n",
               "KV cache, sliding at window", windowed, mib((double)windowed), mib((double)windowed / 2), n_slide,
               c->sliding_window, context);
    if (context > c->max_seq)
        printf("  %-28s --context %d exceeds max_position_embeddings %d: positions past it were never trained "
               "(the model's quality there is unknown)\n", "warning:", context, c->max_seq);
    printf("  %-28s %16llu bytes %11.1f MiB  (batch %d x %d tokens, %d threads; gradients and Adam's m, v:\n"
           "  %-28s 3 x the f32 weights more)\n",
           "training activations", 4ull * acts, mib(4.0 * acts), batch, seq, omp_get_max_threads(), "");
}

/* a GGUF file's weights as the engine keeps them: the file's types, bytes, bits per weight, bytes
 * read per decoded token */
static int print_stored(const char *path) {
    tlm_model *m = gguf_model_load(path);
    if (!m) return cli_fail("info");
    char types[96];
    size_t matrix_values = 0, matrix_bytes = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        size_t bytes;
        (void)model_tensor_data(m, i, &bytes);
        if (m->tensors[i].ndim == 2) matrix_values += m->tensors[i].numel, matrix_bytes += bytes;
    }
    const size_t all = model_weight_bytes(m), per_token = model_decode_bytes(m);
    printf("  %-28s %16zu bytes %11.1f MiB  (matrices %s, %.3f bits per weight; vectors f32)\n",
           "weights as the file stores", all, mib((double)all), model_matrix_types(m, types, sizeof types),
           matrix_values ? 8.0 * matrix_bytes / matrix_values : 0.0);
    printf("  %-28s %16zu bytes %11.1f MiB  (every matrix but the embedding rows not looked up)\n",
           "read per decoded token", per_token, mib((double)per_token));
    /* the kernel each matrix type's decoding products take on this CPU (ops/quant.h) */
    int seen[WQ_TYPE_LIMIT] = {0};
    printf("\ndecoding products on this CPU (generate's default; --precision fp32: the exact ones):\n");
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_info *t = &m->tensors[i];
        const int k = t->qtype ? t->qtype : t->bf16 ? WQ_BF16 : WQ_F32;
        if (t->ndim != 2 || k >= WQ_TYPE_LIMIT || seen[k]++) continue;
        printf("  %-28s %s\n", wq_name(k), wq_product_kernel(k, WQ_PRODUCTS_INT8));
        if (wq_int_supported(k) && wq_gemm_pick(k) != WQ_GEMM_SCALAR) /* (ops/quant_gemm.h) */
            printf("  %-28s int8 GEMM (%s), each weight block unpacked once for all rows\n", "  prompts over 16 tokens",
                   wq_gemm_name(wq_gemm_pick(k)));
        if (wq_int_supported(k)) printf("  %-28s %s\n", "  --precision fp32", wq_widening_kernel(k));
    }
    model_free(m);
    return 0;
}

int cmd_info(int argc, char **argv) {
    const char *config_path = NULL, *model_dir = NULL, *metadata = NULL;
    int system = 0, explain = 0, context = 0, batch = 1, seq = 0;
    const double MAXLEN = 1 << 24;
    cli_opt opts[] = {{"--config", CLI_STR, &config_path, 0, 0, 0},
                      {"--model", CLI_STR, &model_dir, 0, 0, 0},
                      {"--system", CLI_FLAG, &system, 0, 0, 0},
                      {"--metadata", CLI_STR, &metadata, 0, 0, 0},
                      {"--explain", CLI_FLAG, &explain, 0, 0, 0},
                      {"--context", CLI_INT, &context, 1, MAXLEN, 0},
                      {"--batch", CLI_INT, &batch, 1, 65536, 0},
                      {"--seq", CLI_INT, &seq, 1, MAXLEN, 0}};
    cli_command cmd = {"info", USAGE, opts, sizeof opts / sizeof opts[0], 1, NULL, 0, 0, NULL};
    int prc = cli_parse(&cmd, argc, argv);
    if (prc != CLI_CONTINUE) return prc;
    if ((prc = cli_one_of(&cmd, 1, (const char *const[]){"--config", "--model", "--system", "--metadata", NULL})))
        return prc;
    if (system && explain) return cli_usage_error("info", "--explain explains a --config or --model, not --system");
    if (metadata && explain) return cli_usage_error("info", "--explain explains a --config or --model, not --metadata");
    if (system) return info_system();
    if (metadata) return print_metadata(metadata);
    tlm_config c;
    int rc;
    config_unknown_keys unknown;
    config_collect_unknown(&unknown); /* (the HF readers list the keys they skip) */
    if (model_dir && is_llama2c_file(model_dir)) {
        rc = llama2c_read_config(model_dir, &c);
    } else if (model_dir && !is_directory(model_dir) && tlm_gguf_is_file(model_dir)) {
        rc = gguf_read_config(model_dir, &c);
    } else if (model_dir) {
        char *dir = model_dir_resolve(model_dir), *path = dir ? path_join(dir, "config.json") : NULL;
        if (dir && !is_directory(dir))
            rc = tlm_error("%s: is a file, not a model: expected a directory (config.json + model.safetensors), a "
                           "training run directory, or a llama2.c checkpoint named *.bin", dir);
        else
            rc = !path || config_load(&c, path) || model_check_weights(dir, &c) ? -1 : 0;
        free(dir), free(path);
    } else {
        rc = config_load(&c, config_path);
    }
    config_collect_unknown(NULL);
    if (rc) return cli_fail("info");
    if (explain) {
        config_explain(stdout, &c, &unknown);
        return 0;
    }
    int n;
    size_t total;
    tensor_info *t = config_tensor_table(&c, &n, &total);
    if (!t) return cli_fail("info");

    unsigned long long sum[C_COUNT] = {0};
    int count[C_COUNT] = {0}, norms = 0;
    for (int i = 0; i < n; i++) {
        int k = component_of(&t[i]);
        sum[k] += t[i].numel;
        count[k]++;
        norms += k == C_NORM && !strstr(t[i].name, ".alpha"); /* (DyT: one alpha per norm) */
    }
    printf("model_type %s: %d layers, d_model %d, %d heads (%d kv, head_dim %d), d_ff %d, vocab %d\n", c.model_type,
           c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.head_dim, c.d_ff, c.vocab_size);
    printf("norm %s (eps %g) placed %s%s, positions %s, ffn %s, qk_norm %s%s%s\n", norm_type_name(c.norm), c.norm_eps,
           placement_name(c.placement), c.residual ? "" : ", NO residual", position_name(c.position), ffn_name(c.ffn),
           qk_norm_name(c.qk_norm), c.sliding_window ? ", sliding window" : "", c.tie_embeddings ? ", tied head" : "");
    config_explain_quantization(stdout, &c);
    printf("\n%-14s %8s %18s %9s\n", "component", "tensors", "parameters", "share");
    char num[32];
    for (int k = 0; k < C_COUNT; k++) {
        if (k == C_PER_LAYER && !count[k]) continue; /* (Gemma 4 only: per-layer inputs, layer scalars) */
        thousands(num, sizeof num, sum[k]);
        printf("%-14s %8d %18s %8.3f%%%s\n", COMPONENT[k], count[k], num, 100.0 * sum[k] / total,
               k == C_HEAD && c.tie_embeddings ? "  (tied to the embeddings)" : "");
    }
    thousands(num, sizeof num, total);
    printf("%-14s %8d %18s %8.3f%%\n", "total", n, num, 100.0);
    if (config_moe_layers(&c)) { /* a token runs k of the E routed experts of each MoE layer */
        unsigned long long routed = 0;
        for (int i = 0; i < n; i++)
            if (strstr(t[i].name, ".ffn.experts.")) routed += t[i].numel;
        const unsigned long long idle = routed / (unsigned long long)c.n_experts * (unsigned long long)(c.n_experts - c.n_experts_per_tok);
        thousands(num, sizeof num, total - idle);
        printf("%-14s %8s %18s %8.3f%%  (per token: %d of the %d routed experts of each of %d MoE layers; the whole "
               "input embedding counted, of which a token reads one row)\n", "active", "",
               num, 100.0 * (total - idle) / total, c.n_experts_per_tok, c.n_experts, config_moe_layers(&c));
    }
    /* DeepSeek-V3's multi-token-prediction layers: stored in the checkpoint, not part of the model's forward
     * (transformers skips them on load, so does tinylm), so not in the total; each is a decoder layer like the
     * last one plus eh_proj [d, 2d], enorm, hnorm, shared_head.norm and the [vocab, d] embedding and head
     * copies the release stores with it */
    if (c.n_nextn > 0) {
        char lp[32];
        const int n_lp = snprintf(lp, sizeof lp, "layers.%d.", c.n_layers - 1);
        unsigned long long layer = 0;
        for (int i = 0; i < n; i++)
            if (!strncmp(t[i].name, lp, (size_t)n_lp)) layer += t[i].numel;
        const unsigned long long d = (unsigned long long)c.d_model, V = (unsigned long long)c.vocab_size;
        const unsigned long long one = layer + 2 * d * d + 3 * d + 2 * V * d;
        thousands(num, sizeof num, one * (unsigned long long)c.n_nextn);
        printf("%-14s %8s %18s %9s  (not in the total: %d multi-token-prediction layer%s, num_nextn_predict_layers, "
               "each a layer like layer %d plus eh_proj, enorm, hnorm, shared_head.norm and its own embedding and "
               "head copies; loading skips %s, as transformers does)\n", "mtp", "", num, "", c.n_nextn,
               c.n_nextn > 1 ? "s" : "", c.n_layers - 1, c.n_nextn > 1 ? "them" : "it");
    }
    thousands(num, sizeof num, sum[C_NORM]);
    printf("\n%d %s%s hold %s parameters (%.3f%% of the model).\n", norms, norm_type_name(c.norm),
           norms == 1 ? "" : "s", num, 100.0 * sum[C_NORM] / total);
    if (context > c.max_seq)
        fprintf(stderr, "tinylm: warning: --context %d exceeds max_position_embeddings %d\n", context, c.max_seq);
    print_memory(&c, t, n, context ? context : c.max_seq, batch, seq ? seq : c.max_seq);
    free(t);
    if (model_dir && !is_directory(model_dir) && tlm_gguf_is_file(model_dir)) return print_stored(model_dir);
    return 0;
}
