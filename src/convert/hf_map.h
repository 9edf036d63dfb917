/* hf_map.h — the tensor names of the Hugging Face families, as a map from each engine tensor
 * (docs/tensors.md) to the HF tensor that holds it and the layout change between the two.
 * Shared by the loader (hf_load.c) and the exporter (hf_export.c). Internal to src/model. */
#ifndef TLM_HF_MAP_H
#define TLM_HF_MAP_H

#include "model/config.h"

typedef enum {
    HF_FAMILY_LLAMA, /* llama, qwen2, qwen3: input_layernorm / post_attention_layernorm */
    HF_FAMILY_GEMMA, /* gemma2, gemma3_text: four norms per layer */
    HF_FAMILY_OLMO2, /* post_attention_layernorm / post_feedforward_layernorm, no input norm */
    HF_FAMILY_GPT2,  /* wte, wpe, h.N.ln_1, fused c_attn, Conv1D weights */
    HF_FAMILY_MIXTRAL, /* llama's names, the FFN as block_sparse_moe.{gate, experts.e.w1|w2|w3} */
} hf_family_style;

typedef enum {
    HF_COPY,      /* same shape and layout */
    HF_TRANSPOSE, /* GPT-2 Conv1D: HF [in, out], engine [out, in] */
    HF_QKV_SLICE, /* GPT-2 c_attn: rows [off, off + n) of the engine tensor come from columns
                     [off, off + n) of the fused [d, 3d] weight (transposed) or of the [3d] bias */
    HF_EXPERT_ROWS, /* Gemma 4's experts, all in one [experts, expert_rows, cols] tensor: the engine
                       tensor [rows, cols] is rows [offset, offset + rows) of it viewed as
                       [experts * expert_rows, cols] (expert e's gate: e * 2f + [0, f), up: + [f, 2f)) */
} hf_layout;

typedef struct {
    char name[160];  /* full HF tensor name, prefix included */
    hf_layout layout;
    int offset;      /* HF_QKV_SLICE: first column (weight) / element (bias) of this part */
    int fused_cols;  /* HF_QKV_SLICE: columns of the fused tensor */
    int experts, expert_rows; /* HF_EXPERT_ROWS: the tensor's first two dimensions */
} hf_tensor_ref;

/* The naming style of a Hugging Face model_type; -1 (no error set) when it has none. */
int hf_family_style_of(const char *model_type);

/* Prefix of the base model's tensors in a *ForCausalLM checkpoint ("model." / "transformer.")
 * and the name of the token embedding that identifies it. */
const char *hf_default_prefix(hf_family_style style);
const char *hf_embed_name(hf_family_style style);

/* Maps one engine tensor name to its HF tensor. -1 + tlm_error for a name the style has no
 * place for (an engine variant that the family cannot express). `prefix` goes before every
 * name except lm_head.weight (which lives outside the base model in HF). */
int hf_map_tensor(const tlm_config *c, hf_family_style style, const char *prefix, const char *engine_name,
                  hf_tensor_ref *out);

#endif
