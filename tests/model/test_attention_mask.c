/* test_attention_mask.c — tlm_attention_mask (include/tinylm.h), the engine's key-visibility rule
 * as the Python package reads it, against a brute-force statement of the rule for a config whose
 * layers mix sliding-window and full attention: query i sees key j when j <= i (causal) and, on a
 * sliding layer of window W, i - j < W; and for a row whose real tokens begin at `start` (left
 * padding), no key before start, a pad query (i < start) sees itself alone. Also: bad arguments
 * are refused with a message naming them, and the mask is left as it was. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "convert/family.h"
#include "tinylm.h"
#include "util/error.h"

#include "check_count.h"

enum { L = 5, W = 3, TMAX = 9 };
/* which layers slide, as the config below says (layer_types) */
static const int SLIDING[L] = {1, 0, 1, 1, 0};

static int brute_visible(int layer, int i, int j) { return j <= i && (!SLIDING[layer] || i - j < W); }
static int brute_visible_padded(int layer, int start, int i, int j) {
    return i < start ? j == i : brute_visible(layer, i, j) && j >= start;
}

int main(void) {
    const char *json = "{\"model_type\": \"tinylm\", \"vocab_size\": 16, \"hidden_size\": 8, "
                       "\"num_hidden_layers\": 5, \"num_attention_heads\": 2, \"intermediate_size\": 8, "
                       "\"sliding_window\": 3, \"layer_types\": [\"sliding_attention\", \"full_attention\", "
                       "\"sliding_attention\", \"sliding_attention\", \"full_attention\"]}";
    tlm_config cfg;
    if (config_parse(&cfg, json, "test config")) {
        printf("FAIL: cannot parse the test config: %s\n", tlm_last_error());
        return 1;
    }
    tlm_model *m = model_create(&cfg);
    if (!m) {
        printf("FAIL: cannot build the test model: %s\n", tlm_last_error());
        return 1;
    }
    unsigned char mask[TMAX * TMAX];

    /* every layer, every length from 1 (shorter than the window) to past it, every start of the
     * real tokens (0: no padding), every (query, key) */
    for (int l = 0; l < L; l++)
        for (int T = 1; T <= TMAX; T++)
            for (int start = 0; start < T; start++) {
                memset(mask, 0xAA, sizeof mask);
                CHECK(tlm_attention_mask(m, l, T, start, mask) == 0, "layer %d, T %d, start %d: the mask is given\n", l,
                      T, start);
                int wrong = 0, wi = -1, wj = -1;
                for (int i = 0; i < T; i++)
                    for (int j = 0; j < T; j++)
                        if (mask[i * T + j] != brute_visible_padded(l, start, i, j) && !wrong++) wi = i, wj = j;
                CHECK(!wrong,
                      "layer %d (%s), T %d, start %d: %d entries differ from the rule, first (query %d, key %d) = %d\n",
                      l, SLIDING[l] ? "sliding" : "full", T, start, wrong, wi, wj, wi >= 0 ? mask[wi * T + wj] : -1);
                int past = 0; /* nothing written past the T x T entries */
                for (size_t k = (size_t)T * T; k < sizeof mask; k++) past += mask[k] != 0xAA;
                CHECK(!past, "layer %d, T %d, start %d: %d bytes written past the mask\n", l, T, start, past);
            }
    /* the padded rule really differs from the unpadded one (a start ignored would fail above) */
    CHECK(brute_visible_padded(1, 2, 3, 0) == 0 && brute_visible(1, 3, 0) == 1 && brute_visible_padded(1, 2, 1, 0) == 0,
          "the start hides keys\n");
    /* the rule really differs by layer here (a mask of layer 0 for every layer would fail above) */
    CHECK(brute_visible(0, W, 0) == 0 && brute_visible(1, W, 0) == 1, "the config mixes windowed and full layers\n");

    /* bad arguments: an error naming the argument, the mask untouched */
    struct {
        int layer, T, start, null_mask;
        const char *named;
    } bad[] = {{-1, 4, 0, 0, "layer -1"},     {L, 4, 0, 0, "layer 5"},      {0, 0, 0, 0, "T = 0"},
               {0, -3, 0, 0, "T = -3"},       {0, 4, 0, 1, "mask non-NULL"}, {0, 4, -1, 0, "start = -1"},
               {0, 4, 4, 0, "start = 4"}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        memset(mask, 0xAA, sizeof mask);
        tlm_clear_error();
        int rc = tlm_attention_mask(m, bad[k].layer, bad[k].T, bad[k].start, bad[k].null_mask ? NULL : mask);
        int untouched = 1;
        for (size_t b = 0; b < sizeof mask; b++) untouched &= mask[b] == 0xAA;
        CHECK(rc == -1 && strstr(tlm_last_error(), bad[k].named) && untouched,
              "layer %d, T %d, start %d%s: refused (rc %d) naming \"%s\", mask untouched %d\n", bad[k].layer,
              bad[k].T, bad[k].start, bad[k].null_mask ? ", NULL mask" : "", rc, bad[k].named, untouched);
    }

    model_free(m);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
