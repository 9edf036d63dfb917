/* tok_gguf.c — the tokenizer a GGUF file carries in its metadata (tokenizer.ggml.*):
 *   - model "llama": SentencePiece-style pieces with scores and token types. Encoded as llama.cpp's
 *     SPM tokenizer does, which is llama2.c's algorithm (tok_llama2c.c): the dummy-prefix space
 *     (unless add_space_prefix is false), code points that are pieces, else their bytes' <0xNN>
 *     pieces, then the highest-scoring merges. U+2581 in a piece stands for a space. Control,
 *     unknown and unused pieces are never produced from text and decode to nothing (control) or
 *     their piece;
 *   - model "gpt2": byte-level BPE (tokens + merges "a b" in priority order) after the
 *     pre-tokenizer tokenizer.ggml.pre names: GPT-2's regex ("gpt-2", "default"), Llama 3's
 *     ("llama-bpe", "llama3": digits in threes, and a piece that is a whole vocabulary entry taken
 *     as it is, its tokenizer.json's ignore_merges), Qwen 2's ("qwen2": single digits, NFC first,
 *     as its tokenizer.json; Qwen 3 files carry "qwen2" too). Control and user-defined tokens are
 *     matched in the text before anything else, as a tokenizer.json's added_tokens are.
 * bos/eos and add_bos_token come from the metadata. */
#include "formats/gguf.h"
#include "tokenizer/tok_internal.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

static int str_is(gguf_str s, const char *lit) { return s.len == strlen(lit) && !memcmp(s.p, lit, s.len); }

/* a piece with every U+2581 (E2 96 81) made a space, into tmp */
static int spaces_from_marks(tlm_buf *tmp, gguf_str s) {
    tmp->len = 0;
    for (uint64_t i = 0; i < s.len;) {
        if (s.len - i >= 3 && (unsigned char)s.p[i] == 0xE2 && (unsigned char)s.p[i + 1] == 0x96 &&
            (unsigned char)s.p[i + 2] == 0x81) {
            if (tlm_buf_put(tmp, " ", 1)) return -1;
            i += 3;
        } else {
            if (tlm_buf_put(tmp, s.p + i, 1)) return -1;
            i++;
        }
    }
    return 0;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int byte_piece(gguf_str s) {
    if (s.len != 6 || memcmp(s.p, "<0x", 3) || s.p[5] != '>') return -1;
    int hi = hexval(s.p[3]), lo = hexval(s.p[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* an optional id key in [0, n): -1 when absent */
static int get_id(const tlm_gguf *g, const char *name, const char *key, int n, int *out) {
    uint32_t v;
    int rc = tlm_gguf_get_u32(g, key, &v);
    if (rc < 0) return -1;
    *out = -1;
    if (rc == 0) return 0;
    if (v >= (uint32_t)n) return tlm_error("%s: metadata %s = %u is outside the vocabulary [0, %d)", name, key, v, n);
    *out = (int)v;
    return 0;
}

static tlm_tokenizer *load_spm(const tlm_gguf *g, const char *name, const gguf_kv *tokens, int n) {
    const gguf_kv *scores = tlm_gguf_find(g, "tokenizer.ggml.scores"), *types = tlm_gguf_find(g, "tokenizer.ggml.token_type");
    if (scores && (scores->type != GGUF_ARRAY || scores->count != (uint64_t)n))
        return tlm_error("%s: tokenizer.ggml.scores must be an array of %d numbers", name, n), NULL;
    if (types && (types->type != GGUF_ARRAY || types->count != (uint64_t)n))
        return tlm_error("%s: tokenizer.ggml.token_type must be an array of %d integers", name, n), NULL;
    tlm_tokenizer *t = tok_new(TOK_LLAMA2C, "gguf-spm", n);
    tlm_buf tmp = {0};
    if (!t || !(t->scores = malloc((size_t)n * sizeof(float))) || !(t->piece_off = malloc((size_t)n * sizeof(size_t))) ||
        !(t->piece_len = malloc((size_t)n * sizeof(uint32_t))) || !(t->piece_type = malloc((size_t)n)))
        goto oom;
    for (int i = 0; i < 256; i++) t->fallback_id[i] = -1;
    for (int i = 0; i < n; i++) {
        gguf_str s;
        int64_t type = TT_NORMAL;
        t->scores[i] = 0.0f;
        if (tlm_gguf_array_str(g, tokens, (uint64_t)i, &s) < 0 ||
            (scores && tlm_gguf_array_f32(g, scores, (uint64_t)i, &t->scores[i]) < 0) ||
            (types && tlm_gguf_array_i64(g, types, (uint64_t)i, &type) < 0))
            goto fail;
        if (type < 1 || type > 6 || s.len > UINT32_MAX) {
            tlm_error("%s: token %d: token_type %lld is not one of 1..6 (normal .. byte)", name, i, (long long)type);
            goto fail;
        }
        t->piece_off[i] = t->piece_arena.len, t->piece_len[i] = (uint32_t)s.len, t->piece_type[i] = (unsigned char)type;
        if (tlm_buf_put(&t->piece_arena, s.p, s.len)) goto oom;
        const int b = type == TT_BYTE ? byte_piece(s) : -1;
        if (type == TT_BYTE && b < 0) {
            tlm_error("%s: token %d has type byte but its piece is not <0xNN>", name, i);
            goto fail;
        }
        if (b >= 0) {
            char c = (char)b;
            if (t->fallback_id[b] < 0) t->fallback_id[b] = i;
            /* (the piece as its form, as llama2.c and llama.cpp look pieces up by their text) */
            if (tok_set_form(t, i, s.p, s.len) || tok_set_text(t, i, &c, 1)) goto oom;
            continue;
        }
        if (spaces_from_marks(&tmp, s)) goto oom;
        const int from_text = type == TT_NORMAL || type == TT_USER;
        if (from_text && tmp.len && tok_set_form(t, i, tmp.data, tmp.len)) goto oom;
        if (type != TT_CONTROL && tok_set_text(t, i, tmp.data, tmp.len)) goto oom;
    }
    if (tok_build_vocab(t, name)) goto fail;
    t->byte_fallback = 1;
    int add_prefix = 1;
    if (tlm_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &add_prefix) < 0) goto fail;
    t->space_id = add_prefix ? tok_strmap_get(&t->vocab, " ", 1) : -1;
    t->no_dummy_prefix = !add_prefix;
    t->strip_start = add_prefix;
    t->strip_bytes_too = 0;
    tlm_buf_free(&tmp);
    return t;
oom:
    tlm_error("%s: out of memory reading the tokenizer", name);
fail:
    tlm_buf_free(&tmp);
    tlm_tokenizer_free(t);
    return NULL;
}

/* the pre-tokenizers tokenizer.ggml.pre names: the regex each splits the text with (the regexes are
 * those of the models' tokenizer.json files) */
static const char LLAMA3_PATTERN[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char QWEN2_PATTERN[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                                    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const struct {
    const char *name, *pattern; /* pattern NULL: GPT-2's, inside the byte-level step */
    int nfc, ignore_merges;
} PRES[] = {
    {"default", NULL, 0, 0}, {"gpt-2", NULL, 0, 0},           {"llama-bpe", LLAMA3_PATTERN, 0, 1},
    {"llama3", LLAMA3_PATTERN, 0, 1}, {"qwen2", QWEN2_PATTERN, 1, 0},
};

/* control and user-defined tokens: matched in text first (tokenizer.json's added_tokens) */
static int add_special_tokens(tlm_tokenizer *t, const tlm_gguf *g, const char *name, int n) {
    const gguf_kv *types = tlm_gguf_find(g, "tokenizer.ggml.token_type");
    if (!types) return 0;
    if (types->type != GGUF_ARRAY || types->count != (uint64_t)n)
        return tlm_error("%s: tokenizer.ggml.token_type must be an array of %d integers", name, n);
    int count = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n; i++) {
            int64_t type;
            if (tlm_gguf_array_i64(g, types, (uint64_t)i, &type) < 0) return -1;
            if ((type != TT_CONTROL && type != TT_USER) || !t->form_len[i]) continue;
            if (pass == 0) {
                count++;
                continue;
            }
            tok_added *a = &t->added[t->n_added++];
            a->id = i, a->special = type == TT_CONTROL, a->len = t->form_len[i];
            size_t len;
            const char *form = tok_form(t, i, &len);
            if (!(a->content = malloc(len + 1))) return tlm_error("%s: out of memory", name);
            memcpy(a->content, form, len);
            a->content[a->len] = '\0';
            if (tok_set_text(t, i, a->content, a->len)) return tlm_error("%s: out of memory", name);
        }
        if (pass == 0 && count && !(t->added = calloc((size_t)count, sizeof *t->added)))
            return tlm_error("%s: out of memory", name);
    }
    return 0;
}

static tlm_tokenizer *load_bpe(const tlm_gguf *g, const char *name, const gguf_kv *tokens, int n) {
    gguf_str pre = {"default", 7};
    if (tlm_gguf_get_str(g, "tokenizer.ggml.pre", &pre) < 0) return NULL;
    int which = -1;
    for (int i = 0; i < (int)(sizeof PRES / sizeof PRES[0]) && which < 0; i++)
        if (str_is(pre, PRES[i].name)) which = i;
    if (which < 0)
        return tlm_error("%s: tokenizer.ggml.pre = \"%.*s\": a pre-tokenizer tinylm does not know (it knows gpt-2, "
                         "default, llama-bpe, llama3, qwen2)",
                         name, (int)(pre.len > 32 ? 32 : pre.len), pre.p),
               NULL;
    const gguf_kv *merges = tlm_gguf_find(g, "tokenizer.ggml.merges");
    if (!merges || merges->type != GGUF_ARRAY || merges->elem_type != GGUF_STRING)
        return tlm_error("%s: tokenizer.ggml.merges (an array of strings) is missing", name), NULL;
    tlm_tokenizer *t = tok_new(TOK_BPE, "gguf-bpe", n);
    tlm_buf tmp = {0};
    if (!t) goto oom;
    for (int i = 0; i < n; i++) {
        gguf_str s;
        if (tlm_gguf_array_str(g, tokens, (uint64_t)i, &s) < 0) goto fail;
        if (s.len && tok_set_form(t, i, s.p, s.len)) goto oom;
    }
    if (tok_build_vocab(t, name) || tok_pairmap_init(&t->merges, merges->count > (1u << 24) ? 1u << 24 : merges->count))
        goto fail;
    for (uint64_t r = 0; r < merges->count; r++) {
        gguf_str s;
        if (tlm_gguf_array_str(g, merges, r, &s) < 0) goto fail;
        const char *sp = s.len ? memchr(s.p, ' ', s.len) : NULL;
        if (!sp || sp == s.p || sp + 1 == s.p + s.len) {
            tlm_error("%s: tokenizer.ggml.merges[%llu] is not \"a b\"", name, (unsigned long long)r);
            goto fail;
        }
        if (tok_add_merge(t, s.p, (size_t)(sp - s.p), sp + 1, (size_t)(s.p + s.len - sp - 1), (int)r, &tmp, name, (int)r))
            goto fail;
    }
    const char *pattern = PRES[which].pattern;
    if (!(t->pres = calloc(2, sizeof *t->pres))) goto oom;
    if (pattern) { /* Split(regex, Isolated), then the byte-level mapping without a regex of its own */
        t->pres[0].type = PRE_SPLIT, t->pres[0].behavior = SPLIT_ISOLATED;
        if (!(t->pres[0].re = tok_regex_compile(pattern, strlen(pattern), 0, name))) goto fail;
        if (!(t->pres[0].pattern = strdup(pattern))) goto oom;
        t->pres[1].type = PRE_BYTELEVEL;
        t->n_pres = 2;
    } else {
        t->pres[0].type = PRE_BYTELEVEL;
        t->n_pres = 1;
        if (!(t->pres[0].re = tok_regex_compile(tok_gpt2_pattern, strlen(tok_gpt2_pattern), 0, name))) goto fail;
    }
    if (PRES[which].nfc) {
        if (!(t->norms = calloc(1, sizeof *t->norms))) goto oom;
        t->norms[0].type = TOK_NORM_NFC, t->n_norms = 1;
    }
    t->ignore_merges = PRES[which].ignore_merges;
    t->byte_level = 1;
    tok_setup_byte_ids(t);
    if (tok_bytelevel_texts(t, name) || add_special_tokens(t, g, name, n)) goto fail;
    t->strip_bytes_too = 1;
    tlm_buf_free(&tmp);
    return t;
oom:
    tlm_error("%s: out of memory reading the tokenizer", name);
fail:
    tlm_buf_free(&tmp);
    tlm_tokenizer_free(t);
    return NULL;
}

tlm_tokenizer *tok_load_gguf(const tlm_gguf *g, const char *name) {
    gguf_str model;
    int rc = tlm_gguf_get_str(g, "tokenizer.ggml.model", &model);
    if (rc <= 0) return rc < 0 ? NULL : (tlm_error("%s: holds no tokenizer (metadata tokenizer.ggml.model)", name), NULL);
    const gguf_kv *tokens = tlm_gguf_find(g, "tokenizer.ggml.tokens");
    if (!tokens || tokens->type != GGUF_ARRAY || tokens->elem_type != GGUF_STRING || tokens->count == 0 ||
        tokens->count > (1u << 24))
        return tlm_error("%s: tokenizer.ggml.tokens must be a non-empty array of strings", name), NULL;
    const int n = (int)tokens->count;
    tlm_tokenizer *t = str_is(model, "llama") ? load_spm(g, name, tokens, n)
                       : str_is(model, "gpt2") ? load_bpe(g, name, tokens, n)
                                               : (tlm_error("%s: tokenizer.ggml.model = \"%.*s\": only \"llama\" "
                                                            "(SentencePiece) and \"gpt2\" (BPE) are supported",
                                                            name, (int)(model.len > 32 ? 32 : model.len), model.p),
                                                  NULL);
    if (!t) return NULL;
    int add_bos = str_is(model, "llama");
    if (get_id(g, name, "tokenizer.ggml.bos_token_id", n, &t->bos) || get_id(g, name, "tokenizer.ggml.eos_token_id", n, &t->eos) ||
        tlm_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos) < 0) {
        tlm_tokenizer_free(t);
        return NULL;
    }
    if (!add_bos) t->bos = -1;
    return t;
}

tlm_tokenizer *tlm_tokenizer_load_gguf(const char *path) {
    tlm_gguf *g = tlm_gguf_open(path);
    tlm_tokenizer *t = g ? tok_load_gguf(g, path) : NULL;
    tlm_gguf_close(g);
    return t;
}

/* ---- writing: the tokenizer as GGUF metadata ---------------------------------------------------- */

/* piece i of a SentencePiece-style vocabulary, its score and type: a GGUF's as read; llama2.c's
 * from its tokenizer.bin conventions (spaces were U+2581, <s> / </s> were written "\n<s>\n",
 * ids 0, 1, 2 are <unk>, <s>, </s>) */
static int spm_piece(const tlm_tokenizer *t, int i, tlm_buf *out, int *type) {
    out->len = 0;
    if (t->kind == TOK_BYTES) { /* byte b is the piece <0xBB>: SentencePiece's byte fallback gives id b */
        char hex[16];
        snprintf(hex, sizeof hex, "<0x%02X>", (unsigned)i & 0xffu);
        *type = TT_BYTE;
        return tlm_buf_put(out, hex, 6);
    }
    if (t->kind == TOK_CHARS) { /* each code point its own piece: no merges, the same ids */
        size_t n;
        const char *f = tok_form(t, i, &n);
        *type = TT_NORMAL;
        return n == 1 && f[0] == ' ' ? tlm_buf_put(out, "\xE2\x96\x81", 3) : tlm_buf_put(out, f, n);
    }
    if (t->piece_type) {
        *type = t->piece_type[i];
        return tlm_buf_put(out, t->piece_arena.data + t->piece_off[i], t->piece_len[i]);
    }
    size_t n;
    const char *f = tok_form(t, i, &n);
    if (n >= 2 && f[0] == '\n' && f[n - 1] == '\n') f++, n -= 2;
    gguf_str s = {f, n};
    *type = i == 0 ? TT_UNKNOWN : (i == 1 || i == 2) ? TT_CONTROL : byte_piece(s) >= 0 ? TT_BYTE : TT_NORMAL;
    for (size_t k = 0; k < n; k++)
        if (f[k] == ' ' ? tlm_buf_put(out, "\xE2\x96\x81", 3) : tlm_buf_put(out, f + k, 1)) return -1;
    return 0;
}

/* the tokenizer.ggml.pre that names a byte-level BPE tokenizer's normalizer and pre-tokenizer (PRES: GPT-2's
 * ByteLevel regex alone, or Llama 3's / Qwen 2's Split then the byte-level mapping, with their NFC and
 * ignore_merges), or NULL when none does */
static const char *bpe_pre_name(const tlm_tokenizer *t) {
    if (t->n_pres == 1 && t->pres[0].type == PRE_BYTELEVEL && t->pres[0].re && !t->pres[0].add_prefix_space &&
        !t->n_norms && !t->ignore_merges)
        return "gpt-2";
    if (t->n_pres != 2 || t->pres[0].type != PRE_SPLIT || t->pres[0].behavior != SPLIT_ISOLATED ||
        !t->pres[0].pattern || t->pres[1].type != PRE_BYTELEVEL || t->pres[1].re || t->pres[1].add_prefix_space)
        return NULL;
    const int nfc = t->n_norms == 1 && t->norms[0].type == TOK_NORM_NFC;
    for (size_t i = 0; i < sizeof PRES / sizeof PRES[0]; i++)
        if (PRES[i].pattern && !strcmp(PRES[i].pattern, t->pres[0].pattern) && PRES[i].nfc == nfc &&
            (nfc || !t->n_norms) && PRES[i].ignore_merges == t->ignore_merges)
            return PRES[i].name;
    return NULL;
}

typedef struct {
    int32_t rank, a, b;
} merge_rank;

static int by_rank(const void *x, const void *y) {
    const merge_rank *p = x, *q = y;
    return (p->rank > q->rank) - (p->rank < q->rank);
}

/* A byte-level BPE tokenizer (a tokenizer.json's, GPT-2's files, a GGUF's) as llama.cpp's "gpt2" model: the
 * vocabulary strings, the merges "a b" by rank, the added tokens as CONTROL (special) or USER_DEFINED, the
 * pre-tokenizer by name (tok_load_gguf reads it back as the same tokenizer) */
static int bpe_to_gguf(const tlm_tokenizer *t, tlm_gguf_writer *w, int n) {
    const char *pre = bpe_pre_name(t);
    if (!pre)
        return tlm_error("tokenizer (%s): its normalizer / pre-tokenizer is none of those llama.cpp names that tinylm "
                         "writes (gpt-2, llama-bpe, qwen2)", t->kind_name);
    if (t->byte_fallback) return tlm_error("tokenizer (%s): byte fallback in a byte-level BPE", t->kind_name);
    const char **tokens = calloc((size_t)n, sizeof *tokens);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    int32_t *types = malloc((size_t)n * sizeof *types);
    merge_rank *mr = malloc((t->merges.count ? t->merges.count : 1) * sizeof *mr);
    char **merges = calloc(t->merges.count ? t->merges.count : 1, sizeof *merges);
    int rc = !tokens || !lens || !types || !mr || !merges ? tlm_error("out of memory writing the tokenizer") : 0;
    tlm_buf pads = {0}; /* ("[PAD<id>]" each, NUL-terminated, for the ids past the tokenizer's) */
    for (int i = t->vocab_size; i < n && !rc; i++) {
        char pad[24];
        const int len = snprintf(pad, sizeof pad, "[PAD%d]", i);
        if (tlm_buf_put(&pads, pad, (size_t)len + 1)) rc = tlm_error("out of memory writing the tokenizer");
    }
    for (int i = 0, off = 0; i < n && !rc; i++) {
        if (i >= t->vocab_size) {
            tokens[i] = pads.data + off, lens[i] = strlen(tokens[i]), types[i] = TT_UNUSED, off += (int)lens[i] + 1;
            continue;
        }
        tokens[i] = tok_form(t, i, &lens[i]), types[i] = TT_NORMAL;
        if (!lens[i]) rc = tlm_error("tokenizer (%s): id %d has no vocabulary string", t->kind_name, i);
    }
    for (int k = 0; k < t->n_added && !rc; k++)
        if (t->added[k].id >= 0 && t->added[k].id < n)
            types[t->added[k].id] = t->added[k].special ? TT_CONTROL : TT_USER;
    size_t m = 0;
    for (size_t s = 0; !rc && s < t->merges.cap; s++) {
        const tok_pairmap_slot *sl = &t->merges.slots[s];
        if (sl->id < 0) continue; /* (an empty slot) */
        mr[m].rank = sl->rank, mr[m].a = (int32_t)(sl->key >> 32), mr[m].b = (int32_t)(uint32_t)sl->key, m++;
    }
    if (!rc) qsort(mr, m, sizeof *mr, by_rank);
    size_t *mlens = malloc((m ? m : 1) * sizeof *mlens);
    if (!rc && !mlens) rc = tlm_error("out of memory writing the tokenizer");
    for (size_t k = 0; k < m && !rc; k++) {
        size_t la, lb;
        const char *a = tok_form(t, mr[k].a, &la), *b = tok_form(t, mr[k].b, &lb);
        if (!(merges[k] = malloc(la + lb + 1))) {
            rc = tlm_error("out of memory writing the tokenizer");
            break;
        }
        memcpy(merges[k], a, la), merges[k][la] = ' ', memcpy(merges[k] + la + 1, b, lb), mlens[k] = la + 1 + lb;
    }
    if (!rc)
        rc = tlm_gguf_set_str(w, "tokenizer.ggml.model", "gpt2", 4) ||
             tlm_gguf_set_str(w, "tokenizer.ggml.pre", pre, strlen(pre)) ||
             tlm_gguf_set_str_array(w, "tokenizer.ggml.tokens", (const char *const *)tokens, lens, (uint64_t)n) ||
             tlm_gguf_set_array(w, "tokenizer.ggml.token_type", GGUF_INT32, types, (uint64_t)n) ||
             tlm_gguf_set_str_array(w, "tokenizer.ggml.merges", (const char *const *)merges, mlens, (uint64_t)m) ||
             (t->bos >= 0 && tlm_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)t->bos)) ||
             (t->eos >= 0 && t->eos < n && tlm_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)t->eos)) ||
             tlm_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", t->bos >= 0);
    for (size_t k = 0; merges && k < m; k++) free(merges[k]);
    free(tokens), free(lens), free(types), free(mr), free(merges), free(mlens);
    tlm_buf_free(&pads);
    return rc ? -1 : 0;
}

int tlm_tokenizer_to_gguf(const tlm_tokenizer *t, tlm_gguf_writer *w) {
    return tlm_tokenizer_to_gguf_padded(t, w, t->vocab_size);
}

int tlm_tokenizer_to_gguf_padded(const tlm_tokenizer *t, tlm_gguf_writer *w, int n_vocab) {
    if (n_vocab < t->vocab_size) n_vocab = t->vocab_size;
    if (t->kind == TOK_BPE && t->byte_level) return bpe_to_gguf(t, w, n_vocab);
    const int n = n_vocab;
    /* (the training tokenizers as SentencePiece vocabularies that encode to the same ids: single
     * code points, or the 256 byte pieces) */
    const int simple = t->kind == TOK_CHARS || t->kind == TOK_BYTES;
    if (t->kind != TOK_LLAMA2C && !simple)
        return tlm_error("tokenizer (%s): only SentencePiece-style vocabularies (llama2.c's tokenizer.bin, a GGUF's) "
                         "and tinylm's chars and bytes tokenizers can be written into a GGUF file yet", t->kind_name);
    char **pieces = calloc((size_t)n, sizeof *pieces);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    float *scores = malloc((size_t)n * sizeof *scores);
    int32_t *types = malloc((size_t)n * sizeof *types);
    tlm_buf tmp = {0};
    int rc = !pieces || !lens || !scores || !types ? tlm_error("out of memory writing the tokenizer") : 0;
    for (int i = 0; i < n && !rc; i++) {
        int type = TT_UNUSED;
        char pad[24];
        const int padded = i >= t->vocab_size; /* ("[PAD<id>]", score -1000, as llama.cpp's converter pads) */
        tmp.len = 0;
        if ((padded ? tlm_buf_put(&tmp, pad, (size_t)snprintf(pad, sizeof pad, "[PAD%d]", i))
                    : spm_piece(t, i, &tmp, &type)) ||
            !(pieces[i] = malloc(tmp.len ? tmp.len : 1))) {
            rc = tlm_error("out of memory writing the tokenizer");
            break;
        }
        memcpy(pieces[i], tmp.data, tmp.len), lens[i] = tmp.len;
        scores[i] = padded ? -1000.0f : simple ? 0.0f : t->scores[i], types[i] = type;
    }
    const int bos = t->bos >= 0 ? t->bos : 1, eos = t->eos >= 0 ? t->eos : 2;
    if (!rc)
        rc = tlm_gguf_set_str(w, "tokenizer.ggml.model", "llama", 5) ||
             tlm_gguf_set_str_array(w, "tokenizer.ggml.tokens", (const char *const *)pieces, lens, (uint64_t)n) ||
             tlm_gguf_set_array(w, "tokenizer.ggml.scores", GGUF_FLOAT32, scores, (uint64_t)n) ||
             tlm_gguf_set_array(w, "tokenizer.ggml.token_type", GGUF_INT32, types, (uint64_t)n) ||
             (!simple && bos < n && tlm_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos)) ||
             (!simple && eos < n && tlm_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos)) ||
             (!simple && !t->piece_type && n > 0 && tlm_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 0)) ||
             tlm_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", t->bos >= 0) ||
             tlm_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", 0) ||
             tlm_gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", !simple && !t->no_dummy_prefix);
    for (int i = 0; pieces && i < n; i++) free(pieces[i]);
    free(pieces), free(lens), free(scores), free(types);
    tlm_buf_free(&tmp);
    return rc ? -1 : 0;
}
