# Tests for src/formats (safetensors, GGUF, npy, npz, 16-bit floats) and util/atomic_file.
tlm_c_test(test_f16 tests/formats/test_f16.c)
tlm_c_test(test_atomic_file tests/formats/test_atomic_file.c)
tlm_c_test(test_npy tests/formats/test_npy.c)
tlm_c_test(test_npz tests/formats/test_npz.c)
tlm_c_test(test_safetensors tests/formats/test_safetensors.c)
tlm_c_test(test_safetensors_dir tests/formats/test_safetensors_dir.c)
tlm_c_test(test_gguf tests/formats/test_gguf.c)

# st_tool: a helper that the Python test drives (convert npy <-> safetensors).
add_executable(st_tool tests/formats/st_tool.c)
target_link_libraries(st_tool PRIVATE tinylm)
target_include_directories(st_tool PRIVATE ${CMAKE_SOURCE_DIR}/src)
if(TLM_PYTHON)
  add_test(NAME test_formats_python
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/formats/test_formats.py $<TARGET_FILE:st_tool>)
endif()
