# tests/parity — the C engine's forward/backward against the PyTorch oracle (tests/reference).
#
# parity_pytorch needs the engine's tlm_dump program. The check runs deferred (at the end of
# the top-level CMakeLists) so it sees tlm_dump wherever and whenever that target is defined.
function(tlm_parity_add_tests)
  if(TARGET tlm_dump AND TLM_PYTHON)
    add_test(NAME parity_pytorch
             COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/parity/test_parity.py
                     --dump-bin $<TARGET_FILE:tlm_dump> --work ${CMAKE_BINARY_DIR}/parity)
    set_tests_properties(parity_pytorch PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 300
                         FIXTURES_SETUP parity_cases)
    # Mixed precision on the same cases, against the oracle with the same bf16 roundings: on AMX,
    # and (a few cases) on AVX512-BF16 with oneDNN capped below AMX; both skip (77) on a CPU
    # without bf16 products, where --precision bf16 trains in fp32.
    add_test(NAME parity_pytorch_bf16
             COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/parity/test_parity.py --precision bf16
                     --dump-bin $<TARGET_FILE:tlm_dump> --work ${CMAKE_BINARY_DIR}/parity_bf16
                     --cases ${CMAKE_BINARY_DIR}/parity/cases)
    add_test(NAME parity_pytorch_bf16_avx512
             COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/parity/test_parity.py --precision bf16
                     --dump-bin $<TARGET_FILE:tlm_dump> --work ${CMAKE_BINARY_DIR}/parity_bf16_avx512
                     --cases ${CMAKE_BINARY_DIR}/parity/cases --only gpt2_like llama_like gemma2_like qwen3_like
                     olmo2_like deepnorm_rmsnorm_12)
    set_tests_properties(parity_pytorch_bf16 PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 300
                         FIXTURES_REQUIRED parity_cases SKIP_RETURN_CODE 77)
    set_tests_properties(parity_pytorch_bf16_avx512 PROPERTIES
                         ENVIRONMENT "OMP_NUM_THREADS=2;ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16" TIMEOUT 300
                         FIXTURES_REQUIRED parity_cases SKIP_RETURN_CODE 77)
    tlm_slow(parity_pytorch_bf16)
  endif()
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL tlm_parity_add_tests)

# Pure Python (no engine code runs), so only the plain build runs them: the sanitizer and
# OpenBLAS builds would repeat the same seconds for nothing.
if(TLM_PYTHON AND NOT TLM_SANITIZE)
  # The oracle itself, checked against torch.nn, finite differences and hand-worked values.
  add_test(NAME reference_selftest COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reference/check_ref.py)
  # The parity test itself: a float32 stand-in passes, broken stand-ins and mutants fail.
  add_test(NAME parity_selftest
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/parity/check_pipeline.py
                   --work ${CMAKE_BINARY_DIR}/parity_selftest)
  set_tests_properties(parity_selftest PROPERTIES TIMEOUT 300)
  tlm_slow(parity_selftest)
endif()
