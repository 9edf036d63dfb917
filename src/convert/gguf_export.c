/* gguf_export.c — an engine model as a GGUF file llama.cpp runs: the architecture its config
 * matches (llama for now), llama.cpp's metadata keys and tensor names, the tokenizer in the
 * file's metadata, every matrix in the type asked for (vectors stay F32).
 *
 * The inverse of gguf_load.c: q and k rows go back to llama's interleaved pairs; the matrices of
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
    const char *why = hf_llama_blocker(c);
    if (why) return why;
    if (c->rope_scaling == ROPE_SCALING_LLAMA3) return "Llama 3 RoPE scaling (llama.cpp wants a rope_freqs tensor)";
    if (c->attn_bias || c->attn_out_bias || c->mlp_bias) return "biases";
    if (c->norm != NORM_RMSNORM) return "a norm other than plain-weight RMSNorm";
    return NULL;
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

static int set_metadata(tlm_gguf_writer *w, const tlm_config *c, int type, const char *name) {
    return tlm_gguf_set_str(w, "general.architecture", "llama", 5) ||
           tlm_gguf_set_str(w, "general.name", name, strlen(name)) ||
           tlm_gguf_set_u32(w, "general.file_type", file_type(type)) ||
           tlm_gguf_set_u32(w, "llama.context_length", (uint32_t)c->max_seq) ||
           tlm_gguf_set_u32(w, "llama.embedding_length", (uint32_t)c->d_model) ||
           tlm_gguf_set_u32(w, "llama.block_count", (uint32_t)c->n_layers) ||
           tlm_gguf_set_u32(w, "llama.feed_forward_length", (uint32_t)c->d_ff) ||
           tlm_gguf_set_u32(w, "llama.attention.head_count", (uint32_t)c->n_heads) ||
           tlm_gguf_set_u32(w, "llama.attention.head_count_kv", (uint32_t)c->n_kv_heads) ||
           tlm_gguf_set_u32(w, "llama.attention.key_length", (uint32_t)c->head_dim) ||
           tlm_gguf_set_u32(w, "llama.attention.value_length", (uint32_t)c->head_dim) ||
           tlm_gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", c->norm_eps) ||
           tlm_gguf_set_f32(w, "llama.rope.freq_base", c->rope_theta) ||
           tlm_gguf_set_u32(w, "llama.rope.dimension_count", (uint32_t)c->head_dim) ||
           tlm_gguf_set_u32(w, "llama.vocab_size", (uint32_t)c->vocab_size) ||
           (c->rope_scaling == ROPE_SCALING_LINEAR &&
            (tlm_gguf_set_str(w, "llama.rope.scaling.type", "linear", 6) ||
             tlm_gguf_set_f32(w, "llama.rope.scaling.factor", c->rope_factor)));
}

/* Where the tensors' values come from as the file is written, one tensor at a time: a loaded
 * model's stored bytes, or (m NULL) the engine's init drawn a chunk of rows at a time in table
 * order (tensor_init_draws, tensor_init_from_draws), so that the f32 model is never formed. */
typedef struct {
    const tlm_config *cfg;
    const tensor_info *tensors;
    const tlm_model *m;
    int type;          /* the type asked for */
    int next;          /* the tensor the init's generator has come to */
    rng_state rng;     /* (init) */
    float *rows;       /* (init) a chunk of rows in f32: rows_floats, CHUNK_FLOATS or a head's rows */
    uint64_t *draws;   /* (init) the generator's draws for them (2 per value at most) */
    size_t rows_floats;
} export_src;

enum { CHUNK_FLOATS = 1 << 20 };

/* tensor i's rows in the file's type, into out (tlm_gguf_fill): the stored bytes when the tensor
 * is kept in that type, else its f32 values (dequantized when kept quantized, drawn when made
 * here) quantized; q and k rows reordered to llama's interleaved pairs (file row r = engine row
 * perm[r], within a head: a chunk of whole heads holds all the rows its file rows take) */
static int fill_tensor(void *user, size_t index, void *out, size_t nbytes) {
    export_src *s = user;
    const tlm_config *c = s->cfg;
    const tensor_info *t = &s->tensors[index];
    const int i = (int)index, matrix = t->ndim == 2, rows = matrix ? t->shape[0] : 1,
              cols = matrix ? t->shape[1] : t->shape[0];
    const int type = matrix ? fit_type(s->type, cols) : WQ_F32;
    const int kept = s->m ? (t->qtype ? t->qtype : t->bf16 ? WQ_BF16 : WQ_F32) : WQ_F32;
    const size_t in_row = wq_row_bytes(kept, cols), out_row = wq_row_bytes(type, cols);
    if (nbytes != (size_t)rows * out_row || (!s->m && i != s->next))
        return tlm_error("exporting %s: asked for out of order or at the wrong size (internal)", t->name);
    const int qk = matrix && (ends_with(t->name, ".attn.q_proj.weight") || ends_with(t->name, ".attn.k_proj.weight"));
    int *perm = qk ? pairs_from_halves(ends_with(t->name, ".q_proj.weight") ? c->n_heads : c->n_kv_heads, c->head_dim)
                   : NULL;
    if (qk && !perm) return tlm_error("out of memory exporting %s", t->name);
    const uint8_t *stored = NULL;
    int chunk = rows;
    if (s->m) {
        size_t stored_bytes;
        stored = model_tensor_data(s->m, i, &stored_bytes);
    } else {
        chunk = (int)(s->rows_floats / (size_t)cols); /* (rows_floats holds a head's rows of any tensor) */
        if (qk) chunk -= chunk % c->head_dim;
        stored = (const uint8_t *)s->rows;
    }
    int rc = 0;
    for (int r0 = 0; r0 < rows && !rc; r0 += chunk) {
        const int n = rows - r0 < chunk ? rows - r0 : chunk;
        const size_t per = s->m ? 0 : (size_t)tensor_init_draws(t) * cols; /* (draws a row) */
        for (size_t j = 0; j < per * n; j++) s->draws[j] = rng_u64(&s->rng);
        /* the threads make the rows' values of the draws (log, cos), then quantize the rows (ggml's
         * scale searches): nearly all of an export's time. The first row that fails is done again
         * here, for its message (tlm_error is per thread). */
        int bad = rows, oom = 0;
#pragma omp parallel if (n > 1)
        {
            if (!s->m) {
#pragma omp for schedule(static)
                for (int r = 0; r < n; r++)
                    tensor_init_from_draws(c, t, s->draws + per * r, s->rows + (size_t)r * cols, (size_t)cols);
            }
            float *row = kept == type ? NULL : malloc((size_t)cols * sizeof(float));
            if (kept != type && !row) {
#pragma omp atomic write
                oom = 1;
            }
#pragma omp for schedule(static)
            for (int r = r0; r < r0 + n; r++) {
                const size_t from_row = (size_t)(perm ? perm[r] : r) - (s->m ? 0 : (size_t)r0);
                const uint8_t *from = stored + from_row * in_row;
                uint8_t *to = (uint8_t *)out + (size_t)r * out_row;
                if (kept == type) {
                    memcpy(to, from, out_row);
                    continue;
                }
                if (!row) continue;
                wq_dequantize_row(kept, from, row, cols);
                if (wq_quantize_row(type, row, to, cols)) {
#pragma omp critical
                    if (r < bad) bad = r;
                }
            }
            free(row);
        }
        if (oom) rc = tlm_error("out of memory exporting %s", t->name);
        else if (bad < rows) {
            const size_t from_row = (size_t)(perm ? perm[bad] : bad) - (s->m ? 0 : (size_t)r0);
            float *row = malloc((size_t)cols * sizeof(float));
            if (row) {
                wq_dequantize_row(kept, stored + from_row * in_row, row, cols);
                wq_quantize_row(type, row, (uint8_t *)out + (size_t)bad * out_row, cols);
            }
            rc = row ? tlm_error_prefix("exporting %s as %s", t->name, wq_name(type))
                     : tlm_error("out of memory exporting %s", t->name);
            free(row);
        }
    }
    s->next = i + 1;
    free(perm);
    return rc;
}

static int export_tensors(export_src *s, int n_tensors, const struct tlm_tokenizer *tok, const char *path,
                          const char *name, int *n_fallback) {
    const tlm_config *c = s->cfg;
    const char *blocker = gguf_export_blocker(c);
    if (blocker) return tlm_error("cannot export as GGUF (llama architecture): %s", blocker);
    if (!wq_can_quantize(s->type)) return tlm_error("cannot write GGUF tensors of type %s", wq_name(s->type));
    tlm_gguf_writer *w = tlm_gguf_writer_new();
    int rc = !w ? tlm_error("out of memory") : 0;
    if (!rc) rc = set_metadata(w, c, s->type, name) || (tok && tlm_tokenizer_to_gguf(tok, w));
    *n_fallback = 0;
    for (int i = 0; i < n_tensors && !rc; i++) {
        const tensor_info *t = &s->tensors[i];
        char gname[128];
        if (gguf_engine_name_to_file(t->name, gname, sizeof gname)) {
            rc = tlm_error("no GGUF name for %s (internal)", t->name);
            break;
        }
        const int matrix = t->ndim == 2;
        const int out_type = matrix ? fit_type(s->type, t->shape[1]) : WQ_F32;
        *n_fallback += matrix && out_type != s->type;
        const int64_t ne[2] = {matrix ? t->shape[1] : t->shape[0], matrix ? t->shape[0] : 1};
        rc = tlm_gguf_add_tensor_deferred(w, gname, out_type, matrix ? 2 : 1, ne,
                                          (size_t)ne[1] * wq_row_bytes(out_type, (int)ne[0]));
    }
    if (!rc) rc = tlm_gguf_write_streamed(w, path, fill_tensor, s);
    tlm_gguf_writer_free(w);
    return rc ? -1 : 0;
}

int gguf_export_file(const tlm_model *m, const struct tlm_tokenizer *tok, int type, const char *path,
                     const char *name, int *n_fallback) {
    export_src s = {.cfg = &m->cfg, .tensors = m->tensors, .m = m, .type = type};
    return export_tensors(&s, m->n_tensors, tok, path, name, n_fallback);
}

int gguf_export_init_file(const tlm_config *c, uint64_t seed, const struct tlm_tokenizer *tok, int type,
                          const char *path, const char *name, int *n_fallback) {
    int n_tensors = 0;
    size_t n_floats = 0;
    export_src s = {.cfg = c, .type = type};
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
    int rc = s.rows && s.draws ? export_tensors(&s, n_tensors, tok, path, name, n_fallback) : tlm_error("out of memory");
    free(s.rows), free(s.draws);
    free((void *)s.tensors);
    return rc;
}
