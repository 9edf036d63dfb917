/* safetensors_write.c — write a .safetensors file atomically, and the f32 -> 16-bit
 * conversions used to export BF16 / F16 checkpoints. */
#include "safetensors_internal.h"

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/f16.h"
#include "util/buf.h"
#include "util/utf8.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put_u64(tlm_buf *b, unsigned long long v) {
    char tmp[32];
    tlm_buf_put(b, tmp, (size_t)snprintf(tmp, sizeof tmp, "%llu", v));
}

/* A JSON string literal: quotes, backslashes and control characters escaped. */
static void put_json_string(tlm_buf *b, const char *s) {
    tlm_buf_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            tlm_buf_put(b, esc, 2);
        } else if (c < 0x20) {
            char esc[8];
            tlm_buf_put(b, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x", c));
        } else {
            tlm_buf_put(b, (const char *)&c, 1);
        }
    }
    tlm_buf_put(b, "\"", 1);
}

/* Appends "__metadata__":{...} from the caller's JSON text after checking it. */
static int put_metadata(tlm_buf *b, const char *path, const char *metadata_json) {
    cJSON *m = cJSON_Parse(metadata_json);
    if (!m || !cJSON_IsObject(m)) {
        cJSON_Delete(m);
        return tlm_error("%s: metadata must be a JSON object of strings", path);
    }
    tlm_buf_put(b, "\"__metadata__\":{", 16);
    for (const cJSON *kv = m->child; kv; kv = kv->next) {
        if (!cJSON_IsString(kv)) {
            tlm_error("%s: metadata value of '%.200s' must be a string", path, kv->string);
            cJSON_Delete(m);
            return -1;
        }
        size_t kl = strlen(kv->string), vl = strlen(kv->valuestring);
        if (tlm_utf8_check(kv->string, kl) != kl ||
            tlm_utf8_check(kv->valuestring, vl) != vl) {
            tlm_error("%s: metadata entry '%.200s' is not valid UTF-8", path, kv->string);
            cJSON_Delete(m);
            return -1;
        }
        if (kv != m->child)
            tlm_buf_put(b, ",", 1);
        put_json_string(b, kv->string);
        tlm_buf_put(b, ":", 1);
        put_json_string(b, kv->valuestring);
    }
    tlm_buf_put(b, "}", 1);
    cJSON_Delete(m);
    return 0;
}

static int name_ptr_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Checks one entry and computes its byte count. */
static int check_entry(const char *path, size_t i, const tlm_st_entry *e, size_t *nbytes) {
    if (!e->name || !*e->name)
        return tlm_error("%s: tensor #%zu has no name", path, i);
    size_t len = strlen(e->name);
    if (tlm_utf8_check(e->name, len) != len)
        return tlm_error("%s: tensor #%zu: name is not valid UTF-8", path, i);
    if (strcmp(e->name, "__metadata__") == 0)
        return tlm_error("%s: '__metadata__' is reserved and cannot name a tensor", path);
    if ((unsigned)e->dtype >= TLM_DT_COUNT)
        return tlm_error("%s: tensor '%.200s': invalid dtype %d", path, e->name, (int)e->dtype);
    if (e->ndim < 0 || e->ndim > TLM_MAX_DIMS)
        return tlm_error("%s: tensor '%.200s': ndim %d is outside 0..%d", path, e->name, e->ndim, TLM_MAX_DIMS);
    int has_zero = 0;
    for (int d = 0; d < e->ndim; d++) {
        if (e->shape[d] < 0)
            return tlm_error("%s: tensor '%.200s': shape[%d] = %lld is negative", path, e->name, d,
                             (long long)e->shape[d]);
        has_zero |= e->shape[d] == 0;
    }
    size_t numel = 1;
    for (int d = 0; d < e->ndim && !has_zero; d++) {
        if ((uint64_t)e->shape[d] > SIZE_MAX / numel)
            return tlm_error("%s: tensor '%.200s': shape is too large", path, e->name);
        numel *= (size_t)e->shape[d];
    }
    if (has_zero)
        numel = 0;
    size_t esize = tlm_dtype_size(e->dtype);
    if (numel > SIZE_MAX / esize)
        return tlm_error("%s: tensor '%.200s': shape is too large", path, e->name);
    *nbytes = numel * esize;
    if (*nbytes && !e->data)
        return tlm_error("%s: tensor '%.200s': data is NULL", path, e->name);
    return 0;
}

/* Builds the padded JSON header; also returns each tensor's byte count. */
static int build_header(tlm_buf *b, const char *path, const tlm_st_entry *entries, size_t n, const char *metadata_json,
                        size_t *nbytes) {
    tlm_buf_put(b, "{", 1);
    if (metadata_json) {
        if (put_metadata(b, path, metadata_json) != 0)
            return -1;
        if (n)
            tlm_buf_put(b, ",", 1);
    }
    unsigned long long offset = 0;
    for (size_t i = 0; i < n; i++) {
        const tlm_st_entry *e = &entries[i];
        if (check_entry(path, i, e, &nbytes[i]) != 0)
            return -1;
        if (i)
            tlm_buf_put(b, ",", 1);
        put_json_string(b, e->name);
        tlm_buf_puts(b, ":{\"dtype\":\"");
        tlm_buf_puts(b, tlm_dtype_name(e->dtype));
        tlm_buf_puts(b, "\",\"shape\":[");
        for (int d = 0; d < e->ndim; d++) {
            if (d)
                tlm_buf_put(b, ",", 1);
            put_u64(b, (unsigned long long)e->shape[d]);
        }
        tlm_buf_puts(b, "],\"data_offsets\":[");
        put_u64(b, offset);
        tlm_buf_put(b, ",", 1);
        if (nbytes[i] > (unsigned long long)-1 - offset)
            return tlm_error("%s: total tensor size overflows", path);
        offset += nbytes[i];
        put_u64(b, offset);
        tlm_buf_puts(b, "]}");
    }
    tlm_buf_put(b, "}", 1);
    while (b->len % 8) /* the spec allows trailing spaces; they align the data to 8 bytes */
        tlm_buf_put(b, " ", 1);
    if (b->oom)
        return tlm_error("%s: out of memory", path);
    if ((uint64_t)b->len > TLM_ST_MAX_HEADER)
        return tlm_error("%s: header of %zu bytes exceeds the %llu-byte limit", path, b->len,
                         (unsigned long long)TLM_ST_MAX_HEADER);
    return 0;
}

int tlm_st_write(const char *path, const tlm_st_entry *entries, size_t n, const char *metadata_json) {
    if (n && !entries)
        return tlm_error("%s: no tensor list", path);
    size_t *nbytes = malloc((n + 1) * sizeof *nbytes);
    const char **names = malloc((n + 1) * sizeof *names);
    tlm_buf b = {0};
    int rc = 0;
    if (!nbytes || !names) {
        rc = tlm_error("%s: out of memory", path);
        goto done;
    }
    if (build_header(&b, path, entries, n, metadata_json, nbytes) != 0) {
        rc = -1;
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        names[i] = entries[i].name;
    qsort(names, n, sizeof *names, name_ptr_cmp);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(names[i - 1], names[i]) == 0) {
            rc = tlm_error("%s: tensor name '%.200s' is used twice", path, names[i]);
            goto done;
        }
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)b.len >> (8 * i));
    tlm_atomic *f = tlm_atomic_open(path);
    if (!f) {
        rc = -1;
        goto done;
    }
    tlm_atomic_write(f, len8, 8);
    tlm_atomic_write(f, b.data, b.len);
    for (size_t i = 0; i < n; i++)
        tlm_atomic_write(f, entries[i].data, nbytes[i]);
    rc = tlm_atomic_commit(f); /* reports any write error above */
done:
    free(nbytes);
    free(names);
    free(b.data);
    return rc;
}

void tlm_f32_to_bf16_array(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = tlm_f32_to_bf16(src[i]);
}

void tlm_f32_to_f16_array(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = tlm_f32_to_f16(src[i]);
}
