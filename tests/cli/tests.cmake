if(TLM_PYTHON)
  add_test(NAME test_cli COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/cli/test_cli.py
           --tinylm $<TARGET_FILE:tinylm_cli> --work ${CMAKE_BINARY_DIR}/test_cli)
endif()
