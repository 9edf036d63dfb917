/* matmul.c — linear layers on top of one GEMM entry point per precision.
 * gemm() (f32) and gemm_bf16() (gemm_bf16.c: bf16 operands, f32 sums) are the only functions
 * that know about the GEMM library. The backend is chosen at
 * build time (CMake option TLM_GEMM): oneDNN's dnnl_sgemm, which picks its kernels from the
 * CPU's feature bits, or OpenBLAS, which picks them from a table of CPU models and falls
 * back to slow SSE3 kernels on models newer than its release (measured in docs/performance.md).
 * A few rows (decoding) go to matvec.c's bandwidth-bound kernels instead. */
#include <stdio.h>
#include <string.h>

#include "ops.h"
#include "quant.h"
#include "quant_gemm.h"
#include "util/profile.h"
#include "util/cpu.h"
#include "util/f16.h"
#include "util/signals.h"

#if defined(TLM_GEMM_ONEDNN)
#include <oneapi/dnnl/dnnl.h>
#else
#include <cblas.h>
#endif

void gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
          int ldb, float beta, float *C, int ldc) {
    signals_hold(); /* (util/signals.h: oneDNN's JIT kernels move rsp into the heap; free inside a pass's hold) */
#if defined(TLM_GEMM_ONEDNN)
    /* row-major, like CBLAS; the status can only report bad arguments, which the engine's
     * shapes never are (every call site passes its own consistent leading dimensions) */
    (void)dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc);
#endif
    signals_release();
}

const char *gemm_backend_name(void) {
#if defined(TLM_GEMM_ONEDNN)
    static char name[64];
    if (!name[0]) {
        const dnnl_version_t *v = dnnl_version();
        snprintf(name, sizeof name, "oneDNN %d.%d.%d", v->major, v->minor, v->patch);
    }
    return name;
#else
    return "OpenBLAS (CBLAS)";
#endif
}

/* out [N,OC] += bias [OC] on every row */
static void add_bias(float *out, const float *bias, int N, int OC) {
#pragma omp parallel for schedule(static) if((size_t)N * OC > OMP_MIN_WORK)
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) out[(size_t)n * OC + o] += bias[o];
}

void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int IC, int OC) {
    PROF_SCOPE("matmul_forward");
    /* out[N,OC] = inp[N,IC] @ weight[OC,IC]^T */
    if (N <= MATVEC_MAX_ROWS) {
        matvec_f32(out, inp, weight, bias, N, IC, OC);
        return;
    }
    gemm(0, 1, N, OC, IC, 1.0f, inp, IC, weight, IC, 0.0f, out, OC);
    if (bias) add_bias(out, bias, N, OC);
}

void matmul_forward_mixed(float *out, const float *inp, const uint16_t *inp16, const float *weight,
                          const uint16_t *weight16, const float *bias, int N, int IC, int OC) {
    PROF_SCOPE("matmul_forward_bf16");
    if (!inp16 && gemm_bf16_path() != GEMM_BF16_NONE) inp16 = bf16_stage(0, inp, (size_t)N * IC);
    if (!inp16 || gemm_bf16(0, 1, N, OC, IC, inp16, IC, weight16, IC, 0.0f, out, OC, bias))
        matmul_forward(out, inp, weight, bias, N, IC, OC);
}

/* dbias [OC] += the column sums of dout [N,OC] */
static void bias_backward(float *dbias, const float *dout, int N, int OC) { column_sums(dbias, NULL, dout, N, OC); }

/* dinp_beta 1: dinp += dout @ W; 0: dinp = dout @ W (then dinp is neither read nor zeroed first) */
static void backward(float dinp_beta, float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                     const float *weight, int N, int IC, int OC) {
    PROF_SCOPE("matmul_backward");
    if (dinp) gemm(0, 0, N, IC, OC, 1.0f, dout, OC, weight, IC, dinp_beta, dinp, IC); /* dout @ W */
    if (dweight) gemm(1, 0, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dweight, IC); /* dout^T @ inp */
    if (dbias) bias_backward(dbias, dout, N, OC);
}

void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                     const float *weight, int N, int IC, int OC) {
    backward(1.0f, dinp, dweight, dbias, dout, inp, weight, N, IC, OC);
}

void matmul_backward_into(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                          const float *weight, int N, int IC, int OC) {
    backward(0.0f, dinp, dweight, dbias, dout, inp, weight, N, IC, OC);
}

/* the products of a mixed-precision backward from dout16, dout's bf16 copy: inp16 (inp's, or NULL:
 * staged here in stage 1) and weight16; a product that fails runs in f32 on dout (or on dout16
 * widened into dout_scratch, when the caller has no f32 dout) */
static void backward_bf16_products(float dinp_beta, float *dinp, float *dweight, const uint16_t *dout16,
                                   const float *dout, float *dout_scratch, const float *inp, const uint16_t *inp16,
                                   const float *weight, const uint16_t *weight16, int N, int IC, int OC) {
    if (dweight && !inp16) inp16 = bf16_stage(1, inp, (size_t)N * IC);
    const int dinp_failed = dinp && gemm_bf16(0, 0, N, IC, OC, dout16, OC, weight16, IC, dinp_beta, dinp, IC, NULL);
    const int dweight_failed =
        dweight && (!inp16 || gemm_bf16(1, 0, OC, IC, N, dout16, OC, inp16, IC, 1.0f, dweight, IC, NULL));
    if ((dinp_failed || dweight_failed) && !dout) {
        for (size_t i = 0; i < (size_t)N * OC; i++) dout_scratch[i] = tlm_bf16_to_f32(dout16[i]);
        dout = dout_scratch;
    }
    if (dinp_failed) gemm(0, 0, N, IC, OC, 1.0f, dout, OC, weight, IC, dinp_beta, dinp, IC);
    if (dweight_failed) gemm(1, 0, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dweight, IC);
}

/* the same products on bf16 copies of dout and inp (inp16: already staged by the caller, or NULL)
 * against the bf16 weights; any failure of the bf16 products (no path, out of memory for the
 * staging copies) takes the f32 route instead */
void matmul_backward_bf16(int into, float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                          const uint16_t *inp16, const float *weight, const uint16_t *weight16, int N, int IC,
                          int OC) {
    PROF_SCOPE("matmul_backward_bf16");
    const float dinp_beta = into ? 0.0f : 1.0f;
    /* dout rounded to bf16 in the same pass that sums its columns into dbias (bias_backward's
     * order) */
    const uint16_t *dout16 =
        gemm_bf16_path() != GEMM_BF16_NONE ? bf16_stage_colsum(0, dout, N, OC, dbias) : NULL;
    if (!dout16) {
        backward(dinp_beta, dinp, dweight, dbias, dout, inp, weight, N, IC, OC);
        return;
    }
    backward_bf16_products(dinp_beta, dinp, dweight, dout16, dout, NULL, inp, inp16, weight, weight16, N, IC, OC);
}

void matmul_backward_bf16_rounded(int into, float *dinp, float *dweight, const uint16_t *dout16, float *dout_scratch,
                                  const float *inp, const uint16_t *inp16, const float *weight,
                                  const uint16_t *weight16, int N, int IC, int OC) {
    PROF_SCOPE("matmul_backward_bf16");
    backward_bf16_products(into ? 0.0f : 1.0f, dinp, dweight, dout16, NULL, dout_scratch, inp, inp16, weight, weight16,
                           N, IC, OC);
}

void split_columns(float *const *dst, const int *widths, int parts, const float *src, int N) {
    PROF_SCOPE("split_columns");
    int total = 0;
    for (int i = 0; i < parts; i++) total += widths[i];
#pragma omp parallel for schedule(static) if((size_t)N * total > OMP_MIN_WORK)
    for (int n = 0; n < N; n++) {
        const float *row = src + (size_t)n * total;
        for (int i = 0; i < parts; i++) {
            memcpy(dst[i] + (size_t)n * widths[i], row, sizeof(float) * widths[i]);
            row += widths[i];
        }
    }
}

void matmul_forward_quant(float *out, const float *inp, const void *weight, int wq_type, const float *bias, int N,
                          int IC, int OC, float *tile, int product_bf16) {
    PROF_SCOPE("matmul_forward_quant");
    if (N <= MATVEC_MAX_ROWS) {
        matvec_quant(out, inp, weight, wq_type, bias, N, IC, OC);
        return;
    }
    /* a short prompt in the integer mode: one pass over the weights for up to WQ_INT_MAX_ROWS rows,
     * each block unpacked once for them, instead of widening the whole matrix for the GEMM */
    if (N <= WQ_INT_PROMPT_ROWS && !wq_int_matvec(out, inp, weight, wq_type, bias, N, IC, OC)) return;
    /* a longer one: the integer GEMM (quant_gemm.h), each weight block unpacked once for all rows */
    if (N > WQ_INT_PROMPT_ROWS && !wq_gemm_forward(out, inp, weight, wq_type, bias, N, IC, OC)) return;
    const uint16_t *inp16 =
        product_bf16 && gemm_bf16_path() != GEMM_BF16_NONE ? bf16_stage(0, inp, (size_t)N * IC) : NULL;
    if (inp16) {
        /* the bf16 tile takes half the f32 one's bytes: twice the rows per GEMM */
        enum { ROWS16 = 2 * MATMUL_BF16_TILE };
        uint16_t *tile16 = (uint16_t *)tile;
        int o0 = 0;
        for (; o0 < OC; o0 += ROWS16) {
            const int rows = OC - o0 < ROWS16 ? OC - o0 : ROWS16;
#pragma omp parallel for schedule(static)
            for (int r = 0; r < rows; r++)
                wq_dequantize_rows_bf16(wq_type, weight, IC, o0 + r, o0 + r + 1, tile16 + (size_t)r * IC);
            if (gemm_bf16(0, 1, N, rows, IC, inp16, IC, tile16, IC, 0.0f, out + o0, OC, bias ? bias + o0 : NULL))
                break;
        }
        if (o0 >= OC) return;
        /* (a failed primitive: the f32 product below, from the start) */
    }
    /* as matmul_forward_bf16 without bf16 products: the dequantizing is O(OC IC) against the
     * GEMM's O(N OC IC) */
    for (int o0 = 0; o0 < OC; o0 += MATMUL_BF16_TILE) {
        const int rows = OC - o0 < MATMUL_BF16_TILE ? OC - o0 : MATMUL_BF16_TILE;
#pragma omp parallel for schedule(static)
        for (int r = 0; r < rows; r++)
            wq_dequantize_rows(wq_type, (const uint8_t *)weight, IC, o0 + r, o0 + r + 1, tile + (size_t)r * IC);
        gemm(0, 1, N, rows, IC, 1.0f, inp, IC, tile, IC, 0.0f, out + o0, OC);
    }
    if (bias) add_bias(out, bias, N, OC);
}

void matmul_forward_bf16(float *out, const float *inp, const uint16_t *weight, const float *bias, int N, int IC,
                         int OC, float *tile, int product_bf16) {
    PROF_SCOPE("matmul_forward_bf16");
    if (N <= MATVEC_MAX_ROWS) {
        matvec_bf16(out, inp, weight, bias, N, IC, OC);
        return;
    }
    /* many rows in mixed precision, on a CPU with bf16 products: round the rows to bf16 and multiply there */
    const uint16_t *inp16 =
        product_bf16 && gemm_bf16_path() != GEMM_BF16_NONE ? bf16_stage(0, inp, (size_t)N * IC) : NULL;
    if (inp16 && !gemm_bf16(0, 1, N, OC, IC, inp16, IC, weight, IC, 0.0f, out, OC, bias)) return;
    /* elsewhere: widen MATMUL_BF16_TILE weight rows at a time and multiply them with the f32 GEMM;
     * the widening is O(OC IC) against the GEMM's O(N OC IC) */
    for (int o0 = 0; o0 < OC; o0 += MATMUL_BF16_TILE) {
        const int rows = OC - o0 < MATMUL_BF16_TILE ? OC - o0 : MATMUL_BF16_TILE;
        const uint16_t *w = weight + (size_t)o0 * IC;
        const size_t n = (size_t)rows * IC;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) tile[i] = tlm_bf16_to_f32(w[i]);
        gemm(0, 1, N, rows, IC, 1.0f, inp, IC, tile, IC, 0.0f, out + o0, OC);
    }
    if (bias) add_bias(out, bias, N, OC);
}
