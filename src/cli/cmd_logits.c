/* tinylm logits — runs a checkpoint on token ids and writes the logits [T, vocab] as .npy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "formats/npy.h"
#include "model/checkpoint.h"
#include "model/model.h"
#include "util/error.h"

int cmd_logits(int argc, char **argv) {
    const char *model_dir = NULL, *ids_text = NULL, *out = NULL, *dtype = "auto";
    for (int i = 1; i < argc; i++) {
        const char **slot = !strcmp(argv[i], "--model") ? &model_dir
                            : !strcmp(argv[i], "--ids") ? &ids_text
                            : !strcmp(argv[i], "--out") ? &out
                            : !strcmp(argv[i], "--dtype") ? &dtype
                                                         : NULL;
        if (!slot) {
            fprintf(stderr, "usage: tinylm logits --model DIR --ids \"1 5 9\" --out FILE.npy [--dtype auto|f32|bf16]\n");
            return 2;
        }
        if (!(*slot = cli_value(argc, argv, &i))) return cli_fail("logits");
    }
    if (!model_dir || !ids_text || !out) {
        fprintf(stderr, "usage: tinylm logits --model DIR --ids \"1 5 9\" --out FILE.npy [--dtype auto|f32|bf16]\n");
        return 2;
    }
    int *ids;
    size_t n;
    if (cli_parse_ids("--ids", ids_text, 0, &ids, &n)) return cli_fail("logits");
    tlm_model *m = model_load_dir(model_dir);
    int rc = 1;
    if (m) model_set_mode(m, MODEL_INFER);
    if (m && !cli_apply_dtype(m, dtype) && !model_forward(m, ids, NULL, 1, (int)n, NULL)) {
        int64_t shape[2] = {(int64_t)n, m->cfg.vocab_size};
        rc = tlm_npy_write_f32(out, 2, shape, m->acts.logits) ? 1 : 0;
    }
    if (rc) cli_fail("logits");
    free(ids);
    model_free(m);
    return rc;
}
