/* tok_util.c — small containers (int array, hash maps, replace-all) and the GPT-2 byte <-> code point table used by the tokenizers. */
#include "tokenizer/tok_internal.h"
#include "util/error.h"
#include "util/io.h"

#include <stdlib.h>
#include <string.h>

/* ---- buffers ------------------------------------------------------------------------------- */

int tok_ints_push(tok_ints *v, int x) {
    if (tlm_grow_array((void **)&v->data, &v->cap, v->len + 1, sizeof(int))) return -1;
    v->data[v->len++] = x;
    return 0;
}

int tok_ints_put(tok_ints *v, const int *p, size_t n) {
    if (tlm_grow_array((void **)&v->data, &v->cap, v->len + n, sizeof(int))) return -1;
    if (n) memcpy(v->data + v->len, p, n * sizeof(int));
    v->len += n;
    return 0;
}

int tok_replace_all(tlm_buf *out, const char *s, size_t n, const char *a, size_t al, const char *b, size_t bl) {
    size_t i = 0, from = 0;
    if (al == 0) return tlm_buf_put(out, s, n);
    while (i + al <= n) {
        if (memcmp(s + i, a, al) == 0) {
            if (tlm_buf_put(out, s + from, i - from) || tlm_buf_put(out, b, bl)) return -1;
            i += al;
            from = i;
        } else {
            i++;
        }
    }
    return tlm_buf_put(out, s + from, n - from);
}

/* ---- string map: open addressing, linear probing, FNV-1a ----------------------------------- */

static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c *= 2;
    return c;
}

int tok_strmap_init(tok_strmap *m, size_t expected) {
    m->cap = pow2_at_least(expected * 2 + 1);
    m->count = 0;
    m->slots = calloc(m->cap, sizeof *m->slots);
    return m->slots ? 0 : -1;
}

static int strmap_grow(tok_strmap *m) {
    tok_strmap bigger;
    bigger.cap = m->cap * 2;
    bigger.count = m->count;
    bigger.slots = calloc(bigger.cap, sizeof *bigger.slots);
    if (!bigger.slots) return -1;
    for (size_t i = 0; i < m->cap; i++) {
        tok_strmap_slot *s = &m->slots[i];
        if (!s->key) continue;
        size_t j = s->hash & (bigger.cap - 1);
        while (bigger.slots[j].key) j = (j + 1) & (bigger.cap - 1);
        bigger.slots[j] = *s;
    }
    free(m->slots);
    *m = bigger;
    return 0;
}

int tok_strmap_put(tok_strmap *m, const char *key, size_t len, int value) {
    if ((m->count + 1) * 2 > m->cap && strmap_grow(m)) return -1;
    uint32_t h = hash_bytes(key, len);
    size_t j = h & (m->cap - 1);
    while (m->slots[j].key) {
        tok_strmap_slot *s = &m->slots[j];
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0) return 1;
        j = (j + 1) & (m->cap - 1);
    }
    /* an empty key still needs a non-NULL pointer to mark the slot used */
    m->slots[j].key = key ? key : "";
    m->slots[j].len = (uint32_t)len;
    m->slots[j].hash = h;
    m->slots[j].value = value;
    m->count++;
    return 0;
}

int tok_strmap_get(const tok_strmap *m, const char *key, size_t len) {
    if (!m->slots) return -1;
    uint32_t h = hash_bytes(key, len);
    size_t j = h & (m->cap - 1);
    while (m->slots[j].key) {
        const tok_strmap_slot *s = &m->slots[j];
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0) return s->value;
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

void tok_strmap_free(tok_strmap *m) {
    free(m->slots);
    m->slots = NULL;
    m->cap = m->count = 0;
}

/* ---- pair map -------------------------------------------------------------------------------- */

static uint64_t pair_key(int a, int b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }

static size_t pair_slot(uint64_t k, size_t cap) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k & (cap - 1);
}

/* key 0 would be the pair (0, 0); mark empty slots with id = -1 instead */
int tok_pairmap_init(tok_pairmap *m, size_t expected) {
    m->cap = pow2_at_least(expected * 2 + 1);
    m->count = 0;
    m->slots = malloc(m->cap * sizeof *m->slots);
    if (!m->slots) return -1;
    for (size_t i = 0; i < m->cap; i++) m->slots[i].id = -1;
    return 0;
}

static int pairmap_grow(tok_pairmap *m) {
    tok_pairmap bigger;
    bigger.cap = m->cap * 2;
    bigger.count = m->count;
    bigger.slots = malloc(bigger.cap * sizeof *bigger.slots);
    if (!bigger.slots) return -1;
    for (size_t i = 0; i < bigger.cap; i++) bigger.slots[i].id = -1;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].id < 0) continue;
        size_t j = pair_slot(m->slots[i].key, bigger.cap);
        while (bigger.slots[j].id >= 0) j = (j + 1) & (bigger.cap - 1);
        bigger.slots[j] = m->slots[i];
    }
    free(m->slots);
    *m = bigger;
    return 0;
}

int tok_pairmap_put(tok_pairmap *m, int a, int b, int rank, int id) {
    if ((m->count + 1) * 2 > m->cap && pairmap_grow(m)) return -1;
    uint64_t k = pair_key(a, b);
    size_t j = pair_slot(k, m->cap);
    while (m->slots[j].id >= 0) {
        if (m->slots[j].key == k) return 1;
        j = (j + 1) & (m->cap - 1);
    }
    m->slots[j].key = k;
    m->slots[j].rank = rank;
    m->slots[j].id = id;
    m->count++;
    return 0;
}

const tok_pairmap_slot *tok_pairmap_get(const tok_pairmap *m, int a, int b) {
    if (!m->slots) return NULL;
    uint64_t k = pair_key(a, b);
    size_t j = pair_slot(k, m->cap);
    while (m->slots[j].id >= 0) {
        if (m->slots[j].key == k) return &m->slots[j];
        j = (j + 1) & (m->cap - 1);
    }
    return NULL;
}

void tok_pairmap_free(tok_pairmap *m) {
    free(m->slots);
    m->slots = NULL;
    m->cap = m->count = 0;
}

/* ---- GPT-2 byte-level table ------------------------------------------------------------------ */

/* Printable bytes stand for themselves; the others (0-32, 127-160, 173) get the code points
 * 256, 257, ... in byte order. */
static int printable(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

void tok_byte_tables(uint32_t byte_to_cp[256], int cp_to_byte[TOK_BYTE_CP_LIMIT]) {
    for (int i = 0; i < TOK_BYTE_CP_LIMIT; i++) cp_to_byte[i] = -1;
    uint32_t n = 0;
    for (int b = 0; b < 256; b++) {
        uint32_t cp = printable(b) ? (uint32_t)b : 256 + n++;
        byte_to_cp[b] = cp;
        cp_to_byte[cp] = b;
    }
}
