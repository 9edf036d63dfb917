/* gguf.c — read (versions 2 and 3) and write (version 3) GGUF files. See gguf.h for the layout
 * and the rules; ggml-org/ggml docs/gguf.md is the reference.
 *
 * Reading: the whole file is mapped (or an in-memory image copied) and walked once with a cursor
 * that checks every length against the bytes left before it moves. Counts are checked against
 * the smallest size their elements can have, so a hostile count fails before anything is
 * allocated for it; all arithmetic on file values is overflow-checked. Metadata values stay in
 * the image: an entry keeps a pointer to its value (for arrays of numbers, to the first element,
 * so element i is at a fixed stride); arrays of strings get a (pointer, length) per element so
 * that element i is O(1). Nested arrays are checked (to GGUF_MAX_NESTING levels) but not indexed:
 * the accessors read one level. */
#include "gguf.h"

#include "ops/quant.h"
#include "util/atomic_file.h"
#include "util/buf.h"
#include "util/error.h"
#include "util/finite.h"
#include "util/io.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "GGUF data is read as little-endian; this reader assumes a little-endian host"
#endif

#define GGUF_MAX_NESTING 8      /* arrays of arrays: levels, the outermost counted */
#define GGUF_MAX_KEY 65535      /* the spec's limit on a key's bytes */
#define GGUF_MAX_NAME 64        /* the spec's limit on a tensor name's bytes */
#define GGUF_MIN_KV 14          /* key length 8 + 1 byte + type 4 + the smallest value (1) */
#define GGUF_MIN_TENSOR 33      /* name length 8 + 1 + n_dims 4 + one ne 8 + type 4 + offset 8 */
#define SHOW 200                /* at most this many bytes of a key or name in a message */

/* bytes of one value of each fixed-size type (0: string, array) */
static const size_t TYPE_SIZE[GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

typedef struct {
    gguf_kv pub;              /* first member: a gguf_kv pointer handed out is an entry pointer */
    const unsigned char *val; /* scalars: the value; arrays: the first element */
    gguf_str str;             /* a STRING value */
    gguf_str *strs;           /* an array of strings: each element (NULL when empty) */
} kv_entry;

typedef struct {
    gguf_tensor pub; /* first member, as above */
    int sized;       /* the byte size is known (a type tinylm knows, or no elements) */
} tensor_entry;

struct tlm_gguf {
    char *label;
    unsigned char *base;
    size_t len;
    int mapped; /* base is a mapping (else malloc'd; NULL after detach) */
    uint32_t version;
    size_t alignment;
    size_t n_kv, n_t;
    kv_entry *kv;
    kv_entry **kv_sorted; /* by key, for lookup */
    tensor_entry *t;
    tensor_entry **t_sorted; /* by name */
    size_t data_start, data_len;
};

static int str_cmp(const gguf_str *a, const gguf_str *b) {
    size_t n = a->len < b->len ? (size_t)a->len : (size_t)b->len;
    int c = n ? memcmp(a->p, b->p, n) : 0;
    if (c)
        return c;
    return a->len < b->len ? -1 : a->len > b->len;
}

static int show_len(const gguf_str *s) { return s->len > SHOW ? SHOW : (int)s->len; }

const char *tlm_gguf_type_name(gguf_type t) {
    static const char *const names[GGUF_TYPE_COUNT] = {"uint8", "int8",   "uint16", "int16", "uint32",
                                                       "int32", "float32", "bool",  "string", "array",
                                                       "uint64", "int64", "float64"};
    return (unsigned)t < GGUF_TYPE_COUNT ? names[t] : "invalid type";
}

static int is_int_type(gguf_type t) {
    return t == GGUF_UINT8 || t == GGUF_INT8 || t == GGUF_UINT16 || t == GGUF_INT16 || t == GGUF_UINT32 ||
           t == GGUF_INT32 || t == GGUF_UINT64 || t == GGUF_INT64;
}

/* ---- the cursor ------------------------------------------------------------------------------ */

typedef struct {
    const unsigned char *b;
    size_t pos, len;
} cursor;

static size_t left(const cursor *c) { return c->len - c->pos; }

static int need(const cursor *c, size_t n, const char *what) {
    if (n <= left(c))
        return 0;
    return tlm_error("%s at byte %zu needs %zu bytes, but the file ends at byte %zu", what, c->pos, n, c->len);
}

static int rd_u32(cursor *c, uint32_t *v, const char *what) {
    if (need(c, 4, what))
        return -1;
    memcpy(v, c->b + c->pos, 4);
    c->pos += 4;
    return 0;
}

static int rd_u64(cursor *c, uint64_t *v, const char *what) {
    if (need(c, 8, what))
        return -1;
    memcpy(v, c->b + c->pos, 8);
    c->pos += 8;
    return 0;
}

static int rd_str(cursor *c, gguf_str *s, const char *what) {
    uint64_t n;
    if (left(c) < 8)
        return tlm_error("%s length at byte %zu needs 8 bytes, but the file ends at byte %zu", what, c->pos, c->len);
    memcpy(&n, c->b + c->pos, 8);
    if (n > left(c) - 8)
        return tlm_error("%s length %llu at byte %zu runs past the end of the file (%zu bytes left)", what,
                         (unsigned long long)n, c->pos, left(c) - 8);
    c->pos += 8;
    s->p = (const char *)c->b + c->pos;
    s->len = n;
    c->pos += (size_t)n;
    return 0;
}

/* ---- metadata values ------------------------------------------------------------------------- */

/* the index of the first of count bools that is not 0 or 1, or count */
static uint64_t bad_bool(const unsigned char *p, uint64_t count) {
    uint64_t i = 0;
    while (i < count && p[i] <= 1)
        i++;
    return i;
}

/* An array at the cursor (element type, count, elements) of nesting level `depth` (1 for a
 * key's own array); fills e when it is a key's own array (NULL for nested ones). */
static int parse_array(cursor *c, kv_entry *e, int depth) {
    uint32_t et;
    uint64_t count;
    if (rd_u32(c, &et, "array element type"))
        return -1;
    if (et >= GGUF_TYPE_COUNT)
        return tlm_error("array element type %u at byte %zu is not a GGUF value type (0..%d)", et, c->pos - 4,
                         GGUF_TYPE_COUNT - 1);
    if (et == GGUF_ARRAY && depth >= GGUF_MAX_NESTING)
        return tlm_error("arrays nested more than %d deep (at byte %zu)", GGUF_MAX_NESTING, c->pos - 4);
    if (rd_u64(c, &count, "array count"))
        return -1;
    size_t min = et == GGUF_STRING ? 8 : et == GGUF_ARRAY ? 12 : TYPE_SIZE[et];
    if (count > left(c) / min)
        return tlm_error("an array of %llu %s elements (count at byte %zu) cannot fit in the %zu bytes left in the "
                         "file", (unsigned long long)count, tlm_gguf_type_name((gguf_type)et), c->pos - 8, left(c));
    if (e) {
        e->pub.elem_type = (gguf_type)et;
        e->pub.count = count;
        e->val = c->b + c->pos;
    }
    if (et == GGUF_STRING) {
        if (e && count && !(e->strs = malloc((size_t)count * sizeof *e->strs)))
            return tlm_error("out of memory for an array of %llu strings", (unsigned long long)count);
        for (uint64_t i = 0; i < count; i++) {
            gguf_str s;
            if (rd_str(c, e ? &e->strs[i] : &s, "string"))
                return tlm_error_prefix("element %llu", (unsigned long long)i);
        }
    } else if (et == GGUF_ARRAY) {
        for (uint64_t i = 0; i < count; i++)
            if (parse_array(c, NULL, depth + 1))
                return tlm_error_prefix("element %llu", (unsigned long long)i);
    } else {
        size_t n = (size_t)count * TYPE_SIZE[et]; /* fits: count <= left / size */
        uint64_t bad = et == GGUF_BOOL ? bad_bool(c->b + c->pos, count) : count;
        if (bad < count)
            return tlm_error("element %llu: bool value %u at byte %zu is not 0 or 1", (unsigned long long)bad,
                             c->b[c->pos + (size_t)bad], c->pos + (size_t)bad);
        c->pos += n;
    }
    return 0;
}

static int parse_value(cursor *c, kv_entry *e) {
    gguf_type t = e->pub.type;
    e->pub.elem_type = t;
    e->pub.count = 1;
    e->val = c->b + c->pos;
    if (t == GGUF_ARRAY)
        return parse_array(c, e, 1);
    if (t == GGUF_STRING)
        return rd_str(c, &e->str, "string value");
    char what[32];
    snprintf(what, sizeof what, "%s value", tlm_gguf_type_name(t));
    if (need(c, TYPE_SIZE[t], what))
        return -1;
    if (t == GGUF_BOOL && c->b[c->pos] > 1)
        return tlm_error("bool value %u at byte %zu is not 0 or 1", c->b[c->pos], c->pos);
    c->pos += TYPE_SIZE[t];
    return 0;
}

/* ---- the file -------------------------------------------------------------------------------- */

static int kv_cmp(const void *a, const void *b) {
    const kv_entry *x = *(const kv_entry *const *)a, *y = *(const kv_entry *const *)b;
    int c = str_cmp(&x->pub.key, &y->pub.key);
    return c ? c : (x < y ? -1 : x > y);
}

static int name_cmp(const void *a, const void *b) {
    const tensor_entry *x = *(const tensor_entry *const *)a, *y = *(const tensor_entry *const *)b;
    int c = str_cmp(&x->pub.name, &y->pub.name);
    return c ? c : (x < y ? -1 : x > y);
}

/* by offset; at one offset, the tensors of no bytes first (they may share it with the next) */
static int offset_cmp(const void *a, const void *b) {
    const tensor_entry *x = *(const tensor_entry *const *)a, *y = *(const tensor_entry *const *)b;
    if (x->pub.offset != y->pub.offset)
        return x->pub.offset < y->pub.offset ? -1 : 1;
    int xe = x->sized && x->pub.nbytes == 0, ye = y->sized && y->pub.nbytes == 0;
    if (xe != ye)
        return xe ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int parse_metadata(tlm_gguf *g, cursor *c) {
    const char *f = g->label;
    for (size_t i = 0; i < g->n_kv; i++) {
        kv_entry *e = &g->kv[i];
        gguf_str *k = &e->pub.key;
        if (rd_str(c, k, "key"))
            return tlm_error_prefix("%s: metadata entry #%zu", f, i);
        if (k->len == 0)
            return tlm_error("%s: metadata entry #%zu has an empty key", f, i);
        if (k->len > GGUF_MAX_KEY)
            return tlm_error("%s: metadata entry #%zu: its key of %llu bytes is longer than the %d bytes GGUF allows",
                             f, i, (unsigned long long)k->len, GGUF_MAX_KEY);
        if (memchr(k->p, 0, (size_t)k->len))
            return tlm_error("%s: metadata entry #%zu: key '%.*s' holds a NUL byte", f, i, show_len(k), k->p);
        uint32_t t;
        if (rd_u32(c, &t, "value type"))
            return tlm_error_prefix("%s: key '%.*s'", f, show_len(k), k->p);
        if (t >= GGUF_TYPE_COUNT)
            return tlm_error("%s: key '%.*s': value type %u is not a GGUF value type (0..%d)", f, show_len(k), k->p, t,
                             GGUF_TYPE_COUNT - 1);
        e->pub.type = (gguf_type)t;
        if (parse_value(c, e))
            return tlm_error_prefix("%s: key '%.*s'", f, show_len(k), k->p);
    }
    if (!(g->kv_sorted = malloc((g->n_kv + 1) * sizeof *g->kv_sorted)))
        return tlm_error("%s: out of memory", f);
    for (size_t i = 0; i < g->n_kv; i++)
        g->kv_sorted[i] = &g->kv[i];
    qsort(g->kv_sorted, g->n_kv, sizeof *g->kv_sorted, kv_cmp);
    for (size_t i = 1; i < g->n_kv; i++) {
        const kv_entry *a = g->kv_sorted[i - 1], *b = g->kv_sorted[i];
        if (str_cmp(&a->pub.key, &b->pub.key) == 0)
            return tlm_error("%s: key '%.*s' appears twice (metadata entries #%zu and #%zu)", f, show_len(&a->pub.key),
                             a->pub.key.p, (size_t)(a - g->kv), (size_t)(b - g->kv));
    }
    const gguf_kv *al = tlm_gguf_find(g, "general.alignment");
    g->alignment = TLM_GGUF_DEFAULT_ALIGNMENT;
    if (al) {
        if (al->type != GGUF_UINT32)
            return tlm_error("%s: key 'general.alignment' must be a uint32, not %s%s", f,
                             al->type == GGUF_ARRAY ? "an array of " : "",
                             tlm_gguf_type_name(al->type == GGUF_ARRAY ? al->elem_type : al->type));
        uint32_t a;
        memcpy(&a, ((const kv_entry *)al)->val, 4);
        if (a == 0 || (a & (a - 1)) != 0)
            return tlm_error("%s: key 'general.alignment' = %u is not a power of two", f, a);
        g->alignment = a;
    }
    return 0;
}

static int parse_tensor_infos(tlm_gguf *g, cursor *c) {
    const char *f = g->label;
    for (size_t i = 0; i < g->n_t; i++) {
        tensor_entry *te = &g->t[i];
        gguf_tensor *t = &te->pub;
        gguf_str *n = &t->name;
        if (rd_str(c, n, "name"))
            return tlm_error_prefix("%s: tensor #%zu", f, i);
        if (n->len == 0)
            return tlm_error("%s: tensor #%zu has an empty name", f, i);
        if (n->len > GGUF_MAX_NAME)
            return tlm_error("%s: tensor #%zu: its name of %llu bytes ('%.*s...') is longer than the %d bytes GGUF "
                             "allows", f, i, (unsigned long long)n->len, 64, n->p, GGUF_MAX_NAME);
        if (memchr(n->p, 0, (size_t)n->len))
            return tlm_error("%s: tensor #%zu: name '%.*s' holds a NUL byte", f, i, show_len(n), n->p);
        uint32_t nd, type;
        if (rd_u32(c, &nd, "n_dims"))
            return tlm_error_prefix("%s: tensor '%.*s'", f, show_len(n), n->p);
        if (nd < 1 || nd > TLM_GGUF_MAX_DIMS)
            return tlm_error("%s: tensor '%.*s': n_dims %u is outside 1..%d", f, show_len(n), n->p, nd,
                             TLM_GGUF_MAX_DIMS);
        t->n_dims = (int)nd;
        for (int d = 0; d < TLM_GGUF_MAX_DIMS; d++)
            t->ne[d] = 1;
        for (int d = 0; d < (int)nd; d++) {
            uint64_t v;
            char what[16];
            snprintf(what, sizeof what, "ne[%d]", d);
            if (rd_u64(c, &v, what))
                return tlm_error_prefix("%s: tensor '%.*s'", f, show_len(n), n->p);
            if (v > (uint64_t)INT64_MAX)
                return tlm_error("%s: tensor '%.*s': ne[%d] = %lld is negative", f, show_len(n), n->p, d,
                                 (long long)(int64_t)v);
            t->ne[d] = (int64_t)v;
        }
        if (rd_u32(c, &type, "type") || rd_u64(c, &t->offset, "offset"))
            return tlm_error_prefix("%s: tensor '%.*s'", f, show_len(n), n->p);
        if (type >= WQ_TYPE_LIMIT)
            return tlm_error("%s: tensor '%.*s': type %u is not a ggml type (they are below %d)", f, show_len(n), n->p,
                             type, WQ_TYPE_LIMIT);
        t->type = (int)type;
    }
    if (!(g->t_sorted = malloc((g->n_t + 1) * sizeof *g->t_sorted)))
        return tlm_error("%s: out of memory", f);
    for (size_t i = 0; i < g->n_t; i++)
        g->t_sorted[i] = &g->t[i];
    qsort(g->t_sorted, g->n_t, sizeof *g->t_sorted, name_cmp);
    for (size_t i = 1; i < g->n_t; i++) {
        const tensor_entry *a = g->t_sorted[i - 1], *b = g->t_sorted[i];
        if (str_cmp(&a->pub.name, &b->pub.name) == 0)
            return tlm_error("%s: tensor name '%.*s' appears twice (tensors #%zu and #%zu)", f, show_len(&a->pub.name),
                             a->pub.name.p, (size_t)(a - g->t), (size_t)(b - g->t));
    }
    return 0;
}

static char *shape_str(char *buf, size_t size, const gguf_tensor *t) {
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < t->n_dims && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, d ? ", %lld" : "%lld", (long long)t->ne[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

/* The byte size of a tensor from its type and shape (te->sized = 0 for a type without a known
 * size), then its place: aligned, inside the data section. */
static int size_tensor(tlm_gguf *g, tensor_entry *te) {
    const char *f = g->label;
    gguf_tensor *t = &te->pub;
    const gguf_str *n = &t->name;
    char s[128];
    int64_t numel = 1;
    int empty = 0;
    for (int d = 0; d < t->n_dims; d++)
        empty |= t->ne[d] == 0;
    for (int d = 0; d < t->n_dims && !empty; d++) {
        if (t->ne[d] > INT64_MAX / numel)
            return tlm_error("%s: tensor '%.*s': the element count of shape %s overflows", f, show_len(n), n->p,
                             shape_str(s, sizeof s, t));
        numel *= t->ne[d];
    }
    uint64_t nbytes = 0;
    te->sized = empty || wq_supported(t->type);
    if (!empty && te->sized) {
        int64_t be = wq_block_elems(t->type);
        uint64_t bb = wq_block_bytes(t->type);
        if (be <= 0 || bb == 0)
            return tlm_error("%s: tensor '%.*s': type %s has no block size", f, show_len(n), n->p, wq_name(t->type));
        if (t->ne[0] % be)
            return tlm_error("%s: tensor '%.*s': ne[0] = %lld is not a multiple of the %lld-element block of %s", f,
                             show_len(n), n->p, (long long)t->ne[0], (long long)be, wq_name(t->type));
        uint64_t rows = (uint64_t)(numel / t->ne[0]), blocks = (uint64_t)(t->ne[0] / be), row;
        if (__builtin_mul_overflow(blocks, bb, &row) || __builtin_mul_overflow(row, rows, &nbytes) ||
            nbytes > SIZE_MAX)
            return tlm_error("%s: tensor '%.*s': the byte size of %s %s overflows", f, show_len(n), n->p,
                             wq_name(t->type), shape_str(s, sizeof s, t));
        size_t check = wq_row_bytes(t->type, t->ne[0]);
        if (check != row)
            return tlm_error("%s: tensor '%.*s': %s rows of %lld elements: %zu bytes by ops/quant.h, %llu by its "
                             "blocks", f, show_len(n), n->p, wq_name(t->type), (long long)t->ne[0], check,
                             (unsigned long long)row);
    }
    t->nbytes = (size_t)nbytes;
    if (t->offset % g->alignment)
        return tlm_error("%s: tensor '%.*s': offset %llu is not a multiple of the alignment %zu", f, show_len(n), n->p,
                         (unsigned long long)t->offset, g->alignment);
    if (t->offset > g->data_len || nbytes > g->data_len - t->offset)
        return tlm_error("%s: tensor '%.*s': %s %s: %llu bytes at offset %llu run past the end of the data section "
                         "(%zu bytes, from byte %zu of the file)", f, show_len(n), n->p, wq_name(t->type),
                         shape_str(s, sizeof s, t), (unsigned long long)nbytes, (unsigned long long)t->offset,
                         g->data_len, g->data_start);
    if (!te->sized && t->offset == g->data_len)
        return tlm_error("%s: tensor '%.*s': offset %llu is the end of the data section (%zu bytes): no room for "
                         "its data", f, show_len(n), n->p, (unsigned long long)t->offset, g->data_len);
    t->data = g->base + g->data_start + t->offset;
    return 0;
}

/* No two tensors' bytes overlap (a tensor of unknown size reaches to the next one's offset). */
static int check_overlaps(tlm_gguf *g) {
    tensor_entry **by = malloc((g->n_t + 1) * sizeof *by);
    if (!by)
        return tlm_error("%s: out of memory", g->label);
    for (size_t i = 0; i < g->n_t; i++)
        by[i] = &g->t[i];
    qsort(by, g->n_t, sizeof *by, offset_cmp);
    uint64_t cursor = 0, prev_begin = 0;
    const tensor_entry *prev = NULL;
    int rc = 0;
    for (size_t i = 0; i < g->n_t && rc == 0; i++) {
        const gguf_tensor *t = &by[i]->pub;
        if (prev && t->offset < cursor) {
            const gguf_str *a = &t->name, *b = &prev->pub.name;
            if (!prev->sized)
                rc = tlm_error("%s: tensor '%.*s' at offset %llu overlaps tensor '%.*s' (at offset %llu, of type %s, "
                               "which tinylm cannot size: its data reaches to the next tensor's offset)", g->label,
                               show_len(a), a->p, (unsigned long long)t->offset, show_len(b), b->p,
                               (unsigned long long)prev_begin, wq_name(prev->pub.type));
            else
                rc = tlm_error("%s: tensor '%.*s' at offset %llu overlaps tensor '%.*s' (data bytes [%llu, %llu))",
                           g->label, show_len(a), a->p, (unsigned long long)t->offset, show_len(b), b->p,
                           (unsigned long long)prev_begin, (unsigned long long)cursor);
            break;
        }
        if (by[i]->sized && t->nbytes == 0)
            continue;
        prev = by[i];
        prev_begin = t->offset;
        /* unknown size: up to the next tensor (at the same offset: an overlap, found next) */
        cursor = by[i]->sized ? t->offset + t->nbytes : i + 1 < g->n_t ? by[i + 1]->pub.offset : g->data_len;
        if (!by[i]->sized && cursor == t->offset)
            cursor++;
    }
    free(by);
    return rc;
}

static int parse(tlm_gguf *g) {
    const char *f = g->label;
    cursor c = {g->base, 0, g->len};
    if (g->len < 4 || memcmp(g->base, "GGUF", 4) != 0)
        return tlm_error("%s: not a GGUF file (it does not start with the magic 'GGUF')", f);
    c.pos = 4;
    uint32_t v;
    if (rd_u32(&c, &v, "version"))
        return tlm_error_prefix("%s", f);
    if (v == 1)
        return tlm_error("%s: GGUF version 1 is not supported (only versions 2 and 3: version 1 had 32-bit counts "
                         "and lengths; convert the model again with a current llama.cpp)", f);
    if (v == 0x01000000u || v == 0x02000000u || v == 0x03000000u)
        return tlm_error("%s: big-endian GGUF is not supported (the version field reads %u byte-swapped)", f,
                         v >> 24);
    if (v != 2 && v != 3)
        return tlm_error("%s: GGUF version %u is not supported (only versions 2 and 3)", f, v);
    g->version = v;
    uint64_t n_t, n_kv;
    if (rd_u64(&c, &n_t, "tensor count") || rd_u64(&c, &n_kv, "metadata count"))
        return tlm_error_prefix("%s", f);
    if (n_kv > left(&c) / GGUF_MIN_KV)
        return tlm_error("%s: metadata count %llu cannot fit in the %zu bytes after the header (an entry takes at "
                         "least %d)", f, (unsigned long long)n_kv, left(&c), GGUF_MIN_KV);
    if (n_t > left(&c) / GGUF_MIN_TENSOR)
        return tlm_error("%s: tensor count %llu cannot fit in the %zu bytes after the header (a tensor's entry "
                         "takes at least %d)", f, (unsigned long long)n_t, left(&c), GGUF_MIN_TENSOR);
    if (!(g->kv = calloc((size_t)n_kv + 1, sizeof *g->kv)))
        return tlm_error("%s: out of memory for %llu metadata entries", f, (unsigned long long)n_kv);
    g->n_kv = (size_t)n_kv;
    if (parse_metadata(g, &c))
        return -1;
    if (n_t > left(&c) / GGUF_MIN_TENSOR)
        return tlm_error("%s: tensor count %llu cannot fit in the %zu bytes after the metadata (a tensor's entry "
                         "takes at least %d)", f, (unsigned long long)n_t, left(&c), GGUF_MIN_TENSOR);
    if (!(g->t = calloc((size_t)n_t + 1, sizeof *g->t)))
        return tlm_error("%s: out of memory for %llu tensors", f, (unsigned long long)n_t);
    g->n_t = (size_t)n_t;
    if (parse_tensor_infos(g, &c))
        return -1;
    size_t end = c.pos, pad = (g->alignment - end % g->alignment) % g->alignment;
    if (pad > g->len - end) {
        if (g->n_t)
            return tlm_error("%s: the file ends at byte %zu, before its data section (at byte %zu, the end of the "
                             "header %zu aligned to %zu)", f, g->len, end + pad, end, g->alignment);
        pad = g->len - end; /* no tensors: the padding may be left out */
    }
    g->data_start = end + pad;
    g->data_len = g->len - g->data_start;
    for (size_t i = 0; i < g->n_t; i++)
        if (size_tensor(g, &g->t[i]))
            return -1;
    return check_overlaps(g);
}

static tlm_gguf *gguf_new(const char *label) {
    tlm_gguf *g = calloc(1, sizeof *g);
    if (g && !(g->label = strdup(label))) {
        free(g);
        g = NULL;
    }
    if (!g)
        tlm_error("%s: out of memory", label);
    return g;
}

void tlm_gguf_close(tlm_gguf *g) {
    if (!g)
        return;
    for (size_t i = 0; i < g->n_kv; i++)
        free(g->kv[i].strs);
    free(g->kv);
    free(g->kv_sorted);
    free(g->t);
    free(g->t_sorted);
    if (g->mapped)
        munmap(g->base, g->len);
    else
        free(g->base);
    free(g->label);
    free(g);
}

int tlm_gguf_is_file(const char *path) {
    if (!file_exists(path)) return 0;
    FILE *f = fopen(path, "rb");
    char magic[4];
    const int yes = f && fread(magic, 1, 4, f) == 4 && !memcmp(magic, "GGUF", 4);
    if (f) fclose(f);
    return yes;
}

tlm_gguf *tlm_gguf_open(const char *path) {
    int fd = tlm_open_input(path);
    if (fd < 0)
        return NULL;
    struct stat sb; /* (a regular file: tlm_open_input refuses anything else) */
    if (fstat(fd, &sb) != 0) {
        int err = errno;
        close(fd);
        tlm_error("%s: cannot stat: %s", path, strerror(err));
        return NULL;
    }
    if (sb.st_size < 24) { /* also avoids mmap of length 0, which fails */
        close(fd);
        tlm_error("%s: file is %lld bytes, too short for a GGUF header (24 bytes)", path, (long long)sb.st_size);
        return NULL;
    }
    if ((unsigned long long)sb.st_size > SIZE_MAX) {
        close(fd);
        tlm_error("%s: file is too large to map", path);
        return NULL;
    }
    tlm_gguf *g = gguf_new(path);
    if (!g) {
        close(fd);
        return NULL;
    }
    g->len = (size_t)sb.st_size;
    void *base = mmap(NULL, g->len, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (base == MAP_FAILED) {
        tlm_error("%s: cannot map: %s", path, strerror(err));
        tlm_gguf_close(g);
        return NULL;
    }
    g->base = base;
    g->mapped = 1;
    if (parse(g)) {
        tlm_gguf_close(g);
        return NULL;
    }
    return g;
}

tlm_gguf *tlm_gguf_open_memory(const void *data, size_t n, const char *label) {
    tlm_gguf *g = gguf_new(label);
    if (!g)
        return NULL;
    if (!(g->base = malloc(n ? n : 1))) {
        tlm_error("%s: out of memory", label);
        tlm_gguf_close(g);
        return NULL;
    }
    if (n)
        memcpy(g->base, data, n);
    g->len = n;
    if (parse(g)) {
        tlm_gguf_close(g);
        return NULL;
    }
    return g;
}

int tlm_gguf_detach_mapping(tlm_gguf *g, void **base, size_t *len) {
    if (!g || !g->mapped)
        return -1;
    *base = g->base, *len = g->len;
    g->mapped = 0, g->base = NULL; /* (free(NULL) at close) */
    return 0;
}

int tlm_gguf_is_mapped(const tlm_gguf *g) { return g->mapped; }
uint32_t tlm_gguf_version(const tlm_gguf *g) { return g->version; }
size_t tlm_gguf_alignment(const tlm_gguf *g) { return g->alignment; }
const char *tlm_gguf_label(const tlm_gguf *g) { return g->label; }

/* ---- metadata queries ------------------------------------------------------------------------ */

size_t tlm_gguf_kv_count(const tlm_gguf *g) { return g->n_kv; }

const gguf_kv *tlm_gguf_kv_at(const tlm_gguf *g, size_t i) { return i < g->n_kv ? &g->kv[i].pub : NULL; }

const gguf_kv *tlm_gguf_find(const tlm_gguf *g, const char *key) {
    if (!key)
        return NULL;
    gguf_str k = {key, strlen(key)};
    size_t lo = 0, hi = g->n_kv;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = str_cmp(&g->kv_sorted[mid]->pub.key, &k);
        if (c == 0)
            return &g->kv_sorted[mid]->pub;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* "a uint32", "an array of string" (for messages) */
static const char *kind(const gguf_kv *kv, char *buf, size_t size) {
    if (kv->type == GGUF_ARRAY)
        snprintf(buf, size, "an array of %s", tlm_gguf_type_name(kv->elem_type));
    else
        snprintf(buf, size, "%s %s", kv->type == GGUF_INT8 || kv->type == GGUF_INT16 || kv->type == GGUF_INT32 ||
                                             kv->type == GGUF_INT64 ? "an" : "a", tlm_gguf_type_name(kv->type));
    return buf;
}

/* An integer of type t at p: *neg and the magnitude-free value in *u (two's complement when neg) */
static void read_int(const unsigned char *p, gguf_type t, int64_t *s, uint64_t *u, int *is_signed) {
    *is_signed = t == GGUF_INT8 || t == GGUF_INT16 || t == GGUF_INT32 || t == GGUF_INT64;
    switch (t) {
    case GGUF_UINT8: *u = p[0]; break;
    case GGUF_INT8: { int8_t v; memcpy(&v, p, 1); *s = v; break; }
    case GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); *u = v; break; }
    case GGUF_INT16: { int16_t v; memcpy(&v, p, 2); *s = v; break; }
    case GGUF_UINT32: { uint32_t v; memcpy(&v, p, 4); *u = v; break; }
    case GGUF_INT32: { int32_t v; memcpy(&v, p, 4); *s = v; break; }
    case GGUF_UINT64: memcpy(u, p, 8); break;
    default: memcpy(s, p, 8); break; /* INT64 */
    }
}

/* The integer at p (type t) into [lo, hi] (hi as unsigned, lo as signed): 0 and *out as a
 * signed 64-bit value when it fits (hi <= INT64_MAX here), else -1 with the value in text. */
static int int_in_range(const unsigned char *p, gguf_type t, int64_t lo, uint64_t hi, int64_t *out, char *text,
                        size_t size) {
    int64_t s = 0;
    uint64_t u = 0;
    int is_signed;
    read_int(p, t, &s, &u, &is_signed);
    if (is_signed) {
        snprintf(text, size, "%lld", (long long)s);
        if (s < lo || (s >= 0 && (uint64_t)s > hi))
            return -1;
        *out = s;
    } else {
        snprintf(text, size, "%llu", (unsigned long long)u);
        if (u > hi)
            return -1;
        *out = (int64_t)u;
    }
    return 0;
}

static const kv_entry *lookup(const tlm_gguf *g, const char *key) { return (const kv_entry *)tlm_gguf_find(g, key); }

int tlm_gguf_get_u32(const tlm_gguf *g, const char *key, uint32_t *out) {
    const kv_entry *e = lookup(g, key);
    char k[64], v[32];
    if (!e)
        return 0;
    if (!is_int_type(e->pub.type))
        return tlm_error("%s: key '%s' holds %s, not an integer", g->label, key, kind(&e->pub, k, sizeof k));
    int64_t x;
    if (int_in_range(e->val, e->pub.type, 0, UINT32_MAX, &x, v, sizeof v))
        return tlm_error("%s: key '%s' = %s (%s) does not fit in a uint32", g->label, key, v,
                         tlm_gguf_type_name(e->pub.type));
    *out = (uint32_t)x;
    return 1;
}

int tlm_gguf_get_i64(const tlm_gguf *g, const char *key, int64_t *out) {
    const kv_entry *e = lookup(g, key);
    char k[64], v[32];
    if (!e)
        return 0;
    if (!is_int_type(e->pub.type))
        return tlm_error("%s: key '%s' holds %s, not an integer", g->label, key, kind(&e->pub, k, sizeof k));
    int64_t x;
    if (int_in_range(e->val, e->pub.type, INT64_MIN, INT64_MAX, &x, v, sizeof v))
        return tlm_error("%s: key '%s' = %s (%s) does not fit in an int64", g->label, key, v,
                         tlm_gguf_type_name(e->pub.type));
    *out = x;
    return 1;
}

/* a FLOAT32 or FLOAT64 at p, as a double */
static double float_at(const unsigned char *p, gguf_type t) {
    if (t == GGUF_FLOAT32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    double d;
    memcpy(&d, p, 8);
    return d;
}

int tlm_gguf_get_f32(const tlm_gguf *g, const char *key, float *out) {
    const kv_entry *e = lookup(g, key);
    char k[64];
    if (!e)
        return 0;
    if (e->pub.type != GGUF_FLOAT32 && e->pub.type != GGUF_FLOAT64)
        return tlm_error("%s: key '%s' holds %s, not a float32 or float64", g->label, key,
                         kind(&e->pub, k, sizeof k));
    return tlm_float_from_file(float_at(e->val, e->pub.type), TLM_FLOAT_ANY, g->label, key, out) ? -1 : 1;
}

int tlm_gguf_get_bool(const tlm_gguf *g, const char *key, int *out) {
    const kv_entry *e = lookup(g, key);
    char k[64];
    if (!e)
        return 0;
    if (e->pub.type != GGUF_BOOL)
        return tlm_error("%s: key '%s' holds %s, not a bool", g->label, key, kind(&e->pub, k, sizeof k));
    *out = e->val[0];
    return 1;
}

int tlm_gguf_get_str(const tlm_gguf *g, const char *key, gguf_str *out) {
    const kv_entry *e = lookup(g, key);
    char k[64];
    if (!e)
        return 0;
    if (e->pub.type != GGUF_STRING)
        return tlm_error("%s: key '%s' holds %s, not a string", g->label, key, kind(&e->pub, k, sizeof k));
    *out = e->str;
    return 1;
}

int tlm_gguf_get_array(const tlm_gguf *g, const char *key, gguf_type *elem_type, uint64_t *count) {
    const kv_entry *e = lookup(g, key);
    char k[64];
    if (!e)
        return 0;
    if (e->pub.type != GGUF_ARRAY)
        return tlm_error("%s: key '%s' holds %s, not an array", g->label, key, kind(&e->pub, k, sizeof k));
    *elem_type = e->pub.elem_type;
    *count = e->pub.count;
    return 1;
}

/* The entry of an array kv of g, with i in range; NULL + tlm_error otherwise. */
static const kv_entry *array_elem(const tlm_gguf *g, const gguf_kv *kv, uint64_t i) {
    if (!kv) {
        tlm_error("%s: no metadata entry given (NULL)", g->label);
        return NULL;
    }
    const kv_entry *e = (const kv_entry *)kv;
    if (g->n_kv == 0 || e < g->kv || e >= g->kv + g->n_kv || &e->pub != kv) {
        tlm_error("%s: the metadata entry given is not one of this file's", g->label);
        return NULL;
    }
    char k[64];
    if (kv->type != GGUF_ARRAY) {
        tlm_error("%s: key '%.*s' holds %s, not an array", g->label, show_len(&kv->key), kv->key.p,
                  kind(kv, k, sizeof k));
        return NULL;
    }
    if (i >= kv->count) {
        tlm_error("%s: key '%.*s': index %llu is out of range (the array has %llu elements)", g->label,
                  show_len(&kv->key), kv->key.p, (unsigned long long)i, (unsigned long long)kv->count);
        return NULL;
    }
    return e;
}

int tlm_gguf_array_str(const tlm_gguf *g, const gguf_kv *kv, uint64_t i, gguf_str *out) {
    const kv_entry *e = array_elem(g, kv, i);
    if (!e)
        return -1;
    if (kv->elem_type != GGUF_STRING)
        return tlm_error("%s: key '%.*s' is an array of %s: element %llu is not a string", g->label,
                         show_len(&kv->key), kv->key.p, tlm_gguf_type_name(kv->elem_type), (unsigned long long)i);
    *out = e->strs[i];
    return 1;
}

int tlm_gguf_array_f32(const tlm_gguf *g, const gguf_kv *kv, uint64_t i, float *out) {
    const kv_entry *e = array_elem(g, kv, i);
    if (!e)
        return -1;
    if (kv->elem_type != GGUF_FLOAT32 && kv->elem_type != GGUF_FLOAT64)
        return tlm_error("%s: key '%.*s' is an array of %s: element %llu is not a float32 or float64", g->label,
                         show_len(&kv->key), kv->key.p, tlm_gguf_type_name(kv->elem_type), (unsigned long long)i);
    const double d = float_at(e->val + (size_t)i * TYPE_SIZE[kv->elem_type], kv->elem_type);
    if (isfinite((float)d)) { /* (the common case, without naming the element) */
        *out = (float)d;
        return 1;
    }
    char name[160];
    snprintf(name, sizeof name, "%.*s[%llu]", show_len(&kv->key), kv->key.p, (unsigned long long)i);
    return tlm_float_from_file(d, TLM_FLOAT_ANY, g->label, name, out) ? -1 : 1;
}

int tlm_gguf_array_i64(const tlm_gguf *g, const gguf_kv *kv, uint64_t i, int64_t *out) {
    const kv_entry *e = array_elem(g, kv, i);
    char v[32];
    if (!e)
        return -1;
    if (!is_int_type(kv->elem_type))
        return tlm_error("%s: key '%.*s' is an array of %s: element %llu is not an integer", g->label,
                         show_len(&kv->key), kv->key.p, tlm_gguf_type_name(kv->elem_type), (unsigned long long)i);
    if (int_in_range(e->val + (size_t)i * TYPE_SIZE[kv->elem_type], kv->elem_type, INT64_MIN, INT64_MAX, out, v,
                     sizeof v))
        return tlm_error("%s: key '%.*s': element %llu = %s (%s) does not fit in an int64", g->label,
                         show_len(&kv->key), kv->key.p, (unsigned long long)i, v, tlm_gguf_type_name(kv->elem_type));
    return 1;
}

/* ---- tensor queries -------------------------------------------------------------------------- */

size_t tlm_gguf_tensor_count(const tlm_gguf *g) { return g->n_t; }

const gguf_tensor *tlm_gguf_tensor_at(const tlm_gguf *g, size_t i) { return i < g->n_t ? &g->t[i].pub : NULL; }

const gguf_tensor *tlm_gguf_find_tensor(const tlm_gguf *g, const char *name) {
    if (!name)
        return NULL;
    gguf_str k = {name, strlen(name)};
    size_t lo = 0, hi = g->n_t;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = str_cmp(&g->t_sorted[mid]->pub.name, &k);
        if (c == 0)
            return &g->t_sorted[mid]->pub;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- writing --------------------------------------------------------------------------------- */

typedef struct {
    char *name;
    int type, n_dims;
    int64_t ne[TLM_GGUF_MAX_DIMS];
    const void *data;
    size_t nbytes;
    int deferred; /* its bytes come from tlm_gguf_write_streamed's fill */
} w_tensor;

struct tlm_gguf_writer {
    tlm_buf kv; /* the metadata entries, serialized in order */
    char **keys;
    size_t n_keys, cap_keys;
    w_tensor *t;
    size_t n_t, cap_t;
    uint32_t alignment;
};

tlm_gguf_writer *tlm_gguf_writer_new(void) {
    tlm_gguf_writer *w = calloc(1, sizeof *w);
    if (w)
        w->alignment = TLM_GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void tlm_gguf_writer_free(tlm_gguf_writer *w) {
    if (!w)
        return;
    tlm_buf_free(&w->kv);
    for (size_t i = 0; i < w->n_keys; i++)
        free(w->keys[i]);
    free(w->keys);
    for (size_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->t);
    free(w);
}

static void put_u32(tlm_buf *b, uint32_t v) { tlm_buf_put(b, &v, 4); }
static void put_u64(tlm_buf *b, uint64_t v) { tlm_buf_put(b, &v, 8); }
static void put_str(tlm_buf *b, const char *s, uint64_t n) {
    put_u64(b, n);
    if (n)
        tlm_buf_put(b, s, (size_t)n);
}

/* A key may be added with value type `type`: non-empty, not too long, not there yet;
 * general.alignment only as a uint32. */
static int check_key(const tlm_gguf_writer *w, const char *key, gguf_type type) {
    if (!key || !*key)
        return tlm_error("gguf writer: a metadata key is empty");
    size_t n = strlen(key);
    if (n > GGUF_MAX_KEY)
        return tlm_error("gguf writer: key '%.*s...' is %zu bytes, longer than the %d GGUF allows", SHOW, key, n,
                         GGUF_MAX_KEY);
    for (size_t i = 0; i < w->n_keys; i++)
        if (strcmp(w->keys[i], key) == 0)
            return tlm_error("gguf writer: key '%.*s' is set twice", SHOW, key);
    if (strcmp(key, "general.alignment") == 0 && type != GGUF_UINT32)
        return tlm_error("gguf writer: key 'general.alignment' must be a uint32, not %s", tlm_gguf_type_name(type));
    return 0;
}

/* Appends key + type + the value's bytes (already checked); records the key. */
static int add_kv(tlm_gguf_writer *w, const char *key, gguf_type type, const void *v, size_t n) {
    char *copy = strdup(key);
    if (!copy || tlm_grow_array((void **)&w->keys, &w->cap_keys, w->n_keys + 1, sizeof *w->keys)) {
        free(copy);
        return tlm_error("gguf writer: out of memory");
    }
    put_str(&w->kv, key, strlen(key));
    put_u32(&w->kv, (uint32_t)type);
    if (n)
        tlm_buf_put(&w->kv, v, n);
    if (w->kv.oom) { /* (the buffer stays failed: every later set and the write fail too) */
        free(copy);
        return tlm_error("gguf writer: out of memory");
    }
    w->keys[w->n_keys++] = copy;
    return 0;
}

int tlm_gguf_set_u32(tlm_gguf_writer *w, const char *key, uint32_t v) {
    if (check_key(w, key, GGUF_UINT32))
        return -1;
    if (strcmp(key, "general.alignment") == 0) {
        if (v == 0 || (v & (v - 1)) != 0)
            return tlm_error("gguf writer: general.alignment = %u is not a power of two", v);
        if (add_kv(w, key, GGUF_UINT32, &v, 4))
            return -1;
        w->alignment = v;
        return 0;
    }
    return add_kv(w, key, GGUF_UINT32, &v, 4);
}

int tlm_gguf_set_i32(tlm_gguf_writer *w, const char *key, int32_t v) {
    return check_key(w, key, GGUF_INT32) ? -1 : add_kv(w, key, GGUF_INT32, &v, 4);
}

int tlm_gguf_set_u64(tlm_gguf_writer *w, const char *key, uint64_t v) {
    return check_key(w, key, GGUF_UINT64) ? -1 : add_kv(w, key, GGUF_UINT64, &v, 8);
}

int tlm_gguf_set_f32(tlm_gguf_writer *w, const char *key, float v) {
    return check_key(w, key, GGUF_FLOAT32) ? -1 : add_kv(w, key, GGUF_FLOAT32, &v, 4);
}

int tlm_gguf_set_bool(tlm_gguf_writer *w, const char *key, int v) {
    unsigned char b = v != 0;
    return check_key(w, key, GGUF_BOOL) ? -1 : add_kv(w, key, GGUF_BOOL, &b, 1);
}

int tlm_gguf_set_str(tlm_gguf_writer *w, const char *key, const char *s, size_t len) {
    if (check_key(w, key, GGUF_STRING))
        return -1;
    if (!s && len)
        return tlm_error("gguf writer: key '%.*s': string is NULL", SHOW, key);
    tlm_buf v = {0};
    put_str(&v, s, len);
    int rc = v.oom ? tlm_error("gguf writer: out of memory") : add_kv(w, key, GGUF_STRING, v.data, v.len);
    tlm_buf_free(&v);
    return rc;
}

int tlm_gguf_set_array(tlm_gguf_writer *w, const char *key, gguf_type elem_type, const void *data, uint64_t count) {
    if (check_key(w, key, GGUF_ARRAY))
        return -1;
    if ((unsigned)elem_type >= GGUF_TYPE_COUNT || elem_type == GGUF_STRING || elem_type == GGUF_ARRAY)
        return tlm_error("gguf writer: key '%.*s': an array of %s cannot be written this way (numbers and bools "
                         "only; strings: tlm_gguf_set_str_array)", SHOW, key, tlm_gguf_type_name(elem_type));
    size_t size = TYPE_SIZE[elem_type];
    if (count > (SIZE_MAX - 12) / size)
        return tlm_error("gguf writer: key '%.*s': %llu elements are too many", SHOW, key, (unsigned long long)count);
    size_t n = (size_t)count * size;
    if (n && !data)
        return tlm_error("gguf writer: key '%.*s': array data is NULL", SHOW, key);
    uint64_t bad = elem_type == GGUF_BOOL ? bad_bool(data, count) : count;
    if (bad < count)
        return tlm_error("gguf writer: key '%.*s': element %llu = %u is not a bool (0 or 1)", SHOW, key,
                         (unsigned long long)bad, ((const unsigned char *)data)[bad]);
    tlm_buf v = {0};
    put_u32(&v, (uint32_t)elem_type);
    put_u64(&v, count);
    if (n)
        tlm_buf_put(&v, data, n);
    int rc = v.oom ? tlm_error("gguf writer: out of memory") : add_kv(w, key, GGUF_ARRAY, v.data, v.len);
    tlm_buf_free(&v);
    return rc;
}

int tlm_gguf_set_str_array(tlm_gguf_writer *w, const char *key, const char *const *s, const size_t *lens,
                           uint64_t count) {
    if (check_key(w, key, GGUF_ARRAY))
        return -1;
    if (count && !s)
        return tlm_error("gguf writer: key '%.*s': string array is NULL", SHOW, key);
    tlm_buf v = {0};
    put_u32(&v, GGUF_STRING);
    put_u64(&v, count);
    for (uint64_t i = 0; i < count && !v.oom; i++) {
        size_t n = lens ? lens[i] : s[i] ? strlen(s[i]) : 0;
        if (!s[i] && n) {
            tlm_buf_free(&v);
            return tlm_error("gguf writer: key '%.*s': element %llu is NULL", SHOW, key, (unsigned long long)i);
        }
        put_str(&v, s[i], n);
    }
    int rc = v.oom ? tlm_error("gguf writer: out of memory") : add_kv(w, key, GGUF_ARRAY, v.data, v.len);
    tlm_buf_free(&v);
    return rc;
}

static int add_tensor(tlm_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne,
                      const void *data, size_t nbytes, int deferred) {
    if (!name || !*name)
        return tlm_error("gguf writer: tensor #%zu has no name", w->n_t);
    size_t len = strlen(name);
    if (len > GGUF_MAX_NAME)
        return tlm_error("gguf writer: tensor '%.*s': its name is %zu bytes, longer than the %d GGUF allows", SHOW,
                         name, len, GGUF_MAX_NAME);
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return tlm_error("gguf writer: tensor '%s' is added twice", name);
    if (n_dims < 1 || n_dims > TLM_GGUF_MAX_DIMS)
        return tlm_error("gguf writer: tensor '%s': n_dims %d is outside 1..%d", name, n_dims, TLM_GGUF_MAX_DIMS);
    if (!wq_supported(type))
        return tlm_error("gguf writer: tensor '%s': type %s is not one tinylm can size", name, wq_name(type));
    w_tensor t = {.type = type, .n_dims = n_dims, .data = data, .nbytes = nbytes, .deferred = deferred};
    int empty = 0;
    for (int d = 0; d < TLM_GGUF_MAX_DIMS; d++)
        t.ne[d] = d < n_dims ? ne[d] : 1;
    for (int d = 0; d < n_dims; d++) {
        if (t.ne[d] < 0)
            return tlm_error("gguf writer: tensor '%s': ne[%d] = %lld is negative", name, d, (long long)t.ne[d]);
        empty |= t.ne[d] == 0;
    }
    uint64_t want = 0;
    if (!empty) {
        int64_t be = wq_block_elems(type);
        if (be <= 0 || t.ne[0] % be)
            return tlm_error("gguf writer: tensor '%s': ne[0] = %lld is not a multiple of the %lld-element block of "
                             "%s", name, (long long)t.ne[0], (long long)be, wq_name(type));
        want = (uint64_t)(t.ne[0] / be);
        int over = __builtin_mul_overflow(want, (uint64_t)wq_block_bytes(type), &want);
        for (int d = 1; d < n_dims; d++)
            over |= __builtin_mul_overflow(want, (uint64_t)t.ne[d], &want);
        if (over || want > SIZE_MAX)
            return tlm_error("gguf writer: tensor '%s': the byte size of its shape overflows", name);
    }
    if (nbytes != want)
        return tlm_error("gguf writer: tensor '%s': %zu bytes of data given, but %s with %d dims [%lld, %lld, %lld, "
                         "%lld] holds %llu", name, nbytes, wq_name(type), n_dims, (long long)t.ne[0],
                         (long long)t.ne[1], (long long)t.ne[2], (long long)t.ne[3], (unsigned long long)want);
    if (nbytes && !data && !deferred)
        return tlm_error("gguf writer: tensor '%s': data is NULL", name);
    if (tlm_grow_array((void **)&w->t, &w->cap_t, w->n_t + 1, sizeof *w->t) || !(t.name = strdup(name)))
        return tlm_error("gguf writer: out of memory");
    w->t[w->n_t++] = t;
    return 0;
}

int tlm_gguf_add_tensor(tlm_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne,
                        const void *data, size_t nbytes) {
    return add_tensor(w, name, type, n_dims, ne, data, nbytes, 0);
}

int tlm_gguf_add_tensor_deferred(tlm_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne,
                                 size_t nbytes) {
    return add_tensor(w, name, type, n_dims, ne, NULL, nbytes, 1);
}

static int write_zeros(tlm_atomic *f, size_t n) {
    static const unsigned char zeros[4096];
    while (n) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        if (tlm_atomic_write(f, zeros, k))
            return -1;
        n -= k;
    }
    return 0;
}

int tlm_gguf_write(tlm_gguf_writer *w, const char *path) { return tlm_gguf_write_streamed(w, path, NULL, NULL); }

int tlm_gguf_write_streamed(tlm_gguf_writer *w, const char *path, tlm_gguf_fill fill, void *user) {
    size_t a = w->alignment, most = 0;
    if (w->kv.oom)
        return tlm_error("%s: out of memory while the metadata was added", path);
    for (size_t i = 0; i < w->n_t; i++)
        if (w->t[i].deferred && w->t[i].nbytes > most)
            most = w->t[i].nbytes;
    if (most && !fill)
        return tlm_error("%s: tensors were added without their data, and nothing gives it (internal)", path);
    uint64_t *offsets = malloc((w->n_t + 1) * sizeof *offsets);
    if (!offsets)
        return tlm_error("%s: out of memory", path);
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        uint64_t pad = (a - off % a) % a;
        if (off + pad < off || off + pad + w->t[i].nbytes < off + pad) {
            free(offsets);
            return tlm_error("%s: the tensors' total size overflows", path);
        }
        offsets[i] = off + pad;
        off = offsets[i] + w->t[i].nbytes;
    }
    tlm_buf h = {0};
    tlm_buf_put(&h, "GGUF", 4);
    put_u32(&h, 3);
    put_u64(&h, w->n_t);
    put_u64(&h, w->n_keys);
    if (w->kv.len)
        tlm_buf_put(&h, w->kv.data, w->kv.len);
    for (size_t i = 0; i < w->n_t; i++) {
        const w_tensor *t = &w->t[i];
        put_str(&h, t->name, strlen(t->name));
        put_u32(&h, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++)
            put_u64(&h, (uint64_t)t->ne[d]);
        put_u32(&h, (uint32_t)t->type);
        put_u64(&h, offsets[i]);
    }
    if (h.oom) {
        tlm_buf_free(&h);
        free(offsets);
        return tlm_error("%s: out of memory", path);
    }
    /* one buffer, the largest deferred tensor's, filled again for each of them */
    void *buf = most ? malloc(most) : NULL;
    tlm_atomic *f = most && !buf ? NULL : tlm_atomic_open(path);
    int rc = f ? 0 : most && !buf ? tlm_error("%s: out of memory (%zu bytes for one tensor)", path, most) : -1;
    if (f) {
        rc = tlm_atomic_write(f, h.data, h.len);
        if (rc == 0 && w->n_t)
            rc = write_zeros(f, (a - h.len % a) % a);
        uint64_t at = 0;
        for (size_t i = 0; i < w->n_t && rc == 0; i++) {
            rc = write_zeros(f, (size_t)(offsets[i] - at));
            if (rc == 0 && w->t[i].nbytes && w->t[i].deferred)
                rc = fill(user, i, buf, w->t[i].nbytes) ? tlm_error_prefix("%s: tensor '%s'", path, w->t[i].name)
                                                        : tlm_atomic_write(f, buf, w->t[i].nbytes);
            else if (rc == 0 && w->t[i].nbytes)
                rc = tlm_atomic_write(f, w->t[i].data, w->t[i].nbytes);
            at = offsets[i] + w->t[i].nbytes;
        }
        if (rc)
            tlm_atomic_abort(f);
        else
            rc = tlm_atomic_commit(f);
    }
    tlm_buf_free(&h);
    free(offsets);
    free(buf);
    return rc;
}
