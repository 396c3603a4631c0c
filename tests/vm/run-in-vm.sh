#!/bin/bash
# Runs tests inside a throw-away VM whose kernel lets BPF LSM programs load.
#
# Boots a Debian kernel (one of tests/vm/kernels.conf: Debian 12's 6.1 by
# default) with `lsm=lockdown,capability,landlock,bpf` under QEMU's TCG
# emulator, from a small busybox initramfs that holds the test executables
# and every shared library they need, runs them, and exits with their status.
# The VM has no network card: tests reach only its loopback and the
# namespaces they create.
#
#   run-in-vm.sh --build-dir DIR [options] --test EXE [--test EXE ...]
#   run-in-vm.sh --build-dir DIR [options] -- COMMAND [ARGS...]
#
# --test EXE           a GoogleTest executable; each runs in turn, and the
#                      run fails if any of them fails
# -- COMMAND [ARGS]    one command instead (a host path is copied in)
# --build-dir DIR      the build tree; its sandfence CLI is copied in, and
#                      the initramfs is assembled under it
# --kernel NAME        which kernel of tests/vm/kernels.conf to boot (6.1,
#                      6.12, 5.10, ...; default: its first line)
# --results FILE       write what ran (per test executable: status, passed,
#                      skipped and failed counts, each skip's reason) as
#                      tab-separated lines, for vm-matrix.sh's table
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
# /var/cache/sandfence-vm), SANDFENCE_VM_MIRROR (Debian archive, default
# http://deb.debian.org), SANDFENCE_VM_ACCEL (default tcg: KVM on our
# machines cannot boot a standard kernel), SANDFENCE_VM_MEM (MiB, default
# 2048), SANDFENCE_VM_SMP (default 2).
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

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
t_start=$(now)

# --results: one "kernel" line (name, release, seconds), then "suite" lines
# (name, exit status, passed, skipped, failed) and "skip" lines (suite,
# test, reason), or one "vm" line (failed|skipped, reason) when no test ran.
results=""
results_written=0
kernel_name=""
kver=""
write_results() { # [vm STATE REASON]
	[ -n "$results" ] && [ "$results_written" -eq 0 ] || return 0
	results_written=1
	{
		printf 'kernel\t%s\t%s\t%s\n' "$kernel_name" "${kver:-?}" "$(elapsed "$t_start" "$(now)")"
		# From the VM: "MARKER:suite NAME STATUS P S F" and
		# "MARKER:skip SUITE TEST REASON...".
		if [ -n "${console:-}" ] && [ -f "$console" ]; then
			grep -a "^$marker:" "$console" | sed "s/^$marker://" | awk '
				$1 == "suite" { printf "suite\t%s\t%s\t%s\t%s\t%s\n", $2, $3, $4, $5, $6 }
				$1 == "skip" { r = $0; sub(/^skip +[^ ]+ +[^ ]+ */, "", r)
					printf "skip\t%s\t%s\t%s\n", $2, $3, r }'
		fi
		[ $# -eq 0 ] || printf '%s\t%s\t%s\n' "$1" "$2" "$3"
	} >"$results.tmp" && mv "$results.tmp" "$results"
}

vm_failed() {
	printf '\nrun-in-vm: FAILED: %s\n' "$*" >&2
	write_results vm failed "$*"
	exit "$VM_FAILED_STATUS"
}

# Locally (no network, no QEMU) the VM suite may skip; on CI it must run.
skip_or_fail() {
	if [ "${CI:-}" = "true" ]; then
		vm_failed "$* (CI=true: the VM suite must run on CI)"
	fi
	printf 'SANDFENCE_VM_SKIP: %s\n' "$*"
	write_results vm skipped "$*"
	exit "$SKIP_STATUS"
}

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
	--kernel) kernel_name=$2; shift 2 ;;
	--results) results=$2; shift 2 ;;
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
if [ -n "$results" ]; then
	mkdir -p "$(dirname "$results")"
	results=$(cd "$(dirname "$results")" && pwd)/$(basename "$results")
	rm -f "$results"
fi
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

# --- The kernel: a pinned Debian package, downloaded once and cached --------

kernels_conf=$SOURCE_DIR/tests/vm/kernels.conf
spec=$(awk -v want="$kernel_name" '!/^#/ && NF >= 4 && (want == "" || $1 == want) { print; exit }' "$kernels_conf")
if [ -z "$spec" ]; then
	echo "run-in-vm: --kernel $kernel_name is not in $kernels_conf (it has: $(awk '!/^#/ && NF >= 4 { printf "%s ", $1 }' "$kernels_conf"))" >&2
	exit 2
fi
read -r kernel_name suites pin_pkg pin_version <<<"$spec"
# Every package of a kernel line must be of its series: 6.1 is not 6.12.
series=$kernel_name

cache=${SANDFENCE_VM_CACHE:-/var/cache/sandfence-vm}
if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
	cache=${XDG_CACHE_HOME:-$HOME/.cache}/sandfence-vm
	mkdir -p "$cache"
fi

kdir_of() { echo "$cache/${1}_$(echo "$2" | tr ':' '_')"; }

# Newest complete cache entry of this series, for when the archive cannot
# be asked (offline) or no longer has the pin.
newest_cached() {
	{ ls -1dt "$cache"/linux-image-*/ 2>/dev/null || true; } | while read -r d; do
		d=${d%/}
		if [ -f "$d/.complete" ] && [[ "$(cat "$d/kver")" == "$series."* ]]; then
			echo "$d"
			break
		fi
	done
}

# apt with this kernel's suites only: its own sources list and package
# lists in a directory of the cache, removed once the kernel is there (a
# cache miss updates them anyway); the host's sources, lists and caches stay
# as they are. Run as root, apt would hand the download to its `_apt` user,
# which cannot write into our cache.
aptdir=""
apt_k() {
	local tool=$1
	shift
	local opts=(-o Dir::Etc::sourcelist="$aptdir/sources.list"
		-o Dir::Etc::sourceparts=- -o Dir::State::Lists="$aptdir/lists"
		-o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
		-o Dir::Etc::preferencesparts=- -o Dir::Etc::preferences="$aptdir/preferences")
	[ "$(id -u)" -ne 0 ] || opts+=(-o APT::Sandbox::User=root)
	"$tool" "${opts[@]}" "$@"
}
apt_update() {
	local mirror=${SANDFENCE_VM_MIRROR:-http://deb.debian.org} suite
	rm -rf "$cache"/apt.* # left by an interrupted run; we hold the lock
	aptdir=$(mktemp -d "$cache/apt.XXXXXX")
	mkdir -p "$aptdir/lists/partial"
	: >"$aptdir/preferences"
	for suite in ${suites//,/ }; do
		case "$suite" in
		*-security) echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror/debian-security $suite main" ;;
		*) echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror/debian $suite main" ;;
		esac
	done >"$aptdir/sources.list"
	apt_k apt-get update -qq >&2
}

download() { # PKG VERSION -> unpacked in its cache entry, or fails
	local pkg=$1 version=$2 kdir dl vmlinuz kv mods old
	kdir=$(kdir_of "$pkg" "$version")
	log "kernel $kernel_name: downloading $pkg $version ($suites)"
	rm -rf "$cache"/download.* # left by an interrupted run; we hold the lock
	dl=$(mktemp -d "$cache/download.XXXXXX")
	if ! (cd "$dl" && apt_k apt-get download -q "$pkg=$version" >&2); then
		rm -rf "$dl"
		return 1
	fi
	dpkg -x "$dl"/*.deb "$dl/root"
	rm -rf "$kdir"
	mkdir -p "$kdir"
	vmlinuz=$(find "$dl/root/boot" -name 'vmlinuz-*' -print -quit)
	[ -n "$vmlinuz" ] || vm_failed "$pkg has no /boot/vmlinuz-*"
	kv=${vmlinuz##*/vmlinuz-}
	mv "$vmlinuz" "$kdir/vmlinuz"
	mv "$dl/root/boot/config-$kv" "$kdir/config"
	for mods in "$dl/root/lib/modules/$kv" "$dl/root/usr/lib/modules/$kv"; do
		[ ! -d "$mods" ] || mv "$mods" "$kdir/modules"
	done
	[ -d "$kdir/modules" ] || vm_failed "$pkg has no lib/modules/$kv"
	echo "$kv" >"$kdir/kver"
	rm -rf "$dl"
	touch "$kdir/.complete"
	# One kernel per series is enough: drop the ones this one replaced.
	for old in "$cache"/linux-image-*; do
		if [ "$old" != "$kdir" ] && [ -f "$old/.complete" ] &&
			[[ "$(cat "$old/kver")" == "$series."* ]]; then
			rm -rf "$old"
		fi
	done
	log "kernel $kernel_name: $pkg $version downloaded and unpacked in $(elapsed "$t_start" "$(now)") s"
}

exec 9>"$cache/.lock"
flock 9 # concurrent runs share one download

kdir=$(kdir_of "$pin_pkg" "$pin_version")
if [ -f "$kdir/.complete" ]; then
	log "kernel $kernel_name: $pin_pkg $pin_version (cached in $kdir)"
else
	kdir=""
	pkg=""
	version=""
	if ! command -v apt-get >/dev/null; then
		log "kernel $kernel_name: no apt-get here to download $pin_pkg"
	elif ! apt_update; then
		log "kernel $kernel_name: apt-get update of $suites failed"
	elif apt_k apt-cache madison "$pin_pkg" 2>/dev/null |
		awk -F' *[|] *' -v v="$pin_version" '$2 == v { found = 1 } END { exit !found }'; then
		pkg=$pin_pkg
		version=$pin_version
	else
		# Debian keeps one version per suite: the pin is gone. The suites'
		# newest kernel of the same series still tests this series.
		# (awk reads apt-cache's whole output: an early `exit` would close
		# the pipe on it, and pipefail would fail on its SIGPIPE.)
		pkg=$(apt_k apt-cache depends linux-image-amd64 2>/dev/null |
			awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ && p == "" { p = $2 }
				END { if (p != "") print p }')
		version=""
		[ -z "$pkg" ] || version=$(apt_k apt-cache policy "$pkg" 2>/dev/null |
			awk '$1 == "Candidate:" && $2 != "(none)" && v == "" { v = $2 }
				END { if (v != "") print v }')
		if [ -z "$version" ] || [[ "$pkg" != "linux-image-$series."* ]]; then
			log "kernel $kernel_name: $suites no longer has $pin_pkg $pin_version, nor another $series kernel (newest: ${pkg:-none})"
			pkg=""
		else
			log "kernel $kernel_name: NOTE: $suites no longer has the pinned $pin_pkg $pin_version; using $pkg $version (update tests/vm/kernels.conf)"
		fi
	fi
	if [ -n "$pkg" ]; then
		kdir=$(kdir_of "$pkg" "$version")
		if [ -f "$kdir/.complete" ]; then
			log "kernel $kernel_name: $pkg $version (cached in $kdir)"
		elif ! download "$pkg" "$version"; then
			log "kernel $kernel_name: could not download $pkg $version"
			kdir=""
		fi
	fi
	if [ -z "$kdir" ]; then
		kdir=$(newest_cached)
		[ -n "$kdir" ] || skip_or_fail "kernel $kernel_name: $pin_pkg $pin_version is not cached in $cache and could not be downloaded from $suites"
		log "kernel $kernel_name: NOTE: using the cached $(basename "$kdir") instead of $pin_pkg $pin_version"
	fi
fi
[ -z "$aptdir" ] || rm -rf "$aptdir"
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
	write_results vm failed "the runner was stopped (signal) before the VM reported"
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
# One process, not one `ln` per applet (hundreds of forks on a busy host).
"$busybox" --install -s "$root/usr/bin"

declare -A copied=()

# Bash builtins where a loop runs per file: on a busy two-core host each
# forked dirname, mkdir or awk costs tens of milliseconds.
declare -A made_dirs=()
copy_one() { # file at the same path; symlinks are followed
	local src=$1 dir=${1%/*}
	[ -z "${copied[$src]:-}" ] || return 0
	copied[$src]=1
	if [ -z "${made_dirs[$dir]:-}" ]; then
		mkdir -p "$root$dir"
		made_dirs[$dir]=1
	fi
	# Our own executables without their debug info: a third of the size,
	# and under TCG every byte of the initramfs costs boot time.
	if [[ "$src" == "$build_dir"/* ]] && [ -x "$src" ] &&
		objcopy --strip-debug "$src" "$root$src" 2>/dev/null; then
		return 0
	fi
	cp -L --remove-destination "$src" "$root$src"
}

# A file with the shared libraries it links (and their loader).
add_file() {
	local src=$1 deps name arrow path rest
	[ -e "$src" ] || vm_failed "cannot copy into the VM: $src does not exist"
	copy_one "$src"
	# ldd fails for a static executable or a data file: nothing to add.
	deps=$(ldd "$src" 2>/dev/null) || return 0
	case "$deps" in
	*"not found"*)
		vm_failed "$src: shared library not found: $(grep -m1 'not found' <<<"$deps")"
		;;
	esac
	# "name => /path (addr)", or the loader as "/path (addr)".
	while read -r name arrow path rest; do
		if [ "$arrow" = "=>" ] && [[ "$path" == /* ]]; then
			copy_one "$path"
		elif [[ "$name" == /* ]]; then
			copy_one "$name"
		fi
	done <<<"$deps"
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
		# (No provider is no match, not a failure; sed reads all of sort's
		# output, where head would close the pipe on it under pipefail.)
		provider=$({ grep -rlaP "\\x00alias=${sd}\\x00" "$kdir/modules" || true; } |
			awk '{ print (/generic/ ? 0 : 1), $0 }' | sort | sed -n 1p | cut -d' ' -f2-)
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

# One vCPU by default: under TCG with two, the kernel's live code patching
# (text_poke_bp, when BPF trampolines attach to LSM hooks while another vCPU
# runs through them) once left an int3 that oopsed the 6.12 guest on a
# loaded host (Oops: int3 in bpf_lsm_inode_permission). SANDFENCE_VM_SMP=2
# is faster where that does not happen.
qemu_args=(
	-accel "${SANDFENCE_VM_ACCEL:-tcg}" -cpu max
	-m "${SANDFENCE_VM_MEM:-2048}" -smp "${SANDFENCE_VM_SMP:-1}"
	# -nodefaults: no NIC (nothing leaves the VM), no VGA, no monitor.
	-nodefaults -display none -serial stdio -no-reboot
	-kernel "$kdir/vmlinuz" -initrd "$initrd" -append "$append"
)
log "booting kernel $kernel_name ($kver) with: $append"
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
write_results
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
