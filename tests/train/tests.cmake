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
# data-parallel training: only where tinylm was built with MPI and mpirun is installed
find_program(TLM_MPIRUN mpirun)
if(TLM_PYTHON)
  set(_tlm_sweep_mpi "")
  if(TLM_MPI AND MPI_C_FOUND AND TLM_MPIRUN)
    set(_tlm_sweep_mpi --mpi)
  endif()
  add_test(NAME test_sweep COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/train/test_sweep.py
           --tinylm $<TARGET_FILE:tinylm_cli> --data ${CMAKE_SOURCE_DIR}/data/tinyshakespeare.txt
           --work ${CMAKE_BINARY_DIR}/test_sweep ${_tlm_sweep_mpi})
  set_tests_properties(test_sweep PROPERTIES TIMEOUT 600)
endif()
if(TLM_PYTHON AND TLM_MPI AND MPI_C_FOUND AND TLM_MPIRUN)
  set(_tlm_mpi_quick "")
  if(TLM_SANITIZE)
    set(_tlm_mpi_quick --quick) # the same checks on fewer steps and ranks: instrumented runs are slow
  endif()
  add_test(NAME test_mpi COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/train/test_mpi.py
           --tinylm $<TARGET_FILE:tinylm_cli> --data ${CMAKE_SOURCE_DIR}/data/tinyshakespeare.txt
           --work ${CMAKE_BINARY_DIR}/test_mpi ${_tlm_mpi_quick})
  set_tests_properties(test_mpi PROPERTIES TIMEOUT 900)
endif()
