tlm_c_test(test_text_escape tests/util/test_text_escape.c)
# the AMX bits and permission of util/cpu.c: a TDPBF16PS runs where they say it may (skipped elsewhere)
tlm_c_test(test_cpu_amx tests/util/test_cpu_amx.c)
set_tests_properties(test_cpu_amx PROPERTIES SKIP_RETURN_CODE 77)
