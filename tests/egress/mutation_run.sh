#!/bin/sh
# One row of the egress mutation run (tests/README.md), for the inet hooks
# (egress_e2e_test) and the Unix socket hooks (unix_hooks_test):
#
#   mutation_run.sh HOOK SUITE EXPECTED_TEST...
#
# SUITE is a test suite built against programs in which HOOK allows
# everything. This passes only if the suite fails, and fails in every
# EXPECTED_TEST: the tests that prove HOOK on its own. It prints which tests
# failed, to keep tests/README.md's table honest. Exit 77 (skipped) without
# root or where the kernel cannot run the programs: the suite skips then,
# and a skipped suite proves nothing.
set -u
hook=$1
suite=$2
shift 2
if [ "$(id -u)" != 0 ]; then
	echo "SKIPPED: the mutation run needs root (BPF programs, cgroups)"
	exit 77
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The probes' own messages (stderr) would split gtest's failure blocks.
"$suite" --gtest_color=no >"$log" 2>/dev/null
status=$?
# A test's name (Suite.Test, or Prefix/Suite.Test/param for a table row,
# followed by ", where GetParam() = ..."), never gtest's "N tests, listed".
name='\([A-Za-z0-9_/]*\.[A-Za-z0-9_./]*\)[, ]'
failed=$(sed -n "s/^\[  FAILED  \] $name.*/\1/p" "$log" | sort -u)
passed=$(grep -c '^\[       OK \]' "$log")
skipped=$(sed -n "s/^\[  SKIPPED \] $name.*/\1/p" "$log" | sort -u)
echo "mutation $hook: suite exit $status; $passed passed, $(echo "$failed" | grep -c .) failed, $(echo "$skipped" | grep -c .) skipped"
for t in $failed; do
	echo "  failed: $t"
	# Each failure in one line: its message (the row's name, in the
	# table) and what happened instead.
	awk -v t="$t" '
		function flush() {
			if (blk) print "    - " trace last (actual ? ": " actual : "")
			blk = 0; last = ""; actual = ""; trace = ""
		}
		$0 == "[ RUN      ] " t { on = 1; next }
		!on { next }
		/^\[ / { flush(); exit }
		/: Failure$/ { flush(); blk = 1; next }
		!blk { next }
		/^  Actual: false \(/ {
			sub(/^  Actual: false \(/, ""); sub(/\)$/, ""); actual = $0; next
		}
		/^Expected: true$/ || /^Google Test trace:$/ { next }
		/^[^ ]*:[0-9]+: / { sub(/^[^ ]*:[0-9]+: /, ""); trace = "[" $0 "] "; next }
		$0 != "" { last = $0; next }
		{ flush() }' "$log"
done
# Nothing ran (no root in a user namespace, a kernel without the programs'
# needs): a skip, said as one.
if [ -z "$failed" ] && ! grep -q '^\[       OK \] ' "$log"; then
	echo "SKIPPED: the suite ran no test here:"
	grep -A1 'Skipped$' "$log" | head -4
	exit 77
fi
bad=0
if [ "$status" = 0 ] || [ -z "$failed" ]; then
	echo "FAIL: with $hook allowing everything the suite still passes:" \
		"no test proves $hook"
	bad=1
fi
for want in "$@"; do
	if ! echo "$failed" | grep -qx "$want"; then
		echo "FAIL: $want did not fail with $hook allowing everything"
		bad=1
	fi
done
[ "$bad" = 0 ] && echo "ok: $hook is proven by $(echo $failed)"
exit "$bad"
