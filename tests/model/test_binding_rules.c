/* test_binding_rules.c — the rules include/tinylm.h gives a binding so that it does not restate
 * them (python/tinylm asks for these): tlm_norm_gain (the gain a norm weight applies: w, or 1 + w
 * for Gemma's rmsnorm_1p) and tlm_input_norm (which norm reads the stream going into a sublayer,
 * by norm placement; the final norm), each against the rule as written in the papers' terms for
 * every placement and norm type; bad arguments refused with a message naming them. */
#include <stdio.h>
#include <string.h>

#include "model/model.h"
#include "convert/family.h"
#include "tinylm.h"
#include "util/error.h"

#include "check_count.h"

enum { L = 3 };

static tlm_model *make(const char *norm_type, const char *placement, int final_norm) {
    char json[512];
    snprintf(json, sizeof json,
             "{\"model_type\": \"tinylm\", \"vocab_size\": 16, \"hidden_size\": 8, \"num_hidden_layers\": %d, "
             "\"num_attention_heads\": 2, \"intermediate_size\": 8, \"norm_type\": \"%s\", "
             "\"norm_placement\": \"%s\", \"final_norm\": %s}",
             L, norm_type, placement, final_norm ? "true" : "false");
    tlm_config cfg;
    if (config_parse(&cfg, json, "test config")) return NULL;
    return model_create(&cfg);
}

int main(void) {
    /* the placements whose sublayers read the stream through a norm of their own (pre-norm, and
     * sandwich's input half); post, output, DeepNorm and none normalise elsewhere or nowhere */
    const struct {
        const char *name;
        int reads_through_norm;
    } places[] = {{"pre", 1}, {"sandwich", 1}, {"post", 0}, {"output", 0}, {"none", 0}, {"deepnorm", 0}};
    for (size_t p = 0; p < sizeof places / sizeof *places; p++)
        for (int fin = 0; fin < 2; fin++) {
            tlm_model *m = make("rmsnorm", places[p].name, fin);
            CHECK(m != NULL, "%s, final_norm %d: the model is made (%s)\n", places[p].name, fin, tlm_last_error());
            if (!m) continue;
            char name[64], want[64];
            for (int l = 0; l <= L; l++)
                for (int sub = 0; sub < 2; sub++) {
                    memset(name, 0, sizeof name);
                    const int rc = tlm_input_norm(m, l, sub, name, sizeof name);
                    const int has = l == L ? fin : places[p].reads_through_norm;
                    if (l == L) snprintf(want, sizeof want, "ln_final");
                    else snprintf(want, sizeof want, "blocks.%d.%s", l, sub ? "ln2" : "ln1");
                    CHECK(rc == has && (!has || !strcmp(name, want)),
                          "%s, final_norm %d, layer %d, sublayer %d: rc %d \"%s\"; want %d \"%s\"\n", places[p].name,
                          fin, l, sub, rc, name, has, has ? want : "");
                }
            /* bad arguments */
            const struct {
                int layer, sub;
                size_t cap;
                const char *named;
            } bad[] = {{-1, 0, 64, "layer -1"}, {L + 1, 0, 64, "layer 4"}, {0, 2, 64, "sublayer 2"},
                       {0, -1, 64, "sublayer -1"}, {L, 0, 0, "NULL model or name"}};
            for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
                tlm_clear_error();
                const int rc = tlm_input_norm(m, bad[k].layer, bad[k].sub, name, bad[k].cap);
                CHECK(rc == -1 && strstr(tlm_last_error(), bad[k].named), "input norm (%d, %d, cap %zu): rc %d \"%s\"\n",
                      bad[k].layer, bad[k].sub, bad[k].cap, rc, tlm_last_error());
            }
            if (places[p].reads_through_norm && !fin) { /* a name that does not fit: refused, not cut */
                tlm_clear_error();
                const int rc = tlm_input_norm(m, 0, 0, name, 5);
                CHECK(rc == -1 && strstr(tlm_last_error(), "bytes"), "input norm, 5 bytes: rc %d \"%s\"\n", rc,
                      tlm_last_error());
            }
            model_free(m);
        }

    /* the norm gain: w for every norm but rmsnorm_1p, 1 + w there (Gemma: the weight is stored
     * as w and the norm multiplies by 1 + w) */
    const char *types[] = {"rmsnorm", "layernorm", "rmsnorm_1p"};
    const float w[4] = {0.0f, 1.0f, -0.25f, 3.5f};
    for (int t = 0; t < 3; t++) {
        tlm_model *m = make(types[t], "pre", 1);
        CHECK(m != NULL, "%s: the model is made (%s)\n", types[t], tlm_last_error());
        if (!m) continue;
        const float off = !strcmp(types[t], "rmsnorm_1p") ? 1.0f : 0.0f;
        float g[4], inplace[4];
        memcpy(inplace, w, sizeof w);
        CHECK(tlm_norm_gain(m, w, g, 4) == 0 && tlm_norm_gain(m, inplace, inplace, 4) == 0, "%s: gains given\n",
              types[t]);
        for (int i = 0; i < 4; i++)
            CHECK(g[i] == w[i] + off && inplace[i] == g[i], "%s: w %g -> gain %g (in place %g); want %g\n", types[t],
                  (double)w[i], (double)g[i], (double)inplace[i], (double)(w[i] + off));
        tlm_clear_error();
        CHECK(tlm_norm_gain(m, NULL, g, 4) == -1 && strstr(tlm_last_error(), "NULL"), "%s: NULL w refused\n",
              types[t]);
        CHECK(tlm_norm_gain(m, NULL, NULL, 0) == 0, "%s: no weights, nothing to do\n", types[t]);
        model_free(m);
    }
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
