# tests/experiments — each experiment of experiments/ in its --quick form (experiments/run.py):
# result.json's schema, README.md, every figure rendered by rsvg-convert, and the experiment's own
# qualitative checks. Minutes of training in all, so not in the sanitizer build (the engine's
# code is the same that the other tests run instrumented).
if(TLM_PYTHON AND NOT TLM_SANITIZE)
  file(GLOB _tlm_exps CONFIGURE_DEPENDS RELATIVE ${CMAKE_SOURCE_DIR}/experiments ${CMAKE_SOURCE_DIR}/experiments/exp_*.py)
  list(SORT _tlm_exps)
  foreach(_f ${_tlm_exps})
    string(REGEX REPLACE "^exp_(.*)\\.py$" "\\1" _name ${_f})
    add_test(NAME experiment_${_name}
             COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/experiments/test_experiment.py ${_name}
                     --tinylm $<TARGET_FILE:tinylm_cli> --work ${CMAKE_BINARY_DIR}/experiment_${_name}
                     --cache ${CMAKE_BINARY_DIR}/experiments_models)
    # one model cache for all of them (stream_growth, layer_deletion, attention_sinks and
    # rmsnorm_vs_layernorm share trained models): the lock runs them one at a time under ctest -j
    set_tests_properties(experiment_${_name} PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 600
                         LABELS "experiments;slow" RESOURCE_LOCK tlm_experiments_models FIXTURES_SETUP experiment_pages)
  endforeach()
  # every experiment's report.html (the quick runs' above) opened in headless Chromium
  add_test(NAME test_experiment_pages
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/browser/run_experiment_pages.py --build ${CMAKE_BINARY_DIR})
  set_tests_properties(test_experiment_pages PROPERTIES FIXTURES_REQUIRED experiment_pages TIMEOUT 300)
  tlm_slow(test_experiment_pages)
endif()
# the shared code (svgplot, common, run.py's Markdown, bf16 rounding, the training cache with a
# fake tinylm and three tiny real runs): seconds
if(TLM_PYTHON)
  add_test(NAME experiments_framework
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/experiments/test_framework.py
                   --work ${CMAKE_BINARY_DIR}/experiments_framework --tinylm $<TARGET_FILE:tinylm_cli>)
  set_tests_properties(experiments_framework PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
# the verdict rules of post_norm_warmup, residual_init and layer_deletion on made-up numbers: seconds
if(TLM_PYTHON)
  add_test(NAME experiments_verdicts COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/experiments/test_verdicts.py)
endif()
