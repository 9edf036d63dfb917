/* llama2c_export.c — an engine model as a llama2.c checkpoint (legacy version 0, the layout
 * src/formats/llama2c.h describes), the inverse of llama2c_load.c: the rows of wq and wk go
 * back from the engine's rotate-halves order to llama2.c's interleaved pairs, and the RoPE
 * tables run.c's format carries (and skips) are written as cos/sin of theta 10000. Only a model
 * that llama2.c's run.c computes exactly is written; llama2c_export_blocker says why not. */
#include "llama2c_export.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "family.h"
#include "util/atomic_file.h"
#include "util/error.h"

const char *llama2c_export_blocker(const tlm_config *c) {
    const char *why = hf_llama_blocker(c);
    if (why) return why;
    if (c->attn_bias || c->attn_out_bias || c->mlp_bias) return "linear-layer biases";
    if (c->rope_scaling != ROPE_SCALING_NONE) return "rope_scaling";
    if (c->rope_theta != 10000.0f) return "rope_theta other than 10000";
    if (c->norm_eps != 1e-5f) return "RMSNorm eps other than 1e-5";
    if (c->head_dim * c->n_heads != c->d_model) return "head_dim other than d_model / n_heads";
    if (c->d_model <= 0 || c->max_seq <= 0) return "no sizes";
    return NULL;
}

/* rows of one head: halves (b, b + hs/2) -> interleaved pairs (2b, 2b+1) (llama2c_export.h) */
void llama2c_rows_to_pairs(float *dst, const float *src, int n_heads, int hs, int cols) {
    const size_t row = (size_t)cols * sizeof(float);
    for (int h = 0; h < n_heads; h++)
        for (int b = 0; b < hs / 2; b++)
            for (int a = 0; a < 2; a++)
                memcpy(dst + ((size_t)h * hs + 2 * b + a) * cols, src + ((size_t)h * hs + a * (hs / 2) + b) * cols, row);
}

static int put(tlm_atomic *f, const float *x, size_t n) { return tlm_atomic_write(f, x, n * sizeof(float)); }

int llama2c_export_file(const tlm_model *m, const char *path) {
    const tlm_config *c = &m->cfg;
    const char *why = llama2c_export_blocker(c);
    if (why) return tlm_error("%s: cannot export as a llama2.c checkpoint (run.c computes a Llama without biases): %s", path, why);
    const model_params *p = &m->p;
    const int d = c->d_model, f = c->d_ff, L = c->n_layers, hs = c->head_dim, T = c->max_seq;
    const size_t qd = (size_t)c->n_heads * hs, kvd = (size_t)c->n_kv_heads * hs;
    /* header: a negative vocab_size says the classifier follows the weights (untied) */
    const int32_t header[7] = {d, f, L, c->n_heads, c->n_kv_heads, c->tie_embeddings ? c->vocab_size : -c->vocab_size, T};
    const size_t n_q = qd * d, n_rope = (size_t)T * (hs / 2); /* scratch: a permuted wq, or one RoPE table */
    float *tmp = malloc((n_q > n_rope ? n_q : n_rope) * sizeof(float));
    tlm_atomic *out = tmp ? tlm_atomic_open(path) : NULL;
    if (!out) return free(tmp), tmp ? -1 : tlm_error("%s: out of memory", path);
    int rc = tlm_atomic_write(out, header, sizeof header) || put(out, p->embed, (size_t)c->vocab_size * d);
    for (int l = 0; l < L && !rc; l++) rc = put(out, p->layers[l].attn_norm.w, d);
    for (int l = 0; l < L && !rc; l++) {
        llama2c_rows_to_pairs(tmp, p->layers[l].q.w, c->n_heads, hs, d);
        rc = put(out, tmp, qd * d);
    }
    for (int l = 0; l < L && !rc; l++) {
        llama2c_rows_to_pairs(tmp, p->layers[l].k.w, c->n_kv_heads, hs, d);
        rc = put(out, tmp, kvd * d);
    }
    for (int l = 0; l < L && !rc; l++) rc = put(out, p->layers[l].v.w, kvd * d);
    for (int l = 0; l < L && !rc; l++) rc = put(out, p->layers[l].o.w, (size_t)d * qd);
    for (int l = 0; l < L && !rc; l++) rc = put(out, p->layers[l].ffn_norm.w, d);
    for (int l = 0; l < L && !rc; l++) rc = put(out, p->layers[l].gate.w, (size_t)f * d);
    for (int l = 0; l < L && !rc; l++) rc = put(out, p->layers[l].down.w, (size_t)d * f);
    for (int l = 0; l < L && !rc; l++) rc = put(out, p->layers[l].up.w, (size_t)f * d);
    if (!rc) rc = put(out, p->final_norm.w, d);
    /* freq_cis_real then freq_cis_imag [seq_len, hs/2], as llama2.c's export computes them */
    for (int part = 0; part < 2 && !rc; part++) {
        for (int t = 0; t < T; t++)
            for (int i = 0; i < hs / 2; i++) {
                const double angle = t * pow(10000.0, -2.0 * i / hs);
                tmp[(size_t)t * (hs / 2) + i] = (float)(part == 0 ? cos(angle) : sin(angle));
            }
        rc = put(out, tmp, n_rope);
    }
    if (!rc && !c->tie_embeddings) rc = put(out, p->lm_head, (size_t)c->vocab_size * d);
    free(tmp);
    if (rc) {
        tlm_atomic_abort(out);
        return -1;
    }
    return tlm_atomic_commit(out);
}
