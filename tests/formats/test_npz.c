/* test_npz.c — the .npz reader (src/formats/npz.h) on archives built here byte by byte (a small
 * zip writer of its own: stored and deflated members, zip64 extra fields, comments): values and
 * keys, widened dtypes, and the malformed archives — every truncation, every byte flipped, and
 * each structural fault by name. Run under ASan + UBSan, the flips check that nothing reads
 * outside the image. */
#include "check.h" /* (first: it sets _XOPEN_SOURCE) */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "byte_image.h"
#include "formats/npz.h"

static void p16(bytes *b, unsigned v) { put_le16(b, v); }
static void p32(bytes *b, uint32_t v) { put_le32(b, v); }
static void p64(bytes *b, uint64_t v) { put_le64(b, v); }

/* an .npy image: descr, shape, raw data */
static bytes npy(const char *descr, int ndim, const int *shape, const void *data, size_t nbytes) {
    char h[256];
    int len = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < ndim; i++) len += snprintf(h + len, sizeof h - (size_t)len, "%d,%s", shape[i], i + 1 < ndim ? " " : "");
    len += snprintf(h + len, sizeof h - (size_t)len, "), }");
    while ((10 + len + 1) % 64) h[len++] = ' ';
    h[len++] = '\n';
    bytes b = {0};
    put(&b, "\x93NUMPY\x01\x00", 8);
    p16(&b, (unsigned)len);
    put(&b, h, (size_t)len);
    put(&b, data, nbytes);
    return b;
}

typedef struct {
    const char *name;
    bytes data;
    int method;  /* 0 stored, 8 deflated, other: written as is (stored bytes) */
    int zip64;   /* central sizes and offset 0xFFFFFFFF with a zip64 extra field */
    int flags;
} member;

static bytes deflate_raw(const bytes *in) {
    z_stream s;
    memset(&s, 0, sizeof s);
    deflateInit2(&s, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
    bytes out = {0};
    out.cap = deflateBound(&s, in->n) + 16;
    out.p = malloc(out.cap);
    s.next_in = in->p, s.avail_in = (uInt)in->n, s.next_out = out.p, s.avail_out = (uInt)out.cap;
    deflate(&s, Z_FINISH);
    out.n = s.total_out;
    deflateEnd(&s);
    return out;
}

/* a zip archive of the members (PKWARE APPNOTE layout), with an optional comment */
static bytes zip(member *m, int n, const char *comment) {
    bytes z = {0}, cd = {0};
    for (int i = 0; i < n; i++) {
        bytes body = m[i].method == 8 ? deflate_raw(&m[i].data) : m[i].data;
        const uint32_t crc = (uint32_t)crc32(0L, m[i].data.p, (uInt)m[i].data.n);
        const size_t off = z.n, nl = strlen(m[i].name);
        p32(&z, 0x04034b50), p16(&z, 20), p16(&z, (unsigned)m[i].flags), p16(&z, (unsigned)m[i].method), p16(&z, 0),
            p16(&z, 0);
        p32(&z, crc), p32(&z, (uint32_t)body.n), p32(&z, (uint32_t)m[i].data.n), p16(&z, (unsigned)nl), p16(&z, 0);
        put(&z, m[i].name, nl);
        put(&z, body.p, body.n);
        p32(&cd, 0x02014b50), p16(&cd, 45), p16(&cd, 20), p16(&cd, (unsigned)m[i].flags), p16(&cd, (unsigned)m[i].method);
        p16(&cd, 0), p16(&cd, 0), p32(&cd, crc);
        p32(&cd, m[i].zip64 ? 0xFFFFFFFFu : (uint32_t)body.n), p32(&cd, m[i].zip64 ? 0xFFFFFFFFu : (uint32_t)m[i].data.n);
        p16(&cd, (unsigned)nl), p16(&cd, m[i].zip64 ? 28 : 0), p16(&cd, 0), p16(&cd, 0), p16(&cd, 0), p32(&cd, 0);
        p32(&cd, m[i].zip64 ? 0xFFFFFFFFu : (uint32_t)off);
        put(&cd, m[i].name, nl);
        if (m[i].zip64) p16(&cd, 1), p16(&cd, 24), p64(&cd, m[i].data.n), p64(&cd, body.n), p64(&cd, off);
        if (m[i].method == 8) free(body.p);
    }
    const size_t cd_off = z.n;
    put(&z, cd.p, cd.n);
    const size_t cl = comment ? strlen(comment) : 0;
    p32(&z, 0x06054b50), p16(&z, 0), p16(&z, 0), p16(&z, (unsigned)n), p16(&z, (unsigned)n), p32(&z, (uint32_t)cd.n),
        p32(&z, (uint32_t)cd_off), p16(&z, (unsigned)cl);
    if (cl) put(&z, comment, cl);
    free(cd.p);
    return z;
}

static const float F[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, -7.0f};
static const int64_t I8[4] = {3, 17, -5, 2147483647};

static void members(member *m) {
    m[0] = (member){"blocks.0.hook_q.npy", npy("<f4", 2, (int[]){2, 3}, F, sizeof F), 0, 0, 0};
    m[1] = (member){"tokens.npy", npy("<i8", 1, (int[]){4}, I8, sizeof I8), 0, 0, 0};
}

static void free_members(member *m, int n) {
    for (int i = 0; i < n; i++) free(m[i].data.p);
}

static int parse(const bytes *z, tlm_npz *out) { return tlm_npz_parse(z->p, z->n, "t.npz", out); }

static void check_good(const bytes *z, const char *what) {
    tlm_npz a;
    int rc = parse(z, &a);
    if (rc) fprintf(stderr, "%s: %s\n", what, tlm_last_error());
    CHECK(rc == 0);
    if (rc) return;
    CHECK(a.n == 2 && !strcmp(a.e[0].key, "blocks.0.hook_q") && !strcmp(a.e[1].key, "tokens"));
    const tlm_npy *q = tlm_npz_find(&a, "blocks.0.hook_q"), *t = tlm_npz_find(&a, "tokens");
    CHECK(q && q->dtype == TLM_DT_F32 && q->ndim == 2 && q->shape[0] == 2 && q->shape[1] == 3 &&
          !memcmp(q->data, F, sizeof F));
    CHECK(t && t->dtype == TLM_DT_I32 && t->numel == 4 && ((int32_t *)t->data)[1] == 17 &&
          ((int32_t *)t->data)[2] == -5 && ((int32_t *)t->data)[3] == 2147483647);
    CHECK(!tlm_npz_find(&a, "nope"));
    tlm_npz_free(&a);
}

int main(void) {
    member m[3];
    members(m);
    bytes stored = zip(m, 2, NULL);
    check_good(&stored, "stored");
    m[0].method = m[1].method = 8;
    bytes deflated = zip(m, 2, NULL);
    check_good(&deflated, "deflated");
    m[0].method = m[1].method = 0, m[0].zip64 = m[1].zip64 = 1;
    bytes z64 = zip(m, 2, "a comment after the end record");
    check_good(&z64, "zip64 extra fields, a comment");
    m[0].zip64 = m[1].zip64 = 0;

    /* float64 and float16 widened to float32 */
    {
        const double d[2] = {0.1, -3.5};
        const uint16_t h[2] = {0x3C00, 0xC000}; /* 1, -2 */
        member w[2] = {{"a.npy", npy("<f8", 1, (int[]){2}, d, sizeof d), 0, 0, 0},
                       {"b.npy", npy("<f2", 1, (int[]){2}, h, sizeof h), 8, 0, 0}};
        bytes z = zip(w, 2, NULL);
        tlm_npz a;
        CHECK(parse(&z, &a) == 0);
        const float *fa = a.n == 2 ? a.e[0].a.data : NULL, *fb = a.n == 2 ? a.e[1].a.data : NULL;
        CHECK(fa && fa[0] == (float)0.1 && fa[1] == -3.5f && fb && fb[0] == 1.0f && fb[1] == -2.0f);
        tlm_npz_free(&a), free(z.p), free_members(w, 2);
    }
    /* every truncation fails, naming the file */
    int trunc_ok = 1;
    for (size_t n = 0; n < stored.n; n++) {
        tlm_npz a;
        if (tlm_npz_parse(stored.p, n, "t.npz", &a) == 0 || !strstr(tlm_last_error(), "t.npz")) trunc_ok = 0;
        tlm_npz_free(&a);
    }
    CHECK(trunc_ok);
    /* every byte of each archive flipped: refused with a message or read; never outside the image */
    const bytes *all[3] = {&stored, &deflated, &z64};
    int data_flip_caught = 1;
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < all[k]->n; i++) {
            unsigned char *c = malloc(all[k]->n);
            memcpy(c, all[k]->p, all[k]->n);
            c[i] ^= 0xA5;
            tlm_npz a;
            int rc = tlm_npz_parse(c, all[k]->n, "t.npz", &a);
            if (rc) CHECK(strstr(tlm_last_error(), "t.npz") != NULL);
            /* the stored float data of the first member: only the CRC can tell */
            if (k == 0 && i >= 30 + 19 + 128 && i < 30 + 19 + 128 + sizeof F && !(rc && strstr(tlm_last_error(), "CRC")))
                data_flip_caught = 0;
            tlm_npz_free(&a);
            free(c);
        }
    CHECK(data_flip_caught);
    /* structural faults by name */
    {
        tlm_npz a;
        member d[2] = {m[0], m[0]};
        bytes z = zip(d, 2, NULL);
        CHECK_ERR(parse(&z, &a) != 0, "t.npz", "'blocks.0.hook_q'", "twice");
        free(z.p);
        d[0].method = 12;
        z = zip(d, 1, NULL);
        CHECK_ERR(parse(&z, &a) != 0, "t.npz", "compression method 12");
        free(z.p);
        d[0].method = 0, d[0].flags = 1;
        z = zip(d, 1, NULL);
        CHECK_ERR(parse(&z, &a) != 0, "t.npz", "encrypted");
        free(z.p);
        d[0].flags = 0, d[0].name = "readme.txt";
        z = zip(d, 1, NULL);
        CHECK_ERR(parse(&z, &a) != 0, "t.npz", "'readme.txt'", "not an .npy");
        free(z.p);
        const int64_t big[1] = {(int64_t)1 << 40};
        member e[1] = {{"tokens.npy", npy("<i8", 1, (int[]){1}, big, sizeof big), 0, 0, 0}};
        z = zip(e, 1, NULL);
        CHECK_ERR(parse(&z, &a) != 0, "t.npz", "tokens.npy", "does not fit in int32");
        free(z.p), free_members(e, 1);
        const uint16_t u[1] = {7};
        member f[1] = {{"x.npy", npy("<u2", 1, (int[]){1}, u, sizeof u), 0, 0, 0}};
        z = zip(f, 1, NULL);
        CHECK_ERR(parse(&z, &a) != 0, "t.npz", "x.npy", "'<u2' is not supported");
        free(z.p), free_members(f, 1);
        /* a deflated member that claims to inflate to far more than deflate can give */
        member g[1] = {m[0]};
        g[0].method = 8;
        z = zip(g, 1, NULL);
        unsigned char *cdp = NULL;
        for (size_t i = 0; i + 4 <= z.n; i++)
            if (!memcmp(z.p + i, "PK\x01\x02", 4)) cdp = z.p + i;
        CHECK(cdp != NULL);
        if (cdp) cdp[24] = 0xFF, cdp[25] = 0xFF, cdp[26] = 0xFF, cdp[27] = 0x7F; /* (its size) */
        CHECK_ERR(parse(&z, &a) != 0, "t.npz", "cannot inflate");
        free(z.p);
        CHECK_ERR(tlm_npz_read("/nonexistent/dir/x.npz", &a) != 0, "/nonexistent/dir/x.npz");
        CHECK_ERR(tlm_npz_parse("PK", 2, "t.npz", &a) != 0, "t.npz", "not an .npz");
    }
    free(stored.p), free(deflated.p), free(z64.p);
    free_members(m, 2);
    return check_report("test_npz");
}
