/* api.c — include/tinylm.h on top of the internal model. */
#include "tinylm.h"

#include "model/checkpoint.h"
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
