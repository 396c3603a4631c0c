#!/bin/bash
# Prints the libvirt domain type the VM can use here: `kvm` where KVM boots a
# standard kernel, else `qemu` (TCG, emulation). The reason goes to stderr.
#
# /dev/kvm is not enough: some hosts have a KVM that boots only kernels made
# for it (e.g. a PVM host), so the answer comes from booting Debian's kernel
# under KVM for a few seconds: it must get as far as looking for its root
# file system. The verdict is kept until the host reboots (in /run).
#
# Environment: SANDFENCE_LIBVIRT_DRIVER (kvm or qemu: no probe),
# SANDFENCE_VAGRANT_CACHE (where build-box.sh keeps the box's kernel).
#
# Exit status: 0 with the answer on stdout; 2 for a bad setting; 1 when a
# step failed, named on stderr after FAILED:.
set -Eeuo pipefail

say() { printf 'libvirt-driver: %s\n' "$*" >&2; }
trap 'say "FAILED: line $LINENO: $BASH_COMMAND (exit $?)"' ERR

case "${SANDFENCE_LIBVIRT_DRIVER:-}" in
kvm | qemu)
	echo "$SANDFENCE_LIBVIRT_DRIVER"
	exit 0
	;;
"") ;;
*)
	say "SANDFENCE_LIBVIRT_DRIVER must be kvm or qemu, not \"$SANDFENCE_LIBVIRT_DRIVER\""
	exit 2
	;;
esac

if [ ! -e /dev/kvm ]; then
	say "no /dev/kvm: qemu (TCG)"
	echo qemu
	exit 0
fi
if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
	say "/dev/kvm is not usable by $(id -un): qemu (TCG)"
	echo qemu
	exit 0
fi

boot_id=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo unknown)
verdict_file=/run/sandfence-kvm-probe
if [ -r "$verdict_file" ]; then
	read -r id verdict reason <"$verdict_file" || true
	if [ "${id:-}" = "$boot_id" ] && [ -n "${verdict:-}" ]; then
		say "${reason:-} (probed earlier in this boot)"
		echo "$verdict"
		exit 0
	fi
fi

cache=${SANDFENCE_VAGRANT_CACHE:-/var/cache/sandfence-vagrant}
kernel=""
for k in "$cache/kernel/vmlinuz" "/boot/vmlinuz-$(uname -r)" /boot/vmlinuz; do
	if [ -r "$k" ]; then
		kernel=$k
		break
	fi
done
qemu=$(command -v qemu-system-x86_64 || true)
if [ -z "$kernel" ] || [ -z "$qemu" ]; then
	say "/dev/kvm exists; no kernel or qemu to probe it with: kvm"
	echo kvm
	exit 0
fi

log=$(mktemp) || {
	say "FAILED: mktemp (for the KVM probe's console log)"
	exit 1
}
trap 'rm -f "$log"' EXIT
# 30 s is far more than a kernel under KVM needs to give up on its root
# (about a second); a KVM that cannot run it hangs or fails at once.
timeout --kill-after=5 30 "$qemu" -accel kvm -cpu host -m 256 -smp 1 \
	-nodefaults -display none -serial "file:$log" -no-reboot \
	-kernel "$kernel" -append "console=ttyS0 panic=-1 root=/dev/nonexistent" \
	</dev/null >/dev/null 2>>"$log" || true
if grep -q -e "VFS: Unable to mount root" -e "Kernel panic" "$log"; then
	verdict=kvm
	reason="KVM booted $kernel: kvm"
else
	verdict=qemu
	reason="/dev/kvm exists but KVM did not boot $kernel ($(grep -a -m1 -i -e error -e fail "$log" | cut -c1-80 || true)): qemu (TCG)"
fi
say "$reason"
if [ -w /run ]; then
	echo "$boot_id $verdict $reason" >"$verdict_file"
fi
echo "$verdict"
