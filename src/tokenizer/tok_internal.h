/* tok_internal.h — the tokenizer struct and helpers shared by the files of src/tokenizer/.
 * Not for use outside this folder. */
#ifndef TLM_TOK_INTERNAL_H
#define TLM_TOK_INTERNAL_H

#include "tokenizer/tokenizer.h"
#include "util/buf.h"
#include "util/utf8.h"

#include <stddef.h>
#include <stdint.h>

/* ---- growable int array --------------------------------------------------------------------- */
typedef struct { int *data; size_t len, cap; } tok_ints;
int tok_ints_push(tok_ints *v, int x);
int tok_ints_put(tok_ints *v, const int *p, size_t n);

/* Appends s with every occurrence of a replaced by b (a empty: s unchanged). -1 on OOM. */
int tok_replace_all(tlm_buf *out, const char *s, size_t n, const char *a, size_t al, const char *b, size_t bl);

/* ---- string -> int hash map (keys are not copied: they must outlive the map) ------------- */
typedef struct { const char *key; uint32_t len, hash; int32_t value; } tok_strmap_slot;
typedef struct { tok_strmap_slot *slots; size_t cap, count; } tok_strmap;
int tok_strmap_init(tok_strmap *m, size_t expected);
/* Inserts key -> value. Returns 0 when inserted, 1 when the key was already there (its value is
 * kept), -1 when out of memory. */
int tok_strmap_put(tok_strmap *m, const char *key, size_t len, int value);
int tok_strmap_get(const tok_strmap *m, const char *key, size_t len); /* -1 when absent */
void tok_strmap_free(tok_strmap *m);

/* ---- (id, id) -> (rank, merged id) hash map for BPE merges --------------------------------- */
typedef struct { uint64_t key; int32_t rank, id; } tok_pairmap_slot;
typedef struct { tok_pairmap_slot *slots; size_t cap, count; } tok_pairmap;
int tok_pairmap_init(tok_pairmap *m, size_t expected);
int tok_pairmap_put(tok_pairmap *m, int a, int b, int rank, int id); /* 0 new, 1 existed, -1 OOM */
const tok_pairmap_slot *tok_pairmap_get(const tok_pairmap *m, int a, int b);
void tok_pairmap_free(tok_pairmap *m);

/* ---- the tokenizer --------------------------------------------------------------------------- */
typedef enum { TOK_BYTES, TOK_CHARS, TOK_LLAMA2C, TOK_BPE } tok_kind;

/* Normalizer steps (tokenizer.json "normalizer"), applied in order (tok_norm_kind: unrelated to
 * the model's norm_type). */
typedef enum { TOK_NORM_NFC, TOK_NORM_PREPEND, TOK_NORM_REPLACE } tok_norm_kind;
typedef struct { tok_norm_kind type; char *a, *b; size_t a_len, b_len; } tok_norm;

/* Pre-tokenizer steps (tokenizer.json "pre_tokenizer"), applied in order to every piece. */
typedef enum { PRE_SPLIT, PRE_BYTELEVEL, PRE_METASPACE } pre_type;
typedef enum { SPLIT_ISOLATED, SPLIT_REMOVED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT } split_behavior;
typedef struct {
    pre_type type;
    void *re;                 /* pcre2_code* (Split regex, or ByteLevel's GPT-2 regex when use_regex) */
    split_behavior behavior;
    int add_prefix_space;     /* ByteLevel */
    char *replacement;        /* Metaspace, e.g. U+2581 */
    size_t replacement_len;
    int prepend;              /* Metaspace: 0 never, 1 always, 2 first section only */
    int split;                /* Metaspace */
    char *pattern;            /* Split: the regex source (or NULL: a literal), to write the tokenizer back
                                 (tok_gguf.c names the pre-tokenizer by it) */
} tok_pre;

typedef struct {
    char *content; size_t len;
    int id, lstrip, rstrip, special;
} tok_added;

struct tlm_tokenizer {
    tok_kind kind;
    const char *kind_name;
    int vocab_size;
    int bos, eos;              /* bos = what encode(add_bos=1) prepends; -1 = none */
    /* per id: the vocabulary string (what merges/lookups use) and the decoded bytes, each kept
     * in its own arena; t->vocab points into form_arena, so all forms are set before it is built */
    tlm_buf form_arena, text_arena;
    size_t *form_off, *text_off;
    uint32_t *form_len, *text_len;
    tok_strmap vocab;          /* form -> id */
    int strip_start;           /* decoder drops this many leading spaces at the start / after BOS */
    int strip_bytes_too;       /* 0: like run.c, a <0xNN> piece is never stripped */

    /* llama2.c */
    float *scores;
    int space_id;              /* id of " " (dummy prefix), -1 when absent */
    int no_dummy_prefix;       /* GGUF add_space_prefix false: no leading " " (Gemma) */
    /* a GGUF SentencePiece vocabulary's own pieces and token types (to write it back as read) */
    tlm_buf piece_arena;
    size_t *piece_off;
    uint32_t *piece_len;
    unsigned char *piece_type;

    /* BPE (tokenizer.json / GPT-2) */
    tok_pairmap merges;
    int byte_level;            /* initial symbols are the byte-level chars of the UTF-8 bytes */
    int byte_id[256];          /* byte-level: id of the char standing for each byte; -1 missing */
    int byte_fallback;         /* SentencePiece-style: unknown chars become <0xNN> ids */
    int fallback_id[256];      /* id of <0xNN>, -1 when missing */
    int unk_id, fuse_unk, ignore_merges;
    tok_norm *norms; int n_norms;
    tok_pre *pres; int n_pres;
    tok_added *added; int n_added;
};

/* Allocates the per-id arrays for vocab_size ids (all empty). */
tlm_tokenizer *tok_new(tok_kind kind, const char *kind_name, int vocab_size);
/* Stores the vocabulary string / decoded text of `id` (copied into its arena, which may move:
 * do not pass a pointer into the same arena). Forms must all be set before tok_build_vocab. */
int tok_set_form(tlm_tokenizer *t, int id, const char *s, size_t n);
int tok_set_text(tlm_tokenizer *t, int id, const char *s, size_t n);
/* Builds t->vocab from the forms (ids with an empty form are skipped). On a duplicate form the
 * lowest id wins. */
int tok_build_vocab(tlm_tokenizer *t, const char *name);
static inline const char *tok_form(const tlm_tokenizer *t, int id, size_t *n) {
    *n = t->form_len[id]; return t->form_arena.data + t->form_off[id];
}
static inline const char *tok_text(const tlm_tokenizer *t, int id, size_t *n) {
    *n = t->text_len[id]; return t->text_arena.data + t->text_off[id];
}

/* Loaders (name = file name for error messages). */
tlm_tokenizer *tok_load_llama2c(const char *data, size_t len, const char *name);
tlm_tokenizer *tok_load_own(const void *json, const char *name);            /* cJSON* */
tlm_tokenizer *tok_load_hf(const void *json, const void *config, const char *name); /* cJSON*s; config may be NULL */
tlm_tokenizer *tok_load_gpt2(const char *encoder_path, const char *bpe_path);
struct tlm_gguf;
tlm_tokenizer *tok_load_gguf(const struct tlm_gguf *g, const char *name); /* tok_gguf.c */

/* Encoders: append ids for text to out. */
int tok_encode_llama2c(const tlm_tokenizer *t, const char *text, size_t len, tok_ints *out);
int tok_encode_bpe(const tlm_tokenizer *t, const char *text, size_t len, tok_ints *out);
int tok_encode_chars(const tlm_tokenizer *t, const char *text, size_t len, tok_ints *out);

/* Merge engine shared by llama2.c (best score) and BPE (lowest rank): merges the symbols
 * ids[0..n) in place and returns the new count, or (size_t)-1 when out of memory. */
size_t tok_merge_scores(const tlm_tokenizer *t, int *ids, size_t n);
size_t tok_merge_ranks(const tlm_tokenizer *t, int *ids, size_t n);

/* Byte-level BPE's byte <-> printable code point table (GPT-2 bytes_to_unicode). */
#define TOK_BYTE_CP_LIMIT 324 /* every byte maps below this code point */
void tok_byte_tables(uint32_t byte_to_cp[256], int cp_to_byte[TOK_BYTE_CP_LIMIT]); /* -1: no byte */

/* Shared by the tokenizer.json and GPT-2 loaders (tok_hf.c). */
/* Adds the merge (a, b) with `rank`: a, b and a+b must be vocabulary forms. */
int tok_add_merge(tlm_tokenizer *t, const char *a, size_t al, const char *b, size_t bl, int rank, tlm_buf *tmp,
                  const char *name, int index);
/* Fills byte_id (byte-level) and fallback_id (<0xNN>) from the vocabulary. */
void tok_setup_byte_ids(tlm_tokenizer *t);
/* Decoded text of every id with a ByteLevel decoder (chars -> bytes); ids listed as added
 * tokens keep their content. */
int tok_bytelevel_texts(tlm_tokenizer *t, const char *name);

/* Pre-tokenizer helpers (tok_pretok.c). */
void *tok_regex_compile(const char *pattern, size_t len, int literal, const char *name);
void tok_regex_free(void *re);
extern const char tok_gpt2_pattern[];

#endif
