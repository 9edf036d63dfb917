# tests/python — the Python package (python/tinylm) over libtinylm.so, against the PyTorch reference.
# the C side of Model.weights(writable=True): a file-mapped model is copied, bf16 refused
tlm_c_test(test_params_writable tests/python/test_params_writable.c)
if(TLM_PYTHON)
  set(_tlm_py_env "OMP_NUM_THREADS=1")
  if(TLM_SANITIZE)
    # libtinylm.so is instrumented: the sanitizer runtime must be loaded before Python itself;
    # Python's own allocations are never freed at exit, so leak reports are off for this one.
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
                    OUTPUT_VARIABLE _tlm_asan OUTPUT_STRIP_TRAILING_WHITESPACE)
    list(APPEND _tlm_py_env "LD_PRELOAD=${_tlm_asan}" "ASAN_OPTIONS=detect_leaks=0")
  endif()
  add_test(NAME test_python_api
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/test_python_api.py
                   --lib $<TARGET_FILE:tinylm_shared> --tinylm $<TARGET_FILE:tinylm_cli>
                   --work ${CMAKE_BINARY_DIR}/test_python_api)
  set_tests_properties(test_python_api PROPERTIES ENVIRONMENT "${_tlm_py_env}" TIMEOUT 600)
  # padded batches (left and right) and backward hooks that edit gradients, against the reference per prompt
  add_test(NAME test_python_batch
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/test_python_batch.py
                   --lib $<TARGET_FILE:tinylm_shared> --work ${CMAKE_BINARY_DIR}/test_python_batch)
  set_tests_properties(test_python_batch PROPERTIES ENVIRONMENT "${_tlm_py_env}" TIMEOUT 600)
  # misuse tables, threads (one model and several, against a serial run), fork, Ctrl-C, the CLI's sampler
  add_test(NAME test_python_misuse
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/test_python_misuse.py
                   --lib $<TARGET_FILE:tinylm_shared> --tinylm $<TARGET_FILE:tinylm_cli>
                   --work ${CMAKE_BINARY_DIR}/test_python_misuse)
  set_tests_properties(test_python_misuse PROPERTIES ENVIRONMENT "${_tlm_py_env}" TIMEOUT 600)
  # Model.weights() (TransformerLens names, views, writable edits) and the ActivationCache helpers
  add_test(NAME test_python_interp
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/test_python_interp.py
                   --lib $<TARGET_FILE:tinylm_shared> --work ${CMAKE_BINARY_DIR}/test_python_interp)
  set_tests_properties(test_python_interp PROPERTIES ENVIRONMENT "${_tlm_py_env}" TIMEOUT 600)
  # a mixture of experts: router / expert hook points, rerouting, gradients, against the reference
  add_test(NAME test_python_moe
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/test_python_moe.py
                   --lib $<TARGET_FILE:tinylm_shared> --work ${CMAKE_BINARY_DIR}/test_python_moe)
  set_tests_properties(test_python_moe PROPERTIES ENVIRONMENT "${_tlm_py_env}" TIMEOUT 300)
endif()
if(TLM_PYTHON)
  # Model.set_precision: bf16 products from Python, the fp32 fallback with a warning
  add_test(NAME test_python_precision
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/test_python_precision.py
                   --lib $<TARGET_FILE:tinylm_shared> --tinylm $<TARGET_FILE:tinylm_cli>
                   --work ${CMAKE_BINARY_DIR}/test_python_precision)
  set_tests_properties(test_python_precision PROPERTIES ENVIRONMENT "${_tlm_py_env}" TIMEOUT 300)
  # a Q8_0 GGUF through inspect (json, html, probes), the tuned lens and the Python API
  add_test(NAME test_python_gguf
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/test_python_gguf.py
                   --lib $<TARGET_FILE:tinylm_shared> --tinylm $<TARGET_FILE:tinylm_cli>
                   --work ${CMAKE_BINARY_DIR}/test_python_gguf)
  set_tests_properties(test_python_gguf PROPERTIES ENVIRONMENT "${_tlm_py_env}" TIMEOUT 300)
endif()
if(TLM_PYTHON AND NOT TLM_SANITIZE)
  # pip install . into a fresh venv (CMake builds libtinylm.so into the package), the examples run
  # from outside the repository, python3 -m build --wheel (not in the sanitizer build: the
  # package builds its own Release library)
  add_test(NAME test_pip_install
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/test_pip_install.py
                   --lib $<TARGET_FILE:tinylm_shared> --tinylm $<TARGET_FILE:tinylm_cli>
                   --work ${CMAKE_BINARY_DIR}/test_pip_install)
  # (its venv and tree are where test_notebooks runs the notebooks)
  set_tests_properties(test_pip_install PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 900 SKIP_RETURN_CODE 77
                       FIXTURES_SETUP tlm_pip_venv)
  tlm_slow(test_pip_install)
endif()
if(TLM_PYTHON AND NOT TLM_SANITIZE)
  # examples/*.ipynb executed (python3-nbclient, python3-ipykernel), their numbers against the float64
  # PyTorch reference (the logit lens and DLA, activation and attribution patching, induction heads on a
  # model `tinylm train` makes in the test); not in the sanitizer build (the kernel is a process of its own).
  # They run from test_pip_install's venv, as a user opens them: its own kernel, its installed package.
  add_test(NAME test_notebooks
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/test_notebooks.py
                   --lib $<TARGET_FILE:tinylm_shared> --tinylm $<TARGET_FILE:tinylm_cli>
                   --work ${CMAKE_BINARY_DIR}/test_notebooks --venv ${CMAKE_BINARY_DIR}/test_pip_install/venv
                   --tree ${CMAKE_BINARY_DIR}/test_pip_install/src)
  set_tests_properties(test_notebooks PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 300
                       FIXTURES_REQUIRED tlm_pip_venv)
  tlm_slow(test_notebooks)
endif()
if(TLM_PYTHON)
  # TransformerLens' idioms (cfg, weight attributes, text input, persistent hooks, FactoredMatrix,
  # tinylm.patching) against the reference and the package's own calls
  add_test(NAME test_python_tl
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/test_python_tl.py
                   --lib $<TARGET_FILE:tinylm_shared> --work ${CMAKE_BINARY_DIR}/test_python_tl)
  set_tests_properties(test_python_tl PROPERTIES ENVIRONMENT "${_tlm_py_env}" TIMEOUT 300)
endif()
if(TLM_PYTHON AND NOT TLM_SANITIZE)
  # examples/exploratory_analysis.ipynb executed: TransformerLens' exploratory-analysis flow (logit difference,
  # DLA by layer and head, attention to the name, activation patching by layer x position, by head, by head
  # and position, and each head's q / k / v / pattern) on stories260K, every number against the float64 reference
  add_test(NAME test_notebook_exploratory
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/test_notebooks.py
                   --lib $<TARGET_FILE:tinylm_shared> --tinylm $<TARGET_FILE:tinylm_cli>
                   --work ${CMAKE_BINARY_DIR}/test_notebook_exploratory --only exploratory_analysis)
  set_tests_properties(test_notebook_exploratory PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 600)
endif()
if(TLM_PYTHON)
  # the hook points made only when watched (hook_attn_in, split q/k/v inputs, attn.hook_result,
  # hook_mlp_in): values, gradients, forward and backward edits against the reference
  add_test(NAME test_python_hook_points
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/python/test_python_hook_points.py
                   --lib $<TARGET_FILE:tinylm_shared> --tinylm $<TARGET_FILE:tinylm_cli>
                   --work ${CMAKE_BINARY_DIR}/test_python_hook_points)
  set_tests_properties(test_python_hook_points PROPERTIES ENVIRONMENT "${_tlm_py_env}" TIMEOUT 300)
endif()
