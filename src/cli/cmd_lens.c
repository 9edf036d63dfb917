/* tinylm lens — the tuned lens (src/probes/lens.h): train one affine translator per layer so
 * that the model's own final norm + head read each stage of the residual stream as the model's
 * final distribution; evaluate KL(final || lens) per layer for the logit lens and a tuned lens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "convert/checkpoint.h"
#include "model/model.h"
#include "probes/inspect.h"
#include "probes/lens.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/io.h"

static const char USAGE[] =
    "usage: tinylm lens train --model M --data FILE --out LENS [--steps N] [--lr X] [--batch B] [--seq T]\n"
    "                         [--warmup N] [--weight-decay X] [--eval-batches K] [--seed S] [--tokenizer PATH]\n"
    "                         [--max-chars N] [--json]\n"
    "       tinylm lens eval --model M --data FILE [--lens-file LENS] [--batch B] [--seq T] [--eval-batches K]\n"
    "                         [--tokenizer PATH] [--max-chars N] [--json]\n"
    "  train: learns A_l, b_l of u_l = h_l + A_l h_l + b_l for each layer (identity at the start) so that\n"
    "         final_norm + LM head on u_l predict the model's final distribution: loss KL(final || lens),\n"
    "         mean over positions, AdamW (warmup, cosine to lr/10), the model frozen. Windows of --seq tokens\n"
    "         from the first 90% of the text's tokens; the last 10% is held out. Writes LENS (safetensors,\n"
    "         atomically) and prints the held-out KL per layer, logit lens vs tuned lens.\n"
    "  eval:  the held-out KL per layer for the logit lens (and the tuned lens of --lens-file).\n"
    "  defaults: --steps 300 --lr 1e-3 --batch 8 --seq min(64, max positions) --warmup 20 --weight-decay 0\n"
    "            --eval-batches 8 --max-chars 2000000 (the text is cut there, at a space or newline)\n";

static tlm_tokenizer *load_tok(const char *model, const char *path) {
    tlm_tokenizer *t = path ? tlm_tokenizer_load(path) : model_load_tokenizer(model);
    if (!t)
        tlm_error_prefix("no tokenizer for %s%s (give --tokenizer PATH)", model, path ? "" : " in the model directory");
    return t;
}

static int read_tokens(const char *data, const tlm_tokenizer *tok, long max_chars, int **ids, size_t *n) {
    size_t len = 0;
    char *text = read_text_file(data, &len);
    if (!text) return -1;
    if (len == 0) return free(text), tlm_error("%s: the file is empty", data);
    size_t cut = (size_t)max_chars < len ? (size_t)max_chars : len;
    if (cut < len) {
        size_t k = cut;
        while (k > 0 && text[k - 1] != ' ' && text[k - 1] != '\n') k--;
        if (k > 0) cut = k;
    }
    int rc = tlm_tokenizer_encode(tok, text, cut, 0, ids, n);
    free(text);
    return rc ? tlm_error_prefix("%s", data) : 0;
}

static void print_report(const tlm_model *m, const double *logit, const double *tuned, int json, const char *lens_file,
                         int steps) {
    const int L = m->cfg.n_layers;
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "measure", "KL(final || lens) in nats, mean over held-out positions");
        if (lens_file) cJSON_AddStringToObject(o, "lens_file", lens_file);
        if (steps >= 0) cJSON_AddNumberToObject(o, "steps", steps);
        cJSON *arr = cJSON_AddArrayToObject(o, "stages");
        for (int k = 0; k <= L; k++) {
            cJSON *s = cJSON_CreateObject();
            char name[64];
            inspect_stage_name(name, sizeof name, k);
            cJSON_AddNumberToObject(s, "stage", k);
            cJSON_AddStringToObject(s, "name", name);
            cJSON_AddNumberToObject(s, "logit_lens_kl", logit[k]);
            if (tuned) cJSON_AddNumberToObject(s, "tuned_lens_kl", tuned[k]);
            cJSON_AddItemToArray(arr, s);
        }
        char *text = cJSON_Print(o);
        cJSON_Delete(o);
        if (text) puts(text);
        free(text);
        return;
    }
    printf("KL(final || lens), nats, mean over the held-out positions\n");
    printf("%-24s %14s%s\n", "stage", "logit lens", tuned ? "     tuned lens" : "");
    for (int k = 0; k <= L; k++) {
        char name[64];
        inspect_stage_name(name, sizeof name, k);
        printf("%-24s %14.4f", name, logit[k]);
        if (tuned) printf(" %14.4f", tuned[k]);
        printf("\n");
    }
}

int cmd_lens(int argc, char **argv) {
    const char *model = NULL, *data = NULL, *out = NULL, *lens_file = NULL, *tokenizer = NULL, *args[1];
    lens_train_options o = {.steps = 300,
                            .batch = 8,
                            .seq = 0,
                            .eval_batches = 8,
                            .warmup = 20,
                            .lr = 1e-3f,
                            .weight_decay = 0.0f,
                            .grad_clip = 1.0f,
                            .seed = 1,
                            .log_every = 50};
    int json = 0, max_chars = 2000000;
    const double I = 0x7fffffff;
    cli_opt opts[] = {
        {"--model", CLI_STR, &model, 0, 0, 0},
        {"--data", CLI_STR, &data, 0, 0, 0},
        {"--out", CLI_STR, &out, 0, 0, 0},
        {"--lens-file", CLI_STR, &lens_file, 0, 0, 0},
        {"--tokenizer", CLI_STR, &tokenizer, 0, 0, 0},
        {"--steps", CLI_INT, &o.steps, 1, I, 0},
        {"--lr", CLI_FLOAT, &o.lr, 0, 1e3, 0},
        {"--batch", CLI_INT, &o.batch, 1, 1 << 16, 0},
        {"--seq", CLI_INT, &o.seq, 1, 1 << 20, 0},
        {"--warmup", CLI_INT, &o.warmup, 0, I, 0},
        {"--weight-decay", CLI_FLOAT, &o.weight_decay, 0, 1e3, 0},
        {"--eval-batches", CLI_INT, &o.eval_batches, 1, 1 << 16, 0},
        {"--seed", CLI_SEED, &o.seed, 0, 0, 0},
        {"--max-chars", CLI_INT, &max_chars, 1, I, 0},
        {"--json", CLI_FLAG, &json, 0, 0, 0},
    };
    cli_command cmd = {"lens", USAGE, opts, sizeof opts / sizeof opts[0], 1, args, 1, 0, NULL};
    int prc = cli_parse(&cmd, argc, argv);
    if (prc != CLI_CONTINUE) return prc;
    if (cmd.n_args == 0) return cli_usage_error("lens", "which? lens train or lens eval");
    const int train = !strcmp(args[0], "train");
    if (!train && strcmp(args[0], "eval") != 0)
        return cli_usage_error("lens", "unknown subcommand \"%s\" (train or eval)", args[0]);
    if (!model || !data) return cli_usage_error("lens", "--model M and --data FILE are required");
    if (train && !out) return cli_usage_error("lens", "lens train needs --out LENS (the file to write)");
    if (train && lens_file) return cli_usage_error("lens", "--lens-file is for lens eval (lens train writes --out)");
    if (!train && out) return cli_usage_error("lens", "--out is for lens train");
    if (!train && cli_opt_of(&cmd, "--steps")->given) return cli_usage_error("lens", "--steps is for lens train");
    /* before the training: --out is no FIFO, device, directory or dangling link (lens_save's
     * write checks again, and against the inputs: the model, the data, the tokenizer) */
    if (train && tlm_output_check(out)) return cli_fail("lens");

    tlm_model *m = model_load_dir(model);
    tlm_tokenizer *tok = NULL;
    tlm_lens *lens = NULL;
    int *ids = NULL, rc = -1;
    size_t n = 0;
    double *before = NULL, *after = NULL;
    if (!m) goto done;
    if (!o.seq) o.seq = m->cfg.max_seq < 64 ? m->cfg.max_seq : 64;
    if (o.seq > m->cfg.max_seq) {
        tlm_error("--seq %d exceeds the model's max_position_embeddings = %d", o.seq, m->cfg.max_seq);
        goto done;
    }
    if (!(tok = load_tok(model, tokenizer)) || read_tokens(data, tok, max_chars, &ids, &n)) goto done;
    before = calloc((size_t)m->cfg.n_layers + 1, sizeof(double));
    after = calloc((size_t)m->cfg.n_layers + 1, sizeof(double));
    if (!before || !after) {
        tlm_error("out of memory");
        goto done;
    }
    if (train) {
        if (tlm_output_check(out) || !(lens = lens_create(m))) goto done; /* (now the inputs are known) */
        if (lens_train(lens, m, ids, n, &o, data, before, after) || lens_save(lens, out, model)) goto done;
        fprintf(stderr, "tuned lens: %d steps; written to %s\n", o.steps, out);
        print_report(m, before, after, json, out, o.steps);
    } else {
        if (lens_file && !(lens = lens_load(lens_file, m))) goto done;
        if (lens_eval(NULL, m, ids, n, o.batch, o.seq, o.eval_batches, data, before)) goto done;
        if (lens && lens_eval(lens, m, ids, n, o.batch, o.seq, o.eval_batches, data, after)) goto done;
        print_report(m, before, lens ? after : NULL, json, lens_file, -1);
    }
    rc = fflush(stdout) || ferror(stdout) ? tlm_error("writing to standard output failed") : 0;
done:
    free(before), free(after), free(ids);
    lens_free(lens);
    tlm_tokenizer_free(tok);
    model_free(m);
    return rc ? cli_fail("lens") : 0;
}
