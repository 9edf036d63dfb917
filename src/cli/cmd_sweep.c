/* tinylm sweep — a grid of training runs: every combination of the grid's axes is one normal,
 * crash-proof run directory under --out, trained as `tinylm train` would (the same code: each
 * run is a train command line). Runs already complete are skipped and interrupted ones resumed,
 * so a sweep can be restarted: before anything trains, rank 0 plans every run and compares it
 * with what its directory holds (the latest checkpoint's config, options and data hash). A run
 * is complete when its checkpoint reached its own last step; a directory whose run differs
 * from the grid's (the grid was edited: a run's name holds only its axes) refuses the sweep,
 * naming the run and the setting, and nothing is trained or removed. Under mpirun the runs are dealt out to the ranks (run i on rank
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
#include <unistd.h>

#include "cli.h"
#include "cmd_train.h"
#include "train/dist.h"
#include "train/presets.h"
#include "train/run_dir.h"
#include "train/trainer.h"
#include "util/atomic_file.h"
#include "util/buf.h"
#include "util/error.h"
#include "util/finite.h"
#include "util/io.h"
#include "util/utf8.h"

static const char USAGE[] =
    "usage: tinylm sweep --grid GRID.json --data FILE --out DIR [--threads N]\n"
    "  one training run per combination of the grid's axes, each in DIR/<index>-<key=value,...>;\n"
    "  complete runs (their checkpoint at their own last step) are skipped and interrupted ones\n"
    "  resumed; a run whose checkpoint differs from the grid (config, options, data: the grid was\n"
    "  edited) refuses the sweep before anything trains. DIR/summary.md and summary.svg hold the\n"
    "  final losses. Under mpirun the runs are dealt out to the ranks.\n"
    "  GRID.json: {\"preset\": NAME, \"set\": {KEY: VALUE}, \"train\": {OPTION: VALUE},\n"
    "              \"axes\": {KEY or OPTION: [VALUES]}}  (OPTION: a train option without --, e.g. lr)\n";

/* train options a grid may set (the rest of its keys are config switches, passed as --set) */
static const char *const TRAIN_OPTIONS[] = {"steps", "batch", "seq", "accum", "lr", "min-lr", "warmup", "beta1",
                                            "beta2", "eps", "weight-decay", "grad-clip", "seed", "eval-every",
                                            "eval-batches", "save-every", "log-every", "tokenizer", "z-loss", "precision",
                                            "router-aux-loss-coef", "router-bias-update", NULL};
static const char *const GRID_KEYS[] = {"preset", "set", "train", "axes", NULL};

static int is_train_option(const char *k) {
    for (int i = 0; TRAIN_OPTIONS[i]; i++)
        if (!strcmp(k, TRAIN_OPTIONS[i])) return 1;
    return 0;
}

/* a JSON scalar as command-line text; -1 for other values or text too long for buf */
static int scalar_text(const cJSON *v, char *buf, size_t n) {
    int len = -1;
    if (cJSON_IsString(v)) len = snprintf(buf, n, "%s", v->valuestring);
    if (cJSON_IsBool(v)) len = snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
    if (cJSON_IsNumber(v)) len = snprintf(buf, n, "%.15g", v->valuedouble); /* 0.003, not 0.0030000000000000001 */
    return len >= 0 && (size_t)len < n ? 0 : -1;
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
    char val[2048], opt[4096];
    if (scalar_text(v, val, sizeof val))
        return tlm_error("%s: the value of \"%s\" must be a string (of at most 2047 bytes), number or bool", grid, key);
    if (is_train_option(key)) {
        snprintf(opt, sizeof opt, "--%s", key);
        return push(c, opt) || push(c, val) ? -1 : 0;
    }
    snprintf(opt, sizeof opt, "%s=%s", key, val);
    return push(c, "--set") || push(c, opt) ? -1 : 0;
}

/* Each key of object o once (cJSON keeps every repeat, and the grid's readers took the first of
 * some and the last of others), its numbers finite as float32s (1e39 would reach a run as inf),
 * and so on down every level. where: the object's place in the grid, "" at the top. */
static int check_keys(const cJSON *o, const char *path, const char *where) {
    int i = 0;
    for (const cJSON *k = o->child; k; k = k->next, i++) {
        char inner[256];
        if (cJSON_IsObject(o)) {
            for (const cJSON *j = o->child; j != k; j = j->next)
                if (!strcmp(j->string, k->string))
                    return tlm_error("%s: key \"%s\"%s%s%s appears twice: each key may be given once", path, k->string,
                                     *where ? " in \"" : "", where, *where ? "\"" : "");
            snprintf(inner, sizeof inner, "%s%s%s", where, *where ? "." : "", k->string);
        } else {
            snprintf(inner, sizeof inner, "%s[%d]", where, i);
        }
        if (cJSON_IsNumber(k) && tlm_float_from_file(k->valuedouble, TLM_FLOAT_ANY, path, inner, &(float){0}))
            return -1;
        if ((cJSON_IsObject(k) || cJSON_IsArray(k)) && check_keys(k, path, inner)) return -1;
    }
    return 0;
}

/* The grid's shape, before any run is planned: only the known keys, a preset that exists, "set"
 * holding config switches and "train" training options, non-empty axes. Returns the number of
 * runs, or -1 + error. */
static int check_grid(const cJSON *grid, const char *path) {
    if (!cJSON_IsObject(grid)) return tlm_error("%s: the grid must be a JSON object", path);
    if (check_keys(grid, path, "")) return -1;
    for (const cJSON *k = grid->child; k; k = k->next) {
        int known = 0;
        for (int i = 0; GRID_KEYS[i]; i++) known |= !strcmp(k->string, GRID_KEYS[i]);
        if (!known)
            return tlm_error("%s: unknown key \"%s\" (a grid holds \"preset\", \"set\", \"train\" and \"axes\")", path,
                             k->string);
    }
    const cJSON *preset = cJSON_GetObjectItemCaseSensitive(grid, "preset");
    if (preset && !cJSON_IsString(preset)) {
        char *v = cJSON_PrintUnformatted(preset);
        tlm_error("%s: \"preset\" = %s must be the name of one preset (a string; tinylm train --help lists them)",
                  path, v ? v : "?");
        free(v);
        return -1;
    }
    if (preset && !preset_find(preset->valuestring)) {
        char names[256] = "";
        for (int i = 0; preset_at(i); i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", preset_at(i)->name);
        return tlm_error("%s: unknown preset \"%s\" (the presets: %s)", path, preset->valuestring, names);
    }
    const cJSON *set = cJSON_GetObjectItemCaseSensitive(grid, "set"), *train = cJSON_GetObjectItemCaseSensitive(grid, "train");
    if (set && !cJSON_IsObject(set)) return tlm_error("%s: \"set\" must be an object of config switches", path);
    if (train && !cJSON_IsObject(train)) return tlm_error("%s: \"train\" must be an object of training options", path);
    for (const cJSON *k = set ? set->child : NULL; k; k = k->next)
        if (is_train_option(k->string))
            return tlm_error("%s: \"set\" holds config switches, and \"%s\" is a training option: put it in \"train\"",
                             path, k->string);
    for (const cJSON *k = train ? train->child : NULL; k; k = k->next)
        if (!is_train_option(k->string))
            return tlm_error("%s: \"train\": unknown training option \"%s\" (a grid may set %s; config switches go in "
                             "\"set\")",
                             path, k->string,
                             "steps, batch, seq, accum, lr, min-lr, warmup, beta1, beta2, eps, weight-decay, "
                             "grad-clip, seed, eval-every, eval-batches, save-every, log-every, tokenizer, z-loss, precision, "
                             "router-aux-loss-coef, router-bias-update");
    const cJSON *axes = cJSON_GetObjectItemCaseSensitive(grid, "axes");
    if (!cJSON_IsObject(axes) || !axes->child) return tlm_error("%s: \"axes\" must be an object of value lists", path);
    long n_runs = 1;
    for (const cJSON *a = axes->child; a; a = a->next) {
        if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) == 0)
            return tlm_error("%s: axis \"%s\" must be a non-empty list", path, a->string);
        if ((n_runs *= cJSON_GetArraySize(a)) > 10000) return tlm_error("%s: more than 10000 runs", path);
    }
    return (int)n_runs;
}

/* A run's directory name: every byte that could not be one there, or that a terminal would
 * act on, becomes '_' ('/', space, control bytes, invalid UTF-8). */
static void sanitize_name(char *name) {
    for (size_t i = 0, n = strlen(name); i < n;) {
        size_t len = tlm_utf8_valid_len(name + i, n - i);
        if (len == 0 || (len == 1 && ((unsigned char)name[i] < 0x20 || name[i] == 0x7f || name[i] == '/' ||
                                      name[i] == ' '))) {
            name[i++] = '_';
            continue;
        }
        i += len;
    }
}

/* Run i of the grid: its train command line (with --out and --sample 0) and its directory name
 * "<index>-<key=value,...>". Axis k's index is digit k of i in the mixed radix of the sizes. */
static int plan_run(const cJSON *grid, const char *grid_path, int i, const char *data, const char *out, cmdline *c,
                    char *name, size_t n_name) {
    const cJSON *preset = cJSON_GetObjectItemCaseSensitive(grid, "preset"), *axes = cJSON_GetObjectItemCaseSensitive(grid, "axes");
    c->argc = 0, c->used = 0;
    size_t len = (size_t)snprintf(name, n_name, "%03d-", i);
    int rest = i;
    int rc = push(c, "train") || push(c, "--data") || push(c, data) || push(c, "--preset") ||
             push(c, cJSON_IsString(preset) ? preset->valuestring : "nanogpt-baby");
    const cJSON *sections[2] = {cJSON_GetObjectItemCaseSensitive(grid, "set"), cJSON_GetObjectItemCaseSensitive(grid, "train")};
    for (int s = 0; s < 2 && !rc; s++)
        for (const cJSON *kv = sections[s] ? sections[s]->child : NULL; kv && !rc; kv = kv->next)
            rc = push_setting(c, kv->string, kv, grid_path);
    for (const cJSON *a = axes->child; a && !rc; a = a->next) {
        const int size = cJSON_GetArraySize(a);
        const cJSON *v = cJSON_GetArrayItem(a, rest % size);
        rest /= size;
        char vt[64];
        rc = push_setting(c, a->string, v, grid_path);
        if (!rc && scalar_text(v, vt, sizeof vt)) snprintf(vt, sizeof vt, "%.60s", v->valuestring); /* (a long string) */
        if (!rc && len < n_name)
            len += (size_t)snprintf(name + len, n_name - len, "%s%s=%s", a == axes->child ? "" : ",", a->string, vt);
    }
    sanitize_name(name); /* (the index prefix keeps names distinct, truncated or not) */
    if (rc) return -1;
    char *run = path_join(out, name);
    rc = run ? push(c, "--out") || push(c, run) || push(c, "--sample") || push(c, "0") : tlm_error("out of memory");
    free(run);
    return rc ? -1 : 0;
}

/* the final validation loss of a run directory (its last metrics line with one), or NaN */
static double final_val_loss(const char *run) {
    char *path = path_join(run, "metrics.jsonl");
    size_t n = 0;
    char *text = file_exists(path) ? read_text_file(path, &n) : NULL;
    free(path);
    double val = 0.0 / 0.0;
    for (char *line = text; line && *line;) {
        char *end = strchr(line, '\n');
        cJSON *j = cJSON_ParseWithLength(line, end ? (size_t)(end - line) : strlen(line));
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "val_loss");
        if (cJSON_IsNumber(v)) val = v->valuedouble;
        cJSON_Delete(j);
        line = end ? end + 1 : NULL;
    }
    free(text);
    return val;
}

/* a run name as the text of a Markdown table cell: '|' would end the cell, and the characters
 * of emphasis, code, links and HTML would format it; each is escaped (backslash, or an entity) */
static void put_markdown_cell(tlm_buf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '<') tlm_buf_puts(b, "&lt;");
        else if (*s == '>') tlm_buf_puts(b, "&gt;");
        else if (*s == '&') tlm_buf_puts(b, "&amp;");
        else {
            if (strchr("\\|`*_~[]", *s)) tlm_buf_put(b, "\\", 1);
            tlm_buf_put(b, s, 1);
        }
    }
}

/* XML text or attribute value (names are valid UTF-8 without control bytes: sanitize_name) */
static void put_xml(tlm_buf *b, const char *s) {
    for (; *s; s++) {
        const char *e = *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '&' ? "&amp;" : *s == '"' ? "&quot;"
                      : *s == '\'' ? "&apos;" : NULL;
        if (e) tlm_buf_puts(b, e);
        else tlm_buf_put(b, s, 1);
    }
}

/* summary.md and summary.svg, each replaced atomically; 0, or -1 + an error naming the file */
static int write_summary(const char *out, char **names, const double *val, int n) {
    char *md = path_join(out, "summary.md"), *svg = path_join(out, "summary.svg");
    tlm_buf b = {0}, g = {0};
    tlm_buf_puts(&b, "| run | final validation loss |\n| --- | --- |\n");
    for (int i = 0; i < n; i++) {
        tlm_buf_puts(&b, "| ");
        put_markdown_cell(&b, names[i]);
        tlm_buf_printf(&b, " | %.4f |\n", val[i]);
    }
    double hi = 0;
    for (int i = 0; i < n; i++) hi = val[i] > hi ? val[i] : hi;
    /* horizontal bars: one per run, labelled, lengths proportional to the loss */
    const int row = 22, left = 360, width = 360, h = 40 + row * n;
    tlm_buf_printf(&g, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
                       "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                       "<text x=\"10\" y=\"20\" font-size=\"14\">final validation loss</text>\n",
                   left + width + 70, h);
    for (int i = 0; i < n; i++) {
        const int y = 30 + row * i;
        const double w = hi > 0 && val[i] == val[i] ? width * val[i] / hi : 0;
        tlm_buf_printf(&g, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", left - 8, y + 15);
        put_xml(&g, names[i]);
        tlm_buf_printf(&g, "</text>\n<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#4a6fa5\"/>\n", left,
                       y + 3, w, row - 6);
        tlm_buf_printf(&g, "<text x=\"%.1f\" y=\"%d\">%.4f</text>\n", left + w + 6, y + 15, val[i]);
    }
    tlm_buf_puts(&g, "</svg>\n");
    int rc = !md || !svg || b.oom || g.oom ? tlm_error("out of memory writing the summary")
             : tlm_write_file_atomic(md, b.data, b.len) || tlm_write_file_atomic(svg, g.data, g.len) ? -1 : 0;
    if (!rc) printf("summary: %s, %s\n", md, svg);
    tlm_buf_free(&b), tlm_buf_free(&g);
    free(md), free(svg);
    return rc;
}

/* Whether summary.md and summary.svg can be written into out (util/io.h's rule for outputs: a
 * regular file or a new name, never a directory, FIFO, device..., never the grid or the data).
 * The inputs are recorded for the check only: the runs rewrite their own metrics. */
static int check_summary_targets(const char *out, const char *grid_path, const char *data) {
    tlm_inputs_track(1);
    int fd, rc = 0;
    if ((fd = tlm_open_input(grid_path)) >= 0) close(fd);
    if ((fd = tlm_open_input(data)) >= 0) close(fd);
    for (int k = 0; k < 2 && !rc; k++) {
        char *path = path_join(out, k ? "summary.svg" : "summary.md");
        rc = path ? tlm_output_check(path) : tlm_error("out of memory");
        free(path);
    }
    tlm_inputs_track(0);
    return rc;
}

enum { RUN_NEW, RUN_RESUME, RUN_COMPLETE };

/* Rank 0, before anything trains: plans every run, checks its settings, and compares it with the
 * run its directory holds. status[i] says what to do; -1 (+ messages on stderr) refuses the sweep. */
static int plan_all(const cJSON *grid, const char *grid_path, const char *data, const char *out, int n_runs,
                    signed char *status) {
    uint64_t hash;
    if (train_data_hash(data, &hash)) return cli_fail("sweep"), -1;
    if (check_summary_targets(out, grid_path, data)) {
        fprintf(stderr, "tinylm sweep: the summary cannot be written: %s\n", tlm_last_error());
        return -1;
    }
    int changed = 0, rc = 0;
    cmdline *c = malloc(sizeof *c);
    if (!c) return tlm_error("out of memory"), cli_fail("sweep"), -1;
    for (int i = 0; i < n_runs && !rc; i++) {
        char name[256], *json = NULL;
        train_options o;
        if (plan_run(grid, grid_path, i, data, out, c, name, sizeof name)) {
            rc = cli_fail("sweep");
            break;
        }
        if (cmd_train_plan(c->argc, c->argv, &json, &o) != CLI_CONTINUE) { /* (train said why) */
            fprintf(stderr, "tinylm sweep: %s: run %s: the grid's settings for it are refused (above)\n", grid_path, name);
            rc = 1;
            break;
        }
        char *run = path_join(out, name), *latest = NULL;
        int step = 0, steps = 0, m = 0;
        if (train_check_plan(json, &o)) {
            fprintf(stderr, "tinylm sweep: %s: run %s: %s\n", grid_path, name, tlm_last_error());
            rc = 1;
        } else if ((latest = run_latest(run))) { /* (a run has started there: it has a checkpoint) */
            m = train_run_matches(run, json, &o, hash, &step, &steps);
            if (m < 0) {
                fprintf(stderr, "tinylm sweep: run %s: %s\n", name, tlm_last_error());
                rc = 1;
            } else if (m == 1 && changed++ < 5) {
                fprintf(stderr, "tinylm sweep: %s\n", tlm_last_error());
            }
            status[i] = m == 0 && step >= steps ? RUN_COMPLETE : RUN_RESUME;
        } else {
            tlm_clear_error();
            status[i] = RUN_NEW;
        }
        free(run), free(latest), free(json);
    }
    free(c);
    if (!rc && changed) {
        if (changed > 5) fprintf(stderr, "tinylm sweep: ... and %d more runs\n", changed - 5);
        fprintf(stderr,
                "tinylm sweep: %d run%s in %s %s not what %s asks for now on %s (the grid or the data changed "
                "since; a run's name holds only its axes). Nothing was trained: restore the grid and the data to "
                "continue them, or sweep into another --out (or remove those runs) to train the new grid\n",
                changed, changed == 1 ? "" : "s", out, changed == 1 ? "is" : "are", grid_path, data);
        rc = 1;
    }
    return rc ? -1 : 0;
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
    if (!grid && text && tlm_json_nesting_error(grid_path, text, strlen(text))) return free(text), cli_fail("sweep");
    free(text);
    if (!grid) return text ? fprintf(stderr, "tinylm sweep: %s: not valid JSON\n", grid_path), 1 : cli_fail("sweep");
    const int n_runs = check_grid(grid, grid_path);
    if (n_runs < 0) {
        cJSON_Delete(grid);
        return cli_fail("sweep");
    }
    const int me = dist_world_rank(), ranks = dist_world_size();
    signed char *status = calloc((size_t)n_runs, 1);
    char **names = calloc((size_t)n_runs, sizeof *names);
    double *val = calloc((size_t)n_runs, sizeof *val);
    cmdline *c = malloc(sizeof *c);
    int rc = !status || !names || !val || !c ? tlm_error("out of memory") : 0;
    if (rc) cli_fail("sweep");
    /* rank 0 plans and checks every run; the others learn the verdict and what each run needs */
    if (!rc && me == 0 && plan_all(grid, grid_path, data, out, n_runs, status)) rc = 1;
    rc = dist_max_int(rc);
    if (!rc) dist_broadcast(status, (size_t)n_runs, 0);
    if (!rc && make_dirs(out)) rc = cli_fail("sweep");
    int failures = 0, interrupted = 0;
    dist_solo(1); /* each rank trains its runs alone */
    for (int i = 0; i < n_runs && !rc && !interrupted; i++) {
        char name[256];
        if (plan_run(grid, grid_path, i, data, out, c, name, sizeof name)) {
            rc = cli_fail("sweep");
            break;
        }
        names[i] = strdup(name);
        if (i % ranks != me) continue;
        char *run = path_join(out, name);
        int result = 0;
        if (status[i] == RUN_COMPLETE) {
            printf("[rank %d] %s: complete, skipped\n", me, name);
            int fd = run_lock(run); /* (what an interrupted save may have left: its temp folders) */
            if (fd >= 0) run_remove_stale(run), close(fd);
        } else if (status[i] == RUN_RESUME) {
            printf("[rank %d] %s: resuming\n", me, name);
            fflush(stdout);
            result = train_resume(run, data, &(resume_options){0});
        } else {
            printf("[rank %d] %s\n", me, name);
            fflush(stdout);
            char *json = NULL;
            train_options o;
            result = cmd_train_plan(c->argc, c->argv, &json, &o);
            if (result == CLI_CONTINUE) result = train_new(json, &o);
            free(json);
        }
        fflush(stdout);
        if (result == 130 || result == 143) { /* Ctrl-C / SIGTERM: the run saved; the sweep stops */
            fprintf(stderr, "tinylm sweep: interrupted during run %s (it saved a checkpoint); run the same sweep "
                            "again to continue\n", name);
            interrupted = result;
        } else if (result) {
            failures++, fprintf(stderr, "tinylm sweep: run %s failed (exit %d)\n", name, result);
        }
        free(run);
    }
    dist_solo(0);
    dist_barrier(); /* every run done before rank 0 reads them */
    interrupted = dist_max_int(interrupted);
    if (!rc && !interrupted && me == 0) {
        for (int i = 0; i < n_runs; i++) {
            char *run = path_join(out, names[i]);
            val[i] = final_val_loss(run);
            free(run);
        }
        if (check_summary_targets(out, grid_path, data) || write_summary(out, names, val, n_runs)) {
            fprintf(stderr, "tinylm sweep: the summary cannot be written: %s\n", tlm_last_error());
            rc = 1;
        } else {
            for (int i = 0; i < n_runs; i++) printf("%-60s %.4f\n", names[i], val[i]);
        }
    }
    for (int i = 0; names && i < n_runs; i++) free(names[i]);
    free(names), free(val), free(status), free(c);
    cJSON_Delete(grid);
    if (interrupted) return interrupted;
    return rc || failures ? 1 : 0;
}
