/* optim.c — AdamW, clipping and the schedule. */
#include "optim.h"
#include "util/profile.h"

#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "ops/ops.h"
#include "ops/simd_avx512.h"
#include "util/cpu.h"
#include "util/f16.h"
#include "util/hugepage.h"
#include "model/context.h"

static int applies_decay(const tensor_info *t, bool decay_embeddings) {
    if (t->kind == TENSOR_MATRIX || t->kind == TENSOR_RESIDUAL_MATRIX) return 1;
    return t->kind == TENSOR_EMBEDDING && decay_embeddings;
}

int adamw_init(adamw *o, const tlm_model *m, const optim_config *cfg) {
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->m = calloc(m->n_params, sizeof(float));
    o->v = calloc(m->n_params, sizeof(float));
    tlm_advise_huge(o->m, m->n_params * sizeof(float));
    tlm_advise_huge(o->v, m->n_params * sizeof(float));
    o->decays = calloc((size_t)m->n_tensors, 1);
    if (!o->m || !o->v || !o->decays) {
        adamw_free(o);
        return tlm_error("out of memory for the optimizer state (%zu parameters)", m->n_params);
    }
    for (int i = 0; i < m->n_tensors; i++) o->decays[i] = (unsigned char)applies_decay(&m->tensors[i], cfg->decay_embeddings);
    o->lo = 0, o->hi = m->n_params;
    return 0;
}

int adamw_shard(adamw *o, size_t lo, size_t hi) {
    const size_t n = hi - lo;
    memmove(o->m, o->m + (lo - o->lo), n * sizeof(float));
    memmove(o->v, o->v + (lo - o->lo), n * sizeof(float));
    float *m = realloc(o->m, (n ? n : 1) * sizeof(float)), *v = realloc(o->v, (n ? n : 1) * sizeof(float));
    if (m) o->m = m; /* (a failed shrink keeps the larger block, still valid) */
    if (v) o->v = v;
    o->lo = lo, o->hi = hi;
    return 0;
}

void adamw_free(adamw *o) {
    free(o->m), free(o->v), free(o->decays);
    o->m = o->v = NULL, o->decays = NULL;
}

double grad_global_norm(const tlm_model *m) {
    PROF_SCOPE("grad_global_norm");
    float part[SUMSQ_CHUNKS]; /* (the same chunks and lanes as a split batch's gradient sum: ops.h) */
#pragma omp parallel for schedule(static)
    for (int c = 0; c < SUMSQ_CHUNKS; c++) {
        size_t begin, end;
        sumsq_chunk(m->n_params, c, &begin, &end);
        float lanes[SUMSQ_LANES] = {0};
        sumsq_lanes(lanes, m->ctx->grad_mem + begin, end - begin);
        part[c] = sumsq_lanes_total(lanes);
    }
    return sqrt(sumsq_total(part));
}

/* one parameter's update (written once for the two loops below) */
#define ADAMW_UPDATE(i)                                                                                                 \
    do {                                                                                                               \
        const float gi = g[i] * clip;                                                                                  \
        mm[i] = b1 * mm[i] + (1.0f - b1) * gi;                                                                         \
        vv[i] = b2 * vv[i] + (1.0f - b2) * gi * gi;                                                                    \
        p[i] = p[i] * decay - step_size * mm[i] / (sqrtf(vv[i]) / bc2_sqrt + eps);                                     \
    } while (0)

/* the update's constants */
typedef struct {
    float clip, b1, b2, decay, step_size, bc2_sqrt, eps;
} update_k;

#if defined(__x86_64__)
/* The same update on 16 lanes, elements [i0, i1): the operations of ADAMW_UPDATE in its order, each
 * rounded (no fused multiply-add: the build contracts none in the portable loop either), so the bits
 * are the portable loop's. The default build's loops are SSE2; with the mirror's rounding in the
 * same loop they became bound by instructions, not memory (docs/performance.md, "Figures behind the code"). */
TLM_AVX512 static void update_avx512(float *p, float *g, float *mm, float *vv, uint16_t *w16, int clear, size_t i0,
                                     size_t i1, const update_k *k) {
    const __m512 clip = _mm512_set1_ps(k->clip), b1 = _mm512_set1_ps(k->b1), b1c = _mm512_set1_ps(1.0f - k->b1),
                 b2 = _mm512_set1_ps(k->b2), b2c = _mm512_set1_ps(1.0f - k->b2), decay = _mm512_set1_ps(k->decay),
                 step_size = _mm512_set1_ps(k->step_size), bc2_sqrt = _mm512_set1_ps(k->bc2_sqrt),
                 eps = _mm512_set1_ps(k->eps);
    for (size_t i = i0; i < i1; i += 16) {
        const int left = i1 - i < 16 ? (int)(i1 - i) : 16;
        const __m512 gi = _mm512_mul_ps(load16(g + i, left), clip);
        const __m512 m = _mm512_add_ps(_mm512_mul_ps(b1, load16(mm + i, left)), _mm512_mul_ps(b1c, gi));
        const __m512 v = _mm512_add_ps(_mm512_mul_ps(b2, load16(vv + i, left)), _mm512_mul_ps(_mm512_mul_ps(b2c, gi), gi));
        const __m512 den = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(v), bc2_sqrt), eps);
        const __m512 w = _mm512_sub_ps(_mm512_mul_ps(load16(p + i, left), decay),
                                       _mm512_div_ps(_mm512_mul_ps(step_size, m), den));
        if (clear) store16(g + i, _mm512_setzero_ps(), left);
        store16(mm + i, m, left);
        store16(vv + i, v, left);
        store16(p + i, w, left);
        if (w16) {
            if (left == 16)
                _mm256_storeu_si256((__m256i *)(w16 + i), bf16_round16(w));
            else
                _mm256_mask_storeu_epi16(w16 + i, tail16(left), bf16_round16(w));
        }
    }
}
#endif

static void step(adamw *o, tlm_model *m, float lr, double grad_norm, uint16_t *mirror, int clear) {
    PROF_SCOPE("adamw_step");
    const optim_config *c = &o->cfg;
    const float clip = c->grad_clip > 0.0f && grad_norm > c->grad_clip ? (float)(c->grad_clip / (grad_norm + 1e-6)) : 1.0f;
    o->step++;
    const float bc1 = 1.0f - powf(c->beta1, (float)o->step), bc2 = 1.0f - powf(c->beta2, (float)o->step);
    const float step_size = lr / bc1, bc2_sqrt = sqrtf(bc2);
    const float b1 = c->beta1, b2 = c->beta2, eps = c->eps;
#if defined(__x86_64__)
    const int avx512 = tlm_cpu_isa() == TLM_ISA_AVX512;
#endif
    /* one parallel region for all tensors: each tensor's loop is split among the threads
     * without a barrier between tensors (they are independent) */
#pragma omp parallel
    for (int t = 0; t < m->n_tensors; t++) {
        const tensor_info *ti = &m->tensors[t];
        /* the part of the tensor in [lo, hi) */
        const size_t a = ti->offset > o->lo ? ti->offset : o->lo;
        const size_t b = ti->offset + ti->numel < o->hi ? ti->offset + ti->numel : o->hi;
        if (a >= b) continue;
        const float decay = o->decays[t] ? 1.0f - lr * c->weight_decay : 1.0f;
        float *p = m->param_mem + a, *g = m->ctx->grad_mem + a, *mm = o->m + (a - o->lo), *vv = o->v + (a - o->lo);
        const size_t n = b - a;
#if defined(__x86_64__)
        if (avx512) { /* (each thread a contiguous share, whole vectors but the last) */
            const update_k k = {clip, b1, b2, decay, step_size, bc2_sqrt, eps};
            size_t i0, i1;
            thread_share(n, &i0, &i1);
            update_avx512(p, g, mm, vv, mirror ? mirror + a : NULL, clear, i0, i1, &k);
            continue;
        }
#endif
        if (!mirror && !clear) {
#pragma omp for schedule(static) nowait
            for (size_t i = 0; i < n; i++) ADAMW_UPDATE(i);
        } else { /* the new weight rounded as model_weights_changed rounds it, while it is in a register */
            uint16_t *w16 = mirror ? mirror + a : NULL;
#pragma omp for schedule(static) nowait
            for (size_t i = 0; i < n; i++) {
                ADAMW_UPDATE(i);
                if (w16) w16[i] = tlm_f32_to_bf16(p[i]);
                if (clear) g[i] = 0.0f;
            }
        }
    }
}
#undef ADAMW_UPDATE

void adamw_step(adamw *o, tlm_model *m, float lr, double grad_norm) { step(o, m, lr, grad_norm, NULL, 0); }

void adamw_step_fused(adamw *o, tlm_model *m, float lr, double grad_norm) {
    const int whole = o->lo == 0 && o->hi == m->n_params;
    step(o, m, lr, grad_norm, whole ? m->product16 : NULL, whole);
    m->ctx->grad_clear = whole;
}

float lr_at(const optim_config *c, int step) {
    if (step < c->warmup_steps) return c->lr * (float)(step + 1) / (float)(c->warmup_steps + 1);
    if (step >= c->total_steps || c->total_steps <= c->warmup_steps) return c->min_lr;
    double ratio = (double)(step - c->warmup_steps) / (double)(c->total_steps - c->warmup_steps);
    double coeff = 0.5 * (1.0 + cos(M_PI * ratio));
    return (float)(c->min_lr + coeff * (c->lr - c->min_lr));
}
