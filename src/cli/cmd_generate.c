/* tinylm generate — sample text from a model directory (a training run, an HF model, or a
 * llama2.c .bin with --tokenizer), streaming tokens as they come. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "convert/checkpoint.h"
#include "model/decode.h"
#include "tokenizer/tokenizer.h"
#include "infer/generate.h"
#include "infer/sampler.h"
#include "util/clock.h"
#include "ops/quant.h"
#include "ops/quant_gemm.h"
#include "util/cpu.h"
#include "util/error.h"
#include "util/profile.h"

/* "; decode products int8 (AVX512-VNNI)" when a decoding step multiplies some of m's matrices in
 * integers (ops/quant.h), else "" */
static const char *decode_products(const tlm_model *m) {
    static char s[96];
    if (wq_get_products() != WQ_PRODUCTS_INT8 || wq_int_path_pick() == WQ_INT_SCALAR) return "";
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].ndim == 2 && wq_int_supported(m->tensors[i].qtype)) {
            if (wq_gemm_pick(m->tensors[i].qtype) != WQ_GEMM_SCALAR) /* (longer prompts: quant_gemm.h) */
                snprintf(s, sizeof s, "; decode products int8 (%s; prompts too)", wq_int_path_name(wq_int_path_pick()));
            else
                snprintf(s, sizeof s, "; decode products int8 (%s; prompts of up to %d tokens too)",
                         wq_int_path_name(wq_int_path_pick()), WQ_INT_PROMPT_ROWS);
            return s;
        }
    return "";
}

/* like run.c and llama.cpp: what the run took, on stderr so stdout stays the text */
static void print_timings(const tlm_model *m, const gen_stats *st, double load_s, int mla_expanded) {
    char types[64];
    fflush(stdout);
    fprintf(stderr,
            "tinylm generate: load %.0f ms (%.1f MiB of %s weights, %.1f MiB read per token); KV cache %.1f MiB "
            "cleared in %.1f ms; prompt %d tokens in "
            "%.1f ms (%.1f tok/s); generated %d tokens, %.2f ms per token after the first (%.2f tok/s); %d threads, "
            "%s, %s; prompt products %s%s%s%s\n",
            load_s * 1e3, model_weight_bytes(m) / 1048576.0, model_matrix_types(m, types, sizeof types),
            model_decode_bytes(m) / 1048576.0, st->kv_bytes / 1048576.0, st->setup_s * 1e3,
            st->n_prompt, st->prefill_s * 1e3, st->prefill_s > 0 ? st->n_prompt / st->prefill_s : 0.0, st->n_generated,
            st->n_decoded ? st->decode_s * 1e3 / st->n_decoded : 0.0,
            st->decode_s > 0 ? st->n_decoded / st->decode_s : 0.0, omp_get_max_threads(),
            tlm_isa_name(tlm_cpu_isa()), gemm_backend_name(), m->product_bf16 ? "bf16 (" : "fp32",
            m->product_bf16 ? gemm_bf16_path_name(gemm_bf16_path()) : "", m->product_bf16 ? ")" : "",
            decode_products(m));
    if (config_mla(&m->cfg))
        fprintf(stderr,
                "tinylm generate: multi-head latent attention: the KV cache holds %zu bytes per token (each layer's "
                "c_kv and k_pe), %zu with ordinary MHA's K and V of the same heads; decoded in the %s form\n",
                kv_cache_bytes_per_token(&m->cfg), kv_cache_mha_bytes_per_token(&m->cfg),
                mla_expanded ? "expanded" : "absorbed");
}

static const char USAGE[] =
    "usage: tinylm generate --model DIR [--tokenizer PATH] [--prompt TEXT | --prompt-file FILE] [-n N]\n"
    "                       [--temperature T] [--top-k K] [--top-p P] [--seed S] [--dtype auto|f32|bf16]\n                       [--precision auto|fp32|bf16] [--mla-decode absorbed|expanded]\n"
    "  --prompt-file FILE  the prompt is the file's bytes exactly (- = standard input)\n"
    "  -n N                new tokens, 1..2147483647 (default 256); stops early at BOS/EOS\n"
    "  --temperature T     0 = greedy, up to 1e6 (default 1.0)\n"
    "  --top-k K           keep the K most probable tokens (0 = off, the default)\n"
    "  --top-p P           nucleus sampling, 0..1 (0 or 1 = off, the default)\n"
    "  --seed S            any integer from -2^63 to 2^64-1 (a negative seed is its two's complement,\n"
    "                      -1 = 2^64-1); the same seed gives the same sample (default 1337)\n"
    "  --dtype D           weights in memory: bf16 halves the bytes read per token; auto (default) = bf16\n"
    "                      when the checkpoint stores bf16 or FP8 blocks (read as bf16 from the load on),\n"
    "                      else f32\n"
    "  --precision P       bf16: the prompt's matrix products on bf16 operands (AMX / AVX512-BF16;\n"
    "                      the attention's on AMX only), summed in f32; fp32: the reference numerics\n"
    "                      (quantized weights widened to f32 in every product); auto (default) = bf16\n"
    "                      when the weights are bf16 or quantized (a GGUF's blocks) and the CPU has bf16\n"
    "                      products. Under auto and bf16, decoding multiplies quantized weights in\n"
    "                      integers, the activations rounded to 8-bit blocks (docs/gguf.md)\n"
    "  --profile           time per op on standard error: the prompt's pass, then the decode steps per\n"
    "                      generated token (the norms of the one-row step, decode_norm, within the\n"
    "                      whole step, decode_step); an op inside another is indented under it\n"
    "  --mla-decode F      multi-head latent attention's decode form: absorbed (default: W_UK folded into\n"
    "                      the query, W_UV after the weighted sum of the cached c_kv) or expanded (every\n"
    "                      cached position's keys and values made again from c_kv each step; f32 weights)\n"
    "Timings (load, the KV cache's clearing, prompt and generation speed) go to standard error at the end.\n";

int cmd_generate(int argc, char **argv) {
    const char *model_dir = NULL, *tok_path = NULL, *prompt = "", *prompt_file = NULL, *dtype = "auto", *precision = "auto",
               *mla_decode = "absorbed";
    int profile = 0;
    gen_options g = {.max_new_tokens = 256, .temperature = 1.0f, .top_k = 0, .top_p = 0.0f, .seed = 1337};
    cli_opt opts[] = {
        {"--model", CLI_STR, &model_dir, 0, 0, 0},         {"--tokenizer", CLI_STR, &tok_path, 0, 0, 0},
        {"--prompt", CLI_STR, &prompt, 0, 0, 0},           {"--prompt-file", CLI_STR, &prompt_file, 0, 0, 0},
        {"-n", CLI_INT, &g.max_new_tokens, 1, 0x7fffffff, 0}, {"--temperature", CLI_FLOAT, &g.temperature, 0, 1e6, 0},
        {"--top-k", CLI_INT, &g.top_k, 0, 0x7fffffff, 0},  {"--top-p", CLI_FLOAT, &g.top_p, 0, 1, 0},
        {"--seed", CLI_SEED, &g.seed, 0, 0, 0},          {"--dtype", CLI_STR, &dtype, 0, 0, 0}, {"--precision", CLI_STR, &precision, 0, 0, 0},
        {"--profile", CLI_FLAG, &profile, 0, 0, 0},
        {"--mla-decode", CLI_STR, &mla_decode, 0, 0, 0},
    };
    cli_command cmd = {"generate", USAGE, opts, sizeof opts / sizeof opts[0], 1, NULL, 0, 0, NULL};
    int prc = cli_parse(&cmd, argc, argv);
    if (prc != CLI_CONTINUE) return prc;
    if (!model_dir) return cli_usage_error("generate", "--model DIR is required");
    if ((prc = cli_check_dtype("generate", dtype)) != CLI_CONTINUE) return prc;
    if ((prc = cli_check_precision("generate", precision, 1)) != CLI_CONTINUE) return prc;
    if ((prc = cli_one_of(&cmd, 0, (const char *const[]){"--prompt", "--prompt-file", NULL}))) return prc;
    if (strcmp(mla_decode, "absorbed") && strcmp(mla_decode, "expanded"))
        return cli_usage_error("generate", "--mla-decode must be absorbed or expanded, got \"%s\"", mla_decode);
    g.mla_expanded = !strcmp(mla_decode, "expanded");
    char *prompt_text = prompt_file ? cli_read_prompt_file(prompt_file) : NULL;
    if (prompt_file && !prompt_text) return cli_fail("generate");
    if (prompt_text) prompt = prompt_text;
    double t_load = tlm_now_s();
    tlm_model *m = model_load_dir_mapped(model_dir, !strcmp(dtype, "bf16") ? LOAD_BF16 : !strcmp(dtype, "auto") ? LOAD_AUTO : LOAD_F32);
    /* decoding's products of quantized weights: exact (weights widened, activations f32) for fp32,
     * the integer ones otherwise (docs/gguf.md measures what they cost) */
    wq_set_products(strcmp(precision, "fp32") ? WQ_PRODUCTS_INT8 : WQ_PRODUCTS_EXACT);
    if (!m || cli_apply_dtype(m, dtype) || cli_apply_precision(m, "generate", precision)) {
        model_free(m), free(prompt_text);
        return cli_fail("generate");
    }
    model_set_mode(m, MODEL_INFER_LAST);
    t_load = tlm_now_s() - t_load;
    tlm_tokenizer *tok = tok_path ? tlm_tokenizer_load(tok_path) : model_load_tokenizer(model_dir);
    int *ids = NULL, rc = 1;
    size_t n = 0;
    if (!tok) goto done;
    if (tlm_tokenizer_vocab_size(tok) > m->cfg.vocab_size) {
        tlm_error("the tokenizer has %d tokens, the model only %d", tlm_tokenizer_vocab_size(tok), m->cfg.vocab_size);
        goto done;
    }
    if (tlm_tokenizer_encode(tok, prompt, strlen(prompt), 1, &ids, &n)) goto done;
    if (n == 0) { /* no prompt and no BOS token (a character-level model): start a new line */
        free(ids);
        ids = NULL;
        if (tlm_tokenizer_encode(tok, "\n", 1, 0, &ids, &n)) goto done;
    }
    gen_stats st;
    tlm_profiling = profile;
    rc = generate(m->ctx, tok, ids, (int)n, &g, stdout, NULL, NULL, &st) ? 1 : 0;
    tlm_profiling = 0;
    printf("\n");
    if (!rc) print_timings(m, &st, t_load, g.mla_expanded);
    if (!rc && profile && st.n_decoded > 0) { /* (generate reset the times after the prompt) */
        fprintf(stderr, "profile over the %d decoded tokens after the first: %.4f ms per token\n", st.n_decoded,
                st.decode_s * 1e3 / st.n_decoded);
        prof_report(stderr, st.n_decoded, st.decode_s / st.n_decoded);
    }
done:
    if (rc) cli_fail("generate");
    free(ids), free(prompt_text);
    tlm_tokenizer_free(tok);
    model_free(m);
    return rc;
}
