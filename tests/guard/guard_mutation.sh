#!/bin/sh
# The process guard's mutation run (tests/README.md):
#
#   guard_mutation.sh SUITE EXPECT_FILE PROGRAM...
#
# For each PROGRAM, runs SUITE (a guard suite built against the mutant
# objects, bpf/guard/guard_mutant.h) with SF_TEST_NEUTRALIZE=PROGRAM, so that
# program allows everything, through the egress run's mutation_run.sh: it
# passes only if the suite fails, in every test EXPECT_FILE lists under
# "[PROGRAM]" (only those run). The host runs one program per ctest (the signal enforcer);
# the VM runs every lsm program in one boot. Exit 77 when every program was
# skipped (no root, a kernel without the enforcer), 1 if any row failed.
set -u
suite=$1
expect=$2
shift 2
here=$(dirname "$0")
run=$here/../egress/mutation_run.sh
bad=0
ran=0
for prog in "$@"; do
	tests=$(awk -v p="[$prog]" '
		/^\[/ { on = ($0 == p); next }
		on && NF && !/^#/ { print $1 }' "$expect")
	if [ -z "$tests" ]; then
		echo "FAIL: $expect lists no test for $prog"
		bad=1
		continue
	fi
	# Only the listed tests run (GTEST_FILTER): the proof is that each of
	# them fails, and the VM runs twenty programs under TCG.
	filter=$(echo $tests | tr ' ' ':')
	# shellcheck disable=SC2086 # one test name per word
	SF_TEST_NEUTRALIZE=$prog GTEST_FILTER=$filter "$run" "$prog" "$suite" $tests
	case $? in
	0) ran=1 ;;
	77) ;;
	*) ran=1; bad=1 ;;
	esac
done
if [ "$bad" = 0 ] && [ "$ran" = 0 ]; then
	exit 77
fi
exit "$bad"
