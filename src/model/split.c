/* split.c — a batch's sequences split across the threads: each thread runs the whole pass
 * (pass.c) over its rows with a pass context of its own. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "pass.h"
#include "util/profile.h"

/* ---- splitting a batch across the threads ------------------------------------------------------ */

/* A batch of B sequences on P threads: either every op splits its own loop among the threads
 * (a fork and a join per op, each GEMM cut in P), or each thread runs the whole pass over its
 * B/P sequences (or one more) with single-threaded ops, on views of its rows of the one
 * activation layout, and the threads meet once per pass. The second is the faster (every
 * operand of a thread stays in its own core's caches, no GEMM is cut small, and a training step's
 * forks and joins go; the figures: docs/performance.md, "Figures behind the code"). The sequences
 * are independent in every op but the weight gradients, which are sums over all rows: each
 * part sums its rows into its own gradient buffer, and the parts are added in order at the
 * end, so a run is reproducible for a given thread count (not across thread counts, as the
 * GEMM library's is not either).
 * The GEMM library is then called from several threads at once: oneDNN and OpenBLAS's OpenMP
 * build (the one CMake links) run such a call on the calling thread. */
typedef struct batch_split {
    int parts, n_layers;
    activations *views;  /* [parts], each with its own layers and components' own structs */
    model_params *g;     /* [parts] the weight gradients of each part; g[0] is the model's own */
    layer_params *g_layers;
    float *grad_mem;     /* [(parts - 1) * n_params], zero between passes */
} batch_split;

void split_free(batch_split *s) {
    if (!s) return;
    for (int p = 0; s->views && p < s->parts; p++) free(s->views[p].layers);
    free(s->views), free(s->g), free(s->g_layers), free(s->grad_mem);
    free(s);
}

/* part p's sequences: [split_first(p), split_first(p + 1)), B/P each or one more */
static int split_first(int B, int parts, int p) { return (int)((long long)p * B / parts); }

/* how many parts this pass splits into: 1 (the ops split themselves) unless there are several
 * threads, B divides among them evenly or nearly (B >= 8 P: the largest part at most 1/8 above
 * the mean; the pass waits for it), every part has more rows than decoding's matrix-vector
 * path takes, and nothing needs the pass whole (an observer inside it or of the whole batch's
 * rounding, a KV cache, the bf16 weights' shared tile of widened rows) */
static int split_parts(const tlm_context *ctx, int B, int T) {
    const tlm_model *m = ctx->m;
    const int P = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (P < 2 || (B % P && B < 8 * P) || (B / P) * T <= MATVEC_MAX_ROWS) return 1;
    if (context_needs_whole_batch(ctx) || ctx->kv || m->stored16 || m->wq_mem) return 1;
    const activations *A = &ctx->acts;
    if (A->attn_scratch && (size_t)P > A->attn_slots) return 1;
    return P;
}

/* binds part `part`'s views of the current layout (a walk of pointer arithmetic, no memory) and,
 * with_grads, its gradient buffer; 0 on success */
static int split_prepare(tlm_context *ctx, int parts, int with_grads) {
    const tlm_model *m = ctx->m;
    batch_split *s = ctx->split;
    const int L = m->cfg.n_layers;
    if (s && (s->parts != parts || s->n_layers != L)) split_free(s), s = ctx->split = NULL;
    if (!s) {
        s = ctx->split = calloc(1, sizeof *s);
        if (!s) return -1;
        s->parts = parts, s->n_layers = L;
        s->views = calloc((size_t)parts, sizeof *s->views);
        if (!s->views) return split_free(s), ctx->split = NULL, -1;
        for (int p = 0; p < parts; p++)
            if (activations_alloc_layers(&s->views[p], L)) return split_free(s), ctx->split = NULL, -1;
    }
    activations *A = &ctx->acts;
    const size_t per_seq = (size_t)A->T, scratch = attention_scratch_floats(A->T, config_max_head_dim(&m->cfg));
    for (int p = 0; p < parts; p++) {
        activations *v = &s->views[p];
        const int b0 = split_first(A->B, parts, p), nb = split_first(A->B, parts, p + 1) - b0;
        activations_view(v, A);
        arena a = {.base = arena_base(A->mem), .B = A->B, .b0 = b0};
        layout_activations(ctx, v, &a, A->B, A->T);
        v->B = nb;
        v->logits_rows = A->logits_rows / A->B * nb; /* (T or 1 per sequence) */
        v->tokens = A->tokens + (size_t)b0 * per_seq;
        v->targets = A->targets + (size_t)b0 * per_seq;
        v->start = A->start ? A->start + b0 : NULL;
        if (v->attn_scratch) v->attn_scratch += (size_t)p * scratch;
    }
    if (!with_grads) return 0;
    /* the parts' own gradients cost (P-1) copies of the parameters: taken while that is no more
     * than the activations themselves, else the backward splits its ops instead */
    if ((size_t)(parts - 1) * m->n_params > A->capacity) return -1;
    if (!s->grad_mem) {
        s->g = calloc((size_t)parts, sizeof *s->g);
        s->g_layers = calloc((size_t)parts * L, sizeof *s->g_layers);
        s->grad_mem = calloc((size_t)(parts - 1) * m->n_params, sizeof(float));
        if (!s->g || !s->g_layers || !s->grad_mem) {
            free(s->g), free(s->g_layers), free(s->grad_mem);
            s->g = NULL, s->g_layers = NULL, s->grad_mem = NULL;
            return -1;
        }
        for (int p = 1; p < parts; p++) {
            s->g[p].layers = s->g_layers + (size_t)p * L;
            model_bind_params(m, &s->g[p], s->grad_mem + (size_t)(p - 1) * m->n_params);
        }
    }
    s->g[0] = ctx->g;
    return 0;
}

/* part p's pass: the model's weights, its rows of the context's activations, its own gradients
 * (what may watch a split pass copies each part's rows on the part's thread: hooks.c's capture
 * alone; anything else keeps the pass whole, split_parts) */
static pass_ctx split_part(tlm_context *ctx, int p, int with_grads) {
    pass_ctx x = pass_whole(ctx);
    x.A = &ctx->split->views[p];
    if (with_grads) x.g = &ctx->split->g[p];
    return x;
}

/* on a thread of the split: the ops it calls run on it alone (their own loops and the GEMM
 * library see one thread), and only part 0's thread times them for --profile */
static void split_enter(int thread) {
    omp_set_num_threads(1);
    tlm_prof_quiet = thread != 0;
}

/* (the team's end: the thread's own OpenMP settings end with its implicit task) */
static void split_leave(void) { tlm_prof_quiet = 0; }

/* the gradients of parts 1.. added into the model's (in part order) and zeroed again; every
 * thread of the team takes its share of the sum of squares' chunks (ops.h), and with part (not
 * NULL) also sums the squares of the total, piece by piece while it is in L1: the gradient norm
 * without another pass over the gradients (496 MB at GPT-2 124M) */
static void split_reduce_grads(const tlm_context *ctx, int thread, int threads, float part[SUMSQ_CHUNKS]) {
    const tlm_model *m = ctx->m;
    PROF_SCOPE("split_grad_reduce"); /* (part 0's thread's chunk: the others are quiet) */
    enum { PIECE = 4096 };          /* floats: 16 KB of each buffer */
    const batch_split *s = ctx->split;
    const size_t n = m->n_params;
    float *g = ctx->grad_mem;
    for (int c = SUMSQ_CHUNKS * thread / threads; c < SUMSQ_CHUNKS * (thread + 1) / threads; c++) {
        size_t begin, end;
        sumsq_chunk(n, c, &begin, &end);
        float lanes[SUMSQ_LANES] = {0};
        for (size_t lo = begin; lo < end; lo += PIECE) {
            const size_t hi = end - lo < PIECE ? end : lo + PIECE;
            for (int p = 1; p < s->parts; p++) {
                float *gp = s->grad_mem + (size_t)(p - 1) * n;
                for (size_t i = lo; i < hi; i++) g[i] += gp[i], gp[i] = 0.0f;
            }
            if (part) sumsq_lanes(lanes, g + lo, hi - lo);
        }
        if (part) part[c] = sumsq_lanes_total(lanes);
    }
}

int split_forward(tlm_context *ctx, int has_targets, float *loss) {
    activations *A = &ctx->acts;
    const int parts = split_parts(ctx, A->B, A->T);
    if (parts < 2 || split_prepare(ctx, parts, 0)) return 1;
    float part_loss[parts];
#pragma omp parallel num_threads(parts)
    {
        split_enter(omp_get_thread_num());
        for (int p = omp_get_thread_num(); p < parts; p += omp_get_num_threads()) {
            pass_ctx x = split_part(ctx, p, 0);
            part_loss[p] = 0.0f;
            (void)forward_rows(&x, &part_loss[p]); /* (nothing watches a split pass: it cannot fail) */
        }
        split_leave();
    }
    if (has_targets) { /* the means over all counted rows, from the parts' */
        double total = 0.0, total_sq = 0.0;
        int count = 0;
        for (int p = 0; p < parts; p++) {
            const activations *v = &ctx->split->views[p];
            total += (double)part_loss[p] * v->n_counted, total_sq += (double)v->lse_sq_mean * v->n_counted;
            count += v->n_counted;
        }
        A->n_counted = count;
        *loss = count ? (float)(total / count) : 0.0f;
        A->lse_sq_mean = count ? (float)(total_sq / count) : 0.0f;
    }
    return 0;
}

int split_backward(tlm_context *ctx, const float *dlogits_in, float dloss, double *grad_norm) {
    const tlm_model *m = ctx->m;
    activations *A = &ctx->acts;
    const int parts = split_parts(ctx, A->B, A->T);
    if (parts < 2 || split_prepare(ctx, parts, 1)) return 1;
    const size_t seq_logits = (size_t)A->T * m->cfg.vocab_size;
    float part[SUMSQ_CHUNKS];
#pragma omp parallel num_threads(parts)
    {
        const int thread = omp_get_thread_num(), threads = omp_get_num_threads();
        split_enter(thread);
        for (int p = thread; p < parts; p += threads) {
            pass_ctx x = split_part(ctx, p, 1);
            const size_t first = (size_t)split_first(A->B, parts, p);
            backward_rows(&x, dlogits_in ? dlogits_in + first * seq_logits : NULL, dloss, A->n_counted);
        }
#pragma omp barrier
        split_reduce_grads(ctx, thread, threads, grad_norm ? part : NULL);
        split_leave();
    }
    if (grad_norm) *grad_norm = sqrt(sumsq_total(part));
    return 0;
}
