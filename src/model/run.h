/* run.h — the run state of a pass, apart from the model it runs and apart from the drivers that
 * run it: what every component (attention.c, mla.c, ffn.c, moe.c, ple.c, norm.c, linear.c) and the
 * block (block.c) read and write while a pass or a decode step runs.
 *
 * A pass reads the model (config and weights) and runs in a context (context.h: the activations,
 * the RoPE tables, an attached KV cache, the observers); everything one pass writes goes through a
 * pass_ctx: the rows of activations it runs over, where its weight gradients go, and whether
 * observers watch it. A batch split across the threads (split.c) gives each thread its own
 * pass_ctx over its rows and its own gradient view: no thread copies or writes the model itself.
 * The decode step's state is a step_ctx. The points' helpers are hooks.c's, which calls no
 * component: the dependencies go drivers (pass.c, decode.c, split.c, layout.c, params.c) -> block
 * -> components -> this state and the ops (scripts/include_graph.py lists any circle).
 * Internal to src/model. */
#ifndef TLM_MODEL_RUN_H
#define TLM_MODEL_RUN_H

#include "context.h"
#include "precision.h"
#include "walk.h"

typedef struct pass_ctx {
    const tlm_model *m; /* config, weights (m->p) */
    tlm_context *run;   /* the context the pass runs in: RoPE tables, run->kv, observers, hooks */
    activations *A;     /* the rows this pass runs over: the context's whole batch, or a part's */
    model_params *g;    /* weight gradients (added to): the context's, or a part's own */
    int observed;        /* an observer takes activation points (model_observer.at_point) */
    int failed;         /* the first point whose observer failed, + 1 (later points are skipped) */
    float aux_scale;    /* backward: what the load-balancing loss's gradient at the router's probability
                           p_e is, divided by F_e (router_aux * dloss * E / R; 0 = off) */
    const float *copy16_of; /* forward, mixed-precision training: the activation whose producer (a norm,
                             the activation function) has just written its bf16 copy into the layer's
                             kept one (layer_acts u16, ffn.c's hid16), so that its products need not; else NULL */
} pass_ctx;

/* an unsplit pass over the context's activations and the model's gradients */
pass_ctx pass_whole(tlm_context *ctx);

/* fires activation point `id` (model_point_id) at every observer that takes points: forward,
 * data may be rewritten in place and the pass continues from it; backward, data is the
 * gradient there. One pointer test when nothing watches. */
void pass_fire(pass_ctx *x, int id, float *data, int is_grad);
#ifdef TLM_NO_PROBE_HOOKS /* (the build without hooks of bench/probe_overhead.sh) */
#define PASS_POINT(x, id, data, is_grad) ((void)(x), (void)(id), (void)(data), (void)(is_grad))
#else
#define PASS_POINT(x, id, data, is_grad) \
    do { if ((x)->observed) pass_fire((x), (id), (data), (is_grad)); } while (0)
#endif
/* after a pass: -1 naming the point whose observer failed */
int pass_check_points(const pass_ctx *x);

/* when the pattern hook of layer l may have rewritten probs: att = probs @ v again (hooks.c) */
void model_hook_attention_from_probs(const pass_ctx *x, int l, float *att, const float *probs, const float *v);

/* every observer's after_layer, in attach order; non-zero stops the pass */
int pass_after_layer(const pass_ctx *x, int layer);

/* ---- hooks.c's side of it ---------------------------------------------------------------------- */

/* whether a hook or the capture asks for point id (forward or backward) */
int pass_point_wanted(const pass_ctx *x, int id, int is_grad);
/* the capture's forward destination of point id when the hooks are the pass's only observer, else NULL */
float *pass_capture_of(const pass_ctx *x, int id);
/* after firing point id forward: whether a hook may have rewritten it (it was allowed to, and did
 * not say it left it unchanged) */
int pass_point_rewritten(const pass_ctx *x, int id);
/* the hooks' side memory: at least `floats` floats (grown between passes only: the first call of
 * a pass asks for the whole pass's), NULL with tlm_error when out of memory */
float *pass_hook_memory(pass_ctx *x, size_t floats);
/* per-layer flags of the side points (what the forward made), n bytes, zeroed when first made */
unsigned char *pass_hook_flags(pass_ctx *x, int n);

/* ---- the one-token decode step (decode.c): each component's step beside its forward -------------
 * Run by every thread of kv_decode_step's one parallel region: each product's output rows shared
 * out (step_share), a barrier after each, the small ops on each thread's own copy of the row. */

struct kv_cache;
struct step_private;
typedef struct step_ctx {
    const tlm_model *m;
    const tlm_context *run; /* (its RoPE tables) */
    struct kv_cache *c;     /* the cache, and the step's buffers laid out with it (kv_cache.h) */
    int id, nt, pos, token; /* this thread, the team's size, the token's position, the token */
    struct step_private *o; /* this thread's own buffers */
} step_ctx;

/* this thread's equal share [lo, hi) of n */
static inline void step_share(int n, const step_ctx *s, int *lo, int *hi) {
    *lo = (int)((long long)n * s->id / s->nt);
    *hi = (int)((long long)n * (s->id + 1) / s->nt);
}

/* the product dtype of the pass x runs (precision.h; 1: bf16), what every product site asks */
static inline int pass_product_bf16(const pass_ctx *x) { return x->run->product_bf16; }

/* ---- a sublayer's component: what the block (block.c) runs for it ------------------------------- */

typedef enum { SUB_ATTN, SUB_FFN } sublayer_kind;

/* Its forward over rows (f [N,d] from the sublayer's input u [N,d]; x_in: the stream before the
 * input norm, which Gemma 4's MoE block reads too), its backward (du set; the weight gradients into
 * x->g), the gradient at the stream when F reads it (NULL: F reads only u) and its one-token decode
 * step (f [d] shared, from the thread's u [d]; NULL: the step does not run it and a model with it
 * decodes through the full pass with the cache). Beside them its two fragments: its tensors of
 * layer l in the parameter walk (params.c walks them in the block's order), and its activation
 * buffers (layout.c runs every component's `layout` for every layer, block_components' order; the
 * fragment lays out what the layer's kind needs, and in the inference layout at layer 0 what any
 * layer's does) and its backward scratch (`scratch`: once a layout, on b, the backward's arena,
 * which hands out NULLs in the inference layout; a, the layout's own). The buffers that only the
 * component reads are fields of its own structs (declared in its file), not of layer_acts. Each
 * component file defines its table. */
typedef struct sublayer_ops {
    void (*forward)(pass_ctx *x, int l, const float *x_in, const float *u, float *f);
    void (*backward)(pass_ctx *x, int l, const float *u, const float *df, float *du);
    void (*backward_x)(pass_ctx *x, int l, const float *x_in, float *dx); /* dx += */
    void (*step)(const step_ctx *s, int l, const float *u, float *f);
    void (*params)(param_walk *w, layer_params *L, int l);
    void (*layout)(layout_ctx *lc, arena *a, layer_acts *L, int l);
    void (*scratch)(const layout_ctx *lc, arena *a, arena *b, activations *A);
    /* bytes of its own structs (0: none), the one of each layer (layer_acts.own) and the pass's
     * (activations.own), which the layout allocates and its two fragments fill */
    size_t layer_acts_size, pass_acts_size;
} sublayer_ops;

#endif
