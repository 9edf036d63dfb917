/* tinylm export — writes a model (any directory or llama2.c .bin that `tinylm logits` loads)
 * as a Hugging Face style directory in the family its architecture matches (llama, gpt2),
 * or in the engine's own format when no family expresses it. See src/model/hf_export.h. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "model/checkpoint.h"
#include "model/hf_export.h"
#include "util/error.h"

int cmd_export(int argc, char **argv);

static int usage(void) {
    fprintf(stderr, "usage: tinylm export --model DIR|FILE.bin --out DIR2\n"
                    "  DIR2 must be absent, empty, or a previous export (it is never cleared)\n");
    return 2;
}

int cmd_export(int argc, char **argv) {
    const char *model_dir = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char **slot = !strcmp(argv[i], "--model") ? &model_dir : !strcmp(argv[i], "--out") ? &out : NULL;
        if (!slot) return usage();
        if (!(*slot = cli_value(argc, argv, &i))) return cli_fail("export");
    }
    if (!model_dir || !out) return usage();
    /* check the target before the (possibly long) load */
    if (hf_export_check_target(out)) return cli_fail("export");
    tlm_model *m = model_load_dir(model_dir);
    if (!m) return cli_fail("export");
    const char *family = NULL, *why = NULL;
    hf_export_family(&m->cfg, &why);
    int rc = hf_export_dir(m, out, &family);
    if (rc == 0) {
        printf("exported %s as model_type \"%s\" to %s", model_dir, family, out);
        if (!strcmp(family, "tinylm")) printf(" (no Hugging Face family expresses it: %s)", why ? why : "?");
        printf("\n");
    }
    model_free(m);
    return rc ? cli_fail("export") : 0;
}
