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
#include "model/checkpoint.h"
#include "probes/inspect.h"
#include "probes/probe.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/io.h"

#define USAGE                                                                                                         \
    "usage: tinylm inspect --model DIR (--prompt TEXT | --ids \"1 2 3\") [--position P] [--top K]\n"                \
    "                      [--json | --csv] [--plot FILE.svg] [--tokenizer PATH] [--no-bos]\n"                      \
    "                      [--probe PATTERN ...] [--dump DIR] [--list-probes]\n"                                      \
    "       tinylm inspect --grad --model DIR --data FILE [--seq N] [--batch B] [--json | --csv] [--plot FILE.svg]\n" \
    "                      [--tokenizer PATH] [--probe PATTERN ...] [--dump DIR]\n"

enum { MAX_PATTERNS = 64 };

typedef struct {
    const char *model, *prompt, *ids, *tokenizer, *plot, *dump, *data;
    const char *patterns[MAX_PATTERNS];
    int n_patterns;
    int position, has_position, top, seq, batch;
    int json, csv, grad, no_bos, list;
} options;

static int parse_int(const char *opt, const char *text, int *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno || v < -0x7fffffffL || v > 0x7fffffffL)
        return tlm_error("%s: \"%s\" is not an integer", opt, text);
    *out = (int)v;
    return 0;
}

/* 0, -1 with an error, or 2 for a usage problem (printed) */
static int parse_options(int argc, char **argv, options *o) {
    memset(o, 0, sizeof *o);
    o->top = 5, o->batch = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = !strcmp(a, "--model")       ? &o->model
                            : !strcmp(a, "--prompt")    ? &o->prompt
                            : !strcmp(a, "--ids")       ? &o->ids
                            : !strcmp(a, "--tokenizer") ? &o->tokenizer
                            : !strcmp(a, "--plot")      ? &o->plot
                            : !strcmp(a, "--dump")      ? &o->dump
                            : !strcmp(a, "--data")      ? &o->data
                                                        : NULL;
        if (slot) {
            if (!(*slot = cli_value(argc, argv, &i))) return -1;
        } else if (!strcmp(a, "--position") || !strcmp(a, "--top") || !strcmp(a, "--seq") || !strcmp(a, "--batch")) {
            const char *v = cli_value(argc, argv, &i);
            int *dst = !strcmp(a, "--position") ? &o->position : !strcmp(a, "--top") ? &o->top
                                                             : !strcmp(a, "--seq")   ? &o->seq
                                                                                     : &o->batch;
            if (!v || parse_int(a, v, dst)) return -1;
            if (dst == &o->position) o->has_position = 1;
        } else if (!strcmp(a, "--probe")) {
            const char *v = cli_value(argc, argv, &i);
            if (!v) return -1;
            if (o->n_patterns == MAX_PATTERNS) return tlm_error("--probe: at most %d patterns", MAX_PATTERNS);
            o->patterns[o->n_patterns++] = v;
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--csv")) {
            o->csv = 1;
        } else if (!strcmp(a, "--grad")) {
            o->grad = 1;
        } else if (!strcmp(a, "--no-bos")) {
            o->no_bos = 1;
        } else if (!strcmp(a, "--list-probes")) {
            o->list = 1;
        } else {
            fprintf(stderr, "tinylm inspect: unknown option \"%s\"\n" USAGE, a);
            return 2;
        }
    }
    if (!o->model) return fprintf(stderr, "tinylm inspect: --model is required\n" USAGE), 2;
    if (o->json && o->csv) return tlm_error("--json and --csv are exclusive: choose one");
    if (o->n_patterns && !o->dump) return tlm_error("--probe needs --dump DIR (where the .npy files go)");
    if (o->list) return 0;
    if (o->grad) {
        if (!o->data) return tlm_error("--grad needs --data FILE (a text file to take one batch from)");
        if (o->prompt || o->ids) return tlm_error("--grad takes its tokens from --data, not --prompt/--ids");
        if (o->batch <= 0) return tlm_error("--batch %d: must be at least 1", o->batch);
        if (o->has_position) return tlm_error("--position applies to a prompt, not to --grad");
        return 0;
    }
    if (!!o->prompt + !!o->ids != 1) return tlm_error("give exactly one of --prompt TEXT and --ids \"1 2 3\"");
    if (o->prompt && !*o->prompt) return tlm_error("--prompt is empty: give some text to run");
    if (o->top <= 0) return tlm_error("--top %d: must be at least 1", o->top);
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
    if (o->prompt && !tok) goto done;
    if (o->ids) {
        size_t n_ids = 0;
        if (cli_parse_ids("--ids", o->ids, 0, &ids, &n_ids)) goto done;
        n = (int)n_ids;
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
    if (o->dump && dump_probes(o, m, ids, NULL, 1, n)) goto done;
    if (inspect_run(m, ids, n, pos, o->top, &r)) goto done;
    if (o->json)
        rc = finish_output(inspect_json(&r, tok));
    else if (o->csv)
        rc = inspect_print_csv(stdout, &r, tok);
    else
        rc = inspect_print_table(stdout, &r, tok);
    if (!rc) rc = flush_stdout();
    if (!rc && o->plot) rc = inspect_plot_svg(o->plot, &r, tok);
done:
    inspect_report_free(&r);
    free(ids);
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
    if (c->position == POS_LEARNED && seq > c->max_seq)
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
done:
    inspect_grad_report_free(&r);
    free(text), free(ids), free(tokens), free(targets);
    tlm_tokenizer_free(tok);
    return rc;
}

int cmd_inspect(int argc, char **argv) {
    options o;
    int prc = parse_options(argc, argv, &o);
    if (prc == 2) return 2;
    if (prc) return cli_fail("inspect");
    tlm_model *m = model_load_dir(o.model);
    if (!m) return cli_fail("inspect");
    int rc = o.grad && !o.list ? run_grad(&o, m) : run_forward(&o, m);
    model_free(m);
    return rc ? cli_fail("inspect") : 0;
}
