/* cli.h — the subcommands of the `tinylm` program, one file each. Each takes the argv
 * that starts with its own name and returns the process exit code. */
#ifndef TLM_CLI_H
#define TLM_CLI_H

#include <stddef.h>

struct tlm_model;

int cmd_lesson(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_export(int argc, char **argv);

/* shared helpers (cli_util.c) */
/* value of --name at argv[*i] (advances *i), or NULL + message when missing */
const char *cli_value(int argc, char **argv, int *i);
/* prints "tinylm <cmd>: <last error>" to stderr and returns 1 */
int cli_fail(const char *cmd);
/* parses token ids separated by spaces/commas (any int: range checks belong to the user of
 * the ids); malloc'd; `option` names the flag in errors */
int cli_parse_ids(const char *option, const char *text, int allow_empty, int **ids, size_t *n);

/* --dtype auto|f32|bf16 for inference: bf16 keeps the matrices as bf16 (auto: when the
 * checkpoint stores them so). Returns 0, or -1 + tlm_error naming the value. */
int cli_apply_dtype(struct tlm_model *m, const char *dtype);

#endif
