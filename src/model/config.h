/* config.h — the architecture of a model as plain data. Every variant the engine can build
 * (norm type, placement, positions, attention features, FFN) is one field here; the block
 * code switches on these fields instead of existing in several copies. */
#ifndef TLM_CONFIG_H
#define TLM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#define TLM_MAX_LAYERS 512
#define TLM_MAX_EXPERTS 1024

typedef enum { NORM_LAYERNORM, NORM_RMSNORM, NORM_RMSNORM_1P, NORM_DYT } norm_type;
/* PLACE_DEEPNORM (Wang et al. 2022): Post-Norm with the residual scaled, N(alpha x + F(x)) */
typedef enum { PLACE_PRE, PLACE_POST, PLACE_SANDWICH, PLACE_OUTPUT, PLACE_NONE, PLACE_DEEPNORM } norm_placement;
typedef enum { POS_ROPE, POS_LEARNED, POS_NONE } position_type;
typedef enum { QK_NORM_NONE, QK_NORM_HEAD, QK_NORM_FULL } qk_norm_type;
typedef enum { FFN_SWIGLU, FFN_GEGLU, FFN_GELU } ffn_type;
typedef enum { ROPE_SCALING_NONE, ROPE_SCALING_LINEAR, ROPE_SCALING_LLAMA3, ROPE_SCALING_YARN } rope_scaling_type;
/* the router's scores: softmax over all experts (Qwen3-MoE, Mixtral), or each expert's sigmoid
 * (DeepSeek-V3, with the selection-only e_score_correction_bias) */
typedef enum { SCORING_SOFTMAX, SCORING_SIGMOID } router_scoring;

typedef struct {
    char model_type[32]; /* "tinylm" or the Hugging Face family it was read as */

    /* sizes */
    int vocab_size, d_model, n_layers, n_heads, n_kv_heads, head_dim, d_ff, max_seq;

    /* norms and residual stream */
    norm_type norm;
    float norm_eps;
    bool norm_bias; /* LayerNorm beta */
    float dyt_alpha_init; /* DyT: initial alpha of each norm (y = g tanh(alpha x) + b) */
    /* DyT: the initial alpha of the norms around attention (attn_norm, attn_out_norm), around the
     * FFN (ffn_norm, ffn_out_norm) and of the final norm; 0 = dyt_alpha_init (Zhu et al. 2025 set
     * them apart for LLaMA: 0.8 / 0.2 / 0.2 at width 4096) */
    float dyt_alpha_init_attn, dyt_alpha_init_ffn, dyt_alpha_init_final;
    norm_placement placement;
    /* DeepNorm only: the residual scale alpha and the init gain beta of v, o and the FFN
     * matrices; 0 = derived from the depth (config_deepnorm_alpha / _beta) */
    float deepnorm_alpha, deepnorm_beta;
    bool residual;
    bool final_norm;

    /* positions */
    position_type position;
    float rope_theta;
    float rope_theta_local; /* RoPE base of sliding-window layers (Gemma 3); 0 = rope_theta */
    rope_scaling_type rope_scaling;
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max_pos;
    /* YaRN (rope_type "yarn", with MLA only): beta_fast / beta_slow (32 / 1), mscale and mscale_all_dim
     * (0 = unset), attention_factor (0 = derived from them), truncate (the correction range's ends
     * rounded to integers; true). original_max_position_embeddings 0 = max_position_embeddings. */
    float rope_beta_fast, rope_beta_slow, rope_mscale, rope_mscale_all_dim, rope_attn_factor;
    bool rope_truncate;
    bool embed_scale; /* token embedding * sqrt(d_model) (Gemma) */

    /* attention */
    bool attn_bias, attn_out_bias;
    qk_norm_type qk_norm;
    float query_pre_attn_scalar; /* 0 = unset: scale is head_dim^-0.5 */
    float attn_softcap;          /* 0 = off */
    int sliding_window;          /* 0 = off */
    unsigned char layer_sliding[TLM_MAX_LAYERS];
    int n_layer_types; /* entries given by layer_types (0 = key absent) */

    /* Gemma 4: layer types with their own shapes, K = V, shared K/V, per-layer inputs */
    int head_dim_full;       /* head_dim of the full-attention layers (global_head_dim); 0 = head_dim */
    int n_kv_heads_full;     /* key/value heads of the full-attention layers; 0 = n_kv_heads */
    float rope_proportional; /* "proportional" RoPE of the global-base layers: the fraction of the head_dim / 2
                                frequencies that rotate (the rest have frequency 0); 0 = all (plain RoPE) */
    bool v_norm;             /* RMSNorm of v per head over head_dim, without a weight (Gemma 4) */
    bool k_eq_v;             /* full-attention layers: v is the k projection (before k's norm); no v_proj */
    int n_kv_shared;         /* the last n_kv_shared layers reuse the keys/values of the last earlier layer
                                of their type (no k_proj, v_proj, k_norm of their own) */
    int ple_dim;             /* per-layer inputs (Gemma 4's hidden_size_per_layer_input); 0 = off */
    bool layer_scalar;       /* a learnable scalar per layer multiplying the stream after the layer */
    bool ffn_double_shared;  /* the layers that share K/V have an FFN of 2 * d_ff (use_double_wide_mlp) */

    /* multi-head latent attention (DeepSeek-V2/V3, docs/config.md "Multi-head latent attention"):
     * kv_lora_rank > 0 turns it on in every layer. q = W_qb RMSNorm(W_qa x) (q_lora_rank > 0) or W_q x;
     * [c_kv, k_pe] = W_kva x; [k_nope, v] per head = W_kvb RMSNorm(c_kv); RoPE on q_pe and k_pe only
     * (k_pe one for all heads). The attention runs on heads of head_dim = max(nope + rope, v_head_dim),
     * zero-padded (config_finish sets head_dim and num_key_value_heads = num_attention_heads). */
    int q_lora_rank, kv_lora_rank, qk_nope_dim, qk_rope_dim, v_head_dim;
    bool rope_interleave; /* q_pe, k_pe come in interleaved pairs (2i, 2i+1): de-interleaved before RoPE */
    int n_nextn;          /* DeepSeek-V3's num_nextn_predict_layers: multi-token-prediction layers a checkpoint
                             holds after the last layer; not run (their tensors are skipped on load) */

    /* feed-forward */
    ffn_type ffn;
    bool mlp_bias;

    /* mixture of experts (docs/config.md "Mixture of experts"): n_experts 0 = every FFN dense.
     * Layer l is an MoE layer iff l >= first_k_dense, (l + 1) % sparse_step == 0 and l is not
     * one of mlp_only_layers (config_layer_is_moe); the others keep the dense FFN of d_ff. */
    int n_experts;         /* num_experts: routed experts */
    int n_experts_per_tok; /* num_experts_per_tok: top-k */
    int moe_d_ff;          /* moe_intermediate_size: each expert's hidden width */
    int n_shared_experts;  /* n_shared_experts: one always-on MLP of n_shared * moe_d_ff */
    int shared_d_ff;       /* shared_expert_intermediate_size: the shared experts' width as one MLP (Qwen2-MoE's
                              own size), 0: n_shared * moe_d_ff (config_shared_ff) */
    bool shared_gate;      /* shared_expert_gate: the shared expert's output times sigmoid(g . u), g a learned
                              [1, d] row (Qwen2MoeSparseMoeBlock's shared_expert_gate) */
    bool norm_topk_prob;   /* the k chosen weights renormalised to sum 1 */
    router_scoring scoring;  /* scoring_func */
    int n_group, topk_group; /* group-limited top-k (sigmoid): the best topk_group of n_group groups */
    float routed_scaling_factor; /* multiplies the routed weights (DeepSeek-V3); 1 */
    int first_k_dense;     /* first_k_dense_replace */
    int sparse_step;       /* decoder_sparse_step (1: every layer) */
    unsigned char mlp_only[TLM_MAX_LAYERS]; /* mlp_only_layers as flags */
    int n_mlp_only;        /* entries mlp_only_layers listed */
    /* Gemma 4's MoE block (enable_moe_block): an MoE layer keeps its dense FFN too and adds the
     * experts beside it, F(x) = N_1(MLP(N_in(x))) + N_2(MoE(N_in2(x))) (then the sandwich's output
     * norm); the router reads x itself through a weightless RMSNorm times a learned scale [d] and
     * d^-0.5, and each chosen weight is multiplied by its expert's learned scale (docs/config.md) */
    bool moe_block;

    /* head */
    bool tie_embeddings;
    float final_softcap;

    /* init */
    float init_std;
    bool scale_residual_init;
    /* a Hugging Face checkpoint's quantization_config (convert/families.c): quant_method ("" when none), FP8's
     * fmt and weight_block_size [rows, cols] (0: one scale per tensor), GPTQ's / AWQ's bits and group_size
     * (0: not given); described by info and --explain, refused by the loader but for FP8 (docs/hf-families.md) */
    bool head_dim_default; /* a Hugging Face family's class default head_dim, the file giving none (explain) */
    char quant_method[24];
    char quant_fmt[8];
    int quant_block[2];
    int quant_bits, quant_group;
    /* not a config key: hook_q_input / hook_k_input / hook_v_input one copy of the stream per head
     * (TransformerLens' use_split_qkv_input; tlm_set_split_qkv_input, src/model/hook_points.c) */
    bool split_qkv_heads;
} tlm_config;

/* (reading a config.json of any family: config_parse / config_load, convert/family.h) */
/* Checks sizes and switch combinations; the message names the key and the value. */
int config_validate(const tlm_config *cfg, const char *source);
/* the multi-head latent attention part of config_validate */
int config_validate_mla(const tlm_config *c, const char *source);
/* MLA's derived sizes: head_dim = the padded attention head, num_key_value_heads = num_attention_heads */
void config_mla_finish(tlm_config *c);
/* the mixture-of-experts part of config_validate */
int config_validate_moe(const tlm_config *cfg, const char *source);
/* Serializes as a model_type "tinylm" config.json (every switch written out). malloc'd. */
char *config_to_json(const tlm_config *cfg);
/* Sets every field to the documented default (sizes 0). */
void config_defaults(tlm_config *cfg);

/* derived helpers */
/* What every RMSNorm gain of the model (block norms, final norm, QK-norm) is offset by: 1 for
 * Gemma's (1 + w) norms, whose stored weight starts at 0; else 0. */
static inline float config_norm_offset(const tlm_config *c) { return c->norm == NORM_RMSNORM_1P ? 1.0f : 0.0f; }
static inline bool placement_has_input_norm(norm_placement p) { return p == PLACE_PRE || p == PLACE_SANDWICH; }
static inline bool placement_has_output_norm(norm_placement p) { return p == PLACE_SANDWICH || p == PLACE_OUTPUT; }
static inline bool placement_has_post_norm(norm_placement p) { return p == PLACE_POST || p == PLACE_DEEPNORM; }
/* DeepNorm's alpha = (2N)^(1/4) and beta = (8N)^(-1/4) for a decoder-only model of N layers (the
 * paper's values), unless the config gives them; 1 and 1 for any other placement. */
float config_deepnorm_alpha(const tlm_config *c);
float config_deepnorm_beta(const tlm_config *c);
/* What the residual stream x is multiplied by before a sublayer's output is added to it. */
static inline float config_residual_scale(const tlm_config *c) {
    return c->placement == PLACE_DEEPNORM ? config_deepnorm_alpha(c) : 1.0f;
}

/* ---- the shape of layer l (Gemma 4's layer types; one shape for every layer otherwise) ---- */
/* a full-attention layer (layer type "full_attention"; its RoPE, head dim and kv heads are the full layers') */
static inline bool config_layer_full_attention(const tlm_config *c, int l) { return !c->layer_sliding[l]; }
static inline int config_layer_head_dim(const tlm_config *c, int l) {
    return c->head_dim_full > 0 && config_layer_full_attention(c, l) ? c->head_dim_full : c->head_dim;
}
static inline int config_layer_kv_heads(const tlm_config *c, int l) {
    return c->n_kv_heads_full > 0 && config_layer_full_attention(c, l) ? c->n_kv_heads_full : c->n_kv_heads;
}
/* v is the k projection (K = V) in layer l */
static inline bool config_layer_k_eq_v(const tlm_config *c, int l) { return c->k_eq_v && config_layer_full_attention(c, l); }
/* the first layer that reuses an earlier layer's keys/values (n_layers: none does) */
static inline int config_first_kv_shared(const tlm_config *c) { return c->n_layers - c->n_kv_shared; }
/* Layer types from a repeating pattern: every pattern-th layer (l + 1 a multiple of it) full, the others
 * sliding (Gemma 2: 2, Gemma 3 and 4: 6); pattern 0: every layer full. Sets n_layer_types = n_layers. */
void config_sliding_pattern(tlm_config *c, int pattern);
/* the layer whose keys and values layer l attends over: l itself, or (a shared layer) the last
 * layer before the shared ones with l's type; -1 when there is none (refused by config_validate) */
int config_kv_source(const tlm_config *c, int l);
/* the FFN width of layer l: d_ff, twice that in a layer sharing K/V with use_double_wide_mlp */
static inline int config_layer_ff(const tlm_config *c, int l) {
    return c->ffn_double_shared && l >= config_first_kv_shared(c) ? 2 * c->d_ff : c->d_ff;
}
static inline int config_max_ff(const tlm_config *c) {
    return c->ffn_double_shared && c->n_kv_shared > 0 ? 2 * c->d_ff : c->d_ff;
}
/* the widest q, k (and v) of any layer: H * head_dim, KV * head_dim */
int config_max_q_dim(const tlm_config *c);
int config_max_kv_dim(const tlm_config *c);
#define TLM_MAX_ATTN_WIDTH (1 << 24) /* num_attention_heads x head_dim, at most */
int config_max_head_dim(const tlm_config *c);

/* whether each layer ends in an epilogue after the FFN sublayer: Gemma 4's per-layer input and layer scalar */
static inline bool config_has_layer_epilogue(const tlm_config *c) { return c->layer_scalar || c->ple_dim > 0; }

const char *norm_type_name(norm_type t);
const char *placement_name(norm_placement p);
const char *position_name(position_type p);
const char *qk_norm_name(qk_norm_type q);
const char *ffn_name(ffn_type f);
const char *scoring_name(router_scoring s);

/* multi-head latent attention (every layer) */
static inline bool config_mla(const tlm_config *c) { return c->kv_lora_rank > 0; }
/* q.k's head width (nope + rope) and the padded attention head width */
static inline int config_mla_qk_dim(const tlm_config *c) { return c->qk_nope_dim + c->qk_rope_dim; }
static inline int config_mla_head_dim(const tlm_config *c) {
    return config_mla_qk_dim(c) > c->v_head_dim ? config_mla_qk_dim(c) : c->v_head_dim;
}
/* floats an MLA layer caches per token: the normed c_kv and the rotated k_pe */
static inline int config_mla_cache_dim(const tlm_config *c) { return c->kv_lora_rank + c->qk_rope_dim; }
/* YaRN's mscale: 0.1 m ln(s) + 1 for a factor s > 1, else 1 */
float config_yarn_mscale(float factor, float m);
/* the softmax scale of q.k: head_dim^-0.5 (or query_pre_attn_scalar^-0.5); MLA: (nope + rope)^-0.5,
 * times yarn_mscale(factor, mscale_all_dim)^2 under YaRN with mscale_all_dim set */
float config_attention_scale(const tlm_config *c, int l);
/* the RoPE tables' width: the layer's head_dim (the full layers' with Gemma 4), MLA's qk_rope_head_dim */
int config_rope_dim(const tlm_config *c);

/* whether layer l's FFN is a mixture of experts (else the dense FFN of d_ff) */
static inline bool config_layer_is_moe(const tlm_config *c, int l) {
    return c->n_experts > 0 && l >= c->first_k_dense && (l + 1) % (c->sparse_step > 0 ? c->sparse_step : 1) == 0 &&
           !c->mlp_only[l];
}
/* whether layer l has the dense FFN of d_ff: every layer but an MoE one, and with Gemma 4's MoE
 * block every layer */
/* the shared expert's hidden width (0: none) */
static inline int config_shared_ff(const tlm_config *c) {
    return c->n_shared_experts <= 0 ? 0 : c->shared_d_ff > 0 ? c->shared_d_ff : c->n_shared_experts * c->moe_d_ff;
}
static inline bool config_layer_has_dense(const tlm_config *c, int l) {
    return !config_layer_is_moe(c, l) || c->moe_block;
}
/* MoE layers in the model, and the index of layer l among them (-1: a dense layer) */
int config_moe_layers(const tlm_config *c);
int config_moe_index(const tlm_config *c, int l);
/* whether the router has DeepSeek-V3's e_score_correction_bias (sigmoid scoring) */
static inline bool config_router_has_bias(const tlm_config *c) { return c->scoring == SCORING_SIGMOID; }

#endif
