/* model.h — the engine's model: config -> parameters (one buffer, named views) -> activations
 * (one buffer, laid out again when the batch shape or the mode changes, reallocated only to
 * grow) -> forward / backward. Internal header; the public API is include/tinylm.h. */
#ifndef TLM_MODEL_H
#define TLM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "ops/ops.h"

/* ---- parameters ------------------------------------------------------------------------------ */

typedef struct {
    float *w, *b; /* b: LayerNorm with a bias, and DyT */
    float *a;     /* DyT's alpha [1] */
} norm_params;

typedef struct {
    float *w, *b;        /* w [out, in]; b [out] or NULL */
    const uint16_t *w16; /* w as bf16 (inference with bf16 weights: then w is NULL) */
    const void *wq;      /* w in a ggml block format (ops/quant.h; a GGUF file's): then w, w16 are NULL */
    int wq_type;         /* its ggml type */
} linear_params;

typedef struct {
    norm_params attn_norm, attn_out_norm;
    linear_params q, k, v, o;
    linear_params qkv; /* q, k, v stored back to back: one [(H + 2 KV) hd, d] matrix */
    float *q_norm, *k_norm; /* (k_norm NULL in a layer that shares an earlier layer's keys) */
    /* multi-head latent attention (config_mla): q_a [rq, d], its RMSNorm's gain [rq], q_b [H qk, rq]
     * (without q_lora_rank q [H qk, d] is the q projection above); kv_a [rkv + dr, d], its norm's gain
     * [rkv], kv_b [H (dn + dv), rkv]; o [d, H dv] */
    linear_params q_a, q_b, kv_a, kv_b;
    float *q_a_norm, *kv_a_norm;
    norm_params ffn_norm, ffn_out_norm;
    linear_params gate, up, down;
    linear_params gate_up; /* gated FFNs: gate and up back to back, one [2 f, d] matrix */
    /* a mixture-of-experts FFN (config_layer_is_moe): the router [E, d] (HF: mlp.gate), its
     * selection-only bias [E] (sigmoid scoring), and the experts' matrices back to back: expert
     * e's gate [fe, d], up [fe, d], down [d, fe] at e * moe_expert_stride floats from expert 0's
     * (moe_expert); the shared expert [n_shared * fe] as a dense gated FFN */
    linear_params router;
    float *score_bias;
    linear_params expert_gate, expert_up, expert_down; /* expert 0's */
    linear_params shared_gate, shared_up, shared_down;
    linear_params shared_expert_gate; /* [1, d] (shared_gate: Qwen2-MoE's sigmoid gate on the shared expert) */
    /* Gemma 4's MoE block (moe_block), beside the dense FFN: the dense output's norm (HF
     * post_feedforward_layernorm_1), the experts' input norm (pre_feedforward_layernorm_2) and
     * output norm (post_feedforward_layernorm_2); the router's input scale [d] (router.scale) and
     * each expert's weight scale [E] (router.per_expert_scale) */
    norm_params dense_out_norm, moe_in_norm, moe_out_norm;
    float *router_scale, *expert_scale;
    float *scalar;         /* [1] the layer's output scale (layer_scalar), or NULL */
    /* Gemma 4's per-layer input (ple_dim P): gate [P, d], projection [d, P], its output's norm */
    linear_params ple_gate, ple_proj;
    norm_params ple_norm;
} layer_params;

/* floats from one expert's matrices to the next's (gate, up, down of moe_intermediate_size) */
static inline size_t moe_expert_stride(const tlm_config *c) { return (size_t)3 * c->moe_d_ff * c->d_model; }
/* expert e's view of one of its matrices, from expert 0's (f32 and bf16 views both) */
static inline linear_params moe_expert(const linear_params *first, int e, size_t stride) {
    linear_params p = {0};
    if (first->w) p.w = first->w + (size_t)e * stride;
    if (first->w16) p.w16 = first->w16 + (size_t)e * stride;
    return p;
}

typedef struct {
    float *embed;     /* [V, d] */
    float *pos_embed; /* [max_seq, d] */
    layer_params *layers;
    /* Gemma 4's per-layer inputs: a token table [V, L*P], the projection of the embedding [L*P, d]
     * and its norm's weight [P] */
    float *ple_embed;
    linear_params ple_model_proj;
    float *ple_model_norm;
    norm_params final_norm;
    float *lm_head; /* [V, d]; == embed when tied */
    const uint16_t *embed16, *lm_head16; /* bf16 weights (then embed, lm_head are NULL) */
    const void *embed_q, *lm_head_q;     /* quantized weights (then embed, lm_head are NULL) */
    int embed_q_type, lm_head_q_type;
} model_params;

/* How a tensor is initialised and whether weight decay applies to it. */
typedef enum { TENSOR_MATRIX, TENSOR_RESIDUAL_MATRIX, TENSOR_EMBEDDING, TENSOR_BIAS, TENSOR_NORM } tensor_kind;

typedef struct {
    char name[96];
    int ndim;
    int shape[2];
    size_t offset, numel; /* in floats, into the parameter buffer */
    tensor_kind kind;
    float identity; /* init value of norm weights: 1, or 0 for (1 + w) norms */
    int bf16;       /* stored in the bf16 buffer (model_weights_to_bf16); offset is into it */
    int qtype;      /* stored quantized in wq_mem (a ggml type, ops/quant.h; 0: not): offset in bytes into it */
} tensor_info;

/* What the next forward passes are for. TRAIN (the default) keeps every layer's activations
 * and lays out the backward's scratch. INFER keeps one layer's worth, reused by every layer,
 * no backward scratch, and no [B,H,T,T] scores with a KV cache; INFER_LAST also computes the
 * logits of the last position of each row only (generation). Probes need TRAIN. */
typedef enum { MODEL_TRAIN, MODEL_INFER, MODEL_INFER_LAST } model_mode;

/* ---- activations ------------------------------------------------------------------------------ */

typedef struct {
    float *y, *mean, *rstd; /* output [N,C]; stats [N] (mean only for LayerNorm) */
} norm_acts;

/* What one sublayer (attention or FFN) keeps for backward, whatever its norm placement. */
typedef struct {
    norm_acts in;   /* input norm (pre, sandwich) */
    float *f;       /* the sublayer's output F(.) [BT, d] */
    norm_acts out;  /* output norm (sandwich, output) */
    float *sum;     /* x + F' before the post norm (post) */
    norm_acts post; /* post norm (post) */
} sublayer_acts;

/* A component's own buffers (those no other component, the block or the drivers read) are a struct
 * declared in its file (mla.c's mla_acts, ...), one per layer and one per pass (its backward's
 * scratch and its buffers of the whole model), reached through its slot of `own` (components.h's
 * component_slot). The layout (layout.c) allocates them with the layers and its fragments fill them:
 * a component with buffers of its own adds no field here. */
enum { ACTS_OWN_SLOTS = 8 };

typedef struct {
    sublayer_acts attn_s, ffn_s;
    /* attention internals (what every attention kind writes: latent attention's padded heads too) */
    float *q, *k, *v;         /* projections [BT, H*hd], [BT, KV*hd] (the layer's hd, KV; k, v NULL in a
                                 layer that shares an earlier one's: it reads that layer's kr and vn) */
    float *q_rstd, *k_rstd;   /* QK-norm statistics */
    float *qn, *kn;           /* after QK-norm (alias q, k when off) */
    float *qr, *kr;           /* after RoPE (alias qn, kn when off) */
    float *v_rstd, *vn;       /* Gemma 4's v norm: statistics, v after it (alias v when off) */
    float *dk_shared, *dv_shared; /* training, a layer whose keys/values later layers share: the gradients
                                     they send back to its kr, vn [BT, KV*hd] (summed, then added) */
    float *epilogue_in;           /* the stream after the FFN's residual add, before the layer's epilogue */
    float *scores, *probs;    /* [B, H, T, T], when kept (context_keeps_attention_maps) */
    float *att;               /* attention output before o_proj [BT, H*hd] */
    /* mixed-precision training: the bf16 copies of the products' inputs that the forward rounds and
     * the backward's weight gradients read again (NULL otherwise: the backward rounds its own) —
     * the attention and FFN sublayers' inputs u [BT, d], att [BT, H*hd] (the FFN's hid: ffn.c's) */
    uint16_t *u16[2], *att16;
    void *own[ACTS_OWN_SLOTS]; /* each component's own struct for this layer (NULL: none) */
} layer_acts;

typedef struct {
    int B, T;
    float *res;          /* residual stream [(2L+1), BT, d]: after the embedding and after each sublayer */
    size_t stage;        /* floats from one stage of res (and dres) to the next: the whole batch's BT*d */
    layer_acts *layers;
    norm_acts final;
    float *logits_raw;   /* before the final soft-cap [BT, V] (only with a cap) */
    float *logits;       /* [BT, V] */
    float *probs;        /* softmax [BT, V] */
    float *losses;       /* [BT] */
    float *lse;          /* [BT] logsumexp of each row of logits (the z-loss's) */
    float lse_sq_mean;   /* mean of lse^2 over the rows with a target (the last forward with targets) */
    int *tokens, *targets; /* [BT] */
    int *start;          /* [B] the last forward's left padding (model_forward_padded): row b's real tokens
                            begin at start[b]; NULL when unpadded (a split part: its rows' slice) */
    int *start_mem;      /* [token_capacity] where start points when set */
    int n_counted;
    int has_targets;
    /* backward scratch */
    float *dres;         /* [(2L+1), BT, d] gradient of the residual stream */
    float *dsum, *df, *du, *dfinal;                 /* [BT, d] */
    float *datt, *dq, *dq2, *dk, *dk2, *dv, *dv2;   /* [BT, H*hd] / [BT, KV*hd] (the widest layer's) */
    float *d_epilogue;                                    /* [BT, d] gradient before a layer's scalar */
    float *dlogits;                                  /* [BT, V] */
    float *dlogits_raw;                              /* [BT, V] before the final soft-cap (only with a cap) */
    float moe_aux;       /* the load-balancing loss of the last forward (moe.c; docs/ops.md) */
    float *fused;            /* output of a fused projection (q|k|v or gate|up) when decoding */
    float *attn_scratch;     /* attention_scratch_floats(T) per thread */
    size_t attn_slots;       /* threads attn_scratch has room for */
    float *w_tile;           /* bf16 weights widened a tile at a time (MATMUL_BF16_TILE x widest input) */
    int one_layer;                /* laid out for inference (model_mode): one layer's worth, no backward */
    model_mode mode;         /* the mode, KV-cache use and weight type the layout was made for */
    int kv_layout, w16, wq, product_bf16; /* (product_bf16: the pass's, context.h) */
    int maps;                /* laid out with [B,H,T,T] attention maps */
    int logits_rows;         /* rows of logits computed: B*T, or B (the last position of each row) */
    void *own[ACTS_OWN_SLOTS]; /* each component's own struct for the pass (NULL: none) */
    float *mem;
    size_t capacity, token_capacity; /* floats in mem, ints in tokens/targets */
} activations;

/* ---- the model -------------------------------------------------------------------------------- */

#define MODEL_MAX_OBSERVERS 4 /* (per context) */

/* Config and weights, which passes read and never write; what a pass writes is its context's
 * (context.h). What writes the model (an edit of the weights, the optimizer's step, the
 * precision, a conversion) must not run while a context of it runs. */
typedef struct tlm_model {
    tlm_config cfg;
    tensor_info *tensors;
    int n_tensors;
    size_t n_params; /* floats in the buffer (a tied head is counted once) */
    float *param_mem;
    model_params p;
    void *file_map;    /* param_mem points into this read-only file mapping (model_load_dir_mapped) */
    size_t file_map_len;
    /* the stored dtypes and the product dtype: precision.h */
    uint16_t *stored16;  /* the matrices stored as bf16 (model_weights_to_bf16; param_mem keeps the rest) */
    size_t n_bf16;       /* values in stored16 */
    uint8_t *wq_mem;     /* the matrices kept in ggml block formats (a GGUF file's), tensor by tensor */
    size_t wq_bytes;     /* bytes in wq_mem */
    int file_stored16;   /* the loaded checkpoint stores its matrices as bf16 (set by loaders) */
    int product_bf16;    /* mixed precision (model_set_mixed_bf16): the matrix products on bf16 operands */
    uint16_t *product16; /* with f32 weights and product_bf16: param_mem as bf16 for those products, kept
                            equal to it by whatever writes the weights (model_weights_changed); else NULL */
    /* the default context (context.h): what model_forward and the other model_* passes run in, and
     * what the public tlm_* functions that take a model use */
    struct tlm_context *ctx;
} tlm_model;

/* ---- observers: the one way to watch a pass (hooks.c) ------------------------------------------
 * Python hooks, probes, inspect, the lens and the trainer's attention log attach an observer;
 * the pass derives from the attached ones what it must keep and whether it may split. The
 * observer is the caller's and must outlive its attachment. Every callback may be NULL. */
enum {
    OBSERVE_MAPS = 1,        /* keep every layer's [B,H,T,T] scores and probabilities in acts */
    OBSERVE_WHOLE_BATCH = 2, /* run the pass unsplit (the whole batch's GEMMs, as one rounding) */
};
typedef struct model_observer {
    unsigned needs; /* OBSERVE_*; a callback below adds what it implies */
    /* at each activation point (points.c's id) while the pass runs: forward, data may be
     * rewritten in place; backward, data is the gradient there. Non-zero fails the pass (the
     * error names the point). Implies MAPS and WHOLE_BATCH (the hooks also the training layout). */
    int (*at_point)(void *user, const struct tlm_context *ctx, int id, float *data, int B, int T, int is_grad);
    /* after the embedding (layer -1) and after each layer l of a forward, while that layer's
     * activations are there (MODEL_INFER keeps one layer's). Non-zero stops the pass. Implies
     * MAPS and WHOLE_BATCH. */
    int (*after_layer)(void *user, const struct tlm_context *ctx, int layer);
    /* when a forward (is_backward 0) or backward (1) has finished, everything it computed in
     * acts / grad_mem. Non-zero fails the pass. Implies MAPS. */
    int (*after_pass)(void *user, const struct tlm_context *ctx, int is_backward);
    void *user;
} model_observer;
/* attaches o to the model's default context (again: nothing); -1 with tlm_error when
 * MODEL_MAX_OBSERVERS are attached. Another context: context_observe (context.h). */
int model_observe(tlm_model *m, const model_observer *o);
void model_unobserve(tlm_model *m, const model_observer *o);

/* The tensor table of a config without allocating parameters (for `tinylm info` on large
 * configs). malloc'd; NULL + tlm_error on failure. */
tensor_info *config_tensor_table(const tlm_config *cfg, int *n_tensors, size_t *n_floats);
/* Builds the tensor table and the parameter buffer (zeroed). */
tlm_model *model_create(const tlm_config *cfg);
void model_free(tlm_model *m);
/* normal(0, std) matrices, scaled residual projections, zero biases, identity norms */
void model_init_weights(tlm_model *m, uint64_t seed);
/* That init, a tensor's values at a time, in two parts so that threads may share the costly one
 * (gguf_export_init_file makes a model larger than memory so): the generator's draws, taken in
 * table order, tensor_init_draws(t) per value (2 for a normal one: rng_normal's, else 0), and the
 * values made of them (u: n * tensor_init_draws(t) draws; the same floats as model_init_weights) */
int tensor_init_draws(const tensor_info *t);
void tensor_init_from_draws(const tlm_config *c, const tensor_info *t, const uint64_t *u, float *x, size_t n);
/* the default context's gradients (context.h context_alloc_grads, context_zero_grads) */
int model_alloc_grads(tlm_model *m);
/* points `views` (its layers array allocated by the caller) at the tensors of a buffer laid out
 * as the parameters are */
void model_bind_params(const tlm_model *m, model_params *views, float *base);
void model_zero_grads(tlm_model *m);
const tensor_info *model_find_tensor(const tlm_model *m, const char *name);

/* Floats the activations of a forward over [B, T] take in `mode` (f32 weights, no KV cache,
 * omp_get_max_threads() threads): the buffer model_forward lays out, computed from the config
 * alone (for `tinylm info`); 0 when out of memory. */
size_t model_activation_floats(const tlm_config *cfg, model_mode mode, int B, int T);
/* Forward over tokens [B,T]; targets [B,T] (may be NULL: no loss). Returns 0 and the mean loss
 * in *loss (when targets given), or -1 when the shape is unsupported. Logits are in m->ctx->acts.logits. */
int model_forward(tlm_model *m, const int *tokens, const int *targets, int B, int T, float *loss);
/* The same over left-padded rows: start [B] (NULL: none) the index of each row's first real token,
 * 0 <= start[b] < T. The pads before it are seen by no real query (a pad query sees itself only),
 * and positions (RoPE, learned) count from it (padded_position); the backward of this forward
 * follows the same rule. Right padding needs nothing (attention is causal): give the pads a
 * negative target. Not with a KV cache. */
int model_forward_padded(tlm_model *m, const int *tokens, const int *targets, const int *start, int B, int T,
                         float *loss);
/* Backward of the last forward (which had targets); gradients accumulate into m->ctx->g scaled by
 * dloss (1 for one batch; 1/k for k accumulated micro-batches). The loss differentiated is the
 * mean cross-entropy plus m->ctx->z_loss * mean(logsumexp^2) (acts.lse_sq_mean; forward's *loss is
 * the cross-entropy alone). */
int model_backward(tlm_model *m, float dloss);
/* The same, and *grad_norm = the norm of the whole gradient afterwards (all of m->ctx->grad_mem, as
 * grad_global_norm computes it, bit for bit) when the pass could take it on the way (a batch split
 * across the threads sums its parts' gradients piece by piece), else -1 */
int model_backward_norm(tlm_model *m, float dloss, double *grad_norm);
/* Backward of the last forward (with or without targets) from a given gradient of the logits
 * [B, T, V] instead of the loss's (hooks: gradients of a chosen metric). */
int model_backward_from_logits(tlm_model *m, const float *dlogits);

/* Sets what the following forwards of the default context are for (see model_mode); the
 * activations are laid out again at the next forward. */
void model_set_mode(tlm_model *m, model_mode mode);
/* The logits of the last position of the default context's last forward (of its last row) [V] */
const float *model_last_logits(const tlm_model *m);
/* Inference with bf16 weights: every matrix (embedding, projections, head) is rounded to bf16
 * once and kept only as bf16 (half the bytes per token); norms, biases and learned positions
 * stay f32. Training, probes and export need f32 weights and refuse afterwards. */
int model_weights_to_bf16(tlm_model *m);
/* whether model_weights_to_bf16 keeps tensor t as bf16: the matrices (token embedding,
 * projections, head), not the learned positions (added, not multiplied) */
int tensor_kept_as_bf16(const tensor_info *t);
/* Where each tensor of the table is kept, for a model built from a file whose matrices are not
 * all f32 (gguf_load.c): storage[i] is WQ_F32 (param_mem), WQ_BF16 (stored16) or a block format
 * (wq_mem; 2-D tensors only), one per tensor of config_tensor_table's order. Lays the three
 * buffers out (zeroed) and binds the views; the loader then fills each tensor where
 * model_tensor_data says. NULL + tlm_error. */
tlm_model *model_create_stored(const tlm_config *cfg, const int *storage);
/* where tensor i lies (f32, bf16 or block data) and its bytes */
void *model_tensor_data(const tlm_model *m, int i, size_t *bytes);
/* rows [row0, row0 + rows) of tensor i (a vector: row 0, rows 1) as f32 into out, whatever it
 * is kept in (f32, bf16, a block format: the values it encodes) */
void model_tensor_f32(const tlm_model *m, int i, int64_t row0, int64_t rows, float *out);
/* the LM head's row of `token` [d] as f32 (the embedding's when tied) */
void model_head_row(const tlm_model *m, int token, float *out);
/* A new model with m's config and every tensor as f32 (the values bf16 or quantized weights
 * encode): for export to f32 formats and for training from a GGUF file. NULL + tlm_error. */
tlm_model *model_f32_copy(const tlm_model *m);
/* Mixed precision, for training and inference: the matrix products of every linear layer and
 * the head over many rows (forward, and the backward's input and weight gradients) run on bf16
 * copies of their operands, summed in f32 (gemm_bf16); the parameters, gradients, optimizer
 * state, norms and their statistics, softmax, the loss and every reduction stay f32, and so do
 * the few-row products of decoding. With f32 weights the products read a bf16 copy of them
 * (product16), made here and again by model_weights_changed after every write of the weights
 * (a pass never writes it: contexts of the model may run at once); with bf16 weights
 * (model_weights_to_bf16) the products use them directly. Off by default (the products in f32:
 * the reference numerics); on 0 turns it off. Returns 1 when on, 0 when off, and 0 with *why set
 * when this CPU (or the kernels' cap, or the GEMM backend) has no bf16 product path: the model
 * then computes in f32. -1 + tlm_error when out of memory. */
int model_set_mixed_bf16(tlm_model *m, int on, const char **why);
/* To be called after writing param_mem while mixed precision is on (an edit, an optimizer step
 * that did not write the copy itself, a gather of shards): product16 = bf16(param_mem) and the
 * linear layers' w16 pointed into it (nothing when there is no copy). Not while a pass runs. */
void model_weights_changed(tlm_model *m);

/* Model FLOPs of one token of training (forward + backward) at sequence length T: 6 per
 * matrix parameter (the head included, the embedding lookup not) plus attention's
 * 6 * 2 * L * T * H * hd for QK^T and PV over all T keys (the PaLM appendix formula, which
 * counts the masked half too) */
double model_train_flops_per_token(const tlm_config *c, int T);
/* Bytes the weights take in memory */
size_t model_weight_bytes(const tlm_model *m);
/* the types the matrices are kept in, "f32", "bf16", "Q4_K+Q6_K", ... (into buf) */
const char *model_matrix_types(const tlm_model *m, char *buf, size_t cap);
/* Bytes of weights one decoding step reads: all of them but the rows of the embedding table
 * it does not look up (the whole table when it is also the head) and the learned positions */
size_t model_decode_bytes(const tlm_model *m);

/* Pieces of the block shared by the full forward, the decode step and the probes: the norm of the config's type, the attention spec and RoPE tables of layer l,
 * the QK-norm row shape, the FFN activation, the embedding scale. */
void model_norm_forward(const tlm_config *c, float *y, const norm_acts *a, const norm_params *p, const float *x, int N);
/* dx = dadd (NULL: none; dx: accumulate) + d(norm)/dx . dy; the norm's parameter gradients += into g */
void model_norm_backward(const tlm_config *c, float *dx, const float *dadd, norm_params *g, const float *dy,
                         const norm_acts *a, const norm_params *p, const float *x, int N);
attention_spec model_layer_attention(const tlm_config *c, int l);
void model_qk_norm_shape(const tlm_config *c, int l, int N, int n_heads, int *rows, int *cols);
activation model_ffn_activation(const tlm_config *c);
/* (the head: context.h context_head_forward; the RoPE tables: context_layer_rope) */
float model_embed_scale(const tlm_config *c);

/* ---- the engine's rules, for every caller (probes, inspect, the lens, the log, Python) ----- */

/* whether the query at position `query` of layer l sees the key at `key` (causal, the layer's
 * sliding window): attention_key_visible with the layer's window */
int model_key_visible(const tlm_config *c, int l, int query, int key);
/* the gain a norm weight w applies: w, or 1 + w for Gemma's (1 + w) RMSNorm */
float model_norm_gain(const tlm_config *c, float w);
/* stage i of the residual stream [BT, d] (0 the embedding, 2l+1 after layer l's attention,
 * 2l+2 after its FFN): every stage is kept for training; inference alternates two slots */
float *model_residual(const activations *A, int stage);
/* the backward's gradient at stage i (NULL in an inference layout) */
float *model_residual_grad(const activations *A, int stage);

/* Points param_mem at `params` (n_params floats laid out as the tensor table says), which
 * lives in the read-only file mapping base[0..len) the model now owns, and frees the buffer
 * it had. For inference: nothing may write the parameters afterwards. */
void model_use_mapped_params(tlm_model *m, float *params, void *base, size_t len);

/* ---- activation points (points.c): the one table of named tensors of a pass ----------------- */

/* Point kinds of one layer, then the model's own (the embedding, the final norm). Which exist
 * depends on the config (model_point_describe). */
enum {
    PT_RESID_PRE,
    /* the attention's input stream, and its copies for q, k, v (hook_points.c: made only when observed) */
    PT_ATTN_IN, PT_Q_INPUT, PT_K_INPUT, PT_V_INPUT,
    PT_LN1_SCALE, PT_LN1_NORMALIZED, /* the attention sublayer's input norm (pre, sandwich) */
    PT_Q, PT_K, PT_V, PT_Q_NORMED, PT_K_NORMED, PT_ROT_Q, PT_ROT_K, PT_ATTN_SCORES, PT_PATTERN, PT_Z,
    PT_RESULT, /* each head's output through its slice of W_O (hook_points.c, only when observed) */
    PT_ATTN_RAW, PT_LN1_OUT_SCALE, PT_ATTN_OUT, PT_ATTN_SUM, PT_LN1_POST_SCALE, PT_RESID_MID,
    PT_MLP_IN, /* the FFN's input stream (hook_points.c, only when observed) */
    PT_LN2_SCALE, PT_LN2_NORMALIZED, PT_MLP_PRE, PT_MLP_PRE_LINEAR, PT_MLP_POST,
    PT_MLP_RAW, PT_LN2_OUT_SCALE, PT_MLP_OUT, PT_MLP_SUM, PT_LN2_POST_SCALE, PT_RESID_POST,
    /* a mixture-of-experts layer's router and experts (docs/python.md) */
    PT_ROUTER_LOGITS, PT_EXPERT_IDS, PT_EXPERT_WEIGHTS, PT_EXPERT_OUT,
    /* multi-head latent attention's compressed vectors before and after their RMSNorms (mla.c) */
    PT_Q_A, PT_Q_A_NORMED, PT_KV_A, PT_KV_A_NORMED,
    PT_COUNT, /* per layer */
    PT_EMBED = PT_COUNT, PT_FINAL_SCALE, PT_FINAL_NORMALIZED, PT_LOGITS /* (layer -1) */
};
/* ids: 0 the embedding, 1 + l * PT_COUNT + kind for layer l, then the final norm's two, the logits */
static inline int model_point_id(const tlm_config *c, int layer, int kind) {
    if (kind == PT_EMBED) return 0;
    if (kind > PT_EMBED) return 1 + c->n_layers * PT_COUNT + kind - PT_FINAL_SCALE;
    return 1 + layer * PT_COUNT + kind;
}
int model_point_count(const tlm_config *c);
/* model_point_id's inverse: the layer (-1 for the model's own points) and kind of id; 0 when id is
 * out of range (points.c) */
int model_point_of(const tlm_config *c, int id, int *layer, int *kind);
/* name, shape [B,T,...] and TLM_HOOK_* flags of point id; the number of dimensions, 0 when the
 * config has no such point. name NULL: not written (a hook's firing needs the shape alone) */
int model_point_describe(const tlm_config *c, int id, int B, int T, char *name, size_t cap, int64_t shape[5],
                         int *flags);
/* the probe names of the same points: points.h */

/* The parameter pointer of tensor i (for optimizers, loaders, probes); its gradient: context.h
 * model_grad. */
static inline float *model_param(const tlm_model *m, int i) { return m->param_mem + m->tensors[i].offset; }

#endif
