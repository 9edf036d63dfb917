/* generate.c — prompt -> KV-cache prefill -> sample, decode and print token by token.
 * Output follows llama2.c's run.c: each token is printed as the piece it adds after the
 * previous token, and for llama2.c vocabularies single unprintable bytes are skipped
 * (run.c's safe_printf), so its reference texts can be compared byte for byte. On a terminal,
 * control bytes are printed escaped (\x1b); to a pipe or file they are written as they are. */
#include "generate.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/decode.h"
#include "infer/sampler.h"
#include "util/clock.h"
#include "util/profile.h"
#include "util/error.h"
#include "util/text_escape.h"
#include "model/context.h"

/* escape: control bytes shown as \xHH, for a terminal (util/text_escape.h) */
static void print_piece(const tlm_tokenizer *tok, int prev, int id, FILE *out, int escape) {
    if (!tok || !out) return; /* (ids only) */
    size_t len;
    const char *p = tlm_tokenizer_piece(tok, prev, id, &len);
    if (!p || !len) return;
    if (len == 1 && !strcmp(tlm_tokenizer_kind(tok), "llama2c") && !(isprint((unsigned char)p[0]) || isspace((unsigned char)p[0])))
        return;
    tlm_write_text(out, p, len, escape);
    fflush(out);
}

/* Feeds n tokens through the KV cache in chunks, so that the activations hold one chunk
 * (a 2048-token prompt needs the memory of PREFILL_CHUNK tokens, not of 2048) */
enum { PREFILL_CHUNK = 256 };
static int prefill(tlm_context *ctx, const int *ids, int n) {
    int rc = 0;
    for (int i = 0; i < n && !rc; i += PREFILL_CHUNK)
        rc = context_forward(ctx, ids + i, NULL, 1, n - i < PREFILL_CHUNK ? n - i : PREFILL_CHUNK, NULL);
    return rc;
}

int generate(tlm_context *ctx, const tlm_tokenizer *tok, const int *prompt, int n_prompt, const gen_options *o,
             FILE *out, int *ids_out, int *n_out, gen_stats *stats) {
    const tlm_model *m = ctx->m;
    if (n_out) *n_out = 0;
    if (ctx->kv) return tlm_error("generate: the context is generating already");
    gen_stats st = {.n_prompt = n_prompt};
    if (n_prompt <= 0) return tlm_error("generate: the prompt is empty and the tokenizer has no BOS token to start from");
    const tlm_config *c = &m->cfg;
    const int context = c->max_seq;
    if (n_prompt > context)
        return tlm_error("generate: the prompt has %d tokens; the model's context is %d", n_prompt, context);
    sampler s;
    if (sampler_init(&s, c->vocab_size, o->temperature, o->top_k, o->top_p, o->seed)) return -1;
    /* a llama2.c checkpoint samples run.c's stream for a seed, so its outputs can be compared */
    if (!strcmp(c->model_type, "llama2c")) sampler_seed_runc(&s, o->seed);
    int *history = malloc(sizeof(int) * ((size_t)n_prompt + o->max_new_tokens));
    /* room for the whole generation, or the context when it is longer */
    const long want = (long)n_prompt + o->max_new_tokens;
    const double t_setup = tlm_now_s();
    kv_cache *kv = history ? kv_cache_create(m, want < context ? (int)want : context) : NULL;
    st.setup_s = tlm_now_s() - t_setup;
    st.kv_bytes = kv ? sizeof(float) * kv_cache_floats(c, want < context ? (int)want : context) : 0;
    if (!kv || (o->mla_expanded && kv_cache_set_mla_absorbed(kv, m, 0))) {
        kv_cache_free(kv);
        free(history);
        sampler_free(&s);
        return history ? -1 : tlm_error("out of memory");
    }
    memcpy(history, prompt, sizeof(int) * n_prompt);
    int len = n_prompt, made = 0;
    ctx->kv = kv;
    const int bos = tok ? tlm_tokenizer_bos(tok) : -1, eos = tok ? tlm_tokenizer_eos(tok) : -1;
    const int escape = out && isatty(fileno(out));
    if (prompt[0] != bos) print_piece(tok, -1, prompt[0], out, escape);
    for (int i = 1; i < n_prompt; i++) print_piece(tok, prompt[i - 1], prompt[i], out, escape);
    double t0 = tlm_now_s();
    int rc = prefill(ctx, prompt, n_prompt);
    const float *logits = context_last_logits(ctx);
    st.prefill_s = tlm_now_s() - t0;
    if (tlm_profiling && !rc) { /* --profile: the prompt's ops on their own, then the decode steps' */
        fprintf(stderr, "profile of the prompt's %d tokens: %.4f ms\n", n_prompt, st.prefill_s * 1e3);
        prof_report(stderr, 1, st.prefill_s);
    }
    prof_reset();
    while (!rc && made < o->max_new_tokens) {
        /* a decode step, as run.c times it: sample, print, one forward */
        t0 = tlm_now_s();
        int next = sampler_next(&s, logits);
        if (next == bos || next == eos) break;
        print_piece(tok, history[len - 1], next, out, escape);
        if (ids_out) ids_out[made] = next;
        history[len++] = next;
        if (++made == o->max_new_tokens) break;
        if (kv_cache_room(kv) > 0) { /* (one parallel region for the whole token: decode.c) */
            logits = kv_decode_step(ctx, next);
            rc = logits ? 0 : -1;
        } else {
            /* the context is full: as nanoGPT does, continue from the last `context` tokens,
             * recomputed from scratch (positions restart at 0) */
            kv_cache_reset(kv);
            rc = prefill(ctx, history + len - context, context);
            logits = context_last_logits(ctx);
        }
        st.decode_s += tlm_now_s() - t0;
        st.n_decoded++;
    }
    st.n_generated = made;
    if (stats) *stats = st;
    ctx->kv = NULL;
    kv_cache_free(kv);
    free(history);
    sampler_free(&s);
    if (n_out) *n_out = made;
    return rc;
}
