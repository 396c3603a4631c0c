#!/bin/bash
# The .deb end to end (issue 19): builds it from this build tree with CPack,
# installs it with dpkg -i, checks that everything packaging/sandfence.service
# names is in place (read from the installed unit, not assumed), that the
# installed binary reports the build's version, then removes it with dpkg -r
# (which must leave /var/lib/sandfence alone) and purges it. The same build
# makes python3-sandfence (the client, issue 39): installed beside it, the
# system python3 imports it, sync and asyncio, and the protos are shipped.
#
# usage: package_test.sh BUILD_DIR CPACK SOURCE_DIR
# Exit 77 (ctest SKIP_RETURN_CODE) with a SKIPPED line when it cannot run:
# not root, no dpkg/dpkg-shlibdeps, or a sandfence already installed here.
# Whatever happens, the package is not left installed (trap).
set -u
build=$1 cpack=$2 source=$3

skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "needs root (dpkg -i installs into /usr and /etc)"
for tool in dpkg dpkg-deb dpkg-query dpkg-shlibdeps; do
	command -v "$tool" >/dev/null || skip "$tool is missing (apt-get install dpkg-dev)"
done
# Never touch a real installation: this test removes what it installs.
for name in sandfence python3-sandfence; do
	status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$name" 2>/dev/null || true)
	case $status in
	"" | "un "*) ;;
	*) skip "a $name package is on this host (dpkg status \"$status\"); the test would replace and remove it" ;;
	esac
done
[ -e /usr/lib/python3/dist-packages/sandfence ] &&
	skip "/usr/lib/python3/dist-packages/sandfence exists outside any package; the test would overwrite it"
for path in /usr/sbin/sandfence /lib/systemd/system/sandfence.service \
	/usr/lib/systemd/system/sandfence.service /etc/sandfence/policies; do
	[ -e "$path" ] && skip "$path exists outside any package; the test would overwrite it"
done
[ -f "$build/generated/docs/man8/sandfence.8" ] ||
	fail "$build/generated/docs is missing: build the sandfence_docs target (part of all)"

tmp=$(mktemp -d /tmp/sandfence-package-test.XXXXXX)
installed_by_us=0
state=/var/lib/sandfence
made_state=0 made_records=0
marker=""
cleanup() {
	if [ "$installed_by_us" = 1 ]; then
		for name in python3-sandfence sandfence; do
			s=$(dpkg-query -W -f='${db:Status-Abbrev}' "$name" 2>/dev/null || true)
			case $s in
			"" | "un "*) ;;
			*) dpkg -P "$name" >/dev/null 2>&1 || echo "cleanup: dpkg -P $name failed" ;;
			esac
		done
	fi
	[ -n "$marker" ] && rm -f "$marker"
	[ "$made_records" = 1 ] && rmdir "$state/records" 2>/dev/null
	[ "$made_state" = 1 ] && rmdir "$state" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# 1. Build the package from this tree (Depends: from dpkg-shlibdeps).
"$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 ||
	{ cat "$tmp/cpack.log"; fail "cpack -G DEB failed"; }
deb=""
for f in "$tmp"/pkg/sandfence_*.deb; do [ -f "$f" ] && deb=$f; done
[ -n "$deb" ] || { cat "$tmp/cpack.log"; fail "cpack wrote no sandfence_*.deb"; }
echo "built $(basename "$deb")"
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libbpf1 libgrpc++ libprotobuf libc6; do
	case $depends in *"$lib"*) ;; *) fail "Depends: lacks $lib: \"$depends\"" ;; esac
done

pydeb=""
for f in "$tmp"/pkg/python3-sandfence_*_all.deb; do [ -f "$f" ] && pydeb=$f; done
[ -n "$pydeb" ] || { cat "$tmp/cpack.log"; fail "cpack wrote no python3-sandfence_*_all.deb"; }
echo "built $(basename "$pydeb")"
pydepends=$(dpkg-deb -f "$pydeb" Depends)
for dep in python3-grpcio python3-protobuf; do
	case $pydepends in *"$dep"*) ;; *) fail "python3-sandfence Depends: lacks $dep: \"$pydepends\"" ;; esac
done
dpkg-deb -c "$deb" | grep -q '/usr/lib/python3/' && fail "the daemon's package carries Python files"

# 2. Records and state that exist before must survive removal.
[ -d "$state" ] || { mkdir -m 0700 "$state" && made_state=1; }
[ -d "$state/records" ] || { mkdir -m 0700 "$state/records" && made_records=1; }
marker="$state/records/package-test-$$.record"
echo "kept across dpkg -r" >"$marker"

# 3. Install.
installed_by_us=1
dpkg -i "$deb" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "dpkg -i failed"; }

# 4. What the unit expects is in place. Read the installed unit: its
#    ExecStart binary, --policy-dir and Documentation= paths.
unit=""
for dir in /lib/systemd/system /usr/lib/systemd/system; do
	[ -f "$dir/sandfence.service" ] && unit="$dir/sandfence.service" && break
done
[ -n "$unit" ] || fail "no sandfence.service in /lib/systemd/system or /usr/lib/systemd/system"
cmp -s "$unit" "$source/packaging/sandfence.service" || fail "$unit differs from packaging/sandfence.service"
# Join the unit's continuation lines.
flat=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$unit")
exec_start=$(printf '%s\n' "$flat" | sed -n 's/^ExecStart=\([^ ]*\).*/\1/p')
[ -n "$exec_start" ] || fail "the unit has no ExecStart="
[ -x "$exec_start" ] || fail "ExecStart's $exec_start is not an executable"
policy_dir=$(printf '%s\n' "$flat" | grep -o -- '--policy-dir [^ ]*' | cut -d' ' -f2)
[ -n "$policy_dir" ] || fail "the unit's ExecStart has no --policy-dir"
[ -d "$policy_dir" ] || fail "--policy-dir $policy_dir is not a directory"
for p in "$source"/policies/*.textproto; do
	cmp -s "$p" "$policy_dir/$(basename "$p")" || fail "$policy_dir/$(basename "$p") is missing or differs from policies/"
	dpkg-query -W -f='${Conffiles}\n' sandfence | grep -q " $policy_dir/$(basename "$p") " ||
		fail "$policy_dir/$(basename "$p") is not a conffile"
done
for doc in $(printf '%s\n' "$flat" | sed -n 's/^Documentation=//p'); do
	case $doc in
	file://*) [ -f "${doc#file://}" ] || fail "Documentation=$doc: no such file" ;;
	esac
done
man_dir=/usr/share/man/man8
[ -f "$man_dir/sandfence.8.gz" ] || fail "no $man_dir/sandfence.8.gz"
for page in "$build"/generated/docs/man8/*.8; do
	gzip -dc "$man_dir/$(basename "$page").gz" 2>/dev/null | cmp -s "$page" - ||
		fail "$man_dir/$(basename "$page").gz is missing or differs from $page"
done
[ -f /usr/share/bash-completion/completions/sandfence ] || fail "no bash completion"
# The OCI hook's hooks.d files name the installed binary.
for hook in "$source"/packaging/oci/*.json; do
	installed=/usr/share/containers/oci/hooks.d/$(basename "$hook")
	cmp -s "$hook" "$installed" || fail "$installed is missing or differs from packaging/oci"
	grep -q "\"path\": \"$exec_start\"" "$installed" || fail "$installed does not run $exec_start"
done

# 5. The installed binary runs (its libraries resolve) and is this build.
want=$("$build/userspace/cli/sandfence" --version) || fail "the build's sandfence --version failed"
got=$("$exec_start" --version) || fail "$exec_start --version exited $?"
[ "$got" = "$want" ] || fail "$exec_start --version says \"$got\", the build says \"$want\""
"$exec_start" daemon --help >/dev/null || fail "$exec_start daemon --help failed"
# The package's version is the binary's ("-" becomes "." for Debian): a
# package of a stale binary (configured again, not rebuilt) fails here.
pkg_version=$(dpkg-query -W -f='${Version}' sandfence)
[ "$pkg_version" = "$(printf '%s' "${got#sandfence }" | tr - .)" ] ||
	fail "package version $pkg_version, binary \"$got\" (build again after configuring)"
echo "installed: $got; unit $unit; binary $exec_start; policies in $policy_dir"
# The API for clients in any language.
for p in "$source"/proto/sandfence/v1/*.proto; do
	cmp -s "$p" "/usr/share/sandfence/proto/sandfence/v1/$(basename "$p")" ||
		fail "/usr/share/sandfence/proto/sandfence/v1/$(basename "$p") is missing or differs from proto/"
done

# 5b. The client package: the system python3 imports it from where Debian
#     puts modules, with its generated API, sync and asyncio.
if /usr/bin/python3 -c 'import grpc, grpc.aio, google.protobuf' 2>/dev/null; then
	dpkg -i "$pydeb" >"$tmp/pyinstall.log" 2>&1 || { cat "$tmp/pyinstall.log"; fail "dpkg -i python3-sandfence failed"; }
	(cd / && /usr/bin/python3 -B -c '
import sandfence, sandfence.aio
from sandfence.v1 import daemon_pb2
assert sandfence.__file__.startswith("/usr/lib/python3/dist-packages/"), sandfence.__file__
assert issubclass(sandfence.Rejected, ValueError)
sandfence.aio.AsyncClient, sandfence.Client, daemon_pb2.StartRolloutRequest
net = sandfence.network.network_request("model_only", "http://127.0.0.2:8000/v1")
assert net["network_access"] == "model_only", net
assert sandfence.Client.check and sandfence.aio.restrict_sandbox_network
print("python3-sandfence imports from", sandfence.__file__)
') || fail "the installed python3-sandfence does not import"
	dpkg -P python3-sandfence >"$tmp/pyremove.log" 2>&1 || { cat "$tmp/pyremove.log"; fail "dpkg -P python3-sandfence failed"; }
	[ -e /usr/lib/python3/dist-packages/sandfence/client.py ] && fail "dpkg -P python3-sandfence left the client"
else
	echo "SKIPPED (part): installing python3-sandfence needs python3-grpcio and python3-protobuf (scripts/install-deps.sh --test)"
fi

# 6. Remove: the files go, conffiles and records/state stay.
dpkg -r sandfence >"$tmp/remove.log" 2>&1 || { cat "$tmp/remove.log"; fail "dpkg -r failed"; }
[ -e "$exec_start" ] && fail "dpkg -r left $exec_start"
[ -e "$unit" ] && fail "dpkg -r left $unit"
[ -e "$man_dir/sandfence.8.gz" ] && fail "dpkg -r left $man_dir/sandfence.8.gz"
s=$(dpkg-query -W -f='${db:Status-Abbrev}' sandfence 2>/dev/null)
[ "${s%% *}" = rc ] || fail "after dpkg -r the status is \"$s\", not rc (config files kept)"
[ "$(cat "$marker" 2>/dev/null)" = "kept across dpkg -r" ] || fail "dpkg -r touched $state"

# 7. Purge: the policies go too; records and state still stay.
dpkg -P sandfence >"$tmp/purge.log" 2>&1 || { cat "$tmp/purge.log"; fail "dpkg -P failed"; }
ls "$policy_dir"/*.textproto >/dev/null 2>&1 && fail "dpkg -P left policies in $policy_dir"
[ "$(cat "$marker" 2>/dev/null)" = "kept across dpkg -r" ] || fail "dpkg -P touched $state"
echo "PASS: installed, checked, removed (state kept), purged"
