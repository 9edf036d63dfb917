/* trainer.h — the training loop: data -> forward -> backward (with accumulation) -> clip ->
 * AdamW, periodic validation, metrics, progress, crash-proof checkpoints, exact resume. */
#ifndef TLM_TRAINER_H
#define TLM_TRAINER_H

#include <stdint.h>

#include "train/optim.h"

typedef struct {
    const char *data_path;
    const char *out_dir;
    const char *tokenizer; /* "chars" or "bytes" */
    int steps, batch, seq, accum;
    int eval_every, eval_batches, save_every, log_every;
    uint64_t seed;
    optim_config opt;
    int stop_at;       /* > 0: stop after this step with a checkpoint, as if interrupted */
    int sample_tokens; /* > 0: print a sample of this many tokens at the end */
    int zero1;         /* under mpirun: shard the AdamW moments across the ranks (ZeRO-1) */
    float z_loss;      /* z-loss coefficient: the objective adds z_loss * mean(logsumexp(logits)^2); 0 = off */
    float router_aux;  /* --router-aux-loss-coef (HF's router_aux_loss_coef): the objective adds it times the
                          load-balancing loss of a mixture-of-experts model (acts.moe_aux); 0 = off */
    float router_bias_update; /* --router-bias-update: DeepSeek-V3's auxiliary-loss-free balancing, each step
                                 every e_score_correction_bias += this * sign(mean load - its expert's load); 0 = off */
    int has_bos;       /* --bos-token ID: every training and validation window starts with token bos_token (a
                          BOS); its first target is the window's first text token. 0 = plain windows */
    int bos_token;
    int precision_bf16; /* --precision bf16: mixed precision (model_set_mixed_bf16); a property of the run */
    int log_attn;      /* each step's largest attention logit per head and the QK-norm gains in metrics.jsonl
                          (like zero1 a property of this session, not of the run: allowed with a resume) */
    const char *html;  /* --html FILE: the run's page, rewritten at each evaluation (train_page.h); NULL = none.
                          A property of this session, as log_attn */
} train_options;

/* What a resume may set for its session; the run's own options come from its checkpoint. */
typedef struct {
    int steps;    /* > 0: a new last step (after the saved one, not before the schedule's end) */
    int stop_at;  /* > 0: stop after this step with a checkpoint, as train_options.stop_at */
    int zero1, log_attn;
    const char *html; /* as train_options.html */
} resume_options;

/* Blocks SIGINT and SIGTERM in the calling thread and in every thread it starts afterwards:
 * a run takes them at its next step boundary (saves, exits 130 / 143) instead of being
 * interrupted. Call it before any thread exists (tinylm's main does, for train, before MPI). */
void train_defer_stop_signals(void);

/* A new run: model_config_json is a model_type "tinylm" config. Refuses an out_dir that
 * already holds a run. Returns the process exit code (0 done, 1 error, 130/143 interrupted). */
int train_new(const char *model_config_json, const train_options *o);
/* Continues the run in out_dir from its latest checkpoint, with its saved options; the data
 * file must be the one it was trained on. steps > 0 sets a new last step (it must be after
 * the saved one): a finished run can be extended. The cosine decay still ends at the step
 * the run was first planned for, and the steps past it train at min_lr (as nanoGPT's
 * get_lr past lr_decay_iters). Both train_new and train_resume hold OUT/.lock for the run. */
int train_resume(const char *out_dir, const char *data_path, const resume_options *r);
/* (a last step before the end of the cosine decay is refused: the schedule is the run's
 * first plan) */

/* ---- for tinylm sweep: a planned run against the run directory that may hold it ---- */

/* The FNV-1a hash of a data file's bytes (the data_hash a checkpoint records). 0 or -1 + error. */
int train_data_hash(const char *data_path, uint64_t *hash);
/* Checks a plan before anything is trained: the options' ranges, the tokenizer name, and that
 * the model config parses (its keys and values). 0, or -1 + an error naming the setting. */
int train_check_plan(const char *model_config_json, const train_options *o);
/* Whether out_dir's latest checkpoint is the run train_new(model_config_json, o) would train
 * on data whose hash is data_hash: the same data, every saved option, the same model config.
 * 0: the same run, *step = its steps done, *steps = its last step. 1: it differs, the error
 * names the first difference ("--lr is 0.001 in the run, 0.003 now"). -1: no checkpoint, or
 * it cannot be read (error). */
int train_run_matches(const char *out_dir, const char *model_config_json, const train_options *o, uint64_t data_hash,
                      int *step, int *steps);

#endif
