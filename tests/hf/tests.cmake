# tests/hf — Hugging Face families, llama2.c checkpoints and export against independent
# references (tests/hf/hf_ref.py, tests/hf/ref_llama2c.py). See tests/hf/README.md.
add_executable(hf_tool tests/hf/hf_tool.c src/cli/cmd_export.c src/cli/cmd_logits.c src/cli/cli_util.c src/cli/cli_args.c)
target_link_libraries(hf_tool PRIVATE tinylm)
target_include_directories(hf_tool PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/src/cli)
if(TLM_PYTHON)
  add_test(NAME test_hf_families
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/hf/test_hf.py
                   --tool $<TARGET_FILE:hf_tool> --work ${CMAKE_BINARY_DIR}/test_hf)
  set_tests_properties(test_hf_families PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 300)
endif()
