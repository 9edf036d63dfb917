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
#include "train/sampler.h"
#include "util/error.h"
#include "util/text_escape.h"

/* escape: control bytes shown as \xHH, for a terminal (util/text_escape.h) */
static void print_piece(const tlm_tokenizer *tok, int prev, int id, FILE *out, int escape) {
    size_t len;
    const char *p = tlm_tokenizer_piece(tok, prev, id, &len);
    if (!p || !len) return;
    if (len == 1 && !strcmp(tlm_tokenizer_kind(tok), "llama2c") && !(isprint((unsigned char)p[0]) || isspace((unsigned char)p[0])))
        return;
    tlm_write_text(out, p, len, escape);
    fflush(out);
}

int generate(tlm_model *m, const tlm_tokenizer *tok, const int *prompt, int n_prompt, const gen_options *o,
             FILE *out, int *ids_out, int *n_out) {
    if (n_out) *n_out = 0;
    if (n_prompt <= 0) return tlm_error("generate: the prompt is empty and the tokenizer has no BOS token to start from");
    const tlm_config *c = &m->cfg;
    const int context = c->max_seq;
    if (n_prompt > context)
        return tlm_error("generate: the prompt has %d tokens; the model's context is %d", n_prompt, context);
    sampler s;
    if (sampler_init(&s, c->vocab_size, o->temperature, o->top_k, o->top_p, o->seed)) return -1;
    int *history = malloc(sizeof(int) * ((size_t)n_prompt + o->max_new_tokens));
    kv_cache *kv = history ? kv_cache_create(m, context) : NULL;
    if (!kv) {
        free(history);
        sampler_free(&s);
        return history ? -1 : tlm_error("out of memory");
    }
    memcpy(history, prompt, sizeof(int) * n_prompt);
    int len = n_prompt, made = 0;
    m->kv = kv;
    const int bos = tlm_tokenizer_bos(tok), eos = tlm_tokenizer_eos(tok);
    const int escape = isatty(fileno(out));
    if (prompt[0] != bos) print_piece(tok, -1, prompt[0], out, escape);
    for (int i = 1; i < n_prompt; i++) print_piece(tok, prompt[i - 1], prompt[i], out, escape);
    int rc = model_forward(m, prompt, NULL, 1, n_prompt, NULL);
    const float *logits = m->acts.logits + (size_t)(n_prompt - 1) * c->vocab_size;
    while (!rc && made < o->max_new_tokens) {
        int next = sampler_next(&s, logits);
        if (next == bos || next == eos) break;
        print_piece(tok, history[len - 1], next, out, escape);
        if (ids_out) ids_out[made] = next;
        history[len++] = next;
        if (++made == o->max_new_tokens) break;
        if (kv_cache_room(kv) > 0) {
            rc = model_forward(m, &next, NULL, 1, 1, NULL);
            logits = m->acts.logits;
        } else {
            /* the context is full: as nanoGPT does, continue from the last `context` tokens,
             * recomputed from scratch (positions restart at 0) */
            kv_cache_reset(kv);
            rc = model_forward(m, history + len - context, NULL, 1, context, NULL);
            logits = m->acts.logits + (size_t)(context - 1) * c->vocab_size;
        }
    }
    m->kv = NULL;
    kv_cache_free(kv);
    free(history);
    sampler_free(&s);
    if (n_out) *n_out = made;
    return rc;
}
