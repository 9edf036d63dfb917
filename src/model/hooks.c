/* hooks.c — observers of a pass (model.h model_observer) and the one firing mechanism of its
 * activation points (run.h PASS_POINT), and tlm_set_hooks, the observer behind the Python
 * package's hooks (docs/python.md).
 *
 * With a hook attached, the pass calls it at each named point (points.c) with a pointer into
 * the activation buffer; in forward the callback may rewrite the values in place and the pass
 * continues from them; in backward it receives the gradient of the same tensor. With no
 * observer taking points each costs one test. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"
#include "tinylm.h"
#include "util/error.h"
#include "util/signals.h"

struct model_hooks {
    model_observer obs;
    tlm_hook_fn fn;
    void *user;
    unsigned char *fwd, *bwd; /* [count]: which ids call fn (fwd 2: the callback may rewrite it) */
    int count;
    int unchanged; /* set by tlm_hook_unchanged during the last callback: it left the data as it was */
    /* the floats of the side points' memory (the context's hook_side) its passes used, and their
     * per-layer flags (hook_points.c) */
    size_t side_used;
    unsigned char *flags;
    int n_flags;
    float **cap_fwd, **cap_bwd; /* [count] tlm_set_capture's destinations (NULL: none) */
    int maps;                   /* a scores or pattern point is asked for: the pass keeps the maps */
    int rows_alone; /* the forward capture alone (no callback, no gradient, no point made on demand): each
                     * part of a batch split across the threads writes its own sequences (split.c) */
    int64_t written, calls;     /* tlm_hook_stats */
};

/* ---- observers --------------------------------------------------------------------------------- */

int context_observe(tlm_context *c, const model_observer *o) {
    for (int i = 0; i < c->n_observers; i++)
        if (c->observers[i] == o) return 0;
    if (c->n_observers == MODEL_MAX_OBSERVERS)
        return tlm_error("model: %d observers (hooks, probes, inspect) are attached already", MODEL_MAX_OBSERVERS);
    c->observers[c->n_observers++] = o;
    return 0;
}

void context_unobserve(tlm_context *c, const model_observer *o) {
    for (int i = 0; i < c->n_observers; i++)
        if (c->observers[i] == o) {
            memmove(&c->observers[i], &c->observers[i + 1], sizeof *c->observers * (size_t)(c->n_observers - i - 1));
            c->n_observers--;
            return;
        }
}

int model_observe(tlm_model *m, const model_observer *o) { return context_observe(m->ctx, o); }
void model_unobserve(tlm_model *m, const model_observer *o) { context_unobserve(m->ctx, o); }

static unsigned hooks_needs(const struct model_hooks *h);

/* the needs of the attached observers, with what each callback implies */
static unsigned observed_needs(const tlm_context *ctx) {
    unsigned needs = 0;
    for (int i = 0; i < ctx->n_observers; i++) {
        const model_observer *o = ctx->observers[i];
        needs |= o->needs;
        if (ctx->hooks && o == &ctx->hooks->obs) /* (the hooks know what they ask for) */
            needs |= hooks_needs(ctx->hooks);
        else if (o->at_point || o->after_layer) needs |= OBSERVE_MAPS | OBSERVE_WHOLE_BATCH;
        if (o->after_pass) needs |= OBSERVE_MAPS;
    }
    return needs;
}

int context_keeps_attention_maps(const tlm_context *ctx) { return (observed_needs(ctx) & OBSERVE_MAPS) != 0; }
int context_needs_whole_batch(const tlm_context *ctx) { return (observed_needs(ctx) & OBSERVE_WHOLE_BATCH) != 0; }

int context_observes_points(const tlm_context *ctx) {
    for (int i = 0; i < ctx->n_observers; i++)
        if (ctx->observers[i]->at_point) return 1;
    return 0;
}

int context_after_pass(tlm_context *ctx, int is_backward) {
    for (int i = 0; i < ctx->n_observers; i++) {
        const model_observer *o = ctx->observers[i];
        if (o->after_pass && o->after_pass(o->user, ctx, is_backward)) return -1;
    }
    return 0;
}

/* ---- a pass's points --------------------------------------------------------------------------- */

pass_ctx pass_whole(tlm_context *ctx) {
    pass_ctx x = {.m = ctx->m, .run = ctx, .A = &ctx->acts, .g = &ctx->g, .observed = context_observes_points(ctx)};
    return x;
}

static int hooks_fire(struct model_hooks *h, const tlm_context *ctx, int id, float *data, int B, int T, int b0,
                      int is_grad);

/* the batch's first sequence in x's rows: 0, or a split part's first (split.c: its views start there) */
static int first_sequence(const pass_ctx *x) {
    const activations *whole = &x->run->acts;
    return x->A == whole || !x->A->tokens ? 0 : (int)((x->A->tokens - whole->tokens) / x->A->T);
}

void pass_fire(pass_ctx *x, int id, float *data, int is_grad) {
    if (x->failed || !data) return;
    const tlm_context *ctx = x->run;
    for (int i = 0; i < ctx->n_observers; i++) {
        const model_observer *o = ctx->observers[i];
        const int rc = ctx->hooks && o == &ctx->hooks->obs
                           ? hooks_fire(ctx->hooks, ctx, id, data, x->A->B, x->A->T, first_sequence(x), is_grad)
                           : o->at_point && o->at_point(o->user, ctx, id, data, x->A->B, x->A->T, is_grad);
        if (rc) {
            x->failed = id + 1;
            return;
        }
    }
}

int pass_check_points(const pass_ctx *x) {
    if (!x->failed) return 0;
    char name[96] = "";
    int64_t s[5];
    int f;
    model_point_describe(&x->m->cfg, x->failed - 1, x->A->B, x->A->T, name, sizeof name, s, &f);
    return tlm_error("hook %s: the callback failed", name);
}

int pass_after_layer(const pass_ctx *x, int layer) {
    const tlm_context *ctx = x->run;
    for (int i = 0; i < ctx->n_observers; i++) {
        const model_observer *o = ctx->observers[i];
        if (o->after_layer && o->after_layer(o->user, ctx, layer)) return -1;
    }
    return 0;
}

/* ---- tlm_set_hooks: the public side (include/tinylm.h) ------------------------------------------ */


/* the capture's copy of point id into dst: as it is, or as TransformerLens shows it (the scale
 * 1/rstd; -inf at the keys the layer's mask hides, with the pass's left padding) */
static int capture_write(const tlm_context *ctx, int id, const float *data, float *dst, int nd, const int64_t *shape,
                         int flags, int is_grad) {
    size_t n = 1;
    for (int i = 0; i < nd; i++) n *= (size_t)shape[i];
    if ((flags & TLM_HOOK_RSTD) && !is_grad) {
#pragma omp parallel for schedule(static) if (n > 65536)
        for (size_t i = 0; i < n; i++) dst[i] = 1.0f / data[i];
    } else if (dst == data) { /* (the attention kernel wrote the map there itself, its masked keys -inf as
                               * attention_forward keeps them) */
        return 0;
    } else if ((flags & TLM_HOOK_MASKED) && !is_grad) { /* [B, H, T, T] */
        int l, k;
        model_point_of(&ctx->m->cfg, id, &l, &k);
        const int B = (int)shape[0], H = (int)shape[1], T = (int)shape[2];
        const int window = model_layer_attention(&ctx->m->cfg, l).window;
        const int *start = ctx->acts.start;
#pragma omp parallel for schedule(static)
        for (int r = 0; r < B * H; r++)
            for (int i = 0; i < T; i++) {
                const int first = attention_first_key_padded(i, window, start ? start[r / H] : 0);
                const float *src = data + ((size_t)r * T + i) * T;
                float *o = dst + ((size_t)r * T + i) * T;
                const int f = first < 0 ? 0 : first > i + 1 ? i + 1 : first;
                for (int j = 0; j < f; j++) o[j] = -INFINITY;
                memcpy(o + f, src + f, sizeof(float) * (size_t)(i + 1 - f));
                for (int j = i + 1; j < T; j++) o[j] = -INFINITY;
            }
    } else { /* (past the caches: the pass does not read the cache's copy, and the kernel need not
              * read each of its lines from memory before writing it) */
        vec_stream(dst, data, n);
    }
    return dst != data; /* (1: copied; 0: the pass wrote the map there itself) */
}

/* point id of the sequences b0 .. b0 + B (the whole batch, or a split part's: then on the part's
 * thread, only the capture) */
static int hooks_fire(struct model_hooks *h, const tlm_context *ctx, int id, float *data, int B, int T, int b0,
                      int is_grad) {
    if (id < 0 || id >= h->count) return 0;
    float *dst = (is_grad ? h->cap_bwd : h->cap_fwd) ? (is_grad ? h->cap_bwd : h->cap_fwd)[id] : NULL;
    const int call = (is_grad ? h->bwd : h->fwd)[id] && h->fn;
    if (!call && !dst) return 0;
    int64_t shape[5];
    int flags;
    /* (the shape alone: the callback gets the id; the name is formatted only for a failure's
     * message, pass_check_points) */
    int nd = model_point_describe(&ctx->m->cfg, id, B, T, NULL, 0, shape, &flags);
    if (!nd) return 0;
    int rc = 0;
    if (call) {
        h->unchanged = 0;
        const int held = signals_window_open(); /* (the caller's code may take a signal here: Ctrl-C ends a Python pass at a hook) */
        rc = h->fn(h->user, id, data, nd, shape, is_grad);
        signals_window_close(held);
        h->calls++;
    }
    if (!rc && dst) { /* (after the callback: the cache holds what the hooks left) */
        size_t per_seq = 1; /* (every point is [B, ...]: a part's sequences are one span of the array) */
        for (int i = 1; i < nd; i++) per_seq *= (size_t)shape[i];
        const int copied = capture_write(ctx, id, data, dst + (size_t)b0 * per_seq, nd, shape, flags, is_grad);
#pragma omp atomic
        h->written += copied;
    }
    return rc;
}

static int hooks_at_point(void *user, const tlm_context *ctx, int id, float *data, int B, int T, int is_grad) {
    return hooks_fire(user, ctx, id, data, B, T, 0, is_grad);
}

/* a scores or pattern point is asked for (by a callback or the capture) */
static int wants_maps(const struct model_hooks *h, const tlm_config *c) {
    for (int l = 0; l < c->n_layers; l++) {
        const int ids[2] = {model_point_id(c, l, PT_ATTN_SCORES), model_point_id(c, l, PT_PATTERN)};
        for (int i = 0; i < 2; i++)
            if (h->fwd[ids[i]] || h->bwd[ids[i]] || (h->cap_fwd && h->cap_fwd[ids[i]])) return 1;
    }
    return 0;
}

/* the forward capture alone: nothing but copies of the sequences' own rows (a Python callback sees
 * the whole batch; the points made on demand share one side buffer; gradients are left whole), of a
 * model whose rows do not meet (a mixture of experts runs each expert's rows of every sequence as
 * one product: split, they round otherwise than in the whole pass that hook functions see) */
static int rows_alone(const struct model_hooks *h, const tlm_config *c) {
    if (h->cap_bwd) return 0;
    for (int l = 0; l < c->n_layers; l++)
        if (config_layer_is_moe(c, l)) return 0;
    for (int i = 0; i < h->count; i++) {
        if (h->fwd[i] || h->bwd[i]) return 0;
        int64_t s[5];
        int f;
        if (h->cap_fwd && h->cap_fwd[i] && model_point_describe(c, i, 1, 1, NULL, 0, s, &f) &&
            (f & TLM_HOOK_ON_DEMAND))
            return 0;
    }
    return 1;
}

static unsigned hooks_needs(const struct model_hooks *h) {
    return (h->rows_alone ? 0 : OBSERVE_WHOLE_BATCH) | (h->maps ? OBSERVE_MAPS : 0);
}

int tlm_hook_count(const tlm_model *m) { return model_point_count(&m->cfg); }

int tlm_hook_info(const tlm_model *m, int id, char *name, size_t name_cap, int B, int T, int64_t shape[5],
                  int *flags) {
    int f = 0;
    int64_t s[5] = {0};
    char buf[96];
    int nd = model_point_describe(&m->cfg, id, B, T, buf, sizeof buf, s, &f);
    if (name && name_cap) snprintf(name, name_cap, "%s", nd ? buf : "");
    if (shape) memcpy(shape, s, sizeof s);
    if (flags) *flags = f;
    return nd;
}

int tlm_set_hooks(tlm_model *m, tlm_hook_fn fn, void *user, const unsigned char *fwd, const unsigned char *bwd) {
    return context_set_hooks(m->ctx, fn, user, fwd, bwd);
}

int context_set_hooks(tlm_context *c, tlm_hook_fn fn, void *user, const unsigned char *fwd, const unsigned char *bwd) {
    if (c->hooks) {
        context_unobserve(c, &c->hooks->obs);
        free(c->hooks->flags), free(c->hooks->cap_fwd), free(c->hooks->cap_bwd);
        free(c->hooks->fwd), free(c->hooks->bwd), free(c->hooks), c->hooks = NULL;
    }
    if (!fn) return 0;
    const int n = model_point_count(&c->m->cfg);
    struct model_hooks *h = calloc(1, sizeof *h);
    if (h) h->fwd = calloc((size_t)n, 1), h->bwd = calloc((size_t)n, 1);
    if (!h || !h->fwd || !h->bwd) {
        if (h) free(h->fwd), free(h->bwd), free(h);
        return tlm_error("out of memory");
    }
    if (fwd) memcpy(h->fwd, fwd, (size_t)n);
    if (bwd) memcpy(h->bwd, bwd, (size_t)n);
    h->fn = fn, h->user = user, h->count = n;
    h->maps = wants_maps(h, &c->m->cfg);
    h->obs = (model_observer){.at_point = hooks_at_point, .user = h};
    if (context_observe(c, &h->obs)) {
        free(h->fwd), free(h->bwd), free(h);
        return -1;
    }
    c->hooks = h;
    return 0;
}

void tlm_hook_unchanged(tlm_model *m) {
    if (m->ctx->hooks) m->ctx->hooks->unchanged = 1;
}

void context_hooks_free(tlm_context *c) {
    (void)context_set_hooks(c, NULL, NULL, NULL, NULL);
    free(c->hook_side);
    c->hook_side = NULL, c->hook_side_cap = 0;
}

/* When the pattern hook of layer l may have rewritten probs: att = probs @ v again. */
void model_hook_attention_from_probs(const pass_ctx *x, int l, float *att, const float *probs, const float *v) {
    const tlm_model *m = x->m;
    const tlm_config *c = &m->cfg;
    const struct model_hooks *h = x->run->hooks;
    if (!h || h->fwd[model_point_id(c, l, PT_PATTERN)] != 2) return; /* 2: a hook may rewrite it */
    if (h->unchanged) return; /* (the callback said it left the pattern as it was: z stays the kernel's) */
    const int B = x->A->B, T = x->A->T, H = c->n_heads, KV = config_layer_kv_heads(c, l), hd = config_layer_head_dim(c, l);
    const int qd = H * hd, kvd = KV * hd, group = H / KV;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int hh = 0; hh < H; hh++) {
                float *o = att + ((size_t)b * T + t) * qd + (size_t)hh * hd;
                const float *p = probs + (((size_t)b * H + hh) * T + t) * T;
                memset(o, 0, sizeof(float) * hd);
                for (int j = 0; j < T; j++) {
                    if (p[j] == 0.0f) continue;
                    const float *vj = v + ((size_t)b * T + j) * kvd + (size_t)(hh / group) * hd;
                    for (int i = 0; i < hd; i++) o[i] += p[j] * vj[i];
                }
            }
}

/* ---- the side points' needs (hook_points.h) ------------------------------------------------------ */

int pass_point_wanted(const pass_ctx *x, int id, int is_grad) {
    const struct model_hooks *h = x->run->hooks;
    if (!h || id < 0 || id >= h->count) return 0;
    float **cap = is_grad ? h->cap_bwd : h->cap_fwd;
    return (is_grad ? h->bwd : h->fwd)[id] != 0 || (cap && cap[id]);
}

float *pass_capture_of(const pass_ctx *x, int id) {
    const tlm_context *ctx = x->run;
    const struct model_hooks *h = ctx->hooks;
    if (!h || !h->cap_fwd || id < 0 || id >= h->count || ctx->n_observers != 1 || !h->cap_fwd[id]) return NULL;
    int64_t s[5];
    int f;
    const int nd = model_point_describe(&ctx->m->cfg, id, 1, x->A->T, NULL, 0, s, &f);
    size_t per_seq = 1;
    for (int i = 1; i < nd; i++) per_seq *= (size_t)s[i];
    return h->cap_fwd[id] + (size_t)first_sequence(x) * per_seq; /* (a split part's rows) */
}

int pass_point_rewritten(const pass_ctx *x, int id) {
    const struct model_hooks *h = x->run->hooks;
    return h && id >= 0 && id < h->count && h->fwd[id] == 2 && !h->unchanged;
}

float *pass_hook_memory(pass_ctx *x, size_t floats) {
    struct model_hooks *h = x->run->hooks;
    if (!h) return NULL;
    tlm_context *c = x->run;
    if (floats > h->side_used) h->side_used = floats;
    if (floats > c->hook_side_cap) {
        free(c->hook_side);
        c->hook_side_cap = 0;
        if (!(c->hook_side = malloc(floats * sizeof(float)))) {
            tlm_error("out of memory: %zu floats for the hook points made on demand", floats);
            return NULL;
        }
        c->hook_side_cap = floats;
    }
    return c->hook_side;
}

unsigned char *pass_hook_flags(pass_ctx *x, int n) {
    struct model_hooks *h = x->run->hooks;
    if (!h) return NULL;
    if (n > h->n_flags) {
        unsigned char *f = calloc((size_t)n, 1);
        if (!f) return NULL;
        free(h->flags);
        h->flags = f, h->n_flags = n;
    }
    return h->flags;
}

/* ---- tlm_set_capture: the pass writes the cache's arrays itself ---------------------------------- */

int tlm_set_capture(tlm_model *m, float *const *fwd, float *const *bwd) {
    struct model_hooks *h = m->ctx->hooks;
    if (!h) return tlm_error("set capture: no hooks are set (tlm_set_hooks first)");
    float **t[2] = {NULL, NULL};
    float *const *from[2] = {fwd, bwd};
    for (int i = 0; i < 2; i++)
        if (from[i]) {
            if (!(t[i] = malloc(sizeof(float *) * (size_t)h->count))) {
                free(t[0]);
                return tlm_error("out of memory");
            }
            memcpy(t[i], from[i], sizeof(float *) * (size_t)h->count);
        }
    free(h->cap_fwd), free(h->cap_bwd);
    h->cap_fwd = t[0], h->cap_bwd = t[1];
    h->maps = wants_maps(h, &m->cfg);
    h->rows_alone = rows_alone(h, &m->cfg);
    return 0;
}

int tlm_hook_stats(const tlm_model *m, int64_t out[4]) {
    const struct model_hooks *h = m->ctx->hooks;
    if (!h || !out) return -1;
    out[0] = h->written, out[1] = h->calls, out[2] = m->ctx->acts.maps, out[3] = (int64_t)h->side_used;
    return 0;
}
