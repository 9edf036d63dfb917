/* gguf_load.c — a GGUF file (formats/gguf.h reads it) as an engine model: its metadata as a
 * tlm_config, its tensors by llama.cpp's names into the engine's tensor table, each matrix
 * kept in the type the file stores it in (f32, bf16, or a ggml block format the products read
 * where it lies: ops/quant.h), vectors (norms, biases, learned positions) as f32.
 *
 * What llama.cpp's converters change, undone here so that the engine computes what the
 * original model does:
 * - the llama architecture stores q and k with each head's rows in interleaved pairs (2i, 2i+1)
 *   (Meta's layout, which llama.cpp's rope mode 0 rotates), while the engine rotates halves
 *   (i, i + hd/2): the rows are permuted back within each head (rows are whole blocks, so
 *   quantized rows move as they are);
 * - Gemma's files hold the RMSNorm gains as 1 + w (the converter adds the 1; llama.cpp multiplies
 *   by the stored value): the model is built with plain-weight RMSNorm, which computes the same
 *   thing from the stored value exactly (subtracting the 1 again would round);
 * - GPT-2 stores q|k|v as one attn_qkv matrix: the engine keeps q, k, v back to back, so it is one
 *   copy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "family.h"
#include "formats/gguf.h"
#include "gguf_export.h"
#include "ops/quant.h"
#include "util/error.h"
#include "util/f16.h"
#include "util/finite.h"
#include "util/hugepage.h"

/* ---- metadata -> config ------------------------------------------------------------------------ */

enum { SIZE_LIMIT = 1 << 24 };

typedef struct {
    const tlm_gguf *g;
    const char *path, *arch;
} meta;

/* "{arch}.suffix" */
static const char *arch_key(const meta *mt, const char *suffix) {
    static _Thread_local char key[160];
    snprintf(key, sizeof key, "%s.%s", mt->arch, suffix);
    return key;
}

/* an integer key in [lo, SIZE_LIMIT]: 1 read, 0 absent (with required: an error), -1 */
static int get_size(const meta *mt, const char *suffix, int lo, int required, int *out) {
    const char *key = arch_key(mt, suffix);
    int64_t v;
    int rc = tlm_gguf_get_i64(mt->g, key, &v);
    if (rc < 0) return -1;
    if (rc == 0) return required ? tlm_error("%s: metadata key %s is missing", mt->path, key) : 0;
    if (v < lo || v > SIZE_LIMIT)
        return tlm_error("%s: metadata %s = %lld is outside [%d, %d]", mt->path, key, (long long)v, lo, SIZE_LIMIT);
    *out = (int)v;
    return 1;
}

/* a float key, finite as a float32 (the reader's check) and in range: 1 read, 0 absent (with
 * required: an error), -1 */
static int get_float(const meta *mt, const char *suffix, int required, tlm_float_range range, float *out) {
    const char *key = arch_key(mt, suffix);
    float v;
    int rc = tlm_gguf_get_f32(mt->g, key, &v);
    if (rc == 0 && required) return tlm_error("%s: metadata key %s is missing", mt->path, key);
    if (rc <= 0) return rc;
    if (tlm_float_from_file(v, range, mt->path, key, out)) return -1;
    return 1;
}

static int config_from_metadata(const tlm_gguf *g, const char *path, const gguf_family **arch_out, tlm_config *c) {
    gguf_str arch;
    int rc = tlm_gguf_get_str(g, "general.architecture", &arch);
    if (rc <= 0) return rc < 0 ? -1 : tlm_error("%s: metadata key general.architecture is missing", path);
    const tlm_family *fam = family_find_gguf(arch.p, arch.len);
    const gguf_family *a = fam ? fam->gguf : NULL;
    if (!a) {
        char names[160] = "";
        const tlm_family *f;
        for (int i = 0; (f = family_at(i)) != NULL; i++)
            if (f->gguf)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", *names ? ", " : "", f->gguf->arch);
        return tlm_error("%s: general.architecture = \"%.*s\" is not one tinylm runs (%s)", path,
                         (int)(arch.len > 64 ? 64 : arch.len), arch.p, names);
    }
    *arch_out = a;
    meta mt = {g, path, a->arch};
    config_defaults(c);
    snprintf(c->model_type, sizeof c->model_type, "%s", a->model_type);
    a->shape(c);
    c->tie_embeddings = false; /* (set from the tensors: output.weight absent) */
    if (get_size(&mt, "block_count", 1, 1, &c->n_layers) < 0 || get_size(&mt, "embedding_length", 1, 1, &c->d_model) < 0 ||
        get_size(&mt, "feed_forward_length", 1, 1, &c->d_ff) < 0 ||
        get_size(&mt, "attention.head_count", 1, 1, &c->n_heads) < 0 ||
        get_size(&mt, "context_length", 1, 1, &c->max_seq) < 0)
        return -1;
    if (c->n_layers > TLM_MAX_LAYERS)
        return tlm_error("%s: %s = %d: at most %d layers supported", path, arch_key(&mt, "block_count"), c->n_layers,
                         TLM_MAX_LAYERS);
    c->n_kv_heads = c->n_heads;
    if (get_size(&mt, "attention.head_count_kv", 1, 0, &c->n_kv_heads) < 0) return -1;
    c->head_dim = c->d_model / c->n_heads;
    int key_len = 0, value_len = 0;
    if (get_size(&mt, "attention.key_length", 1, 0, &key_len) < 0 ||
        get_size(&mt, "attention.value_length", 1, 0, &value_len) < 0)
        return -1;
    if (key_len) c->head_dim = key_len;
    if (value_len && value_len != c->head_dim)
        return tlm_error("%s: %s = %d differs from the key length %d: unsupported", path,
                         arch_key(&mt, "attention.value_length"), value_len, c->head_dim);
    if (c->norm == NORM_LAYERNORM) {
        if (get_float(&mt, "attention.layer_norm_epsilon", 1, TLM_FLOAT_EPS, &c->norm_eps) < 0) return -1;
    } else if (get_float(&mt, "attention.layer_norm_rms_epsilon", 1, TLM_FLOAT_EPS, &c->norm_eps) < 0) {
        return -1;
    }
    if (c->position == POS_ROPE) {
        c->rope_theta = 10000.0f;
        if (get_float(&mt, "rope.freq_base", 0, TLM_FLOAT_POSITIVE, &c->rope_theta) < 0) return -1;
        int rot = c->head_dim;
        if (get_size(&mt, "rope.dimension_count", 1, 0, &rot) < 0) return -1;
        if (rot != c->head_dim)
            return tlm_error("%s: %s = %d rotates part of each head of %d: partial RoPE is not supported", path,
                             arch_key(&mt, "rope.dimension_count"), rot, c->head_dim);
        gguf_str type = {"none", 4};
        if (tlm_gguf_get_str(g, arch_key(&mt, "rope.scaling.type"), &type) < 0) return -1;
        float factor = 1.0f;
        const int linear = type.len == 6 && !memcmp(type.p, "linear", 6);
        if (get_float(&mt, "rope.scaling.factor", 0, linear ? TLM_FLOAT_FACTOR : TLM_FLOAT_ANY, &factor) < 0) return -1;
        if (linear && factor != 1.0f) {
            c->rope_scaling = ROPE_SCALING_LINEAR, c->rope_factor = factor;
        } else if (!(type.len == 4 && !memcmp(type.p, "none", 4)) && !(type.len == 6 && !memcmp(type.p, "linear", 6))) {
            return tlm_error("%s: %s = \"%.*s\": only none and linear RoPE scaling are supported", path,
                             arch_key(&mt, "rope.scaling.type"), (int)(type.len > 32 ? 32 : type.len), type.p);
        }
        if (tlm_gguf_find_tensor(g, "rope_freqs.weight"))
            return tlm_error("%s: tensor rope_freqs.weight (per-frequency RoPE factors, Llama 3.1 style) is not "
                             "supported yet", path);
    }
    /* a mixture of experts: Qwen2-MoE (llama_model_qwen2moe::load_arch_hparams) and Qwen3-MoE need expert_count and
     * expert_used_count, their experts' width expert_feed_forward_length (Qwen2-MoE's absent: feed_forward_length /
     * expert_used_count; Qwen3-MoE's required), Qwen2-MoE's shared expert expert_shared_feed_forward_length (absent:
     * feed_forward_length); llama with an expert_count (Mixtral) has experts of feed_forward_length */
    const int qwen2moe = !strcmp(a->arch, "qwen2moe"), qwen3moe = !strcmp(a->arch, "qwen3moe");
    int llama_experts = 0; /* (0 or absent: dense) */
    if (!strcmp(a->arch, "llama") && get_size(&mt, "expert_count", 0, 0, &llama_experts) < 0) return -1;
    const int llama_moe = llama_experts > 0;
    if (qwen2moe || qwen3moe || llama_moe) {
        if (get_size(&mt, "expert_count", 1, 1, &c->n_experts) < 0 ||
            get_size(&mt, "expert_used_count", 1, 1, &c->n_experts_per_tok) < 0)
            return -1;
        c->moe_d_ff = llama_moe ? c->d_ff : c->d_ff / c->n_experts_per_tok;
        if (llama_moe) c->norm_topk_prob = true; /* (llama.cpp's llama renormalises the chosen experts' weights) */
        if (qwen2moe) c->shared_d_ff = c->d_ff;
        if ((!llama_moe && get_size(&mt, "expert_feed_forward_length", 1, qwen3moe, &c->moe_d_ff) < 0) ||
            (qwen2moe && get_size(&mt, "expert_shared_feed_forward_length", 1, 0, &c->shared_d_ff) < 0))
            return -1;
        if (c->moe_d_ff < 1)
            return tlm_error("%s: %s = %d over %d experts per token leaves the experts no width", path,
                             arch_key(&mt, "feed_forward_length"), c->d_ff, c->n_experts_per_tok);
    }
    /* Gemma 2 / 3 27B: llama.cpp scales q by (n_embd / n_head)^-0.5 (an integer quotient) when the depth is the 27B's
     * (llama_model_gemma2::load_arch_hparams), head_dim^-0.5 otherwise */
    if (a->wide_scale_layers && c->n_layers == a->wide_scale_layers)
        c->query_pre_attn_scalar = (float)(c->d_model / c->n_heads);
    /* the architecture's own keys (family.h) */
    if (a->sliding_pattern) {
        int window = 0;
        if (get_size(&mt, "attention.sliding_window", 1, 0, &window) < 0) return -1;
        c->sliding_window = window;
        config_sliding_pattern(c, window ? a->sliding_pattern : 0);
    }
    for (int i = 0; i < (int)(sizeof a->floats / sizeof a->floats[0]) && a->floats[i].suffix; i++)
        if (get_float(&mt, a->floats[i].suffix, 0, TLM_FLOAT_NONNEG, (float *)((char *)c + a->floats[i].field)) < 0)
            return -1;
    return 0;
}

/* ---- tensors ------------------------------------------------------------------------------------ */

int gguf_engine_name_to_file(const char *name, char *out, size_t cap) {
    static const char *const MAP[][2] = {
        {"attn_norm", "attn_norm"},         {"attn_out_norm", "post_attention_norm"},
        {"ffn_norm", "ffn_norm"},           {"ffn_out_norm", "post_ffw_norm"},
        {"attn.q_proj", "attn_q"},          {"attn.k_proj", "attn_k"},
        {"attn.v_proj", "attn_v"},          {"attn.o_proj", "attn_output"},
        {"attn.q_norm", "attn_q_norm"},     {"attn.k_norm", "attn_k_norm"},
        {"ffn.gate_proj", "ffn_gate"},      {"ffn.up_proj", "ffn_up"},
        {"ffn.down_proj", "ffn_down"},
        /* a mixture of experts (Qwen2-MoE): the router, the shared expert and its gate (the experts: moe_expert_source) */
        {"ffn.router", "ffn_gate_inp"},     {"ffn.shared_experts.gate_proj", "ffn_gate_shexp"},
        {"ffn.shared_experts.up_proj", "ffn_up_shexp"}, {"ffn.shared_experts.down_proj", "ffn_down_shexp"},
        {"ffn.shared_expert_gate", "ffn_gate_inp_shexp"},
    };
    static const char *const TOP[][2] = {{"embed.weight", "token_embd.weight"},
                                         {"pos_embed.weight", "position_embd.weight"},
                                         {"final_norm.weight", "output_norm.weight"},
                                         {"final_norm.bias", "output_norm.bias"},
                                         {"lm_head.weight", "output.weight"}};
    for (size_t i = 0; i < sizeof TOP / sizeof TOP[0]; i++)
        if (!strcmp(name, TOP[i][0])) return snprintf(out, cap, "%s", TOP[i][1]), 0;
    int layer, used = 0;
    if (sscanf(name, "layers.%d.%n", &layer, &used) != 1 || !used) return -1;
    const char *rest = name + used, *dot = strrchr(rest, '.');
    if (!dot) return -1;
    for (size_t i = 0; i < sizeof MAP / sizeof MAP[0]; i++) {
        size_t k = strlen(MAP[i][0]);
        if ((size_t)(dot - rest) == k && !strncmp(rest, MAP[i][0], k))
            return snprintf(out, cap, "blk.%d.%s%s", layer, MAP[i][1], dot), 0;
    }
    return -1;
}

/* GPT-2 files hold q|k|v as one tensor: engine tensor layers.L.attn.{q,k,v}_proj.{weight,bias}
 * -> blk.L.attn_qkv.{weight,bias}, and which third it is */
static int fused_qkv_part(const char *name, char *out, size_t cap) {
    int layer, used = 0;
    if (sscanf(name, "layers.%d.attn.%n", &layer, &used) != 1 || !used) return -1;
    const char *r = name + used;
    int part = !strncmp(r, "q_proj.", 7) ? 0 : !strncmp(r, "k_proj.", 7) ? 1 : !strncmp(r, "v_proj.", 7) ? 2 : -1;
    if (part >= 0) snprintf(out, cap, "blk.%d.attn_qkv.%s", layer, r + 7);
    return part;
}

typedef struct {
    const gguf_tensor *t; /* the file's tensor */
    int64_t row0;         /* the first of its rows (ne[1]) that is this engine tensor's (GPT-2's q|k|v) */
} source;

/* (a [1, d] engine row may be stored as a vector: llama.cpp's ffn_gate_inp_shexp is {n_embd}) */
static int shape_matches(const gguf_tensor *t, const tensor_info *ti, int64_t rows) {
    if (ti->ndim == 1) return t->n_dims == 1 && t->ne[0] == ti->shape[0];
    if (rows == 1 && t->n_dims == 1) return t->ne[0] == ti->shape[1];
    return t->n_dims == 2 && t->ne[0] == ti->shape[1] && t->ne[1] == rows;
}

/* expert e's matrix layers.L.ffn.experts.e.{gate,up,down}_proj.weight: rows [e * rows, (e + 1) * rows) of
 * llama.cpp's stacked blk.L.ffn_{gate,up,down}_exps.weight (ne {cols, rows, n_expert}); 0 (name, row0), or -1
 * when the name is not an expert's */
static int moe_expert_source(const char *name, int rows, char *out, size_t cap, int64_t *row0) {
    int layer, e, used = 0;
    char which[8] = "";
    if (sscanf(name, "layers.%d.ffn.experts.%d.%4[a-z]_proj.weight%n", &layer, &e, which, &used) != 3 || !used ||
        name[used])
        return -1;
    snprintf(out, cap, "blk.%d.ffn_%s_exps.weight", layer, which);
    *row0 = (int64_t)e * rows;
    return 0;
}

/* finds each engine tensor's source in the file and checks its shape and type */
static int find_sources(const tlm_gguf *g, const char *path, tlm_model *probe, source *src, int *storage) {
    const tlm_config *c = &probe->cfg;
    for (int i = 0; i < probe->n_tensors; i++) {
        const tensor_info *ti = &probe->tensors[i];
        char name[128];
        int64_t rows = ti->ndim == 2 ? ti->shape[0] : 1, row0 = 0;
        const int expert = !moe_expert_source(ti->name, (int)rows, name, sizeof name, &row0);
        if (!expert && gguf_engine_name_to_file(ti->name, name, sizeof name))
            return tlm_error("%s: no GGUF name for the engine tensor %s (internal)", path, ti->name);
        const gguf_tensor *t = tlm_gguf_find_tensor(g, name);
        int part;
        char fused[128]; /* (a missing tensor is named by its own name, not the fused one tried) */
        if (expert) {
            if (!t)
                return tlm_error("%s: tensor %s is missing (the %s architecture with this metadata needs it)", path,
                                 name, c->model_type);
            if (t->n_dims != 3 || t->ne[0] != ti->shape[1] || t->ne[1] != rows || t->ne[2] != c->n_experts)
                return tlm_error("%s: tensor %s has shape [%lld, %lld, %lld] (ne, fastest first); the metadata implies "
                                 "[%d, %lld, %d]", path, name, (long long)t->ne[0], (long long)t->ne[1],
                                 (long long)t->ne[2], ti->shape[1], (long long)rows, c->n_experts);
        } else if (!t && (part = fused_qkv_part(ti->name, fused, sizeof fused)) >= 0 && (t = tlm_gguf_find_tensor(g, fused))) {
            snprintf(name, sizeof name, "%s", fused);
            const int64_t qd = (int64_t)c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim;
            const int64_t off[3] = {0, qd, qd + kvd}, total = qd + 2 * kvd;
            row0 = off[part];
            const int ok = ti->ndim == 2 ? t->n_dims == 2 && t->ne[0] == ti->shape[1] && t->ne[1] == total
                                         : t->n_dims == 1 && t->ne[0] == total;
            if (!ok)
                return tlm_error("%s: tensor %.*s has shape [%lld, %lld]; q|k|v of this config needs [%lld, %lld]", path,
                                 (int)t->name.len, t->name.p, (long long)t->ne[0], (long long)t->ne[1],
                                 (long long)(ti->ndim == 2 ? ti->shape[1] : total), (long long)total);
        } else if (!t) {
            return tlm_error("%s: tensor %s is missing (the %s architecture with this metadata needs it)", path, name,
                             c->model_type);
        } else if (!shape_matches(t, ti, rows)) {
            char want[64];
            if (ti->ndim == 2)
                snprintf(want, sizeof want, "[%d, %d]", ti->shape[1], ti->shape[0]);
            else
                snprintf(want, sizeof want, "[%d]", ti->shape[0]);
            return tlm_error("%s: tensor %s has shape [%lld, %lld, %lld, %lld] (ne, fastest first); the metadata "
                             "implies %s", path, name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                             (long long)t->ne[3], want);
        }
        if (!wq_supported(t->type))
            return tlm_error("%s: tensor %s has type %s, which tinylm cannot read (F32, F16, BF16, Q4_0, Q4_1, Q5_0, "
                             "Q5_1, Q8_0, Q2_K..Q6_K)", path, name, wq_name(t->type));
        if (ti->ndim == 2 && t->ne[0] % wq_block_elems(t->type))
            return tlm_error("%s: tensor %s: rows of %lld are not whole %s blocks", path, name, (long long)t->ne[0],
                             wq_name(t->type));
        src[i].t = t, src[i].row0 = row0;
        /* matrices stay as stored; vectors and the learned positions (added, not multiplied) in f32; a mixture of
         * experts' matrices (which the engine keeps in f32 or bf16 only) bf16 when stored so, else decoded to f32 */
        const int matrix = ti->ndim == 2 && strcmp(ti->name, "pos_embed.weight") != 0;
        storage[i] = !matrix || t->type == WQ_F32 ? WQ_F32 : t->type;
        if (matrix && strstr(ti->name, ".ffn.") && (strstr(ti->name, ".ffn.router.") || strstr(ti->name, "experts.") ||
                                                    strstr(ti->name, ".shared_expert_gate.")))
            storage[i] = t->type == WQ_BF16 ? WQ_BF16 : WQ_F32;
    }
    return 0;
}

/* rows [row0, row0 + n) of the file's tensor (ne[0] = cols each) into dst in the type kept:
 * the same bytes for a matrix kept as stored, else converted to f32 */
static void copy_rows(void *dst, int kept, const gguf_tensor *t, int64_t row0, int64_t n, const int *perm) {
    const size_t cols = (size_t)t->ne[0], in_row = wq_row_bytes(t->type, (int64_t)cols);
    const uint8_t *base = t->data;
    for (int64_t r = 0; r < n; r++) {
        const uint8_t *from = base + (size_t)(row0 + (perm ? perm[r] : r)) * in_row;
        if (kept == t->type && kept != WQ_F32)
            memcpy((uint8_t *)dst + (size_t)r * in_row, from, in_row);
        else
            wq_dequantize_row(t->type, from, (float *)dst + (size_t)r * cols, (int64_t)cols);
    }
}

/* the row permutation of q or k (n_heads heads of hd rows): engine row (h, a*hd/2 + b) reads file
 * row (h, 2b + a) */
static int *halves_from_pairs(int n_heads, int hd) {
    int *perm = malloc((size_t)n_heads * hd * sizeof(int));
    if (!perm) return NULL;
    for (int h = 0; h < n_heads; h++)
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < hd / 2; b++) perm[h * hd + a * (hd / 2) + b] = h * hd + 2 * b + a;
    return perm;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* every tensor of the file is one the engine read, or one it knowingly does without */
static int check_all_used(const tlm_gguf *g, const char *path, const source *src, int n) {
    for (size_t i = 0; i < tlm_gguf_tensor_count(g); i++) {
        const gguf_tensor *t = tlm_gguf_tensor_at(g, i);
        int used = 0;
        for (int k = 0; k < n && !used; k++) used = src[k].t == t;
        if (!used)
            return tlm_error("%s: tensor %.*s is not one this architecture's engine model reads; refusing to run "
                             "without it", path, (int)(t->name.len > 96 ? 96 : t->name.len), t->name.p);
    }
    return 0;
}

static tlm_model *build(const tlm_gguf *g, const char *path) {
    tlm_config cfg;
    const gguf_family *arch;
    if (config_from_metadata(g, path, &arch, &cfg)) return NULL;
    const gguf_tensor *embed = tlm_gguf_find_tensor(g, "token_embd.weight");
    if (!embed) return tlm_error("%s: tensor token_embd.weight is missing", path), NULL;
    if (embed->n_dims != 2 || embed->ne[1] < 1 || embed->ne[1] > SIZE_LIMIT)
        return tlm_error("%s: tensor token_embd.weight has %d dimensions, ne[1] = %lld: expected [d_model, vocab]",
                         path, embed->n_dims, (long long)embed->ne[1]),
               NULL;
    cfg.vocab_size = (int)embed->ne[1];
    cfg.tie_embeddings = !tlm_gguf_find_tensor(g, "output.weight");
    if (config_validate(&cfg, path)) return NULL;
    int n = 0;
    size_t floats = 0;
    tensor_info *table = config_tensor_table(&cfg, &n, &floats);
    source *src = calloc((size_t)(n ? n : 1), sizeof *src);
    int *storage = calloc((size_t)(n ? n : 1), sizeof *storage);
    tlm_model *m = NULL;
    if (!table || !src || !storage) {
        tlm_error("out of memory");
        goto done;
    }
    tlm_model probe = {.cfg = cfg, .tensors = table, .n_tensors = n};
    if (find_sources(g, path, &probe, src, storage) || check_all_used(g, path, src, n)) goto done;
    m = model_create_stored(&cfg, storage);
    if (!m) {
        tlm_error_prefix("%s", path);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        const tensor_info *ti = &m->tensors[i];
        size_t bytes;
        void *dst = model_tensor_data(m, i, &bytes);
        const int64_t rows = ti->ndim == 2 ? ti->shape[0] : 1;
        int *perm = NULL;
        if (arch->interleaved_qk && ti->ndim == 2 &&
            (ends_with(ti->name, ".attn.q_proj.weight") || ends_with(ti->name, ".attn.k_proj.weight"))) {
            const int heads = ends_with(ti->name, ".q_proj.weight") ? cfg.n_heads : cfg.n_kv_heads;
            if (!(perm = halves_from_pairs(heads, cfg.head_dim))) {
                tlm_error("out of memory");
                model_free(m), m = NULL;
                goto done;
            }
        }
        const int kept = ti->qtype ? ti->qtype : ti->bf16 ? WQ_BF16 : WQ_F32;
        if (ti->ndim == 1) { /* a vector (possibly a third of GPT-2's q|k|v bias) */
            float *row = malloc((size_t)src[i].t->ne[0] * sizeof(float));
            if (!row) {
                free(perm), model_free(m), m = NULL;
                tlm_error("out of memory");
                goto done;
            }
            wq_dequantize_row(src[i].t->type, src[i].t->data, row, src[i].t->ne[0]);
            memcpy(dst, row + src[i].row0, (size_t)ti->shape[0] * sizeof(float));
            free(row);
        } else {
            copy_rows(dst, kept, src[i].t, src[i].row0, rows, perm);
        }
        free(perm);
        if (tlm_gguf_is_mapped(g)) /* (read: the copy is what stays resident, not the file and the copy) */
            tlm_advise_done(src[i].t->data, src[i].t->nbytes);
    }
done:
    free(table), free(src), free(storage);
    return m;
}

tlm_model *gguf_model_load(const char *path) {
    tlm_gguf *g = tlm_gguf_open(path);
    if (!g) return NULL;
    tlm_model *m = build(g, path);
    tlm_gguf_close(g);
    return m;
}

int gguf_read_config(const char *path, tlm_config *cfg) {
    tlm_gguf *g = tlm_gguf_open(path);
    if (!g) return -1;
    const gguf_family *arch;
    int rc = config_from_metadata(g, path, &arch, cfg);
    const gguf_tensor *embed = rc ? NULL : tlm_gguf_find_tensor(g, "token_embd.weight");
    if (!rc && (!embed || embed->n_dims != 2 || embed->ne[1] < 1 || embed->ne[1] > SIZE_LIMIT))
        rc = tlm_error("%s: tensor token_embd.weight is missing or not [d_model, vocab]", path);
    if (!rc) {
        cfg->vocab_size = (int)embed->ne[1];
        cfg->tie_embeddings = !tlm_gguf_find_tensor(g, "output.weight");
        rc = config_validate(cfg, path);
    }
    tlm_gguf_close(g);
    return rc;
}
