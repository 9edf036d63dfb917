tlm_c_test(test_lesson tests/lesson/test_lesson.c)
