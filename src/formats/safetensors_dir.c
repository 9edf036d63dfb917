/* safetensors_dir.c — open a checkpoint directory: one model.safetensors, or shards
 * listed in model.safetensors.index.json, checked against each other. */
#include "safetensors_internal.h"

#include "util/error.h"
#include "util/io.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"

static char *join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) {
        tlm_error("%s: out of memory", dir);
        return NULL;
    }
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/* Reads a whole (small) text file; NULL + tlm_error on failure. */
static char *read_text(const char *path, size_t *len) {
    FILE *f = tlm_fopen_input(path);
    if (!f) return NULL;
    struct stat sb;
    char *buf = NULL;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        tlm_error("%s: not a readable regular file", path);
    } else if ((uint64_t)sb.st_size > TLM_ST_MAX_HEADER) {
        tlm_error("%s: %lld bytes is too large for an index", path, (long long)sb.st_size);
    } else if (!(buf = malloc((size_t)sb.st_size + 1))) {
        tlm_error("%s: out of memory", path);
    } else if (fread(buf, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size) {
        tlm_error("%s: read failed", path);
        free(buf);
        buf = NULL;
    } else {
        buf[sb.st_size] = '\0';
        *len = (size_t)sb.st_size;
    }
    fclose(f);
    return buf;
}

static int valid_shard_name(const char *s) {
    return *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int str_ptr_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Checks the loaded shards against the weight map: every listed tensor is in the shard
 * it names, no name is listed twice, and no shard holds an unlisted tensor. */
static int check_weight_map(const tlm_safetensors *st, const char *dir, const char *index, const cJSON *wm) {
    size_t n_wm = (size_t)cJSON_GetArraySize(wm);
    const char **names = malloc((n_wm + 1) * sizeof *names);
    if (!names)
        return tlm_error("%s: out of memory", index);
    size_t dlen = strlen(dir), k = 0;
    int rc = 0;
    for (const cJSON *e = wm->child; e && rc == 0; e = e->next) {
        names[k++] = e->string;
        const tlm_st_tensor *t = tlm_st_find(st, e->string);
        if (!t)
            rc = tlm_error("%s: weight_map puts '%.200s' in %s, but no shard has it", index, e->string, e->valuestring);
        else if (strcmp(t->file + dlen + 1, e->valuestring) != 0)
            rc = tlm_error("%s: weight_map puts '%.200s' in %s, but it is in %s", index, e->string, e->valuestring,
                           t->file + dlen + 1);
    }
    if (rc == 0) {
        qsort(names, n_wm, sizeof *names, str_ptr_cmp);
        for (size_t i = 1; i < n_wm && rc == 0; i++)
            if (strcmp(names[i - 1], names[i]) == 0)
                rc = tlm_error("%s: weight_map lists '%.200s' twice", index, names[i]);
    }
    for (size_t i = 0; i < st->n && rc == 0; i++) {
        const char *key = st->tensors[i].name;
        if (!bsearch(&key, names, n_wm, sizeof *names, str_ptr_cmp))
            rc = tlm_error("%s: holds tensor '%.200s', which %s does not list", st->tensors[i].file, key, index);
    }
    free(names);
    return rc;
}

/* Loads the shards named by the index into st. */
static int load_sharded(tlm_safetensors *st, const char *dir, const char *index) {
    size_t len;
    char *text = read_text(index, &len);
    if (!text)
        return -1;
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root && tlm_json_nesting_error(index, text, len)) return free(text), -1;
    free(text);
    int rc = 0;
    const char **shards = NULL;
    const cJSON *wm = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!root || !cJSON_IsObject(root)) {
        rc = tlm_error("%s: not a JSON object", index);
        goto done;
    }
    if (!wm) {
        rc = tlm_error("%s: missing field 'weight_map'", index);
        goto done;
    }
    if (!cJSON_IsObject(wm) || !wm->child) {
        rc = tlm_error("%s: 'weight_map' must be a non-empty object", index);
        goto done;
    }
    shards = malloc(((size_t)cJSON_GetArraySize(wm) + 1) * sizeof *shards);
    if (!shards) {
        rc = tlm_error("%s: out of memory", index);
        goto done;
    }
    size_t n_shards = 0;
    for (const cJSON *e = wm->child; e; e = e->next) {
        if (!cJSON_IsString(e)) {
            rc = tlm_error("%s: weight_map value of '%.200s' must be a shard file name", index, e->string);
            goto done;
        }
        if (!valid_shard_name(e->valuestring)) {
            rc = tlm_error("%s: weight_map value of '%.200s' = '%.200s' is not a file name in the directory", index,
                           e->string, e->valuestring);
            goto done;
        }
        size_t i = 0;
        while (i < n_shards && strcmp(shards[i], e->valuestring) != 0)
            i++;
        if (i == n_shards)
            shards[n_shards++] = e->valuestring;
    }
    for (size_t i = 0; i < n_shards && rc == 0; i++) {
        char *path = join(dir, shards[i]);
        if (!path || st_add_file(st, path) != 0)
            rc = path ? tlm_error_prefix("%s lists shard %s", index, shards[i]) : -1;
        free(path);
    }
    if (rc == 0 && st_finish(st) != 0)
        rc = -1;
    if (rc == 0)
        rc = check_weight_map(st, dir, index, wm);
done:
    free(shards);
    cJSON_Delete(root);
    return rc;
}

tlm_safetensors *tlm_st_open_dir(const char *dir) {
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        tlm_error("%s: cannot open checkpoint directory: %s", dir, strerror(errno));
        return NULL;
    }
    if (!S_ISDIR(sb.st_mode)) {
        tlm_error("%s: not a directory", dir);
        return NULL;
    }
    char *single = join(dir, SINGLE_NAME);
    char *index = join(dir, INDEX_NAME);
    tlm_safetensors *st = NULL;
    if (!single || !index)
        goto done;
    if (stat(single, &sb) == 0) {
        st = tlm_st_open(single);
    } else if (stat(index, &sb) == 0) {
        st = st_new(dir);
        if (st && load_sharded(st, dir, index) != 0) {
            tlm_st_close(st);
            st = NULL;
        }
    } else {
        tlm_error("%s: has neither %s nor %s", dir, SINGLE_NAME, INDEX_NAME);
    }
done:
    free(single);
    free(index);
    return st;
}
