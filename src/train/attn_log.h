/* attn_log.h — `tinylm train --log-attn`: per step, the largest |attention logit| of every layer
 * and head (over the step's batch, the visible keys) and the largest |gain| of the QK-norm weights
 * of every layer and head, as extra keys of the step's metrics.jsonl line:
 *   "attn_max": [[layer 0: head 0, head 1, ...], ...]
 *   "qk_gain_max": [[[q gain head 0, k gain head 0], ...], ...]   (only with qk_norm; the gains
 *   the step's forward used, before the optimizer's update)
 * The logits are the engine's scores (scaled by the attention scale, soft-capped when the model
 * caps them), read from the activations the forward keeps for backward: nothing is computed when
 * the option is off (the trainer tests one pointer). Under mpirun: rank 0's rows of the batch. */
#ifndef TLM_ATTN_LOG_H
#define TLM_ATTN_LOG_H

#include <stdio.h>

#include "model/model.h"

typedef struct {
    int L, H;
    float *amax; /* [L * H], reset every step */
    float *gain; /* [L * H * 2]: the QK-norm gains (q, k) the step's forward used */
} attn_log;

attn_log *attn_log_new(const tlm_model *m);
void attn_log_free(attn_log *a);
/* makes m's forwards keep every layer's scores for the log (an observer that needs the maps) */
int attn_log_attach(tlm_model *m);
void attn_log_reset(attn_log *a);
/* after a training-layout forward: fold this pass's per-head max |score| into the step's */
void attn_log_after_forward(attn_log *a, const tlm_model *m);
/* the step's keys, each starting with ", " (inside a JSON object) */
void attn_log_write(const attn_log *a, const tlm_model *m, FILE *f);
/* the largest |gain| of a QK-norm weight over head h's slice (1 + w for rmsnorm_1p) */
float attn_log_qk_gain(const tlm_model *m, int layer, int head, int is_k);

#endif
