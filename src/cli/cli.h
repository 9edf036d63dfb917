/* cli.h — the subcommands of the `tinylm` program, one file each. Each takes the argv
 * that starts with its own name and returns the process exit code. */
#ifndef TLM_CLI_H
#define TLM_CLI_H

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
/* parses a list of integers separated by spaces/commas; malloc'd */
int cli_parse_ids(const char *text, int **ids, int *n);

#endif
