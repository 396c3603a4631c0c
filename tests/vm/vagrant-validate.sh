#!/bin/sh
# vagrant-validate.sh VAGRANT_DIR STATE_DIR: `vagrant validate` on our
# Vagrantfile, with vagrant's state kept in STATE_DIR (not in the source
# tree or the user's home), without its network version check, and with the
# build tree it runs in (or SANDFENCE_BUILD_DIR) as the one to sync.
set -eu
if ! command -v vagrant >/dev/null 2>&1; then
	if [ "${CI:-}" = "true" ]; then
		echo "vagrant-validate: FAILED: vagrant is not installed (scripts/install-deps.sh installs it)"
		exit 1
	fi
	echo "SANDFENCE_VAGRANT_SKIP: vagrant is not installed (Debian: vagrant; scripts/install-deps.sh installs it)"
	exit 77
fi
# The Vagrantfile syncs a build tree (default: the source's build/), and
# validation fails if it does not exist: use the build tree this test runs
# in (ctest runs it in a directory of that tree, under its CMakeCache.txt).
if [ -z "${SANDFENCE_BUILD_DIR:-}" ]; then
	d=$(pwd)
	while [ "$d" != / ] && [ ! -f "$d/CMakeCache.txt" ]; do
		d=$(dirname "$d")
	done
	[ ! -f "$d/CMakeCache.txt" ] || export SANDFENCE_BUILD_DIR="$d"
fi
mkdir -p "$2"
export VAGRANT_HOME="$2/home"
export VAGRANT_DOTFILE_PATH="$2/dotfile"
export VAGRANT_CHECKPOINT_DISABLE=1
# Validation needs no KVM probe (vagrant/libvirt-driver.sh boots a kernel).
export SANDFENCE_LIBVIRT_DRIVER="${SANDFENCE_LIBVIRT_DRIVER:-qemu}"
cd "$1"
# The provider blocks are left out of the check: CI installs neither provider
# plugin (vagrant-libvirt comes with vagrant/install-deps.sh, for the opt-in
# workflow); everything else, provisioners included, is validated.
exec vagrant validate --ignore-provider
