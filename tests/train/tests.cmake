if(TLM_PYTHON)
  add_test(NAME test_train COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/train/test_train.py
           --tinylm $<TARGET_FILE:tinylm_cli> --data ${CMAKE_SOURCE_DIR}/data/tinyshakespeare.txt
           --work ${CMAKE_BINARY_DIR}/test_train)
  set_tests_properties(test_train PROPERTIES TIMEOUT 900)
endif()
if(TLM_PYTHON)
  add_test(NAME test_llama2c_reference COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/train/test_llama2c_reference.py
           --tinylm $<TARGET_FILE:tinylm_cli>)
endif()
tlm_c_test(test_data_sampler tests/train/test_data_sampler.c)
