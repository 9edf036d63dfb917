/* quant.h — weights stored in ggml's block formats (what GGUF files hold), and the products
 * that read them where they lie.
 *
 * A quantized matrix [OC, IC] is OC rows, each IC / block_elems blocks back to back (GGUF's
 * layout: ne[0] = IC is the fastest-varying dimension). The type numbers are ggml's (they are
 * what a GGUF tensor's type field says). Every block layout and formula is in quant.c.
 *
 * Numerics of the exact products (the default; quant_int.c's integer products, below, are the
 * other choice for a few rows), the same for a few rows (decoding) and many (a prompt): the activations stay f32
 * and each weight is widened to the f32 value its block encodes (in registers for a few rows;
 * a tile of rows at a time into f32 scratch for the GEMM of many), then multiplied in f32.
 * So the only error is the format's own rounding of the weights, and a decoding step computes
 * what the prompt's pass computes (llama.cpp instead rounds the activations to 8 bits per
 * block for its integer dot products: docs/formats.md says what that changes). */
#ifndef TLM_QUANT_H
#define TLM_QUANT_H

#include <stddef.h>
#include <stdint.h>

/* ggml's numbering */
typedef enum {
    WQ_F32 = 0,
    WQ_F16 = 1,
    WQ_Q4_0 = 2,
    WQ_Q4_1 = 3,
    WQ_Q5_0 = 6,
    WQ_Q5_1 = 7,
    WQ_Q8_0 = 8,
    WQ_Q8_1 = 9,
    WQ_Q2_K = 10,
    WQ_Q3_K = 11,
    WQ_Q4_K = 12,
    WQ_Q5_K = 13,
    WQ_Q6_K = 14,
    WQ_Q8_K = 15,
    WQ_BF16 = 30,
    WQ_TYPE_LIMIT = 64 /* type numbers are below this */
} wq_type;

/* Whether tinylm can read weights of type t (dequantize and multiply): F32, F16, BF16, Q4_0,
 * Q4_1, Q5_0, Q5_1, Q8_0, Q2_K .. Q6_K. Others (Q8_1, Q8_K, the IQ types, ...) are 0. */
int wq_supported(int t);
/* "Q4_K", "F16", ...; "type 23" style for numbers without a name here (static buffer per
 * thread) */
const char *wq_name(int t);
/* looks up a name ("q8_0" / "Q8_0", case-insensitive): 0 and *t, or -1 */
int wq_from_name(const char *name, int *t);
/* elements per block (1 for F32/F16/BF16, 32, or 256 for the K types) and bytes per block;
 * 0 for an unsupported type */
int wq_block_elems(int t);
size_t wq_block_bytes(int t);
/* bytes of one row of n elements (n a multiple of wq_block_elems); 0 when it is not, or the
 * type is unsupported */
size_t wq_row_bytes(int t, int64_t n);
/* bits per weight, for reports (4.5 for Q4_0, 8.5 for Q8_0, 4.5 for Q4_K, 6.5625 for Q6_K) */
double wq_bits_per_weight(int t);

/* ---- conversions (scalar C: the reference the kernels are tested against) ------------------ */

/* dst [n] = the values the n elements of src encode (n a multiple of the block) */
void wq_dequantize_row(int t, const void *src, float *dst, int64_t n);
/* src [n] into the type's blocks at dst (wq_row_bytes(t, n) bytes), rounding as ggml's
 * reference quantizers do (nearest, and for the K types the same search for each sub-block's
 * scale and minimum). Types that can be written: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
 * Q4_K, Q5_K, Q6_K. Returns 0, or -1 + tlm_error for another type or a row that is not whole
 * blocks. */
int wq_quantize_row(int t, const float *src, void *dst, int64_t n);
/* whether wq_quantize_row writes type t */
int wq_can_quantize(int t);

/* ---- products -------------------------------------------------------------------------------- */

/* y [N, OC] = x [N, IC] @ W[OC, IC]^T (+ bias [OC]), W of type t, streaming W once per
 * MATVEC_MAX_ROWS rows of x, split over the OpenMP threads by output rows like matvec_f32
 * (kernels for AVX2+FMA and plain C chosen by cpuid and TLM_ISA). IC a multiple of the block. */
void matvec_quant(float *y, const float *x, const void *W, int t, const float *bias, int N, int IC, int OC);
/* One row x [IC] times rows [o0, o1) of W into y[o0 .. o1) (+ bias) on the calling thread (a
 * decoding step's share), bit for bit as matvec_quant computes those outputs */
void matvec_quant_part(float *y, const float *x, const void *W, int t, const float *bias, int IC, int o0, int o1);
/* rows [o0, o1) of W as f32 into dst [(o1 - o0), IC] (a prompt's GEMM tile; the embedding's
 * row lookup) */
void wq_dequantize_rows(int t, const void *W, int IC, int o0, int o1, float *dst);
/* the same rounded to bf16 (nearest even) into dst16 [(o1 - o0), IC]: a prompt's tile for bf16
 * products (decoded a chunk at a time on the stack, never a whole f32 row) */
void wq_dequantize_rows_bf16(int t, const void *W, int IC, int o0, int o1, uint16_t *dst16);

/* ---- integer products (quant_int.c) ------------------------------------------------------------
 * The other numerics, for decoding: each row of x rounded once per call to 8-bit blocks (32
 * elements for the 32-element types, 256 for the K types; an f32 scale amax / 127 each), the
 * block products summed in integers (exact), then scaled in f32. The error against the exact
 * products above is the activations' rounding (at most d / 2 per element); docs/gguf.md gives
 * its measured effect on a model's logits. Process-wide choice, WQ_PRODUCTS_EXACT unless set:
 * matvec_quant and matvec_quant_part then take the integer kernels for the types that have them
 * (wq_int_supported) on CPUs with a vector set of them (AVX2 or wider; the plain C set is the
 * reference, slower than widening, so there the products stay exact); so does
 * matmul_forward_quant for up to WQ_INT_PROMPT_ROWS rows (a short prompt), the GEMM of a longer
 * prompt stays as it is. */
typedef enum { WQ_PRODUCTS_EXACT, WQ_PRODUCTS_INT8 } wq_products;
void wq_set_products(wq_products p);
wq_products wq_get_products(void);
/* Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: 1 */
int wq_int_supported(int t);
/* the integer kernel sets: plain C (the reference every other set equals bit for bit), AVX2
 * (vpmaddubsw), AVX-VNNI and AVX512-VNNI (vpdpbusd / vpdpwssd on 256 bits) */
typedef enum { WQ_INT_SCALAR, WQ_INT_AVX2, WQ_INT_AVXVNNI, WQ_INT_AVX512VNNI, WQ_INT_PATHS } wq_int_path;
/* whether this CPU runs set p (under TLM_ISA's cap), the widest that it runs, its name */
int wq_int_path_available(wq_int_path p);
wq_int_path wq_int_path_pick(void);
const char *wq_int_path_name(wq_int_path p);
/* the rows of x one pass over the weights serves (a weight block is unpacked once for them all) */
enum { WQ_INT_MAX_ROWS = 16 };
/* matmul_forward_quant takes the integer products (in their mode) for up to this many rows of x,
 * the widening GEMM beyond: where the two cost the same on a 2-core Zen 4 (docs/gguf.md) */
enum { WQ_INT_PROMPT_ROWS = 16 };
/* y [n * OC + o] for o in [o0, o1), n < N (1 .. WQ_INT_MAX_ROWS) through set p, whatever the mode
 * (tests, benchmarks); -1 when p is not available, t has no integer kernel or IC is not whole blocks */
int wq_int_products(wq_int_path p, float *y, const float *x, const void *W, int t, int N, int IC, int OC, int o0,
                    int o1);
/* matvec_quant / matvec_quant_part through the integer kernels when the mode is WQ_PRODUCTS_INT8,
 * t has them and a vector set runs them: 0, else -1 and nothing done (the callers then widen) */
int wq_int_matvec(float *y, const float *x, const void *W, int t, const float *bias, int N, int IC, int OC);
int wq_int_matvec_part(float *y, const float *x, const void *W, int t, const float *bias, int IC, int o0, int o1);
/* one row of x [IC] (whole blocks of t) rounded to t's activation blocks as above: levels q [IC],
 * scales d [IC / 32 or IC / 256 (K types)], level sums [IC / 32 or IC / 16 (K types)] */
void wq_int_quantize_row(int t, const float *x, int IC, int8_t *q, float *d, int16_t *sum);
/* what a decoding step's product of type t runs on this CPU in that mode, in words (static
 * buffer per thread); wq_widening_kernel: the exact path's kernel */
const char *wq_product_kernel(int t, wq_products mode);
const char *wq_widening_kernel(int t);

#endif
