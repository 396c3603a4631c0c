#!/bin/sh
# Installs dependencies, builds, and runs the whole test suite with ctest,
# then the sanitizer build: each fuzz target for a short fixed time and the
# unit tests under ASan and UBSan (scripts/sanitize.sh; skipped with
# SANDFENCE_NO_SANITIZE=1). This is the README's test command and what CI
# runs.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --test
./scripts/build.sh --all
cd build
# Two at a time (the machine has two cores): every test keeps its BPF
# programs, cgroups, pins and ports to itself (tests/README.md, "The suite
# under ctest -j2"), and the VM suites and benchmarks are RUN_SERIAL.
#
# The VM suite's kernel x suite table (tests/vm) comes last, whatever the
# result, so the log shows it even when every test passed.
rm -f vm-matrix.txt
status=0
ctest -j2 --output-on-failure --timeout 600 "$@" || status=$?
[ ! -f vm-matrix.txt ] || cat vm-matrix.txt
cd ..
if [ "${SANDFENCE_NO_SANITIZE:-0}" = 1 ]; then
	echo "test: SKIPPED the sanitizer build and fuzzing (SANDFENCE_NO_SANITIZE=1)"
else
	./scripts/sanitize.sh || status=$?
fi
exit "$status"
