# fuzz.cmake — libFuzzer targets, one per fuzz/fuzz_*.c (see fuzz/README.md).
#
# With -DTLM_FUZZ=ON (clang only) the library itself is instrumented for coverage + ASan +
# UBSan (a build directory of its own, build-fuzz), and every fuzz/fuzz_*.c is linked against
# it with -fsanitize=fuzzer. Adding a fuzzer = adding a file
# (re-run cmake). Each fuzzer defines LLVMFuzzerTestOneInput and includes headers from src/.
option(TLM_FUZZ "Build the libFuzzer targets in fuzz/ (needs CC=clang)" OFF)

if(TLM_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "TLM_FUZZ=ON needs clang (libFuzzer): configure with CC=clang")
  endif()
  set(TLM_FUZZ_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g)

  # (-Wno-pass-failed: the sanitizers' instrumentation keeps some `omp simd` loops from
  # vectorizing, which clang reports as an error under -Werror; a speed note, not a fault, in a
  # build made to find crashes)
  target_compile_options(tinylm_objects PRIVATE -fsanitize=fuzzer-no-link ${TLM_FUZZ_FLAGS} -Wno-pass-failed)

  file(GLOB _tlm_fuzzers CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_*.c)
  foreach(_src ${_tlm_fuzzers})
    get_filename_component(_name ${_src} NAME_WE)
    add_executable(${_name} ${_src})
    target_include_directories(${_name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
    target_compile_options(${_name} PRIVATE -fsanitize=fuzzer ${TLM_FUZZ_FLAGS})
    target_link_options(${_name} PRIVATE -fsanitize=fuzzer ${TLM_FUZZ_FLAGS})
    target_link_libraries(${_name} PRIVATE tinylm)
  endforeach()
endif()
