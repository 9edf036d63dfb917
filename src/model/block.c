/* block.c — the norm placement: one transformer layer's sublayers (attention, then feed-forward),
 * each a sublayer with F
 *
 *   pre:      h = x + F(N(x))            post:     h = N(x + F(x))
 *   sandwich: h = x + N2(F(N1(x)))       output:   h = x + N(F(x))        (olmo2)
 *   deepnorm: h = N(alpha x + F(x))      none:     h = x + F(x)
 *
 * written once, asked of the config: the forward for both ways of running a layer (block.h's
 * block_mode: the full pass over rows, the one-token decode step), and the backward of the full
 * pass. The components' arithmetic is theirs (attention.c, mla.c, ffn.c, moe.c, ple.c, norm.c). */
#include "block.h"
#include "hook_points.h"

#include <string.h>

norm_params *block_norm_params(const model_params *p, int l, sublayer_kind k, block_norm which) {
    const layer_params *P = &p->layers[l];
    if (which == BLOCK_NORM_OUT) return (norm_params *)(k == SUB_ATTN ? &P->attn_out_norm : &P->ffn_out_norm);
    return (norm_params *)(k == SUB_ATTN ? &P->attn_norm : &P->ffn_norm); /* (a post norm: the same weights) */
}

/* the points of each sublayer, in block_point's order */
static const int SUB_POINTS[2][BLOCK_POINTS] = {
    {PT_LN1_SCALE, PT_LN1_NORMALIZED, PT_ATTN_RAW, PT_LN1_OUT_SCALE, PT_ATTN_OUT, PT_ATTN_SUM, PT_LN1_POST_SCALE,
     PT_RESID_MID},
    {PT_LN2_SCALE, PT_LN2_NORMALIZED, PT_MLP_RAW, PT_LN2_OUT_SCALE, PT_MLP_OUT, PT_MLP_SUM, PT_LN2_POST_SCALE,
     PT_RESID_POST}};

int block_point_id(const tlm_config *c, int l, sublayer_kind k, block_point p) {
    return model_point_id(c, l, SUB_POINTS[k][p]);
}

const sublayer_ops *block_component(const tlm_config *c, int l, sublayer_kind k) {
    if (k == SUB_ATTN) return config_mla(c) ? &MLA_OPS : &ATTENTION_OPS;
    if (config_layer_is_moe(c, l)) return c->moe_block ? &MOE_BLOCK_OPS : &MOE_OPS;
    return &FFN_OPS;
}

const sublayer_ops *block_components(int i) {
    /* (Gemma 4's MoE block lays out through MOE_OPS: the same buffers) */
    static const sublayer_ops *const ALL[COMPONENT_COUNT] = {
        [COMPONENT_ATTENTION] = &ATTENTION_OPS, [COMPONENT_MLA] = &MLA_OPS, [COMPONENT_FFN] = &FFN_OPS,
        [COMPONENT_MOE] = &MOE_OPS, [COMPONENT_PLE] = &PLE_OPS};
    return i >= 0 && i < (int)(sizeof ALL / sizeof ALL[0]) ? ALL[i] : NULL;
}

int block_has_step(const tlm_config *c) {
    for (int l = 0; l < c->n_layers; l++)
        if (!block_component(c, l, SUB_ATTN)->step || !block_component(c, l, SUB_FFN)->step) return 0;
    return 1;
}

static void point(const block_mode *bm, void *run, int l, sublayer_kind k, block_point p, float *data) {
    if (bm->point) bm->point(run, l, k, p, data);
}

void block_sublayer_forward(const block_mode *bm, void *run, const tlm_config *c, int l, sublayer_kind k,
                            const float *x, float *h) {
    const block_bufs b = bm->bufs(run, l, k);
    const float *u = bm->input ? bm->input(run, l, k, x) : x;
    if (placement_has_input_norm(c->placement)) {
        bm->norm(run, l, k, BLOCK_NORM_IN, b.u, u);
        u = b.u;
        point(bm, run, l, k, BLOCK_POINT_IN_NORMED, b.u);
    }
    bm->sublayer(run, block_component(c, l, k), l, x, u, b.f);
    float *fo = b.f;
    point(bm, run, l, k, BLOCK_POINT_RAW, b.f);
    if (placement_has_output_norm(c->placement)) {
        bm->norm(run, l, k, BLOCK_NORM_OUT, b.fo, b.f);
        fo = b.fo;
    }
    point(bm, run, l, k, BLOCK_POINT_OUT, fo);
    const int post = placement_has_post_norm(c->placement);
    float *sum = post ? b.sum : h;
    bm->add(run, sum, c->residual ? x : NULL, config_residual_scale(c), fo); /* (alpha: 1 but for DeepNorm) */
    if (post) {
        point(bm, run, l, k, BLOCK_POINT_SUM, sum);
        bm->norm(run, l, k, BLOCK_NORM_POST, h, sum);
    }
    /* (with a layer epilogue, the stream after the layer is the epilogue's output: it fires resid_post) */
    if (!(k == SUB_FFN && config_has_layer_epilogue(c))) point(bm, run, l, k, BLOCK_POINT_RESID, h);
}

void block_forward(const block_mode *bm, void *run, const tlm_config *c, int l, const float *x, float *mid,
                   float *epilogue_in, float *out) {
    block_sublayer_forward(bm, run, c, l, SUB_ATTN, x, mid);
    block_sublayer_forward(bm, run, c, l, SUB_FFN, mid, epilogue_in ? epilogue_in : out);
    if (epilogue_in) bm->epilogue(run, l, epilogue_in, out);
}

void block_residual_rows(float *sum, const float *x, float alpha, const float *fo, size_t i0, size_t i1) {
    if (x && alpha != 1.0f)
        for (size_t i = i0; i < i1; i++) sum[i] = alpha * x[i] + fo[i];
    else if (x)
        for (size_t i = i0; i < i1; i++) sum[i] = x[i] + fo[i];
    else if (i1 > i0)
        memmove(sum + i0, fo + i0, sizeof(float) * (i1 - i0));
}

void block_residual_add(float *sum, const float *x, float alpha, const float *fo, size_t n) {
#pragma omp parallel if (n > OMP_MIN_WORK)
    {
        size_t i0, i1;
        thread_share(n, &i0, &i1);
        block_residual_rows(sum, x, alpha, fo, i0, i1);
    }
}

/* dx = d(sublayer)/dx . dh (set: each residual slot's gradient comes from the one sublayer that
 * reads it); the full pass's backward */
void sublayer_backward(pass_ctx *ctx, int l, sublayer_kind k, const float *x, const float *dh, float *dx) {
    const tlm_model *m = ctx->m;
    const tlm_config *c = &m->cfg;
    activations *A = ctx->A;
    sublayer_acts *s = k == SUB_ATTN ? &A->layers[l].attn_s : &A->layers[l].ffn_s;
    const int N = A->B * A->T;
    const size_t Nd = (size_t)N * c->d_model;
    norm_params *g_first = block_norm_params(ctx->g, l, k, BLOCK_NORM_IN);
    const norm_params *p_first = block_norm_params(&m->p, l, k, BLOCK_NORM_IN);
    const float *dsum = dh;
    if (placement_has_post_norm(c->placement)) {
        model_norm_backward(c, A->dsum, NULL, g_first, dh, &s->post, p_first, s->sum, N);
        dsum = A->dsum;
        PASS_POINT(ctx, block_point_id(c, l, k, BLOCK_POINT_SUM), A->dsum, 1);
    }
    /* what the sublayer adds to the stream: its gradient is dsum, which the residual path reads too;
     * observed, the branch gets a copy of its own, so that a hook editing the gradient there changes
     * the sublayer's path alone (TransformerLens' hook_attn_out / hook_mlp_out) */
    const float *dbranch = dsum;
    if (ctx->observed) {
        float *copy = placement_has_output_norm(c->placement) ? A->dfinal : A->df;
        vec_copy(copy, dsum, Nd);
        dbranch = copy;
    }
    PASS_POINT(ctx, block_point_id(c, l, k, BLOCK_POINT_OUT), (float *)dbranch, 1);
    const float *df = dbranch;
    if (placement_has_output_norm(c->placement)) {
        model_norm_backward(c, A->df, NULL, block_norm_params(ctx->g, l, k, BLOCK_NORM_OUT), dbranch, &s->out,
                            block_norm_params(&m->p, l, k, BLOCK_NORM_OUT), s->f, N);
        df = A->df;
        PASS_POINT(ctx, block_point_id(c, l, k, BLOCK_POINT_RAW), A->df, 1);
    }
    const int has_in = placement_has_input_norm(c->placement);
    const float *u = has_in ? s->in.y : x;
    const sublayer_ops *op = block_component(c, l, k);
    op->backward(ctx, l, u, df, A->du); /* (sets du: its input projection is du's only contributor) */
    if (has_in) PASS_POINT(ctx, block_point_id(c, l, k, BLOCK_POINT_IN_NORMED), A->du, 1);
    /* dx = the residual's dsum (if any; alpha dsum for DeepNorm) + the sublayer's path, in one pass */
    const float *residual = c->residual ? dsum : NULL;
    const float alpha = config_residual_scale(c);
    if (ctx->observed && hook_points_input_backward(ctx, l, k, A->du, residual, alpha, dx))
        ; /* (the branch's input was a copy: hook_attn_in / hook_mlp_in and the split q, k, v inputs) */
    else if (residual && alpha != 1.0f && !has_in) /* (DeepNorm has no input norm) */
        block_residual_add(dx, residual, alpha, A->du, Nd);
    else if (has_in)
        model_norm_backward(c, dx, residual, g_first, A->du, &s->in, p_first, x, N);
    else if (residual)
        vec_add(dx, residual, A->du, Nd);
    else
        vec_copy(dx, A->du, Nd);
    if (op->backward_x) op->backward_x(ctx, l, x, dx);
}
