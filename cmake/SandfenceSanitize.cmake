# Sanitizers and fuzzing instrumentation for every C++ target.
#
#   -DSANDFENCE_SANITIZE=address,undefined   adds -fsanitize=LIST to the
#       compile and link of C++ targets. Every report is fatal
#       (-fno-sanitize-recover=all), so a test that triggers one fails.
#   -DSANDFENCE_FUZZ=ON (top-level option)   also instruments C++ code for
#       libFuzzer (-fsanitize=fuzzer-no-link) and builds fuzz/. Needs clang;
#       without an explicit SANDFENCE_SANITIZE it means address,undefined.
#
# C targets (the guard test helpers) and the BPF objects (compiled by
# sandfence_bpf_object with their own flags) are left alone: the helpers
# exist to make raw syscalls, and BPF code has no sanitizer runtime.
# One build tree with both options serves the fuzzers and the sanitized
# unit tests alike (scripts/sanitize.sh), so CI compiles the code once.

set(SANDFENCE_SANITIZE "" CACHE STRING
    "Sanitizers for C++ targets, as for -fsanitize= (e.g. address,undefined)")

if(SANDFENCE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR
      "SANDFENCE_FUZZ needs clang (libFuzzer): configure with "
      "-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang")
  endif()
  if(NOT SANDFENCE_SANITIZE)
    set(SANDFENCE_SANITIZE "address,undefined" CACHE STRING "" FORCE)
  endif()
endif()

if(SANDFENCE_SANITIZE)
  message(STATUS "sandfence: C++ built with -fsanitize=${SANDFENCE_SANITIZE}")
  set(sandfence_sanitize_flags
      -fsanitize=${SANDFENCE_SANITIZE} -fno-sanitize-recover=all
      -fno-omit-frame-pointer)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${sandfence_sanitize_flags}>")
  add_link_options("$<$<LINK_LANGUAGE:CXX>:${sandfence_sanitize_flags}>")
endif()

if(SANDFENCE_FUZZ)
  # Coverage feedback for the libraries; the fuzz targets themselves link
  # with -fsanitize=fuzzer (libFuzzer's main), see fuzz/CMakeLists.txt.
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>")
endif()
