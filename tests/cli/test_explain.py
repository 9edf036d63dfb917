"""test_explain.py — `tinylm info --explain`: for each supported family, a small config.json of
that family (HF style: the keys its config class writes) and the facts the lessons' table
states for it, read off the explanation; the keys a reader does not understand are named;
DeepNorm's alpha and beta are printed, and a DeepNorm model trains from the CLI
(`--set norm_placement=deepnorm`), the DeepNorm keys refused with another placement."""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import STORIES, check, main, run  # noqa: E402

SMALL = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=64)

# name, config.json, substrings the explanation must contain, substrings it must not
ROWS = [
    ("llama", dict(SMALL, model_type="llama", num_key_value_heads=2, rms_norm_eps=1e-5, rope_theta=500000.0,
                   tie_word_embeddings=False, hidden_act="silu", architectures=["LlamaForCausalLM"],
                   rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                     original_max_position_embeddings=32)),
     ["y = w * x / sqrt(mean(x^2) + eps)", "eps = 1e-05, inside the sqrt", "placement: Pre-Norm",
      "norms per layer: 2, plus one final norm", "post_attention_layernorm     before the FFN: despite its name",
      "grouped-query (GQA), ratio 2", "base theta 500000", "RoPE scaling: llama3, factor 8", "head: untied",
      "QK-norm: none", "attention soft-cap: none", "every key of the file was understood",
      "attention scale: 1/sqrt(head_dim = 8)",
      # LlamaPreTrainedModel._init_weights: normal(0, initializer_range), RMSNorm 1, no residual scaling
      "init (the family's _init_weights in transformers): matrices and embeddings ~ normal(0, 0.02), no residual "
      "scaling; norm weights start at 1; biases at 0"],
     ["(1 + w)", "sliding (", "sqrt(2 * num_hidden_layers)"]),
    ("qwen2", dict(SMALL, model_type="qwen2", num_key_value_heads=1, rms_norm_eps=1e-6, rope_theta=1000000.0,
                   use_sliding_window=False, sliding_window=32, max_window_layers=2, tie_word_embeddings=True),
     ["y = w * x / sqrt(mean(x^2) + eps)", "placement: Pre-Norm", "multi-query (MQA)", "biases: q/k/v yes, o no",
      "all 2 full (causal) attention", "head: tied"],
     ["QK-norm: per head"]),
    ("qwen3", dict(SMALL, model_type="qwen3", num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
                   rope_theta=1000000.0, tie_word_embeddings=True),
     ["QK-norm: per head, an RMSNorm (w) of each head's q and k over head_dim (weight of 16",
      "head_dim: 16 (given: not hidden_size / heads)", "placement: Pre-Norm", "norms per layer: 2"],
     ["over all heads"]),
    ("gemma2", dict(SMALL, model_type="gemma2", num_hidden_layers=4, num_key_value_heads=2, head_dim=16,
                    query_pre_attn_scalar=16, sliding_window=8, attn_logit_softcapping=50.0,
                    final_logit_softcapping=30.0, rope_theta=10000.0, hidden_activation="gelu_pytorch_tanh"),
     ["y = (1 + w) * x / sqrt(mean(x^2) + eps)", "placement: sandwich", "norms per layer: 4",
      "post_attention_layernorm     on the attention OUTPUT, before the residual add",
      "pre_feedforward_layernorm", "post_feedforward_layernorm", "attention soft-cap: 50,",
      "final soft-cap: 30,", "layer pattern: S F S F", "alternating sliding and full", "GeGLU",
      "multiplied by sqrt(hidden_size)", "1/sqrt(query_pre_attn_scalar = 16)",
      "no residual scaling; norm weights start at 0 (the 1 + w form: a gain of 1)"],
     ["QK-norm: per head"]),
    ("gemma3_text", dict(SMALL, model_type="gemma3_text", num_hidden_layers=12, num_key_value_heads=2, head_dim=16,
                         query_pre_attn_scalar=16, sliding_window=8, sliding_window_pattern=6,
                         rope_theta=1000000.0, rope_local_base_freq=10000.0, final_logit_softcapping=None,
                         attn_logit_softcapping=None),
     ["(1 + w) * x", "placement: sandwich", "norms per layer: 4", "QK-norm: per head, an RMSNorm (1 + w)",
      "layer pattern: S S S S S F S S S S S F", "5:1 sliding:full", "10 sliding (window 8", "2 full",
      "base theta 1e+06 on full layers; local base 10000 on the sliding layers", "attention soft-cap: none",
      "final soft-cap: none"],
     []),
    # Gemma 4 (the lessons' table: plain-w sandwich, QK-norm and a V norm, soft-cap 30 on the 31B; and
    # what transformers' Gemma4TextConfig adds: scaling 1, full layers of their own head dim and RoPE,
    # K = V, shared K/V, the layer scalar)
    ("gemma4_text", dict(SMALL, model_type="gemma4_text", num_hidden_layers=12, num_key_value_heads=2, head_dim=8,
                         global_head_dim=16, sliding_window=8, hidden_size_per_layer_input=0,
                         attention_k_eq_v=True, num_global_key_value_heads=1, num_kv_shared_layers=2,
                         final_logit_softcapping=30.0, hidden_activation="gelu_pytorch_tanh"),
     ["y = w * x / sqrt(mean(x^2) + eps)", "not Gemma 2/3's 1 + w", "placement: sandwich", "norms per layer: 4",
      "post_attention_layernorm     on the attention OUTPUT, before the residual add",
      "QK-norm: per head, an RMSNorm (w)", "V norm: an RMSNorm of each head's v over head_dim WITHOUT a weight",
      "attention scale: 1 (", "full-attention layers: head_dim 16 (global_head_dim), 1 key/value heads",
      "K = V on the full-attention layers", "the last 2 layers (10..11)", "sliding: layer 9, full: layer 5",
      "final soft-cap: 30,", "layer pattern: S S S S S F S S S S S F", "5:1 sliding:full",
      "RoPE proportional (Gemma 4) on the full layers: partial_rotary_factor 0.25, 2 of the 8 frequencies turn",
      "local base 10000 on the sliding layers", "layer_scalar", "GeGLU", "multiplied by sqrt(hidden_size)",
      "every key of the file was understood"],
     ["(1 + w)", "1/sqrt(query_pre_attn_scalar"]),
    ("gemma4_text per-layer inputs", dict(SMALL, model_type="gemma4_text", num_hidden_layers=12, num_key_value_heads=1,
                                          head_dim=8, global_head_dim=16, sliding_window=8,
                                          hidden_size_per_layer_input=4, vocab_size_per_layer_input=64,
                                          num_kv_shared_layers=2),
     ["per-layer inputs (hidden_size_per_layer_input 4): a second token table of 64 x 48",
      "the last 2 layers (10..11)", "multi-query (MQA)", "every key of the file was understood"],
     ["K = V"]),
    # the text model of a multimodal Gemma 4 (Gemma4ForConditionalGeneration): text_config read, towers noted
    ("gemma4 multimodal", dict(model_type="gemma4", image_token_id=258880, audio_token_id=258881,
                               vision_config=dict(model_type="gemma4_vision", hidden_size=16), audio_config=None,
                               text_config=dict(SMALL, model_type="gemma4_text", num_key_value_heads=2, head_dim=8,
                                                global_head_dim=16, sliding_window=8,
                                                hidden_size_per_layer_input=0)),
     ["model_type gemma4: 2 layers", "not Gemma 2/3's 1 + w", "V norm", "layer pattern: S F", "layer_scalar",
      "every key of the file was understood"],
     ["(1 + w)"]),
    # Mistral: Llama's body, one window in every layer (the class default 4096 when the key is absent)
    ("mistral", dict(SMALL, model_type="mistral", num_hidden_layers=3, num_key_value_heads=2, sliding_window=8,
                     rope_theta=1000000.0, hidden_act="silu", architectures=["MistralForCausalLM"]),
     ["y = w * x / sqrt(mean(x^2) + eps)", "placement: Pre-Norm", "post_attention_layernorm     before the FFN: despite",
      "grouped-query (GQA), ratio 2", "3 sliding (window 8", "every layer sliding", "biases: q/k/v no, o no",
      "head: untied", "every key of the file was understood"],
     ["(1 + w)", "full (causal) attention"]),
    ("mistral default window", dict(SMALL, model_type="mistral", num_key_value_heads=4),
     ["2 sliding (window 4096", "multi-head (MHA"], []),
    # Gemma 1 (the 2B: MQA): 1 + w on Llama's two norms, GeGLU, scaled embedding, tied
    ("gemma", dict(SMALL, model_type="gemma", num_key_value_heads=1, head_dim=16, hidden_act="gelu",
                   hidden_activation="gelu_pytorch_tanh", architectures=["GemmaForCausalLM"]),
     ["y = (1 + w) * x / sqrt(mean(x^2) + eps)", "placement: Pre-Norm", "norms per layer: 2",
      "post_attention_layernorm     before the FFN: despite its name", "multi-query (MQA)", "GeGLU",
      "multiplied by sqrt(hidden_size)", "head: tied", "all 2 full (causal) attention", "soft-cap: none",
      "every key of the file was understood"],
     ["sandwich", "pre_feedforward_layernorm", "QK-norm: per head"]),
    # the text model of a multimodal Gemma 3 (Gemma3ForConditionalGeneration): text_config with Gemma3TextConfig's
    # defaults for the keys it leaves out (as the released 4B/12B/27B files)
    ("gemma3 multimodal", dict(model_type="gemma3", architectures=["Gemma3ForConditionalGeneration"],
                               boi_token_index=255999, eoi_token_index=256000, image_token_index=262144,
                               mm_tokens_per_image=256, initializer_range=0.02,
                               vision_config=dict(model_type="siglip_vision_model", hidden_size=16),
                               text_config=dict(model_type="gemma3_text", hidden_size=32, intermediate_size=48,
                                                num_hidden_layers=6, sliding_window=8,
                                                rope_scaling={"factor": 8.0, "rope_type": "linear"})),
     ["model_type gemma3: 6 layers, hidden_size 32, vocab 262208", "(1 + w) * x", "placement: sandwich",
      "QK-norm: per head, an RMSNorm (1 + w)", "layer pattern: S S S S S F", "RoPE scaling: linear",
      "every key of the file was understood"],
     []),
    ("olmo2", dict(SMALL, model_type="olmo2", num_key_value_heads=2, rms_norm_eps=1e-6, rope_theta=500000.0,
                   tie_word_embeddings=False),
     ["placement: output norms (OLMo 2), h = x + N(F(x)): no input norm", "norms per layer: 2",
      "post_attention_layernorm     on the attention OUTPUT, before the residual add",
      "post_feedforward_layernorm   on the FFN output, before the residual add",
      "QK-norm: over all heads, an RMSNorm (w) of the whole q projection (32 wide) and k projection (16 wide)"],
     ["input_layernorm", "despite its name"]),
    ("gpt2", dict(model_type="gpt2", vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=16,
                  layer_norm_epsilon=1e-5, activation_function="gelu_new"),
     ["norm: LayerNorm, y = g * (x - mean(x)) / sqrt(var(x) + eps) + b", "with bias b", "placement: Pre-Norm",
      "ln_1", "ln_2", "ln_f", "learned absolute position embeddings (16 positions)", "head: tied", "GELU MLP",
      "attention scale: 1/sqrt(head_dim = 8)",
      # GPT2PreTrainedModel._init_weights: the c_proj weights (attention and MLP) / sqrt(2 n_layer)
      "init (GPT2PreTrainedModel._init_weights): matrices and embeddings ~ normal(0, 0.02); attn.c_proj and "
      "mlp.c_proj weights also / sqrt(2 * n_layer)"],
     ["RoPE"]),
    # GPT-2 with scale_attn_weights false: unscaled scores, and no QK-norm to blame for it
    ("gpt2 unscaled", dict(model_type="gpt2", vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=16,
                           scale_attn_weights=False),
     ["attention scale: 1 (scores are q . k unscaled, no 1/sqrt(head_dim): scale_attn_weights false; no QK-norm "
      "bounds their size)", "QK-norm: none"],
     ["the QK-norm fixes their size"]),
    # Qwen3 without head_dim: Qwen3Config's default 128 (not hidden / heads), reported as a default
    ("qwen3 default head_dim", dict(SMALL, model_type="qwen3", num_key_value_heads=2),
     ["head_dim: 128 (the family's class default, the file gives none: not hidden_size / heads)"], ["(given"]),
    # the MoE families name their norms and routers as their checkpoints do (Qwen3MoeDecoderLayer,
    # MixtralDecoderLayer: input_layernorm / post_attention_layernorm, the FFN's input norm; Mixtral's router
    # block_sparse_moe.gate, Qwen3-MoE's mlp.gate; DeepseekV3Attention's q_a_layernorm / kv_a_layernorm)
    ("qwen3_moe", dict(SMALL, model_type="qwen3_moe", num_key_value_heads=2, head_dim=8, num_experts=4,
                       num_experts_per_tok=2, moe_intermediate_size=16, norm_topk_prob=True),
     ["  input_layernorm              before attention",
      "  post_attention_layernorm     before the FFN: despite its name, the FFN's INPUT norm",
      "(HF: mlp.gate)", "renormalised to sum 1 (Qwen3-MoE: norm_topk_prob)", "QK-norm: per head"],
     ["attn_norm", "ffn_norm", "block_sparse_moe"]),
    ("mixtral", dict(SMALL, model_type="mixtral", num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2),
     ["  input_layernorm              before attention",
      "  post_attention_layernorm     before the FFN: despite its name, the FFN's INPUT norm",
      "(HF: block_sparse_moe.gate)", "(Mixtral: always renormalised)", "no residual scaling"],
     ["attn_norm", "ffn_norm", "HF: mlp.gate"]),
    # Qwen2-MoE (Qwen2MoeSparseMoeBlock): Qwen2's q/k/v biases, mlp.gate not renormalised by default, the shared
    # expert of shared_expert_intermediate_size behind mlp.shared_expert_gate's sigmoid; the dense layer of
    # mlp_only_layers uses intermediate_size
    ("qwen2_moe", dict(SMALL, model_type="qwen2_moe", num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                       moe_intermediate_size=16, shared_expert_intermediate_size=40, mlp_only_layers=[0]),
     ["  input_layernorm              before attention",
      "  post_attention_layernorm     before the FFN: despite its name, the FFN's INPUT norm",
      "feed-forward (dense layers): SwiGLU", "intermediate size 48", "mixture of experts on 1 of 2 layers (1)",
      "plus a shared expert of intermediate size 40 (shared_expert_intermediate_size) whose output is multiplied by "
      "sigmoid(mlp.shared_expert_gate . x)", "(HF: mlp.gate), the top 2 kept as they are (Qwen2-MoE: norm_topk_prob)",
      "biases: q/k/v yes, o no", "QK-norm: none", "every key of the file was understood"],
     ["attn_norm", "ffn_norm", "renormalised to sum 1", "2 x 16"]),
    ("deepseek_v3", dict(SMALL, model_type="deepseek_v3", num_hidden_layers=3, q_lora_rank=16, kv_lora_rank=12,
                         qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=8, n_routed_experts=8,
                         num_experts_per_tok=2, moe_intermediate_size=12, n_group=4, topk_group=2,
                         first_k_dense_replace=1),
     ["  input_layernorm              before attention",
      "  post_attention_layernorm     before the FFN: despite its name, the FFN's INPUT norm",
      "  self_attn.q_a_layernorm      inside MLA", "  self_attn.kv_a_layernorm     inside MLA",
      "no residual scaling"],
     ["attn_norm", "ffn_norm", "attn.q_a_norm", "attn.kv_a_norm"]),
    ("tinylm dyt", dict(SMALL, model_type="tinylm", norm_type="dyt", dyt_alpha_init=0.7, norm_placement="post"),
     ["DyT (Dynamic Tanh), y = g * tanh(alpha * x) + b", "starting at 0.7", "placement: Post-Norm",
      "and no final norm"],
     []),
    ("tinylm dyt by position", dict(SMALL, model_type="tinylm", norm_type="dyt", dyt_alpha_init_attn=0.8,
                                    dyt_alpha_init_ffn=0.2),
     ["starting at 0.5", "alpha0 by position: attention norms 0.8, FFN norms 0.2, final norm 0.5"], []),
    ("tinylm deepnorm 8 layers", dict(SMALL, model_type="tinylm", num_hidden_layers=8, norm_type="layernorm",
                                      norm_placement="deepnorm"),
     ["placement: DeepNorm", "alpha = %g" % (16 ** 0.25), "beta = %g" % (64 ** -0.25), "without bias",
      "q_proj, k_proj keep 1", "and no final norm"],
     ["also / sqrt(2"]),
    ("tinylm deepnorm given", dict(SMALL, model_type="tinylm", norm_placement="deepnorm", deepnorm_alpha=3.5,
                                   deepnorm_beta=0.25),
     ["alpha = 3.5 (given)", "beta = 0.25 (given)"], []),
]


def test_families(tinylm, work):
    for name, cfg, want, absent in ROWS:
        path = os.path.join(work, name.replace(" ", "_") + ".json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        rc, out, err = run(tinylm, "info", "--explain", "--config", path)
        missing = [w for w in want if w not in out]
        present = [a for a in absent if a in out]
        check(rc == 0 and not missing and not present, "explain %s" % name,
              "rc %d, missing %s, unexpected %s\n%s%s" % (rc, missing, present, out, err))
        # every Hugging Face family but GPT-2 initialises as its _init_weights: normal(0, initializer_range)
        # without residual scaling, norms at their identity (Gemma 1/2/3's 1 + w: 0); one attention-scale line
        if cfg["model_type"] not in ("tinylm", "gpt2"):
            init = next((ln for ln in out.splitlines() if ln.startswith("init")), "")
            one_plus = "(1 + w) * x" in out
            ok = ("(the family's _init_weights in transformers)" in init and "no residual scaling" in init and
                  ("start at 0 (the 1 + w form" in init) == one_plus and
                  sum(ln.startswith("attention scale") for ln in out.splitlines()) == (0 if "MLA" in out else 1))
            check(ok, "  %s: the family's init rule and one attention-scale line" % name, init)


def test_unknown_keys(tinylm, work):
    cfg = dict(SMALL, model_type="llama", my_new_norm_switch=True, rope_flavour="yarn-ish")
    path = os.path.join(work, "llama_unknown.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    rc, out, err = run(tinylm, "info", "--explain", "--config", path)
    line = next((ln for ln in out.splitlines() if ln.startswith("keys NOT understood")), "")
    check(rc == 0 and "my_new_norm_switch" in line and "rope_flavour" in line and "architectures" not in line,
          "explain names the keys the llama reader did not understand", out + err)


def test_gemma4_refusals(tinylm, work):
    """a Gemma 4 key the reader does not implement is an error naming it, not a line of keys NOT understood"""
    base = dict(SMALL, model_type="gemma4_text", num_key_value_heads=2, head_dim=8, global_head_dim=16,
                hidden_size_per_layer_input=0)
    for key, value in (("query_pre_attn_scalar", 256), ("enable_moe_block", True), ("my_new_switch", 1)):
        path = os.path.join(work, "gemma4_%s.json" % key)
        with open(path, "w") as f:
            json.dump(dict(base, **{key: value}), f)
        rc, out, err = run(tinylm, "info", "--explain", "--config", path)
        check(rc != 0 and key in err, "explain refuses gemma4_text with %s" % key, out + err)


def test_gemma4_moe_explain(tinylm, work):
    """a gemma4_text config with the MoE block: explain says the experts run beside the dense FFN, the
    router's own norm and scales; info counts the block's tensors"""
    cfg = dict(SMALL, model_type="gemma4_text", num_key_value_heads=2, head_dim=8, global_head_dim=16,
               hidden_size_per_layer_input=0, enable_moe_block=True, num_experts=8, top_k_experts=2,
               moe_intermediate_size=16)
    path = os.path.join(work, "gemma4_moe.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    rc, out, err = run(tinylm, "info", "--explain", "--config", path)
    check(rc == 0 and "MoE block (Gemma 4" in out and "beside the dense FFN" in out and "per_expert_scale" in out
          and "8 routed experts" in out and "2 chosen per token" in out and "keys NOT understood" not in out,
          "explain reads Gemma 4's MoE block", out + err)


def test_gemma4_info_memory(tinylm, work):
    """info's KV cache of a Gemma 4 config counts the layers that share keys and values once: 12 layers,
    the last 2 shared, every layer's K (and V) 2 kv heads x 8 = 16 floats a position (sliding) or
    1 x 16 (full): 10 layers x 2 x 100 positions x 16 x 4 bytes = 128000 bytes"""
    cfg = dict(SMALL, model_type="gemma4_text", num_hidden_layers=12, num_key_value_heads=2, head_dim=8,
               global_head_dim=16, sliding_window=8, hidden_size_per_layer_input=0, attention_k_eq_v=True,
               num_global_key_value_heads=1, num_kv_shared_layers=2)
    path = os.path.join(work, "gemma4_mem.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    rc, out, err = run(tinylm, "info", "--config", path, "--context", "100")
    line = next((ln for ln in out.splitlines() if "KV cache, 100 positions" in ln), "")
    check(rc == 0 and " 128000 bytes" in line and "10 layers" in line and "2 of the 12 layers" in out,
          "info: the KV cache stores shared keys and values once", out + err)


def write_json(work, name, cfg):
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


DSV3_SMALL = dict(SMALL, model_type="deepseek_v3", num_hidden_layers=3, q_lora_rank=16, kv_lora_rank=12,
                  qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=8, n_routed_experts=8, num_experts_per_tok=2,
                  moe_intermediate_size=12, n_shared_experts=1, n_group=4, topk_group=2, first_k_dense_replace=1,
                  num_nextn_predict_layers=1, tie_word_embeddings=False)


def test_quantization_config(tinylm, work):
    """quantization_config is read and described by info and --explain, never refused there (DeepSeek-V3's and
    Qwen3's FP8 blocks, GPTQ, AWQ); loading a GPTQ model is refused naming the method; a block of 0 rows is an
    error naming weight_block_size"""
    fp8 = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}
    path = write_json(work, "dsv3_fp8", dict(DSV3_SMALL, quantization_config=fp8))
    rc, out, err = run(tinylm, "info", "--explain", "--config", path)
    check(rc == 0 and "quantization: fp8" in out and "F8_E4M3" in out and "blocks of 128 x 128" in out and
          "the last block of a row or column partial" in out and "every key of the file was understood" in out,
          "explain: DeepSeek-V3's FP8 quantization_config described, not refused", out + err)
    rc, out, err = run(tinylm, "info", "--config", path)
    check(rc == 0 and "quantization: fp8" in out, "info: an FP8 config is described, not refused", out + err)
    per_tensor = dict(fp8, weight_block_size=None, fmt="e5m2")
    rc, out, err = run(tinylm, "info", "--explain", "--config", write_json(work, "qwen3_fp8", dict(
        SMALL, model_type="qwen3", num_key_value_heads=2, quantization_config=per_tensor)))
    check(rc == 0 and "F8_E5M2" in out and "one scale per tensor" in out, "explain: FP8 with one scale per tensor",
          out + err)
    for method, extra, want in (("gptq", dict(bits=4, group_size=128, desc_act=False, sym=True),
                                 "quantization: gptq (quantization_config), 4-bit weights in groups of 128, packed"),
                                ("awq", dict(bits=4, group_size=64, version="gemm", zero_point=True),
                                 "quantization: awq (quantization_config), 4-bit weights in groups of 64, packed")):
        cfg = dict(SMALL, model_type="llama", quantization_config=dict(extra, quant_method=method))
        rc, out, err = run(tinylm, "info", "--explain", "--config", write_json(work, "llama_" + method, cfg))
        check(rc == 0 and want in out and "does not load it" in out, "explain: %s named, not refused" % method,
              out + err)
        d = os.path.join(work, "llama_" + method + "_dir")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        rc, out, err = run(tinylm, "logits", "--model", d, "--ids", "1 2", "--out", os.path.join(work, "q.npy"))
        check(rc != 0 and 'quant_method "%s"' % method in err and "cannot read" in err,
              "loading a %s checkpoint is refused naming the method" % method, err)
    # a multimodal wrapper's quantization_config sits at its top level
    mm = dict(model_type="gemma3", quantization_config=fp8,
              text_config=dict(model_type="gemma3_text", hidden_size=32, intermediate_size=48, num_hidden_layers=2))
    rc, out, err = run(tinylm, "info", "--explain", "--config", write_json(work, "gemma3_fp8", mm))
    check(rc == 0 and "quantization: fp8" in out and "model_type gemma3" in out,
          "explain: a multimodal Gemma 3's top-level quantization_config", out + err)
    bad = dict(fp8, weight_block_size=[128, 0])
    rc, out, err = run(tinylm, "info", "--config", write_json(work, "fp8_block0", dict(DSV3_SMALL, quantization_config=bad)))
    check(rc != 0 and "weight_block_size[1]" in err, "FP8 block size 0 is an error naming the key", err)


def test_deepseek_mtp_info(tinylm, work):
    """DeepSeek-V3's multi-token-prediction layer: info counts it on its own line (a layer like the last MoE
    layer plus eh_proj [d, 2d], enorm, hnorm, shared_head.norm and its embedding and head copies [V, d]), not in
    the total; --explain says it is outside the forward. The count is checked against the HF tensor shapes of
    tests/hf/test_hf.py's DeepSeek-V3 checkpoint writer (the MTP layer's own tensors) plus the shared_head's."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hf"))
    import test_hf  # noqa: E402
    T = test_hf.make_weights("deepseek_v3", dict(DSV3_SMALL, routed_scaling_factor=2.5, norm_topk_prob=True), 1)
    L, d, V = DSV3_SMALL["num_hidden_layers"], DSV3_SMALL["hidden_size"], DSV3_SMALL["vocab_size"]
    mtp = sum(v.size for k, v in T.items() if k.startswith("model.layers.%d." % L)) + 2 * V * d + d
    total = sum(v.size for k, v in T.items() if not k.startswith("model.layers.%d." % L))
    path = write_json(work, "dsv3_mtp", DSV3_SMALL)
    rc, out, err = run(tinylm, "info", "--config", path)
    line = next((ln for ln in out.splitlines() if ln.startswith("mtp ")), "")
    tot = next((ln for ln in out.splitlines() if ln.startswith("total ")), "")
    check(rc == 0 and "{:,}".format(mtp) in line and "not in the total" in line and "{:,}".format(total) in tot,
          "info: the MTP layer on its own line (%d parameters), the total without it (%d)" % (mtp, total), out + err)
    rc, out, err = run(tinylm, "info", "--explain", "--config", path)
    check(rc == 0 and "multi-token prediction: 1 layer (num_nextn_predict_layers)" in out and "layers 3..3" in out,
          "explain: the MTP layer is named as outside the forward", out + err)


# Qwen1.5-MoE-A2.7B's released config.json (the keys that size it; use_sliding_window false: its window inert)
QWEN15_MOE = dict(architectures=["Qwen2MoeForCausalLM"], model_type="qwen2_moe", hidden_act="silu", hidden_size=2048,
                  intermediate_size=5632, max_position_embeddings=8192, max_window_layers=21, num_attention_heads=16,
                  num_hidden_layers=24, num_key_value_heads=16, rms_norm_eps=1e-06, rope_theta=1000000.0,
                  sliding_window=32768, tie_word_embeddings=False, torch_dtype="bfloat16", use_sliding_window=False,
                  vocab_size=151936, decoder_sparse_step=1, moe_intermediate_size=1408,
                  shared_expert_intermediate_size=5632, num_experts_per_tok=4, num_experts=60, norm_topk_prob=False,
                  output_router_logits=False, router_aux_loss_coef=0.001, initializer_range=0.02)


def test_qwen2_moe_info(tinylm, work):
    """info's totals for Qwen1.5-MoE-A2.7B against the module tree of modeling_qwen2_moe.py counted here (q/k/v with
    bias, o without; per layer the router, 60 experts, the shared expert and its d -> 1 gate; two norms; embedding
    and untied head), which rounds to the published 14.3B parameters, 2.7B activated"""
    c = QWEN15_MOE
    d, L, V, f, fe, fs, E, k = (c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["intermediate_size"],
                                c["moe_intermediate_size"], c["shared_expert_intermediate_size"], c["num_experts"],
                                c["num_experts_per_tok"])
    attn = 4 * d * d + 3 * d
    expert, shared = 3 * d * fe, 3 * d * fs + d
    layer = attn + E * d + E * expert + shared + 2 * d
    total = L * layer + 2 * V * d + d
    active = L * (attn + E * d + k * expert + shared + 2 * d) + 2 * V * d + d
    path = write_json(work, "qwen15_moe", c)
    rc, out, err = run(tinylm, "info", "--config", path)
    tot = next((ln for ln in out.splitlines() if ln.startswith("total ")), "")
    act = next((ln for ln in out.splitlines() if ln.startswith("active ")), "")
    check(rc == 0 and "{:,}".format(total) in tot and "{:,}".format(active) in act and round(total / 1e9, 1) == 14.3
          and round(active / 1e9, 1) == 2.7, "info: Qwen1.5-MoE-A2.7B's %d parameters, %d active" % (total, active),
          out + err)


def test_llama2c(tinylm, work):
    rc, out, err = run(tinylm, "info", "--explain", "--model", STORIES)
    check(rc == 0 and "model_type llama2c" in out and "placement: Pre-Norm" in out and
          "post_attention_layernorm     before the FFN" in out and "y = w * x / sqrt" in out,
          "explain a llama2.c checkpoint", out + err)


def test_explain_refusals(tinylm, work):
    rc, out, err = run(tinylm, "info", "--explain", "--system")
    check(rc != 0 and "--explain" in err, "--explain with --system refused", err)
    # hidden 256 over 3 heads without head_dim: named as such, not as an odd head_dim
    path = write_json(work, "llama_3_heads", dict(SMALL, model_type="llama", hidden_size=256, num_attention_heads=3))
    rc, out, err = run(tinylm, "info", "--explain", "--config", path)
    check(rc != 0 and "hidden_size = 256 is not a multiple of num_attention_heads = 3" in err and "even" not in err,
          "hidden_size not a multiple of the heads is named as such", err)


def test_deepnorm_train(tinylm, work):
    data = os.path.join(work, "text.txt")
    with open(data, "w") as f:
        f.write("the quick brown fox jumps over the lazy dog. " * 200)
    out_dir = os.path.join(work, "dn_run")
    rc, out, err = run(tinylm, "train", "--data", data, "--preset", "nanogpt-baby", "--set",
                       "norm_placement=deepnorm", "--set", "num_hidden_layers=2", "--set", "hidden_size=32",
                       "--set", "intermediate_size=64", "--steps", "4", "--batch", "2", "--seq", "16",
                       "--out", out_dir)
    losses = []
    try:
        with open(os.path.join(out_dir, "metrics.jsonl")) as f:
            losses = [json.loads(ln)["loss"] for ln in f if '"loss"' in ln]
    except OSError:
        pass
    check(rc == 0 and losses and all(math.isfinite(x) for x in losses), "train --set norm_placement=deepnorm",
          "rc %d losses %s\n%s" % (rc, losses, err[-2000:]))
    saved = [d for d in os.listdir(out_dir) if d.startswith("step-")] if os.path.isdir(out_dir) else []
    conf = {}
    if saved:
        with open(os.path.join(out_dir, sorted(saved)[-1], "config.json")) as f:
            conf = json.load(f)
    check(conf.get("norm_placement") == "deepnorm" and conf.get("scale_residual_init") is False,
          "the saved config is a deepnorm one", str(conf))
    rc, out, err = run(tinylm, "train", "--data", data, "--preset", "nanogpt-baby", "--set", "deepnorm_alpha=2",
                       "--steps", "1", "--out", os.path.join(work, "dn_bad"))
    check(rc != 0 and "deepnorm_alpha" in err and "norm_placement" in err,
          "--set deepnorm_alpha with norm_placement pre refused, naming the key", err)


def test_dyt_alpha_by_position(tinylm, work):
    """DyT's alpha0 by position (dyt_alpha_init_attn / _ffn / _final) reaches the checkpoint: a run at
    learning rate 1e-12 keeps each norm's alpha at the init the reference's init_params gives it"""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
    import tinylm_ref
    data = os.path.join(work, "text_dyt.txt")
    with open(data, "w") as f:
        f.write("the quick brown fox jumps over the lazy dog. " * 50)
    out_dir = os.path.join(work, "dyt_run")
    sets = {"norm_type": "dyt", "norm_placement": "sandwich", "num_hidden_layers": 2, "hidden_size": 32,
            "intermediate_size": 64, "dyt_alpha_init": 0.5, "dyt_alpha_init_attn": 1.5, "dyt_alpha_init_ffn": 0.25,
            "dyt_alpha_init_final": 0.125}
    args = ["train", "--data", data, "--preset", "llama-baby", "--steps", "1", "--batch", "1", "--seq", "8",
            "--lr", "1e-12", "--min-lr", "1e-12", "--warmup", "0", "--eval-batches", "1", "--out", out_dir]
    for k, v in sets.items():
        args += ["--set", "%s=%s" % (k, v)]
    rc, out, err = run(tinylm, *args)
    check(rc == 0, "train with dyt_alpha_init_attn / _ffn / _final", err[-2000:])
    if rc:
        return
    step = sorted(d for d in os.listdir(out_dir) if d.startswith("step-"))[-1]
    with open(os.path.join(out_dir, step, "config.json")) as f:
        conf = json.load(f)
    got = tinylm_ref.load_safetensors(os.path.join(out_dir, step, "model.safetensors"))
    alphas = {k: float(v.ravel()[0]) for k, v in got.items() if k.endswith(".alpha")}
    want = {k: tinylm_ref.dyt_alpha0(tinylm_ref.resolve_config(conf), k) for k in alphas}
    check(len(alphas) == 9 and all(abs(alphas[k] - want[k]) < 1e-6 for k in alphas) and
          sorted(set(want.values())) == [0.125, 0.25, 1.5],
          "each DyT norm starts at its position's alpha0 (attn 1.5, ffn 0.25, final 0.125)", str(alphas))


def test_gemma4_train(tinylm, work):
    """Gemma 4's switches train from the CLI (tinylm format), its MoE block included (4 experts beside
    the dense FFN of every layer): the loss falls, the saved config keeps them, and the run generates
    (through the KV cache with shared keys and values)"""
    data = os.path.join(work, "text4.txt")
    with open(data, "w") as f:
        f.write("the quick brown fox jumps over the lazy dog. " * 200)
    conf = dict(model_type="tinylm", vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
                norm_placement="sandwich", qk_norm="head", v_norm=True, query_pre_attn_scalar=1.0,
                ffn_type="geglu", embedding_scale=True, final_logit_softcapping=30.0, layer_scalar=True,
                sliding_window=8, rope_local_base_freq=10000.0, rope_theta=1000000.0,
                layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
                global_head_dim=16, num_global_key_value_heads=1, rope_proportional_fraction=0.25,
                attention_k_eq_v=True, num_kv_shared_layers=2, enable_moe_block=True, num_experts=4,
                num_experts_per_tok=2, moe_intermediate_size=16, norm_topk_prob=True)
    path = os.path.join(work, "gemma4_tinylm.json")
    with open(path, "w") as f:
        json.dump(conf, f)
    out_dir = os.path.join(work, "g4_run")
    rc, out, err = run(tinylm, "train", "--data", data, "--config", path, "--tokenizer", "bytes", "--steps", "30",
                       "--batch", "4", "--seq", "32", "--lr", "3e-3", "--log-every", "1", "--sample", "0",
                       "--log-attn", "--out", out_dir)
    losses, gains = [], []
    try:
        with open(os.path.join(out_dir, "metrics.jsonl")) as f:
            rows = [json.loads(ln) for ln in f if '"loss"' in ln]
        losses = [r["loss"] for r in rows]
        gains = rows[-1].get("qk_gain_max", [])
    except (OSError, ValueError):
        pass
    # --log-attn: the layers sharing keys and values have no k_norm of their own: their k gain is null
    check(len(gains) == 4 and all(g[1] is None for g in gains[2][:1] + gains[3][:1]) and gains[0][0][1] is not None,
          "--log-attn on shared K/V layers: k gain null, valid JSON", str(gains)[:300])
    check(rc == 0 and len(losses) >= 20 and all(math.isfinite(x) for x in losses) and
          sum(losses[-5:]) < sum(losses[:5]) - 0.5, "train a gemma4 tinylm config: the loss falls",
          "rc %d losses %s\n%s" % (rc, losses, err[-2000:]))
    saved = [d for d in os.listdir(out_dir) if d.startswith("step-")] if os.path.isdir(out_dir) else []
    back = {}
    if saved:
        with open(os.path.join(out_dir, sorted(saved)[-1], "config.json")) as f:
            back = json.load(f)
    keys = ("global_head_dim", "num_global_key_value_heads", "rope_proportional_fraction", "v_norm",
            "attention_k_eq_v", "num_kv_shared_layers", "layer_scalar", "enable_moe_block", "num_experts")
    check(all(back.get(k) == conf[k] for k in keys), "the saved config keeps the Gemma 4 switches", str(back))
    rc, out, err = run(tinylm, "generate", "--model", out_dir, "--prompt", "the quick", "-n", "20",
                       "--temperature", "0")
    check(rc == 0 and len(out) > len("the quick"), "generate from the gemma4 run (KV cache)", out + err[-500:])


if __name__ == "__main__":
    sys.exit(main([test_families, test_unknown_keys, test_gemma4_refusals, test_gemma4_moe_explain, test_gemma4_info_memory, test_llama2c, test_explain_refusals, test_deepnorm_train,
                   test_dyt_alpha_by_position, test_gemma4_train, test_quantization_config, test_deepseek_mtp_info,
                   test_qwen2_moe_info]))
