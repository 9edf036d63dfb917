/* hf_export.c — an engine model -> a Hugging Face style directory (see hf_export.h).
 *
 * The family is chosen from the architecture switches, never from where the model came
 * from: the first of the family table (family.h) whose blocker lets the config through; its
 * config.json is its writer's (family_export.c). Tensor names and layouts come from the same
 * map the loader uses (hf_map.c), run backwards, so an export loads back into the identical
 * parameter buffer. */
#include "hf_export.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family.h"
#include "formats/safetensors.h"
#include "hf_map.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/finite.h"
#include "util/io.h"

#define PRODUCER "tinylm export"

/* ---- which family expresses the config -------------------------------------------------------- */

/* (the families' blockers rule each other out: at most one of them expresses a config) */
const char *hf_export_family(const tlm_config *c, const char **why) {
    const tlm_family *f;
    for (int i = 0; (f = family_at(i)) != NULL; i++)
        if (f->export_blocker && !f->export_blocker(c)) return f->model_type;
    /* why none: the blocker of the family nearest to c */
    if (why)
        *why = config_mla(c)              ? hf_deepseek_v3_blocker(c)
               : c->n_experts > 0 && c->shared_gate ? hf_qwen2_moe_blocker(c)
               : c->n_experts > 0          ? (c->qk_norm == QK_NORM_HEAD ? hf_qwen3_moe_blocker(c) : hf_mixtral_blocker(c))
               : c->position == POS_LEARNED ? hf_gpt2_blocker(c)
                                            : hf_llama_blocker(c);
    return "tinylm";
}

/* ---- the target directory ------------------------------------------------------------------------- */

static int is_previous_export(const char *path) {
    const int paused = tlm_inputs_pause(1); /* the export's target, not an input (util/io.h) */
    tlm_safetensors *st = tlm_st_open(path);
    tlm_inputs_pause(paused);
    if (!st) return 0;
    const char *p = tlm_st_metadata(st, "producer");
    int ok = p && !strcmp(p, PRODUCER);
    tlm_st_close(st);
    return ok;
}

/* the files an export writes beside the weights (model_export_tokenizer) */
static int is_exported_tokenizer_file(const char *name) {
    static const char *const names[] = {"tokenizer.json", "tokenizer_config.json", "tinylm_tokenizer.json",
                                        "tokenizer.bin", "encoder.json", "vocab.bpe"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(name, names[i])) return 1;
    return 0;
}

int hf_export_check_target(const char *dir) {
    if (!is_directory(dir)) {
        if (file_exists(dir)) return tlm_error("%s: exists and is not a directory; refusing to export there", dir);
        return 0;
    }
    DIR *d = opendir(dir);
    if (!d) return tlm_error("%s: cannot list the directory", dir);
    int rc = 0, has_weights = 0;
    for (struct dirent *e; !rc && (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!strcmp(e->d_name, "config.json") || is_exported_tokenizer_file(e->d_name)) continue;
        if (!strcmp(e->d_name, "model.safetensors")) {
            has_weights = 1;
            continue;
        }
        rc = tlm_error("%s: holds \"%s\", so it is not empty and not a previous tinylm export; refusing to write "
                       "there (choose an empty or new directory)",
                       dir, e->d_name);
    }
    closedir(d);
    if (rc) return -1;
    char *w = path_join(dir, "model.safetensors");
    int prev = has_weights && w && is_previous_export(w);
    free(w);
    if (has_weights && !prev)
        return tlm_error("%s: holds a model.safetensors that tinylm export did not write; refusing to overwrite it",
                         dir);
    if (!has_weights && !dir_is_empty(dir))
        return tlm_error("%s: holds a config.json or tokenizer without an exported model.safetensors; refusing to "
                         "overwrite it", dir);
    return 0;
}

/* ---- tensors ------------------------------------------------------------------------------------------ */

typedef struct {
    tlm_st_entry *e;
    float **owned; /* buffers built here (transposed / fused), freed at the end */
    int n, n_owned;
} entry_list;

static float *own(entry_list *L, size_t n) {
    float *p = calloc(n ? n : 1, sizeof(float));
    if (p) L->owned[L->n_owned++] = p;
    return p;
}

static int find_entry(const entry_list *L, const char *name) {
    for (int i = 0; i < L->n; i++)
        if (!strcmp(L->e[i].name, name)) return i;
    return -1;
}

/* Adds engine tensor i under its HF name, inverting the loader's layout change. */
static int add_tensor(entry_list *L, char (*names)[160], const tlm_model *m, int i, const hf_tensor_ref *ref) {
    const tensor_info *t = &m->tensors[i];
    const float *src = model_param(m, i);
    const int rows = t->shape[0], cols = t->ndim == 2 ? t->shape[1] : 1;
    if (ref->layout == HF_COPY) {
        tlm_st_entry *e = &L->e[L->n];
        snprintf(names[L->n], 160, "%s", ref->name);
        e->name = names[L->n++];
        e->dtype = TLM_DT_F32, e->ndim = t->ndim, e->shape[0] = t->shape[0], e->shape[1] = t->shape[1];
        e->data = src;
        return 0;
    }
    if (ref->layout == HF_TRANSPOSE) {
        float *dst = own(L, (size_t)rows * cols);
        if (!dst) return tlm_error("out of memory exporting %s", ref->name);
        for (int r = 0; r < rows; r++)
            for (int k = 0; k < cols; k++) dst[(size_t)k * rows + r] = src[(size_t)r * cols + k];
        tlm_st_entry *e = &L->e[L->n];
        snprintf(names[L->n], 160, "%s", ref->name);
        e->name = names[L->n++];
        e->dtype = TLM_DT_F32, e->ndim = 2, e->shape[0] = cols, e->shape[1] = rows;
        e->data = dst;
        return 0;
    }
    /* HF_QKV_SLICE: q, k and v fill parts of one fused tensor */
    int j = find_entry(L, ref->name);
    if (j < 0) {
        size_t n = (size_t)ref->fused_cols * (t->ndim == 2 ? (size_t)cols : 1);
        float *dst = own(L, n);
        if (!dst) return tlm_error("out of memory exporting %s", ref->name);
        j = L->n++;
        snprintf(names[j], 160, "%s", ref->name);
        tlm_st_entry *e = &L->e[j];
        e->name = names[j];
        e->dtype = TLM_DT_F32, e->ndim = t->ndim;
        if (t->ndim == 2) e->shape[0] = cols, e->shape[1] = ref->fused_cols;
        else e->shape[0] = ref->fused_cols;
        e->data = dst;
    }
    float *dst = (float *)L->e[j].data;
    if (t->ndim == 2) {
        for (int r = 0; r < rows; r++)
            for (int k = 0; k < cols; k++) dst[(size_t)k * ref->fused_cols + ref->offset + r] = src[(size_t)r * cols + k];
    } else {
        memcpy(dst + ref->offset, src, (size_t)rows * sizeof(float));
    }
    return 0;
}

/* every entry's f32 values as BF16, in buffers the list owns */
static int entries_to_bf16(entry_list *L) {
    for (int i = 0; i < L->n; i++) {
        tlm_st_entry *e = &L->e[i];
        size_t n = 1;
        for (int d = 0; d < e->ndim; d++) n *= (size_t)e->shape[d];
        uint16_t *b = (uint16_t *)own(L, (n + 1) / 2);
        if (!b) return tlm_error("out of memory exporting %s as bf16", e->name);
        tlm_f32_to_bf16_array((const float *)e->data, b, n);
        e->dtype = TLM_DT_BF16, e->data = b;
    }
    return 0;
}

static int write_weights(const tlm_model *m, const char *dir, const tlm_family *family, int bf16) {
    const int style = family ? (int)family->names : -1; /* (none: the engine's own names) */
    entry_list L = {calloc((size_t)m->n_tensors, sizeof(tlm_st_entry)), calloc((size_t)m->n_tensors, sizeof(float *)), 0, 0};
    char(*names)[160] = calloc((size_t)m->n_tensors, sizeof *names);
    int rc = (!L.e || !L.owned || !names) ? tlm_error("out of memory exporting to %s", dir) : 0;
    for (int i = 0; i < m->n_tensors && !rc; i++) {
        hf_tensor_ref ref = {.layout = HF_COPY};
        if (style < 0)
            snprintf(ref.name, sizeof ref.name, "%s", m->tensors[i].name); /* engine naming */
        else
            rc = hf_map_tensor(&m->cfg, (hf_family_style)style, hf_default_prefix((hf_family_style)style),
                               m->tensors[i].name, &ref);
        if (!rc) rc = add_tensor(&L, names, m, i, &ref);
    }
    if (!rc && bf16) rc = entries_to_bf16(&L);
    if (!rc) {
        char *path = path_join(dir, "model.safetensors");
        rc = path ? tlm_st_write(path, L.e, (size_t)L.n, "{\"format\":\"pt\",\"producer\":\"" PRODUCER "\"}")
                  : tlm_error("out of memory");
        free(path);
    }
    for (int i = 0; i < L.n_owned; i++) free(L.owned[i]);
    free(L.owned), free(L.e), free(names);
    return rc;
}

static int export_dir(const tlm_model *m, const char *dir, const char **family, int bf16);
int hf_export_dir(const tlm_model *m, const char *dir, const char **family) { return export_dir(m, dir, family, 0); }
int hf_export_dir_bf16(const tlm_model *m, const char *dir, const char **family) { return export_dir(m, dir, family, 1); }

/* config.json's torch_dtype (a Hugging Face family's; the tinylm format has none) set to the weights' */
static char *with_dtype(char *json, const char *dtype) {
    cJSON *o = json ? cJSON_Parse(json) : NULL;
    if (!o || !cJSON_GetObjectItemCaseSensitive(o, "torch_dtype")) return cJSON_Delete(o), json;
    free(json);
    cJSON_ReplaceItemInObject(o, "torch_dtype", cJSON_CreateString(dtype));
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

static int export_dir(const tlm_model *m, const char *dir, const char **family, int bf16) {
    const char *why = NULL;
    const char *fam = hf_export_family(&m->cfg, &why);
    /* non-finite weights are refused before anything is written */
    for (int i = 0; i < m->n_tensors; i++)
        if (tlm_check_finite(model_param(m, i), m->tensors[i].numel, 0, dir, m->tensors[i].name) < 0)
            return tlm_error_prefix("cannot export");
    if (hf_export_check_target(dir) || make_dirs(dir)) return -1;
    /* a GPT-2 export of a model without some biases writes them as zeros */
    const tlm_family *f = family_find(fam); /* (NULL: "tinylm", the engine's own format) */
    tlm_model *biased = NULL;
    if (f && f->export_all_biases) {
        const tlm_config c = family_with_all_biases(&m->cfg);
        if (!(biased = model_create(&c))) return -1; /* (zeroed: the biases it adds stay 0) */
        for (int i = 0; i < m->n_tensors; i++) {
            const tensor_info *t = model_find_tensor(biased, m->tensors[i].name);
            memcpy(biased->param_mem + t->offset, model_param(m, i), m->tensors[i].numel * sizeof(float));
        }
        m = biased;
    }
    int written = write_weights(m, dir, f, bf16);
    char *json = written ? NULL : f ? f->export_config(&m->cfg) : config_to_json(&m->cfg);
    if (json && bf16) json = with_dtype(json, "bfloat16");
    model_free(biased);
    if (written) return -1;
    char *path = path_join(dir, "config.json");
    int rc = json && path ? tlm_write_file_atomic(path, json, strlen(json)) : tlm_error("out of memory");
    free(path), free(json);
    if (rc) return -1;
    if (family) *family = fam;
    return 0;
}
