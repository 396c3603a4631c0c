#!/bin/sh
# Installs dependencies, builds, and runs the whole test suite with ctest.
# This is the README's test command and what CI runs.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
cd build
# Tests run one at a time: many attach BPF programs and create cgroups, and
# the machine has two cores.
#
# The VM suite's kernel x suite table (tests/vm) comes last, whatever the
# result, so the log shows it even when every test passed.
rm -f vm-matrix.txt
status=0
ctest --output-on-failure --timeout 600 "$@" || status=$?
[ ! -f vm-matrix.txt ] || cat vm-matrix.txt
exit "$status"
