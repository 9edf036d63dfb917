/* probe.h — record named intermediate tensors of a forward and backward pass.
 *
 *   tlm_probe *p = probe_create();
 *   probe_select(p, "layers.*.attn.probs");          // glob, see docs/probes.md for the names
 *   if (probe_check(p, m, 1)) ...                     // a pattern that matches no name is an error
 *   probe_attach(p, m);
 *   model_forward(m, ...);  model_backward(m, 1);     // selected tensors are copied after each pass
 *   const probe_tensor *t = probe_find(p, "layers.0.attn.probs");
 *   probe_dump(p, "out");                             // out/<name>.npy for every record
 *   probe_detach(m);  probe_free(p);
 *
 * A probe is an observer of the pass (model.h model_observer): it copies each selected tensor
 * when the pass fires its activation point (model/points.c: a probe name and a hook name of one
 * row are one tensor), and the weights' gradients once a backward is done. It only reads: the
 * pass computes exactly the same numbers with or without a probe, in any mode (MODEL_INFER,
 * which keeps one layer's activations, included; a KV cache's pass has no attention maps).
 * Names are produced only while a probe is attached. Patterns are fnmatch(3) globs:
 * `*` matches any run of characters (dots included), `?` one character, `[...]` a class.
 * Every fallible function returns -1 (or NULL) with tlm_error() set. */
#ifndef TLM_PROBE_H
#define TLM_PROBE_H

#include <stddef.h>
#include <stdint.h>

struct tlm_model;

#define PROBE_MAX_DIMS 4

typedef struct {
    char name[128];
    int ndim;
    int64_t shape[PROBE_MAX_DIMS];
    size_t numel;
    float *data; /* owned by the probe; valid until the next record of this name or probe_free */
} probe_tensor;

typedef struct tlm_probe tlm_probe;

tlm_probe *probe_create(void);
void probe_free(tlm_probe *p); /* NULL allowed; does not detach (call probe_detach first) */

/* Adds a name pattern. An empty pattern is an error. */
int probe_select(tlm_probe *p, const char *pattern);
/* 1 when `name` matches a selected pattern. */
int probe_wants(const tlm_probe *p, const char *name);
/* Checks every pattern against the names this model produces (forward names, plus backward
 * names when with_backward); the error names the first pattern that matches nothing. */
int probe_check(const tlm_probe *p, const struct tlm_model *m, int with_backward);

/* attaches p as an observer of m's passes (model_observe; -1 when too many are attached);
 * probe_detach detaches every probe from m */
int probe_attach(tlm_probe *p, struct tlm_model *m);
void probe_detach(struct tlm_model *m);

/* Copies `data` under `name` when the name is selected (a later record of the same name
 * replaces it). For code that wants to record a value of its own. */
int probe_record(tlm_probe *p, const char *name, const float *data, int ndim, const int64_t *shape);

size_t probe_count(const tlm_probe *p);
const probe_tensor *probe_at(const tlm_probe *p, size_t i);
/* The record of `name`, or NULL (no tlm_error: absence is an answer). */
const probe_tensor *probe_find(const tlm_probe *p, const char *name);
/* Forgets the records (keeps the patterns). */
void probe_clear(tlm_probe *p);
/* Writes each record as DIR/<name>.npy (float32), creating DIR. */
int probe_dump(const tlm_probe *p, const char *dir);

/* Calls fn for every probe name the model produces, with its shape for a batch B x T
 * (forward names, then backward names when with_backward). Stops at fn's first non-zero
 * return and returns it. */
typedef int (*probe_name_fn)(void *ctx, const char *name, int ndim, const int64_t *shape);
int probe_list(const struct tlm_model *m, int B, int T, int with_backward, probe_name_fn fn, void *ctx);

#endif
