/* rope_tables.c — the RoPE tables of a model: cos/sin of position x frequency for positions
 * [0, rope_len), for the global layers and (Gemma 3) the sliding-window layers' own base. */
#include <math.h>
#include <stdlib.h>

#include "model.h"
#include "util/error.h"

/* RoPE tables for positions [0, len) of heads of hd dims: cos/sin of pos * inv_freq[i], computed
 * in float32 as Hugging Face's rotary embedding does (inv_freq, then the product, then cos/sin).
 * The global tables (`scaled`) carry the scaling and Gemma 4's proportional RoPE: only the first
 * floor(fraction * hd / 2) frequencies rotate, the others are 0 (cos 1, sin 0), each frequency
 * still theta^(-2i/hd) over the whole head (modeling_rope_utils' _compute_proportional_rope_parameters). */
static void rope_tables(const tlm_config *c, float theta, int scaled, int hd, float *cos_tab, float *sin_tab,
                        int len) {
    const int half = hd / 2;
    const int rotated = scaled && c->rope_proportional > 0.0f ? (int)floor((double)c->rope_proportional * hd / 2.0) : half;
    float inv_freq[half];
    for (int i = 0; i < half; i++) {
        inv_freq[i] = i < rotated ? 1.0f / powf(theta, (float)(2 * i) / (float)hd) : 0.0f;
        if (!scaled || i >= rotated) continue;
        if (c->rope_scaling == ROPE_SCALING_LINEAR) {
            inv_freq[i] /= c->rope_factor;
        } else if (c->rope_scaling == ROPE_SCALING_LLAMA3) {
            float old = (float)c->rope_original_max_pos;
            float low_wavelen = old / c->rope_low_freq_factor, high_wavelen = old / c->rope_high_freq_factor;
            float wavelen = 2.0f * (float)M_PI / inv_freq[i];
            if (wavelen > low_wavelen) {
                inv_freq[i] /= c->rope_factor;
            } else if (wavelen >= high_wavelen) {
                float smooth = (old / wavelen - c->rope_low_freq_factor) /
                               (c->rope_high_freq_factor - c->rope_low_freq_factor);
                inv_freq[i] = (1.0f - smooth) * inv_freq[i] / c->rope_factor + smooth * inv_freq[i];
            }
        }
    }
    for (int p = 0; p < len; p++)
        for (int i = 0; i < half; i++) {
            float angle = (float)p * inv_freq[i];
            cos_tab[(size_t)p * half + i] = cosf(angle);
            sin_tab[(size_t)p * half + i] = sinf(angle);
        }
}

int model_ensure_rope(tlm_model *m, int len) {
    const tlm_config *c = &m->cfg;
    if (c->position != POS_ROPE || len <= m->rope_len) return 0;
    /* the global tables have the width of the full layers' heads, the local ones the sliding layers' */
    const int hd_global = c->head_dim_full > 0 ? c->head_dim_full : c->head_dim;
    int local = c->rope_theta_local > 0.0f;
    float *t[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < (local ? 4 : 2); i++)
        if (!(t[i] = malloc((size_t)len * ((i < 2 ? hd_global : c->head_dim) / 2) * sizeof(float) + 1))) {
            for (int j = 0; j < 4; j++) free(t[j]);
            return tlm_error("out of memory for RoPE tables of %d positions", len);
        }
    free(m->rope_cos), free(m->rope_sin), free(m->rope_cos_local), free(m->rope_sin_local);
    m->rope_cos = t[0], m->rope_sin = t[1], m->rope_cos_local = t[2], m->rope_sin_local = t[3];
    rope_tables(c, c->rope_theta, 1, hd_global, m->rope_cos, m->rope_sin, len);
    if (local) rope_tables(c, c->rope_theta_local, 0, c->head_dim, m->rope_cos_local, m->rope_sin_local, len);
    m->rope_len = len;
    return 0;
}

void model_layer_rope(const tlm_model *m, int l, const float **cos_tab, const float **sin_tab) {
    int local = m->cfg.rope_theta_local > 0.0f && !config_layer_full(&m->cfg, l);
    *cos_tab = local ? m->rope_cos_local : m->rope_cos;
    *sin_tab = local ? m->rope_sin_local : m->rope_sin;
}
