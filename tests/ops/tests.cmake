tlm_c_test(test_ops_gradcheck tests/ops/test_ops_gradcheck.c)
