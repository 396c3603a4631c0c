#!/bin/sh
# run_fuzzer.sh FUZZER SEEDS OUT SECONDS [MORE_SEEDS...]
#
# One bounded libFuzzer run, as ctest's fuzz_NAME test: starts from the
# committed SEEDS directories (read only; new inputs go to OUT/corpus, emptied first),
# runs for SECONDS on one core, and on any finding (crash, sanitizer
# report, leak, timeout, out of memory) fails and prints where the
# reproducer is and how to run it again. SANDFENCE_FUZZ_DICT names a
# libFuzzer dictionary to use.
set -u
if [ $# -lt 4 ]; then
	echo "usage: run_fuzzer.sh FUZZER SEEDS OUT SECONDS [MORE_SEEDS...]" >&2
	exit 2
fi
fuzzer=$1 seeds=$2 out=$3 seconds=$4
shift 4

rm -rf "$out/corpus" "$out/artifacts"
mkdir -p "$out/corpus" "$out/artifacts"
log=$out/fuzz.log
dict=${SANDFENCE_FUZZ_DICT:+-dict=$SANDFENCE_FUZZ_DICT}

# -timeout: one input running for 10 s is a finding (a hang), not slowness.
# shellcheck disable=SC2086
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 $dict \
	-print_final_stats=1 -artifact_prefix="$out/artifacts/" \
	"$out/corpus" "$seeds" "$@" >"$log" 2>&1
rc=$?

# The last status line and the final stats: executions, speed, coverage.
grep -E '^#[0-9]+.*(DONE|pulse|REDUCE|NEW)' "$log" | tail -n 1
grep -E '^(stat::|INFO: seed corpus)' "$log"

if [ "$rc" -eq 0 ]; then
	echo "fuzz: $(basename "$fuzzer"): no finding in ${seconds}s"
	exit 0
fi
echo "fuzz: $(basename "$fuzzer") FAILED (exit $rc); the report:"
# From the first line of the report on (sanitizer, libFuzzer or a failed
# check); the progress lines before it say nothing about the finding.
start=$(grep -n -m 1 -E '^==[0-9]+==|runtime error:|^ERROR: libFuzzer|^sandfence fuzz check failed|^ALARM:|^INFO: libFuzzer' "$log" | cut -d: -f1)
if [ -n "$start" ]; then
	tail -n +"$start" "$log" | head -n 120
else
	tail -n 40 "$log"
fi
found=0
for f in "$out"/artifacts/*; do
	[ -e "$f" ] || continue
	found=1
	echo "fuzz: reproducer: $f"
	echo "fuzz: run it again: $fuzzer $f"
done
[ "$found" -eq 1 ] || echo "fuzz: no reproducer was written; the log is $log"
exit 1
