# Each test area keeps its own tests/<area>/tests.cmake; they are all included here.
#
# Tiers: `./scripts/test.sh --quick` runs `ctest -LE slow` in the release build, what a contributor
# runs after each change; the whole suite runs everything. A test is in the quick tier unless it
# is labelled `slow`: a long end-to-end run, a repeat of another test under a capped ISA, a whole
# training of an experiment. Label one with tlm_slow(NAME ...) after its definition.
function(tlm_slow)
  foreach(t ${ARGN})
    if(TEST ${t})
      set_property(TEST ${t} APPEND PROPERTY LABELS slow)
    endif()
  endforeach()
endfunction()

# Helper for plain C test executables linked against the library:
function(tlm_c_test name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE tinylm)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tests)
  # the repository root, for tests that read data/ or tests/data/
  target_compile_definitions(${name} PRIVATE TLM_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2")
endfunction()

# Helper for the Python tests of the `tinylm` program: SCRIPT --tinylm <program> --work <a fresh
# folder in the build tree> (tests/cli/harness.py); nothing without /usr/bin/python3.
function(tlm_cli_test name script)
  if(TLM_PYTHON)
    add_test(NAME ${name} COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/${script}
             --tinylm $<TARGET_FILE:tinylm_cli> --work ${CMAKE_BINARY_DIR}/${name})
  endif()
endfunction()

file(GLOB TLM_TEST_AREAS RELATIVE ${CMAKE_SOURCE_DIR} ${CMAKE_SOURCE_DIR}/tests/*/tests.cmake)
list(SORT TLM_TEST_AREAS)
foreach(part ${TLM_TEST_AREAS})
  include(${part})
endforeach()
