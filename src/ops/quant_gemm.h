/* quant_gemm.h — the integer products of a quantized matrix with a prompt's many rows of x
 * (quant_gemm.c): the numerics of quant_int.c's (quant.h: each row of x rounded once to 8-bit
 * blocks, every block product summed in integers, the same float operations in the same order),
 * so row n of the result is bit for bit what wq_int_products gives for x's row n; only the order
 * of the work differs: each weight block is unpacked once into an int8 panel of 32 weight rows
 * and serves every row of x, in register tiles of weight rows x rows of x (vpdpbusd). */
#ifndef TLM_QUANT_GEMM_H
#define TLM_QUANT_GEMM_H

#include "quant.h"

/* the GEMM's kernel bodies: plain C (on the unpacked panel, the definition checked against
 * quant_int.c's reference), AVX2 (vpmaddubsw + vpmaddwd: no type whose levels exceed 128, so not
 * Q8_0, whose levels are stored offset by 128), AVX-VNNI (256-bit vpdpbusd, VEX), the same body
 * on AVX512VL encodings (what tests it on CPUs with AVX512-VNNI but no AVX-VNNI), AVX512-VNNI */
typedef enum { WQ_GEMM_SCALAR, WQ_GEMM_AVX2, WQ_GEMM_AVXVNNI, WQ_GEMM_VNNI256, WQ_GEMM_VNNI512, WQ_GEMM_KERNELS } wq_gemm_kernel;
/* whether body k runs type t on this CPU (under TLM_ISA's cap); its name */
int wq_gemm_available(wq_gemm_kernel k, int t);
const char *wq_gemm_name(wq_gemm_kernel k);
/* the body the route takes for t here: the widest available vector one, or WQ_GEMM_SCALAR when
 * none (the route then stays off) */
wq_gemm_kernel wq_gemm_pick(int t);

/* y [N, OC] (no bias) through body k, whatever the mode (tests, benchmarks); 0, or -1 when k does
 * not run t here, t has no integer products, IC is not whole blocks, N < 1 or no memory */
int wq_gemm_products(wq_gemm_kernel k, float *y, const float *x, const void *W, int t, int N, int IC, int OC);

/* matmul_forward_quant's route for a prompt longer than WQ_INT_PROMPT_ROWS rows: under
 * WQ_PRODUCTS_INT8, where a vector body runs t, y [N, OC] = the integer products plus the bias
 * (NULL: none), threads over the weight rows: 0; else -1 and nothing done (the caller widens) */
int wq_gemm_forward(float *y, const float *x, const void *W, int t, const float *bias, int N, int IC, int OC);

#endif
