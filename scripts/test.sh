#!/bin/sh
# Installs dependencies, builds, and runs the whole test suite with ctest,
# then the sanitizer build: each fuzz target for a short fixed time and the
# unit tests under ASan and UBSan (scripts/sanitize.sh; skipped with
# SANDFENCE_NO_SANITIZE=1). This is the README's test command and what CI
# runs.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --test
./scripts/build.sh --all
cd build
# Two at a time (the machine has two cores): every test keeps its BPF
# programs, cgroups, pins and ports to itself (tests/README.md, "The suite
# under ctest -j2"); each VM suite takes one slot (one vCPU, one host
# thread), and the benchmarks are RUN_SERIAL.
#
# The VM suite's kernel x suite table (tests/vm) comes last, whatever the
# result, so the log shows it even when every test passed.
rm -f vm-matrix.txt
status=0
ctest -j2 --output-on-failure --timeout 600 "$@" || status=$?
[ ! -f vm-matrix.txt ] || cat vm-matrix.txt
# What each failed test printed (its last 150 lines), kept for the very end
# of the log: a CI log shown by its tail must still say why a test failed.
rm -f failed-tests.txt failed-digest.txt
if [ "$status" != 0 ] && [ -f Testing/Temporary/LastTest.log ]; then
	awk '
		/^[0-9]+\/[0-9]+ Testing: / { n = 0; name = $3; inside = 1 }
		inside { lines[++n] = $0 }
		inside && (/^Test Failed\./ || /^\*\*\*/) { failed = 1 }
		inside && / time elapsed: / {
			if (failed) {
				print "==== output of the failed test " name " (last 150 lines) ===="
				for (i = (n > 150 ? n - 149 : 1); i <= n; i++) print lines[i]
			}
			inside = 0; failed = 0
		}' Testing/Temporary/LastTest.log > failed-tests.txt || true
	# Then, last of all, a digest a short tail still shows: each gtest
	# failure's first lines (where, expected and actual, and the message),
	# every line cut to 700 characters.
	# A test without a gtest failure (a script, a crash) shows its last lines.
	awk '
		function flush() {
			if (name != "" && shown == 0)
				for (i = (n > 8 ? n - 7 : 1); i <= n; i++)
					print "---- " name ": " substr(tail[i], 1, 700)
		}
		/^==== output of the failed test / { flush(); name = $7; shown = 0; n = 0; next }
		{ tail[++n] = $0 }
		/: Failure$/ && shown < 3 { print "---- " name ": " $0; left = 7; shown++; next }
		left > 0 { print "     " substr($0, 1, 700); left-- }
		END { flush() }' \
		failed-tests.txt > failed-digest.txt || true
fi
cd ..
if [ "${SANDFENCE_NO_SANITIZE:-0}" = 1 ]; then
	echo "test: SKIPPED the sanitizer build and fuzzing (SANDFENCE_NO_SANITIZE=1)"
else
	./scripts/sanitize.sh || status=$?
fi
[ ! -s build/failed-tests.txt ] || cat build/failed-tests.txt
if [ -s build/failed-digest.txt ]; then
	echo "==== why each failed test failed (its first failures) ===="
	cat build/failed-digest.txt
fi
exit "$status"
