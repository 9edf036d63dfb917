/* hf_map.c — engine tensor name -> Hugging Face tensor name (+ layout), per family style.
 *
 * Llama-like families keep the engine's [out, in] layout and only name_pair; GPT-2 stores its
 * linear layers as Conv1D ([in, out], so transposed) and fuses q, k, v into one c_attn. The
 * names come from each family's modeling_*.py module tree (docs/hf-families.md). */
#include "hf_map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family.h"
#include "util/error.h"

/* (the family table's naming; only for families with a config.json of their own) */
int hf_family_style_of(const char *mt) {
    const tlm_family *f = family_find(mt);
    return f && f->arch ? (int)f->names : -1;
}

const char *hf_default_prefix(hf_family_style style) { return style == HF_FAMILY_GPT2 ? "transformer." : "model."; }
const char *hf_embed_name(hf_family_style style) { return style == HF_FAMILY_GPT2 ? "wte.weight" : "embed_tokens.weight"; }

typedef struct {
    const char *engine, *hf; /* component prefixes inside a layer, e.g. "attn_norm." */
} name_pair;

/* (a mixture of experts: the router is HF's mlp.gate; experts and shared experts keep their names; MLA
 * (DeepSeek-V3): q_a_layernorm, kv_a_proj_with_mqa, kv_a_layernorm, the rest under its own name) */
static const name_pair LLAMA_LAYER[] = {{"attn_norm.", "input_layernorm."}, {"ffn_norm.", "post_attention_layernorm."},
                                     {"attn.q_a_norm.", "self_attn.q_a_layernorm."},
                                     {"attn.kv_a_norm.", "self_attn.kv_a_layernorm."},
                                     {"attn.kv_a_proj.", "self_attn.kv_a_proj_with_mqa."}, {"attn.", "self_attn."}, {"ffn.router.", "mlp.gate."}, {"ffn.", "mlp."},
                                     {NULL, NULL}};
/* Mixtral: MixtralSparseMoeBlock's router and its experts' w1 (gate), w3 (up), w2 (down) */
static const name_pair MIXTRAL_LAYER[] = {{"attn_norm.", "input_layernorm."}, {"ffn_norm.", "post_attention_layernorm."},
                                       {"attn.", "self_attn."}, {"ffn.router.", "block_sparse_moe.gate."},
                                       {NULL, NULL}};
/* (Gemma 4's MoE block: the dense output's norm post_feedforward_layernorm_1, the experts' input and
 * output norms pre_feedforward_layernorm_2 / post_feedforward_layernorm_2, the router's projection,
 * input scale and per-expert scales; the experts themselves are HF_EXPERT_ROWS slices, hf_map_tensor) */
static const name_pair GEMMA_LAYER[] = {{"attn_norm.", "input_layernorm."}, {"attn_out_norm.", "post_attention_layernorm."},
                                     {"ffn_norm.", "pre_feedforward_layernorm."},
                                     {"ffn_out_norm.", "post_feedforward_layernorm."}, {"attn.", "self_attn."},
                                     {"dense_out_norm.", "post_feedforward_layernorm_1."},
                                     {"moe_in_norm.", "pre_feedforward_layernorm_2."},
                                     {"moe_out_norm.", "post_feedforward_layernorm_2."},
                                     {"ffn.router.weight", "router.proj.weight"}, {"ffn.router.scale", "router.scale"},
                                     {"ffn.router.expert_scale", "router.per_expert_scale"},
                                     {"ffn.", "mlp."}, {"layer_scalar", "layer_scalar"},
                                     {"ple_gate.", "per_layer_input_gate."}, {"ple_proj.", "per_layer_projection."},
                                     {"ple_norm.", "post_per_layer_input_norm."}, {NULL, NULL}};
static const name_pair OLMO2_LAYER[] = {{"attn_out_norm.", "post_attention_layernorm."},
                                     {"ffn_out_norm.", "post_feedforward_layernorm."}, {"attn.", "self_attn."},
                                     {"ffn.", "mlp."}, {NULL, NULL}};

static int set_name(hf_tensor_ref *out, const char *a, const char *b, const char *c) {
    int n = snprintf(out->name, sizeof out->name, "%s%s%s", a, b, c);
    if (n < 0 || (size_t)n >= sizeof out->name) return tlm_error("tensor name \"%s%s%s\" is too long", a, b, c);
    return 0;
}

static int no_place(hf_family_style style, const char *engine_name) {
    static const char *const NAMES[] = {"llama", "gemma", "olmo2", "gpt2", "mixtral"};
    return tlm_error("engine tensor \"%s\" has no place in the %s tensor layout", engine_name, NAMES[style]);
}

/* GPT-2 tensors inside layer `layer_prefix` ("<prefix>h.N.") */
static int map_gpt2_layer(const tlm_config *c, const char *lp, const char *rest, hf_tensor_ref *out) {
    const int qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    static const char *const PROJ[3] = {"attn.q_proj.", "attn.k_proj.", "attn.v_proj."};
    for (int p = 0; p < 3; p++) {
        size_t n = strlen(PROJ[p]);
        if (!strncmp(rest, PROJ[p], n) && (!strcmp(rest + n, "weight") || !strcmp(rest + n, "bias"))) {
            out->layout = HF_QKV_SLICE;
            out->offset = p == 0 ? 0 : p == 1 ? qd : qd + kvd;
            out->fused_cols = qd + 2 * kvd;
            return set_name(out, lp, "attn.c_attn.", rest + n);
        }
    }
    static const name_pair SIMPLE[] = {{"attn_norm.", "ln_1."}, {"ffn_norm.", "ln_2."}, {"attn.o_proj.", "attn.c_proj."},
                                    {"ffn.up_proj.", "mlp.c_fc."}, {"ffn.down_proj.", "mlp.c_proj."}, {NULL, NULL}};
    for (const name_pair *r = SIMPLE; r->engine; r++) {
        size_t n = strlen(r->engine);
        if (strncmp(rest, r->engine, n) != 0) continue;
        /* Conv1D weights are stored [in, out]; norms and biases are vectors */
        out->layout = !strcmp(rest + n, "weight") && strstr(r->engine, "norm") == NULL ? HF_TRANSPOSE : HF_COPY;
        return set_name(out, lp, r->hf, rest + n);
    }
    return -1;
}

int hf_map_tensor(const tlm_config *c, hf_family_style style, const char *prefix, const char *name,
                  hf_tensor_ref *out) {
    memset(out, 0, sizeof *out);
    out->layout = HF_COPY;
    const bool gpt2 = style == HF_FAMILY_GPT2;
    if (!strcmp(name, "lm_head.weight")) return set_name(out, "", "", "lm_head.weight");
    if (!strcmp(name, "embed.weight")) return set_name(out, prefix, hf_embed_name(style), "");
    if (!strcmp(name, "pos_embed.weight")) return gpt2 ? set_name(out, prefix, "wpe.weight", "") : no_place(style, name);
    if (!strncmp(name, "final_norm.", 11)) {
        if (gpt2) return set_name(out, prefix, "ln_f.", name + 11);
        return !strcmp(name + 11, "weight") ? set_name(out, prefix, "norm.weight", "") : no_place(style, name);
    }
    /* Gemma 4's per-layer inputs (Gemma4TextModel: embed_tokens_per_layer, per_layer_model_projection,
     * per_layer_projection_norm) */
    static const name_pair PLE_TOP[] = {{"ple_embed.weight", "embed_tokens_per_layer.weight"},
                                        {"ple_model_proj.weight", "per_layer_model_projection.weight"},
                                        {"ple_model_norm.weight", "per_layer_projection_norm.weight"},
                                        {NULL, NULL}};
    for (const name_pair *r = PLE_TOP; r->engine; r++)
        if (!strcmp(name, r->engine)) return style == HF_FAMILY_GEMMA ? set_name(out, prefix, r->hf, "") : no_place(style, name);
    if (strncmp(name, "layers.", 7) != 0) return no_place(style, name);
    char *end;
    long layer = strtol(name + 7, &end, 10);
    if (end == name + 7 || *end != '.' || layer < 0 || layer >= c->n_layers) return no_place(style, name);
    const char *rest = end + 1;
    char lp[96];
    snprintf(lp, sizeof lp, "%s%s%ld.", prefix, gpt2 ? "h." : "layers.", layer);
    if (gpt2) return map_gpt2_layer(c, lp, rest, out) ? no_place(style, name) : 0;
    if (style == HF_FAMILY_MIXTRAL && !strncmp(rest, "ffn.experts.", 12)) {
        char *e_end;
        long e = strtol(rest + 12, &e_end, 10);
        static const name_pair W[] = {{".gate_proj.", ".w1."}, {".up_proj.", ".w3."}, {".down_proj.", ".w2."}, {NULL, NULL}};
        for (const name_pair *r = W; e_end != rest + 12 && r->engine; r++) {
            size_t n = strlen(r->engine);
            if (strncmp(e_end, r->engine, n) != 0) continue;
            char part[48];
            snprintf(part, sizeof part, "block_sparse_moe.experts.%ld%s", e, r->hf);
            return set_name(out, lp, part, e_end + n);
        }
        return no_place(style, name);
    }
    if (style == HF_FAMILY_GEMMA && !strncmp(rest, "ffn.experts.", 12)) { /* Gemma4TextExperts' two tensors */
        char *e_end;
        const long e = strtol(rest + 12, &e_end, 10);
        const int fe = c->moe_d_ff;
        if (e_end == rest + 12 || e < 0 || e >= c->n_experts) return no_place(style, name);
        out->layout = HF_EXPERT_ROWS, out->experts = c->n_experts;
        if (!strcmp(e_end, ".gate_proj.weight") || !strcmp(e_end, ".up_proj.weight")) {
            out->expert_rows = 2 * fe; /* gate_up_proj [E, 2 fe, d]: gate's rows, then up's */
            out->offset = (int)e * 2 * fe + (e_end[1] == 'u' ? fe : 0);
            return set_name(out, lp, "experts.gate_up_proj", "");
        }
        if (!strcmp(e_end, ".down_proj.weight")) {
            out->expert_rows = c->d_model; /* down_proj [E, d, fe] */
            out->offset = (int)e * c->d_model;
            return set_name(out, lp, "experts.down_proj", "");
        }
        return no_place(style, name);
    }
    /* Qwen2-MoE's one shared expert behind its gate: mlp.shared_expert.* (DeepSeek's: mlp.shared_experts.*) */
    if (style == HF_FAMILY_LLAMA && c->shared_gate && !strncmp(rest, "ffn.shared_experts.", 19))
        return set_name(out, lp, "mlp.shared_expert.", rest + 19);
    const name_pair *table = style == HF_FAMILY_GEMMA     ? GEMMA_LAYER
                             : style == HF_FAMILY_OLMO2   ? OLMO2_LAYER
                             : style == HF_FAMILY_MIXTRAL ? MIXTRAL_LAYER
                                                          : LLAMA_LAYER;
    for (const name_pair *r = table; r->engine; r++) {
        size_t n = strlen(r->engine);
        if (!strncmp(rest, r->engine, n)) return set_name(out, lp, r->hf, rest + n);
    }
    return no_place(style, name);
}
