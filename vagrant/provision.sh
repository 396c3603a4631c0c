#!/bin/bash
# Provisioning steps for the Vagrant VM (run as root by the Vagrantfile).
#
#   provision.sh lsm     put BPF LSM on the kernel command line (the
#                        Vagrantfile then reboots if the running kernel
#                        lacks it)
#   provision.sh build   install the dependencies, build /vagrant into
#                        /vagrant/build, put `sandfence` on PATH
#   provision.sh test    run the whole suite; the BPF LSM tests must run
#                        here, not skip
#
# With a build from the host (the Vagrantfile's default with the local box
# sandfence/bookworm), synced into the guest at the host's paths:
#   provision.sh host SRC BUILD    check that the guest can run that build,
#                                  put `sandfence` on PATH, /vagrant -> SRC
#   provision.sh demo              `sandfence demo`; the guard must be lsm
#   provision.sh suites BUILD      the guard's lsm suite and the egress
#                                  suites, as root, BPF LSM required
#   provision.sh environ           by hand: root reads another UID's
#                                  /proc/<pid>/environ, then tries again
#                                  under `sandfence run --guard lsm`
#
# A step that fails says so after "provision: FAILED:", with the command and
# its line where the failure was not one it expected.
set -Eeuo pipefail
shopt -s inherit_errexit

# (Vagrant runs a copy of this file, so the name is spelled out.)
on_err() {
	local status=$?
	[ "${err_pid:-}" != "$BASHPID" ] || return 0
	err_pid=$BASHPID
	printf 'provision: FAILED: provision.sh %s, line %s: %s (exit %s)\n' \
		"${STEP:-}" "$1" "$2" "$status" >&2
}
trap 'on_err "$LINENO" "$BASH_COMMAND"' ERR
# What the EXIT trap runs (one trap, several steps add to it).
at_exit=""
trap 'eval "$at_exit"' EXIT

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
	update-grub || {
		echo "provision: FAILED: update-grub (with $GRUB_DROPIN)" >&2
		exit 1
	}
	echo "provision: the kernel will start with lsm=$lsm after the reboot"
}

step_build() {
	"$SRC/scripts/install-deps.sh" || {
		echo "provision: FAILED: $SRC/scripts/install-deps.sh" >&2
		exit 1
	}
	# Not a build dependency: the README's policy examples use it.
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends curl || {
		echo "provision: FAILED: apt-get install curl" >&2
		exit 1
	}
	cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo || {
		echo "provision: FAILED: cmake configure of $SRC into $BUILD" >&2
		exit 1
	}
	cmake --build "$BUILD" -j"$(nproc)" || {
		echo "provision: FAILED: cmake --build $BUILD" >&2
		exit 1
	}
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
		-E '^(vm_suite_.*|vm_matrix.*|vagrant_validate|vagrant_up)$' || {
		echo "provision: FAILED: ctest in $BUILD (the failed tests are listed above)" >&2
		exit 1
	}
}

# The executables the host-build steps run (paths under BUILD).
HOST_SUITES="tests/guard/guard_lsm_test tests/egress/egress_verdict_test
  tests/egress/egress_e2e_test"
HOST_EXECUTABLES="userspace/cli/sandfence $HOST_SUITES tests/egress/net_probe
  tests/guard/sf_guard_actor tests/guard/sf_guard_target"

step_host() {
	src=$1
	build=$2
	missing=""
	for exe in $HOST_EXECUTABLES; do
		[ -x "$build/$exe" ] || missing="$missing $exe"
	done
	if [ -n "$missing" ]; then
		echo "provision: FAILED: not in the synced build $build:$missing" >&2
		echo "provision: build them on the host first (./scripts/build.sh), then: vagrant rsync" >&2
		exit 1
	fi
	# The build links Debian 12's libraries; the box must have every one.
	unresolved=$(for exe in $HOST_EXECUTABLES; do
		ldd "$build/$exe" | awk -v e="$exe" '/not found/ { print e ": " $1 }'
	done)
	if [ -n "$unresolved" ]; then
		echo "provision: FAILED: the box lacks shared libraries the host build links:" >&2
		echo "$unresolved" >&2
		echo "provision: add their packages to PACKAGES in vagrant/build-box.sh (or SANDFENCE_BOX_PACKAGES) and rebuild the box" >&2
		exit 1
	fi
	ln -sf "$build/userspace/cli/sandfence" /usr/local/bin/sandfence
	[ "$src" = /vagrant ] || [ -e /vagrant ] || ln -s "$src" /vagrant
	echo "provision: kernel $(uname -r), LSMs $(cat /sys/kernel/security/lsm)"
	echo "provision: using the host's build $build; try: sudo sandfence --help"
}

step_demo() {
	out=$(sandfence demo 2>&1) || {
		echo "$out"
		echo "provision: FAILED: sandfence demo" >&2
		exit 1
	}
	echo "$out"
	case "$out" in
	*"process guard: lsm"*) ;;
	*)
		echo "provision: FAILED: the demo's process guard is not lsm" >&2
		exit 1
		;;
	esac
}

step_suites() {
	build=$1
	status=0
	for t in $HOST_SUITES; do
		echo "provision: $t"
		# SANDFENCE_IN_VM=1: a test that cannot load its BPF LSM program
		# fails here instead of skipping.
		SANDFENCE_IN_VM=1 SANDFENCE_BINARY_DIR="$build" "$build/$t" || {
			echo "provision: FAILED: $t (exit $?)" >&2
			status=1
		}
	done
	return $status
}

# The guard's headline case, without the test harness: a process of another
# UID, whose environ root may read outside a sandbox and may not inside one.
step_environ() {
	setpriv --reuid 4343 --regid 4343 --clear-groups sleep 600 \
		</dev/null >/dev/null 2>&1 &
	pid=$!
	at_exit="kill $pid 2>/dev/null || true; $at_exit"
	n=0
	while [ "$(stat -c %u "/proc/$pid" 2>/dev/null)" != 4343 ] ||
		[ "$(cat "/proc/$pid/comm" 2>/dev/null)" != sleep ]; do
		n=$((n + 1))
		[ $n -lt 100 ] || {
			echo "provision: FAILED: pid $pid did not become sleep as UID 4343" >&2
			exit 1
		}
		sleep 0.1
	done
	echo "\$ setpriv --reuid 4343 sleep 600 &    # pid $pid, UID 4343"
	echo "\$ cat /proc/$pid/environ | wc -c     # root, in no sandbox"
	bytes=$(wc -c <"/proc/$pid/environ") || {
		echo "provision: FAILED: root could not read /proc/$pid/environ outside a sandbox" >&2
		exit 1
	}
	echo "$bytes"
	# `run` gives the command a /proc of its own PID namespace, where pid
	# $pid does not exist; a host procfs mounted elsewhere stays visible to
	# it (and is what the guard must judge).
	hostproc=/run/sandfence-hostproc
	mkdir -p "$hostproc"
	if ! mountpoint -q "$hostproc"; then
		mount -t proc proc "$hostproc" || {
			echo "provision: FAILED: mount -t proc proc $hostproc" >&2
			exit 1
		}
		at_exit="umount $hostproc 2>/dev/null || true; $at_exit"
	fi
	echo "\$ sandfence run --guard lsm --network-access inherit -- cat $hostproc/$pid/environ"
	status=0
	out=$(sandfence run --guard lsm --network-access inherit -- \
		cat "$hostproc/$pid/environ" 2>&1 >/dev/null) || status=$?
	echo "$out"
	echo "(exit $status)"
	case "$out" in
	*"$hostproc/$pid/environ: Operation not permitted"*"process guard: lsm"*) ;;
	*)
		echo "provision: FAILED: cat was not refused with EPERM under the lsm guard" >&2
		exit 1
		;;
	esac
	# (A here-string, not `echo | grep -q`: grep's early exit would close
	# the pipe on echo, and pipefail would count it.)
	grep -Eq "^ +denied .*environ.*\(cat\) -> pid $pid \(sleep\)" <<<"$out" || {
		echo "provision: FAILED: no \"denied\" guard event for cat -> pid $pid" >&2
		exit 1
	}
	[ "$status" -ne 0 ] || {
		echo "provision: FAILED: cat exited 0" >&2
		exit 1
	}
	echo "provision: the lsm guard denied a cross-UID /proc/<pid>/environ read"
}

STEP=${1:-}
case "${1:-}" in
lsm) step_lsm ;;
build) step_build ;;
test) step_test ;;
host) step_host "$2" "$3" ;;
demo) step_demo ;;
suites) step_suites "$2" ;;
environ) step_environ ;;
*)
	echo "usage: $0 lsm|build|test|host SRC BUILD|demo|suites BUILD|environ" >&2
	exit 2
	;;
esac
