/* generate.c — prompt -> KV-cache prefill -> sample, decode and print token by token.
 * Output follows llama2.c's run.c: each token is printed as the piece it adds after the
 * previous token, and for llama2.c vocabularies single unprintable bytes are skipped
 * (run.c's safe_printf), so its reference texts can be compared byte for byte. */
#include "generate.h"

#include <ctype.h>
#include <string.h>

#include "model/decode.h"
#include "train/sampler.h"
#include "util/error.h"

static void print_piece(const tlm_tokenizer *tok, int prev, int id, FILE *out) {
    size_t len;
    const char *p = tlm_tokenizer_piece(tok, prev, id, &len);
    if (!p || !len) return;
    if (len == 1 && !strcmp(tlm_tokenizer_kind(tok), "llama2c") && !(isprint((unsigned char)p[0]) || isspace((unsigned char)p[0])))
        return;
    fwrite(p, 1, len, out);
    fflush(out);
}

int generate(tlm_model *m, const tlm_tokenizer *tok, const int *prompt, int n_prompt, const gen_options *o,
             FILE *out, int *ids_out, int *n_out) {
    if (n_out) *n_out = 0;
    if (n_prompt <= 0) return tlm_error("generate: the prompt is empty and the tokenizer has no BOS token to start from");
    const tlm_config *c = &m->cfg;
    if (n_prompt > c->max_seq)
        return tlm_error("generate: the prompt has %d tokens; the model's context is %d", n_prompt, c->max_seq);
    /* `total` positions exist at the end; the last sampled token is never fed back, so the
     * model sees total - 1 positions, at most its context length */
    int total = n_prompt + o->max_new_tokens;
    if (total - 1 > c->max_seq) total = c->max_seq + 1;
    sampler s;
    if (sampler_init(&s, c->vocab_size, o->temperature, o->top_k, o->top_p, o->seed)) return -1;
    kv_cache *kv = kv_cache_create(m, total - 1 > n_prompt ? total - 1 : n_prompt);
    if (!kv) return sampler_free(&s), -1;
    m->kv = kv;
    const int bos = tlm_tokenizer_bos(tok), eos = tlm_tokenizer_eos(tok);
    if (prompt[0] != bos) print_piece(tok, -1, prompt[0], out);
    for (int i = 1; i < n_prompt; i++) print_piece(tok, prompt[i - 1], prompt[i], out);
    int rc = model_forward(m, prompt, NULL, 1, n_prompt, NULL);
    const float *logits = m->acts.logits + (size_t)(n_prompt - 1) * c->vocab_size;
    int prev = prompt[n_prompt - 1], made = 0;
    for (int pos = n_prompt; !rc && pos < total; pos++) {
        int next = sampler_next(&s, logits);
        if (next == bos || next == eos) break;
        print_piece(tok, prev, next, out);
        if (ids_out) ids_out[made] = next;
        made++;
        prev = next;
        if (pos + 1 < total) {
            rc = model_forward(m, &next, NULL, 1, 1, NULL);
            logits = m->acts.logits;
        }
    }
    m->kv = NULL;
    kv_cache_free(kv);
    sampler_free(&s);
    if (n_out) *n_out = made;
    return rc;
}
