/* presets.h — named starting points for `tinylm train --preset NAME`: a model config
 * (model_type "tinylm" JSON) and training settings. */
#ifndef TLM_PRESETS_H
#define TLM_PRESETS_H

#include "train/trainer.h"

typedef struct {
    const char *name;
    const char *about;
    const char *model_json;
    train_options train; /* data_path/out_dir unset */
} preset;

const preset *preset_find(const char *name);
/* for --help: the table */
const preset *preset_at(int i); /* NULL past the end */

#endif
