# tests/llamacpp — llama.cpp as the oracle of tinylm's GGUF export: node-llama-cpp 3.21.1's prebuilt
# CPU build of llama.cpp (tests/llamacpp/package.json, installed by .ci/run with
# `npm ci --prefix tests/llamacpp --omit=optional --no-audit --no-fund`) runs tinylm's exports of
# stories260K and of a random GQA llama (f32, q8_0, q4_0, q4_k): the same tokens, the same greedy
# text, log-probabilities within 1e-4 (f32) or within llama.cpp's activation rounding (quantized).
# SKIPPED (77) without Node.js >= 20 or without tests/llamacpp/node_modules. About 20 s on 2 cores.
# Not in the sanitizer build: its C code is the export, which test_gguf_model runs there in every
# type (and reads back, and runs); the rest of it is llama.cpp's.
if(TLM_PYTHON AND NOT TLM_SANITIZE)
  add_test(NAME test_llamacpp
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/llamacpp/test_llamacpp.py
                   --tinylm $<TARGET_FILE:tinylm_cli> --work ${CMAKE_BINARY_DIR}/test_llamacpp)
  set_tests_properties(test_llamacpp PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 300 SKIP_RETURN_CODE 77)
  tlm_slow(test_llamacpp)
endif()
