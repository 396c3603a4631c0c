#!/bin/bash
# The Vagrant workflow of vagrant/README.md, for real: build the box (cached),
# `vagrant up --provider=libvirt` with the host's build, then through
# `vagrant ssh -c`: the guard's lsm suite and the egress suites, a cross-UID
# /proc/<pid>/environ read that the lsm guard must deny, and finally
# `vagrant destroy`. Every step is timed.
#
#   vagrant-up.sh SOURCE_DIR BUILD_DIR STATE_DIR
#
# It runs only with SANDFENCE_VAGRANT=1: cold, it takes about half an hour
# on a 2-core machine without usable KVM, 6 minutes with the box cached (see
# vagrant/README.md), more than CI's budget allows; without it, it says
# SKIPPED with that reason. With it, it installs what the workflow needs
# (vagrant/install-deps.sh: Debian packages, only those missing), and a
# step that fails says which. Vagrant's state (its boxes, the machine)
# lives in STATE_DIR; the box itself is cached in SANDFENCE_VAGRANT_CACHE
# (default /var/cache/sandfence-vagrant).
#
# Exit status: 0 passed, 77 skipped (the reason after SANDFENCE_VAGRANT_SKIP:),
# anything else failed.
set -Eeuo pipefail
shopt -s inherit_errexit

readonly SKIP_STATUS=77
[ $# -eq 3 ] || {
	echo "usage: $0 SOURCE_DIR BUILD_DIR STATE_DIR" >&2
	exit 2
}
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
state=$3

log() { printf 'vagrant-up: %s\n' "$*" >&2; }
fail() {
	printf 'vagrant-up: FAILED: %s\n' "$*" >&2
	exit 1
}
# A command that fails where none was expected (set -e would end the script
# without a word) names itself and its line; once per shell, so a failure
# inside a function or a $(...) is named where it happened, then where it
# was called.
on_err() {
	local status=$?
	[ "${err_pid:-}" != "$BASHPID" ] || return 0
	err_pid=$BASHPID
	printf 'vagrant-up: FAILED: line %s: %s (exit %s)\n' "$1" "$2" "$status" >&2
}
trap 'on_err "$LINENO" "$BASH_COMMAND"' ERR
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", b - a }'; }

if [ "${SANDFENCE_VAGRANT:-}" != 1 ]; then
	echo "SANDFENCE_VAGRANT_SKIP: the Vagrant workflow runs only with SANDFENCE_VAGRANT=1:" \
		"cold it takes about 30 minutes on a 2-core machine without usable KVM (21 of them" \
		"building the box from Debian's archive), 6 with the box cached, beyond CI's budget" \
		"(see vagrant/README.md); it needs root, and installs its Debian packages itself" \
		"(vagrant/install-deps.sh)"
	exit "$SKIP_STATUS"
fi
[ "$(id -u)" -eq 0 ] ||
	fail "needs root (the box build uses loop devices and chroot; libvirt's system instance) (SANDFENCE_VAGRANT=1: the workflow must run)"
# What the VM runs (vagrant/provision.sh checks the same list inside).
missing=()
for exe in userspace/cli/sandfence tests/guard/guard_lsm_test tests/egress/egress_verdict_test \
	tests/egress/egress_e2e_test tests/egress/net_probe tests/guard/sf_guard_actor \
	tests/guard/sf_guard_target; do
	[ -x "$build/$exe" ] || missing+=("$(basename "$exe")")
done
[ ${#missing[@]} -eq 0 ] ||
	fail "not built in $build: ${missing[*]} (build them first: cmake --build $build --target ${missing[*]}; or ./scripts/build.sh --all)"

mkdir -p "$state"
export VAGRANT_HOME=$state/home
export VAGRANT_DOTFILE_PATH=$state/dotfile
export VAGRANT_CWD=$src/vagrant
export VAGRANT_CHECKPOINT_DISABLE=1
export SANDFENCE_BUILD=host SANDFENCE_BUILD_DIR=$build
# The VM reaches the host and nothing else.
export SANDFENCE_VAGRANT_NETWORK=isolated
unset SANDFENCE_BOX
run_log=$state/run.log
: >"$run_log"
t_start=$(now)

# Vagrant's output, without its progress bars, each line stamped with the
# seconds since the workflow started, into run.log and stderr. (No grep in
# the pipe: with nothing left to print it would fail the pipeline.)
stamp() {
	sed -u 's/\r/\n/g; s/\x1b\[[0-9;]*[A-Za-z]//g' |
		while IFS= read -r line; do
			[[ "$line" != "Progress: "* && "$line" =~ [^[:space:]] ]] || continue
			printf '[%5ss] %s\n' "$(elapsed "$t_start" "$(now)")" "$line"
		done | tee -a "$run_log" >&2
}

timings=()
step() { # NAME COMMAND...: runs it with its output stamped, and times it
	local name=$1 t0 status=0
	shift
	t0=$(now)
	log "step: $name"
	if ! "$@" 2>&1 | stamp; then
		status=${PIPESTATUS[0]}
		[ "$status" -ne 0 ] || status=1 # stamp itself failed
		log "step failed: $name (exit $status)"
	fi
	timings+=("$(printf '%-32s %5s s' "$name" "$(elapsed "$t0" "$(now)")")")
	return "$status"
}

# --- libvirt ------------------------------------------------------------------

started_daemons=()
# What the host had before our own libvirtd (if we start one) changed it.
ip_forward_before=""
libvirt_chains_before=""
nft_tables_before=""
machine_cgroups_before=""

machine_cgroups() { # the cgroups libvirt puts VMs under, one a line
	local d
	for d in /sys/fs/cgroup/machine /sys/fs/cgroup/*/machine; do
		[ ! -d "$d" ] || echo "$d"
	done
}
# shellcheck disable=SC2317 # called by cleanup
undo_libvirt_host_changes() {
	# libvirt leaves its firewall chains (LIBVIRT_*), empty, hooked into
	# iptables' tables (which it created on an nftables host); and the
	# machine cgroups, empty. Each goes only if it was not there before.
	local cmd table rules rule words chain fam
	if [ -z "$libvirt_chains_before" ]; then
		for cmd in iptables ip6tables; do
			command -v "$cmd" >/dev/null 2>&1 || continue
			fam=ip
			[ "$cmd" = iptables ] || fam=ip6
			for table in filter nat mangle; do
				rules=$("$cmd" -t "$table" -S 2>/dev/null) || continue
				while read -r rule; do
					[[ "$rule" == "-A "*" -j LIBVIRT_"* ]] || continue
					read -ra words <<<"$rule"
					"$cmd" -t "$table" -D "${words[@]:1}" 2>/dev/null || true
				done <<<"$rules"
				while read -r rule; do
					[[ "$rule" == "-N LIBVIRT_"* ]] || continue
					chain=${rule#-N }
					"$cmd" -t "$table" -F "$chain" 2>/dev/null || true
					"$cmd" -t "$table" -X "$chain" 2>/dev/null || true
				done <<<"$rules"
				# A table libvirt created, now with nothing in it but its
				# base chains' ACCEPT policies, still hooks every packet.
				rules=$("$cmd" -t "$table" -S 2>/dev/null) || continue
				if command -v nft >/dev/null 2>&1 &&
					[[ $'\n'"$nft_tables_before"$'\n' != *$'\n'"table $fam $table"$'\n'* ]] &&
					! grep -qv -e '^-P [A-Z]* ACCEPT$' <<<"$rules"; then
					nft delete table "$fam" "$table" 2>/dev/null || true
				fi
			done
		done
	fi
	local d
	for d in $(machine_cgroups); do
		[[ $'\n'"$machine_cgroups_before"$'\n' == *$'\n'"$d"$'\n'* ]] || rmdir "$d" 2>/dev/null || true
	done
}
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	local status=$? pidfile pid net n
	trap - ERR
	if [ -f "$VAGRANT_DOTFILE_PATH/machines/default/libvirt/id" ]; then
		step "vagrant destroy" vagrant destroy -f || true
	fi
	if [ ${#started_daemons[@]} -gt 0 ]; then
		# Our libvirtd started its networks (its autostarted default, the
		# VM's): their bridges and dnsmasq would outlive it.
		for net in $(virsh -c qemu:///system net-list --name 2>/dev/null || true); do
			log "stopping libvirt network $net (this run's libvirtd started it)"
			virsh -c qemu:///system net-destroy "$net" >/dev/null 2>&1 ||
				log "could not stop libvirt network $net"
		done
		for pidfile in "${started_daemons[@]}"; do
			[ -f "$pidfile" ] || continue
			pid=$(cat "$pidfile")
			kill "$pid" 2>/dev/null || continue
			n=0
			while kill -0 "$pid" 2>/dev/null && [ $n -lt 50 ]; do
				sleep 0.2
				n=$((n + 1))
			done
			rm -f "$pidfile"
		done
		# A NAT network turned forwarding on for the whole host.
		if [ -n "$ip_forward_before" ] &&
			[ "$(cat /proc/sys/net/ipv4/ip_forward)" != "$ip_forward_before" ]; then
			echo "$ip_forward_before" >/proc/sys/net/ipv4/ip_forward || true
		fi
		undo_libvirt_host_changes
	fi
	if [ ${#timings[@]} -gt 0 ]; then
		log "times:"
		printf '  %s\n' "${timings[@]}" | tee -a "$run_log" >&2
		log "total $(elapsed "$t_start" "$(now)") s"
	fi
	exit $status
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# --- What the workflow needs ------------------------------------------------------

step "install: vagrant/install-deps.sh" "$src/vagrant/install-deps.sh" ||
	fail "vagrant/install-deps.sh could not install the workflow's packages (see above)"
for tool in vagrant:vagrant virsh:libvirt-clients libvirtd:libvirt-daemon-system \
	virtlogd:libvirt-daemon-system qemu-system-x86_64:qemu-system-x86 qemu-img:qemu-utils \
	debootstrap:debootstrap sfdisk:fdisk rsync:rsync ssh:openssh-client; do
	command -v "${tool%%:*}" >/dev/null 2>&1 ||
		fail "${tool%%:*} is not installed even after vagrant/install-deps.sh (Debian: ${tool#*:})"
done

if ! virsh -c qemu:///system version >/dev/null 2>&1; then
	if [ "$(ps -p 1 -o comm= 2>/dev/null || true)" = systemd ]; then
		systemctl start virtlogd.socket libvirtd.socket libvirtd.service >&2 ||
			fail "could not start libvirtd (systemctl start virtlogd.socket libvirtd.socket libvirtd.service)"
	else
		# No systemd (a container or a bare VM): run the daemons ourselves,
		# and stop them (and the networks they started) when done.
		log "starting virtlogd and libvirtd (no systemd here)"
		ip_forward_before=$(cat /proc/sys/net/ipv4/ip_forward)
		libvirt_chains_before=$({ iptables-save || true; ip6tables-save || true; } 2>/dev/null | sed -n '/LIBVIRT_/p')
		nft_tables_before=$(nft list tables 2>/dev/null || true)
		machine_cgroups_before=$(machine_cgroups)
		if ! pgrep -x virtlogd >/dev/null; then
			started_daemons+=("$state/virtlogd.pid")
			virtlogd --daemon --pid-file "$state/virtlogd.pid" ||
				fail "could not start virtlogd (virtlogd --daemon)"
		fi
		started_daemons+=("$state/libvirtd.pid")
		libvirtd --daemon --pid-file "$state/libvirtd.pid" ||
			fail "could not start libvirtd (libvirtd --daemon)"
	fi
	n=0
	until virsh -c qemu:///system version >/dev/null 2>&1; do
		n=$((n + 1))
		[ $n -lt 100 ] || fail "libvirtd did not answer on qemu:///system within 20 s"
		sleep 0.2
	done
fi
# (Read whole: `| grep -q` would close the pipe early, and pipefail would
# count vagrant's SIGPIPE as a failure.)
plugins=$(vagrant plugin list 2>&1) || fail "vagrant plugin list failed: $plugins"
[[ "$plugins" == *vagrant-libvirt* ]] ||
	fail "vagrant does not list the vagrant-libvirt plugin (Debian: vagrant-libvirt): $plugins"

# A machine left by an interrupted run goes first.
if [ -f "$VAGRANT_DOTFILE_PATH/machines/default/libvirt/id" ]; then
	log "destroying the VM an earlier run left"
	step "vagrant destroy (an old VM)" vagrant destroy -f || true
fi

# --- The box, the domain type, the VM ---------------------------------------------

step "box: build-box.sh --add" "$src/vagrant/build-box.sh" --add ||
	fail "the box could not be built or added (see above)"
t0=$(now)
driver=$("$src/vagrant/libvirt-driver.sh" 2>"$state/driver.log") ||
	fail "vagrant/libvirt-driver.sh: $(cat "$state/driver.log")"
stamp <"$state/driver.log"
rm -f "$state/driver.log"
timings+=("$(printf '%-32s %5s s' "KVM probe" "$(elapsed "$t0" "$(now)")")")
export SANDFENCE_LIBVIRT_DRIVER=$driver
log "libvirt domain type: $driver"

step "vagrant up" vagrant up --provider=libvirt || fail "vagrant up failed (see above)"
grep -q "process guard: lsm" "$run_log" ||
	fail "vagrant up did not show sandfence demo with the lsm guard"

# --- Inside, through vagrant ssh -c --------------------------------------------

in_vm() { # NAME COMMAND: one `vagrant ssh -c`, timed, into run.log
	local name=$1 cmd=$2
	log "\$ vagrant ssh -c '$cmd'"
	step "$name" vagrant ssh -c "$cmd" -- -o LogLevel=ERROR
}

in_vm "kernel and LSMs" 'uname -r; cat /proc/cmdline; cat /sys/kernel/security/lsm; echo' ||
	fail "vagrant ssh failed"
grep -Eq "lsm=[a-z,]*bpf" "$run_log" || fail "the VM's kernel command line has no lsm=...,bpf"
grep -Eq "^\[ *[0-9]+s\] [a-z,]*,bpf$" "$run_log" || fail "bpf is not an active LSM in the VM"

# The failed cases by name (the summary lines gtest prints at the end).
failed_cases() {
	sed -n 's/^\[ *[0-9]*s\] \[  FAILED  \] \([A-Za-z][^ ,]*\).*/\1/p' "$run_log" | sort -u |
		tr '\n' ' '
}
in_vm "guard lsm + egress suites" "sudo bash $src/vagrant/provision.sh suites $build" ||
	fail "a suite failed in the VM: $(failed_cases)(see above)"
grep -q "\[       OK \] Guard/LsmScenario.Enforced/proc_environ " "$run_log" ||
	fail "the guard's lsm suite did not pass Guard/LsmScenario.Enforced/proc_environ"
if grep -q "\[  FAILED  \]" "$run_log"; then
	fail "a suite failed in the VM: $(failed_cases)(see above)"
fi
passed=$(grep -c "\[       OK \]" "$run_log" || true)
skipped=$(grep -Ec "\[  SKIPPED \] [A-Za-z].* \([0-9]+ ms\)$" "$run_log" || true)
log "suites in the VM: $passed passed, $skipped skipped"

in_vm "environ denied (sandfence run)" "sudo bash $src/vagrant/provision.sh environ" ||
	fail "the environ check failed (see above)"
grep -q "the lsm guard denied a cross-UID /proc/<pid>/environ read" "$run_log" ||
	fail "the environ check did not pass"

log "PASSED: vagrant up booted the VM ($driver), the lsm guard denied the cross-UID environ read"
