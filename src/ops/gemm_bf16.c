/* gemm_bf16.c — matrix products on bf16 operands with f32 results (mixed precision): AMX
 * tiles where the CPU has them, AVX512-BF16's vdpbf16ps otherwise, through oneDNN's matmul
 * primitive (its BLAS-like sgemm has no bf16 sibling in the C API).
 *
 * On an Intel Xeon with AMX the primitive runs several times dnnl_sgemm's speed; capped to
 * AVX512-BF16 it is slower than f32 there (AMD Zen 4/5 is where that path pays). The figures:
 * docs/performance.md, "Figures behind the code".
 *
 * A primitive is built for one shape, layout and thread context, and building one costs far
 * more than running a small one, so each thread keeps its own few, found by shape (training
 * and prefill repeat the same shapes every step). Each thread also keeps the bf16 copies of
 * f32 operands (bf16_stage) that the callers convert into: the one piece of memory the ops
 * layer owns, grown to the largest operand once and reused. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>
#include <pthread.h>

#include "ops.h"
#include "util/clock.h"
#include "util/cpu.h"
#include "util/f16.h"
#include "util/profile.h"
#include "util/signals.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* What a thread keeps here (its oneDNN primitives, its staging buffers) is freed when the thread
 * ends: OpenMP's pool ends threads when a region asks for fewer than before (set_threads 3 -> 2),
 * and a long-lived process that does so repeatedly would otherwise lose them each time. (The main
 * thread's live until exit, reachable from its thread-local storage.) */
static void free_thread_state(void *unused);
static pthread_key_t thread_exit_key;
static int have_thread_exit_key;
static pthread_once_t thread_exit_once = PTHREAD_ONCE_INIT;
static void make_thread_exit_key(void) {
    have_thread_exit_key = pthread_key_create(&thread_exit_key, free_thread_state) == 0; /* (fails only when the
                                                                                     process has no keys left) */
}
/* free_thread_state runs when this thread ends (a key's destructor runs for a non-NULL value) */
static void free_at_thread_exit(void) {
    pthread_once(&thread_exit_once, make_thread_exit_key);
    if (have_thread_exit_key) pthread_setspecific(thread_exit_key, (void *)1);
}
static void free_matmuls(void);

/* A thread's own buffer, grown to the largest size asked for and kept (no allocation once the
 * shapes repeat); freed with the thread. Its bf16 staging copies (bf16_stage) and the dense
 * product of a strided destination (gemm_bf16_task) live in these. */
typedef struct {
    void *p;
    size_t bytes;
} thread_buffer;

static void *thread_buffer_get(thread_buffer *b, size_t bytes) {
    if (b->bytes < bytes) {
        if (!b->p) free_at_thread_exit();
        void *p = realloc(b->p, bytes);
        if (!p) return NULL;
        b->p = p, b->bytes = bytes;
    }
    return b->p;
}

static _Thread_local thread_buffer stage[BF16_STAGES], dense_c, amx_scratch;

#if defined(TLM_GEMM_ONEDNN)
#include <oneapi/dnnl/dnnl.h>

/* ---- which path, if any -------------------------------------------------------------------- */

static int detect_path(void) {
    /* the kernels' ISA cap (TLM_ISA=avx2|scalar) also turns bf16 compute off: the f32
     * fallback is then testable on any machine */
    if (tlm_cpu_isa() < TLM_ISA_AVX512) return GEMM_BF16_NONE;
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa(); /* honours ONEDNN_MAX_CPU_ISA */
    if ((isa & dnnl_cpu_isa_avx512_core_amx) == dnnl_cpu_isa_avx512_core_amx) return GEMM_BF16_AMX;
    if ((isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16) return GEMM_BF16_AVX512BF16;
    return GEMM_BF16_NONE;
}

gemm_bf16_path_t gemm_bf16_path(void) {
    static _Atomic int cached = -1;
    int p = atomic_load_explicit(&cached, memory_order_relaxed);
    if (p < 0) {
        p = detect_path();
        atomic_store_explicit(&cached, p, memory_order_relaxed);
    }
    return (gemm_bf16_path_t)p;
}

/* ---- primitives by shape, per thread ---------------------------------------------------------- */

typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc, accumulate, in_parallel, with_bias; /* the key */
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c, bias;
} matmul_slot;

enum { SLOTS = 256 }; /* (attention in mixed precision adds a few shapes per key count: model/attention.c) */

typedef struct {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    matmul_slot slot[SLOTS];
    int used, next_evict;
} thread_matmuls;

static _Thread_local thread_matmuls tm;

static void destroy_slot(matmul_slot *s) {
    dnnl_primitive_destroy(s->prim);
    dnnl_memory_destroy(s->a), dnnl_memory_destroy(s->b), dnnl_memory_destroy(s->c);
    if (s->bias) dnnl_memory_destroy(s->bias);
    memset(s, 0, sizeof *s);
}

/* a row-major [rows, cols] matrix stored with leading dimension ld, read transposed or not, as
 * oneDNN's logical [r, c] by strides */
static int matrix_desc(dnnl_memory_desc_t *md, int r, int c, int ld, int trans, dnnl_data_type_t dt) {
    dnnl_dims_t dims = {r, c};
    dnnl_dims_t strides = {trans ? 1 : ld, trans ? ld : 1};
    return dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides) != dnnl_success;
}

static matmul_slot *find_or_build(int ta, int tb, int M, int N, int K, int lda, int ldb, int ldc, int accumulate,
                                  int with_bias) {
    const int in_par = omp_in_parallel();
    for (int i = 0; i < tm.used; i++) {
        matmul_slot *s = &tm.slot[i];
        if (s->ta == ta && s->tb == tb && s->M == M && s->N == N && s->K == K && s->lda == lda && s->ldb == ldb &&
            s->ldc == ldc && s->accumulate == accumulate && s->in_parallel == in_par && s->with_bias == with_bias)
            return s;
    }
    if (!tm.engine) {
        free_at_thread_exit();
        if (dnnl_engine_create(&tm.engine, dnnl_cpu, 0) != dnnl_success) return NULL;
        if (dnnl_stream_create(&tm.stream, tm.engine, dnnl_stream_default_flags) != dnnl_success) return NULL;
    }
    matmul_slot *s;
    if (tm.used < SLOTS)
        s = &tm.slot[tm.used++];
    else { /* full (prompts of many lengths): replace round robin */
        s = &tm.slot[tm.next_evict];
        tm.next_evict = (tm.next_evict + 1) % SLOTS;
        destroy_slot(s);
    }
    dnnl_memory_desc_t ad, bd, cd, biasd;
    /* A is op(A) [M,K]: stored [M,K] (ld lda) or [K,M] read transposed; B is op(B) [K,N]; the
     * bias [1,N] is added to every row of the product (before the sum post-op adds C) */
    if (matrix_desc(&ad, M, K, lda, ta, dnnl_bf16) || matrix_desc(&bd, K, N, ldb, tb, dnnl_bf16) ||
        matrix_desc(&cd, M, N, ldc, 0, dnnl_f32) || matrix_desc(&biasd, 1, N, N, 0, dnnl_f32))
        return NULL;
    dnnl_matmul_desc_t desc;
    if (dnnl_matmul_desc_init(&desc, &ad, &bd, with_bias ? &biasd : NULL, &cd) != dnnl_success) return NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post = NULL;
    if (accumulate) { /* C += A B: the sum post-op reads C before the result is added */
        if (dnnl_primitive_attr_create(&attr) != dnnl_success || dnnl_post_ops_create(&post) != dnnl_success ||
            dnnl_post_ops_append_sum(post, 1.0f) != dnnl_success ||
            dnnl_primitive_attr_set_post_ops(attr, post) != dnnl_success) {
            dnnl_post_ops_destroy(post), dnnl_primitive_attr_destroy(attr);
            return NULL;
        }
    }
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &desc, attr, tm.engine, NULL);
    dnnl_post_ops_destroy(post), dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) return NULL;
    st = dnnl_primitive_create(&s->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success) return NULL;
    if (dnnl_memory_create(&s->a, &ad, tm.engine, DNNL_MEMORY_NONE) != dnnl_success ||
        dnnl_memory_create(&s->b, &bd, tm.engine, DNNL_MEMORY_NONE) != dnnl_success ||
        dnnl_memory_create(&s->c, &cd, tm.engine, DNNL_MEMORY_NONE) != dnnl_success ||
        (with_bias && dnnl_memory_create(&s->bias, &biasd, tm.engine, DNNL_MEMORY_NONE) != dnnl_success)) {
        destroy_slot(s);
        return NULL;
    }
    s->ta = ta, s->tb = tb, s->M = M, s->N = N, s->K = K, s->lda = lda, s->ldb = ldb, s->ldc = ldc;
    s->accumulate = accumulate, s->in_parallel = in_par, s->with_bias = with_bias;
    return s;
}

static void free_matmuls(void) {
    for (int i = 0; i < tm.used; i++) destroy_slot(&tm.slot[i]);
    if (tm.stream) dnnl_stream_destroy(tm.stream);
    if (tm.engine) dnnl_engine_destroy(tm.engine);
    memset(&tm, 0, sizeof tm);
}

int gemm_bf16(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
              float beta, float *C, int ldc, const float *bias) {
    PROF_SCOPE("gemm_bf16");
    return gemm_bf16_task(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc, bias);
}

/* multiply-adds up to which a product called outside a parallel region goes to amx.c (attention's
 * per-block ones: 128 x 1024 x 64 is 8.4M) */
#define AMX_OWN_MAX (1 << 24)

static int run_product(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
                       int ldb, float beta, float *C, int ldc, const float *bias) {
    matmul_slot *s = find_or_build(trans_a, trans_b, M, N, K, lda, ldb, ldc, beta != 0.0f, bias != NULL);
    if (!s) return -1;
    dnnl_memory_set_data_handle(s->a, (void *)A);
    dnnl_memory_set_data_handle(s->b, (void *)B);
    dnnl_memory_set_data_handle(s->c, C);
    if (bias) dnnl_memory_set_data_handle(s->bias, (void *)bias);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, s->a}, {DNNL_ARG_WEIGHTS, s->b}, {DNNL_ARG_DST, s->c},
                               {DNNL_ARG_BIAS, s->bias}};
    signals_hold(); /* (util/signals.h, as gemm()) */
    const int ok = dnnl_primitive_execute(s->prim, tm.stream, bias ? 4 : 3, args) == dnnl_success &&
                   dnnl_stream_wait(tm.stream) == dnnl_success;
    signals_release();
    return ok ? 0 : -1;
}

int gemm_bf16_task(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
                   int ldb, float beta, float *C, int ldc, const float *bias) {
    if (gemm_bf16_path() == GEMM_BF16_NONE) return -1; /* (oneDNN would emulate bf16 slowly, or refuse) */
    if (M <= 0 || N <= 0) return 0;
    if (K <= 0) { /* an empty sum: C = beta C (+ bias), as BLAS */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                C[(size_t)i * ldc + j] = (beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j]) + (bias ? bias[j] : 0.0f);
        return 0;
    }
    /* On AMX, amx.c's tile kernel (one thread) takes the small products, which oneDNN would build a
     * primitive for per shape and spend more on per call than on the arithmetic (attention's blocks),
     * and every product of a thread inside a parallel region (a split batch's linear layers: there
     * it was at least oneDNN's speed). The large products of a whole pass stay with oneDNN, which
     * shares them among the threads and is the faster there (docs/performance.md, "Figures behind the code"). */
    if (gemm_bf16_path() == GEMM_BF16_AMX && ((double)M * N * K <= AMX_OWN_MAX || omp_in_parallel())) {
        void *scratch = thread_buffer_get(&amx_scratch, amx_scratch_bytes(M, N, K));
        if (scratch && !amx_gemm_bf16(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc, bias, scratch))
            return 0;
    }
    /* oneDNN 2.6 runs its AMX kernel only for a dense C (ldc = N): a strided one silently takes its
     * gemm:jit at a half to a third of the speed. So a strided C gets the product in this thread's
     * dense buffer, then a pass puts it in place (or adds it: the same one f32 addition the sum
     * post-op does, so the same bits) */
    float *D = ldc != N ? thread_buffer_get(&dense_c, sizeof(float) * (size_t)M * N) : NULL;
    if (!D) return run_product(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc, bias);
    if (run_product(trans_a, trans_b, M, N, K, A, lda, B, ldb, 0.0f, D, N, bias)) return -1;
#pragma omp parallel for schedule(static) if (!omp_in_parallel() && (size_t)M * N > OMP_MIN_WORK)
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * ldc;
        const float *d = D + (size_t)i * N;
        if (beta != 0.0f)
            for (int j = 0; j < N; j++) c[j] += d[j];
        else
            memcpy(c, d, sizeof(float) * N);
    }
    return 0;
}

#else /* the OpenBLAS build: no bf16 products (the callers compute in f32) */

static void free_matmuls(void) {}

gemm_bf16_path_t gemm_bf16_path(void) { return GEMM_BF16_NONE; }

int gemm_bf16_task(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
                   int ldb, float beta, float *C, int ldc, const float *bias) {
    return gemm_bf16(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc, bias);
}

int gemm_bf16(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
              float beta, float *C, int ldc, const float *bias) {
    (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)beta;
    (void)C, (void)ldc, (void)bias;
    return -1;
}
#endif

const char *gemm_bf16_path_name(gemm_bf16_path_t p) {
    switch (p) {
    case GEMM_BF16_AMX: return "AMX-BF16";
    case GEMM_BF16_AVX512BF16: return "AVX512-BF16";
    default: return "none";
    }
}

/* ---- the measured bf16 peak ------------------------------------------------------------------ */

double gemm_bf16_measure_gflops(int S) {
    if (gemm_bf16_path() == GEMM_BF16_NONE || S <= 0) return 0;
    uint16_t *a = calloc((size_t)S * S, sizeof(uint16_t)), *b = calloc((size_t)S * S, sizeof(uint16_t));
    float *c = calloc((size_t)S * S, sizeof(float));
    for (size_t i = 0; a && b && i < (size_t)S * S; i++) /* (values of both signs, not zeros) */
        a[i] = tlm_f32_to_bf16((float)(i % 7) - 3.0f), b[i] = tlm_f32_to_bf16((float)(i % 5) - 2.0f);
    double best = 1e30;
    for (int r = 0; a && b && c && r < 8; r++) { /* (the first run builds the primitive) */
        const double t0 = tlm_now_s();
        if (gemm_bf16(0, 1, S, S, S, a, S, b, S, 0.0f, c, S, NULL)) break;
        const double dt = tlm_now_s() - t0;
        if (r > 0 && dt < best) best = dt;
    }
    free(a), free(b), free(c);
    return best < 1e30 ? 2.0 * S * S * S / best / 1e9 : 0;
}

/* ---- f32 -> bf16 (round to nearest even, as tlm_f32_to_bf16) ----------------------------------- */

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bf16,avx512vl"))) static void to_bf16_avx512(uint16_t *dst, const float *src,
                                                                                  size_t n) {
    /* vcvtne2ps2bf16 reads subnormal inputs as zero; a block holding one takes the scalar
     * rounding, so that every ISA gives the same bits */
    const __m512i expo = _mm512_set1_epi32(0x7f800000), mant = _mm512_set1_epi32(0x007fffff);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 lo = _mm512_loadu_ps(src + i), hi = _mm512_loadu_ps(src + i + 16);
        const __m512i l = _mm512_castps_si512(lo), h = _mm512_castps_si512(hi);
        const __mmask16 sub = (_mm512_testn_epi32_mask(l, expo) & _mm512_test_epi32_mask(l, mant)) |
                              (_mm512_testn_epi32_mask(h, expo) & _mm512_test_epi32_mask(h, mant));
        if (sub) {
            for (size_t j = i; j < i + 32; j++) dst[j] = tlm_f32_to_bf16(src[j]);
            continue;
        }
        __m512bh v = _mm512_cvtne2ps_pbh(hi, lo);
        _mm512_storeu_si512((void *)(dst + i), (__m512i)v);
    }
    for (; i < n; i++) dst[i] = tlm_f32_to_bf16(src[i]);
}
#endif

static void to_bf16_scalar(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = tlm_f32_to_bf16(src[i]);
}

static void (*row_converter(void))(uint16_t *, const float *, size_t) {
#if defined(__x86_64__)
    return tlm_cpu_has_avx512bf16() ? to_bf16_avx512 : to_bf16_scalar;
#else
    return to_bf16_scalar;
#endif
}

void f32_to_bf16_rows(uint16_t *dst, int ld_dst, const float *src, int ld_src, int rows, int cols) {
    void (*conv)(uint16_t *, const float *, size_t) = row_converter();
    for (int r = 0; r < rows; r++) conv(dst + (size_t)r * ld_dst, src + (size_t)r * ld_src, (size_t)cols);
}

void f32_to_bf16(uint16_t *dst, const float *src, size_t n) {
    PROF_SCOPE("f32_to_bf16");
    enum { CHUNK = 1 << 14 };
    void (*conv)(uint16_t *, const float *, size_t) = row_converter();
    if (n <= CHUNK) { /* (no parallel region to enter for a short run: a tile's piece of a row) */
        conv(dst, src, n);
        return;
    }
    const long chunks = (long)((n + CHUNK - 1) / CHUNK);
#pragma omp parallel for schedule(static) if (n > 4 * OMP_MIN_WORK)
    for (long c = 0; c < chunks; c++) {
        const size_t i0 = (size_t)c * CHUNK, len = n - i0 < CHUNK ? n - i0 : CHUNK;
        conv(dst + i0, src + i0, len);
    }
}

/* ---- the per-thread staging buffers -------------------------------------------------------------- */

void column_sums(float *colsum, uint16_t *dst, const float *src, int N, int C) {
    /* pieces of up to PIECE columns of the thread's share: their partial sums stay in L1 */
    enum { PIECE = 2048 };
    void (*conv)(uint16_t *, const float *, size_t) = dst ? row_converter() : NULL;
#pragma omp parallel if ((size_t)N * C > 4 * OMP_MIN_WORK)
    {
        int c_begin, c_end;
        thread_columns(C, &c_begin, &c_end);
        for (int c0 = c_begin; c0 < c_end; c0 += PIECE) {
            const int w = c_end - c0 < PIECE ? c_end - c0 : PIECE;
            float acc[PIECE];
            memset(acc, 0, sizeof(float) * (size_t)w);
            for (int n = 0; n < N; n++) {
                const float *row = src + (size_t)n * C + c0;
                if (conv) conv(dst + (size_t)n * C + c0, row, (size_t)w);
                if (colsum)
                    for (int j = 0; j < w; j++) acc[j] += row[j];
            }
            if (colsum)
                for (int j = 0; j < w; j++) colsum[c0 + j] += acc[j];
        }
    }
}

/* this thread's staging buffer `which`, grown to n values (NULL: no such buffer, out of memory) */
static uint16_t *stage_buffer(int which, size_t n) {
    if (which < 0 || which >= BF16_STAGES) return NULL;
    return thread_buffer_get(&stage[which], n * sizeof(uint16_t));
}

static void free_thread_state(void *unused) {
    (void)unused;
    free_matmuls();
    for (int i = 0; i < BF16_STAGES; i++) free(stage[i].p), stage[i] = (thread_buffer){0};
    free(dense_c.p), dense_c = (thread_buffer){0};
    free(amx_scratch.p), amx_scratch = (thread_buffer){0};
}

uint16_t *bf16_stage_buffer(int which, size_t n) { return stage_buffer(which, n); }

const uint16_t *bf16_stage(int which, const float *src, size_t n) {
    uint16_t *dst = stage_buffer(which, n);
    if (dst) f32_to_bf16(dst, src, n);
    return dst;
}

const uint16_t *bf16_stage_colsum(int which, const float *src, int N, int C, float *colsum) {
    PROF_SCOPE("f32_to_bf16");
    uint16_t *dst = stage_buffer(which, (size_t)N * C);
    if (dst) column_sums(colsum, dst, src, N, C);
    return dst;
}
