/* test_gguf.c — formats/gguf:
 *   - writer -> reader round trip: every value type the writer sets, arrays of every number type,
 *     of bools and of strings (and empty ones), tensors of F32 / F16 / Q8_0 / Q4_K shapes and an
 *     empty one with their bytes compared, the layout (v3, offsets and data section aligned, no
 *     byte after the last tensor), a custom general.alignment, 50000 strings;
 *   - the typed getters: every conversion that fits and each one that does not;
 *   - a hand-built version-2 file with the scalar types the writer does not set and nested arrays;
 *     a tensor of a type tinylm cannot size (its extent is the gap to the next one);
 *   - malformed images refused with the file and the field named: every truncation of a valid
 *     file, hostile counts and lengths (near 2^64), bad types, n_dims, offsets, overlaps, sizes,
 *     duplicates, alignment values, version 1, big-endian (run under ASan: never a read out of
 *     bounds, since an image from memory is a malloc'd copy of exactly its bytes);
 *   - writer input errors, after which the previous file is still intact. */
#include "check.h" /* (first: it sets _XOPEN_SOURCE) */
#include "byte_image.h"

#include "formats/gguf.h"
#include "ops/quant.h"

#include <math.h>
#include <stdint.h>
#include <sys/mman.h>

static char path[4200];

/* ---- building images by hand ------------------------------------------------------------------ */

static void u8(bytes *b, uint8_t v) { put(b, &v, 1); }
static void u32(bytes *b, uint32_t v) { put_le32(b, v); }
static void u64(bytes *b, uint64_t v) { put_le64(b, v); }
static void strn(bytes *b, const char *s, size_t n) { u64(b, n), put(b, s, n); }
static void str(bytes *b, const char *s) { strn(b, s, strlen(s)); }
static void header(bytes *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    put(b, "GGUF", 4), u32(b, version), u64(b, n_tensors), u64(b, n_kv);
}
static void kv_u32(bytes *b, const char *key, uint32_t v) { str(b, key), u32(b, GGUF_UINT32), u32(b, v); }
static void kv_str(bytes *b, const char *key, const char *v) { str(b, key), u32(b, GGUF_STRING), str(b, v); }
/* a tensor info with n_dims dims ne[0..] */
static void tinfo(bytes *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off) {
    str(b, name), u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++)
        u64(b, ne[d]);
    u32(b, type), u64(b, off);
}
static void pad(bytes *b, size_t a) {
    while (b->n % a)
        u8(b, 0);
}
static void zeros(bytes *b, size_t n) {
    while (n--)
        u8(b, 0);
}

/* Expects the image to be refused, with "m.gguf" and every given string in the message. */
#define BAD(b, ...)                                                                                                    \
    do {                                                                                                               \
        tlm_gguf *g_ = tlm_gguf_open_memory((b)->p, (b)->n, "m.gguf");                                                 \
        CHECK_ERR(g_ == NULL, "m.gguf: ", __VA_ARGS__);                                                                \
        tlm_gguf_close(g_);                                                                                            \
        free((b)->p);                                                                                                  \
        *(b) = (bytes){0};                                                                                             \
    } while (0)

/* Opens an image that must be valid (NULL and a failed check when it is not). */
static tlm_gguf *good(const bytes *b) {
    tlm_gguf *g = tlm_gguf_open_memory(b->p, b->n, "m.gguf");
    CHECK(g != NULL);
    if (!g)
        fprintf(stderr, "  refused: %s\n", tlm_last_error());
    return g;
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (unsigned char)(seed >> 16);
    }
}

/* ---- the round trip -------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    int type, n_dims;
    int64_t ne[4];
    size_t nbytes;
    unsigned char *data;
} tensor_in;

/* F32 [3, 2], F16 [5], Q8_0 [64, 2], Q4_K [256, 3], F32 [0, 4] (no bytes), F16 [2, 1, 3, 2] */
static tensor_in tensors_in[6] = {
    {"token_embd.weight", WQ_F32, 2, {3, 2, 1, 1}, 0, NULL},
    {"blk.0.attn_norm.weight", WQ_F16, 1, {5, 1, 1, 1}, 0, NULL},
    {"blk.0.attn_q.weight", WQ_Q8_0, 2, {64, 2, 1, 1}, 0, NULL},
    {"blk.0.ffn_down.weight", WQ_Q4_K, 2, {256, 3, 1, 1}, 0, NULL},
    {"empty", WQ_F32, 2, {0, 4, 1, 1}, 0, NULL},
    {"four.dims", WQ_F16, 4, {2, 1, 3, 2}, 0, NULL},
};
#define N_TENSORS 6

static void make_tensors(void) {
    if (tensors_in[0].data)
        return;
    for (int i = 0; i < N_TENSORS; i++) {
        tensor_in *t = &tensors_in[i];
        size_t rows = 1;
        for (int d = 1; d < t->n_dims; d++)
            rows *= (size_t)t->ne[d];
        t->nbytes = t->ne[0] == 0 ? 0 : wq_row_bytes(t->type, t->ne[0]) * rows;
        t->data = malloc(t->nbytes + 1);
        fill(t->data, t->nbytes, (unsigned)i + 1);
    }
    /* the sizes of ggml's blocks, so the test does not only agree with itself */
    CHECK(tensors_in[0].nbytes == 24 && tensors_in[1].nbytes == 10 && tensors_in[2].nbytes == 2 * 2 * 34 &&
          tensors_in[3].nbytes == 3 * 144 && tensors_in[5].nbytes == 24);
}

static const uint8_t a_u8[] = {0, 1, 255};
static const int8_t a_i8[] = {-128, 0, 127};
static const uint16_t a_u16[] = {0, 65535};
static const int16_t a_i16[] = {-32768, 32767, -1};
static const uint32_t a_u32[] = {7, 4294967295u};
static const int32_t a_i32[] = {-2147483647 - 1, 5};
static const float a_f32[] = {1.5f, -0.0f, 1e-30f};
static const uint8_t a_bool[] = {1, 0, 1, 1};
static const uint64_t a_u64[] = {UINT64_MAX, 3};
static const int64_t a_i64[] = {INT64_MIN, -7};
static const double a_f64[] = {0.25, -1e300};
static const char *const a_str[] = {"<unk>", "", "\xe2\x96\x81the", "a\nb"};

static int write_sample(const char *p, uint32_t alignment) {
    tlm_gguf_writer *w = tlm_gguf_writer_new();
    CHECK(w != NULL);
    int rc = 0;
    rc |= tlm_gguf_set_str(w, "general.architecture", "llama", 5);
    if (alignment)
        rc |= tlm_gguf_set_u32(w, "general.alignment", alignment);
    rc |= tlm_gguf_set_u32(w, "llama.block_count", 12);
    rc |= tlm_gguf_set_i32(w, "test.i32", -5);
    rc |= tlm_gguf_set_u64(w, "test.u64", UINT64_MAX);
    rc |= tlm_gguf_set_u64(w, "test.u64_small", 4096);
    rc |= tlm_gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    rc |= tlm_gguf_set_bool(w, "test.true", 1);
    rc |= tlm_gguf_set_bool(w, "test.false", 0);
    rc |= tlm_gguf_set_str(w, "test.empty_str", "", 0);
    rc |= tlm_gguf_set_str(w, "test.nul_inside", "a\0b", 3);
    rc |= tlm_gguf_set_array(w, "a.u8", GGUF_UINT8, a_u8, 3);
    rc |= tlm_gguf_set_array(w, "a.i8", GGUF_INT8, a_i8, 3);
    rc |= tlm_gguf_set_array(w, "a.u16", GGUF_UINT16, a_u16, 2);
    rc |= tlm_gguf_set_array(w, "a.i16", GGUF_INT16, a_i16, 3);
    rc |= tlm_gguf_set_array(w, "a.u32", GGUF_UINT32, a_u32, 2);
    rc |= tlm_gguf_set_array(w, "a.i32", GGUF_INT32, a_i32, 2);
    rc |= tlm_gguf_set_array(w, "a.f32", GGUF_FLOAT32, a_f32, 3);
    rc |= tlm_gguf_set_array(w, "a.bool", GGUF_BOOL, a_bool, 4);
    rc |= tlm_gguf_set_array(w, "a.u64", GGUF_UINT64, a_u64, 2);
    rc |= tlm_gguf_set_array(w, "a.i64", GGUF_INT64, a_i64, 2);
    rc |= tlm_gguf_set_array(w, "a.f64", GGUF_FLOAT64, a_f64, 2);
    rc |= tlm_gguf_set_array(w, "a.empty", GGUF_INT32, NULL, 0);
    size_t lens[4] = {5, 0, 6, 3};
    rc |= tlm_gguf_set_str_array(w, "tokenizer.ggml.tokens", a_str, lens, 4);
    rc |= tlm_gguf_set_str_array(w, "a.str_nul_terminated", a_str, NULL, 4);
    rc |= tlm_gguf_set_str_array(w, "a.str_empty", NULL, NULL, 0);
    for (int i = 0; i < N_TENSORS; i++) {
        const tensor_in *t = &tensors_in[i];
        rc |= tlm_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
    }
    CHECK(rc == 0);
    if (rc)
        fprintf(stderr, "  writer: %s\n", tlm_last_error());
    rc = tlm_gguf_write(w, p);
    CHECK(rc == 0);
    if (rc)
        fprintf(stderr, "  write: %s\n", tlm_last_error());
    tlm_gguf_writer_free(w);
    return rc;
}

static const char *const sample_keys[] = {
    "general.architecture", "llama.block_count", "test.i32", "test.u64", "test.u64_small",
    "llama.attention.layer_norm_rms_epsilon", "test.true", "test.false", "test.empty_str", "test.nul_inside",
    "a.u8", "a.i8", "a.u16", "a.i16", "a.u32", "a.i32", "a.f32", "a.bool", "a.u64", "a.i64", "a.f64", "a.empty",
    "tokenizer.ggml.tokens", "a.str_nul_terminated", "a.str_empty"};
#define N_SAMPLE_KEYS (sizeof sample_keys / sizeof *sample_keys)

static int str_is(gguf_str s, const char *want, size_t n) { return s.len == n && (n == 0 || memcmp(s.p, want, n) == 0); }

/* i64 / f32 elements of an array kv against expected values */
static void check_i64s(const tlm_gguf *g, const char *key, gguf_type et, const int64_t *want, uint64_t n) {
    const gguf_kv *kv = tlm_gguf_find(g, key);
    CHECK(kv && kv->type == GGUF_ARRAY && kv->elem_type == et && kv->count == n);
    if (!kv)
        return;
    for (uint64_t i = 0; i < n; i++) {
        int64_t v = 0;
        CHECK(tlm_gguf_array_i64(g, kv, i, &v) == 1 && v == want[i]);
    }
    int64_t v;
    CHECK_ERR(tlm_gguf_array_i64(g, kv, n, &v) == -1, key, "out of range");
    if (n == 0)
        return;
    float f;
    CHECK_ERR(tlm_gguf_array_f32(g, kv, 0, &f) == -1, key, "not a float32");
    gguf_str s;
    CHECK_ERR(tlm_gguf_array_str(g, kv, 0, &s) == -1, key, "not a string");
}

static void check_sample(const tlm_gguf *g, uint32_t alignment, const char *label) {
    size_t a = alignment ? alignment : 32;
    CHECK(tlm_gguf_version(g) == 3);
    CHECK(tlm_gguf_alignment(g) == a);
    CHECK(strcmp(tlm_gguf_label(g), label) == 0);
    size_t nk = N_SAMPLE_KEYS + (alignment != 0);
    CHECK(tlm_gguf_kv_count(g) == nk);
    /* in the order set */
    for (size_t i = 0, j = 0; i < tlm_gguf_kv_count(g) && j < N_SAMPLE_KEYS; i++) {
        const gguf_kv *kv = tlm_gguf_kv_at(g, i);
        if (alignment && i == 1) {
            CHECK(str_is(kv->key, "general.alignment", 17));
            continue;
        }
        CHECK(str_is(kv->key, sample_keys[j], strlen(sample_keys[j])));
        CHECK(tlm_gguf_find(g, sample_keys[j]) == kv);
        j++;
    }
    CHECK(tlm_gguf_kv_at(g, nk) == NULL);
    CHECK(tlm_gguf_find(g, "absent") == NULL && tlm_gguf_find(g, "") == NULL && tlm_gguf_find(g, "a.u") == NULL);

    gguf_str s = {0};
    uint32_t u = 0;
    int64_t i = 0;
    float f = 0;
    int b = -1;
    CHECK(tlm_gguf_get_str(g, "general.architecture", &s) == 1 && str_is(s, "llama", 5));
    CHECK(tlm_gguf_get_u32(g, "llama.block_count", &u) == 1 && u == 12);
    CHECK(tlm_gguf_get_i64(g, "llama.block_count", &i) == 1 && i == 12);
    CHECK(tlm_gguf_get_i64(g, "test.i32", &i) == 1 && i == -5);
    CHECK(tlm_gguf_get_u32(g, "test.u64_small", &u) == 1 && u == 4096);
    CHECK(tlm_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &f) == 1 && f == 1e-5f);
    CHECK(tlm_gguf_get_bool(g, "test.true", &b) == 1 && b == 1);
    CHECK(tlm_gguf_get_bool(g, "test.false", &b) == 1 && b == 0);
    CHECK(tlm_gguf_get_str(g, "test.empty_str", &s) == 1 && s.len == 0);
    CHECK(tlm_gguf_get_str(g, "test.nul_inside", &s) == 1 && str_is(s, "a\0b", 3));
    if (alignment)
        CHECK(tlm_gguf_get_u32(g, "general.alignment", &u) == 1 && u == alignment);

    /* absent: 0, nothing set */
    u = 99;
    CHECK(tlm_gguf_get_u32(g, "absent", &u) == 0 && u == 99);
    CHECK(tlm_gguf_get_i64(g, "absent", &i) == 0 && tlm_gguf_get_f32(g, "absent", &f) == 0);
    CHECK(tlm_gguf_get_bool(g, "absent", &b) == 0 && tlm_gguf_get_str(g, "absent", &s) == 0);
    gguf_type et;
    uint64_t n;
    CHECK(tlm_gguf_get_array(g, "absent", &et, &n) == 0);

    /* values or types that do not fit: the file, the key and the type in the message */
    CHECK_ERR(tlm_gguf_get_u32(g, "test.i32", &u) == -1, label, "'test.i32'", "-5", "int32", "uint32");
    CHECK_ERR(tlm_gguf_get_u32(g, "test.u64", &u) == -1, label, "'test.u64'", "18446744073709551615", "uint64");
    CHECK_ERR(tlm_gguf_get_i64(g, "test.u64", &i) == -1, label, "'test.u64'", "int64");
    CHECK_ERR(tlm_gguf_get_u32(g, "general.architecture", &u) == -1, label, "'general.architecture'", "string",
              "not an integer");
    CHECK_ERR(tlm_gguf_get_i64(g, "test.true", &i) == -1, "'test.true'", "bool");
    CHECK_ERR(tlm_gguf_get_f32(g, "llama.block_count", &f) == -1, "'llama.block_count'", "uint32", "float32");
    CHECK_ERR(tlm_gguf_get_bool(g, "a.u8", &b) == -1, "'a.u8'", "array of uint8", "not a bool");
    CHECK_ERR(tlm_gguf_get_str(g, "llama.block_count", &s) == -1, "'llama.block_count'", "not a string");
    CHECK_ERR(tlm_gguf_get_array(g, "llama.block_count", &et, &n) == -1, "'llama.block_count'", "not an array");
    CHECK_ERR(tlm_gguf_array_i64(g, tlm_gguf_find(g, "llama.block_count"), 0, &i) == -1, "not an array");
    CHECK_ERR(tlm_gguf_array_i64(g, NULL, 0, &i) == -1, label);

    /* arrays */
    CHECK(tlm_gguf_get_array(g, "a.u8", &et, &n) == 1 && et == GGUF_UINT8 && n == 3);
    check_i64s(g, "a.u8", GGUF_UINT8, (const int64_t[]){0, 1, 255}, 3);
    check_i64s(g, "a.i8", GGUF_INT8, (const int64_t[]){-128, 0, 127}, 3);
    check_i64s(g, "a.u16", GGUF_UINT16, (const int64_t[]){0, 65535}, 2);
    check_i64s(g, "a.i16", GGUF_INT16, (const int64_t[]){-32768, 32767, -1}, 3);
    check_i64s(g, "a.u32", GGUF_UINT32, (const int64_t[]){7, 4294967295}, 2);
    check_i64s(g, "a.i32", GGUF_INT32, (const int64_t[]){INT32_MIN, 5}, 2);
    check_i64s(g, "a.i64", GGUF_INT64, a_i64, 2);
    check_i64s(g, "a.empty", GGUF_INT32, NULL, 0);
    const gguf_kv *kv = tlm_gguf_find(g, "a.u64");
    CHECK(kv && kv->elem_type == GGUF_UINT64 && kv->count == 2);
    CHECK_ERR(tlm_gguf_array_i64(g, kv, 0, &i) == -1, "'a.u64'", "element 0", "18446744073709551615",
              "does not fit");
    CHECK(tlm_gguf_array_i64(g, kv, 1, &i) == 1 && i == 3);
    kv = tlm_gguf_find(g, "a.f32");
    CHECK(kv && kv->elem_type == GGUF_FLOAT32 && kv->count == 3);
    for (uint64_t k = 0; kv && k < 3; k++)
        CHECK(tlm_gguf_array_f32(g, kv, k, &f) == 1 && memcmp(&f, &a_f32[k], 4) == 0);
    CHECK_ERR(tlm_gguf_array_i64(g, kv, 0, &i) == -1, "'a.f32'", "not an integer");
    kv = tlm_gguf_find(g, "a.f64");
    CHECK(kv && kv->elem_type == GGUF_FLOAT64 && kv->count == 2);
    CHECK(tlm_gguf_array_f32(g, kv, 0, &f) == 1 && f == 0.25f);
    CHECK_ERR(tlm_gguf_array_f32(g, kv, 1, &f) == -1, "\"a.f64[1]\"", "-1e+300", "range of a float32");
    kv = tlm_gguf_find(g, "a.bool");
    CHECK(kv && kv->elem_type == GGUF_BOOL && kv->count == 4);
    CHECK_ERR(tlm_gguf_array_i64(g, kv, 0, &i) == -1, "'a.bool'", "array of bool");
    kv = tlm_gguf_find(g, "tokenizer.ggml.tokens");
    CHECK(kv && kv->elem_type == GGUF_STRING && kv->count == 4);
    static const size_t lens[4] = {5, 0, 6, 3};
    for (uint64_t k = 0; kv && k < 4; k++)
        CHECK(tlm_gguf_array_str(g, kv, k, &s) == 1 && str_is(s, a_str[k], lens[k]));
    CHECK_ERR(tlm_gguf_array_str(g, kv, 4, &s) == -1, label, "'tokenizer.ggml.tokens'", "index 4", "4 elements");
    CHECK_ERR(tlm_gguf_array_i64(g, kv, 0, &i) == -1, "'tokenizer.ggml.tokens'", "array of string");
    kv = tlm_gguf_find(g, "a.str_nul_terminated");
    for (uint64_t k = 0; kv && k < 4; k++)
        CHECK(tlm_gguf_array_str(g, kv, k, &s) == 1 && str_is(s, a_str[k], strlen(a_str[k])));
    kv = tlm_gguf_find(g, "a.str_empty");
    CHECK(kv && kv->elem_type == GGUF_STRING && kv->count == 0);
    CHECK_ERR(tlm_gguf_array_str(g, kv, 0, &s) == -1, "out of range");

    /* tensors: in order, found by name, aligned, the bytes given */
    CHECK(tlm_gguf_tensor_count(g) == N_TENSORS);
    const unsigned char *data0 = NULL;
    for (size_t k = 0; k < tlm_gguf_tensor_count(g) && k < N_TENSORS; k++) {
        const gguf_tensor *t = tlm_gguf_tensor_at(g, k);
        const tensor_in *in = &tensors_in[k];
        CHECK(str_is(t->name, in->name, strlen(in->name)));
        CHECK(tlm_gguf_find_tensor(g, in->name) == t);
        CHECK(t->type == in->type && t->n_dims == in->n_dims);
        for (int d = 0; d < 4; d++)
            CHECK(t->ne[d] == in->ne[d]);
        CHECK(t->nbytes == in->nbytes);
        CHECK(t->offset % a == 0);
        CHECK(in->nbytes == 0 || memcmp(t->data, in->data, in->nbytes) == 0);
        if (k == 0)
            data0 = t->data;
        CHECK((const unsigned char *)t->data - data0 == (ptrdiff_t)t->offset);
    }
    CHECK(tlm_gguf_tensor_at(g, N_TENSORS) == NULL);
    CHECK(tlm_gguf_find_tensor(g, "nope") == NULL && tlm_gguf_find_tensor(g, "") == NULL);
}

static void test_round_trip(void) {
    make_tensors();
    CHECK(write_sample(path, 0) == 0);
    tlm_gguf *g = tlm_gguf_open(path);
    CHECK(g != NULL);
    if (!g) {
        fprintf(stderr, "  %s\n", tlm_last_error());
        return;
    }
    check_sample(g, 0, path);

    /* layout: the data section starts at the aligned end of the header; the file ends with the
     * last tensor's bytes; the first tensor at offset 0, each next one at the next multiple of 32 */
    size_t len;
    unsigned char *file = (unsigned char *)test_read_file(path, &len);
    CHECK(memcmp(file, "GGUF\3\0\0\0", 8) == 0);
    const gguf_tensor *last = tlm_gguf_tensor_at(g, N_TENSORS - 1);
    uint64_t expect = 0;
    for (size_t k = 0; k < N_TENSORS; k++) {
        const gguf_tensor *t = tlm_gguf_tensor_at(g, k);
        CHECK(t->offset == expect);
        expect = (t->offset + t->nbytes + 31) / 32 * 32;
    }
    /* memory image: the same answers (the reader keeps its own copy) */
    tlm_gguf *m = tlm_gguf_open_memory(file, len, "mem.gguf");
    CHECK(m != NULL);
    if (m) {
        memset(file, 0, len);
        check_sample(m, 0, "mem.gguf");
        void *base;
        size_t blen;
        CHECK(tlm_gguf_detach_mapping(m, &base, &blen) == -1); /* not a mapping */
    }
    tlm_gguf_close(m);
    free(file);

    /* the data section's start in the file: the end of the header rounded up to 32; the file
     * ends exactly after the last tensor */
    file = (unsigned char *)test_read_file(path, &len);
    size_t data_start = len - (size_t)(last->offset + last->nbytes);
    CHECK(data_start % 32 == 0);
    CHECK(memcmp(file + data_start, tensors_in[0].data, tensors_in[0].nbytes) == 0);
    /* the zero padding between the first tensor (24 bytes) and the second */
    for (size_t k = 24; k < 32; k++)
        CHECK(file[data_start + k] == 0);
    free(file);

    /* the mapping handed over: tensor data stays readable after close */
    void *base = NULL;
    size_t blen = 0;
    const unsigned char *d = tlm_gguf_tensor_at(g, 3)->data;
    CHECK(tlm_gguf_detach_mapping(g, &base, &blen) == 0 && blen == len);
    tlm_gguf_close(g);
    CHECK(memcmp(d, tensors_in[3].data, tensors_in[3].nbytes) == 0);
    munmap(base, blen);

    /* a custom alignment: offsets and the data section on multiples of 64, then of 8 */
    uint32_t aligns[] = {64, 8, 1, 4096};
    for (size_t k = 0; k < sizeof aligns / sizeof *aligns; k++) {
        CHECK(write_sample(path, aligns[k]) == 0);
        g = tlm_gguf_open(path);
        CHECK(g != NULL);
        if (!g) {
            fprintf(stderr, "  %s\n", tlm_last_error());
            continue;
        }
        check_sample(g, aligns[k], path);
        file = (unsigned char *)test_read_file(path, &len);
        last = tlm_gguf_tensor_at(g, N_TENSORS - 1);
        CHECK((len - (size_t)(last->offset + last->nbytes)) % aligns[k] == 0);
        free(file);
        tlm_gguf_close(g);
    }

    /* an empty file: no metadata, no tensors */
    tlm_gguf_writer *w = tlm_gguf_writer_new();
    CHECK(tlm_gguf_write(w, path) == 0);
    tlm_gguf_writer_free(w);
    file = (unsigned char *)test_read_file(path, &len);
    CHECK(len == 24);
    free(file);
    g = tlm_gguf_open(path);
    CHECK(g && tlm_gguf_kv_count(g) == 0 && tlm_gguf_tensor_count(g) == 0 && tlm_gguf_alignment(g) == 32);
    tlm_gguf_close(g);
}

/* a vocabulary-sized string array: every element right, found in O(1) each */
static void test_big_vocab(void) {
    enum { N = 50000 };
    char **s = malloc(N * sizeof *s);
    for (int i = 0; i < N; i++) {
        s[i] = malloc(16);
        snprintf(s[i], 16, "tok%d", i);
    }
    tlm_gguf_writer *w = tlm_gguf_writer_new();
    CHECK(tlm_gguf_set_str_array(w, "tokenizer.ggml.tokens", (const char *const *)s, NULL, N) == 0);
    CHECK(tlm_gguf_write(w, path) == 0);
    tlm_gguf_writer_free(w);
    tlm_gguf *g = tlm_gguf_open(path);
    CHECK(g != NULL);
    const gguf_kv *kv = g ? tlm_gguf_find(g, "tokenizer.ggml.tokens") : NULL;
    CHECK(kv && kv->count == N);
    int bad = 0;
    for (int r = 0; kv && r < 20; r++) /* 1M lookups, in reverse: quadratic would take minutes */
        for (int i = N - 1; i >= 0; i--) {
            gguf_str t;
            if (tlm_gguf_array_str(g, kv, (uint64_t)i, &t) != 1 || t.len != strlen(s[i]) ||
                memcmp(t.p, s[i], t.len) != 0)
                bad++;
        }
    CHECK(bad == 0);
    tlm_gguf_close(g);
    for (int i = 0; i < N; i++)
        free(s[i]);
    free(s);
}

/* ---- floats that are not finite as a float32 -------------------------------------------------- */

/* a float32 NaN / +-Inf (scalar or array element, as tokenizer scores are) and a float64 NaN / Inf
 * are refused by the getters, naming the file and the key (and the element) */
static void test_nonfinite_floats(void) {
    bytes b = {0};
    header(&b, 3, 0, 7);
    const float fn = NAN, fi = INFINITY, fm = -INFINITY;
    const double dn = NAN, di = -INFINITY;
    str(&b, "f.nan"), u32(&b, GGUF_FLOAT32), put(&b, &fn, 4);
    str(&b, "f.inf"), u32(&b, GGUF_FLOAT32), put(&b, &fi, 4);
    str(&b, "f.minus_inf"), u32(&b, GGUF_FLOAT32), put(&b, &fm, 4);
    str(&b, "d.nan"), u32(&b, GGUF_FLOAT64), put(&b, &dn, 8);
    str(&b, "d.minus_inf"), u32(&b, GGUF_FLOAT64), put(&b, &di, 8);
    const float scores[3] = {-1.0f, NAN, INFINITY};
    str(&b, "s.f32"), u32(&b, GGUF_ARRAY), u32(&b, GGUF_FLOAT32), u64(&b, 3), put(&b, scores, 12);
    const double dscores[2] = {0.5, -INFINITY};
    str(&b, "s.f64"), u32(&b, GGUF_ARRAY), u32(&b, GGUF_FLOAT64), u64(&b, 2), put(&b, dscores, 16);
    tlm_gguf *g = good(&b);
    if (g) {
        float f = 7.0f;
        CHECK_ERR(tlm_gguf_get_f32(g, "f.nan", &f) == -1, "m.gguf", "\"f.nan\"", "NaN");
        CHECK_ERR(tlm_gguf_get_f32(g, "f.inf", &f) == -1, "m.gguf", "\"f.inf\"", "+Inf");
        CHECK_ERR(tlm_gguf_get_f32(g, "f.minus_inf", &f) == -1, "m.gguf", "\"f.minus_inf\"", "-Inf");
        CHECK_ERR(tlm_gguf_get_f32(g, "d.nan", &f) == -1, "m.gguf", "\"d.nan\"", "NaN");
        CHECK_ERR(tlm_gguf_get_f32(g, "d.minus_inf", &f) == -1, "m.gguf", "\"d.minus_inf\"", "-Inf");
        CHECK(f == 7.0f); /* (nothing written on a refusal) */
        const gguf_kv *kv = tlm_gguf_find(g, "s.f32");
        CHECK(tlm_gguf_array_f32(g, kv, 0, &f) == 1 && f == -1.0f);
        CHECK_ERR(tlm_gguf_array_f32(g, kv, 1, &f) == -1, "m.gguf", "\"s.f32[1]\"", "NaN");
        CHECK_ERR(tlm_gguf_array_f32(g, kv, 2, &f) == -1, "m.gguf", "\"s.f32[2]\"", "+Inf");
        kv = tlm_gguf_find(g, "s.f64");
        CHECK(tlm_gguf_array_f32(g, kv, 0, &f) == 1 && f == 0.5f);
        CHECK_ERR(tlm_gguf_array_f32(g, kv, 1, &f) == -1, "m.gguf", "\"s.f64[1]\"", "-Inf");
        tlm_gguf_close(g);
    }
    free(b.p);
}

/* ---- a hand-built version 2 file ------------------------------------------------------------- */

static void test_v2_by_hand(void) {
    bytes b = {0};
    header(&b, 2, 2, 15);
    str(&b, "v.u8"), u32(&b, GGUF_UINT8), u8(&b, 200);
    str(&b, "v.i8"), u32(&b, GGUF_INT8), u8(&b, 0x80);
    str(&b, "v.u16"), u32(&b, GGUF_UINT16), u8(&b, 0x34), u8(&b, 0x12);
    str(&b, "v.i16"), u32(&b, GGUF_INT16), u8(&b, 0xfe), u8(&b, 0xff);
    str(&b, "v.i64"), u32(&b, GGUF_INT64), u64(&b, (uint64_t)INT64_C(-1234567890123));
    double d = 3.25, big = 1e200;
    str(&b, "v.f64"), u32(&b, GGUF_FLOAT64), put(&b, &d, 8);
    str(&b, "v.f64_big"), u32(&b, GGUF_FLOAT64), put(&b, &big, 8);
    str(&b, "v.u64"), u32(&b, GGUF_UINT64), u64(&b, 5000000000ull);
    float fl = -2.5f;
    str(&b, "v.f32"), u32(&b, GGUF_FLOAT32), put(&b, &fl, 4);
    str(&b, "v.bool"), u32(&b, GGUF_BOOL), u8(&b, 1);
    kv_str(&b, "general.name", "hand");
    /* [[1, 2], [], [3]] of uint32 */
    str(&b, "v.nested"), u32(&b, GGUF_ARRAY), u32(&b, GGUF_ARRAY), u64(&b, 3);
    u32(&b, GGUF_UINT32), u64(&b, 2), u32(&b, 1), u32(&b, 2);
    u32(&b, GGUF_UINT32), u64(&b, 0);
    u32(&b, GGUF_UINT32), u64(&b, 1), u32(&b, 3);
    /* [[["x"]], [["", "yz"]]]: three levels, strings inside */
    str(&b, "v.nested3"), u32(&b, GGUF_ARRAY), u32(&b, GGUF_ARRAY), u64(&b, 2);
    u32(&b, GGUF_ARRAY), u64(&b, 1), u32(&b, GGUF_STRING), u64(&b, 1), str(&b, "x");
    u32(&b, GGUF_ARRAY), u64(&b, 1), u32(&b, GGUF_STRING), u64(&b, 2), str(&b, ""), str(&b, "yz");
    /* an array of arrays of bools */
    str(&b, "v.nested_bool"), u32(&b, GGUF_ARRAY), u32(&b, GGUF_ARRAY), u64(&b, 1);
    u32(&b, GGUF_BOOL), u64(&b, 2), u8(&b, 0), u8(&b, 1);
    str(&b, "v.i32"), u32(&b, GGUF_INT32), u32(&b, (uint32_t)-7);
    uint64_t ne[2] = {4, 1}, ne2[1] = {32};
    tinfo(&b, "output_norm.weight", 2, ne, WQ_F32, 0);
    tinfo(&b, "iq", 1, ne2, 16 /* IQ2_XXS: no size tinylm knows */, 32);
    pad(&b, 32);
    float w[4] = {1, -2, 3.5f, 0};
    put(&b, w, 16);
    zeros(&b, 16);
    zeros(&b, 10); /* the IQ tensor's bytes: up to the file's end */

    tlm_gguf *g = good(&b);
    if (g) {
        uint32_t u;
        int64_t i;
        float f;
        int bo;
        gguf_str s;
        CHECK(tlm_gguf_version(g) == 2 && tlm_gguf_kv_count(g) == 15 && tlm_gguf_alignment(g) == 32);
        CHECK(tlm_gguf_get_u32(g, "v.u8", &u) == 1 && u == 200);
        CHECK(tlm_gguf_get_i64(g, "v.i8", &i) == 1 && i == -128);
        CHECK_ERR(tlm_gguf_get_u32(g, "v.i8", &u) == -1, "m.gguf", "'v.i8'", "-128", "int8");
        CHECK(tlm_gguf_get_u32(g, "v.u16", &u) == 1 && u == 0x1234);
        CHECK(tlm_gguf_get_i64(g, "v.i16", &i) == 1 && i == -2);
        CHECK(tlm_gguf_get_i64(g, "v.i64", &i) == 1 && i == INT64_C(-1234567890123));
        CHECK_ERR(tlm_gguf_get_u32(g, "v.i64", &u) == -1, "'v.i64'", "int64");
        CHECK(tlm_gguf_get_i64(g, "v.u64", &i) == 1 && i == 5000000000);
        CHECK_ERR(tlm_gguf_get_u32(g, "v.u64", &u) == -1, "'v.u64'", "5000000000", "uint32");
        CHECK(tlm_gguf_get_i64(g, "v.i32", &i) == 1 && i == -7);
        CHECK(tlm_gguf_get_f32(g, "v.f64", &f) == 1 && f == 3.25f);
        CHECK_ERR(tlm_gguf_get_f32(g, "v.f64_big", &f) == -1, "\"v.f64_big\"", "1e+200", "float32");
        CHECK(tlm_gguf_get_f32(g, "v.f32", &f) == 1 && f == -2.5f);
        CHECK_ERR(tlm_gguf_get_i64(g, "v.f32", &i) == -1, "'v.f32'", "float32", "not an integer");
        CHECK(tlm_gguf_get_bool(g, "v.bool", &bo) == 1 && bo == 1);
        CHECK(tlm_gguf_get_str(g, "general.name", &s) == 1 && str_is(s, "hand", 4));
        gguf_type et;
        uint64_t n;
        CHECK(tlm_gguf_get_array(g, "v.nested", &et, &n) == 1 && et == GGUF_ARRAY && n == 3);
        CHECK(tlm_gguf_get_array(g, "v.nested3", &et, &n) == 1 && et == GGUF_ARRAY && n == 2);
        const gguf_kv *kv = tlm_gguf_find(g, "v.nested");
        CHECK_ERR(tlm_gguf_array_i64(g, kv, 0, &i) == -1, "'v.nested'", "array of array");
        CHECK_ERR(tlm_gguf_array_str(g, kv, 0, &s) == -1, "'v.nested'", "array of array");
        CHECK_ERR(tlm_gguf_array_f32(g, kv, 0, &f) == -1, "'v.nested'", "array of array");
        CHECK(tlm_gguf_kv_at(g, 14) == tlm_gguf_find(g, "v.i32"));
        CHECK(tlm_gguf_tensor_count(g) == 2);
        const gguf_tensor *t = tlm_gguf_find_tensor(g, "output_norm.weight");
        CHECK(t && t->n_dims == 2 && t->ne[0] == 4 && t->ne[1] == 1 && t->ne[2] == 1 && t->nbytes == 16 &&
              memcmp(t->data, w, 16) == 0);
        t = tlm_gguf_find_tensor(g, "iq");
        CHECK(t && t->type == 16 && t->nbytes == 0 && t->offset == 32 && t->data);
        tlm_gguf_close(g);
    }
    /* the same file through the mapping */
    test_write_file(path, b.p, b.n);
    g = tlm_gguf_open(path);
    CHECK(g && tlm_gguf_version(g) == 2 && tlm_gguf_tensor_count(g) == 2);
    tlm_gguf_close(g);
    free(b.p);
}

/* ---- malformed images ------------------------------------------------------------------------ */

/* Every strict prefix of a valid file is refused (the file ends with its last tensor's bytes). */
static void test_truncations(void) {
    CHECK(write_sample(path, 0) == 0);
    size_t len;
    char *file = test_read_file(path, &len);
    size_t refused = 0;
    for (size_t n = 0; n < len; n++) {
        tlm_gguf *g = tlm_gguf_open_memory(file, n, "cut.gguf");
        if (g) {
            fprintf(stderr, "  a prefix of %zu of %zu bytes opened\n", n, len);
            tlm_gguf_close(g);
        } else if (strstr(tlm_last_error(), "cut.gguf: ")) {
            refused++;
        } else {
            fprintf(stderr, "  prefix %zu: message without the file: %s\n", n, tlm_last_error());
        }
    }
    CHECK(refused == len);
    /* a few of the messages */
    tlm_gguf *g = tlm_gguf_open_memory(file, 3, "cut.gguf");
    CHECK_ERR(g == NULL, "cut.gguf", "magic");
    g = tlm_gguf_open_memory(file, 10, "cut.gguf");
    CHECK_ERR(g == NULL, "cut.gguf", "tensor count", "file ends");
    g = tlm_gguf_open_memory(file, 24 + 8 + 5, "cut.gguf"); /* inside the first key: the counts cannot fit */
    CHECK_ERR(g == NULL, "cut.gguf", "metadata count 25 cannot fit in the 13 bytes");
    g = tlm_gguf_open_memory(file, len - 1, "cut.gguf");
    CHECK_ERR(g == NULL, "cut.gguf", "tensor 'four.dims'", "past the end of the data section");
    free(file);
    /* through the file too */
    file = test_read_file(path, &len);
    test_write_file(path, file, 20);
    g = tlm_gguf_open(path);
    CHECK_ERR(g == NULL, path, "too short");
    test_write_file(path, file, len / 2);
    g = tlm_gguf_open(path);
    CHECK_ERR(g == NULL, path);
    free(file);
}

static void test_header_errors(void) {
    bytes b = {0};
    put(&b, "GGUF", 4), u32(&b, 1), u32(&b, 0), u32(&b, 0), zeros(&b, 16);
    BAD(&b, "version 1 is not supported");
    header(&b, 0x03000000u, 0, 0);
    BAD(&b, "big-endian GGUF is not supported");
    header(&b, 0x02000000u, 0, 0);
    BAD(&b, "big-endian");
    header(&b, 4, 0, 0);
    BAD(&b, "version 4 is not supported");
    put(&b, "GGML", 4), u32(&b, 3), u64(&b, 0), u64(&b, 0);
    BAD(&b, "not a GGUF file");
    header(&b, 3, UINT64_MAX, 0);
    BAD(&b, "tensor count 18446744073709551615", "cannot fit");
    header(&b, 3, 1ull << 63, 0);
    zeros(&b, 100);
    BAD(&b, "tensor count 9223372036854775808");
    header(&b, 3, 0, UINT64_MAX);
    BAD(&b, "metadata count 18446744073709551615", "cannot fit");
    header(&b, 3, 0, (1ull << 63) + 5);
    zeros(&b, 1000);
    BAD(&b, "metadata count");
    /* a tensor count that fits the file, but not what is left after the metadata */
    header(&b, 3, 3, 1);
    kv_str(&b, "general.name", "this string takes most of the room in the file, leaving too little");
    zeros(&b, 40);
    BAD(&b, "tensor count 3", "after the metadata");
}

static void test_metadata_errors(void) {
    bytes b = {0};
    /* string lengths near 2^64: key, value, array element */
    header(&b, 3, 0, 1), u64(&b, UINT64_MAX), zeros(&b, 20);
    BAD(&b, "metadata entry #0", "key length 18446744073709551615", "past the end");
    header(&b, 3, 0, 1), u64(&b, UINT64_MAX - 7), zeros(&b, 20);
    BAD(&b, "metadata entry #0", "key length", "past the end");
    header(&b, 3, 0, 1), str(&b, "general.name"), u32(&b, GGUF_STRING), u64(&b, UINT64_MAX), zeros(&b, 8);
    BAD(&b, "key 'general.name'", "string value length 18446744073709551615", "past the end");
    header(&b, 3, 0, 1), str(&b, "tok"), u32(&b, GGUF_ARRAY), u32(&b, GGUF_STRING), u64(&b, 2), str(&b, "a"),
        u64(&b, UINT64_MAX - 1), zeros(&b, 8);
    BAD(&b, "key 'tok'", "element 1", "string length 18446744073709551614", "past the end");
    /* array counts near 2^64, of each kind of element */
    static const uint32_t kinds[] = {GGUF_UINT8, GGUF_UINT16, GGUF_FLOAT64, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        uint64_t counts[] = {UINT64_MAX, 1ull << 63, (1ull << 61) + 1, 1000};
        for (size_t c = 0; c < 4; c++) {
            header(&b, 3, 0, 1), str(&b, "arr"), u32(&b, GGUF_ARRAY), u32(&b, kinds[k]), u64(&b, counts[c]);
            zeros(&b, 64);
            BAD(&b, "key 'arr'", "an array of", "cannot fit");
        }
    }
    /* unknown value types */
    header(&b, 3, 0, 1), str(&b, "k"), u32(&b, 13), zeros(&b, 8);
    BAD(&b, "key 'k'", "value type 13 is not a GGUF value type");
    header(&b, 3, 0, 1), str(&b, "k"), u32(&b, 0xffffffffu), zeros(&b, 8);
    BAD(&b, "key 'k'", "value type 4294967295");
    header(&b, 3, 0, 1), str(&b, "k"), u32(&b, GGUF_ARRAY), u32(&b, 99), u64(&b, 0);
    BAD(&b, "key 'k'", "array element type 99");
    header(&b, 3, 0, 1), str(&b, "k"), u32(&b, GGUF_ARRAY), u32(&b, GGUF_ARRAY), u64(&b, 1), u32(&b, 20), u64(&b, 0);
    BAD(&b, "key 'k'", "element 0", "array element type 20");
    /* bools that are neither 0 nor 1 */
    header(&b, 3, 0, 1), str(&b, "flag"), u32(&b, GGUF_BOOL), u8(&b, 2);
    BAD(&b, "key 'flag'", "bool value 2");
    header(&b, 3, 0, 1), str(&b, "flags"), u32(&b, GGUF_ARRAY), u32(&b, GGUF_BOOL), u64(&b, 3), u8(&b, 1), u8(&b, 0),
        u8(&b, 255);
    BAD(&b, "key 'flags'", "element 2", "bool value 255");
    /* arrays nested too deeply */
    header(&b, 3, 0, 1), str(&b, "deep"), u32(&b, GGUF_ARRAY);
    for (int k = 0; k < 100; k++)
        u32(&b, GGUF_ARRAY), u64(&b, 1);
    u32(&b, GGUF_UINT8), u64(&b, 0);
    BAD(&b, "key 'deep'", "nested more than");
    /* 8 levels are fine */
    header(&b, 3, 0, 1), str(&b, "deep"), u32(&b, GGUF_ARRAY);
    for (int k = 0; k < 7; k++)
        u32(&b, GGUF_ARRAY), u64(&b, 1);
    u32(&b, GGUF_UINT8), u64(&b, 1), u8(&b, 9);
    tlm_gguf *g = good(&b);
    tlm_gguf_close(g);
    free(b.p), b = (bytes){0};
    /* keys: empty, too long, with a NUL, twice */
    header(&b, 3, 0, 1), str(&b, ""), u32(&b, GGUF_UINT8), u8(&b, 0), zeros(&b, 8);
    BAD(&b, "metadata entry #0 has an empty key");
    {
        char *k = malloc(70000);
        memset(k, 'k', 70000);
        header(&b, 3, 0, 1), strn(&b, k, 70000), u32(&b, GGUF_UINT8), u8(&b, 0);
        BAD(&b, "metadata entry #0", "70000 bytes", "65535");
        header(&b, 3, 0, 1), strn(&b, k, 65535), u32(&b, GGUF_UINT8), u8(&b, 0);
        g = good(&b);
        tlm_gguf_close(g);
        free(b.p), b = (bytes){0};
        free(k);
    }
    header(&b, 3, 0, 1), strn(&b, "a\0b", 3), u32(&b, GGUF_UINT8), u8(&b, 0);
    BAD(&b, "metadata entry #0", "NUL");
    header(&b, 3, 0, 3), kv_u32(&b, "x", 1), kv_u32(&b, "general.name", 2), kv_str(&b, "x", "again");
    BAD(&b, "key 'x' appears twice", "#0 and #2");
    /* a value cut short */
    header(&b, 3, 0, 1), str(&b, "n"), u32(&b, GGUF_UINT64), u32(&b, 0);
    BAD(&b, "key 'n'", "uint64 value", "needs 8 bytes");
    /* general.alignment: a uint32 power of two */
    static const uint32_t bad_align[] = {0, 3, 48, 0x80000001u};
    for (size_t k = 0; k < 4; k++) {
        header(&b, 3, 0, 1), kv_u32(&b, "general.alignment", bad_align[k]);
        BAD(&b, "general.alignment", "not a power of two");
    }
    header(&b, 3, 0, 1), str(&b, "general.alignment"), u32(&b, GGUF_UINT64), u64(&b, 32);
    BAD(&b, "general.alignment", "must be a uint32, not uint64");
    header(&b, 3, 0, 1), kv_str(&b, "general.alignment", "32");
    BAD(&b, "general.alignment", "must be a uint32, not string");
    header(&b, 3, 0, 1), str(&b, "general.alignment"), u32(&b, GGUF_ARRAY), u32(&b, GGUF_UINT32), u64(&b, 1),
        u32(&b, 32);
    BAD(&b, "general.alignment", "an array of uint32");
}

/* A file of one metadata entry (general.alignment = align when nonzero) and the given tensors,
 * padded, then data_len bytes of data. */
typedef struct {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[5];
    uint32_t type;
    uint64_t off;
} tspec;

static bytes tensor_file(uint32_t align, const tspec *t, size_t n, size_t data_len) {
    bytes b = {0};
    header(&b, 3, n, align ? 1 : 0);
    if (align)
        kv_u32(&b, "general.alignment", align);
    for (size_t i = 0; i < n; i++)
        tinfo(&b, t[i].name, t[i].n_dims, t[i].ne, t[i].type, t[i].off);
    pad(&b, align ? align : 32);
    zeros(&b, data_len);
    return b;
}

static void test_tensor_errors(void) {
    bytes b;
    tlm_gguf *g;
    /* n_dims 0 and 5 */
    b = tensor_file(0, (tspec[]){{"t", 0, {0}, WQ_F32, 0}}, 1, 32);
    BAD(&b, "tensor 't'", "n_dims 0 is outside 1..4");
    b = tensor_file(0, (tspec[]){{"t", 5, {1, 1, 1, 1, 1}, WQ_F32, 0}}, 1, 32);
    BAD(&b, "tensor 't'", "n_dims 5 is outside 1..4");
    /* names: empty, too long, a NUL, twice, length near 2^64 */
    b = tensor_file(0, (tspec[]){{"", 1, {1}, WQ_F32, 0}}, 1, 32);
    BAD(&b, "tensor #0 has an empty name");
    b = tensor_file(0, (tspec[]){{"x0123456789012345678901234567890123456789012345678901234567890123", 1, {1}, WQ_F32,
                                  0}}, 1, 32);
    BAD(&b, "tensor #0", "65 bytes", "longer than the 64");
    b = tensor_file(0, (tspec[]){{"a", 1, {8}, WQ_F32, 0}, {"b", 1, {8}, WQ_F32, 32}, {"a", 1, {8}, WQ_F32, 64}}, 3,
                    96);
    BAD(&b, "tensor name 'a' appears twice", "#0 and #2");
    b = (bytes){0};
    header(&b, 3, 1, 0), strn(&b, "a\0", 2), u32(&b, 1), u64(&b, 1), u32(&b, 0), u64(&b, 0), pad(&b, 32), zeros(&b, 4);
    BAD(&b, "tensor #0", "NUL");
    header(&b, 3, 1, 0), u64(&b, UINT64_MAX), zeros(&b, 64);
    BAD(&b, "tensor #0", "name length 18446744073709551615", "past the end");
    /* dimensions: negative, an element count past 2^63, a byte size past 2^64 */
    b = tensor_file(0, (tspec[]){{"t", 2, {4, (uint64_t)-3}, WQ_F32, 0}}, 1, 32);
    BAD(&b, "tensor 't'", "ne[1] = -3 is negative");
    b = tensor_file(0, (tspec[]){{"t", 3, {1ull << 32, 1ull << 32, 2}, WQ_F32, 0}}, 1, 32);
    BAD(&b, "tensor 't'", "element count", "overflows");
    b = tensor_file(0, (tspec[]){{"t", 2, {1ull << 62, 1}, WQ_F32, 0}}, 1, 32);
    BAD(&b, "tensor 't'", "byte size", "overflows");
    b = tensor_file(0, (tspec[]){{"t", 4, {1ull << 20, 1ull << 20, 1ull << 20, 1ull << 2}, WQ_F32, 0}}, 1, 32);
    BAD(&b, "tensor 't'", "overflows");
    /* types: beyond ggml's numbers; ne[0] not whole blocks */
    b = tensor_file(0, (tspec[]){{"t", 1, {4}, 64, 0}}, 1, 32);
    BAD(&b, "tensor 't'", "type 64 is not a ggml type");
    b = tensor_file(0, (tspec[]){{"t", 1, {4}, 0xffffffffu, 0}}, 1, 32);
    BAD(&b, "tensor 't'", "type 4294967295");
    b = tensor_file(0, (tspec[]){{"blk.0.attn_q.weight", 2, {33, 2}, WQ_Q8_0, 0}}, 1, 128);
    BAD(&b, "tensor 'blk.0.attn_q.weight'", "ne[0] = 33 is not a multiple of the 32-element block of Q8_0");
    b = tensor_file(0, (tspec[]){{"k", 1, {128}, WQ_Q4_K, 0}}, 1, 256);
    BAD(&b, "tensor 'k'", "ne[0] = 128", "256-element block of Q4_K");
    /* offsets: misaligned, past the end, a size larger than what is there */
    b = tensor_file(0, (tspec[]){{"blk.0.attn_q.weight", 1, {4}, WQ_F32, 4}}, 1, 64);
    BAD(&b, "tensor 'blk.0.attn_q.weight': offset 4 is not a multiple of the alignment 32");
    b = tensor_file(64, (tspec[]){{"t", 1, {4}, WQ_F32, 32}}, 1, 128);
    BAD(&b, "tensor 't': offset 32 is not a multiple of the alignment 64");
    b = tensor_file(0, (tspec[]){{"t", 1, {4}, WQ_F32, 64}}, 1, 32);
    BAD(&b, "tensor 't'", "16 bytes at offset 64 run past the end of the data section (32 bytes");
    b = tensor_file(0, (tspec[]){{"t", 1, {4}, WQ_F32, UINT64_MAX - 31}}, 1, 32);
    BAD(&b, "tensor 't'", "past the end of the data section");
    b = tensor_file(0, (tspec[]){{"t", 2, {8, 2}, WQ_F32, 0}}, 1, 63); /* 64 bytes needed */
    BAD(&b, "tensor 't'", "F32 [8, 2]: 64 bytes at offset 0 run past the end");
    b = tensor_file(0, (tspec[]){{"q", 2, {32, 3}, WQ_Q8_0, 0}}, 1, 3 * 34 - 1);
    BAD(&b, "tensor 'q'", "Q8_0 [32, 3]: 102 bytes", "past the end");
    /* the data section must be there when there are tensors */
    b = (bytes){0};
    header(&b, 3, 1, 0), tinfo(&b, "t", 1, (uint64_t[]){0}, WQ_F32, 0);
    BAD(&b, "ends at byte", "before its data section");
    /* overlaps: a shape larger than the gap to the next tensor (the size/shape mismatch), two at
     * one offset, one inside another */
    b = tensor_file(0, (tspec[]){{"a", 1, {16}, WQ_F32, 0}, {"b", 1, {8}, WQ_F32, 32}}, 2, 96);
    BAD(&b, "tensor 'b' at offset 32 overlaps tensor 'a' (data bytes [0, 64))");
    b = tensor_file(0, (tspec[]){{"b", 1, {8}, WQ_F32, 32}, {"a", 1, {16}, WQ_F32, 0}}, 2, 96);
    BAD(&b, "tensor 'b' at offset 32 overlaps tensor 'a'");
    b = tensor_file(0, (tspec[]){{"a", 1, {4}, WQ_F32, 0}, {"b", 1, {4}, WQ_F32, 0}}, 2, 32);
    BAD(&b, "overlaps tensor");
    b = tensor_file(0, (tspec[]){{"big", 1, {64}, WQ_F32, 0}, {"in", 1, {1}, WQ_F32, 128}}, 2, 256);
    BAD(&b, "tensor 'in' at offset 128 overlaps tensor 'big' (data bytes [0, 256))");
    /* a tensor of unknown size reaches to the next one: one at its offset overlaps it */
    b = tensor_file(0, (tspec[]){{"iq", 1, {256}, 16, 0}, {"f", 1, {4}, WQ_F32, 0}}, 2, 64);
    BAD(&b, "tensor 'f' at offset 0 overlaps tensor 'iq'", "cannot size");
    b = tensor_file(0, (tspec[]){{"f", 1, {4}, WQ_F32, 0}, {"iq", 1, {256}, 16, 0}}, 2, 64);
    BAD(&b, "overlaps tensor");
    b = tensor_file(0, (tspec[]){{"f", 1, {16}, WQ_F32, 0}, {"iq", 1, {256}, 16, 32}}, 2, 64);
    BAD(&b, "tensor 'iq' at offset 32 overlaps tensor 'f' (data bytes [0, 64))");
    b = tensor_file(0, (tspec[]){{"iq", 1, {256}, 16, 32}}, 1, 32);
    BAD(&b, "tensor 'iq'", "offset 32 is the end of the data section");

    /* what is fine: no elements (ne 0) share an offset; a gap between tensors; unknown types */
    b = tensor_file(0, (tspec[]){{"e", 2, {0, 4}, WQ_Q8_0, 0}, {"f", 1, {4}, WQ_F32, 0}, {"z", 1, {0}, 16, 32}}, 3,
                    32);
    g = good(&b);
    if (g) {
        CHECK(tlm_gguf_find_tensor(g, "e")->nbytes == 0 && tlm_gguf_find_tensor(g, "f")->nbytes == 16);
        CHECK(tlm_gguf_find_tensor(g, "z")->nbytes == 0);
    }
    tlm_gguf_close(g);
    free(b.p);
    b = tensor_file(0, (tspec[]){{"iq", 1, {256}, 16, 0}, {"iq2", 1, {256}, 23, 64}, {"f", 1, {4}, WQ_F32, 128}}, 3,
                    144);
    g = good(&b);
    if (g) {
        CHECK(tlm_gguf_find_tensor(g, "iq")->nbytes == 0 && tlm_gguf_find_tensor(g, "iq2")->nbytes == 0);
        CHECK(tlm_gguf_find_tensor(g, "f")->nbytes == 16);
    }
    tlm_gguf_close(g);
    free(b.p);
    /* alignment 1: tensors back to back at any offset */
    b = tensor_file(1, (tspec[]){{"a", 1, {3}, WQ_F16, 0}, {"b", 1, {1}, WQ_F32, 6}}, 2, 10);
    g = good(&b);
    CHECK(g && tlm_gguf_alignment(g) == 1);
    tlm_gguf_close(g);
    free(b.p);
    /* a file without tensors may leave out the padding after the header */
    b = (bytes){0};
    header(&b, 3, 0, 1), kv_u32(&b, "n", 1);
    g = good(&b);
    tlm_gguf_close(g);
    free(b.p);
}

static void test_file_errors(void) {
    char missing[4300];
    snprintf(missing, sizeof missing, "%s.missing", path);
    tlm_gguf *g = tlm_gguf_open(missing);
    CHECK_ERR(g == NULL, missing);
    bytes b = {0};
    header(&b, 1, 0, 0);
    test_write_file(path, b.p, b.n);
    free(b.p);
    g = tlm_gguf_open(path);
    CHECK_ERR(g == NULL, path, "version 1");
}

/* ---- writer errors --------------------------------------------------------------------------- */

static void test_writer_errors(void) {
    make_tensors();
    CHECK(write_sample(path, 0) == 0);
    tlm_gguf_writer *w = tlm_gguf_writer_new();
    CHECK(tlm_gguf_set_u32(w, "k", 1) == 0);
    CHECK_ERR(tlm_gguf_set_u32(w, "k", 2) == -1, "'k'", "twice");
    CHECK_ERR(tlm_gguf_set_str(w, "k", "x", 1) == -1, "'k'", "twice");
    CHECK_ERR(tlm_gguf_set_u32(w, "", 2) == -1, "empty");
    CHECK_ERR(tlm_gguf_set_u32(w, NULL, 2) == -1, "empty");
    CHECK_ERR(tlm_gguf_set_u32(w, "general.alignment", 0) == -1, "general.alignment", "power of two");
    CHECK_ERR(tlm_gguf_set_u32(w, "general.alignment", 24) == -1, "general.alignment", "power of two");
    CHECK_ERR(tlm_gguf_set_u64(w, "general.alignment", 32) == -1, "general.alignment", "uint32");
    CHECK_ERR(tlm_gguf_set_str(w, "general.alignment", "32", 2) == -1, "general.alignment", "uint32");
    uint8_t bools[3] = {1, 2, 0};
    CHECK_ERR(tlm_gguf_set_array(w, "b", GGUF_BOOL, bools, 3) == -1, "'b'", "element 1", "not a bool");
    CHECK_ERR(tlm_gguf_set_array(w, "s", GGUF_STRING, bools, 1) == -1, "'s'", "string");
    CHECK_ERR(tlm_gguf_set_array(w, "s", GGUF_ARRAY, bools, 1) == -1, "'s'", "array");
    CHECK_ERR(tlm_gguf_set_array(w, "s", (gguf_type)77, bools, 1) == -1, "'s'");
    CHECK_ERR(tlm_gguf_set_array(w, "s", GGUF_UINT8, NULL, 1) == -1, "'s'", "NULL");
    CHECK_ERR(tlm_gguf_set_array(w, "s", GGUF_UINT64, bools, UINT64_MAX / 2) == -1, "'s'", "too many");
    const char *strs[2] = {"a", NULL};
    size_t lens[2] = {1, 3};
    CHECK_ERR(tlm_gguf_set_str_array(w, "s", strs, lens, 2) == -1, "'s'", "element 1", "NULL");
    CHECK_ERR(tlm_gguf_set_str(w, "s", NULL, 4) == -1, "'s'", "NULL");
    float x[8] = {0};
    int64_t ne[4] = {8, 1, 1, 1};
    CHECK(tlm_gguf_add_tensor(w, "w", WQ_F32, 1, ne, x, 32) == 0);
    CHECK_ERR(tlm_gguf_add_tensor(w, "w", WQ_F32, 1, ne, x, 32) == -1, "'w'", "twice");
    CHECK_ERR(tlm_gguf_add_tensor(w, "", WQ_F32, 1, ne, x, 32) == -1, "no name");
    CHECK_ERR(tlm_gguf_add_tensor(w, "x0123456789012345678901234567890123456789012345678901234567890123", WQ_F32, 1,
                                  ne, x, 32) == -1, "65 bytes");
    CHECK_ERR(tlm_gguf_add_tensor(w, "v", WQ_F32, 0, ne, x, 32) == -1, "'v'", "n_dims 0");
    CHECK_ERR(tlm_gguf_add_tensor(w, "v", WQ_F32, 5, ne, x, 32) == -1, "'v'", "n_dims 5");
    CHECK_ERR(tlm_gguf_add_tensor(w, "v", WQ_F32, 1, ne, x, 31) == -1, "'v'", "31 bytes", "holds 32");
    CHECK_ERR(tlm_gguf_add_tensor(w, "v", WQ_F16, 1, ne, x, 32) == -1, "'v'", "32 bytes", "holds 16");
    CHECK_ERR(tlm_gguf_add_tensor(w, "v", WQ_Q8_0, 1, ne, x, 32) == -1, "'v'", "ne[0] = 8", "block of Q8_0");
    CHECK_ERR(tlm_gguf_add_tensor(w, "v", WQ_Q8_K, 1, ne, x, 32) == -1, "'v'", "Q8_K");
    CHECK_ERR(tlm_gguf_add_tensor(w, "v", 99, 1, ne, x, 32) == -1, "'v'");
    CHECK_ERR(tlm_gguf_add_tensor(w, "v", WQ_F32, 1, ne, NULL, 32) == -1, "'v'", "NULL");
    int64_t neg[2] = {8, -1};
    CHECK_ERR(tlm_gguf_add_tensor(w, "v", WQ_F32, 2, neg, x, 32) == -1, "'v'", "ne[1] = -1 is negative");
    int64_t huge[3] = {INT64_C(1) << 40, INT64_C(1) << 40, INT64_C(1) << 40};
    CHECK_ERR(tlm_gguf_add_tensor(w, "v", WQ_F32, 3, huge, x, 32) == -1, "'v'", "overflows");
    /* a path that cannot be written: the old file stays */
    char dir_path[4300];
    snprintf(dir_path, sizeof dir_path, "%s/no-such-dir/x.gguf", path);
    CHECK_ERR(tlm_gguf_write(w, dir_path) == -1, "no-such-dir");
    tlm_gguf_writer_free(w);
    tlm_gguf *g = tlm_gguf_open(path);
    CHECK(g && tlm_gguf_tensor_count(g) == N_TENSORS);
    tlm_gguf_close(g);
    tlm_gguf_writer_free(NULL);
    tlm_gguf_close(NULL);
}

int main(void) {
    const char *dir = scratch_dir();
    snprintf(path, sizeof path, "%s/t.gguf", dir);
    test_round_trip();
    test_big_vocab();
    test_v2_by_hand();
    test_nonfinite_floats();
    test_truncations();
    test_header_errors();
    test_metadata_errors();
    test_tensor_errors();
    test_file_errors();
    test_writer_errors();
    for (int i = 0; i < N_TENSORS; i++)
        free(tensors_in[i].data);
    scratch_remove(dir);
    return check_report("test_gguf");
}
