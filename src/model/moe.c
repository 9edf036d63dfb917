/* moe.c — a mixture-of-experts FFN, forward and backward, over the rows of a pass context
 * (components.h). For N rows u [N, d], E experts, k chosen per row, fe = moe_intermediate_size:
 *
 *   z     = u W_r^T                       [N, E]  the router's logits (f32 products always)
 *   p     = softmax(z)  or  sigmoid(z)    [N, E]  the scores (scoring_func)
 *   idx   = top-k (of z for softmax, the order of p; of p + b for sigmoid, within the best
 *           topk_group groups when n_group > 1); ties: the lower expert index first
 *   w     = p[idx] (/ their sum: norm_topk_prob) * routed_scaling_factor     [N, k]
 *           (Gemma 4's MoE block: * expert_scale[idx] instead of the factor, and the router reads
 *           its own input ur, moe_block_forward's normed and scaled x, where the experts read u)
 *   rows are grouped by expert (a counting sort into slots): expert e's rows are the slots
 *   [off[e], off[e+1]), xs = u gathered into them, and each expert runs its GEMMs over all its
 *   rows at once (linear_forward, the engine's one product entry point):
 *   ey    = down_e(act(gate_e xs) * up_e xs)       [N k, d]
 *   f[n]  = sum_j w[n,j] ey[slot(n,j)]  (j in top-k order)  + shared(u)[n]
 *           (Qwen2-MoE: + sigmoid(u[n] . g) shared(u)[n], g the shared_expert_gate [1, d])
 *
 * The backward (docs/ops.md "Mixture of experts"): the experts' weights and inputs through the
 * slots, the router's weights through the weights w (softmax or sigmoid, the normalisation and
 * the scaling factor), the selection itself not differentiated (as in the references); the
 * load-balancing loss adds its gradient to the router's probabilities. Nothing allocates: the
 * buffers are the activation layout's (layout.c). Below: Gemma 4's MoE block (the experts beside the
 * dense FFN) and the decode step's share (moe_step). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "components.h"
#include "moe.h"
#include "kv_cache.h"

/* the pass's: the backward's scratch, [N k, d] x 2, [N k, fe] x 3, [N, E], [N, fs] x 3; the shared
 * expert's gate (shared_gate): d(its output) [N, d], d(gate logit) [N]; Gemma 4's MoE block: d mlp_f,
 * d moe_f, d(experts' input), d(router's input) [N, d], each chosen weight's gradient times its weight
 * before the expert's scale [N, k] (the scales' gradients); and the load-balancing loss's pooled
 * statistics of the last forward (docs/ops.md): the fraction of routed slots each expert got and its
 * mean softmax probability, over all MoE layers' rows as Hugging Face's load_balancing_loss_func
 * pools them [E] x 2 */
typedef struct {
    float *d_ey, *d_xs, *d_eg, *d_eu, *d_eh, *d_router, *d_sg, *d_su, *d_sh;
    float *d_sy, *d_sgate;
    float *d_mlp_f, *d_moe_f, *d_moe_u, *d_router_in, *d_topk;
    float *moe_frac, *moe_prob;
} moe_pass_acts;

const moe_acts *moe_layer_acts(const activations *A, int l) { return A->layers[l].own[COMPONENT_MOE]; }

/* ---- routing -------------------------------------------------------------------------------- */

/* the best k of key[0..n) among those with allow[i] (NULL: all) into idx, best first; a tie goes
 * to the lower index (the strict > below), the rule docs/config.md states */
static void top_k(int *idx, const float *key, const unsigned char *allow, int n, int k) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            if (allow && !allow[i]) continue;
            int taken = 0;
            for (int q = 0; q < j; q++) taken |= idx[q] == i;
            if (taken) continue;
            if (best < 0 || key[i] > key[best]) best = i;
        }
        idx[j] = best;
    }
}

/* One row: the scores p [E] from the logits z, the chosen experts and their weights. choice:
 * scratch [E] (sigmoid: p + b), allow: scratch [E] */
void moe_route_row(const tlm_config *c, const float *score_bias, const float *expert_scale, const float *z, float *p,
                   int *idx, float *w, float *choice, unsigned char *allow) {
    const int E = c->n_experts, k = c->n_experts_per_tok;
    if (c->scoring == SCORING_SOFTMAX) {
        float mx = z[0];
        for (int e = 1; e < E; e++) mx = z[e] > mx ? z[e] : mx;
        double sum = 0.0;
        for (int e = 0; e < E; e++) sum += (double)(p[e] = expf(z[e] - mx));
        const float inv = (float)(1.0 / sum);
        for (int e = 0; e < E; e++) p[e] *= inv;
        top_k(idx, z, NULL, E, k); /* (softmax keeps the logits' order, without its rounding) */
    } else {
        for (int e = 0; e < E; e++) p[e] = 1.0f / (1.0f + expf(-z[e]));
        for (int e = 0; e < E; e++) choice[e] = p[e] + (score_bias ? score_bias[e] : 0.0f);
        const unsigned char *ok = NULL;
        if (c->n_group > 1) { /* the groups whose best two sum highest; the others' experts excluded */
            const int G = c->n_group, per = E / G;
            float gs[TLM_MAX_EXPERTS];
            int two[2], chosen[TLM_MAX_EXPERTS];
            for (int g = 0; g < G; g++) {
                top_k(two, choice + (size_t)g * per, NULL, per, 2);
                gs[g] = choice[g * per + two[0]] + choice[g * per + two[1]];
            }
            top_k(chosen, gs, NULL, G, c->topk_group);
            memset(allow, 0, (size_t)E);
            for (int j = 0; j < c->topk_group; j++) memset(allow + (size_t)chosen[j] * per, 1, (size_t)per);
            ok = allow;
        }
        top_k(idx, choice, ok, E, k);
    }
    double sum = 0.0;
    for (int j = 0; j < k; j++) sum += w[j] = p[idx[j]];
    const double eps = c->scoring == SCORING_SIGMOID ? 1e-20 : 0.0; /* (DeepSeek-V3's denominator) */
    const float scale = c->norm_topk_prob ? (float)(c->routed_scaling_factor / (sum + eps)) : c->routed_scaling_factor;
    for (int j = 0; j < k; j++) w[j] *= scale;
    if (expert_scale) /* (Gemma4TextRouter: after the renormalisation) */
        for (int j = 0; j < k; j++) w[j] *= expert_scale[idx[j]];
}

/* the router's logits: always f32 products (a bf16 rounding would move the selection) */
static void router_logits(const pass_ctx *ctx, const linear_params *r, float *z, const float *u, int N) {
    const tlm_config *c = &ctx->m->cfg;
    if (r->w)
        matmul_forward(z, u, r->w, NULL, N, c->d_model, c->n_experts);
    else
        matmul_forward_bf16(z, u, r->w16, NULL, N, c->d_model, c->n_experts, ctx->A->w_tile, 0);
}

/* ---- the shared expert's gate (Qwen2MoeSparseMoeBlock: shared_expert_gate, a Linear d -> 1) --------- */

/* s [N] = sigmoid(u g^T) for u [N, d], g [1, d]; the product in f32 as the router's (a scalar gate per row) */
static void shared_gate_forward(const pass_ctx *ctx, const linear_params *g, const float *u, float *s, int N) {
    const int d = ctx->m->cfg.d_model;
    if (g->w)
        matmul_forward(s, u, g->w, NULL, N, d, 1);
    else
        matmul_forward_bf16(s, u, g->w16, NULL, N, d, 1, ctx->A->w_tile, 0);
    for (int n = 0; n < N; n++) s[n] = 1.0f / (1.0f + expf(-s[n]));
}

/* The gate's backward, for f = ... + s * sy: dsy [N, d] = s df (the shared expert's output gradient),
 * dz [N] = s (1 - s) <df, sy> (the gate logit's); then dg += dz^T u, du += dz g */
static void shared_gate_dsy(const float *s, const float *df, const float *sy, float *dsy, float *dz, int N, int d) {
#pragma omp parallel for schedule(static) if ((size_t)N * d > OMP_MIN_WORK)
    for (int n = 0; n < N; n++) {
        const float *g = df + (size_t)n * d, *y = sy + (size_t)n * d;
        float *o = dsy + (size_t)n * d;
        double acc = 0.0;
        for (int i = 0; i < d; i++) o[i] = s[n] * g[i], acc += (double)g[i] * y[i];
        dz[n] = (float)(acc * s[n] * (1.0 - s[n]));
    }
}

static void shared_gate_backward(linear_params *G, const linear_params *P, const float *dz, const float *u, float *du,
                                 int N, int d) {
    matmul_backward(du, G->w, NULL, dz, u, P->w, N, d, 1); /* (adds into du and into the weight's gradient) */
}

/* the slots: rows grouped by expert, in row order within an expert (a counting sort) */
static void group_rows(moe_acts *a, int N, int E, int k) {
    int *off = a->expert_off;
    memset(off, 0, sizeof(int) * (size_t)(E + 1));
    for (int i = 0; i < N * k; i++) off[a->topk_idx[i] + 1]++;
    for (int e = 0; e < E; e++) off[e + 1] += off[e];
    for (int n = 0; n < N; n++) /* (off[e] walks through expert e's slots, then is shifted back) */
        for (int j = 0; j < k; j++) {
            const int s = off[a->topk_idx[(size_t)n * k + j]]++;
            a->slot_row[s] = n;
            a->slot_of[(size_t)n * k + j] = s;
        }
    for (int e = E; e > 0; e--) off[e] = off[e - 1];
    off[0] = 0;
}

/* An expert's product over its rows. In a pass over many rows (pass_rows) with mixed precision on
 * f32 weights, a bf16 product even for an expert that got only a few of them: the few-row f32
 * path is decoding's, and a pass's products are either all bf16 or all f32 (as the reference's
 * Bf16Product rounds them all). */
static void expert_forward(const pass_ctx *ctx, float *out, const float *inp, const linear_params *lp, int rows, int IC,
                           int OC, int pass_rows) {
    if (linear_mixed(lp, pass_product_bf16(ctx), pass_rows))
        matmul_forward_mixed(out, inp, NULL, lp->w, lp->w16, NULL, rows, IC, OC);
    else
        linear_forward(pass_product_bf16(ctx), ctx->A->w_tile, out, inp, lp, rows, IC, OC);
}

static void expert_backward(const pass_ctx *ctx, int into, float *dinp, linear_params *G, const float *dout,
                            const float *inp, const linear_params *P, int rows, int IC, int OC, int pass_rows) {
    if (linear_mixed(P, pass_product_bf16(ctx), pass_rows))
        matmul_backward_bf16(into, dinp, G->w, NULL, dout, inp, NULL, P->w, P->w16, rows, IC, OC);
    else
        linear_backward(pass_product_bf16(ctx), into, dinp, G, dout, inp, NULL, P, rows, IC, OC);
}

/* ---- forward -------------------------------------------------------------------------------- */

void moe_forward(pass_ctx *ctx, int l, const float *ur, const float *u, float *f) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    moe_acts *a = ctx->A->layers[l].own[COMPONENT_MOE];
    moe_pass_acts *ps = ctx->A->own[COMPONENT_MOE];
    const int B = ctx->A->B, T = ctx->A->T, N = B * T, d = c->d_model, E = c->n_experts, k = c->n_experts_per_tok;
    const int fe = c->moe_d_ff, fs = config_shared_ff(c);
    const size_t stride = moe_expert_stride(c);
    const activation act = model_ffn_activation(c);
    router_logits(ctx, &P->router, a->router_logits, ur, N);
    PASS_POINT(ctx, model_point_id(c, l, PT_ROUTER_LOGITS), a->router_logits, 0); /* (a hook may reroute) */
#pragma omp parallel for schedule(static) if ((size_t)N * E > OMP_MIN_WORK)
    for (int n = 0; n < N; n++) {
        float choice[TLM_MAX_EXPERTS];
        unsigned char allow[TLM_MAX_EXPERTS];
        moe_route_row(c, P->score_bias, P->expert_scale, a->router_logits + (size_t)n * E,
                      a->router_probs + (size_t)n * E, a->topk_idx + (size_t)n * k, a->topk_w + (size_t)n * k, choice,
                      allow);
    }
    /* per sequence: rows sent to each expert and the sum of its scores (the load-balancing
     * loss's statistics, pooled over the batch by moe_pool_stats) */
    for (int b = 0; b < B; b++) {
        float *cnt = a->moe_stats + (size_t)b * 2 * E, *psum = cnt + E;
        memset(cnt, 0, sizeof(float) * 2 * (size_t)E);
        for (int t = 0; t < T; t++) {
            const size_t n = (size_t)b * T + t;
            for (int j = 0; j < k; j++) cnt[a->topk_idx[n * k + j]] += 1.0f;
            for (int e = 0; e < E; e++) psum[e] += a->router_probs[n * E + e];
        }
    }
    if (ctx->observed && ps->d_router) { /* the chosen experts as floats (in backward scratch) */
        for (size_t i = 0; i < (size_t)N * k; i++) ps->d_router[i] = (float)a->topk_idx[i];
        pass_fire(ctx, model_point_id(c, l, PT_EXPERT_IDS), ps->d_router, 0);
    }
    PASS_POINT(ctx, model_point_id(c, l, PT_EXPERT_WEIGHTS), a->topk_w, 0);
    group_rows(a, N, E, k);
    const size_t NK = (size_t)N * k;
#pragma omp parallel for schedule(static) if (NK * d > OMP_MIN_WORK)
    for (size_t s = 0; s < NK; s++) memcpy(a->xs + s * d, u + (size_t)a->slot_row[s] * d, sizeof(float) * d);
    for (int e = 0; e < E; e++) {
        const int r0 = a->expert_off[e], rows = a->expert_off[e + 1] - r0;
        if (rows == 0) continue;
        const linear_params gate = moe_expert(&P->expert_gate, e, stride), up = moe_expert(&P->expert_up, e, stride),
                            down = moe_expert(&P->expert_down, e, stride);
        float *eg = a->eg + (size_t)r0 * fe, *eu = a->eu + (size_t)r0 * fe, *eh = a->eh + (size_t)r0 * fe;
        expert_forward(ctx, eg, a->xs + (size_t)r0 * d, &gate, rows, d, fe, N);
        expert_forward(ctx, eu, a->xs + (size_t)r0 * d, &up, rows, d, fe, N);
        glu_forward(eh, eg, eu, (size_t)rows * fe, act);
        expert_forward(ctx, a->ey + (size_t)r0 * d, eh, &down, rows, fe, d, N);
    }
    if (ctx->observed && ps->d_ey) { /* each row's chosen experts' outputs, best first [N, k, d] */
        for (size_t i = 0; i < (size_t)N * k; i++)
            memcpy(ps->d_ey + i * d, a->ey + (size_t)a->slot_of[i] * d, sizeof(float) * d);
        pass_fire(ctx, model_point_id(c, l, PT_EXPERT_OUT), ps->d_ey, 0);
    }
    if (fs) {
        linear_forward(pass_product_bf16(ctx), ctx->A->w_tile, a->sg, u, &P->shared_gate, N, d, fs);
        linear_forward(pass_product_bf16(ctx), ctx->A->w_tile, a->su, u, &P->shared_up, N, d, fs);
        glu_forward(a->sh, a->sg, a->su, (size_t)N * fs, act);
        linear_forward(pass_product_bf16(ctx), ctx->A->w_tile, a->sy, a->sh, &P->shared_down, N, fs, d);
        if (c->shared_gate) shared_gate_forward(ctx, &P->shared_expert_gate, u, a->s_gate, N);
    }
#pragma omp parallel for schedule(static) if ((size_t)N * d * k > OMP_MIN_WORK)
    for (int n = 0; n < N; n++) {
        float *out = f + (size_t)n * d;
        memset(out, 0, sizeof(float) * d);
        for (int j = 0; j < k; j++) {
            const float w = a->topk_w[(size_t)n * k + j];
            const float *y = a->ey + (size_t)a->slot_of[(size_t)n * k + j] * d;
            for (int i = 0; i < d; i++) out[i] += w * y[i];
        }
        if (fs) {
            const float sg = c->shared_gate ? a->s_gate[n] : 1.0f;
            for (int i = 0; i < d; i++) out[i] += sg * a->sy[(size_t)n * d + i];
        }
    }
}

/* ---- backward ------------------------------------------------------------------------------- */

/* du = d(MoE)/du . df (set) through the experts, and dur = d(MoE)/dur . df through the router (set;
 * dur == du when the router reads u: then both paths add into du); the weight gradients into ctx->g */
void moe_backward(pass_ctx *ctx, int l, const float *ur, const float *u, const float *df, float *dur, float *du) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_params *G = &ctx->g->layers[l];
    const moe_acts *a = ctx->A->layers[l].own[COMPONENT_MOE];
    const moe_pass_acts *ps = ctx->A->own[COMPONENT_MOE];
    activations *A = ctx->A;
    const int N = A->B * A->T, d = c->d_model, E = c->n_experts, k = c->n_experts_per_tok;
    const int fe = c->moe_d_ff, fs = config_shared_ff(c);
    const size_t stride = moe_expert_stride(c);
    const activation act = model_ffn_activation(c);
    const float alpha = c->routed_scaling_factor;
    const moe_pass_acts *whole = ctx->run->acts.own[COMPONENT_MOE];
    const float *frac = whole->moe_frac; /* (the whole batch's, for the load-balancing loss) */
    const float aux = ctx->aux_scale;
    /* each slot's output gradient w df, each weight's <df, ey>, and through the weights the
     * router's logits (a row at a time: its k weights, then its E scores) */
#pragma omp parallel for schedule(static) if ((size_t)N * d * k > OMP_MIN_WORK)
    for (int n = 0; n < N; n++) {
        const float *g = df + (size_t)n * d, *p = a->router_probs + (size_t)n * E;
        const int *idx = a->topk_idx + (size_t)n * k;
        double dw[TLM_MAX_EXPERTS];
        for (int j = 0; j < k; j++) {
            const size_t s = (size_t)a->slot_of[(size_t)n * k + j];
            const float w = a->topk_w[(size_t)n * k + j], *y = a->ey + s * d;
            float *dy = ps->d_ey + s * d;
            double acc = 0.0;
            for (int i = 0; i < d; i++) dy[i] = w * g[i], acc += (double)g[i] * y[i];
            dw[j] = acc;
        }
        if (P->expert_scale) { /* w_j = v_j s[idx_j], v_j = p_j / S: d s gets dw_j v_j (summed below, in row
                                  order), and v_j gets dw_j s[idx_j] */
            double S = 0.0;
            for (int j = 0; j < k; j++) S += p[idx[j]];
            for (int j = 0; j < k; j++) {
                ps->d_topk[(size_t)n * k + j] = (float)(dw[j] * (alpha * p[idx[j]] / (c->norm_topk_prob ? S : 1.0)));
                dw[j] *= P->expert_scale[idx[j]];
            }
        }
        /* dw -> dp at the chosen experts: w_j = alpha p_j (/ S, S = sum of the chosen p) */
        float *dz = ps->d_router + (size_t)n * E;
        double dp[TLM_MAX_EXPERTS];
        for (int e = 0; e < E; e++) dp[e] = 0.0;
        if (c->norm_topk_prob) {
            double S = 0.0, dot = 0.0;
            for (int j = 0; j < k; j++) S += p[idx[j]];
            if (c->scoring == SCORING_SIGMOID) S += 1e-20;
            for (int j = 0; j < k; j++) dot += dw[j] * p[idx[j]] / S;
            for (int j = 0; j < k; j++) dp[idx[j]] += alpha / S * (dw[j] - dot);
        } else {
            for (int j = 0; j < k; j++) dp[idx[j]] += alpha * dw[j];
        }
        if (c->scoring == SCORING_SOFTMAX) {
            if (aux != 0.0f) /* the load-balancing loss: d(E sum F_e P_e)/dp_e = E F_e / R (aux_scale holds E / R) */
                for (int e = 0; e < E; e++) dp[e] += (double)aux * frac[e];
            double dot = 0.0;
            for (int e = 0; e < E; e++) dot += dp[e] * p[e];
            for (int e = 0; e < E; e++) dz[e] = (float)(p[e] * (dp[e] - dot));
        } else {
            for (int e = 0; e < E; e++) dz[e] = (float)(dp[e] * p[e] * (1.0 - p[e]));
        }
    }
    PASS_POINT(ctx, model_point_id(c, l, PT_ROUTER_LOGITS), ps->d_router, 1);
    if (P->expert_scale) /* (one thread, rows in order: the same sum whatever the thread count) */
        for (int n = 0; n < N; n++)
            for (int j = 0; j < k; j++) G->expert_scale[a->topk_idx[(size_t)n * k + j]] += ps->d_topk[(size_t)n * k + j];
    /* each expert over its slots: down, the gated unit, gate and up (d_xs set by gate, up adds) */
    for (int e = 0; e < E; e++) {
        const int r0 = a->expert_off[e], rows = a->expert_off[e + 1] - r0;
        if (rows == 0) continue;
        const linear_params gate = moe_expert(&P->expert_gate, e, stride), up = moe_expert(&P->expert_up, e, stride),
                            down = moe_expert(&P->expert_down, e, stride);
        linear_params dgate = moe_expert(&G->expert_gate, e, stride), dup = moe_expert(&G->expert_up, e, stride),
                      ddown = moe_expert(&G->expert_down, e, stride);
        const size_t h0 = (size_t)r0 * fe, x0 = (size_t)r0 * d;
        expert_backward(ctx, 1, ps->d_eh + h0, &ddown, ps->d_ey + x0, a->eh + h0, &down, rows, fe, d, N);
        glu_backward(ps->d_eg + h0, ps->d_eu + h0, ps->d_eh + h0, a->eg + h0, a->eu + h0, (size_t)rows * fe, act);
        expert_backward(ctx, 1, ps->d_xs + x0, &dgate, ps->d_eg + h0, a->xs + x0, &gate, rows, d, fe, N);
        expert_backward(ctx, 0, ps->d_xs + x0, &dup, ps->d_eu + h0, a->xs + x0, &up, rows, d, fe, N);
    }
    /* du: the shared expert's path (or 0), the router's, then each row's k slots */
    if (fs) {
        const float *dsy = df; /* (the shared expert's output gradient: df, or s df behind the gate) */
        if (c->shared_gate) shared_gate_dsy(a->s_gate, df, a->sy, ps->d_sy, ps->d_sgate, N, d), dsy = ps->d_sy;
        linear_backward(pass_product_bf16(ctx), 1, ps->d_sh, &G->shared_down, dsy, a->sh, NULL, &P->shared_down, N, fs, d);
        glu_backward(ps->d_sg, ps->d_su, ps->d_sh, a->sg, a->su, (size_t)N * fs, act);
        linear_backward(pass_product_bf16(ctx), 1, du, &G->shared_gate, ps->d_sg, u, NULL, &P->shared_gate, N, d, fs);
        linear_backward(pass_product_bf16(ctx), 0, du, &G->shared_up, ps->d_su, u, NULL, &P->shared_up, N, d, fs);
        if (c->shared_gate) shared_gate_backward(&G->shared_expert_gate, &P->shared_expert_gate, ps->d_sgate, u, du, N, d);
    } else {
        vec_zero(du, (size_t)N * d);
    }
    if (dur != du) vec_zero(dur, (size_t)N * d);
    matmul_backward(dur, G->router.w, NULL, ps->d_router, ur, P->router.w, N, d, E);
#pragma omp parallel for schedule(static) if ((size_t)N * d * k > OMP_MIN_WORK)
    for (int n = 0; n < N; n++) {
        float *o = du + (size_t)n * d;
        for (int j = 0; j < k; j++) {
            const float *x = ps->d_xs + (size_t)a->slot_of[(size_t)n * k + j] * d;
            for (int i = 0; i < d; i++) o[i] += x[i];
        }
    }
}

/* ---- the load-balancing loss's statistics ----------------------------------------------------- */

void moe_pool_stats(tlm_context *ctx) {
    const tlm_config *c = &ctx->m->cfg;
    activations *A = &ctx->acts;
    moe_pass_acts *ps = A->own[COMPONENT_MOE];
    const int E = c->n_experts, L = config_moe_layers(c);
    A->moe_aux = 0.0f;
    if (!L || A->one_layer || !ps->moe_frac) return;
    double cnt[TLM_MAX_EXPERTS] = {0}, psum[TLM_MAX_EXPERTS] = {0};
    for (int l = 0; l < c->n_layers; l++) {
        if (!config_layer_is_moe(c, l)) continue;
        for (int b = 0; b < A->B; b++) {
            const float *s = ((const moe_acts *)A->layers[l].own[COMPONENT_MOE])->moe_stats + (size_t)b * 2 * E;
            for (int e = 0; e < E; e++) cnt[e] += s[e], psum[e] += s[E + e];
        }
    }
    /* Hugging Face pools every MoE layer's rows: R = layers x rows; F_e sums over the k choices */
    const double R = (double)L * A->B * A->T;
    double aux = 0.0;
    for (int e = 0; e < E; e++) {
        ps->moe_frac[e] = (float)(cnt[e] / R), ps->moe_prob[e] = (float)(psum[e] / R);
        aux += cnt[e] / R * (psum[e] / R);
    }
    A->moe_aux = c->scoring == SCORING_SOFTMAX ? (float)(E * aux) : 0.0f;
}

/* ---- Gemma 4's MoE block (moe_block): the experts beside the dense FFN ---------------------------
 * On the FFN sublayer's stream x [N, d] and its input norm's output u [N, d] (Gemma4TextDecoderLayer):
 *   mlp_f = MLP(u)                              the dense FFN          [N, d]
 *   r     = rmsnorm(x) * scale * d^-0.5         the router's input (no weight of its own; scale [d])
 *   u2    = N_in2(x)                            the experts' input     (pre_feedforward_layernorm_2)
 *   moe_f = MoE(router on r, experts on u2)     weights p_j / S * expert_scale[idx_j]
 *   f     = N_1(mlp_f) + N_2(moe_f)             (post_feedforward_layernorm_1 / _2)
 * and the sublayer's output norm (post_feedforward_layernorm) then norms f as for every FFN. */
void moe_block_forward(pass_ctx *ctx, int l, const float *x, const float *u, float *f) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    moe_acts *a = ctx->A->layers[l].own[COMPONENT_MOE];
    const int N = ctx->A->B * ctx->A->T, d = c->d_model;
    const size_t Nd = (size_t)N * d;
    ffn_sublayer_forward(ctx, l, u, a->mlp_f);
    model_norm_forward(c, a->dense_n.y, &a->dense_n, &P->dense_out_norm, a->mlp_f, N);
    rmsnorm_forward(a->router_in.y, a->router_in.rstd, x, P->router_scale, 0.0f, N, d, c->norm_eps);
    const float rs = 1.0f / sqrtf((float)d);
    for (size_t i = 0; i < Nd; i++) a->router_in.y[i] *= rs;
    model_norm_forward(c, a->moe_in.y, &a->moe_in, &P->moe_in_norm, x, N);
    moe_forward(ctx, l, a->router_in.y, a->moe_in.y, a->moe_f);
    model_norm_forward(c, a->moe_n.y, &a->moe_n, &P->moe_out_norm, a->moe_f, N);
    vec_add(f, a->dense_n.y, a->moe_n.y, Nd);
}

/* df -> du (set) through the dense path; the experts' and the router's input gradients kept in
 * ps->d_moe_u, ps->d_router_in for moe_block_backward_x */
void moe_block_backward(pass_ctx *ctx, int l, const float *u, const float *df, float *du) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_params *G = &ctx->g->layers[l];
    const moe_acts *a = ctx->A->layers[l].own[COMPONENT_MOE];
    const moe_pass_acts *ps = ctx->A->own[COMPONENT_MOE];
    activations *A = ctx->A;
    const int N = A->B * A->T;
    model_norm_backward(c, ps->d_mlp_f, NULL, &G->dense_out_norm, df, &a->dense_n, &P->dense_out_norm, a->mlp_f, N);
    ffn_sublayer_backward(ctx, l, u, ps->d_mlp_f, du);
    model_norm_backward(c, ps->d_moe_f, NULL, &G->moe_out_norm, df, &a->moe_n, &P->moe_out_norm, a->moe_f, N);
    moe_backward(ctx, l, a->router_in.y, a->moe_in.y, ps->d_moe_f, ps->d_router_in, ps->d_moe_u);
}

/* dx += the gradients at x of the experts' input norm and of the router's input */
void moe_block_backward_x(pass_ctx *ctx, int l, const float *x, float *dx) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_params *G = &ctx->g->layers[l];
    const moe_acts *a = ctx->A->layers[l].own[COMPONENT_MOE];
    const moe_pass_acts *ps = ctx->A->own[COMPONENT_MOE];
    activations *A = ctx->A;
    const int N = A->B * A->T, d = c->d_model;
    const size_t Nd = (size_t)N * d;
    model_norm_backward(c, dx, dx, &G->moe_in_norm, ps->d_moe_u, &a->moe_in, &P->moe_in_norm, x, N);
    const float rs = 1.0f / sqrtf((float)d);
    for (size_t i = 0; i < Nd; i++) ps->d_router_in[i] *= rs;
    rmsnorm_backward(dx, dx, G->router_scale, ps->d_router_in, x, P->router_scale, 0.0f, a->router_in.rstd, N, d);
}

/* ---- the decode step -------------------------------------------------------------------------------- */

/* f (shared) = F of a mixture-of-experts layer l on u, as moe_forward computes it for one row:
 * the router's rows shared out, then every thread routes (the same bits on each), then each chosen
 * expert as a dense FFN (its gate and up rows, the GLU, its down rows: two barriers), the shared
 * expert, and each thread its share of f = sum_j w_j y_j (+ shared), in moe_forward's order */
void moe_step(const step_ctx *s, int l, const float *u, float *f) {
    const tlm_config *cfg = &s->m->cfg;
    const step_shared *sh = &s->c->sh;
    const layer_params *P = &s->m->p.layers[l];
    const int d = cfg->d_model, E = cfg->n_experts, k = cfg->n_experts_per_tok, fe = cfg->moe_d_ff;
    const int fs = config_shared_ff(cfg);
    const size_t stride = moe_expert_stride(cfg);
    const activation act = model_ffn_activation(cfg);
    int lo, hi;
    step_share(E, s, &lo, &hi);
    linear_step(sh->router, u, &P->router, d, lo, hi);
#pragma omp barrier
    float p[TLM_MAX_EXPERTS], w[TLM_MAX_EXPERTS], choice[TLM_MAX_EXPERTS];
    int idx[TLM_MAX_EXPERTS];
    unsigned char allow[TLM_MAX_EXPERTS];
    moe_route_row(cfg, P->score_bias, P->expert_scale, sh->router, p, idx, w, choice, allow);
    for (int j = 0; j < k; j++) {
        const linear_params gate = moe_expert(&P->expert_gate, idx[j], stride),
                            up = moe_expert(&P->expert_up, idx[j], stride),
                            down = moe_expert(&P->expert_down, idx[j], stride);
        step_share(fe, s, &lo, &hi);
        linear_step(sh->gu, u, &gate, d, lo, hi);
        linear_step(sh->gu + fe, u, &up, d, lo, hi);
        glu_forward_range(sh->hid, sh->gu, sh->gu + fe, (size_t)lo, (size_t)hi, act);
#pragma omp barrier
        step_share(d, s, &lo, &hi);
        linear_step(sh->ey + (size_t)j * d, sh->hid, &down, fe, lo, hi);
#pragma omp barrier /* (the next expert writes hid) */
    }
    if (fs) {
        step_share(fs, s, &lo, &hi);
        linear_step(sh->gu, u, &P->shared_gate, d, lo, hi);
        linear_step(sh->gu + fs, u, &P->shared_up, d, lo, hi);
        glu_forward_range(sh->hid, sh->gu, sh->gu + fs, (size_t)lo, (size_t)hi, act);
        if (cfg->shared_gate) { /* Qwen2-MoE's gate logit u . g into sh.sgate[0] (one thread's row, as the router's) */
            step_share(1, s, &lo, &hi);
            linear_step(sh->sgate, u, &P->shared_expert_gate, d, lo, hi);
        }
#pragma omp barrier
        step_share(d, s, &lo, &hi);
        linear_step(sh->sy, sh->hid, &P->shared_down, fs, lo, hi);
    }
    /* (the gate's logit, one thread's, read by all after the barrier above) */
    const float sg = fs && cfg->shared_gate ? 1.0f / (1.0f + expf(-sh->sgate[0])) : 1.0f;
    step_share(d, s, &lo, &hi); /* (the rows of ey and sy this thread wrote itself) */
    for (int i = lo; i < hi; i++) {
        float acc = 0.0f;
        for (int j = 0; j < k; j++) acc += w[j] * sh->ey[(size_t)j * d + i];
        if (fs) acc += sg * sh->sy[i];
        f[i] = acc;
    }
#pragma omp barrier
}

/* ---- the components ---------------------------------------------------------------------------------- */

static void moe_forward_op(pass_ctx *ctx, int l, const float *x, const float *u, float *f) {
    (void)x;
    moe_forward(ctx, l, u, u, f);
}
static void moe_backward_op(pass_ctx *ctx, int l, const float *u, const float *df, float *du) {
    moe_backward(ctx, l, u, u, df, du, du);
}

/* its tensors in layer l: the router (HF: mlp.gate) and, for sigmoid scoring, its selection bias;
 * each expert's gate, up and down back to back, expert after expert (the views bind expert 0's;
 * moe_expert finds the others at a fixed stride); the shared expert. */
static void moe_params(param_walk *w, layer_params *L, int l) {
    const tlm_config *c = w->cfg;
    const int d = c->d_model, E = c->n_experts, fe = c->moe_d_ff, fs = config_shared_ff(c);
    char n[96];
    snprintf(n, sizeof n, "layers.%d.ffn.router", l);
    walk_linear(w, &L->router, n, E, d, false, TENSOR_MATRIX);
    if (config_router_has_bias(c)) {
        snprintf(n, sizeof n, "layers.%d.ffn.router.e_score_correction_bias", l);
        walk_add(w, &L->score_bias, n, E, 0, TENSOR_BIAS, 0.0f);
    }
    if (c->moe_block) { /* Gemma 4's router: its input's scale, each expert's weight scale (gains: start at 1) */
        snprintf(n, sizeof n, "layers.%d.ffn.router.scale", l);
        walk_add(w, &L->router_scale, n, d, 0, TENSOR_NORM, 1.0f);
        snprintf(n, sizeof n, "layers.%d.ffn.router.expert_scale", l);
        walk_add(w, &L->expert_scale, n, E, 0, TENSOR_NORM, 1.0f);
    }
    const matrix_slots none = {0};
    for (int e = 0; e < E; e++) {
        snprintf(n, sizeof n, "layers.%d.ffn.experts.%d.gate_proj.weight", l, e);
        walk_kept(w, e ? none : LINEAR_SLOTS(&L->expert_gate), n, fe, d, TENSOR_MATRIX, 0.0f);
        snprintf(n, sizeof n, "layers.%d.ffn.experts.%d.up_proj.weight", l, e);
        walk_kept(w, e ? none : LINEAR_SLOTS(&L->expert_up), n, fe, d, TENSOR_MATRIX, 0.0f);
        snprintf(n, sizeof n, "layers.%d.ffn.experts.%d.down_proj.weight", l, e);
        walk_kept(w, e ? none : LINEAR_SLOTS(&L->expert_down), n, d, fe, TENSOR_RESIDUAL_MATRIX, 0.0f);
    }
    if (fs > 0) {
        snprintf(n, sizeof n, "layers.%d.ffn.shared_experts.gate_proj", l);
        walk_linear(w, &L->shared_gate, n, fs, d, false, TENSOR_MATRIX);
        snprintf(n, sizeof n, "layers.%d.ffn.shared_experts.up_proj", l);
        walk_linear(w, &L->shared_up, n, fs, d, false, TENSOR_MATRIX);
        snprintf(n, sizeof n, "layers.%d.ffn.shared_experts.down_proj", l);
        walk_linear(w, &L->shared_down, n, d, fs, false, TENSOR_RESIDUAL_MATRIX);
        if (c->shared_gate) { /* (HF: mlp.shared_expert_gate, a Linear d -> 1 without bias) */
            snprintf(n, sizeof n, "layers.%d.ffn.shared_expert_gate", l);
            walk_linear(w, &L->shared_expert_gate, n, 1, d, false, TENSOR_MATRIX);
        }
    }
}

/* Gemma 4's MoE block: the dense FFN's tensors, the dense output's norm, the experts' input and
 * output norms, then the experts' */
static void moe_block_params(param_walk *w, layer_params *L, int l) {
    char n[96];
    ffn_params(w, L, l);
    snprintf(n, sizeof n, "layers.%d.dense_out_norm", l), walk_norm(w, &L->dense_out_norm, n, 0.0f);
    snprintf(n, sizeof n, "layers.%d.moe_in_norm", l), walk_norm(w, &L->moe_in_norm, n, 0.0f);
    snprintf(n, sizeof n, "layers.%d.moe_out_norm", l), walk_norm(w, &L->moe_out_norm, n, 0.0f);
    moe_params(w, L, l);
}

/* An MoE layer's buffers (in the inference layout: in layer 0's when any layer is one; Gemma 4's
 * MoE block's too): the router's, the routing (ints in float slots), the gathered rows and the
 * experts' activations, the shared expert's, the load statistics. The per-expert offsets are E + 1
 * per sequence, so that a part of a split batch (an arena with b0 set) gets room of its own. */
static void moe_layout(layout_ctx *lc, arena *a, layer_acts *layer, int l) {
    const tlm_config *c = lc->c;
    moe_acts *L = layer->own[COMPONENT_MOE];
    if (lc->reuse) return;
    const int moe = lc->one_layer ? config_moe_layers(c) > 0 : config_layer_is_moe(c, l);
    arena none = {0};
    arena *m = moe ? a : &none;
    const size_t N = lc->N, E = (size_t)c->n_experts, K = (size_t)c->n_experts_per_tok, fe = (size_t)c->moe_d_ff,
                 fs = (size_t)config_shared_ff(c), d = (size_t)c->d_model;
    L->router_logits = take(m, N * E);
    L->router_probs = take(m, N * E);
    L->topk_idx = (int *)take(m, N * K);
    L->topk_w = take(m, N * K);
    L->slot_of = (int *)take(m, N * K);
    L->slot_row = (int *)take(m, N * K);
    L->expert_off = (int *)take(m, (size_t)lc->B * (E + 1));
    L->xs = take(m, N * K * d);
    L->eg = take(m, N * K * fe);
    L->eu = take(m, N * K * fe);
    L->eh = take(m, N * K * fe);
    L->ey = take(m, N * K * d);
    arena *sm = moe && fs ? a : &none;
    L->sg = take(sm, N * fs);
    L->su = take(sm, N * fs);
    L->sh = take(sm, N * fs);
    L->sy = take(sm, N * d);
    L->s_gate = take(moe && fs && c->shared_gate ? a : &none, N);
    L->moe_stats = take(m, (size_t)lc->B * 2 * E);
    /* Gemma 4's MoE block: the dense output and its norm, the router's and the experts' inputs, the
     * experts' sum and its norm */
    arena *gb = moe && c->moe_block ? a : &none;
    L->mlp_f = take(gb, N * d);
    L->moe_f = take(gb, N * d);
    norm_acts *ns[4] = {&L->dense_n, &L->router_in, &L->moe_in, &L->moe_n};
    for (int i = 0; i < 4; i++) {
        ns[i]->y = take(gb, N * d);
        ns[i]->mean = take(gb, N);
        ns[i]->rstd = take(gb, N);
    }
}

/* the backward's scratch, and the pooled load statistics (the whole batch's: a split pass's parts
 * write only their rows' sums; in either layout) */
static void moe_scratch(const layout_ctx *lc, arena *a, arena *b, activations *A) {
    const tlm_config *c = lc->c;
    moe_pass_acts *ps = A->own[COMPONENT_MOE];
    const int any_moe = config_moe_layers(c) > 0;
    const size_t N = lc->N, d = (size_t)c->d_model, E = (size_t)c->n_experts, K = (size_t)c->n_experts_per_tok,
                 fe = (size_t)c->moe_d_ff, fs = (size_t)config_shared_ff(c);
    arena none = {0};
    arena *mb = any_moe ? b : &none;
    ps->d_ey = take(mb, N * K * d);
    ps->d_xs = take(mb, N * K * d);
    ps->d_eg = take(mb, N * K * fe);
    ps->d_eu = take(mb, N * K * fe);
    ps->d_eh = take(mb, N * K * fe);
    ps->d_router = take(mb, N * E);
    arena *gb = any_moe && c->moe_block ? b : &none;
    ps->d_mlp_f = take(gb, N * d);
    ps->d_moe_f = take(gb, N * d);
    ps->d_moe_u = take(gb, N * d);
    ps->d_router_in = take(gb, N * d);
    ps->d_topk = take(gb, N * K);
    arena *sb = any_moe && fs ? b : &none;
    ps->d_sg = take(sb, N * fs);
    ps->d_su = take(sb, N * fs);
    ps->d_sh = take(sb, N * fs);
    arena *gs = any_moe && fs && c->shared_gate ? b : &none;
    ps->d_sy = take(gs, N * d);
    ps->d_sgate = take(gs, N);
    arena *st = any_moe ? a : &none;
    ps->moe_frac = take_shared(st, E);
    ps->moe_prob = take_shared(st, E);
}

const sublayer_ops MOE_OPS = {.forward = moe_forward_op,
                              .backward = moe_backward_op,
                              .step = moe_step,
                              .params = moe_params,
                              .layout = moe_layout,
                              .scratch = moe_scratch,
                              .layer_acts_size = sizeof(moe_acts),
                              .pass_acts_size = sizeof(moe_pass_acts)};
/* (no step: a model with it decodes through the full pass with the cache; its buffers are MOE_OPS's
 * and FFN_OPS's layout's) */
const sublayer_ops MOE_BLOCK_OPS = {.forward = moe_block_forward,
                                    .backward = moe_block_backward,
                                    .backward_x = moe_block_backward_x,
                                    .params = moe_block_params};
