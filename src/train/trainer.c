/* trainer.c — the training step, top to bottom:
 *
 *   for step in [start, steps):
 *       zero grads
 *       for micro in [0, accum):  batch <- data; loss += forward(batch); backward(1/accum)
 *       stop if loss or gradient is not finite (the last checkpoint stays)
 *       lr <- schedule(step); clip; AdamW
 *       every eval_every: validation loss on fixed batches
 *       metrics.jsonl, progress line; every save_every (and on SIGINT/SIGTERM): checkpoint
 *
 * Under mpirun (train/dist.h) each of the N ranks runs this same loop on 1/N of every global
 * batch (the batch, its order and the data are the same for any N): the gradients (and the
 * loss) are summed over the ranks before clipping, so every rank applies the same update —
 * or, with ZeRO-1, updates its shard of the parameters and gathers the others. Rank 0 alone
 * owns the run directory: the lock, metrics, progress and checkpoints (with the optimizer
 * state gathered, so any N can resume any run).
 */
#include "trainer.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "convert/checkpoint.h"
#include "convert/family.h"
#include "tokenizer/tokenizer.h"
#include "train/attn_log.h"
#include "train/data.h"
#include "infer/generate.h"
#include "train/dist.h"
#include "train/run_dir.h"
#include "train/train_page.h"
#include "util/atomic_file.h"
#include "util/clock.h"
#include "util/cpu.h"
#include "util/machine.h"
#include "util/profile.h"
#include "util/error.h"
#include "util/finite.h"
#include "util/io.h"
#include "model/context.h"
#include "model/moe.h"

/* SIGINT/SIGTERM stop a run at the next step boundary, with a checkpoint. They are blocked in
 * every thread (main blocks them before any thread exists; threads inherit the mask) and taken
 * with sigtimedwait at each step boundary: no handler ever interrupts the computation. (An
 * asynchronous handler that only set a flag aborted with "corrupted size vs. prev_size" or hung
 * in an OpenMP barrier in 3 of 200 interrupted runs here, at random points; with the signals
 * polled, 0 of 400 - tests/train/test_train.py interrupts runs at random moments.) */
static int stop_signal = 0;

void train_defer_stop_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* the stop signal waiting to be taken (SIGINT or SIGTERM), or 0 */
static int take_stop_signal(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    const struct timespec now = {0, 0};
    const int sig = sigtimedwait(&set, NULL, &now);
    return sig > 0 ? sig : 0;
}

typedef struct {
    train_options o;
    char *data_path, *out_dir, *tokenizer_kind;
    tlm_model *m;
    tlm_tokenizer *tok;
    int *tokens;
    size_t n_tokens;
    uint64_t data_hash;
    dataset data;
    adamw opt;
    rng_state rng;
    int step; /* steps completed */
    float last_val;
    double elapsed; /* seconds of training, summed over resumed sessions */
    int *inputs, *targets;
    int quiet; /* another rank failed: this one exits without a message of its own */
    FILE *metrics;
    int lock_fd; /* holds OUT/.lock for the whole run (run_lock); -1 before */
    int rank, size;  /* data parallel: this rank of N (0 of 1 without mpirun) */
    attn_log *alog;  /* --log-attn (attn_log.h), else NULL */
    int local_batch; /* rows of each global batch this rank computes */
    size_t *shard;   /* ZeRO-1: rank r updates parameters [shard[r], shard[r+1]); NULL: all */
    float *moe_count; /* a mixture of experts: rows routed to each expert of each MoE layer this step
                         [MoE layers, E] (the bias update's and the logged load's); NULL: a dense model */
} trainer;

static uint64_t fnv1a(const char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
    return h;
}

/* ---- trainer state (trainer.json) ----------------------------------------------------------- */

/* The options trainer.json saves under "options" and a resume reads back (besides the seed,
 * a decimal string, and lr_decay_steps, optional): key, type, where in train_options. */
typedef enum { SAVED_INT, SAVED_FLOAT, SAVED_BOOL } saved_type;
static const struct {
    const char *key;
    saved_type type;
    size_t offset;
} SAVED_OPTIONS[] = {
    {"steps", SAVED_INT, offsetof(train_options, steps)},
    {"batch", SAVED_INT, offsetof(train_options, batch)},
    {"seq", SAVED_INT, offsetof(train_options, seq)},
    {"accum", SAVED_INT, offsetof(train_options, accum)},
    {"eval_every", SAVED_INT, offsetof(train_options, eval_every)},
    {"eval_batches", SAVED_INT, offsetof(train_options, eval_batches)},
    {"save_every", SAVED_INT, offsetof(train_options, save_every)},
    {"log_every", SAVED_INT, offsetof(train_options, log_every)},
    {"sample_tokens", SAVED_INT, offsetof(train_options, sample_tokens)},
    {"lr", SAVED_FLOAT, offsetof(train_options, opt.lr)},
    {"min_lr", SAVED_FLOAT, offsetof(train_options, opt.min_lr)},
    {"beta1", SAVED_FLOAT, offsetof(train_options, opt.beta1)},
    {"beta2", SAVED_FLOAT, offsetof(train_options, opt.beta2)},
    {"eps", SAVED_FLOAT, offsetof(train_options, opt.eps)},
    {"weight_decay", SAVED_FLOAT, offsetof(train_options, opt.weight_decay)},
    {"grad_clip", SAVED_FLOAT, offsetof(train_options, opt.grad_clip)},
    {"warmup_steps", SAVED_INT, offsetof(train_options, opt.warmup_steps)},
    {"decay_embeddings", SAVED_BOOL, offsetof(train_options, opt.decay_embeddings)},
};
enum { N_SAVED_OPTIONS = sizeof SAVED_OPTIONS / sizeof SAVED_OPTIONS[0] };

static char *state_json(const trainer *t) {
    const train_options *o = &t->o;
    cJSON *j = cJSON_CreateObject();
    char buf[32];
    cJSON_AddNumberToObject(j, "step", t->step);
    cJSON *r = cJSON_AddArrayToObject(j, "rng");
    for (int i = 0; i < 4; i++) {
        snprintf(buf, sizeof buf, "%016llx", (unsigned long long)t->rng.s[i]);
        cJSON_AddItemToArray(r, cJSON_CreateString(buf));
    }
    snprintf(buf, sizeof buf, "%016llx", (unsigned long long)t->data_hash);
    cJSON_AddStringToObject(j, "data_hash", buf);
    cJSON_AddNumberToObject(j, "data_tokens", (double)t->n_tokens);
    cJSON_AddStringToObject(j, "data_path", t->data_path);
    cJSON_AddStringToObject(j, "tokenizer", t->tokenizer_kind);
    cJSON_AddNumberToObject(j, "last_val_loss", t->last_val);
    cJSON_AddNumberToObject(j, "elapsed", t->elapsed);
    cJSON_AddNumberToObject(j, "optimizer_steps", (double)t->opt.step);
    cJSON *op = cJSON_AddObjectToObject(j, "options");
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)o->seed);
    cJSON_AddStringToObject(op, "seed", buf);
    for (size_t i = 0; i < N_SAVED_OPTIONS; i++) {
        const void *field = (const char *)o + SAVED_OPTIONS[i].offset;
        if (SAVED_OPTIONS[i].type == SAVED_BOOL)
            cJSON_AddBoolToObject(op, SAVED_OPTIONS[i].key, *(const bool *)field);
        else
            cJSON_AddNumberToObject(op, SAVED_OPTIONS[i].key,
                                    SAVED_OPTIONS[i].type == SAVED_INT ? *(const int *)field : *(const float *)field);
    }
    cJSON_AddNumberToObject(op, "lr_decay_steps", o->opt.total_steps);
    cJSON_AddNumberToObject(op, "z_loss", o->z_loss);
    cJSON_AddNumberToObject(op, "router_aux_loss_coef", o->router_aux);
    cJSON_AddNumberToObject(op, "router_bias_update", o->router_bias_update);
    cJSON_AddNumberToObject(op, "bos_token", o->has_bos ? o->bos_token : -1);
    cJSON_AddStringToObject(op, "precision", o->precision_bf16 ? "bf16" : "fp32");
    char *s = cJSON_Print(j);
    cJSON_Delete(j);
    return s;
}

static int json_num(const cJSON *o, const char *key, const char *src, double *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(it)) return tlm_error("%s: field \"%s\" is missing or not a number", src, key);
    *out = it->valuedouble;
    return 0;
}

static int read_state(trainer *t, const char *path) {
    size_t n;
    char *text = read_text_file(path, &n);
    if (!text) return -1;
    cJSON *j = cJSON_Parse(text);
    if (!j && tlm_json_nesting_error(path, text, n)) return free(text), -1;
    free(text);
    if (!j) return tlm_error("%s: not valid JSON", path);
    int rc = -1;
    train_options *o = &t->o;
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(j, "options"), *r = cJSON_GetObjectItemCaseSensitive(j, "rng");
    const char *tk = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "tokenizer"));
    const char *hash = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "data_hash"));
    const char *seed = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(op, "seed"));
    if (!cJSON_IsObject(op) || cJSON_GetArraySize(r) != 4 || !tk || !hash || !seed) {
        tlm_error("%s: options, rng, tokenizer, data_hash or seed missing", path);
        goto done;
    }
    for (int i = 0; i < 4; i++) {
        const char *h = cJSON_GetStringValue(cJSON_GetArrayItem(r, i));
        if (!h) goto bad;
        t->rng.s[i] = strtoull(h, NULL, 16);
    }
    t->data_hash = strtoull(hash, NULL, 16);
    o->seed = strtoull(seed, NULL, 10);
    t->tokenizer_kind = strdup(tk);
    for (size_t i = 0; i < N_SAVED_OPTIONS; i++) {
        void *field = (char *)o + SAVED_OPTIONS[i].offset;
        double v = 0;
        if (SAVED_OPTIONS[i].type == SAVED_BOOL) /* (absent in runs saved before it existed: false) */
            *(bool *)field = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(op, SAVED_OPTIONS[i].key));
        else if (json_num(op, SAVED_OPTIONS[i].key, path, &v))
            goto done;
        else if (SAVED_OPTIONS[i].type == SAVED_INT) {
            if (!(fabs(v) <= 2147483647.0)) { /* ((int) of a larger double is undefined) */
                tlm_error("%s: field \"%s\" = %g is not an int", path, SAVED_OPTIONS[i].key, v);
                goto done;
            }
            *(int *)field = (int)v;
        } else if (tlm_float_from_file(v, TLM_FLOAT_ANY, path, SAVED_OPTIONS[i].key, field))
            goto done;
    }
    o->opt.total_steps = o->steps;
    double z = 0; /* (absent in runs saved before the z-loss existed: off) */
    if (cJSON_GetObjectItemCaseSensitive(op, "z_loss")) {
        if (json_num(op, "z_loss", path, &z) || tlm_float_from_file(z, TLM_FLOAT_ANY, path, "z_loss", &(float){0})) goto done;
        if (!(z >= 0)) {
            tlm_error("%s: field \"z_loss\" = %g must be >= 0", path, z);
            goto done;
        }
    }
    o->z_loss = (float)z;
    double ra = 0; /* (absent in runs saved before the load-balancing loss existed: off) */
    if (cJSON_GetObjectItemCaseSensitive(op, "router_aux_loss_coef")) {
        if (json_num(op, "router_aux_loss_coef", path, &ra) || tlm_float_from_file(ra, TLM_FLOAT_ANY, path, "router_aux_loss_coef", &(float){0})) goto done;
        if (!(ra >= 0)) {
            tlm_error("%s: field \"router_aux_loss_coef\" = %g must be >= 0", path, ra);
            goto done;
        }
    }
    o->router_aux = (float)ra;
    double rb = 0; /* (absent in runs saved before the bias update existed: off) */
    if (cJSON_GetObjectItemCaseSensitive(op, "router_bias_update")) {
        if (json_num(op, "router_bias_update", path, &rb) || tlm_float_from_file(rb, TLM_FLOAT_ANY, path, "router_bias_update", &(float){0})) goto done;
        if (!(rb >= 0)) {
            tlm_error("%s: field \"router_bias_update\" = %g must be >= 0", path, rb);
            goto done;
        }
    }
    o->router_bias_update = (float)rb;
    double bos = -1; /* (absent in runs saved before --bos-token existed: none) */
    if (cJSON_GetObjectItemCaseSensitive(op, "bos_token")) {
        if (json_num(op, "bos_token", path, &bos)) goto done;
        if (!(bos >= -1 && bos < 0x7fffffff) || bos != (int)bos) {
            tlm_error("%s: field \"bos_token\" = %g must be a token id or -1", path, bos);
            goto done;
        }
    }
    o->has_bos = bos >= 0, o->bos_token = o->has_bos ? (int)bos : 0;
    /* (absent in runs saved before mixed precision existed: fp32) */
    const cJSON *prec = cJSON_GetObjectItemCaseSensitive(op, "precision");
    if (prec && (!cJSON_IsString(prec) || (strcmp(prec->valuestring, "bf16") && strcmp(prec->valuestring, "fp32")))) {
        tlm_error("%s: field \"precision\" must be \"bf16\" or \"fp32\"", path);
        goto done;
    }
    o->precision_bf16 = prec && !strcmp(prec->valuestring, "bf16");
    /* the end of the cosine decay: the first --steps of the run, kept when a resume extends
     * it (runs saved before the field existed never were extended) */
    double decay = 0;
    if (cJSON_GetObjectItemCaseSensitive(op, "lr_decay_steps")) {
        if (json_num(op, "lr_decay_steps", path, &decay)) goto done;
        if (decay < 1 || decay > o->steps) {
            tlm_error("%s: field \"lr_decay_steps\" = %g must be in [1, steps = %d]", path, decay, o->steps);
            goto done;
        }
        o->opt.total_steps = (int)decay;
    }
    double step = 0, val = 0, elapsed = 0, opt_steps = 0;
    if (json_num(j, "step", path, &step) || json_num(j, "last_val_loss", path, &val) ||
        json_num(j, "elapsed", path, &elapsed) || json_num(j, "optimizer_steps", path, &opt_steps))
        goto done;
    t->step = (int)step, t->last_val = (float)val, t->elapsed = elapsed;
    t->opt.step = (long)opt_steps; /* set again after adamw_init */
    rc = 0;
    goto done;
bad:
    tlm_error("%s: field \"rng\" must hold 4 hex strings", path);
done:
    cJSON_Delete(j);
    return rc;
}

/* ---- what makes two runs the same run ------------------------------------------------------ */

/* One training setting as a 64-bit word (ints and bools by value, floats by their bits), so
 * that two runs - a checkpoint and a new plan, or two MPI ranks - compare setting by setting
 * and a difference can be named. */
typedef enum { ITEM_INT, ITEM_FLOAT, ITEM_U64, ITEM_TOKENIZER, ITEM_PRECISION } item_type;
typedef struct {
    const char *name; /* as on the command line: "--lr" */
    item_type type;
    uint64_t word;
} run_item;
enum { N_RUN_ITEMS = N_SAVED_OPTIONS + 10 };

/* the command-line name of a saved option ("eval_every" -> "--eval-every") */
static const char *option_flag(const char *key) {
    static const char *const FLAGS[][2] = {
        {"steps", "--steps"},          {"batch", "--batch"},
        {"seq", "--seq"},              {"accum", "--accum"},
        {"eval_every", "--eval-every"}, {"eval_batches", "--eval-batches"},
        {"save_every", "--save-every"}, {"log_every", "--log-every"},
        {"sample_tokens", "--sample"}, {"lr", "--lr"},
        {"min_lr", "--min-lr"},        {"beta1", "--beta1"},
        {"beta2", "--beta2"},          {"eps", "--eps"},
        {"weight_decay", "--weight-decay"}, {"grad_clip", "--grad-clip"},
        {"warmup_steps", "--warmup"},  {"decay_embeddings", "--decay-embeddings"}};
    for (size_t i = 0; i < sizeof FLAGS / sizeof FLAGS[0]; i++)
        if (!strcmp(FLAGS[i][0], key)) return FLAGS[i][1];
    return key;
}

static uint64_t float_word(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

/* the options of a run as items: the saved ones (trainer.json), then the seed, the z-loss, the
 * end of the cosine decay and the tokenizer; n_extra more slots stay for the caller */
static int run_items(const train_options *o, const char *tokenizer_kind, run_item *it) {
    int n = 0;
    for (size_t i = 0; i < N_SAVED_OPTIONS; i++, n++) {
        const void *field = (const char *)o + SAVED_OPTIONS[i].offset;
        it[n].name = option_flag(SAVED_OPTIONS[i].key);
        it[n].type = SAVED_OPTIONS[i].type == SAVED_FLOAT ? ITEM_FLOAT : ITEM_INT;
        it[n].word = SAVED_OPTIONS[i].type == SAVED_BOOL    ? (uint64_t) * (const bool *)field
                     : SAVED_OPTIONS[i].type == SAVED_FLOAT ? float_word(*(const float *)field)
                                                            : (uint64_t)(int64_t) * (const int *)field;
    }
    it[n++] = (run_item){"--seed", ITEM_U64, o->seed};
    it[n++] = (run_item){"--z-loss", ITEM_FLOAT, float_word(o->z_loss)};
    it[n++] = (run_item){"--router-aux-loss-coef", ITEM_FLOAT, float_word(o->router_aux)};
    it[n++] = (run_item){"--router-bias-update", ITEM_FLOAT, float_word(o->router_bias_update)};
    it[n++] = (run_item){"--bos-token (-1: none)", ITEM_INT, (uint64_t)(int64_t)(o->has_bos ? o->bos_token : -1)};
    it[n++] = (run_item){"--precision", ITEM_PRECISION, (uint64_t)(o->precision_bf16 != 0)};
    it[n++] = (run_item){"the end of the cosine decay (lr_decay_steps)", ITEM_INT, (uint64_t)(int64_t)o->opt.total_steps};
    it[n++] = (run_item){"--tokenizer", ITEM_TOKENIZER,
                         !strcmp(tokenizer_kind, "chars") ? 0u : !strcmp(tokenizer_kind, "bytes") ? 1u : 2u};
    return n;
}

/* an item's value as text: floats as the shortest decimal that reads back as the same float */
static void item_text(const run_item *it, uint64_t word, char *buf, size_t n) {
    if (it->type == ITEM_FLOAT) {
        float x;
        uint32_t b = (uint32_t)word;
        memcpy(&x, &b, sizeof x);
        for (int digits = 6; digits <= 9; digits++) {
            snprintf(buf, n, "%.*g", digits, x);
            if (strtof(buf, NULL) == x) break;
        }
    } else if (it->type == ITEM_TOKENIZER) {
        snprintf(buf, n, "%s", word == 0 ? "chars" : word == 1 ? "bytes" : "another tokenizer");
    } else if (it->type == ITEM_PRECISION) {
        snprintf(buf, n, "%s", word ? "bf16" : "fp32");
    } else if (it->type == ITEM_U64) {
        snprintf(buf, n, "%llu", (unsigned long long)word);
    } else {
        snprintf(buf, n, "%lld", (long long)(int64_t)word);
    }
}

/* The first key whose value differs between two config.json texts (both as config_to_json
 * writes them), written as "KEY = A <a_where>, B <b_where>"; 0 when they are the same. */
static int config_difference(const char *a, const char *b, const char *a_where, const char *b_where, char *out,
                             size_t n) {
    cJSON *ja = cJSON_Parse(a), *jb = cJSON_Parse(b);
    int differs = 0;
    for (int pass = 0; pass < 2 && !differs; pass++) { /* keys of a, then keys only b has */
        const cJSON *from = pass ? jb : ja, *other = pass ? ja : jb;
        for (const cJSON *it = from ? from->child : NULL; it && !differs; it = it->next) {
            const cJSON *o = cJSON_GetObjectItemCaseSensitive(other, it->string);
            if (o && cJSON_Compare(it, o, 1)) continue;
            char *va = cJSON_PrintUnformatted(pass ? o : it), *vb = cJSON_PrintUnformatted(pass ? it : o);
            snprintf(out, n, "%s = %s %s, %s %s", it->string, va ? va : "(absent)", a_where, vb ? vb : "(absent)",
                     b_where);
            free(va), free(vb);
            differs = 1;
        }
    }
    if ((!ja || !jb) && strcmp(a, b) != 0) differs = 1, snprintf(out, n, "the config differs (%s, %s)", a_where, b_where);
    cJSON_Delete(ja), cJSON_Delete(jb);
    return differs;
}

/* The config a run trains: model_config_json with the vocabulary of the data's tokenizer and,
 * when it gives none, a context of --seq positions; parsed into cfg. A vocab_size that is not
 * the tokenizer's is refused, naming both (the model would have rows no token reaches, or
 * tokens without a row). vocab <= 0: not known yet (checking a plan before the data is read;
 * the config's own vocab_size, or 1, stands in). Returns 0, or -1 + error. */
static int run_config(const char *model_config_json, int vocab, int seq, const char *data_path, tlm_config *cfg) {
    cJSON *j = cJSON_Parse(model_config_json);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return tlm_error("model config: not a JSON object");
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "vocab_size");
    if (v && vocab > 0 && !(cJSON_IsNumber(v) && v->valuedouble == vocab)) {
        char *s = cJSON_PrintUnformatted(v);
        tlm_error("model config: vocab_size = %s, but the tokenizer of %s has %d tokens (the vocabulary comes from "
                  "the data's tokenizer: leave vocab_size out, or give %d)",
                  s ? s : "?", data_path, vocab, vocab);
        free(s);
        cJSON_Delete(j);
        return -1;
    }
    if (vocab > 0 || !v) {
        cJSON_DeleteItemFromObjectCaseSensitive(j, "vocab_size");
        cJSON_AddNumberToObject(j, "vocab_size", vocab > 0 ? vocab : 1);
    }
    if (!cJSON_GetObjectItemCaseSensitive(j, "max_position_embeddings"))
        cJSON_AddNumberToObject(j, "max_position_embeddings", seq);
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    int rc = text ? config_parse(cfg, text, "model config") : tlm_error("out of memory");
    free(text);
    return rc;
}

/* ---- pieces of a run ----------------------------------------------------------------------- */

static int load_corpus(trainer *t) {
    char *text = read_text_file(t->data_path, &t->n_tokens);
    if (!text) return -1;
    if (t->n_tokens == 0) {
        free(text);
        return tlm_error("%s: the data file is empty", t->data_path);
    }
    t->data_hash = t->data_hash ? t->data_hash : fnv1a(text, t->n_tokens);
    if (fnv1a(text, t->n_tokens) != t->data_hash) {
        free(text);
        return tlm_error("%s: this is not the data file the run was trained on (its content differs)", t->data_path);
    }
    if (!t->tok) {
        if (!strcmp(t->tokenizer_kind, "bytes"))
            t->tok = tlm_tokenizer_bytes();
        else if (!strcmp(t->tokenizer_kind, "chars"))
            t->tok = tlm_tokenizer_chars(text, t->n_tokens);
        else
            tlm_error("--tokenizer \"%s\": expected \"chars\" or \"bytes\"", t->tokenizer_kind);
        if (!t->tok) {
            free(text);
            return tlm_error_prefix("%s", t->data_path);
        }
    }
    size_t n;
    int rc = tlm_tokenizer_encode(t->tok, text, t->n_tokens, 0, &t->tokens, &n);
    free(text);
    if (rc) return tlm_error_prefix("%s", t->data_path);
    t->n_tokens = n;
    return 0;
}

static int check_options(const train_options *o) {
    if (o->steps <= 0) return tlm_error("--steps %d must be positive", o->steps);
    if (o->batch <= 0 || o->seq <= 0 || o->accum <= 0)
        return tlm_error("--batch %d, --seq %d and --accum %d must be positive", o->batch, o->seq, o->accum);
    if (o->eval_every <= 0 || o->eval_batches <= 0 || o->save_every <= 0 || o->log_every <= 0)
        return tlm_error("--eval-every, --eval-batches, --save-every and --log-every must be positive");
    if (!(o->opt.lr > 0) || o->opt.min_lr < 0 || !(o->opt.beta1 >= 0 && o->opt.beta1 < 1) ||
        !(o->opt.beta2 >= 0 && o->opt.beta2 < 1) || !(o->opt.eps > 0) || o->opt.weight_decay < 0 ||
        o->opt.grad_clip < 0 || o->opt.warmup_steps < 0 || !(o->z_loss >= 0) || !(o->router_aux >= 0) ||
        !(o->router_bias_update >= 0))
        return tlm_error("optimizer settings out of range (lr > 0, min_lr >= 0, 0 <= beta < 1, eps > 0, "
                         "weight decay, clip, warmup, z-loss, router-aux-loss-coef and router-bias-update >= 0)");
    return 0;
}

static int prepare(trainer *t) {
    const train_options *o = &t->o;
    if (t->m->cfg.max_seq < o->seq)
        return tlm_error("--seq %d is longer than the model's max_position_embeddings %d", o->seq, t->m->cfg.max_seq);
    if (tlm_tokenizer_vocab_size(t->tok) > t->m->cfg.vocab_size)
        return tlm_error("the tokenizer has %d tokens but the model's vocab_size is %d",
                         tlm_tokenizer_vocab_size(t->tok), t->m->cfg.vocab_size);
    if (dataset_init(&t->data, t->tokens, t->n_tokens, o->seq, o->batch, o->eval_batches, o->seed, t->data_path))
        return -1;
    if (o->has_bos) {
        /* a BOS is a token the text never produces (else position 0 would not be marked) */
        if (o->bos_token < 0 || o->bos_token >= tlm_tokenizer_vocab_size(t->tok))
            return tlm_error("--bos-token %d: not a token of the %s tokenizer (0..%d)", o->bos_token,
                             t->tokenizer_kind, tlm_tokenizer_vocab_size(t->tok) - 1);
        size_t seen = 0;
        for (size_t i = 0; i < t->n_tokens; i++) seen += t->tokens[i] == o->bos_token;
        if (seen)
            return tlm_error("--bos-token %d occurs %zu times in %s: a BOS must be a token the text never produces "
                             "(with --tokenizer bytes, a byte the file lacks, e.g. 2 in ASCII text)",
                             o->bos_token, seen, t->data_path);
        t->data.bos = o->bos_token;
    }
    t->inputs = malloc(sizeof(int) * o->batch * o->seq);
    t->targets = malloc(sizeof(int) * o->batch * o->seq);
    if (!t->inputs || !t->targets || model_alloc_grads(t->m)) return tlm_error("out of memory");
    if (o->batch % t->size)
        return tlm_error("--batch %d does not split over %d ranks: give a batch that is a multiple of the ranks",
                         o->batch, t->size);
    t->local_batch = o->batch / t->size;
    t->m->ctx->z_loss = o->z_loss;
    if (o->router_aux > 0.0f && config_moe_layers(&t->m->cfg) == 0)
        return tlm_error("--router-aux-loss-coef %g: the model has no mixture-of-experts layer (num_experts = %d)",
                         o->router_aux, t->m->cfg.n_experts);
    if (o->router_aux > 0.0f && t->m->cfg.scoring != SCORING_SOFTMAX)
        return tlm_error("--router-aux-loss-coef %g: the load-balancing loss is defined for scoring_func \"softmax\" "
                         "(Switch / Qwen3-MoE / Mixtral); this model routes with \"%s\"",
                         o->router_aux, scoring_name(t->m->cfg.scoring));
    t->m->ctx->router_aux = o->router_aux;
    if (o->router_bias_update > 0.0f && (config_moe_layers(&t->m->cfg) == 0 || !config_router_has_bias(&t->m->cfg)))
        return tlm_error("--router-bias-update %g: DeepSeek-V3's auxiliary-loss-free balancing moves the routers' "
                         "e_score_correction_bias, which a mixture of experts has with scoring_func \"sigmoid\" only",
                         o->router_bias_update);
    if (config_moe_layers(&t->m->cfg) &&
        !(t->moe_count = calloc((size_t)config_moe_layers(&t->m->cfg) * t->m->cfg.n_experts, sizeof(float))))
        return tlm_error("out of memory");
    if (o->precision_bf16) {
        const char *why = NULL;
        const int on = model_set_mixed_bf16(t->m, 1, &why);
        if (on < 0) return -1;
        if (!on && t->rank == 0) fprintf(stderr, "--precision bf16: %s; training in fp32\n", why);
    }
    if (o->zero1 && t->size > 1) {
        if (!(t->shard = malloc(sizeof(size_t) * (t->size + 1)))) return tlm_error("out of memory");
        for (int r = 0; r <= t->size; r++) t->shard[r] = t->m->n_params * (size_t)r / (size_t)t->size;
    }
    return 0;
}

/* every rank learns whether any rank failed; a rank that did not fail itself stays quiet
 * (the one that failed says why) */
static int agree(trainer *t, int failed) {
    int any = dist_max_int(failed != 0);
    if (any && !failed) t->quiet = 1;
    return any;
}

/* Before the first step: every rank must train the same run. Rank 0 broadcasts its data (hash,
 * tokens, vocabulary), options and model config; the first rank that differs names the first
 * difference, the others stay quiet, and all stop. Unchecked, ranks started with other
 * arguments (an MPMD mpirun) corrupted memory in the first all-reduce (other sizes), hung at
 * the end (other --steps) or trained silently (another --lr, other data). Only collectives of
 * fixed size (or of rank 0's size, broadcast first) run before it. */
static int ranks_agree(trainer *t) {
    if (t->size == 1) return 0;
    run_item it[N_RUN_ITEMS];
    int n = run_items(&t->o, t->tokenizer_kind, it);
    it[n++] = (run_item){"--stop-at", ITEM_INT, (uint64_t)(int64_t)t->o.stop_at};
    it[n++] = (run_item){"--zero1", ITEM_INT, (uint64_t)t->o.zero1};
    char *cfg = config_to_json(&t->m->cfg);
    enum { HEAD = 5 };
    uint64_t mine[HEAD + N_RUN_ITEMS], root[HEAD + N_RUN_ITEMS];
    mine[0] = cfg ? strlen(cfg) : 0, mine[1] = t->data_hash, mine[2] = t->n_tokens;
    mine[3] = (uint64_t)tlm_tokenizer_vocab_size(t->tok), mine[4] = (uint64_t)n;
    for (int i = 0; i < n; i++) mine[HEAD + i] = it[i].word;
    memcpy(root, mine, sizeof root);
    dist_broadcast(root, sizeof root, 0);
    char *root_cfg = malloc(root[0] + 1); /* (rank 0's length: every rank broadcasts as many bytes) */
    if (root_cfg && t->rank == 0) memcpy(root_cfg, cfg ? cfg : "", root[0] + 1);
    if (root_cfg) dist_broadcast(root_cfg, root[0] + 1, 0);
    char what[1024] = "";
    if (!cfg || !root_cfg) {
        snprintf(what, sizeof what, "out of memory comparing the ranks' configs");
    } else if (root[1] != mine[1] || root[2] != mine[2] || root[3] != mine[3]) {
        snprintf(what, sizeof what,
                 "the data differs: --data %s holds %llu tokens here (vocab %llu, content hash %016llx), on rank 0 "
                 "%llu tokens (vocab %llu, content hash %016llx)",
                 t->data_path, (unsigned long long)mine[2], (unsigned long long)mine[3], (unsigned long long)mine[1],
                 (unsigned long long)root[2], (unsigned long long)root[3], (unsigned long long)root[1]);
    } else {
        for (int i = 0; i < n && !what[0]; i++)
            if (root[HEAD + i] != mine[HEAD + i]) {
                char a[64], b[64];
                item_text(&it[i], mine[HEAD + i], a, sizeof a);
                item_text(&it[i], root[HEAD + i], b, sizeof b);
                snprintf(what, sizeof what, "%s is %s here, %s on rank 0", it[i].name, a, b);
            }
        char diff[900];
        if (!what[0] && config_difference(cfg, root_cfg, "here", "on rank 0", diff, sizeof diff))
            snprintf(what, sizeof what, "the model config differs: %s", diff);
    }
    free(cfg), free(root_cfg);
    const int first = dist_max_int(what[0] ? t->size - t->rank : 0); /* the lowest rank that differs */
    if (!first) return 0;
    if (t->rank == t->size - first)
        tlm_error("the ranks were not started alike (every rank must run the same command on the same data): %s",
                  what);
    else
        t->quiet = 1;
    return 1;
}

/* the rows of the global batch this rank computes */
static const int *local_rows(const trainer *t, const int *batch) {
    return batch + (size_t)t->rank * t->local_batch * t->o.seq;
}

/* The mean loss over the validation batches (every rank its rows) into *out; -1 when a
 * forward fails (each rank learns it through agree()). */
static int validation_loss(trainer *t, float *out) {
    double sum = 0.0;
    int failed = 0;
    for (int k = 0; k < t->o.eval_batches && !failed; k++) {
        float loss = 0.0f;
        dataset_val_batch(&t->data, k, t->inputs, t->targets);
        failed = model_forward(t->m, local_rows(t, t->inputs), local_rows(t, t->targets), t->local_batch, t->o.seq,
                               &loss) != 0;
        sum += loss;
    }
    if (agree(t, failed)) return -1;
    *out = (float)(dist_sum_double(sum) / t->size / t->o.eval_batches);
    return 0;
}

/* Every rank calls it: with ZeRO-1 the moments are gathered to rank 0 first, so the checkpoint
 * holds the whole optimizer state whatever N saved it. Rank 0 writes. */
static int save(trainer *t) {
    adamw whole = t->opt;
    int rc = 0;
    if (t->shard) {
        const size_t n = t->m->n_params;
        whole.m = t->rank == 0 ? malloc(n * sizeof(float)) : NULL;
        whole.v = t->rank == 0 ? malloc(n * sizeof(float)) : NULL;
        rc = t->rank == 0 && (!whole.m || !whole.v) ? tlm_error("out of memory gathering the optimizer state") : 0;
        if (!agree(t, rc)) {
            dist_gather_shards(t->opt.m, whole.m, t->shard, 0);
            dist_gather_shards(t->opt.v, whole.v, t->shard, 0);
        }
        whole.lo = 0, whole.hi = n;
    }
    if (!rc && t->rank == 0) {
        char *state = state_json(t);
        rc = run_save(t->out_dir, t->step, t->m, t->tok, &whole, state);
        free(state);
    }
    if (t->shard) free(whole.m), free(whole.v);
    return agree(t, rc);
}

/* metrics.jsonl keeps the lines of steps <= keep_step (a resumed run rewrites what follows) */
static int open_metrics(trainer *t, int keep_step) {
    char *path = path_join(t->out_dir, "metrics.jsonl");
    size_t n = 0;
    char *old = keep_step > 0 && file_exists(path) ? read_text_file(path, &n) : NULL;
    size_t keep = 0;
    for (char *line = old; line && line < old + n;) {
        char *end = strchr(line, '\n');
        if (!end) break;
        cJSON *j = cJSON_ParseWithLength(line, (size_t)(end - line));
        int s = j ? (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "step")) : 1 << 30;
        cJSON_Delete(j);
        if (s > keep_step) break;
        keep = (size_t)(end + 1 - old);
        line = end + 1;
    }
    int rc = tlm_write_file_atomic(path, old ? old : "", keep);
    free(old);
    t->metrics = rc ? NULL : fopen(path, "a");
    if (!rc && !t->metrics) rc = tlm_error("%s: cannot open for appending", path);
    free(path);
    return rc;
}

static void fmt_duration(char *buf, size_t n, double s) {
    if (s >= 3600)
        snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60)
        snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else
        snprintf(buf, n, "%.0fs", s);
}

static void progress(const trainer *t, float loss, float lr, double tok_s, double step_s, int tty) {
    char eta[32], val[32] = "-";
    fmt_duration(eta, sizeof eta, step_s * (t->o.steps - t->step));
    if (t->last_val > 0) snprintf(val, sizeof val, "%.4f", t->last_val);
    if (tty) {
        int width = 24, filled = (int)((double)t->step / t->o.steps * width);
        char bar[32];
        for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
        bar[width] = '\0';
        fprintf(stderr, "\r[%s] %d/%d  loss %.4f  val %s  lr %.2e  %.0f tok/s  ETA %s   ", bar, t->step, t->o.steps,
                loss, val, lr, tok_s, eta);
    } else {
        fprintf(stderr, "step %d/%d  loss %.4f  val %s  lr %.2e  %.0f tok/s  ETA %s\n", t->step, t->o.steps, loss, val,
                lr, tok_s, eta);
    }
    fflush(stderr);
}

/* the banner's second line: what runs the arithmetic */
static void print_engine(const tlm_model *m) {
    char precision[200] = "";
    const attention_spec bf16_attention = {.bf16 = 1};
    if (m->product16)
        snprintf(precision, sizeof precision,
                 "; mixed precision: bf16 products on %s (linear layers%s), f32 weights, optimizer, norms, softmax "
                 "and loss",
                 gemm_bf16_path_name(gemm_bf16_path()),
                 attention_bf16_products(&bf16_attention) ? " and attention" : "; attention in f32");
    fprintf(stderr, "engine: %d threads, %s kernels, GEMM %s; %.1f MFLOP per token (forward + backward)%s%s\n",
            omp_get_max_threads(), tlm_isa_name(tlm_cpu_isa()), gemm_backend_name(),
            model_train_flops_per_token(&m->cfg, m->cfg.max_seq) / 1e6, precision, tlm_profiling ? "; profiling" : "");
}

/* --profile: time per op over the timed steps, and model FLOPs against this machine's FMA peak */
static void print_profile(const trainer *t, int steps, double seconds) {
    if (steps <= 0) return;
    const double step_s = seconds / steps;
    const double flops = model_train_flops_per_token(&t->m->cfg, t->o.seq) * t->o.batch * t->o.seq * t->o.accum;
    fprintf(stderr, "profile over %d steps (after 2 warm-up steps): %.2f ms per step\n", steps, step_s * 1e3);
    prof_report(stderr, steps, step_s);
    const double peak = tlm_measure_fma_gflops(0.2);
    fprintf(stderr, "model FLOPs: %.3f GFLOP per step, %.1f GFLOP/s = %.1f%% of the measured FMA peak (%.0f GFLOP/s, "
                    "%d threads, %s)\n",
            flops / 1e9, flops / step_s / 1e9, 100.0 * flops / step_s / 1e9 / peak, peak, omp_get_max_threads(),
            tlm_isa_name(tlm_cpu_isa()));
    if (t->m->product_bf16) { /* MFU against the peak of the precision in use */
        const double bf = gemm_bf16_measure_gflops(1024);
        if (bf > 0)
            fprintf(stderr, "model FLOPs in mixed precision: %.1f%% of the measured bf16 matmul peak (%.0f GFLOP/s, %s)\n",
                    100.0 * flops / step_s / 1e9 / bf, bf, gemm_bf16_path_name(gemm_bf16_path()));
    }
}

/* the gradient of the global batch: each rank's (already scaled by 1/N), summed over the ranks */
static void allreduce_gradients(trainer *t) {
    PROF_SCOPE("allreduce_gradients");
    dist_sum_floats(t->m->ctx->grad_mem, t->m->n_params);
}

/* ZeRO-1: every rank updated its shard; each gets the others' */
static void gather_parameters(trainer *t) {
    PROF_SCOPE("allgather_parameters");
    dist_allgather_shards(t->m->param_mem, t->shard);
}

/* What one optimizer step measured (the mean over the global batch). */
typedef struct {
    float loss;    /* cross-entropy */
    double z_term; /* z_loss * mean(lse^2), logged beside the loss (not added to it) */
    double aux_term; /* router_aux * the load-balancing loss, logged beside the loss (not added to it) */
    double max_load; /* a mixture of experts: the most any expert of any MoE layer got, over the uniform share */
    double gnorm;  /* the global gradient norm before clipping */
} step_stats;

/* Forward and backward over o->accum micro-batches, gradients summed over the ranks: every
 * rank draws the same global batch and computes its rows of it. -1 when a pass failed. */
static int accumulate_gradients(trainer *t, step_stats *st) {
    const train_options *o = &t->o;
    model_zero_grads(t->m);
    double loss_sum = 0.0, lse_sq_sum = 0.0, aux_sum = 0.0, gnorm = -1.0;
    const tlm_config *c = &t->m->cfg;
    if (t->moe_count) memset(t->moe_count, 0, sizeof(float) * (size_t)config_moe_layers(c) * c->n_experts);
    for (int micro = 0; micro < o->accum; micro++) {
        float loss = 0.0f;
        dataset_train_batch(&t->data, &t->rng, t->inputs, t->targets);
        int frc = model_forward(t->m, local_rows(t, t->inputs), local_rows(t, t->targets), t->local_batch, o->seq, &loss);
        if (!frc && t->alog) attn_log_after_forward(t->alog, t->m);
        /* (the last micro-batch's backward may take the gradient norm on its way: one rank's gradient
         * is the global batch's, nothing changes it before the norm) */
        const float dloss = 1.0f / ((float)o->accum * t->size);
        const int last = micro == o->accum - 1 && t->size == 1;
        if (agree(t, frc || (last ? model_backward_norm(t->m, dloss, &gnorm) : model_backward(t->m, dloss)))) return -1;
        loss_sum += loss;
        lse_sq_sum += t->m->ctx->acts.lse_sq_mean;
        aux_sum += t->m->ctx->acts.moe_aux;
        for (int l = 0, i = 0; t->moe_count && l < c->n_layers; l++) { /* (the forward's per-sequence counts) */
            if (!config_layer_is_moe(c, l)) continue;
            const float *stats = moe_layer_acts(&t->m->ctx->acts, l)->moe_stats;
            for (int b = 0; b < t->m->ctx->acts.B; b++)
                for (int e = 0; e < c->n_experts; e++)
                    t->moe_count[(size_t)i * c->n_experts + e] += stats[(size_t)b * 2 * c->n_experts + e];
            i++;
        }
    }
    /* the mean over the global batch: sums over the ranks of per-rank means / N */
    allreduce_gradients(t);
    st->loss = (float)(dist_sum_double(loss_sum) / t->size / o->accum);
    st->z_term = o->z_loss > 0.0f ? o->z_loss * dist_sum_double(lse_sq_sum) / t->size / o->accum : 0.0;
    st->aux_term = o->router_aux > 0.0f ? o->router_aux * dist_sum_double(aux_sum) / t->size / o->accum : 0.0;
    st->max_load = 0.0;
    if (t->moe_count) { /* the global batch's counts, on every rank */
        const int n = config_moe_layers(c), E = c->n_experts;
        dist_sum_floats(t->moe_count, (size_t)n * E);
        for (int i = 0; i < n; i++) {
            double sum = 0.0, mx = 0.0;
            for (int e = 0; e < E; e++) sum += t->moe_count[(size_t)i * E + e], mx = fmax(mx, t->moe_count[(size_t)i * E + e]);
            if (sum > 0) st->max_load = fmax(st->max_load, mx * E / sum);
        }
    }
    st->gnorm = gnorm >= 0.0 ? gnorm : grad_global_norm(t->m);
    return 0;
}

/* DeepSeek-V3's auxiliary-loss-free balancing (Wang et al. 2024, "Auxiliary-Loss-Free Load
 * Balancing"): after each step, every MoE layer's e_score_correction_bias b_e moves by
 * gamma * sign(mean load - load_e) (an overloaded expert's bias down, an underloaded one's up),
 * from this step's counts over the global batch (the same on every rank) */
static void router_bias_update(trainer *t) {
    const tlm_config *c = &t->m->cfg;
    const int E = c->n_experts;
    const float gamma = t->o.router_bias_update;
    for (int l = 0, i = 0; l < c->n_layers; l++) {
        if (!config_layer_is_moe(c, l)) continue;
        const float *cnt = t->moe_count + (size_t)i++ * E;
        double mean = 0.0;
        for (int e = 0; e < E; e++) mean += cnt[e] / E;
        float *b = t->m->p.layers[l].score_bias;
        for (int e = 0; e < E; e++) b[e] += cnt[e] < mean ? gamma : cnt[e] > mean ? -gamma : 0.0f;
    }
}

/* A non-finite loss or gradient norm stops the run without saving over the last checkpoint. */
static int refuse_nonfinite(const trainer *t, const step_stats *st) {
    if (isfinite(st->loss) && isfinite(st->gnorm)) return 0;
    char *kept = run_latest(t->out_dir);
    const char *what = isfinite(st->loss) ? "gradient norm" : "loss";
    const char *value = isnan(isfinite(st->loss) ? st->gnorm : st->loss) ? "NaN" : "infinite";
    if (kept)
        tlm_error("step %d: the %s is %s; stopping without saving (the last checkpoint, %s, is kept)", t->step + 1,
                  what, value, kept);
    else
        tlm_error("step %d: the %s is %s; stopping without saving (no checkpoint of this run has been saved yet, so "
                  "%s holds none to resume from)",
                  t->step + 1, what, value, t->out_dir);
    free(kept);
    return -1;
}

/* One line of metrics.jsonl (docs/training.md): numbers as %.9g, which reads back as the same
 * float. Rank 0 only. */
static void write_metrics(trainer *t, const step_stats *st, int evaluated, float lr, double tokens_per_s) {
    FILE *f = t->metrics;
    fprintf(f, "{\"step\": %d, \"loss\": %.9g", t->step, st->loss);
    if (evaluated) fprintf(f, ", \"val_loss\": %.9g", t->last_val);
    if (t->o.z_loss > 0.0f) fprintf(f, ", \"z_loss\": %.9g", st->z_term);
    if (t->o.router_aux > 0.0f) fprintf(f, ", \"router_aux_loss\": %.9g", st->aux_term);
    if (t->moe_count) fprintf(f, ", \"expert_load_max\": %.9g", st->max_load);
    fprintf(f, ", \"lr\": %.9g, \"grad_norm\": %.9g, \"tokens_per_s\": %.1f, \"elapsed\": %.3f", lr, st->gnorm,
            tokens_per_s, t->elapsed);
    if (t->alog) attn_log_write(t->alog, t->m, f);
    fputs("}\n", f);
    fflush(f);
}

/* --html: the run's page from its metrics.jsonl (rank 0). A live write that fails is reported once
 * and the run goes on (the page is a view; the run's own files are what it writes); the last write's
 * failure is the run's error. */
static int write_page(trainer *t, const char *status, int live) {
    static int warned = 0;
    char *metrics = path_join(t->out_dir, "metrics.jsonl");
    int rc = metrics ? train_page_write(t->o.html, metrics, t->out_dir, t->o.steps, status, live) : -1;
    free(metrics);
    if (rc && live) {
        if (!warned) fprintf(stderr, "tinylm train: --html: %s (the run goes on)\n", tlm_last_error());
        warned = 1;
        return 0;
    }
    return rc;
}

static int train_loop(trainer *t) {
    train_options *o = &t->o;
    const int tty = isatty(STDERR_FILENO);
    train_defer_stop_signals(); /* (main did it already for the program: this covers other callers' later threads) */
    stop_signal = 0;
    int rc = 0;
    const double tokens_per_step = (double)o->batch * o->seq * o->accum;
    double session_start = tlm_now_s(), elapsed_before = t->elapsed;
    const int first_step = t->step;
    int profiled_steps = 0;
    double profiled_s = 0;
    if (o->log_attn && t->rank == 0 && !t->alog && !(t->alog = attn_log_new(t->m))) {
        rc = tlm_error("--log-attn: out of memory");
        goto out;
    }
    if (t->alog && attn_log_attach(t->m)) {
        rc = -1;
        goto out;
    }
    while (t->step < o->steps) {
        if (t->alog) attn_log_reset(t->alog);
        if (tlm_profiling && t->step == first_step + 2) prof_reset(); /* warm-up steps excluded */
        double t0 = tlm_now_s();
        step_stats st;
        if (accumulate_gradients(t, &st) || refuse_nonfinite(t, &st)) {
            rc = 1;
            goto out;
        }
        float lr = lr_at(&o->opt, t->step);
        /* (the bf16 copy of the weights rounded, the gradient cleared in AdamW's pass when nothing
         * changes the weights after it) */
        if (t->shard || o->router_bias_update > 0.0f)
            adamw_step(&t->opt, t->m, lr, st.gnorm);
        else
            adamw_step_fused(&t->opt, t->m, lr, st.gnorm);
        if (t->shard) gather_parameters(t);
        if (o->router_bias_update > 0.0f) router_bias_update(t);
        if (t->shard || o->router_bias_update > 0.0f) model_weights_changed(t->m); /* (the fused step made it) */
        t->step++;
        double step_s = tlm_now_s() - t0;
        if (t->step > first_step + 2) profiled_steps++, profiled_s += step_s;
        int evaluated = t->step % o->eval_every == 0 || t->step == o->steps;
        if (evaluated) { /* (not part of the profiled step) */
            const int profiling = tlm_profiling;
            tlm_profiling = 0;
            int vrc = validation_loss(t, &t->last_val);
            tlm_profiling = profiling;
            if (vrc) {
                rc = 1;
                goto out;
            }
        }
        t->elapsed = elapsed_before + (tlm_now_s() - session_start);
        if (t->rank == 0) {
            write_metrics(t, &st, evaluated, lr, tokens_per_step / step_s);
            if (tty || t->step % o->log_every == 0 || evaluated || t->step == o->steps)
                progress(t, st.loss, lr, tokens_per_step / step_s, t->elapsed / t->step, tty);
            if (o->html && evaluated && t->step < o->steps) write_page(t, "training", 1);
        }
        /* a signal may reach the ranks at different steps: all stop at the first rank's */
        if (!stop_signal) stop_signal = take_stop_signal();
        stop_signal = dist_max_int(stop_signal);
        int stop_here = stop_signal || (o->stop_at > 0 && t->step == o->stop_at);
        if (t->step % o->save_every == 0 || t->step == o->steps || stop_here) {
            if (save(t)) {
                rc = 1;
                goto out;
            }
        }
        if (stop_here) {
            if (tty && t->rank == 0) fputc('\n', stderr);
            if (t->rank == 0)
                fprintf(stderr,
                        "stopped after step %d%s; checkpoint saved. Continue with: tinylm train --resume %s --data %s\n",
                        t->step, stop_signal ? " (signal)" : "", t->out_dir, t->data_path);
            rc = stop_signal == SIGTERM ? 143 : stop_signal ? 130 : 0;
            goto out;
        }
    }
    if (t->rank != 0) goto out;
    if (tty) fputc('\n', stderr);
    fprintf(stderr, "done: %d steps, validation loss %.4f, %.1f s; model in %s\n", t->step, t->last_val, t->elapsed,
            t->out_dir);
    if (tlm_profiling) print_profile(t, profiled_steps, profiled_s);
    if (o->sample_tokens > 0) {
        int bos = tlm_tokenizer_bos(t->tok), start = bos >= 0 ? bos : t->tokens[0];
        gen_options g = {.max_new_tokens = o->sample_tokens, .temperature = 0.8f, .seed = o->seed};
        printf("\n--- sample (temperature 0.8) ---\n");
        if (generate(t->m->ctx, t->tok, &start, 1, &g, stdout, NULL, NULL, NULL)) rc = 1;
        printf("\n");
    }
out:
    if (o->html && t->rank == 0) {
        const char *status = rc == 0 && t->step >= o->steps ? "finished"
                             : rc == 0 || rc == 130 || rc == 143 ? "stopped"
                                                                   : "failed";
        /* the run's own error is the one its caller reports: kept across the page's write */
        char why[512];
        snprintf(why, sizeof why, "%s", tlm_last_error());
        if (write_page(t, status, 0) && rc == 0) rc = 1, fprintf(stderr, "tinylm train: %s\n", tlm_last_error());
        else if (rc != 0 && why[0]) tlm_error("%s", why);
    }
    while (take_stop_signal()) {
    } /* (a second Ctrl-C during the save: already answered) */
    return rc;
}

static void trainer_free(trainer *t) {
    free(t->shard);
    attn_log_free(t->alog);
    if (t->metrics) fclose(t->metrics);
    if (t->lock_fd >= 0) close(t->lock_fd);
    dataset_free(&t->data);
    adamw_free(&t->opt);
    model_free(t->m);
    tlm_tokenizer_free(t->tok);
    free(t->tokens), free(t->inputs), free(t->targets), free(t->moe_count);
    free(t->data_path), free(t->out_dir), free(t->tokenizer_kind);
}

static int finish(trainer *t, int rc) {
    if (rc == 1 && !t->quiet) {
        if (t->size > 1)
            fprintf(stderr, "tinylm train (rank %d of %d): %s\n", t->rank, t->size, tlm_last_error());
        else
            fprintf(stderr, "tinylm train: %s\n", tlm_last_error());
    }
    trainer_free(t);
    return rc;
}

/* The learning-rate schedule in one line. A resume that extends the run keeps the cosine's
 * end where it was (nanoGPT's lr_decay_iters) and trains the extra steps at min-lr. */
static void print_schedule(const train_options *o) {
    const optim_config *c = &o->opt;
    fprintf(stderr, "learning rate: warmup %d steps to %g, cosine to %g at step %d", c->warmup_steps, c->lr, c->min_lr,
            c->total_steps);
    if (o->steps > c->total_steps) fprintf(stderr, ", then constant %g to step %d", c->min_lr, o->steps);
    fprintf(stderr, "\n");
}

/* Rank 0 owns the run directory: the lock first (another process may be creating a run there
 * right now), then the check that it holds no run yet, and the cleanup of stale temp folders. */
static int claim_new_run(trainer *t) {
    if (t->rank != 0) return 0;
    if ((t->lock_fd = run_lock(t->out_dir)) < 0) return -1;
    char *latest = run_latest(t->out_dir);
    if (latest) {
        free(latest);
        return tlm_error("%s already holds a training run; continue it with --resume %s, or choose another --out",
                         t->out_dir, t->out_dir);
    }
    run_remove_stale(t->out_dir);
    return 0;
}

/* the banner's data-parallel line (rank 0) */
static void print_ranks(const trainer *t) {
    if (t->size == 1 || t->rank != 0) return;
    fprintf(stderr, "data parallel: %d ranks x %d threads, %d of the %d rows of each batch per rank", t->size,
            omp_get_max_threads(), t->local_batch, t->o.batch);
    if (t->shard)
        fprintf(stderr, "; ZeRO-1: %.1f MiB of AdamW moments per rank instead of %.1f",
                2.0 * (t->shard[1] - t->shard[0]) * sizeof(float) / 1048576.0,
                2.0 * t->m->n_params * sizeof(float) / 1048576.0);
    fprintf(stderr, "\n");
}

int train_new(const char *model_config_json, const train_options *o) {
    trainer t = {.o = *o, .lock_fd = -1, .rank = dist_rank(), .size = dist_size()};
    t.data_path = strdup(o->data_path);
    t.out_dir = strdup(o->out_dir);
    t.tokenizer_kind = strdup(o->tokenizer);
    t.o.opt.total_steps = o->steps;
    tlm_config cfg;
    if (agree(&t, check_options(&t.o) || load_corpus(&t)) || agree(&t, claim_new_run(&t))) return finish(&t, 1);
    /* the vocabulary comes from the tokenizer (a config's own vocab_size must be the same) */
    int rc = run_config(model_config_json, tlm_tokenizer_vocab_size(t.tok), o->seq, t.data_path, &cfg);
    if (agree(&t, rc || !(t.m = model_create(&cfg))) || ranks_agree(&t)) return finish(&t, 1);
    model_init_weights(t.m, o->seed);
    rng_seed(&t.rng, o->seed);
    rc = prepare(&t) || adamw_init(&t.opt, t.m, &t.o.opt) ||
         (t.shard && adamw_shard(&t.opt, t.shard[t.rank], t.shard[t.rank + 1])) ||
         (t.rank == 0 && (make_dirs(o->out_dir) || open_metrics(&t, 0)));
    if (agree(&t, rc)) return finish(&t, 1);
    if (t.rank == 0) {
        fprintf(stderr, "training %zu parameters on %zu tokens (%s tokenizer, vocab %d) for %d steps -> %s\n",
                t.m->n_params, t.n_tokens, t.tokenizer_kind, t.m->cfg.vocab_size, o->steps, o->out_dir);
        print_schedule(&t.o);
        print_engine(t.m);
        print_ranks(&t);
    }
    return finish(&t, train_loop(&t));
}

int train_resume(const char *out_dir, const char *data_path, const resume_options *r) {
    const int steps = r->steps, stop_at = r->stop_at;
    trainer t = {.lock_fd = -1, .rank = dist_rank(), .size = dist_size()};
    t.out_dir = strdup(out_dir);
    /* a run directory (a latest checkpoint, or the lock of a run being made), checked before a
     * lock file is made in it: a missing path, a dangling or looping latest, or a directory that
     * is no run say so and leave it as it was */
    char *lock = path_join(out_dir, ".lock");
    const int locked = lock && is_directory(out_dir) && file_exists(lock);
    free(lock);
    char *resolved = locked ? NULL : model_dir_resolve(out_dir);
    const int is_run = locked || (resolved && strcmp(resolved, out_dir) != 0), found = resolved != NULL;
    free(resolved);
    int claimed = !is_run && !found ? -1
                  : !is_run ? tlm_error("%s: not a training run directory (it has no latest checkpoint link)", out_dir)
                            : 0;
    if (!claimed && t.rank == 0) { /* rank 0 owns the run directory */
        claimed = (t.lock_fd = run_lock(out_dir)) < 0 ? -1 : 0;
        if (!claimed) run_remove_stale(out_dir);
    }
    if (agree(&t, claimed)) return finish(&t, 1);
    char *ckpt = run_latest(out_dir);
    if (agree(&t, !ckpt)) return free(ckpt), finish(&t, 1);
    char *state_path = path_join(ckpt, "trainer.json"), *tok_path = path_join(ckpt, TLM_TOKENIZER_OWN_FILE);
    int rc = read_state(&t, state_path);
    const int planned = t.o.steps;
    if (!rc && steps > 0) {
        if (steps <= t.step)
            rc = tlm_error("--steps %d: the run in %s is already at step %d (%s); give a larger --steps to continue it",
                           steps, out_dir, t.step, state_path);
        /* a resume keeps the cosine decay's end (o.opt.total_steps, see print_schedule): a last
         * step before it would save a schedule that ends after the run (no loader accepts that) */
        else if (steps < t.o.opt.total_steps)
            rc = tlm_error("--steps %d: the learning-rate schedule of the run in %s ends at step %d (its cosine decay, "
                           "which a resume keeps), so a resume can end the run there or later, not before; to stop "
                           "earlier, add --stop-at %d instead (it saves a checkpoint there, and the run can continue)",
                           steps, out_dir, t.o.opt.total_steps, steps);
        t.o.steps = steps;
    }
    if (!rc && stop_at > 0 && stop_at <= t.step)
        rc = tlm_error("--stop-at %d: the run in %s is already at step %d", stop_at, out_dir, t.step);
    t.o.stop_at = stop_at;
    long opt_steps = t.opt.step;
    t.o.zero1 = r->zero1; /* (properties of this session, not of the run) */
    t.o.log_attn = r->log_attn;
    t.o.html = r->html;
    if (!rc) {
        t.data_path = strdup(data_path);
        t.tok = tlm_tokenizer_load(tok_path);
        t.m = t.tok ? model_load_dir(ckpt) : NULL;
        /* the checkpoint holds every moment: each rank keeps its shard of them */
        rc = !t.m || load_corpus(&t) || prepare(&t) || adamw_init(&t.opt, t.m, &t.o.opt) ||
             run_load_optimizer(ckpt, &t.opt, t.m->n_params) ||
             (t.shard && adamw_shard(&t.opt, t.shard[t.rank], t.shard[t.rank + 1])) ||
             (t.rank == 0 && open_metrics(&t, t.step));
    }
    free(state_path), free(tok_path), free(ckpt);
    if (agree(&t, rc) || ranks_agree(&t)) return finish(&t, 1);
    t.opt.step = opt_steps;
    if (t.rank == 0) {
        if (t.o.steps != planned)
            fprintf(stderr, "resuming %s at step %d, now to step %d (the run was planned for %d)\n", out_dir, t.step,
                    t.o.steps, planned);
        else
            fprintf(stderr, "resuming %s at step %d of %d\n", out_dir, t.step, t.o.steps);
        print_schedule(&t.o);
        print_engine(t.m);
        print_ranks(&t);
    }
    return finish(&t, train_loop(&t));
}

/* ---- a planned run against the one on disk (tinylm sweep) ---------------------------------- */

int train_data_hash(const char *data_path, uint64_t *hash) {
    size_t n;
    char *text = read_text_file(data_path, &n);
    if (!text) return -1;
    *hash = fnv1a(text, n);
    free(text);
    return 0;
}

int train_check_plan(const char *model_config_json, const train_options *o) {
    tlm_config cfg;
    if (check_options(o)) return -1;
    if (strcmp(o->tokenizer, "chars") != 0 && strcmp(o->tokenizer, "bytes") != 0)
        return tlm_error("--tokenizer \"%s\": expected \"chars\" or \"bytes\"", o->tokenizer);
    return run_config(model_config_json, 0, o->seq, o->data_path, &cfg);
}

int train_run_matches(const char *out_dir, const char *model_config_json, const train_options *o, uint64_t data_hash,
                      int *step, int *steps) {
    char *ckpt = run_latest(out_dir);
    if (!ckpt) return -1;
    trainer t = {.lock_fd = -1};
    char *state = path_join(ckpt, "trainer.json"), *config = path_join(ckpt, "config.json");
    char *saved_json = NULL, *planned_json = NULL, what[1024] = "";
    tlm_config saved, planned;
    int rc = read_state(&t, state) || config_load(&saved, config) ? -1 : 0;
    if (!rc && t.data_hash != data_hash)
        snprintf(what, sizeof what, "it was trained on other data (content hash %016llx; %s has %016llx)",
                 (unsigned long long)t.data_hash, o->data_path, (unsigned long long)data_hash);
    if (!rc && !what[0]) {
        train_options plan = *o;
        plan.opt.total_steps = plan.steps; /* (a new run's decay ends at its last step) */
        run_item a[N_RUN_ITEMS], b[N_RUN_ITEMS];
        const int n = run_items(&t.o, t.tokenizer_kind, a);
        run_items(&plan, plan.tokenizer, b);
        for (int i = 0; i < n && !what[0]; i++)
            if (a[i].word != b[i].word) {
                char va[64], vb[64];
                item_text(&a[i], a[i].word, va, sizeof va);
                item_text(&b[i], b[i].word, vb, sizeof vb);
                snprintf(what, sizeof what, "%s is %s in the run, %s now", a[i].name, va, vb);
            }
    }
    if (!rc && !what[0]) {
        /* the same data and tokenizer: the same vocabulary as the checkpoint's */
        if (run_config(model_config_json, saved.vocab_size, o->seq, o->data_path, &planned))
            snprintf(what, sizeof what, "%s", tlm_last_error());
        else if (!(saved_json = config_to_json(&saved)) || !(planned_json = config_to_json(&planned)))
            rc = tlm_error("out of memory");
        else {
            char diff[900];
            if (config_difference(saved_json, planned_json, "in the run", "now", diff, sizeof diff))
                snprintf(what, sizeof what, "the model config differs: %s", diff);
        }
    }
    if (!rc) *step = t.step, *steps = t.o.steps;
    if (!rc && what[0]) rc = 1, tlm_error("%s: %s", out_dir, what);
    free(saved_json), free(planned_json), free(state), free(config), free(ckpt), free(t.tokenizer_kind);
    return rc;
}
