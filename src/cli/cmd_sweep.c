/* tinylm sweep — a grid of training runs: every combination of the grid's axes is one normal,
 * crash-proof run directory under --out, trained as `tinylm train` would (the same code: each
 * run is a train command line). Runs already complete are skipped and interrupted ones resumed,
 * so a sweep can be restarted. Under mpirun the runs are dealt out to the ranks (run i on rank
 * i mod N, each rank training alone); rank 0 then writes the summary: summary.md (a table of
 * final losses) and summary.svg (a bar chart).
 *
 * grid.json:
 *   {"preset": "nanogpt-baby",                          the base model (default nanogpt-baby)
 *    "set": {"hidden_size": 64},                        config switches for every run
 *    "train": {"steps": 300, "batch": 8},               training options for every run
 *    "axes": {"norm_placement": ["pre", "post"],        one run per combination: a config
 *             "lr": [0.001, 0.003]}}                    switch, or a training option */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "train/dist.h"
#include "util/error.h"
#include "util/io.h"

static const char USAGE[] =
    "usage: tinylm sweep --grid GRID.json --data FILE --out DIR [--threads N]\n"
    "  one training run per combination of the grid's axes, each in DIR/<index>-<key=value,...>;\n"
    "  complete runs are skipped and interrupted ones resumed; DIR/summary.md and summary.svg\n"
    "  hold the final losses. Under mpirun the runs are dealt out to the ranks.\n"
    "  GRID.json: {\"preset\": NAME, \"set\": {KEY: VALUE}, \"train\": {OPTION: VALUE},\n"
    "              \"axes\": {KEY or OPTION: [VALUES]}}  (OPTION: a train option without --, e.g. lr)\n";

/* train options a grid may set (the rest of its keys are config switches, passed as --set) */
static const char *const TRAIN_OPTIONS[] = {"steps", "batch", "seq", "accum", "lr", "min-lr", "warmup", "beta1",
                                            "beta2", "eps", "weight-decay", "grad-clip", "seed", "eval-every",
                                            "eval-batches", "save-every", "log-every", "tokenizer", "z-loss", NULL};

static int is_train_option(const char *k) {
    for (int i = 0; TRAIN_OPTIONS[i]; i++)
        if (!strcmp(k, TRAIN_OPTIONS[i])) return 1;
    return 0;
}

/* a JSON scalar as command-line text */
static int scalar_text(const cJSON *v, char *buf, size_t n) {
    if (cJSON_IsString(v)) return snprintf(buf, n, "%s", v->valuestring), 0;
    if (cJSON_IsBool(v)) return snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "true" : "false"), 0;
    if (cJSON_IsNumber(v)) return snprintf(buf, n, "%.15g", v->valuedouble), 0; /* 0.003, not 0.0030000000000000001 */
    return -1;
}

typedef struct {
    char *argv[256];
    int argc;
    char store[8192];
    size_t used;
} cmdline;

static int push(cmdline *c, const char *s) {
    size_t n = strlen(s) + 1;
    if (c->argc >= 255 || c->used + n > sizeof c->store) return tlm_error("sweep: a run's command line is too long");
    c->argv[c->argc++] = memcpy(c->store + c->used, s, n);
    c->used += n;
    c->argv[c->argc] = NULL;
    return 0;
}

/* key = value as options of a train command line */
static int push_setting(cmdline *c, const char *key, const cJSON *v, const char *grid) {
    char val[256], opt[300];
    if (scalar_text(v, val, sizeof val)) return tlm_error("%s: the value of \"%s\" must be a string, number or bool", grid, key);
    if (is_train_option(key)) {
        snprintf(opt, sizeof opt, "--%s", key);
        return push(c, opt) || push(c, val) ? -1 : 0;
    }
    snprintf(opt, sizeof opt, "%s=%s", key, val);
    return push(c, "--set") || push(c, opt) ? -1 : 0;
}

/* the final validation loss of a run directory (its last metrics line with one), or NaN */
static double final_val_loss(const char *run, int *steps_done) {
    char *path = path_join(run, "metrics.jsonl");
    size_t n = 0;
    char *text = file_exists(path) ? read_text_file(path, &n) : NULL;
    free(path);
    double val = 0.0 / 0.0;
    *steps_done = 0;
    for (char *line = text; line && *line;) {
        char *end = strchr(line, '\n');
        cJSON *j = cJSON_ParseWithLength(line, end ? (size_t)(end - line) : strlen(line));
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "val_loss"), *s = cJSON_GetObjectItemCaseSensitive(j, "step");
        if (cJSON_IsNumber(v)) val = v->valuedouble;
        if (cJSON_IsNumber(s)) *steps_done = s->valueint;
        cJSON_Delete(j);
        line = end ? end + 1 : NULL;
    }
    free(text);
    return val;
}

static void write_summary(const char *out, char **names, const double *val, int n) {
    char *md = path_join(out, "summary.md"), *svg = path_join(out, "summary.svg");
    FILE *f = fopen(md, "w");
    if (f) {
        fprintf(f, "| run | final validation loss |\n| --- | --- |\n");
        for (int i = 0; i < n; i++) fprintf(f, "| %s | %.4f |\n", names[i], val[i]);
        fclose(f);
    }
    double hi = 0;
    for (int i = 0; i < n; i++) hi = val[i] > hi ? val[i] : hi;
    f = fopen(svg, "w");
    if (f) { /* horizontal bars: one per run, labelled, lengths proportional to the loss */
        const int row = 22, left = 360, width = 360, h = 40 + row * n;
        fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
                   "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                   "<text x=\"10\" y=\"20\" font-size=\"14\">final validation loss</text>\n",
                left + width + 70, h);
        for (int i = 0; i < n; i++) {
            const int y = 30 + row * i;
            const double w = hi > 0 && val[i] == val[i] ? width * val[i] / hi : 0;
            fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n", left - 8, y + 15, names[i]);
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#4a6fa5\"/>\n", left, y + 3, w, row - 6);
            fprintf(f, "<text x=\"%.1f\" y=\"%d\">%.4f</text>\n", left + w + 6, y + 15, val[i]);
        }
        fprintf(f, "</svg>\n");
        fclose(f);
    }
    printf("summary: %s, %s\n", md, svg);
    free(md), free(svg);
}

int cmd_sweep(int argc, char **argv) {
    const char *grid_path = NULL, *data = NULL, *out = NULL;
    cli_opt opts[] = {{"--grid", CLI_STR, &grid_path, 0, 0, 0}, {"--data", CLI_STR, &data, 0, 0, 0},
                      {"--out", CLI_STR, &out, 0, 0, 0}};
    cli_command cmd = {"sweep", USAGE, opts, sizeof opts / sizeof opts[0], 1, NULL, 0, 0, NULL};
    int prc = cli_parse(&cmd, argc, argv);
    if (prc != CLI_CONTINUE) return prc;
    if (!grid_path || !data || !out) return cli_usage_error("sweep", "--grid, --data and --out are required");
    char *text = read_text_file(grid_path, NULL);
    cJSON *grid = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!grid) return text ? fprintf(stderr, "tinylm sweep: %s: not valid JSON\n", grid_path), 1 : cli_fail("sweep");
    const cJSON *axes = cJSON_GetObjectItemCaseSensitive(grid, "axes");
    const cJSON *preset = cJSON_GetObjectItemCaseSensitive(grid, "preset");
    int rc = 0, n_axes = cJSON_GetArraySize(axes), n_runs = 1;
    if (!cJSON_IsObject(axes) || n_axes == 0) rc = tlm_error("%s: \"axes\" must be an object of value lists", grid_path);
    for (const cJSON *a = axes ? axes->child : NULL; !rc && a; a = a->next) {
        if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) == 0)
            rc = tlm_error("%s: axis \"%s\" must be a non-empty list", grid_path, a->string);
        else if ((n_runs *= cJSON_GetArraySize(a)) > 10000)
            rc = tlm_error("%s: more than 10000 runs", grid_path);
    }
    if (!rc && make_dirs(out)) rc = -1;
    if (rc) {
        cJSON_Delete(grid);
        return cli_fail("sweep");
    }
    const int me = dist_world_rank(), ranks = dist_world_size();
    char **names = calloc((size_t)n_runs, sizeof *names);
    double *val = calloc((size_t)n_runs, sizeof *val);
    int failures = 0;
    dist_solo(1); /* each rank trains its runs alone */
    for (int i = 0; i < n_runs && !rc; i++) {
        /* the i-th combination: axis k's index is digit k of i in the mixed radix of the sizes */
        cmdline c = {.argc = 0};
        char name[200];
        int len = snprintf(name, sizeof name, "%03d-", i), rest = i;
        rc = push(&c, "train") || push(&c, "--data") || push(&c, data);
        if (!rc) rc = push(&c, "--preset") || push(&c, cJSON_IsString(preset) ? preset->valuestring : "nanogpt-baby");
        const cJSON *sections[2] = {cJSON_GetObjectItemCaseSensitive(grid, "set"), cJSON_GetObjectItemCaseSensitive(grid, "train")};
        for (int s = 0; s < 2 && !rc; s++)
            for (const cJSON *kv = sections[s] ? sections[s]->child : NULL; kv && !rc; kv = kv->next)
                rc = push_setting(&c, kv->string, kv, grid_path);
        for (const cJSON *a = axes->child; a && !rc; a = a->next) {
            const int size = cJSON_GetArraySize(a);
            const cJSON *v = cJSON_GetArrayItem(a, rest % size);
            rest /= size;
            char vt[64];
            rc = push_setting(&c, a->string, v, grid_path);
            if (!rc && !scalar_text(v, vt, sizeof vt) && len < (int)sizeof name)
                len += snprintf(name + len, sizeof name - len, "%s%s=%s", a == axes->child ? "" : ",", a->string, vt);
        }
        for (char *p = name; *p; p++)
            if (*p == '/' || *p == ' ') *p = '_';
        names[i] = strdup(name);
        char *run = path_join(out, name);
        if (rc || i % ranks != me) {
            free(run);
            continue;
        }
        int done = 0;
        final_val_loss(run, &done);
        const cJSON *steps = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(grid, "train"), "steps");
        int want = cJSON_IsNumber(steps) ? steps->valueint : 0;
        char *latest = path_join(run, "latest");
        int started = is_directory(latest), result = 0; /* (latest: a link to the last checkpoint) */
        free(latest);
        if (started && want > 0 && done >= want) {
            printf("[rank %d] %s: complete, skipped\n", me, name);
        } else if (started) {
            printf("[rank %d] %s: resuming\n", me, name);
            char *argv_r[] = {"train", "--resume", run, "--data", (char *)data, NULL};
            result = cmd_train(5, argv_r);
        } else {
            printf("[rank %d] %s\n", me, name);
            rc = push(&c, "--out") || push(&c, run) || push(&c, "--sample") || push(&c, "0");
            if (!rc) result = cmd_train(c.argc, c.argv);
        }
        fflush(stdout);
        if (result) failures++, fprintf(stderr, "tinylm sweep: run %s failed (exit %d)\n", name, result);
        free(run);
    }
    dist_solo(0);
    dist_barrier(); /* every run done before rank 0 reads them */
    if (!rc && me == 0) {
        for (int i = 0; i < n_runs; i++) {
            char *run = path_join(out, names[i]);
            int done;
            val[i] = final_val_loss(run, &done);
            free(run);
        }
        write_summary(out, names, val, n_runs);
        for (int i = 0; i < n_runs; i++) printf("%-60s %.4f\n", names[i], val[i]);
    }
    for (int i = 0; i < n_runs; i++) free(names[i]);
    free(names), free(val);
    cJSON_Delete(grid);
    if (rc) return cli_fail("sweep");
    return failures ? 1 : 0;
}
