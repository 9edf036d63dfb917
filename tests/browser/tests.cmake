# tests/browser — the HTML reports (inspect --html, tinylm report) in headless Chromium through
# puppeteer-core (tests/browser/package.json; node_modules is installed by the wrapper with
# `npm ci` when absent). Needs node + npm + chromium: without them the test FAILS and says what
# to install (it never skips). It runs in the sanitizer build too (about 25 s there, 10 s in
# the release build, on 2 cores).
if(TLM_PYTHON)
  add_test(NAME test_browser
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/browser/run_browser_test.py
                   --tinylm $<TARGET_FILE:tinylm_cli> --work ${CMAKE_BINARY_DIR}/test_browser)
  set_tests_properties(test_browser PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 240)
endif()
# the pages' data without a browser: the --json report, per-position top-k, attention rows that sum
# to 1 and equal the engine's probabilities, experiment schema errors, the --plot window
tlm_cli_test(test_report_cli tests/browser/test_report_cli.py)
# the page writer in C: base64, escaping, the page's structure (src/report/report.h)
tlm_c_test(test_report_writer tests/browser/test_report_writer.c)
# the Python package's views (python/tinylm/views.py: attention patterns, a patched run's, arrays over
# the positions, hostile token strings, _repr_html_'s sandboxed frames) in the same headless Chromium
# (not in the sanitizer build: Python would need the ASan runtime preloaded, and node and Chromium must
# not get it; the page writer runs under ASan in test_report_writer and test_python_misuse)
if(TLM_PYTHON AND NOT TLM_SANITIZE)
  add_test(NAME test_browser_views
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/browser/run_views_test.py
                   --lib $<TARGET_FILE:tinylm_shared> --work ${CMAKE_BINARY_DIR}/test_browser_views)
  set_tests_properties(test_browser_views PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 240)
endif()
