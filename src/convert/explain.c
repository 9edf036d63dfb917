/* explain.c — `tinylm info --explain`: a config read aloud, one fact per line, in the words of
 * the "build a small model" lessons. Everything comes from the parsed tlm_config (so a family's
 * fixed architecture and a tinylm switch read the same); the norms are named as the family's
 * checkpoint names them, since those names mislead (Llama's post_attention_layernorm is the
 * FFN's input norm; Gemma's and OLMo 2's norm the attention's output). */
#include "explain.h"

#include <math.h>
#include <string.h>

/* checkpoint names of the norms of a layer, for the families whose names differ from ours: the family
 * table's naming (Mixtral's layer norms are Llama's) */
typedef enum { NAMES_TINYLM, NAMES_LLAMA, NAMES_GEMMA, NAMES_OLMO2, NAMES_GPT2 } naming;

static naming naming_of(const tlm_config *c) {
    const tlm_family *f = family_find(c->model_type);
    if (!f) return NAMES_TINYLM;
    switch (f->names) {
    case HF_FAMILY_LLAMA:
    case HF_FAMILY_MIXTRAL: return NAMES_LLAMA;
    case HF_FAMILY_GEMMA: return NAMES_GEMMA;
    case HF_FAMILY_OLMO2: return NAMES_OLMO2;
    case HF_FAMILY_GPT2: return NAMES_GPT2;
    }
    return NAMES_TINYLM;
}

static void explain_norm(FILE *o, const tlm_config *c) {
    switch (c->norm) {
    case NORM_RMSNORM:
        fprintf(o, "norm: RMSNorm, y = w * x / sqrt(mean(x^2) + eps): weight w (starts at 1), no mean subtracted, "
                   "no bias; eps = %g, inside the sqrt%s\n", c->norm_eps,
                !strncmp(c->model_type, "gemma4", 6) ? " (Gemma 4 multiplies by w itself again, not Gemma 2/3's 1 + w)"
                                                       : "");
        break;
    case NORM_RMSNORM_1P:
        fprintf(o, "norm: RMSNorm, Gemma's 1 + w form, y = (1 + w) * x / sqrt(mean(x^2) + eps): the stored weight w "
                   "is an offset from 1 (starts at 0); eps = %g, inside the sqrt\n", c->norm_eps);
        break;
    case NORM_LAYERNORM:
        fprintf(o, "norm: LayerNorm, y = g * (x - mean(x)) / sqrt(var(x) + eps)%s: weight g (starts at 1), %s; "
                   "eps = %g, inside the sqrt\n",
                c->norm_bias ? " + b" : "", c->norm_bias ? "with bias b (starts at 0)" : "without bias",
                c->norm_eps);
        break;
    case NORM_DYT:
        fprintf(o, "norm: DyT (Dynamic Tanh), y = g * tanh(alpha * x) + b: no statistics (no eps), a learnable "
                   "scalar alpha per norm starting at %g\n", c->dyt_alpha_init);
        if (c->dyt_alpha_init_attn > 0.0f || c->dyt_alpha_init_ffn > 0.0f || c->dyt_alpha_init_final > 0.0f)
            fprintf(o, "  alpha0 by position: attention norms %g, FFN norms %g, final norm %g\n",
                    c->dyt_alpha_init_attn > 0.0f ? c->dyt_alpha_init_attn : c->dyt_alpha_init,
                    c->dyt_alpha_init_ffn > 0.0f ? c->dyt_alpha_init_ffn : c->dyt_alpha_init,
                    c->dyt_alpha_init_final > 0.0f ? c->dyt_alpha_init_final : c->dyt_alpha_init);
        break;
    }
}

/* one norm of a layer: its checkpoint name and where it sits */
static void norm_line(FILE *o, const char *name, const char *where) { fprintf(o, "  %-28s %s\n", name, where); }

static void explain_placement(FILE *o, const tlm_config *c) {
    const naming nm = naming_of(c);
    const char *res = c->residual ? "" : " (residual: false, so no x +)";
    int per_layer = 0;
    switch (c->placement) {
    case PLACE_PRE:
        fprintf(o, "placement: Pre-Norm, h = x + F(N(x)) for each sublayer: the norm is the sublayer's input%s\n", res);
        per_layer = 2;
        break;
    case PLACE_POST:
        fprintf(o, "placement: Post-Norm, h = N(x + F(x)): the norm comes after the residual add (the original "
                   "Transformer)%s\n", res);
        per_layer = 2;
        break;
    case PLACE_SANDWICH:
        fprintf(o, "placement: sandwich, h = x + N2(F(N1(x))): a norm before each sublayer and one on its output "
                   "before the residual add%s\n", res);
        per_layer = 4;
        break;
    case PLACE_OUTPUT:
        fprintf(o, "placement: output norms (OLMo 2), h = x + N(F(x)): no input norm; each sublayer's output is "
                   "normed before the residual add%s\n", res);
        per_layer = 2;
        break;
    case PLACE_NONE:
        fprintf(o, "placement: none, h = x + F(x): no norm inside the blocks%s\n", res);
        break;
    case PLACE_DEEPNORM:
        fprintf(o, "placement: DeepNorm (DeepNet, Wang et al. 2022), h = N(alpha * x + F(x)): Post-Norm with the "
                   "residual scaled by alpha = %g (%s)\n",
                config_deepnorm_alpha(c), c->deepnorm_alpha > 0 ? "given" : "(2N)^(1/4), N = num_hidden_layers");
        fprintf(o, "  init: v_proj, o_proj and the FFN matrices scaled by beta = %g (%s); q_proj, k_proj keep 1\n",
                config_deepnorm_beta(c), c->deepnorm_beta > 0 ? "given" : "(8N)^(-1/4)");
        per_layer = 2;
        break;
    }
    if (config_mla(c)) per_layer += 1 + (c->q_lora_rank > 0); /* (MLA's c_q and c_kv norms) */
    const int block = c->moe_block && config_moe_layers(c) > 0; /* (Gemma 4's MoE block: three more) */
    fprintf(o, "norms per layer: %d%s%s\n", per_layer + 3 * block, block ? " (in an MoE layer)" : "",
            c->final_norm ? ", plus one final norm before the LM head" : ", and no final norm before the LM head");
    if (!per_layer) return;
    /* the names, in order of use in a layer */
    if (nm == NAMES_LLAMA && c->placement == PLACE_PRE) {
        norm_line(o, "input_layernorm", "before attention (the attention's input norm)");
        norm_line(o, "post_attention_layernorm",
                  "before the FFN: despite its name, the FFN's INPUT norm (applied after the attention's residual "
                  "add, to the stream going into the MLP), not a norm of the attention output");
    } else if (nm == NAMES_GEMMA && c->placement == PLACE_SANDWICH) {
        norm_line(o, "input_layernorm", "before attention (input norm)");
        norm_line(o, "post_attention_layernorm",
                  "on the attention OUTPUT, before the residual add (an output norm; unlike Llama's, which is the "
                  "pre-FFN norm)");
        norm_line(o, "pre_feedforward_layernorm", "before the FFN (input norm)");
        if (block) {
            norm_line(o, "post_feedforward_layernorm_1", "on the dense MLP's output (MoE block)");
            norm_line(o, "pre_feedforward_layernorm_2", "before the experts, on the stream (MoE block)");
            norm_line(o, "post_feedforward_layernorm_2", "on the experts' weighted sum (MoE block)");
        }
        norm_line(o, "post_feedforward_layernorm",
                  block ? "on the sum of the two, before the residual add (output norm)"
                        : "on the FFN output, before the residual add (output norm)");
    } else if (nm == NAMES_OLMO2 && c->placement == PLACE_OUTPUT) {
        norm_line(o, "post_attention_layernorm",
                  "on the attention OUTPUT, before the residual add (an output norm; unlike Llama's, which is the "
                  "pre-FFN norm)");
        norm_line(o, "post_feedforward_layernorm", "on the FFN output, before the residual add (output norm)");
    } else if (nm == NAMES_GPT2 && c->placement == PLACE_PRE) {
        norm_line(o, "ln_1", "before attention (input norm)");
        norm_line(o, "ln_2", "before the MLP (input norm)");
    } else { /* the engine's names */
        const int in = placement_has_input_norm(c->placement), post = placement_has_post_norm(c->placement);
        if (in || post)
            norm_line(o, "attn_norm", in ? "before attention (input norm)" : "after the attention's residual add");
        if (placement_has_output_norm(c->placement))
            norm_line(o, "attn_out_norm", "on the attention output, before the residual add");
        if (in || post) norm_line(o, "ffn_norm", in ? "before the FFN (input norm)" : "after the FFN's residual add");
        if (block) {
            norm_line(o, "dense_out_norm", "on the dense FFN's output (MoE block)");
            norm_line(o, "moe_in_norm", "before the experts, on the stream (MoE block)");
            norm_line(o, "moe_out_norm", "on the experts' weighted sum (MoE block)");
        }
        if (placement_has_output_norm(c->placement))
            norm_line(o, "ffn_out_norm", "on the FFN output, before the residual add");
    }
    if (config_mla(c)) { /* DeepSeek's two more RMSNorms, inside the attention on the compressed vectors */
        if (c->q_lora_rank > 0)
            norm_line(o, nm == NAMES_TINYLM ? "attn.q_a_norm" : "self_attn.q_a_layernorm",
                      "inside MLA: a plain RMSNorm (w) of the compressed query c_q = W_qa x (q_lora_rank wide)");
        norm_line(o, nm == NAMES_TINYLM ? "attn.kv_a_norm" : "self_attn.kv_a_layernorm",
                  "inside MLA: a plain RMSNorm (w) of the compressed key/value c_kv = W_kva x (kv_lora_rank wide); "
                  "the KV cache holds its output");
    }
    if (c->final_norm)
        norm_line(o, nm == NAMES_GPT2 ? "ln_f" : nm == NAMES_TINYLM ? "final_norm" : "norm", "after the last block");
    if (c->layer_scalar)
        norm_line(o, "layer_scalar", "not a norm: one learned number per layer that multiplies the whole stream after "
                                     "the layer (after the FFN's residual add)");
}

static void explain_attention(FILE *o, const tlm_config *c) {
    const int H = c->n_heads, KV = c->n_kv_heads;
    if (config_mla(c)) {
        const int dn = c->qk_nope_dim, dr = c->qk_rope_dim, dv = c->v_head_dim;
        fprintf(o, "attention: multi-head latent attention (MLA, DeepSeek-V2/V3), %d heads\n", H);
        if (c->q_lora_rank > 0)
            fprintf(o, "  q = W_qb RMSNorm(W_qa x): through a compressed query of q_lora_rank %d\n", c->q_lora_rank);
        else
            fprintf(o, "  q = W_q x (q_lora_rank null: one q projection)\n");
        fprintf(o, "  [c_kv, k_pe] = W_kva x: c_kv of kv_lora_rank %d and one RoPE key k_pe of %d dims shared by all "
                   "heads; [k_nope, v] of each head = W_kvb RMSNorm(c_kv)\n", c->kv_lora_rank, dr);
        fprintf(o, "  each head: q.k over %d nope + %d rope dims (RoPE on q_pe and k_pe only%s), v of %d dims; "
                   "o_proj reads %d x %d\n", dn, dr, c->rope_interleave ? ", pairs interleaved: de-interleaved first" : "",
                dv, H, dv);
        fprintf(o, "  attention scale: %g (1/sqrt(%d)%s)\n", config_attention_scale(c, 0), dn + dr,
                c->rope_scaling == ROPE_SCALING_YARN && c->rope_mscale_all_dim > 0
                    ? " times YaRN's mscale(factor, mscale_all_dim)^2"
                    : "");
        fprintf(o, "  KV cache: c_kv + k_pe = %d floats a token and layer, against %d for MHA's K and V of the same "
                   "heads; decoding folds W_kvb's key half into the query and its value half after the weighted sum "
                   "(absorbed form)\n", c->kv_lora_rank + dr, H * (dn + dr + dv));
        fprintf(o, "layers: all %d full (causal) attention, no sliding window\n", c->n_layers);
        return;
    }
    fprintf(o, "attention: %d query heads, %d key/value heads: ", H, KV);
    if (KV == H)
        fprintf(o, "multi-head (MHA, GQA ratio 1)\n");
    else if (KV == 1)
        fprintf(o, "multi-query (MQA): one K/V head shared by all %d query heads (GQA ratio %d)\n", H, H);
    else
        fprintf(o, "grouped-query (GQA), ratio %d: each K/V head is shared by %d query heads\n", H / KV, H / KV);
    fprintf(o, "head_dim: %d%s; q projection %d wide, k and v %d each%s\n", c->head_dim,
            c->head_dim * H == c->d_model ? " (= hidden_size / heads)"
            : c->head_dim_default         ? " (the family's class default, the file gives none: not hidden_size / "
                                            "heads)"
                                          : " (given: not hidden_size / heads)",
            H * c->head_dim, KV * c->head_dim, c->head_dim_full || c->n_kv_heads_full ? " (sliding layers)" : "");
    /* Gemma 4: the full layers have a shape of their own */
    if (c->head_dim_full || c->n_kv_heads_full) {
        const int hdf = c->head_dim_full ? c->head_dim_full : c->head_dim;
        const int kvf = c->n_kv_heads_full ? c->n_kv_heads_full : KV;
        fprintf(o, "full-attention layers: head_dim %d%s, %d key/value heads%s (GQA ratio %d): q projection %d wide, "
                   "k %d\n", hdf, c->head_dim_full ? " (global_head_dim)" : "", kvf,
                c->n_kv_heads_full ? " (num_global_key_value_heads)" : "", H / kvf, H * hdf, kvf * hdf);
    }
    if (c->k_eq_v)
        fprintf(o, "K = V on the full-attention layers (attention_k_eq_v): no v_proj, the values are the k "
                   "projection itself, taken before k's norm and RoPE (then the v norm)\n");
    if (c->n_kv_shared > 0) {
        const int first = config_first_kv_shared(c);
        fprintf(o, "shared keys and values: the last %d layers (%d..%d) compute no k or v; each attends over the "
                   "keys/values of the last earlier layer of its type (", c->n_kv_shared, first, c->n_layers - 1);
        int said_s = 0, said_f = 0;
        for (int l = first; l < c->n_layers; l++) {
            const int full = config_layer_full_attention(c, l);
            if (full ? said_f++ : said_s++) continue;
            fprintf(o, "%s%s: layer %d", said_s + said_f > 1 ? ", " : "", full ? "full" : "sliding",
                    config_kv_source(c, l));
        }
        fprintf(o, "); the KV cache holds them once\n");
        if (c->ffn_double_shared)
            fprintf(o, "use_double_wide_mlp: those %d layers' FFN is twice as wide, intermediate size %d\n",
                    c->n_kv_shared, 2 * c->d_ff);
    }
    if (c->query_pre_attn_scalar == 1.0f && c->qk_norm != QK_NORM_NONE)
        fprintf(o, "attention scale: 1 (scores are q . k unscaled, no 1/sqrt(head_dim): the QK-norm fixes their "
                   "size)\n");
    else if (c->query_pre_attn_scalar == 1.0f)
        fprintf(o, "attention scale: 1 (scores are q . k unscaled, no 1/sqrt(head_dim)%s; no QK-norm bounds "
                   "their size)\n", !strcmp(c->model_type, "gpt2") ? ": scale_attn_weights false" : "");
    else if (c->query_pre_attn_scalar > 0)
        fprintf(o, "attention scale: 1/sqrt(query_pre_attn_scalar = %g) instead of 1/sqrt(head_dim)\n",
                c->query_pre_attn_scalar);
    else
        fprintf(o, "attention scale: 1/sqrt(head_dim = %d)\n", c->head_dim);
    const char *qk_w = c->norm == NORM_RMSNORM_1P ? "1 + w" : "w";
    if (c->qk_norm == QK_NORM_HEAD)
        fprintf(o, "QK-norm: per head, an RMSNorm (%s) of each head's q and k over head_dim (weight of %d, shared "
                   "by the heads), before RoPE\n", qk_w, c->head_dim);
    else if (c->qk_norm == QK_NORM_FULL)
        fprintf(o, "QK-norm: over all heads, an RMSNorm (%s) of the whole q projection (%d wide) and k projection "
                   "(%d wide), before RoPE\n", qk_w, H * c->head_dim, KV * c->head_dim);
    else
        fprintf(o, "QK-norm: none\n");
    if (c->v_norm)
        fprintf(o, "V norm: an RMSNorm of each head's v over head_dim WITHOUT a weight (no learned scale), eps = %g\n",
                c->norm_eps);
    if (c->attn_softcap > 0)
        fprintf(o, "attention soft-cap: %g, scores <- %g * tanh(scores / %g) before the softmax\n", c->attn_softcap,
                c->attn_softcap, c->attn_softcap);
    else
        fprintf(o, "attention soft-cap: none\n");
    /* sliding layers: how many, and the repeating pattern */
    int n_sliding = 0;
    for (int l = 0; l < c->n_layers; l++) n_sliding += c->sliding_window > 0 && c->layer_sliding[l];
    if (n_sliding == 0) {
        fprintf(o, "layers: all %d full (causal) attention, no sliding window\n", c->n_layers);
        return;
    }
    fprintf(o, "layers: %d sliding (window %d: each token sees itself and the %d before it), %d full\n", n_sliding,
            c->sliding_window, c->sliding_window - 1, c->n_layers - n_sliding);
    int period = c->n_layers;
    for (int p = 1; p < c->n_layers; p++) {
        int ok = 1;
        for (int l = p; l < c->n_layers && ok; l++) ok = c->layer_sliding[l] == c->layer_sliding[l % p];
        if (ok) {
            period = p;
            break;
        }
    }
    fprintf(o, "layer pattern:");
    for (int l = 0; l < c->n_layers && l < 32; l++) fprintf(o, " %s", c->layer_sliding[l] ? "S" : "F");
    fprintf(o, "%s (S sliding, F full)", c->n_layers > 32 ? " ..." : "");
    int s = 0;
    for (int l = 0; l < period; l++) s += c->layer_sliding[l];
    if (period == 2 && s == 1)
        fprintf(o, ": alternating sliding and full\n");
    else if (period < c->n_layers && s > 0 && s < period)
        fprintf(o, ": repeating every %d layers, %d:%d sliding:full\n", period, s, period - s);
    else if (n_sliding == c->n_layers)
        fprintf(o, ": every layer sliding\n");
    else
        fprintf(o, "\n");
}

static void explain_positions(FILE *o, const tlm_config *c) {
    if (c->position == POS_LEARNED) {
        fprintf(o, "positions: learned absolute position embeddings (%d positions), added to the token embedding\n",
                c->max_seq);
        return;
    }
    if (c->position == POS_NONE) {
        fprintf(o, "positions: none (no position information but the causal mask)\n");
        return;
    }
    fprintf(o, "positions: RoPE (rotate-half), base theta %g", c->rope_theta);
    if (c->rope_theta_local > 0 && c->rope_theta_local != c->rope_theta)
        fprintf(o, " on full layers; local base %g on the sliding layers", c->rope_theta_local);
    fprintf(o, "\n");
    if (c->rope_proportional > 0) {
        const int hd = c->head_dim_full ? c->head_dim_full : c->head_dim;
        const int turn = (int)floor((double)c->rope_proportional * hd / 2.0);
        fprintf(o, "RoPE proportional (Gemma 4) on the %s: partial_rotary_factor %g, %d of the %d frequencies "
                   "turn (theta^(-2i/%d), i < %d), the other %d pairs of dims are not rotated\n",
                c->rope_theta_local > 0 ? "full layers" : "layers on the global base", c->rope_proportional, turn,
                hd / 2, hd, turn, hd / 2 - turn);
    }
    if (c->rope_scaling == ROPE_SCALING_LINEAR)
        fprintf(o, "RoPE scaling: linear, positions divided by factor %g%s\n", c->rope_factor,
                c->rope_theta_local > 0 ? " (full layers only)" : "");
    else if (c->rope_scaling == ROPE_SCALING_LLAMA3)
        fprintf(o, "RoPE scaling: llama3, factor %g, low_freq_factor %g, high_freq_factor %g, original context %d\n",
                c->rope_factor, c->rope_low_freq_factor, c->rope_high_freq_factor, c->rope_original_max_pos);
    else if (c->rope_scaling == ROPE_SCALING_YARN)
        fprintf(o, "RoPE scaling: yarn, factor %g, beta_fast %g, beta_slow %g, original context %d%s, mscale %g, "
                   "mscale_all_dim %g%s\n", c->rope_factor, c->rope_beta_fast, c->rope_beta_slow,
                c->rope_original_max_pos > 0 ? c->rope_original_max_pos : c->max_seq,
                c->rope_original_max_pos > 0 ? "" : " (max_position_embeddings)", c->rope_mscale,
                c->rope_mscale_all_dim, c->rope_truncate ? "" : ", not truncated");
    else
        fprintf(o, "RoPE scaling: none\n");
    if (config_mla(c)) fprintf(o, "RoPE width: qk_rope_head_dim %d (MLA rotates only q_pe and k_pe)\n", c->qk_rope_dim);
}

void config_explain_quantization(FILE *o, const tlm_config *c) {
    const char *m = c->quant_method;
    if (!m[0]) return;
    if (!strcmp(m, "fp8")) {
        fprintf(o, "quantization: fp8 (quantization_config): weights stored as F8_%s, each multiplied by the "
                   "weight_scale_inv of its block (", !strcmp(c->quant_fmt, "e5m2") ? "E5M2" : "E4M3");
        if (c->quant_block[0])
            fprintf(o, "blocks of %d x %d weights: weight_block_size; a scale tensor of [ceil(rows / %d), "
                       "ceil(cols / %d)], the last block of a row or column partial", c->quant_block[0],
                    c->quant_block[1], c->quant_block[0], c->quant_block[1]);
        else
            fprintf(o, "no weight_block_size: one scale per tensor");
        fprintf(o, "); norms, embedding, router and head unquantized; tinylm loads it dequantized to float32 "
                   "(exact), activations unquantized\n");
        return;
    }
    const int packed = !strcmp(m, "gptq") || !strcmp(m, "awq");
    fprintf(o, "quantization: %s (quantization_config)", m);
    if (c->quant_bits) fprintf(o, ", %d-bit weights", c->quant_bits);
    if (c->quant_group) fprintf(o, " in groups of %d", c->quant_group);
    fprintf(o, "%s; tinylm does not load it (info only)\n",
            packed ? ", packed integers with per-group scales and zero points (qweight, qzeros, scales)" : "");
}

void config_explain(FILE *o, const tlm_config *c, const config_unknown_keys *unknown) {
    fprintf(o, "model_type %s: %d layers, hidden_size %d, vocab %d, context %d\n", c->model_type, c->n_layers,
            c->d_model, c->vocab_size, c->max_seq);
    explain_norm(o, c);
    explain_placement(o, c);
    explain_attention(o, c);
    explain_positions(o, c);
    static const char *const FFN[] = {"SwiGLU, down(silu(gate(x)) * up(x))", "GeGLU, down(gelu_tanh(gate(x)) * up(x))",
                                      "GELU MLP, down(gelu_tanh(up(x)))"};
    const int moe = config_moe_layers(c);
    if (moe < c->n_layers || c->moe_block)
        fprintf(o, "feed-forward%s: %s, intermediate size %d%s\n",
                c->moe_block ? " (dense, in every layer)" : moe ? " (dense layers)" : "", FFN[c->ffn], c->d_ff,
                c->mlp_bias ? ", with biases" : "");
    if (moe) {
        fprintf(o, "mixture of experts on %d of %d layers (", moe, c->n_layers);
        for (int l = 0, first = 1; l < c->n_layers; l++)
            if (config_layer_is_moe(c, l)) fprintf(o, "%s%d", first ? "" : ", ", l), first = 0;
        fprintf(o, "): %d routed experts of intermediate size %d (%s each), %d chosen per token", c->n_experts,
                c->moe_d_ff, FFN[c->ffn], c->n_experts_per_tok);
        if (c->n_shared_experts && c->shared_d_ff > 0)
            fprintf(o, ", plus a shared expert of intermediate size %d (shared_expert_intermediate_size)", c->shared_d_ff);
        else if (c->n_shared_experts)
            fprintf(o, ", plus a shared expert of %d x %d", c->n_shared_experts, c->moe_d_ff);
        if (c->shared_gate)
            fprintf(o, " whose output is multiplied by sigmoid(%s . x), a learned gate per token",
                    !strcmp(c->model_type, "qwen2_moe") ? "mlp.shared_expert_gate" : "ffn.shared_expert_gate");
        fprintf(o, "\n");
        if (c->scoring == SCORING_SOFTMAX)
            fprintf(o, "router: softmax over the %d experts' logits (%s), the top %d kept%s (%s)", c->n_experts,
                    c->moe_block                           ? "HF: router.proj"
                    : !strcmp(c->model_type, "mixtral")    ? "HF: block_sparse_moe.gate"
                    : !strcmp(c->model_type, "qwen3_moe") || !strcmp(c->model_type, "qwen2_moe") ? "HF: mlp.gate"
                                                           : "the engine's ffn.router",
                    c->n_experts_per_tok, c->norm_topk_prob ? " and renormalised to sum 1" : " as they are",
                    c->moe_block                          ? "Gemma 4"
                    : !strcmp(c->model_type, "mixtral")   ? "Mixtral: always renormalised"
                    : !strcmp(c->model_type, "qwen3_moe") ? "Qwen3-MoE: norm_topk_prob"
                    : !strcmp(c->model_type, "qwen2_moe") ? "Qwen2-MoE: norm_topk_prob"
                                                          : "as Qwen3-MoE, Mixtral");
        else
            fprintf(o, "router: each expert's sigmoid; the top %d chosen by sigmoid + e_score_correction_bias%s, weighted "
                       "by the sigmoid alone%s (DeepSeek-V3)",
                    c->n_experts_per_tok,
                    c->n_group > 1 ? " within the best topk_group groups (a group's score: its best two)" : "",
                    c->norm_topk_prob ? " renormalised to sum 1" : "");
        if (c->routed_scaling_factor != 1.0f) fprintf(o, ", times routed_scaling_factor %g", c->routed_scaling_factor);
        fprintf(o, "; equal scores go to the lower expert index\n");
        if (c->moe_block)
            fprintf(o, "MoE block (Gemma 4, enable_moe_block): the experts run beside the dense FFN, not instead of "
                       "it: f = N1(MLP(N(x))) + N2(experts(N_in2(x))) (HF post_feedforward_layernorm_1 / _2, "
                       "pre_feedforward_layernorm_2), then the FFN's output norm (post_feedforward_layernorm) and "
                       "the residual add; the router reads the stream x itself through a weightless RMSNorm times "
                       "router.scale and hidden_size^-0.5, and each chosen weight, after the renormalisation, is "
                       "multiplied by its expert's router.per_expert_scale\n");
    }
    fprintf(o, "biases: q/k/v %s, o %s\n", c->attn_bias ? "yes" : "no", c->attn_out_bias ? "yes" : "no");
    if (c->embed_scale) fprintf(o, "embedding: token embedding multiplied by sqrt(hidden_size)\n");
    if (c->ple_dim > 0)
        fprintf(o, "per-layer inputs (hidden_size_per_layer_input %d): a second token table of %d x %d (one slice "
                   "per layer) plus a projection of the embedding (RMSNorm'd per layer), averaged (/ sqrt(2)); after "
                   "each layer's FFN, x += N(proj(act(gate(x)) * its slice)), before the layer scalar\n",
                c->ple_dim, c->vocab_size, c->n_layers * c->ple_dim);
    fprintf(o, "head: %s\n", c->tie_embeddings ? "tied, the LM head is the token embedding matrix"
                                               : "untied, a separate lm_head matrix");
    if (c->final_softcap > 0)
        fprintf(o, "final soft-cap: %g, logits <- %g * tanh(logits / %g)\n", c->final_softcap, c->final_softcap,
                c->final_softcap);
    else
        fprintf(o, "final soft-cap: none\n");
    config_explain_quantization(o, c);
    if (c->n_nextn > 0)
        fprintf(o, "multi-token prediction: %d layer%s (num_nextn_predict_layers) stored after the last, layers "
                   "%d..%d: not part of the forward (transformers ignores them on load; tinylm skips them, saying "
                   "so; info counts them on their own line)\n", c->n_nextn, c->n_nextn > 1 ? "s" : "",
                c->n_layers, c->n_layers + c->n_nextn - 1);
    /* the rule the family's _init_weights applies (the engine's init follows it when it trains from the config) */
    const int gpt2 = !strcmp(c->model_type, "gpt2"), hf = strcmp(c->model_type, "tinylm") != 0;
    fprintf(o, "init%s: matrices and embeddings ~ normal(0, %g)%s; norm weights start at %s; biases at 0\n",
            !hf                               ? ""
            : gpt2 && c->scale_residual_init  ? " (GPT2PreTrainedModel._init_weights)"
            : !gpt2 && !c->scale_residual_init ? " (the family's _init_weights in transformers)"
                                               : " (the engine's, training from this config)",
            c->init_std,
            !c->scale_residual_init ? ", no residual scaling"
            : gpt2 ? "; attn.c_proj and mlp.c_proj weights also / sqrt(2 * n_layer)"
                   : "; o_proj and down_proj also / sqrt(2 * num_hidden_layers)",
            c->norm == NORM_RMSNORM_1P ? "0 (the 1 + w form: a gain of 1)" : "1");
    if (!unknown || unknown->n == 0) {
        fprintf(o, "keys: every key of the file was understood\n");
        return;
    }
    fprintf(o, "keys NOT understood (ignored; the explanation above does not account for them):");
    for (int i = 0; i < unknown->n; i++) fprintf(o, " %s", unknown->keys[i]);
    if (unknown->n_missed) fprintf(o, " (and %d more)", unknown->n_missed);
    fprintf(o, "\n");
}
