#!/bin/bash
# A collector from Debian reads `sandfence run --events-out` without a
# plugin (issue 38): rsyslog's imfile tails the file and mmjsonparse parses
# each line into structured fields, which a template then prints by name.
# A line that rsyslog cannot parse fails the test.
#
# usage: rsyslog_collector_test.sh SANDFENCE_BIN
# Exit 77 (SKIPPED, with the reason) without root, rsyslogd or its modules.
set -u
bin=$1
skip() {
	echo "SKIPPED: $*"
	exit 77
}
[ "$(id -u)" -eq 0 ] || skip "needs root (sandfence run)"
rsyslogd=$(command -v rsyslogd || echo /usr/sbin/rsyslogd)
[ -x "$rsyslogd" ] || skip "no rsyslogd (Debian package rsyslog)"
moddir=/usr/lib/x86_64-linux-gnu/rsyslog
for m in imfile mmjsonparse; do
	[ -f "$moddir/$m.so" ] || skip "rsyslog has no $m module in $moddir"
done

dir=$(mktemp -d /tmp/sf-rsyslog-XXXXXX)
rpid=""
model=""
other=""
cleanup() {
	[ -z "$rpid" ] || kill "$rpid" 2>/dev/null
	[ -z "$model" ] || kill "$model" 2>/dev/null
	[ -z "$other" ] || kill "$other" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	for f in "$dir"/events.jsonl "$dir"/parsed.txt "$dir"/unparsed.txt \
		"$dir"/rsyslogd.log; do
		[ -f "$f" ] && { echo "--- $f"; cat "$f"; }
	done
	exit 1
}

# Two loopback listeners: the "model" (allowed) and another host (denied).
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

mkdir "$dir/work"
cat >"$dir/rsyslog.conf" <<CONF
global(workDirectory="$dir/work")
module(load="imfile" mode="polling" PollingInterval="1")
module(load="mmjsonparse")
template(name="fields" type="string"
         string="%\$!kind%|%\$!verdict%|%\$!destination!address%|%\$!destination!port%|%\$!rollout%|%\$!phase%\n")
input(type="imfile" File="$dir/events.jsonl" Tag="sandfence" ruleset="sf"
      freshStartTail="off")
ruleset(name="sf") {
  action(type="mmjsonparse" cookie="")
  if \$parsesuccess == "OK" then {
    action(type="omfile" file="$dir/parsed.txt" template="fields")
  } else {
    action(type="omfile" file="$dir/unparsed.txt")
  }
}
CONF
"$rsyslogd" -N1 -f "$dir/rsyslog.conf" >"$dir/rsyslogd.log" 2>&1 ||
	fail "rsyslogd rejects the configuration"

"$bin" run --network-access model_only --model "http://127.0.0.2:$mport/v1" \
	--events-out "$dir/events.jsonl" -- bash -c \
	"exec 3<>/dev/tcp/127.0.0.2/$mport; exec 4<>/dev/tcp/127.0.0.4/$oport" \
	>"$dir/run.out" 2>&1
lines=$(wc -l <"$dir/events.jsonl")
[ "$lines" -ge 4 ] || fail "expected at least 4 event lines, got $lines"

"$rsyslogd" -n -f "$dir/rsyslog.conf" -i "$dir/rsyslogd.pid" \
	>>"$dir/rsyslogd.log" 2>&1 &
rpid=$!
for _ in $(seq 200); do
	[ -f "$dir/parsed.txt" ] && [ "$(wc -l <"$dir/parsed.txt")" -ge "$lines" ] && break
	sleep 0.1
done
[ -f "$dir/parsed.txt" ] || fail "rsyslog parsed nothing"
[ ! -s "$dir/unparsed.txt" ] || fail "rsyslog could not parse some lines"
parsed=$(wc -l <"$dir/parsed.txt")
[ "$parsed" -eq "$lines" ] || fail "rsyslog parsed $parsed of $lines lines"
grep -qx "network|denied|127.0.0.4|$oport|run-[0-9]*|default" "$dir/parsed.txt" ||
	fail "no structured denied line for 127.0.0.4:$oport"
grep -qx "network|allowed|127.0.0.2|$mport|run-[0-9]*|default" "$dir/parsed.txt" ||
	fail "no structured allowed line for 127.0.0.2:$mport"
grep -q "^phase|applied|" "$dir/parsed.txt" || fail "no phase line"
echo "PASS: rsyslog (imfile + mmjsonparse) parsed all $lines lines into fields"
