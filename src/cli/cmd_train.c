/* tinylm train — train a model on a text file (see `tinylm train --help`). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd_train.h"
#include "train/presets.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/io.h"
#include "util/profile.h"

static const char USAGE[] =
    "usage: tinylm train --data FILE [--preset NAME | --config FILE] [--out DIR] [options]\n"
    "       tinylm train --resume DIR --data FILE [--steps N] [--stop-at N] [--html FILE.html]\n\n"
    "model:    --preset NAME (default nanogpt-baby) | --config config.json\n"
    "          --set KEY=VALUE   any config switch of docs/config.md, e.g. --set norm_placement=post\n"
    "data:     --tokenizer chars|bytes  --seq N  --batch N  --accum N (gradient accumulation)\n"
    "          --bos-token ID (every window starts with token ID, a BOS the text never produces, e.g.\n"
    "          2 with --tokenizer bytes on ASCII text: the inputs are ID + seq - 1 text tokens)\n"
    "optimizer: --steps N --lr X --min-lr X --warmup N --beta1 X --beta2 X --eps X\n"
    "          --weight-decay X (matrices only) --decay-embeddings --grad-clip X (0 = off)\n"
    "          --z-loss X (adds X * mean(logsumexp(logits)^2) to the loss; 0 = off, the default)\n"
    "          --router-aux-loss-coef X (a mixture of experts: adds X * the load-balancing loss,\n"
    "          Switch / Hugging Face's load_balancing_loss_func; 0 = off, the default; 0.001 is Qwen3-MoE's)\n"
    "          --router-bias-update X (scoring_func sigmoid: DeepSeek-V3's auxiliary-loss-free balancing,\n"
    "          each step every e_score_correction_bias moves by X toward an even load; 0 = off; 0.001 is V3's)\n"
    "precision: --precision fp32|bf16 (bf16: mixed precision, the linear layers' products on bf16 copies\n"
    "          of their operands with AMX or AVX512-BF16, on AMX the attention's too, summed in f32;\n"
    "          weights, optimizer, norms, softmax and loss stay f32; checkpoints f32. A CPU with neither\n"
    "          trains in fp32 and says so)\n"
    "run:      --out DIR (default runs/PRESET) --seed N (-2^63..2^64-1; negative = two's complement)\n"
    "          --eval-every N --eval-batches N\n"
    "          --save-every N --log-every N --sample N (tokens printed at the end; 0 = none)\n"
    "          --stop-at N (stop after step N with a checkpoint, as an interruption would)\n"
    "          --profile (time per op, an op inside another indented under it, and model FLOPs\n"
    "          utilisation, printed at the end)\n"
    "          --log-attn (metrics.jsonl: each step's largest |attention logit| per layer and head,\n"
    "          attn_max, and the QK-norm gains, qk_gain_max)\n"
    "          --html FILE.html (a self-contained page of the run: loss, validation loss, learning rate,\n"
    "          gradient norm, largest attention logit (--html turns --log-attn on) and tokens/s, written\n"
    "          atomically at each evaluation and reloading itself while the run trains; the last write\n"
    "          stays as the run's report)\n"
    "parallel: mpirun -np N tinylm train ... trains data-parallel (each rank 1/N of every batch;\n"
    "          --batch must be a multiple of N); --zero1 shards the AdamW moments across the ranks\n\n"
    "presets (nanogpt-baby is nanoGPT's CPU Shakespeare model, to compare with nanoGPT;\n"
    "llama-baby the same size with RMSNorm, RoPE and SwiGLU):\n";

static void print_presets(void) {
    for (int i = 0; preset_at(i); i++) printf("  %-14s %s\n", preset_at(i)->name, preset_at(i)->about);
}

/* --set KEY=VALUE: VALUE is JSON when it parses as JSON (numbers, true/false), a string
 * otherwise; a number is parsed strictly (finite) */
static int apply_set(cJSON *cfg, const char *kv) {
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv) return tlm_error("--set \"%s\": expected KEY=VALUE", kv);
    char key[128], name[160];
    snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
    snprintf(name, sizeof name, "--set %s", key);
    cJSON *v = cJSON_Parse(eq + 1);
    double x;
    if (v && cJSON_IsNumber(v) && cli_parse_double(name, eq + 1, -1e300, 1e300, &x)) return cJSON_Delete(v), -1;
    if (!v) v = cJSON_CreateString(eq + 1);
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, key);
    cJSON_AddItemToObject(cfg, key, v);
    return 0;
}

/* Parses a train command line. A new run: *config_json (malloc'd) and *o are what train_new
 * takes (o's strings point into argv). A resume (--resume): *resume_dir is set, and *o holds
 * --data, --steps (0 when not given), --stop-at and --zero1. Returns CLI_CONTINUE, or the exit
 * code to return (--help, a usage or input error, already reported). */
static int parse_train(int argc, char **argv, char **config_json, train_options *o_out, const char **resume_dir) {
    const char *preset_name = NULL, *config_path = NULL, *resume = NULL, *data = NULL, *out = NULL;
    const char *sets[64];
    cli_list set_list = {sets, 0, 64};
    train_options o = preset_find("nanogpt-baby")->train;
    *config_json = NULL, *resume_dir = NULL;
    /* the preset's training settings apply first, so scan for --preset before the rest */
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--preset")) {
            const preset *p = preset_find(argv[i + 1]);
            if (!p) return cli_usage_error("train", "unknown preset \"%s\" (tinylm train --help lists them)", argv[i + 1]);
            preset_name = p->name;
            o = p->train;
        }
    const char *preset_arg = NULL, *precision = NULL;
    int decay_embeddings = 0, profile = 0, zero1 = 0, bos_token = -1;
    const double I = 0x7fffffff, F = 1e30;
    cli_opt opts[] = {
        /* the training settings first (every option before --stop-at): none may be combined with
         * --resume but --steps (opts[0]: a new last step) */
        {"--steps", CLI_INT, &o.steps, 1, I, 0}, {"--batch", CLI_INT, &o.batch, 1, I, 0},
        {"--seq", CLI_INT, &o.seq, 1, I, 0}, {"--accum", CLI_INT, &o.accum, 1, I, 0},
        {"--eval-every", CLI_INT, &o.eval_every, 1, I, 0}, {"--eval-batches", CLI_INT, &o.eval_batches, 1, I, 0},
        {"--save-every", CLI_INT, &o.save_every, 1, I, 0}, {"--log-every", CLI_INT, &o.log_every, 1, I, 0},
        {"--sample", CLI_INT, &o.sample_tokens, 0, I, 0}, {"--warmup", CLI_INT, &o.opt.warmup_steps, 0, I, 0},
        {"--lr", CLI_FLOAT, &o.opt.lr, 0, F, 0}, {"--min-lr", CLI_FLOAT, &o.opt.min_lr, 0, F, 0},
        {"--beta1", CLI_FLOAT, &o.opt.beta1, 0, 1, 0}, {"--beta2", CLI_FLOAT, &o.opt.beta2, 0, 1, 0},
        {"--eps", CLI_FLOAT, &o.opt.eps, 0, F, 0}, {"--weight-decay", CLI_FLOAT, &o.opt.weight_decay, 0, F, 0},
        {"--grad-clip", CLI_FLOAT, &o.opt.grad_clip, 0, F, 0}, {"--seed", CLI_SEED, &o.seed, 0, 0, 0},
        {"--tokenizer", CLI_STR, &o.tokenizer, 0, 0, 0}, {"--decay-embeddings", CLI_FLAG, &decay_embeddings, 0, 0, 0},
        {"--z-loss", CLI_FLOAT, &o.z_loss, 0, F, 0}, {"--precision", CLI_STR, &precision, 0, 0, 0},
        {"--router-aux-loss-coef", CLI_FLOAT, &o.router_aux, 0, F, 0},
        {"--router-bias-update", CLI_FLOAT, &o.router_bias_update, 0, F, 0},
        {"--bos-token", CLI_INT, &bos_token, 0, I, 0},
        /* the rest */
        {"--stop-at", CLI_INT, &o.stop_at, 0, I, 0}, {"--preset", CLI_STR, &preset_arg, 0, 0, 0},
        {"--config", CLI_STR, &config_path, 0, 0, 0}, {"--resume", CLI_STR, &resume, 0, 0, 0},
        {"--data", CLI_STR, &data, 0, 0, 0}, {"--out", CLI_STR, &out, 0, 0, 0}, {"--set", CLI_LIST, &set_list, 0, 0, 0},
        {"--profile", CLI_FLAG, &profile, 0, 0, 0},      {"--zero1", CLI_FLAG, &zero1, 0, 0, 0},
        {"--log-attn", CLI_FLAG, &o.log_attn, 0, 0, 0}, {"--html", CLI_STR, &o.html, 0, 0, 0},
    };
    int n_training = 0;
    while (strcmp(opts[n_training].name, "--stop-at")) n_training++;
    cli_command cmd = {"train", USAGE, opts, sizeof opts / sizeof opts[0], 1, NULL, 0, 0, print_presets};
    int prc = cli_parse(&cmd, argc, argv);
    if (prc != CLI_CONTINUE) return prc;
    if (decay_embeddings) o.opt.decay_embeddings = true;
    if (bos_token >= 0) o.has_bos = 1, o.bos_token = bos_token;
    if (precision && strcmp(precision, "bf16") && strcmp(precision, "fp32"))
        return cli_usage_error("train", "--precision \"%s\": expected bf16 or fp32", precision);
    if (precision) o.precision_bf16 = !strcmp(precision, "bf16");
    tlm_profiling = profile; /* a property of this process, not of the run: allowed with --resume */
    int n_overrides = 0, n_sets = set_list.n;
    for (int k = 1; k < n_training; k++) n_overrides += opts[k].given;
    if (!data) return cli_usage_error("train", "--data FILE is required");
    if (o.html) {
        if (tlm_output_check(o.html)) return cli_fail("train");
        o.log_attn = 1; /* (the page draws the largest attention logit) */
    }
    o.data_path = data;
    o.zero1 = zero1;
    if (resume) {
        if (preset_name || config_path || n_sets || n_overrides || out) {
            return cli_usage_error("train", "--resume continues with the run's saved config and settings; "
                                            "--preset, --config, --set, --out and training options other than "
                                            "--steps (a new last step) cannot be combined with it");
        }
        if (!opts[0].given) o.steps = 0; /* (given: checked positive) */
        *resume_dir = resume;
        *o_out = o;
        return CLI_CONTINUE;
    }
    if ((prc = cli_one_of(&cmd, 0, (const char *const[]){"--preset", "--config", NULL}))) return prc;
    char *text = NULL;
    if (config_path && !(text = read_text_file(config_path, NULL))) return cli_fail("train");
    cJSON *cfg = cJSON_Parse(text ? text : preset_find(preset_name ? preset_name : "nanogpt-baby")->model_json);
    if (!cfg && text && tlm_json_nesting_error(config_path, text, strlen(text))) return free(text), cli_fail("train");
    free(text);
    if (!cfg || !cJSON_IsObject(cfg)) {
        cJSON_Delete(cfg);
        return fprintf(stderr, "tinylm train: %s: not a JSON object\n", config_path), 1;
    }
    int rc = 0;
    for (int i = 0; i < n_sets && !rc; i++) rc = apply_set(cfg, sets[i]);
    if (rc) {
        cJSON_Delete(cfg);
        return cli_usage_error("train", "%s", tlm_last_error());
    }
    static char default_out[256];
    snprintf(default_out, sizeof default_out, "runs/%s", preset_name ? preset_name : "custom");
    o.out_dir = out ? out : default_out;
    *config_json = cJSON_PrintUnformatted(cfg);
    cJSON_Delete(cfg);
    if (!*config_json) return fprintf(stderr, "tinylm train: out of memory\n"), 1;
    *o_out = o;
    return CLI_CONTINUE;
}

int cmd_train_plan(int argc, char **argv, char **config_json, train_options *o) {
    const char *resume = NULL;
    int rc = parse_train(argc, argv, config_json, o, &resume);
    if (rc == CLI_CONTINUE && resume) rc = cli_usage_error("train", "a plan is a new run, not --resume");
    if (rc == CLI_CONTINUE && o->html) rc = cli_usage_error("train", "--html is one run's page, not a plan's");
    return rc;
}

int cmd_train(int argc, char **argv) {
    char *json = NULL;
    const char *resume = NULL;
    train_options o;
    int rc = parse_train(argc, argv, &json, &o, &resume);
    if (rc != CLI_CONTINUE) return rc;
    if (resume) {
        resume_options r = {.steps = o.steps, .stop_at = o.stop_at, .zero1 = o.zero1, .log_attn = o.log_attn,
                            .html = o.html};
        return train_resume(resume, o.data_path, &r);
    }
    rc = train_new(json, &o);
    free(json);
    return rc;
}
