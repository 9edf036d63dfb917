/* safetensors_read.c — parse and validate one safetensors file (mapped or in memory),
 * look tensors up, convert them to float32. See safetensors.h for the rules. */
#include "safetensors_internal.h"

#include "util/error.h"
#include "util/io.h"
#include "util/f16.h"
#include "util/utf8.h"
#include "util/hugepage.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this reader assumes a little-endian host"
#endif

tlm_safetensors *st_new(const char *label) {
    tlm_safetensors *st = calloc(1, sizeof *st);
    if (st && !(st->label = strdup(label))) {
        free(st);
        st = NULL;
    }
    if (!st)
        tlm_error("%s: out of memory", label);
    return st;
}

void tlm_st_close(tlm_safetensors *st) {
    if (!st)
        return;
    for (size_t i = 0; i < st->n; i++)
        free((char *)st->tensors[i].name);
    for (size_t i = 0; i < st->n_meta; i++) {
        free(st->meta[i].key);
        free(st->meta[i].value);
    }
    for (size_t i = 0; i < st->n_blobs; i++) {
        if (st->blobs[i].mapped)
            munmap(st->blobs[i].base, st->blobs[i].len);
        else
            free(st->blobs[i].base);
        free(st->blobs[i].path);
    }
    free(st->blobs);
    free(st->tensors);
    free(st->meta);
    free(st->by_name);
    free(st->label);
    free(st);
}

/* ---- small checks ------------------------------------------------------------------ */

/* A JSON number that is a non-negative integer small enough to be exact in a double. */
static int json_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v))
        return -1;
    double d = v->valuedouble;
    if (!(d >= 0.0) || d > 9007199254740992.0 || d != floor(d))
        return -1;
    *out = (uint64_t)d;
    return 0;
}

/* Describes a bad JSON value briefly for a message: the number, or its JSON type. */
static const char *json_kind(const cJSON *v, char *buf, size_t size) {
    if (cJSON_IsNumber(v))
        snprintf(buf, size, "%.17g", v->valuedouble);
    else
        snprintf(buf, size, "%s",
                 cJSON_IsString(v)   ? "a string"
                 : cJSON_IsArray(v)  ? "an array"
                 : cJSON_IsObject(v) ? "an object"
                 : cJSON_IsBool(v)   ? "a boolean"
                 : cJSON_IsNull(v)   ? "null"
                                     : "an invalid value");
    return buf;
}

char *tlm_shape_str(char *buf, size_t size, int ndim, const int64_t *shape) {
    size_t used = 0;
    if (size == 0)
        return buf;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

/* ---- parsing ----------------------------------------------------------------------- */

static int add_tensor(tlm_safetensors *st, const tlm_st_tensor *t) {
    if (st->n == st->cap) {
        size_t cap = st->cap ? 2 * st->cap : 16;
        tlm_st_tensor *p = realloc(st->tensors, cap * sizeof *p);
        if (!p)
            return tlm_error("%s: out of memory", t->file);
        st->tensors = p;
        st->cap = cap;
    }
    st->tensors[st->n++] = *t;
    return 0;
}

static int parse_metadata(tlm_safetensors *st, const char *file, const cJSON *obj) {
    if (!cJSON_IsObject(obj))
        return tlm_error("%s: __metadata__ must be an object of strings", file);
    size_t count = (size_t)cJSON_GetArraySize(obj);
    st_meta *p = realloc(st->meta, (st->n_meta + count + 1) * sizeof *p);
    if (!p)
        return tlm_error("%s: out of memory", file);
    st->meta = p;
    for (const cJSON *kv = obj->child; kv; kv = kv->next) {
        if (!cJSON_IsString(kv))
            return tlm_error("%s: __metadata__ value of '%.200s' must be a string", file, kv->string);
        st_meta *m = &st->meta[st->n_meta];
        m->key = strdup(kv->string);
        m->value = strdup(kv->valuestring);
        st->n_meta++; /* counted before the check so close frees a half-made entry */
        if (!m->key || !m->value)
            return tlm_error("%s: out of memory", file);
    }
    return 0;
}

/* Why a JSON value is not a usable size or offset (json_uint failed): "is a string, not an
 * integer", "= -1 is negative", "= 1.5 is not an integer", or "= 4e+18 is out of range". */
static const char *uint_problem(const cJSON *v, char *buf, size_t size) {
    char k[64];
    json_kind(v, k, sizeof k);
    if (!cJSON_IsNumber(v))
        snprintf(buf, size, "is %s, not an integer", k);
    else if (!(v->valuedouble >= 0.0))
        snprintf(buf, size, "= %s is negative", k);
    else if (v->valuedouble != floor(v->valuedouble))
        snprintf(buf, size, "= %s is not an integer", k);
    else
        snprintf(buf, size, "= %s is out of range (above 2^53)", k);
    return buf;
}

/* Fills t (except name) from one header entry; `begin`/`end` are data offsets; `data_len`, the
 * bytes after the header, only for messages. */
static int parse_entry(const char *file, const char *name, const cJSON *e, tlm_st_tensor *t, uint64_t *begin,
                       uint64_t *end, uint64_t data_len) {
    char kind[64];
    if (!cJSON_IsObject(e))
        return tlm_error("%s: tensor '%.200s': entry must be an object, not %s", file, name,
                         json_kind(e, kind, sizeof kind));
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!dt)
        return tlm_error("%s: tensor '%.200s': missing field 'dtype'", file, name);
    if (!cJSON_IsString(dt))
        return tlm_error("%s: tensor '%.200s': field 'dtype' must be a string, not %s", file, name,
                         json_kind(dt, kind, sizeof kind));
    if (tlm_dtype_from_name(dt->valuestring, &t->dtype) != 0)
        return tlm_error("%s: tensor '%.200s': unknown dtype '%.40s'", file, name, dt->valuestring);
    if (!sh)
        return tlm_error("%s: tensor '%.200s': missing field 'shape'", file, name);
    if (!cJSON_IsArray(sh))
        return tlm_error("%s: tensor '%.200s': field 'shape' must be an array, not %s", file, name,
                         json_kind(sh, kind, sizeof kind));
    int ndim = cJSON_GetArraySize(sh);
    if (ndim > TLM_MAX_DIMS)
        return tlm_error("%s: tensor '%.200s': shape has %d dimensions, at most %d are supported", file, name, ndim,
                         TLM_MAX_DIMS);
    t->ndim = ndim;
    int has_zero = 0;
    int i = 0;
    for (const cJSON *d = sh->child; d; d = d->next, i++) {
        uint64_t v;
        if (json_uint(d, &v) != 0)
            return tlm_error("%s: tensor '%.200s': shape[%d] = %s is not a non-negative integer", file, name, i,
                             json_kind(d, kind, sizeof kind));
        t->shape[i] = (int64_t)v;
        has_zero |= v == 0;
    }
    uint64_t numel = 1;
    for (i = 0; i < ndim && !has_zero; i++) {
        if ((uint64_t)t->shape[i] > SIZE_MAX / numel)
            return tlm_error("%s: tensor '%.200s': element count of the shape overflows", file, name);
        numel *= (uint64_t)t->shape[i];
    }
    if (has_zero)
        numel = 0;
    size_t esize = tlm_dtype_size(t->dtype);
    if (numel > SIZE_MAX / esize)
        return tlm_error("%s: tensor '%.200s': byte count of the shape overflows", file, name);
    t->numel = (size_t)numel;
    t->nbytes = (size_t)numel * esize;

    if (!off)
        return tlm_error("%s: tensor '%.200s': missing field 'data_offsets'", file, name);
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
        return tlm_error("%s: tensor '%.200s': field 'data_offsets' must be an array [begin, end]", file, name);
    const cJSON *field[2] = {off->child, off->child->next};
    uint64_t *value[2] = {begin, end};
    for (int k = 0; k < 2; k++) {
        if (json_uint(field[k], value[k]) == 0) continue;
        char why[128];
        uint_problem(field[k], why, sizeof why);
        const double d = cJSON_IsNumber(field[k]) ? field[k]->valuedouble : -1.0;
        if (d > (double)data_len && d == floor(d)) /* a whole number too large to be exact: past any file */
            return tlm_error("%s: tensor '%.200s': data_offsets[%d] (%s) = %.17g is past the end of the file (its "
                             "data is %llu bytes after the header)", file, name, k, k ? "end" : "begin",
                             field[k]->valuedouble, (unsigned long long)data_len);
        return tlm_error("%s: tensor '%.200s': data_offsets[%d] (%s) %s; offsets are non-negative integers", file,
                         name, k, k ? "end" : "begin", why);
    }
    if (*begin > *end)
        return tlm_error("%s: tensor '%.200s': data_offsets [%llu, %llu] has begin > end", file, name,
                         (unsigned long long)*begin, (unsigned long long)*end);
    if (*end - *begin != t->nbytes) {
        char s[160];
        return tlm_error("%s: tensor '%.200s': data_offsets [%llu, %llu] hold %llu bytes, but %s %s needs %zu", file,
                         name, (unsigned long long)*begin, (unsigned long long)*end,
                         (unsigned long long)(*end - *begin), tlm_dtype_name(t->dtype),
                         tlm_shape_str(s, sizeof s, t->ndim, t->shape), t->nbytes);
    }
    return 0;
}

typedef struct {
    uint64_t begin, end;
    size_t index;
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

/* The ranges of tensors [first, st->n) must tile [0, data_len) exactly. */
static int check_tiling(tlm_safetensors *st, const char *file, size_t first, span *spans, size_t count,
                        uint64_t data_len) {
    qsort(spans, count, sizeof *spans, span_cmp);
    uint64_t cursor = 0;
    const char *prev = NULL;
    for (size_t i = 0; i < count; i++) {
        const char *name = st->tensors[first + spans[i].index].name;
        if (spans[i].begin < cursor)
            return tlm_error("%s: tensor '%.200s': data_offsets [%llu, %llu] overlap tensor '%.200s'", file, name,
                             (unsigned long long)spans[i].begin, (unsigned long long)spans[i].end, prev);
        if (spans[i].begin > cursor)
            return tlm_error("%s: data bytes [%llu, %llu) before tensor '%.200s' belong to no tensor", file,
                             (unsigned long long)cursor, (unsigned long long)spans[i].begin, name);
        cursor = spans[i].end;
        if (spans[i].end > spans[i].begin)
            prev = name;
    }
    if (cursor != data_len)
        return tlm_error("%s: the tensors cover %llu data bytes but the file has %llu after the header", file,
                         (unsigned long long)cursor, (unsigned long long)data_len);
    return 0;
}

/* Parses the blob st->blobs[b]. On failure the tensors added so far stay in st (with
 * valid names) and are freed by tlm_st_close. */
static int parse_blob(tlm_safetensors *st, size_t b) {
    const char *file = st->blobs[b].path;
    const unsigned char *bytes = st->blobs[b].base;
    size_t len = st->blobs[b].len;
    if (len < 8)
        return tlm_error("%s: file is %zu bytes, too short for the 8-byte header length", file, len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | bytes[i];
    if (hlen > TLM_ST_MAX_HEADER)
        return tlm_error("%s: header length %llu exceeds the %llu-byte limit", file, (unsigned long long)hlen,
                         (unsigned long long)TLM_ST_MAX_HEADER);
    if (hlen > len - 8)
        return tlm_error("%s: header length %llu runs past the end of the file (%zu bytes)", file,
                         (unsigned long long)hlen, len);
    const char *json = (const char *)bytes + 8;
    if (hlen < 2 || json[0] != '{')
        return tlm_error("%s: header does not start with '{'", file);
    size_t bad = tlm_utf8_check(json, (size_t)hlen);
    if (bad != hlen)
        return tlm_error("%s: header is not valid UTF-8 (byte %zu)", file, bad);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, (size_t)hlen, &end, 0);
    if (!root && tlm_json_nesting_error(file, json, (size_t)hlen)) /* the header: cJSON's depth limit */
        return -1;
    if (!root) {
        size_t at = end && end >= json && end <= json + hlen ? (size_t)(end - json) : 0;
        return tlm_error("%s: header is not valid JSON (near byte %zu of %llu)", file, at, (unsigned long long)hlen);
    }
    for (const char *p = end; p < json + hlen; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(root);
            return tlm_error("%s: header has bytes after the JSON object (byte %zu)", file, (size_t)(p - json));
        }
    }
    int rc = 0;
    size_t first = st->n, count = 0, n_meta = 0;
    span *spans = NULL;
    if (!cJSON_IsObject(root)) {
        rc = tlm_error("%s: header must be a JSON object", file);
        goto done;
    }
    spans = malloc(((size_t)cJSON_GetArraySize(root) + 1) * sizeof *spans);
    if (!spans) {
        rc = tlm_error("%s: out of memory", file);
        goto done;
    }
    const unsigned char *data = bytes + 8 + hlen;
    uint64_t data_len = len - 8 - hlen;
    for (const cJSON *e = root->child; e && rc == 0; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (n_meta++)
                rc = tlm_error("%s: __metadata__ appears twice", file);
            else
                rc = parse_metadata(st, file, e);
            continue;
        }
        tlm_st_tensor t = {0};
        uint64_t begin = 0, stop = 0;
        t.file = file;
        if (parse_entry(file, e->string, e, &t, &begin, &stop, data_len) != 0) {
            rc = -1;
            break;
        }
        if (stop > data_len) {
            rc = tlm_error("%s: tensor '%.200s': data_offsets [%llu, %llu] run past the end of the data (%llu bytes)",
                           file, e->string, (unsigned long long)begin, (unsigned long long)stop,
                           (unsigned long long)data_len);
            break;
        }
        t.data = data + begin;
        t.name = strdup(e->string);
        if (!t.name || add_tensor(st, &t) != 0) {
            free((char *)t.name);
            rc = tlm_error("%s: out of memory", file);
            break;
        }
        spans[count] = (span){begin, stop, count};
        count++;
    }
    if (rc == 0)
        rc = check_tiling(st, file, first, spans, count, data_len);
done:
    free(spans);
    cJSON_Delete(root);
    return rc;
}

static int add_blob(tlm_safetensors *st, const char *label, void *base, size_t len, int mapped) {
    st_blob *p = realloc(st->blobs, (st->n_blobs + 1) * sizeof *p);
    char *path = strdup(label);
    if (!p || !path) {
        if (p)
            st->blobs = p;
        free(path);
        return tlm_error("%s: out of memory", label);
    }
    st->blobs = p;
    st->blobs[st->n_blobs++] = (st_blob){path, base, len, mapped};
    return 0;
}

int st_add_file(tlm_safetensors *st, const char *path) {
    int fd = tlm_open_input(path);
    if (fd < 0)
        return -1;
    struct stat sb; /* (a regular file: tlm_open_input refuses anything else) */
    if (fstat(fd, &sb) != 0) {
        int err = errno;
        close(fd);
        return tlm_error("%s: cannot stat: %s", path, strerror(err));
    }
    size_t len = (size_t)sb.st_size;
    if (len < 8) { /* also avoids mmap of length 0, which fails */
        close(fd);
        return tlm_error("%s: file is %zu bytes, too short for the 8-byte header length", path, len);
    }
    void *base = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (base == MAP_FAILED)
        return tlm_error("%s: cannot map: %s", path, strerror(err));
    if (add_blob(st, path, base, len, 1) != 0) {
        munmap(base, len);
        return -1;
    }
    return parse_blob(st, st->n_blobs - 1);
}

static int name_cmp(const void *a, const void *b) {
    const tlm_st_tensor *x = *(const tlm_st_tensor *const *)a, *y = *(const tlm_st_tensor *const *)b;
    return strcmp(x->name, y->name);
}

int st_finish(tlm_safetensors *st) {
    st->by_name = malloc((st->n + 1) * sizeof *st->by_name);
    if (!st->by_name)
        return tlm_error("%s: out of memory", st->label);
    for (size_t i = 0; i < st->n; i++)
        st->by_name[i] = &st->tensors[i];
    qsort(st->by_name, st->n, sizeof *st->by_name, name_cmp);
    for (size_t i = 1; i < st->n; i++) {
        const tlm_st_tensor *a = st->by_name[i - 1], *b = st->by_name[i];
        if (strcmp(a->name, b->name) != 0)
            continue;
        if (a->file == b->file)
            return tlm_error("%s: tensor '%.200s' appears twice in the header", a->file, a->name);
        return tlm_error("tensor '%.200s' is in two shards: %s and %s", a->name, a->file, b->file);
    }
    return 0;
}

tlm_safetensors *tlm_st_open(const char *path) {
    tlm_safetensors *st = st_new(path);
    if (!st)
        return NULL;
    if (st_add_file(st, path) != 0 || st_finish(st) != 0) {
        tlm_st_close(st);
        return NULL;
    }
    return st;
}

tlm_safetensors *tlm_st_open_memory(const void *data, size_t n, const char *label) {
    tlm_safetensors *st = st_new(label);
    if (!st)
        return NULL;
    void *copy = malloc(n ? n : 1);
    if (!copy) {
        tlm_error("%s: out of memory", label);
        tlm_st_close(st);
        return NULL;
    }
    if (n)
        memcpy(copy, data, n);
    if (add_blob(st, label, copy, n, 0) != 0) {
        free(copy);
        tlm_st_close(st);
        return NULL;
    }
    if (parse_blob(st, 0) != 0 || st_finish(st) != 0) {
        tlm_st_close(st);
        return NULL;
    }
    return st;
}

/* ---- queries ----------------------------------------------------------------------- */

size_t tlm_st_count(const tlm_safetensors *st) { return st->n; }

const tlm_st_tensor *tlm_st_at(const tlm_safetensors *st, size_t i) { return i < st->n ? &st->tensors[i] : NULL; }

const tlm_st_tensor *tlm_st_find(const tlm_safetensors *st, const char *name) {
    size_t lo = 0, hi = st->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->by_name[mid]->name, name);
        if (c == 0)
            return st->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *tlm_st_metadata(const tlm_safetensors *st, const char *key) {
    for (size_t i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta[i].key, key) == 0)
            return st->meta[i].value;
    return NULL;
}

size_t tlm_st_metadata_count(const tlm_safetensors *st) { return st->n_meta; }

int tlm_st_metadata_at(const tlm_safetensors *st, size_t i, const char **key, const char **value) {
    if (i >= st->n_meta)
        return tlm_error("safetensors: metadata index %zu out of range (%zu entries)", i, st->n_meta);
    *key = st->meta[i].key;
    *value = st->meta[i].value;
    return 0;
}

int tlm_st_detach_mapping(tlm_safetensors *st, void **base, size_t *len) {
    if (!st || st->n_blobs != 1 || !st->blobs[0].mapped) return -1;
    *base = st->blobs[0].base, *len = st->blobs[0].len;
    st->blobs[0].mapped = 0, st->blobs[0].base = NULL; /* (free(NULL) at close) */
    return 0;
}

void tlm_st_release(const tlm_safetensors *st, const tlm_st_tensor *t) {
    if (!st || !t) return;
    const char *p = t->data;
    for (size_t i = 0; i < st->n_blobs; i++) {
        const char *b = st->blobs[i].base;
        if (st->blobs[i].mapped && b && p >= b && p + t->nbytes <= b + st->blobs[i].len) {
            tlm_advise_done(p, t->nbytes);
            return;
        }
    }
}

int tlm_st_read_f32(const tlm_st_tensor *t, float *dst, size_t n_elems) {
    if (!tlm_dtype_is_float_weight(t->dtype))
        return tlm_error("%s: tensor '%.200s' has dtype %s, which cannot be read as float weights (need F32, F16 or "
                         "BF16)",
                         t->file, t->name, tlm_dtype_name(t->dtype));
    if (n_elems != t->numel) {
        char s[160];
        return tlm_error("%s: tensor '%.200s' has %zu elements (shape %s), but %zu were expected", t->file, t->name,
                         t->numel, tlm_shape_str(s, sizeof s, t->ndim, t->shape), n_elems);
    }
    const unsigned char *p = t->data;
    if (t->dtype == TLM_DT_F32) {
        if (n_elems)
            memcpy(dst, p, n_elems * sizeof(float));
        return 0;
    }
    for (size_t i = 0; i < n_elems; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        dst[i] = t->dtype == TLM_DT_BF16 ? tlm_bf16_to_f32(h) : tlm_f16_to_f32(h);
    }
    return 0;
}

int tlm_st_load_f32(const tlm_safetensors *st, const char *name, int ndim, const int64_t *shape, float *dst) {
    if (tlm_st_check_shape(st, name, ndim, shape)) return -1;
    const tlm_st_tensor *t = tlm_st_find(st, name);
    return tlm_st_read_f32(t, dst, t->numel);
}

int tlm_st_check_shape(const tlm_safetensors *st, const char *name, int ndim, const int64_t *shape) {
    const tlm_st_tensor *t = tlm_st_find(st, name);
    if (!t)
        return tlm_error("%s: no tensor named '%.200s'", st->label, name);
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = t->shape[i] == shape[i];
    if (!same) {
        char want[160], have[160];
        return tlm_error("%s: tensor '%.200s' has shape %s, expected %s", t->file, name,
                         tlm_shape_str(have, sizeof have, t->ndim, t->shape),
                         tlm_shape_str(want, sizeof want, ndim, shape));
    }
    return 0;
}
