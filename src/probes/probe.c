/* probe.c — named intermediate tensors of a pass: which names exist (one walk over the model
 * per pass direction), which are selected (glob patterns), and the recorded copies.
 *
 * The walk below is the single description of every probe name (docs/probes.md lists the
 * same names): listing, checking patterns and recording all run through it, so a name can
 * not be listed without being recordable or the other way round. */
#include "probe.h"

#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/npy.h"
#include "model/model.h"
#include "util/error.h"
#include "util/io.h"

struct tlm_probe {
    char **patterns;
    int n_patterns;
    probe_tensor *rec;
    size_t n_rec, cap_rec;
    float *prev; /* probe_after_layer: the input of the next layer (the model may keep no copy) */
    size_t prev_n;
    model_observer obs; /* what probe_attach attaches: records after each pass */
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
    free(p->prev);
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

/* the model's after-pass hook */
static int probe_after_pass(void *p, const tlm_model *m, int is_backward) {
    return is_backward ? probe_after_backward(p, m) : probe_after_forward(p, m);
}

int probe_attach(tlm_probe *p, tlm_model *m) {
    p->obs = (model_observer){.after_pass = probe_after_pass, .user = p};
    return model_observe(m, &p->obs);
}

void probe_detach(tlm_model *m) {
    for (int i = m->n_observers - 1; i >= 0; i--)
        if (m->observers[i]->after_pass == probe_after_pass) model_unobserve(m, m->observers[i]);
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

/* ---- the walk: every probe name, its shape, and where its value lives ---------------------------- */

typedef enum {
    SRC_COPY,    /* the tensor as it is */
    SRC_ROW_RMS, /* sqrt(mean(x^2)) of each d_model-wide row: shape [B,T] from a [B,T,d] source */
    SRC_SCORES   /* attention logits [B,H,T,T]; masked entries (never written by the pass) -> -inf */
} source_kind;

typedef struct {
    const tlm_model *m;
    int B, T;
    int layer;        /* the layer being walked (its attention mask for SRC_SCORES) */
    tlm_probe *p;     /* recording; NULL when listing */
    probe_name_fn fn; /* listing */
    void *ctx;
    int rc;
} walker;

static void fill(const walker *w, probe_tensor *t, const float *src, source_kind kind) {
    const tlm_config *c = &w->m->cfg;
    if (kind == SRC_COPY) {
        memcpy(t->data, src, t->numel * sizeof(float));
    } else if (kind == SRC_ROW_RMS) {
        for (size_t r = 0; r < t->numel; r++) {
            const float *x = src + r * c->d_model;
            double ss = 0.0;
            for (int j = 0; j < c->d_model; j++) ss += (double)x[j] * x[j];
            t->data[r] = (float)sqrt(ss / c->d_model);
        }
    } else {
        const int T = w->T;
        memcpy(t->data, src, t->numel * sizeof(float));
        for (size_t bh = 0; bh < t->numel / ((size_t)T * T); bh++)
            for (int i = 0; i < T; i++)
                for (int j = 0; j < T; j++)
                    if (!model_key_visible(c, w->layer, i, j)) t->data[(bh * T + i) * T + j] = -INFINITY;
    }
}

/* One name: listed, or copied when selected. src is NULL while listing. */
static void item(walker *w, const float *src, source_kind kind, int ndim, const int64_t *shape, const char *fmt, ...)
    TLM_PRINTF(6, 7);
static void item(walker *w, const float *src, source_kind kind, int ndim, const int64_t *shape, const char *fmt, ...) {
    if (w->rc) return;
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (!w->p) {
        w->rc = w->fn(w->ctx, name, ndim, shape);
        return;
    }
    if (!probe_wants(w->p, name)) return;
    probe_tensor *t = slot(w->p, name, ndim, shape);
    if (!t) {
        w->rc = -1;
        return;
    }
    fill(w, t, src, kind);
}

/* a norm: the RMS of its input, its output, the RMS of its output */
static void norm_items(walker *w, const char *prefix, const float *in, const float *out) {
    int64_t bt[2] = {w->B, w->T}, btd[3] = {w->B, w->T, w->m->cfg.d_model};
    item(w, in, SRC_ROW_RMS, 2, bt, "%s.in_rms", prefix);
    item(w, out, SRC_COPY, 3, btd, "%s.out", prefix);
    item(w, out, SRC_ROW_RMS, 2, bt, "%s.out_rms", prefix);
}

static void attention_items(walker *w, int l, const layer_acts *La) {
    const tlm_config *c = &w->m->cfg;
    const int B = w->B, T = w->T;
    int64_t q[4] = {B, T, c->n_heads, c->head_dim}, kv[4] = {B, T, c->n_kv_heads, c->head_dim};
    int64_t att[4] = {B, c->n_heads, T, T};
    /* the names and tensors of points.c's hook_q, hook_k, hook_v, hook_q_normed, hook_rot_q, ... */
    item(w, La->q, SRC_COPY, 4, q, "layers.%d.attn.q", l);
    item(w, La->k, SRC_COPY, 4, kv, "layers.%d.attn.k", l);
    item(w, La->v, SRC_COPY, 4, kv, "layers.%d.attn.v", l);
    if (c->qk_norm != QK_NORM_NONE) {
        item(w, La->qn, SRC_COPY, 4, q, "layers.%d.attn.q_normed", l);
        item(w, La->kn, SRC_COPY, 4, kv, "layers.%d.attn.k_normed", l);
    }
    if (c->position == POS_ROPE) {
        item(w, La->qr, SRC_COPY, 4, q, "layers.%d.attn.rot_q", l);
        item(w, La->kr, SRC_COPY, 4, kv, "layers.%d.attn.rot_k", l);
    }
    if (!w->m->kv) { /* incremental decoding attends from the cache and keeps no score matrix */
        item(w, La->scores, SRC_SCORES, 4, att, "layers.%d.attn.scores", l);
        item(w, La->probs, SRC_COPY, 4, att, "layers.%d.attn.probs", l);
    }
    item(w, La->att, SRC_COPY, 4, q, "layers.%d.attn.heads", l);
}

static void ffn_items(walker *w, int l, const layer_acts *La) {
    const tlm_config *c = &w->m->cfg;
    int64_t btf[3] = {w->B, w->T, c->d_ff};
    if (c->ffn != FFN_GELU) item(w, La->gate, SRC_COPY, 3, btf, "layers.%d.ffn.gate", l);
    item(w, La->up, SRC_COPY, 3, btf, "layers.%d.ffn.up", l);
    item(w, La->hid, SRC_COPY, 3, btf, "layers.%d.ffn.hidden", l);
}

/* one sublayer from its input stream x to its output stream h, in the order the pass computes */
static void sublayer_items(walker *w, int l, int is_attn, const layer_acts *La, const float *x, const float *h) {
    const tlm_config *c = &w->m->cfg;
    const sublayer_acts *s = is_attn ? &La->attn_s : &La->ffn_s;
    const char *kind = is_attn ? "attn" : "ffn";
    int64_t btd[3] = {w->B, w->T, c->d_model};
    char prefix[64];
    snprintf(prefix, sizeof prefix, "layers.%d.%s_norm", l, kind);
    if (placement_has_input_norm(c->placement)) norm_items(w, prefix, x, s->in.y);
    if (is_attn) {
        attention_items(w, l, La);
        item(w, s->f, SRC_COPY, 3, btd, "layers.%d.attn.o_proj", l);
    } else {
        ffn_items(w, l, La);
        item(w, s->f, SRC_COPY, 3, btd, "layers.%d.ffn.down_proj", l);
    }
    const float *added = s->f;
    if (placement_has_output_norm(c->placement)) {
        char out_prefix[64];
        snprintf(out_prefix, sizeof out_prefix, "layers.%d.%s_out_norm", l, kind);
        norm_items(w, out_prefix, s->f, s->out.y);
        added = s->out.y;
    }
    item(w, added, SRC_COPY, 3, btd, "layers.%d.%s.out", l, kind);
    if (placement_has_post_norm(c->placement)) norm_items(w, prefix, s->sum, h);
    item(w, h, SRC_COPY, 3, btd, is_attn ? "layers.%d.resid_mid" : "layers.%d.resid_post", l);
}

/* residual-stream stage k (model_residual); NULL while listing */
static const float *res_at(const walker *w, int k) { return w->p ? model_residual(&w->m->acts, k) : NULL; }

static void walk_embed(walker *w) {
    int64_t btd[3] = {w->B, w->T, w->m->cfg.d_model};
    item(w, res_at(w, 0), SRC_COPY, 3, btd, "embed");
}

/* layer l, whose input stream is x */
static void walk_layer(walker *w, int l, const float *x) {
    static const layer_acts no_acts; /* while listing: every pointer NULL */
    const layer_acts *La = w->p ? &w->m->acts.layers[l] : &no_acts;
    int64_t btd[3] = {w->B, w->T, w->m->cfg.d_model};
    w->layer = l;
    item(w, x, SRC_COPY, 3, btd, "layers.%d.resid_pre", l);
    sublayer_items(w, l, 1, La, x, res_at(w, 2 * l + 1));
    sublayer_items(w, l, 0, La, res_at(w, 2 * l + 1), res_at(w, 2 * l + 2));
}

/* the final norm of stream h, and the logits */
static void walk_head(walker *w, const float *h) {
    const tlm_config *c = &w->m->cfg;
    int64_t btv[3] = {w->B, w->T, c->vocab_size};
    if (c->final_norm) norm_items(w, "final_norm", h, w->p ? w->m->acts.final.y : NULL);
    item(w, w->p ? w->m->acts.logits : NULL, SRC_COPY, 3, btv, "logits");
}

static void walk_forward(walker *w) {
    const int L = w->m->cfg.n_layers;
    walk_embed(w);
    for (int l = 0; l < L && !w->rc; l++) walk_layer(w, l, res_at(w, 2 * l));
    walk_head(w, res_at(w, 2 * L));
}

static void walk_backward(walker *w) {
    const tlm_model *m = w->m;
    const tlm_config *c = &m->cfg;
    const activations *A = &m->acts;
    const int listing = w->p == NULL;
    int64_t btd[3] = {w->B, w->T, c->d_model}, btv[3] = {w->B, w->T, c->vocab_size};
#define DRES(k) (listing ? NULL : model_residual_grad(A, k))
    item(w, listing ? NULL : A->dlogits, SRC_COPY, 3, btv, "grad.logits");
    for (int l = 0; l < c->n_layers; l++) {
        item(w, DRES(2 * l), SRC_COPY, 3, btd, "grad.layers.%d.resid_pre", l);
        item(w, DRES(2 * l + 1), SRC_COPY, 3, btd, "grad.layers.%d.resid_mid", l);
        item(w, DRES(2 * l + 2), SRC_COPY, 3, btd, "grad.layers.%d.resid_post", l);
    }
#undef DRES
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_info *t = &m->tensors[i];
        int64_t shape[2] = {t->shape[0], t->shape[1]};
        item(w, listing || !m->grad_mem ? NULL : model_grad(m, i), SRC_COPY, t->ndim, shape, "grad.%s", t->name);
    }
}

int probe_list(const tlm_model *m, int B, int T, int with_backward, probe_name_fn fn, void *ctx) {
    walker w = {.m = m, .B = B, .T = T, .fn = fn, .ctx = ctx};
    walk_forward(&w);
    if (with_backward && !w.rc) walk_backward(&w);
    return w.rc;
}

int probe_after_forward(tlm_probe *p, const tlm_model *m) {
    if (m->acts.lean) return tlm_error("probes need the model in training mode (every layer kept)");
    if (p->n_patterns == 0) return 0;
    walker w = {.m = m, .B = m->acts.B, .T = m->acts.T, .p = p};
    walk_forward(&w);
    return w.rc;
}

int probe_after_layer(tlm_probe *p, const tlm_model *m, int layer) {
    const tlm_config *c = &m->cfg;
    walker w = {.m = m, .B = m->acts.B, .T = m->acts.T, .p = p};
    const size_t Nd = (size_t)w.B * w.T * c->d_model;
    if (layer < -1 || layer > c->n_layers) return tlm_error("probe: no layer %d", layer);
    if (layer == c->n_layers) {
        walk_head(&w, res_at(&w, 2 * layer));
        return w.rc;
    }
    if (layer >= 0) {
        if (!p->prev || p->prev_n != Nd) return tlm_error("probe: layer %d recorded before the embedding", layer);
        walk_layer(&w, layer, p->prev);
    } else {
        walk_embed(&w);
        if (p->prev_n != Nd) {
            free(p->prev);
            p->prev_n = 0;
            if (!(p->prev = malloc(Nd * sizeof(float)))) return tlm_error("out of memory recording probes");
            p->prev_n = Nd;
        }
    }
    if (!w.rc) memcpy(p->prev, res_at(&w, 2 * layer + 2), Nd * sizeof(float)); /* the next layer's input */
    return w.rc;
}

int probe_after_backward(tlm_probe *p, const tlm_model *m) {
    if (p->n_patterns == 0) return 0;
    if (!m->grad_mem) return tlm_error("probe: the model has no gradients to record");
    walker w = {.m = m, .B = m->acts.B, .T = m->acts.T, .p = p};
    walk_backward(&w);
    return w.rc;
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
