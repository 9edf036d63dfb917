/* compare.h — two runs of one architecture side by side (`tinylm compare`, docs/compare.md).
 *
 * A run is every forward activation point of a model on one sequence, in pass order, copied out
 * as the pass fires it (the points of src/model/points.c under their TransformerLens names, plus
 * "logits"), or the same names read from an .npz of reference activations. Two runs are
 * compared point by point (max |Δ|, max |Δ| relative to the reference's largest |value|, cosine)
 * and at the output (KL(A || B) over positions, top-1 agreement); the first point whose relative
 * Δ exceeds the tolerance is where they diverge. The convention search then applies single
 * changes to one side — the conventions that conversions get wrong — reruns it, and reports the
 * change after which every point is within the tolerance.
 *
 * Conventions the engine has a switch for (the RMSNorm offset, norm placement, soft-caps, the
 * tied head, QK-norm per head or over all heads) are changed in the config of an f32 copy of the
 * model; RoPE pairs vs halves permutes the copy's q/k rows (llama2c_load's permutation); the two
 * the engine has no switch for — eps outside the square root, statistics rounded to bf16 — are
 * a compare-only inference variant: an observer recomputes every norm's output (and scale) from
 * its input as the pass fires it, and the pass goes on from the recomputed values. */
#ifndef TLM_PROBES_COMPARE_H
#define TLM_PROBES_COMPARE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct tlm_model;
struct tlm_npz;

#define CMP_NAME 96

typedef struct {
    char name[CMP_NAME];
    int ndim;
    int64_t shape[5];
    int flags; /* TLM_HOOK_*: MASKED (hidden keys hold -inf), RSTD (stored as the scale, 1/rstd) */
    int layer; /* -1: the model's own */
    size_t numel;
    float *data;
} cmp_tensor;

typedef struct {
    int n, cap;
    cmp_tensor *t; /* in pass order */
} cmp_run;

/* norm variants the engine has no switch for (compare-only, inference) */
enum {
    CMP_NORM_EPS_OUTSIDE = 1, /* x / (sqrt(mean(x^2)) + eps) (LayerNorm: sqrt(var) + eps) */
    CMP_NORM_STATS_BF16 = 2,  /* v = bf16(mean(x^2)), r = bf16(1 / sqrt(bf16(v + eps))) */
};

/* Runs m (in inference mode) on tokens [1, T] and copies every forward point out. The scale
 * points (ln1.hook_scale, ...) are stored as TransformerLens' scale, sqrt(mean(x^2) + eps): the
 * reciprocal of the engine's rstd. norm_variant: 0 or one CMP_NORM_*. -1 + tlm_error. */
int cmp_run_model(struct tlm_model *m, const int *tokens, int T, unsigned norm_variant, cmp_run *out);
const cmp_tensor *cmp_run_find(const cmp_run *r, const char *name);
void cmp_run_free(cmp_run *r);

/* The arrays of an .npz (formats/npz.h) under the names of `model`'s run, in its order, each
 * with the model's shape: the file's shape must be the same, or the same without the leading
 * batch dimension of 1 (else -1 + tlm_error naming the key and both shapes). Masked entries of
 * the attention scores (keys the model's mask hides) are set to -inf. Names of the model's run
 * the file lacks go to *missing, keys of the file that are no point of the model (other than
 * "tokens") to *unknown (malloc'd arrays of names; counts in *n_missing, *n_unknown). */
/* tlm_npz_want (formats/npz.h) for the .npz `label` of reference activations of run `model`: a
 * key naming a point of the run is read when its header's dtype and shape fit the point (else
 * refused, before it is inflated), every other key is listed without its data. */
typedef struct {
    const cmp_run *model;
    const char *label;
} cmp_npz_ask;
struct tlm_npy;
int cmp_npz_want(void *ctx, const char *key, const struct tlm_npy *header, const char *where);

int cmp_run_npz(const struct tlm_npz *npz, const char *label, const cmp_run *model, const struct tlm_model *m, cmp_run *out,
                char (**missing)[CMP_NAME], int *n_missing, char (**unknown)[CMP_NAME], int *n_unknown);

typedef struct {
    char name[CMP_NAME];
    int ndim;
    int64_t shape[5];
    int layer;             /* -1: the model's own (hook_embed, ln_final, logits) */
    double max_abs, max_rel, cosine, ref_max;
    int pos;               /* token position of the largest |Δ| (-1: no entry differs) */
    size_t mask_mismatch;  /* entries hidden (-inf) on one side only */
    size_t nonfinite;      /* entries NaN or infinite on a side (not masked) */
    int diverged;          /* max_rel > tol, or a mismatch above */
} cmp_point;

typedef struct {
    int n;
    cmp_point *p;           /* the points both runs have, in A's order */
    int first;              /* index of the first diverged point, -1: none */
    double worst_rel;       /* the largest max_rel */
    int n_only_a, n_only_b; /* points one run has and the other does not */
    char (*only_a)[CMP_NAME], (*only_b)[CMP_NAME];
    int has_output;         /* both have "logits" */
    double kl_mean, kl_max; /* KL(A || B) of the next-token distributions, nats */
    int kl_max_pos;
    int top1_same, top1_n;  /* positions whose argmax agrees, of top1_n */
    double tol;
    int ref_b;              /* the relative Δ is relative to B's values (B is the reference) */
} cmp_result;

/* Compares run a with run b; ref_b: B is the reference (its |values| scale the relative Δ).
 * -1 + tlm_error when a shape of a point differs (naming it) or out of memory. */
int cmp_compare(const cmp_run *a, const cmp_run *b, int ref_b, double tol, cmp_result *out);
void cmp_result_free(cmp_result *r);

/* ---- the convention search ------------------------------------------------------------------ */

#define CMP_MAX_TRIALS 16

typedef struct {
    char id[32];      /* norm_offset, norm_eps_outside, norm_stats_bf16, rope_pairs_to_halves, ... */
    char change[200]; /* the change made to the candidate */
    char cause[520];  /* the convention the two sides differ in, when it made them match */
    int tried;        /* 0: it does not apply to this model (note says why) */
    char note[200];
    int matched;      /* every point within the tolerance after the change */
    char first[CMP_NAME]; /* the first divergence after the change ("" none) */
    double first_rel, worst_rel;
} cmp_trial;

typedef struct {
    int n;
    cmp_trial t[CMP_MAX_TRIALS];
    int cause;     /* the first trial that matched, -1 none */
    int n_matched;
    char cand[8], ref[8]; /* "A" / "B": which side was changed, which it was made to match */
} cmp_search;

/* Applies each single convention change to `cand`, reruns it on tokens and compares it with
 * ref_run (the other side's run). ref_model: the other side's model (its config gives soft-cap
 * values and the head to untie with), NULL when the other side is a file. cand_is_a: the
 * candidate is A (the other side a file), else B. -1 + tlm_error on failure to run. */
int cmp_search_conventions(struct tlm_model *cand, const struct tlm_model *ref_model, const cmp_run *ref_run,
                           int cand_is_a, const int *tokens, int T, double tol, cmp_search *out);

/* ---- the report (compare_out.c) ------------------------------------------------------------- */

typedef struct {
    const char *a_path, *b_path;
    char a_desc[160], b_desc[160]; /* "llama, f32", ".npz, 52 arrays" */
    int b_is_file;
    const int *tokens;
    int T;
    const cmp_result *res;
    const cmp_search *search; /* NULL: not run */
    const char (*missing)[CMP_NAME];  /* points of A the file lacks */
    int n_missing;
    const char (*unknown)[CMP_NAME];  /* keys of the file that are no point of A */
    int n_unknown;
    char note[400];           /* a remark on the result ("" none) */
    const char *config_a, *config_b; /* both configs as the tinylm format writes them (NULL: B is a file) */
    char factor[600];   /* the first divergence is an exact constant factor: what it is and what gives one ("") */
    char one_side[600]; /* causes read off the points one side has and the other lacks ("") */
} cmp_report;

/* 1 when run b's point `name` is k times run a's exactly (every finite entry within 1e-5 of the largest |b|,
 * k not 1 within 1e-5; masked entries skipped) and *k set; else 0 */
int cmp_constant_factor(const cmp_run *a, const cmp_run *b, const char *name, double *k);

/* the text report (stdout of tinylm compare) */
void cmp_print(FILE *f, const cmp_report *r);
/* the report as JSON / as a self-contained HTML page (no script; every string escaped), each
 * written atomically. -1 + tlm_error naming the path. */
int cmp_write_json(const char *path, const cmp_report *r);
int cmp_write_html(const char *path, const cmp_report *r);

#endif
