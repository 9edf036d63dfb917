/* lens.c — the tuned lens (see lens.h): translators, their loss KL(final || lens) through the
 * frozen final norm and LM head, its backward, training with AdamW, the file.
 *
 * The translators' parameters live in a parameter-only tlm_model (tensor table + one buffer +
 * gradients), so that AdamW, clipping and the global gradient norm of src/train/optim.c run
 * on them unchanged: A_k is a TENSOR_MATRIX (weight decay pulls it to 0, i.e. the translator
 * to the identity), b_k a TENSOR_BIAS. */
#include "lens.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/safetensors.h"
#include "model/model.h"
#include "train/data.h"
#include "train/optim.h"
#include "util/error.h"
#include "util/rng.h"
#include "model/context.h"

#define LENS_FORMAT "tinylm-tuned-lens"

struct tlm_lens {
    int L, d, V;
    tlm_model *pm; /* the translators: tensors 2k (A_k [d, d]) and 2k + 1 (b_k [d]) */
    uint64_t model_hash; /* model_fingerprint of the model it is for (metadata "model_hash") */
};

/* FNV-1a over the model's f32 parameters: a lens is refused for any other model, also one of the
 * same shape (the same weights in another format, e.g. an export, are the same model) */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
static uint64_t model_fingerprint(const tlm_model *m) {
    uint64_t h = 0xcbf29ce484222325ull;
    if (m->param_mem) h = fnv1a(h, m->param_mem, m->n_params * sizeof(float));
    return h;
}

int lens_stages(const tlm_lens *l) { return l->L; }
tlm_model *lens_params(tlm_lens *l) { return l->pm; }

static tlm_lens *lens_alloc(int L, int d, int V) {
    tlm_lens *l = calloc(1, sizeof *l);
    tlm_model *pm = calloc(1, sizeof *pm);
    if (!l || !pm) return free(l), free(pm), tlm_error("out of memory for the tuned lens"), NULL;
    l->L = L, l->d = d, l->V = V, l->pm = pm;
    pm->n_tensors = 2 * L;
    pm->n_params = (size_t)L * ((size_t)d * d + d);
    pm->tensors = calloc((size_t)pm->n_tensors, sizeof(tensor_info));
    pm->param_mem = calloc(pm->n_params ? pm->n_params : 1, sizeof(float));
    pm->ctx = context_create(pm); /* (its gradients, for the optimizer) */
    if (pm->ctx) pm->ctx->grad_mem = calloc(pm->n_params ? pm->n_params : 1, sizeof(float));
    if (!pm->tensors || !pm->param_mem || !pm->ctx || !pm->ctx->grad_mem) {
        lens_free(l);
        return tlm_error("out of memory for the tuned lens (%zu parameters)", (size_t)L * ((size_t)d * d + d)), NULL;
    }
    size_t off = 0;
    for (int k = 0; k < L; k++) {
        tensor_info *a = &pm->tensors[2 * k], *b = &pm->tensors[2 * k + 1];
        snprintf(a->name, sizeof a->name, "translators.%d.weight", k);
        a->ndim = 2, a->shape[0] = d, a->shape[1] = d, a->offset = off, a->numel = (size_t)d * d,
        a->kind = TENSOR_MATRIX;
        off += a->numel;
        snprintf(b->name, sizeof b->name, "translators.%d.bias", k);
        b->ndim = 1, b->shape[0] = d, b->offset = off, b->numel = (size_t)d, b->kind = TENSOR_BIAS;
        off += b->numel;
    }
    return l;
}

tlm_lens *lens_create(const tlm_model *m) {
    tlm_lens *l = lens_alloc(m->cfg.n_layers, m->cfg.d_model, m->cfg.vocab_size);
    if (l) l->model_hash = model_fingerprint(m);
    return l;
}

void lens_free(tlm_lens *l) {
    if (!l) return;
    model_free(l->pm); /* (a parameter-only model: model_free frees what it has) */
    free(l);
}

static const float *lens_A(const tlm_lens *l, int k) { return l->pm->param_mem + l->pm->tensors[2 * k].offset; }
static const float *lens_b(const tlm_lens *l, int k) { return l->pm->param_mem + l->pm->tensors[2 * k + 1].offset; }

void lens_apply(const tlm_lens *l, int k, float *out, const float *h, int N) {
    const size_t n = (size_t)N * l->d;
    if (k >= l->L) {
        memcpy(out, h, n * sizeof(float));
        return;
    }
    matmul_forward(out, h, lens_A(l, k), lens_b(l, k), N, l->d, l->d); /* A h + b */
    vec_acc(out, h, n);                                                /* + h */
}

/* ---- the file ------------------------------------------------------------------------------------ */

static int meta_int(const tlm_safetensors *st, const char *path, const char *key, int want) {
    const char *v = tlm_st_metadata(st, key);
    if (!v) return tlm_error("%s: not a tuned lens of this engine: metadata \"%s\" is missing", path, key);
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (end == v || *end) return tlm_error("%s: metadata \"%s\" = \"%s\" is not an integer", path, key, v);
    if (x != want)
        return tlm_error("%s: the lens was trained for %s = %ld but the model has %d: a lens fits only the model "
                         "(shape) it was trained on",
                         path, key, x, want);
    return 0;
}

tlm_lens *lens_load(const char *path, const tlm_model *m) {
    const tlm_config *c = &m->cfg;
    tlm_safetensors *st = tlm_st_open(path);
    if (!st) return NULL;
    tlm_lens *l = NULL;
    const char *fmt = tlm_st_metadata(st, "format");
    if (!fmt || strcmp(fmt, LENS_FORMAT) != 0) {
        tlm_error("%s: not a tuned-lens file (metadata \"format\" is %s%s%s, expected \"" LENS_FORMAT "\"; "
                  "write one with tinylm lens train)",
                  path, fmt ? "\"" : "", fmt ? fmt : "missing", fmt ? "\"" : "");
        goto done;
    }
    if (meta_int(st, path, "d_model", c->d_model) || meta_int(st, path, "num_hidden_layers", c->n_layers) ||
        meta_int(st, path, "vocab_size", c->vocab_size))
        goto done;
    if (!(l = lens_create(m))) goto done;
    const char *hash = tlm_st_metadata(st, "model_hash"); /* (files written before it: shape checks only) */
    char mine[24];
    snprintf(mine, sizeof mine, "%016llx", (unsigned long long)l->model_hash);
    if (hash && strcmp(hash, mine) != 0) {
        tlm_error("%s: the lens was trained on another model (model_hash %s; this model's weights "
                  "hash to %s): a lens fits only the model it was trained on",
                  path, hash, mine);
        lens_free(l), l = NULL;
        goto done;
    }
    for (int i = 0; i < l->pm->n_tensors; i++) {
        const tensor_info *t = &l->pm->tensors[i];
        const int64_t shape[2] = {t->shape[0], t->shape[1]};
        if (tlm_st_load_f32(st, t->name, t->ndim, shape, l->pm->param_mem + t->offset)) {
            lens_free(l), l = NULL;
            goto done;
        }
        for (size_t j = 0; j < t->numel; j++)
            if (!isfinite(l->pm->param_mem[t->offset + j])) {
                tlm_error("%s: tensor '%s' holds a non-finite value at flat index %zu", path, t->name, j);
                lens_free(l), l = NULL;
                goto done;
            }
    }
    if (tlm_st_count(st) != (size_t)l->pm->n_tensors) {
        for (size_t i = 0; i < tlm_st_count(st); i++) {
            const char *name = tlm_st_at(st, i)->name;
            int known = 0;
            for (int j = 0; j < l->pm->n_tensors && !known; j++) known = !strcmp(name, l->pm->tensors[j].name);
            if (!known) {
                tlm_error("%s: unexpected tensor '%s' (a lens for %d layers holds translators.0 .. %d)", path, name,
                          c->n_layers, c->n_layers - 1);
                break;
            }
        }
        lens_free(l), l = NULL;
    }
done:
    tlm_st_close(st);
    return l;
}

int lens_save(const tlm_lens *l, const char *path, const char *model_path) {
    tlm_st_entry *e = calloc((size_t)l->pm->n_tensors, sizeof *e);
    if (!e) return tlm_error("out of memory");
    for (int i = 0; i < l->pm->n_tensors; i++) {
        const tensor_info *t = &l->pm->tensors[i];
        e[i].name = t->name, e[i].dtype = TLM_DT_F32, e[i].ndim = t->ndim;
        e[i].shape[0] = t->shape[0], e[i].shape[1] = t->shape[1];
        e[i].data = l->pm->param_mem + t->offset;
    }
    /* the model path is informative; JSON-escape the few characters that need it */
    char esc[1024];
    size_t k = 0;
    for (const char *p = model_path ? model_path : ""; *p && k + 8 < sizeof esc; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '"' || ch == '\\')
            esc[k++] = '\\', esc[k++] = (char)ch;
        else if (ch < 0x20)
            k += (size_t)snprintf(esc + k, sizeof esc - k, "\\u%04x", ch);
        else
            esc[k++] = (char)ch;
    }
    esc[k] = '\0';
    char meta[1400];
    snprintf(meta, sizeof meta,
             "{\"format\": \"" LENS_FORMAT "\", \"d_model\": \"%d\", \"num_hidden_layers\": \"%d\", "
             "\"vocab_size\": \"%d\", \"model\": \"%s\", \"model_hash\": \"%016llx\"}",
             l->d, l->L, l->V, esc, (unsigned long long)l->model_hash);
    int rc = tlm_st_write(path, e, (size_t)l->pm->n_tensors, meta);
    free(e);
    return rc;
}

/* ---- the loss and its backward ------------------------------------------------------------------ */

/* log-softmax of each row of x [N, V] into out (double accumulation) */
static void log_softmax_rows(float *out, const float *x, int N, int V) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *r = x + (size_t)n * V;
        float *o = out + (size_t)n * V;
        float mx = r[0];
        for (int v = 1; v < V; v++) mx = r[v] > mx ? r[v] : mx;
        double s = 0.0;
        for (int v = 0; v < V; v++) s += exp((double)r[v] - mx);
        const float lse = (float)(mx + log(s));
        for (int v = 0; v < V; v++) o[v] = r[v] - lse;
    }
}

int lens_kl(tlm_lens *lens, tlm_model *m, const int *tokens, int B, int T, double *kl, int grad) {
    const tlm_config *c = &m->cfg;
    const int L = c->n_layers, d = c->d_model, V = c->vocab_size, N = B * T;
    const size_t Nd = (size_t)N * d, NV = (size_t)N * V;
    if (c->final_norm && !m->p.final_norm.w) return tlm_error("tuned lens: the model has no final norm weights");
    if (grad && !lens) return tlm_error("tuned lens: no lens to differentiate");
    model_set_mode(m, MODEL_TRAIN); /* keeps every stage of the residual stream */
    /* the whole batch's head GEMM, as each stage's below: the last stage's KL is then exactly 0
     * (a batch split across the threads computes the head in parts, which rounds differently) */
    static const model_observer whole = {.needs = OBSERVE_WHOLE_BATCH};
    int frc = model_observe(m, &whole);
    if (!frc) frc = model_forward(m, tokens, NULL, B, T, NULL);
    model_unobserve(m, &whole);
    if (frc) return -1;
    const activations *A = &m->ctx->acts;
    float *logp = malloc(NV * sizeof(float)), *logq = malloc(NV * sizeof(float)), *z = malloc(NV * sizeof(float));
    float *u = malloc(Nd * sizeof(float)), *y = malloc(Nd * sizeof(float)), *du = malloc(Nd * sizeof(float));
    float *dy = malloc(Nd * sizeof(float)), *mean = malloc((size_t)N * sizeof(float));
    float *rstd = malloc((size_t)N * sizeof(float)), *dz = grad ? malloc(NV * sizeof(float)) : NULL;
    /* the head's gradient needs its weights as f32: a bf16 or quantized head is widened once per call */
    const float *head = m->p.lm_head;
    float *head32 = grad && !head ? malloc((size_t)V * d * sizeof(float)) : NULL;
    int rc = -1;
    if (!logp || !logq || !z || !u || !y || !du || !dy || !mean || !rstd || (grad && !dz) || (grad && !head && !head32)) {
        tlm_error("out of memory for the tuned lens (%d positions x %d logits)", N, V);
        goto done;
    }
    if (head32) {
        const tensor_info *t = model_find_tensor(m, c->tie_embeddings ? "embed.weight" : "lm_head.weight");
        model_tensor_f32(m, (int)(t - m->tensors), 0, V, head32);
        head = head32;
    }
    log_softmax_rows(logp, A->logits, N, V);
    const norm_acts fn = {.y = y, .mean = mean, .rstd = rstd};
    norm_params no_grad = {0};
    for (int k = 0; k <= L; k++) {
        const float *h = model_residual(A, 2 * k);
        if (lens)
            lens_apply(lens, k, u, h, N);
        else
            memcpy(u, h, Nd * sizeof(float));
        context_head_forward(m->ctx, z, NULL, &fn, u, N);
        log_softmax_rows(logq, z, N, V);
        double total = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : total)
        for (int n = 0; n < N; n++) {
            const float *lp = logp + (size_t)n * V, *lq = logq + (size_t)n * V;
            double s = 0.0;
            for (int v = 0; v < V; v++) s += exp((double)lp[v]) * ((double)lp[v] - lq[v]);
            total += s;
        }
        kl[k] = total / N;
        if (!grad || k == L) continue;
        /* d mean_n KL_n / d z = (q - p) / N, back through the soft-cap, the head, the final norm, the translator */
        const float inv = 1.0f / (float)N;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < NV; i++) dz[i] = (expf(logq[i]) - expf(logp[i])) * inv;
        if (c->final_softcap > 0.0f) {
            float *raw = logq; /* (free now) */
            memset(raw, 0, NV * sizeof(float));
            softcap_backward(raw, dz, z, NV, c->final_softcap);
            memcpy(dz, raw, NV * sizeof(float));
        }
        memset(dy, 0, Nd * sizeof(float));
        matmul_backward(dy, NULL, NULL, dz, c->final_norm ? y : u, head, N, d, V);
        if (c->final_norm)
            model_norm_backward(c, du, NULL, &no_grad, dy, &fn, &m->p.final_norm, u, N);
        else
            memcpy(du, dy, Nd * sizeof(float));
        tlm_model *pm = lens->pm;
        matmul_backward(NULL, model_grad(pm, 2 * k), model_grad(pm, 2 * k + 1), du, h, lens_A(lens, k), N, d, d);
    }
    rc = 0;
done:
    free(logp), free(logq), free(z), free(u), free(y), free(du), free(dy), free(mean), free(rstd), free(dz), free(head32);
    return rc;
}

/* ---- training and evaluation --------------------------------------------------------------------- */

int lens_eval(tlm_lens *lens, tlm_model *m, const int *tokens, size_t n_tokens, int batch, int seq, int eval_batches,
              const char *source, double *kl) {
    const int L = m->cfg.n_layers;
    dataset ds;
    if (dataset_init(&ds, tokens, n_tokens, seq, batch, eval_batches, 1, source)) return -1;
    int *in = malloc(sizeof(int) * (size_t)batch * seq), *tg = malloc(sizeof(int) * (size_t)batch * seq);
    double *one = malloc(sizeof(double) * (L + 1));
    int rc = in && tg && one ? 0 : tlm_error("out of memory");
    for (int k = 0; k <= L; k++) kl[k] = 0.0;
    for (int b = 0; !rc && b < eval_batches; b++) {
        dataset_val_batch(&ds, b, in, tg);
        rc = lens_kl(lens, m, in, batch, seq, one, 0);
        for (int k = 0; !rc && k <= L; k++) kl[k] += one[k] / eval_batches;
    }
    free(in), free(tg), free(one);
    dataset_free(&ds);
    return rc;
}

int lens_train(tlm_lens *lens, tlm_model *m, const int *tokens, size_t n_tokens, const lens_train_options *o,
               const char *source, double *kl_before, double *kl_after) {
    const int L = m->cfg.n_layers;
    if (kl_before && lens_eval(NULL, m, tokens, n_tokens, o->batch, o->seq, o->eval_batches, source, kl_before))
        return -1;
    dataset ds;
    if (dataset_init(&ds, tokens, n_tokens, o->seq, o->batch, o->eval_batches, o->seed, source)) return -1;
    optim_config oc = {.lr = o->lr,
                       .min_lr = o->lr / 10.0f,
                       .beta1 = 0.9f,
                       .beta2 = 0.999f,
                       .eps = 1e-8f,
                       .weight_decay = o->weight_decay,
                       .grad_clip = o->grad_clip,
                       .warmup_steps = o->warmup,
                       .total_steps = o->steps};
    adamw opt;
    rng_state rng;
    rng_seed(&rng, o->seed);
    int *in = malloc(sizeof(int) * (size_t)o->batch * o->seq), *tg = malloc(sizeof(int) * (size_t)o->batch * o->seq);
    double *kl = malloc(sizeof(double) * (L + 1));
    int rc = in && tg && kl ? 0 : tlm_error("out of memory"), have_opt = 0;
    if (!rc) rc = adamw_init(&opt, lens->pm, &oc), have_opt = !rc;
    for (int step = 0; !rc && step < o->steps; step++) {
        dataset_train_batch(&ds, &rng, in, tg);
        model_zero_grads(lens->pm);
        if ((rc = lens_kl(lens, m, in, o->batch, o->seq, kl, 1))) break;
        const double gnorm = grad_global_norm(lens->pm);
        if (!isfinite(gnorm)) {
            rc = tlm_error("tuned lens: step %d: the gradient is not finite", step + 1);
            break;
        }
        adamw_step(&opt, lens->pm, lr_at(&oc, step), gnorm);
        if (o->log_every > 0 && ((step + 1) % o->log_every == 0 || step + 1 == o->steps)) {
            double mean = 0.0;
            for (int k = 0; k < L; k++) mean += kl[k] / L;
            fprintf(stderr, "lens step %d/%d  training KL, mean over stages %.4f nats (stage 0 %.4f, stage %d %.4f)\n",
                    step + 1, o->steps, mean, kl[0], L - 1, kl[L - 1]);
        }
    }
    if (have_opt) adamw_free(&opt);
    if (!rc && kl_after) rc = lens_eval(lens, m, tokens, n_tokens, o->batch, o->seq, o->eval_batches, source, kl_after);
    free(in), free(tg), free(kl);
    dataset_free(&ds);
    return rc;
}
