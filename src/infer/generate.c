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
#include "infer/step.h"
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
    if (gen_sampler_init(&s, c, o->temperature, o->top_k, o->top_p, o->seed)) return -1;
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
    int next = -1;
    int rc = gen_step(ctx, &s, prompt, 1, n_prompt, &next);
    st.prefill_s = tlm_now_s() - t0;
    if (tlm_profiling && !rc) { /* --profile: the prompt's ops on their own, then the decode steps' */
        fprintf(stderr, "profile of the prompt's %d tokens: %.4f ms\n", n_prompt, st.prefill_s * 1e3);
        prof_report(stderr, 1, st.prefill_s);
    }
    prof_reset();
    while (!rc && made < o->max_new_tokens) {
        /* a decode step, as run.c times it: print, one forward, sample */
        if (next == bos || next == eos) break;
        t0 = tlm_now_s();
        print_piece(tok, history[len - 1], next, out, escape);
        if (ids_out) ids_out[made] = next;
        history[len++] = next;
        if (++made == o->max_new_tokens) break;
        if (kv_cache_room(kv) > 0) {
            rc = gen_step(ctx, &s, history + len - 1, 1, 1, &next);
        } else {
            /* the context is full: as nanoGPT does, continue from the last `context` tokens,
             * recomputed from scratch (positions restart at 0) */
            kv_cache_reset(kv);
            rc = gen_step(ctx, &s, history + len - context, 1, context, &next);
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
