/* npy.c — read and write NumPy .npy files (float32 / int32, C order). The header is a
 * Python dict literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * parsed here by a small strict scanner. */
#include "npy.h"

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/f16.h"
#include "util/io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy '<f4' / '<i4' data is little-endian; this code assumes a little-endian host"
#endif

static const char magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* ---- header scanner ---------------------------------------------------------------- */

typedef struct {
    const char *p, *end;
} scan;

static void skip_ws(scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static int eat(scan *s, char c) {
    skip_ws(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return 1;
    }
    return 0;
}

/* A quoted Python string without escapes, copied into out (truncation is an error). */
static int quoted(scan *s, char *out, size_t cap) {
    skip_ws(s);
    if (s->p >= s->end || (*s->p != '\'' && *s->p != '"'))
        return -1;
    char q = *s->p++;
    size_t n = 0;
    while (s->p < s->end && *s->p != q) {
        if (*s->p == '\\' || n + 1 >= cap)
            return -1;
        out[n++] = *s->p++;
    }
    if (s->p >= s->end)
        return -1;
    s->p++;
    out[n] = '\0';
    return 0;
}

static int word(scan *s, const char *w) {
    skip_ws(s);
    size_t n = strlen(w);
    if ((size_t)(s->end - s->p) >= n && memcmp(s->p, w, n) == 0) {
        s->p += n;
        return 1;
    }
    return 0;
}

/* (d0, d1, ...) with an optional trailing comma; -1 on bad syntax or too many dims. */
static int shape_tuple(scan *s, int *ndim, int64_t *shape) {
    if (!eat(s, '('))
        return -1;
    *ndim = 0;
    for (;;) {
        if (eat(s, ')'))
            return 0;
        skip_ws(s);
        if (s->p >= s->end || *s->p < '0' || *s->p > '9' || *ndim >= TLM_MAX_DIMS)
            return -1;
        int64_t v = 0;
        while (s->p < s->end && *s->p >= '0' && *s->p <= '9') {
            if (v > (INT64_MAX - 9) / 10)
                return -1;
            v = v * 10 + (*s->p++ - '0');
        }
        shape[(*ndim)++] = v;
        if (!eat(s, ',')) {
            return eat(s, ')') ? 0 : -1;
        }
    }
}

/* the element types the reader takes: '<f4' and '<i4' always; with widen also '<f8', '<f2' (read
 * as float32) and '<i8' (read as int32, each value range-checked) */
typedef enum { EL_F4, EL_I4, EL_F8, EL_F2, EL_I8 } elem_kind;
static const struct {
    const char *descr;
    tlm_dtype dtype;
    size_t size;
    int wide;
} ELEMS[] = {{"<f4", TLM_DT_F32, 4, 0}, {"<i4", TLM_DT_I32, 4, 0}, {"<f8", TLM_DT_F32, 8, 1},
             {"<f2", TLM_DT_F32, 2, 1}, {"<i8", TLM_DT_I32, 8, 1}};

/* Parses the dict; fills dtype/ndim/shape of out and the element kind *el. */
static int parse_header(const char *label, const char *h, size_t n, tlm_npy *out, int widen, elem_kind *el) {
    scan s = {h, h + n};
    int have_descr = 0, have_order = 0, have_shape = 0;
    if (!eat(&s, '{'))
        return tlm_error("%s: npy header is not a dict", label);
    while (!eat(&s, '}')) {
        char key[32], val[32];
        if (quoted(&s, key, sizeof key) != 0 || !eat(&s, ':'))
            return tlm_error("%s: npy header: expected 'key': value", label);
        if (strcmp(key, "descr") == 0) {
            if (quoted(&s, val, sizeof val) != 0)
                return tlm_error("%s: npy header: 'descr' must be a dtype string", label);
            int k = -1;
            for (int i = 0; i < (int)(sizeof ELEMS / sizeof ELEMS[0]) && k < 0; i++)
                if (strcmp(val, ELEMS[i].descr) == 0 && (widen || !ELEMS[i].wide))
                    k = i;
            if (k < 0)
                return tlm_error("%s: npy dtype '%s' is not supported (need %s)", label, val,
                                 widen ? "'<f4', '<f8', '<f2', '<i4' or '<i8'" : "'<f4' or '<i4'");
            out->dtype = ELEMS[k].dtype;
            *el = (elem_kind)k;
            have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (word(&s, "True"))
                return tlm_error("%s: npy array is in Fortran order; only C order is supported", label);
            if (!word(&s, "False"))
                return tlm_error("%s: npy header: 'fortran_order' must be True or False", label);
            have_order = 1;
        } else if (strcmp(key, "shape") == 0) {
            if (shape_tuple(&s, &out->ndim, out->shape) != 0)
                return tlm_error("%s: npy header: 'shape' must be a tuple of at most %d non-negative integers", label,
                                 TLM_MAX_DIMS);
            have_shape = 1;
        } else {
            return tlm_error("%s: npy header: unknown key '%s'", label, key);
        }
        if (!eat(&s, ',')) {
            if (!eat(&s, '}'))
                return tlm_error("%s: npy header: expected ',' or '}' after '%s'", label, key);
            break;
        }
    }
    skip_ws(&s);
    if (s.p != s.end)
        return tlm_error("%s: npy header has text after the dict", label);
    if (!have_descr || !have_order || !have_shape)
        return tlm_error("%s: npy header lacks '%s'", label,
                         !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
    return 0;
}

/* ---- reading ----------------------------------------------------------------------- */

/* The header of an .npy image of which the first n bytes are given: dtype, ndim, shape and
 * numel of out (no data), *el, *start the data's offset, *need its byte count. */
static int parse_npy_header(const void *bytes, size_t n, const char *label, tlm_npy *out, int widen, elem_kind *el,
                            size_t *start_out, size_t *need_out) {
    const unsigned char *b = bytes;
    memset(out, 0, sizeof *out);
    if (n < 10 || memcmp(b, magic, sizeof magic) != 0)
        return tlm_error("%s: not an .npy file (bad magic)", label);
    unsigned major = b[6], minor = b[7];
    size_t hlen, start;
    if (major == 1 && minor == 0) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        start = 10;
    } else if ((major == 2 || major == 3) && minor == 0 && n >= 12) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        start = 12;
    } else {
        return tlm_error("%s: npy format version %u.%u is not supported", label, major, minor);
    }
    if (hlen > n - start)
        return tlm_error("%s: npy header length %zu runs past the end of the file", label, hlen);
    tlm_npy a = {0};
    *el = EL_F4;
    if (parse_header(label, (const char *)b + start, hlen, &a, widen, el) != 0)
        return -1;
    const size_t esize = ELEMS[*el].size;
    size_t numel = 1;
    int has_zero = 0;
    for (int i = 0; i < a.ndim; i++)
        has_zero |= a.shape[i] == 0;
    for (int i = 0; i < a.ndim && !has_zero; i++) {
        if ((uint64_t)a.shape[i] > SIZE_MAX / 8 / numel)
            return tlm_error("%s: npy shape is too large", label);
        numel *= (size_t)a.shape[i];
    }
    a.numel = has_zero ? 0 : numel;
    *out = a;
    *start_out = start + hlen;
    *need_out = a.numel * esize;
    return 0;
}

int tlm_npy_peek_widen(const void *bytes, size_t n, const char *label, tlm_npy *out, size_t *total) {
    elem_kind el;
    size_t start, need;
    if (parse_npy_header(bytes, n, label, out, 1, &el, &start, &need)) return -1;
    *total = start + need;
    return 0;
}

static int parse_npy(const void *bytes, size_t n, const char *label, tlm_npy *out, int widen) {
    const unsigned char *b = bytes;
    memset(out, 0, sizeof *out);
    tlm_npy a;
    elem_kind el;
    size_t data_start, need;
    if (parse_npy_header(bytes, n, label, &a, widen, &el, &data_start, &need)) return -1;
    const size_t esize = ELEMS[el].size, have = n - data_start;
    if (have < need)
        return tlm_error("%s: npy data is truncated: %zu bytes, the shape needs %zu", label, have, need);
    if (have > need)
        return tlm_error("%s: npy file has %zu extra bytes after the array data", label, have - need);
    a.data = malloc(a.numel ? a.numel * 4 : 1);
    if (!a.data)
        return tlm_error("%s: out of memory", label);
    const unsigned char *src = b + data_start;
    if (esize == 4 && need) {
        memcpy(a.data, src, need);
    } else if (el == EL_F8) {
        float *d = a.data;
        for (size_t i = 0; i < a.numel; i++) {
            double v;
            memcpy(&v, src + 8 * i, 8);
            d[i] = (float)v;
        }
    } else if (el == EL_F2) {
        float *d = a.data;
        for (size_t i = 0; i < a.numel; i++) d[i] = tlm_f16_to_f32((uint16_t)(src[2 * i] | src[2 * i + 1] << 8));
    } else if (el == EL_I8) {
        int32_t *d = a.data;
        for (size_t i = 0; i < a.numel; i++) {
            int64_t v;
            memcpy(&v, src + 8 * i, 8);
            if (v < INT32_MIN || v > INT32_MAX) {
                free(a.data);
                return tlm_error("%s: npy '<i8' value %lld at flat index %zu does not fit in int32", label,
                                 (long long)v, i);
            }
            d[i] = (int32_t)v;
        }
    }
    *out = a;
    return 0;
}

int tlm_npy_parse(const void *bytes, size_t n, const char *label, tlm_npy *out) {
    return parse_npy(bytes, n, label, out, 0);
}

int tlm_npy_parse_widen(const void *bytes, size_t n, const char *label, tlm_npy *out) {
    return parse_npy(bytes, n, label, out, 1);
}

int tlm_npy_read(const char *path, tlm_npy *out) {
    memset(out, 0, sizeof *out);
    FILE *f = tlm_fopen_input(path);
    if (!f)
        return -1;
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return tlm_error("%s: not a readable regular file", path);
    }
    size_t n = (size_t)sb.st_size;
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return tlm_error("%s: out of memory (%zu bytes)", path, n);
    }
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    int rc = got == n ? tlm_npy_parse(buf, n, path, out) : tlm_error("%s: read failed", path);
    free(buf);
    return rc;
}

int tlm_npy_read_as(const char *path, tlm_dtype want, tlm_npy *out) {
    if (tlm_npy_read(path, out) != 0)
        return -1;
    if (out->dtype != want) {
        tlm_error("%s: npy dtype is %s, expected %s", path, out->dtype == TLM_DT_F32 ? "'<f4'" : "'<i4'",
                  want == TLM_DT_F32 ? "'<f4'" : "'<i4'");
        tlm_npy_free(out);
        return -1;
    }
    return 0;
}

void tlm_npy_free(tlm_npy *a) {
    if (!a)
        return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

/* ---- writing ----------------------------------------------------------------------- */

int tlm_npy_write(const char *path, tlm_dtype dtype, int ndim, const int64_t *shape, const void *data) {
    if (dtype != TLM_DT_F32 && dtype != TLM_DT_I32)
        return tlm_error("%s: npy writer supports F32 and I32, not %s", path, tlm_dtype_name(dtype));
    if (ndim < 0 || ndim > TLM_MAX_DIMS)
        return tlm_error("%s: ndim %d is outside 0..%d", path, ndim, TLM_MAX_DIMS);
    /* header text: magic(6) version(2) length(2) dict, padded to 64 with spaces + '\n' */
    char h[512];
    int len = snprintf(h + 10, sizeof h - 10, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                       dtype == TLM_DT_F32 ? "<f4" : "<i4");
    size_t numel = 1;
    int has_zero = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return tlm_error("%s: shape[%d] = %lld is negative", path, i, (long long)shape[i]);
        has_zero |= shape[i] == 0;
        /* numpy writes (n,) for one dimension: without the comma it is not a tuple */
        len += snprintf(h + 10 + len, sizeof h - 10 - (size_t)len, i ? " %lld," : "%lld,", (long long)shape[i]);
    }
    for (int i = 0; i < ndim && !has_zero; i++) {
        if ((uint64_t)shape[i] > SIZE_MAX / 4 / numel)
            return tlm_error("%s: shape is too large", path);
        numel *= (size_t)shape[i];
    }
    if (has_zero)
        numel = 0;
    if (ndim > 1)
        len--; /* (2, 3) rather than (2, 3,) — the form numpy writes */
    len += snprintf(h + 10 + len, sizeof h - 10 - (size_t)len, "), }");
    size_t total = 10 + (size_t)len + 1; /* + '\n' */
    size_t padded = (total + 63) / 64 * 64;
    memset(h + 10 + len, ' ', padded - total);
    h[padded - 1] = '\n';
    size_t hlen = padded - 10;
    memcpy(h, magic, sizeof magic);
    h[6] = 1;
    h[7] = 0;
    h[8] = (char)(hlen & 0xff);
    h[9] = (char)(hlen >> 8);
    if (numel && !data)
        return tlm_error("%s: data is NULL", path);
    tlm_atomic *f = tlm_atomic_open(path);
    if (!f)
        return -1;
    tlm_atomic_write(f, h, padded);
    tlm_atomic_write(f, data, numel * 4);
    return tlm_atomic_commit(f);
}

int tlm_npy_write_f32(const char *path, int ndim, const int64_t *shape, const float *data) {
    return tlm_npy_write(path, TLM_DT_F32, ndim, shape, data);
}

int tlm_npy_write_i32(const char *path, int ndim, const int64_t *shape, const int32_t *data) {
    return tlm_npy_write(path, TLM_DT_I32, ndim, shape, data);
}
