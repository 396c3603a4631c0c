#!/bin/bash
# Builds the Vagrant box `sandfence/bookworm` (provider libvirt) from Debian's
# archive, with no box catalogue: debootstrap of Debian 12 into a partitioned
# disk image, Debian's kernel booted by GRUB with `lsm=...,bpf`, the vagrant
# user with Vagrant's insecure key, the runtime libraries of a sandfence
# build, packaged as a qcow2 libvirt box. Needs root (loop devices, chroot).
#
#   build-box.sh [--add] [--force]
#
# --add     also add the box to Vagrant (VAGRANT_HOME, default ~/.vagrant.d),
#           replacing older builds of it and their libvirt volumes
# --force   rebuild even when a box with the same key is cached
#
# The box is cached in SANDFENCE_VAGRANT_CACHE (default
# /var/cache/sandfence-vagrant), keyed by this script, its package list and
# the version of Debian's kernel; a second run with the same key does not
# rebuild. The cache holds:
#   sandfence-bookworm-<key>.box   the box (tar: metadata.json, box.img)
#   sandfence-bookworm.json        a one-box catalogue naming the newest box,
#                                  which the Vagrantfile's box_url points at
#   kernel/vmlinuz                 the box's kernel, for the KVM probe
#   debs/                          downloaded packages, reused by a rebuild
#
# Environment: SANDFENCE_DEBIAN_MIRROR (default: the bookworm mirror in the
# host's apt sources), SANDFENCE_BOX_PACKAGES (more packages for the box).
#
# Exit status: 0 built or cached; 77 when it cannot run here (not root, a
# tool missing: vagrant/install-deps.sh installs them), with the reason after
# SANDFENCE_VAGRANT_SKIP:; 1 on failure, with what failed after FAILED:.
#
# Under pipefail, no pipe here is closed before its writer is done (no
# `| head`, `| grep -q`, awk's `exit` on a pipe): the writer's SIGPIPE would
# fail the pipeline.
set -Eeuo pipefail
shopt -s inherit_errexit

readonly SKIP_STATUS=77
readonly BOX_NAME=sandfence/bookworm
readonly SUITE=bookworm
readonly DISK_GIB=16
# The LSMs of Debian 12's kernel (its CONFIG_LSM, minus those it does not
# build), with bpf: an lsm= list replaces the built-in one.
readonly LSM_LIST=landlock,lockdown,yama,integrity,apparmor,bpf

# What the box runs: systemd, ssh for Vagrant, rsync for the synced folders;
# the shared libraries a sandfence build links (scripts/install-deps.sh
# names their -dev packages); the tools the tests execute; cmake for ctest.
readonly PACKAGES="
  systemd-sysv udev dbus systemd-resolved openssh-server sudo rsync
  linux-image-amd64 grub-pc initramfs-tools kmod
  ca-certificates curl less procps iproute2 iputils-ping nftables
  dnsmasq-base python3 cmake bpftool
  libabsl20220623 libbpf1 libc-ares2 libelf1 libgrpc++1.51 libgrpc29
  libidn2-0 libprotobuf32 libre2-9 libssl3 zlib1g
"

log() { printf 'build-box: %s\n' "$*" >&2; }
die() {
	printf 'build-box: FAILED: %s\n' "$*" >&2
	exit 1
}
# A command that fails where none was expected names itself and its line
# (once per shell: where it happened, then where a $(...) called it).
on_err() {
	local status=$?
	[ "${err_pid:-}" != "$BASHPID" ] || return 0
	err_pid=$BASHPID
	printf 'build-box: FAILED: line %s: %s (exit %s)\n' "$1" "$2" "$status" >&2
}
trap 'on_err "$LINENO" "$BASH_COMMAND"' ERR
skip() {
	printf 'SANDFENCE_VAGRANT_SKIP: %s\n' "$*"
	exit "$SKIP_STATUS"
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", b - a }'; }

add=0
force=0
while [ $# -gt 0 ]; do
	case "$1" in
	--add) add=1 ;;
	--force) force=1 ;;
	-h | --help)
		sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "build-box: unknown argument: $1 (see --help)" >&2
		exit 2
		;;
	esac
	shift
done

[ "$(id -u)" -eq 0 ] || skip "building the box needs root (loop devices, chroot)"
for tool in debootstrap:debootstrap qemu-img:qemu-utils sfdisk:fdisk losetup:mount \
	mkfs.ext4:e2fsprogs flock:util-linux; do
	command -v "${tool%%:*}" >/dev/null 2>&1 ||
		skip "${tool%%:*} is not installed (Debian: ${tool#*:}; vagrant/install-deps.sh installs it)"
done

# --- Inputs: mirror, key, insecure key -----------------------------------------

# The first Debian mirror the host's apt sources use for bookworm main (both
# the one-line and the deb822 formats): the archive this host can reach.
# Prints one line at most (awk reads files here, so its `exit` closes no pipe).
host_mirror() { # SUITE
	local suite=$1 f m
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		m=$(awk -v s="$suite" '$1 == "deb" {
			i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
			if ($(i + 1) == s) { print $i; exit } }' "$f")
		[ -z "$m" ] || {
			echo "$m"
			return 0
		}
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		m=$(awk -v s="$suite" 'BEGIN { RS = ""; FS = "\n" } {
			uri = ""; ok = 0; deb = 0
			for (i = 1; i <= NF; i++) {
				if ($i ~ /^URIs:/) { split($i, u, " "); uri = u[2] }
				if ($i ~ /^Types:/ && $i ~ /[ \t]deb([ \t]|$)/) deb = 1
				if ($i ~ /^Suites:/) { n = split($i, w, " "); for (j = 2; j <= n; j++) if (w[j] == s) ok = 1 }
			}
			if (ok && deb && uri != "") { print uri; exit } }' "$f")
		[ -z "$m" ] || {
			echo "$m"
			return 0
		}
	done
}

mirror=${SANDFENCE_DEBIAN_MIRROR:-$(host_mirror "$SUITE")}
[ -n "$mirror" ] || skip "no Debian $SUITE mirror in /etc/apt/sources.list* (set SANDFENCE_DEBIAN_MIRROR)"
security_mirror=$(host_mirror "$SUITE-security")
packages="$PACKAGES ${SANDFENCE_BOX_PACKAGES:-}"

insecure_key=""
for k in /usr/share/rubygems-integration/all/gems/vagrant-*/keys/vagrant.pub \
	/opt/vagrant/embedded/gems/gems/vagrant-*/keys/vagrant.pub; do
	if [ -f "$k" ]; then
		insecure_key=$k
		break
	fi
done
[ -n "$insecure_key" ] || skip "Vagrant's insecure public key (keys/vagrant.pub) was not found: is vagrant installed? (Debian: vagrant; vagrant/install-deps.sh installs it)"

cache=${SANDFENCE_VAGRANT_CACHE:-/var/cache/sandfence-vagrant}
mkdir -p "$cache/debs" || die "cannot create the cache $cache/debs"
exec 9>"$cache/.lock"
# One build at a time; a second caller then finds the box cached.
flock -n 9 || {
	log "another build-box.sh holds $cache/.lock: waiting for it"
	flock 9
}

# Debian's kernel version is part of the key (as the VM runner keys its
# kernel): a new kernel in the archive means a new box. linux-image-amd64's
# version is its kernel's (one apt-cache call: each can take seconds).
# apt-cache's whole output is read before awk looks at it: an awk that
# exited at the Candidate: line would close the pipe while apt-cache still
# writes, and pipefail would end the script with apt-cache's SIGPIPE (141).
kernel_version() {
	local policy
	policy=$(apt-cache policy linux-image-amd64 2>/dev/null) || policy=""
	awk '$1 == "Candidate:" && $2 != "(none)" && v == "" { v = $2 }
		END { if (v != "") print "linux-image-amd64=" v }' <<<"$policy"
}
# --- Build -----------------------------------------------------------------------

work=""
loop=""
mnt=""
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	if [ -n "$mnt" ]; then
		for m in dev/pts dev sys proc var/cache/apt/archives ""; do
			! mountpoint -q "$mnt/$m" 2>/dev/null || umount -l "$mnt/$m" || true
		done
	fi
	[ -z "$loop" ] || losetup -d "$loop" 2>/dev/null || true
	[ -z "$work" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

in_root() { chroot "$mnt" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 "$@"; }

build_box() {
	local t0 t1 img
	t0=$(now)
	rm -rf "$cache"/build.* # left by an interrupted build; we hold the lock
	work=$(mktemp -d "$cache/build.XXXXXX")
	img=$work/box.raw
	mnt=$work/root
	mkdir -p "$mnt"

	# One ext4 partition from 1 MiB (GRUB's core image goes in the gap).
	truncate -s "${DISK_GIB}G" "$img"
	printf 'label: dos\nstart=2048, type=83, bootable\n' | sfdisk -q "$img"
	loop=$(losetup --find --show --partscan "$img") ||
		die "losetup could not attach the disk image (no free loop device? in a container, /dev/loop* must be there)"
	local part=${loop}p1 n=0
	# Some kernels read no partition table (no CONFIG_MSDOS_PARTITION):
	# then the partition is added from user space.
	[ -b "$part" ] || partx --add "$loop" 2>/dev/null || true
	while [ ! -b "$part" ] && [ $n -lt 50 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	[ -b "$part" ] || die "no partition device $part for $loop (losetup --partscan)"
	mkfs.ext4 -q -L sandfence-root "$part" || die "mkfs.ext4 $part failed"
	mount "$part" "$mnt" || die "mount $part $mnt failed"
	local uuid
	uuid=$(blkid -s UUID -o value "$part")

	log "debootstrap $SUITE from $mirror"
	debootstrap --variant=minbase --cache-dir="$cache/debs" "$SUITE" "$mnt" "$mirror" \
		>"$work/debootstrap.log" 2>&1 || {
		tail -n 30 "$work/debootstrap.log" >&2
		die "debootstrap failed (log above)"
	}
	t1=$(now)
	log "debootstrap: $(elapsed "$t0" "$t1") s"

	{
		echo "deb $mirror $SUITE main"
		echo "deb $mirror $SUITE-updates main"
		[ -z "$security_mirror" ] || echo "deb $security_mirror $SUITE-security main"
	} >"$mnt/etc/apt/sources.list"
	mount -t proc proc "$mnt/proc"
	mount -t sysfs sys "$mnt/sys"
	mount --bind /dev "$mnt/dev"
	mount --bind /dev/pts "$mnt/dev/pts"
	mount --bind "$cache/debs" "$mnt/var/cache/apt/archives"
	# No service starts in the chroot, and no fsync after every file (the
	# image is thrown away if the build fails).
	printf '#!/bin/sh\nexit 101\n' >"$mnt/usr/sbin/policy-rc.d"
	chmod 755 "$mnt/usr/sbin/policy-rc.d"
	echo force-unsafe-io >"$mnt/etc/dpkg/dpkg.cfg.d/sandfence-build"
	cp /etc/resolv.conf "$mnt/etc/resolv.conf"
	echo sandfence >"$mnt/etc/hostname"
	printf '127.0.0.1\tlocalhost\n127.0.1.1\tsandfence\n::1\tlocalhost ip6-localhost ip6-loopback\n' \
		>"$mnt/etc/hosts"
	echo "UUID=$uuid / ext4 errors=remount-ro 0 1" >"$mnt/etc/fstab"
	# GRUB: the serial console, and the kernel command line sandfence needs.
	mkdir -p "$mnt/etc/default/grub.d"
	cat >"$mnt/etc/default/grub.d/sandfence.cfg" <<EOF
# Written by sandfence's vagrant/build-box.sh. An lsm= list replaces the
# kernel's built-in one: this is Debian 12's, with bpf for sandfence's guard.
GRUB_CMDLINE_LINUX="console=tty0 console=ttyS0,115200n8 net.ifnames=0 lsm=$LSM_LIST"
GRUB_CMDLINE_LINUX_DEFAULT=""
GRUB_TIMEOUT=0
GRUB_TERMINAL="console serial"
GRUB_DISABLE_OS_PROBER=true
EOF
	in_root debconf-set-selections <<'EOF'
grub-pc grub-pc/install_devices multiselect
grub-pc grub-pc/install_devices_empty boolean true
EOF

	log "installing: $(echo "$packages" | wc -w) packages and their dependencies"
	# shellcheck disable=SC2086
	if ! { in_root apt-get update -qq && in_root apt-get install -y -q \
		--no-install-recommends $packages; } >"$work/apt.log" 2>&1; then
		tail -n 30 "$work/apt.log" >&2
		die "apt-get install in the image failed (log above)"
	fi
	local t2
	t2=$(now)
	log "packages: $(elapsed "$t1" "$t2") s"

	in_root grub-install --target=i386-pc --boot-directory=/boot "$loop" \
		>>"$work/apt.log" 2>&1 || {
		tail -n 20 "$work/apt.log" >&2
		die "grub-install failed (log above)"
	}
	in_root update-grub >>"$work/apt.log" 2>&1 || die "update-grub failed"
	# With no /dev/disk/by-uuid here (no udev on the build host), GRUB names
	# the build's loop device as root; the VM knows the file system by its
	# UUID. (An update-grub in the VM writes UUIDs itself.)
	sed -i "s|root=$part |root=UUID=$uuid |" "$mnt/boot/grub/grub.cfg"
	grep -q "root=UUID=$uuid .*lsm=$LSM_LIST" "$mnt/boot/grub/grub.cfg" ||
		die "grub.cfg does not boot root=UUID=$uuid with lsm=$LSM_LIST"

	# DHCP on the first NIC (the libvirt management network).
	cat >"$mnt/etc/systemd/network/80-vagrant.network" <<'EOF'
[Match]
Name=eth* en*

[Network]
DHCP=yes
EOF
	in_root systemctl enable systemd-networkd.service systemd-resolved.service >/dev/null 2>&1
	# The vagrant user as Vagrant boxes have it: password vagrant,
	# passwordless sudo, the insecure key (vagrant replaces it on first up).
	in_root useradd --create-home --shell /bin/bash --user-group vagrant
	echo 'vagrant:vagrant' | in_root chpasswd
	echo 'vagrant ALL=(ALL) NOPASSWD: ALL' >"$mnt/etc/sudoers.d/vagrant"
	chmod 440 "$mnt/etc/sudoers.d/vagrant"
	install -d -m 700 -o 1000 -g 1000 "$mnt/home/vagrant/.ssh"
	install -m 600 -o 1000 -g 1000 "$insecure_key" "$mnt/home/vagrant/.ssh/authorized_keys"
	echo 'UseDNS no' >"$mnt/etc/ssh/sshd_config.d/vagrant.conf"
	# Each VM gets its own host keys on its first boot.
	rm -f "$mnt"/etc/ssh/ssh_host_*
	cat >"$mnt/etc/systemd/system/sandfence-ssh-hostkeys.service" <<'EOF'
[Unit]
Description=Generate SSH host keys (sandfence box)
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target
EOF
	in_root systemctl enable sandfence-ssh-hostkeys.service >/dev/null 2>&1
	rm -f "$mnt/usr/sbin/policy-rc.d" "$mnt/etc/machine-id" \
		"$mnt/etc/dpkg/dpkg.cfg.d/sandfence-build"
	touch "$mnt/etc/machine-id" # systemd fills it on first boot

	# The kernel, for the KVM probe (vagrant/libvirt-driver.sh).
	mkdir -p "$work/kernel"
	cp "$(find "$mnt/boot" -name 'vmlinuz-*' | sort -V | tail -n1)" "$work/kernel/vmlinuz"

	for m in dev/pts dev sys proc var/cache/apt/archives; do
		umount "$mnt/$m"
	done
	# The downloaded packages stay in the cache (they were bind-mounted);
	# what apt left in the image goes, and the freed blocks are discarded so
	# that the qcow2 image holds only what is in use.
	rm -rf "$mnt"/var/cache/apt/*.bin "$mnt"/var/lib/apt/lists/*_* "$mnt"/tmp/*
	fstrim "$mnt" 2>/dev/null || true
	umount "$mnt"
	e2fsck -fy "$part" >/dev/null 2>&1 || true
	losetup -d "$loop"
	loop=""
	mnt=""
	local t3
	t3=$(now)
	qemu-img convert -O qcow2 "$img" "$work/box.img" || die "qemu-img convert to qcow2 failed"
	rm -f "$img"
	cat >"$work/metadata.json" <<EOF
{"provider": "libvirt", "format": "qcow2", "virtual_size": $DISK_GIB}
EOF
	cat >"$work/Vagrantfile" <<'EOF'
# sandfence/bookworm, built by sandfence's vagrant/build-box.sh.
Vagrant.configure("2") do |config|
  config.vm.provider :libvirt do |lv|
    lv.disk_bus = "virtio"
  end
end
EOF
	tar -C "$work" -cf "$work/box.tar" metadata.json Vagrantfile box.img || die "tar of the box failed"
	rm -rf "$cache/kernel"
	mv "$work/kernel" "$cache/kernel"
	mv "$work/box.tar" "$box"
	local t4
	t4=$(now)
	log "image and box: $(elapsed "$t3" "$t4") s ($(du -m "$box" | cut -f1) MiB)"
	log "built $box in $(elapsed "$t0" "$t4") s"
	# One box is enough: drop those this one replaced.
	for old in "$cache"/sandfence-bookworm-*.box; do
		[ "$old" = "$box" ] || rm -f "$old"
	done
}

kver=$(kernel_version)
# The key: what goes into the image (the build step itself, the packages,
# the kernel's version), not the rest of this script.
key=$({
	declare -f build_box
	echo "$SUITE $DISK_GIB $LSM_LIST $mirror"
	echo "$packages" | tr -s '[:space:]' '\n' | sort -u
	echo "$kver"
} | sha256sum | cut -c1-12)
box=$cache/sandfence-bookworm-$key.box
catalogue=$cache/sandfence-bookworm.json

if [ -z "$kver" ] && [ "$force" -eq 0 ] && [ -f "$catalogue" ]; then
	# No apt lists to name the kernel: the newest cached box will do.
	cached=$(sed -n 's|.*"url": *"file://\([^"]*\)".*|\1|p' "$catalogue")
	if [ -f "$cached" ]; then
		box=$cached
		key=$(basename "$box" .box)
		key=${key#sandfence-bookworm-}
		log "apt names no kernel version; using the cached $(basename "$box")"
	fi
fi

if [ "$force" -eq 1 ] || [ ! -f "$box" ]; then
	build_box
else
	log "cached: $box"
fi

# The catalogue: Vagrant adds the box from it (box_url) and knows its
# version, so a rebuilt box is a new version, not a stale one under the old
# name (vagrant-libvirt keeps each version's image in its storage pool).
version=$(date -u -r "$box" +12.%Y%m%d.%H%M%S | sed 's/\.0*\([0-9]\)/.\1/g')
if [ ! -f "$catalogue" ] || ! grep -q "\"file://$box\"" "$catalogue" ||
	! grep -q "\"$version\"" "$catalogue"; then
	sha=$(sha256sum "$box" | cut -d' ' -f1)
	cat >"$catalogue.tmp" <<EOF
{
  "name": "$BOX_NAME",
  "description": "Debian 12 for sandfence (vagrant/build-box.sh, key $key)",
  "versions": [{
    "version": "$version",
    "providers": [{"name": "libvirt", "url": "file://$box",
                   "checksum_type": "sha256", "checksum": "$sha"}]
  }]
}
EOF
	mv "$catalogue.tmp" "$catalogue"
fi
flock -u 9
echo "box: $BOX_NAME $version ($box)"

if [ "$add" -eq 1 ]; then
	command -v vagrant >/dev/null 2>&1 ||
		skip "vagrant is not installed (Debian: vagrant; vagrant/install-deps.sh installs it)"
	export VAGRANT_CHECKPOINT_DISABLE=1
	versions() { # the versions of our box that Vagrant has, one a line
		local list
		list=$(vagrant box list --machine-readable 2>&1) ||
			die "vagrant box list failed: $list"
		awk -F, -v b="$BOX_NAME" \
			'$3 == "box-name" { n = $4 } $3 == "box-version" && n == b { print $4 }' <<<"$list"
	}
	have=$(versions)
	if [[ $'\n'"$have"$'\n' == *$'\n'"$version"$'\n'* ]]; then
		log "Vagrant has $BOX_NAME $version"
	else
		t0=$(now)
		vagrant box add --provider libvirt "file://$catalogue" >&2 ||
			die "vagrant box add --provider libvirt file://$catalogue failed (VAGRANT_HOME=${VAGRANT_HOME:-~/.vagrant.d})"
		log "vagrant box add: $(elapsed "$t0" "$(now)") s"
	fi
	# Older versions, in Vagrant and in libvirt's default pool.
	have=$(versions)
	for v in $have; do
		[ "$v" != "$version" ] || continue
		log "removing $BOX_NAME $v"
		vagrant box remove --force --provider libvirt --box-version "$v" "$BOX_NAME" >&2 ||
			log "could not remove $BOX_NAME $v from Vagrant (left in place)"
		if command -v virsh >/dev/null 2>&1; then
			virsh -c qemu:///system vol-delete --pool default \
				"sandfence-VAGRANTSLASH-bookworm_vagrant_box_image_${v}_box.img" >/dev/null 2>&1 || true
		fi
	done
fi
