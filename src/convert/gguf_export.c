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

static int set_metadata(tlm_gguf_writer *w, const tlm_model *m, int type, const char *name) {
    const tlm_config *c = &m->cfg;
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

int gguf_export_file(const tlm_model *m, const struct tlm_tokenizer *tok, int type, const char *path,
                     const char *name, int *n_fallback) {
    const tlm_config *c = &m->cfg;
    const char *blocker = gguf_export_blocker(c);
    if (blocker) return tlm_error("cannot export as GGUF (llama architecture): %s", blocker);
    if (!wq_can_quantize(type)) return tlm_error("cannot write GGUF tensors of type %s", wq_name(type));
    tlm_gguf_writer *w = tlm_gguf_writer_new();
    void **bufs = calloc((size_t)m->n_tensors, sizeof *bufs);
    int rc = !w || !bufs ? tlm_error("out of memory") : 0;
    if (!rc) rc = set_metadata(w, m, type, name) || (tok && tlm_tokenizer_to_gguf(tok, w));
    *n_fallback = 0;
    for (int i = 0; i < m->n_tensors && !rc; i++) {
        const tensor_info *t = &m->tensors[i];
        char gname[128];
        if (gguf_engine_name_to_file(t->name, gname, sizeof gname)) {
            rc = tlm_error("no GGUF name for %s (internal)", t->name);
            break;
        }
        const int matrix = t->ndim == 2;
        const int out_type = matrix ? fit_type(type, t->shape[1]) : WQ_F32;
        *n_fallback += matrix && out_type != type;
        int *perm = NULL;
        if (matrix && (ends_with(t->name, ".attn.q_proj.weight") || ends_with(t->name, ".attn.k_proj.weight")) &&
            !(perm = pairs_from_halves(ends_with(t->name, ".q_proj.weight") ? c->n_heads : c->n_kv_heads, c->head_dim))) {
            rc = tlm_error("out of memory");
            break;
        }
        size_t bytes = 0;
        bufs[i] = tensor_as(m, i, out_type, perm, &bytes);
        free(perm);
        if (!bufs[i]) {
            rc = -1;
            break;
        }
        const int64_t ne[2] = {matrix ? t->shape[1] : t->shape[0], matrix ? t->shape[0] : 1};
        rc = tlm_gguf_add_tensor(w, gname, out_type, matrix ? 2 : 1, ne, bufs[i], bytes);
    }
    if (!rc) rc = tlm_gguf_write(w, path);
    for (int i = 0; bufs && i < m->n_tensors; i++) free(bufs[i]);
    free(bufs);
    tlm_gguf_writer_free(w);
    return rc ? -1 : 0;
}
