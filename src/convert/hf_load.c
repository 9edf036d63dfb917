/* hf_load.c — reading Hugging Face checkpoints of the supported families into the engine's
 * parameter buffer: every engine tensor is looked up under its HF name (hf_map.c), checked for
 * shape and dtype, converted to float32 and re-laid out where the family stores it
 * differently. Afterwards every tensor in the file must have been used, or be one that
 * transformers itself discards on load; anything else is an error naming the tensor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "family.h"
#include "formats/safetensors.h"
#include "hf_map.h"
#include "ops/quant.h"
#include "util/error.h"
#include "util/f16.h"
#include "util/finite.h"

typedef struct {
    const tlm_st_tensor **v;
    size_t n, cap;
} used_set;

static int mark_used(used_set *u, const tlm_st_tensor *t) {
    if (!t) return 0;
    if (u->n == u->cap) {
        size_t cap = u->cap ? 2 * u->cap : 256;
        const tlm_st_tensor **nv = realloc(u->v, cap * sizeof *nv);
        if (!nv) return tlm_error("out of memory");
        u->v = nv, u->cap = cap;
    }
    u->v[u->n++] = t;
    return 0;
}

static int cmp_ptr(const void *a, const void *b) {
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    return x < y ? -1 : x > y;
}

static int is_used(const used_set *u, const tlm_st_tensor *t) {
    return bsearch(&t, u->v, u->n, sizeof *u->v, cmp_ptr) != NULL;
}

/* Tensors transformers registers or finds but never loads: RoPE inverse frequencies saved by old
 * Llama-family checkpoints and GPT-2's causal-mask buffers (it recomputes them), and Gemma 4's
 * k_proj, v_proj, k_norm, v_norm of the layers that share an earlier layer's keys and values
 * (Gemma4TextModel's _keys_to_ignore_on_load_unexpected: those layers have none). */
static int discarded_by_transformers(const tlm_config *c, hf_family_style style, const char *prefix,
                                     const char *name) {
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0) return 0;
    name += n;
    const char *layer = style == HF_FAMILY_GPT2 ? "h." : "layers.";
    size_t k = strlen(layer);
    if (strncmp(name, layer, k) != 0) return 0;
    const char *p = name + k;
    if (*p < '0' || *p > '9') return 0;
    const long l = strtol(p, NULL, 10);
    while (*p >= '0' && *p <= '9') p++;
    if (style == HF_FAMILY_GPT2) return !strcmp(p, ".attn.bias") || !strcmp(p, ".attn.masked_bias");
    if (!strncmp(c->model_type, "gemma4", 6) && l >= config_first_kv_shared(c) && l < c->n_layers) {
        static const char *const SHARED[] = {".self_attn.k_proj.", ".self_attn.v_proj.", ".self_attn.k_norm.",
                                             ".self_attn.v_norm."};
        for (int i = 0; i < 4; i++)
            if (!strncmp(p, SHARED[i], strlen(SHARED[i]))) return 1;
    }
    return !strcmp(p, ".self_attn.rotary_emb.inv_freq");
}

/* DeepSeek-V3's multi-token-prediction layers (num_nextn_predict_layers, stored as layers n_layers .. after the
 * main ones; DeepseekV3PreTrainedModel ignores them on load): one of their tensors */
static int mtp_layer_tensor(const tlm_config *c, const char *prefix, const char *name) {
    const size_t n = strlen(prefix);
    if (c->n_nextn <= 0 || strncmp(name, prefix, n) != 0 || strncmp(name + n, "layers.", 7) != 0) return 0;
    const char *p = name + n + 7;
    if (*p < '0' || *p > '9') return 0;
    const long l = strtol(p, NULL, 10);
    return l >= c->n_layers && l < (long)c->n_layers + c->n_nextn;
}

/* the shape of the HF tensor that holds engine tensor ti */
static int file_shape(const tensor_info *ti, const hf_tensor_ref *ref, int64_t shape[3]) {
    const int rows = ti->shape[0], cols = ti->ndim == 2 ? ti->shape[1] : 1;
    if (ref->layout == HF_EXPERT_ROWS) { /* [experts, expert_rows, cols] */
        shape[0] = ref->experts, shape[1] = ref->expert_rows, shape[2] = cols;
        return 3;
    }
    if (ref->layout == HF_COPY) {
        shape[0] = ti->shape[0], shape[1] = ti->shape[1];
    } else if (ref->layout == HF_TRANSPOSE) {
        shape[0] = cols, shape[1] = rows;
    } else if (ti->ndim == 2) { /* fused weight [in, q + k + v] */
        shape[0] = cols, shape[1] = ref->fused_cols;
    } else { /* fused bias */
        shape[0] = ref->fused_cols;
    }
    return ti->ndim;
}

/* ---- FP8 (quantization_config fp8: DeepSeek-V3, Qwen3 FP8) ----------------------------------------------
 * A weight stored as F8_E4M3 (OCP "E4M3FN": 4 exponent bits of bias 7, 3 mantissa bits, no infinities, S.1111.111
 * NaN) or F8_E5M2 (bias 15, 2 mantissa bits, IEEE-style infinities and NaNs) comes with NAME_scale_inv, one float
 * per block of weight_block_size [b0, b1] weights ([ceil(rows / b0), ceil(cols / b1)], the last block of a row or
 * column partial), or one for the tensor without a block size: weight = value * its block's scale, as
 * transformers' FP8 dequantization; every FP8 value is exact in float32 and each product is rounded once, so the
 * engine holds the dequantized weights exactly as float32 computes them. */

static float fp8_value(tlm_dtype dt, unsigned char b) {
    const int e4 = dt == TLM_DT_F8_E4M3, mbits = e4 ? 3 : 2, bias = e4 ? 7 : 15;
    const int exp = (b & 0x7F) >> mbits, man = b & ((1 << mbits) - 1), emax = e4 ? 15 : 31;
    const float sign = b & 0x80 ? -1.0f : 1.0f;
    if (e4 && exp == emax && man == 7) return NAN;
    if (!e4 && exp == emax) return man ? NAN : sign * INFINITY;
    if (exp == 0) return sign * ldexpf((float)man, 1 - bias - mbits); /* (subnormals) */
    return sign * ldexpf((float)((1 << mbits) + man), exp - bias - mbits);
}

static int is_fp8(tlm_dtype dt) { return dt == TLM_DT_F8_E4M3 || dt == TLM_DT_F8_E5M2; }

/* the scale tensor of FP8 weight `name` (NULL and an error naming both when it is missing) */
static const tlm_st_tensor *fp8_scale_tensor(const tlm_safetensors *st, const tlm_st_tensor *t, const char *name,
                                             char *sname, size_t cap) {
    snprintf(sname, cap, "%s_scale_inv", name);
    const tlm_st_tensor *s = tlm_st_find(st, sname);
    if (!s)
        tlm_error("%s: tensor '%.200s' is %s but its scale tensor '%.200s' is missing (FP8 weights are stored with "
                  "one weight_scale_inv per block)", t->file, name, tlm_dtype_name(t->dtype), sname);
    return s;
}

/* the rows x cols FP8 matrix `name` into dst, dequantized: the whole 2-D tensor (HF_COPY), or rows [row0, row0 +
 * rows) of expert e's [slab, cols] matrix in a stacked [experts, slab, cols] tensor (HF_EXPERT_ROWS: Gemma 4's
 * gate_up_proj / down_proj) whose scales are [experts, ceil(slab / b0), ceil(cols / b1)] (transformers'
 * FP8Expert: NAME_scale_inv per expert, the blocks counted within each expert's matrix) */
static int load_fp8_rows(const tlm_safetensors *st, const tlm_config *c, const tlm_st_tensor *t, const char *name,
                         int experts, int e, int slab, int row0, int rows, int cols, float *dst) {
    if (strcmp(c->quant_method, "fp8") != 0)
        return tlm_error("%s: tensor '%.200s' is %s but config.json has no quantization_config with quant_method "
                         "\"fp8\" (its block size is unknown)", t->file, name, tlm_dtype_name(t->dtype));
    char sname[300];
    const tlm_st_tensor *s = fp8_scale_tensor(st, t, name, sname, sizeof sname);
    if (!s) return -1;
    const int b0 = c->quant_block[0], b1 = c->quant_block[1], stacked = experts > 1 || t->ndim == 3;
    const int64_t sr = b0 ? (slab + b0 - 1) / b0 : 1, sc = b1 ? (cols + b1 - 1) / b1 : 1;
    const int64_t want[3] = {experts, sr, sc};
    const int ok_shape = !b0 ? s->numel == (size_t)(stacked ? experts : 1)
                         : stacked ? s->ndim == 3 && s->shape[0] == experts && s->shape[1] == sr && s->shape[2] == sc
                                   : s->ndim == 2 && s->shape[0] == sr && s->shape[1] == sc;
    if (!ok_shape) {
        char have[96], exp[96];
        return tlm_error("%s: scale tensor '%.200s' has shape %s; the %s[%d, %d] weight%s in blocks of %s needs %s",
                         s->file, sname, tlm_shape_str(have, sizeof have, s->ndim, s->shape), stacked ? "stacked " : "",
                         slab, cols, stacked ? " of each expert" : "", b0 ? "weight_block_size" : "one (no weight_block_size)",
                         b0 ? tlm_shape_str(exp, sizeof exp, stacked ? 3 : 2, stacked ? want : want + 1)
                            : stacked ? "one element per expert" : "one element");
    }
    if (!tlm_dtype_is_float_weight(s->dtype))
        return tlm_error("%s: scale tensor '%.200s' has dtype %s (F32, BF16 or F16 expected)", s->file, sname,
                         tlm_dtype_name(s->dtype));
    const size_t per = (size_t)(sr * sc); /* (one expert's scales; read whole: every block checked finite) */
    float *scale = malloc((size_t)experts * per * sizeof(float));
    if (!scale) return tlm_error("out of memory reading '%.200s'", sname);
    int rc = tlm_st_read_f32(s, scale, (size_t)experts * per);
    const size_t bad = rc ? 0 : tlm_first_nonfinite(scale, (size_t)experts * per, NULL);
    if (!rc && bad < (size_t)experts * per)
        rc = tlm_error("%s: scale tensor '%.200s' holds %g at block [%s%lld, %lld]: every FP8 block scale must be "
                       "finite", s->file, sname, scale[bad], stacked ? "expert, " : "", (long long)(bad % per / sc),
                       (long long)(bad % sc));
    const unsigned char *q = (const unsigned char *)t->data + ((size_t)e * slab + row0) * cols;
    const float *es = scale + (size_t)e * per;
    for (int r = 0; !rc && r < rows; r++)
        for (int k = 0; k < cols; k++) {
            const float v = fp8_value(t->dtype, q[(size_t)r * cols + k]);
            if (!isfinite(v)) {
                rc = tlm_error("%s: tensor '%.200s' holds an FP8 %s at [%s%d, %d] (byte 0x%02x)", t->file, name,
                               isnan(v) ? "NaN" : "infinity", stacked ? "expert, " : "", row0 + r, k,
                               q[(size_t)r * cols + k]);
                break;
            }
            dst[(size_t)r * cols + k] = v * es[(b0 ? (row0 + r) / b0 : 0) * sc + (b1 ? k / b1 : 0)];
        }
    free(scale);
    if (rc) return -1;
    return tlm_check_finite(dst, (size_t)rows * cols, 0, t->file, name) < 0 ? -1 : 0;
}

/* Reads one engine tensor from its HF tensor, converting the layout. */
static int load_one(const tlm_safetensors *st, const tlm_config *c, const tensor_info *ti, const hf_tensor_ref *ref,
                    float *dst, float **scratch, size_t *scratch_n) {
    const int rows = ti->shape[0], cols = ti->ndim == 2 ? ti->shape[1] : 1;
    int64_t shape[3];
    const int ndim = file_shape(ti, ref, shape);
    const tlm_st_tensor *ft = tlm_st_find(st, ref->name);
    if (ft && is_fp8(ft->dtype)) {
        /* (GPT-2's Conv1D weights, fused and transposed, are no nn.Linear: transformers' FP8 never stores them) */
        if ((ref->layout != HF_COPY && ref->layout != HF_EXPERT_ROWS) || ti->ndim != 2)
            return tlm_error("%s: tensor '%.200s' is %s in a layout the FP8 reader does not take (a fused or "
                             "transposed tensor, or a vector)", ft->file, ref->name, tlm_dtype_name(ft->dtype));
        if (tlm_st_check_shape(st, ref->name, ndim, shape)) return -1;
        if (ref->layout == HF_EXPERT_ROWS)
            return load_fp8_rows(st, c, ft, ref->name, ref->experts, ref->offset / ref->expert_rows, ref->expert_rows,
                                 ref->offset % ref->expert_rows, rows, cols, dst);
        return load_fp8_rows(st, c, ft, ref->name, 1, 0, rows, 0, rows, cols, dst);
    }
    if (ref->layout == HF_EXPERT_ROWS) { /* rows [offset, offset + rows) of the experts' tensor, read in place */
        if (tlm_st_check_shape(st, ref->name, ndim, shape)) return -1;
        tlm_st_tensor part = *tlm_st_find(st, ref->name);
        const size_t first = (size_t)ref->offset * cols, n = (size_t)rows * cols;
        const size_t esz = tlm_dtype_size(part.dtype);
        part.data = (const unsigned char *)part.data + first * esz;
        part.numel = n, part.nbytes = n * esz;
        if (tlm_st_read_f32(&part, dst, n)) return -1;
        return tlm_check_finite(dst, n, 0, part.file, ref->name) < 0 ? -1 : 0;
    }
    if (ref->layout == HF_COPY) {
        if (tlm_st_load_f32(st, ref->name, ti->ndim, shape, dst)) return -1;
        return tlm_check_finite(dst, ti->numel, 0, tlm_st_find(st, ref->name)->file, ref->name) < 0 ? -1 : 0;
    }
    size_t need = (size_t)shape[0] * (ndim == 2 ? (size_t)shape[1] : 1);
    if (need > *scratch_n) {
        float *s = realloc(*scratch, need * sizeof(float));
        if (!s) return tlm_error("out of memory reading tensor '%.200s'", ref->name);
        *scratch = s, *scratch_n = need;
    }
    if (tlm_st_load_f32(st, ref->name, ndim, shape, *scratch)) return -1;
    /* checked in the file's layout; a fused q/k/v tensor once, with its first slice */
    if (ref->offset == 0 && tlm_check_finite(*scratch, need, 0, tlm_st_find(st, ref->name)->file, ref->name) < 0)
        return -1;
    const float *src = *scratch;
    if (ref->layout == HF_TRANSPOSE) {
        for (int r = 0; r < rows; r++)
            for (int k = 0; k < cols; k++) dst[(size_t)r * cols + k] = src[(size_t)k * rows + r];
    } else if (ti->ndim == 2) {
        for (int r = 0; r < rows; r++)
            for (int k = 0; k < cols; k++) dst[(size_t)r * cols + k] = src[(size_t)k * ref->fused_cols + ref->offset + r];
    } else {
        memcpy(dst, src + ref->offset, (size_t)rows * sizeof(float));
    }
    return 0;
}

/* A tied model's file may still carry lm_head.weight: transformers ties the head to the
 * embedding after loading, so the stored copy is never used. Warn when it differs (from the file's
 * embedding, whatever the weights are kept as). */
static int check_tied_head(const tlm_model *m, const tlm_st_tensor *t, const tlm_st_tensor *embed) {
    const tlm_config *c = &m->cfg;
    if (t->ndim != 2 || t->shape[0] != c->vocab_size || t->shape[1] != c->d_model || !tlm_dtype_is_float_weight(t->dtype)) {
        char s[160];
        return tlm_error("%s: tensor 'lm_head.weight' has shape %s and dtype %s; with tie_word_embeddings it must "
                         "match the embedding [%d, %d]",
                         t->file, tlm_shape_str(s, sizeof s, t->ndim, t->shape), tlm_dtype_name(t->dtype),
                         c->vocab_size, c->d_model);
    }
    float *head = malloc(t->numel * sizeof(float)), *emb = malloc(t->numel * sizeof(float));
    int rc = !head || !emb ? tlm_error("out of memory") : 0;
    if (!rc) rc = tlm_st_read_f32(t, head, t->numel) || !embed || embed->numel != t->numel ||
                  tlm_st_read_f32(embed, emb, t->numel) ? -1 : 0;
    if (!rc && memcmp(head, emb, t->numel * sizeof(float)) != 0)
        fprintf(stderr,
                "tinylm: warning: %s: lm_head.weight differs from the embedding but tie_word_embeddings is true; "
                "as in transformers, the embedding is used as the head\n",
                t->file);
    free(head), free(emb);
    return rc;
}

/* the family table's entry of a multimodal wrapper's model_type (its text model's family), else NULL */
static const tlm_family *wrapper_of(const char *model_type) {
    const tlm_family *f = family_find(model_type);
    return f && f->wrapper && !strcmp(f->wrapper, model_type) ? f : NULL;
}

/* *ForCausalLM checkpoints prefix the base model ("model.", "transformer."); a bare base
 * model checkpoint has no prefix; a multimodal wrapper's text model has its family's prefixes */
static const char *name_prefix(const tlm_safetensors *st, hf_family_style style, const char *model_type) {
    char probe[160];
    const tlm_family *w = wrapper_of(model_type);
    if (w) {
        const char *const *p = w->wrapper_prefixes;
        for (; p[1]; p++) {
            snprintf(probe, sizeof probe, "%s%s", *p, hf_embed_name(style));
            if (tlm_st_find(st, probe)) break;
        }
        return *p;
    }
    const char *prefix = hf_default_prefix(style);
    snprintf(probe, sizeof probe, "%s%s", prefix, hf_embed_name(style));
    if (!tlm_st_find(st, probe) && tlm_st_find(st, hf_embed_name(style))) prefix = "";
    return prefix;
}

/* the untied head's name: beside the text model in Gemma 3's released multimodal layout */
static const char *head_name(const char *prefix) {
    return !strcmp(prefix, "language_model.model.") ? "language_model.lm_head.weight" : "lm_head.weight";
}

static void rename_head(hf_tensor_ref *ref, const char *prefix) {
    if (!strcmp(ref->name, "lm_head.weight")) snprintf(ref->name, sizeof ref->name, "%s", head_name(prefix));
}

/* Every tensor the config needs is in the file with the shape the config implies: checked
 * from the shapes alone, before the parameters are allocated (a wrong vocab_size must be a
 * shape mismatch, not an out-of-memory). */
int hf_check_shapes(const tlm_config *c, const tlm_safetensors *st, const char *dir) {
    int style = hf_family_style_of(c->model_type);
    if (style < 0) return tlm_error("%s: loading weights of model_type \"%s\" is not supported", dir, c->model_type);
    int n;
    size_t total;
    tensor_info *t = config_tensor_table(c, &n, &total);
    if (!t) return -1;
    const char *prefix = name_prefix(st, (hf_family_style)style, c->model_type);
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        hf_tensor_ref ref;
        int64_t shape[3];
        rc = hf_map_tensor(c, (hf_family_style)style, prefix, t[i].name, &ref) ? tlm_error_prefix("%s", dir) : 0;
        rename_head(&ref, prefix);
        if (!rc && tlm_st_check_shape(st, ref.name, file_shape(&t[i], &ref, shape), shape))
            rc = tlm_error_prefix("%s/config.json (vocab_size %d, hidden_size %d, %d layers) does not match the "
                                  "weights",
                                  dir, c->vocab_size, c->d_model, c->n_layers);
    }
    free(t);
    return rc;
}

static int load_tensors(tlm_model *m, const tlm_safetensors *st, const char *dir, hf_family_style style) {
    const tlm_config *c = &m->cfg;
    const char *prefix = name_prefix(st, style, c->model_type);
    used_set used = {0};
    float *scratch = NULL, *f32 = NULL;
    size_t scratch_n = 0, f32_n = 0;
    int rc = 0, matrices = 0, bf16_matrices = 0;
    for (int i = 0; i < m->n_tensors && !rc; i++) {
        hf_tensor_ref ref;
        rc = hf_map_tensor(c, style, prefix, m->tensors[i].name, &ref) ? tlm_error_prefix("%s", dir) : 0;
        rename_head(&ref, prefix);
        /* a matrix kept as bf16: read as f32 (FP8: value * scale, one rounding), then rounded as
         * model_weights_to_bf16 rounds, a tensor at a time */
        const tensor_info *ti = &m->tensors[i];
        float *dst = model_param(m, i);
        if (!rc && ti->bf16) {
            if (ti->numel > f32_n) {
                float *g = realloc(f32, ti->numel * sizeof(float));
                if (!g) rc = tlm_error("out of memory reading tensor '%.200s'", ref.name);
                else f32 = g, f32_n = ti->numel;
            }
            dst = f32;
        }
        if (!rc) rc = load_one(st, c, ti, &ref, dst, &scratch, &scratch_n);
        if (!rc && ti->bf16) {
            size_t bytes;
            uint16_t *w16 = model_tensor_data(m, i, &bytes);
            for (size_t j = 0; j < ti->numel; j++) w16[j] = tlm_f32_to_bf16(f32[j]);
        }
        const tlm_st_tensor *t = rc ? NULL : tlm_st_find(st, ref.name);
        if (t && is_fp8(t->dtype)) { /* (its scale tensor is used too) */
            char sname[300];
            const tlm_st_tensor *sc = fp8_scale_tensor(st, t, ref.name, sname, sizeof sname);
            rc = !sc ? -1 : mark_used(&used, sc);
            tlm_st_release(st, sc);
        }
        if (t && t->ndim >= 2) matrices++, bf16_matrices += t->dtype == TLM_DT_BF16; /* (3-D: Gemma 4's experts) */
        tlm_st_release(st, t); /* (the file's pages: the f32 copy is what stays; a fused tensor's next part
                                  reads them back from the page cache) */
        if (!rc) rc = mark_used(&used, t);
    }
    /* every matrix bf16 in the file: --dtype auto keeps them so (the values are exact in bf16) */
    m->file_stored16 = m->stored16 != NULL || (matrices > 0 && bf16_matrices == matrices); /* (or read as bf16) */
    free(scratch), free(f32);
    if (!rc && c->tie_embeddings) {
        const tlm_st_tensor *head = tlm_st_find(st, head_name(prefix));
        char embed[200];
        snprintf(embed, sizeof embed, "%s%s", prefix, hf_embed_name(style));
        if (head) rc = check_tied_head(m, head, tlm_st_find(st, embed)) || mark_used(&used, head) ? -1 : 0;
    }
    if (!rc && used.n) qsort(used.v, used.n, sizeof *used.v, cmp_ptr);
    /* a multimodal checkpoint: its other towers are not the text model's (skipped, said once) */
    const tlm_family *w = wrapper_of(c->model_type);
    size_t towers = 0, mtp = 0;
    for (size_t i = 0; !rc && i < tlm_st_count(st); i++) {
        const tlm_st_tensor *t = tlm_st_at(st, i);
        if (is_used(&used, t) || discarded_by_transformers(c, style, prefix, t->name)) continue;
        if (mtp_layer_tensor(c, prefix, t->name)) {
            mtp++;
            continue;
        }
        int tower = 0;
        for (int j = 0; w && w->wrapper_towers[j]; j++)
            tower |= !strncmp(t->name, w->wrapper_towers[j], strlen(w->wrapper_towers[j]));
        if (tower) {
            towers++;
            continue;
        }
        rc = tlm_error("%s: tensor '%.200s' is not part of the %s model that %s/config.json describes", t->file,
                       t->name, c->model_type, dir);
    }
    free(used.v);
    if (!rc && mtp)
        fprintf(stderr, "tinylm: note: %s: skipped the %zu tensors of the %d multi-token-prediction layer%s "
                        "(num_nextn_predict_layers; layers %d..%d): the engine runs the %d main layers, as "
                        "transformers does\n", dir, mtp, c->n_nextn, c->n_nextn > 1 ? "s" : "", c->n_layers,
                c->n_layers + c->n_nextn - 1, c->n_layers);
    if (!rc && towers)
        fprintf(stderr, "tinylm: note: %s: skipped the %zu tensors of the %s (text only)\n", dir, towers,
                w->wrapper_towers_are);
    return rc;
}

/* a quantized checkpoint the loader cannot read: refused naming the method (info and --explain describe it) */
static int refuse_quantized(const char *dir, const tlm_config *c) {
    if (!c->quant_method[0] || !strcmp(c->quant_method, "fp8")) return 0; /* (FP8: load_fp8) */
    const int packed = !strcmp(c->quant_method, "gptq") || !strcmp(c->quant_method, "awq");
    char what[64] = "";
    if (c->quant_bits) snprintf(what, sizeof what, " (%d-bit", c->quant_bits);
    if (c->quant_bits && c->quant_group) snprintf(what + strlen(what), sizeof what - strlen(what), ", groups of %d",
                                                  c->quant_group);
    if (c->quant_bits) snprintf(what + strlen(what), sizeof what - strlen(what), ")");
    return tlm_error("%s/config.json: quantization_config.quant_method \"%s\"%s: %s; tinylm loads F32, BF16 and F16 "
                     "safetensors (`tinylm info` and `info --explain` describe this checkpoint)", dir,
                     c->quant_method, what,
                     packed ? "its weights are packed integers (qweight, qzeros, scales) that tinylm cannot read"
                            : "tinylm cannot load this quantization");
}

/* every matrix of the files is BF16 or FP8 blocks (their scale tensors aside): --dtype auto keeps such a
 * checkpoint compact, its matrices bf16 from the start */
static int compact_checkpoint(const tlm_safetensors *st) {
    int matrices = 0;
    for (size_t i = 0; i < tlm_st_count(st); i++) {
        const tlm_st_tensor *t = tlm_st_at(st, i);
        const size_t n = strlen(t->name);
        if (t->ndim < 2 || (n > 10 && !strcmp(t->name + n - 10, "_scale_inv"))) continue;
        if (t->dtype != TLM_DT_BF16 && !is_fp8(t->dtype)) return 0;
        matrices++;
    }
    return matrices > 0;
}

/* the model with its matrices (those model_weights_to_bf16 keeps so) laid out as bf16 from the start: the peak
 * is the bf16 weights and one tensor in f32, not the whole model in f32 */
static tlm_model *create_bf16(const tlm_config *cfg) {
    int n = 0;
    size_t floats = 0;
    tensor_info *table = config_tensor_table(cfg, &n, &floats);
    int *storage = calloc((size_t)(n ? n : 1), sizeof *storage);
    tlm_model *m = NULL;
    if (table && storage) {
        for (int i = 0; i < n; i++) storage[i] = tensor_kept_as_bf16(&table[i]) ? WQ_BF16 : WQ_F32;
        m = model_create_stored(cfg, storage);
    } else {
        tlm_error("out of memory creating the model");
    }
    free(table), free(storage);
    return m;
}

tlm_model *hf_model_load(const char *dir, const tlm_config *cfg, int bf16_weights) {
    int style = hf_family_style_of(cfg->model_type);
    if (style < 0)
        return tlm_error("%s: loading weights of model_type \"%s\" is not supported", dir, cfg->model_type), NULL;
    if (refuse_quantized(dir, cfg)) return NULL;
    tlm_safetensors *st = tlm_st_open_dir(dir);
    if (!st || hf_check_shapes(cfg, st, dir)) {
        tlm_st_close(st);
        return NULL;
    }
    const int bf16 = bf16_weights == LOAD_BF16 || (bf16_weights == LOAD_AUTO && compact_checkpoint(st));
    tlm_model *m = bf16 ? create_bf16(cfg) : model_create(cfg);
    if (!m || load_tensors(m, st, dir, (hf_family_style)style)) {
        tlm_st_close(st);
        model_free(m);
        return NULL;
    }
    tlm_st_close(st);
    return m;
}
