/* cli.h — the subcommands of the `tinylm` program, one file each. Each takes the argv
 * that starts with its own name and returns the process exit code: 0 done, 1 a runtime
 * error (one message naming the file or setting), 2 a usage error (one line naming the
 * option; `tinylm CMD --help` prints the command's usage on stdout and exits 0). */
#ifndef TLM_CLI_H
#define TLM_CLI_H

#include <stddef.h>
#include <stdint.h>

struct tlm_model;

int cmd_lesson(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_lens(int argc, char **argv);
int cmd_compare(int argc, char **argv);

enum { CLI_EXIT_ERROR = 1, CLI_EXIT_USAGE = 2, CLI_CONTINUE = -1 };

/* ---- option parsing, the same for every command (cli_args.c) ------------------------------- */

typedef enum {
    CLI_FLAG,  /* no value; dst int*, set to 1 */
    CLI_STR,   /* dst const char **; the last one given wins */
    CLI_LIST,  /* repeatable; dst cli_list * */
    CLI_INT,   /* dst int *, in [min, max] */
    CLI_FLOAT, /* dst float *, finite, in [min, max] */
    CLI_SEED,  /* dst uint64_t *, any of -2^63 .. 2^64-1 (a negative seed is its two's complement) */
} cli_kind;

typedef struct {
    const char **items;
    int n, max;
} cli_list;

typedef struct {
    const char *name; /* "--steps", "-n" */
    cli_kind kind;
    void *dst;
    double min, max; /* CLI_INT, CLI_FLOAT */
    int given;       /* set by cli_parse: how many times the option appeared */
} cli_opt;

typedef struct {
    const char *name;  /* "generate" */
    const char *usage; /* printed by --help (the options shared by all commands are added) */
    cli_opt *opts;
    int n_opts;
    int threads;        /* 1: the command computes on --threads N threads (every command takes the option) */
    const char **args;  /* positional arguments (room for max_args), or NULL for none */
    int max_args, n_args;
    void (*more_help)(void); /* prints more of the usage (e.g. the list of presets), or NULL */
} cli_command;

/* Parses argv[1..] by the command's table plus the shared options: -h/--help (usage on stdout)
 * and --threads N (1..1024; omp_set_num_threads before any work; every command takes it). Returns
 * CLI_CONTINUE when the command should run, or the exit code to return at once: 0 after
 * --help, CLI_EXIT_USAGE after a usage error (one line on stderr naming the option). */
int cli_parse(cli_command *c, int argc, char **argv);
/* The cli_opt of `name` in c (NULL when the table has none). */
cli_opt *cli_opt_of(cli_command *c, const char *name);
/* Usage error: prints "tinylm CMD: <message>; see tinylm CMD --help" as one line to stderr
 * and returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* At most one (required: exactly one) of the NULL-terminated option names was given;
 * otherwise a usage error (its exit code) naming them. */
int cli_one_of(cli_command *c, int required, const char *const *names);

/* Strict numbers: the whole text (no leading space, no trailing junk), errno/range checked,
 * finite for floats. 0, or -1 with a message naming the option and the allowed range. */
int cli_parse_int(const char *name, const char *text, long long min, long long max, int *out);
int cli_parse_u64(const char *name, const char *text, uint64_t min, uint64_t max, uint64_t *out);
int cli_parse_seed(const char *name, const char *text, uint64_t *out);
int cli_parse_double(const char *name, const char *text, double min, double max, double *out);
int cli_parse_float(const char *name, const char *text, double min, double max, float *out);

/* ---- other shared helpers (cli_util.c) ---------------------------------------------------------- */

/* prints "tinylm <cmd>: <last error>" to stderr and returns 1 */
int cli_fail(const char *cmd);
/* parses token ids separated by spaces/commas (any int: range checks belong to the user of
 * the ids); malloc'd; `option` names the flag in errors */
int cli_parse_ids(const char *option, const char *text, int allow_empty, int **ids, size_t *n);
/* --prompt-file FILE: the file's bytes exactly ("-" = standard input), malloc'd and
 * NUL-terminated; NULL + a message naming the file when it cannot be read or holds a NUL */
char *cli_read_prompt_file(const char *path);

/* --dtype auto|f32|bf16 for inference: bf16 keeps the matrices as bf16 (auto: when the
 * checkpoint stores them so). Returns 0, or -1 + tlm_error naming the value. */
int cli_apply_dtype(struct tlm_model *m, const char *dtype);
/* CLI_CONTINUE when dtype is auto, f32 or bf16; else a usage error of cmd (exit code 2) */
int cli_check_dtype(const char *cmd, const char *dtype);
/* --precision fp32|bf16|auto for inference: bf16 runs the products over many rows (the prompt)
 * on bf16 operands (model_set_mixed_bf16); a CPU without bf16 products computes in fp32 and one
 * line on stderr says so. auto (generate's default): bf16 when the weights are bf16 (their
 * rounding is done already; the products then round only the activations) and the CPU has
 * bf16 products, else fp32, silently. cli_check_precision: CLI_CONTINUE or a usage error;
 * auto_ok: whether auto is one of the values. */
int cli_check_precision(const char *cmd, const char *precision, int auto_ok);
int cli_apply_precision(struct tlm_model *m, const char *cmd, const char *precision);

#endif
