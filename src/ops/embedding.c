/* embedding.c — token embedding lookup (optionally scaled, Gemma) plus learned positions (GPT-2). */
#include <string.h>

#include "ops.h"
#include "util/profile.h"
#include "util/f16.h"

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
                       float scale, int B, int T, int C) {
#pragma omp parallel for schedule(static) if((size_t)B * T * C > OMP_MIN_WORK)
    for (int bt = 0; bt < B * T; bt++)
        embed_row(out + (size_t)bt * C, wte, wte16, tokens[bt], wpe ? wpe + (size_t)(bt % T) * C : NULL, scale, C);
}

void embedding_forward(float *out, const int *tokens, const float *wte, const float *wpe, float scale, int B, int T,
                       int C) {
    PROF_SCOPE("embedding_forward");
    embed_rows(out, tokens, wte, NULL, wpe, scale, B, T, C);
}

void embedding_forward_bf16(float *out, const int *tokens, const uint16_t *wte, const float *wpe, float scale, int B,
                            int T, int C) {
    PROF_SCOPE("embedding_forward_bf16");
    embed_rows(out, tokens, NULL, wte, wpe, scale, B, T, C);
}

void embedding_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, float scale, int B, int T,
                        int C) {
    PROF_SCOPE("embedding_backward");
    /* rows of dwte collide when a token repeats: accumulate serially over tokens,
     * parallel over channels */
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        for (int bt = 0; bt < B * T; bt++) {
            float d = dout[(size_t)bt * C + c];
            dwte[(size_t)tokens[bt] * C + c] += scale * d;
            if (dwpe) dwpe[(size_t)(bt % T) * C + c] += d;
        }
    }
}
