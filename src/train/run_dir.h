/* run_dir.h — a training run on disk, crash-proof.
 *
 *   OUT/step-0000500/   config.json, model.safetensors, tinylm_tokenizer.json,
 *                       optimizer.safetensors, trainer.json
 *   OUT/latest -> step-0000500      (a symlink, replaced atomically)
 *   OUT/metrics.jsonl
 *
 *   OUT/.lock                        the pid of the process that owns the run (see run_lock)
 *
 * A checkpoint is written into a temporary directory, every file fsynced, the directory
 * renamed into place, and only then is `latest` switched by renaming a new symlink over it.
 * A crash (even kill -9) at any point leaves `latest` naming a complete checkpoint. */
#ifndef TLM_RUN_DIR_H
#define TLM_RUN_DIR_H

#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "train/optim.h"

/* Writes one checkpoint for `step` and points OUT/latest at it; removes older step dirs.
 * trainer_json is the trainer state document (trainer.json). */
int run_save(const char *out_dir, int step, const tlm_model *m, const tlm_tokenizer *tok, const adamw *opt,
             const char *trainer_json);
/* The directory OUT/latest resolves to (malloc'd), or NULL + error when OUT has no checkpoint. */
char *run_latest(const char *out_dir);
/* The lock file of a run directory: a writer holds an exclusive flock on it for its whole run. */
#define RUN_LOCK_FILE ".lock"
/* Makes OUT (if missing) and takes the exclusive lock on OUT/.lock, writing this process's pid
 * into it. Returns the descriptor that holds the lock (closing it, or exiting, releases it),
 * or -1 + an error naming OUT and the pid of the process that holds it. */
int run_lock(const char *out_dir);
/* Removes what interrupted saves leave in OUT (.step-*.tmp-* folders, .latest.tmp): call it
 * with the lock held, when no save can be in progress. Prints each removal; returns the count. */
int run_remove_stale(const char *out_dir);
/* Reads the optimizer moments of a checkpoint directory into opt (shapes must match). */
int run_load_optimizer(const char *ckpt_dir, adamw *opt, size_t n_params);

#endif
