/* tinylm generate — sample text from a model directory (a training run, an HF model, or a
 * llama2.c .bin with --tokenizer), streaming tokens as they come. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "model/checkpoint.h"
#include "tokenizer/tokenizer.h"
#include "train/generate.h"
#include "train/sampler.h"
#include "util/clock.h"
#include "util/cpu.h"
#include "util/error.h"

/* like run.c and llama.cpp: what the run took, on stderr so stdout stays the text */
static void print_timings(const tlm_model *m, const gen_stats *st, double load_s) {
    fflush(stdout);
    fprintf(stderr, "tinylm generate: load %.0f ms (%.1f MiB of %s weights); prompt %d tokens in %.1f ms (%.1f tok/s); "
                    "generated %d tokens, %.2f ms per token after the first (%.2f tok/s); %d threads, %s, %s\n",
            load_s * 1e3, model_weight_bytes(m) / 1048576.0, m->w16_mem ? "bf16" : "f32", st->n_prompt,
            st->prefill_s * 1e3, st->prefill_s > 0 ? st->n_prompt / st->prefill_s : 0.0, st->n_generated,
            st->n_decoded ? st->decode_s * 1e3 / st->n_decoded : 0.0,
            st->decode_s > 0 ? st->n_decoded / st->decode_s : 0.0, omp_get_max_threads(),
            tlm_isa_name(tlm_cpu_isa()), gemm_backend_name());
}

static int usage(void) {
    fprintf(stderr, "usage: tinylm generate --model DIR [--tokenizer PATH] [--prompt TEXT] [-n N] [--temperature T]\n"
                    "                       [--top-k K] [--top-p P] [--seed S] [--dtype auto|f32|bf16]\n"
                    "  -n: new tokens (default 256); temperature 0 = greedy (default 1.0); stops at BOS/EOS\n"
                    "  --dtype: weights in memory; bf16 halves the bytes read per token (auto: bf16 when the\n"
                    "           checkpoint stores bf16, else f32). Timings go to stderr at the end.\n");
    return 2;
}

int cmd_generate(int argc, char **argv) {
    const char *model_dir = NULL, *tok_path = NULL, *prompt = "", *dtype = "auto";
    gen_options g = {.max_new_tokens = 256, .temperature = 1.0f, .top_k = 0, .top_p = 0.0f, .seed = 1337};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!(v = cli_value(argc, argv, &i))) return cli_fail("generate");
        char *end = NULL;
        if (!strcmp(a, "--model")) model_dir = v;
        else if (!strcmp(a, "--tokenizer")) tok_path = v;
        else if (!strcmp(a, "--prompt")) prompt = v;
        else if (!strcmp(a, "--dtype")) dtype = v;
        else if (!strcmp(a, "-n")) g.max_new_tokens = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--temperature")) g.temperature = strtof(v, &end);
        else if (!strcmp(a, "--top-k")) g.top_k = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--top-p")) g.top_p = strtof(v, &end);
        else if (!strcmp(a, "--seed")) g.seed = strtoull(v, &end, 10);
        else return usage();
        if (end && (end == v || *end)) return fprintf(stderr, "tinylm generate: %s \"%s\" is not a number\n", a, v), 1;
    }
    if (!model_dir) return usage();
    if (g.max_new_tokens <= 0) return fprintf(stderr, "tinylm generate: -n must be positive\n"), 1;
    if (sampler_check(g.temperature, g.top_k, g.top_p)) return cli_fail("generate");
    double t_load = tlm_now_s();
    tlm_model *m = model_load_dir(model_dir);
    if (!m || cli_apply_dtype(m, dtype)) {
        model_free(m);
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
    rc = generate(m, tok, ids, (int)n, &g, stdout, NULL, NULL, &st) ? 1 : 0;
    printf("\n");
    if (!rc) print_timings(m, &st, t_load);
done:
    if (rc) cli_fail("generate");
    free(ids);
    tlm_tokenizer_free(tok);
    model_free(m);
    return rc;
}
