/* points.h — the probe side of the activation-point table (points.c).
 *
 * Each row of the table is one tensor of a pass under two names: its TransformerLens name (the
 * hooks: model_point_describe, tlm_hook_info) and its probe names (src/probes, docs/probes.md).
 * A row may carry a few probe names: the tensor itself (layers.0.attn.q), the RMS of each of its
 * rows (layers.0.attn_norm.in_rms, the RMS of the norm's input), and the same tensor under the
 * role it plays in a given norm placement (with Post-Norm, layers.0.resid_mid is also
 * layers.0.attn_norm.out). Probes record them when the row's point fires (run.h PASS_POINT). */
#ifndef TLM_MODEL_POINTS_H
#define TLM_MODEL_POINTS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

enum {
    POINT_PROBE_RMS = 1,    /* sqrt(mean(x^2)) of each d_model-wide row of the point: shape [B, T] */
    POINT_PROBE_MASKED = 2, /* attention scores: keys the layer's mask hides were never written (-inf) */
    POINT_PROBE_MAP = 4,    /* a [B, H, T, T] map: absent while decoding from a KV cache */
};

typedef struct {
    char name[128];
    int ndim;
    int64_t shape[4];
    int flags; /* POINT_PROBE_* */
    int layer; /* the point's layer; -1 for the model's own */
} point_probe;

/* The j-th probe name of point id (of the forward, or with is_grad of the backward: "grad.<name>")
 * for a batch [B, T]: 1 and *out when the config has it, 0 when not, -1 when the row has no j-th. */
int model_point_probe(const tlm_config *c, int id, int j, int is_grad, int B, int T, point_probe *out);

#endif
