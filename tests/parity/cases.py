"""cases.py — the grid of parity test cases: name -> config overrides (and optional B, T).

Every case starts from BASE; each entry changes the keys it is named after, so a failing
case points at one architecture switch. Sizes are tiny so the whole grid runs in seconds."""

BASE = {
    "model_type": "tinylm",
    "vocab_size": 67,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 48,
    "max_position_embeddings": 16,
}
B, T = 2, 12
STD = 0.3  # std of the random weight matrices (embeddings get twice this)


def _grid():
    cases = []
    # Every norm type under every placement (layernorm with its bias, so norm biases are covered).
    for nt in ("layernorm", "rmsnorm", "rmsnorm_1p", "dyt"):
        for pl in ("pre", "post", "sandwich", "output", "none"):
            cfg = {"norm_type": nt, "norm_placement": pl}
            if nt == "layernorm":
                cfg["norm_bias"] = True
            # Without norms the stream grows and softmax saturates: smaller weights keep the
            # case well-conditioned (gen_cases.py checks float32 headroom).
            opts = {"std": 0.2} if pl == "none" else {}
            if nt == "dyt" and pl == "none":
                cfg["dyt_alpha_init"] = 2.0  # (the small stream would leave tanh(0.5 x) near-linear, logits flat)
            cases.append(("norm_%s_%s" % (nt, pl), cfg, opts))
    return cases


CASES = _grid() + [
    # DyT: alpha away from its default, so that the key is read (and alpha's gradient is not
    # at a symmetric point); with learned positions and no final norm.
    ("dyt_alpha_init_1.5_sandwich", {"norm_type": "dyt", "dyt_alpha_init": 1.5, "norm_placement": "sandwich"}),
    ("dyt_final_norm_false", {"norm_type": "dyt", "final_norm": False}),
    ("dyt_learned_pos_gelu_mlp_bias", {"norm_type": "dyt", "position_embedding": "learned", "ffn_type": "gelu",
                                       "mlp_bias": True}),
    ("layernorm_nobias_pre", {"norm_type": "layernorm", "norm_bias": False}),
    ("layernorm_nobias_sandwich", {"norm_type": "layernorm", "norm_placement": "sandwich"}),
    # A large eps makes "eps inside the sqrt" visible (1e-5 would hide it under the tolerance).
    ("rmsnorm_eps_0.1", {"norm_eps": 0.1}),
    ("layernorm_eps_0.1", {"norm_type": "layernorm", "norm_bias": True, "norm_eps": 0.1}),
    ("rmsnorm_1p_eps_0.1_qk_norm_head", {"norm_type": "rmsnorm_1p", "norm_eps": 0.1, "qk_norm": "head"}),
    ("residual_false_pre", {"residual": False}),
    ("residual_false_post", {"residual": False, "norm_placement": "post"}),
    ("residual_false_sandwich", {"residual": False, "norm_placement": "sandwich"}),
    ("post_final_norm_true", {"norm_placement": "post", "final_norm": True}),
    ("final_norm_false", {"final_norm": False}),
    ("qk_norm_head_rmsnorm", {"qk_norm": "head"}),
    ("qk_norm_head_rmsnorm_1p", {"qk_norm": "head", "norm_type": "rmsnorm_1p"}),
    ("qk_norm_head_layernorm", {"qk_norm": "head", "norm_type": "layernorm"}),
    ("qk_norm_full_rmsnorm_kv2", {"qk_norm": "full", "num_key_value_heads": 2}),
    ("qk_norm_full_rmsnorm_1p_kv2", {"qk_norm": "full", "norm_type": "rmsnorm_1p", "num_key_value_heads": 2}),
    ("qk_norm_full_learned_pos", {"qk_norm": "full", "position_embedding": "learned"}),
    ("attn_softcap", {"attn_logit_softcapping": 2.0}),
    ("final_softcap", {"final_logit_softcapping": 4.0}),
    ("both_softcaps", {"attn_logit_softcapping": 2.0, "final_logit_softcapping": 4.0}),
    ("gqa_kv2", {"num_key_value_heads": 2}),
    ("mqa_kv1", {"num_key_value_heads": 1}),
    ("head_dim_12", {"head_dim": 12}),
    ("head_dim_16_kv2", {"head_dim": 16, "num_key_value_heads": 2}),
    ("sliding_mixed_layer_types", {"num_hidden_layers": 3, "sliding_window": 4,
                                   "layer_types": ["sliding_attention", "full_attention", "sliding_attention"]}),
    ("sliding_all_default_window3", {"sliding_window": 3}),
    ("sliding_window_ge_T", {"sliding_window": 20}),
    ("untied_head", {"tie_word_embeddings": False}),
    ("ffn_geglu", {"ffn_type": "geglu"}),
    ("ffn_gelu_mlp_bias", {"ffn_type": "gelu", "mlp_bias": True}),
    ("ffn_swiglu_mlp_bias", {"ffn_type": "swiglu", "mlp_bias": True}),
    ("ffn_geglu_mlp_bias", {"ffn_type": "geglu", "mlp_bias": True}),
    ("attention_bias", {"attention_bias": True}),
    ("attention_bias_no_out_bias", {"attention_bias": True, "attention_out_bias": False}),
    ("attention_out_bias_only", {"attention_out_bias": True}),
    ("pos_learned", {"position_embedding": "learned"}),
    ("pos_learned_full_length", {"position_embedding": "learned"}, {"B": 1, "T": 16}),
    ("pos_none", {"position_embedding": "none"}),
    ("rope_theta_500", {"rope_theta": 500.0}),
    ("embedding_scale", {"embedding_scale": True}),
    ("embedding_scale_learned_pos", {"embedding_scale": True, "position_embedding": "learned"}),
    ("query_pre_attn_scalar", {"query_pre_attn_scalar": 24.0}),
    ("gpt2_like", {"norm_type": "layernorm", "norm_bias": True, "position_embedding": "learned",
                   "ffn_type": "gelu", "mlp_bias": True, "attention_bias": True,
                   "intermediate_size": 128}),
    ("gemma2_like", {"norm_type": "rmsnorm_1p", "norm_placement": "sandwich", "norm_eps": 1e-6,
                     "attn_logit_softcapping": 3.0, "final_logit_softcapping": 4.0,
                     "ffn_type": "geglu", "embedding_scale": True, "query_pre_attn_scalar": 20.0,
                     "num_hidden_layers": 3, "sliding_window": 4,
                     "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
                     "num_key_value_heads": 2, "head_dim": 16}),
    ("llama_like", {"num_key_value_heads": 2, "tie_word_embeddings": False, "rope_theta": 500000.0}),
    ("qwen3_like", {"qk_norm": "head", "num_key_value_heads": 2, "head_dim": 16, "norm_eps": 1e-6}),
    # DeepNorm (Wang et al. 2022) at several depths: alpha = (2N)^(1/4) grows with N, so the
    # residual's weight against F differs per case; one with alpha given, one with RMSNorm.
    ("deepnorm_layernorm_2", {"norm_placement": "deepnorm", "norm_type": "layernorm", "norm_bias": True}),
    ("deepnorm_layernorm_6", {"norm_placement": "deepnorm", "norm_type": "layernorm", "num_hidden_layers": 6},
     {"std": 0.15}),  # (deeper: smaller weights keep float32 within the tolerance)
    ("deepnorm_rmsnorm_12", {"norm_placement": "deepnorm", "num_hidden_layers": 12},
     {"T": 6, "std": 0.15}),
    ("deepnorm_alpha_3_final_norm", {"norm_placement": "deepnorm", "deepnorm_alpha": 3.0, "final_norm": True,
                                     "num_key_value_heads": 2}),
    ("olmo2_like", {"norm_placement": "output", "qk_norm": "full", "tie_word_embeddings": False}),
    # Mixtures of experts (docs/config.md "Mixture of experts"): Qwen3-MoE / Mixtral's softmax
    # routing with and without renormalising, a shared expert, dense layers (first_k_dense_replace,
    # decoder_sparse_step, mlp_only_layers), DeepSeek-V3's sigmoid routing with its selection bias,
    # group-limited top-k and scaling factor, the load-balancing loss's gradient, and tied router
    # scores (experts 1 and 2 share a router row: the lower index wins, in engine and reference).
    ("moe_softmax_top2_norm", {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                               "norm_topk_prob": True}),
    ("moe_softmax_top2_nonorm_shared", {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                                        "n_shared_experts": 2}),
    ("moe_qwen2_like_gated_shared", {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 12,
                                     "n_shared_experts": 1, "shared_expert_intermediate_size": 20,
                                     "shared_expert_gate": True, "attention_bias": True}),
    ("moe_mixtral_like_aux", {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                              "norm_topk_prob": True, "num_key_value_heads": 2, "tie_word_embeddings": False},
     {"router_aux_loss_coef": 0.5}),
    ("moe_qwen3_like_step2_aux", {"num_experts": 6, "num_experts_per_tok": 2, "moe_intermediate_size": 12,
                                  "decoder_sparse_step": 2, "num_hidden_layers": 3, "qk_norm": "head",
                                  "norm_topk_prob": True}, {"router_aux_loss_coef": 1.0}),
    ("moe_mlp_only_layers", {"num_experts": 4, "num_experts_per_tok": 1, "moe_intermediate_size": 20,
                             "num_hidden_layers": 3, "mlp_only_layers": [1]}, {"salt": "1"}),
    ("moe_sigmoid_deepseek_like", {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 12,
                                   "scoring_func": "sigmoid", "n_group": 4, "topk_group": 2,
                                   "routed_scaling_factor": 2.5, "norm_topk_prob": True, "n_shared_experts": 1,
                                   "first_k_dense_replace": 1, "num_hidden_layers": 3}, {"B": 4, "salt": "2"}),
    ("moe_sigmoid_nonorm_geglu", {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                                  "scoring_func": "sigmoid", "ffn_type": "geglu"}),
    ("moe_tied_scores_softmax", {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                                 "norm_topk_prob": True}, {"tie_experts": [(1, 2)]}),
    ("moe_tied_scores_sigmoid_groups", {"num_experts": 8, "num_experts_per_tok": 3, "moe_intermediate_size": 12,
                                        "scoring_func": "sigmoid", "n_group": 2, "topk_group": 1,
                                        "norm_topk_prob": True}, {"tie_experts": [(1, 2), (5, 6)], "B": 4}),
    # Gemma 4, one switch at a time, then together: the v norm (RMSNorm of each head's v, no weight),
    # the layer scalar, full layers of their own head_dim / kv heads with proportional RoPE
    ("v_norm", {"v_norm": True, "num_key_value_heads": 2}),
    ("layer_scalar", {"layer_scalar": True, "norm_placement": "sandwich"}),
    ("layer_types_own_shapes", {"num_hidden_layers": 3, "sliding_window": 4, "rope_local_base_freq": 100.0,
                                "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
                                "num_key_value_heads": 2, "global_head_dim": 16, "num_global_key_value_heads": 1}),
    ("rope_proportional_0.25", {"global_head_dim": 16, "rope_proportional_fraction": 0.25, "rope_theta": 100.0}),
    ("gemma4_like", {"norm_type": "rmsnorm", "norm_placement": "sandwich", "norm_eps": 1e-6, "qk_norm": "head",
                     "v_norm": True, "query_pre_attn_scalar": 1.0, "ffn_type": "geglu", "embedding_scale": True,
                     "final_logit_softcapping": 4.0, "layer_scalar": True, "num_hidden_layers": 3,
                     "sliding_window": 4, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
                     "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
                     "num_key_value_heads": 2, "head_dim": 8, "global_head_dim": 16,
                     "num_global_key_value_heads": 1, "rope_proportional_fraction": 0.25}),
    # ... with K = V on the full layers and the last two of five layers sharing the keys and
    # values of layer 2 (sliding) and layer 1 (full): their gradients flow back there
    ("gemma4_k_eq_v_shared_kv", {"norm_type": "rmsnorm", "norm_placement": "sandwich", "qk_norm": "head",
                                 "v_norm": True, "query_pre_attn_scalar": 1.0, "ffn_type": "geglu",
                                 "embedding_scale": True, "final_logit_softcapping": 4.0, "layer_scalar": True,
                                 "num_hidden_layers": 5, "sliding_window": 4, "rope_local_base_freq": 10000.0,
                                 "layer_types": ["sliding_attention", "full_attention", "sliding_attention",
                                                 "sliding_attention", "full_attention"],
                                 "num_key_value_heads": 2, "head_dim": 8, "global_head_dim": 16,
                                 "num_global_key_value_heads": 1, "rope_proportional_fraction": 0.5,
                                 "attention_k_eq_v": True, "num_kv_shared_layers": 2,
                                 "use_double_wide_mlp": True}),
    ("k_eq_v_no_qk_norm_bias", {"attention_k_eq_v": True, "attention_bias": True, "num_key_value_heads": 2}),
    ("shared_kv_pre", {"num_hidden_layers": 3, "num_kv_shared_layers": 1, "num_key_value_heads": 2}),
    # Gemma 4's per-layer inputs (hidden_size_per_layer_input): alone on a Pre-Norm SwiGLU model (silu
    # gate, learned positions in the stream they are made from), and in the Gemma 4 block
    ("per_layer_inputs_pre", {"hidden_size_per_layer_input": 6, "position_embedding": "learned"}),
    ("gemma4_per_layer_inputs", {"norm_type": "rmsnorm", "norm_placement": "sandwich", "qk_norm": "head",
                                 "v_norm": True, "query_pre_attn_scalar": 1.0, "ffn_type": "geglu",
                                 "embedding_scale": True, "final_logit_softcapping": 4.0, "layer_scalar": True,
                                 "num_hidden_layers": 4, "sliding_window": 4, "rope_local_base_freq": 10000.0,
                                 "layer_types": ["sliding_attention", "full_attention", "sliding_attention",
                                                 "full_attention"],
                                 "num_key_value_heads": 2, "head_dim": 8, "global_head_dim": 16,
                                 "num_global_key_value_heads": 1, "rope_proportional_fraction": 0.25,
                                 "attention_k_eq_v": True, "num_kv_shared_layers": 2,
                                 "hidden_size_per_layer_input": 4}),
    # Gemma 4's MoE block (enable_moe_block): the experts beside the dense FFN, each normed, the router
    # on the stream through its own scaled RMSNorm, per-expert weight scales: alone on a sandwich
    # model (with the load-balancing loss), and in the Gemma 4 block with shared K/V and per-layer inputs
    ("moe_block_sandwich_aux", {"norm_placement": "sandwich", "num_experts": 4, "num_experts_per_tok": 2,
                                "moe_intermediate_size": 12, "norm_topk_prob": True, "enable_moe_block": True},
     {"router_aux_loss_coef": 0.5}),
    ("gemma4_moe_block", {"norm_type": "rmsnorm", "norm_placement": "sandwich", "qk_norm": "head",
                          "v_norm": True, "query_pre_attn_scalar": 1.0, "ffn_type": "geglu",
                          "embedding_scale": True, "final_logit_softcapping": 4.0, "layer_scalar": True,
                          "num_hidden_layers": 3, "sliding_window": 4, "rope_local_base_freq": 10000.0,
                          "layer_types": ["sliding_attention", "full_attention", "full_attention"],
                          "num_key_value_heads": 2, "head_dim": 8, "global_head_dim": 16,
                          "num_global_key_value_heads": 1, "rope_proportional_fraction": 0.25,
                          "attention_k_eq_v": True, "num_kv_shared_layers": 1, "hidden_size_per_layer_input": 4,
                          "num_experts": 6, "num_experts_per_tok": 2, "moe_intermediate_size": 8,
                          "norm_topk_prob": True, "enable_moe_block": True}),
    # Multi-head latent attention (DeepSeek-V2/V3; docs/config.md "Multi-head latent attention"): with and
    # without q_lora, RoPE pairs interleaved or in halves, v narrower and wider than q.k, YaRN (scaled
    # tables and the mscale_all_dim softmax correction), and the DeepSeek-V3 block (MLA + sigmoid routing)
    ("mla_q_lora", {"kv_lora_rank": 12, "q_lora_rank": 16, "qk_nope_head_dim": 6, "qk_rope_head_dim": 4,
                    "v_head_dim": 8}),
    ("mla_q_lora_interleave", {"kv_lora_rank": 12, "q_lora_rank": 16, "qk_nope_head_dim": 6, "qk_rope_head_dim": 4,
                               "v_head_dim": 8, "rope_interleave": True}),
    ("mla_no_q_lora_interleave_wide_v", {"kv_lora_rank": 10, "q_lora_rank": None, "qk_nope_head_dim": 4,
                                         "qk_rope_head_dim": 6, "v_head_dim": 12, "rope_interleave": True}),
    ("mla_yarn", {"kv_lora_rank": 12, "q_lora_rank": 16, "qk_nope_head_dim": 4, "qk_rope_head_dim": 8,
                  "v_head_dim": 8, "rope_theta": 100.0,
                  "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 6,
                                   "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 0.707, "mscale_all_dim": 1.0}}),
    ("mla_yarn_no_q_lora_sandwich", {"kv_lora_rank": 8, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
                                     "v_head_dim": 6, "norm_placement": "sandwich", "norm_type": "rmsnorm_1p",
                                     "rope_scaling": {"type": "yarn", "factor": 8.0,
                                                      "original_max_position_embeddings": 4}}),
    ("deepseek_v3_like", {"kv_lora_rank": 12, "q_lora_rank": 16, "qk_nope_head_dim": 6, "qk_rope_head_dim": 4,
                          "v_head_dim": 8, "rope_interleave": True, "num_experts": 8, "num_experts_per_tok": 2,
                          "moe_intermediate_size": 12, "scoring_func": "sigmoid", "n_group": 4, "topk_group": 2,
                          "routed_scaling_factor": 2.5, "norm_topk_prob": True, "n_shared_experts": 1,
                          "first_k_dense_replace": 1, "num_hidden_layers": 3, "tie_word_embeddings": False,
                          "norm_eps": 1e-6}, {"B": 4, "salt": "2"}),
]


def all_cases():
    """[(name, config, options)] with BASE merged in; options: B, T and the weight std."""
    out = []
    for entry in CASES:
        name, over = entry[0], entry[1]
        opts = {"B": B, "T": T, "std": STD}
        if len(entry) > 2:
            opts.update(entry[2])
        cfg = dict(BASE)
        cfg.update(over)
        out.append((name, cfg, opts))
    return out
