#!/bin/sh
# Installs everything sandfence needs to build and test, from Debian 12's
# archive only. Idempotent: packages already present are left alone, and
# `apt-get update` runs only when something is missing.
set -eu

PACKAGES="
  build-essential cmake pkg-config git ca-certificates
  clang llvm libclang-rt-14-dev libbpf-dev bpftool libelf-dev zlib1g-dev linux-libc-dev
  libabsl-dev libprotobuf-dev protobuf-compiler
  libgrpc++-dev protobuf-compiler-grpc
  libc-ares-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  iproute2 nftables dnsmasq-base util-linux procps
  python3 python3-grpcio python3-grpc-tools
  python3-pytest python3-setuptools python3-pip python3-venv
  qemu-system-x86 busybox-static cpio
  libidn2-dev libssl-dev
  vagrant
  python3-protobuf
  dpkg-dev file
  runc podman
  debootstrap python3-yaml shellcheck
"

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: must run as root (apt-get)" >&2
	exit 1
fi

missing=""
for p in $PACKAGES; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	echo "install-deps: all packages present"
	exit 0
fi

echo "install-deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
