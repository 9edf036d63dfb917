tlm_c_test(test_text_escape tests/util/test_text_escape.c)
