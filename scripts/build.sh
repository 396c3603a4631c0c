#!/bin/sh
# Configures ./build and builds the product: the `sandfence` binary and the
# BPF objects it embeds (what `sandfence demo` and an eval host need).
#
#   build.sh            the product only
#   build.sh --all      every target: the tests, benchmarks and tools too
#                       (what scripts/test.sh builds)
set -eu
cd "$(dirname "$0")/.."
target="--target sandfence"
case "${1:-}" in
"") ;;
--all) target="" ;;
*)
	echo "build: usage: build.sh [--all]" >&2
	exit 64
	;;
esac
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# shellcheck disable=SC2086
cmake --build build -j"$(nproc)" $target
