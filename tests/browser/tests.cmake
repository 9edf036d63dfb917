# tests/browser — the HTML reports (inspect --html, tinylm report) in headless Chromium through
# puppeteer-core (tests/browser/package.json; node_modules is installed by the wrapper with
# `npm ci` when absent). Needs node + npm + chromium: without them the test fails and says what
# to install. Not registered in the sanitizer build: the pages are written by the same C code the
# other tests run there (test_report_cli below runs inspect --html and tinylm report under ASan),
# and Chromium under a sanitized tinylm adds nothing but time.
if(TLM_PYTHON AND NOT TLM_SANITIZE)
  add_test(NAME test_browser
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/browser/run_browser_test.py
                   --tinylm $<TARGET_FILE:tinylm_cli> --work ${CMAKE_BINARY_DIR}/test_browser)
  set_tests_properties(test_browser PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 240)
endif()
# the page writer and the experiment schema checks without a browser (also under the sanitizers)
tlm_cli_test(test_report_cli tests/browser/test_report_cli.py)
