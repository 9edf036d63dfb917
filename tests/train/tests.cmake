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
# The training trajectory (AdamW, decay groups, clipping, schedule, accumulation) against PyTorch.
add_executable(train_dump tests/train/train_dump.c)
target_link_libraries(train_dump PRIVATE tinylm)
target_include_directories(train_dump PRIVATE ${CMAKE_SOURCE_DIR}/src)
if(TLM_PYTHON)
  add_test(NAME train_parity_pytorch
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/train/test_train_parity.py
                   --dump-bin $<TARGET_FILE:train_dump> --work ${CMAKE_BINARY_DIR}/train_parity)
  set_tests_properties(train_parity_pytorch PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 300)
endif()
