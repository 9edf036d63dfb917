/* compare.c — runs of a model collected point by point, compared, and the convention search
 * (compare.h, docs/compare.md). */
#include "compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/npz.h"
#include "convert/checkpoint.h"
#include "convert/llama2c_export.h"
#include "model/model.h"
#include "tinylm.h"
#include "util/error.h"
#include "util/f16.h"
#include "model/context.h"

/* ---- runs ------------------------------------------------------------------------------------ */

static int ends_with(const char *s, const char *tail) {
    const size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}


static cmp_tensor *run_push(cmp_run *r, const char *name, int ndim, const int64_t *shape, int flags, int layer) {
    if (r->n == r->cap) {
        const int cap = r->cap ? 2 * r->cap : 64;
        cmp_tensor *t = realloc(r->t, sizeof *t * (size_t)cap);
        if (!t) return NULL;
        r->t = t, r->cap = cap;
    }
    cmp_tensor *t = &r->t[r->n];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim, t->flags = flags, t->layer = layer;
    t->numel = 1;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i], t->numel *= (size_t)shape[i];
    t->data = malloc(sizeof(float) * (t->numel ? t->numel : 1));
    if (!t->data) return NULL;
    r->n++;
    return t;
}

const cmp_tensor *cmp_run_find(const cmp_run *r, const char *name) {
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->t[i].name, name)) return &r->t[i];
    return NULL;
}

void cmp_run_free(cmp_run *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) free(r->t[i].data);
    free(r->t);
    memset(r, 0, sizeof *r);
}

/* keys of layer l that query i does not see: -inf (an attention map [B, H, T, T]) */
static void mask_map(const tlm_config *c, int l, float *x, const int64_t *shape) {
    const int64_t maps = shape[0] * shape[1], T = shape[2];
    for (int64_t k = 0; k < maps; k++)
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < T; j++)
                if (!model_key_visible(c, l, (int)i, (int)j)) x[(k * T + i) * T + j] = -INFINITY;
}

/* ---- the norm variants (CMP_NORM_*), recomputed as the pass fires each norm ------------------ */

static float bf16_round(float x) { return tlm_bf16_to_f32(tlm_f32_to_bf16(x)); }

/* y = norm(x) of rows [rows, cols] under variant v; scale[r] = the row's denominator (or NULL) */
static void variant_norm(unsigned v, double eps, int rms, float off, float *y, float *scale, const float *x,
                         const float *w, const float *b, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * cols;
        float *yr = y + (size_t)r * cols;
        double mean = 0.0, ss = 0.0;
        if (!rms) {
            for (int i = 0; i < cols; i++) mean += xr[i];
            mean /= cols;
        }
        for (int i = 0; i < cols; i++) ss += (xr[i] - mean) * (xr[i] - mean);
        const double var = ss / cols;
        double rinv;
        if (v == CMP_NORM_EPS_OUTSIDE) {
            rinv = 1.0 / (sqrt(var) + eps);
        } else { /* CMP_NORM_STATS_BF16: as torch computes them on bf16 tensors */
            const float v16 = bf16_round((float)var), s16 = bf16_round((float)((double)v16 + eps));
            rinv = bf16_round((float)(1.0 / sqrt((double)s16)));
        }
        for (int i = 0; i < cols; i++)
            yr[i] = (float)(((double)xr[i] - mean) * rinv) * (off + w[i]) + (b ? b[i] : 0.0f);
        if (scale) scale[r] = (float)(1.0 / rinv);
    }
}

typedef struct {
    const tlm_model *m;
    cmp_run *run;
    int *index; /* [point count]: the run's tensor of each point id, -1 */
    unsigned variant;
    int failed;
    char why[200];
} collector;

static const cmp_tensor *recorded(const collector *co, int id) {
    return co->index[id] >= 0 ? &co->run->t[co->index[id]] : NULL;
}

/* with a norm variant: when id is a norm's output, its values (in place) and its scale's record
 * recomputed from the recorded input. 0, or -1 when the input was not recorded. */
static int variant_rewrite(collector *co, int id, float *data, int B, int T) {
    const tlm_model *m = co->m;
    const tlm_config *c = &m->cfg;
    int l, k;
    if (!model_point_of(c, id, &l, &k)) return 0; /* (not a point: nothing to recompute) */
    const norm_params *np = NULL;
    int in_kind = -1, scale_kind = -1, in_layer = l;
    const layer_params *P = l >= 0 ? &m->p.layers[l] : NULL;
    const int out_norm = placement_has_output_norm(c->placement), post = placement_has_post_norm(c->placement);
    switch (k) {
    case PT_LN1_NORMALIZED: np = &P->attn_norm, in_kind = PT_RESID_PRE, scale_kind = PT_LN1_SCALE; break;
    case PT_LN2_NORMALIZED: np = &P->ffn_norm, in_kind = PT_RESID_MID, scale_kind = PT_LN2_SCALE; break;
    case PT_ATTN_OUT:
        if (out_norm) np = &P->attn_out_norm, in_kind = PT_ATTN_RAW, scale_kind = PT_LN1_OUT_SCALE;
        break;
    case PT_MLP_OUT:
        if (out_norm) np = &P->ffn_out_norm, in_kind = PT_MLP_RAW, scale_kind = PT_LN2_OUT_SCALE;
        break;
    case PT_RESID_MID:
        if (post) np = &P->attn_norm, in_kind = PT_ATTN_SUM, scale_kind = PT_LN1_POST_SCALE;
        break;
    case PT_RESID_POST:
        if (post) np = &P->ffn_norm, in_kind = PT_MLP_SUM, scale_kind = PT_LN2_POST_SCALE;
        break;
    case PT_FINAL_NORMALIZED:
        np = &m->p.final_norm, in_kind = PT_RESID_POST, scale_kind = PT_FINAL_SCALE, in_layer = c->n_layers - 1;
        break;
    case PT_Q_NORMED:
    case PT_K_NORMED: {
        const cmp_tensor *in = recorded(co, model_point_id(c, l, k == PT_Q_NORMED ? PT_Q : PT_K));
        if (!in) return -1;
        int rows, cols;
        model_qk_norm_shape(c, l, B * T, k == PT_Q_NORMED ? c->n_heads : config_layer_kv_heads(c, l), &rows, &cols);
        variant_norm(co->variant, c->norm_eps, 1, config_norm_offset(c), data, NULL, in->data,
                     k == PT_Q_NORMED ? P->q_norm : P->k_norm, NULL, rows, cols);
        return 0;
    }
    default: break;
    }
    if (!np) return 0;
    const cmp_tensor *in = recorded(co, model_point_id(c, in_layer, in_kind));
    if (!in) return -1;
    const int rows = B * T, cols = c->d_model;
    float *scale = malloc(sizeof(float) * (size_t)rows);
    if (!scale) return -1;
    variant_norm(co->variant, c->norm_eps, c->norm != NORM_LAYERNORM, config_norm_offset(c), data, scale, in->data,
                 np->w, c->norm == NORM_LAYERNORM ? np->b : NULL, rows, cols);
    const int sid = model_point_id(c, l, scale_kind);
    if (co->index[sid] >= 0) memcpy(co->run->t[co->index[sid]].data, scale, sizeof(float) * (size_t)rows);
    free(scale);
    return 0;
}

static int collect_at_point(void *user, const tlm_context *run, int id, float *data, int B, int T, int is_grad) {
    const tlm_model *m = run->m;
    collector *co = user;
    if (is_grad || co->failed) return 0;
    const tlm_config *c = &m->cfg;
    char name[CMP_NAME];
    int64_t shape[5];
    int flags;
    int nd = model_point_describe(c, id, B, T, name, sizeof name, shape, &flags);
    if (!nd && id == model_point_id(c, -1, PT_LOGITS)) {
        snprintf(name, sizeof name, "logits");
        shape[0] = B, shape[1] = T, shape[2] = c->vocab_size, nd = 3, flags = 0;
    }
    if (!nd) return 0;
    if (co->variant && variant_rewrite(co, id, data, B, T)) {
        co->failed = 1;
        snprintf(co->why, sizeof co->why, "compare: the norm variant at %s found no recorded input (or no memory)", name);
        return -1;
    }
    int l, k;
    if (!model_point_of(c, id, &l, &k)) return 0; /* (described above: in range) */
    cmp_tensor *t = run_push(co->run, name, nd, shape, flags, l);
    if (!t) {
        co->failed = 1;
        snprintf(co->why, sizeof co->why, "compare: out of memory keeping %s", name);
        return -1;
    }
    if (flags & TLM_HOOK_RSTD) { /* (TransformerLens' hook_scale: the norm's denominator) */
        for (size_t i = 0; i < t->numel; i++) t->data[i] = 1.0f / data[i];
    } else if (flags & TLM_HOOK_MASKED) {
        memcpy(t->data, data, sizeof(float) * t->numel);
        mask_map(c, l, t->data, shape);
    } else {
        memcpy(t->data, data, sizeof(float) * t->numel);
    }
    co->index[id] = co->run->n - 1;
    return 0;
}

int cmp_run_model(tlm_model *m, const int *tokens, int T, unsigned norm_variant, cmp_run *out) {
    memset(out, 0, sizeof *out);
    const int n = model_point_count(&m->cfg);
    collector co = {.m = m, .run = out, .variant = norm_variant};
    co.index = malloc(sizeof(int) * (size_t)n);
    if (!co.index) return tlm_error("compare: out of memory");
    for (int i = 0; i < n; i++) co.index[i] = -1;
    model_observer obs = {.at_point = collect_at_point, .user = &co};
    int rc = model_observe(m, &obs);
    if (!rc) {
        model_set_mode(m, MODEL_INFER);
        rc = model_forward(m, tokens, NULL, 1, T, NULL);
        model_unobserve(m, &obs);
    }
    free(co.index);
    if (co.failed) rc = tlm_error("%s", co.why);
    if (rc) cmp_run_free(out);
    return rc ? -1 : 0;
}

/* ---- a run from an .npz ---------------------------------------------------------------------- */

static void shape_text(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t u = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && u < cap; i++) u += (size_t)snprintf(buf + u, cap - u, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (u < cap) snprintf(buf + u, cap - u, "]");
}

static int name_push(char (**list)[CMP_NAME], int *n, const char *name) {
    char(*l)[CMP_NAME] = realloc(*list, sizeof *l * (size_t)(*n + 1));
    if (!l) return tlm_error("compare: out of memory");
    *list = l;
    snprintf(l[*n], CMP_NAME, "%s", name);
    (*n)++;
    return 0;
}

/* array a (its header is enough) as the reference of point t: floating point, of t's shape or t's
 * without the batch of 1 */
static int check_point_array(const char *label, const cmp_tensor *t, const tlm_npy *a) {
    char want[160], got[160];
    shape_text(want, sizeof want, t->ndim, t->shape);
    shape_text(got, sizeof got, a->ndim, a->shape);
    if (a->dtype != TLM_DT_F32)
        return tlm_error("%s: key '%s' holds integers; activations must be floating point (float32 or float64)",
                         label, t->name);
    int same = a->ndim == t->ndim, unbatched = a->ndim == t->ndim - 1 && t->shape[0] == 1;
    for (int d = 0; d < a->ndim && (same || unbatched); d++) {
        if (same && a->shape[d] != t->shape[d]) same = 0;
        if (unbatched && a->shape[d] != t->shape[d + 1]) unbatched = 0;
    }
    if (!same && !unbatched) {
        char nobatch[160];
        shape_text(nobatch, sizeof nobatch, t->ndim - 1, t->shape + 1);
        return tlm_error("%s: key '%s' has shape %s; A's point has shape %s (or %s without the batch)", label, t->name,
                         got, want, nobatch);
    }
    return 0;
}

int cmp_npz_want(void *ctx, const char *key, const tlm_npy *header, const char *where) {
    (void)where;
    const cmp_npz_ask *ask = ctx;
    const cmp_tensor *t = cmp_run_find(ask->model, key);
    if (!t) return 0; /* (not a point of A: listed as unknown, never inflated) */
    return check_point_array(ask->label, t, header) ? -1 : 1;
}

int cmp_run_npz(const struct tlm_npz *z, const char *label, const cmp_run *model, const tlm_model *m, cmp_run *out,
                char (**missing)[CMP_NAME], int *n_missing, char (**unknown)[CMP_NAME], int *n_unknown) {
    memset(out, 0, sizeof *out);
    *missing = NULL, *unknown = NULL, *n_missing = 0, *n_unknown = 0;
    int rc = 0;
    for (int i = 0; i < model->n && !rc; i++) {
        const cmp_tensor *t = &model->t[i];
        const tlm_npy *a = tlm_npz_find(z, t->name);
        if (!a) {
            rc = name_push(missing, n_missing, t->name);
            continue;
        }
        if (check_point_array(label, t, a)) {
            rc = -1;
            break;
        }
        if (!a->data) {
            rc = tlm_error("%s: key '%s' was not read (internal error: read the .npz with cmp_npz_want)", label, t->name);
            break;
        }
        cmp_tensor *c = run_push(out, t->name, t->ndim, t->shape, t->flags, t->layer);
        if (!c) {
            rc = tlm_error("compare: out of memory");
            break;
        }
        memcpy(c->data, a->data, sizeof(float) * c->numel);
        if (c->flags & TLM_HOOK_MASKED) mask_map(&m->cfg, c->layer, c->data, c->shape);
    }
    for (int i = 0; z && i < z->n && !rc; i++)
        if (strcmp(z->e[i].key, "tokens") && !cmp_run_find(model, z->e[i].key))
            rc = name_push(unknown, n_unknown, z->e[i].key);
    if (rc) {
        cmp_run_free(out);
        free(*missing), free(*unknown);
        *missing = NULL, *unknown = NULL, *n_missing = 0, *n_unknown = 0;
        return -1;
    }
    return 0;
}

/* ---- comparing two runs ---------------------------------------------------------------------- */

static int is_masked(float x) { return x == -INFINITY || x <= -1e30f; }

/* the token position of flat index i of a point of shape [B, T, ...] or a map [B, H, T, T] */
static int position_of(const cmp_tensor *t, size_t i, int is_map) {
    if (is_map) return (int)((i / (size_t)t->shape[3]) % (size_t)t->shape[2]);
    const size_t inner = t->numel / (size_t)(t->shape[0] * t->shape[1]);
    return (int)((i / (inner ? inner : 1)) % (size_t)t->shape[1]);
}

static void compare_point(const cmp_tensor *a, const cmp_tensor *b, int ref_b, double tol, cmp_point *p) {
    const int masked = (a->flags | b->flags) & TLM_HOOK_MASKED;
    double max_abs = 0.0, ref_max = 0.0, dot = 0.0, na = 0.0, nb = 0.0;
    size_t at = 0;
    int any = 0;
    for (size_t i = 0; i < a->numel; i++) {
        const float x = a->data[i], y = b->data[i];
        if (masked) {
            const int mx = is_masked(x), my = is_masked(y);
            if (mx && my) continue;
            if (mx != my) {
                p->mask_mismatch++;
                continue;
            }
        }
        if (!isfinite(x) || !isfinite(y)) {
            p->nonfinite++;
            continue;
        }
        const double d = fabs((double)x - (double)y), r = fabs((double)(ref_b ? y : x));
        if (d > max_abs || !any) max_abs = d, at = i, any = 1;
        if (r > ref_max) ref_max = r;
        dot += (double)x * y, na += (double)x * x, nb += (double)y * y;
    }
    p->max_abs = max_abs, p->ref_max = ref_max;
    p->max_rel = ref_max > 0.0 ? max_abs / ref_max : max_abs > 0.0 ? INFINITY : 0.0;
    p->cosine = na == 0.0 && nb == 0.0 ? 1.0 : na == 0.0 || nb == 0.0 ? 0.0 : dot / sqrt(na * nb);
    const int is_map = ends_with(a->name, "hook_attn_scores") || ends_with(a->name, "hook_pattern");
    p->pos = any && max_abs > 0.0 ? position_of(a, at, is_map) : -1;
    p->diverged = p->max_rel > tol || p->mask_mismatch || p->nonfinite;
}

/* KL(a || b) per position of logits [1, T, V], top-1 agreement */
static void compare_output(const cmp_tensor *a, const cmp_tensor *b, cmp_result *r) {
    const int T = (int)a->shape[1], V = (int)a->shape[2];
    double sum = 0.0;
    r->kl_max = 0.0, r->kl_max_pos = 0, r->top1_same = 0, r->top1_n = T;
    for (int t = 0; t < T; t++) {
        const float *x = a->data + (size_t)t * V, *y = b->data + (size_t)t * V;
        double mx = -INFINITY, my = -INFINITY;
        int ax = 0, ay = 0;
        for (int v = 0; v < V; v++) {
            if (x[v] > mx) mx = x[v], ax = v;
            if (y[v] > my) my = y[v], ay = v;
        }
        double zx = 0.0, zy = 0.0;
        for (int v = 0; v < V; v++) zx += exp(x[v] - mx), zy += exp(y[v] - my);
        const double lx = mx + log(zx), ly = my + log(zy);
        double kl = 0.0;
        for (int v = 0; v < V; v++) {
            const double px = exp(x[v] - lx);
            if (px > 0.0) kl += px * ((x[v] - lx) - (y[v] - ly));
        }
        if (!(kl >= 0.0)) kl = isnan(kl) ? INFINITY : 0.0; /* (rounding below 0; NaN logits: infinitely apart) */
        sum += kl;
        if (kl > r->kl_max || t == 0) r->kl_max = kl, r->kl_max_pos = t;
        r->top1_same += ax == ay;
    }
    r->kl_mean = sum / T;
}

int cmp_compare(const cmp_run *a, const cmp_run *b, int ref_b, double tol, cmp_result *out) {
    memset(out, 0, sizeof *out);
    out->first = -1, out->tol = tol, out->ref_b = ref_b;
    out->p = calloc((size_t)(a->n ? a->n : 1), sizeof *out->p);
    if (!out->p) return tlm_error("compare: out of memory");
    int rc = 0;
    for (int i = 0; i < a->n && !rc; i++) {
        const cmp_tensor *x = &a->t[i], *y = cmp_run_find(b, x->name);
        if (!y) {
            rc = name_push(&out->only_a, &out->n_only_a, x->name);
            continue;
        }
        if (x->numel != y->numel || x->ndim != y->ndim || memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->ndim)) {
            char sa[160], sb[160];
            shape_text(sa, sizeof sa, x->ndim, x->shape), shape_text(sb, sizeof sb, y->ndim, y->shape);
            rc = tlm_error("compare: point %s has shape %s in A and %s in B", x->name, sa, sb);
            break;
        }
        cmp_point *p = &out->p[out->n++];
        snprintf(p->name, sizeof p->name, "%s", x->name);
        p->ndim = x->ndim, p->layer = x->layer;
        memcpy(p->shape, x->shape, sizeof p->shape);
        compare_point(x, y, ref_b, tol, p);
        if (p->diverged && out->first < 0) out->first = out->n - 1;
        if (p->max_rel > out->worst_rel || isnan(p->max_rel)) out->worst_rel = p->max_rel;
        if (!strcmp(x->name, "logits")) {
            out->has_output = 1;
            compare_output(x, y, out);
        }
    }
    for (int i = 0; i < b->n && !rc; i++)
        if (!cmp_run_find(a, b->t[i].name)) rc = name_push(&out->only_b, &out->n_only_b, b->t[i].name);
    if (rc) cmp_result_free(out);
    return rc ? -1 : 0;
}

void cmp_result_free(cmp_result *r) {
    if (!r) return;
    free(r->p), free(r->only_a), free(r->only_b);
    memset(r, 0, sizeof *r);
}

/* ---- the convention search ------------------------------------------------------------------- */

/* a copy of src as f32 under config c: each tensor of c's table from src's of the same name and
 * shape; the rest are left zero and listed in *unfilled (indices into the copy's table) */
static tlm_model *rebuild(const tlm_model *src, const tlm_config *c, int *unfilled, int *n_unfilled) {
    tlm_model *n = model_create(c);
    if (!n) return NULL;
    *n_unfilled = 0;
    for (int i = 0; i < n->n_tensors; i++) {
        const tensor_info *t = &n->tensors[i], *s = model_find_tensor(src, t->name);
        if (!s || s->ndim != t->ndim || s->shape[0] != t->shape[0] || (t->ndim == 2 && s->shape[1] != t->shape[1])) {
            unfilled[(*n_unfilled)++] = i;
            continue;
        }
        model_tensor_f32(src, (int)(s - src->tensors), 0, t->ndim == 2 ? t->shape[0] : 1, model_param(n, i));
    }
    return n;
}

/* "{C}" and "{R}" in tmpl replaced by the candidate's and the reference's labels */
static void fill_labels(char *out, size_t cap, const char *tmpl, const char *cand, const char *ref) {
    size_t u = 0;
    for (const char *p = tmpl; *p && u + 1 < cap; p++) {
        if (p[0] == '{' && (p[1] == 'C' || p[1] == 'R') && p[2] == '}') {
            u += (size_t)snprintf(out + u, cap - u, "%s", p[1] == 'C' ? cand : ref);
            if (u >= cap) u = cap - 1;
            p += 2;
        } else {
            out[u++] = *p;
        }
    }
    out[u] = '\0';
}

typedef struct {
    tlm_model *model; /* what to run: the candidate itself, or a rebuilt copy (owned) */
    int owned;
    unsigned norm_variant;
} variant;

/* the q/k rows (weights, biases, QK-norm weights over the whole projection) of every layer of n
 * permuted within each head: to halves (from pairs) or to pairs (from halves) */
static int permute_rope(tlm_model *n, int to_halves) {
    const tlm_config *c = &n->cfg;
    for (int i = 0; i < n->n_tensors; i++) {
        const tensor_info *t = &n->tensors[i];
        const int is_q = strstr(t->name, ".attn.q_proj.") || ends_with(t->name, ".attn.q_norm.weight");
        const int is_k = strstr(t->name, ".attn.k_proj.") || ends_with(t->name, ".attn.k_norm.weight");
        if (!is_q && !is_k) continue;
        const int hd = config_layer_head_dim(c, atoi(t->name + strlen("layers."))); /* (Gemma 4: per layer type) */
        const int rows = t->shape[0], cols = t->ndim == 2 ? t->shape[1] : 1;
        const int heads = rows / hd;
        float *tmp = malloc(sizeof(float) * t->numel);
        if (!tmp) return tlm_error("compare: out of memory");
        memcpy(tmp, model_param(n, i), sizeof(float) * t->numel);
        if (to_halves)
            llama2c_rows_to_halves(model_param(n, i), tmp, heads, hd, cols);
        else
            llama2c_rows_to_pairs(model_param(n, i), tmp, heads, hd, cols);
        free(tmp);
    }
    return 0;
}

/* the candidate under config c (rebuilt as f32); tensors c has that the candidate lacks (or holds
 * in another shape) filled by kind: lm_head from ref's head, q_norm/k_norm tiled or cut to the new
 * shape. NULL with why set when it cannot be built. */
static tlm_model *variant_model(const tlm_model *cand, const tlm_config *c, const tlm_model *ref, char *why,
                                size_t why_cap) {
    if (config_validate(c, "the changed config")) {
        snprintf(why, why_cap, "%s", tlm_last_error());
        return NULL;
    }
    int *unfilled = malloc(sizeof(int) * (size_t)(c->n_layers * 32 + 8));
    int n_unfilled = 0;
    tlm_model *n = unfilled ? rebuild(cand, c, unfilled, &n_unfilled) : NULL;
    if (!n) {
        snprintf(why, why_cap, "%s", unfilled ? tlm_last_error() : "out of memory");
        free(unfilled);
        return NULL;
    }
    for (int k = 0; k < n_unfilled && n; k++) {
        const tensor_info *t = &n->tensors[unfilled[k]];
        float *dst = model_param(n, unfilled[k]);
        if (!strcmp(t->name, "lm_head.weight") && ref) {
            const tensor_info *h = model_find_tensor(ref, "lm_head.weight");
            if (h && h->shape[0] == t->shape[0] && h->shape[1] == t->shape[1]) {
                model_tensor_f32(ref, (int)(h - ref->tensors), 0, t->shape[0], dst);
                continue;
            }
        }
        const tensor_info *s = model_find_tensor(cand, t->name);
        if (s && (ends_with(t->name, ".q_norm.weight") || ends_with(t->name, ".k_norm.weight")) && t->ndim == 1) {
            const int from = s->shape[0], to = t->shape[0];
            float *w = malloc(sizeof(float) * (size_t)from);
            if (!w) break;
            model_tensor_f32(cand, (int)(s - cand->tensors), 0, 1, w);
            int ok = 1;
            if (to > from && to % from == 0) { /* per head -> over all heads: the head's gains, each head */
                for (int j = 0; j < to; j++) dst[j] = w[j % from];
            } else if (to < from && from % to == 0) { /* over all heads -> per head: only when every head's are one */
                for (int j = 0; j < from && ok; j++) ok = w[j] == w[j % to];
                for (int j = 0; j < to && ok; j++) dst[j] = w[j];
                if (!ok) snprintf(why, why_cap, "%s differs from head to head: it is no per-head norm's weight", t->name);
            } else {
                ok = 0, snprintf(why, why_cap, "%s: no way from %d to %d values", t->name, from, to);
            }
            free(w);
            if (ok) continue;
            model_free(n), n = NULL;
            break;
        }
        snprintf(why, why_cap, "the changed model needs %s, which %s", t->name,
                 !strcmp(t->name, "lm_head.weight") ? "neither side has" : "the model does not have");
        model_free(n), n = NULL;
    }
    free(unfilled);
    return n;
}

/* builds trial k's variant of cand (or says why it does not apply); the trial's texts are set */
static int make_trial(int k, tlm_model *cand, const tlm_model *ref, cmp_trial *tr, variant *v, const char *C,
                      const char *R) {
    const tlm_config *cc = &cand->cfg;
    tlm_config c = *cc;
    const char *change = NULL, *cause = NULL;
    char buf[200] = "";
    memset(v, 0, sizeof *v);
    tr->tried = 0;
    int rebuild_it = 0, perm = 0; /* perm: 1 to halves, 2 to pairs */
    switch (k) {
    case 0:
        snprintf(tr->id, sizeof tr->id, "norm_offset");
        /* (worded from both sides' conventions: with the same one on both sides, the stored weights differ) */
        if (cc->norm == NORM_RMSNORM) {
            c.norm = NORM_RMSNORM_1P, rebuild_it = 1;
            change = "{C}'s RMSNorm weights (every norm, QK-norm included) applied as 1 + w instead of w";
            cause = ref && ref->cfg.norm == NORM_RMSNORM
                        ? "{C} and {R} both read the RMSNorm weights as w, but {C}'s stored weights are Gemma's offsets "
                          "(the gain minus 1) where {R}'s are the gains themselves; read as 1 + w, {C} matches {R}"
                        : "{C} reads the RMSNorm weights as w where {R} applies them as 1 + w (Gemma's convention: the "
                          "checkpoint stores w, the gain is 1 + w); read as 1 + w, {C} matches {R}";
        } else if (cc->norm == NORM_RMSNORM_1P) {
            c.norm = NORM_RMSNORM, rebuild_it = 1;
            change = "{C}'s RMSNorm weights (every norm, QK-norm included) applied as w instead of 1 + w";
            cause = ref && ref->cfg.norm == NORM_RMSNORM_1P
                        ? "{C} and {R} both apply the RMSNorm weights as 1 + w, but {C}'s stored weights already hold "
                          "the 1 (the gains 1 + w, where {R} stores the offsets w): {C} adds the 1 twice; read as w, {C} "
                          "matches {R}"
                    : ref ? "{C} applies the RMSNorm weights as 1 + w where {R} reads them as w (the stored weights "
                            "already hold the 1, or the model is no Gemma); read as w, {C} matches {R}"
                          : "{C} applies the RMSNorm weights as 1 + w where the reference's norms come out as if they "
                            "read them as w (the stored weights already hold the 1, or the model is no Gemma); read as "
                            "w, {C} matches {R}";
        } else {
            snprintf(tr->note, sizeof tr->note, "the norms are %s, not RMSNorm", norm_type_name(cc->norm));
        }
        break;
    case 1:
    case 2:
        snprintf(tr->id, sizeof tr->id, k == 1 ? "norm_eps_outside" : "norm_stats_bf16");
        if (ref) {
            snprintf(tr->note, sizeof tr->note,
                     "both sides are tinylm models, which compute eps inside the square root and statistics in f32");
        } else if (cc->norm == NORM_DYT) {
            snprintf(tr->note, sizeof tr->note, "DyT norms have no statistics");
        } else if (k == 1) {
            v->norm_variant = CMP_NORM_EPS_OUTSIDE;
            change = "every norm of {C} computed with eps outside the square root, x / (sqrt(mean(x^2)) + eps)";
            cause = "{R} adds eps outside the square root, x / (sqrt(mean(x^2)) + eps) (sqrt(var) + eps for LayerNorm), "
                    "where {C} adds it inside, x / sqrt(mean(x^2) + eps); with eps outside, {C} matches {R}";
        } else {
            v->norm_variant = CMP_NORM_STATS_BF16;
            change = "every norm of {C} with its statistics rounded to bfloat16 (mean of squares, + eps, 1/sqrt)";
            cause = "{R} computes the norm statistics in bfloat16, the weights' dtype (the mean of squares, + eps and "
                    "1/sqrt each rounded to bf16), where {C} computes them in float32; rounded so, {C} matches {R}";
        }
        break;
    case 3:
    case 4:
        snprintf(tr->id, sizeof tr->id, k == 3 ? "rope_pairs_to_halves" : "rope_halves_to_pairs");
        if (cc->position != POS_ROPE) {
            snprintf(tr->note, sizeof tr->note, "the model has no RoPE");
        } else if (k == 4 && cc->head_dim <= 4) {
            snprintf(tr->note, sizeof tr->note, "with head_dim %d the two permutations are one", cc->head_dim);
        } else if (k == 3) {
            rebuild_it = 1, perm = 1;
            change = "{C}'s q and k rows permuted within each head from interleaved pairs (2i, 2i+1) to halves (i, i + "
                     "head_dim/2)";
            cause = "{C}'s q/k weights are in interleaved-pair order (dimension 2i rotates with 2i+1: Meta's, "
                    "llama.cpp's and llama2.c's layout) where {R} rotates halves (i with i + head_dim/2: Hugging "
                    "Face's); permuted pairs -> halves, {C} matches {R}";
        } else {
            rebuild_it = 1, perm = 2;
            change = "{C}'s q and k rows permuted within each head from halves (i, i + head_dim/2) to interleaved pairs";
            cause = "{C}'s q/k weights were permuted pairs -> halves once too often (the rows were already in "
                    "rotate-half order, or {R}'s are in pair order); permuted halves -> pairs, {C} matches {R}";
        }
        break;
    case 5: {
        snprintf(tr->id, sizeof tr->id, "norm_placement");
        norm_placement to = cc->placement == PLACE_PRE ? PLACE_POST : cc->placement == PLACE_POST ? PLACE_PRE : cc->placement;
        if (ref && ref->cfg.placement != cc->placement) to = ref->cfg.placement;
        if (to == cc->placement) {
            snprintf(tr->note, sizeof tr->note, "placement %s: only Pre-Norm <-> Post-Norm is tried",
                     placement_name(cc->placement));
        } else {
            c.placement = to, rebuild_it = 1;
            snprintf(buf, sizeof buf, "{C}'s norm placement changed from %s to %s", placement_name(cc->placement),
                     placement_name(to));
            change = buf;
            cause = to == PLACE_PRE
                        ? "{C} normalizes after each sublayer (Post-Norm: N(x + F(x))) where {R} normalizes before it "
                          "(Pre-Norm: x + F(N(x))); with the same norm weights before the sublayers, {C} matches {R}"
                    : to == PLACE_POST
                        ? "{C} normalizes before each sublayer (Pre-Norm: x + F(N(x))) where {R} normalizes after it "
                          "(Post-Norm: N(x + F(x))); with the same norm weights after the sublayers, {C} matches {R}"
                        : "{C}'s norms sit elsewhere in the block than {R}'s; placed as {R}'s, {C} matches {R}";
        }
        break;
    }
    case 6:
    case 7: {
        const int attn = k == 6;
        snprintf(tr->id, sizeof tr->id, attn ? "attn_softcap" : "final_softcap");
        const float have = attn ? cc->attn_softcap : cc->final_softcap;
        float other = ref ? (attn ? ref->cfg.attn_softcap : ref->cfg.final_softcap) : 0.0f;
        float to = have > 0.0f ? (other > 0.0f && other != have ? other : 0.0f)
                               : (other > 0.0f ? other : ref ? 0.0f : attn ? 50.0f : 30.0f);
        if (to == have) {
            snprintf(tr->note, sizeof tr->note, "neither side soft-caps the %s", attn ? "attention logits" : "logits");
            break;
        }
        if (attn) c.attn_softcap = to;
        else c.final_softcap = to;
        rebuild_it = 1;
        if (to > 0.0f && have > 0.0f) {
            snprintf(buf, sizeof buf, "{C}'s %s soft-cap changed from %g to %g", attn ? "attention" : "final", have, to);
            cause = attn ? "{C} soft-caps the attention logits at another value than {R}; with {R}'s, {C} matches {R}"
                         : "{C} soft-caps the logits at another value than {R}; with {R}'s, {C} matches {R}";
        } else if (to > 0.0f) {
            snprintf(buf, sizeof buf, "{C} given a%s soft-cap of %g (cap * tanh(x / cap))%s",
                     attn ? "n attention-logit" : " final-logit", to, ref ? "" : ", Gemma 2's value");
            cause = attn ? "{R} soft-caps the attention logits (cap * tanh(s / cap), before the softmax) and {C} does "
                           "not (attn_logit_softcapping lost on conversion); capped, {C} matches {R}"
                         : "{R} soft-caps the final logits (cap * tanh(z / cap)) and {C} does not "
                           "(final_logit_softcapping lost on conversion); capped, {C} matches {R}";
        } else {
            snprintf(buf, sizeof buf, "{C}'s %s soft-cap (%g) removed", attn ? "attention" : "final", have);
            cause = attn ? "{C} soft-caps the attention logits where {R} does not; without the cap, {C} matches {R}"
                         : "{C} soft-caps the final logits where {R} does not; without the cap, {C} matches {R}";
        }
        change = buf;
        break;
    }
    case 8:
        snprintf(tr->id, sizeof tr->id, "tied_head");
        if (!cc->tie_embeddings) {
            c.tie_embeddings = 1, rebuild_it = 1;
            change = "{C}'s LM head tied to its token embedding (its own lm_head dropped)";
            cause = "{C} has an LM head of its own where {R} ties the head to the token embedding "
                    "(tie_word_embeddings lost on conversion, the head left as some other matrix); tied, {C} matches {R}";
        } else if (ref && !ref->cfg.tie_embeddings) {
            c.tie_embeddings = 0, rebuild_it = 1;
            change = "{C}'s LM head untied: {R}'s lm_head instead of {C}'s embedding";
            cause = "{C} ties the LM head to the token embedding where {R} has a head of its own (tie_word_embeddings "
                    "read wrong, the stored lm_head dropped); with {R}'s head, {C} matches {R}";
        } else {
            snprintf(tr->note, sizeof tr->note, "%s", ref ? "both heads are tied" : "the head is tied, and an untied "
                                                                                    "one needs weights the file lacks");
        }
        break;
    case 9:
        snprintf(tr->id, sizeof tr->id, "qk_norm_scope");
        if (cc->qk_norm == QK_NORM_HEAD) {
            c.qk_norm = QK_NORM_FULL, rebuild_it = 1;
            change = "{C}'s QK-norm over all heads at once (its per-head gains repeated for every head)";
            cause = "{C} normalizes q and k per head (over head_dim: Qwen 3, Gemma 3) where {R} normalizes them over "
                    "all heads at once (OLMo 2); over all heads, {C} matches {R}";
        } else if (cc->qk_norm == QK_NORM_FULL) {
            c.qk_norm = QK_NORM_HEAD, rebuild_it = 1;
            change = "{C}'s QK-norm per head (over head_dim), with the one head's gains";
            cause = "{C} normalizes q and k over all heads at once (OLMo 2) where {R} normalizes each head on its own "
                    "(Qwen 3, Gemma 3); per head, {C} matches {R}";
        } else {
            snprintf(tr->note, sizeof tr->note, "the model has no QK-norm");
        }
        break;
    default: return 0;
    }
    if (!change) return 0;
    fill_labels(tr->change, sizeof tr->change, change, C, R);
    fill_labels(tr->cause, sizeof tr->cause, cause, C, R);
    if (!rebuild_it) {
        v->model = cand, tr->tried = 1;
        return 0;
    }
    char why[200] = "";
    v->model = variant_model(cand, &c, ref, why, sizeof why);
    if (!v->model) {
        snprintf(tr->note, sizeof tr->note, "%s", why[0] ? why : "could not be built");
        tr->cause[0] = '\0';
        return 0;
    }
    v->owned = 1;
    if (perm && permute_rope(v->model, perm == 1)) {
        model_free(v->model);
        memset(v, 0, sizeof *v);
        return -1;
    }
    tr->tried = 1;
    return 0;
}

enum { N_TRIALS = 10 };

int cmp_search_conventions(tlm_model *cand, const tlm_model *ref_model, const cmp_run *ref_run, int cand_is_a,
                           const int *tokens, int T, double tol, cmp_search *out) {
    memset(out, 0, sizeof *out);
    out->cause = -1;
    snprintf(out->cand, sizeof out->cand, "%s", cand_is_a ? "A" : "B");
    snprintf(out->ref, sizeof out->ref, "%s", cand_is_a ? "B" : "A");
    for (int k = 0; k < N_TRIALS; k++) {
        cmp_trial *tr = &out->t[out->n++];
        variant v;
        if (make_trial(k, cand, ref_model, tr, &v, out->cand, out->ref)) return -1;
        if (!tr->tried) continue;
        cmp_run run;
        cmp_result res;
        int rc = cmp_run_model(v.model, tokens, T, v.norm_variant, &run);
        if (!rc) {
            rc = cand_is_a ? cmp_compare(&run, ref_run, 1, tol, &res) : cmp_compare(ref_run, &run, 0, tol, &res);
            cmp_run_free(&run);
        }
        if (v.owned) model_free(v.model);
        if (rc) {
            /* (a changed model that does not run — a shape its pass refuses — is no cause) */
            tr->tried = 0, tr->cause[0] = '\0';
            snprintf(tr->note, sizeof tr->note, "the changed model did not run: %.150s", tlm_last_error());
            continue;
        }
        tr->matched = res.first < 0;
        if (res.first >= 0) {
            snprintf(tr->first, sizeof tr->first, "%s", res.p[res.first].name);
            tr->first_rel = res.p[res.first].max_rel;
        }
        tr->worst_rel = res.worst_rel;
        cmp_result_free(&res);
        if (tr->matched) {
            out->n_matched++;
            if (out->cause < 0) out->cause = out->n - 1;
        } else {
            tr->cause[0] = '\0';
        }
    }
    return 0;
}

int cmp_constant_factor(const cmp_run *a, const cmp_run *b, const char *name, double *k) {
    const cmp_tensor *x = cmp_run_find(a, name), *y = cmp_run_find(b, name);
    if (!x || !y || x->numel != y->numel || !x->numel) return 0;
    double xy = 0, xx = 0, ymax = 0;
    for (size_t i = 0; i < x->numel; i++) {
        const double u = x->data[i], v = y->data[i];
        if (!isfinite(u) || !isfinite(v)) continue;
        xy += u * v, xx += u * u, ymax = fmax(ymax, fabs(v));
    }
    if (!(xx > 0) || !(ymax > 0)) return 0;
    const double r = xy / xx;
    double worst = 0;
    for (size_t i = 0; i < x->numel; i++) {
        const double u = x->data[i], v = y->data[i];
        if (isfinite(u) && isfinite(v)) worst = fmax(worst, fabs(v - r * u));
    }
    if (worst > 1e-5 * ymax || fabs(r - 1.0) <= 1e-5) return 0;
    *k = r;
    return 1;
}
