# tests/build — properties of the built library itself.
if(TLM_PYTHON)
  # libtinylm.so exports exactly the functions include/tinylm.h declares (TLM_API), nothing of
  # the internals (ops, optimizer, formats) that would otherwise leak into every Python process.
  add_test(NAME test_exports
           COMMAND ${TLM_PYTHON} ${CMAKE_SOURCE_DIR}/tests/build/test_exports.py
                   --lib $<TARGET_FILE:tinylm_shared> --header ${CMAKE_SOURCE_DIR}/include/tinylm.h)
endif()
