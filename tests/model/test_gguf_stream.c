/* test_gguf_stream.c — gguf_export_init_file (`tinylm export --config`), which writes a new model
 * a chunk of rows at a time without forming it, against the path it stands in for: the model
 * made (model_create + model_init_weights with the same seed) and written by gguf_export_file.
 * The two files must be the same bytes, for f32, q8_0 and q4_k, with matrices whose rows
 * fall back to another type (FFN 544: not whole 256-blocks), and with tensors larger than one
 * chunk (d 1280: q's rows drawn in two chunks of whole heads, as llama's pair order needs); a
 * different seed gives another file, and the streamed file loads back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_count.h"
#include "convert/checkpoint.h"
#include "convert/family.h"
#include "convert/gguf_export.h"
#include "model/model.h"
#include "ops/quant.h"
#include "test_files.h"

static const char CONFIG[] = "{\"model_type\": \"llama\", \"hidden_size\": 1280, \"intermediate_size\": 544,"
                             " \"num_hidden_layers\": 1, \"num_attention_heads\": 20, \"num_key_value_heads\": 4,"
                             " \"vocab_size\": 1000, \"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-5,"
                             " \"rope_theta\": 10000.0, \"tie_word_embeddings\": false, \"initializer_range\": 0.02}";

static char *file_of(const char *path, size_t *n) {
    char *d = test_read_file(path, n);
    unlink(path);
    return d;
}

int main(void) {
    tlm_config c;
    if (config_parse(&c, CONFIG, "test config")) {
        printf("FAIL: the config: %s\n", tlm_last_error());
        return 1;
    }
    tlm_model *m = model_create(&c);
    CHECK(m != NULL, "model_create");
    if (!m) return 1;
    model_init_weights(m, 42);
    char a[64], b[64];
    snprintf(a, sizeof a, "gguf_stream_%d_a.gguf", (int)getpid());
    snprintf(b, sizeof b, "gguf_stream_%d_b.gguf", (int)getpid());
    const int types[] = {WQ_F32, WQ_Q8_0, WQ_Q4_K};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const int type = types[k];
        int fa = -1, fb = -2;
        CHECK(gguf_export_file(m, NULL, type, a, "same", &fa) == 0, "%s: the made model's export", wq_name(type));
        CHECK(gguf_export_init_file(&c, 42, NULL, type, b, "same", &fb) == 0, "%s: the streamed export",
              wq_name(type));
        CHECK(fa == fb && fa == (type == WQ_F32 || type == WQ_Q8_0 ? 0 : 1), "%s: %d and %d matrices in a fallback type",
              wq_name(type), fa, fb);
        if (type == WQ_Q4_K) { /* the streamed file loads, its tensors in the types written */
            tlm_model *g = gguf_model_load(b);
            CHECK(g != NULL, "the streamed q4_k file loads");
            const tensor_info *q = g ? model_find_tensor(g, "layers.0.attn.q_proj.weight") : NULL;
            const tensor_info *d = g ? model_find_tensor(g, "layers.0.ffn.down_proj.weight") : NULL;
            CHECK(q && q->qtype == WQ_Q4_K && d && d->qtype == WQ_Q5_0, "q_proj as q4_k, down_proj as q5_0");
            model_free(g);
        }
        size_t na, nb;
        char *da = file_of(a, &na), *db = file_of(b, &nb);
        CHECK(na == nb && !memcmp(da, db, na), "%s: the streamed file (%zu bytes) is the made model's (%zu)",
              wq_name(type), nb, na);
        free(da), free(db);
    }
    /* another seed: another model (the comparison above sees the values) */
    int f = 0;
    CHECK(gguf_export_file(m, NULL, WQ_Q8_0, a, "same", &f) == 0, "q8_0 export");
    CHECK(gguf_export_init_file(&c, 43, NULL, WQ_Q8_0, b, "same", &f) == 0, "q8_0 streamed, seed 43");
    size_t na, nb;
    char *da = file_of(a, &na), *db = file_of(b, &nb);
    CHECK(na == nb && memcmp(da, db, na), "seed 43's file differs from seed 42's");
    free(da), free(db);
    /* a config llama.cpp's llama does not compute is refused before anything is written */
    tlm_config biased = c;
    biased.attn_bias = 1;
    CHECK(gguf_export_init_file(&biased, 1, NULL, WQ_Q8_0, b, "x", &f) != 0 && access(b, F_OK) != 0,
          "biases refused, no file");
    model_free(m);
    printf("%d checks, %d failures\n", checks, failures);
    return failures != 0;
}
