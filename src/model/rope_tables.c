/* rope_tables.c — the RoPE tables of a context: cos/sin of position x frequency for positions
 * [0, rope_len), for the global layers and (Gemma 3) the sliding-window layers' own base. */
#include <math.h>
#include <stdlib.h>

#include "context.h"
#include "util/error.h"

/* RoPE tables for positions [0, len) of heads of hd dims: cos/sin of pos * inv_freq[i], computed
 * in float32 as Hugging Face's rotary embedding does (inv_freq, then the product, then cos/sin).
 * The global tables (`scaled`) carry the scaling and Gemma 4's proportional RoPE: only the first
 * floor(fraction * hd / 2) frequencies rotate, the others are 0 (cos 1, sin 0), each frequency
 * still theta^(-2i/hd) over the whole head (modeling_rope_utils' _compute_proportional_rope_parameters). */
/* YaRN (Peng et al. 2023) as modeling_rope_utils' _compute_yarn_parameters computes it: each
 * frequency blends interpolation (theta^(-2i/hd) / factor) and extrapolation (theta^(-2i/hd)) by a
 * linear ramp over the dims between the correction range's ends (the dims that turn beta_fast and
 * beta_slow times over the original context); the tables are multiplied by the attention factor
 * (given, or mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are set, else
 * mscale(factor, 1)). Returns that factor; inv_freq [hd/2] set. */
static float yarn_frequencies(const tlm_config *c, float theta, int hd, float *inv_freq) {
    const int half = hd / 2;
    const double orig = c->rope_original_max_pos > 0 ? c->rope_original_max_pos : c->max_seq;
    const double two_pi = 2.0 * M_PI;
    double lo = hd * log(orig / (c->rope_beta_fast * two_pi)) / (2.0 * log(theta));
    double hi = hd * log(orig / (c->rope_beta_slow * two_pi)) / (2.0 * log(theta));
    if (c->rope_truncate) lo = floor(lo), hi = ceil(hi);
    lo = lo > 0 ? lo : 0, hi = hi < hd - 1 ? hi : hd - 1;
    if (lo == hi) hi += 0.001;
    for (int i = 0; i < half; i++) {
        const float pos_freq = powf(theta, (float)(2 * i) / (float)hd);
        const float extra = 1.0f / pos_freq, inter = 1.0f / (c->rope_factor * pos_freq);
        float ramp = (float)(((double)i - lo) / (hi - lo));
        ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
        const float keep = 1.0f - ramp; /* (the extrapolation's share) */
        inv_freq[i] = inter * (1.0f - keep) + extra * keep;
    }
    if (c->rope_attn_factor > 0.0f) return c->rope_attn_factor;
    if (c->rope_mscale > 0.0f && c->rope_mscale_all_dim > 0.0f)
        return config_yarn_mscale(c->rope_factor, c->rope_mscale) / config_yarn_mscale(c->rope_factor, c->rope_mscale_all_dim);
    return config_yarn_mscale(c->rope_factor, 1.0f);
}

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
    float gain = 1.0f;
    if (scaled && c->rope_scaling == ROPE_SCALING_YARN) gain = yarn_frequencies(c, theta, hd, inv_freq);
    for (int p = 0; p < len; p++)
        for (int i = 0; i < half; i++) {
            float angle = (float)p * inv_freq[i];
            cos_tab[(size_t)p * half + i] = cosf(angle) * gain;
            sin_tab[(size_t)p * half + i] = sinf(angle) * gain;
        }
}

int context_ensure_rope(tlm_context *ctx, int len) {
    const tlm_config *c = &ctx->m->cfg;
    if (c->position != POS_ROPE || len <= ctx->rope_len) return 0;
    /* the global tables have the width of the full layers' heads, the local ones the sliding layers' */
    const int hd_global = config_rope_dim(c); /* (MLA: qk_rope_head_dim) */
    int local = c->rope_theta_local > 0.0f;
    float *t[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < (local ? 4 : 2); i++)
        if (!(t[i] = malloc((size_t)len * ((i < 2 ? hd_global : c->head_dim) / 2) * sizeof(float) + 1))) {
            for (int j = 0; j < 4; j++) free(t[j]);
            return tlm_error("out of memory for RoPE tables of %d positions", len);
        }
    free(ctx->rope_cos), free(ctx->rope_sin), free(ctx->rope_cos_local), free(ctx->rope_sin_local);
    ctx->rope_cos = t[0], ctx->rope_sin = t[1], ctx->rope_cos_local = t[2], ctx->rope_sin_local = t[3];
    rope_tables(c, c->rope_theta, 1, hd_global, ctx->rope_cos, ctx->rope_sin, len);
    if (local) rope_tables(c, c->rope_theta_local, 0, c->head_dim, ctx->rope_cos_local, ctx->rope_sin_local, len);
    ctx->rope_len = len;
    return 0;
}

void context_layer_rope(const tlm_context *ctx, int l, const float **cos_tab, const float **sin_tab) {
    int local = ctx->m->cfg.rope_theta_local > 0.0f && !config_layer_full_attention(&ctx->m->cfg, l);
    *cos_tab = local ? ctx->rope_cos_local : ctx->rope_cos;
    *sin_tab = local ? ctx->rope_sin_local : ctx->rope_sin;
}
