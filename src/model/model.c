/* model.c — the engine's rules that callers must not re-derive: the layer's attention (which keys
 * a query sees), the FFN's activation, the residual stream's stages, the norm weight's offset. It
 * calls nothing but the config's: the components and the drivers both ask it. The model's
 * lifetime is params.c's (model_create, model_free); what runs it is a context (context.h); the
 * pass itself is pass.c (drivers), block.c and the components (attention.c, mla.c, ffn.c, moe.c,
 * ple.c, norm.c, linear.c), layout.c (activation memory), rope_tables.c, split.c (a batch across
 * the threads) and hooks.c (observers, points). */
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "tinylm.h"
#include "util/error.h"



/* ---- the layer's shape ----------------------------------------------------------------------- */

attention_spec model_layer_attention(const tlm_config *c, int l) {
    const int hd = config_layer_head_dim(c, l);
    attention_spec s = {.n_heads = c->n_heads, .n_kv_heads = config_layer_kv_heads(c, l), .head_dim = hd,
                        .scale = config_attention_scale(c, l),
                        .softcap = c->attn_softcap, .window = c->layer_sliding[l] ? c->sliding_window : 0};
    return s;
}

activation model_ffn_activation(const tlm_config *c) { return c->ffn == FFN_SWIGLU ? ACT_SILU : ACT_GELU_TANH; }


int model_key_visible(const tlm_config *c, int l, int query, int key) {
    return attention_key_visible(query, key, model_layer_attention(c, l).window);
}

int tlm_attention_mask(const tlm_model *m, int layer, int T, int start, unsigned char *mask) {
    const tlm_config *c = &m->cfg;
    if (layer < 0 || layer >= c->n_layers)
        return tlm_error("attention mask: layer %d is out of range (0..%d)", layer, c->n_layers - 1);
    if (T <= 0 || !mask) return tlm_error("attention mask: T = %d must be positive, mask non-NULL", T);
    if (start < 0 || start >= T) return tlm_error("attention mask: start = %d is out of range (0..%d)", start, T - 1);
    /* (the rule the kernels apply to a left-padded row: attention_first_key_padded) */
    const int window = model_layer_attention(c, layer).window;
    for (int i = 0; i < T; i++) {
        const int first = attention_first_key_padded(i, window, start);
        for (int j = 0; j < T; j++) mask[(size_t)i * T + j] = (unsigned char)(j >= first && j <= i);
    }
    return 0;
}

float model_norm_gain(const tlm_config *c, float w) { return w + config_norm_offset(c); }

/* ---- the residual stream --------------------------------------------------------------------- */

float *model_residual(const activations *A, int stage) {
    return A->res + (size_t)(A->one_layer ? stage % 2 : stage) * A->stage;
}

float *model_residual_grad(const activations *A, int stage) {
    return A->dres ? A->dres + (size_t)stage * A->stage : NULL;
}
