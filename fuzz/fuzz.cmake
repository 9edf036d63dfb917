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
  # -O1: the sanitizers' usual level (as the ASan build), whatever CMAKE_BUILD_TYPE says (the last -O
  # given wins). At -O3 clang spent minutes on the SIMD kernels under the instrumentation: the fuzz
  # build's compile was the longest of the suite's builds (docs/testing.md has the figures).
  set(TLM_FUZZ_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1)

  # (-Wno-pass-failed: the sanitizers' instrumentation keeps some `omp simd` loops from
  # vectorizing, which clang reports as an error under -Werror; a speed note, not a fault, in a
  # build made to find crashes)
  target_compile_options(tinylm_objects PRIVATE -fsanitize=fuzzer-no-link ${TLM_FUZZ_FLAGS} -Wno-pass-failed)
  # The quantized kernels (every block type's unpacking, instantiated once per instruction set) at
  # -O0: they still took clang most of the build at -O1, and what the targets feed them is the few
  # small weight matrices of the models that load; -O0 keeps every sanitizer check (it removes
  # none of the accesses the instrumentation watches).
  set_source_files_properties(src/ops/quant.c src/ops/quant_int.c src/ops/quant_gemm.c
                              PROPERTIES COMPILE_OPTIONS -O0)

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
