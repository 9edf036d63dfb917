/* tinylm.h — the public C API of libtinylm.
 *
 * A small, stable surface: load or build a model, run it, differentiate it, save it.
 * Everything else (ops, the parameter table, probes, formats) is internal and may change.
 *
 *   tlm_model *m = tlm_load("runs/shakespeare");          // config.json + model.safetensors
 *   int ids[3] = {1, 5, 9};
 *   if (tlm_forward(m, ids, NULL, 1, 3, NULL)) fprintf(stderr, "%s\n", tlm_error_message());
 *   const float *logits = tlm_logits(m);                   // [1, 3, vocab]
 *   tlm_free(m);
 *
 * Every function that can fail returns -1 (or NULL) and leaves a message naming the file
 * and the field in tlm_error_message() (per thread). */
#ifndef TINYLM_H
#define TINYLM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Only what this header declares is exported from libtinylm.so; everything else in the library
 * is built with hidden visibility (CMakeLists.txt). */
#if defined(TLM_BUILDING_LIBRARY) && defined(__GNUC__)
#define TLM_API __attribute__((visibility("default")))
#else
#define TLM_API
#endif

typedef struct tlm_model tlm_model;

/* Any path `tinylm --model` takes: a model directory (config.json, model_type "tinylm" or a
 * supported Hugging Face family, plus model.safetensors or shards with
 * model.safetensors.index.json), a training run directory (its latest checkpoint), or a
 * llama2.c .bin. */
TLM_API tlm_model *tlm_load(const char *path);
/* A new model from a config.json file, weights initialised from `seed` (docs/config.md). */
TLM_API tlm_model *tlm_create(const char *config_path, uint64_t seed);
/* Writes config.json + model.safetensors into dir, each file atomically. */
TLM_API int tlm_save(const tlm_model *m, const char *dir);
TLM_API void tlm_free(tlm_model *m);

TLM_API size_t tlm_num_params(const tlm_model *m);
TLM_API int tlm_vocab_size(const tlm_model *m);

/* Runs tokens [B, T]; with targets [B, T] (a negative target = no loss there) also the mean
 * cross-entropy into *loss. */
TLM_API int tlm_forward(tlm_model *m, const int *tokens, const int *targets, int B, int T, float *loss);
/* Logits [B, T, vocab] of the last forward; valid until the next call. */
TLM_API const float *tlm_logits(const tlm_model *m);
/* Gradients of the last forward's loss * dloss, accumulated into the model's gradient buffer. */
TLM_API int tlm_backward(tlm_model *m, float dloss);
/* The gradient of a named parameter (docs/tensors.md), or NULL; *numel receives its size. */
TLM_API const float *tlm_grad(const tlm_model *m, const char *tensor_name, size_t *numel);
TLM_API void tlm_zero_grad(tlm_model *m);

TLM_API const char *tlm_error_message(void);
/* The version of the interface below (bindings check it; src/api/api.c says which) */
TLM_API int tlm_abi_version(void);

/* ---- hooks: a callback at each named activation point (docs/python.md) ---------------------
 * Hook ids 0 .. tlm_hook_count()-1; tlm_hook_info gives one's name (TransformerLens names where
 * the concept is the same), its shape for a batch [B, T] and flags; it returns the number of
 * dimensions, or 0 when this model's config has no such point. With a callback attached, every
 * forward (training mode: the default) calls it at each point whose byte in `fwd` is set, with
 * the activation in place (the callback may rewrite it; the pass continues from the new values),
 * and every backward at each point set in `bwd`, with the gradient there, complete and before
 * anything upstream reads it (the callback may rewrite it too: the backward continues from it; at
 * hook_attn_out / hook_mlp_out that is the sublayer's path alone). A `fwd` byte of 2 says
 * the callback may rewrite the attention pattern (z is then computed again from it) or attn.hook_result
 * (attn_out is then the heads' sum + b_O), unless it calls tlm_hook_unchanged. A callback returning
 * non-zero makes the pass fail with the hook's name. fn = NULL detaches. */
enum {
    TLM_HOOK_RSTD = 1,     /* data hold 1/scale per row (the norm's reciprocal std), shape [B,T,1] */
    TLM_HOOK_MASKED = 2,   /* attention scores: entries of keys a query does not see are undefined */
    TLM_HOOK_NO_GRAD = 4,  /* no gradient is reported here */
    TLM_HOOK_READONLY = 8, /* rewriting the data does not change the rest of the pass */
    TLM_HOOK_ON_DEMAND = 16 /* made only when its byte in fwd or bwd is set (hook_attn_in, the split q/k/v
                              inputs, attn.hook_result, hook_mlp_in): a pass that does not ask pays nothing */
};
typedef int (*tlm_hook_fn)(void *user, int hook_id, float *data, int ndim, const int64_t *shape, int is_grad);
TLM_API int tlm_hook_count(const tlm_model *m);
TLM_API int tlm_hook_info(const tlm_model *m, int id, char *name, size_t name_cap, int B, int T, int64_t shape[5],
                  int *flags);
TLM_API int tlm_set_hooks(tlm_model *m, tlm_hook_fn fn, void *user, const unsigned char *fwd, const unsigned char *bwd);
/* The engine's attention visibility rule for layer `layer` (causal, its sliding window) over a
 * row whose real tokens begin at position `start` (left padding; 0: none): fills mask [T, T] with
 * 1 where query i sees key j, else 0; no key before `start` is seen, and a pad query (i < start)
 * sees itself alone. -1 (tlm_error) for a layer, T or start out of range. (Interface version 9
 * added `start`: a call of version 8 is start = 0.) */
TLM_API int tlm_attention_mask(const tlm_model *m, int layer, int T, int start, unsigned char *mask);
/* Backward of the last forward from a gradient of its logits [B, T, vocab] (a metric's), not the loss's. */
TLM_API int tlm_backward_logits(tlm_model *m, const float *dlogits);

/* ---- more for bindings (python/tinylm) --------------------------------------------------------- */
/* The model's config as a tinylm config.json text (malloc'd: tlm_free_mem). */
TLM_API char *tlm_config_json(const tlm_model *m);
TLM_API void tlm_free_mem(void *p);
TLM_API void tlm_set_threads(int n);
/* Tokenizers: a path (tokenizer.json, llama2.c .bin, a directory), or NULL + the model's path for
 * the one stored with the model. Encode returns malloc'd ids (tlm_free_mem). */
typedef struct tlm_tokenizer tlm_tokenizer;
TLM_API tlm_tokenizer *tlm_tok_open(const char *path, const char *model_path);
TLM_API void tlm_tok_close(tlm_tokenizer *t);
TLM_API int *tlm_tok_encode(const tlm_tokenizer *t, const char *text, size_t len, int bos, size_t *n);
TLM_API char *tlm_tok_decode(const tlm_tokenizer *t, const int *ids, size_t n, size_t *len);
TLM_API const char *tlm_tok_piece(const tlm_tokenizer *t, int prev, int id, size_t *len);
TLM_API int tlm_tok_bos(const tlm_tokenizer *t);
TLM_API int tlm_tok_eos(const tlm_tokenizer *t);
TLM_API int tlm_tok_vocab_size(const tlm_tokenizer *t);

/* ---- added with interface version 2 (python/tinylm) ------------------------------------------ */
/* Threads 1..1024 (else -1 and a message); in a forked child always 1 (libgomp's threads do not
 * survive fork). tlm_set_threads ignores a value out of range (the message is set). */
TLM_API int tlm_set_threads_checked(int n);
TLM_API int tlm_threads(void);
/* 1 in a child forked from a process that had loaded the library */
TLM_API int tlm_is_forked_child(void);
/* max_position_embeddings: no forward takes a longer sequence */
TLM_API int tlm_max_positions(const tlm_model *m);
/* Process-wide: loading accepts weights holding NaN/Inf (with a warning) — the CLI's --allow-nonfinite */
TLM_API void tlm_allow_nonfinite(int allow);

/* ---- interface version 9: rules a binding asks for instead of restating them ------------------ */
/* The gains norm weights w [n] apply, into gain [n] (may be w): w itself, or 1 + w for Gemma's
 * (1 + w) RMSNorm (norm_type rmsnorm_1p, its QK-norm too), which stores w. -1 for NULL arrays. */
TLM_API int tlm_norm_gain(const tlm_model *m, const float *w, float *gain, size_t n);
/* The norm that reads the residual stream going into layer `layer`'s attention (sublayer 0) or its
 * FFN (sublayer 1), or, for layer = the number of layers, the final norm: writes its hook-name
 * prefix ("blocks.2.ln1", "blocks.2.ln2", "ln_final"; its weight is that + ".w") into name (cap
 * bytes) and returns 1; 0 where no norm reads it (the placement normalises elsewhere: post,
 * output, DeepNorm, none; a model without a final norm); -1 (tlm_error) for bad arguments. */
TLM_API int tlm_input_norm(const tlm_model *m, int layer, int sublayer, char *name, size_t cap);
/* Called by a forward hook callback that left the data as it was: the pass then goes on as if
 * no callback had run there (for hook_pattern: z is not computed again from the pattern, so a
 * no-op rewrite keeps the logits bit-identical). */
TLM_API void tlm_hook_unchanged(tlm_model *m);
/* The sampler of `tinylm generate` (src/infer/sampler.c): the same settings and seed give the same
 * tokens (llama2.c checkpoints: run.c's stream). NULL + message on a setting out of range. */
typedef struct tlm_sampler tlm_sampler;
TLM_API tlm_sampler *tlm_sampler_new(const tlm_model *m, float temperature, int top_k, float top_p, uint64_t seed);
TLM_API int tlm_sampler_next(tlm_sampler *s, const float *logits);
TLM_API void tlm_sampler_free(tlm_sampler *s);
/* `tinylm generate` itself (KV cache; stops at the tokenizer's BOS or EOS, which are not
 * returned): up to max_new ids into ids_out, their count in *n_out. No hooks may be attached.
 * tok NULL: ids only, and no stop before max_new. */
TLM_API int tlm_generate(tlm_model *m, const tlm_tokenizer *tok, const int *prompt, int n_prompt, int max_new,
                         float temperature, int top_k, float top_p, uint64_t seed, int *ids_out, int *n_out);

/* ---- added with interface version 4: the parameters (python/tinylm Model.weights) ------------ */
/* The tensor table (docs/tensors.md names, in buffer order): count, and the name of tensor i
 * (NULL + message out of range). */
TLM_API int tlm_param_count(const tlm_model *m);
TLM_API const char *tlm_param_name(const tlm_model *m, int i);
/* The f32 values of a named parameter in the model's own buffer (row-major; q|k|v and gate|up
 * lie back to back), its shape (unused dimensions 1) and number of dimensions; NULL + message
 * for an unknown name or bf16-converted weights. Valid until tlm_free or tlm_params_writable. */
TLM_API const float *tlm_param(const tlm_model *m, const char *name, int64_t shape[2], int *ndim);
/* Makes the parameter buffer safe to write (the next pass sees the edits): a read-only file
 * mapping is copied into an owned buffer first (tlm_param pointers change); bf16-converted
 * weights are refused (-1 + message). 0: writable. With bf16 products on (tlm_set_precision) the
 * products read a bf16 copy of the weights, made when the precision is set and again by this
 * call: after editing, call it again before the next pass. */
TLM_API int tlm_params_writable(tlm_model *m);

/* ---- interface version 5: mixed precision ---- */
/* bf16 1: the matrix products over many rows (forward and backward) on bf16 operands summed in
 * f32, on AMX or AVX512-BF16; everything else f32 (docs/training.md, "Mixed precision"). 0: f32
 * products (the default). Returns 1 when bf16 products are on, 0 when off: asked for bf16 on a
 * CPU without them, 0 and tlm_error_message() says why; -1 + message when out of memory. */
TLM_API int tlm_set_precision(tlm_model *m, int bf16);

/* ---- interface version 6: the values of weights not kept in f32 ---- */
/* A new model (free with tlm_free) whose parameters are m's, each widened to the f32 value it
 * encodes: a GGUF file's quantized blocks, bf16-converted weights, or f32 ones copied. For
 * reading the weights of a model that keeps no f32 buffer (python/tinylm Model.weights());
 * it costs 4 bytes per parameter. NULL + message when out of memory. */
TLM_API tlm_model *tlm_f32_copy(const tlm_model *m);

/* ---- interface version 7: generation one token at a time (python/tinylm generate: hooks at every
 * step through the KV cache, streaming), the HTML views of the Python package ---- */
typedef struct tlm_gen tlm_gen;
/* A generation of up to max_new tokens after prompt, with a KV cache of its own and `tinylm generate`'s
 * sampler (the same seed, the same stream). NULL + message on a bad setting, a token out of range, or
 * prompt + max_new past max_position_embeddings. It holds no pointer into m: free it before or after m. */
TLM_API tlm_gen *tlm_gen_new(tlm_model *m, const int *prompt, int n_prompt, int max_new, float temperature,
                             int top_k, float top_p, uint64_t seed);
/* The next token into *token: runs what is pending through the cache on model m (the prompt at the first
 * call, in one pass when hooks are attached; then the token the last call returned) and samples. With hooks
 * attached (tlm_set_hooks) the pass runs in the training layout and calls them at every point but the
 * attention scores and pattern (the cache keeps no [T, T] map), over the positions this step computes;
 * without, `tinylm generate`'s own pass (its logits bit for bit). The caller stops at BOS/EOS. -1 +
 * message when a pass fails (the generation is then unusable) or max_new tokens were made. */
TLM_API int tlm_gen_next(tlm_model *m, tlm_gen *g, int *token);
/* positions in the generation's cache (the prompt's and the tokens fed so far) */
TLM_API int tlm_gen_position(const tlm_gen *g);
TLM_API void tlm_gen_free(tlm_gen *g);
/* A self-contained HTML page (src/report: the page of `tinylm inspect --html`, its CSP, report.js) drawing
 * data_json, a JSON object of kind "pattern" (attention patterns) or "positions" (arrays over the
 * positions); malloc'd (tlm_free_mem), *len bytes. NULL + message for anything else. */
TLM_API char *tlm_report_html(const char *title, const char *data_json, size_t *len);

/* ---- interface version 8: padded batches (python/tinylm tokenize_batch, attention_mask) ---- */
/* tlm_forward over left-padded rows: start [B] (NULL: none) is the index of row b's first real token
 * (0 <= start[b] < T). No real query attends to a pad before it (a pad query sees only itself), and
 * positions (RoPE, learned) count from it, as Hugging Face's position_ids from an attention mask: row
 * b's token t sits at position t - start[b]. The backward of this forward (tlm_backward,
 * tlm_backward_logits) follows the same rule. Right padding needs no start (attention is causal; give
 * the pads a negative target). */
/* Several prompts continued at once through one batched KV cache (each row its own keys and values;
 * the prompts left-padded to the longest, start per row as tlm_forward_padded): prompts holds the
 * batch's prompts back to back, lens[b] tokens each; every row has its own sampler with the same
 * settings and seed, so a row samples what tlm_gen_new on its prompt alone would sample from the
 * same logits (they agree to float32 rounding: batched products, not the one-token step's). With
 * hooks attached (tlm_set_hooks) a step runs in the training layout, the prompts in one pass, and the
 * hooks see [batch, T, ...] (as tlm_gen_next's, not the attention scores and pattern). NULL +
 * message on a bad setting, a token out of range or the longest prompt + max_new past
 * max_position_embeddings. tlm_gen_batch_next writes one token per row into tokens [batch] (the
 * caller stops a row at BOS/EOS and ignores what it makes afterwards). */
typedef struct tlm_gen_batch tlm_gen_batch;
TLM_API tlm_gen_batch *tlm_gen_batch_new(tlm_model *m, const int *prompts, const int *lens, int batch, int max_new,
                                         float temperature, int top_k, float top_p, uint64_t seed);
TLM_API int tlm_gen_batch_next(tlm_model *m, tlm_gen_batch *g, int *tokens);
TLM_API void tlm_gen_batch_free(tlm_gen_batch *g);
TLM_API int tlm_forward_padded(tlm_model *m, const int *tokens, const int *targets, const int *start, int B, int T,
                               float *loss);

/* ---- contexts: several runs of one model at once (docs/architecture.md) ----
 * A model is its config and weights; what a pass writes (activations, a KV cache, hooks, the mode)
 * lives in a context. The functions above that take a tlm_model run in the model's own default
 * context, and each tlm_gen / tlm_gen_batch in one of its own. More contexts may be made on one
 * model, and contexts of one model may run at the same time from different threads, in either
 * precision (inference: not tlm_backward, tlm_set_precision, tlm_params_writable or weight edits
 * while they run: those write the model). Each
 * runs its passes on n_threads OpenMP threads (0: the count of the thread that calls), set around
 * each call for the calling thread alone. Free a context before its model. */
typedef struct tlm_context tlm_context;
TLM_API tlm_context *tlm_context_new(const tlm_model *m, int n_threads);
TLM_API void tlm_context_free(tlm_context *ctx);
/* tlm_forward in this context: tokens [B, T], optional targets and loss; logits [B, T, vocab] of
 * its last forward, valid until its next call */
TLM_API int tlm_context_forward(tlm_context *ctx, const int *tokens, const int *targets, int B, int T, float *loss);
TLM_API const float *tlm_context_logits(const tlm_context *ctx);
/* tlm_set_hooks on this context's passes only */
TLM_API int tlm_context_set_hooks(tlm_context *ctx, tlm_hook_fn fn, void *user, const unsigned char *fwd,
                                  const unsigned char *bwd);
/* tlm_generate in this context (its own KV cache while it runs); tok NULL: ids only, no stop at
 * BOS/EOS before max_new */
TLM_API int tlm_context_generate(tlm_context *ctx, const tlm_tokenizer *tok, const int *prompt, int n_prompt,
                                 int max_new, float temperature, int top_k, float top_p, uint64_t seed, int *ids_out,
                                 int *n_out);

/* ---- interface version 10: a cache the pass writes itself (python/tinylm run_with_cache) --------- */
/* With hooks set (tlm_set_hooks, whose fn may then skip those points), every later pass writes the
 * activation at each point id whose fwd[id] is not NULL straight into that memory, and the gradient
 * into bwd[id], after any callback there ran: float32, C order, tlm_hook_info's shape for the pass's
 * [B, T] (the caller sizes it). As TransformerLens shows them: a norm's hook_scale as the scale
 * (1 / the engine's reciprocal), attention scores with -inf at the keys a query does not see. Such a
 * point counts as asked for (the attention maps are kept only when a scores or pattern point is, the
 * on-demand points made only when asked). fwd and bwd hold tlm_hook_count pointers each, or are NULL;
 * tlm_set_hooks again (or with fn NULL) drops them. A captured attention map (scores, pattern) is
 * written into fwd[id] by the attention kernel and read from there by the backward (when the hooks
 * are the only observer): keep that memory as the forward left it until its backward. */
TLM_API int tlm_set_capture(tlm_model *m, float *const *fwd, float *const *bwd);
/* What the passes since the last tlm_set_hooks did for it: out[0] activations and gradients the
 * capture copied (a captured attention map is written there by the attention kernel itself, and
 * read there by the backward: not counted), out[1] callbacks made, out[2] 1 when the last pass
 * kept the [B, H, T, T] attention maps, out[3] floats of the on-demand points' memory its passes
 * used (that memory stays with the model between calls). -1 without hooks. */
TLM_API int tlm_hook_stats(const tlm_model *m, int64_t out[4]);

/* ---- interface version 11: split q/k/v inputs per head (python/tinylm set_use_split_qkv_input) ---- */
/* per_head 1: hook_q_input / hook_k_input / hook_v_input are a copy of the stream per head, as
 * TransformerLens' use_split_qkv_input: [B, T, n_heads, d] for q, [B, T, n_kv_heads, d] for k and v
 * (tlm_hook_info's shapes follow), each head's q, k, v computed from its own copy through the input
 * norm; 0 (the default): one [B, T, d] copy each. Between passes; 0, or -1 without a model. */
TLM_API int tlm_set_split_qkv_input(tlm_model *m, int per_head);

#ifdef __cplusplus
}
#endif
#endif
