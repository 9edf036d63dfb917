/* checkpoint.c — a model directory on disk: config.json + model.safetensors (or shards),
 * tensors named as in docs/tensors.md. Loading checks every tensor's name, shape and dtype
 * and refuses files with tensors this config does not use, or with NaN/Inf weights (util/finite.h);
 * saving writes each file
 * atomically (temp file, fsync, rename). */
#include "checkpoint.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "family.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/finite.h"
#include "util/io.h"

/* The parameter buffer as it lies in the file, when it does: one file, every tensor F32 with
 * its table shape, back to back in table order from a 4-byte aligned start (what
 * model_save_dir writes). NULL otherwise. */
static float *params_in_file(const tlm_model *m, const tlm_safetensors *st) {
    const char *first = NULL;
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_info *ti = &m->tensors[i];
        const tlm_st_tensor *t = tlm_st_find(st, ti->name);
        if (!t || t->dtype != TLM_DT_F32 || t->numel != ti->numel || t->ndim != ti->ndim ||
            t->shape[0] != ti->shape[0] || (ti->ndim == 2 && t->shape[1] != ti->shape[1]))
            return NULL;
        if (i == 0) first = t->data;
        if ((const char *)t->data != first + ti->offset * sizeof(float)) return NULL;
    }
    return first && (uintptr_t)first % sizeof(float) == 0 ? (float *)first : NULL;
}

/* mapped: use the file's pages as the parameters where params_in_file allows */
static int load_engine_tensors(tlm_model *m, tlm_safetensors *st, const char *dir, int mapped) {
    float *in_file = mapped ? params_in_file(m, st) : NULL;
    void *base;
    size_t len;
    if (in_file && tlm_st_detach_mapping(st, &base, &len) == 0) model_use_mapped_params(m, in_file, base, len);
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_info *t = &m->tensors[i];
        int64_t shape[2] = {t->shape[0], t->shape[1]};
        if (!m->file_map && tlm_st_load_f32(st, t->name, t->ndim, shape, model_param(m, i)))
            return tlm_error_prefix("%s", dir);
        if (tlm_check_finite(model_param(m, i), t->numel, 0, tlm_st_find(st, t->name)->file, t->name) < 0) return -1;
        if (!m->file_map) tlm_st_release(st, tlm_st_find(st, t->name)); /* (copied: the copy stays resident) */
    }
    /* every tensor in the file must be one the config uses: a leftover tensor means the
     * config and the weights disagree, and running anyway would be silently wrong */
    for (size_t i = 0; i < tlm_st_count(st); i++) {
        const tlm_st_tensor *t = tlm_st_at(st, i);
        if (!model_find_tensor(m, t->name))
            return tlm_error("%s: tensor \"%s\" is not part of the model that config.json describes "
                             "(see docs/tensors.md)",
                             t->file, t->name);
    }
    return 0;
}

/* Every tensor the config needs is in the file with the config's shape, checked before the
 * parameters are allocated (a wrong vocab_size is a shape mismatch, not an out-of-memory). */
static int check_shapes(const tlm_config *c, const tlm_safetensors *st, const char *dir) {
    int n;
    size_t total;
    tensor_info *t = config_tensor_table(c, &n, &total);
    if (!t) return -1;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        int64_t shape[2] = {t[i].shape[0], t[i].shape[1]};
        if (tlm_st_check_shape(st, t[i].name, t[i].ndim, shape))
            rc = tlm_error_prefix("%s/config.json (vocab_size %d, d_model %d, %d layers) does not match the weights",
                                  dir, c->vocab_size, c->d_model, c->n_layers);
    }
    free(t);
    return rc;
}

int model_check_weights(const char *dir, const tlm_config *cfg) {
    tlm_safetensors *st = tlm_st_open_dir(dir);
    int rc = !st ? -1 : strcmp(cfg->model_type, "tinylm") ? hf_check_shapes(cfg, st, dir) : check_shapes(cfg, st, dir);
    tlm_st_close(st);
    return rc;
}

/* a regular file named *.bin is a llama2.c checkpoint */
int is_llama2c_file(const char *path) {
    size_t n = strlen(path);
    return n > 4 && !strcmp(path + n - 4, ".bin") && file_exists(path);
}

/* "PATH: why" for a path that stat() refused */
static char *path_error(const char *path, int err) {
    char why[1200];
    tlm_error("%s: %s", path, tlm_path_problem(path, err, why, sizeof why));
    return NULL;
}

char *model_dir_resolve(const char *dir) {
    struct stat st, lst;
    if (stat(dir, &st) != 0) return path_error(dir, errno);
    if (S_ISREG(st.st_mode)) return strdup(dir); /* a llama2.c .bin (load_resolved checks) */
    if (!S_ISDIR(st.st_mode))
        return tlm_error("%s: is not a directory or a regular file (expected a model directory, a training run "
                         "directory or a llama2.c .bin)", dir),
               NULL;
    char *link = path_join(dir, "latest"), *cfg = path_join(dir, "config.json");
    if (!link || !cfg) return free(link), free(cfg), tlm_error("out of memory"), NULL;
    char *out = NULL;
    if (lstat(cfg, &lst) == 0) {
        out = strdup(dir); /* a model directory (config.json problems are the loader's to report) */
    } else if (lstat(link, &lst) != 0) {
        char *bin = path_join(dir, LLAMA2C_EXPORT_FILE); /* a llama2.c export: model.bin + its tokenizer */
        if (bin && is_llama2c_file(bin))
            out = bin, bin = NULL;
        else
            tlm_error("%s: not a model directory: it has no config.json (a model), no latest (a training run) and "
                      "no " LLAMA2C_EXPORT_FILE " (a llama2.c export)", dir);
        free(bin);
    } else if (stat(link, &st) != 0) {
        int err = errno;
        char target[1024];
        ssize_t k = S_ISLNK(lst.st_mode) ? readlink(link, target, sizeof target - 1) : -1;
        target[k > 0 ? k : 0] = '\0';
        if (err == ENOENT && k > 0)
            tlm_error("%s: a training run whose latest points to %s, which does not exist", dir, target);
        else if (err == ELOOP)
            tlm_error("%s: a training run whose latest is a symbolic link loop", link);
        else
            path_error(link, err);
    } else if (!S_ISDIR(st.st_mode)) {
        tlm_error("%s: is not a directory (a training run's latest names its last checkpoint directory)", link);
    } else {
        out = link, link = NULL; /* a training run: its latest checkpoint */
    }
    free(link), free(cfg);
    return out;
}

tlm_tokenizer *model_load_tokenizer(const char *model_path) {
    if (is_directory(model_path)) { /* a llama2.c export keeps its tokenizer beside model.bin */
        char *bin = path_join(model_path, LLAMA2C_EXPORT_FILE), *cfg = path_join(model_path, "config.json");
        const int l2c = bin && cfg && is_llama2c_file(bin) && !file_exists(cfg);
        free(bin), free(cfg);
        if (l2c) return tlm_tokenizer_load(model_path);
    }
    if (!is_directory(model_path) && tlm_gguf_is_file(model_path)) return tlm_tokenizer_load_gguf(model_path);
    if (is_llama2c_file(model_path))
        return tlm_error("%s is a llama2.c checkpoint, which holds no tokenizer; give its tokenizer with --tokenizer "
                         "tok.bin", model_path),
               NULL;
    char *dir = model_dir_resolve(model_path);
    tlm_tokenizer *t = dir ? tlm_tokenizer_load(dir) : NULL;
    free(dir);
    return t;
}

/* copies src to dir/name atomically (dir/name == src: nothing to do) */
static int copy_file_into(const char *src, const char *dir, const char *name) {
    char *dst = path_join(dir, name);
    size_t len = 0;
    char *data = dst ? read_text_file(src, &len) : NULL;
    int rc = !dst ? tlm_error("out of memory") : !data ? -1 : tlm_write_file_atomic(dst, data, len);
    free(dst), free(data);
    return rc;
}

int model_export_tokenizer(const char *tokenizer_path, const char *dir, int vocab_size, const char **kind) {
    char *file = tlm_tokenizer_locate(tokenizer_path);
    tlm_tokenizer *t = file ? tlm_tokenizer_load(file) : NULL;
    if (!t) return free(file), tlm_error_prefix("cannot export the tokenizer");
    const char *k = tlm_tokenizer_kind(t);
    const int n = tlm_tokenizer_vocab_size(t);
    tlm_tokenizer_free(t);
    if (!strncmp(k, "gguf", 4)) {
        int rc = tlm_error("%s: the tokenizer is a GGUF file's metadata, which tinylm writes only into GGUF files "
                           "(--format gguf); export with --no-tokenizer, or give another one with --tokenizer", file);
        return free(file), rc;
    }
    if (n > vocab_size) {
        int rc = tlm_error("%s: the tokenizer has %d tokens but the model's vocab_size is %d; not exporting it with "
                           "this model", file, n, vocab_size);
        return free(file), rc;
    }
    /* the names tlm_tokenizer_load finds in a directory, with the files each kind reads beside it */
    char *src_dir = strdup(file);
    char *slash = src_dir ? strrchr(src_dir, '/') : NULL;
    if (slash) *slash = '\0';
    const char *base = !src_dir ? NULL : slash ? src_dir : ".";
    int rc = !base ? tlm_error("out of memory") : 0;
    if (rc) {
    } else if (!strcmp(k, "llama2c")) {
        rc = copy_file_into(file, dir, "tokenizer.bin");
    } else if (!strcmp(k, "bytes") || !strcmp(k, "chars")) {
        rc = copy_file_into(file, dir, TLM_TOKENIZER_OWN_FILE);
    } else if (!strcmp(k, "gpt2")) {
        char *bpe = path_join(base, "vocab.bpe");
        rc = bpe ? copy_file_into(file, dir, "encoder.json") || copy_file_into(bpe, dir, "vocab.bpe")
                 : tlm_error("out of memory");
        free(bpe);
    } else {
        char *tc = path_join(base, "tokenizer_config.json"); /* bos/eos and add_bos_token */
        rc = copy_file_into(file, dir, "tokenizer.json") || (tc && file_exists(tc) && copy_file_into(tc, dir, "tokenizer_config.json"));
        free(tc);
    }
    free(src_dir), free(file);
    if (!rc && kind) *kind = k; /* (a static name, valid after the free) */
    return rc ? -1 : 0;
}

static tlm_model *load_resolved(const char *dir, int mapped, int bf16_weights);

tlm_model *model_load_dir(const char *path) {
    char *dir = model_dir_resolve(path);
    tlm_model *m = dir ? load_resolved(dir, 0, 0) : NULL;
    free(dir);
    return m;
}

tlm_model *model_load_dir_mapped(const char *path, int bf16_weights) {
    char *dir = model_dir_resolve(path);
    tlm_model *m = dir ? load_resolved(dir, 1, bf16_weights) : NULL;
    free(dir);
    return m;
}

static tlm_model *load_resolved(const char *dir, int mapped, int bf16_weights) {
    if (is_llama2c_file(dir)) return llama2c_load(dir, bf16_weights == LOAD_BF16);
    if (!is_directory(dir) && tlm_gguf_is_file(dir)) return gguf_model_load(dir);
    if (!is_directory(dir))
        return tlm_error("%s: is a file, not a model: expected a directory (config.json + model.safetensors), a "
                         "training run directory, or a llama2.c checkpoint named *.bin", dir),
               NULL;
    char *cfg_path = path_join(dir, "config.json");
    tlm_config cfg;
    int rc = config_load(&cfg, cfg_path);
    free(cfg_path);
    if (rc) return NULL;
    if (strcmp(cfg.model_type, "tinylm") != 0) return hf_model_load(dir, &cfg, bf16_weights);
    tlm_safetensors *st = tlm_st_open_dir(dir);
    if (!st || check_shapes(&cfg, st, dir)) {
        tlm_st_close(st);
        return NULL;
    }
    tlm_model *m = model_create(&cfg);
    if (!m || load_engine_tensors(m, st, dir, mapped)) {
        tlm_st_close(st);
        model_free(m);
        return NULL;
    }
    tlm_st_close(st);
    return m;
}

int model_save_dir(const tlm_model *m, const char *dir) {
    if (make_dirs(dir)) return -1;
    tlm_st_entry *e = calloc((size_t)m->n_tensors, sizeof *e);
    if (!e) return tlm_error("out of memory saving %s", dir);
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_info *t = &m->tensors[i];
        e[i].name = t->name;
        e[i].dtype = TLM_DT_F32;
        e[i].ndim = t->ndim;
        e[i].shape[0] = t->shape[0];
        e[i].shape[1] = t->shape[1];
        e[i].data = model_param(m, i);
    }
    char *st_path = path_join(dir, "model.safetensors");
    int rc = tlm_st_write(st_path, e, (size_t)m->n_tensors, "{\"format\":\"pt\",\"producer\":\"tinylm\"}");
    free(st_path);
    free(e);
    if (rc) return -1;
    char *json = config_to_json(&m->cfg);
    char *cfg_path = path_join(dir, "config.json");
    rc = tlm_write_file_atomic(cfg_path, json, strlen(json));
    free(cfg_path);
    free(json);
    return rc;
}
