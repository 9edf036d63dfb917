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

static const char USAGE[] =
    "usage: tinylm export --model DIR|FILE.bin --out DIR2\n"
    "  DIR2 must be absent, empty, or a previous export (it is never cleared)\n";

int cmd_export(int argc, char **argv) {
    const char *model_dir = NULL, *out = NULL;
    cli_opt opts[] = {{"--model", CLI_STR, &model_dir, 0, 0, 0}, {"--out", CLI_STR, &out, 0, 0, 0}};
    cli_command cmd = {"export", USAGE, opts, sizeof opts / sizeof opts[0], 0, NULL, 0, 0, NULL};
    int prc = cli_parse(&cmd, argc, argv);
    if (prc != CLI_CONTINUE) return prc;
    if (!model_dir || !out) return cli_usage_error("export", "--model and --out DIR2 are required");
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
