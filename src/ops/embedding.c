/* embedding.c — token embedding lookup (optionally scaled, Gemma) plus learned positions (GPT-2). */
#include <string.h>

#include "ops.h"
#include "util/profile.h"
#include "util/f16.h"
#include "quant.h"

/* one row: the f32 or the bf16 table (the other is NULL) */
static void embed_row(float *o, const float *wte, const uint16_t *wte16, int token, const float *p, float scale, int C) {
    if (wte16) {
        const uint16_t *e = wte16 + (size_t)token * C;
        for (int c = 0; c < C; c++) o[c] = tlm_bf16_to_f32(e[c]) * scale + (p ? p[c] : 0.0f);
    } else {
        const float *e = wte + (size_t)token * C;
        for (int c = 0; c < C; c++) o[c] = e[c] * scale + (p ? p[c] : 0.0f);
    }
}

static void embed_rows(float *out, const int *tokens, const float *wte, const uint16_t *wte16, const float *wpe,
                       float scale, int B, int T, int C, const int *start) {
#pragma omp parallel for schedule(static) if((size_t)B * T * C > OMP_MIN_WORK)
    for (int bt = 0; bt < B * T; bt++)
        embed_row(out + (size_t)bt * C, wte, wte16, tokens[bt],
                  wpe ? wpe + (size_t)padded_position(bt % T, start, bt / T) * C : NULL, scale, C);
}

void embedding_forward(float *out, const int *tokens, const float *wte, const float *wpe, float scale, int B, int T,
                       int C, const int *start) {
    PROF_SCOPE("embedding_forward");
    embed_rows(out, tokens, wte, NULL, wpe, scale, B, T, C, start);
}

void embedding_forward_bf16(float *out, const int *tokens, const uint16_t *wte, const float *wpe, float scale, int B,
                            int T, int C, const int *start) {
    PROF_SCOPE("embedding_forward_bf16");
    embed_rows(out, tokens, NULL, wte, wpe, scale, B, T, C, start);
}

void embedding_forward_quant(float *out, const int *tokens, const void *wte, int wq_type, const float *wpe,
                             float scale, int B, int T, int C, const int *start) {
    PROF_SCOPE("embedding_forward_quant");
#pragma omp parallel for schedule(static) if((size_t)B * T * C > OMP_MIN_WORK)
    for (int bt = 0; bt < B * T; bt++) {
        float *o = out + (size_t)bt * C;
        const float *p = wpe ? wpe + (size_t)padded_position(bt % T, start, bt / T) * C : NULL;
        wq_dequantize_rows(wq_type, wte, C, tokens[bt], tokens[bt] + 1, o);
        for (int c = 0; c < C; c++) o[c] = o[c] * scale + (p ? p[c] : 0.0f);
    }
}

void embedding_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, float scale, int B, int T,
                        int C, const int *start) {
    PROF_SCOPE("embedding_backward");
    /* rows of dwte collide when a token repeats: accumulate serially over tokens, parallel
     * over blocks of 16 channels (one cache line of each row: a loop over one channel at a
     * time read dout a float per line: docs/performance.md, "Figures behind the code") */
    enum { CH = 16 };
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += CH) {
        const int w = c0 + CH < C ? CH : C - c0;
        for (int bt = 0; bt < B * T; bt++) {
            const float *d = dout + (size_t)bt * C + c0;
            float *e = dwte + (size_t)tokens[bt] * C + c0;
            for (int j = 0; j < w; j++) e[j] += scale * d[j];
            if (dwpe) {
                float *p = dwpe + (size_t)padded_position(bt % T, start, bt / T) * C + c0;
                for (int j = 0; j < w; j++) p[j] += d[j];
            }
        }
    }
}
