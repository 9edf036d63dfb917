/* walk.c — the parameter walk's and the activation arena's steps (walk.h), which every
 * component's fragments and the two drivers (params.c, layout.c) take. */
#include "walk.h"

#include <stdint.h>
#include <stdio.h>

#include "ops/quant.h"

/* ---- the parameter walk ------------------------------------------------------------------------- */

void walk_kept(param_walk *w, matrix_slots s, const char *name, int rows, int cols, tensor_kind kind, float identity) {
    size_t numel = (size_t)rows * (cols ? (size_t)cols : 1);
    if (w->table) {
        tensor_info *t = &w->table[w->count];
        snprintf(t->name, sizeof t->name, "%s", name);
        t->ndim = cols ? 2 : 1;
        t->shape[0] = rows;
        t->shape[1] = cols;
        t->offset = w->offset;
        t->numel = numel;
        t->kind = kind;
        t->identity = identity;
    }
    if (w->base && w->placed) {
        const tensor_info *t = &w->placed[w->count];
        if (s.f32) *s.f32 = t->bf16 || t->qtype ? NULL : w->base + t->offset;
        if (s.bf16) *s.bf16 = t->bf16 ? w->base16 + t->offset : NULL;
        if (s.q) *s.q = t->qtype ? w->baseq + t->offset : NULL;
        if (s.q_type) *s.q_type = t->qtype;
    } else if (w->base && s.f32) {
        *s.f32 = w->base + w->offset;
    }
    w->count++;
    w->offset += numel;
}

void walk_add(param_walk *w, float **slot, const char *name, int rows, int cols, tensor_kind kind, float identity) {
    walk_kept(w, (matrix_slots){slot, NULL, NULL, NULL}, name, rows, cols, kind, identity);
}

void walk_linear(param_walk *w, linear_params *lp, const char *name, int out, int in, bool bias, tensor_kind kind) {
    char buf[96];
    snprintf(buf, sizeof buf, "%.80s.weight", name);
    walk_kept(w, LINEAR_SLOTS(lp), buf, out, in, kind, 0.0f);
    if (bias) {
        snprintf(buf, sizeof buf, "%.80s.bias", name);
        walk_add(w, &lp->b, buf, out, 0, TENSOR_BIAS, 0.0f);
    }
}

void walk_fused(param_walk *w, linear_params *fused, linear_params *const *parts, const char *const *names,
                const int *outs, int n, int in, bool bias, int layer) {
    char buf[96];
    for (int i = 0; i < n; i++) {
        snprintf(buf, sizeof buf, "layers.%d.%s.weight", layer, names[i]);
        walk_kept(w, LINEAR_SLOTS(parts[i]), buf, outs[i], in, TENSOR_MATRIX, 0.0f);
    }
    for (int i = 0; bias && i < n; i++) {
        snprintf(buf, sizeof buf, "layers.%d.%s.bias", layer, names[i]);
        walk_add(w, &parts[i]->b, buf, outs[i], 0, TENSOR_BIAS, 0.0f);
    }
    if (w->base) {
        fused->w = parts[0]->w;
        fused->w16 = parts[0]->w16;
        fused->wq = parts[0]->wq, fused->wq_type = parts[0]->wq_type;
        fused->b = bias ? parts[0]->b : NULL;
        /* quantized parts of different types (Q4_K_M files keep v in Q6_K, q and k in Q4_K) are
         * not one matrix: no fused view, the passes then use the parts (tables lay the parts of a
         * type out back to back, as f32 and bf16 ones) */
        for (int i = 1; i < n && fused->wq; i++)
            if (parts[i]->wq_type != fused->wq_type ||
                parts[i]->wq != parts[i - 1]->wq + wq_row_bytes(fused->wq_type, in) * (size_t)outs[i - 1])
                fused->wq = NULL, fused->wq_type = 0;
        /* a part kept in another store (f32 beside bf16 or quantized) leaves no whole matrix either */
        for (int i = 1; i < n; i++) {
            if (fused->w && parts[i]->w != parts[i - 1]->w + (size_t)outs[i - 1] * in) fused->w = NULL;
            if (fused->w16 && parts[i]->w16 != parts[i - 1]->w16 + (size_t)outs[i - 1] * in) fused->w16 = NULL;
        }
    }
}

/* ---- the activation arena ------------------------------------------------------------------------ */

static float *take_at(arena *a, size_t n, size_t offset) {
    a->used = (a->used + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    float *p = a->base ? a->base + a->used + offset : NULL;
    a->used += n;
    return p;
}

float *take(arena *a, size_t n) { return take_at(a, n, a->B ? n / (size_t)a->B * (size_t)a->b0 : 0); }

float *take_stages(arena *a, size_t stages, size_t n) {
    return take_at(a, stages * n, a->B ? n / (size_t)a->B * (size_t)a->b0 : 0);
}

float *take_shared(arena *a, size_t n) { return take_at(a, n, 0); }

float *arena_base(float *mem) {
    const uintptr_t line = ARENA_ALIGN * sizeof(float);
    return (float *)(((uintptr_t)mem + line - 1) & ~(line - 1));
}

void take_norm(arena *a, norm_acts *na, size_t N, size_t C, int with_y) {
    na->y = with_y ? take(a, N * C) : NULL;
    na->mean = take(a, N);
    na->rstd = take(a, N);
}

uint16_t *take16(arena *a, size_t B, size_t T, size_t width) {
    return T * width % 2 ? NULL : (uint16_t *)take(a, B * T * width / 2);
}
