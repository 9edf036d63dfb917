/* test_npy.c — formats/npy: write/read round trip for float32 and int32 of several
 * shapes, the exact header layout of the NPY 1.0 spec (magic, version, little-endian
 * length, dict, 64-byte alignment, '\n' last), and clear errors for bad files.
 * (test_formats.py checks that numpy itself loads these files and writes ones we read.) */
#include "check.h"

#include "formats/npy.h"

#include <stdint.h>

static char path[4200];

static unsigned char *slurp(const char *p, size_t *n) {
    FILE *f = fopen(p, "rb");
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n + 1);
    *n = fread(b, 1, *n, f);
    fclose(f);
    return b;
}

/* A v1.0 file with the given dict text and data bytes, header padded as numpy does. */
static void make_npy(const char *dict, const void *data, size_t n) {
    char buf[4096];
    size_t dl = strlen(dict), total = (10 + dl + 1 + 63) / 64 * 64;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)((total - 10) & 0xff), buf[9] = (char)((total - 10) >> 8);
    memcpy(buf + 10, dict, dl);
    memset(buf + 10 + dl, ' ', total - 10 - dl);
    buf[total - 1] = '\n';
    memcpy(buf + total, data, n);
    test_write_file(path, buf, total + n);
}

static void round_trip(tlm_dtype dt, int ndim, const int64_t *shape, const char *want_shape_text) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= (size_t)shape[i];
    int32_t *x = malloc((n ? n : 1) * 4);
    for (size_t i = 0; i < n; i++) {
        if (dt == TLM_DT_F32) {
            float v = (float)i * 0.5f - 3.0f;
            memcpy(&x[i], &v, 4);
        } else {
            x[i] = (int32_t)(i * 2654435761u); /* spans negative and positive values */
        }
    }
    CHECK(tlm_npy_write(path, dt, ndim, shape, x) == 0);
    size_t len;
    unsigned char *raw = slurp(path, &len);
    CHECK(memcmp(raw, "\x93NUMPY\x01\x00", 8) == 0);
    size_t hlen = raw[8] | (size_t)raw[9] << 8;
    CHECK((10 + hlen) % 64 == 0);
    CHECK(raw[10 + hlen - 1] == '\n');
    CHECK(len == 10 + hlen + 4 * n);
    CHECK(strstr((char *)raw + 10, want_shape_text) != NULL);
    CHECK(strstr((char *)raw + 10, dt == TLM_DT_F32 ? "'descr': '<f4'" : "'descr': '<i4'") != NULL);
    free(raw);
    tlm_npy a;
    CHECK(tlm_npy_read(path, &a) == 0);
    CHECK(a.dtype == dt && a.ndim == ndim && a.numel == n);
    for (int i = 0; i < ndim; i++)
        CHECK(a.shape[i] == shape[i]);
    CHECK(n == 0 || memcmp(a.data, x, 4 * n) == 0);
    tlm_npy_free(&a);
    CHECK(a.data == NULL);
    free(x);
}

int main(void) {
    const char *dir = scratch_dir();
    snprintf(path, sizeof path, "%s/a.npy", dir);

    int64_t s0[1] = {0}, s1[1] = {5}, s2[2] = {2, 3}, s3[3] = {2, 3, 4}, s8[8] = {1, 2, 1, 2, 1, 2, 1, 3};
    round_trip(TLM_DT_F32, 0, s0, "'shape': ()");
    round_trip(TLM_DT_F32, 1, s0, "'shape': (0,)");
    round_trip(TLM_DT_F32, 1, s1, "'shape': (5,)");
    round_trip(TLM_DT_F32, 2, s2, "'shape': (2, 3)");
    round_trip(TLM_DT_I32, 3, s3, "'shape': (2, 3, 4)");
    round_trip(TLM_DT_I32, 8, s8, "'shape': (1, 2, 1, 2, 1, 2, 1, 3)");

    /* read_as */
    tlm_npy a;
    CHECK(tlm_npy_read_as(path, TLM_DT_I32, &a) == 0);
    tlm_npy_free(&a);
    CHECK_ERR(tlm_npy_read_as(path, TLM_DT_F32, &a) != 0, path, "'<i4'", "'<f4'");
    CHECK(a.data == NULL);

    /* hand-made headers the reader must accept: other spacing, key order, quotes */
    float four[4] = {1, 2, 3, 4};
    make_npy("{\"shape\":(2,2),\"fortran_order\":False,\"descr\":\"<f4\"}", four, 16);
    CHECK(tlm_npy_read(path, &a) == 0 && a.ndim == 2 && a.shape[0] == 2 && ((float *)a.data)[3] == 4.0f);
    tlm_npy_free(&a);

    /* bad files: each error names the file and the problem */
    make_npy("{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", four, 16);
    CHECK_ERR(tlm_npy_read(path, &a) != 0, path, "'>f4'", "not supported");
    make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", four, 16);
    CHECK_ERR(tlm_npy_read(path, &a) != 0, "'<f8'");
    make_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", four, 16);
    CHECK_ERR(tlm_npy_read(path, &a) != 0, "Fortran");
    make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", four, 16);
    CHECK_ERR(tlm_npy_read(path, &a) != 0, "truncated");
    make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", four, 16);
    CHECK_ERR(tlm_npy_read(path, &a) != 0, "extra bytes");
    make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }", four, 16);
    CHECK_ERR(tlm_npy_read(path, &a) != 0, "'shape'");
    make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,4), }", four, 16);
    CHECK_ERR(tlm_npy_read(path, &a) != 0, "'shape'", "at most 8");
    make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", four, 16);
    CHECK_ERR(tlm_npy_read(path, &a) != 0, "'shape'");
    make_npy("{'descr': '<f4', 'shape': (4,), }", four, 16);
    CHECK_ERR(tlm_npy_read(path, &a) != 0, "lacks", "fortran_order");
    make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'extra': 1}", four, 16);
    CHECK_ERR(tlm_npy_read(path, &a) != 0, "unknown key 'extra'");
    make_npy("['<f4']", four, 16);
    CHECK_ERR(tlm_npy_read(path, &a) != 0, "not a dict");
    make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,)} junk", four, 16);
    CHECK_ERR(tlm_npy_read(path, &a) != 0, "after the dict");
    test_write_file(path, "PK\x03\x04 this is a zip", sizeof "PK\x03\x04 this is a zip" - 1);
    CHECK_ERR(tlm_npy_read(path, &a) != 0, path, "bad magic");
    test_write_file(path, "\x93NUMPY\x09\x00\x10\x00{}", 12);
    CHECK_ERR(tlm_npy_read(path, &a) != 0, "version 9.0");
    test_write_file(path, "\x93NUMPY\x01\x00\xff\x00{'descr'", 17);
    CHECK_ERR(tlm_npy_read(path, &a) != 0, "header length 255 runs past");
    test_write_file(path, "\x93NUMPY", 6);
    CHECK_ERR(tlm_npy_read(path, &a) != 0, "bad magic");
    CHECK(a.data == NULL && a.numel == 0);
    snprintf(path, sizeof path, "%s/missing.npy", dir);
    CHECK_ERR(tlm_npy_read(path, &a) != 0, path, "cannot open");

    /* writer errors */
    CHECK_ERR(tlm_npy_write(path, TLM_DT_BF16, 1, s1, four) != 0, "BF16");
    int64_t neg[1] = {-1};
    CHECK_ERR(tlm_npy_write(path, TLM_DT_F32, 1, neg, four) != 0, "negative");
    CHECK_ERR(tlm_npy_write(path, TLM_DT_F32, 9, s8, four) != 0, "ndim 9");

    /* version 2.0 header (4-byte length) is read too */
    {
        const char *dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }";
        char buf[256];
        size_t dl = strlen(dict), total = (12 + dl + 1 + 63) / 64 * 64;
        memcpy(buf, "\x93NUMPY\x02\x00", 8);
        uint32_t hl = (uint32_t)(total - 12);
        buf[8] = (char)(hl & 0xff), buf[9] = (char)(hl >> 8), buf[10] = 0, buf[11] = 0;
        memcpy(buf + 12, dict, dl);
        memset(buf + 12 + dl, ' ', total - 12 - dl);
        buf[total - 1] = '\n';
        int32_t v[2] = {-7, 123456789};
        memcpy(buf + total, v, 8);
        snprintf(path, sizeof path, "%s/v2.npy", dir);
        test_write_file(path, buf, total + 8);
        CHECK(tlm_npy_read(path, &a) == 0 && a.dtype == TLM_DT_I32 && ((int32_t *)a.data)[1] == 123456789);
        tlm_npy_free(&a);
    }

    scratch_remove(dir);
    return check_report("test_npy");
}
