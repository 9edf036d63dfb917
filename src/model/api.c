/* api.c — include/tinylm.h on top of the internal model. */
#include "tinylm.h"

#include <omp.h>
#include <stdlib.h>

#include "model/checkpoint.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

tlm_model *tlm_load(const char *dir) { return model_load_dir(dir); }

tlm_model *tlm_create(const char *config_path, uint64_t seed) {
    tlm_config cfg;
    if (config_load(&cfg, config_path)) return NULL;
    tlm_model *m = model_create(&cfg);
    if (m) model_init_weights(m, seed);
    return m;
}

int tlm_save(const tlm_model *m, const char *dir) { return model_save_dir(m, dir); }
void tlm_free(tlm_model *m) { model_free(m); }
size_t tlm_num_params(const tlm_model *m) { return m->n_params; }
int tlm_vocab_size(const tlm_model *m) { return m->cfg.vocab_size; }

int tlm_forward(tlm_model *m, const int *tokens, const int *targets, int B, int T, float *loss) {
    return model_forward(m, tokens, targets, B, T, loss);
}

const float *tlm_logits(const tlm_model *m) { return m->acts.logits; }
int tlm_backward(tlm_model *m, float dloss) { return model_backward(m, dloss); }

const float *tlm_grad(const tlm_model *m, const char *name, size_t *numel) {
    const tensor_info *t = model_find_tensor(m, name);
    if (!t || !m->grad_mem) return NULL;
    if (numel) *numel = t->numel;
    return m->grad_mem + t->offset;
}

void tlm_zero_grad(tlm_model *m) { model_zero_grads(m); }
const char *tlm_error_message(void) { return tlm_last_error(); }

/* ---- for bindings (python/tinylm) ------------------------------------------------------------ */

int tlm_backward_logits(tlm_model *m, const float *dlogits) { return model_backward_from_logits(m, dlogits); }
tlm_model *tlm_load_any(const char *path) { return model_load_dir(path); }
char *tlm_config_json(const tlm_model *m) { return config_to_json(&m->cfg); }
void tlm_free_mem(void *p) { free(p); }
void tlm_set_threads(int n) {
    if (n > 0) omp_set_num_threads(n);
}

tlm_tokenizer *tlm_tok_open(const char *path, const char *model_path) {
    return path ? tlm_tokenizer_load(path) : model_load_tokenizer(model_path);
}
void tlm_tok_close(tlm_tokenizer *t) { tlm_tokenizer_free(t); }
int *tlm_tok_encode(const tlm_tokenizer *t, const char *text, size_t len, int bos, size_t *n) {
    int *ids = NULL;
    if (tlm_tokenizer_encode(t, text, len, bos, &ids, n)) return NULL;
    if (!ids) ids = malloc(sizeof(int)); /* (no tokens: still a pointer to free) */
    return ids;
}
char *tlm_tok_decode(const tlm_tokenizer *t, const int *ids, size_t n, size_t *len) {
    return tlm_tokenizer_decode_len(t, ids, n, len);
}
const char *tlm_tok_piece(const tlm_tokenizer *t, int prev, int id, size_t *len) {
    return tlm_tokenizer_piece(t, prev, id, len);
}
int tlm_tok_bos(const tlm_tokenizer *t) { return tlm_tokenizer_bos(t); }
int tlm_tok_eos(const tlm_tokenizer *t) { return tlm_tokenizer_eos(t); }
int tlm_tok_vocab_size(const tlm_tokenizer *t) { return tlm_tokenizer_vocab_size(t); }

/* The interface version python/tinylm checks (bump it when a declaration in tinylm.h changes). */
int tlm_abi_version(void) { return 1; }
