/* tinylm logits — runs a checkpoint on token ids (or a prompt, encoded with the model's
 * tokenizer) and writes the logits [T, vocab] as .npy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "formats/npy.h"
#include "convert/checkpoint.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/io.h"
#include "model/context.h"

static const char USAGE[] =
    "usage: tinylm logits --model DIR (--ids \"1 5 9\" | --prompt TEXT | --prompt-file FILE) --out FILE.npy\n"
    "                     [--tokenizer PATH] [--dtype auto|f32|bf16] [--precision fp32|bf16]\n"
    "  writes the float32 logits [T, vocab] of the T input tokens as .npy\n"
    "  --prompt, --prompt-file  text encoded with the model's tokenizer (or --tokenizer), BOS first\n"
    "                           when the tokenizer has one; --prompt-file - reads standard input\n"
    "  --dtype D                weights in memory: auto (default) = bf16 when the checkpoint stores bf16\n"
    "                           or FP8 blocks (read as bf16 from the load on)\n"
    "  --precision P            fp32 (default) or bf16: the matrix products on bf16 operands, summed in f32\n";

/* the prompt's tokens (with BOS) */
static int prompt_ids(const char *model_dir, const char *tok_path, const char *prompt, int **ids, size_t *n) {
    tlm_tokenizer *tok = tok_path ? tlm_tokenizer_load(tok_path) : model_load_tokenizer(model_dir);
    if (!tok) return -1;
    int rc = tlm_tokenizer_encode(tok, prompt, strlen(prompt), 1, ids, n);
    tlm_tokenizer_free(tok);
    if (!rc && *n == 0) free(*ids), *ids = NULL, rc = tlm_error("the prompt encodes to no tokens");
    return rc;
}

int cmd_logits(int argc, char **argv) {
    const char *model_dir = NULL, *ids_text = NULL, *out = NULL, *prompt = NULL, *prompt_file = NULL, *tok_path = NULL,
               *dtype = "auto", *precision = "fp32";
    cli_opt opts[] = {
        {"--model", CLI_STR, &model_dir, 0, 0, 0},     {"--ids", CLI_STR, &ids_text, 0, 0, 0},
        {"--out", CLI_STR, &out, 0, 0, 0},             {"--prompt", CLI_STR, &prompt, 0, 0, 0},
        {"--prompt-file", CLI_STR, &prompt_file, 0, 0, 0}, {"--tokenizer", CLI_STR, &tok_path, 0, 0, 0},
        {"--dtype", CLI_STR, &dtype, 0, 0, 0}, {"--precision", CLI_STR, &precision, 0, 0, 0},
    };
    cli_command cmd = {"logits", USAGE, opts, sizeof opts / sizeof opts[0], 1, NULL, 0, 0, NULL};
    int prc = cli_parse(&cmd, argc, argv);
    if (prc != CLI_CONTINUE) return prc;
    if (!model_dir || !out) return cli_usage_error("logits", "--model DIR and --out FILE.npy are required");
    if ((prc = cli_check_dtype("logits", dtype)) != CLI_CONTINUE) return prc;
    if ((prc = cli_check_precision("logits", precision, 0)) != CLI_CONTINUE) return prc;
    if ((prc = cli_one_of(&cmd, 1, (const char *const[]){"--ids", "--prompt", "--prompt-file", NULL}))) return prc;
    /* a FIFO, device, directory or dangling link: refused before the load (the write checks
     * again, then against the inputs too) */
    if (tlm_output_check(out)) return cli_fail("logits");
    int *ids = NULL, rc = 0;
    size_t n = 0;
    if (ids_text && cli_parse_ids("--ids", ids_text, 0, &ids, &n))
        return cli_usage_error("logits", "%s", tlm_last_error());
    if (!ids_text) {
        char *prompt_text = NULL;
        if (prompt_file && !(prompt = prompt_text = cli_read_prompt_file(prompt_file))) return cli_fail("logits");
        rc = prompt_ids(model_dir, tok_path, prompt, &ids, &n);
        free(prompt_text);
        if (rc) return cli_fail("logits");
    }
    tlm_model *m = model_load_dir_mapped(model_dir, !strcmp(dtype, "bf16") ? LOAD_BF16 : !strcmp(dtype, "auto") ? LOAD_AUTO : LOAD_F32);
    rc = 1;
    if (m) model_set_mode(m, MODEL_INFER);
    if (m && !cli_apply_dtype(m, dtype) && !cli_apply_precision(m, "logits", precision) &&
        !model_forward(m, ids, NULL, 1, (int)n, NULL)) {
        int64_t shape[2] = {(int64_t)n, m->cfg.vocab_size};
        rc = tlm_npy_write_f32(out, 2, shape, m->ctx->acts.logits) ? 1 : 0;
    }
    if (rc) cli_fail("logits");
    free(ids);
    model_free(m);
    return rc;
}
