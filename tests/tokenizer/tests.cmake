# Tests for src/tokenizer (see tests/tokenizer/data/README.md for where the reference ids come from):
#   test_tokenizer_reference  real tokenizer files vs ids recorded from independent implementations,
#                             round trips, and a 100 kB corpus digest
#   test_tokenizer_nfc        NFC vs Python's unicodedata
#   test_tokenizer_basic      bytes/chars tokenizers, own file format, special ids, run.c decode, errors
#   test_ref_llama2c          the Python run.c model still reproduces the recorded llama2.c ids
#   test_cli_tokenize         `tinylm tokenize` end to end
#   test_gguf_tokenizer       GGUF BPE tokenizers (pre gpt-2, qwen2, llama-bpe) vs recorded ids / tokenizer.json
set(TLM_TOK_TEST_DATA_DEF TLM_TOK_TEST_DATA="${CMAKE_SOURCE_DIR}/tests/tokenizer/data")
foreach(t test_tokenizer_reference test_tokenizer_nfc test_tokenizer_basic)
  tlm_c_test(${t} tests/tokenizer/${t}.c)
  target_compile_definitions(${t} PRIVATE ${TLM_TOK_TEST_DATA_DEF})
endforeach()

if(TLM_PYTHON)
  add_test(NAME test_ref_llama2c
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/tokenizer/ref_llama2c_encode.py --check)
  if(TARGET tinylm_cli)
    # (the sanitizer build: --joined, the texts in one process per tokenizer rather than one each)
    set(_tlm_tok_joined "")
    if(TLM_SANITIZE)
      set(_tlm_tok_joined --joined)
    endif()
    add_test(NAME test_cli_tokenize
             COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/tokenizer/test_cli_tokenize.py $<TARGET_FILE:tinylm_cli>
                     ${_tlm_tok_joined})
    add_test(NAME test_gguf_tokenizer
             COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/tokenizer/test_gguf_tokenizer.py $<TARGET_FILE:tinylm_cli>
                     ${CMAKE_CURRENT_BINARY_DIR}/test_gguf_tokenizer ${_tlm_tok_joined})
  endif()
endif()
