#!/bin/sh
# Builds the sandfence Python package (python/, with its API modules
# generated from proto/) into OUT/sandfence (default: ./gen), for running
# the example without installing the package. Installed instead
# (python/README.md), the example needs nothing from here.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exec /usr/bin/python3 "$here/../../python/generate.py" --out "${1:-"$here/gen"}"
