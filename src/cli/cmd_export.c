/* tinylm export — writes a model (any directory or llama2.c .bin that `tinylm logits` loads)
 * as a Hugging Face style directory in the family its architecture matches (llama, gpt2),
 * or in the engine's own format when no family expresses it (src/convert/hf_export.h); with
 * --format llama2c as a llama2.c checkpoint DIR2/model.bin (src/convert/llama2c_export.h).
 * The tokenizer goes with it, so the exported folder runs with `generate` as it is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

#include "cli.h"
#include "convert/checkpoint.h"
#include "convert/family.h"
#include "convert/gguf_export.h"
#include "convert/hf_export.h"
#include "convert/llama2c_export.h"
#include "ops/quant.h"
#include "util/error.h"
#include "util/io.h"

int cmd_export(int argc, char **argv);

static const char USAGE[] =
    "usage: tinylm export --model DIR|FILE.bin|FILE.gguf --out DIR2|FILE.gguf [--format auto|llama2c|gguf]\n"
    "                     [--type TYPE] [--tokenizer PATH] [--no-tokenizer]\n"
    "  --format auto     a Hugging Face directory (model_type llama or gpt2; a mixture of experts as\n"
    "                    qwen3_moe, qwen2_moe or mixtral) when a family expresses\n"
    "                    the model, else the engine's own format (default)\n"
    "  --format llama2c  DIR2/model.bin, a llama2.c (run.c) checkpoint, + the tokenizer beside it;\n"
    "                    --model DIR2 loads it back\n"
    "  --format gguf     one GGUF file FILE.gguf (llama.cpp's format) in the architecture that\n"
    "                    computes the model (llama, qwen2, qwen3, qwen2moe, qwen3moe, gemma, gemma2,\n"
    "                    gemma3, olmo2, gpt2; docs/gguf.md), the tokenizer in its metadata\n"
    "  --type TYPE       (gguf) the matrices' type: keep (as the model holds them: f32, or a GGUF's\n"
    "                    own types; default), f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k,\n"
    "                    q5_k, q6_k; rows that are not whole blocks fall back (q4_k -> q5_0, ...)\n"
    "                    (auto) f32 (default) or bf16: every tensor of model.safetensors in that type\n"
    "  --tokenizer PATH  the tokenizer to write with the model (default: the model's own; a llama2.c\n"
    "                    .bin holds none, so it needs this)\n"
    "  --no-tokenizer    export the weights alone\n"
    "  DIR2 must be absent, empty, or a previous export (it is never cleared)\n"
    "usage: tinylm export --config FILE --format gguf --type TYPE --out FILE.gguf [--seed N]\n"
    "                     [--tokenizer PATH | --no-tokenizer]\n"
    "  a new model of config.json FILE, initialised as `tinylm train --seed N` does (default 1337),\n"
    "  written a tensor at a time: the f32 model is never formed, so a model far larger than\n"
    "  memory in f32 (an 8B body: 32 GB) is made as q4_k in the memory of one of its tensors;\n"
    "  the same bytes as exporting that model once made. TYPE is not keep.\n";

/* --config: a model of the config's shape, initialised with the seed, streamed to a GGUF file */
static int export_gguf_init(const char *config_path, uint64_t seed, const char *out, int type, const char *tokenizer,
                            int no_tokenizer) {
    if (is_directory(out)) {
        tlm_error("%s: is a directory; --format gguf writes one file (e.g. --out model.gguf)", out);
        return cli_fail("export");
    }
    tlm_config c;
    if (config_load(&c, config_path)) return cli_fail("export");
    const char *why = gguf_export_blocker(&c);
    if (why) {
        tlm_error("%s: cannot export as GGUF (llama.cpp's llama architecture computes it differently): %s", config_path,
                  why);
        return cli_fail("export");
    }
    tlm_tokenizer *tok = no_tokenizer ? NULL : tlm_tokenizer_load(tokenizer);
    if (!no_tokenizer && !tok) return cli_fail("export");
    if (tok && tlm_tokenizer_vocab_size(tok) > c.vocab_size) {
        tlm_error("the tokenizer has %d tokens but the config's vocab_size is %d; they do not belong together",
                  tlm_tokenizer_vocab_size(tok), c.vocab_size);
        tlm_tokenizer_free(tok);
        return cli_fail("export");
    }
    char name[64];
    snprintf(name, sizeof name, "random seed %llu", (unsigned long long)seed);
    int fallback = 0;
    int rc = gguf_export_init_file(&c, seed, tok, type, out, name, &fallback);
    if (rc == 0) {
        printf("wrote a new model of %s (seed %llu) as GGUF (llama, %s) to %s", config_path, (unsigned long long)seed,
               wq_name(type), out);
        if (fallback) printf(" (%d matrices whose rows are not whole %s blocks in a fallback type)", fallback, wq_name(type));
        printf(tok ? ", with the %s tokenizer\n" : ", without a tokenizer\n", tok ? tlm_tokenizer_kind(tok) : "");
    }
    tlm_tokenizer_free(tok);
    return rc ? cli_fail("export") : 0;
}

/* The tokenizer to write with the model: the one given, else the model's own (in its
 * directory, a run's latest checkpoint, beside a llama2.c export's model.bin). Checked before
 * anything is written: it loads and fits the model's vocabulary. Its path (malloc'd), or NULL. */
static char *tokenizer_to_export(const char *model_dir, const char *given, int vocab_size) {
    char *src = NULL;
    if (given) {
        src = strdup(given);
    } else if (is_llama2c_file(model_dir)) {
        return tlm_error("%s is a llama2.c checkpoint, which holds no tokenizer: give the one to export with it "
                         "with --tokenizer tok.bin (or --no-tokenizer to export the weights alone)", model_dir),
               NULL;
    } else {
        char *resolved = model_dir_resolve(model_dir);
        src = resolved && is_llama2c_file(resolved) ? strdup(model_dir) : resolved;
        if (src != resolved) free(resolved);
    }
    tlm_tokenizer *t = src ? tlm_tokenizer_load(src) : NULL;
    if (!t) {
        if (src && !given)
            tlm_error_prefix("the model has no tokenizer to export with it (give one with --tokenizer PATH, or "
                             "--no-tokenizer)");
        return free(src), NULL;
    }
    const int n = tlm_tokenizer_vocab_size(t), in_gguf = !strncmp(tlm_tokenizer_kind(t), "gguf", 4);
    tlm_tokenizer_free(t);
    if (in_gguf) /* (model_export_tokenizer's refusal, said before the weights are written) */
        return tlm_error("%s: the tokenizer is a GGUF file's metadata, which tinylm writes only into GGUF files "
                         "(--format gguf); export with --no-tokenizer, or give another one with --tokenizer", src),
               free(src), NULL;
    if (n > vocab_size)
        return tlm_error("%s: the tokenizer has %d tokens but the model's vocab_size is %d; they do not belong together",
                         src, n, vocab_size),
               free(src), NULL;
    return src;
}

/* the type most of the model's matrices are kept in (for --type keep) */
static int kept_type(const tlm_model *m) {
    int best = WQ_F32;
    size_t most = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_info *t = &m->tensors[i];
        const int k = t->qtype ? t->qtype : t->bf16 ? WQ_BF16 : WQ_F32;
        size_t n = 0;
        for (int j = 0; j < m->n_tensors; j++) {
            const tensor_info *u = &m->tensors[j];
            if (u->ndim == 2 && (u->qtype ? u->qtype : u->bf16 ? WQ_BF16 : WQ_F32) == k) n += u->numel;
        }
        if (t->ndim == 2 && n > most) most = n, best = k;
    }
    return best;
}

static int export_gguf(const char *model_dir, const char *out, int type, const char *tokenizer, int no_tokenizer) {
    if (is_directory(out)) {
        tlm_error("%s: is a directory; --format gguf writes one file (e.g. --out model.gguf)", out);
        return cli_fail("export");
    }
    tlm_model *m = model_load_dir(model_dir);
    if (!m) return cli_fail("export");
    const char *why = gguf_export_blocker(&m->cfg);
    if (why) {
        tlm_error("%s: cannot export as GGUF: %s", model_dir, why);
        model_free(m);
        return cli_fail("export");
    }
    tlm_tokenizer *tok = NULL;
    if (!no_tokenizer) {
        char *src = tokenizer ? strdup(tokenizer) : NULL;
        tok = src ? tlm_tokenizer_load(src) : model_load_tokenizer(model_dir);
        free(src);
        if (!tok) {
            if (!tokenizer)
                tlm_error_prefix("the model has no tokenizer to export with it (give one with --tokenizer PATH, or "
                                 "--no-tokenizer)");
            model_free(m);
            return cli_fail("export");
        }
        if (tlm_tokenizer_vocab_size(tok) > m->cfg.vocab_size) {
            tlm_error("the tokenizer has %d tokens but the model's vocab_size is %d; they do not belong together",
                      tlm_tokenizer_vocab_size(tok), m->cfg.vocab_size);
            tlm_tokenizer_free(tok), model_free(m);
            return cli_fail("export");
        }
    }
    if (type < 0) type = kept_type(m);
    const char *base = strrchr(model_dir, '/');
    base = base && base[1] ? base + 1 : model_dir;
    int fallback = 0;
    int rc = gguf_export_file(m, tok, type, out, base, &fallback);
    if (rc == 0) {
        printf("exported %s as GGUF (%s, %s) to %s", model_dir, gguf_export_arch(&m->cfg), wq_name(type), out);
        if (fallback) printf(" (%d matrices whose rows are not whole %s blocks in a fallback type)", fallback, wq_name(type));
        printf(tok ? ", with its %s tokenizer\n" : ", without a tokenizer\n", tok ? tlm_tokenizer_kind(tok) : "");
    }
    tlm_tokenizer_free(tok);
    model_free(m);
    return rc ? cli_fail("export") : 0;
}

int cmd_export(int argc, char **argv) {
    const char *model_dir = NULL, *out = NULL, *format = "auto", *tokenizer = NULL, *type_name = NULL, *config = NULL;
    int no_tokenizer = 0;
    uint64_t seed = 1337;
    cli_opt opts[] = {{"--model", CLI_STR, &model_dir, 0, 0, 0},
                      {"--config", CLI_STR, &config, 0, 0, 0},
                      {"--seed", CLI_SEED, &seed, 0, 0, 0},
                      {"--out", CLI_STR, &out, 0, 0, 0},
                      {"--format", CLI_STR, &format, 0, 0, 0},
                      {"--type", CLI_STR, &type_name, 0, 0, 0},
                      {"--tokenizer", CLI_STR, &tokenizer, 0, 0, 0},
                      {"--no-tokenizer", CLI_FLAG, &no_tokenizer, 0, 0, 0}};
    cli_command cmd = {"export", USAGE, opts, sizeof opts / sizeof opts[0], 1, NULL, 0, 0, NULL};
    int prc = cli_parse(&cmd, argc, argv);
    if (prc != CLI_CONTINUE) return prc;
    if (config) {
        if (model_dir) return cli_usage_error("export", "--config (a new model) and --model exclude each other");
        if (!out || !type_name || strcmp(format, "gguf"))
            return cli_usage_error("export", "--config writes a new model as --format gguf --type TYPE --out FILE.gguf");
        int type;
        if (wq_from_name(type_name, &type) || !wq_can_quantize(type))
            return cli_usage_error("export", "--type must be f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k or "
                                             "q6_k, not \"%s\"", type_name);
        if (no_tokenizer == !!tokenizer)
            return cli_usage_error("export", "--config needs --tokenizer PATH or --no-tokenizer (a config holds none)");
        return export_gguf_init(config, seed, out, type, tokenizer, no_tokenizer);
    }
    if (!model_dir || !out) return cli_usage_error("export", "--model and --out DIR2 are required");
    const int llama2c = !strcmp(format, "llama2c"), gguf = !strcmp(format, "gguf");
    if (!llama2c && !gguf && strcmp(format, "auto"))
        return cli_usage_error("export", "--format must be auto, llama2c or gguf, not \"%s\"", format);
    int type = -1; /* (gguf: -1 keeps the model's own types) */
    const int hf_bf16 = type_name && !gguf && !llama2c && !strcmp(type_name, "bf16");
    if (type_name && llama2c) return cli_usage_error("export", "--type is for --format gguf or auto");
    if (type_name && !gguf && strcmp(type_name, "f32") && !hf_bf16)
        return cli_usage_error("export", "--type with --format auto must be f32 or bf16, not \"%s\"", type_name);
    if (gguf && type_name && strcmp(type_name, "keep") && (wq_from_name(type_name, &type) || !wq_can_quantize(type)))
        return cli_usage_error("export", "--type must be keep, f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, "
                                         "q5_k or q6_k, not \"%s\"", type_name);
    if (gguf) return export_gguf(model_dir, out, type, tokenizer, no_tokenizer);
    if (no_tokenizer && tokenizer) return cli_usage_error("export", "--tokenizer and --no-tokenizer exclude each other");
    /* check the target before the (possibly long) load */
    if (hf_export_check_target(out)) return cli_fail("export");
    if (llama2c && is_directory(out) && !dir_is_empty(out)) {
        tlm_error("%s: a llama2.c export goes into an absent or empty directory", out);
        return cli_fail("export");
    }
    tlm_model *m = model_load_dir(model_dir);
    if (m && (m->wq_mem || m->stored16)) { /* (a GGUF's quantized or bf16 matrices: the f32 values they encode) */
        tlm_model *f = model_f32_copy(m);
        model_free(m);
        m = f;
    }
    if (!m) return cli_fail("export");
    char *tok_src = NULL;
    if (!no_tokenizer && !(tok_src = tokenizer_to_export(model_dir, tokenizer, m->cfg.vocab_size))) {
        model_free(m);
        return cli_fail("export");
    }
    /* nothing in DIR2 may be one of the inputs just loaded (--out the model's own directory):
     * checked before the first file is written */
    if (tlm_output_check_dir(out)) {
        free(tok_src), model_free(m);
        return cli_fail("export");
    }
    const char *family = "llama2c", *why = NULL, *kind = NULL;
    int rc;
    if (llama2c) {
        char *bin = path_join(out, LLAMA2C_EXPORT_FILE);
        const char *blocker = llama2c_export_blocker(&m->cfg);
        rc = blocker ? tlm_error("%s: cannot export as a llama2.c checkpoint (run.c computes a Llama without biases): %s", model_dir, blocker)
             : !bin  ? tlm_error("out of memory")
                     : make_dirs(out) || llama2c_export_file(m, bin);
        free(bin);
    } else {
        hf_export_family(&m->cfg, &why);
        rc = hf_bf16 ? hf_export_dir_bf16(m, out, &family) : hf_export_dir(m, out, &family);
    }
    if (rc == 0 && tok_src) rc = model_export_tokenizer(tok_src, out, m->cfg.vocab_size, &kind);
    free(tok_src);
    if (rc == 0) {
        printf("exported %s as %s \"%s\" to %s", model_dir, llama2c ? "format" : "model_type", family, out);
        if (!strcmp(family, "tinylm")) printf(" (no Hugging Face family expresses it: %s)", why ? why : "?");
        printf(kind ? ", with its %s tokenizer\n" : ", without a tokenizer\n", kind);
    }
    model_free(m);
    return rc ? cli_fail("export") : 0;
}
