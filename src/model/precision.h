/* precision.h — what a linear layer's product computes in, decided in one place. Two ideas, two
 * names:
 *
 *   stored   what the weights are kept in: f32 (param_mem), bf16 (stored16: model_weights_to_bf16,
 *            a GGUF file's bf16 matrices) or ggml blocks (wq_mem: a GGUF file's quantized ones).
 *            Fixed when the parameters are bound (params.c's walk): the views a linear has are
 *            the answer (linear_stored).
 *   product  what its products over many rows multiply: f32, or bf16 operands summed in f32
 *            (mixed precision, model_set_mixed_bf16 / tlm_set_precision). The model holds the
 *            setting (product_bf16); a pass takes its own answer once, as it starts, into its
 *            context (context.h's product_bf16: precision_pass_bf16), and every site asks
 *            linear_product_bf16 / linear_mixed with it. A few rows (decoding's matrix-vector
 *            path) are f32 arithmetic whatever is stored.
 *
 * f32 weights multiplied in bf16 need a bf16 copy of them: product16 (the linear views' w16
 * beside w), made when the precision is set and again wherever the weights change
 * (model_weights_changed: the optimizer's step, tlm_params_writable, the edit paths), never by
 * a pass; so a model is read-only while its contexts run, in either precision. Internal header. */
#ifndef TLM_MODEL_PRECISION_H
#define TLM_MODEL_PRECISION_H

#include "model.h"

typedef enum { STORED_F32, STORED_BF16, STORED_BLOCKS } stored_dtype;

/* what linear lp's weights are kept in: blocks (wq), f32 (w; a w16 beside it is its bf16 copy for
 * the products), else bf16 (w16 alone) */
static inline stored_dtype linear_stored(const linear_params *lp) {
    return lp->wq ? STORED_BLOCKS : lp->w ? STORED_F32 : STORED_BF16;
}

/* 1 when linear lp's product over `rows` rows, in a pass whose product dtype is bf16 when
 * pass_bf16, multiplies bf16 operands: the pass's products are bf16, the rows are more than the
 * matrix-vector path takes, and lp has bf16 weights (stored so, or the copy of its f32 ones) or
 * blocks to round. The one answer every product site asks. */
static inline int linear_product_bf16(const linear_params *lp, int pass_bf16, int rows) {
    return pass_bf16 && rows > MATVEC_MAX_ROWS && (lp->w16 || lp->wq);
}

/* the same for f32 weights: 1 when the product runs on their bf16 copy (the mixed kernels:
 * matmul_forward_mixed, matmul_backward_bf16) */
static inline int linear_mixed(const linear_params *lp, int pass_bf16, int rows) {
    return linear_stored(lp) == STORED_F32 && linear_product_bf16(lp, pass_bf16, rows);
}

/* the product dtype of a pass of model m starting now (1: bf16): the model's setting, when this
 * CPU has bf16 products. Taken once per pass into its context (context.h product_bf16). */
int precision_pass_bf16(const tlm_model *m);

#endif
