#!/bin/sh
# Generates the Python stubs of the sandfence API into OUT (default: ./gen).
# Debian's python3-grpc-tools bundles protoc 3.5, which predates proto3
# `optional` (record.proto uses it), so the messages come from the system
# protoc and the service stubs from its gRPC Python plugin
# (protobuf-compiler-grpc).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
proto="$here/../../proto"
out=${1:-"$here/gen"}
mkdir -p "$out"
protoc -I "$proto" --python_out="$out" --grpc_out="$out" \
  --plugin=protoc-gen-grpc="$(command -v grpc_python_plugin)" \
  "$proto"/sandfence/v1/policy.proto "$proto"/sandfence/v1/record.proto \
  "$proto"/sandfence/v1/daemon.proto
echo "stubs in $out"
