/* llama2c.c — reading llama2.c version-0 checkpoints (layout in llama2c.h): the header as a
 * header and the float arrays in file order (src/convert/llama2c_load.c puts them into a
 * model). The header is untrusted: every field is range-checked and the file size must equal
 * what the header implies, computed without overflow, before anything is allocated. */
#include "llama2c.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/error.h"
#include "util/finite.h"
#include "util/io.h"

#define HEADER_BYTES 28
#define MAGIC_V1 0x616b3432u /* "ak42": the newer llama2.c export versions 1 and 2 */

static const char *const FIELD[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};

static int32_t le_i32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* *acc += a * b * c, failing on uint64 overflow */
static int add_product(uint64_t *acc, uint64_t a, uint64_t b, uint64_t c) {
    uint64_t ab, abc;
    if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc) || __builtin_add_overflow(*acc, abc, acc))
        return -1;
    return 0;
}

/* the header `raw` of a file of `size` bytes */
static int parse_fields(const char *path, const unsigned char *raw, uint64_t size, llama2c_header *h);

static int parse_header(const char *path, FILE *f, llama2c_header *h) {
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) return tlm_error("%s: cannot stat: %s", path, strerror(errno));
    unsigned char raw[HEADER_BYTES];
    if ((uint64_t)sb.st_size < HEADER_BYTES || fread(raw, 1, HEADER_BYTES, f) != HEADER_BYTES)
        return tlm_error("%s: file is %lld bytes, too short for the 28-byte llama2.c header", path, (long long)sb.st_size);
    return parse_fields(path, raw, (uint64_t)sb.st_size, h);
}

int llama2c_is_checkpoint(const void *data, size_t len) {
    if (len < HEADER_BYTES) return 0;
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", tlm_last_error()); /* a "no" leaves the caller's message */
    llama2c_header h;
    int yes = parse_fields("", data, len, &h) == 0;
    if (saved[0]) tlm_error("%s", saved);
    else tlm_clear_error();
    return yes;
}

static int parse_fields(const char *path, const unsigned char *raw, uint64_t size, llama2c_header *h) {
    if ((uint32_t)le_i32(raw) == MAGIC_V1)
        return tlm_error("%s: starts with the magic \"ak42\" of llama2.c export version 1/2; only the legacy "
                         "version-0 format is supported",
                         path);
    int v[7];
    for (int i = 0; i < 7; i++) v[i] = le_i32(raw + 4 * i);
    for (int i = 0; i < 7; i++)
        if (i == 5 ? (v[i] == 0 || v[i] == INT32_MIN) : v[i] <= 0)
            return tlm_error("%s: header field %s = %d is invalid (must be %s)", path, FIELD[i], v[i],
                             i == 5 ? "non-zero" : "positive");
    h->dim = v[0], h->hidden_dim = v[1], h->n_layers = v[2], h->n_heads = v[3], h->n_kv_heads = v[4];
    h->shared_classifier = v[5] > 0;
    h->vocab_size = v[5] > 0 ? v[5] : -v[5];
    h->seq_len = v[6];
    if (h->dim % h->n_heads != 0)
        return tlm_error("%s: header field dim = %d is not a multiple of n_heads = %d", path, h->dim, h->n_heads);
    if (h->n_heads % h->n_kv_heads != 0)
        return tlm_error("%s: header field n_kv_heads = %d does not divide n_heads = %d", path, h->n_kv_heads, h->n_heads);
    h->head_size = h->dim / h->n_heads;
    if (h->head_size % 2 != 0)
        return tlm_error("%s: head size dim / n_heads = %d must be even for RoPE", path, h->head_size);
    const uint64_t d = h->dim, ff = h->hidden_dim, L = h->n_layers, hs = h->head_size, V = h->vocab_size;
    const uint64_t qd = (uint64_t)h->n_heads * hs, kvd = (uint64_t)h->n_kv_heads * hs;
    uint64_t n = 0;
    int bad = add_product(&n, V, d, 1)              /* token embedding */
              || add_product(&n, L, d, 1)           /* rms_att */
              || add_product(&n, L, qd, d)          /* wq */
              || add_product(&n, L, kvd, d)         /* wk */
              || add_product(&n, L, kvd, d)         /* wv */
              || add_product(&n, L, d, qd)          /* wo */
              || add_product(&n, L, d, 1)           /* rms_ffn */
              || add_product(&n, L, ff, d)          /* w1 */
              || add_product(&n, L, d, ff)          /* w2 */
              || add_product(&n, L, ff, d)          /* w3 */
              || add_product(&n, d, 1, 1)           /* rms_final */
              || add_product(&n, h->seq_len, hs, 1) /* freq_cis_real + imag: 2 x seq_len x hs/2 */
              || (!h->shared_classifier && add_product(&n, V, d, 1));
    uint64_t bytes;
    if (bad || __builtin_mul_overflow(n, 4, &bytes) || __builtin_add_overflow(bytes, HEADER_BYTES, &bytes))
        return tlm_error("%s: header (dim %d, hidden_dim %d, n_layers %d, vocab_size %d) implies an impossible size",
                         path, h->dim, h->hidden_dim, h->n_layers, v[5]);
    if (size != bytes)
        return tlm_error("%s: file is %lld bytes but the header (dim %d, hidden_dim %d, n_layers %d, n_heads %d, "
                         "n_kv_heads %d, vocab_size %d, seq_len %d) implies %llu bytes (%s)",
                         path, (long long)size, h->dim, h->hidden_dim, h->n_layers, h->n_heads, h->n_kv_heads, v[5],
                         h->seq_len, (unsigned long long)bytes,
                         size < bytes ? "truncated" : "extra data after the weights");
    h->n_floats = n;
    return 0;
}

/* ---- reading the arrays --------------------------------------------------------------------- */

int llama2c_open(llama2c_file *lf, const char *path, llama2c_header *h) {
    memset(lf, 0, sizeof *lf);
    memset(h, 0, sizeof *h);
    FILE *f = tlm_fopen_input(path); /* (a regular file: names a FIFO, a directory, a dangling link) */
    if (!f) return -1;
    if (parse_header(path, f, h)) {
        fclose(f);
        return -1;
    }
    lf->f = f, lf->path = path;
    return 0;
}

int llama2c_read_floats(llama2c_file *lf, float *dst, size_t n, const char *what) {
    if (fread(dst, sizeof(float), n, lf->f) != n)
        return tlm_error("%s: read error in %s: %s", lf->path, what, ferror(lf->f) ? strerror(errno) : "unexpected end");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &dst[i], 4);
        u = __builtin_bswap32(u);
        memcpy(&dst[i], &u, 4);
    }
#endif
    if (!lf->field || strcmp(lf->field, what) != 0) lf->field = what, lf->field_off = 0, lf->field_warned = 0;
    if (!lf->field_warned) {
        int c = tlm_check_finite(dst, n, lf->field_off, lf->path, what);
        if (c < 0) return -1;
        lf->field_warned = c > 0;
    }
    lf->field_off += n;
    return 0;
}

int llama2c_skip_floats(llama2c_file *lf, size_t n, const char *what) {
    if (fseeko(lf->f, (off_t)n * (off_t)sizeof(float), SEEK_CUR) != 0)
        return tlm_error("%s: seek past %s failed: %s", lf->path, what, strerror(errno));
    return 0;
}

void llama2c_close(llama2c_file *lf) {
    if (lf->f) fclose(lf->f);
    lf->f = NULL;
}
