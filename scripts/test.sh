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
ctest --output-on-failure --timeout 600 "$@"
