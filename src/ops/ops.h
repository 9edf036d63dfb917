/* ops.h — the layers of the transformer as forward/backward pairs (llm.c style); each
 * backward is derived in docs/ops.md.
 *
 * Conventions, shared by every op:
 * - Tensors are row-major float32. N is the number of rows (B*T tokens), C the row width.
 * - A linear weight is [OC, IC] (PyTorch nn.Linear layout): out = inp @ W^T + b.
 * - Parameter gradients ACCUMULATE (+=), so the caller zeroes them once per step (and micro-
 *   batches add up). The input gradient dinp is SET by norms, RoPE, attention and the
 *   activations (each says so; a norm adds a second path's dadd in the same pass), and
 *   accumulated by matmul_backward / embedding / softcap / cross-entropy, as each op's comment
 *   says. A NULL gradient pointer means "not wanted" (e.g. an absent bias).
 * - Statistics of norms are computed in float32 (and summed in double where a long sum
 *   would lose precision), eps is always inside the sqrt.
 * - No op allocates memory; scratch space comes from the caller.
 * - Element-wise and row loops run on the OpenMP threads only above OMP_MIN_WORK elements:
 *   below it (one decoding token) starting the team costs more than the work.
 * - An op may also be called on each thread of a batch split across the threads (model.c),
 *   each call with its own rows and scratch: its loops and GEMMs then run on that thread alone
 *   (the per-thread scratch is indexed by omp_get_thread_num(), 0 there).
 */
#ifndef TLM_OPS_H
#define TLM_OPS_H

#include <stddef.h>
#include <stdint.h>

#define OMP_MIN_WORK 16384

/* ---- matmul: the one place GEMMs happen (backend: CMake option TLM_GEMM, matmul.c) -------- */

/* C[M,N] = alpha * op(A) @ op(B) + beta * C, row-major; trans_a/b: 0 = as stored, 1 = transposed */
void gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
          const float *B, int ldb, float beta, float *C, int ldc);
/* "oneDNN 2.6.3" / "OpenBLAS (CBLAS)" */
const char *gemm_backend_name(void);

/* Mixed precision (gemm_bf16.c): C[M,N] (f32) = op(A) @ op(B) (+ bias[N] on every row when not
 * NULL) (+ C when beta is 1), A and B bf16, the products summed in f32. AMX where the CPU has it, else AVX512-BF16; never on a CPU
 * with neither (gemm_bf16_path() says; the callers then compute in f32). beta is 0 or 1.
 * Returns 0, or -1 when oneDNN could not build or run the product (no path, out of memory). */
typedef enum { GEMM_BF16_NONE, GEMM_BF16_AVX512BF16, GEMM_BF16_AMX } gemm_bf16_path_t;
gemm_bf16_path_t gemm_bf16_path(void);
const char *gemm_bf16_path_name(gemm_bf16_path_t p);
int gemm_bf16(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
              float beta, float *C, int ldc, const float *bias);
/* the same without a profile scope, for calls inside an op's parallel loop (util/profile.h) */
int gemm_bf16_task(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
                   int ldb, float beta, float *C, int ldc, const float *bias);
/* amx.c: gemm_bf16_task's small products on AMX tiles without oneDNN (same arguments; scratch of
 * amx_scratch_bytes(M, N, K)); -1 where this build has no AMX kernel. Only where
 * gemm_bf16_path() is GEMM_BF16_AMX. */
size_t amx_scratch_bytes(int M, int N, int K);
int amx_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
                  int ldb, float beta, float *C, int ldc, const float *bias, void *scratch);
/* GFLOP/s of gemm_bf16 on S x S x S (best of 7 after a warm-up run; 0 without a path): the
 * bf16 peak that info --system prints and train --profile's MFU uses */
double gemm_bf16_measure_gflops(int S);
/* dst[i] = bf16(src[i]), rounded to nearest even */
void f32_to_bf16(uint16_t *dst, const float *src, size_t n);
/* dst rows [rows, cols] (ld_dst apart) = bf16(src rows (ld_src apart)), on the calling thread alone */
void f32_to_bf16_rows(uint16_t *dst, int ld_dst, const float *src, int ld_src, int rows, int cols);
/* src [n] as bf16 in this thread's staging buffer `which` (0 .. BF16_STAGES-1), valid until the
 * next call with the same `which` on this thread; NULL when out of memory */
#define BF16_STAGES 2
const uint16_t *bf16_stage(int which, const float *src, size_t n);
/* this thread's staging buffer `which` itself, n bf16 long, for an op that writes its result there
 * in bf16 (crossentropy_backward_bf16); NULL when out of memory */
uint16_t *bf16_stage_buffer(int which, size_t n);
/* src [N,C] staged the same way, and colsum [C] (when not NULL) += the sums of its columns, each
 * in row order (a bias gradient, summed in the pass that rounds the incoming gradient) */
const uint16_t *bf16_stage_colsum(int which, const float *src, int N, int C, float *colsum);
/* colsum [C] (when not NULL) += the sums of the columns of src [N,C], each in row order (the same
 * bits on any thread count), and dst [N,C] (when not NULL) = bf16(src), in one pass over src */
void column_sums(float *colsum, uint16_t *dst, const float *src, int N, int C);

/* out [N,OC] = inp [N,IC] @ weight[OC,IC]^T + bias[OC] (bias may be NULL). Up to
 * MATVEC_MAX_ROWS rows go through the bandwidth-bound matvec kernels, more through gemm(). */
void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int IC, int OC);
/* The same with bf16 weights [OC,IC]. A few rows: widened to f32 in registers (matvec), the
 * f32 arithmetic on the bf16 values. More rows: with product_bf16, where gemm_bf16 has a path,
 * inp is rounded to bf16 and multiplied there (mixed precision: bf16 products, f32 sums);
 * otherwise the weights are widened a tile at a time (tile: MATMUL_BF16_TILE * IC floats) for
 * the f32 GEMM: the f32 arithmetic on the bf16 values again. */
#define MATMUL_BF16_TILE 256
void matmul_forward_bf16(float *out, const float *inp, const uint16_t *weight, const float *bias, int N, int IC,
                         int OC, float *tile, int product_bf16);
/* The same with weights [OC,IC] in ggml block format wq_type (ops/quant.h): a few rows through
 * matvec_quant (each weight widened in registers), more a tile of MATMUL_BF16_TILE weight rows
 * at a time dequantized into `tile` for the f32 GEMM: the same f32 arithmetic on the same values
 * either way. With product_bf16, where gemm_bf16 has a path, many rows are rounded to bf16 and
 * multiplied with tiles of the weights dequantized and rounded to bf16 (mixed precision: the
 * weights' values to 8 significant bits, f32 sums) */
void matmul_forward_quant(float *out, const float *inp, const void *weight, int wq_type, const float *bias, int N,
                          int IC, int OC, float *tile, int product_bf16);
/* Mixed precision with both copies of the weights (training): inp rounded to bf16 (or inp16, its
 * bf16 copy already staged, e.g. once for q, k and v) and multiplied with weight16 in gemm_bf16;
 * the f32 product with `weight` where that has no path */
void matmul_forward_mixed(float *out, const float *inp, const uint16_t *inp16, const float *weight,
                          const uint16_t *weight16, const float *bias, int N, int IC, int OC);
/* y [N,OC] = x [N,IC] @ W[OC,IC]^T (+ bias) streaming W once per MATVEC_MAX_ROWS rows (matvec.c:
 * AVX-512 / AVX2 / C kernels chosen from cpuid) */
#define MATVEC_MAX_ROWS 4
/* The matvec kernels (f32, bf16, quantized) also ask for each line of the weight stream this
 * many bytes ahead, into L2: the hardware prefetcher alone keeps too few lines in flight */
enum { MATVEC_PREFETCH_BYTES = 8192 };
void matvec_f32(float *y, const float *x, const float *W, const float *bias, int N, int IC, int OC);
void matvec_bf16(float *y, const float *x, const uint16_t *W, const float *bias, int N, int IC, int OC);
/* One row x [IC] times rows [o0, o1) of W (f32, or bf16 W16 when not NULL) into y[o0..o1) (+ bias),
 * on the calling thread alone: each thread of a parallel region computes its own share (the
 * decode step, model/decode.c), bit for bit as matvec_f32 / matvec_bf16 computes those outputs */
void matvec_part(float *y, const float *x, const float *W, const uint16_t *W16, const float *bias, int IC, int o0,
                 int o1);
/* dinp [N,IC] += dout @ weight; dweight [OC,IC] += dout^T @ inp; dbias [OC] += sum_n dout */
void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                     const float *weight, int N, int IC, int OC);
/* the same with dinp [N,IC] = dout @ weight: for a gradient buffer this layer is the only
 * contributor to (no zeroing pass before, and the GEMM does not read it) */
void matmul_backward_into(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                          const float *weight, int N, int IC, int OC);

/* The backward of a layer whose forward ran in mixed precision: weight16 is the bf16 copy of
 * the f32 weights the gradients are for; dout and inp (or inp16, inp's bf16 copy when the caller
 * staged it in stage 1) are rounded to bf16 for the products, the gradients summed in f32
 * (dweight, dbias accumulate; dinp accumulates, or is set when `into`). Falls back to the f32
 * backward on `weight` where gemm_bf16 has no path. */
void matmul_backward_bf16(int into, float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                          const uint16_t *inp16, const float *weight, const uint16_t *weight16, int N, int IC,
                          int OC);
/* The same without a bias, from dout16 [N,OC], dout already rounded to bf16 by the op that made it
 * (the loss's gradient at the head: crossentropy_backward_bf16), in stage 0. Where a bf16 product
 * fails, dout16 is widened into dout_scratch [N,OC] for the f32 one (the same values). */
void matmul_backward_bf16_rounded(int into, float *dinp, float *dweight, const uint16_t *dout16, float *dout_scratch,
                                  const float *inp, const uint16_t *inp16, const float *weight,
                                  const uint16_t *weight16, int N, int IC, int OC);

/* Fused projections (decoding: one matrix-vector stream over q|k|v or gate|up) produce
 * [N, sum(widths)] columns that belong to `parts` tensors: dst[i] [N, widths[i]] <- src. */
void split_columns(float *const *dst, const int *widths, int parts, const float *src, int N);

/* ---- norms -------------------------------------------------------------------------------- */

/* LayerNorm: out [N,C] = (inp - mean) * rstd * weight + bias; rstd = 1/sqrt(var + eps).
 * Saves mean [N] and rstd [N] for backward. bias may be NULL; out may equal inp. */
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                       const float *bias, int N, int C, float eps);
/* The norms' backward passes set dinp [N,C] = dadd + d(norm)/dinp . dout, dadd [N,C] a gradient
 * that arrives by another path (the residual stream's: added in the same pass instead of by a
 * copy or a zeroing before); NULL for none, or dinp itself to accumulate. The parameter
 * gradients accumulate (+=). */
void layernorm_backward(float *dinp, const float *dadd, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean, const float *rstd, int N, int C);

/* RMSNorm: out [N,C] = inp * rstd * (weight_offset + weight); rstd = 1/sqrt(mean(inp^2) + eps).
 * weight_offset is 0 for the usual g, 1 for Gemma's (1 + w); weight NULL: no weight at all (a gain
 * of 1: Gemma 4's v norm; the backward then has no dweight). Saves rstd [N]; out may equal inp. */
void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, float weight_offset,
                     int N, int C, float eps);
/* The two forwards with out's bf16 copy (tlm_f32_to_bf16's bits) written into out16 [N,C] in the
 * same pass, each row while it is in L1 (mixed-precision training's product inputs, model/linear.c);
 * out16 NULL: as above */
void layernorm_forward_bf16(float *out, uint16_t *out16, float *mean, float *rstd, const float *inp,
                            const float *weight, const float *bias, int N, int C, float eps);
void rmsnorm_forward_bf16(float *out, uint16_t *out16, float *rstd, const float *inp, const float *weight,
                          float weight_offset, int N, int C, float eps);
void rmsnorm_backward(float *dinp, const float *dadd, float *dweight, const float *dout, const float *inp,
                      const float *weight, float weight_offset, const float *rstd, int N, int C);

/* One row of each norm's forward on the calling thread alone, no OpenMP construct (for a caller
 * inside a parallel region: the decode step). The N-row forwards above compute each row with
 * these, so both give the same bits. They return rstd (LayerNorm: the mean in *mean); y may be x. */
float rmsnorm_row(float *y, const float *x, const float *weight, float weight_offset, int C, float eps);
float layernorm_row(float *y, float *mean, const float *x, const float *weight, const float *bias, int C, float eps);
void dyt_row(float *y, const float *x, float alpha, const float *weight, const float *bias, int C);

/* DyT (Dynamic Tanh, Zhu et al. 2025): out [N,C] = weight * tanh(alpha * inp) + bias, alpha a
 * learnable scalar [1] (one per norm), weight/bias [C] (bias may be NULL). No statistics: the
 * backward recomputes tanh from inp (so keep inp). Element-wise: out may equal inp. */
void dyt_forward(float *out, const float *inp, const float *alpha, const float *weight, const float *bias, int N,
                 int C);
/* t = tanh(alpha x): dinp = dadd + dout * weight * alpha * (1 - t^2) (dinp NULL: not computed);
 * dalpha [1] += sum dout * weight * x * (1 - t^2); dweight [C] += sum_n dout * t;
 * dbias [C] += sum_n dout (any of the parameter gradients may be NULL) */
void dyt_backward(float *dinp, const float *dadd, float *dalpha, float *dweight, float *dbias, const float *dout,
                  const float *inp, const float *alpha, const float *weight, int N, int C);

/* ---- position ----------------------------------------------------------------------------- */

/* Left padding (start): NULL, or [B] the index of each row's first real token, counted from the
 * rows' first index here (negative when it lies before: a KV cache's step). Positions count from
 * it, as Hugging Face's position_ids from the attention mask: row b's token t sits at position
 * t - start[b] (pads before it at 0). */
static inline int padded_position(int t, const int *start, int b) {
    const int p = start ? t - start[b] : t;
    return p > 0 ? p : 0;
}

/* token (+ learned position) embedding: out [B,T,C] = scale * wte[tokens[b,t]] + wpe[pos(b, t)]
 * (wpe may be NULL; pos: padded_position) */
void embedding_forward(float *out, const int *tokens, const float *wte, const float *wpe, float scale, int B,
                       int T, int C, const int *start);
/* the same with a bf16 token table [V,C] */
void embedding_forward_bf16(float *out, const int *tokens, const uint16_t *wte, const float *wpe, float scale, int B,
                            int T, int C, const int *start);
/* the same with a token table [V,C] in ggml block format wq_type (ops/quant.h): each row looked
 * up is dequantized */
void embedding_forward_quant(float *out, const int *tokens, const void *wte, int wq_type, const float *wpe,
                             float scale, int B, int T, int C, const int *start);
/* dwte [V,C] += scale * dout rows; dwpe [maxT,C] += dout summed over the batch at each row's
 * positions (dwpe may be NULL) */
void embedding_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, float scale, int B,
                        int T, int C, const int *start);

/* RoPE, Hugging Face "rotate half" layout: in each head, dim i pairs with i + hd/2.
 * x [B,T,n_heads,hd] rotated by the angle of its position pos0 + padded_position(t, start, b);
 * cos/sin [max_pos, hd/2]. out may equal inp. */
void rope_forward(float *out, const float *inp, const float *cos_tab, const float *sin_tab, int B, int T,
                  int n_heads, int head_dim, int pos0, const int *start);
/* one token at position pos: x [n_heads, hd] -> out (may be inp), on the calling thread alone, the
 * same arithmetic as rope_forward */
void rope_forward_token(float *out, const float *inp, const float *cos_tab, const float *sin_tab, int n_heads,
                        int head_dim, int pos);
/* dinp = R^T dout (the inverse rotation; set) */
void rope_backward(float *dinp, const float *dout, const float *cos_tab, const float *sin_tab, int B, int T,
                   int n_heads, int head_dim, int pos0, const int *start);

/* ---- attention ---------------------------------------------------------------------------- */

typedef struct {
    int n_heads, n_kv_heads, head_dim;
    float scale;   /* multiplies q.k */
    float softcap; /* 0 = off; else scores <- softcap * tanh(scores / softcap), before the mask */
    int window;    /* 0 = off; else query i sees key j iff 0 <= i - j < window */
    int bf16;      /* mixed precision: the full-sequence pass's products on bf16 operands where the
                    * CPU has AMX (attention_bf16_products), f32 sums and softmax */
    const int *start; /* NULL, or [B]: row b is left-padded, its real tokens from start[b] on: a query
                       * i >= start[b] sees no key before start[b], a pad query (i < start[b]) only
                       * itself (attention_first_key_padded) */
    int stream_maps;  /* the kept maps are the caller's output alone (a cache's arrays, which this
                       * forward does not read again): each block's S and P are made in the thread's
                       * scratch, as without maps, and written out with non-temporal stores */
} attention_spec;

/* Causal self-attention over one sequence batch.
 * q [B,T,H*hd], k/v [B,T,KV*hd] (query head h reads kv head h / (H/KV)) -> out [B,T,H*hd].
 * With scores and probs [B,H,T,T] it keeps the scaled, capped logits (-inf where masked) and
 * the probabilities (0 where masked) there; either may be NULL (a block's then lives in
 * scratch). scratch: attention_scratch_floats(T, head_dim) floats per OpenMP thread, never NULL. */
void attention_forward(float *out, float *scores, float *probs, const float *q, const float *k, const float *v,
                       int B, int T, const attention_spec *spec, float *scratch);
/* dq, dk, dv (same shapes as q, k, v) = ... (set, not accumulated); from the probabilities the
 * forward kept, and its scores if softcap > 0 (probs NULL: both computed again, bit for bit as
 * the forward did; scores may be NULL without a soft-cap); scratch as above, never NULL */
void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *scores,
                        const float *probs, const float *q, const float *k, const float *v, int B, int T,
                        const attention_spec *spec, float *scratch);
size_t attention_scratch_floats(int T, int head_dim);
/* whether attention_forward/backward compute spec's products on bf16 operands: spec->bf16 and
 * gemm_bf16 on AMX tiles (with AVX512-BF16 alone the f32 register tiles are kept) */
int attention_bf16_products(const attention_spec *spec);
/* One block of queries with bf16 products (what the passes above do per block on AMX, and what a
 * prompt's chunks through the KV cache do): S = scale qb16 k16^T over keys k0..k1 into S [rows, ld]
 * (columns absolute keys; then capped, masked by spec from query position q0 of batch row b on),
 * P = its row softmax into P (may be S), then out [rows, head_dim] (ld ldo) = bf16(P) v16. qb16:
 * the block's rows [rows, hd]; k16, v16 [.., hd] from key 0; pb: bf16 scratch of rows x (k1 - k0).
 * whole: S and P are written over their whole rows (kept maps), else only over keys k0..k1.
 * 0, or -1 (a product oneDNN could not run) */
int attention_block_bf16(float *out, int ldo, float *S, float *P, int ld, uint16_t *pb, const uint16_t *qb16,
                         const uint16_t *k16, const uint16_t *v16, int b, int q0, int rows, int k0, int k1,
                         const attention_spec *spec, int whole);

/* The visibility rule, the one place it is written: a query at position `query` sees the key at
 * `key` iff key <= query (causal) and, with a window, query - key < window. */
int attention_key_visible(int query, int key, int window);
/* The first key position a query at position pos sees (0, or the sliding window's start) */
int attention_first_key(int pos, int window);
/* ... of a row whose real tokens begin at `start` (left padding): max(that, min(start, pos)) */
int attention_first_key_padded(int pos, int window, int start);
/* One row of scores s [n] -> probabilities p [n]: soft-cap (when > 0) and softmax over the
 * visible keys first..last; s outside them becomes -inf, p 0. p may equal s. */
void attention_softmax_row(float *s, float *p, int n, int first, int last, float softcap);
/* One query row against cached keys first_key..n_keys-1 (decoding one token): q [hd]; keys and
 * values rows of hd floats, kv_stride floats apart; out [hd]; scores [n_keys] scratch. */
void attention_row(float *out, float *scores, const float *q, const float *keys, const float *values,
                   size_t kv_stride, int first_key, int n_keys, int head_dim, float scale, float softcap);

/* ---- feed-forward activations ------------------------------------------------------------- */

typedef enum { ACT_SILU, ACT_GELU_TANH } activation;

float act_apply(activation act, float x);
/* tanh without a libm call (vectorizable); absolute error < 3e-7 */
float tanh_approx(float x);
float act_grad(activation act, float x); /* d act / dx */

/* gated: out [n] = act(gate) * up ; dgate, dup [n] = their gradients (set, not accumulated) */
void glu_forward(float *out, const float *gate, const float *up, size_t n, activation act);
void glu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up, size_t n,
                  activation act);
/* plain: out [n] = act(inp); dinp [n] = dout * act'(inp) (set, not accumulated) */
void act_forward(float *out, const float *inp, size_t n, activation act);
/* glu_forward / act_forward that also write out's bf16 copy into out16 [n] in the same pass (as the
 * norms' _bf16 forms above; NULL: none) */
void glu_forward_bf16(float *out, uint16_t *out16, const float *gate, const float *up, size_t n, activation act);
void act_forward_bf16(float *out, uint16_t *out16, const float *inp, size_t n, activation act);
void act_backward(float *dinp, const float *dout, const float *inp, size_t n, activation act);
/* glu_forward / act_forward over elements [i0, i1) on the calling thread alone (no OpenMP
 * construct: for the threads of a parallel region, each its own range), the same bits */
void glu_forward_range(float *out, const float *gate, const float *up, size_t i0, size_t i1, activation act);
void act_forward_range(float *out, const float *inp, size_t i0, size_t i1, activation act);

/* soft-capping: out = cap * tanh(inp / cap). Backward uses the saved output:
 * d out / d inp = 1 - (out / cap)^2. out may equal inp. */
void softcap_forward(float *out, const float *inp, size_t n, float cap);
void softcap_backward(float *dinp, const float *dout, const float *out, size_t n, float cap);
/* softcap_forward over [i0, i1) on the calling thread alone */
void softcap_forward_range(float *out, const float *inp, size_t i0, size_t i1, float cap);

/* ---- loss --------------------------------------------------------------------------------- */

/* Next-token cross-entropy. logits [N,V], targets [N] (a negative target = no loss there).
 * Writes probs [N,V] (softmax) and losses [N]; returns the mean loss over counted rows
 * (and the count in *n_counted). lse [N] (may be NULL) receives logsumexp of each row, and
 * *lse_sq_mean (may be NULL) the mean of lse^2 over the counted rows: the z-loss (PaLM,
 * Wortsman et al. 2023) is z * that mean, computed in the same pass over the row. */
float crossentropy_forward(float *losses, float *lse, float *probs, const float *logits, const int *targets, int N,
                           int V, int *n_counted, float *lse_sq_mean);
/* dlogits [N,V] += (probs - onehot(target) + 2 z lse probs) * dloss / n_counted: the gradient of
 * mean CE + z * mean(lse^2) over the counted rows (z = 0: plain cross-entropy; lse then unused,
 * may be NULL) */
void crossentropy_backward(float *dlogits, const float *probs, const float *lse, const int *targets, int N, int V,
                           float dloss_mean, int n_counted, float z);
/* the same gradient set, not added (no zeroing pass first: 206 MB at GPT-2's head and 1024 rows) */
void crossentropy_backward_into(float *dlogits, const float *probs, const float *lse, const int *targets, int N,
                                int V, float dloss_mean, int n_counted, float z);
/* the same gradient written only as bf16 (tlm_f32_to_bf16 of crossentropy_backward_into's values,
 * bit for bit) into dlogits16 [N,V]: the head's bf16 products read nothing else, so mixed precision
 * neither writes nor rounds an f32 copy (206 MB at GPT-2 124M's head) */
void crossentropy_backward_bf16(uint16_t *dlogits16, const float *probs, const float *lse, const int *targets, int N,
                                int V, float dloss_mean, int n_counted, float z);

/* ---- small vector helpers ----------------------------------------------------------------- */
void vec_add(float *out, const float *a, const float *b, size_t n); /* out = a + b (out may alias) */
void vec_acc(float *out, const float *a, size_t n);                 /* out += a */
void vec_copy(float *out, const float *a, size_t n);                /* out = a, on the OpenMP threads */
/* out = a with non-temporal stores, on the OpenMP threads: for a destination this pass does not
 * read again (the Python cache's arrays), written without each line first read from memory */
void vec_stream(float *out, const float *a, size_t n);
void copy_stream(float *out, const float *a, size_t n); /* the same on the calling thread alone */
void vec_zero(float *out, size_t n); /* out = 0, on the OpenMP threads (a gradient buffer before it accumulates) */
/* The gradient norm's sum of squares, with the same bits wherever it is taken (the optimizer's own
 * pass, or a split batch's gradient sum while each piece is in the cache): n floats cut into
 * SUMSQ_CHUNKS chunks (sumsq_chunk gives chunk c's [begin, end)); in a chunk, SUMSQ_LANES float
 * lanes, lanes[j % SUMSQ_LANES] += x[j]^2 in order of j (no fused multiply-add; four vectors of
 * independent sums on AVX-512), fed piece by piece through sumsq_lanes (every piece but a chunk's
 * last a multiple of SUMSQ_LANES floats long), then summed in lane order (sumsq_lanes_total); the
 * chunks' totals added in chunk order in double (sumsq_total). */
enum { SUMSQ_CHUNKS = 64, SUMSQ_LANES = 64 };
void sumsq_chunk(size_t n, int c, size_t *begin, size_t *end);
void sumsq_lanes(float lanes[SUMSQ_LANES], const float *x, size_t n);
float sumsq_lanes_total(const float lanes[SUMSQ_LANES]);
double sumsq_total(const float chunk_totals[SUMSQ_CHUNKS]);
/* Inside a parallel region: this thread's contiguous share [*i0, *i1) of n elements, a multiple of
 * 16 but the last (the element-wise kernels' whole vectors; AdamW's update) */
void thread_share(size_t n, size_t *i0, size_t *i1);
/* ... of C columns. Column sums walk all rows over their share, so each column is summed in row
 * order whatever the thread count, reading long row pieces (64-column blocks a row apart are
 * slower once the rows have left the cache: docs/performance.md, "Figures behind the code"). */
void thread_columns(int C, int *c0, int *c1);

#endif
