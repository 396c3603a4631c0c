#!/bin/sh
# Provisioning steps for the Vagrant VM (run as root by the Vagrantfile).
#
#   provision.sh lsm     put BPF LSM on the kernel command line (the
#                        Vagrantfile then reboots if the running kernel
#                        lacks it)
#   provision.sh build   install the dependencies, build /vagrant into
#                        /vagrant/build, put `sandfence` on PATH
#   provision.sh test    run the whole suite; the BPF LSM tests must run
#                        here, not skip
set -eu

SRC=/vagrant
BUILD=/vagrant/build
GRUB_DROPIN=/etc/default/grub.d/sandfence-lsm.cfg

step_lsm() {
	active=$(cat /sys/kernel/security/lsm 2>/dev/null || true)
	echo "provision: active LSMs: ${active:-unknown}"
	case ",$active," in
	*,bpf,*)
		echo "provision: BPF LSM is already active"
		return 0
		;;
	esac
	# Keep every LSM the distribution runs (AppArmor on Debian and Ubuntu)
	# and add bpf at the end; an `lsm=` list replaces the built-in one.
	if [ -n "$active" ]; then
		lsm="$active,bpf"
	else
		lsm="landlock,lockdown,yama,integrity,apparmor,bpf"
	fi
	mkdir -p "$(dirname "$GRUB_DROPIN")"
	cat >"$GRUB_DROPIN" <<EOF
# Written by sandfence's vagrant/provision.sh: sandfence's process guard
# needs BPF LSM. A later lsm= on the command line wins over an earlier one.
GRUB_CMDLINE_LINUX="\$GRUB_CMDLINE_LINUX lsm=$lsm"
EOF
	update-grub
	echo "provision: the kernel will start with lsm=$lsm after the reboot"
}

step_build() {
	"$SRC/scripts/install-deps.sh"
	# Not a build dependency: the README's policy examples use it.
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends curl
	cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build "$BUILD" -j"$(nproc)"
	ln -sf "$BUILD/userspace/cli/sandfence" /usr/local/bin/sandfence
	echo "provision: built; try: sudo sandfence --help"
}

step_test() {
	cd "$BUILD"
	# This kernel runs BPF LSM itself: SANDFENCE_IN_VM=1 turns an LSM test's
	# skip into a failure. The nested-QEMU run (vm_suite) would only repeat
	# the LSM tests, slowly; `vagrant validate` is for the host. Excluded by
	# name: the LSM tests themselves carry the label vm too.
	SANDFENCE_IN_VM=1 ctest --output-on-failure --timeout 600 \
		-E '^(vm_suite|vagrant_validate)$'
}

case "${1:-}" in
lsm) step_lsm ;;
build) step_build ;;
test) step_test ;;
*)
	echo "usage: $0 lsm|build|test" >&2
	exit 2
	;;
esac
