/* train_page.c — `train --html FILE`: the run's page (src/report, kind "training"), rewritten
 * atomically at each evaluation from the run's metrics.jsonl: loss and validation loss, learning
 * rate, gradient norm, the largest attention logit (metrics' attn_max, which --html turns on) and
 * tokens/s. While the run trains the page reloads itself; the last write (finished, stopped or
 * failed) does not, and stays as the run's report. */
#include "train_page.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"
#include "util/error.h"
#include "util/io.h"

enum { MAX_POINTS = 2000 }; /* a long run's lines are thinned to about this many (validation lines kept) */

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* the largest entry of attn_max ([layer][head]), NaN when absent */
static double attn_max(const cJSON *o) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "attn_max"), *row, *v;
    double mx = NAN;
    cJSON_ArrayForEach(row, a) {
        cJSON_ArrayForEach(v, row) {
            if (cJSON_IsNumber(v) && (isnan(mx) || v->valuedouble > mx)) mx = v->valuedouble;
        }
    }
    return mx;
}

static void push(cJSON *arr, double v) { cJSON_AddItemToArray(arr, isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull()); }

int train_page_write(const char *path, const char *metrics_path, const char *run, int steps, const char *status,
                     int live) {
    size_t len = 0;
    char *text = read_text_file(metrics_path, &len);
    if (!text) return tlm_error_prefix("--html %s", path);
    /* count the lines, to thin a long run evenly */
    long lines = 0;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    long every = lines > MAX_POINTS ? (lines + MAX_POINTS - 1) / MAX_POINTS : 1;
    cJSON *root = cJSON_CreateObject();
    cJSON *pts = cJSON_AddObjectToObject(root, "points"), *val = cJSON_AddObjectToObject(root, "validation");
    cJSON *step = cJSON_AddArrayToObject(pts, "step"), *loss = cJSON_AddArrayToObject(pts, "loss");
    cJSON *lr = cJSON_AddArrayToObject(pts, "lr"), *gn = cJSON_AddArrayToObject(pts, "grad_norm");
    cJSON *tps = cJSON_AddArrayToObject(pts, "tokens_per_s"), *am = cJSON_AddArrayToObject(pts, "attn_max");
    cJSON *vstep = cJSON_AddArrayToObject(val, "step"), *vloss = cJSON_AddArrayToObject(val, "loss");
    long k = 0;
    int last_step = 0, has_attn = 0;
    double last_loss = NAN, last_val = NAN;
    for (char *line = text, *nl; line < text + len; line = nl + 1, k++) {
        nl = memchr(line, '\n', (size_t)(text + len - line));
        if (!nl) break; /* (a line being written: the next write has it) */
        *nl = 0;
        cJSON *o = cJSON_Parse(line);
        if (!o) continue;
        double s = num(o, "step"), v = num(o, "val_loss"), a = attn_max(o);
        if (isfinite(s)) last_step = (int)s, last_loss = num(o, "loss");
        has_attn |= isfinite(a);
        if (isfinite(v)) push(vstep, s), push(vloss, v), last_val = v;
        if (k % every == 0 || isfinite(v) || nl + 1 >= text + len) {
            push(step, s), push(loss, num(o, "loss")), push(lr, num(o, "lr")), push(gn, num(o, "grad_norm"));
            push(tps, num(o, "tokens_per_s")), push(am, a);
        }
        cJSON_Delete(o);
    }
    free(text);
    cJSON_AddStringToObject(root, "kind", "training");
    cJSON_AddStringToObject(root, "run", run);
    cJSON_AddStringToObject(root, "status", status);
    cJSON_AddBoolToObject(root, "live", live);
    cJSON_AddNumberToObject(root, "refresh_s", 5);
    cJSON_AddNumberToObject(root, "step", last_step);
    cJSON_AddNumberToObject(root, "steps", steps);
    cJSON_AddItemToObject(root, "last_loss", isfinite(last_loss) ? cJSON_CreateNumber(last_loss) : cJSON_CreateNull());
    cJSON_AddItemToObject(root, "last_val_loss", isfinite(last_val) ? cJSON_CreateNumber(last_val) : cJSON_CreateNull());
    cJSON_AddBoolToObject(root, "has_attn", has_attn);
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) return tlm_error("--html %s: out of memory", path);
    char title[300];
    snprintf(title, sizeof title, "tinylm train %s", run);
    int rc = report_write_html(path, title, json);
    free(json);
    return rc;
}
