/* hf_tool.c — the small driver tests/hf/test_hf.py runs, so the tests do not depend on how
 * the `tinylm` program is wired:
 *   hf_tool logits MODEL "ids" OUT.npy   the `tinylm logits` command (src/cli/cmd_logits.c)
 *   hf_tool load MODEL                    load only (exit 1 with the error message on stderr)
 *   hf_tool export --model M --out DIR    the `tinylm export` command itself (src/cli/cmd_export.c) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "convert/checkpoint.h"
#include "util/error.h"

static int fail(void) {
    fprintf(stderr, "error: %s\n", tlm_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "export")) return cmd_export(argc - 1, argv + 1);
    if (argc == 3 && !strcmp(argv[1], "load")) {
        tlm_model *m = model_load_dir(argv[2]);
        if (!m) return fail();
        model_free(m);
        return 0;
    }
    if ((argc == 5 || argc == 7) && !strcmp(argv[1], "logits")) { /* (7: with --dtype D) */
        char *args[] = {"logits", "--model", argv[2], "--ids", argv[3], "--out", argv[4], NULL, NULL, NULL};
        if (argc == 7) args[7] = argv[5], args[8] = argv[6];
        return cmd_logits(argc == 7 ? 9 : 7, args);
    }
    fprintf(stderr, "usage: hf_tool logits MODEL \"ids\" OUT.npy [--dtype D] | load MODEL | export --model M --out DIR\n");
    return 2;
}
