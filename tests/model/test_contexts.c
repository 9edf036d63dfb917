/* test_contexts.c — several contexts on one model (include/tinylm.h tlm_context_*): passes and
 * generations run from two threads at once give, bit for bit, what each gives alone; a generation
 * interleaved with hooked passes on the same model (between its steps, on the model's own context,
 * or at the same time on a context of their own) makes the same tokens, and the hooked passes the
 * same logits. In mixed precision too (bf16 products on the model's bf16 copy of its weights,
 * which no pass writes): two threads' bf16 passes at once give what each gives alone, and an
 * edit of the weights followed by tlm_params_writable is what the next bf16 pass computes with.
 * Public API only, as a library user would. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tinylm.h"

static int failures = 0, checks = 0;
static void expect(int ok, const char *what) {
    checks++;
    failures += !ok;
    printf("%-72s %s\n", what, ok ? "ok" : "FAIL");
}

enum { V = 61, MAX_NEW = 24, REPEAT = 6 };

/* ---- forward passes ---------------------------------------------------------------------------- */

typedef struct {
    const tlm_model *m;
    const int *tokens;
    int B, T;
    const float *want; /* [B, T, V] the pass alone */
    int same;          /* every repeat bit-identical to want */
} fwd_job;

static void *run_forwards(void *arg) {
    fwd_job *j = arg;
    tlm_context *ctx = tlm_context_new(j->m, 2);
    j->same = ctx != NULL;
    for (int r = 0; ctx && r < REPEAT; r++)
        j->same &= tlm_context_forward(ctx, j->tokens, NULL, j->B, j->T, NULL) == 0 &&
                   !memcmp(tlm_context_logits(ctx), j->want, sizeof(float) * j->B * j->T * V);
    tlm_context_free(ctx);
    return NULL;
}

static float *forward_alone(const tlm_model *m, const int *tokens, int B, int T) {
    tlm_context *ctx = tlm_context_new(m, 2);
    float *out = malloc(sizeof(float) * B * T * V);
    if (ctx && out && !tlm_context_forward(ctx, tokens, NULL, B, T, NULL))
        memcpy(out, tlm_context_logits(ctx), sizeof(float) * B * T * V);
    else
        free(out), out = NULL;
    tlm_context_free(ctx);
    return out;
}

/* ---- generations ------------------------------------------------------------------------------- */

/* the tokens of tlm_gen_new / tlm_gen_next (a context of the generation's own) */
static int gen_ids(tlm_model *m, const int *prompt, int n, uint64_t seed, int *ids) {
    tlm_gen *g = tlm_gen_new(m, prompt, n, MAX_NEW, 0.8f, 0, 1.0f, seed);
    int rc = g ? 0 : -1;
    for (int i = 0; !rc && i < MAX_NEW; i++) rc = tlm_gen_next(m, g, &ids[i]);
    tlm_gen_free(g);
    return rc;
}

typedef struct {
    tlm_model *m;
    const int *prompt;
    int n;
    uint64_t seed;
    int use_context; /* 1: tlm_context_generate on a context of its own; 0: tlm_gen */
    const int *want; /* [MAX_NEW] alone */
    int same;
} gen_job;

static void *run_generations(void *arg) {
    gen_job *j = arg;
    j->same = 1;
    for (int r = 0; r < REPEAT; r++) {
        int ids[MAX_NEW], n_out = 0, rc;
        if (j->use_context) {
            tlm_context *ctx = tlm_context_new(j->m, 2);
            rc = ctx ? tlm_context_generate(ctx, NULL, j->prompt, j->n, MAX_NEW, 0.8f, 0, 1.0f, j->seed, ids, &n_out)
                     : -1;
            rc |= n_out != MAX_NEW;
            tlm_context_free(ctx);
        } else {
            rc = gen_ids(j->m, j->prompt, j->n, j->seed, ids);
        }
        j->same &= rc == 0 && !memcmp(ids, j->want, sizeof ids);
    }
    return NULL;
}

/* ---- hooks: halve the stream after layer 0's attention (a rewrite the rest of the pass sees) ----- */

static int halve(void *user, int id, float *data, int ndim, const int64_t *shape, int is_grad) {
    (void)id, (void)is_grad;
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    for (size_t i = 0; i < n; i++) data[i] *= 0.5f;
    ++*(int *)user;
    return 0;
}

static unsigned char *hook_bytes(const tlm_model *m) {
    const int n = tlm_hook_count(m);
    unsigned char *fwd = calloc((size_t)n, 1);
    for (int id = 0; fwd && id < n; id++) {
        char name[96];
        if (tlm_hook_info(m, id, name, sizeof name, 1, 1, NULL, NULL) && !strcmp(name, "blocks.0.hook_resid_mid"))
            fwd[id] = 1;
    }
    return fwd;
}

typedef struct {
    const tlm_model *m;
    const unsigned char *fwd;
    const int *tokens;
    int B, T;
    const float *want; /* the hooked pass alone */
    int same, calls;
} hooked_job;

static void *run_hooked(void *arg) {
    hooked_job *j = arg;
    tlm_context *ctx = tlm_context_new(j->m, 2);
    j->same = ctx && tlm_context_set_hooks(ctx, halve, &j->calls, j->fwd, NULL) == 0;
    for (int r = 0; j->same && r < 3 * REPEAT; r++)
        j->same &= tlm_context_forward(ctx, j->tokens, NULL, j->B, j->T, NULL) == 0 &&
                   !memcmp(tlm_context_logits(ctx), j->want, sizeof(float) * j->B * j->T * V);
    tlm_context_free(ctx);
    return NULL;
}

int main(void) {
    char dir[] = "/tmp/tlm_contexts_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char cfg_path[256];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
    FILE *f = fopen(cfg_path, "w");
    if (!f) return 1;
    /* RoPE (tables a context grows), grouped-query attention, a SwiGLU FFN */
    fputs("{\"model_type\": \"tinylm\", \"vocab_size\": 61, \"hidden_size\": 32, \"num_hidden_layers\": 2,"
          " \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 48,"
          " \"max_position_embeddings\": 96}",
          f);
    fclose(f);
    tlm_model *m = tlm_create(cfg_path, 7);
    expect(m != NULL, "tlm_create");
    if (!m) return 1;

    int a_tok[2 * 40], b_tok[70];
    for (int i = 0; i < 80; i++) a_tok[i] = (i * 7 + 3) % V;
    for (int i = 0; i < 70; i++) b_tok[i] = (i * 13 + 5) % V;

    /* two contexts' forwards from two threads, each against itself alone */
    float *a_want = forward_alone(m, a_tok, 2, 40), *b_want = forward_alone(m, b_tok, 1, 70);
    expect(a_want && b_want, "a forward alone in a context of its own");
    if (!a_want || !b_want) return 1;
    expect(tlm_forward(m, a_tok, NULL, 2, 40, NULL) == 0 && !memcmp(tlm_logits(m), a_want, sizeof(float) * 80 * V),
           "the model's own context: the same logits as a new context's");
    fwd_job fa = {m, a_tok, 2, 40, a_want, 0}, fb = {m, b_tok, 1, 70, b_want, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, run_forwards, &fa);
    pthread_create(&tb, NULL, run_forwards, &fb);
    pthread_join(ta, NULL), pthread_join(tb, NULL);
    expect(fa.same && fb.same, "two threads' forwards at once: each bit-identical to it alone");

    /* two generations from two threads: tlm_context_generate and tlm_gen */
    int a_ids[MAX_NEW], b_ids[MAX_NEW], n_out = 0;
    tlm_context *alone = tlm_context_new(m, 2);
    expect(alone && tlm_context_generate(alone, NULL, a_tok, 9, MAX_NEW, 0.8f, 0, 1.0f, 11, a_ids, &n_out) == 0 &&
               n_out == MAX_NEW,
           "tlm_context_generate alone");
    tlm_context_free(alone);
    expect(gen_ids(m, b_tok, 17, 12, b_ids) == 0, "tlm_gen alone");
    int a_gen[MAX_NEW];
    expect(tlm_generate(m, NULL, a_tok, 9, MAX_NEW, 0.8f, 0, 1.0f, 11, a_gen, &n_out) == 0 && n_out == MAX_NEW &&
               !memcmp(a_gen, a_ids, sizeof a_ids),
           "tlm_generate on the model: the same tokens");
    gen_job ga = {m, a_tok, 9, 11, 1, a_ids, 0}, gb = {m, b_tok, 17, 12, 0, b_ids, 0};
    pthread_create(&ta, NULL, run_generations, &ga);
    pthread_create(&tb, NULL, run_generations, &gb);
    pthread_join(ta, NULL), pthread_join(tb, NULL);
    expect(ga.same && gb.same, "two threads' generations at once: each the tokens it makes alone");

    /* a generation interleaved with hooked passes on the model's own context, between its steps */
    unsigned char *fwd = hook_bytes(m);
    int calls = 0;
    expect(fwd && tlm_set_hooks(m, halve, &calls, fwd, NULL) == 0 && tlm_forward(m, b_tok, NULL, 1, 30, NULL) == 0 &&
               calls == 1,
           "a hooked pass alone (the hook fires once)");
    float *hooked_want = malloc(sizeof(float) * 30 * V);
    if (!hooked_want) return 1;
    memcpy(hooked_want, tlm_logits(m), sizeof(float) * 30 * V);
    tlm_set_hooks(m, NULL, NULL, NULL, NULL);
    expect(tlm_forward(m, b_tok, NULL, 1, 30, NULL) == 0 && memcmp(tlm_logits(m), hooked_want, sizeof(float) * 30 * V),
           "the hook changes the logits (a rewrite the pass goes on from)");
    tlm_gen *g = tlm_gen_new(m, b_tok, 17, MAX_NEW, 0.8f, 0, 1.0f, 12);
    int ids[MAX_NEW], rc = g ? 0 : -1, hooked_same = 1;
    for (int i = 0; !rc && i < MAX_NEW; i++) {
        rc = tlm_gen_next(m, g, &ids[i]);
        rc |= tlm_set_hooks(m, halve, &calls, fwd, NULL) || tlm_forward(m, b_tok, NULL, 1, 30, NULL);
        hooked_same &= !memcmp(tlm_logits(m), hooked_want, sizeof(float) * 30 * V);
        tlm_set_hooks(m, NULL, NULL, NULL, NULL);
    }
    tlm_gen_free(g);
    expect(rc == 0 && !memcmp(ids, b_ids, sizeof ids), "generation with hooked passes between its steps: same tokens");
    expect(hooked_same, "... and each hooked pass the logits it has alone");

    /* the same at once: a hooked context on one thread, generations on another */
    hooked_job h = {m, fwd, b_tok, 1, 30, hooked_want, 0, 0};
    gb.same = 0;
    pthread_create(&ta, NULL, run_hooked, &h);
    pthread_create(&tb, NULL, run_generations, &gb);
    pthread_join(ta, NULL), pthread_join(tb, NULL);
    expect(h.same && h.calls == 3 * REPEAT, "hooked passes beside generations: the logits they have alone");
    expect(gb.same, "... and the generations the tokens they make alone");

    /* a context's own checks */
    expect(tlm_context_new(m, -1) == NULL && strstr(tlm_error_message(), "threads"),
           "a negative thread count is refused");
    tlm_context *hooked = tlm_context_new(m, 1);
    expect(hooked && tlm_context_set_hooks(hooked, halve, &calls, fwd, NULL) == 0 &&
               tlm_context_generate(hooked, NULL, a_tok, 9, 4, 0.8f, 0, 1.0f, 1, ids, &n_out) == -1 &&
               strstr(tlm_error_message(), "hooks"),
           "generating in a hooked context is refused, naming the hooks");
    tlm_context_free(hooked);

    /* mixed precision: the bf16 copy is made when the precision is set and when the weights change,
     * never by a pass */
    if (tlm_set_precision(m, 1) == 1) {
        float *a16 = forward_alone(m, a_tok, 2, 40), *b16 = forward_alone(m, b_tok, 1, 70);
        expect(a16 && b16 && memcmp(a16, a_want, sizeof(float) * 80 * V) != 0,
               "bf16 forwards alone (not the fp32 logits)");
        if (!a16 || !b16) return 1;
        fwd_job ha = {m, a_tok, 2, 40, a16, 0}, hb = {m, b_tok, 1, 70, b16, 0};
        pthread_create(&ta, NULL, run_forwards, &ha);
        pthread_create(&tb, NULL, run_forwards, &hb);
        pthread_join(ta, NULL), pthread_join(tb, NULL);
        expect(ha.same && hb.same, "two threads' bf16 forwards at once: each bit-identical to it alone");
        /* an edit, then the call that says so: the next bf16 pass computes with the edited weights,
         * as a model given the precision after the edit does */
        int64_t shape[2];
        int nd;
        float *w = tlm_params_writable(m) ? NULL : (float *)tlm_param(m, "layers.0.ffn.down_proj.weight", shape, &nd);
        expect(w && nd == 2, "the weights writable");
        if (!w) return 1;
        for (int64_t i = 0; i < shape[0] * shape[1]; i++) w[i] *= 3.0f;
        expect(tlm_params_writable(m) == 0, "tlm_params_writable after the edit");
        float *edited = forward_alone(m, a_tok, 2, 40);
        tlm_set_precision(m, 0);
        tlm_set_precision(m, 1); /* (a bf16 copy made from the edited weights) */
        float *fresh = forward_alone(m, a_tok, 2, 40);
        expect(edited && fresh && !memcmp(edited, fresh, sizeof(float) * 80 * V) &&
                   memcmp(edited, a16, sizeof(float) * 80 * V) != 0,
               "a weight edit is what the next bf16 pass computes with");
        free(a16), free(b16), free(edited), free(fresh);
    } else {
        printf("no bf16 products on this CPU: the mixed-precision checks skipped\n");
    }

    free(fwd), free(hooked_want), free(a_want), free(b_want);
    tlm_free(m);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) return 1;
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures != 0;
}
