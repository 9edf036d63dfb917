/* moe.h — a mixture-of-experts layer's own buffers (moe.c), which the probes (inspect), the trainer's
 * router statistics and the tests read after a forward in the training layout. Internal to the engine. */
#ifndef TLM_MODEL_MOE_H
#define TLM_MODEL_MOE_H

#include "model.h"

/* for N rows, E experts, k chosen per row, fe = moe_intermediate_size, fs = n_shared * fe
 * (docs/ops.md "Mixture of experts") */
typedef struct {
    float *router_logits;     /* [N, E] */
    float *router_probs;      /* [N, E] softmax, or each expert's sigmoid */
    int *topk_idx;            /* [N, k] the chosen experts, best first (ties: the lower index) */
    float *topk_w;            /* [N, k] their weights in the sum */
    int *slot_of;             /* [N, k] where row n's j-th choice sits in the expert-sorted slots */
    int *slot_row;            /* [N k] the row of each slot; expert e's slots are [off[e], off[e+1]) */
    int *expert_off;          /* [E + 1] (a part of a split batch: its own) */
    float *xs;                /* [N k, d] each slot's input row (u gathered by expert) */
    float *eg, *eu, *eh;      /* [N k, fe] the experts' gate, up, hidden */
    float *ey;                /* [N k, d] the experts' outputs, before their weights */
    float *sg, *su, *sh, *sy; /* the shared expert: [N, fs] x 3, [N, d] */
    float *s_gate;            /* [N] sigmoid(u g^T), the shared expert's gate (shared_gate) */
    float *moe_stats;         /* [B, 2 E]: per sequence, rows sent to each expert and the sum of its
                                 softmax probabilities (the load-balancing loss's counts) */
    /* Gemma 4's MoE block (moe_block), on the FFN sublayer's input x [N, d]: the dense FFN's output
     * mlp_f and its norm dense_n; the router's input router_in (y = rmsnorm(x) * scale * d^-0.5,
     * rstd); the experts' input norm moe_in; their weighted sum moe_f and its norm moe_n */
    float *mlp_f, *moe_f;
    norm_acts dense_n, router_in, moe_in, moe_n;
} moe_acts;

/* layer l's (an MoE layer's, or in the inference layout any layer's when the model has one) */
const moe_acts *moe_layer_acts(const activations *A, int l);

#endif
