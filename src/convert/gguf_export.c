/* gguf_export.c — an engine model as a GGUF file llama.cpp runs: the architecture that computes
 * its config (the family table's GGUF export column, family_export.c: llama, qwen2, qwen3,
 * qwen2moe, qwen3moe, gemma, gemma2, gemma3, olmo2, gpt2), llama.cpp's metadata keys and tensor names, the
 * tokenizer in the file's metadata, every matrix in the type asked for (vectors, the learned
 * positions and the routers stay F32, as llama.cpp's converter keeps them).
 *
 * The inverse of gguf_load.c: q and k rows go back to llama's interleaved pairs; Gemma's (1 + w)
 * gains are written as 1 + w; GPT-2's q, k, v as one attn_qkv; a layer's experts stacked as
 * ffn_{gate,up,down}_exps [n_expert, rows, cols]; the matrices of
 * a model loaded from a GGUF file that are already in the type asked for are written as the
 * same bytes (f32 -> GGUF -> tinylm -> GGUF keeps every tensor bit for bit), other types are
 * dequantized to their f32 values and quantized again (ops/quant.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "family.h"
#include "formats/gguf.h"
#include "gguf_export.h"
#include "ops/quant.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/rng.h"

const char *gguf_export_blocker(const tlm_config *c) {
    const char *why = NULL;
    return gguf_export_family(c, &why) ? NULL : why;
}

/* llama.cpp's general.file_type of a file whose matrices are mostly `type` */
static uint32_t file_type(int type) {
    switch (type) {
    case WQ_F32: return 0;
    case WQ_F16: return 1;
    case WQ_Q4_0: return 2;
    case WQ_Q4_1: return 3;
    case WQ_Q8_0: return 7;
    case WQ_Q5_0: return 8;
    case WQ_Q5_1: return 9;
    case WQ_Q4_K: return 15; /* (Q4_K_M) */
    case WQ_Q5_K: return 17; /* (Q5_K_M) */
    case WQ_Q6_K: return 18;
    case WQ_BF16: return 32;
    default: return 0;
    }
}

/* The type a matrix with rows of `cols` is written in when `want` is asked for: want when the
 * rows are whole blocks; else llama.cpp's fallbacks for the K types (Q4_K -> Q5_0, Q5_K -> Q5_1,
 * Q6_K -> Q8_0) when rows are whole blocks of 32; else F32 */
static int fit_type(int want, int cols) {
    if (cols % wq_block_elems(want) == 0) return want;
    const int fallback = want == WQ_Q4_K ? WQ_Q5_0 : want == WQ_Q5_K ? WQ_Q5_1 : want == WQ_Q6_K ? WQ_Q8_0 : WQ_F32;
    return cols % wq_block_elems(fallback) == 0 ? fallback : WQ_F32;
}

/* engine tensor i's rows as `type` into a malloc'd buffer (*bytes): the stored bytes when the
 * tensor is kept in that type, else its f32 values (dequantized when kept quantized) quantized;
 * perm (NULL: none) reorders the rows: file row r = engine row perm[r] */
static void *tensor_as(const tlm_model *m, int i, int type, const int *perm, size_t *bytes) {
    const tensor_info *t = &m->tensors[i];
    const int rows = t->ndim == 2 ? t->shape[0] : 1, cols = t->ndim == 2 ? t->shape[1] : t->shape[0];
    const int kept = t->qtype ? t->qtype : t->bf16 ? WQ_BF16 : WQ_F32;
    const size_t in_row = wq_row_bytes(kept, cols), out_row = wq_row_bytes(type, cols);
    size_t stored_bytes;
    const uint8_t *stored = model_tensor_data(m, i, &stored_bytes);
    uint8_t *out = malloc((size_t)rows * out_row + 1);
    float *row = kept == type ? NULL : malloc((size_t)cols * sizeof(float));
    if (!out || (kept != type && !row)) {
        free(out), free(row);
        return tlm_error("out of memory exporting %s", t->name), NULL;
    }
    for (int r = 0; r < rows; r++) {
        const uint8_t *from = stored + (size_t)(perm ? perm[r] : r) * in_row;
        if (kept == type) {
            memcpy(out + (size_t)r * out_row, from, out_row);
            continue;
        }
        wq_dequantize_row(kept, from, row, cols);
        if (wq_quantize_row(type, row, out + (size_t)r * out_row, cols)) {
            free(out), free(row);
            return tlm_error_prefix("exporting %s as %s", t->name, wq_name(type)), NULL;
        }
    }
    free(row);
    *bytes = (size_t)rows * out_row;
    return out;
}

/* file row r of q or k (interleaved pairs) = engine row perm[r] (halves) */
static int *pairs_from_halves(int n_heads, int hd) {
    int *perm = malloc((size_t)n_heads * hd * sizeof(int));
    if (!perm) return NULL;
    for (int h = 0; h < n_heads; h++)
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < hd / 2; b++) perm[h * hd + 2 * b + a] = h * hd + a * (hd / 2) + b;
    return perm;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* "{arch}.suffix" */
static const char *akey(const gguf_family *a, const char *suffix) {
    static _Thread_local char key[160];
    snprintf(key, sizeof key, "%s.%s", a->arch, suffix);
    return key;
}

/* the keys every architecture reads (gguf_load.c), then the architecture's own: its float keys (family.h;
 * a soft-cap 0 is off and left out), its window, the experts' sizes */
static int set_metadata(tlm_gguf_writer *w, const tlm_config *c, int type, const char *name) {
    const char *why;
    const tlm_family *fam = gguf_export_family(c, &why);
    if (!fam) return tlm_error("cannot export as GGUF: %s", why);
    const gguf_family *a = fam->gguf;
    /* (llama's experts, Mixtral's, are feed_forward_length wide; the other architectures' have a key of their own) */
    const int llama_moe = c->n_experts > 0 && !strcmp(a->arch, "llama");
    if (gguf_export_context(a, c) != c->max_seq)
        fprintf(stderr, "tinylm: note: every layer slides with a window of %d, which llama.cpp's %s has not: written "
                        "as context_length %d (of %d), within which the two attentions are one\n", c->sliding_window,
                a->arch, gguf_export_context(a, c), c->max_seq);
    const char *eps_key =
        c->norm == NORM_LAYERNORM ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon";
    int rc = tlm_gguf_set_str(w, "general.architecture", a->arch, strlen(a->arch)) ||
             tlm_gguf_set_str(w, "general.name", name, strlen(name)) ||
             tlm_gguf_set_u32(w, "general.file_type", file_type(type)) ||
             tlm_gguf_set_u32(w, akey(a, "context_length"), (uint32_t)gguf_export_context(a, c)) ||
             tlm_gguf_set_u32(w, akey(a, "embedding_length"), (uint32_t)c->d_model) ||
             tlm_gguf_set_u32(w, akey(a, "block_count"), (uint32_t)c->n_layers) ||
             tlm_gguf_set_u32(w, akey(a, "feed_forward_length"), (uint32_t)(llama_moe ? c->moe_d_ff : c->d_ff)) ||
             tlm_gguf_set_u32(w, akey(a, "attention.head_count"), (uint32_t)c->n_heads) ||
             tlm_gguf_set_u32(w, akey(a, "attention.head_count_kv"), (uint32_t)c->n_kv_heads) ||
             tlm_gguf_set_u32(w, akey(a, "attention.key_length"), (uint32_t)c->head_dim) ||
             tlm_gguf_set_u32(w, akey(a, "attention.value_length"), (uint32_t)c->head_dim) ||
             tlm_gguf_set_f32(w, akey(a, eps_key), c->norm_eps) ||
             tlm_gguf_set_u32(w, akey(a, "vocab_size"), (uint32_t)c->vocab_size);
    if (!rc && c->position == POS_ROPE)
        rc = tlm_gguf_set_f32(w, akey(a, "rope.freq_base"), c->rope_theta) ||
             tlm_gguf_set_u32(w, akey(a, "rope.dimension_count"), (uint32_t)c->head_dim) ||
             (c->rope_scaling == ROPE_SCALING_LINEAR &&
              (tlm_gguf_set_str(w, akey(a, "rope.scaling.type"), "linear", 6) ||
               tlm_gguf_set_f32(w, akey(a, "rope.scaling.factor"), c->rope_factor)));
    for (int i = 0; !rc && i < (int)(sizeof a->floats / sizeof a->floats[0]) && a->floats[i].suffix; i++) {
        const float v = *(const float *)((const char *)c + a->floats[i].field);
        if (v != 0.0f) rc = tlm_gguf_set_f32(w, akey(a, a->floats[i].suffix), v);
    }
    /* (no sliding layer: a window of the whole context, which llama.cpp's Gemma 2 needs) */
    if (!rc && a->sliding_pattern)
        rc = tlm_gguf_set_u32(w, akey(a, "attention.sliding_window"),
                              (uint32_t)(c->sliding_window > 0 ? c->sliding_window : c->max_seq));
    if (!rc && c->n_experts > 0)
        rc = tlm_gguf_set_u32(w, akey(a, "expert_count"), (uint32_t)c->n_experts) ||
             tlm_gguf_set_u32(w, akey(a, "expert_used_count"), (uint32_t)c->n_experts_per_tok) ||
             (!llama_moe && tlm_gguf_set_u32(w, akey(a, "expert_feed_forward_length"), (uint32_t)c->moe_d_ff)) ||
             (c->n_shared_experts > 0 &&
              tlm_gguf_set_u32(w, akey(a, "expert_shared_feed_forward_length"), (uint32_t)config_shared_ff(c)));
    return rc ? -1 : 0;
}

/* the engine tensors one GGUF tensor is made of, its name, shape and type: engine tensor i alone, or (i the
 * first of them) GPT-2's q|k|v as attn_qkv, a layer's experts stacked as ffn_{gate,up,down}_exps; 0 when
 * engine tensor i is written as part of another, -1 + tlm_error */
typedef struct {
    char name[128];
    int n_parts, *parts; /* engine tensor indices, their rows one after another */
    int n_dims;
    int64_t ne[3];
    int f32; /* written F32 whatever the type asked for: vectors, the learned positions, routers (as
                llama.cpp's converter keeps them) */
} gguf_out;

/* entry i of the table tab[n] named `name`, or -1; entry `guess` tried first (a layer's experts lie at a fixed
 * stride in the engine's table: a model of thousands of them is not searched for each) */
static int find_index(const tensor_info *tab, int n, const char *name, int guess) {
    if (guess >= 0 && guess < n && !strcmp(tab[guess].name, name)) return guess;
    for (int i = 0; i < n; i++)
        if (!strcmp(tab[i].name, name)) return i;
    return -1;
}

/* (indices into the table tab[n] of the tensors written: the model's, or GPT-2's with every bias) */
static int plan_tensor(const tensor_info *tab, int n, const tlm_config *c, const gguf_family *a, int i, gguf_out *o) {
    const tensor_info *t = &tab[i];
    const int matrix = t->ndim == 2, rows = matrix ? t->shape[0] : 1, cols = matrix ? t->shape[1] : t->shape[0];
    char other[128];
    int layer, e, used = 0;
    char which[8] = "";
    o->parts[0] = i, o->n_parts = 1, o->n_dims = matrix ? 2 : 1;
    o->ne[0] = cols, o->ne[1] = rows, o->ne[2] = 1;
    o->f32 = !matrix || !strcmp(t->name, "pos_embed.weight") || strstr(t->name, ".ffn.router.") ||
             strstr(t->name, ".ffn.shared_expert_gate.");
    if (sscanf(t->name, "layers.%d.ffn.experts.%d.%4[a-z]_proj.weight%n", &layer, &e, which, &used) == 3 && used &&
        !t->name[used]) {
        if (e) return 0; /* (written with expert 0) */
        snprintf(o->name, sizeof o->name, "blk.%d.ffn_%s_exps.weight", layer, which);
        for (int k = 1; k < c->n_experts; k++) {
            snprintf(other, sizeof other, "layers.%d.ffn.experts.%d.%s_proj.weight", layer, k, which);
            const int guess = k > 1 ? o->parts[k - 1] + (o->parts[1] - o->parts[0]) : -1;
            if ((o->parts[k] = find_index(tab, n, other, guess)) < 0)
                return tlm_error("no engine tensor %s (internal)", other);
        }
        o->n_parts = c->n_experts, o->n_dims = 3, o->ne[2] = c->n_experts;
        return 1;
    }
    if (gguf_engine_name_to_file(t->name, o->name, sizeof o->name))
        return tlm_error("no GGUF name for %s (internal)", t->name);
    if (strstr(t->name, ".ffn.shared_expert_gate.")) o->n_dims = 1; /* ({n_embd}, as llama.cpp declares it) */
    /* GPT-2: q, k, v (weights, biases) as one attn_qkv */
    const char *qkv = strstr(t->name, ".attn.");
    if (!strcmp(a->arch, "gpt2") && qkv && qkv[6] && !strncmp(qkv + 7, "_proj.", 6) && strchr("qkv", qkv[6])) {
        if (qkv[6] != 'q') return 0; /* (written with q) */
        const size_t at = (size_t)(qkv - t->name) + 6;
        for (int k = 1; k < 3; k++) {
            snprintf(other, sizeof other, "%s", t->name);
            other[at] = "qkv"[k];
            if ((o->parts[k] = find_index(tab, n, other, -1)) < 0)
                return tlm_error("no engine tensor %s (internal)", other);
            o->ne[matrix] += tab[o->parts[k]].shape[0];
        }
        o->n_parts = 3;
        char *p = strstr(o->name, "attn_q.");
        if (!p) return tlm_error("no GGUF name for %s (internal)", t->name);
        memmove(p + 8, p + 6, strlen(p + 6) + 1), memcpy(p, "attn_qkv", 8);
    }
    return 1;
}

int gguf_export_file(const tlm_model *m, const struct tlm_tokenizer *tok, int type, const char *path,
                     const char *name, int *n_fallback) {
    const tlm_config *c = &m->cfg;
    const char *why;
    const tlm_family *fam = gguf_export_family(c, &why);
    if (!fam) return tlm_error("cannot export as GGUF: %s", why);
    const gguf_family *a = fam->gguf;
    if (!wq_can_quantize(type)) return tlm_error("cannot write GGUF tensors of type %s", wq_name(type));
    /* the tensors written: the model's; GPT-2's every bias, those the model has not (nanoGPT's) written zero, the
     * same function (family_with_all_biases) */
    int n = m->n_tensors;
    size_t floats;
    const tlm_config biased = family_with_all_biases(c);
    tensor_info *all = fam->export_all_biases ? config_tensor_table(&biased, &n, &floats) : NULL;
    const tensor_info *tab = all ? all : m->tensors;
    tlm_gguf_writer *w = tlm_gguf_writer_new();
    void **bufs = calloc((size_t)n, sizeof *bufs);
    int *parts = malloc((size_t)(c->n_experts > 3 ? c->n_experts : 3) * sizeof *parts);
    int rc = !w || !bufs || !parts || (fam->export_all_biases && !all) ? tlm_error("out of memory") : 0;
    if (!rc) rc = set_metadata(w, c, type, name) || (tok && tlm_tokenizer_to_gguf_padded(tok, w, c->vocab_size));
    *n_fallback = 0;
    /* a (1 + w) norm's gains are written as 1 + w: llama.cpp multiplies by the stored value (gguf_load.c) */
    const float offset = config_norm_offset(c);
    for (int i = 0; i < n && !rc; i++) {
        const tensor_info *t = &tab[i];
        gguf_out o = {.parts = parts};
        const int planned = plan_tensor(tab, n, c, a, i, &o);
        if (planned <= 0) {
            rc = planned;
            continue;
        }
        const int matrix = t->ndim == 2;
        const int out_type = o.f32 ? WQ_F32 : fit_type(type, t->shape[1]);
        *n_fallback += matrix && !o.f32 && out_type != type;
        size_t total = 0;
        for (int k = 0; k < o.n_parts && !rc; k++) {
            const tensor_info *p = &tab[o.parts[k]];
            const int src = all ? find_index(m->tensors, m->n_tensors, p->name, -1) : o.parts[k];
            int *perm = NULL;
            if (a->interleaved_qk && matrix &&
                (ends_with(p->name, ".attn.q_proj.weight") || ends_with(p->name, ".attn.k_proj.weight")) &&
                !(perm = pairs_from_halves(ends_with(p->name, ".q_proj.weight") ? c->n_heads : c->n_kv_heads,
                                           c->head_dim))) {
                rc = tlm_error("out of memory");
                break;
            }
            size_t bytes = p->numel * sizeof(float);
            void *part = src >= 0 ? tensor_as(m, src, out_type, perm, &bytes)
                         : p->kind == TENSOR_BIAS ? calloc(bytes + 1, 1) /* (a bias the model has not: 0) */
                                                  : NULL;
            free(perm);
            if (!part && src < 0 && p->kind != TENSOR_BIAS) {
                rc = tlm_error("no engine tensor %s (internal)", p->name);
                break;
            }
            void *grown = part ? realloc(bufs[i], total + bytes + 1) : NULL;
            if (!grown) {
                free(part);
                rc = part || src < 0 ? tlm_error("out of memory exporting %s", p->name) : -1;
                break;
            }
            bufs[i] = grown;
            memcpy((char *)bufs[i] + total, part, bytes);
            free(part);
            if (p->kind == TENSOR_NORM && p->identity == 0.0f && offset != 0.0f)
                for (size_t j = 0; j < bytes / sizeof(float); j++) ((float *)((char *)bufs[i] + total))[j] += offset;
            total += bytes;
        }
        if (!rc) rc = tlm_gguf_add_tensor(w, o.name, out_type, o.n_dims, o.ne, bufs[i], total);
    }
    if (!rc) rc = tlm_gguf_write(w, path);
    for (int i = 0; bufs && i < n; i++) free(bufs[i]);
    free(bufs), free(parts), free(all);
    tlm_gguf_writer_free(w);
    return rc ? -1 : 0;
}

/* export --config: a new model's tensors made as the file is written, one tensor at a time, the
 * engine's init drawn a chunk of rows at a time in table order (tensor_init_draws,
 * tensor_init_from_draws), so that the f32 model is never formed. */
typedef struct {
    const tlm_config *cfg;
    const tensor_info *tensors;
    int type;          /* the type asked for */
    int next;          /* the tensor the generator has come to */
    rng_state rng;
    float *rows;       /* a chunk of rows in f32: rows_floats, CHUNK_FLOATS or a head's rows */
    uint64_t *draws;   /* the generator's draws for them (2 per value at most) */
    size_t rows_floats;
} init_src;

enum { CHUNK_FLOATS = 1 << 20 };

/* tensor i's rows in the file's type, into out (tlm_gguf_fill): drawn, then quantized; q and k
 * rows reordered to llama's interleaved pairs (file row r = engine row perm[r], within a head: a
 * chunk of whole heads holds all the rows its file rows take) */
static int fill_tensor(void *user, size_t index, void *out, size_t nbytes) {
    init_src *s = user;
    const tlm_config *c = s->cfg;
    const tensor_info *t = &s->tensors[index];
    const int i = (int)index, matrix = t->ndim == 2, rows = matrix ? t->shape[0] : 1,
              cols = matrix ? t->shape[1] : t->shape[0];
    const int type = matrix ? fit_type(s->type, cols) : WQ_F32;
    const size_t out_row = wq_row_bytes(type, cols);
    if (nbytes != (size_t)rows * out_row || i != s->next)
        return tlm_error("exporting %s: asked for out of order or at the wrong size (internal)", t->name);
    const int qk = matrix && (ends_with(t->name, ".attn.q_proj.weight") || ends_with(t->name, ".attn.k_proj.weight"));
    int *perm = qk ? pairs_from_halves(ends_with(t->name, ".q_proj.weight") ? c->n_heads : c->n_kv_heads, c->head_dim)
                   : NULL;
    if (qk && !perm) return tlm_error("out of memory exporting %s", t->name);
    int chunk = (int)(s->rows_floats / (size_t)cols); /* (rows_floats holds a head's rows of any tensor) */
    if (qk) chunk -= chunk % c->head_dim;
    int rc = 0;
    for (int r0 = 0; r0 < rows && !rc; r0 += chunk) {
        const int n = rows - r0 < chunk ? rows - r0 : chunk;
        const size_t per = (size_t)tensor_init_draws(t) * cols; /* (draws a row) */
        for (size_t j = 0; j < per * n; j++) s->draws[j] = rng_u64(&s->rng);
        /* the threads make the rows' values of the draws (log, cos), then quantize the rows (ggml's
         * scale searches): nearly all of an export's time. The first row that fails is done again
         * here, for its message (tlm_error is per thread). */
        int bad = rows;
#pragma omp parallel if (n > 1)
        {
#pragma omp for schedule(static)
            for (int r = 0; r < n; r++)
                tensor_init_from_draws(c, t, s->draws + per * r, s->rows + (size_t)r * cols, (size_t)cols);
#pragma omp for schedule(static)
            for (int r = r0; r < r0 + n; r++) {
                const float *from = s->rows + ((size_t)(perm ? perm[r] : r) - (size_t)r0) * cols;
                if (wq_quantize_row(type, from, (uint8_t *)out + (size_t)r * out_row, cols)) {
#pragma omp critical
                    if (r < bad) bad = r;
                }
            }
        }
        if (bad < rows) {
            const float *from = s->rows + ((size_t)(perm ? perm[bad] : bad) - (size_t)r0) * cols;
            wq_quantize_row(type, from, (uint8_t *)out + (size_t)bad * out_row, cols);
            rc = tlm_error_prefix("exporting %s as %s", t->name, wq_name(type));
        }
    }
    s->next = i + 1;
    free(perm);
    return rc;
}

const char *gguf_export_arch(const tlm_config *c) {
    const char *why;
    const tlm_family *f = gguf_export_family(c, &why);
    return f ? f->gguf->arch : NULL;
}

int gguf_export_init_file(const tlm_config *c, uint64_t seed, const struct tlm_tokenizer *tok, int type,
                          const char *path, const char *name, int *n_fallback) {
    const char *why;
    const tlm_family *fam = gguf_export_family(c, &why);
    if (!fam) return tlm_error("cannot export as GGUF: %s", why);
    /* (one engine tensor a file tensor, none offset: what fill_tensor writes) */
    if (strcmp(fam->gguf->arch, "llama") || c->n_experts > 0)
        return tlm_error("export --config writes llama bodies without experts (this config is %s%s)", fam->gguf->arch,
                         c->n_experts > 0 ? " with experts" : "");
    if (!wq_can_quantize(type)) return tlm_error("cannot write GGUF tensors of type %s", wq_name(type));
    int n_tensors = 0;
    size_t n_floats = 0;
    init_src s = {.cfg = c, .type = type};
    s.tensors = config_tensor_table(c, &n_tensors, &n_floats);
    if (!s.tensors) return -1;
    s.rows_floats = CHUNK_FLOATS;
    for (int i = 0; i < n_tensors; i++) { /* (at least one row, or one head of q or k rows) */
        const tensor_info *t = &s.tensors[i];
        const size_t cols = (size_t)(t->ndim == 2 ? t->shape[1] : t->shape[0]);
        if (cols * (size_t)(c->head_dim > 0 ? c->head_dim : 1) > s.rows_floats) s.rows_floats = cols * c->head_dim;
    }
    s.rows = malloc(s.rows_floats * sizeof(float));
    s.draws = malloc(2 * s.rows_floats * sizeof(uint64_t));
    rng_seed(&s.rng, seed);
    tlm_gguf_writer *w = tlm_gguf_writer_new();
    int rc = s.rows && s.draws && w ? 0 : tlm_error("out of memory");
    if (!rc) rc = set_metadata(w, c, type, name) || (tok && tlm_tokenizer_to_gguf_padded(tok, w, c->vocab_size));
    *n_fallback = 0;
    for (int i = 0; i < n_tensors && !rc; i++) {
        const tensor_info *t = &s.tensors[i];
        char gname[128];
        if (gguf_engine_name_to_file(t->name, gname, sizeof gname)) {
            rc = tlm_error("no GGUF name for %s (internal)", t->name);
            break;
        }
        const int matrix = t->ndim == 2;
        const int out_type = matrix ? fit_type(type, t->shape[1]) : WQ_F32;
        *n_fallback += matrix && out_type != type;
        const int64_t ne[2] = {matrix ? t->shape[1] : t->shape[0], matrix ? t->shape[0] : 1};
        rc = tlm_gguf_add_tensor_deferred(w, gname, out_type, matrix ? 2 : 1, ne,
                                          (size_t)ne[1] * wq_row_bytes(out_type, (int)ne[0]));
    }
    if (!rc) rc = tlm_gguf_write_streamed(w, path, fill_tensor, &s);
    tlm_gguf_writer_free(w);
    free(s.rows), free(s.draws);
    free((void *)s.tensors);
    return rc ? -1 : 0;
}
