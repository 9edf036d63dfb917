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
 * The model keeps every intermediate value in m->acts, so a probe reads them once a pass is
 * done, as an observer with an after_pass callback (model.h model_observer), instead of
 * hooking inside it: the pass computes exactly the same numbers with or without a probe.
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

/* What the attached probe's hook calls after model_forward / model_backward: records every
 * selected forward (backward) tensor of the pass that just finished. */
int probe_after_forward(tlm_probe *p, const struct tlm_model *m);
int probe_after_backward(tlm_probe *p, const struct tlm_model *m);
/* The same one part of the forward at a time, from an observer's after_layer (model.h): layer -1
 * the embedding, 0..L-1 each layer right after it ran, L the final norm and logits (after the
 * pass). Works in MODEL_INFER too, which keeps one layer's activations: the probe keeps the
 * input of the next layer itself. Parts must come in order, starting at -1. */
int probe_after_layer(tlm_probe *p, const struct tlm_model *m, int layer);

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
