/* fuzz_gguf.c — libFuzzer target: the input bytes are a GGUF file.
 * Parses it from memory (a malloc'd copy of exactly these bytes, so ASan sees any read past
 * them) and, when it opens, exercises every query: each metadata entry through every typed
 * getter (which must agree with the entry's type), every element of every array through each
 * array accessor (and one index past the end), and every tensor's bytes, so a count, length or
 * offset the validator let through unchecked would show as a crash. Also aborts on broken
 * invariants: a refusal without a message, lookup not finding a listed key or tensor, a tensor
 * that is misaligned or has a shape outside the rules. Build: see fuzz/README.md. */
#include "formats/gguf.h"
#include "util/error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile uint64_t sink;

static void touch(const void *p, uint64_t n) {
    const unsigned char *b = p;
    uint64_t s = 0;
    for (uint64_t i = 0; i < n; i++)
        s += b[i];
    sink += s;
}

static int is_int(gguf_type t) {
    return t == GGUF_UINT8 || t == GGUF_INT8 || t == GGUF_UINT16 || t == GGUF_INT16 || t == GGUF_UINT32 ||
           t == GGUF_INT32 || t == GGUF_UINT64 || t == GGUF_INT64;
}

static int is_float(gguf_type t) { return t == GGUF_FLOAT32 || t == GGUF_FLOAT64; }

/* a present key: 1 when the type fits, -1 (with a message) otherwise; never 0 */
static void expect(int rc, int fits) {
    if (rc == 0 || (fits && rc != 1) || (!fits && rc == 1) || (rc == -1 && !*tlm_last_error()))
        abort();
}

static void exercise_kv(const tlm_gguf *g, const gguf_kv *kv) {
    touch(kv->key.p, kv->key.len);
    char *key = malloc((size_t)kv->key.len + 1);
    if (!key)
        return;
    memcpy(key, kv->key.p, (size_t)kv->key.len);
    key[kv->key.len] = '\0';
    if (tlm_gguf_find(g, key) != kv) /* keys are unique and hold no NUL */
        abort();
    if (kv->type >= GGUF_TYPE_COUNT || (kv->type != GGUF_ARRAY && kv->count != 1) || !tlm_gguf_type_name(kv->type))
        abort();

    uint32_t u = 0;
    int64_t i = 0;
    float f = 0;
    int b = 0;
    gguf_str s;
    gguf_type et;
    uint64_t n;
    tlm_clear_error();
    int ru = tlm_gguf_get_u32(g, key, &u), ri = tlm_gguf_get_i64(g, key, &i);
    if (!is_int(kv->type) && (ru != -1 || ri != -1))
        abort();
    if (ru == 1 && (ri != 1 || i != (int64_t)u)) /* fits a uint32, so an int64, with the same value */
        abort();
    if (ru == 0 || ri == 0)
        abort();
    int rf = tlm_gguf_get_f32(g, key, &f);
    if (rf == 0 || (!is_float(kv->type) && rf != -1) || (kv->type == GGUF_FLOAT32 && rf != 1))
        abort();
    sink += (uint64_t)u + (uint64_t)i + (uint64_t)(f == f);
    expect(tlm_gguf_get_bool(g, key, &b), kv->type == GGUF_BOOL);
    if (kv->type == GGUF_BOOL && b != 0 && b != 1)
        abort();
    int rs = tlm_gguf_get_str(g, key, &s);
    expect(rs, kv->type == GGUF_STRING);
    if (rs == 1)
        touch(s.p, s.len);
    int ra = tlm_gguf_get_array(g, key, &et, &n);
    expect(ra, kv->type == GGUF_ARRAY);
    if (ra == 1 && (et != kv->elem_type || n != kv->count))
        abort();

    if (kv->type != GGUF_ARRAY) {
        if (tlm_gguf_array_str(g, kv, 0, &s) != -1 || tlm_gguf_array_f32(g, kv, 0, &f) != -1 ||
            tlm_gguf_array_i64(g, kv, 0, &i) != -1)
            abort();
        free(key);
        return;
    }
    for (uint64_t k = 0; k < kv->count; k++) {
        int r1 = tlm_gguf_array_str(g, kv, k, &s);
        expect(r1, kv->elem_type == GGUF_STRING);
        if (r1 == 1)
            touch(s.p, s.len);
        int r2 = tlm_gguf_array_f32(g, kv, k, &f);
        if (r2 == 0 || (!is_float(kv->elem_type) && r2 != -1) || (kv->elem_type == GGUF_FLOAT32 && r2 != 1))
            abort();
        int r3 = tlm_gguf_array_i64(g, kv, k, &i);
        if (r3 == 0 || (!is_int(kv->elem_type) && r3 != -1) ||
            (is_int(kv->elem_type) && kv->elem_type != GGUF_UINT64 && r3 != 1))
            abort();
        sink += (uint64_t)i + (uint64_t)(f == f);
    }
    if (tlm_gguf_array_str(g, kv, kv->count, &s) != -1 || tlm_gguf_array_f32(g, kv, kv->count, &f) != -1 ||
        tlm_gguf_array_i64(g, kv, kv->count, &i) != -1)
        abort();
    free(key);
}

static void exercise_tensor(const tlm_gguf *g, const gguf_tensor *t) {
    touch(t->name.p, t->name.len);
    char name[65];
    if (t->name.len == 0 || t->name.len > 64)
        abort();
    memcpy(name, t->name.p, (size_t)t->name.len);
    name[t->name.len] = '\0';
    if (tlm_gguf_find_tensor(g, name) != t)
        abort();
    if (t->n_dims < 1 || t->n_dims > TLM_GGUF_MAX_DIMS || !t->data)
        abort();
    for (int d = 0; d < TLM_GGUF_MAX_DIMS; d++)
        if (t->ne[d] < 0 || (d >= t->n_dims && t->ne[d] != 1))
            abort();
    if (t->offset % tlm_gguf_alignment(g))
        abort();
    touch(t->data, t->nbytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tlm_clear_error();
    tlm_gguf *g = tlm_gguf_open_memory(data, size, "fuzz.gguf");
    if (!g) {
        if (strncmp(tlm_last_error(), "fuzz.gguf: ", 11) != 0) /* every refusal names the file */
            abort();
        return 0;
    }
    size_t a = tlm_gguf_alignment(g);
    if ((tlm_gguf_version(g) != 2 && tlm_gguf_version(g) != 3) || a == 0 || (a & (a - 1)) != 0)
        abort();
    for (size_t i = 0; i < tlm_gguf_kv_count(g); i++)
        exercise_kv(g, tlm_gguf_kv_at(g, i));
    if (tlm_gguf_kv_at(g, tlm_gguf_kv_count(g)) != NULL)
        abort();
    for (size_t i = 0; i < tlm_gguf_tensor_count(g); i++)
        exercise_tensor(g, tlm_gguf_tensor_at(g, i));
    if (tlm_gguf_tensor_at(g, tlm_gguf_tensor_count(g)) != NULL)
        abort();
    /* tensors with bytes never share any (the validator sorted them by offset) */
    size_t n = tlm_gguf_tensor_count(g);
    for (size_t i = 0; i < n && n <= 256; i++)
        for (size_t j = i + 1; j < n; j++) {
            const gguf_tensor *x = tlm_gguf_tensor_at(g, i), *y = tlm_gguf_tensor_at(g, j);
            if (x->nbytes && y->nbytes && x->offset < y->offset + y->nbytes && y->offset < x->offset + x->nbytes)
                abort();
        }
    void *base;
    size_t len;
    if (tlm_gguf_detach_mapping(g, &base, &len) != -1) /* an image from memory has no mapping */
        abort();
    tlm_gguf_close(g);
    return 0;
}
