/* embedding.c — token embedding lookup (optionally scaled, Gemma) plus learned positions (GPT-2). */
#include <string.h>

#include "ops.h"

void embedding_forward(float *out, const int *tokens, const float *wte, const float *wpe, float scale, int B, int T,
                       int C) {
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        const float *e = wte + (size_t)tokens[bt] * C;
        const float *p = wpe ? wpe + (size_t)(bt % T) * C : NULL;
        float *o = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) o[c] = e[c] * scale + (p ? p[c] : 0.0f);
    }
}

void embedding_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, float scale, int B, int T,
                        int C) {
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
