/* presets.c — the presets as data. nanogpt-baby is nanoGPT's CPU Shakespeare configuration
 * (README of karpathy/nanoGPT: 4 layers, 4 heads, 128 wide, 64 tokens, batch 12, lr 1e-3,
 * 2000 iterations, no dropout, no biases); llama-baby is the same size built as Llama
 * (RMSNorm, RoPE, SwiGLU); lesson15 is the lesson's default block. */
#include "presets.h"

#include <string.h>

#define NANOGPT_TRAIN                                                                                                  \
    {.tokenizer = "chars", .steps = 2000, .batch = 12, .seq = 64, .accum = 1, .eval_every = 250, .eval_batches = 20,  \
     .save_every = 500, .log_every = 100, .seed = 1337, .sample_tokens = 300,                                         \
     .opt = {.lr = 1e-3f, .min_lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.1f,          \
             .grad_clip = 1.0f, .warmup_steps = 100}}

static const preset PRESETS[] = {
    {"nanogpt-baby", "GPT-2 style: LayerNorm (no bias), Pre-Norm, GELU MLP, learned positions, tied head",
     "{\"model_type\": \"tinylm\", \"hidden_size\": 128, \"num_hidden_layers\": 4, \"num_attention_heads\": 4,"
     " \"intermediate_size\": 512, \"max_position_embeddings\": 64, \"norm_type\": \"layernorm\", \"norm_bias\": false,"
     " \"norm_placement\": \"pre\", \"position_embedding\": \"learned\", \"ffn_type\": \"gelu\","
     " \"tie_word_embeddings\": true}",
     NANOGPT_TRAIN},
    {"llama-baby", "same size as Llama: RMSNorm, Pre-Norm, RoPE, SwiGLU, tied head",
     "{\"model_type\": \"tinylm\", \"hidden_size\": 128, \"num_hidden_layers\": 4, \"num_attention_heads\": 4,"
     " \"intermediate_size\": 352, \"max_position_embeddings\": 64, \"norm_type\": \"rmsnorm\","
     " \"norm_placement\": \"pre\", \"position_embedding\": \"rope\", \"rope_theta\": 10000, \"ffn_type\": \"swiglu\","
     " \"tie_word_embeddings\": true}",
     NANOGPT_TRAIN},
    {"lesson15", "the lesson's block: d_model 64, 2 heads, d_ff 128, RMSNorm eps 1e-5, RoPE theta 10000",
     "{\"model_type\": \"tinylm\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 2,"
     " \"intermediate_size\": 128, \"max_position_embeddings\": 64, \"norm_type\": \"rmsnorm\", \"norm_eps\": 1e-5,"
     " \"position_embedding\": \"rope\", \"rope_theta\": 10000, \"ffn_type\": \"swiglu\"}",
     {.tokenizer = "chars", .steps = 500, .batch = 12, .seq = 64, .accum = 1, .eval_every = 100, .eval_batches = 10,
      .save_every = 250, .log_every = 50, .seed = 1337, .sample_tokens = 200,
      .opt = {.lr = 1e-3f, .min_lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.1f,
              .grad_clip = 1.0f, .warmup_steps = 50}}},
};

const preset *preset_at(int i) {
    return i >= 0 && i < (int)(sizeof PRESETS / sizeof PRESETS[0]) ? &PRESETS[i] : NULL;
}

const preset *preset_find(const char *name) {
    for (int i = 0; preset_at(i); i++)
        if (!strcmp(preset_at(i)->name, name)) return preset_at(i);
    return NULL;
}
