/* tok_pretok.c — the encode pipeline of the BPE tokenizers (tokenizer.json and GPT-2), in the
 * order Hugging Face tokenizers runs it:
 *   1. the text must be valid UTF-8;
 *   2. added tokens are matched first, on the raw text, leftmost-longest (lstrip/rstrip eat
 *      the whitespace next to them);
 *   3. each stretch of text between them is normalized (NFC, Prepend, Replace),
 *   4. pre-tokenized (Split regex with PCRE2 in UTF+UCP mode, ByteLevel, Metaspace),
 *   5. and every piece goes through the BPE model (byte-level symbols or characters with
 *      <0xNN> byte fallback / unk, then merges by rank).
 * Deviation: added tokens marked "normalized": true are matched on the raw text too (HF
 * matches them after normalization); no shipped tokenizer here has one where this differs. */
#include "tokenizer/tok_internal.h"
#include "tokenizer/nfc.h"
#include "tokenizer/pcre2_use.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

/* GPT-2's pre-tokenizer regex (also what a ByteLevel pre-tokenizer with use_regex applies). */
const char tok_gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

void *tok_regex_compile(const char *pattern, size_t len, int literal, const char *name) {
    int err;
    PCRE2_SIZE at;
    uint32_t opts = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP; /* LITERAL allows no UCP */
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, opts, &err, &at, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        tlm_error("%s: pre_tokenizer pattern does not compile with PCRE2 at offset %zu: %s", name, (size_t)at, (char *)msg);
        return NULL;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: the interpreter is used if JIT is unavailable */
    return re;
}

void tok_regex_free(void *re) { pcre2_code_free(re); }

/* ---- a list of text pieces ------------------------------------------------------------------ */

typedef struct {
    tlm_buf buf;
    size_t *off, *len;
    size_t n, cap;
} pieces;

static int pieces_add(pieces *p, const char *s, size_t n) {
    if (n == 0) return 0;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        size_t *o = realloc(p->off, cap * sizeof *o);
        if (!o) return -1;
        p->off = o;
        size_t *l = realloc(p->len, cap * sizeof *l);
        if (!l) return -1;
        p->len = l;
        p->cap = cap;
    }
    p->off[p->n] = p->buf.len;
    p->len[p->n] = n;
    if (tlm_buf_put(&p->buf, s, n)) return -1;
    p->n++;
    return 0;
}

/* Appends bytes to the last piece (MergedWithPrevious); starts one when there is none. */
static int pieces_extend_last(pieces *p, const char *s, size_t n) {
    if (p->n == 0) return pieces_add(p, s, n);
    if (tlm_buf_put(&p->buf, s, n)) return -1;
    p->len[p->n - 1] += n;
    return 0;
}

static void pieces_free(pieces *p) {
    tlm_buf_free(&p->buf);
    free(p->off);
    free(p->len);
    memset(p, 0, sizeof *p);
}

/* ---- regex split --------------------------------------------------------------------------- */

typedef struct {
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
} matcher;

static int matcher_init(matcher *m) {
    memset(m, 0, sizeof *m);
    m->md = pcre2_match_data_create(1, NULL);
    m->mctx = pcre2_match_context_create(NULL);
    if (!m->md || !m->mctx) return -1;
    m->jstack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
    if (m->jstack) pcre2_jit_stack_assign(m->mctx, NULL, m->jstack);
    return 0;
}

static void matcher_free(matcher *m) {
    pcre2_match_data_free(m->md);
    pcre2_match_context_free(m->mctx);
    pcre2_jit_stack_free(m->jstack);
}

/* Splits s by the matches of re and appends the parts to out according to `behavior`. */
static int split_regex(matcher *m, const pcre2_code *re, split_behavior behavior, const char *s, size_t n, pieces *out) {
    size_t pos = 0, last = 0;
    int merge_next = 0; /* MergedWithNext: a match waits to be glued to the next part */
    size_t pending_off = 0, pending_len = 0;
    while (pos <= n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, m->md, m->mctx);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return tlm_error("tokenizer: pre-tokenizer regex failed at byte %zu: %s", pos, (char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) { /* empty match: skip one character, it stays in the next gap */
            if (ms >= n) break;
            size_t l = tlm_utf8_valid_len(s + ms, n - ms);
            pos = ms + (l ? l : 1);
            continue;
        }
        /* the gap before the match, then the match */
        const size_t parts[2][2] = {{last, ms - last}, {ms, me - ms}};
        for (int k = 0; k < 2; k++) {
            size_t po = parts[k][0], pl = parts[k][1];
            if (pl == 0) continue;
            int is_match = k == 1;
            int rc2 = 0;
            if (is_match && behavior == SPLIT_REMOVED) continue;
            if (is_match && behavior == SPLIT_MERGED_PREV) {
                rc2 = pieces_extend_last(out, s + po, pl);
            } else if (is_match && behavior == SPLIT_MERGED_NEXT) {
                if (merge_next) rc2 = pieces_add(out, s + pending_off, pending_len);
                merge_next = 1;
                pending_off = po;
                pending_len = pl;
            } else if (merge_next) { /* glue the waiting match in front of this gap */
                rc2 = pieces_add(out, s + pending_off, pending_len) || pieces_extend_last(out, s + po, pl);
                merge_next = 0;
            } else {
                rc2 = pieces_add(out, s + po, pl);
            }
            if (rc2) return tlm_error("tokenizer: out of memory");
        }
        last = pos = me;
    }
    int rc2 = 0;
    if (merge_next) {
        rc2 = pieces_add(out, s + pending_off, pending_len) || (last < n && pieces_extend_last(out, s + last, n - last));
    } else if (last < n) {
        rc2 = pieces_add(out, s + last, n - last);
    }
    return rc2 ? tlm_error("tokenizer: out of memory") : 0;
}

/* ---- normalizers ---------------------------------------------------------------------------- */

/* Normalizes s into *out (malloc'd). */
static int normalize(const tlm_tokenizer *t, const char *s, size_t n, tlm_buf *out) {
    tlm_buf cur = {0};
    if (tlm_buf_put(&cur, s, n)) goto oom;
    for (int k = 0; k < t->n_norms; k++) {
        const tok_norm *st = &t->norms[k];
        tlm_buf next = {0};
        int rc = 0;
        if (st->type == TOK_NORM_NFC) {
            size_t l;
            char *r = tlm_nfc(cur.data, cur.len, &l);
            rc = !r || tlm_buf_put(&next, r, l);
            free(r);
        } else if (st->type == TOK_NORM_PREPEND) {
            rc = cur.len > 0 ? (tlm_buf_put(&next, st->a, st->a_len) || tlm_buf_put(&next, cur.data, cur.len))
                             : tlm_buf_put(&next, "", 0);
        } else {
            rc = tok_replace_all(&next, cur.data, cur.len, st->a, st->a_len, st->b, st->b_len);
        }
        tlm_buf_free(&cur);
        cur = next;
        if (rc) goto oom;
    }
    *out = cur;
    return 0;
oom:
    tlm_buf_free(&cur);
    return tlm_error("tokenizer: out of memory");
}

/* ---- pre-tokenizers --------------------------------------------------------------------------- */

static int pre_step(const tok_pre *st, matcher *m, const pieces *in, int at_text_start, pieces *out) {
    tlm_buf tmp = {0};
    int rc = 0;
    for (size_t i = 0; i < in->n && rc == 0; i++) {
        const char *s = in->buf.data + in->off[i];
        size_t n = in->len[i];
        if (st->type == PRE_SPLIT) {
            rc = split_regex(m, st->re, st->behavior, s, n, out);
        } else if (st->type == PRE_BYTELEVEL) {
            tmp.len = 0;
            if (st->add_prefix_space && s[0] != ' ') rc = tlm_buf_put(&tmp, " ", 1);
            if (rc == 0) rc = tlm_buf_put(&tmp, s, n);
            if (rc) rc = tlm_error("tokenizer: out of memory");
            else if (st->re) rc = split_regex(m, st->re, SPLIT_ISOLATED, tmp.data, tmp.len, out);
            else if (pieces_add(out, tmp.data, tmp.len)) rc = tlm_error("tokenizer: out of memory");
        } else { /* Metaspace: spaces -> replacement, maybe prepend it, split before each one */
            tmp.len = 0;
            const char *r = st->replacement;
            size_t rl = st->replacement_len;
            int prepend = st->prepend == 1 || (st->prepend == 2 && at_text_start && i == 0);
            if (prepend && !(n >= rl && memcmp(s, r, rl) == 0)) rc = tlm_buf_put(&tmp, r, rl);
            if (rc == 0) rc = tok_replace_all(&tmp, s, n, " ", 1, r, rl);
            if (rc) {
                rc = tlm_error("tokenizer: out of memory");
                break;
            }
            if (!st->split) {
                if (pieces_add(out, tmp.data, tmp.len)) rc = tlm_error("tokenizer: out of memory");
                continue;
            }
            size_t from = 0;
            for (size_t k = 1; k + rl <= tmp.len && rc == 0; k++) {
                if (memcmp(tmp.data + k, r, rl) == 0) {
                    if (pieces_add(out, tmp.data + from, k - from)) rc = tlm_error("tokenizer: out of memory");
                    from = k;
                    k += rl - 1;
                }
            }
            if (rc == 0 && pieces_add(out, tmp.data + from, tmp.len - from)) rc = tlm_error("tokenizer: out of memory");
        }
    }
    tlm_buf_free(&tmp);
    return rc;
}

/* ---- the BPE model on one piece --------------------------------------------------------------- */

static int bpe_piece(const tlm_tokenizer *t, const char *s, size_t n, tok_ints *out) {
    size_t start = out->len;
    char u[8];
    if (t->ignore_merges) { /* the whole piece is a vocabulary entry: take it as is */
        int id;
        if (t->byte_level) {
            tlm_buf form = {0};
            int rc = 0;
            for (size_t i = 0; i < n && rc == 0; i++) {
                size_t l;
                const char *f = tok_form(t, t->byte_id[(unsigned char)s[i]] >= 0 ? t->byte_id[(unsigned char)s[i]] : 0, &l);
                rc = t->byte_id[(unsigned char)s[i]] < 0 || tlm_buf_put(&form, f, l);
            }
            id = rc == 0 ? tok_strmap_get(&t->vocab, form.data, form.len) : -1;
            tlm_buf_free(&form);
        } else {
            id = tok_strmap_get(&t->vocab, s, n);
        }
        if (id >= 0) return tok_ints_push(out, id) ? tlm_error("tokenizer: out of memory") : 0;
    }
    int last_unk = 0;
    for (size_t i = 0; i < n;) {
        if (t->byte_level) {
            int id = t->byte_id[(unsigned char)s[i]];
            if (id < 0) id = t->unk_id;
            if (id < 0) return tlm_error("tokenizer: byte 0x%02X has no byte-level token and there is no unk token", (unsigned char)s[i]);
            if (tok_ints_push(out, id)) goto oom;
            i++;
            continue;
        }
        size_t l = tlm_utf8_valid_len(s + i, n - i);
        if (!l) l = 1; /* cannot happen: text was validated */
        int id = tok_strmap_get(&t->vocab, s + i, l);
        if (id >= 0) {
            if (tok_ints_push(out, id)) goto oom;
            last_unk = 0;
        } else {
            int ok = t->byte_fallback;
            for (size_t k = 0; ok && k < l; k++) ok = t->fallback_id[(unsigned char)s[i + k]] >= 0;
            if (ok) {
                for (size_t k = 0; k < l; k++)
                    if (tok_ints_push(out, t->fallback_id[(unsigned char)s[i + k]])) goto oom;
                last_unk = 0;
            } else if (t->unk_id >= 0) {
                if (!(t->fuse_unk && last_unk) && tok_ints_push(out, t->unk_id)) goto oom;
                last_unk = 1;
            } else {
                memcpy(u, s + i, l);
                u[l] = '\0';
                return tlm_error("tokenizer: character \"%s\" is not in the vocabulary and there is no unk token", u);
            }
        }
        i += l;
    }
    size_t m = tok_merge_ranks(t, out->data + start, out->len - start);
    if (m == (size_t)-1) goto oom;
    out->len = start + m;
    return 0;
oom:
    return tlm_error("tokenizer: out of memory");
}

/* ---- one stretch of text between added tokens -------------------------------------------------- */

static int encode_section(const tlm_tokenizer *t, matcher *m, const char *s, size_t n, int at_text_start, tok_ints *out) {
    tlm_buf norm = {0};
    pieces cur = {0}, next = {0};
    int rc = normalize(t, s, n, &norm);
    if (rc == 0 && norm.len > 0) {
        if (pieces_add(&cur, norm.data, norm.len)) rc = tlm_error("tokenizer: out of memory");
        for (int k = 0; rc == 0 && k < t->n_pres; k++) {
            rc = pre_step(&t->pres[k], m, &cur, at_text_start, &next);
            pieces_free(&cur);
            cur = next;
            memset(&next, 0, sizeof next);
        }
        for (size_t i = 0; rc == 0 && i < cur.n; i++) rc = bpe_piece(t, cur.buf.data + cur.off[i], cur.len[i], out);
    }
    tlm_buf_free(&norm);
    pieces_free(&cur);
    pieces_free(&next);
    return rc;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* The longest added token starting at s[i], or -1. */
static int added_at(const tlm_tokenizer *t, const char *s, size_t n, size_t i) {
    int best = -1;
    for (int k = 0; k < t->n_added; k++) {
        const tok_added *a = &t->added[k];
        if (a->len == 0 || a->len > n - i || (best >= 0 && a->len <= t->added[best].len)) continue;
        if (memcmp(s + i, a->content, a->len) == 0) best = k;
    }
    return best;
}

int tok_encode_bpe(const tlm_tokenizer *t, const char *text, size_t len, tok_ints *out) {
    size_t bad = tlm_utf8_check(text, len);
    if (bad != len) return tlm_error("tokenizer: text is not valid UTF-8 (byte %zu)", bad);
    unsigned char first[256] = {0}; /* first bytes of added tokens, to skip most positions fast */
    for (int k = 0; k < t->n_added; k++)
        if (t->added[k].len) first[(unsigned char)t->added[k].content[0]] = 1;
    matcher m;
    if (matcher_init(&m)) {
        matcher_free(&m);
        return tlm_error("tokenizer: out of memory");
    }
    int rc = 0;
    size_t sec = 0; /* start of the current plain-text section */
    size_t i = 0;
    while (rc == 0 && i < len) {
        int k = first[(unsigned char)text[i]] ? added_at(t, text, len, i) : -1;
        if (k < 0) {
            i++;
            continue;
        }
        const tok_added *a = &t->added[k];
        size_t end = i;
        if (a->lstrip)
            while (end > sec && is_space(text[end - 1])) end--;
        rc = encode_section(t, &m, text + sec, end - sec, sec == 0, out);
        if (rc == 0 && tok_ints_push(out, a->id)) rc = tlm_error("tokenizer: out of memory");
        i += a->len;
        if (a->rstrip)
            while (i < len && is_space(text[i])) i++;
        sec = i;
    }
    if (rc == 0 && sec < len) rc = encode_section(t, &m, text + sec, len - sec, sec == 0, out);
    matcher_free(&m);
    return rc;
}
