/* params.c — the parameter table: one walk over the config lists every tensor in the
 * documented order (docs/tensors.md) with its name, shape and kind. The same walk lays out
 * the one contiguous buffer and points the named views (model_params) into it — for the
 * parameters and, with another base, for their gradients. This file drives it: each component's
 * tensors are its own file's params fragment (its sublayer_ops table; walk.h's steps). Also the
 * model's lifetime (model_create, model_free). */
#include <math.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "util/error.h"
#include "util/f16.h"
#include "util/rng.h"
#include "util/hugepage.h"
#include "util/profile.h"
#include "ops/quant.h"

/* the walk: the embedding, Gemma 4's per-layer inputs, then each layer as its block orders it (each
 * sublayer's norms, then its component's tensors: block_component's params fragment, in its own
 * file), its epilogue's, then the final norm and the head */
static void walk_tensors(param_walk *w, model_params *p) {
    const tlm_config *c = w->cfg;
    const int d = c->d_model;
    const int norms = placement_has_input_norm(c->placement) || placement_has_post_norm(c->placement),
              out_norm = placement_has_output_norm(c->placement);
    char n[96];
    walk_kept(w, (matrix_slots){&p->embed, &p->embed16, &p->embed_q, &p->embed_q_type}, "embed.weight", c->vocab_size,
              d, TENSOR_EMBEDDING, 0.0f);
    if (c->position == POS_LEARNED) walk_add(w, &p->pos_embed, "pos_embed.weight", c->max_seq, d, TENSOR_EMBEDDING, 0.0f);
    ple_model_params(w, p);
    for (int l = 0; l < c->n_layers; l++) {
        layer_params *L = &p->layers[l];
        memset(L, 0, sizeof *L); /* (the views of absent tensors stay NULL) */
        static const char *const NAME[2][2] = {{"attn_norm", "attn_out_norm"}, {"ffn_norm", "ffn_out_norm"}};
        for (int k = SUB_ATTN; k <= SUB_FFN; k++) {
            const float alpha0 = k == SUB_ATTN ? c->dyt_alpha_init_attn : c->dyt_alpha_init_ffn;
            if (norms)
                snprintf(n, sizeof n, "layers.%d.%s", l, NAME[k][0]),
                    walk_norm(w, block_norm_params(p, l, (sublayer_kind)k, BLOCK_NORM_IN), n, alpha0);
            if (out_norm)
                snprintf(n, sizeof n, "layers.%d.%s", l, NAME[k][1]),
                    walk_norm(w, block_norm_params(p, l, (sublayer_kind)k, BLOCK_NORM_OUT), n, alpha0);
            block_component(c, l, (sublayer_kind)k)->params(w, L, l);
        }
        layer_epilogue_params(w, L, l);
    }
    if (c->final_norm) walk_norm(w, &p->final_norm, "final_norm", c->dyt_alpha_init_final);
    if (!c->tie_embeddings)
        walk_kept(w, (matrix_slots){&p->lm_head, &p->lm_head16, &p->lm_head_q, &p->lm_head_q_type}, "lm_head.weight",
                  c->vocab_size, d, TENSOR_MATRIX, 0.0f);
    if (w->base && c->tie_embeddings)
        p->lm_head = p->embed, p->lm_head16 = p->embed16, p->lm_head_q = p->embed_q, p->lm_head_q_type = p->embed_q_type;
}

void model_bind_params(const tlm_model *m, model_params *views, float *base) {
    param_walk w = {.cfg = &m->cfg, .base = base};
    walk_tensors(&w, views);
}

void model_free(tlm_model *m) {
    if (!m) return;
    context_free(m->ctx);
    free(m->p.layers), free(m->tensors);
    if (m->file_map)
        munmap(m->file_map, m->file_map_len); /* (param_mem points into it) */
    else
        free(m->param_mem);
    free(m->stored16);
    free(m->wq_mem);
    free(m->product16);
    free(m);
}

void model_set_mode(tlm_model *m, model_mode mode) { context_set_mode(m->ctx, mode); }
const float *model_last_logits(const tlm_model *m) { return context_last_logits(m->ctx); }

tlm_model *model_create(const tlm_config *cfg) {
    tlm_model *m = calloc(1, sizeof *m);
    if (!m) return tlm_error("out of memory creating the model"), NULL;
    m->cfg = *cfg;
    m->p.layers = calloc((size_t)cfg->n_layers, sizeof(layer_params));
    m->ctx = context_create(m);
    model_params scratch = {.layers = m->p.layers};
    param_walk count = {.cfg = cfg};
    walk_tensors(&count, &scratch);
    m->n_tensors = count.count;
    m->n_params = count.offset;
    m->tensors = calloc((size_t)m->n_tensors, sizeof(tensor_info));
    m->param_mem = calloc(m->n_params, sizeof(float));
    tlm_advise_huge(m->param_mem, m->n_params * sizeof(float));
    if (!m->p.layers || !m->ctx || !m->tensors || !m->param_mem) {
        model_free(m);
        return tlm_error("out of memory: the model needs %zu parameters (%.1f MiB)", count.offset,
                         count.offset * 4.0 / 1048576.0),
               NULL;
    }
    param_walk fill = {.cfg = cfg, .table = m->tensors, .base = m->param_mem};
    walk_tensors(&fill, &m->p);
    return m;
}

tlm_model *model_create_stored(const tlm_config *cfg, const int *storage) {
    tlm_model *m = calloc(1, sizeof *m);
    if (!m) return tlm_error("out of memory creating the model"), NULL;
    m->cfg = *cfg;
    m->p.layers = calloc((size_t)cfg->n_layers, sizeof(layer_params));
    m->ctx = context_create(m);
    size_t n_floats = 0;
    m->tensors = config_tensor_table(cfg, &m->n_tensors, &n_floats);
    if (!m->p.layers || !m->ctx || !m->tensors) return model_free(m), tlm_error("out of memory creating the model"), NULL;
    /* multi-head latent attention reads row blocks of kv_a and rows of kv_b (mla.c): f32 or bf16 */
    for (int i = 0; config_mla(cfg) && i < m->n_tensors; i++) {
        const tensor_info *t = &m->tensors[i];
        if (t->ndim == 2 && strstr(t->name, ".attn.") && storage[i] != WQ_F32 && storage[i] != WQ_BF16) {
            tlm_error("tensor %s: multi-head latent attention kept as %s is not supported (f32, f16 or bf16 weights "
                      "only)", t->name, wq_name(storage[i]));
            model_free(m);
            return NULL;
        }
    }
    /* a mixture of experts finds expert e at a fixed stride from expert 0 (moe_expert): its
     * matrices must all be f32 or all bf16, and none kept in ggml blocks */
    int moe_store = -1;
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_info *t = &m->tensors[i];
        if (t->ndim != 2 || (!strstr(t->name, ".ffn.experts.") && !strstr(t->name, ".ffn.router.") &&
                             !strstr(t->name, ".ffn.shared_experts.") && !strstr(t->name, ".ffn.shared_expert_gate.")))
            continue;
        if (storage[i] != WQ_F32 && storage[i] != WQ_BF16) {
            tlm_error("tensor %s: a mixture of experts kept as %s is not supported (f32, f16 or bf16 weights only)",
                      t->name, wq_name(storage[i]));
            model_free(m);
            return NULL;
        }
        if (strstr(t->name, ".ffn.experts.") && moe_store >= 0 && storage[i] != moe_store) {
            tlm_error("tensor %s: the experts of a mixture of experts must all be kept in one type", t->name);
            model_free(m);
            return NULL;
        }
        if (strstr(t->name, ".ffn.experts.")) moe_store = storage[i];
    }
    /* each tensor's place in its store, in table order (the parts of a fused view stay back to back) */
    size_t n32 = 0, n16 = 0, nq = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        tensor_info *t = &m->tensors[i];
        const int s = storage[i];
        if (s == WQ_F32) {
            t->offset = n32, n32 += t->numel;
        } else if (s == WQ_BF16 && t->ndim == 2) {
            t->offset = n16, t->bf16 = 1, n16 += t->numel;
        } else {
            const size_t row = t->ndim == 2 && wq_supported(s) ? wq_row_bytes(s, t->shape[1]) : 0;
            if (!row) {
                int rc = tlm_error("tensor %s [%d, %d]: cannot be kept as %s (rows of %d are not whole blocks of %d)",
                                   t->name, t->shape[0], t->ndim == 2 ? t->shape[1] : 1, wq_name(s),
                                   t->ndim == 2 ? t->shape[1] : t->shape[0], wq_block_elems(s));
                (void)rc;
                model_free(m);
                return NULL;
            }
            /* no padding: the parts of a fused view (q|k|v, gate|up) must follow one another */
            t->offset = nq, t->qtype = s, nq += row * (size_t)t->shape[0];
        }
    }
    m->n_params = n32, m->n_bf16 = n16, m->wq_bytes = nq;
    m->param_mem = calloc(n32 ? n32 : 1, sizeof(float));
    m->stored16 = n16 ? calloc(n16, sizeof(uint16_t)) : NULL;
    m->wq_mem = nq ? aligned_alloc(64, (nq + 63) & ~(size_t)63) : NULL;
    if (!m->param_mem || (n16 && !m->stored16) || (nq && !m->wq_mem)) {
        model_free(m);
        return tlm_error("out of memory: the model's weights take %.1f MiB", (n32 * 4.0 + n16 * 2.0 + nq) / 1048576.0),
               NULL;
    }
    tlm_advise_huge(m->param_mem, n32 * sizeof(float));
    if (m->stored16) tlm_advise_huge(m->stored16, n16 * sizeof(uint16_t));
    if (m->wq_mem) tlm_advise_huge(m->wq_mem, nq);
    if (nq) memset(m->wq_mem, 0, nq);
    param_walk bind = {.cfg = cfg, .base = m->param_mem, .placed = m->tensors, .base16 = m->stored16, .baseq = m->wq_mem};
    walk_tensors(&bind, &m->p);
    return m;
}

void *model_tensor_data(const tlm_model *m, int i, size_t *bytes) {
    const tensor_info *t = &m->tensors[i];
    if (t->qtype) {
        *bytes = wq_row_bytes(t->qtype, t->shape[1]) * (size_t)t->shape[0];
        return m->wq_mem + t->offset;
    }
    if (t->bf16) {
        *bytes = t->numel * sizeof(uint16_t);
        return m->stored16 + t->offset;
    }
    *bytes = t->numel * sizeof(float);
    return m->param_mem + t->offset;
}

void model_tensor_f32(const tlm_model *m, int i, int64_t row0, int64_t rows, float *out) {
    const tensor_info *t = &m->tensors[i];
    const int64_t cols = t->ndim == 2 ? t->shape[1] : t->shape[0];
    if (t->qtype) {
        size_t bytes;
        const uint8_t *q = model_tensor_data(m, i, &bytes);
        wq_dequantize_rows(t->qtype, q, (int)cols, (int)row0, (int)(row0 + rows), out);
    } else if (t->bf16) {
        const uint16_t *h = m->stored16 + t->offset + (size_t)row0 * cols;
        for (size_t j = 0; j < (size_t)(rows * cols); j++) out[j] = tlm_bf16_to_f32(h[j]);
    } else {
        memcpy(out, m->param_mem + t->offset + (size_t)row0 * cols, (size_t)(rows * cols) * sizeof(float));
    }
}

void model_head_row(const tlm_model *m, int token, float *out) {
    const tensor_info *head = model_find_tensor(m, m->cfg.tie_embeddings ? "embed.weight" : "lm_head.weight");
    model_tensor_f32(m, (int)(head - m->tensors), token, 1, out);
}

tlm_model *model_f32_copy(const tlm_model *m) {
    tlm_model *f = model_create(&m->cfg);
    for (int i = 0; f && i < m->n_tensors; i++) {
        const tensor_info *t = &m->tensors[i];
        model_tensor_f32(m, i, 0, t->ndim == 2 ? t->shape[0] : 1, model_param(f, i));
    }
    return f;
}

void model_use_mapped_params(tlm_model *m, float *params, void *base, size_t len) {
    free(m->param_mem);
    m->param_mem = params, m->file_map = base, m->file_map_len = len;
    model_bind_params(m, &m->p, m->param_mem);
    model_weights_changed(m);
}

int context_alloc_grads(tlm_context *ctx) {
    const tlm_model *m = ctx->m;
    if (m->wq_mem)
        return tlm_error("this model keeps its matrices quantized (ggml blocks, for inference); training needs f32 "
                         "weights");
    if (m->file_map) return tlm_error("the model's weights are a read-only file mapping (inference only)");
    if (ctx->grad_mem) return 0;
    ctx->g.layers = calloc((size_t)m->cfg.n_layers + 1, sizeof(layer_params)); /* (+1: never NULL) */
    ctx->grad_mem = calloc(m->n_params ? m->n_params : 1, sizeof(float));
    if (!ctx->g.layers || !ctx->grad_mem) {
        free(ctx->g.layers), free(ctx->grad_mem);
        ctx->g.layers = NULL, ctx->grad_mem = NULL;
        return tlm_error("out of memory allocating gradients (%zu floats)", m->n_params);
    }
    tlm_advise_huge(ctx->grad_mem, m->n_params * sizeof(float));
    model_bind_params(m, &ctx->g, ctx->grad_mem);
    return 0;
}

void context_zero_grads(tlm_context *ctx) {
    /* on the OpenMP threads: 44 MB for a small GPT-2 (none after the trainer's step: grad_clear) */
    if (ctx->grad_mem && !ctx->grad_clear) vec_zero(ctx->grad_mem, ctx->m->n_params);
}

int model_alloc_grads(tlm_model *m) { return context_alloc_grads(m->ctx); }
void model_zero_grads(tlm_model *m) { context_zero_grads(m->ctx); }

tensor_info *config_tensor_table(const tlm_config *cfg, int *n_tensors, size_t *n_floats) {
    model_params views = {.layers = calloc((size_t)cfg->n_layers, sizeof(layer_params))};
    param_walk count = {.cfg = cfg};
    if (views.layers) walk_tensors(&count, &views);
    tensor_info *table = views.layers ? calloc((size_t)count.count, sizeof(tensor_info)) : NULL;
    if (table) {
        param_walk fill = {.cfg = cfg, .table = table};
        walk_tensors(&fill, &views);
        *n_tensors = count.count;
        *n_floats = count.offset;
    } else {
        tlm_error("out of memory listing the tensors of the config");
    }
    free(views.layers);
    return table;
}

const tensor_info *model_find_tensor(const tlm_model *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name)) return &m->tensors[i];
    return NULL;
}

/* DeepNorm's init: v, o and the FFN matrices have gain beta, q and k keep 1 (DeepNet, Wang et
 * al. 2022: "down-scale the parameters of the feed-forward networks, the value projection and
 * the output projection") */
static int deepnorm_scaled(const tensor_info *t) {
    if (t->ndim != 2) return 0;
    if (strstr(t->name, ".ffn.experts.") || strstr(t->name, ".ffn.shared_experts.")) return 1; /* (MoE's FFN matrices) */
    const char *sfx[] = {".attn.v_proj.weight", ".attn.o_proj.weight", ".ffn.gate_proj.weight", ".ffn.up_proj.weight",
                         ".ffn.down_proj.weight"};
    size_t n = strlen(t->name);
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
        size_t k = strlen(sfx[i]);
        if (n > k && !strcmp(t->name + n - k, sfx[i])) return 1;
    }
    return 0;
}

int tensor_init_draws(const tensor_info *t) {
    return t->kind == TENSOR_MATRIX || t->kind == TENSOR_RESIDUAL_MATRIX || t->kind == TENSOR_EMBEDDING ? 2 : 0;
}

void tensor_init_from_draws(const tlm_config *c, const tensor_info *t, const uint64_t *u, float *x, size_t n) {
    if (!tensor_init_draws(t)) {
        for (size_t j = 0; j < n; j++) x[j] = t->kind == TENSOR_BIAS ? 0.0f : t->identity;
        return;
    }
    float resid_scale = c->scale_residual_init ? 1.0f / sqrtf(2.0f * (float)c->n_layers) : 1.0f;
    float std = c->init_std * (t->kind == TENSOR_RESIDUAL_MATRIX ? resid_scale : 1.0f);
    if (c->placement == PLACE_DEEPNORM && deepnorm_scaled(t)) std *= config_deepnorm_beta(c);
    for (size_t j = 0; j < n; j++) x[j] = (float)(std * rng_normal_of(u[2 * j], u[2 * j + 1]));
}

void model_init_weights(tlm_model *m, uint64_t seed) {
    rng_state r;
    rng_seed(&r, seed);
    enum { BATCH = 2048 };
    uint64_t u[2 * BATCH];
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_info *t = &m->tensors[i];
        const int per = tensor_init_draws(t);
        for (size_t j0 = 0; j0 < t->numel; j0 += BATCH) {
            const size_t k = t->numel - j0 < BATCH ? t->numel - j0 : BATCH;
            for (size_t j = 0; j < per * k; j++) u[j] = rng_u64(&r);
            tensor_init_from_draws(&m->cfg, t, u, m->param_mem + t->offset + j0, k);
        }
    }
}

/* ---- bf16 weights for inference ------------------------------------------------------------------ */

int tensor_kept_as_bf16(const tensor_info *t) {
    return t->ndim == 2 && strcmp(t->name, "pos_embed.weight") != 0 && strcmp(t->name, "ple_embed.weight") != 0;
}

int model_weights_to_bf16(tlm_model *m) {
    if (m->wq_mem)
        return tlm_error("the weights are kept quantized (%s); bf16 weights come from f32 ones", "ggml blocks");
    if (m->stored16) return 0;
    if (m->ctx->grad_mem) return tlm_error("bf16 weights are for inference: this model is being trained");
    if (m->product16) free(m->product16), m->product16 = NULL; /* (mixed precision now reads the bf16 weights) */
    size_t n16 = 0, n32 = 0;
    for (int i = 0; i < m->n_tensors; i++) *(tensor_kept_as_bf16(&m->tensors[i]) ? &n16 : &n32) += m->tensors[i].numel;
    enum { BLOCK = 1 << 16 };
    float *rest = malloc((n32 ? n32 : 1) * sizeof(float));
    tlm_advise_huge(rest, n32 * sizeof(float));
    uint16_t *block = malloc(BLOCK * sizeof(uint16_t));
    if (!rest || !block) {
        free(rest), free(block);
        return tlm_error("out of memory converting the weights to bf16");
    }
    /* The bf16 matrices are packed into the front of the f32 buffer itself, which then shrinks:
     * the peak stays at the f32 size. Going forward a block at a time is safe: a block's bf16
     * output ends before the next block's f32 input starts (2 bytes per value written, 4 read). */
    uint16_t *packed = m->file_map ? malloc((n16 ? n16 : 1) * sizeof(uint16_t)) : (uint16_t *)m->param_mem;
    if (m->file_map) tlm_advise_huge(packed, n16 * sizeof(uint16_t));
    if (!packed) {
        free(rest), free(block);
        return tlm_error("out of memory converting the weights to bf16");
    }
    size_t o16 = 0, o32 = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        tensor_info *t = &m->tensors[i];
        const float *src = m->param_mem + t->offset;
        if (!tensor_kept_as_bf16(t)) {
            memcpy(rest + o32, src, t->numel * sizeof(float));
            t->offset = o32, o32 += t->numel;
        } else {
            for (size_t j0 = 0; j0 < t->numel; j0 += BLOCK) {
                const size_t n = t->numel - j0 < BLOCK ? t->numel - j0 : BLOCK;
#pragma omp parallel for schedule(static)
                for (size_t j = 0; j < n; j++) block[j] = tlm_f32_to_bf16(src[j0 + j]);
                memcpy(packed + o16 + j0, block, n * sizeof(uint16_t));
            }
            t->offset = o16, t->bf16 = 1, o16 += t->numel;
        }
        /* a mapped file's f32 tensor, once converted, leaves resident memory: the peak is the bf16
         * copy and a tensor, not the file and the copy */
        if (m->file_map) tlm_advise_done(src, t->numel * sizeof(float));
    }
    free(block);
    uint16_t *w16 = m->file_map ? packed : realloc(packed, (n16 ? n16 : 1) * sizeof(uint16_t));
    m->stored16 = w16 ? w16 : packed; /* (a failed shrink keeps the larger block, still valid) */
    if (m->file_map) munmap(m->file_map, m->file_map_len), m->file_map = NULL;
    m->param_mem = rest, m->n_params = n32, m->n_bf16 = n16;
    param_walk bind = {.cfg = &m->cfg, .base = m->param_mem, .placed = m->tensors, .base16 = m->stored16};
    walk_tensors(&bind, &m->p);
    return 0;
}

size_t model_weight_bytes(const tlm_model *m) {
    return m->n_params * sizeof(float) + m->n_bf16 * sizeof(uint16_t) + m->wq_bytes;
}

const char *model_matrix_types(const tlm_model *m, char *buf, size_t cap) {
    int seen[WQ_TYPE_LIMIT] = {0};
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_info *t = &m->tensors[i];
        const int k = t->qtype ? t->qtype : t->bf16 ? WQ_BF16 : WQ_F32;
        if (t->ndim != 2 || !strcmp(t->name, "pos_embed.weight") || k >= WQ_TYPE_LIMIT || seen[k]++) continue;
        const char *name = k == WQ_F32 ? "f32" : k == WQ_BF16 ? "bf16" : wq_name(k);
        int n = snprintf(buf + used, cap - used, "%s%s", used ? "+" : "", name);
        if (n < 0 || (size_t)n >= cap - used) break;
        used += (size_t)n;
    }
    return buf;
}

size_t model_decode_bytes(const tlm_model *m) {
    const tlm_config *c = &m->cfg;
    size_t skipped = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_info *t = &m->tensors[i];
        size_t bytes;
        (void)model_tensor_data(m, i, &bytes);
        if (!strcmp(t->name, "pos_embed.weight") || (!strcmp(t->name, "embed.weight") && !c->tie_embeddings))
            skipped += bytes;
        else if (strstr(t->name, ".ffn.experts.")) /* (a token reads k of the E routed experts) */
            skipped += bytes - bytes / (size_t)c->n_experts * (size_t)c->n_experts_per_tok;
    }
    return model_weight_bytes(m) - skipped;
}

double model_train_flops_per_token(const tlm_config *c, int T) {
    int n;
    size_t total;
    tensor_info *t = config_tensor_table(c, &n, &total);
    double matrix = 0;
    for (int i = 0; t && i < n; i++)
        if (t[i].ndim == 2 && strcmp(t[i].name, "embed.weight") != 0 && strcmp(t[i].name, "pos_embed.weight") != 0 &&
            strcmp(t[i].name, "ple_embed.weight") != 0) /* (lookups, not products) */
            /* (a routed expert's matrices work on k of every E rows: the active parameters) */
            matrix += (double)t[i].numel *
                      (strstr(t[i].name, ".ffn.experts.") ? (double)c->n_experts_per_tok / c->n_experts : 1.0);
    if (c->tie_embeddings) matrix += (double)c->vocab_size * c->d_model; /* the head is the embedding */
    free(t);
    double attn = 0; /* (Gemma 4: each layer's own head_dim) */
    for (int l = 0; l < c->n_layers; l++) /* (MLA: q.k over nope + rope dims, P v over v_head_dim, not the padding) */
        attn += config_mla(c) ? 6.0 * (double)T * c->n_heads * (config_mla_qk_dim(c) + c->v_head_dim)
                              : 12.0 * (double)T * c->n_heads * config_layer_head_dim(c, l);
    return 6.0 * matrix + attn;
}
