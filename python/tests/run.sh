#!/bin/sh
# ctest's entries for the Python client (python/CMakeLists.txt): pytest on
# python/tests, `run.sh daemon` the tests against a real daemon (root; the
# binary in $SANDFENCE_BIN), `run.sh unit` the rest. Prints pytest's summary
# with every skip's reason; exits 77 (ctest: skipped) when nothing ran.
set -u
case "${1:-}" in
daemon) select="daemon" ;;
unit) select="not daemon" ;;
*) echo "usage: run.sh daemon|unit" >&2; exit 64 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3   # Debian's: python3-grpcio, -protobuf, -pytest
if ! $py -c 'import pytest, grpc, google.protobuf' 2>/dev/null; then
	echo "SKIPPED: needs $py with python3-pytest, python3-grpcio and python3-protobuf"
	exit 77
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# No caches or bytecode in the source tree.
PYTHONDONTWRITEBYTECODE=1 $py -m pytest -p no:cacheprovider -rs -q -m "$select" "$here" >"$out" 2>&1
rc=$?
cat "$out"
last=$(tail -n 1 "$out")
if [ "$rc" -eq 0 ] && ! echo "$last" | grep -q passed && echo "$last" | grep -q skipped; then
	echo "SKIPPED: every Python client test skipped (reasons above)"
	exit 77
fi
exit "$rc"
