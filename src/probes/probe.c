/* probe.c — named intermediate tensors of a pass: which names exist, which are selected (glob
 * patterns), and the recorded copies.
 *
 * The names are the probe column of the model's one table of activation points (model/points.c,
 * docs/probes.md lists them), and a probe records a point when the pass fires it (an observer's
 * at_point, the same call the hooks take): listing, checking patterns and recording all read that
 * table, so a name can not be listed without being recordable or the other way round. Only the
 * weights' gradients come from elsewhere: the model's tensor table, after a backward. */
#include "probe.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/npy.h"
#include "model/model.h"
#include "model/points.h"
#include "util/error.h"
#include "util/io.h"
#include "model/context.h"

struct tlm_probe {
    char **patterns;
    int n_patterns;
    probe_tensor *rec;
    size_t n_rec, cap_rec;
    model_observer obs; /* what probe_attach attaches: records at each point as it fires */
};

tlm_probe *probe_create(void) {
    tlm_probe *p = calloc(1, sizeof *p);
    if (!p) tlm_error("out of memory creating a probe");
    return p;
}

void probe_free(tlm_probe *p) {
    if (!p) return;
    for (int i = 0; i < p->n_patterns; i++) free(p->patterns[i]);
    free(p->patterns);
    probe_clear(p);
    free(p->rec);
    free(p);
}

int probe_select(tlm_probe *p, const char *pattern) {
    if (!pattern || !*pattern) return tlm_error("probe: empty name pattern");
    char **np = realloc(p->patterns, sizeof(char *) * (size_t)(p->n_patterns + 1));
    if (!np) return tlm_error("out of memory adding probe pattern \"%s\"", pattern);
    p->patterns = np;
    if (!(p->patterns[p->n_patterns] = strdup(pattern))) return tlm_error("out of memory adding a probe pattern");
    p->n_patterns++;
    return 0;
}

int probe_wants(const tlm_probe *p, const char *name) {
    for (int i = 0; i < p->n_patterns; i++)
        if (fnmatch(p->patterns[i], name, 0) == 0) return 1;
    return 0;
}

size_t probe_count(const tlm_probe *p) { return p->n_rec; }
const probe_tensor *probe_at(const tlm_probe *p, size_t i) { return i < p->n_rec ? &p->rec[i] : NULL; }

const probe_tensor *probe_find(const tlm_probe *p, const char *name) {
    for (size_t i = 0; i < p->n_rec; i++)
        if (!strcmp(p->rec[i].name, name)) return &p->rec[i];
    return NULL;
}

void probe_clear(tlm_probe *p) {
    for (size_t i = 0; i < p->n_rec; i++) free(p->rec[i].data);
    p->n_rec = 0;
}

/* The record for `name` with room for this shape: reused when the name was recorded before. */
static probe_tensor *slot(tlm_probe *p, const char *name, int ndim, const int64_t *shape) {
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= (size_t)shape[i];
    probe_tensor *t = (probe_tensor *)probe_find(p, name);
    if (!t) {
        if (strlen(name) >= sizeof t->name) return tlm_error("probe name \"%.60s...\" is too long", name), NULL;
        if (p->n_rec == p->cap_rec) {
            size_t cap = p->cap_rec ? 2 * p->cap_rec : 64;
            probe_tensor *nr = realloc(p->rec, cap * sizeof *nr);
            if (!nr) return tlm_error("out of memory recording probe \"%s\"", name), NULL;
            p->rec = nr, p->cap_rec = cap;
        }
        t = &p->rec[p->n_rec++];
        memset(t, 0, sizeof *t);
        strcpy(t->name, name);
    }
    if (!t->data || t->numel != numel) {
        float *d = realloc(t->data, (numel ? numel : 1) * sizeof(float));
        if (!d) return tlm_error("out of memory recording probe \"%s\" (%zu floats)", name, numel), NULL;
        t->data = d;
    }
    t->ndim = ndim;
    for (int i = 0; i < PROBE_MAX_DIMS; i++) t->shape[i] = i < ndim ? shape[i] : 0;
    t->numel = numel;
    return t;
}

int probe_record(tlm_probe *p, const char *name, const float *data, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > PROBE_MAX_DIMS) return tlm_error("probe \"%s\": %d dimensions (at most %d)", name, ndim, PROBE_MAX_DIMS);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) return tlm_error("probe \"%s\": negative size %lld", name, (long long)shape[i]);
    if (!probe_wants(p, name)) return 0;
    probe_tensor *t = slot(p, name, ndim, shape);
    if (!t) return -1;
    memcpy(t->data, data, t->numel * sizeof(float));
    return 0;
}

int probe_dump(const tlm_probe *p, const char *dir) {
    if (make_dirs(dir)) return -1;
    for (size_t i = 0; i < p->n_rec; i++) {
        const probe_tensor *t = &p->rec[i];
        char file[160];
        snprintf(file, sizeof file, "%s.npy", t->name);
        char *path = path_join(dir, file);
        if (!path) return tlm_error("out of memory");
        int rc = tlm_npy_write_f32(path, t->ndim, t->shape, t->data);
        free(path);
        if (rc) return -1;
    }
    return 0;
}

/* ---- recording at the model's activation points (model/points.h) --------------------------------- */

/* the selected probe names of point id, copied (or reduced) from data as it fires */
static int probe_at_point(void *user, const tlm_context *run, int id, float *data, int B, int T, int is_grad) {
    const tlm_model *m = run->m;
    tlm_probe *p = user;
    const tlm_config *c = &m->cfg;
    point_probe pp;
    int r;
    for (int j = 0; (r = model_point_probe(c, id, j, is_grad, B, T, &pp)) >= 0; j++) {
        if (!r || !probe_wants(p, pp.name)) continue;
        probe_tensor *t = slot(p, pp.name, pp.ndim, pp.shape);
        if (!t) return -1;
        if (pp.flags & POINT_PROBE_RMS) {
            const int w = (int)pp.shape[2]; /* (the row: d_model, or MLA's c_q / c_kv width) */
            for (size_t row = 0; row < t->numel; row++) {
                const float *x = data + row * w;
                double ss = 0.0;
                for (int i = 0; i < w; i++) ss += (double)x[i] * x[i];
                t->data[row] = (float)sqrt(ss / w);
            }
            continue;
        }
        memcpy(t->data, data, t->numel * sizeof(float));
        if (pp.flags & POINT_PROBE_MASKED) /* the keys the mask hides were never written */
            for (size_t bh = 0; bh < t->numel / ((size_t)T * T); bh++)
                for (int i = 0; i < T; i++)
                    for (int k = 0; k < T; k++)
                        if (!model_key_visible(c, pp.layer, i, k)) t->data[(bh * T + i) * T + k] = -INFINITY;
    }
    return 0;
}

/* the weights' gradients, once a backward is done: grad.<tensor name> (the model's tensor table) */
static int probe_after_pass(void *user, const tlm_context *run, int is_backward) {
    const tlm_model *m = run->m;
    tlm_probe *p = user;
    if (!is_backward || p->n_patterns == 0) return 0;
    if (!m->ctx->grad_mem) return tlm_error("probe: the model has no gradients to record");
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_info *ti = &m->tensors[i];
        char name[128];
        snprintf(name, sizeof name, "grad.%s", ti->name);
        const int64_t shape[2] = {ti->shape[0], ti->shape[1]};
        if (probe_wants(p, name) && probe_record(p, name, model_grad(m, i), ti->ndim, shape)) return -1;
    }
    return 0;
}

int probe_attach(tlm_probe *p, tlm_model *m) {
    p->obs = (model_observer){.at_point = probe_at_point, .after_pass = probe_after_pass, .user = p};
    return model_observe(m, &p->obs);
}

void probe_detach(tlm_model *m) {
    for (int i = m->ctx->n_observers - 1; i >= 0; i--)
        if (m->ctx->observers[i]->at_point == probe_at_point) model_unobserve(m, m->ctx->observers[i]);
}

/* every name of one direction, in the order of the point table */
static int list_points(const tlm_model *m, int B, int T, int is_grad, probe_name_fn fn, void *ctx) {
    const tlm_config *c = &m->cfg;
    const int n = model_point_count(c);
    point_probe pp;
    int r, rc;
    for (int step = 0; step < n; step++) {
        /* (backward: the logits' gradient first, as it is recorded) */
        const int id = is_grad ? (step == 0 ? n - 1 : step - 1) : step;
        for (int j = 0; (r = model_point_probe(c, id, j, is_grad, B, T, &pp)) >= 0; j++) {
            if (!r || ((pp.flags & POINT_PROBE_MAP) && m->ctx->kv)) continue; /* (decoding keeps no map) */
            if ((rc = fn(ctx, pp.name, pp.ndim, pp.shape))) return rc;
        }
    }
    return 0;
}

int probe_list(const tlm_model *m, int B, int T, int with_backward, probe_name_fn fn, void *ctx) {
    int rc = list_points(m, B, T, 0, fn, ctx);
    if (rc || !with_backward) return rc;
    if ((rc = list_points(m, B, T, 1, fn, ctx))) return rc;
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_info *t = &m->tensors[i];
        char name[128];
        snprintf(name, sizeof name, "grad.%s", t->name);
        const int64_t shape[2] = {t->shape[0], t->shape[1]};
        if ((rc = fn(ctx, name, t->ndim, shape))) return rc;
    }
    return 0;
}

typedef struct {
    const char *pattern;
} match_ctx;

static int stop_at_match(void *ctx, const char *name, int ndim, const int64_t *shape) {
    (void)ndim, (void)shape;
    return fnmatch(((match_ctx *)ctx)->pattern, name, 0) == 0;
}

int probe_check(const tlm_probe *p, const tlm_model *m, int with_backward) {
    for (int i = 0; i < p->n_patterns; i++) {
        match_ctx mc = {p->patterns[i]};
        if (probe_list(m, 1, 1, with_backward, stop_at_match, &mc) != 1)
            return tlm_error("probe pattern \"%s\" matches no %sprobe name of this model (`tinylm inspect "
                             "--list-probes` lists them; docs/probes.md explains them)",
                             p->patterns[i], with_backward ? "" : "forward ");
    }
    return 0;
}
