/* api.c — include/tinylm.h on top of the internal model. */
#include "tinylm.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cjson/cJSON.h>

#include "infer/generate.h"
#include "infer/sampler.h"
#include "infer/step.h"
#include "convert/checkpoint.h"
#include "convert/family.h"
#include "model/decode.h"
#include "report/report.h"
#include "tokenizer/tokenizer.h"
#include "ops/quant.h"
#include "util/error.h"
#include "util/finite.h"
#include "util/fork.h"
#include "model/context.h"

tlm_model *tlm_load(const char *path) { return model_load_dir(path); }

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

int tlm_forward_padded(tlm_model *m, const int *tokens, const int *targets, const int *start, int B, int T,
                       float *loss) {
    return model_forward_padded(m, tokens, targets, start, B, T, loss);
}

const float *tlm_logits(const tlm_model *m) { return tlm_context_logits(m->ctx); }
int tlm_backward(tlm_model *m, float dloss) { return model_backward(m, dloss); }

const float *tlm_grad(const tlm_model *m, const char *name, size_t *numel) {
    const tensor_info *t = model_find_tensor(m, name);
    if (!t || !m->ctx->grad_mem) return NULL;
    if (numel) *numel = t->numel;
    return m->ctx->grad_mem + t->offset;
}

void tlm_zero_grad(tlm_model *m) { model_zero_grads(m); }
const char *tlm_error_message(void) { return tlm_last_error(); }

/* ---- for bindings (python/tinylm) ------------------------------------------------------------ */

int tlm_backward_logits(tlm_model *m, const float *dlogits) { return model_backward_from_logits(m, dlogits); }
char *tlm_config_json(const tlm_model *m) { return config_to_json(&m->cfg); }
void tlm_free_mem(void *p) { free(p); }
void tlm_set_threads(int n) { (void)tlm_set_threads_checked(n); } /* (out of 1..1024: ignored, the message set) */

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
int tlm_abi_version(void) { return 11; }

/* ---- more for bindings: sampling, generation, process state (python/tinylm) ------------------- */

/* (a forked child stays on one thread: util/fork.h) */
int tlm_set_threads_checked(int n) {
    if (n < 1 || n > 1024) return tlm_error("set_threads: %d threads; must be 1..1024", n);
    omp_set_num_threads(process_forked_child() ? 1 : n);
    return 0;
}
int tlm_threads(void) { return omp_get_max_threads(); }
int tlm_is_forked_child(void) { return process_forked_child(); }

int tlm_max_positions(const tlm_model *m) { return m->cfg.max_seq; }

void tlm_allow_nonfinite(int allow) { tlm_set_allow_nonfinite(allow); }

struct tlm_sampler {
    sampler s;
};

tlm_sampler *tlm_sampler_new(const tlm_model *m, float temperature, int top_k, float top_p, uint64_t seed) {
    tlm_sampler *t = malloc(sizeof *t);
    if (!t) return tlm_error("out of memory"), NULL;
    if (gen_sampler_init(&t->s, &m->cfg, temperature, top_k, top_p, seed)) { /* (a generation's: step.h) */
        free(t);
        return NULL;
    }
    return t;
}
int tlm_sampler_next(tlm_sampler *s, const float *logits) { return sampler_next(&s->s, logits); }
void tlm_sampler_free(tlm_sampler *s) {
    if (s) sampler_free(&s->s), free(s);
}

int tlm_generate(tlm_model *m, const tlm_tokenizer *tok, const int *prompt, int n_prompt, int max_new,
                 float temperature, int top_k, float top_p, uint64_t seed, int *ids_out, int *n_out) {
    *n_out = 0;
    if (m->ctx->hooks) return tlm_error("generate: detach the hooks first (a KV cache has no hook points)");
    /* (a context of its own: the model's default one, its mode and activations, are left as they were) */
    tlm_context *ctx = context_create(m);
    if (!ctx) return -1;
    const int rc = tlm_context_generate(ctx, tok, prompt, n_prompt, max_new, temperature, top_k, top_p, seed,
                                        ids_out, n_out);
    context_free(ctx);
    return rc;
}

/* ---- added with interface version 4: the parameters (python/tinylm Model.weights) ------------ */

int tlm_param_count(const tlm_model *m) { return m->n_tensors; }

const char *tlm_param_name(const tlm_model *m, int i) {
    if (i < 0 || i >= m->n_tensors) return tlm_error("param: index %d out of range [0, %d)", i, m->n_tensors), NULL;
    return m->tensors[i].name;
}

const float *tlm_param(const tlm_model *m, const char *name, int64_t shape[2], int *ndim) {
    if (!name) return tlm_error("param: tensor name is NULL"), NULL;
    const tensor_info *t = model_find_tensor(m, name);
    if (!t) return tlm_error("param: this model has no tensor named '%s' (docs/tensors.md)", name), NULL;
    if (t->bf16)
        return tlm_error("param %s: the weights were converted to bf16 (inference only): no f32 copy to read", name),
               NULL;
    if (t->qtype)
        return tlm_error("param %s: kept quantized (%s blocks, inference only): no f32 copy to read", name,
                         wq_name(t->qtype)),
               NULL;
    if (ndim) *ndim = t->ndim;
    if (shape)
        for (int i = 0; i < 2; i++) shape[i] = i < t->ndim ? t->shape[i] : 1;
    return m->param_mem + t->offset;
}

/* Every parameter view (q|k|v, gate|up, the tied head) points into param_mem, so an edit there is
 * seen by the next pass; the one derived copy, mixed precision's bf16 one (product16), is made
 * again here at the end, for the edits made before the call (python/tinylm calls it before each
 * call on a model whose weights it has handed out writable). What must not be written: a read-only
 * file mapping (copied here into an owned buffer first) and bf16 weights (the f32 values are gone:
 * refused). */
int tlm_params_writable(tlm_model *m) {
    if (m->wq_mem)
        return tlm_error("weights: this model's matrices are kept quantized (ggml blocks, inference only); they "
                         "cannot be edited in place");
    if (m->stored16)
        return tlm_error("weights: this model's matrices were converted to bf16 for inference; they cannot be edited "
                         "(load it without the bf16 conversion)");
    if (!m->file_map) {
        model_weights_changed(m);
        return 0;
    }
    float *own = malloc((m->n_params ? m->n_params : 1) * sizeof(float));
    if (!own) return tlm_error("weights: out of memory copying %zu parameters out of the file mapping", m->n_params);
    memcpy(own, m->param_mem, m->n_params * sizeof(float));
    munmap(m->file_map, m->file_map_len);
    m->file_map = NULL, m->file_map_len = 0;
    m->param_mem = own;
    model_bind_params(m, &m->p, m->param_mem);
    model_weights_changed(m);
    return 0;
}

/* ---- added with interface version 5: mixed precision ---------------------------------------- */

int tlm_set_precision(tlm_model *m, int bf16) {
    const char *why = NULL;
    const int on = model_set_mixed_bf16(m, bf16 != 0, &why);
    if (on == 0 && why) tlm_error("precision bf16: %s; computing in fp32", why);
    return on;
}

/* ---- added with interface version 6 ---------------------------------------------------------- */

tlm_model *tlm_f32_copy(const tlm_model *m) {
    tlm_model *f = model_f32_copy(m);
    if (!f) tlm_error("weights: out of memory for the f32 copy of %zu parameters", m->n_params);
    return f;
}

/* ---- interface version 7: generation one token at a time, the report page ------------------------ */

/* A generation runs in a context of its own (its KV cache attached, `tinylm generate`'s mode), so
 * generations of one model and passes of the model's default context do not touch each other's
 * state; the handle's hooks (tlm_set_hooks) are lent to it for each step (gen_borrow_hooks). */
struct tlm_gen {
    const tlm_model *owner; /* (compared, never read: the cache is sized for this model) */
    tlm_context *ctx;
    kv_cache *kv;
    sampler s;
    int *prompt, n_prompt, max_new, made, pending, failed;
};

/* A generation's context on m with kv attached; its passes run on the caller's threads, never
 * more than when the cache was made (context_threads: the cache's scratch is per thread). */
static tlm_context *gen_context(const tlm_model *m, kv_cache *kv) {
    tlm_context *ctx = kv ? context_create(m) : NULL;
    if (ctx) ctx->kv = kv;
    return ctx;
}

/* the handle's observers and hooks watch its generations too (python/tinylm: hooks during generate):
 * lent to the generation's context for one step, and its mode chosen by them — hooks need the
 * training layout (every activation kept, where a rewrite goes on from); without, `tinylm
 * generate`'s own mode, so the logits are its bit for bit */
static void gen_borrow_hooks(tlm_context *ctx, const tlm_context *from) {
    memcpy(ctx->observers, from->observers, sizeof ctx->observers);
    ctx->n_observers = from->n_observers, ctx->hooks = from->hooks;
    context_set_mode(ctx, ctx->hooks ? MODEL_TRAIN : MODEL_INFER_LAST);
}
static void gen_return_hooks(tlm_context *ctx) { ctx->n_observers = 0, ctx->hooks = NULL; }

tlm_gen *tlm_gen_new(tlm_model *m, const int *prompt, int n_prompt, int max_new, float temperature, int top_k,
                     float top_p, uint64_t seed) {
    if (!m || !prompt || n_prompt < 1) return tlm_error("generate: the prompt is empty"), NULL;
    if (max_new < 1) return tlm_error("generate: n = %d new tokens; must be >= 1", max_new), NULL;
    if ((long)n_prompt + max_new > m->cfg.max_seq)
        return tlm_error("generate: the prompt's %d tokens + n = %d new ones exceed max_position_embeddings = %d",
                         n_prompt, max_new, m->cfg.max_seq),
               NULL;
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= m->cfg.vocab_size)
            return tlm_error("generate: token id %d at position %d is outside the vocabulary [0, %d)", prompt[i], i,
                             m->cfg.vocab_size),
                   NULL;
    tlm_gen *g = calloc(1, sizeof *g);
    if (!g || !(g->prompt = malloc(sizeof(int) * (size_t)n_prompt))) {
        free(g);
        return tlm_error("out of memory"), NULL;
    }
    if (gen_sampler_init(&g->s, &m->cfg, temperature, top_k, top_p, seed)) {
        free(g->prompt), free(g);
        return NULL;
    }
    /* as generate(): room for the prompt and every new token */
    g->kv = kv_cache_create(m, n_prompt + max_new);
    g->ctx = gen_context(m, g->kv);
    if (!g->ctx) {
        kv_cache_free(g->kv), sampler_free(&g->s), free(g->prompt), free(g);
        return NULL;
    }
    memcpy(g->prompt, prompt, sizeof(int) * (size_t)n_prompt);
    g->owner = m;
    g->n_prompt = n_prompt, g->max_new = max_new, g->pending = -1;
    return g;
}

int tlm_gen_next(tlm_model *m, tlm_gen *g, int *token) {
    if (!m || !g || !token) return tlm_error("generate: NULL argument");
    if (g->failed) return tlm_error("generate: an earlier step failed; start a new generation");
    if (g->made >= g->max_new) return tlm_error("generate: the %d new tokens asked for are made", g->max_new);
    if (m != g->owner) return tlm_error("generate: this generation belongs to another model");
    /* the prompt first (step.h: one pass with hooks attached, so that they see it whole), then the
     * token the last call returned */
    gen_borrow_hooks(g->ctx, m->ctx);
    const int rc = g->made ? gen_step(g->ctx, &g->s, &g->pending, 1, 1, &g->pending)
                           : gen_step(g->ctx, &g->s, g->prompt, 1, g->n_prompt, &g->pending);
    gen_return_hooks(g->ctx);
    if (rc) {
        g->failed = 1;
        return -1;
    }
    *token = g->pending;
    g->made++;
    return 0;
}

int tlm_gen_position(const tlm_gen *g) { return g ? kv_cache_length(g->kv) : 0; }

void tlm_gen_free(tlm_gen *g) {
    if (!g) return;
    context_free(g->ctx);
    kv_cache_free(g->kv);
    sampler_free(&g->s);
    free(g->prompt), free(g);
}

/* ---- interface version 8: several prompts at once through one batched KV cache ------------------ */

struct tlm_gen_batch {
    const tlm_model *owner;
    tlm_context *ctx; /* (as tlm_gen's) */
    kv_cache *kv;
    sampler *s;      /* [batch]: each row's own, seeded alike (a row samples what its prompt alone would) */
    int *prompts;    /* [batch, P] left-padded */
    int *pending;    /* [batch] the tokens the last call returned */
    int batch, P, max_new, made, failed, n_samplers;
};

void tlm_gen_batch_free(tlm_gen_batch *g) {
    if (!g) return;
    context_free(g->ctx);
    kv_cache_free(g->kv);
    for (int b = 0; b < g->n_samplers; b++) sampler_free(&g->s[b]);
    free(g->s), free(g->prompts), free(g->pending), free(g);
}

tlm_gen_batch *tlm_gen_batch_new(tlm_model *m, const int *prompts, const int *lens, int batch, int max_new,
                                 float temperature, int top_k, float top_p, uint64_t seed) {
    if (!m || !prompts || !lens || batch < 1) return tlm_error("generate: no prompts"), NULL;
    if (max_new < 1) return tlm_error("generate: n = %d new tokens; must be >= 1", max_new), NULL;
    int P = 0;
    long total = 0;
    for (int b = 0; b < batch; b++) {
        if (lens[b] < 1) return tlm_error("generate: prompt %d is empty", b), NULL;
        P = lens[b] > P ? lens[b] : P;
        total += lens[b];
    }
    if ((long)P + max_new > m->cfg.max_seq)
        return tlm_error("generate: the longest prompt's %d tokens + n = %d new ones exceed "
                         "max_position_embeddings = %d",
                         P, max_new, m->cfg.max_seq),
               NULL;
    for (long i = 0; i < total; i++)
        if (prompts[i] < 0 || prompts[i] >= m->cfg.vocab_size)
            return tlm_error("generate: token id %d at position %ld of the prompts is outside the vocabulary [0, %d)",
                             prompts[i], i, m->cfg.vocab_size),
                   NULL;
    tlm_gen_batch *g = calloc(1, sizeof *g);
    int *start = malloc(sizeof(int) * (size_t)batch);
    if (!g || !start || !(g->s = calloc((size_t)batch, sizeof(sampler))) ||
        !(g->prompts = calloc((size_t)batch * P, sizeof(int))) || !(g->pending = calloc((size_t)batch, sizeof(int)))) {
        free(start), tlm_gen_batch_free(g);
        return tlm_error("out of memory"), NULL;
    }
    g->batch = batch, g->P = P, g->max_new = max_new, g->owner = m;
    for (int b = 0, at = 0; b < batch; at += lens[b], b++) {
        start[b] = P - lens[b]; /* (left padding: the pads, id 0, are seen by no real query) */
        memcpy(g->prompts + (size_t)b * P + start[b], prompts + at, sizeof(int) * (size_t)lens[b]);
        if (gen_sampler_init(&g->s[b], &m->cfg, temperature, top_k, top_p, seed)) {
            free(start), tlm_gen_batch_free(g);
            return NULL;
        }
        g->n_samplers++;
    }
    g->kv = kv_cache_create_batch(m, P + max_new, batch, start);
    g->ctx = gen_context(m, g->kv);
    free(start);
    if (!g->ctx) {
        tlm_gen_batch_free(g);
        return NULL;
    }
    return g;
}

int tlm_gen_batch_next(tlm_model *m, tlm_gen_batch *g, int *tokens) {
    if (!m || !g || !tokens) return tlm_error("generate: NULL argument");
    if (g->failed) return tlm_error("generate: an earlier step failed; start a new generation");
    if (g->made >= g->max_new) return tlm_error("generate: the %d new tokens asked for are made", g->max_new);
    if (m != g->owner) return tlm_error("generate: this generation belongs to another model");
    /* (hooks: as tlm_gen_next; they see [batch, T, ...] over the positions the step computes, the
     * prompts in one pass) */
    gen_borrow_hooks(g->ctx, m->ctx);
    const int rc = g->made ? gen_step(g->ctx, g->s, g->pending, g->batch, 1, g->pending)
                           : gen_step(g->ctx, g->s, g->prompts, g->batch, g->P, g->pending);
    gen_return_hooks(g->ctx);
    if (rc) {
        g->failed = 1;
        return -1;
    }
    memcpy(tokens, g->pending, sizeof(int) * (size_t)g->batch);
    g->made++;
    return 0;
}

char *tlm_report_html(const char *title, const char *data_json, size_t *len) {
    if (!title || !data_json) return tlm_error("report: NULL title or data"), NULL;
    cJSON *root = cJSON_Parse(data_json);
    if (!root) return tlm_error("report: the data is not valid JSON"), NULL;
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "kind");
    const int ok = cJSON_IsObject(root) && cJSON_IsString(kind) &&
                   (!strcmp(kind->valuestring, "pattern") || !strcmp(kind->valuestring, "positions"));
    cJSON_Delete(root);
    if (!ok) return tlm_error("report: the data must be an object of kind \"pattern\" or \"positions\""), NULL;
    return report_page(title, data_json, len);
}

/* ---- interface version 9: rules a binding asks for ---------------------------------------------- */

int tlm_norm_gain(const tlm_model *m, const float *w, float *gain, size_t n) {
    if (!m || (n && (!w || !gain))) return tlm_error("norm gain: NULL model or arrays");
    for (size_t i = 0; i < n; i++) gain[i] = model_norm_gain(&m->cfg, w[i]);
    return 0;
}

int tlm_input_norm(const tlm_model *m, int layer, int sublayer, char *name, size_t cap) {
    if (!m || !name || !cap) return tlm_error("input norm: NULL model or name");
    const tlm_config *c = &m->cfg;
    if (layer < 0 || layer > c->n_layers)
        return tlm_error("input norm: layer %d is out of range (0..%d, %d: the final norm)", layer, c->n_layers,
                         c->n_layers);
    if (sublayer != 0 && sublayer != 1) return tlm_error("input norm: sublayer %d must be 0 (attention) or 1 (FFN)", sublayer);
    int n;
    if (layer == c->n_layers) {
        if (!c->final_norm) return 0;
        n = snprintf(name, cap, "ln_final");
    } else {
        /* (params.c binds attn_norm / ffn_norm as the sublayer's input norm under these placements) */
        if (!placement_has_input_norm(c->placement)) return 0;
        n = snprintf(name, cap, "blocks.%d.%s", layer, sublayer ? "ln2" : "ln1");
    }
    if (n < 0 || (size_t)n >= cap) return tlm_error("input norm: the name needs %d bytes; %zu given", n + 1, cap);
    return 1;
}

/* ---- contexts: several runs of one model at once -------------------------------------------------- */

tlm_context *tlm_context_new(const tlm_model *m, int n_threads) {
    if (!m) return tlm_error("context: the model is NULL"), NULL;
    if (n_threads < 0 || n_threads > 1024) return tlm_error("context: %d threads; must be 0..1024", n_threads), NULL;
    tlm_context *ctx = context_create(m);
    if (ctx) ctx->n_threads = n_threads;
    return ctx;
}

void tlm_context_free(tlm_context *ctx) { context_free(ctx); }

int tlm_context_forward(tlm_context *ctx, const int *tokens, const int *targets, int B, int T, float *loss) {
    if (!ctx || !tokens) return tlm_error("forward: NULL context or tokens");
    return context_forward(ctx, tokens, targets, B, T, loss);
}

const float *tlm_context_logits(const tlm_context *ctx) { return ctx->acts.logits; }

int tlm_context_set_hooks(tlm_context *ctx, tlm_hook_fn fn, void *user, const unsigned char *fwd,
                          const unsigned char *bwd) {
    return context_set_hooks(ctx, fn, user, fwd, bwd);
}

int tlm_context_generate(tlm_context *ctx, const tlm_tokenizer *tok, const int *prompt, int n_prompt, int max_new,
                         float temperature, int top_k, float top_p, uint64_t seed, int *ids_out, int *n_out) {
    *n_out = 0;
    if (ctx->hooks) return tlm_error("generate: detach the hooks first (a KV cache has no hook points)");
    if (max_new < 1) return tlm_error("generate: n = %d new tokens; must be >= 1", max_new);
    /* the text generate() prints is not wanted here: only the ids */
    FILE *sink = tok ? fopen("/dev/null", "w") : NULL;
    if (tok && !sink) return tlm_error("generate: cannot open /dev/null");
    gen_options g = {.max_new_tokens = max_new, .temperature = temperature, .top_k = top_k, .top_p = top_p,
                     .seed = seed};
    const model_mode mode = ctx->mode;
    context_set_mode(ctx, MODEL_INFER_LAST); /* as `tinylm generate` runs it */
    const int rc = generate(ctx, tok, prompt, n_prompt, &g, sink, ids_out, n_out, NULL);
    context_set_mode(ctx, mode);
    if (sink) fclose(sink);
    return rc;
}
