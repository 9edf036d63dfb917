/* inspect.c — the numbers of `tinylm inspect`, computed from the probes of one pass
 * (src/probes/probe.h) plus the final norm and LM head for the logit lens and the direct
 * logit attribution. Norms and sums are accumulated in double. */
#include "inspect.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/model.h"
#include "model/moe.h"
#include "probes/lens.h"
#include "probes/probe.h"
#include "util/clock.h"
#include "util/error.h"
#include "model/context.h"

/* what the report keeps of one forward pass: [T, d] rows per layer, no [H, T, T] matrices (the
 * attention statistics are taken from each layer as the pass goes: head_stats) */
static const char *const FORWARD_PATTERNS[] = {
    "embed", "layers.*.resid_*", "layers.*.attn.out", "layers.*.ffn.out", "*norm.in_rms", "*norm.out_rms", "logits",
};

static double l2(const float *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return sqrt(s);
}

static const probe_tensor *need(const tlm_probe *p, const char *name) {
    const probe_tensor *t = probe_find(p, name);
    if (!t) tlm_error("inspect: probe \"%s\" was not recorded", name);
    return t;
}

/* per-position L2 norm of a [1, T, d] record: at the position, and the mean over positions;
 * every position's into each[T] */
static inspect_stat norm_stat(const probe_tensor *t, int T, int d, int pos, float *each) {
    inspect_stat s = {0, 0};
    for (int i = 0; i < T; i++) {
        double v = l2(t->data + (size_t)i * d, (size_t)d);
        if (i == pos) s.at = v;
        s.mean += v / T;
        each[i] = (float)v;
    }
    return s;
}

/* a [1, T] record */
static inspect_stat value_stat(const probe_tensor *t, int T, int pos, float *each) {
    inspect_stat s = {t->data[pos], 0};
    for (int i = 0; i < T; i++) s.mean += (double)t->data[i] / T;
    memcpy(each, t->data, sizeof(float) * (size_t)T);
    return s;
}

/* the name of residual-stream point k: the embedding, then the stream after each sublayer */
static void point_name(char *out, size_t n, int k) {
    if (k == 0)
        snprintf(out, n, "embed");
    else
        snprintf(out, n, "layers.%d.%s", (k - 1) / 2, k % 2 ? "resid_mid" : "resid_post");
}

static int residual_stats(inspect_report *r, const tlm_probe *p, int d) {
    const int L = r->n_layers, T = r->T, pos = r->position;
    for (int k = 0; k <= 2 * L; k++) {
        point_name(r->points[k].name, sizeof r->points[k].name, k);
        const probe_tensor *t = need(p, r->points[k].name);
        if (!t) return -1;
        r->points[k].v = norm_stat(t, T, d, pos, r->point_norm_pos + (size_t)k * T);
    }
    for (int k = 0; k < 2 * L; k++) {
        snprintf(r->incr[k].name, sizeof r->incr[k].name, "layers.%d.%s.out", k / 2, k % 2 ? "ffn" : "attn");
        const probe_tensor *t = need(p, r->incr[k].name);
        if (!t) return -1;
        r->incr[k].v = norm_stat(t, T, d, pos, r->incr_norm_pos + (size_t)k * T);
    }
    return 0;
}

/* every norm the walk recorded, in the order the pass runs them */
static int norm_stats(inspect_report *r, const tlm_probe *p) {
    size_t n = probe_count(p);
    r->norms = calloc(n ? n : 1, sizeof *r->norms);
    r->norm_in_pos = malloc(sizeof(float) * (n ? n : 1) * (size_t)r->T);
    r->norm_out_pos = malloc(sizeof(float) * (n ? n : 1) * (size_t)r->T);
    if (!r->norms || !r->norm_in_pos || !r->norm_out_pos) return tlm_error("out of memory");
    for (size_t i = 0; i < n; i++) {
        const probe_tensor *in = probe_at(p, i);
        size_t len = strlen(in->name);
        if (len < 7 || strcmp(in->name + len - 7, ".in_rms") != 0) continue;
        inspect_norm *nm = &r->norms[r->n_norms++];
        snprintf(nm->name, sizeof nm->name, "%.*s", (int)(len - 7), in->name);
        char out_name[160];
        snprintf(out_name, sizeof out_name, "%s.out_rms", nm->name);
        const probe_tensor *out = need(p, out_name);
        if (!out) return -1;
        const size_t row = (size_t)(nm - r->norms) * r->T;
        nm->in_rms = value_stat(in, r->T, r->position, r->norm_in_pos + row);
        nm->out_rms = value_stat(out, r->T, r->position, r->norm_out_pos + row);
    }
    return 0;
}

/* one attention row p[0..n) as uint16 that sum to 65535 exactly: each p * 65535 rounded down, then
 * the units left over go to the largest remainders; rk[n] is scratch */
typedef struct {
    float rem;
    int idx;
} rank_item;

static int by_rem_desc(const void *a, const void *b) {
    const rank_item *x = a, *y = b;
    if (x->rem != y->rem) return x->rem > y->rem ? -1 : 1;
    return x->idx - y->idx;
}

static void quantize_row(const float *p, int n, uint16_t *q, rank_item *rk) {
    long sum = 0;
    int best = 0;
    for (int j = 0; j < n; j++) {
        double v = (double)p[j] * 65535.0;
        if (!(v > 0)) v = 0;
        if (v > 65535.0) v = 65535.0;
        double f = floor(v);
        q[j] = (uint16_t)f;
        rk[j].rem = (float)(v - f), rk[j].idx = j;
        sum += q[j];
        if (p[j] > p[best]) best = j;
    }
    long need = 65535 - sum;
    if (need > 0) qsort(rk, (size_t)n, sizeof *rk, by_rem_desc);
    for (long u = 0; u < need && u < n; u++) q[rk[u].idx]++;
    if (need > n) q[best] = (uint16_t)(q[best] + (need - n));
    if (need < 0) q[best] = (uint16_t)(q[best] + need > 0 ? q[best] + need : 0);
}

/* layer l's attention sharpness per head, from the pass's own [H, T, T] scores and probabilities
 * while they are there (one sequence): the max over the keys a query sees (causal, within the
 * layer's window) and the entropy of its probabilities */
static void head_stats(inspect_report *r, const tlm_model *m, int l) {
    const int T = r->T, H = r->n_heads;
    const layer_acts *a = &m->ctx->acts.layers[l];
#pragma omp parallel for schedule(dynamic)
    for (int h = 0; h < H; h++) {
        inspect_head *hd = &r->heads[l * H + h];
        hd->layer = l, hd->head = h;
        double mx_mean = 0.0, ent_mean = 0.0;
        float *mx_pos = r->head_max_pos + (size_t)(l * H + h) * T, *ent_pos = r->head_ent_pos + (size_t)(l * H + h) * T;
        uint16_t *q = r->attn_q ? r->attn_q + (size_t)(l * H + h) * ((size_t)T * (T + 1) / 2) : NULL;
        rank_item *rk = q ? malloc(sizeof(rank_item) * T) : NULL;
        for (int i = 0; i < T; i++) {
            const float *srow = a->scores + ((size_t)h * T + i) * T, *prow = a->probs + ((size_t)h * T + i) * T;
            double mx = -INFINITY, ent = 0.0;
            for (int j = 0; j <= i; j++) {
                if (!model_key_visible(&m->cfg, l, i, j)) continue;
                if (srow[j] > mx) mx = srow[j];
                if (prow[j] > 0.0f) ent -= (double)prow[j] * log((double)prow[j]);
            }
            if (i == r->position) hd->max_logit.at = mx, hd->entropy.at = ent;
            mx_pos[i] = (float)mx, ent_pos[i] = (float)ent;
            if (rk) quantize_row(prow, i + 1, q + (size_t)i * (i + 1) / 2, rk);
            mx_mean += mx / T;
            ent_mean += ent / T;
        }
        hd->max_logit.mean = mx_mean, hd->entropy.mean = ent_mean;
        if (q && !rk) r->attn_oom = 1;
        free(rk);
    }
}

/* the pass, one layer at a time (an observer's after_layer, model.h) */
typedef struct {
    inspect_report *r;
    double t0;
    int tty, shown; /* progress on stderr: a line per layer on a terminal, else a line per layer of a long pass */
} pass_ctx;

/* the router of MoE layer l while its activations are there: the load per expert, the entropy of
 * its distribution, each token's experts and weights */
static void router_stats(inspect_report *r, const tlm_model *m, int l) {
    const tlm_config *c = &m->cfg;
    if (!r->moe_layer || !config_layer_is_moe(c, l)) return;
    const moe_acts *a = moe_layer_acts(&m->ctx->acts, l);
    const int T = r->T, E = c->n_experts, k = c->n_experts_per_tok;
    r->moe_layer[l] = 1;
    float *load = r->moe_load + (size_t)l * E;
    double ent = 0.0;
    for (int t = 0; t < T; t++) {
        const float *p = a->router_probs + (size_t)t * E;
        double sum = 0.0, h = 0.0;
        for (int e = 0; e < E; e++) sum += p[e];
        for (int e = 0; e < E; e++)
            if (p[e] > 0.0f) h -= p[e] / sum * log(p[e] / sum);
        ent += h / T;
        for (int j = 0; j < k; j++) {
            const size_t i = ((size_t)l * T + t) * k + j;
            r->moe_experts[i] = a->topk_idx[(size_t)t * k + j];
            r->moe_weights[i] = a->topk_w[(size_t)t * k + j];
            load[r->moe_experts[i]] += 1.0f / ((float)T * k);
        }
    }
    r->moe_entropy[l] = (float)ent;
}

static int after_layer(void *ctx, const tlm_context *run, int l) {
    const tlm_model *m = run->m;
    pass_ctx *pc = ctx;
    if (l < 0) return 0;
    head_stats(pc->r, m, l);
    router_stats(pc->r, m, l);
    const double dt = tlm_now_s() - pc->t0;
    if (pc->tty ? pc->r->T >= 1024 || dt > 1.0 : dt > 5.0) {
        fprintf(stderr, pc->tty ? "\rinspect: layer %d of %d done (%d tokens, %.1f s)" : "inspect: layer %d of %d done (%d tokens, %.1f s)\n",
                l + 1, m->cfg.n_layers, pc->r->T, dt);
        fflush(stderr);
        pc->shown = 1;
    }
    return 0;
}

/* ids of the k largest entries of x[0..n), best first (ties: the lower id) */
static void top_k(const float *x, int n, int k, int *ids) {
    int have = 0;
    for (int i = 0; i < n; i++) {
        if (have == k && !(x[i] > x[ids[k - 1]])) continue;
        int j = have < k ? have++ : k - 1;
        while (j > 0 && x[i] > x[ids[j - 1]]) ids[j] = ids[j - 1], j--;
        ids[j] = i;
    }
}

/* a row of logits' softmax normalizer: its max and sum(exp(x - max)) */
static void softmax_norm(const float *x, int n, double *mx_out, double *s_out) {
    double mx = -INFINITY, s = 0.0;
    for (int i = 0; i < n; i++)
        if (x[i] > mx) mx = x[i];
    for (int i = 0; i < n; i++) s += exp((double)x[i] - mx);
    *mx_out = mx, *s_out = s;
}

/* softmax probability of entry `id` of a row of logits */
static double softmax_prob(const float *x, int n, int id) {
    double mx, s;
    softmax_norm(x, n, &mx, &s);
    return exp((double)x[id] - mx) / s;
}

/* KL(p || q) of two rows of logits (nats), in double */
static double kl_rows(const float *zp, const float *zq, int V) {
    double mp = -INFINITY, mq = -INFINITY, sp = 0.0, sq = 0.0, kl = 0.0;
    for (int v = 0; v < V; v++) mp = zp[v] > mp ? zp[v] : mp, mq = zq[v] > mq ? zq[v] : mq;
    for (int v = 0; v < V; v++) sp += exp((double)zp[v] - mp), sq += exp((double)zq[v] - mq);
    const double lp0 = mp + log(sp), lq0 = mq + log(sq);
    for (int v = 0; v < V; v++) {
        const double lp = zp[v] - lp0, lq = zq[v] - lq0;
        kl += exp(lp) * (lp - lq);
    }
    return kl > 0.0 ? kl : 0.0;
}

/* The lens rows (logit lens with lens NULL; else the tuned lens's translators first) */
typedef struct {
    int *top, *grid;
    float *top_prob, *top_logit, *grid_prob;
    double *kl, *kl_at;
} lens_out;

static int read_lens(inspect_report *r, const tlm_model *m, const tlm_probe *p, const tlm_lens *lens, lens_out o) {
    const int T = r->T, d = m->cfg.d_model, V = m->cfg.vocab_size, K = r->top_k;
    float *y = malloc(sizeof(float) * T * d), *mean = malloc(sizeof(float) * T), *rstd = malloc(sizeof(float) * T);
    float *logits = malloc(sizeof(float) * (size_t)T * V), *u = lens ? malloc(sizeof(float) * T * d) : NULL;
    int *ids = malloc(sizeof(int) * K);
    int rc = -1;
    if (!y || !mean || !rstd || !logits || !ids || (lens && !u)) {
        tlm_error("out of memory for the logit lens (%d x %d logits)", T, V);
        goto done;
    }
    const probe_tensor *final_logits = need(p, "logits");
    if (!final_logits) goto done;
    for (int k = 0; k < r->n_lens; k++) {
        char name[64];
        point_name(name, sizeof name, 2 * k);
        const probe_tensor *x = need(p, name);
        if (!x) goto done;
        const float *h = x->data;
        if (lens) lens_apply(lens, k, u, h, T), h = u;
        context_head_forward(m->ctx, logits, NULL, &(norm_acts){.y = y, .mean = mean, .rstd = rstd}, h, T);
        o.kl[k] = 0.0;
        for (int i = 0; i < T; i++) {
            const float *row = logits + (size_t)i * V;
            top_k(row, V, 1, ids);
            o.grid[k * T + i] = ids[0];
            o.grid_prob[k * T + i] = (float)softmax_prob(row, V, ids[0]);
            const double kl = kl_rows(final_logits->data + (size_t)i * V, row, V);
            o.kl[k] += kl / T;
            if (i == r->position) o.kl_at[k] = kl;
            if (k == r->n_lens - 1 && !lens)
                for (int v = 0; v < V; v++) {
                    double diff = fabs((double)row[v] - final_logits->data[(size_t)i * V + v]);
                    if (diff > r->lens_final_diff) r->lens_final_diff = diff;
                }
        }
        if (k == r->n_lens - 1 && r->pred_top) /* the model's own top tokens at every position */
            for (int i = 0; i < T; i++) {
                const float *row = logits + (size_t)i * V;
                double mx, s;
                top_k(row, V, K, ids);
                softmax_norm(row, V, &mx, &s); /* (the same arithmetic as softmax_prob) */
                for (int j = 0; j < K; j++) {
                    r->pred_top[(size_t)i * K + j] = ids[j];
                    r->pred_top_prob[(size_t)i * K + j] = (float)(exp((double)row[ids[j]] - mx) / s);
                    r->pred_top_logit[(size_t)i * K + j] = row[ids[j]];
                }
            }
        const float *row = logits + (size_t)r->position * V;
        top_k(row, V, K, ids);
        for (int j = 0; j < K; j++) {
            o.top[k * K + j] = ids[j];
            o.top_prob[k * K + j] = (float)softmax_prob(row, V, ids[j]);
            o.top_logit[k * K + j] = row[ids[j]];
        }
    }
    rc = 0;
done:
    free(y), free(mean), free(rstd), free(logits), free(ids), free(u);
    return rc;
}

static int logit_lens(inspect_report *r, const tlm_model *m, const tlm_probe *p, const tlm_lens *lens) {
    lens_out lo = {r->lens_top,       r->lens_grid, r->lens_top_prob, r->lens_top_logit,
                   r->lens_grid_prob, r->lens_kl,   r->lens_kl_at};
    if (read_lens(r, m, p, NULL, lo)) return -1;
    if (!lens) return 0;
    const int n = r->n_lens, K = r->top_k, T = r->T;
    r->tuned_top = malloc(sizeof(int) * n * K);
    r->tuned_top_prob = malloc(sizeof(float) * n * K);
    r->tuned_top_logit = malloc(sizeof(float) * n * K);
    r->tuned_grid = malloc(sizeof(int) * (size_t)n * T);
    r->tuned_grid_prob = malloc(sizeof(float) * (size_t)n * T);
    r->tuned_kl = calloc((size_t)n, sizeof(double));
    r->tuned_kl_at = calloc((size_t)n, sizeof(double));
    if (!r->tuned_top || !r->tuned_top_prob || !r->tuned_top_logit || !r->tuned_grid || !r->tuned_grid_prob ||
        !r->tuned_kl || !r->tuned_kl_at)
        return tlm_error("out of memory for the tuned lens");
    r->has_tuned = 1;
    lens_out to = {r->tuned_top,       r->tuned_grid, r->tuned_top_prob, r->tuned_top_logit,
                   r->tuned_grid_prob, r->tuned_kl,   r->tuned_kl_at};
    return read_lens(r, m, p, lens, to);
}

/* h_final = embed + sum over layers of (attn.out + ffn.out) when the stream is a plain sum;
 * each term's direct logit attribution goes through the final norm with the scale of the full
 * residual (and, for LayerNorm, each term centred), as TransformerLens does. */
static int decomposition(inspect_report *r, const tlm_model *m, const tlm_probe *p) {
    const tlm_config *c = &m->cfg;
    const int T = r->T, d = c->d_model, V = c->vocab_size, L = r->n_layers, pos = r->position;
    const probe_tensor *logits = need(p, "logits");
    if (!logits) return -1;
    int pred;
    top_k(logits->data + (size_t)pos * V, V, 1, &pred);
    r->predicted = pred;
    r->predicted_prob = softmax_prob(logits->data + (size_t)pos * V, V, pred);
    r->logit = logits->data[(size_t)pos * V + pred];
    r->logit_raw = c->final_softcap > 0.0f ? m->ctx->acts.logits_raw[(size_t)pos * V + pred] : r->logit;
    if (!c->residual) {
        snprintf(r->decomp_reason, sizeof r->decomp_reason,
                 "residual: false replaces the stream with each sublayer's output, so the final residual is not a sum");
        return 0;
    }
    if (c->layer_scalar) { /* (Gemma 4) */
        snprintf(r->decomp_reason, sizeof r->decomp_reason,
                 "the layer scalar multiplies the whole stream after every layer, so the final residual is not a "
                 "plain sum of what each sublayer wrote");
        return 0;
    }
    if (placement_has_post_norm(c->placement)) { /* (post and deepnorm) */
        snprintf(r->decomp_reason, sizeof r->decomp_reason,
                 "Post-Norm renormalizes the stream after every sublayer (h = N(x + F(x))), so it is not a sum");
        return 0;
    }
    if (c->final_norm && c->norm == NORM_DYT) {
        snprintf(r->decomp_reason, sizeof r->decomp_reason,
                 "the final norm is DyT, g tanh(alpha x) + b: not linear in the stream, so no term has a direct logit "
                 "attribution");
        return 0;
    }
    r->decomp_applies = 1;
    r->n_terms = 2 * L + 1;
    r->terms = calloc((size_t)r->n_terms, sizeof *r->terms);
    double *sum = calloc((size_t)T * d, sizeof(double));
    double *g = malloc(sizeof(double) * d);
    float *u = malloc(sizeof(float) * d);
    if (!r->terms || !sum || !g || !u) {
        free(sum), free(g), free(u);
        return tlm_error("out of memory");
    }
    /* effective unembedding direction through the norm's gain: u_j * g_j (the head's row as f32,
     * whatever type its weights are kept in) */
    model_head_row(m, pred, u);
    for (int j = 0; j < d; j++) {
        double gain = 1.0;
        if (c->final_norm) gain = model_norm_gain(c, m->p.final_norm.w[j]);
        g[j] = (double)u[j] * gain;
    }
    const double scale = c->final_norm ? m->ctx->acts.final.rstd[pos] : 1.0;
    const int centre = c->final_norm && c->norm == NORM_LAYERNORM;
    r->dla_sum = 0.0;
    for (int k = 0; k < r->n_terms; k++) {
        inspect_term *t = &r->terms[k];
        if (k == 0)
            snprintf(t->name, sizeof t->name, "embed");
        else
            snprintf(t->name, sizeof t->name, "layers.%d.%s.out", (k - 1) / 2, k % 2 ? "attn" : "ffn");
        const probe_tensor *x = need(p, t->name);
        if (!x) {
            free(sum), free(g), free(u);
            return -1;
        }
        for (size_t i = 0; i < (size_t)T * d; i++) sum[i] += x->data[i];
        const float *xp = x->data + (size_t)pos * d;
        double mean = 0.0, dot = 0.0;
        if (centre) {
            for (int j = 0; j < d; j++) mean += xp[j];
            mean /= d;
        }
        for (int j = 0; j < d; j++) dot += g[j] * (xp[j] - mean);
        t->norm = l2(xp, (size_t)d);
        t->dla = scale * dot;
        r->dla_sum += t->dla;
    }
    if (centre && m->p.final_norm.b) {
        r->has_dla_bias = 1;
        for (int j = 0; j < d; j++) r->dla_bias += (double)u[j] * m->p.final_norm.b[j];
        r->dla_sum += r->dla_bias;
    }
    char last[64];
    point_name(last, sizeof last, 2 * L);
    const probe_tensor *h = need(p, last);
    if (!h) {
        free(sum), free(g), free(u);
        return -1;
    }
    for (int i = 0; i < T; i++) {
        double e2 = 0.0, h2 = 0.0, emax = 0.0;
        for (int j = 0; j < d; j++) {
            double hv = h->data[(size_t)i * d + j], e = sum[(size_t)i * d + j] - hv;
            e2 += e * e, h2 += hv * hv;
            if (fabs(e) > emax) emax = fabs(e);
        }
        double rel = h2 > 0.0 ? sqrt(e2 / h2) : sqrt(e2);
        if (i == pos) r->sum_err_abs = emax, r->sum_err_rel = rel;
        if (rel > r->sum_err_rel_max) r->sum_err_rel_max = rel;
    }
    free(sum), free(g), free(u);
    return 0;
}

static int alloc_report(inspect_report *r, const tlm_model *m, const int *tokens, int flags) {
    const int L = m->cfg.n_layers, T = r->T, K = r->top_k;
    r->n_points = 2 * L + 1;
    r->n_lens = L + 1;
    r->tokens = malloc(sizeof(int) * T);
    r->points = calloc((size_t)r->n_points, sizeof *r->points);
    r->incr = calloc((size_t)2 * L, sizeof *r->incr);
    r->heads = calloc((size_t)L * r->n_heads, sizeof *r->heads);
    r->lens_top = malloc(sizeof(int) * r->n_lens * K);
    r->lens_top_prob = malloc(sizeof(float) * r->n_lens * K);
    r->lens_top_logit = malloc(sizeof(float) * r->n_lens * K);
    r->lens_grid = malloc(sizeof(int) * (size_t)r->n_lens * T);
    r->lens_grid_prob = malloc(sizeof(float) * (size_t)r->n_lens * T);
    r->lens_kl = calloc((size_t)r->n_lens, sizeof(double));
    r->lens_kl_at = calloc((size_t)r->n_lens, sizeof(double));
    const size_t LH = (size_t)L * r->n_heads;
    r->point_norm_pos = malloc(sizeof(float) * (size_t)r->n_points * T);
    r->incr_norm_pos = malloc(sizeof(float) * (size_t)2 * L * T + 1);
    r->head_max_pos = malloc(sizeof(float) * LH * T + 1);
    r->head_ent_pos = malloc(sizeof(float) * LH * T + 1);
    if (flags & INSPECT_EVERY_POSITION_TOP) {
        r->pred_top = malloc(sizeof(int) * (size_t)T * K);
        r->pred_top_prob = malloc(sizeof(float) * (size_t)T * K);
        r->pred_top_logit = malloc(sizeof(float) * (size_t)T * K);
        if (!r->pred_top || !r->pred_top_prob || !r->pred_top_logit)
            return tlm_error("out of memory for the inspect report");
    }
    if (!r->lens_kl || !r->lens_kl_at || !r->tokens || !r->points || !r->incr || !r->heads || !r->lens_top || !r->lens_top_prob || !r->lens_top_logit ||
        !r->lens_grid || !r->lens_grid_prob || !r->point_norm_pos || !r->incr_norm_pos || !r->head_max_pos ||
        !r->head_ent_pos)
        return tlm_error("out of memory for the inspect report");
    const long long n_attn = (long long)LH * T * (T + 1) / 2;
    if ((flags & INSPECT_KEEP_ATTENTION) && n_attn <= INSPECT_ATTENTION_LIMIT) {
        r->attn_q = malloc(sizeof(uint16_t) * (size_t)n_attn + 1);
        if (!r->attn_q) return tlm_error("out of memory for the attention patterns (%lld values)", n_attn);
    }
    if (m->cfg.n_experts > 0) {
        const size_t E = (size_t)m->cfg.n_experts, k = (size_t)m->cfg.n_experts_per_tok;
        r->n_experts = (int)E, r->k_experts = (int)k;
        r->moe_layer = calloc((size_t)L, 1);
        r->moe_load = calloc((size_t)L * E, sizeof(float));
        r->moe_entropy = calloc((size_t)L, sizeof(float));
        r->moe_experts = calloc((size_t)L * T * k, sizeof(int));
        r->moe_weights = calloc((size_t)L * T * k, sizeof(float));
        if (!r->moe_layer || !r->moe_load || !r->moe_entropy || !r->moe_experts || !r->moe_weights)
            return tlm_error("out of memory for the inspect report");
    }
    memcpy(r->tokens, tokens, sizeof(int) * T);
    return 0;
}

void inspect_stage_name(char *buf, size_t n, int k) {
    if (k == 0)
        snprintf(buf, n, "embed");
    else
        snprintf(buf, n, "layers.%d.resid_post", k - 1);
}

int inspect_run_ex(tlm_model *m, const int *tokens, int T, int position, int top_k_n, int flags, const tlm_lens *lens,
                   inspect_report *r) {
    memset(r, 0, sizeof *r);
    const tlm_config *c = &m->cfg;
    if (T <= 0) return tlm_error("inspect: no tokens to run");
    if (position < 0 || position >= T)
        return tlm_error("inspect: position %d is out of range: the input has %d tokens (0..%d)", position, T, T - 1);
    if (top_k_n <= 0 || top_k_n > c->vocab_size)
        return tlm_error("inspect: top %d is out of range (1..vocab_size = %d)", top_k_n, c->vocab_size);
    if (m->ctx->n_observers) return tlm_error("inspect: the model already has an observer (a probe or hooks) attached");
    r->T = T, r->position = position, r->top_k = top_k_n, r->n_layers = c->n_layers, r->n_heads = c->n_heads;
    if (alloc_report(r, m, tokens, flags)) return -1;
    tlm_probe *p = probe_create();
    int rc = p ? 0 : -1;
    for (size_t i = 0; !rc && i < sizeof FORWARD_PATTERNS / sizeof *FORWARD_PATTERNS; i++)
        rc = probe_select(p, FORWARD_PATTERNS[i]);
    if (!rc) {
        /* inference layout: one layer's activations (its [H, T, T] attention included) at a time;
         * the hook takes each layer's numbers before the next layer reuses the memory */
        const model_mode mode = m->ctx->mode;
        pass_ctx pc = {.r = r, .t0 = tlm_now_s(), .tty = isatty(2)};
        const model_observer obs = {.after_layer = after_layer, .user = &pc};
        model_set_mode(m, MODEL_INFER);
        rc = model_observe(m, &obs) || probe_attach(p, m) ? -1 : 0; /* (the probe records as each point fires) */
        if (!rc) rc = model_forward(m, tokens, NULL, 1, T, NULL);
        probe_detach(m);
        model_unobserve(m, &obs);
        if (!rc && r->attn_oom) rc = tlm_error("out of memory keeping the attention patterns");
        if (pc.shown && pc.tty) fputc('\n', stderr);
        if (!rc) rc = residual_stats(r, p, c->d_model);
        if (!rc) rc = norm_stats(r, p);
        if (!rc) rc = logit_lens(r, m, p, lens);
        if (!rc) rc = decomposition(r, m, p);
        model_set_mode(m, mode);
    }
    probe_free(p);
    return rc;
}

void inspect_report_free(inspect_report *r) {
    if (!r) return;
    free(r->tokens), free(r->points), free(r->incr), free(r->norms), free(r->heads);
    free(r->lens_top), free(r->lens_top_prob), free(r->lens_top_logit), free(r->lens_grid), free(r->lens_grid_prob);
    free(r->point_norm_pos), free(r->incr_norm_pos), free(r->norm_in_pos), free(r->norm_out_pos);
    free(r->head_max_pos), free(r->head_ent_pos), free(r->pred_top), free(r->pred_top_prob), free(r->pred_top_logit);
    free(r->attn_q);
    free(r->terms), free(r->lens_kl), free(r->lens_kl_at);
    free(r->tuned_top), free(r->tuned_top_prob), free(r->tuned_top_logit), free(r->tuned_grid),
        free(r->tuned_grid_prob);
    free(r->tuned_kl), free(r->tuned_kl_at);
    free(r->moe_layer), free(r->moe_load), free(r->moe_entropy), free(r->moe_experts), free(r->moe_weights);
    memset(r, 0, sizeof *r);
}

/* ---- one training batch: gradient norms ------------------------------------------------------- */

static double sq(double x) { return x * x; }

int inspect_grad(tlm_model *m, const int *tokens, const int *targets, int B, int T, inspect_grad_report *r) {
    memset(r, 0, sizeof *r);
    const tlm_config *c = &m->cfg;
    const int L = c->n_layers;
    r->B = B, r->T = T, r->n_layers = L, r->n_tensors = m->n_tensors;
    r->dres = calloc((size_t)2 * L + 1, sizeof *r->dres);
    r->layer_attn = calloc((size_t)L, sizeof(double));
    r->layer_ffn = calloc((size_t)L, sizeof(double));
    r->layer_norms = calloc((size_t)L, sizeof(double));
    r->layer_total = calloc((size_t)L, sizeof(double));
    r->tensors = calloc((size_t)m->n_tensors, sizeof *r->tensors);
    if (!r->dres || !r->layer_attn || !r->layer_ffn || !r->layer_norms || !r->layer_total || !r->tensors)
        return tlm_error("out of memory for the gradient report");
    if (model_alloc_grads(m)) return -1;
    model_zero_grads(m);
    if (model_forward(m, tokens, targets, B, T, &r->loss) || model_backward(m, 1.0f)) return -1;
    /* the gradient at each point of the residual stream: the backward's own buffer, stage k */
    const size_t Nd = (size_t)B * T * c->d_model;
    for (int k = 0; k <= 2 * L; k++) {
        point_name(r->dres[k].name, sizeof r->dres[k].name, k);
        r->dres[k].v.at = r->dres[k].v.mean = l2(model_residual_grad(&m->ctx->acts, k), Nd);
    }
    /* parameter gradients, grouped by layer and sublayer (squares summed, then the root) */
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_info *t = &m->tensors[i];
        double n = l2(model_grad(m, i), t->numel);
        snprintf(r->tensors[i].name, sizeof r->tensors[i].name, "%s", t->name);
        r->tensors[i].v.at = r->tensors[i].v.mean = n;
        r->total += sq(n);
        int l, off = 0;
        if (sscanf(t->name, "layers.%d.%n", &l, &off) == 1 && off > 0 && l >= 0 && l < L) {
            const char *rest = t->name + off;
            double *group = !strncmp(rest, "attn.", 5) ? r->layer_attn : !strncmp(rest, "ffn.", 4) ? r->layer_ffn
                                                                                                    : r->layer_norms;
            group[l] += sq(n);
            r->layer_total[l] += sq(n);
        } else if (!strncmp(t->name, "embed.", 6)) {
            r->embed += sq(n);
        } else if (!strncmp(t->name, "pos_embed.", 10)) {
            r->pos_embed += sq(n), r->has_pos_embed = 1;
        } else if (!strncmp(t->name, "final_norm.", 11)) {
            r->final_norm += sq(n), r->has_final_norm = 1;
        } else if (!strncmp(t->name, "lm_head.", 8)) {
            r->lm_head += sq(n), r->has_lm_head = 1;
        }
    }
    for (int l = 0; l < L; l++) {
        r->layer_attn[l] = sqrt(r->layer_attn[l]), r->layer_ffn[l] = sqrt(r->layer_ffn[l]);
        r->layer_norms[l] = sqrt(r->layer_norms[l]), r->layer_total[l] = sqrt(r->layer_total[l]);
    }
    r->embed = sqrt(r->embed), r->pos_embed = sqrt(r->pos_embed), r->final_norm = sqrt(r->final_norm);
    r->lm_head = sqrt(r->lm_head), r->total = sqrt(r->total);
    return 0;
}

void inspect_grad_report_free(inspect_grad_report *r) {
    if (!r) return;
    free(r->dres), free(r->layer_attn), free(r->layer_ffn), free(r->layer_norms), free(r->layer_total);
    free(r->tensors);
    memset(r, 0, sizeof *r);
}
