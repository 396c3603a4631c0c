#!/bin/bash
# Builds the sandfence node-agent image (localhost/sandfence) from Debian
# packages, with podman, and nothing pulled from a container registry.
#
# usage: build-image.sh [--check] BUILD_DIR
#   BUILD_DIR  a configured and built tree (the sandfence and sandfence_docs
#              targets): the image gets the .deb that CPack makes from it,
#              so it holds exactly what `apt-get install ./sandfence_*.deb`
#              installs on an eval host, with the Depends: that
#              dpkg-shlibdeps took from the binary.
#   --check    only say whether this host can build the image (exit 0) or
#              why not (a SKIPPED line, exit 77); builds nothing.
# Environment:
#   SANDFENCE_IMAGE_NAME    image name (default localhost/sandfence; the
#                           manifests in packaging/k8s name this image)
#   SANDFENCE_IMAGE_MIRROR  Debian mirror (default: the first Debian
#                           archive URI in this host's apt sources)
#   SANDFENCE_IMAGE_SUITE   default bookworm (the suite the binary is built on)
#   SANDFENCE_IMAGE_CACHE   default /var/cache/sandfence-image
#
# Why debootstrap and not a base image: no registry is reachable from the
# machines that build sandfence, but Debian's archive is. debootstrap (in
# Debian 12, unlike mmdebstrap, which is not installed here) builds a minbase
# root filesystem from the archive; then the image is a plain Debian 12 system
# whose libraries are the Debian packages the .deb depends on, upgraded from
# the suite's -updates and -security pockets, and installed by dpkg, so
# `dpkg -l` in the image says what it holds (copying the host's libraries
# would tie the image to whatever the build host happens to have). The
# downloaded .debs are kept under $SANDFENCE_IMAGE_CACHE (CI rule), so a
# rebuild downloads only the apt indexes and what changed. `podman import`
# turns the tree into an image (no buildah needed); entrypoint.sh runs the
# daemon (see docs/kubernetes.md).
#
# Tags: NAME:VERSION (sandfence --version, with "+" made "-": OCI tags do not
# allow "+") and NAME:latest. Prints the image id on the last line.
# Root only (debootstrap, chroot). Leaves nothing but the image and the cache:
# the root filesystem is built in a temporary directory that is removed, with
# anything mounted in it, on every exit.
set -euo pipefail

skip() { echo "SKIPPED: $*"; exit 77; }
die() { echo "build-image: $*" >&2; exit 1; }

check_only=0
if [ "${1:-}" = --check ]; then check_only=1; shift; fi
[ $# -eq 1 ] || die "usage: build-image.sh [--check] BUILD_DIR"
build=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
name=${SANDFENCE_IMAGE_NAME:-localhost/sandfence}
suite=${SANDFENCE_IMAGE_SUITE:-bookworm}
cache=${SANDFENCE_IMAGE_CACHE:-/var/cache/sandfence-image}

# The Debian archive this host's apt already uses (deb822 .sources or
# one-line .list), so the image comes from the same mirror.
host_mirror() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk '
			/^[[:space:]]*#/ { next }
			$1 == "URIs:" { for (i = 2; i <= NF; i++) print $i }
			$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/) { print $i; break } }
		' "$f"
	done | awk '/\/debian\/?$/ && m == "" { m = $0 } END { if (m != "") print m }'
	# (Not `grep | head -n1`: under pipefail head's early exit fails the
	# writer, and a grep that finds nothing fails the pipeline.)
}
mirror=${SANDFENCE_IMAGE_MIRROR:-$(host_mirror)}
mirror=${mirror:-http://deb.debian.org/debian}
mirror=${mirror%/}

# What this host lacks, as the reason a test prints.
[ "$(id -u)" -eq 0 ] || skip "needs root (debootstrap and chroot build the root filesystem)"
for tool in debootstrap podman cpack dpkg-deb chroot; do
	command -v "$tool" >/dev/null ||
		skip "$tool is missing (./scripts/install-deps.sh --test installs it)"
done
[ -f "$build/CPackConfig.cmake" ] || die "$build is not a configured build tree (no CPackConfig.cmake)"
[ -x "$build/userspace/cli/sandfence" ] || die "$build/userspace/cli/sandfence is not built (cmake --build $build --target sandfence sandfence_docs)"
[ -f "$build/generated/docs/man8/sandfence.8" ] || die "$build/generated/docs is missing (cmake --build $build --target sandfence_docs)"
[ "$check_only" = 1 ] && { echo "build-image: this host can build the image ($mirror $suite)"; exit 0; }

tmp=$(mktemp -d /var/tmp/sandfence-image.XXXXXX)
root=$tmp/rootfs
cleanup() {
	local status=$? m
	set +e
	# debootstrap mounts /proc and /sys in the target; a failure can leave
	# them (deepest first).
	if [ -d "$root" ]; then
		findmnt -rn -o TARGET | grep -F "$root/" | sort -r | while read -r m; do
			umount -l "$m" || echo "build-image: cannot unmount $m" >&2
		done
	fi
	rm -rf --one-file-system "$tmp"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# 1. The .deb, from this build tree.
cpack=$(command -v cpack)
"$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 ||
	{ cat "$tmp/cpack.log" >&2; die "cpack -G DEB failed"; }
deb=$(find "$tmp/pkg" -maxdepth 1 -name 'sandfence_*.deb' -print -quit)
[ -n "$deb" ] || { cat "$tmp/cpack.log" >&2; die "cpack wrote no sandfence_*.deb"; }
# The version the binary reports (the package's may be newer when the tree
# was reconfigured after the last build).
version=$("$build/userspace/cli/sandfence" --version | awk '{ print $2 }')
tag=${version//+/-}
tag=${tag//\~/-}
echo "build-image: $(basename "$deb") -> $name:$tag"

# The package's Depends:, as names (first of each alternative, no versions),
# so debootstrap fetches them (into the cache) with the base system.
depends=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' |
	sed -e 's/|.*//' -e 's/(.*)//' -e 's/[[:space:]]//g' -e '/^$/d' | paste -sd, -)

# 2. The root filesystem: minbase (Essential + apt) plus the Depends. Two
#    stages, so that dpkg in the second runs with force-unsafe-io (no fsync
#    per file: a third of the time; a half-built tree is thrown away anyway).
mkdir -p "$cache/debootstrap" "$cache/apt"
{
	debootstrap --foreign --variant=minbase --include="$depends" \
		--cache-dir="$cache/debootstrap" \
		--keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
		"$suite" "$root" "$mirror" &&
		mkdir -p "$root/etc/dpkg/dpkg.cfg.d" &&
		echo force-unsafe-io >"$root/etc/dpkg/dpkg.cfg.d/zz-sandfence-build" &&
		chroot "$root" /debootstrap/debootstrap --second-stage
} >"$tmp/debootstrap.log" 2>&1 ||
	{ tail -n 40 "$tmp/debootstrap.log" >&2; die "debootstrap $suite from $mirror failed (log above)"; }

# 3. Updates and security fixes, then the package (dpkg: its Depends are
#    there already). apt's downloads go through the cache: copied in and
#    out, so nothing is mounted into the tree.
security=${mirror%/debian}/debian-security
cat >"$root/etc/apt/sources.list" <<SOURCES
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security $suite-security main
SOURCES
cp /etc/resolv.conf "$root/etc/resolv.conf"
find "$cache/apt" -maxdepth 1 -name '*.deb' -exec cp -t "$root/var/cache/apt/archives/" {} +
cp "$deb" "$root/tmp/sandfence.deb"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LC_ALL=C "$@"; }
{
	in_root apt-get -qq update &&
		in_root apt-get -qq -y -o Dpkg::Options::=--force-confold upgrade &&
		in_root dpkg -i /tmp/sandfence.deb
} >"$tmp/apt.log" 2>&1 || { tail -n 40 "$tmp/apt.log" >&2; die "apt/dpkg in the image root failed (log above)"; }
find "$root/var/cache/apt/archives" -maxdepth 1 -name '*.deb' -exec cp -u -t "$cache/apt/" {} +
in_root sandfence --version >/dev/null || die "the installed sandfence does not run in the image root"
rm -f "$root/etc/dpkg/dpkg.cfg.d/zz-sandfence-build"

# 4. The entrypoint, then what an image does not need.
install -m 0755 "$here/entrypoint.sh" "$root/usr/local/bin/sandfence-entrypoint"
rm -rf "$root"/tmp/* "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin \
	"$root"/var/lib/apt/lists/* "$root"/var/log/* "$root"/usr/share/doc/*/changelog* \
	"$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/*
# The runtime provides these.
: >"$root/etc/resolv.conf"
: >"$root/etc/hostname"

# 5. The image.
id=$(tar --numeric-owner --xattrs -C "$root" -c . |
	podman import -q \
		--change 'ENTRYPOINT ["/usr/local/bin/sandfence-entrypoint"]' \
		--change 'CMD ["daemon"]' \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change "LABEL org.opencontainers.image.title=sandfence" \
		--change "LABEL org.opencontainers.image.version=$version" \
		--change "LABEL org.opencontainers.image.description=sandfence node agent (Debian $suite)" \
		--message "sandfence $version from $(basename "$deb")" \
		- "$name:$tag")
podman tag "$id" "$name:latest"
echo "build-image: built $name:$tag and $name:latest"
echo "$id"
