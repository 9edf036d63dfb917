# tests/parity — the C engine's forward/backward against the PyTorch oracle (tests/reference).
#
# parity_pytorch needs the engine's tlm_dump program. The check runs deferred (at the end of
# the top-level CMakeLists) so it sees tlm_dump wherever and whenever that target is defined.
function(tlm_parity_add_tests)
  if(TARGET tlm_dump AND TLM_PYTHON)
    add_test(NAME parity_pytorch
             COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/parity/test_parity.py
                     --dump-bin $<TARGET_FILE:tlm_dump> --work ${CMAKE_BINARY_DIR}/parity)
    set_tests_properties(parity_pytorch PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 300)
  endif()
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL tlm_parity_add_tests)

if(TLM_PYTHON)
  # The oracle itself, checked against torch.nn, finite differences and hand-worked values.
  add_test(NAME reference_selftest COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reference/check_ref.py)
  # The parity test itself: a float32 stand-in passes, broken stand-ins and mutants fail.
  add_test(NAME parity_selftest
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/parity/check_pipeline.py
                   --work ${CMAKE_BINARY_DIR}/parity_selftest)
  set_tests_properties(parity_selftest PROPERTIES TIMEOUT 300)
endif()
