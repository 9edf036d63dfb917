/* inspect.h — the analyses behind `tinylm inspect`, computed from the probes of one pass:
 * residual-stream norms, sublayer increments, what each norm does to the scale, per-head
 * attention sharpness, the logit lens, the residual stream as a sum of its terms with each
 * term's direct logit attribution, and (inspect_grad) the gradient norms of one training
 * batch. Writers for a terminal table, JSON, CSV and an SVG figure are in inspect_out.c
 * and inspect_svg.c. */
#ifndef TLM_INSPECT_H
#define TLM_INSPECT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct tlm_model;
struct tlm_tokenizer;

typedef struct {
    double at, mean; /* at the chosen position; mean over all positions */
} inspect_stat;

typedef struct {
    char name[96]; /* a probe or tensor name (tensor_info names are < 96) */
    inspect_stat v;
} inspect_value;

typedef struct {
    char name[64]; /* "layers.0.attn_norm", ..., "final_norm" */
    inspect_stat in_rms, out_rms;
} inspect_norm;

typedef struct {
    int layer, head;
    inspect_stat max_logit, entropy; /* pre-softmax logit max over visible keys; entropy in nats */
} inspect_head;

typedef struct {
    char name[64]; /* "embed", "layers.0.attn.out", "layers.0.ffn.out", ... */
    double norm;   /* L2 norm at the chosen position */
    double dla;    /* direct contribution to the predicted token's (pre-soft-cap) logit */
} inspect_term;

typedef struct {
    int T, position, top_k, n_layers, n_heads;
    int *tokens; /* [T] */
    /* residual stream: embed, then after each sublayer (2L+1); increments: attn.out, ffn.out (2L) */
    int n_points;
    inspect_value *points, *incr;
    int n_norms;
    inspect_norm *norms;
    inspect_head *heads; /* [n_layers * n_heads] */
    /* logit lens: row 0 = the embedding, row k = the output of block k-1 (n_layers + 1 rows) */
    int n_lens;
    int *lens_top;         /* [n_lens, top_k] token ids at the position, best first */
    float *lens_top_prob;  /* [n_lens, top_k] */
    float *lens_top_logit; /* [n_lens, top_k] */
    int *lens_grid;        /* [n_lens, T] top-1 id at every position */
    float *lens_grid_prob; /* [n_lens, T] */
    double lens_final_diff; /* max |last lens row - model logits|: 0 when the lens is the model's head */
    double *lens_kl, *lens_kl_at; /* [n_lens] KL(final || lens row) in nats: mean over positions, at the position */
    /* the tuned lens (inspect_run_ex with a lens): the same rows read through its translators */
    int has_tuned;
    int *tuned_top;
    float *tuned_top_prob, *tuned_top_logit;
    int *tuned_grid;
    float *tuned_grid_prob;
    double *tuned_kl, *tuned_kl_at;
    /* the prediction at the position */
    int predicted;
    double predicted_prob, logit, logit_raw; /* logit after / before the final soft-cap */
    /* the residual stream as a sum of terms (only when it is one) */
    int decomp_applies;
    char decomp_reason[160];
    int n_terms;
    inspect_term *terms;
    int has_dla_bias;
    double dla_bias;    /* LayerNorm final-norm bias . unembedding row */
    double dla_sum;     /* sum of the terms' dla (+ bias): equals logit_raw */
    double sum_err_abs; /* max |sum of terms - final residual| at the position */
    double sum_err_rel; /* ||sum - final|| / ||final|| at the position */
    double sum_err_rel_max; /* the same, worst position */
    /* every position (for the HTML report): [rows, T] each */
    float *point_norm_pos;                 /* [n_points, T] L2 norm of the stream */
    float *incr_norm_pos;                  /* [2L, T] L2 norm of each increment */
    float *norm_in_pos, *norm_out_pos;     /* [n_norms, T] RMS in / out */
    float *head_max_pos, *head_ent_pos;    /* [L * H, T] */
    int *pred_top; /* [T, top_k] the model's top tokens at every position (the last lens row); with
                      INSPECT_EVERY_POSITION_TOP, else NULL */
    float *pred_top_prob, *pred_top_logit; /* [T, top_k] */
    /* with INSPECT_KEEP_ATTENTION: each head's causal lower triangle, row i holding keys 0..i, as
     * uint16 (p * 65535, rounded so that each row sums to 65535 exactly); [L * H, T(T+1)/2] */
    uint16_t *attn_q;
    int attn_oom; /* (internal: a head ran out of scratch memory) */
    /* a mixture of experts (n_experts 0: none): per layer (moe_layer[l] 0 for a dense one) the
     * share of the T k routed slots each expert got, the mean entropy (nats) of the router's
     * distribution over the experts (softmax; sigmoid scoring: the scores normalised to sum 1),
     * and the experts each token went to, best first, with their weights. No capacity limit:
     * no token is dropped or overflows. */
    int n_experts, k_experts;
    unsigned char *moe_layer; /* [L] */
    float *moe_load;          /* [L, E] */
    float *moe_entropy;       /* [L] */
    int *moe_experts;         /* [L, T, k] */
    float *moe_weights;       /* [L, T, k] */
} inspect_report;

enum { INSPECT_KEEP_ATTENTION = 1, INSPECT_EVERY_POSITION_TOP = 2, INSPECT_FOR_HTML = 3 };
/* the most attention values (L * H * T(T+1)/2) INSPECT_KEEP_ATTENTION keeps; past it attn_q stays NULL */
#define INSPECT_ATTENTION_LIMIT (4LL << 20)

/* Runs the model on tokens [1, T] and fills the report for `position` (0..T-1) with the top
 * `top_k` tokens of the lens. The model must have no observer attached. With flags
 * (INSPECT_KEEP_ATTENTION, INSPECT_EVERY_POSITION_TOP, or both: INSPECT_FOR_HTML) and a tuned lens (src/probes/lens.h; NULL: none) read beside the logit lens */
/* The name of lens stage k (0 = "embed", k = "layers.<k-1>.resid_post", the stream after block
 * k-1), as the tables, JSON, CSV and `tinylm lens` print it. */
void inspect_stage_name(char *buf, size_t n, int k);

struct tlm_lens;
int inspect_run_ex(struct tlm_model *m, const int *tokens, int T, int position, int top_k, int flags,
                   const struct tlm_lens *lens, inspect_report *r);
void inspect_report_free(inspect_report *r);

typedef struct {
    int B, T;
    float loss;
    int n_layers;
    inspect_value *dres;  /* [2L+1] ||dL/dx|| over the batch at each residual-stream point */
    double *layer_attn, *layer_ffn, *layer_norms, *layer_total; /* [L] parameter-gradient norms */
    double embed, pos_embed, final_norm, lm_head, total;
    int has_pos_embed, has_final_norm, has_lm_head;
    int n_tensors;
    inspect_value *tensors; /* every parameter's gradient norm (.v.at) */
} inspect_grad_report;

/* One training batch: tokens [B, T], targets [B, T]; zeroes the gradients, runs forward and
 * backward, fills the report. */
int inspect_grad(struct tlm_model *m, const int *tokens, const int *targets, int B, int T, inspect_grad_report *r);
void inspect_grad_report_free(inspect_grad_report *r);

/* ---- writers (inspect_out.c, inspect_svg.c) ---- */

/* The text of token `id` following `prev` (-1 at the start), made printable: control bytes and
 * invalid UTF-8 become \n, \t, \xNN escapes. "#id" without a tokenizer. */
void inspect_token_text(const struct tlm_tokenizer *tok, int prev, int id, char *out, size_t n);

int inspect_print_table(FILE *f, const inspect_report *r, const struct tlm_tokenizer *tok);
int inspect_print_csv(FILE *f, const inspect_report *r, const struct tlm_tokenizer *tok);
char *inspect_json(const inspect_report *r, const struct tlm_tokenizer *tok); /* malloc'd */
/* the same as a cJSON object (the caller deletes it), and the grad report's */
struct cJSON *inspect_json_object(const inspect_report *r, const struct tlm_tokenizer *tok);
struct cJSON *inspect_grad_json_object(const inspect_grad_report *r, const int *ids, int n_ids);
int inspect_grad_print_table(FILE *f, const inspect_grad_report *r);
int inspect_grad_print_csv(FILE *f, const inspect_grad_report *r);
/* `ids` are the n_ids tokens of the batch's windows (inputs, then the last target) */
char *inspect_grad_json(const inspect_grad_report *r, const int *ids, int n_ids); /* malloc'd */

/* SVG figures, written atomically: residual norms and increments by layer (log axis) beside
 * the logit-lens grid of layers x positions; for gradients, their norms by layer. */
int inspect_plot_svg(const char *path, const inspect_report *r, const struct tlm_tokenizer *tok);
int inspect_grad_plot_svg(const char *path, const inspect_grad_report *r);

/* The interactive HTML report (inspect_html.c, through src/report): one self-contained page,
 * written atomically. `model` names the model on the page. The forward report needs every
 * per-position array (inspect_run_ex fills them) and, for the attention heatmaps, attn_q. */
int inspect_html(const char *path, const inspect_report *r, const struct tlm_tokenizer *tok, const char *model,
                 const struct tlm_model *m);
int inspect_grad_html(const char *path, const inspect_grad_report *r, const struct tlm_tokenizer *tok, const int *ids,
                      int n_ids, const char *model, const struct tlm_model *m);

#endif
