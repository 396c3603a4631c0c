#!/bin/bash
# journald gets every field of `--events-out journald` (issue 38): a
# systemd-journald of the test's own, in a private mount namespace (its
# sockets and volatile store on tmpfs: the host's journal, if any, is not
# touched), receives the entries of a model_only run that makes one
# allowed and one denied connect, and journalctl finds them by field.
#
# usage: journald_collector_test.sh SANDFENCE_BIN
# Exit 77 (SKIPPED, with the reason) without root, systemd-journald or
# journalctl.
set -u
bin=$1
skip() {
	echo "SKIPPED: $*"
	exit 77
}
[ "$(id -u)" -eq 0 ] || skip "needs root (sandfence run, mounts)"
journald=/lib/systemd/systemd-journald
[ -x "$journald" ] || skip "no $journald (Debian package systemd)"
command -v journalctl >/dev/null || skip "no journalctl"
command -v unshare >/dev/null || skip "no unshare (util-linux)"

if [ "${SF_JOURNALD_INSIDE:-}" != 1 ]; then
	exec unshare -m env SF_JOURNALD_INSIDE=1 bash "$0" "$@"
fi

# In the private mount namespace from here on.
mount --make-rprivate / || skip "cannot make the mount namespace private"
mkdir -p /run/systemd /run/log
mount -t tmpfs tmpfs /run/systemd || skip "cannot mount a tmpfs on /run/systemd"
mount -t tmpfs tmpfs /run/log || skip "cannot mount a tmpfs on /run/log"
[ ! -d /var/log/journal ] || mount -t tmpfs tmpfs /var/log/journal

dir=$(mktemp -d /tmp/sf-journald-XXXXXX)
jpid=""
model=""
other=""
cleanup() {
	for p in $jpid $model $other; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	for f in "$dir"/*.log "$dir"/*.json; do
		[ -f "$f" ] && { echo "--- $f"; cat "$f"; }
	done
	exit 1
}

"$journald" >"$dir/journald.log" 2>&1 &
jpid=$!
for _ in $(seq 100); do
	[ -S /run/systemd/journal/socket ] && break
	sleep 0.05
done
[ -S /run/systemd/journal/socket ] || fail "journald did not start"

listen() {
	/usr/bin/python3 -c '
import socket, sys
s = socket.socket(); s.bind((sys.argv[1], 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept(); c.close()
' "$1" >"$dir/port.$1" &
}
listen 127.0.0.2
model=$!
listen 127.0.0.4
other=$!
for _ in $(seq 100); do
	[ -s "$dir/port.127.0.0.2" ] && [ -s "$dir/port.127.0.0.4" ] && break
	sleep 0.05
done
mport=$(cat "$dir/port.127.0.0.2")
oport=$(cat "$dir/port.127.0.0.4")
if [ -z "$mport" ] || [ -z "$oport" ]; then
	fail "the listeners did not start"
fi

"$bin" run --network-access model_only --model "http://127.0.0.2:$mport/v1" \
	--events-out journald -- bash -c \
	"exec 3<>/dev/tcp/127.0.0.2/$mport; exec 4<>/dev/tcp/127.0.0.4/$oport" \
	>"$dir/run.log" 2>&1

found=""
for _ in $(seq 50); do
	journalctl -o json --no-pager SYSLOG_IDENTIFIER=sandfence \
		SANDFENCE_KIND=network SANDFENCE_VERDICT=denied >"$dir/denied.json" 2>&1
	if grep -q "\"SANDFENCE_DESTINATION_PORT\":\"$oport\"" "$dir/denied.json"; then
		found=1
		break
	fi
	sleep 0.1
done
[ -n "$found" ] || fail "journalctl found no denied entry for 127.0.0.4:$oport"
/usr/bin/python3 - "$dir/denied.json" "$oport" <<'PY' || fail "the denied entry lacks its fields"
import json, sys
entries = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
e = [x for x in entries if x.get("SANDFENCE_DESTINATION_PORT") == sys.argv[2]][0]
assert e["SANDFENCE_DESTINATION_ADDRESS"] == "127.0.0.4", e
assert e["SANDFENCE_PROTOCOL"] == "tcp", e
assert e["SANDFENCE_ROLLOUT"].startswith("run-"), e
assert e["PRIORITY"] == "4", e
msg = json.loads(e["MESSAGE"])
assert msg["kind"] == "network" and msg["verdict"] == "denied", msg
assert msg["destination"] == {"address": "127.0.0.4", "port": int(sys.argv[2])}, msg
PY
journalctl -o json --no-pager SYSLOG_IDENTIFIER=sandfence \
	SANDFENCE_KIND=network SANDFENCE_VERDICT=allowed >"$dir/allowed.json" 2>&1
grep -q "\"SANDFENCE_DESTINATION_PORT\":\"$mport\"" "$dir/allowed.json" ||
	fail "journalctl found no allowed entry for 127.0.0.2:$mport"
journalctl -o json --no-pager SANDFENCE_KIND=phase >"$dir/phase.json" 2>&1
grep -q '"SANDFENCE_VERDICT":"applied"' "$dir/phase.json" || fail "no phase entry"
echo "PASS: journald holds the run's entries with their fields (denied, allowed, phase)"
