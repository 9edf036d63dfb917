/* tok_llama2c.c — llama2.c's tokenizer.bin: loading, and encoding exactly as run.c's
 * encode() does (bos handled by the caller, eos never added):
 *   - a non-empty text starts with the "dummy prefix", the id of the entry " ";
 *   - bytes are grouped into UTF-8 code points (a leading byte and at most 3 continuation
 *     bytes); a group that is an entry becomes its id, otherwise each byte b becomes b + 3
 *     (<0xNN> byte fallback);
 *   - then the adjacent pair whose concatenation is the highest-scoring entry is merged,
 *     leftmost on ties, until no pair's concatenation is an entry scoring above -1e10.
 * Decoding (tokenizer.c) strips a leading space after BOS unless the piece is a byte token,
 * and <0xNN> pieces are the raw byte, as run.c's decode().
 * Differences from run.c, where run.c has no defined behaviour: NUL bytes in the text are
 * encoded (run.c stops at the first NUL), and entries are compared as byte strings (run.c
 * compares C strings). Entries with the same string resolve to the lowest id.
 *
 * File format: int32 max_token_length, then per token: float32 score, int32 length, bytes.
 * The token count is not stored; every byte of the file must belong to a whole entry. */
#include "tokenizer/tok_internal.h"
#include "util/error.h"
#include "util/finite.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* <0xNN> -> NN, else -1 */
static int byte_token(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int hi = hexval(s[3]), lo = hexval(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

tlm_tokenizer *tok_load_llama2c(const char *data, size_t len, const char *name) {
    int32_t max_len;
    if (len < 4) {
        tlm_error("%s: truncated llama2.c tokenizer: %zu bytes, the header alone is 4", name, len);
        return NULL;
    }
    memcpy(&max_len, data, 4);
    if (max_len <= 0) {
        tlm_error("%s: max_token_length = %d is not positive (not a llama2.c tokenizer.bin?)", name, (int)max_len);
        return NULL;
    }
    /* first pass: count and validate the entries */
    size_t off = 4, count = 0;
    while (off < len) {
        int32_t n;
        if (len - off < 8) {
            tlm_error("%s: truncated llama2.c tokenizer: token %zu at byte %zu needs an 8-byte header, %zu bytes left",
                      name, count, off, len - off);
            return NULL;
        }
        memcpy(&n, data + off + 4, 4);
        if (n < 0 || (size_t)n > len - off - 8) {
            tlm_error("%s: truncated or corrupt llama2.c tokenizer: token %zu at byte %zu has length %d, %zu bytes left",
                      name, count, off, (int)n, len - off - 8);
            return NULL;
        }
        float score;
        memcpy(&score, data + off, 4);
        if (!isfinite(score)) { /* (a NaN score would silently change every merge it is compared in) */
            char key[48];
            snprintf(key, sizeof key, "score of token %zu", count);
            tlm_float_from_file(score, TLM_FLOAT_ANY, name, key, &score);
            return NULL;
        }
        off += 8 + (size_t)n;
        count++;
    }
    if (count == 0 || count > 0x7fffffff) {
        tlm_error("%s: llama2.c tokenizer has no tokens", name);
        return NULL;
    }
    tlm_tokenizer *t = tok_new(TOK_LLAMA2C, "llama2c", (int)count);
    if (!t || !(t->scores = malloc(count * sizeof(float)))) goto oom;
    off = 4;
    for (size_t i = 0; i < count; i++) {
        int32_t n;
        memcpy(&t->scores[i], data + off, 4);
        memcpy(&n, data + off + 4, 4);
        const char *s = data + off + 8;
        if (tok_set_form(t, (int)i, s, (size_t)n)) goto oom;
        int b = byte_token(s, (size_t)n);
        char c = (char)b;
        if (b >= 0 ? tok_set_text(t, (int)i, &c, 1) : tok_set_text(t, (int)i, s, (size_t)n)) goto oom;
        off += 8 + (size_t)n;
    }
    if (tok_build_vocab(t, name)) {
        tlm_tokenizer_free(t);
        return NULL;
    }
    t->space_id = tok_strmap_get(&t->vocab, " ", 1);
    t->bos = count > 1 ? 1 : -1; /* run.c: BOS = 1, EOS = 2 */
    t->eos = count > 2 ? 2 : -1;
    t->strip_start = 1;
    t->strip_bytes_too = 0;
    return t;
oom:
    tlm_tokenizer_free(t);
    tlm_error("%s: out of memory", name);
    return NULL;
}

int tok_encode_llama2c(const tlm_tokenizer *t, const char *text, size_t len, tok_ints *out) {
    if (len == 0) return 0;
    if (t->space_id < 0 && !t->no_dummy_prefix)
        return tlm_error("tokenizer (llama2.c): the vocabulary has no \" \" entry, which encode needs as the dummy prefix");
    size_t start = out->len;
    if (!t->no_dummy_prefix && tok_ints_push(out, t->space_id)) goto oom;
    for (size_t i = 0; i < len;) {
        size_t g = 1; /* the group: this byte plus following continuation bytes, 4 bytes at most */
        while (g < 4 && i + g < len && ((unsigned char)text[i + g] & 0xC0) == 0x80) g++;
        int id = tok_strmap_get(&t->vocab, text + i, g);
        if (id >= 0) {
            if (tok_ints_push(out, id)) goto oom;
        } else {
            for (size_t k = 0; k < g; k++) {
                /* llama2.c's vocabularies have <0x00> .. <0xFF> at ids 3 .. 258; a GGUF's anywhere */
                const unsigned char byte = (unsigned char)text[i + k];
                int b = t->byte_fallback ? t->fallback_id[byte] : byte + 3;
                if (b < 0)
                    return tlm_error("tokenizer (SentencePiece): the byte 0x%02X has no <0x%02X> piece to fall back to",
                                     byte, byte);
                if (b >= t->vocab_size)
                    return tlm_error("tokenizer (llama2.c): byte fallback id %d is outside the vocabulary (size %d)", b, t->vocab_size);
                if (tok_ints_push(out, b)) goto oom;
            }
        }
        i += g;
    }
    size_t n = tok_merge_scores(t, out->data + start, out->len - start);
    if (n == (size_t)-1) goto oom;
    out->len = start + n;
    return 0;
oom:
    return tlm_error("tokenizer (llama2.c): out of memory");
}
