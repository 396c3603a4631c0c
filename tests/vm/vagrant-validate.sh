#!/bin/sh
# vagrant-validate.sh VAGRANT_DIR STATE_DIR: `vagrant validate` on our
# Vagrantfile, with vagrant's state kept in STATE_DIR (not in the source
# tree or the user's home) and without its network version check.
set -eu
if ! command -v vagrant >/dev/null 2>&1; then
	if [ "${CI:-}" = "true" ]; then
		echo "vagrant-validate: FAILED: vagrant is not installed (scripts/install-deps.sh installs it)"
		exit 1
	fi
	echo "SANDFENCE_VAGRANT_SKIP: vagrant is not installed (Debian: vagrant; scripts/install-deps.sh installs it)"
	exit 77
fi
mkdir -p "$2"
export VAGRANT_HOME="$2/home"
export VAGRANT_DOTFILE_PATH="$2/dotfile"
export VAGRANT_CHECKPOINT_DISABLE=1
# Validation needs no KVM probe (vagrant/libvirt-driver.sh boots a kernel).
export SANDFENCE_LIBVIRT_DRIVER="${SANDFENCE_LIBVIRT_DRIVER:-qemu}"
cd "$1"
# Neither provider plugin (libvirt, VirtualBox) is installed here, so their
# blocks are left out of the check; everything else, provisioners included,
# is validated.
exec vagrant validate --ignore-provider
