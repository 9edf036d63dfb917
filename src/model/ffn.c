/* ffn.c — the dense feed-forward sublayer, forward and backward over rows and the decode step's
 * share (ffn_step). N = B*T rows, d = d_model, f = the layer's d_ff, u [N,d] -> f [N,d]:
 *
 *   gelu:  up = u W_up^T [N,f];  hid = gelu(up)
 *   gated: gate|up = u W_gu^T [N,f|f];  hid = act(gate) * up
 *   f = hid W_down^T [N,d] */
#include <stdio.h>

#include "components.h"
#include "kv_cache.h"

/* a dense FFN layer's own buffers (the widest layer's d_ff f in the inference layout) */
typedef struct {
    float *gate, *up, *hid; /* [N, f] */
    uint16_t *hid16;        /* mixed-precision training: hid as the forward rounded it for down [N, f] */
} ffn_acts;

/* its backward scratch [N, f] x 3 */
typedef struct {
    float *dgate, *dup, *dhid;
} ffn_pass_acts;

void ffn_sublayer_forward(pass_ctx *ctx, int l, const float *u, float *f) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_acts *L = &ctx->A->layers[l];
    ffn_acts *a = L->own[COMPONENT_FFN];
    const int N = ctx->A->B * ctx->A->T, d = c->d_model, ff = config_layer_ff(c, l);
    uint16_t *hid16 = ctx->observed ? NULL : a->hid16; /* (the activation rounds hid for down's product) */
    if (c->ffn == FFN_GELU) {
        linear_forward_kept(ctx, a->up, u, L->u16[SUB_FFN], &P->up, N, d, ff);
        PASS_POINT(ctx, model_point_id(c, l, PT_MLP_PRE), a->up, 0);
        act_forward_bf16(a->hid, hid16, a->up, (size_t)N * ff, ACT_GELU_TANH);
    } else {
        float *gu_out[2] = {a->gate, a->up};
        const linear_params *gu_parts[2] = {&P->gate, &P->up};
        const int gu_widths[2] = {ff, ff};
        project_parts(ctx, gu_out, gu_parts, gu_widths, 2, &P->gate_up, u, L->u16[SUB_FFN], N, d);
        PASS_POINT(ctx, model_point_id(c, l, PT_MLP_PRE), a->gate, 0);
        PASS_POINT(ctx, model_point_id(c, l, PT_MLP_PRE_LINEAR), a->up, 0);
        glu_forward_bf16(a->hid, hid16, a->gate, a->up, (size_t)N * ff, model_ffn_activation(c));
    }
    ctx->copy16_of = hid16 ? a->hid : NULL;
    PASS_POINT(ctx, model_point_id(c, l, PT_MLP_POST), a->hid, 0);
    linear_forward_kept(ctx, f, a->hid, a->hid16, &P->down, N, ff, d);
}

/* du = d(feed-forward sublayer)/du . df (set) */
void ffn_sublayer_backward(pass_ctx *ctx, int l, const float *u, const float *df, float *du) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    const layer_params *P = &m->p.layers[l];
    layer_params *G = &ctx->g->layers[l];
    const layer_acts *L = &ctx->A->layers[l];
    const ffn_acts *a = L->own[COMPONENT_FFN];
    const ffn_pass_acts *S = ctx->A->own[COMPONENT_FFN];
    const int N = ctx->A->B * ctx->A->T, d = c->d_model, ff = config_layer_ff(c, l);
    const size_t n = (size_t)N * ff;
    linear_backward(pass_product_bf16(ctx), 1, S->dhid, &G->down, df, a->hid, backward_input(pass_product_bf16(ctx), &P->down, a->hid, N, ff, a->hid16, 0), &P->down, N,
                    ff, d);
    PASS_POINT(ctx, model_point_id(c, l, PT_MLP_POST), S->dhid, 1);
    if (c->ffn == FFN_GELU) {
        act_backward(S->dup, S->dhid, a->up, n, ACT_GELU_TANH);
        PASS_POINT(ctx, model_point_id(c, l, PT_MLP_PRE), S->dup, 1);
        linear_backward(pass_product_bf16(ctx), 1, du, &G->up, S->dup, u, backward_input(pass_product_bf16(ctx), &P->up, u, N, d, L->u16[SUB_FFN], 0), &P->up, N, d,
                        ff);
    } else {
        glu_backward(S->dgate, S->dup, S->dhid, a->gate, a->up, n, model_ffn_activation(c));
        PASS_POINT(ctx, model_point_id(c, l, PT_MLP_PRE), S->dgate, 1);
        PASS_POINT(ctx, model_point_id(c, l, PT_MLP_PRE_LINEAR), S->dup, 1);
        const uint16_t *u16 = backward_input(pass_product_bf16(ctx), &P->gate, u, N, d, L->u16[SUB_FFN], 1);
        linear_backward(pass_product_bf16(ctx), 1, du, &G->gate, S->dgate, u, u16, &P->gate, N, d, ff);
        linear_backward(pass_product_bf16(ctx), 0, du, &G->up, S->dup, u, u16, &P->up, N, d, ff);
    }
}

/* ---- the decode step -------------------------------------------------------------------------------- */

/* f (shared) = F of the feed-forward sublayer of layer l on u, as ffn_sublayer_forward computes it for one row */
void ffn_step(const step_ctx *s, int l, const float *u, float *f) {
    const tlm_config *cfg = &s->m->cfg;
    const step_shared *sh = &s->c->sh;
    const layer_params *P = &s->m->p.layers[l];
    const int d = cfg->d_model, ff = config_layer_ff(cfg, l); /* (Gemma 4's double-wide layers) */
    int lo, hi;
    step_share(ff, s, &lo, &hi);
    if (cfg->ffn == FFN_GELU) {
        linear_step(sh->gu, u, &P->up, d, lo, hi);
        act_forward_range(sh->hid, sh->gu, (size_t)lo, (size_t)hi, ACT_GELU_TANH);
    } else { /* the same rows of gate and of up (fused: up's rows follow gate's), then their GLU */
        const linear_params *parts[2] = {&P->gate, &P->up};
        const int widths[2] = {ff, ff};
        linear_parts_step(sh->gu, u, &P->gate_up, parts, widths, 2, d, lo, hi);
        linear_parts_step(sh->gu, u, &P->gate_up, parts, widths, 2, d, ff + lo, ff + hi);
        glu_forward_range(sh->hid, sh->gu, sh->gu + ff, (size_t)lo, (size_t)hi, model_ffn_activation(cfg));
    }
#pragma omp barrier
    step_share(d, s, &lo, &hi);
    linear_step(f, sh->hid, &P->down, ff, lo, hi);
#pragma omp barrier
}

/* ---- the component ---------------------------------------------------------------------------------- */

static void ffn_forward_op(pass_ctx *ctx, int l, const float *x, const float *u, float *f) {
    (void)x;
    ffn_sublayer_forward(ctx, l, u, f);
}

void ffn_params(param_walk *w, layer_params *L, int l) {
    const tlm_config *c = w->cfg;
    linear_params *parts[2] = {&L->gate, &L->up};
    const char *names[2] = {"ffn.gate_proj", "ffn.up_proj"};
    const int outs[2] = {config_layer_ff(c, l), config_layer_ff(c, l)};
    char n[96];
    if (c->ffn != FFN_GELU)
        walk_fused(w, &L->gate_up, parts, names, outs, 2, c->d_model, c->mlp_bias, l);
    else
        walk_fused(w, &L->up, parts + 1, names + 1, outs + 1, 1, c->d_model, c->mlp_bias, l);
    snprintf(n, sizeof n, "layers.%d.ffn.down_proj", l);
    walk_linear(w, &L->down, n, c->d_model, config_layer_ff(c, l), c->mlp_bias, TENSOR_RESIDUAL_MATRIX);
}

/* its buffers in a layer with the dense FFN (the inference layout: in layer 0's when any layer has
 * it, at the widest d_ff), with the bf16 copies of its products' inputs in mixed-precision training */
static void ffn_layout(layout_ctx *lc, arena *a, layer_acts *layer, int l) {
    const tlm_config *c = lc->c;
    ffn_acts *L = layer->own[COMPONENT_FFN];
    if (lc->reuse) return;
    const int any_dense = config_moe_layers(c) < c->n_layers || c->moe_block;
    const int dense = lc->one_layer ? any_dense : config_layer_has_dense(c, l);
    const size_t N = lc->N, lf = lc->one_layer ? (size_t)config_max_ff(c) : (size_t)config_layer_ff(c, l);
    L->gate = dense && c->ffn != FFN_GELU ? take(a, N * lf) : NULL;
    L->up = dense ? take(a, N * lf) : NULL;
    L->hid = dense ? take(a, N * lf) : NULL;
    arena none16 = {0};
    arena *k16 = lc->keep16 && dense ? a : &none16;
    layer->u16[SUB_FFN] = take16(k16, lc->B, lc->T, c->d_model);
    L->hid16 = take16(k16, lc->B, lc->T, lf);
}

static void ffn_scratch(const layout_ctx *lc, arena *a, arena *b, activations *A) {
    (void)a;
    ffn_pass_acts *S = A->own[COMPONENT_FFN];
    const size_t n = lc->N * (size_t)config_max_ff(lc->c);
    S->dgate = take(b, n);
    S->dup = take(b, n);
    S->dhid = take(b, n);
}

const sublayer_ops FFN_OPS = {.forward = ffn_forward_op,
                              .backward = ffn_sublayer_backward,
                              .step = ffn_step,
                              .params = ffn_params,
                              .layout = ffn_layout,
                              .scratch = ffn_scratch,
                              .layer_acts_size = sizeof(ffn_acts),
                              .pass_acts_size = sizeof(ffn_pass_acts)};
