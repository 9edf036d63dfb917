/* tinylm tokenize — text to token ids and back with any tokenizer the engine loads:
 *   tinylm tokenize --tokenizer PATH --text TEXT [--bos]   prints the ids, space-separated
 *   tinylm tokenize --tokenizer PATH --decode "ids"        prints the decoded text
 * PATH is a tokenizer file or a model directory. --bos prepends the tokenizer's BOS (if any).
 * The decoded text is written byte for byte, followed by one newline. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

static const char USAGE[] =
    "usage: tinylm tokenize --tokenizer PATH --text TEXT [--bos]\n"
    "       tinylm tokenize --tokenizer PATH --decode \"ID ID ...\"\n";

int cmd_tokenize(int argc, char **argv) {
    const char *path = NULL, *text = NULL, *decode = NULL;
    int bos = 0;
    cli_opt opts[] = {{"--tokenizer", CLI_STR, &path, 0, 0, 0}, {"--text", CLI_STR, &text, 0, 0, 0},
                      {"--decode", CLI_STR, &decode, 0, 0, 0}, {"--bos", CLI_FLAG, &bos, 0, 0, 0}};
    cli_command cmd = {"tokenize", USAGE, opts, sizeof opts / sizeof opts[0], 0, NULL, 0, 0, NULL};
    int prc = cli_parse(&cmd, argc, argv);
    if (prc != CLI_CONTINUE) return prc;
    if (!path) return cli_usage_error("tokenize", "--tokenizer PATH is required");
    if ((prc = cli_one_of(&cmd, 1, (const char *const[]){"--text", "--decode", NULL}))) return prc;
    int *ids = NULL;
    size_t n = 0;
    int rc = 0;
    if (decode && cli_parse_ids("--decode", decode, 1, &ids, &n)) return cli_usage_error("tokenize", "%s", tlm_last_error());
    tlm_tokenizer *t = tlm_tokenizer_load(path);
    if (!t) return free(ids), cli_fail("tokenize");
    if (text) {
        if (tlm_tokenizer_encode(t, text, strlen(text), bos, &ids, &n)) {
            rc = cli_fail("tokenize");
        } else {
            for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
            printf("\n");
        }
    } else {
        size_t len;
        char *out = NULL;
        if (!(out = tlm_tokenizer_decode_len(t, ids, n, &len))) {
            rc = cli_fail("tokenize");
        } else {
            fwrite(out, 1, len, stdout);
            printf("\n");
        }
        free(out);
    }
    free(ids);
    tlm_tokenizer_free(t);
    if (fflush(stdout) != 0 && rc == 0) {
        fprintf(stderr, "tinylm tokenize: cannot write the output\n");
        rc = 1;
    }
    return rc;
}
