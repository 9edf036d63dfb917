tlm_c_test(test_lesson tests/lesson/test_lesson.c)
# every topic of the course: its numbers against their stated values, in both languages
tlm_c_test(test_course tests/lesson/test_course.c)
set_tests_properties(test_course PROPERTIES TIMEOUT 300)
# the lesson command as a learner runs it; lesson stream --model on a Qwen2-shaped checkpoint
tlm_cli_test(test_lesson_cli tests/lesson/test_lesson_cli.py)
if(TLM_PYTHON)
  set_tests_properties(test_lesson_cli PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 300)
endif()
# lesson TOPIC --html and train --html in headless Chromium: every number a row, the placement switch,
# the training page (final and live), no request
if(TLM_PYTHON)
  add_test(NAME test_course_pages
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/browser/run_course_pages.py
                   --tinylm $<TARGET_FILE:tinylm_cli> --work ${CMAKE_BINARY_DIR}/test_course_pages)
  set_tests_properties(test_course_pages PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 400)
endif()
