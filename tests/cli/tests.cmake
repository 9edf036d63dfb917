if(TLM_PYTHON)
  add_test(NAME test_cli COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/cli/test_cli.py
           --tinylm $<TARGET_FILE:tinylm_cli> --work ${CMAKE_BINARY_DIR}/test_cli)
endif()
if(TLM_PYTHON)
  add_test(NAME test_cli_options COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/cli/test_cli_options.py
           --tinylm $<TARGET_FILE:tinylm_cli> --work ${CMAKE_BINARY_DIR}/test_cli_options)
  set_tests_properties(test_cli_options PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 300)
endif()
