/* tinylm train — train a model on a text file (see `tinylm train --help`). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "train/presets.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/io.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: tinylm train --data FILE [--preset NAME | --config FILE] [--out DIR] [options]\n"
            "       tinylm train --resume DIR --data FILE [--steps N]\n\n"
            "model:    --preset NAME (default nanogpt-baby) | --config config.json\n"
            "          --set KEY=VALUE   any config switch of docs/config.md, e.g. --set norm_placement=post\n"
            "data:     --tokenizer chars|bytes  --seq N  --batch N  --accum N (gradient accumulation)\n"
            "optimizer: --steps N --lr X --min-lr X --warmup N --beta1 X --beta2 X --eps X\n"
            "          --weight-decay X (matrices only) --decay-embeddings --grad-clip X (0 = off)\n"
            "run:      --out DIR (default runs/PRESET) --seed N --eval-every N --eval-batches N\n"
            "          --save-every N --log-every N --sample N (tokens printed at the end; 0 = none)\n"
            "          --stop-at N (stop after step N with a checkpoint, as an interruption would)\n\n"
            "presets:\n");
    for (int i = 0; preset_at(i); i++) fprintf(f, "  %-14s %s\n", preset_at(i)->name, preset_at(i)->about);
}

/* --set KEY=VALUE: VALUE is JSON when it parses as JSON (numbers, true/false), a string otherwise */
static int apply_set(cJSON *cfg, const char *kv) {
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv) return tlm_error("--set \"%s\": expected KEY=VALUE", kv);
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
    cJSON *v = cJSON_Parse(eq + 1);
    if (!v) v = cJSON_CreateString(eq + 1);
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, key);
    cJSON_AddItemToObject(cfg, key, v);
    return 0;
}

typedef struct {
    const char *flag;
    char type; /* i int, f float, u uint64 */
    void *field;
} num_flag;

int cmd_train(int argc, char **argv) {
    const char *preset_name = NULL, *config_path = NULL, *resume = NULL, *data = NULL, *out = NULL;
    const char *sets[64];
    int n_sets = 0;
    train_options o = preset_find("nanogpt-baby")->train;
    /* the preset's training settings apply first, so scan for --preset before the rest */
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--preset")) {
            const preset *p = preset_find(argv[i + 1]);
            if (!p) {
                fprintf(stderr, "tinylm train: unknown preset \"%s\"\n\n", argv[i + 1]);
                usage(stderr);
                return 1;
            }
            preset_name = p->name;
            o = p->train;
        }
    const num_flag nums[] = {
        {"--steps", 'i', &o.steps}, {"--batch", 'i', &o.batch}, {"--seq", 'i', &o.seq}, {"--accum", 'i', &o.accum},
        {"--eval-every", 'i', &o.eval_every}, {"--eval-batches", 'i', &o.eval_batches},
        {"--save-every", 'i', &o.save_every}, {"--log-every", 'i', &o.log_every}, {"--sample", 'i', &o.sample_tokens},
        {"--stop-at", 'i', &o.stop_at}, {"--warmup", 'i', &o.opt.warmup_steps}, {"--lr", 'f', &o.opt.lr},
        {"--min-lr", 'f', &o.opt.min_lr}, {"--beta1", 'f', &o.opt.beta1}, {"--beta2", 'f', &o.opt.beta2},
        {"--eps", 'f', &o.opt.eps}, {"--weight-decay", 'f', &o.opt.weight_decay}, {"--grad-clip", 'f', &o.opt.grad_clip},
        {"--seed", 'u', &o.seed},
    };
    int n_overrides = 0, steps_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout), 0;
        if (!strcmp(a, "--decay-embeddings")) {
            o.opt.decay_embeddings = true, n_overrides++;
            continue;
        }
        if (!(v = cli_value(argc, argv, &i))) return cli_fail("train");
        const num_flag *nf = NULL;
        for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++)
            if (!strcmp(a, nums[k].flag)) nf = &nums[k];
        if (nf) {
            char *end;
            if (nf->type == 'i') *(int *)nf->field = (int)strtol(v, &end, 10);
            else if (nf->type == 'f') *(float *)nf->field = strtof(v, &end);
            else *(uint64_t *)nf->field = strtoull(v, &end, 10);
            if (end == v || *end) return fprintf(stderr, "tinylm train: %s \"%s\" is not a number\n", a, v), 1;
            steps_given |= !strcmp(a, "--steps");
            n_overrides += strcmp(a, "--stop-at") != 0 && strcmp(a, "--steps") != 0;
        } else if (!strcmp(a, "--preset")) {
            /* handled above */
        } else if (!strcmp(a, "--config")) config_path = v;
        else if (!strcmp(a, "--resume")) resume = v;
        else if (!strcmp(a, "--data")) data = v;
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--tokenizer")) o.tokenizer = v, n_overrides++;
        else if (!strcmp(a, "--set")) {
            if (n_sets == 64) return fprintf(stderr, "tinylm train: too many --set\n"), 1;
            sets[n_sets++] = v;
        } else {
            fprintf(stderr, "tinylm train: unknown option %s\n\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!data) return fprintf(stderr, "tinylm train: --data FILE is required\n\n"), usage(stderr), 2;
    if (resume) {
        if (preset_name || config_path || n_sets || n_overrides || out) {
            fprintf(stderr, "tinylm train: --resume continues with the run's saved config and settings; "
                            "--preset, --config, --set, --out and training options other than --steps (a new "
                            "last step) cannot be combined with it\n");
            return 1;
        }
        if (steps_given && o.steps <= 0) return fprintf(stderr, "tinylm train: --steps %d must be positive\n", o.steps), 1;
        return train_resume(resume, data, steps_given ? o.steps : 0);
    }
    if (preset_name && config_path) return fprintf(stderr, "tinylm train: give --preset or --config, not both\n"), 2;
    char *text = NULL;
    if (config_path && !(text = read_text_file(config_path, NULL))) return cli_fail("train");
    cJSON *cfg = cJSON_Parse(text ? text : preset_find(preset_name ? preset_name : "nanogpt-baby")->model_json);
    free(text);
    if (!cfg || !cJSON_IsObject(cfg)) {
        cJSON_Delete(cfg);
        return fprintf(stderr, "tinylm train: %s: not a JSON object\n", config_path), 1;
    }
    int rc = 0;
    for (int i = 0; i < n_sets && !rc; i++) rc = apply_set(cfg, sets[i]);
    if (rc) {
        cJSON_Delete(cfg);
        return cli_fail("train");
    }
    char default_out[256];
    snprintf(default_out, sizeof default_out, "runs/%s", preset_name ? preset_name : "custom");
    o.data_path = data;
    o.out_dir = out ? out : default_out;
    char *json = cJSON_PrintUnformatted(cfg);
    cJSON_Delete(cfg);
    rc = train_new(json, &o);
    free(json);
    return rc;
}
