/* tokenizer.c — the public tokenizer API: finding and loading a tokenizer file, dispatching
 * encode to the kind's encoder, and decoding through the per-id decoded texts. */
#include "formats/gguf.h"
#include "tokenizer/tok_internal.h"
#include "util/error.h"
#include "util/io.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* ---- construction ---------------------------------------------------------------------------- */

tlm_tokenizer *tok_new(tok_kind kind, const char *kind_name, int vocab_size) {
    tlm_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->kind = kind;
    t->kind_name = kind_name;
    t->vocab_size = vocab_size;
    t->bos = t->eos = -1;
    t->space_id = t->unk_id = -1;
    for (int i = 0; i < 256; i++) t->byte_id[i] = t->fallback_id[i] = -1;
    size_t n = vocab_size > 0 ? (size_t)vocab_size : 1;
    t->form_off = calloc(n, sizeof *t->form_off);
    t->text_off = calloc(n, sizeof *t->text_off);
    t->form_len = calloc(n, sizeof *t->form_len);
    t->text_len = calloc(n, sizeof *t->text_len);
    if (!t->form_off || !t->text_off || !t->form_len || !t->text_len || tlm_buf_put(&t->form_arena, "", 0) ||
        tlm_buf_put(&t->text_arena, "", 0)) {
        tlm_tokenizer_free(t);
        return NULL;
    }
    return t;
}

static int put_arena(tlm_buf *arena, const char *s, size_t n, size_t *off, uint32_t *len) {
    if (n > UINT32_MAX) return -1;
    *off = arena->len;
    *len = (uint32_t)n;
    /* keep a NUL after every string so a form can be printed in error messages */
    if (tlm_buf_put(arena, s, n) || tlm_buf_put(arena, "", 1)) return -1;
    return 0;
}

int tok_set_form(tlm_tokenizer *t, int id, const char *s, size_t n) {
    return put_arena(&t->form_arena, s, n, &t->form_off[id], &t->form_len[id]);
}

int tok_set_text(tlm_tokenizer *t, int id, const char *s, size_t n) {
    return put_arena(&t->text_arena, s, n, &t->text_off[id], &t->text_len[id]);
}

int tok_build_vocab(tlm_tokenizer *t, const char *name) {
    if (tok_strmap_init(&t->vocab, (size_t)t->vocab_size)) return tlm_error("%s: out of memory", name);
    for (int id = 0; id < t->vocab_size; id++) {
        size_t n;
        const char *s = tok_form(t, id, &n);
        if (n == 0) continue;
        if (tok_strmap_put(&t->vocab, s, n, id) < 0) return tlm_error("%s: out of memory", name);
    }
    return 0;
}

void tlm_tokenizer_free(tlm_tokenizer *t) {
    if (!t) return;
    tlm_buf_free(&t->form_arena);
    tlm_buf_free(&t->text_arena);
    tlm_buf_free(&t->piece_arena);
    free(t->piece_off), free(t->piece_len), free(t->piece_type);
    free(t->form_off);
    free(t->text_off);
    free(t->form_len);
    free(t->text_len);
    tok_strmap_free(&t->vocab);
    free(t->scores);
    tok_pairmap_free(&t->merges);
    for (int i = 0; i < t->n_norms; i++) {
        free(t->norms[i].a);
        free(t->norms[i].b);
    }
    free(t->norms);
    for (int i = 0; i < t->n_pres; i++) {
        tok_regex_free(t->pres[i].re);
        free(t->pres[i].replacement);
        free(t->pres[i].pattern);
    }
    free(t->pres);
    for (int i = 0; i < t->n_added; i++) free(t->added[i].content);
    free(t->added);
    free(t);
}

/* formats/llama2c.h (its model.h clashes with tok_internal.h's names) */
int llama2c_is_checkpoint(const void *data, size_t len);

/* ---- loading ------------------------------------------------------------------------------------ */

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static cJSON *parse_json(const char *data, size_t len, const char *name) {
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(data, len, &end, 0);
    if (!j && tlm_json_nesting_error(name, data, len)) return NULL; /* (cJSON's depth limit) */
    if (!j) {
        size_t at = end && end >= data && end <= data + len ? (size_t)(end - data) : 0;
        tlm_error("%s: not valid JSON (parse error near byte %zu)", name, at);
    }
    return j;
}

/* A JSON document already parsed: the engine's own file, a tokenizer.json, or (when
 * `dir` is given) a GPT-2 encoder.json whose vocab.bpe sits in dir. */
static tlm_tokenizer *load_json_doc(cJSON *j, const char *name, const char *dir) {
    if (!cJSON_IsObject(j)) {
        tlm_error("%s: the JSON document is not an object", name);
        return NULL;
    }
    if (cJSON_GetObjectItemCaseSensitive(j, "tinylm_tokenizer")) return tok_load_own(j, name);
    int gpt2 = dir && ends_with(name, "encoder.json"); /* its keys are tokens, "model" among them */
    if (!gpt2 && cJSON_GetObjectItemCaseSensitive(j, "model")) {
        cJSON *config = NULL;
        if (dir) {
            char *cpath = path_join(dir, "tokenizer_config.json");
            if (cpath && file_exists(cpath)) {
                char *cdata;
                size_t clen;
                if (!(cdata = read_text_file(cpath, &clen))) {
                    free(cpath);
                    return NULL;
                }
                config = parse_json(cdata, clen, cpath);
                free(cdata);
                if (!config) {
                    free(cpath);
                    return NULL;
                }
            }
            free(cpath);
        }
        tlm_tokenizer *t = tok_load_hf(j, config, name);
        cJSON_Delete(config);
        return t;
    }
    if (gpt2) {
        char *bpe = path_join(dir, "vocab.bpe");
        tlm_tokenizer *t = NULL;
        if (!bpe) tlm_error("%s: out of memory", name);
        else if (!file_exists(bpe)) tlm_error("%s: a GPT-2 encoder.json needs vocab.bpe beside it (%s not found)", name, bpe);
        else t = tok_load_gpt2(name, bpe);
        free(bpe);
        return t;
    }
    tlm_error("%s: not a tokenizer file (no \"model\" key as in tokenizer.json, no \"tinylm_tokenizer\" key)", name);
    return NULL;
}

static tlm_tokenizer *load_bytes(const char *data, size_t len, const char *name, const char *dir) {
    size_t i = 0;
    while (i < len && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t')) i++;
    int json = ends_with(name, ".json") || (!ends_with(name, ".bin") && i < len && data[i] == '{');
    if (!json) {
        tlm_tokenizer *t = tok_load_llama2c(data, len, name);
        if (!t && llama2c_is_checkpoint(data, len))
            tlm_error("%s is a llama2.c model checkpoint, not a tokenizer; give its tokenizer with --tokenizer "
                      "tok.bin", name);
        return t;
    }
    cJSON *j = parse_json(data, len, name);
    if (!j) return NULL;
    tlm_tokenizer *t = load_json_doc(j, name, dir);
    cJSON_Delete(j);
    return t;
}

static tlm_tokenizer *load_file(const char *path) {
    char *data;
    size_t len;
    if (tlm_gguf_is_file(path)) return tlm_tokenizer_load_gguf(path); /* (a model file: mapped, not read whole) */
    if (!(data = read_text_file(path, &len))) return NULL;
    char *dir = dir_of(path);
    tlm_tokenizer *t = dir ? load_bytes(data, len, path, dir) : NULL;
    if (!dir) tlm_error("%s: out of memory", path);
    free(dir);
    free(data);
    return t;
}

char *tlm_tokenizer_locate(const char *path) {
    struct stat st;
    if (!path || stat(path, &st) != 0) {
        char why[1200];
        tlm_error("%s: %s", path ? path : "(null)", path ? tlm_path_problem(path, errno, why, sizeof why) : "no path");
        return NULL;
    }
    if (!S_ISDIR(st.st_mode)) {
        char *p = strdup(path);
        if (!p) tlm_error("%s: out of memory", path);
        return p;
    }
    static const char *const candidates[] = {"tokenizer.json", TLM_TOKENIZER_OWN_FILE, "tokenizer.bin", "encoder.json"};
    for (size_t k = 0; k < sizeof candidates / sizeof *candidates; k++) {
        char *p = path_join(path, candidates[k]);
        if (!p) break;
        if (file_exists(p)) return p;
        free(p);
    }
    tlm_error("%s: no tokenizer in this directory (looked for tokenizer.json, %s, tokenizer.bin, "
              "encoder.json + vocab.bpe)", path, TLM_TOKENIZER_OWN_FILE);
    return NULL;
}

tlm_tokenizer *tlm_tokenizer_load(const char *path) {
    char *file = tlm_tokenizer_locate(path);
    tlm_tokenizer *t = file ? load_file(file) : NULL;
    free(file);
    return t;
}

tlm_tokenizer *tlm_tokenizer_load_memory(const void *data, size_t len, const char *name) {
    if (!data && len) {
        tlm_error("%s: no data", name ? name : "(memory)");
        return NULL;
    }
    return load_bytes(data ? data : "", len, name ? name : "(memory)", NULL);
}

/* ---- queries --------------------------------------------------------------------------------------- */

int tlm_tokenizer_vocab_size(const tlm_tokenizer *t) { return t->vocab_size; }
int tlm_tokenizer_bos(const tlm_tokenizer *t) { return t->bos; }
int tlm_tokenizer_eos(const tlm_tokenizer *t) { return t->eos; }
const char *tlm_tokenizer_kind(const tlm_tokenizer *t) { return t->kind_name; }

/* ---- encode ------------------------------------------------------------------------------------------ */

int tlm_tokenizer_encode(const tlm_tokenizer *t, const char *text, size_t len, int add_bos,
                         int **ids, size_t *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    if (!text && len) return tlm_error("tokenizer: encode: text is NULL");
    if (!text) text = "";
    tok_ints out = {0};
    int rc = 0;
    if (add_bos && t->bos >= 0) rc = tok_ints_push(&out, t->bos);
    if (rc == 0) {
        switch (t->kind) {
        case TOK_BYTES:
            for (size_t i = 0; i < len && rc == 0; i++) rc = tok_ints_push(&out, (unsigned char)text[i]);
            if (rc) tlm_error("tokenizer: out of memory");
            break;
        case TOK_CHARS: rc = tok_encode_chars(t, text, len, &out); break;
        case TOK_LLAMA2C: rc = tok_encode_llama2c(t, text, len, &out); break;
        case TOK_BPE: rc = tok_encode_bpe(t, text, len, &out); break;
        }
    } else {
        tlm_error("tokenizer: out of memory");
    }
    if (rc == 0 && !out.data) { /* hand back a non-NULL array even when it is empty */
        out.data = malloc(sizeof(int));
        if (!out.data) rc = tlm_error("tokenizer: out of memory");
    }
    if (rc) {
        free(out.data);
        return -1;
    }
    *ids = out.data;
    *n_ids = out.len;
    return 0;
}

/* ---- decode ------------------------------------------------------------------------------------------ */

const char *tlm_tokenizer_piece(const tlm_tokenizer *t, int prev, int id, size_t *len) {
    *len = 0;
    if (id < 0 || id >= t->vocab_size) return NULL;
    size_t n;
    const char *s = tok_text(t, id, &n);
    if (t->strip_start > 0 && (prev < 0 || prev == t->bos)) {
        int strip = 1;
        if (!t->strip_bytes_too) { /* run.c: only pieces whose vocabulary string starts with a space */
            size_t fn;
            const char *f = tok_form(t, id, &fn);
            strip = fn > 0 && f[0] == ' ';
        }
        for (int k = 0; strip && k < t->strip_start && n > 0 && s[0] == ' '; k++) {
            s++;
            n--;
        }
    }
    *len = n;
    return s;
}

char *tlm_tokenizer_decode_len(const tlm_tokenizer *t, const int *ids, size_t n, size_t *out_len) {
    tlm_buf b = {0};
    if (tlm_buf_put(&b, "", 0)) goto oom;
    int prev = -1;
    for (size_t i = 0; i < n; i++) {
        int id = ids[i];
        if (id < 0 || id >= t->vocab_size) {
            tlm_error("tokenizer: decode: id %d at position %zu is outside the vocabulary (size %d)", id, i, t->vocab_size);
            tlm_buf_free(&b);
            return NULL;
        }
        if (id != t->bos && id != t->eos) {
            size_t pl;
            const char *p = tlm_tokenizer_piece(t, prev, id, &pl);
            if (tlm_buf_put(&b, p, pl)) goto oom;
        }
        prev = id;
    }
    if (out_len) *out_len = b.len;
    return b.data;
oom:
    tlm_buf_free(&b);
    tlm_error("tokenizer: decode: out of memory");
    return NULL;
}

char *tlm_tokenizer_decode(const tlm_tokenizer *t, const int *ids, size_t n) {
    return tlm_tokenizer_decode_len(t, ids, n, NULL);
}
