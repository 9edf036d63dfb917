/* cmd_train.h — a train command line read without training it (tinylm sweep plans its runs
 * with it, so a run is exactly what `tinylm train` with the same arguments would train). */
#ifndef TLM_CMD_TRAIN_H
#define TLM_CMD_TRAIN_H

#include "train/trainer.h"

/* Parses argv (starting with "train") as a new run: *config_json (malloc'd; the model config
 * before the vocabulary is known) and *o, whose strings point into argv. Returns CLI_CONTINUE,
 * or the exit code after a usage or input error (reported on stderr). */
int cmd_train_plan(int argc, char **argv, char **config_json, train_options *o);

#endif
