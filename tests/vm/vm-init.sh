# The body of the VM's /init (busybox sh). run-in-vm.sh writes the lines
# before it: PATH and the tests' environment, MARKER (the result line's
# prefix), MODULES (kernel modules, dependencies first; "?" marks one that
# may fail to load) and run_tests().
#
# Whatever happens, the last thing this prints is "$MARKER=<status>", and
# then the VM powers off; an init that dies instead panics the kernel, which
# (panic=-1, -no-reboot) stops QEMU without a marker: a VM failure.

mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1

mount -t proc proc /proc
# What udev would make: the /dev/fd and /dev/std* links (the guard tests
# walk paths through them).
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
[ -e /dev/stdin ] || ln -s /proc/self/fd/0 /dev/stdin
[ -e /dev/stdout ] || ln -s /proc/self/fd/1 /dev/stdout
[ -e /dev/stderr ] || ln -s /proc/self/fd/2 /dev/stderr
mount -t sysfs sysfs /sys
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
# /tmp is the initramfs's own (already writable): a tmpfs over it would
# hide a build tree that lives under /tmp on the host (CI clones there).
chmod 1777 /tmp
mount -t tmpfs -o mode=755 tmpfs /run
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t bpf bpf /sys/fs/bpf
mount -t securityfs securityfs /sys/kernel/security
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
# Controllers for tests that set limits on their sandboxes; the root cgroup
# may hold processes and still delegate them.
echo "+cpu +memory +pids" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
ip link set lo up
hostname sandfence-vm
ulimit -l unlimited

vm_exit() {
	echo # the command's last line may lack its newline
	echo "vm: uptime at exit: $(cut -d' ' -f1 /proc/uptime) s"
	echo "$MARKER=$1"
	sync
	poweroff -f
	sleep 60 # poweroff -f does not return; never let init exit
}

for m in $MODULES; do
	case "$m" in
	"?"*)
		insmod "/lib/modules/$(uname -r)/${m#?}.ko" ||
			echo "vm: optional kernel module ${m#?} did not load; going on"
		;;
	*)
		if ! insmod "/lib/modules/$(uname -r)/$m.ko"; then
			echo "vm: could not load kernel module $m"
			vm_exit 1
		fi
		;;
	esac
done

echo "vm: kernel $(uname -r), active LSMs: $(cat /sys/kernel/security/lsm)"
echo "vm: uptime at test start: $(cut -d' ' -f1 /proc/uptime) s"

# Each GoogleTest executable in turn, then one summary naming each.
run_gtests() {
	overall=0
	summary=""
	for t in "$@"; do
		name=${t##*/}
		echo "==== vm: $name"
		out=/tmp/.vm-out.$name
		# shellcheck disable=SC3040 # busybox sh has pipefail
		set -o pipefail
		"$t" --gtest_color=no 2>&1 | tee "$out"
		st=$?
		# shellcheck disable=SC3040
		set +o pipefail
		counts=$(grep -E '^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]+ tests?' "$out" |
			sed -E 's/^\[ *([A-Z]+) *\] ([0-9]+) tests?.*/\2 \1/' | tr 'A-Z\n' 'a-z,' |
			sed 's/,$//; s/,/, /g')
		# For the host's kernel x suite table: the counts, and each skip
		# with the first lines of its reason.
		awk -v m="$MARKER" -v name="$name" -v st="$st" '
			/^\[  PASSED  \] [0-9]+ test/ { p = $4 }
			/^\[  SKIPPED \] [0-9]+ test/ { s = $4 }
			/^\[  FAILED  \] [0-9]+ test/ { f = $4 }
			/^\[ RUN      \] / { t = $4; why = ""; inskip = 0; next }
			/(^|: )Skipped$/ { inskip = 1; next }
			/^\[  SKIPPED \] / && $4 == t {
				gsub(/[ \t]+/, " ", why)
				print m ":skip " name " " t " " (why == "" ? "(no reason given)" : substr(why, 1, 300))
				inskip = 0; t = ""; next
			}
			inskip && NF { why = why (why == "" ? "" : " ") $0 }
			END { print m ":suite " name " " st " " p + 0 " " s + 0 " " f + 0 }
		' "$out"
		if [ "$st" -eq 0 ]; then
			summary="$summary  $name: ok ($counts)\n"
		else
			summary="$summary  $name: FAILED, exit status $st ($counts)\n"
			overall=1
		fi
		rm -f "$out"
	done
	echo "==== vm: summary"
	printf '%b' "$summary"
	return $overall
}

cd /tmp || vm_exit 1
run_tests
vm_exit $?
