#!/bin/sh
# Builds sandfence with clang, AddressSanitizer and UndefinedBehaviorSanitizer
# (every report fatal) and the libFuzzer targets into ./build-asan, then
# runs each fuzz target for a short, fixed time (ctest -L fuzz) and the
# unit tests (ctest -L unit) there. Part of scripts/test.sh, and so of CI.
#
#   SANDFENCE_FUZZ_SECONDS=N   seconds per fuzz target (default 15)
#   extra arguments            passed to both ctest runs (e.g. -R policy)
set -eu
cd "$(dirname "$0")/.."
seconds=${SANDFENCE_FUZZ_SECONDS:-15}
# Line tables are all a sanitizer's stack trace needs, and cost a third less
# compile time than full debug info.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
	-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	-DSANDFENCE_FUZZ=ON -DSANDFENCE_SANITIZE=address,undefined \
	-DSANDFENCE_FUZZ_SECONDS="$seconds" >/dev/null
# Only what runs here: the kernel and end-to-end tests, the benchmarks and
# the VM suite are not built in this tree.
cmake --build build-asan -j"$(nproc)" --target unit_tests fuzzers
cd build-asan
# Stack traces for UBSan reports too; ASan's defaults already abort.
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# Two at a time, as the main suite: each fuzz target runs for a fixed time
# on one core.
ctest -j2 --output-on-failure -L fuzz "$@"
ctest -j2 --output-on-failure --timeout 600 -L unit "$@"
