/* hooks.c — named activation points of the forward and backward pass (docs/python.md).
 *
 * One mechanism for caching, patching and gradients: with a callback attached
 * (tlm_set_hooks), model.c calls it at each named point with a pointer into the activation
 * buffer; in forward the callback may rewrite the values in place and the pass continues from
 * them; in backward it receives the gradient of the same tensor. With no callback attached
 * each point costs one pointer test. The names follow TransformerLens where the concept is the
 * same. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "tinylm.h"
#include "util/error.h"

struct model_hooks {
    tlm_hook_fn fn;
    void *user;
    unsigned char *fwd, *bwd; /* [count]: which ids call fn */
    int count;
    int failed; /* the id of the first hook whose callback failed, + 1 */
};

int model_hook_count(const tlm_config *c) { return 1 + c->n_layers * HL_COUNT + 2; }

/* name, shape [B,T,...] and flags of hook id under config c; returns ndim, 0 when the config has no such point */
static int hook_describe(const tlm_config *c, int id, int B, int T, char *name, size_t cap, int64_t shape[5],
                         int *flags) {
    const int L = c->n_layers, n = model_hook_count(c);
    const norm_placement pl = c->placement;
    const int in_norm = placement_has_input_norm(pl), out_norm = placement_has_output_norm(pl),
              post_norm = placement_has_post_norm(pl);
    *flags = 0;
    shape[0] = B, shape[1] = T, shape[2] = c->d_model;
    if (id < 0 || id >= n) return 0;
    if (id == 0) return snprintf(name, cap, "hook_embed"), 3;
    if (id >= n - 2) {
        if (!c->final_norm) return 0;
        if (id == n - 2) {
            if (c->norm == NORM_DYT) return 0; /* DyT has no per-row scale */
            snprintf(name, cap, "ln_final.hook_scale");
            shape[2] = 1, *flags = TLM_HOOK_RSTD | TLM_HOOK_READONLY | TLM_HOOK_NO_GRAD;
        } else {
            snprintf(name, cap, "ln_final.hook_normalized");
        }
        return 3;
    }
    const int l = (id - 1) / HL_COUNT, k = (id - 1) % HL_COUNT;
    (void)L;
    const int H = c->n_heads, KV = c->n_kv_heads, hd = c->head_dim;
    const char *fmt = NULL;
    int nd = 3;
    switch (k) {
    case HL_RESID_PRE: fmt = "blocks.%d.hook_resid_pre"; break;
    case HL_RESID_MID: fmt = "blocks.%d.hook_resid_mid"; break;
    case HL_RESID_POST: fmt = "blocks.%d.hook_resid_post"; break;
    case HL_LN1_SCALE: case HL_LN2_SCALE:
        if (!in_norm || c->norm == NORM_DYT) return 0;
        fmt = k == HL_LN1_SCALE ? "blocks.%d.ln1.hook_scale" : "blocks.%d.ln2.hook_scale";
        shape[2] = 1, *flags = TLM_HOOK_RSTD | TLM_HOOK_READONLY | TLM_HOOK_NO_GRAD;
        break;
    case HL_LN1_NORMALIZED: case HL_LN2_NORMALIZED:
        if (!in_norm) return 0;
        fmt = k == HL_LN1_NORMALIZED ? "blocks.%d.ln1.hook_normalized" : "blocks.%d.ln2.hook_normalized";
        break;
    case HL_Q: case HL_Z: case HL_Q_NORMED: case HL_ROT_Q:
    case HL_K: case HL_V: case HL_K_NORMED: case HL_ROT_K:
        if ((k == HL_Q_NORMED || k == HL_K_NORMED) && c->qk_norm == QK_NORM_NONE) return 0;
        if ((k == HL_ROT_Q || k == HL_ROT_K) && c->position != POS_ROPE) return 0;
        fmt = k == HL_Q ? "blocks.%d.attn.hook_q" : k == HL_K ? "blocks.%d.attn.hook_k"
            : k == HL_V ? "blocks.%d.attn.hook_v" : k == HL_Z ? "blocks.%d.attn.hook_z"
            : k == HL_Q_NORMED ? "blocks.%d.attn.hook_q_normed" : k == HL_K_NORMED ? "blocks.%d.attn.hook_k_normed"
            : k == HL_ROT_Q ? "blocks.%d.attn.hook_rot_q" : "blocks.%d.attn.hook_rot_k";
        shape[2] = (k == HL_Q || k == HL_Z || k == HL_Q_NORMED || k == HL_ROT_Q) ? H : KV, shape[3] = hd, nd = 4;
        break;
    case HL_ATTN_SCORES: case HL_PATTERN:
        fmt = k == HL_ATTN_SCORES ? "blocks.%d.attn.hook_attn_scores" : "blocks.%d.attn.hook_pattern";
        shape[1] = H, shape[2] = T, shape[3] = T, nd = 4;
        *flags = k == HL_ATTN_SCORES ? TLM_HOOK_MASKED | TLM_HOOK_READONLY | TLM_HOOK_NO_GRAD : TLM_HOOK_NO_GRAD;
        break;
    case HL_ATTN_RAW: case HL_MLP_RAW: case HL_LN1_OUT_SCALE: case HL_LN2_OUT_SCALE:
        if (!out_norm) return 0;
        if (k == HL_LN1_OUT_SCALE || k == HL_LN2_OUT_SCALE) {
            if (c->norm == NORM_DYT) return 0;
            fmt = k == HL_LN1_OUT_SCALE ? "blocks.%d.ln1_out.hook_scale" : "blocks.%d.ln2_out.hook_scale";
            shape[2] = 1, *flags = TLM_HOOK_RSTD | TLM_HOOK_READONLY | TLM_HOOK_NO_GRAD;
        } else {
            fmt = k == HL_ATTN_RAW ? "blocks.%d.hook_attn_out_pre_norm" : "blocks.%d.hook_mlp_out_pre_norm";
        }
        break;
    case HL_ATTN_OUT: fmt = "blocks.%d.hook_attn_out"; break;
    case HL_MLP_OUT: fmt = "blocks.%d.hook_mlp_out"; break;
    case HL_ATTN_SUM: case HL_MLP_SUM: case HL_LN1_POST_SCALE: case HL_LN2_POST_SCALE:
        if (!post_norm) return 0;
        if (k == HL_LN1_POST_SCALE || k == HL_LN2_POST_SCALE) {
            if (c->norm == NORM_DYT) return 0;
            fmt = k == HL_LN1_POST_SCALE ? "blocks.%d.ln1_post.hook_scale" : "blocks.%d.ln2_post.hook_scale";
            shape[2] = 1, *flags = TLM_HOOK_RSTD | TLM_HOOK_READONLY | TLM_HOOK_NO_GRAD;
        } else {
            fmt = k == HL_ATTN_SUM ? "blocks.%d.hook_resid_mid_pre_norm" : "blocks.%d.hook_resid_post_pre_norm";
        }
        break;
    case HL_MLP_PRE: case HL_MLP_PRE_LINEAR: case HL_MLP_POST:
        if (k == HL_MLP_PRE_LINEAR && c->ffn == FFN_GELU) return 0;
        fmt = k == HL_MLP_PRE ? "blocks.%d.mlp.hook_pre" : k == HL_MLP_POST ? "blocks.%d.mlp.hook_post"
                                                          : "blocks.%d.mlp.hook_pre_linear";
        shape[2] = c->d_ff;
        break;
    default: return 0;
    }
    snprintf(name, cap, fmt, l);
    return nd;
}

int model_hook_fire(tlm_model *m, int id, float *data, int is_grad) {
    struct model_hooks *h = m->hooks;
    if (id < 0 || id >= h->count || !(is_grad ? h->bwd : h->fwd)[id] || h->failed || !data) return 0;
    char name[96];
    int64_t shape[5];
    int flags;
    int nd = hook_describe(&m->cfg, id, m->acts.B, m->acts.T, name, sizeof name, shape, &flags);
    if (!nd) return 0;
    if (h->fn(h->user, id, data, nd, shape, is_grad)) h->failed = id + 1;
    return 0;
}

/* ---- the public side (include/tinylm.h) ------------------------------------------------------ */

int tlm_hook_count(const tlm_model *m) { return model_hook_count(&m->cfg); }

int tlm_hook_info(const tlm_model *m, int id, char *name, size_t name_cap, int B, int T, int64_t shape[5],
                  int *flags) {
    int f = 0;
    int64_t s[5] = {0};
    char buf[96];
    int nd = hook_describe(&m->cfg, id, B, T, buf, sizeof buf, s, &f);
    if (name && name_cap) snprintf(name, name_cap, "%s", nd ? buf : "");
    if (shape) memcpy(shape, s, sizeof s);
    if (flags) *flags = f;
    return nd;
}

int tlm_set_hooks(tlm_model *m, tlm_hook_fn fn, void *user, const unsigned char *fwd, const unsigned char *bwd) {
    if (m->hooks) free(m->hooks->fwd), free(m->hooks->bwd), free(m->hooks), m->hooks = NULL;
    if (!fn) return 0;
    const int n = model_hook_count(&m->cfg);
    struct model_hooks *h = calloc(1, sizeof *h);
    if (h) h->fwd = calloc((size_t)n, 1), h->bwd = calloc((size_t)n, 1);
    if (!h || !h->fwd || !h->bwd) {
        if (h) free(h->fwd), free(h->bwd), free(h);
        return tlm_error("out of memory");
    }
    if (fwd) memcpy(h->fwd, fwd, (size_t)n);
    if (bwd) memcpy(h->bwd, bwd, (size_t)n);
    h->fn = fn, h->user = user, h->count = n;
    m->hooks = h;
    return 0;
}

void model_hooks_free(tlm_model *m) { tlm_set_hooks(m, NULL, NULL, NULL, NULL); }

/* Before a pass: clears the failure mark. After: -1 naming the hook whose callback failed. */
void model_hooks_begin(tlm_model *m) {
    if (m->hooks) m->hooks->failed = 0;
}
int model_hooks_end(tlm_model *m) {
    if (!m->hooks || !m->hooks->failed) return 0;
    char name[96];
    int64_t s[5];
    int f;
    hook_describe(&m->cfg, m->hooks->failed - 1, m->acts.B, m->acts.T, name, sizeof name, s, &f);
    return tlm_error("hook %s: the callback failed", name);
}

/* When the pattern hook of layer l may have rewritten probs: att = probs @ v again. */
void model_hook_attention_from_probs(tlm_model *m, int l, float *att, const float *probs, const float *v) {
    if (!m->hooks || m->hooks->fwd[model_hook_id(l, HL_PATTERN)] != 2) return; /* 2: a hook may rewrite it */
    const tlm_config *c = &m->cfg;
    const int B = m->acts.B, T = m->acts.T, H = c->n_heads, KV = c->n_kv_heads, hd = c->head_dim;
    const int qd = H * hd, kvd = KV * hd, group = H / KV;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int hh = 0; hh < H; hh++) {
                float *o = att + ((size_t)b * T + t) * qd + (size_t)hh * hd;
                const float *p = probs + (((size_t)b * H + hh) * T + t) * T;
                memset(o, 0, sizeof(float) * hd);
                for (int j = 0; j < T; j++) {
                    if (p[j] == 0.0f) continue;
                    const float *vj = v + ((size_t)b * T + j) * kvd + (size_t)(hh / group) * hd;
                    for (int i = 0; i < hd; i++) o[i] += p[j] * vj[i];
                }
            }
}
