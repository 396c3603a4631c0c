#!/bin/bash
# The node-agent image end to end (issue 17, part 3).
#
# usage: image_test.sh SOURCE_DIR BUILD_DIR
#
# Always: bash -n and (where installed) shellcheck on packaging/image/*.sh.
# Then, where this host can (root, debootstrap, podman, cpack; else exit 77
# with a SKIPPED line naming what is missing): builds the image under a name
# of its own (never replacing a localhost/sandfence an operator loaded), and
#   1. `sandfence --version` in it is the build tree's;
#   2. `install-hook` puts a sandfence on the "host" (a temporary directory)
#      that runs there through its own loader, and rewrites a package hook
#      file to point at it;
#   3. runs the daemon as packaging/k8s/daemonset.yaml does (its args and
#      probe command, read from the manifest; privileged, host PID, a
#      private cgroup namespace as Kubernetes gives, host network, the same
#      host mounts but temporary socket/state/records directories and a pin
#      dir of its own): the probe answers, the daemon runs in the host's
#      cgroup namespace, a rollout started through it allows its model and
#      denies another loopback address;
#   4. a pod replacement: the container is SIGKILLed, the sandbox stays
#      enforced with no daemon, a new container adopts the rollout, and
#      ending it writes the record into the host's records directory;
#   5. the OCI hook as a runtime on this host would run it: the host copy
#      from step 2, a container's state on stdin (a process in a cgroup of
#      its own, model_only annotations), against the containerized daemon:
#      createRuntime puts the policy in place (EPERM), poststop writes the
#      record.
# Everything it made (containers, images, pins, sandboxes, directories) is
# removed on every exit. About 3-4 minutes here (debootstrap; downloads are
# cached in /var/cache/sandfence-image).
set -u
source=$1 build=$2
image_dir=$source/packaging/image

skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

# 0. Syntax, always.
for s in "$image_dir/build-image.sh" "$image_dir/entrypoint.sh" "$0"; do
	bash -n "$s" || fail "bash -n $s"
done
if command -v shellcheck >/dev/null; then
	shellcheck "$image_dir/build-image.sh" "$image_dir/entrypoint.sh" "$0" || fail "shellcheck"
	echo "syntax: bash -n and shellcheck pass"
else
	echo "syntax: bash -n passes (shellcheck is not installed: not run)"
fi

check=$(bash "$image_dir/build-image.sh" --check "$build")
rc=$?
[ "$rc" -eq 77 ] && { echo "$check"; exit 77; }
[ "$rc" -eq 0 ] || fail "build-image.sh --check: $check"
python=/usr/bin/python3
for tool in protoc grpc_python_plugin runc; do
	command -v "$tool" >/dev/null || skip "$tool is missing (./scripts/install-deps.sh --test installs it)"
done
"$python" -c 'import grpc, yaml' 2>/dev/null || skip "$python lacks grpc or yaml (python3-grpcio, python3-yaml)"

name=localhost/sandfence-image-test-$$
ctr=sandfence-image-test-$$
pin=/sys/fs/bpf/sandfence-image-test-$$
rollout=k8s-image-test-$$
tmp=$(mktemp -d /var/tmp/sandfence-image-test.XXXXXX)
# This host lacks CAP_SYS_RESOURCE (podman's default ulimits fail) and crun
# refuses its hybrid cgroup layout: runc, explicit ulimits.
podman_run=(podman run --runtime runc --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
daemon_mounts=(-v /sys/fs/cgroup:/sys/fs/cgroup -v /sys/fs/bpf:/sys/fs/bpf
	-v "$tmp/run:/run/sandfence" -v "$tmp/lib:/var/lib/sandfence")
daemon_opts=(--privileged --pid=host --cgroupns=private --network=host)
hook_cg="" sleeper=""
cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
# podman makes libpod_parent, and the containerized daemon its sandfence
# parent cgroup, on first use: removed again (when empty) unless they were
# there before this test.
made_cgroups=()
for d in libpod_parent sandfence; do
	[ -d "$cg2/$d" ] || made_cgroups+=("$cg2/$d")
done
cleanup() {
	podman rm -f -t 0 "$ctr" >/dev/null 2>&1
	[ -n "$sleeper" ] && kill -KILL "$sleeper" 2>/dev/null && wait "$sleeper" 2>/dev/null
	if [ -d "$pin" ]; then
		"${podman_run[@]}" --rm "${daemon_opts[@]}" "${daemon_mounts[@]}" "$name:latest" \
			daemon --cleanup --state-dir /run/sandfence/rollouts --pin-dir "$pin" >/dev/null 2>&1 ||
			echo "cleanup: sandfence daemon --cleanup failed; $pin is left"
	fi
	podman image exists "$name:latest" && podman rmi -f "$name:latest" >/dev/null 2>&1
	podman images --format '{{.Repository}}:{{.Tag}}' | grep "^$name:" | xargs -r podman rmi -f >/dev/null 2>&1
	[ -n "$hook_cg" ] && rmdir "$hook_cg" 2>/dev/null
	for d in "${made_cgroups[@]}"; do
		rmdir "$d" 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
mkdir -p "$tmp/run" "$tmp/lib" "$tmp/opt" "$tmp/hooks-usr" "$tmp/hooks-etc" "$tmp/gen"

SANDFENCE_IMAGE_NAME=$name bash "$image_dir/build-image.sh" "$build" >"$tmp/build.log" 2>&1 ||
	{ tail -n 40 "$tmp/build.log"; fail "build-image.sh failed"; }
tail -n 2 "$tmp/build.log" | head -n 1

# 1. The binary in the image is this build's.
want=$("$build/userspace/cli/sandfence" --version)
got=$("${podman_run[@]}" --rm "$name:latest" sandfence --version) || fail "podman run $name sandfence --version failed"
[ "$got" = "$want" ] || fail "the image says \"$got\", the build \"$want\""
echo "1. $name:latest runs: $got"
config=$(podman image inspect --format '{{.Config.Entrypoint}} {{.Config.Cmd}}' "$name:latest")
[ "$config" = "[/usr/local/bin/sandfence-entrypoint] [daemon]" ] || fail "entrypoint/cmd: $config"

# 2. install-hook: a host copy that runs on this host, and the package's
#    hooks.d files pointed at it.
mapfile -t pkg_hooks < <("${podman_run[@]}" --rm "$name:latest" bash -c 'cd /usr/share/containers/oci/hooks.d && ls -- *.json')
[ "${#pkg_hooks[@]}" -gt 0 ] || fail "the image has no /usr/share/containers/oci/hooks.d/*.json (the .deb installs packaging/oci's)"
"${podman_run[@]}" --rm -v "$tmp/opt:/opt/sandfence" -v "$tmp/hooks-usr:/host/usr/share/containers/oci/hooks.d" \
	-v "$tmp/hooks-etc:/host/etc/containers/oci/hooks.d" "$name:latest" install-hook /opt/sandfence \
	>"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "install-hook failed"; }
got=$("$tmp/opt/current/sandfence" --version) || fail "the host copy $tmp/opt/current/sandfence does not run"
[ "$got" = "$want" ] || fail "the host copy says \"$got\""
for d in hooks-usr hooks-etc; do
	for h in "${pkg_hooks[@]}"; do
		f=$tmp/$d/$h
		if ! grep -q '"/opt/sandfence/current/sandfence"' "$f" 2>/dev/null || grep -q /usr/sbin/sandfence "$f"; then
			fail "install-hook: $d/$h does not point at /opt/sandfence/current/sandfence: $(cat "$f" 2>&1)"
		fi
	done
done
echo "2. install-hook: the host copy runs ($got); ${pkg_hooks[*]} in both hooks.d point at /opt/sandfence/current/sandfence"

# 3. The daemon as the DaemonSet runs it.
mapfile -t args < <("$python" - "$source/packaging/k8s/daemonset.yaml" <<'PY'
import sys, yaml
ds = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d.get("kind") == "DaemonSet"][0]
c = [c for c in ds["spec"]["template"]["spec"]["containers"] if c.get("args", [None])[0] == "daemon"][0]
print("\n".join(c["args"]))
PY
)
mapfile -t probe < <("$python" - "$source/packaging/k8s/daemonset.yaml" <<'PY'
import sys, yaml
ds = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d.get("kind") == "DaemonSet"][0]
c = [c for c in ds["spec"]["template"]["spec"]["containers"] if c.get("args", [None])[0] == "daemon"][0]
print("\n".join(c["livenessProbe"]["exec"]["command"]))
PY
)
if [ "${#args[@]}" -lt 2 ] || [ "${#probe[@]}" -lt 2 ]; then
	fail "cannot read the daemon's args and probe from daemonset.yaml"
fi
# A pin dir of its own (the host's /sys/fs/bpf/sandfence is other tests'),
# and a free metrics port.
for i in "${!args[@]}"; do
	case ${args[$i]} in
	--pin-dir) args[i + 1]=$pin ;;
	--metrics-port) args[i + 1]=0 ;;
	esac
done
start_daemon() {
	podman rm -f -t 0 "$ctr" >/dev/null 2>&1
	"${podman_run[@]}" -d --name "$ctr" "${daemon_opts[@]}" "${daemon_mounts[@]}" "$name:latest" "${args[@]}" >/dev/null ||
		fail "podman run the daemon failed"
	local i
	for i in $(seq 1 60); do
		podman exec "$ctr" "${probe[@]}" >"$tmp/probe.out" 2>&1 && return 0
		if [ "$(podman inspect -f '{{.State.Running}}' "$ctr" 2>/dev/null)" != true ]; then
			podman logs "$ctr"
			fail "the daemon container exited"
		fi
		sleep 1
	done
	podman logs "$ctr"
	cat "$tmp/probe.out"
	fail "the liveness probe (${probe[*]}) did not pass in 60 s"
}
start_daemon
pid=$(podman inspect -f '{{.State.Pid}}' "$ctr")
[ "$(readlink "/proc/$pid/ns/cgroup")" = "$(readlink /proc/self/ns/cgroup)" ] ||
	fail "the daemon (pid $pid) is not in the host's cgroup namespace: $(readlink "/proc/$pid/ns/cgroup")"
# The container started in a cgroup namespace of its own (as on Kubernetes),
# so the entrypoint's nsenter was exercised.
podman logs "$ctr" 2>&1 | grep -q "joining the host's cgroup namespace" ||
	{ podman logs "$ctr"; fail "the entrypoint did not join the host's cgroup namespace: was the container's private?"; }
echo "3. the daemon serves (probe: ${probe[*]}), in the host's cgroup namespace (the container's own is private)"

bash "$source/examples/python/generate.sh" "$tmp/gen" >"$tmp/gen.log" 2>&1 || { cat "$tmp/gen.log"; fail "generate.sh"; }
client=("$python" "$source/tests/k8s/rollout_client.py" "$tmp/gen" "$tmp/run/sandfence.sock")
# The model: a loopback address and port nobody listens on (allowed:
# "refused"); the forbidden one another loopback address (EPERM).
cg=$("${client[@]}" start "$rollout" http://127.0.0.2:9/v1) || fail "StartRollout through the containerized daemon"
in_sandbox() {
	bash -c 'echo $$ >"$1/cgroup.procs" && exec bash -c "echo >/dev/tcp/$2/9" 2>&1' _ "$cg" "$1"
}
model=$(in_sandbox 127.0.0.2)
other=$(in_sandbox 127.0.0.4)
case $model in *"Connection refused"*) ;; *) fail "connect to the model from $cg: \"$model\" (want Connection refused)" ;; esac
case $other in *"Operation not permitted"*) ;; *) fail "connect to 127.0.0.4 from $cg: \"$other\" (want EPERM)" ;; esac
echo "   rollout $rollout in $cg: the model is reachable (refused: nobody listens), 127.0.0.4 gets EPERM"

# 4. The pod is replaced (a node agent upgrade): SIGKILL, no daemon for a
#    while, a new container.
podman kill -s KILL "$ctr" >/dev/null || fail "podman kill"
podman wait "$ctr" >/dev/null 2>&1
other=$(in_sandbox 127.0.0.4)
case $other in *"Operation not permitted"*) ;; *) fail "with no daemon, 127.0.0.4 from $cg: \"$other\" (want EPERM)" ;; esac
start_daemon
podman exec "$ctr" sandfence rollouts --socket "$(printf '%s\n' "${args[@]}" | sed -n '/^--socket$/{n;p}')" >"$tmp/rollouts.out" 2>&1
grep -q "^$rollout .*(adopted)" "$tmp/rollouts.out" || { cat "$tmp/rollouts.out"; fail "the new daemon did not adopt $rollout"; }
end=$("${client[@]}" end "$rollout") || fail "EndRollout after the adoption"
[ -s "$tmp/lib/records/$rollout.record.pb" ] || fail "no record $rollout.record.pb in the host's records directory"
echo "4. killed with no daemon: still EPERM; the new container adopted $rollout; ended ($end), record in the host's records dir"

# 5. The hook on the host against the containerized daemon.
hook_cg=$cg2/sandfence-image-test-hook-$$
mkdir "$hook_cg" || fail "mkdir $hook_cg"
bash -c 'echo $$ >"$1/cgroup.procs" && exec sleep 600' _ "$hook_cg" &
sleeper=$!
for _ in $(seq 1 50); do grep -qx "$sleeper" "$hook_cg/cgroup.procs" && break; sleep 0.1; done
hook_rollout=k8s-image-test-hook-$$
state() {
	printf '{"ociVersion":"1.0.2","id":"image-test-%s","status":"%s","pid":%s,"bundle":"%s","annotations":{"sandfence.dev/network-access":"model_only","sandfence.dev/model":"http://127.0.0.2:9/v1","sandfence.dev/rollout-id":"%s"}}' \
		"$$" "$1" "$2" "$tmp" "$hook_rollout"
}
hook=("$tmp/opt/current/sandfence" oci-hook --socket "$tmp/run/sandfence.sock")
state created "$sleeper" | "${hook[@]}" createRuntime >"$tmp/hook.out" 2>&1 ||
	{ cat "$tmp/hook.out"; fail "oci-hook createRuntime (the host copy) failed"; }
cg=$hook_cg
other=$(in_sandbox 127.0.0.4)
case $other in *"Operation not permitted"*) ;; *) fail "after createRuntime, 127.0.0.4 from $cg: \"$other\" (want EPERM)" ;; esac
{ kill -KILL "$sleeper" && wait "$sleeper"; } 2>/dev/null
sleeper=""
state stopped 0 | "${hook[@]}" poststop >"$tmp/hook.out" 2>&1 ||
	{ cat "$tmp/hook.out"; fail "oci-hook poststop (the host copy) failed"; }
[ -s "$tmp/lib/records/$hook_rollout.record.pb" ] || fail "no record $hook_rollout.record.pb after poststop"
echo "5. oci-hook from the host copy: createRuntime put model_only on $hook_cg (EPERM), poststop wrote the record"

podman stop -t 10 "$ctr" >/dev/null
echo "image test passed"
