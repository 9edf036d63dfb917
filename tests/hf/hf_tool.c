/* hf_tool.c — the small driver tests/hf/test_hf.py runs, so the tests do not depend on how
 * the `tinylm` program is wired:
 *   hf_tool logits MODEL "ids" OUT.npy   load (directory or llama2.c .bin), forward, write logits
 *   hf_tool load MODEL                    load only (exit 1 with the error message on stderr)
 *   hf_tool export --model M --out DIR    the `tinylm export` command itself (src/cli/cmd_export.c) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "formats/npy.h"
#include "model/checkpoint.h"
#include "util/error.h"

int cmd_export(int argc, char **argv);

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
    if (argc == 5 && !strcmp(argv[1], "logits")) {
        int *ids, n;
        if (cli_parse_ids(argv[3], &ids, &n)) return fail();
        tlm_model *m = model_load_dir(argv[2]);
        int rc = 1;
        if (m && !model_forward(m, ids, NULL, 1, n, NULL)) {
            int64_t shape[2] = {n, m->cfg.vocab_size};
            rc = tlm_npy_write_f32(argv[4], 2, shape, m->acts.logits) ? 1 : 0;
        }
        free(ids);
        model_free(m);
        return rc ? fail() : 0;
    }
    fprintf(stderr, "usage: hf_tool logits MODEL \"ids\" OUT.npy | load MODEL | export --model M --out DIR\n");
    return 2;
}
