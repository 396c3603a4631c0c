#!/bin/bash
# Prints the VM suite's kernel x suite table from the results that
# run-in-vm.sh --results wrote, one file per kernel (NAME.tsv), kernels in
# the order of kernels.conf: each cell is passed/skipped/failed tests of one
# test executable on one kernel, then each skip with its reason.
#
#   vm-matrix.sh --conf tests/vm/kernels.conf --results-dir DIR [--out FILE]
#
# --out FILE also writes the table there (scripts/test.sh prints it after
# ctest, so CI's log shows it even when every test passed).
#
# Exit status: 1 when a kernel that ran has a failed suite or a failed VM,
# else 0 (a kernel with no results file did not run: "not run").
set -euo pipefail

conf=""
dir=""
out=""
while [ $# -gt 0 ]; do
	case "$1" in
	--conf) conf=$2; shift 2 ;;
	--results-dir) dir=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	*) echo "vm-matrix: unknown argument: $1" >&2; exit 2 ;;
	esac
done
if [ -z "$conf" ] || [ -z "$dir" ]; then
	echo "vm-matrix: --conf and --results-dir are required" >&2
	exit 2
fi

kernels=$(awk '!/^#/ && NF >= 4 { print $1 }' "$conf")

table=$(awk -v kernels="$kernels" -v dir="$dir" '
	function pad(s, n) { return sprintf("%-" n "s", s) }
	BEGIN {
		FS = "\t"
		nk = split(kernels, name, "\n")
		for (k = 1; k <= nk; k++) {
			file = dir "/" name[k] ".tsv"
			while ((getline line < file) > 0) {
				ran[k] = 1
				n = split(line, f, "\t")
				if (f[1] == "kernel") { rel[k] = f[3]; secs[k] = f[4] }
				if (f[1] == "suite") {
					if (!(f[2] in seen)) { seen[f[2]] = 1; suites[++ns] = f[2] }
					cell[k, f[2]] = f[4] "/" f[5] "/" f[6] (f[3] != 0 ? " FAILED" : "")
					if (f[3] != 0) bad = 1
				}
				if (f[1] == "skip") {
					# Grouped by suite and reason: one line for the
					# 82 cases that skip for one missing kfunc.
					key = f[2] SUBSEP f[4]
					if (!((k, key) in nskip)) order[k, ++ngroups[k]] = key
					if (++nskip[k, key] <= 2)
						names[k, key] = names[k, key] (nskip[k, key] > 1 ? ", " : "") f[3]
				}
				if (f[1] == "vm") { vm[k] = f[2] ": " f[3]; if (f[2] == "failed") bad = 1 }
			}
			close(file)
		}
		w = 16
		for (i = 1; i <= ns; i++) if (length(suites[i]) + 2 > w) w = length(suites[i]) + 2
		cw = 22
		print "VM suite, kernel x suite: tests passed/skipped/failed"
		row = pad("kernel", w)
		for (k = 1; k <= nk; k++) row = row pad(name[k], cw)
		print row
		row = pad("release", w)
		for (k = 1; k <= nk; k++) row = row pad(ran[k] ? rel[k] : "not run", cw)
		print row
		for (i = 1; i <= ns; i++) {
			row = pad(suites[i], w)
			for (k = 1; k <= nk; k++)
				row = row pad(((k, suites[i]) in cell) ? cell[k, suites[i]] : "-", cw)
			print row
		}
		row = pad("seconds", w)
		for (k = 1; k <= nk; k++) row = row pad(ran[k] ? secs[k] : "-", cw)
		print row
		for (k = 1; k <= nk; k++)
			if (k in vm) print "VM on " name[k] " " vm[k]
		for (k = 1; k <= nk; k++) {
			if (!(k in ngroups)) continue
			printf "Skipped on %s (%s):\n", name[k], rel[k]
			for (g = 1; g <= ngroups[k]; g++) {
				key = order[k, g]
				split(key, part, SUBSEP)
				c = nskip[k, key]
				# (in parentheses: a bare > among printf arguments redirects)
				printf "  %s, %d %s (%s%s): %s\n", part[1], c, (c == 1 ? "test" : "tests"),
					names[k, key], (c > 2 ? ", ..." : ""), part[2]
			}
		}
		exit bad
	}') && status=0 || status=$?
printf '%s\n' "$table"
[ -z "$out" ] || printf '%s\n' "$table" >"$out"
exit "$status"
