#!/bin/sh
# Installs what sandfence needs, from Debian 12's archive only. Idempotent:
# packages already present are left alone, and `apt-get update` runs only
# when something is missing.
#
#   install-deps.sh          what building sandfence and `sandfence demo` need
#   install-deps.sh --test   that, plus what the whole test suite needs
#                            (network and VM tools, container runtimes, ...)
set -eu

# Configure, build, and run the product (the demo included). GoogleTest and
# Google Benchmark are here because CMake's configure step finds them.
BUILD_PACKAGES="
  build-essential cmake pkg-config git ca-certificates
  clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev linux-libc-dev
  libabsl-dev libprotobuf-dev protobuf-compiler
  libgrpc++-dev protobuf-compiler-grpc
  libc-ares-dev libidn2-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 util-linux procps
"

# The test suite: sanitizers and fuzzers (clang's runtime), network tests
# (namespaces, nftables, a loopback resolver), the VM suite (QEMU, a busybox
# initramfs), the Python client, the package, container and Vagrant tests.
TEST_PACKAGES="
  libclang-rt-14-dev
  iproute2 nftables dnsmasq-base
  python3-grpcio python3-grpc-tools python3-protobuf
  python3-pytest python3-setuptools python3-pip python3-venv python3-yaml
  qemu-system-x86 busybox-static cpio
  vagrant
  dpkg-dev file
  runc podman
  debootstrap shellcheck strace
  rsyslog
"

packages=$BUILD_PACKAGES
case "${1:-}" in
"") ;;
--test) packages="$BUILD_PACKAGES $TEST_PACKAGES" ;;
*)
	echo "install-deps: usage: install-deps.sh [--test]" >&2
	exit 64
	;;
esac

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: must run as root (apt-get)" >&2
	exit 1
fi

missing=""
for p in $packages; do
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
# Packages with services (rsyslog, the collector test's) are installed, not
# started: the tests run their daemons themselves, with their own config.
# An existing policy-rc.d is the machine's and stays as it is.
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod 755 /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
