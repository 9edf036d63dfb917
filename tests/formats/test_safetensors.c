/* test_safetensors.c — formats/safetensors, single files:
 *   - writer -> reader round trip for F32 / BF16 / F16 / I32 / U8, a scalar, an empty
 *     tensor, odd-length BF16 (misaligns what follows), metadata with characters that
 *     JSON must escape; byte layout (8-byte length, header a multiple of 8, offsets
 *     contiguous in the given order);
 *   - every malformed case the reader must reject, each with an error that names the
 *     file and the tensor or field, and no crash (run under ASan/valgrind too);
 *   - writer input errors, after which the previous file is still intact.
 * Expected values are the inputs themselves (chosen to be exact in BF16/F16). */
#include "check.h"

#include "formats/safetensors.h"
#include "util/f16.h"

#include <stdint.h>

static char path[4200];

/* Writes a raw file: 8-byte length field `hlen`, then `header` (its own length), then data. */
static void raw_with_len(uint64_t hlen, const char *header, const void *data, size_t n) {
    size_t hl = strlen(header);
    unsigned char *buf = malloc(8 + hl + n + 1);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(buf + 8, header, hl);
    if (n)
        memcpy(buf + 8 + hl, data, n);
    test_write_file(path, buf, 8 + hl + n);
    free(buf);
}

static void raw(const char *header, const void *data, size_t n) { raw_with_len(strlen(header), header, data, n); }

/* Expects opening `path` to fail with a message naming the file and `want`. */
#define BAD(want, ...)                                                                                                 \
    do {                                                                                                               \
        tlm_safetensors *st_ = tlm_st_open(path);                                                                      \
        CHECK_ERR(st_ == NULL, path, want, ##__VA_ARGS__);                                                             \
        tlm_st_close(st_);                                                                                             \
    } while (0)

static void test_round_trip(void) {
    float f32[6] = {1.5f, -2.25f, 0.0f, 3e-5f, -65504.0f, 1e30f};
    float bf_in[5] = {1.0f, -0.5f, 3.140625f, 1024.0f, -0.0078125f}; /* exact in bf16 */
    float f16_in[3] = {0.099975586f, -2.0f, 65504.0f};                /* exact in f16 */
    uint16_t bf[5], h[3];
    tlm_f32_to_bf16_array(bf_in, bf, 5);
    tlm_f32_to_f16_array(f16_in, h, 3);
    int32_t i32[4] = {-1, 2147483647, 0, 42};
    uint8_t u8[3] = {1, 2, 255};
    float scalar = 7.0f;
    tlm_st_entry e[] = {
        {"layers.0.w", TLM_DT_F32, 2, {2, 3}, f32},
        {"bf", TLM_DT_BF16, 1, {5}, bf}, /* 10 bytes: the next tensor starts unaligned */
        {"h", TLM_DT_F16, 2, {3, 1}, h},
        {"ids \"quoted\" \xc3\xa9", TLM_DT_I32, 1, {4}, i32},
        {"mask", TLM_DT_U8, 1, {3}, u8},
        {"scalar", TLM_DT_F32, 0, {0}, &scalar},
        {"empty", TLM_DT_F32, 2, {0, 4}, NULL},
    };
    const char *meta = "{\"format\":\"pt\",\"note\":\"a \\\"quote\\\", a \\\\ and a\\nnewline\"}";
    CHECK(tlm_st_write(path, e, 7, meta) == 0);

    /* layout */
    FILE *f = fopen(path, "rb");
    unsigned char len8[8];
    CHECK(fread(len8, 1, 8, f) == 8);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | len8[i];
    CHECK(hlen % 8 == 0);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    CHECK((uint64_t)size == 8 + hlen + 24 + 10 + 6 + 16 + 3 + 4 + 0);

    tlm_safetensors *st = tlm_st_open(path);
    CHECK(st != NULL);
    if (!st) {
        fprintf(stderr, "%s\n", tlm_last_error());
        return;
    }
    CHECK(tlm_st_count(st) == 7);
    for (size_t i = 0; i < 7 && i < tlm_st_count(st); i++) {
        const tlm_st_tensor *t = tlm_st_at(st, i);
        CHECK(strcmp(t->name, e[i].name) == 0);
        CHECK(t->dtype == e[i].dtype && t->ndim == e[i].ndim);
        for (int d = 0; d < t->ndim; d++)
            CHECK(t->shape[d] == e[i].shape[d]);
        CHECK(t->nbytes == 0 || memcmp(t->data, e[i].data, t->nbytes) == 0);
        CHECK(strcmp(t->file, path) == 0);
        CHECK(tlm_st_find(st, e[i].name) == t);
    }
    CHECK(tlm_st_at(st, 7) == NULL);
    CHECK(tlm_st_find(st, "nope") == NULL);
    /* data offsets are contiguous in the given order */
    CHECK((const char *)tlm_st_at(st, 1)->data - (const char *)tlm_st_at(st, 0)->data == 24);
    CHECK((const char *)tlm_st_at(st, 2)->data - (const char *)tlm_st_at(st, 1)->data == 10);

    float out[6];
    CHECK(tlm_st_read_f32(tlm_st_find(st, "layers.0.w"), out, 6) == 0 && memcmp(out, f32, sizeof f32) == 0);
    CHECK(tlm_st_read_f32(tlm_st_find(st, "bf"), out, 5) == 0 && memcmp(out, bf_in, sizeof bf_in) == 0);
    CHECK(tlm_st_read_f32(tlm_st_find(st, "h"), out, 3) == 0 && memcmp(out, f16_in, sizeof f16_in) == 0);
    CHECK(tlm_st_read_f32(tlm_st_find(st, "scalar"), out, 1) == 0 && out[0] == 7.0f);
    CHECK(tlm_st_read_f32(tlm_st_find(st, "empty"), out, 0) == 0);
    int64_t want[2] = {3, 1}, wrong[2] = {1, 3};
    CHECK(tlm_st_load_f32(st, "h", 2, want, out) == 0 && out[1] == -2.0f);
    CHECK_ERR(tlm_st_load_f32(st, "h", 2, wrong, out) != 0, path, "'h'", "[3, 1]", "expected [1, 3]");
    CHECK_ERR(tlm_st_load_f32(st, "missing.weight", 2, want, out) != 0, path, "no tensor named 'missing.weight'");
    CHECK_ERR(tlm_st_read_f32(tlm_st_find(st, "mask"), out, 3) != 0, path, "'mask'", "U8");
    CHECK_ERR(tlm_st_read_f32(tlm_st_at(st, 3), out, 4) != 0, "I32", "cannot be read as float");
    CHECK_ERR(tlm_st_read_f32(tlm_st_find(st, "bf"), out, 4) != 0, "'bf'", "5 elements", "4 were expected");

    CHECK(tlm_st_metadata_count(st) == 2);
    CHECK(tlm_st_metadata(st, "format") && strcmp(tlm_st_metadata(st, "format"), "pt") == 0);
    CHECK(tlm_st_metadata(st, "note") && strcmp(tlm_st_metadata(st, "note"), "a \"quote\", a \\ and a\nnewline") == 0);
    CHECK(tlm_st_metadata(st, "absent") == NULL);
    const char *k, *v;
    CHECK(tlm_st_metadata_at(st, 1, &k, &v) == 0 && strcmp(k, "note") == 0);
    CHECK_ERR(tlm_st_metadata_at(st, 2, &k, &v) != 0, "out of range");
    tlm_st_close(st);

    /* the same bytes parsed from memory give the same result */
    FILE *g = fopen(path, "rb");
    char *buf = malloc((size_t)size);
    CHECK(fread(buf, 1, (size_t)size, g) == (size_t)size);
    fclose(g);
    st = tlm_st_open_memory(buf, (size_t)size, "mem");
    free(buf); /* the reader keeps its own copy */
    CHECK(st && tlm_st_count(st) == 7 && tlm_st_read_f32(tlm_st_find(st, "bf"), out, 5) == 0 && out[2] == 3.140625f);
    tlm_st_close(st);

    /* an empty checkpoint is valid: "{}" padded */
    CHECK(tlm_st_write(path, NULL, 0, NULL) == 0);
    st = tlm_st_open(path);
    CHECK(st && tlm_st_count(st) == 0 && tlm_st_metadata_count(st) == 0);
    tlm_st_close(st);
}

static void test_writer_errors(void) {
    float x[2] = {1, 2};
    tlm_st_entry good = {"w", TLM_DT_F32, 1, {2}, x};
    CHECK(tlm_st_write(path, &good, 1, NULL) == 0);
    tlm_st_entry dup[2] = {good, good};
    CHECK_ERR(tlm_st_write(path, dup, 2, NULL) != 0, path, "'w'", "twice");
    tlm_st_entry e = good;
    e.name = "__metadata__";
    CHECK_ERR(tlm_st_write(path, &e, 1, NULL) != 0, "reserved");
    e = good, e.name = "";
    CHECK_ERR(tlm_st_write(path, &e, 1, NULL) != 0, "no name");
    e = good, e.name = "bad\xff";
    CHECK_ERR(tlm_st_write(path, &e, 1, NULL) != 0, "UTF-8");
    e = good, e.shape[0] = -2;
    CHECK_ERR(tlm_st_write(path, &e, 1, NULL) != 0, "'w'", "negative");
    e = good, e.ndim = 9;
    CHECK_ERR(tlm_st_write(path, &e, 1, NULL) != 0, "'w'", "ndim 9");
    e = good, e.dtype = (tlm_dtype)99;
    CHECK_ERR(tlm_st_write(path, &e, 1, NULL) != 0, "'w'", "dtype");
    e = good, e.data = NULL;
    CHECK_ERR(tlm_st_write(path, &e, 1, NULL) != 0, "'w'", "NULL");
    e = good, e.ndim = 3, e.shape[0] = e.shape[1] = e.shape[2] = INT64_C(1) << 40;
    CHECK_ERR(tlm_st_write(path, &e, 1, NULL) != 0, "'w'", "too large");
    CHECK_ERR(tlm_st_write(path, &good, 1, "{\"n\": 3}") != 0, "metadata", "'n'", "string");
    CHECK_ERR(tlm_st_write(path, &good, 1, "[1]") != 0, "metadata");
    CHECK_ERR(tlm_st_write(path, &good, 1, "{bad json") != 0, "metadata");
    CHECK_ERR(tlm_st_write(path, &good, 1, "{\"k\": \"\xff\"}") != 0, "metadata entry 'k'", "UTF-8");
    /* after all those failures the first file is still there and intact */
    tlm_safetensors *st = tlm_st_open(path);
    float out[2] = {0};
    CHECK(st && tlm_st_count(st) == 1 && tlm_st_read_f32(tlm_st_at(st, 0), out, 2) == 0 && out[1] == 2.0f);
    tlm_st_close(st);
}

static void test_malformed(const char *dir) {
    static const unsigned char data[64] = {0};
    /* length field and header framing */
    test_write_file(path, "\x05\0\0", 3);
    BAD("3 bytes, too short");
    raw_with_len(1000, "{}", NULL, 0);
    BAD("header length 1000 runs past the end");
    raw_with_len((uint64_t)200 << 20, "{}", NULL, 0);
    BAD("exceeds the 104857600-byte limit");
    raw_with_len(UINT64_MAX, "{}", NULL, 0);
    BAD("exceeds");
    raw("[1, 2]", NULL, 0);
    BAD("does not start with '{'");
    raw("{\"a\": {\"dtype\": \"F32\", ", NULL, 0);
    BAD("not valid JSON");
    raw("{\"a\" 3}", NULL, 0);
    BAD("not valid JSON");
    raw("{}  x", NULL, 0);
    BAD("bytes after the JSON");
    {
        /* NUL padding is not allowed: only whitespace may follow the JSON object */
        static const unsigned char nul_pad[16] = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
        test_write_file(path, nul_pad, sizeof nul_pad);
        BAD("bytes after the JSON");
    }
    raw("{\"\xc3\x28\": 1}", NULL, 0);
    BAD("not valid UTF-8");

    /* field presence and types */
    raw("{\"a\": 3}", NULL, 0);
    BAD("tensor 'a'", "must be an object");
    raw("{\"a\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", data, 4);
    BAD("tensor 'a'", "missing field 'dtype'");
    raw("{\"a\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", data, 4);
    BAD("tensor 'a'", "missing field 'shape'");
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [1]}}", data, 4);
    BAD("tensor 'a'", "missing field 'data_offsets'");
    raw("{\"a\": {\"dtype\": 5, \"shape\": [1], \"data_offsets\": [0, 4]}}", data, 4);
    BAD("tensor 'a'", "'dtype' must be a string");
    raw("{\"a\": {\"dtype\": \"F7\", \"shape\": [1], \"data_offsets\": [0, 4]}}", data, 4);
    BAD("tensor 'a'", "unknown dtype 'F7'");
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": 4, \"data_offsets\": [0, 4]}}", data, 4);
    BAD("tensor 'a'", "'shape' must be an array");
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", data, 4);
    BAD("tensor 'a'", "shape[0] = -1 is not a non-negative integer");
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [1, 1.5], \"data_offsets\": [0, 4]}}", data, 4);
    BAD("tensor 'a'", "shape[1] = 1.5");
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [\"1\"], \"data_offsets\": [0, 4]}}", data, 4);
    BAD("tensor 'a'", "shape[0] = a string");
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [1e300], \"data_offsets\": [0, 4]}}", data, 4);
    BAD("tensor 'a'", "shape[0]");
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 4]}}", data, 4);
    BAD("tensor 'a'", "9 dimensions, at most 8");
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296, 4294967296], \"data_offsets\": [0, 4]}}",
        data, 4);
    BAD("tensor 'a'", "overflows");
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [4503599627370496, 4503599627370496], \"data_offsets\": [0, 4]}}",
        data, 4);
    BAD("tensor 'a'", "element count of the shape overflows");
    raw("{\"a\": {\"dtype\": \"F64\", \"shape\": [4503599627370496, 1024], \"data_offsets\": [0, 4]}}", data, 4);
    BAD("tensor 'a'", "byte count of the shape overflows");
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}", data, 4);
    BAD("tensor 'a'", "'data_offsets' must be an array [begin, end]");
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, \"4\"]}}", data, 4);
    BAD("tensor 'a'", "non-negative integers");
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [-4, 0]}}", data, 4);
    BAD("tensor 'a'", "non-negative integers");

    /* offsets against the shape and the data */
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [8, 4]}}", data, 8);
    BAD("tensor 'a'", "[8, 4] has begin > end");
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", data, 4);
    BAD("tensor 'a'", "run past the end of the data (4 bytes)");
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4]}}", data, 4);
    BAD("tensor 'a'", "hold 4 bytes, but F32 [2] needs 8");
    raw("{\"a\": {\"dtype\": \"BF16\", \"shape\": [2, 3], \"data_offsets\": [0, 24]}}", data, 24);
    BAD("tensor 'a'", "hold 24 bytes, but BF16 [2, 3] needs 12");
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
        " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
        data, 12);
    BAD("tensor 'b'", "overlap tensor 'a'");
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
        " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}",
        data, 8);
    BAD("overlap");
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
        " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}",
        data, 12);
    BAD("data bytes [4, 8) before tensor 'b' belong to no tensor");
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", data, 8);
    BAD("cover 4 data bytes but the file has 8");
    raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
        " \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
        data, 8);
    BAD("tensor 'a' appears twice");

    /* metadata */
    raw("{\"__metadata__\": {\"n\": 3}}", NULL, 0);
    BAD("__metadata__", "'n'", "must be a string");
    raw("{\"__metadata__\": [\"x\"]}", NULL, 0);
    BAD("__metadata__ must be an object");
    raw("{\"__metadata__\": {}, \"__metadata__\": {}}", NULL, 0);
    BAD("__metadata__ appears twice");

    /* not a file */
    snprintf(path, sizeof path, "%s", dir);
    BAD("not a regular file");
    snprintf(path, sizeof path, "%s/absent.safetensors", dir);
    BAD("cannot open", "No such file");

    /* order of entries in the header does not matter, zero-size tensors may share an
     * offset, and valid files from the reader's point of view still open */
    snprintf(path, sizeof path, "%s/ok.safetensors", dir);
    raw("{\"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]},"
        " \"z\": {\"dtype\": \"F32\", \"shape\": [0, 5], \"data_offsets\": [4, 4]},"
        " \"a\": {\"dtype\": \"I8\", \"shape\": [4], \"data_offsets\": [0, 4]}}    ",
        data, 8);
    tlm_safetensors *st = tlm_st_open(path);
    CHECK(st && tlm_st_count(st) == 3 && strcmp(tlm_st_at(st, 0)->name, "b") == 0);
    tlm_st_close(st);
}

int main(void) {
    const char *dir = scratch_dir();
    snprintf(path, sizeof path, "%s/t.safetensors", dir);
    test_round_trip();
    test_writer_errors();
    snprintf(path, sizeof path, "%s/bad.safetensors", dir);
    test_malformed(dir);
    scratch_remove(dir);
    return check_report("test_safetensors");
}
