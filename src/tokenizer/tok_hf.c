/* tok_hf.c — loads a Hugging Face tokenizer.json with a BPE model (plus the tokenizer_config.json
 * beside it, when there is one). Supported parts, anything else is an error naming the key:
 *   model:         BPE (vocab, merges as "a b" or ["a","b"], byte_fallback, unk_token, fuse_unk,
 *                  ignore_merges; no dropout, no subword prefix/suffix)
 *   added_tokens:  matched before normalization (lstrip/rstrip honoured; single_word rejected)
 *   normalizer:    null, NFC, Prepend, Replace (String pattern), Sequence of these
 *   pre_tokenizer: null, Split (Regex or String; Isolated/Removed/MergedWithPrevious/MergedWithNext),
 *                  ByteLevel (add_prefix_space, use_regex), Metaspace, Sequence of these
 *   decoder:       null, ByteLevel, Metaspace, Sequence of Replace/ByteFallback/Fuse/Strip
 *   bos/eos:       tokenizer_config.json add_bos_token + bos_token, eos_token; without that file (or
 *                  without add_bos_token) the BOS is the leading SpecialToken of a TemplateProcessing
 *                  post_processor, and the EOS the first special added token named </s>,
 *                  <|endoftext|>, <|end_of_text|> or <eos>. */
#include "tokenizer/tok_internal.h"
#include "util/error.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* 1/0 for a JSON bool, `def` when absent or null, -2 when it is something else */
static int get_bool(const cJSON *o, const char *k, int def) {
    const cJSON *v = get(o, k);
    if (!v || cJSON_IsNull(v)) return def;
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
    return -2;
}

static const char *get_str(const cJSON *o, const char *k) {
    const cJSON *v = get(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int is_utf8(const char *s) { return tlm_utf8_check(s, strlen(s)) == strlen(s); }

/* ---- helpers shared with the GPT-2 loader ----------------------------------------------------- */

int tok_add_merge(tlm_tokenizer *t, const char *a, size_t al, const char *b, size_t bl, int rank, tlm_buf *tmp,
                  const char *name, int index) {
    int ia = tok_strmap_get(&t->vocab, a, al), ib = tok_strmap_get(&t->vocab, b, bl);
    tmp->len = 0;
    if (tlm_buf_put(tmp, a, al) || tlm_buf_put(tmp, b, bl)) return tlm_error("%s: out of memory", name);
    int im = tok_strmap_get(&t->vocab, tmp->data, tmp->len);
    if (ia < 0 || ib < 0 || im < 0)
        return tlm_error("%s: merges[%d]: \"%.*s\" + \"%.*s\": %s is not in the vocabulary", name, index, (int)al, a,
                         (int)bl, b, ia < 0 ? "the first part" : ib < 0 ? "the second part" : "the merged token");
    if (tok_pairmap_put(&t->merges, ia, ib, rank, im) < 0) return tlm_error("%s: out of memory", name);
    return 0;
}

void tok_setup_byte_ids(tlm_tokenizer *t) {
    uint32_t b2c[256];
    int c2b[TOK_BYTE_CP_LIMIT];
    tok_byte_tables(b2c, c2b);
    for (int b = 0; b < 256; b++) {
        char u[8];
        size_t l = tlm_utf8_encode(b2c[b], u);
        t->byte_id[b] = t->byte_level ? tok_strmap_get(&t->vocab, u, l) : -1;
        snprintf(u, sizeof u, "<0x%02X>", b);
        t->fallback_id[b] = t->byte_fallback ? tok_strmap_get(&t->vocab, u, 6) : -1;
    }
}

int tok_bytelevel_texts(tlm_tokenizer *t, const char *name) {
    uint32_t b2c[256];
    int c2b[TOK_BYTE_CP_LIMIT];
    tok_byte_tables(b2c, c2b);
    tlm_buf tmp = {0};
    for (int id = 0; id < t->vocab_size; id++) {
        size_t n;
        const char *s = tok_form(t, id, &n);
        tmp.len = 0;
        int ok = 1;
        for (size_t i = 0; i < n && ok;) {
            uint32_t cp;
            size_t l = tlm_utf8_valid_len(s + i, n - i);
            if (!l) { ok = 0; break; }
            tlm_utf8_decode(s + i, l, &cp);
            ok = cp < TOK_BYTE_CP_LIMIT && c2b[cp] >= 0;
            char c = ok ? (char)c2b[cp] : 0;
            if (ok && tlm_buf_put(&tmp, &c, 1)) goto oom;
            i += l;
        }
        /* a form that is not byte-level text (e.g. an added token) decodes to itself */
        if (!ok) {
            tmp.len = 0;
            if (tlm_buf_put(&tmp, s, n)) goto oom;
        }
        if (tok_set_text(t, id, tmp.data ? tmp.data : "", tmp.len)) goto oom;
    }
    for (int k = 0; k < t->n_added; k++)
        if (tok_set_text(t, t->added[k].id, t->added[k].content, t->added[k].len)) goto oom;
    tlm_buf_free(&tmp);
    return 0;
oom:
    tlm_buf_free(&tmp);
    return tlm_error("%s: out of memory", name);
}

/* ---- vocab, added tokens, merges ------------------------------------------------------------------ */

static int json_int(const cJSON *v, long lo, long hi, long *out) {
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= (double)lo && d <= (double)hi) || d != (double)(long)d) return -1;
    *out = (long)d;
    return 0;
}

static int load_vocab(tlm_tokenizer **out, const cJSON *model, const cJSON *added, const char *name) {
    const cJSON *vocab = get(model, "vocab");
    if (!cJSON_IsObject(vocab)) return tlm_error("%s: model.vocab: missing or not an object", name);
    long n_vocab = cJSON_GetArraySize(vocab), n_added = cJSON_IsArray(added) ? cJSON_GetArraySize(added) : 0;
    if (added && !cJSON_IsArray(added) && !cJSON_IsNull(added)) return tlm_error("%s: added_tokens: not an array", name);
    long limit = n_vocab + n_added, max_id = -1, id = 0;
    if (limit == 0) return tlm_error("%s: model.vocab is empty", name);
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        if (json_int(e, 0, limit - 1, &id))
            return tlm_error("%s: model.vocab[\"%s\"]: id is not an integer in [0, %ld)", name, e->string, limit);
        if (id > max_id) max_id = id;
    }
    int k = 0;
    cJSON_ArrayForEach(e, added) {
        if (json_int(get(e, "id"), 0, limit - 1, &id))
            return tlm_error("%s: added_tokens[%d].id: not an integer in [0, %ld)", name, k, limit);
        const char *c = get_str(e, "content");
        if (!c || !*c || !is_utf8(c)) return tlm_error("%s: added_tokens[%d].content: missing, empty or not UTF-8", name, k);
        if (get_bool(e, "single_word", 0) != 0) return tlm_error("%s: added_tokens[%d].single_word: not supported", name, k);
        if (id > max_id) max_id = id;
        k++;
    }
    tlm_tokenizer *t = tok_new(TOK_BPE, "hf-bpe", (int)max_id + 1);
    *out = t;
    if (!t) return tlm_error("%s: out of memory", name);
    cJSON_ArrayForEach(e, vocab) {
        json_int(e, 0, limit - 1, &id);
        size_t n = strlen(e->string);
        if (n == 0) continue;
        if (t->form_len[id]) return tlm_error("%s: model.vocab[\"%s\"]: id %ld is used twice", name, e->string, id);
        if (tok_set_form(t, (int)id, e->string, n)) return tlm_error("%s: out of memory", name);
    }
    if (n_added && !(t->added = calloc((size_t)n_added, sizeof *t->added))) return tlm_error("%s: out of memory", name);
    cJSON_ArrayForEach(e, added) {
        tok_added *a = &t->added[t->n_added];
        json_int(get(e, "id"), 0, limit - 1, &id);
        a->id = (int)id;
        a->len = strlen(get_str(e, "content"));
        if (!(a->content = strdup(get_str(e, "content")))) return tlm_error("%s: out of memory", name);
        t->n_added++;
        a->lstrip = get_bool(e, "lstrip", 0) == 1;
        a->rstrip = get_bool(e, "rstrip", 0) == 1;
        a->special = get_bool(e, "special", 0) == 1;
        if (!t->form_len[id] && tok_set_form(t, (int)id, a->content, a->len)) return tlm_error("%s: out of memory", name);
    }
    return tok_build_vocab(t, name);
}

static int load_merges(tlm_tokenizer *t, const cJSON *merges, const char *name) {
    if (!cJSON_IsArray(merges)) return tlm_error("%s: model.merges: missing or not an array", name);
    int n = cJSON_GetArraySize(merges);
    if (tok_pairmap_init(&t->merges, (size_t)n)) return tlm_error("%s: out of memory", name);
    tlm_buf tmp = {0};
    int i = 0, rc = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, merges) {
        const char *a = NULL, *b = NULL;
        size_t al = 0, bl = 0;
        if (cJSON_IsString(m)) { /* "a b": exactly one space, as tokenizers requires */
            const char *sp = strchr(m->valuestring, ' ');
            if (sp && !strchr(sp + 1, ' ')) {
                a = m->valuestring;
                al = (size_t)(sp - a);
                b = sp + 1;
                bl = strlen(b);
            }
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
                   cJSON_IsString(m->child->next)) {
            a = m->child->valuestring;
            al = strlen(a);
            b = m->child->next->valuestring;
            bl = strlen(b);
        }
        if (!a || !al || !bl) {
            rc = tlm_error("%s: model.merges[%d]: expected \"a b\" or [\"a\", \"b\"]", name, i);
            break;
        }
        if ((rc = tok_add_merge(t, a, al, b, bl, i, &tmp, name, i))) break;
        i++;
    }
    tlm_buf_free(&tmp);
    return rc;
}

/* ---- normalizer ------------------------------------------------------------------------------------ */

static int add_norm(tlm_tokenizer *t, tok_norm_kind type, const char *a, const char *b, const char *name) {
    tok_norm *p = realloc(t->norms, (size_t)(t->n_norms + 1) * sizeof *p);
    if (!p) return tlm_error("%s: out of memory", name);
    t->norms = p;
    tok_norm *st = &t->norms[t->n_norms++];
    memset(st, 0, sizeof *st);
    st->type = type;
    if ((a && !(st->a = strdup(a))) || (b && !(st->b = strdup(b)))) return tlm_error("%s: out of memory", name);
    st->a_len = a ? strlen(a) : 0;
    st->b_len = b ? strlen(b) : 0;
    return 0;
}

static int load_normalizer(tlm_tokenizer *t, const cJSON *n, const char *name, int depth) {
    if (!n || cJSON_IsNull(n)) return 0;
    const char *type = get_str(n, "type");
    if (!type || depth > 8) return tlm_error("%s: normalizer: missing \"type\" (or nested too deep)", name);
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = get(n, "normalizers"), *e;
        if (!cJSON_IsArray(list)) return tlm_error("%s: normalizer.normalizers: not an array", name);
        cJSON_ArrayForEach(e, list) if (load_normalizer(t, e, name, depth + 1)) return -1;
        return 0;
    }
    if (strcmp(type, "NFC") == 0) return add_norm(t, TOK_NORM_NFC, NULL, NULL, name);
    if (strcmp(type, "Prepend") == 0) {
        const char *p = get_str(n, "prepend");
        if (!p || !is_utf8(p)) return tlm_error("%s: normalizer Prepend: \"prepend\" missing or not UTF-8", name);
        return add_norm(t, TOK_NORM_PREPEND, p, NULL, name);
    }
    if (strcmp(type, "Replace") == 0) {
        const char *pat = get_str(get(n, "pattern"), "String"), *content = get_str(n, "content");
        if (!pat || !content || !is_utf8(pat) || !is_utf8(content))
            return tlm_error("%s: normalizer Replace: only {\"String\": ...} patterns with a string \"content\" are supported", name);
        return add_norm(t, TOK_NORM_REPLACE, pat, content, name);
    }
    return tlm_error("%s: normalizer type \"%s\" is not supported (NFC, Prepend, Replace, Sequence are)", name, type);
}

/* ---- pre-tokenizer ---------------------------------------------------------------------------------- */

static tok_pre *add_pre(tlm_tokenizer *t, pre_type type, const char *name) {
    tok_pre *p = realloc(t->pres, (size_t)(t->n_pres + 1) * sizeof *p);
    if (!p) {
        tlm_error("%s: out of memory", name);
        return NULL;
    }
    t->pres = p;
    tok_pre *st = &t->pres[t->n_pres++];
    memset(st, 0, sizeof *st);
    st->type = type;
    return st;
}

static int load_pre(tlm_tokenizer *t, const cJSON *p, const char *name, int depth) {
    if (!p || cJSON_IsNull(p)) return 0;
    const char *type = get_str(p, "type");
    if (!type || depth > 8) return tlm_error("%s: pre_tokenizer: missing \"type\" (or nested too deep)", name);
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = get(p, "pretokenizers"), *e;
        if (!cJSON_IsArray(list)) return tlm_error("%s: pre_tokenizer.pretokenizers: not an array", name);
        cJSON_ArrayForEach(e, list) if (load_pre(t, e, name, depth + 1)) return -1;
        return 0;
    }
    if (strcmp(type, "Split") == 0) {
        const cJSON *pat = get(p, "pattern");
        const char *re = get_str(pat, "Regex"), *lit = get_str(pat, "String"), *beh = get_str(p, "behavior");
        if (!re && !lit) return tlm_error("%s: pre_tokenizer Split: pattern must be {\"Regex\": ...} or {\"String\": ...}", name);
        if (get_bool(p, "invert", 0) != 0) return tlm_error("%s: pre_tokenizer Split: invert = true is not supported", name);
        split_behavior b;
        if (!beh) return tlm_error("%s: pre_tokenizer Split: behavior missing", name);
        if (strcmp(beh, "Isolated") == 0) b = SPLIT_ISOLATED;
        else if (strcmp(beh, "Removed") == 0) b = SPLIT_REMOVED;
        else if (strcmp(beh, "MergedWithPrevious") == 0) b = SPLIT_MERGED_PREV;
        else if (strcmp(beh, "MergedWithNext") == 0) b = SPLIT_MERGED_NEXT;
        else return tlm_error("%s: pre_tokenizer Split: behavior \"%s\" is not supported", name, beh);
        tok_pre *st = add_pre(t, PRE_SPLIT, name);
        if (!st) return -1;
        st->behavior = b;
        const char *src = re ? re : lit;
        if (!is_utf8(src)) return tlm_error("%s: pre_tokenizer Split: pattern is not UTF-8", name);
        st->re = tok_regex_compile(src, strlen(src), re == NULL, name);
        if (st->re && re && !(st->pattern = strdup(re))) return tlm_error("%s: out of memory", name);
        return st->re ? 0 : -1;
    }
    if (strcmp(type, "ByteLevel") == 0) {
        tok_pre *st = add_pre(t, PRE_BYTELEVEL, name);
        if (!st) return -1;
        st->add_prefix_space = get_bool(p, "add_prefix_space", 1) == 1; /* tokenizers' default is true */
        if (get_bool(p, "use_regex", 1) == 1) {
            st->re = tok_regex_compile(tok_gpt2_pattern, strlen(tok_gpt2_pattern), 0, name);
            if (!st->re) return -1;
        }
        t->byte_level = 1;
        return 0;
    }
    if (strcmp(type, "Metaspace") == 0) {
        tok_pre *st = add_pre(t, PRE_METASPACE, name);
        if (!st) return -1;
        const char *r = get_str(p, "replacement");
        if (!r) r = "\xe2\x96\x81";
        if (!*r || !is_utf8(r) || !(st->replacement = strdup(r))) return tlm_error("%s: pre_tokenizer Metaspace: bad replacement", name);
        st->replacement_len = strlen(r);
        const char *scheme = get_str(p, "prepend_scheme");
        if (scheme) st->prepend = strcmp(scheme, "always") == 0 ? 1 : strcmp(scheme, "first") == 0 ? 2 : 0;
        else st->prepend = get_bool(p, "add_prefix_space", 1) == 1;
        st->split = get_bool(p, "split", 1) == 1;
        return 0;
    }
    return tlm_error("%s: pre_tokenizer type \"%s\" is not supported (Split, ByteLevel, Metaspace, Sequence are)", name, type);
}

/* ---- decoder: computes the decoded text of every id ------------------------------------------------- */

typedef enum { DEC_REPLACE, DEC_BYTEFALLBACK, DEC_FUSE, DEC_STRIP, DEC_BYTELEVEL, DEC_METASPACE } dec_type;
typedef struct { dec_type type; const char *a, *b; } dec_step;

static int load_decoder(tlm_tokenizer *t, const cJSON *d, dec_step *steps, int *n, const char *name, int depth) {
    if (!d || cJSON_IsNull(d)) return 0;
    const char *type = get_str(d, "type");
    if (!type || depth > 8) return tlm_error("%s: decoder: missing \"type\" (or nested too deep)", name);
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = get(d, "decoders"), *e;
        if (!cJSON_IsArray(list)) return tlm_error("%s: decoder.decoders: not an array", name);
        cJSON_ArrayForEach(e, list) if (load_decoder(t, e, steps, n, name, depth + 1)) return -1;
        return 0;
    }
    if (*n >= 16) return tlm_error("%s: decoder: too many steps", name);
    dec_step *st = &steps[(*n)++];
    memset(st, 0, sizeof *st);
    if (strcmp(type, "ByteLevel") == 0) {
        st->type = DEC_BYTELEVEL;
    } else if (strcmp(type, "ByteFallback") == 0) {
        st->type = DEC_BYTEFALLBACK;
    } else if (strcmp(type, "Fuse") == 0) {
        st->type = DEC_FUSE;
    } else if (strcmp(type, "Replace") == 0) {
        st->type = DEC_REPLACE;
        st->a = get_str(get(d, "pattern"), "String");
        st->b = get_str(d, "content");
        if (!st->a || !st->b) return tlm_error("%s: decoder Replace: only {\"String\": ...} patterns are supported", name);
    } else if (strcmp(type, "Strip") == 0) {
        long start = 0, stop = 0;
        const char *c = get_str(d, "content");
        if (!c || strcmp(c, " ") != 0 || json_int(get(d, "start"), 0, 16, &start) || json_int(get(d, "stop"), 0, 0, &stop))
            return tlm_error("%s: decoder Strip: only content \" \" with start in [0, 16] and stop 0 is supported", name);
        st->type = DEC_STRIP;
        t->strip_start = (int)start;
    } else if (strcmp(type, "Metaspace") == 0) {
        st->type = DEC_METASPACE;
        st->a = get_str(d, "replacement");
        if (!st->a || !*st->a) st->a = "\xe2\x96\x81";
        const char *scheme = get_str(d, "prepend_scheme");
        int prepend = scheme ? strcmp(scheme, "never") != 0 : get_bool(d, "add_prefix_space", 1) == 1;
        if (prepend) t->strip_start = 1;
    } else {
        return tlm_error("%s: decoder type \"%s\" is not supported (ByteLevel, Metaspace, Replace, ByteFallback, "
                         "Fuse, Strip, Sequence are)", name, type);
    }
    return 0;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int decoded_texts(tlm_tokenizer *t, const dec_step *steps, int n, const char *name) {
    for (int k = 0; k < n; k++)
        if (steps[k].type == DEC_BYTELEVEL) {
            if (n != 1) return tlm_error("%s: decoder: ByteLevel combined with other decoders is not supported", name);
            return tok_bytelevel_texts(t, name);
        }
    tlm_buf cur = {0}, next = {0};
    for (int id = 0; id < t->vocab_size; id++) {
        size_t len;
        const char *s = tok_form(t, id, &len);
        cur.len = 0;
        if (tlm_buf_put(&cur, s, len)) goto oom;
        for (int k = 0; k < n; k++) {
            const dec_step *st = &steps[k];
            if (st->type == DEC_REPLACE || st->type == DEC_METASPACE) {
                const char *a = st->a, *b = st->type == DEC_REPLACE ? st->b : " ";
                next.len = 0;
                if (tok_replace_all(&next, cur.data, cur.len, a, strlen(a), b, strlen(b))) goto oom;
                tlm_buf swap = cur;
                cur = next;
                next = swap;
            } else if (st->type == DEC_BYTEFALLBACK) {
                if (cur.len == 6 && memcmp(cur.data, "<0x", 3) == 0 && cur.data[5] == '>' && hexval(cur.data[3]) >= 0 &&
                    hexval(cur.data[4]) >= 0) {
                    cur.data[0] = (char)(hexval(cur.data[3]) * 16 + hexval(cur.data[4]));
                    cur.len = 1;
                }
            }
        }
        if (tok_set_text(t, id, cur.data, cur.len)) goto oom;
    }
    for (int k = 0; k < t->n_added; k++)
        if (tok_set_text(t, t->added[k].id, t->added[k].content, t->added[k].len)) goto oom;
    tlm_buf_free(&cur);
    tlm_buf_free(&next);
    return 0;
oom:
    tlm_buf_free(&cur);
    tlm_buf_free(&next);
    return tlm_error("%s: out of memory", name);
}

/* ---- bos / eos --------------------------------------------------------------------------------------- */

static const char *token_name(const cJSON *v) {
    if (cJSON_IsString(v)) return v->valuestring;
    return get_str(v, "content"); /* {"__type": "AddedToken", "content": ...} */
}

static int lookup(const tlm_tokenizer *t, const char *s) { return s ? tok_strmap_get(&t->vocab, s, strlen(s)) : -1; }

/* BOS from a TemplateProcessing post_processor (possibly inside a Sequence): its leading SpecialToken. */
static int template_bos(const tlm_tokenizer *t, const cJSON *pp, int depth) {
    const char *type = get_str(pp, "type");
    if (!type || depth > 8) return -1;
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *e;
        cJSON_ArrayForEach(e, get(pp, "processors")) {
            int id = template_bos(t, e, depth + 1);
            if (id >= 0) return id;
        }
        return -1;
    }
    if (strcmp(type, "TemplateProcessing") != 0) return -1;
    const cJSON *single = get(pp, "single");
    const char *tok = cJSON_IsArray(single) ? get_str(get(cJSON_GetArrayItem(single, 0), "SpecialToken"), "id") : NULL;
    if (!tok) return -1;
    const cJSON *ids = get(get(get(pp, "special_tokens"), tok), "ids");
    long id;
    if (cJSON_GetArraySize(ids) == 1 && json_int(cJSON_GetArrayItem(ids, 0), 0, t->vocab_size - 1, &id) == 0) return (int)id;
    return lookup(t, tok);
}

static void find_specials(tlm_tokenizer *t, const cJSON *j, const cJSON *config) {
    int add_bos = config ? get_bool(config, "add_bos_token", -1) : -1;
    if (add_bos == 1) t->bos = lookup(t, token_name(get(config, "bos_token")));
    else if (add_bos == 0) t->bos = -1;
    else t->bos = template_bos(t, get(j, "post_processor"), 0);
    t->eos = config ? lookup(t, token_name(get(config, "eos_token"))) : -1;
    static const char *const eos_names[] = {"</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>"};
    for (size_t k = 0; t->eos < 0 && k < sizeof eos_names / sizeof *eos_names; k++)
        for (int a = 0; a < t->n_added; a++)
            if (t->added[a].special && strcmp(t->added[a].content, eos_names[k]) == 0) {
                t->eos = t->added[a].id;
                break;
            }
}

/* ---- the loader -------------------------------------------------------------------------------------- */

tlm_tokenizer *tok_load_hf(const void *json, const void *cfg, const char *name) {
    const cJSON *j = json, *config = cfg;
    const cJSON *model = get(j, "model");
    tlm_tokenizer *t = NULL;
    if (!cJSON_IsObject(model)) {
        tlm_error("%s: model: not an object", name);
        return NULL;
    }
    const char *type = get_str(model, "type");
    if (type && strcmp(type, "BPE") != 0) {
        tlm_error("%s: model.type \"%s\" is not supported (only BPE)", name, type);
        return NULL;
    }
    if (!type && get(model, "type")) {
        tlm_error("%s: model.type: not a string", name);
        return NULL;
    }
    const cJSON *dropout = get(model, "dropout");
    if (dropout && !cJSON_IsNull(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble <= 0)) {
        tlm_error("%s: model.dropout: BPE dropout is not supported", name);
        return NULL;
    }
    const char *keys[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int k = 0; k < 2; k++) {
        const cJSON *v = get(model, keys[k]);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsString(v) && v->valuestring[0] == '\0')) {
            tlm_error("%s: model.%s: only null or \"\" is supported", name, keys[k]);
            return NULL;
        }
    }
    if (load_vocab(&t, model, get(j, "added_tokens"), name)) goto fail;
    if (load_merges(t, get(model, "merges"), name)) goto fail;
    t->byte_fallback = get_bool(model, "byte_fallback", 0) == 1;
    t->fuse_unk = get_bool(model, "fuse_unk", 0) == 1;
    t->ignore_merges = get_bool(model, "ignore_merges", 0) == 1;
    t->unk_id = lookup(t, get_str(model, "unk_token"));
    if (load_normalizer(t, get(j, "normalizer"), name, 0)) goto fail;
    if (load_pre(t, get(j, "pre_tokenizer"), name, 0)) goto fail;
    tok_setup_byte_ids(t);
    dec_step steps[16];
    int n_steps = 0;
    if (load_decoder(t, get(j, "decoder"), steps, &n_steps, name, 0)) goto fail;
    t->strip_bytes_too = 1;
    if (decoded_texts(t, steps, n_steps, name)) goto fail;
    find_specials(t, j, config);
    return t;
fail:
    tlm_tokenizer_free(t);
    return NULL;
}
