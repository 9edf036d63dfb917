/* tok_simple.c — the training tokenizers: bytes (vocab 256) and chars (the sorted distinct
 * code points of a corpus), and the engine's own file format that stores them:
 *   {"tinylm_tokenizer": 1, "type": "bytes"}
 *   {"tinylm_tokenizer": 1, "type": "chars", "code_points": [10, 32, 33, ...]}
 * saved atomically with util/atomic_file (temp file, fsync, rename, fsync of the directory). */
#include "tokenizer/tok_internal.h"
#include "util/atomic_file.h"
#include "util/error.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

tlm_tokenizer *tlm_tokenizer_bytes(void) {
    tlm_tokenizer *t = tok_new(TOK_BYTES, "bytes", 256);
    if (!t) goto oom;
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        if (tok_set_form(t, b, &c, 1) || tok_set_text(t, b, &c, 1)) goto oom;
    }
    return t;
oom:
    tlm_tokenizer_free(t);
    tlm_error("tokenizer (bytes): out of memory");
    return NULL;
}

/* Builds a chars tokenizer from code points sorted ascending without repeats. */
static tlm_tokenizer *chars_from_cps(const uint32_t *cps, int n, const char *name) {
    tlm_tokenizer *t = tok_new(TOK_CHARS, "chars", n);
    if (!t) goto oom;
    for (int i = 0; i < n; i++) {
        char u[4];
        size_t l = tlm_utf8_encode(cps[i], u);
        if (tok_set_form(t, i, u, l) || tok_set_text(t, i, u, l)) goto oom;
    }
    if (tok_build_vocab(t, name)) {
        tlm_tokenizer_free(t);
        return NULL;
    }
    return t;
oom:
    tlm_tokenizer_free(t);
    tlm_error("%s: out of memory", name);
    return NULL;
}

tlm_tokenizer *tlm_tokenizer_chars(const char *text, size_t len) {
    if (!text || len == 0) {
        tlm_error("tokenizer (chars): the corpus is empty");
        return NULL;
    }
    size_t bad = tlm_utf8_check(text, len);
    if (bad != len) {
        tlm_error("tokenizer (chars): the corpus is not valid UTF-8 (byte %zu)", bad);
        return NULL;
    }
    /* mark which code points occur, then list them in order */
    unsigned char *seen = calloc(0x110000 / 8, 1);
    uint32_t *cps = NULL;
    if (!seen) goto oom;
    int n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += tlm_utf8_decode(text + i, len - i, &cp);
        if (!(seen[cp >> 3] & (1u << (cp & 7)))) {
            seen[cp >> 3] |= (unsigned char)(1u << (cp & 7));
            n++;
        }
    }
    cps = malloc((size_t)n * sizeof *cps);
    if (!cps) goto oom;
    int k = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++)
        if (seen[cp >> 3] & (1u << (cp & 7))) cps[k++] = cp;
    tlm_tokenizer *t = chars_from_cps(cps, n, "tokenizer (chars)");
    free(seen);
    free(cps);
    return t;
oom:
    free(seen);
    free(cps);
    tlm_error("tokenizer (chars): out of memory");
    return NULL;
}

int tok_encode_chars(const tlm_tokenizer *t, const char *text, size_t len, tok_ints *out) {
    for (size_t i = 0; i < len;) {
        size_t l = tlm_utf8_valid_len(text + i, len - i);
        if (!l) return tlm_error("tokenizer (chars): text is not valid UTF-8 at byte %zu", i);
        int id = tok_strmap_get(&t->vocab, text + i, l);
        if (id < 0) {
            uint32_t cp;
            tlm_utf8_decode(text + i, l, &cp);
            return tlm_error("tokenizer (chars): character U+%04X at byte %zu is not in the vocabulary", (unsigned)cp, i);
        }
        if (tok_ints_push(out, id)) return tlm_error("tokenizer (chars): out of memory");
        i += l;
    }
    return 0;
}

/* ---- the engine's own file ---------------------------------------------------------------------- */

tlm_tokenizer *tok_load_own(const void *json, const char *name) {
    const cJSON *j = json;
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(j, "tinylm_tokenizer");
    if (!cJSON_IsNumber(ver) || ver->valuedouble != 1) {
        tlm_error("%s: tinylm_tokenizer: unsupported format version (expected 1)", name);
        return NULL;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
    if (!cJSON_IsString(type)) {
        tlm_error("%s: type: missing or not a string", name);
        return NULL;
    }
    if (strcmp(type->valuestring, "bytes") == 0) return tlm_tokenizer_bytes();
    if (strcmp(type->valuestring, "chars") != 0) {
        tlm_error("%s: type: unknown tokenizer type \"%s\" (expected \"bytes\" or \"chars\")", name, type->valuestring);
        return NULL;
    }
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "code_points");
    int n = cJSON_GetArraySize(arr);
    if (!cJSON_IsArray(arr) || n < 1) {
        tlm_error("%s: code_points: missing, not an array, or empty", name);
        return NULL;
    }
    uint32_t *cps = malloc((size_t)n * sizeof *cps);
    if (!cps) {
        tlm_error("%s: out of memory", name);
        return NULL;
    }
    int k = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!(v >= 0 && v <= 0x10FFFF) || v != (double)(uint32_t)v || (v >= 0xD800 && v <= 0xDFFF) ||
            (k > 0 && (uint32_t)v <= cps[k - 1])) {
            tlm_error("%s: code_points[%d]: not a code point in ascending order", name, k);
            free(cps);
            return NULL;
        }
        cps[k++] = (uint32_t)v;
    }
    tlm_tokenizer *t = chars_from_cps(cps, n, name);
    free(cps);
    return t;
}

static char *own_json(const tlm_tokenizer *t) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    int ok = cJSON_AddNumberToObject(j, "tinylm_tokenizer", 1) != NULL;
    ok = ok && cJSON_AddStringToObject(j, "type", t->kind == TOK_BYTES ? "bytes" : "chars") != NULL;
    if (ok && t->kind == TOK_CHARS) {
        cJSON *arr = cJSON_AddArrayToObject(j, "code_points");
        ok = arr != NULL;
        for (int i = 0; ok && i < t->vocab_size; i++) {
            size_t n;
            const char *s = tok_form(t, i, &n);
            uint32_t cp;
            tlm_utf8_decode(s, n, &cp);
            cJSON *num = cJSON_CreateNumber(cp);
            ok = num && cJSON_AddItemToArray(arr, num);
        }
    }
    char *text = ok ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    return text;
}

int tlm_tokenizer_save(const tlm_tokenizer *t, const char *path) {
    if (t->kind != TOK_BYTES && t->kind != TOK_CHARS)
        return tlm_error("%s: only bytes/chars tokenizers are saved in the engine's format (this one is %s; "
                         "keep its original file)", path, t->kind_name);
    char *text = own_json(t);
    if (!text) return tlm_error("%s: out of memory", path);
    size_t n = strlen(text);
    text[n] = '\n'; /* replace the NUL: the file ends with a newline */
    int rc = tlm_write_file_atomic(path, text, n + 1);
    free(text);
    return rc;
}
