#!/bin/bash
# Runs tests inside a throw-away VM whose kernel lets BPF LSM programs load.
#
# Boots Debian 12's own kernel (the package linux-image-amd64 points at) with
# `lsm=lockdown,capability,landlock,bpf` under QEMU's TCG emulator, from a
# small busybox initramfs that holds the test executables and every shared
# library they need, runs them, and exits with their status. The VM has no
# network card: tests reach only its loopback and the namespaces they create.
#
#   run-in-vm.sh --build-dir DIR [options] --test EXE [--test EXE ...]
#   run-in-vm.sh --build-dir DIR [options] -- COMMAND [ARGS...]
#
# --test EXE           a GoogleTest executable; each runs in turn, and the
#                      run fails if any of them fails
# -- COMMAND [ARGS]    one command instead (a host path is copied in)
# --build-dir DIR      the build tree; its sandfence CLI is copied in, and
#                      the initramfs is assembled under it
# --timeout S          hard limit for the VM, boot included (default 420)
# --append-cmdline S   more kernel command line (repeatable)
# --include PATH       a host file or directory, copied in at the same path;
#                      executables bring their shared libraries (repeatable)
# --module NAME        a kernel module of the VM's kernel, loaded with its
#                      dependencies before the tests (repeatable)
# --env NAME=VALUE     environment for the tests (repeatable)
# --verbose            show the kernel's boot messages
# --keep               keep the assembled initramfs and console log
#
# Environment: SANDFENCE_VM_CACHE (kernel cache, default
# /var/cache/sandfence-vm), SANDFENCE_VM_KERNEL_PKG (another linux-image
# package), SANDFENCE_VM_ACCEL (default tcg: KVM on our machines cannot boot
# a standard kernel), SANDFENCE_VM_MEM (MiB, default 2048), SANDFENCE_VM_SMP
# (default 2).
#
# Exit status: the tests' status; 77 when skipped (no kernel or no QEMU, and
# not on CI); 90 when the VM itself failed (no boot, timeout, no result).
# With CI=true, a missing kernel or QEMU is a failure, never a skip.
set -euo pipefail

readonly SKIP_STATUS=77
readonly VM_FAILED_STATUS=90
SOURCE_DIR=$(cd "$(dirname "$0")/../.." && pwd)
readonly SOURCE_DIR

log() { printf 'run-in-vm: %s\n' "$*" >&2; }

vm_failed() {
	printf '\nrun-in-vm: FAILED: %s\n' "$*" >&2
	exit "$VM_FAILED_STATUS"
}

# Locally (no network, no QEMU) the VM suite may skip; on CI it must run.
skip_or_fail() {
	if [ "${CI:-}" = "true" ]; then
		vm_failed "$* (CI=true: the VM suite must run on CI)"
	fi
	printf 'SANDFENCE_VM_SKIP: %s\n' "$*"
	exit "$SKIP_STATUS"
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

build_dir=""
timeout_s=420
cmdline_extra=()
includes=()
modules=()
tests=()
envs=()
command=()
verbose=0
keep=0

while [ $# -gt 0 ]; do
	case "$1" in
	--build-dir) build_dir=$2; shift 2 ;;
	--timeout) timeout_s=$2; shift 2 ;;
	--append-cmdline) cmdline_extra+=("$2"); shift 2 ;;
	--include) includes+=("$2"); shift 2 ;;
	--module) modules+=("$2"); shift 2 ;;
	--test) tests+=("$2"); shift 2 ;;
	--env) envs+=("$2"); shift 2 ;;
	--verbose) verbose=1; shift ;;
	--keep) keep=1; shift ;;
	--) shift; command=("$@"); break ;;
	-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "run-in-vm: unknown argument: $1 (see --help)" >&2; exit 2 ;;
	esac
done

[ -n "$build_dir" ] || { echo "run-in-vm: --build-dir is required" >&2; exit 2; }
build_dir=$(cd "$build_dir" && pwd)
if [ ${#tests[@]} -eq 0 ] && [ ${#command[@]} -eq 0 ]; then
	echo "run-in-vm: nothing to run: give --test EXE or -- COMMAND" >&2
	exit 2
fi
if [ ${#tests[@]} -gt 0 ] && [ ${#command[@]} -gt 0 ]; then
	echo "run-in-vm: give --test or -- COMMAND, not both" >&2
	exit 2
fi
for e in "${envs[@]}"; do
	case "$e" in
	[A-Za-z_]*=*) ;;
	*) echo "run-in-vm: --env wants NAME=VALUE, got: $e" >&2; exit 2 ;;
	esac
done

qemu=$(command -v qemu-system-x86_64 || true)
[ -n "$qemu" ] || skip_or_fail "qemu-system-x86_64 is not installed (Debian: qemu-system-x86)"
busybox=""
for b in /usr/bin/busybox /bin/busybox; do
	if [ -x "$b" ] && ! ldd "$b" >/dev/null 2>&1; then
		busybox=$b
		break
	fi
done
[ -n "$busybox" ] || skip_or_fail "no statically linked busybox (Debian: busybox-static)"

# --- The kernel: Debian 12's, downloaded once and cached by version --------

cache=${SANDFENCE_VM_CACHE:-/var/cache/sandfence-vm}
if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
	cache=${XDG_CACHE_HOME:-$HOME/.cache}/sandfence-vm
	mkdir -p "$cache"
fi

kernel_pkg() {
	if [ -n "${SANDFENCE_VM_KERNEL_PKG:-}" ]; then
		echo "$SANDFENCE_VM_KERNEL_PKG"
		return
	fi
	apt-cache depends linux-image-amd64 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}

pkg_version() {
	apt-cache policy "$1" 2>/dev/null |
		awk '$1 == "Candidate:" && $2 != "(none)" { print $2; exit }'
}

# Newest complete cache entry, for machines whose apt lists are gone.
newest_cached() {
	{ ls -1dt "$cache"/linux-image-*/ 2>/dev/null || true; } | while read -r d; do
		if [ -f "$d/.complete" ]; then
			echo "${d%/}"
			break
		fi
	done
}

t_start=$(now)
exec 9>"$cache/.lock"
flock 9 # concurrent runs share one download

pkg=""
version=""
if command -v apt-cache >/dev/null; then
	pkg=$(kernel_pkg)
	if [ -z "$pkg" ] && [ "$(id -u)" -eq 0 ]; then
		log "apt has no package lists; running apt-get update once"
		apt-get update -qq >&2 || true
		pkg=$(kernel_pkg)
	fi
	[ -z "$pkg" ] || version=$(pkg_version "$pkg")
fi

kdir=""
if [ -n "$pkg" ] && [ -n "$version" ]; then
	kdir=$cache/${pkg}_$(echo "$version" | tr ':' '_')
fi
if [ -n "$kdir" ] && [ -f "$kdir/.complete" ]; then
	log "kernel: $pkg $version (cached in $kdir)"
elif [ -n "$kdir" ]; then
	log "kernel: downloading $pkg $version"
	rm -rf "$cache"/download.* # left by an interrupted run; we hold the lock
	dl=$(mktemp -d "$cache/download.XXXXXX")
	apt_opts=()
	# Run as root, apt would hand the download to its `_apt` user, which
	# cannot write into our cache.
	[ "$(id -u)" -ne 0 ] || apt_opts=(-o APT::Sandbox::User=root)
	if ! (cd "$dl" && apt-get download -q "${apt_opts[@]}" "$pkg=$version" >&2); then
		rm -rf "$dl"
		kdir=$(newest_cached)
		[ -n "$kdir" ] || skip_or_fail "could not download $pkg $version from the Debian archive"
		log "download failed; using cached $(basename "$kdir")"
	else
		dpkg -x "$dl"/*.deb "$dl/root"
		rm -rf "$kdir"
		mkdir -p "$kdir"
		vmlinuz=$(find "$dl/root/boot" -name 'vmlinuz-*' -print -quit)
		[ -n "$vmlinuz" ] || vm_failed "$pkg has no /boot/vmlinuz-*"
		kver=${vmlinuz##*/vmlinuz-}
		mv "$vmlinuz" "$kdir/vmlinuz"
		mv "$dl/root/boot/config-$kver" "$kdir/config"
		for mods in "$dl/root/lib/modules/$kver" "$dl/root/usr/lib/modules/$kver"; do
			[ ! -d "$mods" ] || mv "$mods" "$kdir/modules"
		done
		[ -d "$kdir/modules" ] || vm_failed "$pkg has no lib/modules/$kver"
		echo "$kver" >"$kdir/kver"
		rm -rf "$dl"
		touch "$kdir/.complete"
		# One kernel is enough: drop the ones this version replaced.
		for old in "$cache"/linux-image-*; do
			[ "$old" = "$kdir" ] || [ ! -f "$old/.complete" ] || rm -rf "$old"
		done
		log "kernel: $pkg $version downloaded and unpacked in $(elapsed "$t_start" "$(now)") s"
	fi
else
	kdir=$(newest_cached)
	[ -n "$kdir" ] || skip_or_fail "apt lists no ${pkg:-kernel package for linux-image-amd64} (no package lists?) and no kernel is cached in $cache"
	log "kernel: apt names none; using cached $(basename "$kdir")"
fi
flock -u 9
kver=$(cat "$kdir/kver")
t_kernel=$(now)

# --- The initramfs ---------------------------------------------------------

work=$(mktemp -d "$build_dir/vm-run.XXXXXX")
vm_pid=""
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	# Stopped from outside (ctest's timeout, ^C): take the VM down with us.
	[ -z "$vm_pid" ] || kill "$vm_pid" 2>/dev/null || true
	if [ "$keep" -eq 1 ]; then
		log "kept $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
root=$work/root
mkdir -p "$root"
# Same top-level layout as the host (merged /usr on Debian 12), so a file
# copied to its host path lands where its loader and RUNPATH expect it.
for d in bin sbin lib lib64; do
	if [ -L "/$d" ]; then
		ln -s "$(readlink "/$d")" "$root/$d"
	fi
done
mkdir -p "$root"/usr/bin "$root"/usr/sbin "$root"/usr/lib "$root"/usr/lib64 \
	"$root"/usr/local/bin "$root"/bin "$root"/sbin "$root"/etc "$root"/root \
	"$root"/proc "$root"/sys "$root"/dev "$root"/tmp "$root"/run "$root"/var/tmp

cp "$busybox" "$root/usr/bin/busybox"
for applet in $("$busybox" --list); do
	[ "$applet" = busybox ] || ln -sf busybox "$root/usr/bin/$applet"
done

declare -A copied=()

copy_one() { # file at the same path; symlinks are followed
	local src=$1
	[ -z "${copied[$src]:-}" ] || return 0
	copied[$src]=1
	mkdir -p "$root$(dirname "$src")"
	cp -L --remove-destination "$src" "$root$src"
}

# A file with the shared libraries it links (and their loader).
add_file() {
	local src=$1 lib
	[ -e "$src" ] || vm_failed "cannot copy into the VM: $src does not exist"
	copy_one "$src"
	if ldd "$src" >/dev/null 2>&1; then
		if ldd "$src" | grep -q 'not found'; then
			vm_failed "$src: shared library not found: $(ldd "$src" | grep 'not found' | head -n1)"
		fi
		for lib in $(ldd "$src" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
			copy_one "$lib"
		done
	fi
}

add_path() {
	local src=$1
	src=$(cd "$(dirname "$src")" && pwd)/$(basename "$src")
	if [ -d "$src" ]; then
		mkdir -p "$root$(dirname "$src")"
		cp -a "$src" "$root$(dirname "$src")/"
		local f
		while IFS= read -r -d '' f; do
			add_file "$f"
		done < <(find "$src" -type f -perm -u+x -print0)
	else
		add_file "$src"
	fi
}

t_initrd=$(now)
# Debian's busybox shell runs its own applet for a bare command name even
# when PATH has a real tool of that name (a host `ip` copied in would lose to
# busybox's). So /bin/sh is the host's dash, which follows PATH, and a bare
# COMMAND is resolved to its path here; only init itself uses busybox sh.
if [ -x /usr/bin/dash ]; then
	add_file /usr/bin/dash
	ln -sf dash "$root/usr/bin/sh"
fi

for t in "${tests[@]}"; do
	add_path "$t"
done
if [ ${#command[@]} -gt 0 ] && [ -e "${command[0]}" ]; then
	command[0]=$(cd "$(dirname "${command[0]}")" && pwd)/$(basename "${command[0]}")
	add_path "${command[0]}"
fi
for inc in "${includes[@]}"; do
	add_path "$inc"
done
if [ -x "$build_dir/userspace/cli/sandfence" ]; then
	add_path "$build_dir/userspace/cli/sandfence"
	ln -sf "$build_dir/userspace/cli/sandfence" "$root/usr/local/bin/sandfence"
fi
# Skeletons are embedded in the binaries; the objects are for bpftool-style
# debugging and cost little.
for obj in "$build_dir"/bpf-gen/*.bpf.o; do
	[ ! -e "$obj" ] || add_path "$obj"
done
# A bare command name: the VM's PATH order, resolved now (see dash above).
if [ ${#command[@]} -gt 0 ] && [[ "${command[0]}" != */* ]]; then
	for d in /usr/local/bin /usr/sbin /usr/bin; do
		if [ -e "$root$d/${command[0]}" ] || [ -L "$root$d/${command[0]}" ]; then
			command[0]=$d/${command[0]}
			break
		fi
	done
fi
# Tests switch UIDs with util-linux's `setpriv --reuid`; busybox's lacks it.
[ ! -x /usr/bin/setpriv ] || add_file /usr/bin/setpriv
# glibc loads these for getaddrinfo and getpwnam.
for nss in /lib/x86_64-linux-gnu/libnss_files.so.2 /lib/x86_64-linux-gnu/libnss_dns.so.2; do
	[ ! -e "$nss" ] || add_file "$nss"
done

# Kernel modules, dependencies first, decompressed on the host (busybox
# insmod does not read every compression the package may use). A soft
# dependency (libcrc32c wants some crc32c) may name an alias; its module is
# found by its modinfo and loaded if it can be ("?" marks it optional).
declare -A module_seen=() module_optional=()
module_order=()
modinfo_of() { # NAME.ko -> its modinfo strings, one a line
	objcopy -O binary --only-section=.modinfo "$1" "$work/modinfo"
	tr '\0' '\n' <"$work/modinfo"
}
add_module() {
	local name=$1 optional=${2:-} ko dep sd provider tmp
	name=${name//-/_}
	if [ -n "${module_seen[$name]:-}" ]; then
		[ -n "$optional" ] || unset "module_optional[$name]"
		return 0
	fi
	module_seen[$name]=1
	[ -z "$optional" ] || module_optional[$name]=1
	ko=$(find "$kdir/modules" \( -name "$name.ko*" -o -name "${name//_/-}.ko*" \) -print -quit)
	[ -n "$ko" ] || vm_failed "kernel module $name is not in $kdir/modules"
	mkdir -p "$root/lib/modules/$kver"
	tmp=$root/lib/modules/$kver/$name.ko
	case "$ko" in
	*.ko.xz) xz -dc "$ko" >"$tmp" ;;
	*.ko.zst) zstd -qdc "$ko" >"$tmp" ;;
	*.ko.gz) gzip -dc "$ko" >"$tmp" ;;
	*) cp "$ko" "$tmp" ;;
	esac
	local info
	info=$(modinfo_of "$tmp")
	for dep in $(sed -n 's/^depends=//p' <<<"$info" | tr ',' ' '); do
		add_module "$dep" "$optional"
	done
	for sd in $(sed -n 's/^softdep=//p' <<<"$info"); do
		case "$sd" in *:) continue ;; esac
		if [ -n "$(find "$kdir/modules" -name "${sd//-/_}.ko*" -print -quit)" ]; then
			add_module "$sd" optional
			continue
		fi
		# Generic implementations first: they need no particular CPU.
		provider=$(grep -rlaP "\\x00alias=${sd}\\x00" "$kdir/modules" |
			awk '{ print (/generic/ ? 0 : 1), $0 }' | sort | head -n1 | cut -d' ' -f2-)
		if [ -n "$provider" ]; then
			provider=${provider##*/}
			add_module "${provider%%.ko*}" optional
		fi
	done
	module_order+=("$name")
}
for m in "${modules[@]}"; do
	add_module "$m"
done
module_list=()
for m in "${module_order[@]}"; do
	module_list+=("${module_optional[$m]:+?}$m")
done

cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
sftest1:x:1001:1001:sandfence test user 1:/tmp:/bin/sh
sftest2:x:1002:1002:sandfence test user 2:/tmp:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
sftest1:x:1001:
sftest2:x:1002:
nogroup:x:65534:
EOF
cat >"$root/etc/hosts" <<'EOF'
127.0.0.1 localhost
::1 localhost ip6-localhost ip6-loopback
EOF
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$root/etc/nsswitch.conf"
# Tests start their own resolver on loopback; nothing else is reachable.
echo "nameserver 127.0.0.1" >"$root/etc/resolv.conf"

# The result marker carries a per-run nonce, so no test output can fake it.
nonce=$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
marker="SANDFENCE_VM_EXIT_$nonce"

quote() { printf '%q' "$1"; } # bash quoting; busybox sh reads it back
{
	echo '#!/usr/bin/busybox sh'
	echo 'export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root'
	echo "export SANDFENCE_IN_VM=1 SANDFENCE_SOURCE_DIR=$(quote "$SOURCE_DIR") SANDFENCE_BINARY_DIR=$(quote "$build_dir")"
	for e in "${envs[@]}"; do
		echo "export ${e%%=*}=$(quote "${e#*=}")"
	done
	echo "MARKER=$marker"
	echo "MODULES=$(quote "${module_list[*]}")"
	if [ ${#tests[@]} -gt 0 ]; then
		printf 'run_tests() { run_gtests '
		for t in "${tests[@]}"; do
			printf '%s ' "$(quote "$(cd "$(dirname "$t")" && pwd)/$(basename "$t")")"
		done
		echo '; }'
	else
		printf 'run_tests() { '
		for c in "${command[@]}"; do
			printf '%s ' "$(quote "$c")"
		done
		echo '; }'
	fi
	cat "$SOURCE_DIR/tests/vm/vm-init.sh"
} >"$root/init"
chmod 755 "$root/init"

initrd=$work/initrd.cpio
# Uncompressed: under TCG, decompressing costs more than loading the bytes.
(cd "$root" && find . -print0 | cpio --null -o -H newc -R 0:0 --quiet) >"$initrd"
t_boot=$(now)
log "initramfs: $(du -m "$initrd" | cut -f1) MiB, built in $(elapsed "$t_initrd" "$t_boot") s"

# --- Boot --------------------------------------------------------------------

append="console=ttyS0 lsm=lockdown,capability,landlock,bpf panic=-1 oops=panic"
append+=" rdinit=/init tsc=reliable no_timer_check mitigations=off"
[ "$verbose" -eq 1 ] || append+=" quiet loglevel=4"
for c in "${cmdline_extra[@]}"; do
	append+=" $c"
done

qemu_args=(
	-accel "${SANDFENCE_VM_ACCEL:-tcg}" -cpu max
	-m "${SANDFENCE_VM_MEM:-2048}" -smp "${SANDFENCE_VM_SMP:-2}"
	# -nodefaults: no NIC (nothing leaves the VM), no VGA, no monitor.
	-nodefaults -display none -serial stdio -no-reboot
	-kernel "$kdir/vmlinuz" -initrd "$initrd" -append "$append"
)
log "booting $(basename "$kdir") with: $append"
console=$work/console.log
# Shows the console as it comes, keeps a copy, and notes when the tests
# started (the boot time we report).
stream() {
	local line
	while IFS= read -r line || [ -n "$line" ]; do
		line=${line%$'\r'}
		printf '%s\n' "$line"
		printf '%s\n' "$line" >>"$console"
		case "$line" in
		"vm: uptime at test start"*) now >"$work/t_tests" ;;
		esac
	done
}
mkfifo "$work/console.fifo"
timeout --kill-after=10 "$timeout_s" "$qemu" "${qemu_args[@]}" \
	</dev/null >"$work/console.fifo" 2>"$work/qemu.err" &
vm_pid=$!
stream <"$work/console.fifo"
qemu_status=0
wait "$vm_pid" || qemu_status=$?
vm_pid=""
t_end=$(now)

status=$(grep -ao "$marker=[0-9]*" "$console" | tail -n1 | cut -d= -f2 || true)
boot_time="?"
[ ! -f "$work/t_tests" ] || boot_time=$(elapsed "$t_boot" "$(cat "$work/t_tests")")
log "times: kernel $(elapsed "$t_start" "$t_kernel") s, initramfs $(elapsed "$t_initrd" "$t_boot") s, boot to tests $boot_time s, VM $(elapsed "$t_boot" "$t_end") s, total $(elapsed "$t_start" "$t_end") s"
if [ -z "$status" ]; then
	if [ -s "$work/qemu.err" ]; then
		log "qemu said:"
		cat "$work/qemu.err" >&2
	fi
	if [ "$qemu_status" -eq 124 ] || [ "$qemu_status" -eq 137 ]; then
		vm_failed "the VM did not finish within ${timeout_s} s (--timeout)"
	fi
	vm_failed "the VM stopped (qemu status $qemu_status) without reporting a result: it did not boot, or init died (rerun with --verbose --keep)"
fi
if [ "$status" -eq 0 ]; then
	log "PASSED in the VM"
	exit 0
fi
log "FAILED in the VM: exit status $status"
# Keep our own two statuses unambiguous.
if [ "$status" -eq "$SKIP_STATUS" ] || [ "$status" -eq "$VM_FAILED_STATUS" ]; then
	exit 1
fi
exit "$status"
