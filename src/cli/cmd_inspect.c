/* tinylm inspect — see inside a model on one prompt: residual-stream and increment norms,
 * what each norm does to the scale, attention sharpness per head, the logit lens, the
 * residual stream as a sum with direct logit attribution; or (--grad) the gradient norms of
 * one training batch. Table, --json, --csv, --plot FILE.svg; --probe/--dump write raw probe
 * tensors as .npy. The numbers come from src/probes (probe.h, inspect.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "convert/checkpoint.h"
#include "probes/inspect.h"
#include "probes/lens.h"
#include "probes/probe.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/io.h"

static const char USAGE[] =
    "usage: tinylm inspect --model DIR (--prompt TEXT | --prompt-file FILE | --ids \"1 2 3\") [--position P]\n"
    "                      [--top K] [--json | --csv] [--plot FILE.svg] [--html FILE.html] [--tokenizer PATH]\n"
    "                      [--no-bos] [--probe PATTERN ...] [--dump DIR] [--list-probes]\n"
    "                      [--lens logit|tuned --lens-file LENS]\n"
    "       tinylm inspect --grad --model DIR --data FILE [--seq N] [--batch B] [--json | --csv] [--plot FILE.svg]\n"
    "                      [--html FILE.html] [--tokenizer PATH] [--probe PATTERN ...] [--dump DIR]\n"
    "  --prompt-file FILE  the prompt is the file's bytes exactly (- = standard input)\n"
    "  --position P        the position to report (default the last; -1 = the last, -2 the one before, ...)\n"
    "  --top K             logit-lens candidates per layer, at least 1 (default 5)\n"
    "  --plot FILE.svg     a static figure: residual norms by layer beside the logit-lens grid (a window of\n"
    "                      at most 32 positions around P for long prompts)\n"
    "  --html FILE.html    an interactive page, one self-contained file (no network): every token's\n"
    "                      prediction, logit lens and norm profile on hover, the residual stream by layer,\n"
    "                      every head's attention pattern, norms, direct logit attribution; with --grad,\n"
    "                      the gradient norms (docs/probes.md)\n"
    "  --lens tuned --lens-file LENS  the tuned lens (tinylm lens train) beside the logit lens: its top tokens,\n"
    "                      grid and KL(final || lens) per layer (--lens logit, the default: the logit lens alone)\n";

enum { MAX_PATTERNS = 64 };

typedef struct {
    const char *model, *prompt, *prompt_file, *ids, *tokenizer, *plot, *html, *dump, *data, *lens, *lens_file;
    char *prompt_text; /* --prompt-file's contents (o->prompt points at it) */
    int *id_list;      /* --ids parsed */
    size_t n_ids;
    const char *patterns[MAX_PATTERNS];
    int n_patterns;
    int position, has_position, top, seq, batch;
    int json, csv, grad, no_bos, list;
} options;

/* --plot and --html may be written (util/io.h: regular files or new names, no input of this
 * command). Called before the load, and again once the inputs are open, before the first output
 * is written. (--dump DIR's files are checked one by one as they are written: a DIR that holds
 * inputs is fine, only its PROBE.npy files are written.) */
static int check_outputs(const options *o) {
    if (o->plot && tlm_output_check(o->plot)) return -1;
    if (o->html && tlm_output_check(o->html)) return -1;
    return 0;
}

/* 0 to run, -1 with an error, or 1: exit at once with *exit_code (--help done, usage error printed) */
static int parse_options(int argc, char **argv, options *o, int *exit_code) {
    memset(o, 0, sizeof *o);
    o->top = 5, o->batch = 1;
    cli_list patterns = {o->patterns, 0, MAX_PATTERNS};
    const double I = 0x7fffffff;
    cli_opt opts[] = {
        {"--model", CLI_STR, &o->model, 0, 0, 0},     {"--prompt", CLI_STR, &o->prompt, 0, 0, 0},
        {"--prompt-file", CLI_STR, &o->prompt_file, 0, 0, 0}, {"--ids", CLI_STR, &o->ids, 0, 0, 0},
        {"--tokenizer", CLI_STR, &o->tokenizer, 0, 0, 0}, {"--plot", CLI_STR, &o->plot, 0, 0, 0},
        {"--dump", CLI_STR, &o->dump, 0, 0, 0},       {"--data", CLI_STR, &o->data, 0, 0, 0},
        {"--position", CLI_INT, &o->position, -I, I, 0}, {"--top", CLI_INT, &o->top, 1, I, 0},
        {"--seq", CLI_INT, &o->seq, 1, I, 0},         {"--batch", CLI_INT, &o->batch, 1, I, 0},
        {"--probe", CLI_LIST, &patterns, 0, 0, 0},    {"--json", CLI_FLAG, &o->json, 0, 0, 0},
        {"--csv", CLI_FLAG, &o->csv, 0, 0, 0},        {"--grad", CLI_FLAG, &o->grad, 0, 0, 0},
        {"--no-bos", CLI_FLAG, &o->no_bos, 0, 0, 0},  {"--list-probes", CLI_FLAG, &o->list, 0, 0, 0},
        {"--html", CLI_STR, &o->html, 0, 0, 0},
        {"--lens", CLI_STR, &o->lens, 0, 0, 0},       {"--lens-file", CLI_STR, &o->lens_file, 0, 0, 0},
    };
    cli_command cmd = {"inspect", USAGE, opts, sizeof opts / sizeof opts[0], 1, NULL, 0, 0, NULL};
    if ((*exit_code = cli_parse(&cmd, argc, argv)) != CLI_CONTINUE) return 1;
    o->n_patterns = patterns.n;
    o->has_position = cli_opt_of(&cmd, "--position")->given > 0;
    if (!o->model) return *exit_code = cli_usage_error("inspect", "--model DIR is required"), 1;
    if ((*exit_code = cli_one_of(&cmd, 0, (const char *const[]){"--json", "--csv", NULL}))) return 1;
    if ((*exit_code = cli_one_of(&cmd, 0, (const char *const[]){"--prompt", "--prompt-file", "--ids", NULL}))) return 1;
    if (o->ids && cli_parse_ids("--ids", o->ids, 0, &o->id_list, &o->n_ids))
        return *exit_code = cli_usage_error("inspect", "%s", tlm_last_error()), 1;
    if (o->prompt_file && !(o->prompt = o->prompt_text = cli_read_prompt_file(o->prompt_file))) return -1;
    if (o->lens && strcmp(o->lens, "logit") != 0 && strcmp(o->lens, "tuned") != 0)
        return *exit_code = cli_usage_error("inspect", "--lens \"%s\": expected logit or tuned", o->lens), 1;
    if (o->lens && !strcmp(o->lens, "tuned") && !o->lens_file)
        return *exit_code = cli_usage_error("inspect", "--lens tuned needs --lens-file LENS (from tinylm lens train)"), 1;
    if (o->lens_file && !(o->lens && !strcmp(o->lens, "tuned")))
        return *exit_code = cli_usage_error("inspect", "--lens-file goes with --lens tuned"), 1;
    if (o->lens_file && o->grad) return *exit_code = cli_usage_error("inspect", "--lens applies to a prompt, not to --grad"), 1;
    if (o->n_patterns && !o->dump) return tlm_error("--probe needs --dump DIR (where the .npy files go)");
    if (check_outputs(o)) return -1; /* (a FIFO, device, directory, dangling link: before the load) */
    if (o->list) return 0;
    if (o->grad) {
        if (!o->data) return tlm_error("--grad needs --data FILE (a text file to take one batch from)");
        if (o->prompt || o->ids) return tlm_error("--grad takes its tokens from --data, not --prompt/--prompt-file/--ids");
        if (o->has_position) return tlm_error("--position applies to a prompt, not to --grad");
        return 0;
    }
    if (!o->prompt && !o->ids) return tlm_error("give one of --prompt TEXT, --prompt-file FILE and --ids \"1 2 3\"");
    if (o->prompt && !*o->prompt)
        return tlm_error("%s is empty: give some text to run", o->prompt_file ? o->prompt_file : "--prompt");
    return 0;
}

static tlm_tokenizer *load_tokenizer(const options *o, int required) {
    tlm_tokenizer *t = o->tokenizer ? tlm_tokenizer_load(o->tokenizer) : model_load_tokenizer(o->model);
    if (!t && required)
        tlm_error_prefix("no tokenizer for %s%s (use --ids with token ids, or --tokenizer PATH)",
                         o->model, o->tokenizer ? "" : " in the model directory");
    if (!t && !required) tlm_clear_error();
    return t;
}

/* --probe / --dump: record the selected tensors of one pass and write them */
static int dump_probes(const options *o, tlm_model *m, const int *tokens, const int *targets, int B, int T) {
    tlm_probe *p = probe_create();
    int rc = p ? 0 : -1;
    for (int i = 0; !rc && i < o->n_patterns; i++) rc = probe_select(p, o->patterns[i]);
    if (!rc && o->n_patterns == 0) rc = probe_select(p, "*");
    if (!rc) rc = probe_check(p, m, o->grad);
    if (!rc) {
        probe_attach(p, m);
        rc = model_forward(m, tokens, targets, B, T, NULL);
        if (!rc && o->grad) {
            model_zero_grads(m);
            rc = model_backward(m, 1.0f);
        }
        probe_detach(m);
    }
    if (!rc) rc = probe_dump(p, o->dump);
    probe_free(p);
    return rc;
}

static int print_name(void *ctx, const char *name, int ndim, const int64_t *shape) {
    (void)ctx;
    printf("%-44s [", name);
    for (int i = 0; i < ndim; i++) printf("%s%lld", i ? ", " : "", (long long)shape[i]);
    printf("]\n");
    return 0;
}

static int finish_output(char *text) {
    if (!text) return -1;
    fputs(text, stdout);
    fputc('\n', stdout);
    free(text);
    return 0;
}

static int flush_stdout(void) {
    if (fflush(stdout) || ferror(stdout)) return tlm_error("writing to standard output failed");
    return 0;
}

/* ---- on a prompt ---------------------------------------------------------------------------------- */

static int run_forward(const options *o, tlm_model *m) {
    tlm_tokenizer *tok = load_tokenizer(o, o->prompt != NULL);
    int *ids = NULL, n = 0, rc = -1;
    inspect_report r = {0};
    tlm_lens *lens = NULL;
    if (o->prompt && !tok) goto done;
    if (o->ids) {
        ids = o->id_list, n = (int)o->n_ids;
    } else if (o->prompt) {
        size_t n_ids = 0;
        if (tlm_tokenizer_encode(tok, o->prompt, strlen(o->prompt), !o->no_bos, &ids, &n_ids)) goto done;
        n = (int)n_ids;
        if (n == 0) {
            tlm_error("--prompt \"%s\" encodes to no tokens", o->prompt);
            goto done;
        }
    }
    if (o->list) {
        printf("probe names of %s (shapes for a batch of 1 x %d tokens; docs/probes.md):\n", o->model, n ? n : 1);
        rc = probe_list(m, 1, n ? n : 1, 1, print_name, NULL) || flush_stdout() ? -1 : 0;
        goto done;
    }
    int pos = o->has_position ? o->position : n - 1;
    if (pos < 0 && o->has_position) pos += n; /* -1 = the last token */
    if (pos < 0 || pos >= n) {
        tlm_error("--position %d is out of range: the input has %d tokens (positions 0..%d, or -%d..-1 from the end)",
                  o->position, n, n - 1, n);
        goto done;
    }
    if (o->top > m->cfg.vocab_size) {
        tlm_error("--top %d is larger than the vocabulary (%d)", o->top, m->cfg.vocab_size);
        goto done;
    }
    if (o->lens_file && !(lens = lens_load(o->lens_file, m))) goto done;
    if (check_outputs(o)) goto done; /* every input is open now */
    if (o->dump && dump_probes(o, m, ids, NULL, 1, n)) goto done;
    if (inspect_run_ex(m, ids, n, pos, o->top, o->html ? INSPECT_FOR_HTML : 0, lens, &r)) goto done;
    if (o->json)
        rc = finish_output(inspect_json(&r, tok));
    else if (o->csv)
        rc = inspect_print_csv(stdout, &r, tok);
    else
        rc = inspect_print_table(stdout, &r, tok);
    if (!rc) rc = flush_stdout();
    if (!rc && o->plot) rc = inspect_plot_svg(o->plot, &r, tok);
    if (!rc && o->html) rc = inspect_html(o->html, &r, tok, o->model, m);
done:
    inspect_report_free(&r);
    lens_free(lens);
    if (ids != o->id_list) free(ids);
    tlm_tokenizer_free(tok);
    return rc;
}

/* ---- one training batch --------------------------------------------------------------------------- */

/* Tokenizes just enough of the start of the text for `need` tokens (a prefix cut at a space or
 * newline, doubled until it is enough or the whole text). */
static int tokenize_prefix(const tlm_tokenizer *tok, const char *path, const char *text, size_t len, int need,
                           int **ids, int *n) {
    size_t take = (size_t)need * 8 + 4096;
    for (;;) {
        size_t cut = take < len ? take : len;
        if (cut < len) {
            size_t k = cut;
            while (k > 0 && text[k - 1] != ' ' && text[k - 1] != '\n') k--;
            if (k > 0) cut = k;
        }
        size_t got = 0;
        *ids = NULL;
        if (tlm_tokenizer_encode(tok, text, cut, 0, ids, &got)) return tlm_error_prefix("%s", path);
        if ((long long)got >= need || cut == len) {
            *n = (int)(got < (size_t)need ? got : (size_t)need);
            if ((long long)got < need)
                return free(*ids), *ids = NULL,
                       tlm_error("%s: the text has %zu tokens; --batch and --seq need %d (batch * seq + 1)", path,
                                 got, need);
            return 0;
        }
        free(*ids);
        *ids = NULL;
        take *= 2;
    }
}

static int run_grad(const options *o, tlm_model *m) {
    const tlm_config *c = &m->cfg;
    int seq = o->seq ? o->seq : (c->max_seq < 64 ? c->max_seq : 64);
    if (seq <= 0) return tlm_error("--seq %d: must be at least 1", seq);
    if (seq > c->max_seq)
        return tlm_error("--seq %d exceeds the model's max_position_embeddings = %d", seq, c->max_seq);
    if ((long long)o->batch * seq + 1 > 0x7fffffffLL) return tlm_error("--batch x --seq is too large");
    tlm_tokenizer *tok = load_tokenizer(o, 1);
    if (!tok) return -1;
    size_t len = 0;
    char *text = read_text_file(o->data, &len);
    int *ids = NULL, n = 0, rc = -1;
    int *tokens = NULL, *targets = NULL;
    inspect_grad_report r = {0};
    if (!text) goto done;
    if (len == 0) {
        tlm_error("%s: the file is empty", o->data);
        goto done;
    }
    const int B = o->batch, need = B * seq + 1;
    if (tokenize_prefix(tok, o->data, text, len, need, &ids, &n)) goto done;
    tokens = malloc(sizeof(int) * (size_t)B * seq);
    targets = malloc(sizeof(int) * (size_t)B * seq);
    if (!tokens || !targets) {
        tlm_error("out of memory");
        goto done;
    }
    /* window b: tokens ids[b*seq .. b*seq+seq), each predicting the next one */
    for (int i = 0; i < B * seq; i++) tokens[i] = ids[i], targets[i] = ids[i + 1];
    if (check_outputs(o)) goto done; /* every input is open now */
    if (o->dump && dump_probes(o, m, tokens, targets, B, seq)) goto done;
    if (inspect_grad(m, tokens, targets, B, seq, &r)) goto done;
    if (o->json)
        rc = finish_output(inspect_grad_json(&r, ids, need));
    else if (o->csv)
        rc = inspect_grad_print_csv(stdout, &r);
    else
        rc = inspect_grad_print_table(stdout, &r);
    if (!rc) rc = flush_stdout();
    if (!rc && o->plot) rc = inspect_grad_plot_svg(o->plot, &r);
    if (!rc && o->html) rc = inspect_grad_html(o->html, &r, tok, ids, need, o->model, m);
done:
    inspect_grad_report_free(&r);
    free(text), free(ids), free(tokens), free(targets);
    tlm_tokenizer_free(tok);
    return rc;
}

int cmd_inspect(int argc, char **argv) {
    options o;
    int exit_code = 0, prc = parse_options(argc, argv, &o, &exit_code);
    if (prc) {
        free(o.prompt_text), free(o.id_list);
        return prc > 0 ? exit_code : cli_fail("inspect");
    }
    tlm_model *m = model_load_dir(o.model);
    int rc = m ? (o.grad && !o.list ? run_grad(&o, m) : run_forward(&o, m)) : -1;
    model_free(m);
    free(o.prompt_text), free(o.id_list);
    return rc ? cli_fail("inspect") : 0;
}
