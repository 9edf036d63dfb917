/* tok_gpt2.c — OpenAI GPT-2's encoder.json (byte-level string -> id) + vocab.bpe (a
 * "#version" line, then one merge "a b" per line in priority order). Encoding is byte-level
 * BPE after GPT-2's regex pre-tokenizer, like the original encoder.py. As Hugging Face's GPT-2
 * tokenizer does, the text "<|endoftext|>" is matched as that special token (the original
 * encoder.py would spell it out); it is also the EOS. There is no BOS. */
#include "tokenizer/tok_internal.h"
#include "util/error.h"
#include "util/io.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static int load_encoder(tlm_tokenizer **out, const char *path) {
    char *data;
    size_t len;
    if (!(data = read_text_file(path, &len))) return -1;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(data, len, &end, 0);
    if (!j && tlm_json_nesting_error(path, data, len)) return free(data), -1;
    free(data);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return tlm_error("%s: not a JSON object of token -> id", path);
    }
    long n = cJSON_GetArraySize(j), max_id = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, j) {
        double d = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!(d >= 0 && d < (double)n) || d != (double)(long)d) {
            cJSON_Delete(j);
            return tlm_error("%s: [\"%s\"]: id is not an integer in [0, %ld)", path, e->string, n);
        }
        if ((long)d > max_id) max_id = (long)d;
    }
    if (max_id < 0) {
        cJSON_Delete(j);
        return tlm_error("%s: the vocabulary is empty", path);
    }
    tlm_tokenizer *t = tok_new(TOK_BPE, "gpt2", (int)max_id + 1);
    *out = t;
    int rc = t ? 0 : tlm_error("%s: out of memory", path);
    cJSON_ArrayForEach(e, j) {
        if (rc) break;
        int id = (int)e->valuedouble;
        size_t l = strlen(e->string);
        if (t->form_len[id]) rc = tlm_error("%s: [\"%s\"]: id %d is used twice", path, e->string, id);
        else if (l && tok_set_form(t, id, e->string, l)) rc = tlm_error("%s: out of memory", path);
    }
    cJSON_Delete(j);
    return rc ? rc : tok_build_vocab(t, path);
}

static int load_bpe(tlm_tokenizer *t, const char *path) {
    char *data;
    size_t len;
    if (!(data = read_text_file(path, &len))) return -1;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += data[i] == '\n';
    int rc = tok_pairmap_init(&t->merges, lines) ? tlm_error("%s: out of memory", path) : 0;
    tlm_buf tmp = {0};
    int rank = 0, line_no = 0;
    for (size_t i = 0; rc == 0 && i < len;) {
        size_t e = i;
        while (e < len && data[e] != '\n') e++;
        line_no++;
        size_t l = e;
        if (l > i && data[l - 1] == '\r') l--;
        if (l > i && !(line_no == 1 && l - i >= 8 && memcmp(data + i, "#version", 8) == 0)) {
            const char *sp = memchr(data + i, ' ', l - i);
            if (!sp || sp == data + i || sp + 1 == data + l || memchr(sp + 1, ' ', (size_t)(data + l - sp - 1))) {
                rc = tlm_error("%s: line %d: expected \"a b\"", path, line_no);
                break;
            }
            rc = tok_add_merge(t, data + i, (size_t)(sp - (data + i)), sp + 1, (size_t)(data + l - sp - 1), rank, &tmp,
                               path, rank);
            rank++;
        }
        i = e + 1;
    }
    tlm_buf_free(&tmp);
    free(data);
    return rc;
}

tlm_tokenizer *tok_load_gpt2(const char *encoder_path, const char *bpe_path) {
    tlm_tokenizer *t = NULL;
    if (load_encoder(&t, encoder_path) || load_bpe(t, bpe_path)) goto fail;
    t->pres = calloc(1, sizeof *t->pres);
    if (!t->pres) goto oom;
    t->n_pres = 1;
    t->pres[0].type = PRE_BYTELEVEL;
    t->pres[0].re = tok_regex_compile(tok_gpt2_pattern, strlen(tok_gpt2_pattern), 0, encoder_path);
    if (!t->pres[0].re) goto fail;
    t->byte_level = 1;
    tok_setup_byte_ids(t);
    int eot = tok_strmap_get(&t->vocab, "<|endoftext|>", 13);
    if (eot >= 0) {
        t->added = calloc(1, sizeof *t->added);
        if (!t->added || !(t->added[0].content = strdup("<|endoftext|>"))) goto oom;
        t->n_added = 1;
        t->added[0].len = 13;
        t->added[0].id = eot;
        t->added[0].special = 1;
        t->eos = eot;
    }
    if (tok_bytelevel_texts(t, encoder_path)) goto fail;
    t->strip_bytes_too = 1;
    return t;
oom:
    tlm_error("%s: out of memory", encoder_path);
fail:
    tlm_tokenizer_free(t);
    return NULL;
}
