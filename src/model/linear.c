/* linear.c — the linear layers: out [N,OC] = inp [N,IC] W^T + b with the weights in whichever type
 * they are kept (f32, bf16, both, a ggml block format), forward and backward over rows, the
 * projections of one input stored back to back (q|k|v, gate|up), and the decode step's
 * matrix-vector share of output rows (linear_step). */
#include <string.h>

#include "ops/quant.h"
#include "components.h"
#include "util/profile.h"

/* ---- linear layers: f32, bf16 or quantized weights ------------------------------------------ */

/* out [N,OC] = inp [N,IC] @ W^T + b with the layer's weights in whichever dtype they are stored
 * (precision.h): f32 (w; with a bf16 copy beside it, w16, for bf16 products), bf16 (w16 alone:
 * inference with bf16 weights) or a ggml block format (wq: a GGUF file's, inference); in bf16
 * products where linear_product_bf16 says so, else in f32 arithmetic */
void linear_forward(int pass_bf16, float *w_tile, float *out, const float *inp, const linear_params *lp, int N, int IC,
                    int OC) {
    const int bf16 = linear_product_bf16(lp, pass_bf16, N);
    const stored_dtype stored = linear_stored(lp);
    if (stored == STORED_BLOCKS)
        matmul_forward_quant(out, inp, lp->wq, lp->wq_type, lp->b, N, IC, OC, w_tile, bf16);
    else if (stored == STORED_BF16)
        matmul_forward_bf16(out, inp, lp->w16, lp->b, N, IC, OC, w_tile, bf16);
    else if (bf16)
        matmul_forward_mixed(out, inp, NULL, lp->w, lp->w16, lp->b, N, IC, OC);
    else
        matmul_forward(out, inp, lp->w, lp->b, N, IC, OC);
}

/* the layer's backward: dinp (accumulated, or set when `into`), G's weight and bias gradients
 * (accumulated); in bf16 products when the forward ran in them (inp16: inp's bf16 copy in
 * stage 1 when the caller made it for several layers of the same input, else NULL) */
void linear_backward(int pass_bf16, int into, float *dinp, linear_params *G, const float *dout, const float *inp,
                     const uint16_t *inp16, const linear_params *P, int N, int IC, int OC) {
    if (linear_mixed(P, pass_bf16, N))
        matmul_backward_bf16(into, dinp, G->w, G->b, dout, inp, inp16, P->w, P->w16, N, IC, OC);
    else
        (into ? matmul_backward_into : matmul_backward)(dinp, G->w, G->b, dout, inp, P->w, N, IC, OC);
}

/* input u [N, IC] of mixed-precision layer lp (and others of the same input) as bf16, once for all of
 * them: into `kept` (the layer's copy for the backward, layout.c) when there is one (`ready`: its
 * producer has written it already, pass_ctx.copy16_of), else into a staging buffer; NULL: f32 layers */
static const uint16_t *stage_shared_input(int pass_bf16, const linear_params *lp, const float *u, int N, int IC,
                                          int stage, uint16_t *kept, int ready) {
    if (!linear_mixed(lp, pass_bf16, N)) return NULL;
    if (!kept) return bf16_stage(stage, u, (size_t)N * IC);
    if (!ready) f32_to_bf16(kept, u, (size_t)N * IC);
    return kept;
}

/* the backward's bf16 copy of the input u of mixed-precision layer lp (and others of the same
 * input): the forward's (kept), else a new one when `shared`, else NULL (matmul_backward_bf16
 * rounds it) */
const uint16_t *backward_input(int pass_bf16, const linear_params *lp, const float *u, int N, int IC,
                                      const uint16_t *kept, int shared) {
    if (kept && linear_mixed(lp, pass_bf16, N)) return kept;
    return shared ? stage_shared_input(pass_bf16, lp, u, N, IC, 1, NULL, 0) : NULL;
}

/* linear_forward that leaves the bf16 copy of its input in `kept` for the backward (when mixed) */
void linear_forward_kept(pass_ctx *ctx, float *out, const float *inp, uint16_t *kept, const linear_params *lp,
                                int N, int IC, int OC) {
    const uint16_t *inp16 =
        kept ? stage_shared_input(pass_product_bf16(ctx), lp, inp, N, IC, 0, kept, ctx->copy16_of == inp) : NULL;
    if (inp16)
        matmul_forward_mixed(out, inp, inp16, lp->w, lp->w16, lp->b, N, IC, OC);
    else
        linear_forward(pass_product_bf16(ctx), ctx->A->w_tile, out, inp, lp, N, IC, OC);
}

/* Projections of one input stored back to back (q|k|v, gate|up; params.c), each into its own
 * buffer. Many rows (training, prompts): a GEMM per part over its rows of the weights, straight
 * into its buffer (the parts' GEMMs cost about what the fused one does, and no pass copies the
 * columns apart). A few rows (decoding): one matrix-vector stream over the fused weights, then
 * the columns split. */
void project_parts(pass_ctx *ctx, float *const *outs, const linear_params *const *parts,
                          const int *widths, int n_parts, const linear_params *fused, const float *u, uint16_t *u16_kept,
                          int N, int d) {
    /* (quantized parts of different types have no fused view: params.c) */
    if (N > MATVEC_MAX_ROWS || !(fused->w || fused->w16 || fused->wq)) {
        /* (mixed precision: u rounded once) */
        const uint16_t *u16 =
            stage_shared_input(pass_product_bf16(ctx), parts[0], u, N, d, 0, u16_kept, u16_kept && ctx->copy16_of == u);
        for (int i = 0; i < n_parts; i++) {
            if (u16)
                matmul_forward_mixed(outs[i], u, u16, parts[i]->w, parts[i]->w16, parts[i]->b, N, d, widths[i]);
            else
                linear_forward(pass_product_bf16(ctx), ctx->A->w_tile, outs[i], u, parts[i], N, d, widths[i]);
        }
        return;
    }
    int total = 0;
    for (int i = 0; i < n_parts; i++) total += widths[i];
    linear_forward(pass_product_bf16(ctx), ctx->A->w_tile, ctx->A->fused, u, fused, N, d, total);
    split_columns(outs, widths, n_parts, ctx->A->fused, N);
}

/* ---- the decode step: a thread's share of the output rows -------------------------------------- */

/* linear_forward's choice for a few rows: the quantized weights when there are, the f32 ones
 * (a mixed-precision bf16 mirror beside them serves only products over many rows), else the bf16 ones */
void linear_step(float *y, const float *x, const linear_params *lp, int IC, int o0, int o1) {
    if (linear_stored(lp) == STORED_BLOCKS)
        matvec_quant_part(y, x, lp->wq, lp->wq_type, lp->b, IC, o0, o1);
    else
        matvec_part(y, x, lp->w, linear_stored(lp) == STORED_BF16 ? lp->w16 : NULL, lp->b, IC, o0, o1);
}

/* rows [o0, o1) of projections stored back to back (q|k|v, gate|up) into y, their outputs side by
 * side: through the fused view when there is one, else part by part (quantized parts of
 * different types); each output is the same dot product either way */
void linear_parts_step(float *y, const float *x, const linear_params *fused, const linear_params *const *parts,
                              const int *widths, int n_parts, int IC, int o0, int o1) {
    if (fused->w || fused->w16 || fused->wq) {
        linear_step(y, x, fused, IC, o0, o1);
        return;
    }
    for (int i = 0, base = 0; i < n_parts; base += widths[i], i++) {
        const int lo = o0 > base ? o0 - base : 0, hi = o1 - base < widths[i] ? o1 - base : widths[i];
        if (hi > lo) linear_step(y + base, x, parts[i], IC, lo, hi);
    }
}
