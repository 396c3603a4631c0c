#!/bin/sh
# Installs what the Vagrant workflow (vagrant/README.md, the vagrant_up test)
# needs on a Debian 12 host, from Debian's archive only. Idempotent: packages
# already present are left alone, and `apt-get update` runs only when
# something is missing. These packages are for this opt-in workflow alone, so
# scripts/install-deps.sh (what CI installs) does not name them.
#
#   install-deps.sh           install what is missing (needs root)
#   install-deps.sh --check   only list what is missing; exit 1 if anything is
#
# Building sandfence itself needs scripts/install-deps.sh (the VM runs the
# host's build).
set -eu

# Each package with what the workflow runs from it.
#   vagrant                 vagrant (Depends: curl and bsdtar, for `box add`)
#   vagrant-libvirt         the libvirt provider plugin
#   libvirt-daemon-system   libvirtd, virtlogd, the qemu driver
#   libvirt-clients         virsh
#   dnsmasq-base            DHCP on the VM's libvirt network (only a
#                           Recommends of libvirt-daemon-system)
#   iptables                libvirt's network firewall rules
#   qemu-system-x86         the VM (KVM or TCG) and the KVM probe
#   qemu-utils              qemu-img: the box's disk image
#   debootstrap             the box's Debian 12
#   fdisk                   sfdisk: the box's partition table
#   e2fsprogs               mkfs.ext4, e2fsck
#   mount                   losetup, mount
#   util-linux              flock, partx, blkid, fstrim, mountpoint
#   rsync openssh-client    Vagrant's synced folders, `vagrant ssh`
#   procps                  ps, pgrep (is systemd pid 1; is virtlogd running)
PACKAGES="
  vagrant vagrant-libvirt
  libvirt-daemon-system libvirt-clients dnsmasq-base iptables
  qemu-system-x86 qemu-utils
  debootstrap fdisk e2fsprogs mount util-linux
  rsync openssh-client procps
"

say() { printf 'vagrant/install-deps: %s\n' "$*" >&2; }

check=0
case "${1:-}" in
"") ;;
--check) check=1 ;;
-h | --help)
	sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 0
	;;
*)
	say "usage: install-deps.sh [--check]"
	exit 64
	;;
esac

missing=""
for p in $PACKAGES; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[ "$status" = "install ok installed" ] || missing="$missing $p"
done

if [ -z "$missing" ]; then
	say "all packages present"
	exit 0
fi
if [ "$check" -eq 1 ]; then
	say "missing:$missing"
	exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
	say "FAILED: must run as root (apt-get) to install:$missing"
	exit 1
fi

say "installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq || {
	say "FAILED: apt-get update"
	exit 1
}
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing || {
	say "FAILED: apt-get install$missing"
	exit 1
}
say "installed:$missing"
