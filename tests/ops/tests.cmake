tlm_c_test(test_ops_gradcheck tests/ops/test_ops_gradcheck.c)
# the matvec kernels: natively, and capped to AVX2 and to plain C (each set runs on any x86-64
# CPU that has it; the test checks that the set asked for ran)
tlm_c_test(test_matvec tests/ops/test_matvec.c)
foreach(isa avx2 scalar)
  add_test(NAME test_matvec_${isa} COMMAND test_matvec)
  set_tests_properties(test_matvec_${isa} PROPERTIES ENVIRONMENT "TLM_ISA=${isa};OMP_NUM_THREADS=2")
endforeach()
