/* test_config_roundtrip — every config field survives a save and a load.
 *
 * 1. A tinylm config with every key set to a value other than its default (one row per key
 *    below) is written by config_to_json and read back: the two tlm_config structs must be
 *    equal field for field (memcmp: both start from config_defaults' memset, so padding is 0).
 *    Every key the tinylm reader accepts must appear in what the writer writes, so a key added
 *    to the reader without the writer fails here.
 * 2. A Hugging Face llama config with Llama-3.x rope_scaling is built, saved with model_save_dir
 *    (the tinylm format) and loaded again: the config must be equal and the logits identical
 *    bit for bit (before rope_scaling was part of the format, the reload ran plain RoPE). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "convert/checkpoint.h"
#include "convert/family.h"
#include "model/config.h"
#include "model/model.h"
#include "util/error.h"

#include "check_count.h"
#include "model/context.h"

/* Every key of model_type "tinylm" (docs/config.md), each with a value other than its default,
 * chosen so that the whole config still validates. */
static const char *EVERY_KEY =
    "{\"model_type\": \"tinylm\", \"vocab_size\": 37, \"hidden_size\": 24, \"num_hidden_layers\": 3,"
    " \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 8, \"intermediate_size\": 40,"
    " \"max_position_embeddings\": 96, \"norm_type\": \"rmsnorm_1p\", \"norm_eps\": 3.5e-6, \"norm_bias\": false,"
    " \"dyt_alpha_init\": 0.75, \"dyt_alpha_init_attn\": 1.25, \"dyt_alpha_init_ffn\": 0.375,"
    " \"dyt_alpha_init_final\": 0.125, \"norm_placement\": \"sandwich\", \"residual\": true, \"final_norm\": false,"
    " \"position_embedding\": \"rope\", \"rope_theta\": 50000.5, \"rope_local_base_freq\": 1234.25,"
    " \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.5,"
    "   \"high_freq_factor\": 4.25, \"original_max_position_embeddings\": 48},"
    " \"embedding_scale\": true, \"attention_bias\": true, \"attention_out_bias\": false, \"qk_norm\": \"head\","
    " \"query_pre_attn_scalar\": 12.5, \"attn_logit_softcapping\": 33.0, \"sliding_window\": 5,"
    " \"layer_types\": [\"sliding_attention\", \"full_attention\", \"sliding_attention\"], \"ffn_type\": \"geglu\","
    " \"mlp_bias\": true, \"tie_word_embeddings\": false, \"final_logit_softcapping\": 21.5,"
    " \"initializer_range\": 0.031, \"scale_residual_init\": false}";

/* The DeepNorm keys, which only norm_placement "deepnorm" takes (a second every-key file). */
static const char *EVERY_KEY_DEEPNORM =
    "{\"model_type\": \"tinylm\", \"vocab_size\": 37, \"hidden_size\": 24, \"num_hidden_layers\": 3,"
    " \"num_attention_heads\": 4, \"norm_type\": \"layernorm\", \"norm_bias\": true,"
    " \"norm_placement\": \"deepnorm\", \"deepnorm_alpha\": 2.75, \"deepnorm_beta\": 0.125}";

/* The mixture-of-experts keys (a third every-key file: sigmoid routing with groups, every layer
 * rule used at once) */
static const char *EVERY_KEY_MOE =
    "{\"model_type\": \"tinylm\", \"vocab_size\": 37, \"hidden_size\": 24, \"num_hidden_layers\": 7,"
    " \"num_attention_heads\": 4, \"num_experts\": 12, \"num_experts_per_tok\": 3, \"moe_intermediate_size\": 20,"
    " \"n_shared_experts\": 2, \"shared_expert_intermediate_size\": 44, \"shared_expert_gate\": true,"
    " \"norm_topk_prob\": true, \"scoring_func\": \"sigmoid\", \"n_group\": 4,"
    " \"topk_group\": 2, \"routed_scaling_factor\": 2.5, \"first_k_dense_replace\": 1,"
    " \"decoder_sparse_step\": 2, \"mlp_only_layers\": [3]}";

/* Multi-head latent attention's keys with YaRN (a fourth every-key file) */
static const char *EVERY_KEY_MLA =
    "{\"model_type\": \"tinylm\", \"vocab_size\": 37, \"hidden_size\": 24, \"num_hidden_layers\": 2,"
    " \"num_attention_heads\": 3, \"q_lora_rank\": 10, \"kv_lora_rank\": 9, \"qk_nope_head_dim\": 5,"
    " \"qk_rope_head_dim\": 6, \"v_head_dim\": 7, \"rope_interleave\": true, \"rope_scaling\": {\"rope_type\":"
    " \"yarn\", \"factor\": 40, \"beta_fast\": 16, \"beta_slow\": 2, \"mscale\": 0.75, \"mscale_all_dim\": 0.5,"
    " \"attention_factor\": 1.25, \"original_max_position_embeddings\": 64, \"truncate\": false}}";

/* The keys the tinylm reader accepts (config.c's table), each of which the files above set. */
static const char *const KEYS[] = {
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
    "intermediate_size", "max_position_embeddings", "norm_type", "norm_eps", "norm_bias", "dyt_alpha_init",
    "dyt_alpha_init_attn", "dyt_alpha_init_ffn", "dyt_alpha_init_final",
    "norm_placement", "deepnorm_alpha", "deepnorm_beta", "residual", "final_norm", "position_embedding", "rope_theta", "rope_local_base_freq",
    "rope_scaling", "embedding_scale", "attention_bias", "attention_out_bias", "qk_norm", "query_pre_attn_scalar",
    "attn_logit_softcapping", "sliding_window", "layer_types", "ffn_type", "mlp_bias", "tie_word_embeddings",
    "final_logit_softcapping", "initializer_range", "scale_residual_init", "num_experts", "num_experts_per_tok",
    "moe_intermediate_size", "n_shared_experts", "shared_expert_intermediate_size", "shared_expert_gate",
    "norm_topk_prob", "scoring_func", "n_group", "topk_group",
    "routed_scaling_factor", "first_k_dense_replace", "decoder_sparse_step", "mlp_only_layers", "q_lora_rank",
    "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "rope_interleave", NULL};

static int same_config(const tlm_config *a, const tlm_config *b) {
    tlm_config x = *a, y = *b;
    /* the family a config was read as is not part of the numbers, and "layer_types absent" and
     * "every layer listed" mean the same */
    memcpy(y.model_type, x.model_type, sizeof x.model_type);
    y.n_layer_types = x.n_layer_types;
    return memcmp(&x, &y, sizeof x) == 0;
}

static void test_every_key(void) {
    tlm_config a, b;
    CHECK(config_parse(&a, EVERY_KEY, "every_key.json") == 0, "every-key config refused: %s", tlm_last_error());
    tlm_config d;
    config_defaults(&d);
    /* each key really is set to a non-default value (else the round trip would prove nothing) */
    CHECK(a.rope_scaling == ROPE_SCALING_LLAMA3 && a.rope_original_max_pos == 48, "rope_scaling not read");
    CHECK(a.vocab_size != d.vocab_size && a.norm != d.norm && a.placement != d.placement &&
              a.norm_eps != d.norm_eps && a.dyt_alpha_init != d.dyt_alpha_init && a.final_norm != d.final_norm &&
              a.dyt_alpha_init_attn != d.dyt_alpha_init_attn && a.dyt_alpha_init_ffn != d.dyt_alpha_init_ffn &&
              a.dyt_alpha_init_final != d.dyt_alpha_init_final &&
              a.rope_theta != d.rope_theta && a.embed_scale != d.embed_scale && a.qk_norm != d.qk_norm &&
              a.ffn != d.ffn && a.mlp_bias != d.mlp_bias && a.tie_embeddings != d.tie_embeddings &&
              a.init_std != d.init_std && a.scale_residual_init != d.scale_residual_init && a.max_seq != d.max_seq,
          "the every-key config leaves a field at its default");
    tlm_config dn, dn_back;
    CHECK(config_parse(&dn, EVERY_KEY_DEEPNORM, "every_key_deepnorm.json") == 0, "deepnorm config refused: %s",
          tlm_last_error());
    CHECK(dn.placement == PLACE_DEEPNORM && dn.deepnorm_alpha == 2.75f && dn.deepnorm_beta == 0.125f &&
              !dn.final_norm && !dn.scale_residual_init,
          "the deepnorm keys not read (or final_norm / scale_residual_init not defaulted off)");
    tlm_config moe, moe_back;
    CHECK(config_parse(&moe, EVERY_KEY_MOE, "every_key_moe.json") == 0, "moe config refused: %s", tlm_last_error());
    /* past the first dense layer, (l + 1) % 2 == 0, not 3: layers 1 and 5 */
    int moe_layers = 0;
    for (int l = 0; l < moe.n_layers; l++) moe_layers += config_layer_is_moe(&moe, l) << l;
    CHECK(moe.scoring == SCORING_SIGMOID && moe.n_group == 4 && moe_layers == ((1 << 1) | (1 << 5)) &&
              config_shared_ff(&moe) == 44 && moe.shared_gate,
          "the MoE keys not read (layers %#x)", moe_layers);
    tlm_config mla, mla_back;
    CHECK(config_parse(&mla, EVERY_KEY_MLA, "every_key_mla.json") == 0, "mla config refused: %s", tlm_last_error());
    CHECK(config_mla(&mla) && mla.head_dim == 11 && mla.n_kv_heads == 3 && mla.rope_scaling == ROPE_SCALING_YARN &&
              mla.rope_beta_fast == 16.0f && !mla.rope_truncate && mla.rope_attn_factor == 1.25f,
          "the MLA keys not read (head_dim %d, kv heads %d)", mla.head_dim, mla.n_kv_heads);
    /* each key in at least one of the four written files, and every written key in KEYS */
    const tlm_config *both[4] = {&a, &dn, &moe, &mla};
    tlm_config *back[4] = {&b, &dn_back, &moe_back, &mla_back};
    cJSON *roots[4] = {NULL, NULL, NULL, NULL};
    for (int f = 0; f < 4; f++) {
        char *json = config_to_json(both[f]);
        CHECK(json != NULL, "config_to_json failed");
        if (!json) return;
        roots[f] = cJSON_Parse(json);
        for (const cJSON *it = roots[f] ? roots[f]->child : NULL; it; it = it->next) {
            int known = !strcmp(it->string, "model_type");
            for (int i = 0; KEYS[i] && !known; i++) known = !strcmp(KEYS[i], it->string);
            CHECK(known, "config_to_json writes \"%s\", which this test's key list lacks", it->string);
        }
        CHECK(config_parse(back[f], json, "written.json") == 0, "the written config is refused: %s\n%s",
              tlm_last_error(), json);
        CHECK(same_config(both[f], back[f]), "a field changed in the round trip:\n%s", json);
        free(json);
    }
    for (int i = 0; KEYS[i]; i++)
        CHECK(cJSON_GetObjectItemCaseSensitive(roots[0], KEYS[i]) || cJSON_GetObjectItemCaseSensitive(roots[1], KEYS[i]) ||
                  cJSON_GetObjectItemCaseSensitive(roots[2], KEYS[i]) || cJSON_GetObjectItemCaseSensitive(roots[3], KEYS[i]),
              "config_to_json does not write \"%s\"", KEYS[i]);
    cJSON_Delete(roots[0]), cJSON_Delete(roots[1]), cJSON_Delete(roots[2]), cJSON_Delete(roots[3]);

    /* the DeepNorm keys with another placement, a 0, and deepnorm without a residual are refused,
     * the message naming the key */
    const char *refused[][2] = {
        {"{\"model_type\": \"tinylm\", \"vocab_size\": 11, \"hidden_size\": 8, \"num_hidden_layers\": 1,"
         " \"num_attention_heads\": 2, \"norm_placement\": \"post\", \"deepnorm_alpha\": 2.0}",
         "deepnorm_alpha"},
        {"{\"model_type\": \"tinylm\", \"vocab_size\": 11, \"hidden_size\": 8, \"num_hidden_layers\": 1,"
         " \"num_attention_heads\": 2, \"deepnorm_beta\": 0.5}",
         "deepnorm_beta"},
        {"{\"model_type\": \"tinylm\", \"vocab_size\": 11, \"hidden_size\": 8, \"num_hidden_layers\": 1,"
         " \"num_attention_heads\": 2, \"norm_placement\": \"deepnorm\", \"deepnorm_alpha\": 0}",
         "deepnorm_alpha"},
        {"{\"model_type\": \"tinylm\", \"vocab_size\": 11, \"hidden_size\": 8, \"num_hidden_layers\": 1,"
         " \"num_attention_heads\": 2, \"norm_placement\": \"deepnorm\", \"residual\": false}",
         "residual"},
        {"{\"model_type\": \"tinylm\", \"vocab_size\": 11, \"hidden_size\": 8, \"num_hidden_layers\": 1,"
         " \"num_attention_heads\": 2, \"norm_placement\": \"deepnorm\", \"scale_residual_init\": true}",
         "scale_residual_init"},
        /* mixture-of-experts combinations the engine (and its reference) does not define */
#define MOE_BASE "{\"model_type\": \"tinylm\", \"vocab_size\": 11, \"hidden_size\": 8, \"num_hidden_layers\": 2, " \
                 "\"num_attention_heads\": 2, \"num_experts\": 8, "
        {MOE_BASE "\"num_experts_per_tok\": 9}", "num_experts_per_tok"},
        {MOE_BASE "\"num_experts_per_tok\": 0}", "num_experts_per_tok"},
        {MOE_BASE "\"num_experts_per_tok\": 2, \"ffn_type\": \"gelu\"}", "ffn_type"},
        {MOE_BASE "\"num_experts_per_tok\": 2, \"mlp_bias\": true}", "mlp_bias"},
        {MOE_BASE "\"num_experts_per_tok\": 2, \"n_group\": 2, \"topk_group\": 1}", "n_group"},
        {MOE_BASE "\"num_experts_per_tok\": 2, \"scoring_func\": \"sigmoid\", \"n_group\": 3}", "n_group"},
        {MOE_BASE "\"num_experts_per_tok\": 2, \"scoring_func\": \"sigmoid\", \"n_group\": 8}", "n_group"},
        {MOE_BASE "\"num_experts_per_tok\": 5, \"scoring_func\": \"sigmoid\", \"n_group\": 4, \"topk_group\": 2}",
         "topk_group"},
        {MOE_BASE "\"num_experts_per_tok\": 2, \"scoring_func\": \"sigmoid\", \"n_group\": 4, \"topk_group\": 5}",
         "topk_group"},
        {MOE_BASE "\"num_experts_per_tok\": 2, \"routed_scaling_factor\": 0}", "routed_scaling_factor"},
        {MOE_BASE "\"num_experts_per_tok\": 2, \"decoder_sparse_step\": 0}", "decoder_sparse_step"},
        {MOE_BASE "\"num_experts_per_tok\": 2, \"mlp_only_layers\": [2]}", "mlp_only_layers"},
        {MOE_BASE "\"num_experts_per_tok\": 2, \"scoring_func\": \"tanh\"}", "scoring_func"},
        {"{\"model_type\": \"tinylm\", \"vocab_size\": 11, \"hidden_size\": 8, \"num_hidden_layers\": 1,"
         " \"num_attention_heads\": 2, \"num_experts_per_tok\": 2}",
         "num_experts_per_tok"},
        {"{\"model_type\": \"tinylm\", \"vocab_size\": 11, \"hidden_size\": 8, \"num_hidden_layers\": 1,"
         " \"num_attention_heads\": 2, \"scoring_func\": \"sigmoid\"}",
         "scoring_func"},
#undef MOE_BASE
        /* multi-head latent attention with a switch it is not defined with, each named by its key */
#define MLA_BASE "{\"model_type\": \"tinylm\", \"vocab_size\": 11, \"hidden_size\": 8, \"num_hidden_layers\": 1, " \
                 "\"num_attention_heads\": 2, \"kv_lora_rank\": 4, \"qk_nope_head_dim\": 2, \"qk_rope_head_dim\": 2, " \
                 "\"v_head_dim\": 2, "
        {MLA_BASE "\"attn_logit_softcapping\": 30}", "attn_logit_softcapping"},
        {MLA_BASE "\"sliding_window\": 4}", "sliding_window"},
        {MLA_BASE "\"qk_norm\": \"head\"}", "qk_norm"},
        {MLA_BASE "\"position_embedding\": \"learned\"}", "position_embedding"},
        {MLA_BASE "\"attention_bias\": true}", "attention_bias"},
        {MLA_BASE "\"query_pre_attn_scalar\": 4}", "query_pre_attn_scalar"},
        {MLA_BASE "\"v_norm\": true}", "v_norm"},
        {MLA_BASE "\"head_dim\": 8}", "head_dim"},
        {MLA_BASE "\"num_key_value_heads\": 1}", "num_key_value_heads"},
        {MLA_BASE "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2}}", "rope_scaling"},
        {MLA_BASE "\"qk_rope_head_dim\": 3}", "qk_rope_head_dim"},
        {MLA_BASE "\"norm_placement\": \"deepnorm\", \"scale_residual_init\": false}", "norm_placement"},
        {"{\"model_type\": \"tinylm\", \"vocab_size\": 11, \"hidden_size\": 8, \"num_hidden_layers\": 1,"
         " \"num_attention_heads\": 2, \"q_lora_rank\": 4}",
         "q_lora_rank"},
        {"{\"model_type\": \"tinylm\", \"vocab_size\": 11, \"hidden_size\": 8, \"num_hidden_layers\": 1,"
         " \"num_attention_heads\": 2, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}}",
         "yarn"},
#undef MLA_BASE
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        tlm_config x;
        CHECK(config_parse(&x, refused[i][0], "bad.json") != 0 && strstr(tlm_last_error(), refused[i][1]),
              "refused case %zu: not refused naming %s (%s)", i, refused[i][1], tlm_last_error());
    }
    /* derived alpha, beta: the paper's decoder-only values for N = 3 */
    dn.deepnorm_alpha = dn.deepnorm_beta = 0.0f;
    CHECK(fabsf(config_deepnorm_alpha(&dn) - powf(6.0f, 0.25f)) < 1e-6f &&
              fabsf(config_deepnorm_beta(&dn) - powf(24.0f, -0.25f)) < 1e-6f,
          "derived alpha %g beta %g", config_deepnorm_alpha(&dn), config_deepnorm_beta(&dn));

    /* one key at a time from the defaults: each key alone survives too (rope_scaling linear here) */
    const char *single[] = {
        "{\"model_type\": \"tinylm\", \"vocab_size\": 11, \"hidden_size\": 8, \"num_hidden_layers\": 1,"
        " \"num_attention_heads\": 2, \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.5}}",
        "{\"model_type\": \"tinylm\", \"vocab_size\": 11, \"hidden_size\": 8, \"num_hidden_layers\": 2,"
        " \"num_attention_heads\": 2, \"layer_types\": [\"full_attention\", \"full_attention\"]}",
        "{\"model_type\": \"tinylm\", \"vocab_size\": 11, \"hidden_size\": 8, \"num_hidden_layers\": 1,"
        " \"num_attention_heads\": 2, \"norm_type\": \"dyt\", \"dyt_alpha_init\": 0.25, \"position_embedding\": \"learned\"}",
        "{\"model_type\": \"tinylm\", \"vocab_size\": 11, \"hidden_size\": 8, \"num_hidden_layers\": 4,"
        " \"num_attention_heads\": 2, \"norm_placement\": \"deepnorm\"}",
        NULL};
    for (int i = 0; single[i]; i++) {
        tlm_config x, y;
        CHECK(config_parse(&x, single[i], "single.json") == 0, "case %d refused: %s", i, tlm_last_error());
        char *j = config_to_json(&x);
        CHECK(j && config_parse(&y, j, "single_written.json") == 0, "case %d: written config refused: %s", i,
              tlm_last_error());
        CHECK(same_config(&x, &y), "case %d changed in the round trip:\n%s", i, j ? j : "");
        free(j);
    }
}

/* A Llama-3.x-style config (the family reader), saved in the tinylm format and loaded again. */
static const char *LLAMA3 =
    "{\"model_type\": \"llama\", \"vocab_size\": 53, \"hidden_size\": 32, \"num_hidden_layers\": 2,"
    " \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 48,"
    " \"max_position_embeddings\": 256, \"rms_norm_eps\": 1e-5, \"rope_theta\": 500000.0,"
    " \"tie_word_embeddings\": false, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0,"
    " \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 16}}";

static void test_llama3_save_load(void) {
    tlm_config cfg;
    if (config_parse(&cfg, LLAMA3, "llama3.json")) {
        CHECK(0, "llama3 config refused: %s", tlm_last_error());
        return;
    }
    CHECK(cfg.rope_scaling == ROPE_SCALING_LLAMA3, "the llama config's rope_scaling not read");
    tlm_model *m = model_create(&cfg);
    CHECK(m != NULL, "model_create: %s", tlm_last_error());
    if (!m) return;
    model_init_weights(m, 7);
    enum { T = 40 }; /* past original_max_position_embeddings: where the scaling changes the angles */
    int ids[T];
    for (int t = 0; t < T; t++) ids[t] = (t * 17 + 3) % cfg.vocab_size;
    CHECK(model_forward(m, ids, NULL, 1, T, NULL) == 0, "forward: %s", tlm_last_error());
    size_t n = (size_t)T * cfg.vocab_size;
    float *before = malloc(n * sizeof *before);
    memcpy(before, m->ctx->acts.logits, n * sizeof *before);

    char dir[] = "/tmp/tlm_cfg_rt_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char out[64];
    snprintf(out, sizeof out, "%s/model", dir);
    CHECK(model_save_dir(m, out) == 0, "save: %s", tlm_last_error());
    tlm_model *r = model_load_dir(out);
    CHECK(r != NULL, "load: %s", tlm_last_error());
    if (r) {
        CHECK(same_config(&m->cfg, &r->cfg), "the saved llama-3 config comes back different");
        CHECK(r->cfg.rope_scaling == ROPE_SCALING_LLAMA3 && r->cfg.rope_factor == 8.0f &&
                  r->cfg.rope_original_max_pos == 16,
              "rope_scaling lost in save/load (type %d factor %g)", (int)r->cfg.rope_scaling, r->cfg.rope_factor);
        CHECK(model_forward(r, ids, NULL, 1, T, NULL) == 0, "forward after load: %s", tlm_last_error());
        size_t differ = 0;
        for (size_t i = 0; i < n; i++) differ += memcmp(&before[i], &r->ctx->acts.logits[i], sizeof(float)) != 0;
        CHECK(differ == 0, "%zu of %zu logits differ after save/load", differ, n);
        model_free(r);
    }
    char path[96];
    snprintf(path, sizeof path, "%s/config.json", out), unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", out), unlink(path);
    rmdir(out), rmdir(dir);
    free(before);
    model_free(m);
}

int main(void) {
    test_every_key();
    test_llama3_save_load();
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}
