tlm_cli_test(test_cli tests/cli/test_cli.py)
tlm_cli_test(test_cli_options tests/cli/test_cli_options.py)
if(TEST test_cli_options)
  set_tests_properties(test_cli_options PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 300)
endif()
if(TLM_PYTHON)
  # every path option given a missing path, a directory, a FIFO, a dangling link, a loop, ...
  add_test(NAME test_bad_paths COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/cli/test_bad_paths.py
           --tinylm $<TARGET_FILE:tinylm_cli> --work ${CMAKE_BINARY_DIR}/test_bad_paths)
  set_tests_properties(test_bad_paths PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 600)
endif()
if(TLM_PYTHON)
  add_test(NAME test_info_memory COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/cli/test_info_memory.py
           --tinylm $<TARGET_FILE:tinylm_cli> --work ${CMAKE_BINARY_DIR}/test_info_memory)
endif()
if(TLM_PYTHON)
  # every export carries its tokenizer and generates as the original; --format llama2c
  add_test(NAME test_export COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/cli/test_export.py
           --tinylm $<TARGET_FILE:tinylm_cli> --work ${CMAKE_BINARY_DIR}/test_export)
  set_tests_properties(test_export PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 300)
endif()
if(TLM_PYTHON)
  # every output option given each kind of target (links, FIFOs, directories, devices), and every
  # output made to be each of the command's inputs (by name, symbolic and hard link): refused
  add_test(NAME test_output_paths COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/cli/test_output_paths.py
           --tinylm $<TARGET_FILE:tinylm_cli> --work ${CMAKE_BINARY_DIR}/test_output_paths)
  set_tests_properties(test_output_paths PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 300)
endif()
if(TLM_PYTHON)
  # tinylm info --explain for every family (the lessons' facts), unknown keys named; DeepNorm from the CLI
  add_test(NAME test_explain COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/cli/test_explain.py
           --tinylm $<TARGET_FILE:tinylm_cli> --work ${CMAKE_BINARY_DIR}/test_explain)
  set_tests_properties(test_explain PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 120)
endif()
if(TLM_PYTHON)
  # info --system's AMX / AVX512-BF16 / AVX512-VNNI line against /proc/cpuinfo's flags (skipped without it)
  add_test(NAME test_info_system COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/cli/test_info_system.py
           --tinylm $<TARGET_FILE:tinylm_cli> --work ${CMAKE_BINARY_DIR}/test_info_system)
  set_tests_properties(test_info_system PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
if(TLM_PYTHON)
  # tinylm compare: formats of one model, quantized exports, .npz references, planted convention bugs
  add_test(NAME test_compare COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/cli/test_compare.py
           --tinylm $<TARGET_FILE:tinylm_cli> --work ${CMAKE_BINARY_DIR}/test_compare)
  set_tests_properties(test_compare PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 300)
endif()
if(TLM_PYTHON)
  # every float a reader takes from a file (config.json of every family, GGUF metadata of every
  # architecture, tokenizer scores, trainer.json, sweep grids): +-Inf, NaN, 1e39 and each range's edges
  add_test(NAME test_file_floats COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/cli/test_file_floats.py
           --tinylm $<TARGET_FILE:tinylm_cli> --work ${CMAKE_BINARY_DIR}/test_file_floats)
  set_tests_properties(test_file_floats PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 400)
endif()
