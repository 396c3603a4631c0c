#!/bin/bash
# The sandfence image's entrypoint (packaging/image/build-image.sh installs
# it as /usr/local/bin/sandfence-entrypoint).
#
#   daemon [FLAGS...]          sandfence daemon in the host's cgroup
#                              namespace; no FLAGS: the systemd unit's
#   install-hook DIR           copy sandfence and its libraries to DIR (a
#                              host directory mounted at the same path) and
#                              the package's OCI hook files to the hooks.d
#                              directories that are mounted (see below)
#   anything else              run as given (`sandfence --version`, `bash`)
set -euo pipefail

# The kernel's fixed inode numbers of the initial (host) namespaces.
readonly HOST_CGROUP_NS="cgroup:[4026531835]"
readonly HOST_PID_NS="pid:[4026531836]"
readonly HOOKS_DIRS="/usr/share/containers/oci/hooks.d /etc/containers/oci/hooks.d"

die() { echo "sandfence-entrypoint: $*" >&2; exit 1; }

# The daemon judges cgroups by their host paths: the OCI hook passes host
# paths, a peer's /proc/PID/cgroup must read as the host's, and the process
# guard refuses to run inside another cgroup namespace. Kubernetes has no
# "host cgroup namespace" setting (runtimes on cgroup v2 give every
# container its own), so with hostPID the daemon joins the namespace of a
# host process: pid 1's on a node, else the first one whose namespace
# opens (some hosts refuse to show pid 1's namespaces even to root).
enter_host_cgroupns() {
	[ "$(readlink /proc/self/ns/cgroup)" = "$HOST_CGROUP_NS" ] && return 0
	[ "$(readlink /proc/self/ns/pid)" = "$HOST_PID_NS" ] ||
		die "not in the host's cgroup namespace, and not in the host's PID namespace to find it: run the pod with hostPID: true (and privileged)"
	local ns
	for ns in /proc/1/ns/cgroup /proc/[0-9]*/ns/cgroup; do
		[ "$(readlink "$ns" 2>/dev/null)" = "$HOST_CGROUP_NS" ] || continue
		nsenter --cgroup="$ns" -- true 2>/dev/null || continue
		echo "sandfence-entrypoint: joining the host's cgroup namespace (via $ns) from $(readlink /proc/self/ns/cgroup)" >&2
		# The loop ends here: nsenter was just seen to work.
		# shellcheck disable=SC2093
		exec nsenter --cgroup="$ns" -- "$0" "$@"
	done
	die "no process in the host's cgroup namespace could be entered (nsenter needs CAP_SYS_ADMIN and CAP_SYS_PTRACE: run the pod privileged)"
}

# The first cgroup2 mount is the one sandfence uses; it must show the whole
# hierarchy (mount the host's /sys/fs/cgroup over the runtime's).
check_cgroup_mount() {
	local root
	root=$(awk '{ for (i = 7; i <= NF; i++) if ($i == "-") break; if ($(i + 1) == "cgroup2") { print $4; exit } }' /proc/self/mountinfo)
	[ -n "$root" ] || die "no cgroup2 mount: mount the host's cgroup hierarchy (hostPath /sys/fs/cgroup)"
	[ "$root" = / ] ||
		die "the cgroup2 mount shows only $root of the hierarchy: mount the host's /sys/fs/cgroup (hostPath) at /sys/fs/cgroup"
}

run_daemon() {
	enter_host_cgroupns daemon "$@"
	check_cgroup_mount
	if [ $# -eq 0 ]; then
		# packaging/sandfence.service's flags.
		set -- --socket /run/sandfence/sandfence.sock \
			--records-dir /var/lib/sandfence/records \
			--state-dir /run/sandfence/rollouts \
			--pin-dir /sys/fs/bpf/sandfence \
			--policy-dir /etc/sandfence/policies \
			--metrics-port 9464
	fi
	# The unit's RuntimeDirectory/StateDirectory (0700), made on the host
	# paths the pod mounts.
	umask 0077
	mkdir -p /run/sandfence /var/lib/sandfence
	exec /usr/sbin/sandfence daemon "$@"
}

# The OCI runtime runs the hook on the host, outside this image: the host
# gets sandfence with the exact libraries it was built against, run through
# their own dynamic loader (nothing of the host's is used), in a versioned
# directory; `current` is switched with one rename, so a runtime never
# runs a half-copied hook.
install_hook() {
	[ $# -eq 1 ] || die "usage: install-hook DIR"
	local dir=$1 version lib
	[ -d "$dir" ] || die "$dir does not exist: mount the host directory there"
	version=$(/usr/sbin/sandfence --version | awk '{ print $2 }')
	local dest="$dir/$version"
	rm -rf "$dest.new"
	mkdir -p "$dest.new/lib"
	cp /usr/sbin/sandfence "$dest.new/sandfence.bin"
	# The loader and every library ldd resolves.
	ldd /usr/sbin/sandfence | awk '/=> \// { print $3 } /^[[:space:]]*\/.*ld-linux/ { print $1 }' |
		while read -r lib; do cp -L "$lib" "$dest.new/lib/"; done
	local loader
	loader=$(basename "$(ldd /usr/sbin/sandfence | awk '/^[[:space:]]*\/.*ld-linux/ { print $1 }')")
	[ -f "$dest.new/lib/$loader" ] || die "ldd named no dynamic loader for /usr/sbin/sandfence"
	cat >"$dest.new/sandfence" <<WRAPPER
#!/bin/sh
# sandfence $version for OCI hooks, installed by the sandfence DaemonSet.
here=\$(dirname "\$(readlink -f "\$0")")
exec "\$here/lib/$loader" --library-path "\$here/lib" "\$here/sandfence.bin" "\$@"
WRAPPER
	chmod 0755 "$dest.new/sandfence"
	"$dest.new/sandfence" --version >/dev/null || die "the copied sandfence does not run"
	local previous
	previous=$(readlink "$dir/current" 2>/dev/null || true)
	rm -rf "$dest"
	mv "$dest.new" "$dest"
	ln -sfn "$version" "$dir/current.new"
	mv -T "$dir/current.new" "$dir/current"
	# The previous version stays (a hook that started from it is still
	# loading its libraries); older ones go.
	find "$dir" -mindepth 1 -maxdepth 1 -type d ! -name "$version" \
		! -name "${previous:-$version}" -exec rm -rf {} +
	echo "sandfence-entrypoint: sandfence $version for hooks in $dir/current"

	# The package's hook definitions (if it ships any), pointed at that copy.
	local src hooks n=0
	for src in /usr/share/containers/oci/hooks.d/*.json; do
		[ -f "$src" ] || continue
		grep -q '/usr/sbin/sandfence' "$src" || continue
		for hooks in $HOOKS_DIRS; do
			[ -d "/host$hooks" ] || continue
			sed "s#\"/usr/sbin/sandfence\"#\"$dir/current/sandfence\"#g" "$src" >"/host$hooks/.$(basename "$src").new"
			mv "/host$hooks/.$(basename "$src").new" "/host$hooks/$(basename "$src")"
			echo "sandfence-entrypoint: hook $(basename "$src") in $hooks"
			n=$((n + 1))
		done
	done
	[ "$n" -gt 0 ] || echo "sandfence-entrypoint: no OCI hook installed (the package ships none in /usr/share/containers/oci/hooks.d, or no hooks.d directory is mounted under /host)"
}

case "${1:-daemon}" in
daemon) shift || true; run_daemon "$@" ;;
install-hook) shift; install_hook "$@" ;;
*) exec "$@" ;;
esac
