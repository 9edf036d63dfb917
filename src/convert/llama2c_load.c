/* llama2c_load.c — a llama2.c checkpoint (src/formats/llama2c.c reads the file) as an engine
 * model: the file's arrays into the model's parameters. The model is a Llama: RMSNorm
 * (eps 1e-5), RoPE (theta 10000), SwiGLU with w1 = gate, w3 = up, w2 = down. llama2.c rotates
 * interleaved pairs (2i, 2i+1) of each head while the engine rotates halves (i, i + hs/2), so
 * the rows of wq and wk are permuted within each head here (the permutation Hugging Face's
 * Llama conversion applies); the attention scores are then exactly those of run.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/llama2c.h"
#include "convert/checkpoint.h"
#include "ops/quant.h"
#include "util/error.h"
#include "util/f16.h"

/* Row r of a head-permuted q or k matrix (pairs -> halves: llama2.c's head rows (2b, 2b+1) become
 * rows (b, b + hs/2)) comes from this row of the file's. */
static size_t pair_row(size_t r, int hs) {
    const size_t h = r / (size_t)hs, w = r % (size_t)hs, half = (size_t)hs / 2;
    return h * (size_t)hs + 2 * (w % half) + w / half;
}

/* (checkpoint.h) */
void llama2c_rows_to_halves(float *dst, const float *src, int n_heads, int hs, int cols) {
    for (size_t r = 0; r < (size_t)n_heads * hs; r++)
        memcpy(dst + r * cols, src + pair_row(r, hs) * cols, sizeof(float) * (size_t)cols);
}

/* The file's next array, `field`, into engine tensor `name` in the type the model keeps it in:
 * f32 (read in place), or bf16, rounded here as model_weights_to_bf16 rounds, so the f32 copy
 * of the whole model never exists. heads > 0: q/k rows regrouped per head (pairs -> halves).
 * tmp holds the largest tensor's f32 values. */
static int read_tensor(llama2c_file *r, tlm_model *m, const char *name, const char *field, int heads, float *tmp) {
    const tensor_info *t = model_find_tensor(m, name);
    if (!t) return tlm_error("%s: the engine has no tensor %s for %s", r->path, name, field);
    size_t bytes;
    void *dst = model_tensor_data(m, (int)(t - m->tensors), &bytes);
    const size_t cols = t->ndim == 2 ? (size_t)t->shape[1] : t->numel, rows = t->numel / cols;
    const int hs = m->cfg.head_dim;
    if (!t->bf16 && !heads) return llama2c_read_floats(r, dst, t->numel, field);
    if (llama2c_read_floats(r, tmp, t->numel, field)) return -1;
#pragma omp parallel for schedule(static)
    for (size_t row = 0; row < rows; row++) {
        const float *src = tmp + (heads ? pair_row(row, hs) : row) * cols;
        if (!t->bf16)
            memcpy((float *)dst + row * cols, src, sizeof(float) * cols);
        else
            for (size_t j = 0; j < cols; j++) ((uint16_t *)dst)[row * cols + j] = tlm_f32_to_bf16(src[j]);
    }
    return 0;
}

static int read_weights(llama2c_file *r, tlm_model *m) {
    const tlm_config *c = &m->cfg;
    size_t largest = 0; /* (f32 matrices without a permutation are read in place and need no buffer) */
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].ndim == 2 && m->tensors[i].numel > largest) largest = m->tensors[i].numel;
    float *tmp = malloc((largest ? largest : 1) * sizeof(float));
    if (!tmp) return tlm_error("%s: out of memory", r->path);
    /* the file's arrays in its order: each for every layer in turn (layer -1: a model-wide one) */
    static const struct {
        const char *field, *name; /* name: the engine tensor, %d the layer */
        int per_layer, heads;     /* heads: 1 = q rows (n_heads), 2 = k rows (n_kv_heads) */
    } ARRAYS[] = {
        {"token_embedding_table", "embed.weight", 0, 0},
        {"rms_att_weight", "layers.%d.attn_norm.weight", 1, 0},
        {"wq", "layers.%d.attn.q_proj.weight", 1, 1},
        {"wk", "layers.%d.attn.k_proj.weight", 1, 2},
        {"wv", "layers.%d.attn.v_proj.weight", 1, 0},
        {"wo", "layers.%d.attn.o_proj.weight", 1, 0},
        {"rms_ffn_weight", "layers.%d.ffn_norm.weight", 1, 0},
        {"w1", "layers.%d.ffn.gate_proj.weight", 1, 0},
        {"w2", "layers.%d.ffn.down_proj.weight", 1, 0},
        {"w3", "layers.%d.ffn.up_proj.weight", 1, 0},
        {"rms_final_weight", "final_norm.weight", 0, 0},
    };
    int rc = 0;
    for (size_t a = 0; a < sizeof ARRAYS / sizeof ARRAYS[0] && !rc; a++)
        for (int l = 0; l < (ARRAYS[a].per_layer ? c->n_layers : 1) && !rc; l++) {
            char name[96];
            snprintf(name, sizeof name, ARRAYS[a].name, l);
            const int heads = ARRAYS[a].heads == 1 ? c->n_heads : ARRAYS[a].heads == 2 ? c->n_kv_heads : 0;
            rc = read_tensor(r, m, name, ARRAYS[a].field, heads, tmp);
        }
    /* freq_cis_real / freq_cis_imag: RoPE tables the engine recomputes */
    if (!rc) rc = llama2c_skip_floats(r, (size_t)c->max_seq * c->head_dim, "freq_cis");
    if (!rc && !c->tie_embeddings) rc = read_tensor(r, m, "lm_head.weight", "wcls", 0, tmp);
    free(tmp);
    return rc ? -1 : 0;
}

/* the engine config of a llama2.c header (the format layer knows no tlm_config) */
static int header_config(const llama2c_header *h, const char *path, tlm_config *c) {
    if (h->n_layers > TLM_MAX_LAYERS)
        return tlm_error("%s: header field n_layers = %d exceeds the supported %d", path, h->n_layers, TLM_MAX_LAYERS);
    config_defaults(c);
    snprintf(c->model_type, sizeof c->model_type, "llama2c");
    c->vocab_size = h->vocab_size, c->d_model = h->dim, c->n_layers = h->n_layers;
    c->n_heads = h->n_heads, c->n_kv_heads = h->n_kv_heads, c->head_dim = h->head_size;
    c->d_ff = h->hidden_dim, c->max_seq = h->seq_len;
    c->norm = NORM_RMSNORM, c->norm_eps = 1e-5f, c->placement = PLACE_PRE;
    c->position = POS_ROPE, c->rope_theta = 10000.0f, c->ffn = FFN_SWIGLU;
    c->tie_embeddings = h->shared_classifier;
    return config_validate(c, path);
}

/* opens the checkpoint and reads its header as an engine config */
static int open_as_config(llama2c_file *lf, const char *path, tlm_config *cfg) {
    llama2c_header h;
    if (llama2c_open(lf, path, &h)) return -1;
    if (header_config(&h, path, cfg)) {
        llama2c_close(lf);
        return -1;
    }
    return 0;
}

int llama2c_read_config(const char *path, tlm_config *cfg) {
    llama2c_file lf;
    if (open_as_config(&lf, path, cfg)) return -1;
    llama2c_close(&lf);
    return 0;
}

tlm_model *llama2c_load(const char *path, int bf16_weights) {
    llama2c_file lf;
    tlm_config cfg;
    if (open_as_config(&lf, path, &cfg)) return NULL;
    tlm_model *m = NULL;
    if (bf16_weights) { /* the model laid out with its matrices as bf16 from the start */
        int n = 0;
        size_t floats = 0;
        tensor_info *table = config_tensor_table(&cfg, &n, &floats);
        int *storage = calloc((size_t)(n ? n : 1), sizeof *storage);
        if (table && storage) {
            for (int i = 0; i < n; i++) storage[i] = tensor_kept_as_bf16(&table[i]) ? WQ_BF16 : WQ_F32;
            m = model_create_stored(&cfg, storage);
        } else {
            tlm_error("%s: out of memory", path);
        }
        free(table), free(storage);
    } else {
        m = model_create(&cfg);
    }
    if (m && read_weights(&lf, m)) {
        model_free(m);
        m = NULL;
    }
    llama2c_close(&lf);
    return m;
}
