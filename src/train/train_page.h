/* train_page.h — the live training page of `tinylm train --html FILE` (train_page.c). */
#ifndef TLM_TRAIN_PAGE_H
#define TLM_TRAIN_PAGE_H

/* Writes the page of run directory `run` to `path` (atomically) from its metrics.jsonl: `status`
 * ("training", "finished", "stopped", "failed") in words, `live` 1 while the run trains (the page
 * reloads itself), `steps` the planned last step. 0, or -1 + tlm_error naming `path`. */
int train_page_write(const char *path, const char *metrics_path, const char *run, int steps, const char *status,
                     int live);

#endif
