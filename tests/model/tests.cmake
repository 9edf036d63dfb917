add_executable(tlm_dump tests/model/tlm_dump.c)
target_link_libraries(tlm_dump PRIVATE tinylm)
target_include_directories(tlm_dump PRIVATE ${CMAKE_SOURCE_DIR}/src)
tlm_c_test(test_causal tests/model/test_causal.c)
tlm_c_test(test_batch_split tests/model/test_batch_split.c)
tlm_c_test(test_public_api tests/model/test_public_api.c)
tlm_c_test(test_kv_cache tests/model/test_kv_cache.c)
# again on the portable attention loops (natively: the AVX-512 kernels where the CPU has them)
add_test(NAME test_kv_cache_avx2 COMMAND test_kv_cache)
set_tests_properties(test_kv_cache_avx2 PROPERTIES ENVIRONMENT "TLM_ISA=avx2;OMP_NUM_THREADS=2" SKIP_RETURN_CODE 77)
tlm_c_test(test_decode_step tests/model/test_decode_step.c)
add_test(NAME test_decode_step_avx2 COMMAND test_decode_step)
set_tests_properties(test_decode_step_avx2 PROPERTIES ENVIRONMENT "TLM_ISA=avx2;OMP_NUM_THREADS=2" SKIP_RETURN_CODE 77)
tlm_c_test(test_inference tests/model/test_inference.c)
tlm_cli_test(test_nonfinite tests/model/test_nonfinite.py)
tlm_cli_test(test_dtype tests/model/test_dtype.py)
tlm_c_test(test_memory_estimate tests/model/test_memory_estimate.c)
tlm_c_test(test_config_roundtrip tests/model/test_config_roundtrip.c)
tlm_c_test(test_attention_mask tests/model/test_attention_mask.c)
tlm_c_test(test_model_gradcheck tests/model/test_model_gradcheck.c)
# GGUF through the program: export in every type, an independent NumPy reader of the file and its
# block layouts, logits against the llama2.c checkpoint, round trips, malformed files
tlm_cli_test(test_gguf_model tests/model/test_gguf_model.py)
tlm_slow(test_gguf_model)
# GGUF files of every architecture the loader claims (llama, qwen2, qwen3, gemma2, gemma3, olmo2,
# gpt2), converted here from random HF checkpoints as llama.cpp's convert_hf_to_gguf.py does:
# the same logits as the HF directory and a float64 reference; each convention left out is caught
tlm_cli_test(test_gguf_archs tests/model/test_gguf_archs.py)
# the integer products' cost in a real model's predictions (ops/quant_int.c): stories260K over
# TinyShakespeare, KL and top-1 agreement against the f32 weights, the integer path within a bound
# of the exact path's (also the measuring tool of docs/gguf.md's table, given arguments)
tlm_c_test(test_quant_fidelity tests/model/test_quant_fidelity.c)
# several contexts on one model: two threads' passes and generations at once, each as it is alone;
# a generation interleaved with hooked passes
tlm_c_test(test_contexts tests/model/test_contexts.c)
find_package(Threads REQUIRED)
target_link_libraries(test_contexts PRIVATE Threads::Threads)

# tlm_norm_gain and tlm_input_norm: the rules include/tinylm.h gives the bindings
tlm_c_test(test_binding_rules tests/model/test_binding_rules.c)

# export --format gguf of every family llama.cpp defines and tinylm reads back: the converter's file bit for
# bit, the HF directory's logits bit for bit (f32), bf16 / q8_0 / q4_k against a float64 forward of the decoded
# matrices, llama.cpp's log-probabilities within 1e-4 (node-llama-cpp, when installed), the refusals
tlm_cli_test(test_gguf_export_archs tests/model/test_gguf_export_archs.py)
tlm_slow(test_gguf_export_archs)
if(TLM_PYTHON)
  set(_tlm_export_env OMP_NUM_THREADS=2)
  if(TLM_SANITIZE)
    list(APPEND _tlm_export_env TLM_TEST_NO_LLAMACPP=1) # (part (d) is llama.cpp's arithmetic, not ours)
  endif()
  set_tests_properties(test_gguf_export_archs PROPERTIES ENVIRONMENT "${_tlm_export_env}" TIMEOUT 300)
endif()
# `tinylm export --config` (gguf_export_init_file): a new model streamed to a GGUF file a chunk of
# rows at a time, the same bytes as the model made and exported (f32, q8_0, q4_k; fallbacks;
# tensors of several chunks)
tlm_c_test(test_gguf_stream tests/model/test_gguf_stream.c)
