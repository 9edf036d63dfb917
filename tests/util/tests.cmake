tlm_c_test(test_text_escape tests/util/test_text_escape.c)
# the AMX bits and permission of util/cpu.c: a TDPBF16PS runs where they say it may (skipped elsewhere)
tlm_c_test(test_cpu_amx tests/util/test_cpu_amx.c)
set_tests_properties(test_cpu_amx PROPERTIES SKIP_RETURN_CODE 77)
# signals sent while passes and products run: no handler runs off its thread's stack (util/signals.h)
tlm_c_test(test_signal_safety tests/util/test_signal_safety.c)
# the checked conversion of every float read from a file (util/finite.h): non-finite, beyond float32, ranges
tlm_c_test(test_file_float tests/util/test_file_float.c)
