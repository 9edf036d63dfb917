if(TLM_PYTHON)
  add_test(NAME test_train COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/train/test_train.py
           --tinylm $<TARGET_FILE:tinylm_cli> --data ${CMAKE_SOURCE_DIR}/data/tinyshakespeare.txt
           --work ${CMAKE_BINARY_DIR}/test_train)
  # PROCESSORS 2: its runs use both cores (two OpenMP threads, sometimes two runs at once), so
  # ctest -j2 starts nothing beside it; sharing the cores made it 6x slower under ASan (226 s
  # in the suite, 37 s alone), its spinning OpenMP barriers waiting on the other test's threads
  set_tests_properties(test_train PROPERTIES TIMEOUT 900 PROCESSORS 2)
  tlm_slow(test_train)
endif()
if(TLM_PYTHON)
  add_test(NAME test_llama2c_reference COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/train/test_llama2c_reference.py
           --tinylm $<TARGET_FILE:tinylm_cli>)
endif()
tlm_c_test(test_data_sampler tests/train/test_data_sampler.c)
# AdamW that writes the bf16 mirror in its pass (skipped, 77, without bf16 products)
tlm_c_test(test_optim_mirror tests/train/test_optim_mirror.c)
set_tests_properties(test_optim_mirror PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME test_optim_mirror_avx2 COMMAND test_optim_mirror)
set_tests_properties(test_optim_mirror_avx2 PROPERTIES ENVIRONMENT "TLM_ISA=avx2;OMP_NUM_THREADS=2" SKIP_RETURN_CODE 77)
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
# Python training tests on TinyShakespeare: SCRIPT --tinylm <program> --data <corpus> --work <folder> ARGS
function(tlm_train_test name script timeout)
  add_test(NAME ${name} COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/${script} --tinylm $<TARGET_FILE:tinylm_cli>
           --data ${CMAKE_SOURCE_DIR}/data/tinyshakespeare.txt --work ${CMAKE_BINARY_DIR}/${name} ${ARGN})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${timeout})
endfunction()
# data-parallel training and sweeps over ranks: only where tinylm was built with MPI and mpirun is installed
find_program(TLM_MPIRUN mpirun)
set(_tlm_has_mpi OFF)
if(TLM_MPI AND MPI_C_FOUND AND TLM_MPIRUN)
  set(_tlm_has_mpi ON)
endif()
if(TLM_PYTHON)
  set(_tlm_sweep_mpi "")
  if(_tlm_has_mpi)
    set(_tlm_sweep_mpi --mpi)
  endif()
  tlm_train_test(test_sweep tests/train/test_sweep.py 600 ${_tlm_sweep_mpi})
  set_tests_properties(test_sweep PROPERTIES PROCESSORS 2) # (ranks or threads on both cores, as test_train)
endif()
if(TLM_PYTHON AND _tlm_has_mpi)
  set(_tlm_mpi_quick "")
  if(TLM_SANITIZE)
    set(_tlm_mpi_quick --quick) # the same checks on fewer steps and ranks: instrumented runs are slow
  endif()
  tlm_train_test(test_mpi tests/train/test_mpi.py 900 ${_tlm_mpi_quick})
  set_tests_properties(test_mpi PROPERTIES PROCESSORS 2) # (two ranks on both cores, as test_train)
  tlm_slow(test_mpi)
endif()
# train --log-attn: attention-logit maxima and QK-norm gains per step (src/train/attn_log.c)
if(TLM_PYTHON)
  tlm_cli_test(test_log_attn tests/train/test_log_attn.py)
endif()
# mixed precision end to end (train, resume, sweep, logits; the fp32 fallback forced with TLM_ISA)
if(TLM_PYTHON)
  tlm_train_test(test_precision tests/train/test_precision.py 600)
  set_tests_properties(test_precision PROPERTIES PROCESSORS 2)
  tlm_slow(test_precision)
endif()
