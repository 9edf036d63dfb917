/* fuzz_config.c — libFuzzer target: the input bytes are a config.json (any model_type).
 * When it parses, the config must pass validation (parse validates) and its tensor table
 * must be consistent: offsets contiguous, every size positive. Shapes only — nothing is
 * allocated at model size, so a huge but valid config is fine. */
#include <stdlib.h>
#include <string.h>

#include "model/config.h"
#include "convert/family.h"
#include "model/model.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    tlm_config c;
    if (config_parse(&c, text, "fuzz/config.json") == 0) {
        if (config_validate(&c, "fuzz/config.json") != 0) abort(); /* parse must only accept valid configs */
        /* tables of absurdly large configs are still small (one row per tensor) */
        if (c.n_layers <= 64) {
            int n;
            size_t total;
            tensor_info *t = config_tensor_table(&c, &n, &total);
            size_t offset = 0;
            for (int i = 0; t && i < n; i++) {
                if (t[i].offset != offset || t[i].numel == 0) abort();
                offset += t[i].numel;
            }
            if (t && offset != total) abort();
            free(t);
        }
        char *json = config_to_json(&c);
        free(json);
    }
    free(text);
    return 0;
}
