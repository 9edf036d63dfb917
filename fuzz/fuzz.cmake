# fuzz.cmake — libFuzzer targets, one per fuzz/fuzz_*.c (see fuzz/README.md).
#
# With -DTLM_FUZZ=ON (clang only) this builds `tinylm_fuzz`, a second static library from
# the same source list as `tinylm` but instrumented for coverage + ASan + UBSan, and links
# every fuzz/fuzz_*.c against it with -fsanitize=fuzzer. Adding a fuzzer = adding a file
# (re-run cmake). Each fuzzer defines LLVMFuzzerTestOneInput and includes headers from src/.
option(TLM_FUZZ "Build the libFuzzer targets in fuzz/ (needs CC=clang)" OFF)

if(TLM_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "TLM_FUZZ=ON needs clang (libFuzzer): configure with CC=clang")
  endif()
  set(TLM_FUZZ_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g)

  get_target_property(_tlm_sources tinylm SOURCES)
  get_target_property(_tlm_includes tinylm INCLUDE_DIRECTORIES)
  get_target_property(_tlm_iface_includes tinylm INTERFACE_INCLUDE_DIRECTORIES)
  get_target_property(_tlm_links tinylm LINK_LIBRARIES)
  add_library(tinylm_fuzz STATIC ${_tlm_sources})
  add_dependencies(tinylm_fuzz tlm_report_assets)
  if(_tlm_includes)
    target_include_directories(tinylm_fuzz PRIVATE ${_tlm_includes})
  endif()
  if(_tlm_iface_includes)
    target_include_directories(tinylm_fuzz INTERFACE ${_tlm_iface_includes})
  endif()
  if(_tlm_links)
    target_link_libraries(tinylm_fuzz PUBLIC ${_tlm_links})
  endif()
  # (-Wno-pass-failed: the sanitizers' instrumentation keeps some `omp simd` loops from
  # vectorizing, which clang reports as an error under -Werror; a speed note, not a fault, in a
  # build made to find crashes)
  target_compile_options(tinylm_fuzz PRIVATE -fsanitize=fuzzer-no-link ${TLM_FUZZ_FLAGS} -Wno-pass-failed)

  file(GLOB _tlm_fuzzers CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_*.c)
  foreach(_src ${_tlm_fuzzers})
    get_filename_component(_name ${_src} NAME_WE)
    add_executable(${_name} ${_src})
    target_include_directories(${_name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
    target_compile_options(${_name} PRIVATE -fsanitize=fuzzer ${TLM_FUZZ_FLAGS})
    target_link_options(${_name} PRIVATE -fsanitize=fuzzer ${TLM_FUZZ_FLAGS})
    target_link_libraries(${_name} PRIVATE tinylm_fuzz)
  endforeach()
endif()
