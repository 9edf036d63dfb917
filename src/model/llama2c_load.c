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
#include "model/checkpoint.h"
#include "util/error.h"

/* rows of one head: interleaved pairs (2b, 2b+1) -> halves (b, b + hs/2) (checkpoint.h) */
void llama2c_rows_to_halves(float *dst, const float *src, int n_heads, int hs, int cols) {
    const size_t row = (size_t)cols * sizeof(float);
    for (int h = 0; h < n_heads; h++)
        for (int b = 0; b < hs / 2; b++)
            for (int a = 0; a < 2; a++)
                memcpy(dst + ((size_t)h * hs + a * (hs / 2) + b) * cols, src + ((size_t)h * hs + 2 * b + a) * cols, row);
}

static int read_weights(llama2c_file *r, tlm_model *m) {
    model_params *p = &m->p;
    const tlm_config *c = &m->cfg;
    const int d = c->d_model, f = c->d_ff, L = c->n_layers, hs = c->head_dim;
    const size_t qd = (size_t)c->n_heads * hs, kvd = (size_t)c->n_kv_heads * hs;
    if (llama2c_read_floats(r, p->embed, (size_t)c->vocab_size * d, "token_embedding_table")) return -1;
    for (int l = 0; l < L; l++)
        if (llama2c_read_floats(r, p->layers[l].attn_norm.w, d, "rms_att_weight")) return -1;
    float *tmp = malloc(qd * d * sizeof(float));
    if (!tmp) return tlm_error("%s: out of memory", r->path);
    int rc = 0;
    for (int l = 0; l < L && !rc; l++)
        if (!(rc = llama2c_read_floats(r, tmp, qd * d, "wq"))) llama2c_rows_to_halves(p->layers[l].q.w, tmp, c->n_heads, hs, d);
    for (int l = 0; l < L && !rc; l++)
        if (!(rc = llama2c_read_floats(r, tmp, kvd * d, "wk"))) llama2c_rows_to_halves(p->layers[l].k.w, tmp, c->n_kv_heads, hs, d);
    free(tmp);
    if (rc) return -1;
    for (int l = 0; l < L; l++)
        if (llama2c_read_floats(r, p->layers[l].v.w, kvd * d, "wv")) return -1;
    for (int l = 0; l < L; l++)
        if (llama2c_read_floats(r, p->layers[l].o.w, (size_t)d * qd, "wo")) return -1;
    for (int l = 0; l < L; l++)
        if (llama2c_read_floats(r, p->layers[l].ffn_norm.w, d, "rms_ffn_weight")) return -1;
    for (int l = 0; l < L; l++)
        if (llama2c_read_floats(r, p->layers[l].gate.w, (size_t)f * d, "w1")) return -1;
    for (int l = 0; l < L; l++)
        if (llama2c_read_floats(r, p->layers[l].down.w, (size_t)d * f, "w2")) return -1;
    for (int l = 0; l < L; l++)
        if (llama2c_read_floats(r, p->layers[l].up.w, (size_t)f * d, "w3")) return -1;
    if (llama2c_read_floats(r, p->final_norm.w, d, "rms_final_weight")) return -1;
    /* freq_cis_real / freq_cis_imag: RoPE tables the engine recomputes */
    if (llama2c_skip_floats(r, (size_t)c->max_seq * hs, "freq_cis")) return -1;
    if (!c->tie_embeddings && llama2c_read_floats(r, p->lm_head, (size_t)c->vocab_size * d, "wcls")) return -1;
    return 0;
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

tlm_model *llama2c_load(const char *path) {
    llama2c_file lf;
    tlm_config cfg;
    if (open_as_config(&lf, path, &cfg)) return NULL;
    tlm_model *m = model_create(&cfg);
    if (m && read_weights(&lf, m)) {
        model_free(m);
        m = NULL;
    }
    llama2c_close(&lf);
    return m;
}
