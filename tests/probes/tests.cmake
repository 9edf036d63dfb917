# tests/probes — the probe API (src/probes/probe.h) and `tinylm inspect`.
tlm_c_test(test_probe_api tests/probes/test_probe_api.c)

# probe_dump: runs a case folder with and without a probe and writes the records (for test_probes.py)
add_executable(probe_dump tests/probes/probe_dump.c)
target_link_libraries(probe_dump PRIVATE tinylm)
target_include_directories(probe_dump PRIVATE ${CMAKE_SOURCE_DIR}/src)

# the timing program of bench/probe_overhead.sh (built on demand, not part of the tests)
add_executable(probe_bench EXCLUDE_FROM_ALL bench/probe_bench.c)
target_link_libraries(probe_bench PRIVATE tinylm)
target_include_directories(probe_bench PRIVATE ${CMAKE_SOURCE_DIR}/src)

if(TLM_PYTHON)
  add_test(NAME test_probes
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/probes/test_probes.py
                   --tinylm $<TARGET_FILE:tinylm_cli> --probe-dump $<TARGET_FILE:probe_dump>
                   --work ${CMAKE_BINARY_DIR}/test_probes)
  set_tests_properties(test_probes PROPERTIES
                       ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 300)
endif()

# lens_dump: the tuned lens's loss and translator gradient on a case folder (for test_lens.py)
add_executable(lens_dump tests/probes/lens_dump.c)
target_link_libraries(lens_dump PRIVATE tinylm)
target_include_directories(lens_dump PRIVATE ${CMAKE_SOURCE_DIR}/src)
if(TLM_PYTHON)
  add_test(NAME test_lens
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/probes/test_lens.py
                   --tinylm $<TARGET_FILE:tinylm_cli> --lens-dump $<TARGET_FILE:lens_dump>
                   --work ${CMAKE_BINARY_DIR}/test_lens)
  set_tests_properties(test_lens PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 600)
endif()
